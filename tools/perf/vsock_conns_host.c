// SPDX-License-Identifier: MIT
/*
 * virtq-perf vsock --conns N, the host program: N connections to the
 * guest (CONNECT through the backend in rx, accepted at HOST_PATH_PORT in
 * tx, or the socket pairs' host halves), non-blocking, in one epoll set.
 * In rx it sends each connection's share (vsock_conns.c's chunks) and
 * waits for the guest to close; in tx it reads each to its end (the
 * stalled ones once the others ended).  --busy-poll: epoll_wait without a
 * timeout through the window, then with one.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <virtq/runtime.h>

#include "vsock_run.h"

struct host_conns {
	struct vs_run *n;
	int *fd;
	int ep;
	uint64_t spin_end;
	uint8_t *scratch;       /* a sender's chunk (--buf-size) */
};

/* Told to stop with left connections not ended: -EPIPE, said. */
static int host_gave_up(struct host_conns *h, unsigned left)
{
	snprintf(h->n->host_err, sizeof(h->n->host_err),
		 "%u of %u connections had not ended when told to stop", left, h->n->nends);
	return -EPIPE;
}

/* Ready connections (up to max in ev), or -errno. */
static int host_wait(struct host_conns *h, struct epoll_event *ev, int max)
{
	int ms = 200, r;

	if (h->n->o.busy_poll_us) {
		uint64_t now = vq_rt_now_ns();

		if (!h->spin_end)
			h->spin_end = now + h->n->o.busy_poll_us * 1000;
		if (now < h->spin_end)
			ms = 0;
	}
	if (!ms)
		sched_yield();  /* as the guest's spin (vs_guest_idle) */
	r = epoll_wait(h->ep, ev, max, ms);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	if (r > 0 || ms)
		h->spin_end = 0;
	return r;
}

static int host_watch(struct host_conns *h, unsigned i, int op, uint32_t events)
{
	struct epoll_event e = { .events = events, .data.u32 = i };

	return epoll_ctl(h->ep, op, h->fd[i], &e) < 0 ? -errno : 0;
}

/* The guest accepts what the backend connects: accept N, non-blocking. */
static int host_accept(struct host_conns *h, unsigned i)
{
	struct vs_run *n = h->n;
	struct pollfd p = { .fd = n->host_lfd, .events = POLLIN };

	for (unsigned t = 0; t < 300 && !vs_stopped(n); t++) {
		int fd = accept4(n->host_lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd >= 0)
			return fd;
		if (errno != EAGAIN && errno != EINTR)
			break;
		poll(&p, 1, 100);
	}
	snprintf(n->host_err, sizeof(n->host_err), "accept of connection %u: %s", i,
		 vs_stopped(n) ? "the guest side gave up" : strerror(errno));
	return -1;
}

/* All N connections, non-blocking.  0 or -1 (host_err said). */
static int host_open(struct host_conns *h)
{
	struct vs_run *n = h->n;

	if (!n->o.unix_socket && !n->o.rx)
		fcntl(n->host_lfd, F_SETFL, fcntl(n->host_lfd, F_GETFL) | O_NONBLOCK);
	for (unsigned i = 0; i < n->nends; i++) {
		int fd = !n->o.unix_socket && !n->o.rx ? host_accept(h, i) :
			 vs_host_connect(n, i);

		if (fd < 0)
			return -1;
		h->fd[i] = fd;
		__atomic_store_n(&n->host_opened, i + 1, __ATOMIC_RELEASE);
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
			snprintf(n->host_err, sizeof(n->host_err), "fcntl: %s", strerror(errno));
			return -1;
		}
	}
	return 0;
}

static long host_put(void *ctx, unsigned i, const void *p, uint32_t len)
{
	struct host_conns *h = ctx;
	ssize_t r = send(h->fd[i], p, len, MSG_DONTWAIT | MSG_NOSIGNAL);

	if (r >= 0)
		return (long)r;
	return errno == EAGAIN || errno == EINTR ? 0 : -errno;
}

/* rx: connection i may take more: one chunk (so the ready ones take
 * turns: an unfair sender would make the device look unfair), or its
 * share went: our side shuts down, and we wait for the guest's close.
 * 1 when its share went, 0, -errno. */
static int host_send_one(struct host_conns *h, unsigned i, uint64_t deadline)
{
	struct vs_run *n = h->n;
	long w = vs_src_step(n, i, deadline, h->scratch, UINT32_MAX, host_put, h);

	/* the last chunk went: the next step says so */
	if (w > 0 && n->src[i].off == n->src[i].total)
		w = vs_src_step(n, i, deadline, h->scratch, UINT32_MAX, host_put, h);
	if (w < 0)
		return (int)w;
	if (!n->src[i].done)
		return 0;
	shutdown(h->fd[i], SHUT_WR);
	w = host_watch(h, i, EPOLL_CTL_MOD, EPOLLIN);
	return w < 0 ? (int)w : 1;
}

/* rx: a connection whose share went says EPOLLIN: the guest closed it
 * (0), or sent something it should not have. */
static int host_closed_one(struct host_conns *h, unsigned i)
{
	uint8_t b[64];
	ssize_t r = recv(h->fd[i], b, sizeof(b), MSG_DONTWAIT);

	if (r > 0 || (r < 0 && errno == EAGAIN))
		return 0;
	epoll_ctl(h->ep, EPOLL_CTL_DEL, h->fd[i], NULL);
	return 1;
}

static int host_send_all(struct host_conns *h)
{
	struct vs_run *n = h->n;
	struct epoll_event ev[64];
	unsigned closed = 0, i;
	uint64_t deadline;
	struct timespec tick = { 0, 20000 };

	/* the guest measured the idle connections first */
	while (!__atomic_load_n(&n->go, __ATOMIC_ACQUIRE) && !vs_stopped(n))
		nanosleep(&tick, NULL);
	deadline = n->o.seconds > 0 ? vq_rt_now_ns() + (uint64_t)(n->o.seconds * 1e9) : 0;
	for (i = 0; i < n->nends; i++)
		if (host_watch(h, i, EPOLL_CTL_ADD, EPOLLOUT) < 0)
			return -errno;
	while (closed < n->nends && !vs_stopped(n)) {
		int k = host_wait(h, ev, 64);

		if (k < 0)
			return k;
		for (int j = 0; j < k; j++) {
			int r;

			i = ev[j].data.u32;
			if (n->src[i].done)
				r = host_closed_one(h, i);
			else if ((r = host_send_one(h, i, deadline)) > 0)
				r = 0;
			if (r < 0)
				return r;
			closed += (unsigned)r;
		}
	}
	return vs_stopped(n) ? host_gave_up(h, n->nends - closed) : 0;
}

/* tx: read connection i until it has nothing (0), or to its end (1). */
static int host_recv_one(struct host_conns *h, unsigned i, uint8_t *buf)
{
	for (;;) {
		ssize_t r = recv(h->fd[i], buf, 65536, MSG_DONTWAIT);

		if (r > 0) {
			vs_flow_got(h->n, i, buf, (size_t)r);
			continue;
		}
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (r < 0)
			return -errno;
		vs_flow_end(h->n, i);
		epoll_ctl(h->ep, EPOLL_CTL_DEL, h->fd[i], NULL);
		return 1;
	}
}

/* The others ended: what waits on the stalled ones, then read them. */
static int host_resume(struct host_conns *h)
{
	struct vs_run *n = h->n;
	uint64_t held[VS_CONNS_MAX];

	for (unsigned i = 0; i < n->flows.stall; i++) {
		int q = 0;

		held[i] = ioctl(h->fd[i], FIONREAD, &q) == 0 ? (uint64_t)q : 0;
	}
	vs_flow_resume(n, held);
	for (unsigned i = 0; i < n->flows.stall; i++)
		if (host_watch(h, i, EPOLL_CTL_ADD, EPOLLIN) < 0)
			return -errno;
	return 0;
}

static int host_recv_all(struct host_conns *h)
{
	struct vs_run *n = h->n;
	struct vs_flows *fl = &n->flows;
	struct epoll_event ev[64];
	uint8_t *buf = malloc(65536);
	int r = 0;

	if (!buf)
		return -ENOMEM;
	for (unsigned i = fl->stall; i < fl->n && r == 0; i++)
		r = host_watch(h, i, EPOLL_CTL_ADD, EPOLLIN);
	while (r == 0 && fl->done < fl->n && !vs_stopped(n)) {
		int k = host_wait(h, ev, 64);

		for (int j = 0; j < k && r >= 0; j++)
			r = host_recv_one(h, ev[j].data.u32, buf);
		r = k < 0 ? k : r < 0 ? r : 0;
		if (r == 0 && fl->stall && !fl->resumed && fl->done == fl->n - fl->stall)
			r = host_resume(h);
	}
	n->t_last = fl->t_last;
	free(buf);
	return r < 0 ? r : vs_stopped(n) ? host_gave_up(h, fl->n - fl->done) : 0;
}

void *vs_conns_host(void *arg)
{
	struct vs_run *n = arg;
	struct host_conns h = { .n = n, .ep = epoll_create1(EPOLL_CLOEXEC) };
	unsigned i;
	int r = -ENOMEM;

	n->host_rc = -1;
	h.fd = malloc(n->nends * sizeof(*h.fd));
	h.scratch = malloc(n->o.buf_size);
	if (!h.fd || !h.scratch || h.ep < 0)
		goto out;
	for (i = 0; i < n->nends; i++)
		h.fd[i] = -1;
	if (host_open(&h) < 0)
		goto said;
	r = n->o.rx ? host_send_all(&h) : host_recv_all(&h);
	if (r == 0)
		n->host_rc = 0;
out:
	if (r < 0 && !n->host_err[0])
		snprintf(n->host_err, sizeof(n->host_err), "%s", strerror(-r));
said:
	for (i = 0; h.fd && i < n->nends; i++)
		if (h.fd[i] >= 0)
			close(h.fd[i]);
	free(h.fd);
	free(h.scratch);
	if (h.ep >= 0)
		close(h.ep);
	__atomic_store_n(&n->host_gone, 1, __ATOMIC_RELEASE);
	return NULL;
}
