// SPDX-License-Identifier: MIT
/*
 * The userspace vsock driver: the packets the device sends.  The device
 * is the adversary: a header that lies is counted (stats.bad), leaves a
 * message (vq_vsg_last_bad), and resets the connection it names; bytes
 * accepted before stay readable.  One helper per check.
 */
#include <inttypes.h>
#include <string.h>

#include "vsock_guest_internal.h"

/* What vsg_rx_packet read from a header, in host order. */
struct rx_hdr {
	uint64_t cid;                   /* the sender's */
	uint32_t len, lport, pport, flags, buf_alloc, fwd_cnt;
	uint16_t type, op;
};

static const char *type_name(uint16_t type)
{
	return type == VQ_VSOCK_TYPE_STREAM ? "stream" :
	       type == VQ_VSOCK_TYPE_SEQPACKET ? "seqpacket" : "unknown";
}

/* c broke a rule (the message says which): RST, counted. */
static void conn_lied(struct vq_vsg_conn *c)
{
	c->g->st.conns_reset++;
	vsg_close_rst(c);
}

static void orphan(struct vq_vsg *g, uint32_t port, uint16_t op)
{
	struct vsg_orphan *o = &g->orphans[g->norphan++ % VSG_ORPHANS];

	o->port = port;
	o->op = op;
}

uint16_t vq_vsg_orphan_op(struct vq_vsg *g, uint32_t port)
{
	unsigned i, n = g->norphan < VSG_ORPHANS ? g->norphan : VSG_ORPHANS;

	/* Newest first. */
	for (i = 0; i < n; i++) {
		struct vsg_orphan *o = &g->orphans[(g->norphan - 1 - i) % VSG_ORPHANS];

		if (o->port == port)
			return o->op;
	}
	return 0;
}

/* A packet for no connection: RST back unless it is one (5.10.6.5). */
static void reply_rst(struct vq_vsg *g, const struct rx_hdr *t)
{
	struct vq_vsock_hdr r;

	orphan(g, t->lport, t->op);
	if (t->op == VQ_VSOCK_OP_RST)
		return;
	vq_vsg_hdr(g, &r, t->lport, t->pport, VQ_VSOCK_OP_RST, 0);
	r.dst_cid = vq_le64(t->cid);
	r.type = vq_le16(t->type);
	vsg_send_parts(g, &r, sizeof(r), NULL, 0);
}

/* The packet comes from the host (or, with cfg.siblings, a sibling) and
 * is for us (else it is dropped). */
static bool check_cids(struct vq_vsg *g, const struct vq_vsock_hdr *h)
{
	uint64_t src = vq_le64(h->src_cid), dst = vq_le64(h->dst_cid);
	bool peer = src == VQ_VSOCK_CID_HOST ||
		    (g->cfg.siblings && src > VQ_VSOCK_CID_HOST && src != g->cfg.cid &&
		     src <= 0xffffffffull);

	if (peer && dst == g->cfg.cid)
		return true;
	if (g->cfg.siblings)
		vsg_bad(g, "5.10.6.4: packet from CID %" PRIu64 " to CID %" PRIu64
			", not from a peer's to our %" PRIu64, src, dst, g->cfg.cid);
	else
		vsg_bad(g, "5.10.6.4: packet from CID %" PRIu64 " to CID %" PRIu64
			", not from the host's 2 to our %" PRIu64, src, dst, g->cfg.cid);
	return false;
}

/* The header's len fits what the device wrote. */
static bool check_len(struct vq_vsg *g, uint32_t len, uint32_t used)
{
	if (len <= used - VQ_VSOCK_HDR_SIZE)
		return true;
	vsg_bad(g, "5.10.6: header len %u, more than the %u payload bytes the device wrote",
		len, used - VQ_VSOCK_HDR_SIZE);
	return false;
}

/* 5.10.6.4: an unknown type gets RST; a type that is not its
 * connection's resets the connection. */
static bool check_type(struct vq_vsg *g, const struct rx_hdr *t,
		       struct vq_vsg_conn *c)
{
	if (t->type != VQ_VSOCK_TYPE_STREAM && t->type != VQ_VSOCK_TYPE_SEQPACKET) {
		vsg_bad(g, "5.10.6.4: type %u unknown", t->type);
		reply_rst(g, t);
		return false;
	}
	if (c && c->type != t->type) {
		vsg_bad(g, "5.10.6.2: type %u (%s) on the %s connection of ports %u -> %u",
			t->type, type_name(t->type), type_name(c->type), c->pport, c->lport);
		conn_lied(c);
		return false;
	}
	return true;
}

/* An op the connection's state forbids, or none of the spec's. */
static void bad_op(struct vq_vsg_conn *c, uint16_t op, const char *why)
{
	vsg_bad(c->g, "5.10.6.5: op %u on ports %u -> %u: %s", op, c->pport,
		c->lport, why);
	conn_lied(c);
}

/* A REQUEST to a port we listen on: a connection to accept. */
static void rx_request(struct vq_vsg *g, const struct rx_hdr *t)
{
	struct vq_vsg_conn *c;
	unsigned i, waiting = 0;

	for (i = 0; i < g->nlisten && g->listen[i] != t->lport; i++)
		;
	if (i == g->nlisten) {
		reply_rst(g, t);
		return;
	}
	for (c = g->conns; c; c = c->next)
		waiting += c->to_accept && c->lport == t->lport;
	/* A device that floods REQUESTs gets RSTs, not our memory. */
	if (waiting >= g->cfg.backlog) {
		g->st.backlog_full++;
		reply_rst(g, t);
		return;
	}
	c = vsg_conn_alloc(g, t->cid, t->lport, t->pport, t->type);
	if (!c) {
		reply_rst(g, t);
		return;
	}
	c->state = VQ_VSG_ESTABLISHED;
	c->to_accept = true;
	c->pend |= PEND_RESPONSE;
	c->peer_buf_alloc = t->buf_alloc;
	c->peer_fwd_cnt = t->fwd_cnt;
}

/*
 * Linux's packet count (pkt_truesize): the packets read to their end leave
 * the queue; one more that would make the queue's overhead pass buf_alloc
 * resets the connection, whatever credit is left.  true: c was reset.
 */
static bool pkt_count_over(struct vq_vsg_conn *c, uint32_t len)
{
	uint32_t t = c->g->cfg.pkt_truesize;

	if (!t)
		return false;
	while (c->npkt && (int32_t)(c->fwd_cnt - c->pkt_end[c->pkt_head]) >= 0) {
		c->pkt_head = (c->pkt_head + 1) % c->pkt_cap;
		c->npkt--;
	}
	if ((uint64_t)(c->npkt + 1) * t > c->g->cfg.buf_alloc) {
		c->g->st.pkt_resets++;
		vsg_close_rst(c);
		return true;
	}
	c->pkt_end[(c->pkt_head + c->npkt++) % c->pkt_cap] = c->rx_cnt + len;
	return false;
}

/* The next segment of c's unread bytes (room for it: see vsg_seg). */
static struct vsg_seg *seg_push(struct vq_vsg_conn *c)
{
	return &c->seg[(c->seg_head + c->nseg++) % VSG_SEGS];
}

/* Keep the payload in its slot, unread, if this one is worth it and the
 * bounds allow: true if kept. */
static bool rx_hold(struct vq_vsg_conn *c, unsigned slot, uint32_t len)
{
	struct vq_vsg *g = c->g;
	struct vsg_seg *s;

	if (len < VSG_HOLD_MIN || g->freeing || c->nheld >= VSG_HOLD_CONN ||
	    g->held >= g->nrx / 2)
		return false;
	s = seg_push(c);
	*s = (struct vsg_seg){ slot, VQ_VSOCK_HDR_SIZE, len };
	c->nheld++;
	g->held++;
	return true;
}

/* Copy the payload into rbuf, its bytes the newest segment's tail. */
static void rx_copy(struct vq_vsg_conn *c, const uint8_t *data, uint32_t len)
{
	uint32_t cap = c->g->cfg.buf_alloc;
	uint32_t tail = (c->rhead + c->rbuf_len) % cap;
	uint32_t first = cap - tail < len ? cap - tail : len;
	struct vsg_seg *last = c->nseg ?
		&c->seg[(c->seg_head + c->nseg - 1) % VSG_SEGS] : NULL;

	memcpy(c->rbuf + tail, data, first);
	memcpy(c->rbuf, data + first, len - first);
	c->rbuf_len += len;
	if (last && last->slot == VSG_SEG_RBUF)
		last->len += len;
	else
		*seg_push(c) = (struct vsg_seg){ VSG_SEG_RBUF, 0, len };
}

/* RW payload, within the credit we gave, into c's unread bytes: kept in
 * its slot (true) or copied. */
static bool rx_rw(struct vq_vsg_conn *c, const struct rx_hdr *t, unsigned slot)
{
	uint32_t cap = c->g->cfg.buf_alloc;
	bool eom = c->type == VQ_VSOCK_TYPE_SEQPACKET && (t->flags & VQ_VSOCK_SEQ_EOM);
	bool held = false;

	if (c->state != VQ_VSG_ESTABLISHED) {
		bad_op(c, t->op, "RW before the connection is established");
		return false;
	}
	if (t->len > cap - c->rlen) {
		vsg_bad(c->g, "5.10.6.3: RW of %u bytes on ports %u -> %u, beyond the %u bytes of credit left",
			t->len, c->pport, c->lport, cap - c->rlen);
		conn_lied(c);
		return false;
	}
	if (eom && c->nmsg == VSG_MSGS) {
		vsg_bad(c->g, "5.10.6.6: a message end on ports %u -> %u past the %u unread",
			c->pport, c->lport, VSG_MSGS);
		conn_lied(c);
		return false;
	}
	if (pkt_count_over(c, t->len))
		return false;
	if (t->len) {
		held = rx_hold(c, slot, t->len);
		if (!held)
			rx_copy(c, vsg_rx_slot(c->g, slot) + VQ_VSOCK_HDR_SIZE, t->len);
	}
	c->rlen += t->len;
	c->rx_cnt += t->len;
	if (eom)
		c->msg_end[(c->msg_head + c->nmsg++) % VSG_MSGS] = c->rx_cnt;
	return held;
}

/* A packet on the connection c, in RX slot slot: true if c holds it. */
static bool rx_on_conn(struct vq_vsg_conn *c, const struct rx_hdr *t, unsigned slot)
{
	c->peer_buf_alloc = t->buf_alloc;
	c->peer_fwd_cnt = t->fwd_cnt;
	switch (t->op) {
	case VQ_VSOCK_OP_RESPONSE:
		if (c->state != VQ_VSG_CONNECTING)
			bad_op(c, t->op, "RESPONSE to no REQUEST of ours");
		else
			c->state = VQ_VSG_ESTABLISHED;
		break;
	case VQ_VSOCK_OP_RST:
		c->g->st.rst_recv++;
		c->state = VQ_VSG_CLOSED;
		c->peer_shut = VQ_VSOCK_SHUTDOWN_RCV | VQ_VSOCK_SHUTDOWN_SEND;
		c->pend = 0;
		if (c->released)
			vsg_conn_unlink(c->g, c);
		break;
	case VQ_VSOCK_OP_SHUTDOWN:
		c->peer_shut |= t->flags & 3u;
		/* Linux: both halves closed and nothing left to read -> RST. */
		if (c->peer_shut == 3u && c->rlen == 0)
			vsg_close_rst(c);
		break;
	case VQ_VSOCK_OP_RW:
		return rx_rw(c, t, slot);
	case VQ_VSOCK_OP_CREDIT_UPDATE:
		break;
	case VQ_VSOCK_OP_CREDIT_REQUEST:
		c->pend |= PEND_CREDIT;
		break;
	case VQ_VSOCK_OP_REQUEST:
		bad_op(c, t->op, "REQUEST for a connection that exists");
		break;
	default:
		bad_op(c, t->op, "not an op of the spec");
		break;
	}
	return false;
}

bool vsg_rx_packet(struct vq_vsg *g, unsigned slot, uint32_t used)
{
	const uint8_t *buf = vsg_rx_slot(g, slot);
	struct vq_vsock_hdr h;
	struct vq_vsg_conn *c;
	struct rx_hdr t;

	if (used < VQ_VSOCK_HDR_SIZE) {
		vsg_bad(g, "5.10.6: RX buffer used for %u bytes, less than the %u-byte header",
			used, VQ_VSOCK_HDR_SIZE);
		return false;
	}
	memcpy(&h, buf, sizeof(h));
	t = (struct rx_hdr){
		.cid = vq_le64(h.src_cid), .len = vq_le32(h.len), .lport = vq_le32(h.dst_port),
		.pport = vq_le32(h.src_port), .flags = vq_le32(h.flags),
		.buf_alloc = vq_le32(h.buf_alloc), .fwd_cnt = vq_le32(h.fwd_cnt),
		.type = vq_le16(h.type), .op = vq_le16(h.op),
	};
	if (!check_cids(g, &h))
		return false;
	c = vsg_conn_find(g, t.cid, t.lport, t.pport);
	if (!check_len(g, t.len, used)) {
		/* The payload is lost: the stream cannot go on. */
		if (c && c->state != VQ_VSG_CLOSED)
			conn_lied(c);
		return false;
	}
	g->st.rx_pkts++;
	if (c && c->state == VQ_VSG_CLOSED) {
		/* Sent before the device saw our RST (or after its own):
		 * moot, but its RST answers ours. */
		if (t.op == VQ_VSOCK_OP_RST) {
			g->st.rst_recv++;
			c->pend = 0;
			if (c->released)
				vsg_conn_unlink(g, c);
		}
		return false;
	}
	if (!check_type(g, &t, c))
		return false;
	if (c)
		return rx_on_conn(c, &t, slot);
	if (t.op == VQ_VSOCK_OP_REQUEST)
		rx_request(g, &t);
	else
		reply_rst(g, &t);
	return false;
}
