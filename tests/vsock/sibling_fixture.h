/* SPDX-License-Identifier: MIT */
/*
 * Sibling guests: several vsock devices in one hub, each with our guest
 * driver on its rings (rx, tx, event), and no host side but what a case
 * attaches.  One thread runs them all (sx_round), or each its own.
 */
#ifndef SIBLING_FIXTURE_H
#define SIBLING_FIXTURE_H

#include "vsock_fixture.h"

#define SX_MAX 3

/* One guest and its device. */
struct sx_vm {
	struct fx_vqs vq;
	struct vq_vsock *dev;
	struct vq_vsg *g;
	uint64_t cid;
};

struct sx {
	struct vq_vsock_hub *hub;
	struct sx_vm vm[SX_MAX];
	unsigned n;
};

struct sx_opts {
	uint32_t dev_buf_alloc;
	uint32_t guest_buf_alloc;
	uint32_t pkt_truesize;          /* the guests count packets as Linux */
	uint64_t groups[SX_MAX];        /* 0: group bit 0 */
};

static inline int sx_no_host(void *arg, uint32_t port, uint16_t type)
{
	(void)arg;
	(void)port;
	(void)type;
	return -ECONNREFUSED;
}

/* Guest i has CID 3 + i. */
static inline void sx_vm_init(struct sx *x, unsigned i, const struct sx_opts *o)
{
	struct sx_vm *m = &x->vm[i];
	struct vq_vsock_config dc = {
		.guest_cid = 3 + i, .buf_alloc = o->dev_buf_alloc,
		.host_connect = sx_no_host,
	};
	struct vq_vsg_config gc = {
		.cid = 3 + i, .buf_alloc = o->guest_buf_alloc, .siblings = 1,
		.pkt_truesize = o->pkt_truesize,
	};
	uint64_t feat = fx_features | VQ_BIT(VQ_F_EVENT_IDX) |
			VQ_BIT(VQ_VSOCK_F_SEQPACKET);

	m->cid = 3 + i;
	fx_rings(&m->vq, feat, 256);
	CHECK_EQ(vq_vsock_new(&dc, &m->dev), 0);
	CHECK_EQ(vq_vsock_hub_join(x->hub, m->dev, o->groups[i] ? o->groups[i] : 1), 0);
	CHECK_EQ(vq_vsock_start(m->dev, m->vq.dq[0], m->vq.dq[1], m->vq.dq[2]), 0);
	fx_guest_queues(&m->vq, &gc);
	CHECK_EQ(vq_vsg_new(&gc, &m->g), 0);
	CHECK_EQ(vq_vsg_start(m->g), 0);
}

static inline void sx_init(struct sx *x, unsigned n, const struct sx_opts *o)
{
	memset(x, 0, sizeof(*x));
	CHECK_EQ(vq_vsock_hub_new(&x->hub), 0);
	x->n = n;
	for (unsigned i = 0; i < n; i++)
		sx_vm_init(x, i, o);
}

static inline void sx_vm_fini(struct sx_vm *m)
{
	vq_vsg_free(m->g);
	vq_vsock_free(m->dev);
	fx_rings_fini(&m->vq);
}

static inline void sx_fini(struct sx *x)
{
	for (unsigned i = 0; i < x->n; i++)
		sx_vm_fini(&x->vm[i]);
	vq_vsock_hub_free(x->hub);
}

/* One round of guest i's device and driver: how much happened. */
static inline int sx_vm_round(struct sx_vm *m)
{
	int n = fx_moved(vq_vsock_process_host(m->dev));

	if (vq_vsock_started(m->dev)) {
		n += fx_moved(vq_vsock_process_tx(m->dev, 256));
		n += fx_moved(vq_vsock_process_rx(m->dev, 256));
	}
	n += fx_moved(vq_vsg_poll(m->g));
	return n;
}

static inline int sx_round(struct sx *x)
{
	int n = 0;

	for (unsigned i = 0; i < x->n; i++)
		n += sx_vm_round(&x->vm[i]);
	return n;
}

/* sx_round as a fixture-neutral step (fx_settle_by, fx_read_check). */
static inline int sx_turn(void *x)
{
	return sx_round(x);
}

/* Rounds until nothing moves three times in a row. */
static inline void sx_settle(struct sx *x)
{
	fx_settle_by(sx_turn, x, 3);
}

/* Guest `from` connects to guest `to`'s port; `to` accepts: both ends. */
static inline void sx_connect(struct sx *x, unsigned from, unsigned to,
			      uint32_t port, uint16_t type,
			      struct vq_vsg_conn **a, struct vq_vsg_conn **b)
{
	CHECK_EQ(vq_vsg_listen(x->vm[to].g, port), 0);
	CHECK_EQ(vq_vsg_connect_cid(x->vm[from].g, x->vm[to].cid, port, type, a), 0);
	sx_settle(x);
	CHECK_EQ(vq_vsg_state(*a), VQ_VSG_ESTABLISHED);
	*b = vq_vsg_accept(x->vm[to].g, port);
	CHECK(*b);
	CHECK_EQ(vq_vsg_state(*b), VQ_VSG_ESTABLISHED);
	CHECK_EQ(vq_vsg_peer_cid(*a), x->vm[to].cid);
	CHECK_EQ(vq_vsg_peer_cid(*b), x->vm[from].cid);
	CHECK_EQ(vq_vsg_peer_port(*b), vq_vsg_local_port(*a));
}

#endif
