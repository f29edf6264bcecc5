/* SPDX-License-Identifier: MIT */
/*
 * The userspace vsock driver (virtq/vsock_guest.h) alone, with the test
 * playing the device on the device side of its three queues: it reads
 * what the driver sends on tx and writes what it likes - true or not -
 * into the driver's rx and event buffers.
 */
#ifndef VSOCK_GUEST_FIXTURE_H
#define VSOCK_GUEST_FIXTURE_H

#include "vsock_fixture.h"

struct gfx {
	struct fx_vqs vq;
	struct vq_vsg *g;
	struct vq_vsg_config gc;        /* what vq_vsg_new got */
	unsigned kicks[3];
	uint32_t dev_fwd_cnt;           /* what the device says it consumed */
	uint32_t dev_buf_alloc;         /* what the device advertises */
};

static inline void gfx_kick(void *arg, unsigned q)
{
	struct gfx *x = arg;

	x->kicks[q]++;
}

/* The rings and a config the caller may change before gfx_start(). */
static inline void gfx_init(struct gfx *x, uint64_t features, uint16_t num)
{
	memset(x, 0, sizeof(*x));
	fx_rings(&x->vq, features | VQ_BIT(VQ_VSOCK_F_SEQPACKET), num ? num : 64);
	x->gc = (struct vq_vsg_config){ .cid = FX_CID, .kick = gfx_kick, .arg = x };
	fx_guest_queues(&x->vq, &x->gc);
	x->dev_buf_alloc = 1u << 20;
}

static inline void gfx_start(struct gfx *x)
{
	CHECK_EQ(vq_vsg_new(&x->gc, &x->g), 0);
	CHECK_EQ(vq_vsg_start(x->g), 0);
}

static inline void gfx_fini(struct gfx *x)
{
	vq_vsg_free(x->g);
	fx_rings_fini(&x->vq);
}

/* A device header: from the host's port to the guest's. */
static inline void gfx_hdr(struct gfx *x, struct vq_vsock_hdr *h, uint32_t host_port,
			   uint32_t guest_port, uint16_t type, uint16_t op, uint32_t len)
{
	memset(h, 0, sizeof(*h));
	h->src_cid = vq_le64(VQ_VSOCK_CID_HOST);
	h->dst_cid = vq_le64(FX_CID);
	h->src_port = vq_le32(host_port);
	h->dst_port = vq_le32(guest_port);
	h->type = vq_le16(type);
	h->op = vq_le16(op);
	h->len = vq_le32(len);
	h->buf_alloc = vq_le32(x->dev_buf_alloc);
	h->fwd_cnt = vq_le32(x->dev_fwd_cnt);
}

/* Copy n bytes into (out of) a chain's iovecs from byte off. */
static inline void gfx_iov_put(const struct vq_chain *ch, size_t off, const void *src,
			       size_t n)
{
	const uint8_t *s = src;

	for (unsigned i = ch->nout; i < ch->nout + ch->nin && n; i++) {
		size_t l = ch->iov[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		l -= off;
		if (l > n)
			l = n;
		memcpy((uint8_t *)ch->iov[i].iov_base + off, s, l);
		s += l;
		n -= l;
		off = 0;
	}
	CHECK_EQ(n, 0);
}

/* The device writes n bytes into the next buffer of queue q and says it
 * wrote used_len (which may lie about n, not about the buffer: the ring
 * refuses that).  0, or -1 if the driver posted no buffer. */
static inline int gfx_dev_write(struct gfx *x, unsigned q, const void *buf, uint32_t n,
				uint32_t used_len)
{
	struct iovec iov[8];
	struct vq_chain ch = { .iov = iov, .iov_max = 8 };
	int r = vq_dev_pop(x->vq.dq[q], &ch);

	CHECK(r >= 0);
	if (r == 0)
		return -1;
	CHECK(n <= ch.in_len);
	gfx_iov_put(&ch, 0, buf, n);
	CHECK(vq_dev_push(x->vq.dq[q], &ch, used_len) >= 0);
	return 0;
}

/* The device sends a packet: header and payload, used length exact. */
static inline void gfx_dev_send(struct gfx *x, const struct vq_vsock_hdr *h,
				const void *payload, uint32_t n)
{
	static uint8_t pkt[VQ_VSOCK_HDR_SIZE + VQ_VSOCK_MAX_PKT];

	CHECK(n <= VQ_VSOCK_MAX_PKT);
	memcpy(pkt, h, sizeof(*h));
	if (n)
		memcpy(pkt + sizeof(*h), payload, n);
	CHECK_EQ(gfx_dev_write(x, VQ_VSOCK_RXQ, pkt, sizeof(*h) + n,
			       (uint32_t)sizeof(*h) + n), 0);
}

/* The next packet the driver sent on tx: its payload length, or -1 if
 * none.  The header lands in *h, up to cap payload bytes in payload. */
static inline long gfx_dev_recv(struct gfx *x, struct vq_vsock_hdr *h, void *payload,
				uint32_t cap)
{
	static uint8_t pkt[VQ_VSOCK_HDR_SIZE + VQ_VSOCK_MAX_PKT];
	struct iovec iov[8];
	struct vq_chain ch = { .iov = iov, .iov_max = 8 };
	size_t at = 0;
	int r = vq_dev_pop(x->vq.dq[VQ_VSOCK_TXQ], &ch);

	CHECK(r >= 0);
	if (r == 0)
		return -1;
	CHECK(ch.out_len <= sizeof(pkt));
	CHECK(ch.out_len >= VQ_VSOCK_HDR_SIZE);
	for (unsigned i = 0; i < ch.nout; i++) {
		memcpy(pkt + at, iov[i].iov_base, iov[i].iov_len);
		at += iov[i].iov_len;
	}
	CHECK(vq_dev_push(x->vq.dq[VQ_VSOCK_TXQ], &ch, 0) >= 0);
	memcpy(h, pkt, sizeof(*h));
	CHECK_EQ(vq_le32(h->len), at - VQ_VSOCK_HDR_SIZE);
	if (payload)
		memcpy(payload, pkt + sizeof(*h), at - sizeof(*h) < cap ? at - sizeof(*h) : cap);
	return (long)(at - sizeof(*h));
}

/* The op of the next packet the driver sent, or -1. */
static inline int gfx_dev_recv_op(struct gfx *x)
{
	struct vq_vsock_hdr h;

	return gfx_dev_recv(x, &h, NULL, 0) < 0 ? -1 : vq_le16(h.op);
}

/* The guest connects to host port 1 with type; the device answers: the
 * connection, ESTABLISHED. */
static inline struct vq_vsg_conn *gfx_connected(struct gfx *x, uint16_t type)
{
	struct vq_vsg_conn *c;
	struct vq_vsock_hdr h;

	CHECK_EQ(vq_vsg_connect(x->g, 1, type, &c), 0);
	CHECK_EQ(gfx_dev_recv(x, &h, NULL, 0), 0);
	CHECK_EQ(vq_le16(h.op), VQ_VSOCK_OP_REQUEST);
	gfx_hdr(x, &h, 1, vq_vsg_local_port(c), type, VQ_VSOCK_OP_RESPONSE, 0);
	gfx_dev_send(x, &h, NULL, 0);
	CHECK(vq_vsg_poll(x->g) >= 1);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_ESTABLISHED);
	return c;
}

/* A started driver with the default config and a connection of type. */
static inline struct vq_vsg_conn *gfx_up(struct gfx *x, uint64_t features, uint16_t type)
{
	gfx_init(x, features, 64);
	gfx_start(x);
	return gfx_connected(x, type);
}

/* The device sends on c: op with flags and n payload bytes (hdr.len n). */
static inline void gfx_send_on(struct gfx *x, struct vq_vsg_conn *c, uint16_t type,
			       uint16_t op, uint32_t flags, const void *payload, uint32_t n)
{
	struct vq_vsock_hdr h;

	gfx_hdr(x, &h, vq_vsg_peer_port(c), vq_vsg_local_port(c), type, op, n);
	h.flags = vq_le32(flags);
	gfx_dev_send(x, &h, payload, n);
}

/* Every case of a program on a split ring, then on a packed one. */
static inline int gfx_main(uint64_t *features, void (*run_all)(void))
{
	fprintf(stderr, "== split\n");
	*features = 0;
	run_all();
	fprintf(stderr, "== packed\n");
	*features = VQ_BIT(VQ_F_RING_PACKED);
	run_all();
	return 0;
}

#endif
