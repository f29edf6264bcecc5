/* SPDX-License-Identifier: MIT */
/*
 * The vsock device between our guest driver (three ring pairs: rx, tx, event)
 * and host sockets that are socketpairs the test holds the other end of.
 */
#ifndef VSOCK_FIXTURE_H
#define VSOCK_FIXTURE_H

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <virtq/vsock.h>

#include "ring_pair.h"
#include <virtq/guest/vsock.h>

#define FX_CID 3u
#define FX_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define FX_MAX_LISTEN 8
#define FX_MAX_HOST 256

/* The three queues (rx, tx, event) in one guest memory (the pair's, which
 * holds the rx ring), both sides of each, and their ring areas. */
struct fx_vqs {
	struct ring_pair p;
	struct vq_drv *drv[3];
	struct vq_dev *dq[3];
	struct vq_ring_addr ring[3];
};

struct fx {
	struct fx_vqs vq;
	struct vq_vsock *dev;
	struct vq_vsg *g;
	/* host side: ports that "listen", and the test's ends of the
	 * sockets the device got for them */
	uint32_t listen[FX_MAX_LISTEN];
	unsigned nlisten;
	int host[FX_MAX_HOST];
	uint32_t host_port[FX_MAX_HOST];
	unsigned nhost;
	unsigned notifies[3];
	int host_sndbuf;                /* SO_SNDBUF of the device's end, 0: default */
	/* a port the host's policy refuses both ways (deny set) */
	bool deny;
	uint32_t deny_port;
};

static uint64_t fx_features = 0;        /* extra ring features (packed) */

static inline int fx_set_nonblock(int fd)
{
	return fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static inline int fx_host_request(void *arg, uint32_t port, uint16_t type)
{
	struct fx *f = arg;

	(void)type;
	return f->deny && port == f->deny_port ? -EACCES : 0;
}

static inline int fx_host_connect(void *arg, uint32_t port, uint16_t type)
{
	struct fx *f = arg;
	unsigned i;
	int sv[2];

	if (f->deny && port == f->deny_port)
		return -EACCES;
	for (i = 0; i < f->nlisten; i++)
		if (f->listen[i] == port)
			break;
	if (i == f->nlisten || f->nhost >= FX_MAX_HOST)
		return -ECONNREFUSED;
	CHECK_EQ(socketpair(AF_UNIX, (type == VQ_VSOCK_TYPE_SEQPACKET ?
				       SOCK_SEQPACKET : SOCK_STREAM) | SOCK_CLOEXEC, 0, sv), 0);
	fx_set_nonblock(sv[0]);
	fx_set_nonblock(sv[1]);
	if (f->host_sndbuf)
		CHECK_EQ(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &f->host_sndbuf,
				    sizeof(f->host_sndbuf)), 0);
	f->host[f->nhost] = sv[1];
	f->host_port[f->nhost] = port;
	f->nhost++;
	return sv[0];
}

static inline void fx_notify(void *arg, unsigned q)
{
	struct fx *f = arg;

	f->notifies[q]++;
}

struct fx_opts {
	uint32_t dev_buf_alloc;
	uint32_t guest_buf_alloc;
	uint32_t rx_buf_size;
	uint32_t max_conns;
	uint32_t used_batch;
	uint32_t tx_pkt_max;
	uint64_t msg_budget;
	uint16_t num;
	int host_sndbuf;                /* SO_SNDBUF of the device's host ends */
	uint32_t guest_pkt_truesize;    /* the guest counts packets as Linux does */
	bool no_ev;
	bool no_seqpacket;              /* do not negotiate SEQPACKET */
};

/* Both sides of q's three queues, num entries each, in a new pair. */
static inline void fx_rings(struct fx_vqs *q, uint64_t feat, uint16_t num)
{
	struct ring_pair *p = &q->p;
	int packed = !!(feat & VQ_BIT(VQ_F_RING_PACKED));

	pair_init(p, feat, num, 1, 1);
	q->drv[0] = p->drv;
	q->dq[0] = p->dev;
	q->ring[0] = p->ring;
	for (unsigned i = 1; i < 3; i++) {
		uint64_t off[3], size = vq_ring_layout(p->features, num, off);
		uint64_t gpa = pair_alloc(p, size);
		struct vq_ring_addr ra = {
			pair_hva(p, gpa + off[0]), pair_hva(p, gpa + off[1]),
			pair_hva(p, gpa + off[2]),
		};
		struct vq_drv_config dc = { .features = p->features,
					    .num = num, .ring = ra };
		struct vq_dev_config vc = { .features = p->features, .num = num,
			.ring = ra, .mem = p->mem,
			.avail_idx = packed ? 0x8000 : 0,
			.used_idx = packed ? 0x8000 : 0 };

		CHECK(size);
		q->ring[i] = ra;
		CHECK_EQ(vq_drv_new(&dc, &q->drv[i]), 0);
		CHECK_EQ(vq_dev_new(&vc, &q->dq[i]), 0);
	}
}

static inline void fx_rings_fini(struct fx_vqs *q)
{
	for (unsigned i = 1; i < 3; i++) {
		vq_drv_free(q->drv[i]);
		vq_dev_free(q->dq[i]);
	}
	pair_fini(&q->p);
}

/* The guest driver's queues, and its buffer areas out of the pair's
 * memory. */
static inline void fx_guest_queues(struct fx_vqs *q, struct vq_vsg_config *gc)
{
	gc->rx = q->drv[0];
	gc->tx = q->drv[1];
	gc->ev = q->drv[2];
	for (unsigned i = 0; i < 3; i++) {
		struct vq_vsg_area *a = i == 0 ? &gc->rx_area : i == 1 ? &gc->tx_area
						 : &gc->ev_area;
		uint64_t sz = i == 0 ? 24ull << 20 : i == 1 ? 17ull << 20 : 4096;

		a->gpa = pair_alloc(&q->p, sz);
		a->hva = pair_hva(&q->p, a->gpa);
		a->size = sz;
	}
}

static inline void fx_init(struct fx *f, const struct fx_opts *o)
{
	struct vq_vsock_config dc = {
		.guest_cid = FX_CID, .buf_alloc = o->dev_buf_alloc,
		.max_conns = o->max_conns, .used_batch = o->used_batch,
		.msg_budget = o->msg_budget,
		.host_connect = fx_host_connect, .host_request = fx_host_request,
		.notify = fx_notify, .arg = f,
	};
	struct vq_vsg_config gc = {
		.cid = FX_CID, .rx_buf_size = o->rx_buf_size,
		.buf_alloc = o->guest_buf_alloc, .tx_pkt_max = o->tx_pkt_max,
		.pkt_truesize = o->guest_pkt_truesize,
	};
	uint16_t num = o->num ? o->num : 128;
	uint64_t feat = fx_features | VQ_BIT(VQ_F_EVENT_IDX) |
			(o->no_seqpacket ? 0 : VQ_BIT(VQ_VSOCK_F_SEQPACKET));

	memset(f, 0, sizeof(*f));
	f->host_sndbuf = o->host_sndbuf;
	fx_rings(&f->vq, feat, num);
	CHECK_EQ(vq_vsock_new(&dc, &f->dev), 0);
	CHECK_EQ(vq_vsock_start(f->dev, f->vq.dq[0], f->vq.dq[1],
				o->no_ev ? NULL : f->vq.dq[2]), 0);
	fx_guest_queues(&f->vq, &gc);
	if (o->no_ev)
		gc.ev = NULL;
	CHECK_EQ(vq_vsg_new(&gc, &f->g), 0);
	CHECK_EQ(vq_vsg_start(f->g), 0);
}

static inline void fx_fini(struct fx *f)
{
	unsigned i;

	vq_vsg_free(f->g);
	vq_vsock_free(f->dev);
	for (i = 0; i < f->nhost; i++)
		if (f->host[i] >= 0)
			close(f->host[i]);
	fx_rings_fini(&f->vq);
}

/* A step of a round, which must not fail: how much it did. */
static inline int fx_moved(int r)
{
	CHECK(r >= 0);
	return r;
}

/* One round of everything; returns how much happened. */
static inline int fx_round(struct fx *f)
{
	int n = fx_moved(vq_vsock_process_host(f->dev));

	n += fx_moved(vq_vsock_process_tx(f->dev, 256));
	n += fx_moved(vq_vsock_process_rx(f->dev, 256));
	n += fx_moved(vq_vsock_process_event(f->dev));
	n += fx_moved(vq_vsg_poll(f->g));
	return n;
}

/* fx_round as a fixture-neutral step (fx_settle_by, fx_read_check). */
static inline int fx_turn(void *f)
{
	return fx_round(f);
}

/* Rounds of a fixture, turn(arg) saying how much each moved, until
 * nothing moves quiet times in a row. */
static inline void fx_settle_by(int (*turn)(void *), void *arg, int quiet)
{
	int idle = 0, rounds = 0;

	while (idle < quiet) {
		idle = turn(arg) ? 0 : idle + 1;
		CHECK(++rounds < 100000);
	}
}

/* Rounds until nothing moves (twice in a row). */
static inline void fx_settle(struct fx *f)
{
	fx_settle_by(fx_turn, f, 2);
}

/* The guest connects to the host's port: the connection, CONNECTING. */
static inline struct vq_vsg_conn *fx_connect(struct fx *f, uint32_t port, uint16_t type)
{
	struct vq_vsg_conn *c;

	CHECK_EQ(vq_vsg_connect(f->g, port, type, &c), 0);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_CONNECTING);
	return c;
}

static inline void fx_listen(struct fx *f, uint32_t port)
{
	f->listen[f->nlisten++] = port;
}

/* The deterministic stream used by transfer tests. */
static inline uint8_t fx_byte(uint64_t seed, uint64_t off)
{
	uint64_t x = (off >> 3) * 0x9E3779B97F4A7C15ull + seed;

	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 32;
	return (uint8_t)(x >> ((off & 7) * 8));
}

/* Read c until want bytes of stream seed have come, each checked, the
 * fixture turned a round (turn(arg)) after every read.  A read that finds
 * nothing waits a millisecond: a device holding data for the guest's
 * packet count asks for its credit again only on a clock. */
static inline void fx_read_check(struct vq_vsg_conn *c, uint64_t seed, uint64_t want,
				 int (*turn)(void *), void *arg)
{
	static uint8_t buf[65536];
	uint64_t got = 0;
	int rounds = 0;

	while (got < want) {
		uint32_t r = vq_vsg_read(c, buf, sizeof(buf));

		for (uint32_t i = 0; i < r; i++)
			CHECK_EQ(buf[i], fx_byte(seed, got + i));
		got += r;
		turn(arg);
		if (!r)
			usleep(1000);
		CHECK(++rounds < 20000);
	}
	CHECK_EQ(got, want);
}

/* Host fd for the n-th connection the device opened. */
static inline int fx_host(struct fx *f, unsigned n)
{
	CHECK(n < f->nhost);
	return f->host[n];
}

#endif
