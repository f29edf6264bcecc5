// SPDX-License-Identifier: MIT
/*
 * The hub: the devices of one process whose guests may reach each other
 * (link.h).  A device joins with its guest's CID and its groups; the table
 * only grows (a freed device's entry stays, not live, and a new device of
 * that CID takes it again), so a lookup from any thread reads it without
 * a lock, and an entry's groups and window are atomics.
 */
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "link.h"

struct vq_vsock_hub {
	pthread_mutex_t mu;             /* joining */
	struct vs_member *m[VS_HUB_MAX];
	_Atomic unsigned n;
};

int vq_vsock_hub_new(struct vq_vsock_hub **out)
{
	struct vq_vsock_hub *h = calloc(1, sizeof(*h));

	*out = NULL;
	if (!h)
		return -ENOMEM;
	pthread_mutex_init(&h->mu, NULL);
	*out = h;
	return 0;
}

void vq_vsock_hub_free(struct vq_vsock_hub *h)
{
	if (!h)
		return;
	for (unsigned i = 0; i < atomic_load(&h->n); i++) {
		close(h->m[i]->efd);
		pthread_mutex_destroy(&h->m[i]->mu);
		free(h->m[i]);
	}
	pthread_mutex_destroy(&h->mu);
	free(h);
}

struct vs_member *vs_hub_find(struct vq_vsock_hub *h, uint64_t cid)
{
	unsigned n = atomic_load_explicit(&h->n, memory_order_acquire);

	for (unsigned i = 0; i < n; i++)
		if (h->m[i]->cid == cid)
			return h->m[i];
	return NULL;
}

/* A new entry for cid, published once whole. */
static struct vs_member *member_new(struct vq_vsock_hub *h, uint64_t cid)
{
	unsigned n = atomic_load(&h->n);
	struct vs_member *m;

	if (n == VS_HUB_MAX)
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->kind = VS_EP_INBOX;
	m->cid = cid;
	m->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (m->efd < 0) {
		free(m);
		return NULL;
	}
	pthread_mutex_init(&m->mu, NULL);
	h->m[n] = m;
	atomic_store_explicit(&h->n, n + 1, memory_order_release);
	return m;
}

int vq_vsock_hub_join(struct vq_vsock_hub *h, struct vq_vsock *v, uint64_t groups)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct vs_member *m;
	int r = 0;

	if (!h || !v)
		return -EINVAL;
	if (v->hub)
		return -EBUSY;
	pthread_mutex_lock(&h->mu);
	m = vs_hub_find(h, v->cfg.guest_cid);
	if (m && atomic_load(&m->live))
		r = -EEXIST;
	else if (!m && !(m = member_new(h, v->cfg.guest_cid)))
		r = atomic_load(&h->n) == VS_HUB_MAX ? -ENOSPC : -ENOMEM;
	if (r == 0) {
		ev.data.ptr = m;
		if (epoll_ctl(v->epfd, EPOLL_CTL_ADD, m->efd, &ev) < 0)
			r = -errno;
	}
	if (r == 0) {
		atomic_store_explicit(&m->groups, groups, memory_order_relaxed);
		atomic_store_explicit(&m->buf_alloc, v->cfg.buf_alloc, memory_order_relaxed);
		v->hub = h;
		v->me = m;
		atomic_store(&m->live, true);
	}
	pthread_mutex_unlock(&h->mu);
	return r;
}

void vs_member_post(struct vs_member *m, struct vs_end *e)
{
	bool wake = false;

	pthread_mutex_lock(&m->mu);
	if (atomic_load(&m->live) && !e->queued) {
		e->queued = true;
		e->next = NULL;
		vs_link_ref(e->link);
		if (m->tail) {
			m->tail->next = e;
		} else {
			m->head = e;
			wake = true;
		}
		m->tail = e;
	}
	pthread_mutex_unlock(&m->mu);
	if (wake) {
		uint64_t one = 1;
		/* full (2^64 - 2 posts unread) or not: the fd is readable */
		ssize_t w = write(m->efd, &one, sizeof(one));

		(void)w;
	}
}

struct vs_end *vs_member_pop(struct vs_member *m)
{
	struct vs_end *e;

	pthread_mutex_lock(&m->mu);
	e = m->head;
	if (e) {
		m->head = e->next;
		if (!m->head)
			m->tail = NULL;
		e->queued = false;
		e->next = NULL;
	}
	pthread_mutex_unlock(&m->mu);
	return e;
}

void vs_hub_leave(struct vq_vsock *v)
{
	struct vs_member *m = v->me;
	struct vs_end *e;

	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	atomic_store(&m->live, false);
	pthread_mutex_unlock(&m->mu);
	/* nothing is posted from here on: drop what waits */
	while ((e = vs_member_pop(m)))
		vs_link_unref(e->link);
	v->me = NULL;
	v->hub = NULL;
}
