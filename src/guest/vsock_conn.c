// SPDX-License-Identifier: MIT
/*
 * The userspace vsock driver: connections.  Stream and seqpacket, credit
 * flow control as the Linux driver does it (5.10.6.3): it sends no more
 * than the device's credit, and a CREDIT_UPDATE when the device's view of
 * our free space falls under half and the news is worth a packet.
 */
#include <stdlib.h>
#include <string.h>

#include "vsock_guest_internal.h"

static struct vq_vsg_conn **bucket(struct vq_vsg *g, uint32_t l, uint32_t p)
{
	uint64_t h = ((uint64_t)l << 32 | p) * 0x9E3779B97F4A7C15ull;

	return &g->hash[(h >> 32) % VSG_HASH];
}

struct vq_vsg_conn *vsg_conn_find(struct vq_vsg *g, uint64_t cid, uint32_t l,
				  uint32_t p)
{
	struct vq_vsg_conn *c;

	for (c = *bucket(g, l, p); c; c = c->hnext)
		if (c->lport == l && c->pport == p && c->pcid == cid && !c->released)
			return c;
	return NULL;
}

struct vq_vsg_conn *vsg_conn_alloc(struct vq_vsg *g, uint64_t cid, uint32_t l,
				   uint32_t p, uint16_t type)
{
	struct vq_vsg_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->type = type;
	c->rbuf = malloc(g->cfg.buf_alloc);
	c->seg = malloc(VSG_SEGS * sizeof(*c->seg));
	if (type == VQ_VSOCK_TYPE_SEQPACKET)
		c->msg_end = malloc(VSG_MSGS * sizeof(*c->msg_end));
	if (g->cfg.pkt_truesize) {
		/* one more than the count lets through, for the one it refuses */
		c->pkt_cap = g->cfg.buf_alloc / g->cfg.pkt_truesize + 1;
		c->pkt_end = malloc(c->pkt_cap * sizeof(*c->pkt_end));
	}
	if (!c->rbuf || !c->seg || (type == VQ_VSOCK_TYPE_SEQPACKET && !c->msg_end) ||
	    (g->cfg.pkt_truesize && !c->pkt_end)) {
		free(c->rbuf);
		free(c->seg);
		free(c->msg_end);
		free(c->pkt_end);
		free(c);
		return NULL;
	}
	c->g = g;
	c->pcid = cid;
	c->lport = l;
	c->pport = p;
	c->next = g->conns;
	g->conns = c;
	c->hnext = *bucket(g, l, p);
	*bucket(g, l, p) = c;
	return c;
}

/* c's oldest segment is done with: a held slot goes back to the device
 * (kicked at the caller's flush; not while the driver is freed).  True if
 * a slot was posted. */
static bool seg_done(struct vq_vsg_conn *c)
{
	const struct vsg_seg *s = &c->seg[c->seg_head];
	struct vq_vsg *g = c->g;
	bool post = s->slot != VSG_SEG_RBUF;

	if (post) {
		c->nheld--;
		g->held--;
		post = !g->freeing;
		/* (a failure broke the driver: every later call says so) */
		if (post)
			vsg_post_rx(g, s->slot);
	}
	c->seg_head = (c->seg_head + 1) % VSG_SEGS;
	c->nseg--;
	return post;
}

/* Give back the slots c holds (its unread bytes are dropped). */
static void conn_drop_held(struct vq_vsg_conn *c)
{
	bool posted = false;

	while (c->nseg)
		posted |= seg_done(c);
	c->rhead = c->rbuf_len = c->rlen = 0;
	if (posted)
		vsg_flush_q(c->g, VQ_VSOCK_RXQ);
}

void vsg_conn_unlink(struct vq_vsg *g, struct vq_vsg_conn *c)
{
	struct vq_vsg_conn **p = &g->conns;

	conn_drop_held(c);

	while (*p && *p != c)
		p = &(*p)->next;
	if (*p)
		*p = c->next;
	p = bucket(g, c->lport, c->pport);
	while (*p && *p != c)
		p = &(*p)->hnext;
	if (*p)
		*p = c->hnext;
	free(c->rbuf);
	free(c->seg);
	free(c->msg_end);
	free(c->pkt_end);
	free(c);
}

int vsg_conn_send(struct vq_vsg_conn *c, uint16_t op, uint32_t flags,
		  const void *payload, uint32_t len)
{
	struct vq_vsock_hdr h;
	int r;

	vq_vsg_hdr(c->g, &h, c->lport, c->pport, op, len);
	h.dst_cid = vq_le64(c->pcid);
	h.type = vq_le16(c->type);
	h.flags = vq_le32(flags);
	h.fwd_cnt = vq_le32(c->fwd_cnt);
	r = vsg_send_parts(c->g, &h, sizeof(h), payload, len);
	if (r == 0) {
		c->adv_fwd_cnt = c->fwd_cnt;
		c->pend &= ~PEND_CREDIT;
		if (op == VQ_VSOCK_OP_CREDIT_UPDATE)
			c->g->st.credit_updates_sent++;
	}
	return r;
}

void vsg_close_rst(struct vq_vsg_conn *c)
{
	c->state = VQ_VSG_CLOSED;
	c->pend = PEND_RST;
}

/* Owed control packets: send what TX slots allow. */
void vsg_send_pending(struct vq_vsg *g)
{
	struct vq_vsg_conn *c, *n;

	for (c = g->conns; c; c = n) {
		n = c->next;
		if ((c->pend & PEND_RESPONSE) &&
		    vsg_conn_send(c, VQ_VSOCK_OP_RESPONSE, 0, NULL, 0) == 0)
			c->pend &= ~PEND_RESPONSE;
		if ((c->pend & PEND_CREDIT) &&
		    vsg_conn_send(c, VQ_VSOCK_OP_CREDIT_UPDATE, 0, NULL, 0) == 0)
			c->pend &= ~PEND_CREDIT;
		if ((c->pend & PEND_RST) &&
		    vsg_conn_send(c, VQ_VSOCK_OP_RST, 0, NULL, 0) == 0) {
			c->pend &= ~PEND_RST;
			if (c->released)
				vsg_conn_unlink(g, c);
		}
	}
}

int vq_vsg_connect(struct vq_vsg *g, uint32_t port, uint16_t type,
		   struct vq_vsg_conn **out)
{
	return vq_vsg_connect_cid(g, VQ_VSOCK_CID_HOST, port, type, out);
}

int vq_vsg_connect_cid(struct vq_vsg *g, uint64_t cid, uint32_t port,
		       uint16_t type, struct vq_vsg_conn **out)
{
	struct vq_vsg_conn *c;
	int r;

	*out = NULL;
	if (g->err)
		return g->err;
	if ((type != VQ_VSOCK_TYPE_STREAM && type != VQ_VSOCK_TYPE_SEQPACKET) ||
	    cid < VQ_VSOCK_CID_HOST || cid == g->cfg.cid || cid > 0xffffffffull)
		return -EINVAL;
	c = vsg_conn_alloc(g, cid, g->next_port++, port, type);
	if (!c)
		return -ENOMEM;
	c->state = VQ_VSG_CONNECTING;
	r = vsg_conn_send(c, VQ_VSOCK_OP_REQUEST, 0, NULL, 0);
	if (r == 0)
		r = vsg_flush_q(g, VQ_VSOCK_TXQ);
	if (r < 0) {
		vsg_conn_unlink(g, c);
		return r;
	}
	*out = c;
	return 0;
}

int vq_vsg_listen(struct vq_vsg *g, uint32_t port)
{
	if (g->nlisten >= VSG_LISTEN_MAX)
		return -ENOSPC;
	g->listen[g->nlisten++] = port;
	return 0;
}

struct vq_vsg_conn *vq_vsg_accept(struct vq_vsg *g, uint32_t port)
{
	struct vq_vsg_conn *c;

	for (c = g->conns; c; c = c->next) {
		if (c->to_accept && c->lport == port && !(c->pend & PEND_RESPONSE)) {
			c->to_accept = false;
			return c;
		}
	}
	return NULL;
}

enum vq_vsg_state vq_vsg_state(const struct vq_vsg_conn *c)
{
	return c->state;
}

uint32_t vq_vsg_credit(const struct vq_vsg_conn *c)
{
	uint32_t inflight = c->tx_cnt - c->peer_fwd_cnt;

	/* A fwd_cnt ahead of what we sent gives no credit, not a lot. */
	return inflight >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - inflight;
}

static bool may_send(const struct vq_vsg_conn *c)
{
	return c->state != VQ_VSG_CLOSED && !(c->local_shut & VQ_VSOCK_SHUTDOWN_SEND) &&
	       !(c->peer_shut & VQ_VSOCK_SHUTDOWN_RCV);
}

long vq_vsg_write(struct vq_vsg_conn *c, const void *buf, uint32_t len)
{
	const uint8_t *p = buf;
	uint32_t done = 0;
	int r;

	if (c->g->err)
		return c->g->err;
	if (!may_send(c))
		return -EPIPE;
	if (c->state != VQ_VSG_ESTABLISHED)
		return 0;
	while (done < len) {
		uint32_t k = len - done, cr = vq_vsg_credit(c);

		if (k > cr)
			k = cr;
		if (k > c->g->cfg.tx_pkt_max)
			k = c->g->cfg.tx_pkt_max;
		if (!k || vsg_conn_send(c, VQ_VSOCK_OP_RW, 0, p + done, k) < 0)
			break;
		c->tx_cnt += k;
		done += k;
	}
	r = vsg_flush_q(c->g, VQ_VSOCK_TXQ);
	return r < 0 ? (long)r : (long)done;
}

long vq_vsg_write_msg(struct vq_vsg_conn *c, const void *buf, uint32_t len)
{
	struct vq_vsg *g = c->g;
	uint32_t max = g->cfg.tx_pkt_max, done = 0, nfrag;
	int r;

	if (g->err)
		return g->err;
	if (!may_send(c))
		return -EPIPE;
	if (c->type != VQ_VSOCK_TYPE_SEQPACKET)
		return -EINVAL;
	/* All or nothing, as a Linux sender blocks until the message fits. */
	nfrag = len ? (len + max - 1) / max : 1;
	/* each packet takes a slot and up to two descriptors */
	if (c->state != VQ_VSG_ESTABLISHED || vq_vsg_credit(c) < len ||
	    g->tx_nfree < nfrag || vq_drv_free_slots(g->cfg.tx) < 2 * nfrag)
		return 0;
	do {
		uint32_t k = len - done < max ? len - done : max;

		r = vsg_conn_send(c, VQ_VSOCK_OP_RW,
				  done + k == len ? VQ_VSOCK_SEQ_EOM : 0,
				  (const uint8_t *)buf + done, k);
		if (r < 0)
			return g->err ? g->err : -EIO;  /* slots were counted */
		c->tx_cnt += k;
		done += k;
	} while (done < len);
	r = vsg_flush_q(g, VQ_VSOCK_TXQ);
	return r < 0 ? (long)r : (long)len;
}

long vq_vsg_read_msg(struct vq_vsg_conn *c, void *buf, uint32_t cap)
{
	uint32_t len;

	if (!c->nmsg)
		return -EAGAIN;
	/* fwd_cnt counts the bytes read so far: the message starts there */
	len = c->msg_end[c->msg_head] - c->fwd_cnt;
	if (len > cap)
		return -EMSGSIZE;
	c->msg_head = (c->msg_head + 1) % VSG_MSGS;
	c->nmsg--;
	if (len)
		vq_vsg_read(c, buf, len);
	return len;
}

/* Bytes were read: tell the device when its view of our free space is
 * under half and the news is worth it (or everything was read). */
static void credit_after_read(struct vq_vsg_conn *c)
{
	uint32_t cap = c->g->cfg.buf_alloc;
	uint32_t unadv = c->fwd_cnt - c->adv_fwd_cnt;
	uint32_t seen_free = cap - (c->rx_cnt - c->adv_fwd_cnt);
	uint32_t step = cap / 4 < 65536 ? cap / 4 : 65536;

	if (c->state == VQ_VSG_ESTABLISHED && seen_free < cap / 2 &&
	    (unadv >= step || c->rlen == 0)) {
		if (vsg_conn_send(c, VQ_VSOCK_OP_CREDIT_UPDATE, 0, NULL, 0) < 0)
			c->pend |= PEND_CREDIT;
		vsg_flush_q(c->g, VQ_VSOCK_TXQ);
	}
}

/* k bytes of rbuf's oldest into out. */
static void rbuf_take(struct vq_vsg_conn *c, uint8_t *out, uint32_t k)
{
	uint32_t cap = c->g->cfg.buf_alloc;
	uint32_t first = cap - c->rhead < k ? cap - c->rhead : k;

	memcpy(out, c->rbuf + c->rhead, first);
	memcpy(out + first, c->rbuf, k - first);
	c->rhead = (c->rhead + k) % cap;
	c->rbuf_len -= k;
}

uint32_t vq_vsg_read(struct vq_vsg_conn *c, void *buf, uint32_t len)
{
	struct vq_vsg *g = c->g;
	uint32_t done = 0;
	bool posted = false;

	if (len > c->rlen)
		len = c->rlen;
	if (!len)
		return 0;
	/* the segments hold rlen bytes, so len of them are there */
	while (done < len && c->nseg) {
		struct vsg_seg *s = &c->seg[c->seg_head];
		uint32_t k = s->len < len - done ? s->len : len - done;

		if (s->slot == VSG_SEG_RBUF) {
			rbuf_take(c, (uint8_t *)buf + done, k);
		} else {
			memcpy((uint8_t *)buf + done, vsg_rx_slot(g, s->slot) + s->off, k);
			s->off += k;
		}
		s->len -= k;
		done += k;
		if (s->len)
			break;
		posted |= seg_done(c);
	}
	len = done;
	c->rlen -= len;
	c->fwd_cnt += len;
	if (posted)
		vsg_flush_q(g, VQ_VSOCK_RXQ);
	credit_after_read(c);
	if (c->peer_shut == 3u && c->rlen == 0 && c->state == VQ_VSG_ESTABLISHED) {
		vsg_close_rst(c);
		vsg_send_pending(g);
		vsg_flush_q(g, VQ_VSOCK_TXQ);
	}
	return len;
}

uint32_t vq_vsg_readable(const struct vq_vsg_conn *c)
{
	return c->rlen;
}

bool vq_vsg_eof(const struct vq_vsg_conn *c)
{
	return c->rlen == 0 && ((c->peer_shut & VQ_VSOCK_SHUTDOWN_SEND) ||
				c->state == VQ_VSG_CLOSED);
}

uint32_t vq_vsg_peer_shutdown(const struct vq_vsg_conn *c)
{
	return c->peer_shut;
}

int vq_vsg_shutdown(struct vq_vsg_conn *c, uint32_t flags)
{
	int r;

	if (c->g->err)
		return c->g->err;
	if (c->state == VQ_VSG_CLOSED)
		return -EPIPE;
	c->local_shut |= flags & 3u;
	r = vsg_conn_send(c, VQ_VSOCK_OP_SHUTDOWN, flags & 3u, NULL, 0);
	if (r == 0)
		r = vsg_flush_q(c->g, VQ_VSOCK_TXQ);
	return r;
}

void vq_vsg_reset(struct vq_vsg_conn *c)
{
	struct vq_vsg *g = c->g;

	c->released = true;
	if (c->state == VQ_VSG_CLOSED && !(c->pend & PEND_RST)) {
		vsg_conn_unlink(g, c);
		return;
	}
	vsg_close_rst(c);
	vsg_send_pending(g);
	vsg_flush_q(g, VQ_VSOCK_TXQ);
}

void vq_vsg_release(struct vq_vsg_conn *c)
{
	if (c->pend & PEND_RST) {
		c->released = true;
		return;
	}
	vsg_conn_unlink(c->g, c);
}

uint32_t vq_vsg_local_port(const struct vq_vsg_conn *c)
{
	return c->lport;
}

uint32_t vq_vsg_peer_port(const struct vq_vsg_conn *c)
{
	return c->pport;
}

uint64_t vq_vsg_peer_cid(const struct vq_vsg_conn *c)
{
	return c->pcid;
}
