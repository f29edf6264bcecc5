// SPDX-License-Identifier: MIT
/*
 * Other fds on the device loop (a TAP, host sockets, an epoll set).  Each
 * is watched level-triggered in the loop's epoll set and, once epoll says
 * it is ready, gets a turn every round after the queues' until a turn
 * leaves budget over (drained).  A paused fd leaves the epoll set, so not
 * even a hang-up calls it.  A removed one leaves the set at once and is
 * freed when the round ends, so any callback may remove any fd, its own
 * included, while the round still holds pointers to it.
 */
#include <errno.h>
#include <stdlib.h>

#include "runtime_internal.h"

/* Level-triggered readiness only: the loop keeps no state epoll does not
 * give back, so edge-triggered or one-shot watching would lose an fd. */
#define FD_EVENTS (EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLRDHUP)

/* Move h's epoll registration from h->events to events. */
static int fd_watch(struct vq_rt_fd *h, uint32_t events)
{
	struct vq_rt_loop *l = h->loop;
	struct epoll_event ev = { .events = events, .data.ptr = h };
	int op;

	if (h->events == events)
		return 0;
	op = !h->events ? EPOLL_CTL_ADD : !events ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
	if (epoll_ctl(l->epfd, op, h->fd, &ev) < 0)
		return -errno;
	if (!h->events)
		l->nwatched++;
	if (!events) {
		l->nwatched--;
		if (h->ready) {
			h->ready = false;
			l->nready--;
		}
	}
	h->events = events;
	return 0;
}

int vq_rt_loop_add_fd(struct vq_rt_loop *l, int fd, uint32_t events,
		      vq_rt_fd_fn cb, void *arg, struct vq_rt_fd **out)
{
	struct vq_rt_fd *h;
	int err;

	if (out)
		*out = NULL;
	if (!cb || fd < 0 || (events & ~(uint32_t)FD_EVENTS))
		return -EINVAL;
	if (l->nfds == l->fds_cap) {
		unsigned cap = l->fds_cap ? 2 * l->fds_cap : 4;
		struct vq_rt_fd **a = realloc(l->fds, cap * sizeof(*a));

		if (!a)
			return -ENOMEM;
		l->fds = a;
		l->fds_cap = cap;
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->kind = RT_FD;
	h->loop = l;
	h->fd = fd;
	h->fn = cb;
	h->arg = arg;
	h->budget = rt_budget((struct vq_rt_budget){ 0, 0 });
	err = fd_watch(h, events);
	if (err < 0) {
		free(h);
		return err;
	}
	l->fds[l->nfds++] = h;
	if (out)
		*out = h;
	return 0;
}

int vq_rt_fd_set_events(struct vq_rt_fd *h, uint32_t events)
{
	if (h->removed || (events & ~(uint32_t)FD_EVENTS))
		return -EINVAL;
	return fd_watch(h, events);
}

uint32_t vq_rt_fd_events(const struct vq_rt_fd *h)
{
	return h->events;
}

void vq_rt_fd_remove(struct vq_rt_fd *h)
{
	struct vq_rt_loop *l;

	if (!h || h->removed)
		return;
	l = h->loop;
	/* Out of the set whatever epoll says (an fd closed too early is
	 * out already): the counts must not wait on it. */
	if (fd_watch(h, 0) < 0) {
		l->nwatched--;
		if (h->ready)
			l->nready--;
		h->ready = false;
		h->events = 0;
	}
	h->removed = true;
	l->fds_removed = true;
	if (l->flag_fd == h)
		l->flag_fd = NULL;
}

void rt_fd_flagged(struct vq_rt_fd *h, const int *flag)
{
	h->loop->flag_fd = h;
	h->loop->flag = flag;
}

/* Free the removed fds, keeping the others' order. */
static void fds_reap(struct vq_rt_loop *l)
{
	unsigned i, j = 0;

	if (!l->fds_removed)
		return;
	for (i = 0; i < l->nfds; i++) {
		if (l->fds[i]->removed)
			free(l->fds[i]);
		else
			l->fds[j++] = l->fds[i];
	}
	l->nfds = j;
	l->fds_removed = false;
	if (l->fd_rr >= j)
		l->fd_rr = 0;
}

int rt_fds_round(struct vq_rt_loop *l)
{
	/* The fds there were when the round began: a callback may add some
	 * (the array may move, so it is read afresh) but not free any. */
	unsigned k, n = l->nfds, turns = 0;
	int done = 0;

	for (k = 0; k < n && l->nready; k++) {
		struct vq_rt_fd *h = l->fds[(l->fd_rr + k) % n];
		uint64_t bytes = 0;
		int r;

		if (!h->ready)
			continue;
		r = h->fn(h, h->arg, h->revents, &h->budget, &bytes);
		if (r < 0)
			return r;
		done += r;
		turns++;
		/* Budget left over: drained, epoll says when there is more.
		 * (A callback that paused or removed its fd ended its turns
		 * itself.) */
		if (h->ready && !vq_rt_budget_spent(&h->budget, (unsigned)r, bytes)) {
			h->ready = false;
			l->nready--;
		}
	}
	/* the next round with turns starts one fd later */
	if (turns)
		l->fd_rr = (l->fd_rr + 1) % n;
	fds_reap(l);
	return done;
}

void rt_fds_free(struct vq_rt_loop *l)
{
	unsigned i;

	for (i = 0; i < l->nfds; i++)
		free(l->fds[i]);
	free(l->fds);
	l->fds = NULL;
	l->nfds = l->fds_cap = 0;
}
