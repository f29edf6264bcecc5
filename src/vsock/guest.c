// SPDX-License-Identifier: MIT
/*
 * A userspace virtio-vsock guest driver (see vsock_guest.h).  Buffers are
 * fixed slots carved out of the caller's guest memory: every RX slot is
 * posted at start and reposted as soon as its packet is handled; TX slots
 * come from a free stack and return when the device uses them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vsock_guest.h"

#define VSG_LISTEN_MAX  16u
#define VSG_ORPHANS     64u
#define VSG_EV_SLOTS    8u
#define VSG_EV_SIZE     8u
#define VSG_MSGS        4096u   /* seqpacket messages received, unread */

#define PEND_RESPONSE   (1u << 0)
#define PEND_CREDIT     (1u << 1)
#define PEND_RST        (1u << 2)

struct vq_vsg_conn {
	struct vq_vsg *g;
	struct vq_vsg_conn *next;
	uint32_t lport, pport;
	uint16_t type;
	enum vq_vsg_state state;
	uint32_t peer_buf_alloc, peer_fwd_cnt, tx_cnt;
	uint32_t rx_cnt, fwd_cnt, adv_fwd_cnt;
	uint8_t *rbuf;
	uint32_t rhead, rlen;
	uint32_t peer_shut, local_shut;
	unsigned pend;
	bool to_accept;
	bool released;
	/* seqpacket: rx_cnt at the end of each message not yet read */
	uint32_t *msg_end;
	unsigned msg_head, nmsg;
};

struct vsg_orphan {
	uint32_t port;
	uint16_t op;
};

struct vq_vsg {
	struct vq_vsg_config cfg;
	struct vq_vsg_conn *conns;
	uint32_t listen[VSG_LISTEN_MAX];
	unsigned nlisten;
	struct vsg_orphan orphans[VSG_ORPHANS];
	unsigned norphan;
	uint32_t rx_slot, tx_slot;
	unsigned nrx, ntx, nev;
	uint32_t *tx_free;
	unsigned tx_nfree;
	bool dirty[3];
	uint32_t next_port;
	struct vq_vsg_stats st;
};

static void *tok(unsigned i)
{
	return (void *)(uintptr_t)(i + 1);
}

static unsigned untok(void *t)
{
	return (unsigned)((uintptr_t)t - 1);
}

static struct vq_drv *qdrv(struct vq_vsg *g, unsigned q)
{
	return q == VQ_VSOCK_RXQ ? g->cfg.rx : q == VQ_VSOCK_TXQ ? g->cfg.tx : g->cfg.ev;
}

static int flush_q(struct vq_vsg *g, unsigned q)
{
	int r;

	if (!g->dirty[q])
		return 0;
	g->dirty[q] = false;
	r = vq_drv_kick_prepare(qdrv(g, q));
	if (r > 0 && g->cfg.kick)
		g->cfg.kick(g->cfg.arg, q);
	return r < 0 ? r : 0;
}

static int flush_all(struct vq_vsg *g)
{
	int r = flush_q(g, VQ_VSOCK_TXQ);
	int s = flush_q(g, VQ_VSOCK_RXQ);
	int t = g->cfg.ev ? flush_q(g, VQ_VSOCK_EVQ) : 0;

	return r < 0 ? r : s < 0 ? s : t;
}

int vq_vsg_new(const struct vq_vsg_config *cfg, struct vq_vsg **out)
{
	struct vq_vsg *g;
	unsigned i;

	*out = NULL;
	if (!cfg->rx || !cfg->tx)
		return -EINVAL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->cfg = *cfg;
	if (!g->cfg.rx_buf_size)
		g->cfg.rx_buf_size = 4096;
	if (!g->cfg.tx_pkt_max || g->cfg.tx_pkt_max > VQ_VSOCK_MAX_PKT)
		g->cfg.tx_pkt_max = VQ_VSOCK_MAX_PKT;
	if (!g->cfg.buf_alloc)
		g->cfg.buf_alloc = 256 * 1024;
	g->rx_slot = (VQ_VSOCK_HDR_SIZE + g->cfg.rx_buf_size + 63) & ~63u;
	g->tx_slot = (VQ_VSOCK_HDR_SIZE + g->cfg.tx_pkt_max + 63) & ~63u;
	g->nrx = vq_drv_num(cfg->rx);
	if (g->nrx > cfg->rx_area.size / g->rx_slot)
		g->nrx = (unsigned)(cfg->rx_area.size / g->rx_slot);
	g->ntx = vq_drv_num(cfg->tx);
	if (g->ntx > cfg->tx_area.size / g->tx_slot)
		g->ntx = (unsigned)(cfg->tx_area.size / g->tx_slot);
	if (cfg->ev) {
		g->nev = VSG_EV_SLOTS;
		if (g->nev > vq_drv_num(cfg->ev))
			g->nev = vq_drv_num(cfg->ev);
		if (g->nev > cfg->ev_area.size / VSG_EV_SIZE)
			g->nev = (unsigned)(cfg->ev_area.size / VSG_EV_SIZE);
	}
	g->tx_free = calloc(g->ntx ? g->ntx : 1, sizeof(*g->tx_free));
	if (!g->tx_free || !g->nrx || !g->ntx) {
		int err = g->tx_free ? -EINVAL : -ENOMEM;

		free(g->tx_free);
		free(g);
		return err;
	}
	for (i = 0; i < g->ntx; i++)
		g->tx_free[g->tx_nfree++] = g->ntx - 1 - i;
	g->next_port = 50000;
	*out = g;
	return 0;
}

static void conn_unlink(struct vq_vsg *g, struct vq_vsg_conn *c)
{
	struct vq_vsg_conn **p = &g->conns;

	while (*p && *p != c)
		p = &(*p)->next;
	if (*p)
		*p = c->next;
	free(c->rbuf);
	free(c->msg_end);
	free(c);
}

void vq_vsg_free(struct vq_vsg *g)
{
	if (!g)
		return;
	while (g->conns)
		conn_unlink(g, g->conns);
	free(g->tx_free);
	free(g);
}

static int post_rx(struct vq_vsg *g, unsigned i)
{
	struct vq_vsg_area *a = &g->cfg.rx_area;
	struct vq_seg s = { a->gpa + (uint64_t)i * g->rx_slot,
			    VQ_VSOCK_HDR_SIZE + g->cfg.rx_buf_size };

	g->dirty[VQ_VSOCK_RXQ] = true;
	return vq_drv_add(g->cfg.rx, &s, 0, 1, tok(i));
}

static int post_ev(struct vq_vsg *g, unsigned i)
{
	struct vq_seg s = { g->cfg.ev_area.gpa + (uint64_t)i * VSG_EV_SIZE,
			    sizeof(struct vq_vsock_event) };

	g->dirty[VQ_VSOCK_EVQ] = true;
	return vq_drv_add(g->cfg.ev, &s, 0, 1, tok(i));
}

int vq_vsg_start(struct vq_vsg *g)
{
	unsigned i;
	int r;

	for (i = 0; i < g->nrx; i++) {
		r = post_rx(g, i);
		if (r < 0)
			return r;
	}
	for (i = 0; i < g->nev; i++) {
		r = post_ev(g, i);
		if (r < 0)
			return r;
	}
	return flush_all(g);
}

void vq_vsg_hdr(struct vq_vsg *g, struct vq_vsock_hdr *h,
		uint32_t src_port, uint32_t dst_port, uint16_t op, uint32_t len)
{
	memset(h, 0, sizeof(*h));
	h->src_cid = vq_le64(g->cfg.cid);
	h->dst_cid = vq_le64(VQ_VSOCK_CID_HOST);
	h->src_port = vq_le32(src_port);
	h->dst_port = vq_le32(dst_port);
	h->len = vq_le32(len);
	h->type = vq_le16(VQ_VSOCK_TYPE_STREAM);
	h->op = vq_le16(op);
	h->buf_alloc = vq_le32(g->cfg.buf_alloc);
}

/* One chain of two parts (header, payload), as the Linux driver sends. */
static int send_parts(struct vq_vsg *g, const void *a, uint32_t na,
		      const void *b, uint32_t nb)
{
	struct vq_seg s[2];
	unsigned slot, n = 1;
	uint64_t gpa;
	uint8_t *hva;
	int r;

	if (!g->tx_nfree || na + nb > g->tx_slot)
		return -ENOSPC;
	slot = g->tx_free[g->tx_nfree - 1];
	gpa = g->cfg.tx_area.gpa + (uint64_t)slot * g->tx_slot;
	hva = g->cfg.tx_area.hva + (uint64_t)slot * g->tx_slot;
	memcpy(hva, a, na);
	if (nb)
		memcpy(hva + na, b, nb);
	s[0] = (struct vq_seg){ gpa, na };
	if (nb) {
		s[1] = (struct vq_seg){ gpa + na, nb };
		n = 2;
	}
	if (!na) {
		s[0] = (struct vq_seg){ gpa, nb };
		n = 1;
	}
	r = vq_drv_add(g->cfg.tx, s, n, 0, tok(slot));
	if (r < 0)
		return r;
	g->tx_nfree--;
	g->dirty[VQ_VSOCK_TXQ] = true;
	g->st.tx_pkts++;
	return 0;
}

int vq_vsg_send_bytes(struct vq_vsg *g, const void *buf, uint32_t n)
{
	int r = send_parts(g, buf, n, NULL, 0);

	if (r == 0)
		r = flush_q(g, VQ_VSOCK_TXQ);
	return r;
}

static int conn_send(struct vq_vsg_conn *c, uint16_t op, uint32_t flags,
		     const void *payload, uint32_t len)
{
	struct vq_vsock_hdr h;
	int r;

	vq_vsg_hdr(c->g, &h, c->lport, c->pport, op, len);
	h.type = vq_le16(c->type);
	h.flags = vq_le32(flags);
	h.fwd_cnt = vq_le32(c->fwd_cnt);
	r = send_parts(c->g, &h, sizeof(h), payload, len);
	if (r == 0) {
		c->adv_fwd_cnt = c->fwd_cnt;
		c->pend &= ~PEND_CREDIT;
		if (op == VQ_VSOCK_OP_CREDIT_UPDATE)
			c->g->st.credit_updates_sent++;
	}
	return r;
}

static struct vq_vsg_conn *conn_find(struct vq_vsg *g, uint32_t l, uint32_t p)
{
	struct vq_vsg_conn *c;

	for (c = g->conns; c; c = c->next)
		if (c->lport == l && c->pport == p && !c->released)
			return c;
	return NULL;
}

static struct vq_vsg_conn *conn_alloc(struct vq_vsg *g, uint32_t l, uint32_t p,
				      uint16_t type)
{
	struct vq_vsg_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->type = type;
	c->rbuf = malloc(g->cfg.buf_alloc);
	if (type == VQ_VSOCK_TYPE_SEQPACKET)
		c->msg_end = malloc(VSG_MSGS * sizeof(*c->msg_end));
	if (!c->rbuf || (type == VQ_VSOCK_TYPE_SEQPACKET && !c->msg_end)) {
		free(c->rbuf);
		free(c->msg_end);
		free(c);
		return NULL;
	}
	c->g = g;
	c->lport = l;
	c->pport = p;
	c->next = g->conns;
	g->conns = c;
	return c;
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

/* Owed control packets: send what TX slots allow. */
static void send_pending(struct vq_vsg *g)
{
	struct vq_vsg_conn *c, *n;

	for (c = g->conns; c; c = n) {
		n = c->next;
		if ((c->pend & PEND_RESPONSE) &&
		    conn_send(c, VQ_VSOCK_OP_RESPONSE, 0, NULL, 0) == 0)
			c->pend &= ~PEND_RESPONSE;
		if ((c->pend & PEND_CREDIT) &&
		    conn_send(c, VQ_VSOCK_OP_CREDIT_UPDATE, 0, NULL, 0) == 0)
			c->pend &= ~PEND_CREDIT;
		if ((c->pend & PEND_RST) &&
		    conn_send(c, VQ_VSOCK_OP_RST, 0, NULL, 0) == 0) {
			c->pend &= ~PEND_RST;
			if (c->released)
				conn_unlink(g, c);
		}
	}
}

static void close_rst(struct vq_vsg_conn *c)
{
	c->state = VSG_CLOSED;
	c->pend = PEND_RST;
}

static void rx_packet(struct vq_vsg *g, const uint8_t *buf, uint32_t used)
{
	struct vq_vsock_hdr h;
	struct vq_vsg_conn *c;
	uint32_t len, lport, pport;
	uint16_t op, type;
	unsigned i;

	if (used < VQ_VSOCK_HDR_SIZE) {
		g->st.bad++;
		return;
	}
	memcpy(&h, buf, sizeof(h));
	len = vq_le32(h.len);
	op = vq_le16(h.op);
	lport = vq_le32(h.dst_port);
	pport = vq_le32(h.src_port);
	if (len > used - VQ_VSOCK_HDR_SIZE || vq_le64(h.src_cid) != VQ_VSOCK_CID_HOST ||
	    vq_le64(h.dst_cid) != g->cfg.cid) {
		g->st.bad++;
		return;
	}
	g->st.rx_pkts++;
	type = vq_le16(h.type);
	c = conn_find(g, lport, pport);
	if ((type != VQ_VSOCK_TYPE_STREAM && type != VQ_VSOCK_TYPE_SEQPACKET) ||
	    (c && c->type != type)) {
		orphan(g, lport, op);
		return;
	}
	if (!c && op == VQ_VSOCK_OP_REQUEST) {
		for (i = 0; i < g->nlisten; i++)
			if (g->listen[i] == lport)
				break;
		if (i < g->nlisten && (c = conn_alloc(g, lport, pport, type))) {
			c->state = VSG_ESTABLISHED;
			c->to_accept = true;
			c->pend |= PEND_RESPONSE;
			c->peer_buf_alloc = vq_le32(h.buf_alloc);
			c->peer_fwd_cnt = vq_le32(h.fwd_cnt);
			return;
		}
	}
	if (!c) {
		struct vq_vsock_hdr r;

		orphan(g, lport, op);
		if (op != VQ_VSOCK_OP_RST) {
			vq_vsg_hdr(g, &r, lport, pport, VQ_VSOCK_OP_RST, 0);
			send_parts(g, &r, sizeof(r), NULL, 0);
		}
		return;
	}
	c->peer_buf_alloc = vq_le32(h.buf_alloc);
	c->peer_fwd_cnt = vq_le32(h.fwd_cnt);
	switch (op) {
	case VQ_VSOCK_OP_RESPONSE:
		if (c->state == VSG_CONNECTING)
			c->state = VSG_ESTABLISHED;
		else
			g->st.bad++;
		break;
	case VQ_VSOCK_OP_RST:
		g->st.rst_recv++;
		c->state = VSG_CLOSED;
		c->peer_shut = VQ_VSOCK_SHUTDOWN_RCV | VQ_VSOCK_SHUTDOWN_SEND;
		c->pend = 0;
		if (c->released)
			conn_unlink(g, c);
		break;
	case VQ_VSOCK_OP_SHUTDOWN:
		c->peer_shut |= vq_le32(h.flags) & 3u;
		/* Linux: both halves closed and nothing left to read -> RST. */
		if (c->peer_shut == 3u && c->rlen == 0 && c->state != VSG_CLOSED)
			close_rst(c);
		break;
	case VQ_VSOCK_OP_RW:
		if (c->state != VSG_ESTABLISHED || len > c->g->cfg.buf_alloc - c->rlen) {
			/* Beyond the credit we gave: the device broke a rule. */
			g->st.bad++;
			break;
		}
		{
			uint32_t cap = g->cfg.buf_alloc;
			uint32_t tail = (c->rhead + c->rlen) % cap;
			uint32_t first = cap - tail < len ? cap - tail : len;

			memcpy(c->rbuf + tail, buf + VQ_VSOCK_HDR_SIZE, first);
			memcpy(c->rbuf, buf + VQ_VSOCK_HDR_SIZE + first, len - first);
			c->rlen += len;
			c->rx_cnt += len;
		}
		if (c->type == VQ_VSOCK_TYPE_SEQPACKET &&
		    (vq_le32(h.flags) & VQ_VSOCK_SEQ_EOM)) {
			if (c->nmsg == VSG_MSGS) {
				g->st.bad++;
				break;
			}
			c->msg_end[(c->msg_head + c->nmsg++) % VSG_MSGS] = c->rx_cnt;
		}
		break;
	case VQ_VSOCK_OP_CREDIT_UPDATE:
		break;
	case VQ_VSOCK_OP_CREDIT_REQUEST:
		c->pend |= PEND_CREDIT;
		break;
	default:
		g->st.bad++;
		break;
	}
}

int vq_vsg_reap_tx(struct vq_vsg *g)
{
	void *tokens[32];
	uint32_t lens[32];
	int n, i, total = 0;

	/* TX completions free slots. */
	while ((n = vq_drv_get_burst(g->cfg.tx, tokens, lens, 32)) > 0) {
		for (i = 0; i < n; i++) {
			unsigned s = untok(tokens[i]);

			if (s >= g->ntx || g->tx_nfree >= g->ntx)
				return -EPROTO;
			g->tx_free[g->tx_nfree++] = s;
		}
		total += n;
	}
	return n < 0 ? n : total;
}

int vq_vsg_poll(struct vq_vsg *g)
{
	void *tokens[32];
	uint32_t lens[32];
	int n, i, total, r;

	total = vq_vsg_reap_tx(g);
	if (total < 0)
		return total;
	while ((n = vq_drv_get_burst(g->cfg.rx, tokens, lens, 32)) > 0) {
		for (i = 0; i < n; i++) {
			unsigned s = untok(tokens[i]);
			uint32_t l = lens[i];

			if (s >= g->nrx)
				return -EPROTO;
			if (l > VQ_VSOCK_HDR_SIZE + g->cfg.rx_buf_size)
				l = 0;
			rx_packet(g, g->cfg.rx_area.hva + (uint64_t)s * g->rx_slot, l);
			r = post_rx(g, s);
			if (r < 0)
				return r;
		}
		total += n;
	}
	if (n < 0)
		return n;
	if (g->cfg.ev) {
		while ((n = vq_drv_get_burst(g->cfg.ev, tokens, lens, 32)) > 0) {
			for (i = 0; i < n; i++) {
				unsigned s = untok(tokens[i]);
				struct vq_vsock_event e;
				struct vq_vsg_conn *c;

				if (s >= g->nev)
					return -EPROTO;
				memcpy(&e, g->cfg.ev_area.hva + (uint64_t)s * VSG_EV_SIZE,
				       sizeof(e));
				if (lens[i] >= sizeof(e) &&
				    vq_le32(e.id) == VQ_VSOCK_EVENT_TRANSPORT_RESET) {
					/* Linux resets every socket. */
					g->st.resets++;
					for (c = g->conns; c; c = c->next) {
						c->state = VSG_CLOSED;
						c->pend = 0;
					}
				}
				r = post_ev(g, s);
				if (r < 0)
					return r;
			}
			total += n;
		}
		if (n < 0)
			return n;
	}
	send_pending(g);
	r = flush_all(g);
	return r < 0 ? r : total;
}

struct vq_vsg_conn *vq_vsg_connect(struct vq_vsg *g, uint32_t port)
{
	return vq_vsg_connect_type(g, port, VQ_VSOCK_TYPE_STREAM);
}

struct vq_vsg_conn *vq_vsg_connect_type(struct vq_vsg *g, uint32_t port, uint16_t type)
{
	struct vq_vsg_conn *c = conn_alloc(g, g->next_port++, port, type);

	if (!c)
		return NULL;
	c->state = VSG_CONNECTING;
	if (conn_send(c, VQ_VSOCK_OP_REQUEST, 0, NULL, 0) < 0) {
		conn_unlink(g, c);
		return NULL;
	}
	flush_q(g, VQ_VSOCK_TXQ);
	return c;
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

	return inflight >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - inflight;
}

long vq_vsg_write(struct vq_vsg_conn *c, const void *buf, uint32_t len)
{
	const uint8_t *p = buf;
	uint32_t done = 0;

	if (c->state == VSG_CLOSED || (c->local_shut & VQ_VSOCK_SHUTDOWN_SEND) ||
	    (c->peer_shut & VQ_VSOCK_SHUTDOWN_RCV))
		return -EPIPE;
	if (c->state != VSG_ESTABLISHED)
		return 0;
	while (done < len) {
		uint32_t k = len - done, cr = vq_vsg_credit(c);

		if (k > cr)
			k = cr;
		if (k > c->g->cfg.tx_pkt_max)
			k = c->g->cfg.tx_pkt_max;
		if (!k || conn_send(c, VQ_VSOCK_OP_RW, 0, p + done, k) < 0)
			break;
		c->tx_cnt += k;
		done += k;
	}
	flush_q(c->g, VQ_VSOCK_TXQ);
	return done;
}

long vq_vsg_write_msg(struct vq_vsg_conn *c, const void *buf, uint32_t len)
{
	struct vq_vsg *g = c->g;
	uint32_t max = g->cfg.tx_pkt_max, done = 0, nfrag;

	if (c->state == VSG_CLOSED || (c->local_shut & VQ_VSOCK_SHUTDOWN_SEND) ||
	    (c->peer_shut & VQ_VSOCK_SHUTDOWN_RCV))
		return -EPIPE;
	if (c->type != VQ_VSOCK_TYPE_SEQPACKET)
		return -EINVAL;
	/* All or nothing, as a Linux sender blocks until the message fits. */
	nfrag = len ? (len + max - 1) / max : 1;
	/* each packet takes a slot and up to two descriptors */
	if (c->state != VSG_ESTABLISHED || vq_vsg_credit(c) < len ||
	    g->tx_nfree < nfrag || vq_drv_free_slots(g->cfg.tx) < 2 * nfrag)
		return 0;
	do {
		uint32_t k = len - done < max ? len - done : max;

		if (conn_send(c, VQ_VSOCK_OP_RW,
			      done + k == len ? VQ_VSOCK_SEQ_EOM : 0,
			      (const uint8_t *)buf + done, k) < 0)
			return -EIO;            /* slots were counted */
		c->tx_cnt += k;
		done += k;
	} while (done < len);
	flush_q(g, VQ_VSOCK_TXQ);
	return len;
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

uint32_t vq_vsg_read(struct vq_vsg_conn *c, void *buf, uint32_t len)
{
	struct vq_vsg *g = c->g;
	uint32_t cap = g->cfg.buf_alloc, first, unadv, seen_free, step;

	if (len > c->rlen)
		len = c->rlen;
	if (!len)
		return 0;
	first = cap - c->rhead < len ? cap - c->rhead : len;
	memcpy(buf, c->rbuf + c->rhead, first);
	memcpy((uint8_t *)buf + first, c->rbuf, len - first);
	c->rhead = (c->rhead + len) % cap;
	c->rlen -= len;
	c->fwd_cnt += len;
	/* Tell the device when its view of our free space is under half and
	 * the news is worth it (or everything was read). */
	unadv = c->fwd_cnt - c->adv_fwd_cnt;
	seen_free = cap - (c->rx_cnt - c->adv_fwd_cnt);
	step = cap / 4 < 65536 ? cap / 4 : 65536;
	if (c->state == VSG_ESTABLISHED && seen_free < cap / 2 &&
	    (unadv >= step || c->rlen == 0)) {
		if (conn_send(c, VQ_VSOCK_OP_CREDIT_UPDATE, 0, NULL, 0) < 0)
			c->pend |= PEND_CREDIT;
		flush_q(g, VQ_VSOCK_TXQ);
	}
	if (c->peer_shut == 3u && c->rlen == 0 && c->state == VSG_ESTABLISHED) {
		close_rst(c);
		send_pending(g);
		flush_q(g, VQ_VSOCK_TXQ);
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
				c->state == VSG_CLOSED);
}

uint32_t vq_vsg_peer_shutdown(const struct vq_vsg_conn *c)
{
	return c->peer_shut;
}

int vq_vsg_shutdown(struct vq_vsg_conn *c, uint32_t flags)
{
	int r;

	if (c->state == VSG_CLOSED)
		return -EPIPE;
	c->local_shut |= flags & 3u;
	r = conn_send(c, VQ_VSOCK_OP_SHUTDOWN, flags & 3u, NULL, 0);
	flush_q(c->g, VQ_VSOCK_TXQ);
	return r;
}

void vq_vsg_reset(struct vq_vsg_conn *c)
{
	struct vq_vsg *g = c->g;

	c->released = true;
	if (c->state == VSG_CLOSED && !(c->pend & PEND_RST)) {
		conn_unlink(g, c);
		return;
	}
	c->state = VSG_CLOSED;
	c->pend = PEND_RST;
	send_pending(g);
	flush_q(g, VQ_VSOCK_TXQ);
}

void vq_vsg_release(struct vq_vsg_conn *c)
{
	if (c->pend & PEND_RST) {
		c->released = true;
		return;
	}
	conn_unlink(c->g, c);
}

uint32_t vq_vsg_local_port(const struct vq_vsg_conn *c)
{
	return c->lport;
}

uint32_t vq_vsg_peer_port(const struct vq_vsg_conn *c)
{
	return c->pport;
}

const struct vq_vsg_stats *vq_vsg_stats(const struct vq_vsg *g)
{
	return &g->st;
}

unsigned vq_vsg_tx_free(const struct vq_vsg *g)
{
	return g->tx_nfree;
}
