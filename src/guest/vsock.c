// SPDX-License-Identifier: MIT
/*
 * A userspace virtio-vsock driver (virtq/guest/vsock.h): its queues and
 * slots.  Buffers are fixed slots carved out of the caller's guest memory:
 * every RX slot is posted at start and reposted as soon as its packet is
 * handled, or, when a connection holds its payload until it is read,
 * after that read; TX slots come from a free stack and return when the
 * device uses them.  The packets the device sends are judged in guest_rx.c, the
 * connection calls live in guest_conn.c.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vsock_guest_internal.h"

static const char *const qname[3] = { "rx", "tx", "event" };

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

void vsg_bad(struct vq_vsg *g, const char *fmt, ...)
{
	va_list ap;

	g->st.bad++;
	va_start(ap, fmt);
	vsnprintf(g->bad_msg, sizeof(g->bad_msg), fmt, ap);
	va_end(ap);
}

/* A ring call failed with r: when the ring is broken (the device broke
 * a rule), so is the driver, saying why; every later call fails with r.
 * Returns r. */
static int ring_failed(struct vq_vsg *g, unsigned q, int r)
{
	struct vq_drv *d = qdrv(g, q);

	if (!g->err && vq_drv_error(d)) {
		g->err = r;
		snprintf(g->err_msg, sizeof(g->err_msg), "%s (vsock %s queue)",
			 vq_drv_error_msg(d), qname[q]);
	}
	return r;
}

/* A token the ring gave back names no slot of ours: the ring checked the
 * ids, so this is our bug, but it must not become a wild write. */
static int vsg_bad_token(struct vq_vsg *g, unsigned q, unsigned slot, unsigned n)
{
	if (!g->err) {
		g->err = -EPROTO;
		snprintf(g->err_msg, sizeof(g->err_msg),
			 "used buffer of slot %u on the vsock %s queue, which has %u slots",
			 slot, qname[q], n);
	}
	return -EPROTO;
}

int vsg_flush_q(struct vq_vsg *g, unsigned q)
{
	int r;

	if (!g->dirty[q])
		return 0;
	g->dirty[q] = false;
	r = vq_drv_kick_prepare(qdrv(g, q));
	if (r < 0)
		return ring_failed(g, q, r);
	if (r > 0 && g->cfg.kick)
		g->cfg.kick(g->cfg.arg, q);
	return 0;
}

static int flush_all(struct vq_vsg *g)
{
	int r = vsg_flush_q(g, VQ_VSOCK_TXQ);
	int s = vsg_flush_q(g, VQ_VSOCK_RXQ);
	int t = g->cfg.ev ? vsg_flush_q(g, VQ_VSOCK_EVQ) : 0;

	return r < 0 ? r : s < 0 ? s : t;
}

static bool config_ok(const struct vq_vsg_config *cfg)
{
	for (unsigned i = 0; i < VQ_ARRAY_SIZE(cfg->reserved); i++)
		if (cfg->reserved[i])
			return false;
	return cfg->rx && cfg->tx && cfg->cid >= 3 && cfg->cid <= 0xffffffffull &&
	       cfg->tx_pkt_max <= VQ_VSOCK_MAX_PKT &&
	       cfg->rx_buf_size <= (1u << 30) && cfg->buf_alloc <= (1u << 30);
}

/* How many slots of slot bytes fit the area, at most the queue's size. */
static unsigned slots(const struct vq_vsg_area *a, uint32_t slot, unsigned num)
{
	uint64_t n = a->hva ? a->size / slot : 0;

	return n < num ? (unsigned)n : num;
}

int vq_vsg_new(const struct vq_vsg_config *cfg, struct vq_vsg **out)
{
	struct vq_vsg *g;
	unsigned i;

	*out = NULL;
	if (!config_ok(cfg))
		return -EINVAL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->cfg = *cfg;
	if (!g->cfg.rx_buf_size)
		g->cfg.rx_buf_size = 4096;
	if (!g->cfg.tx_pkt_max)
		g->cfg.tx_pkt_max = VQ_VSOCK_MAX_PKT;
	if (!g->cfg.buf_alloc)
		g->cfg.buf_alloc = 256 * 1024;
	if (!g->cfg.backlog)
		g->cfg.backlog = VSG_BACKLOG;
	g->rx_slot = (VQ_VSOCK_HDR_SIZE + g->cfg.rx_buf_size + 63) & ~63u;
	g->tx_slot = (VQ_VSOCK_HDR_SIZE + g->cfg.tx_pkt_max + 63) & ~63u;
	g->nrx = slots(&cfg->rx_area, g->rx_slot, vq_drv_num(cfg->rx));
	g->ntx = slots(&cfg->tx_area, g->tx_slot, vq_drv_num(cfg->tx));
	if (cfg->ev)
		g->nev = slots(&cfg->ev_area, VSG_EV_SIZE,
			       vq_drv_num(cfg->ev) < VSG_EV_SLOTS ?
			       vq_drv_num(cfg->ev) : VSG_EV_SLOTS);
	g->tx_free = calloc(g->ntx ? g->ntx : 1, sizeof(*g->tx_free));
	if (!g->tx_free || !g->nrx || !g->ntx || (cfg->ev && !g->nev)) {
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

void vq_vsg_free(struct vq_vsg *g)
{
	if (!g)
		return;
	g->freeing = true;
	while (g->conns)
		vsg_conn_unlink(g, g->conns);
	free(g->tx_free);
	free(g);
}

int vsg_post_rx(struct vq_vsg *g, unsigned i)
{
	struct vq_vsg_area *a = &g->cfg.rx_area;
	struct vq_seg s = { a->gpa + (uint64_t)i * g->rx_slot,
			    VQ_VSOCK_HDR_SIZE + g->cfg.rx_buf_size };
	int r;

	g->dirty[VQ_VSOCK_RXQ] = true;
	r = vq_drv_add(g->cfg.rx, &s, 0, 1, tok(i));
	return r < 0 ? ring_failed(g, VQ_VSOCK_RXQ, r) : 0;
}

static int post_ev(struct vq_vsg *g, unsigned i)
{
	struct vq_seg s = { g->cfg.ev_area.gpa + (uint64_t)i * VSG_EV_SIZE,
			    sizeof(struct vq_vsock_event) };
	int r;

	g->dirty[VQ_VSOCK_EVQ] = true;
	r = vq_drv_add(g->cfg.ev, &s, 0, 1, tok(i));
	return r < 0 ? ring_failed(g, VQ_VSOCK_EVQ, r) : 0;
}

int vq_vsg_start(struct vq_vsg *g)
{
	unsigned i;
	int r;

	if (g->err)
		return g->err;
	for (i = 0; i < g->nrx; i++) {
		r = vsg_post_rx(g, i);
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
int vsg_send_parts(struct vq_vsg *g, const void *a, uint32_t na,
		   const void *b, uint32_t nb)
{
	struct vq_seg s[2];
	unsigned slot, n = 0;
	uint64_t gpa;
	uint8_t *hva;
	int r;

	if (g->err)
		return g->err;
	if ((uint64_t)na + nb > g->tx_slot || na + nb == 0)
		return -EINVAL;
	if (!g->tx_nfree)
		return -ENOSPC;
	slot = g->tx_free[g->tx_nfree - 1];
	gpa = g->cfg.tx_area.gpa + (uint64_t)slot * g->tx_slot;
	hva = g->cfg.tx_area.hva + (uint64_t)slot * g->tx_slot;
	if (na) {
		memcpy(hva, a, na);
		s[n++] = (struct vq_seg){ gpa, na };
	}
	if (nb) {
		memcpy(hva + na, b, nb);
		s[n++] = (struct vq_seg){ gpa + na, nb };
	}
	r = vq_drv_add(g->cfg.tx, s, n, 0, tok(slot));
	if (r < 0)
		return ring_failed(g, VQ_VSOCK_TXQ, r);
	g->tx_nfree--;
	g->dirty[VQ_VSOCK_TXQ] = true;
	g->st.tx_pkts++;
	return 0;
}

int vq_vsg_send_bytes(struct vq_vsg *g, const void *buf, uint32_t n)
{
	int r = vsg_send_parts(g, buf, n, NULL, 0);

	if (r == 0)
		r = vsg_flush_q(g, VQ_VSOCK_TXQ);
	return r;
}

int vq_vsg_reap_tx(struct vq_vsg *g)
{
	void *tokens[32];
	uint32_t lens[32];
	int n, i, total = 0;

	if (g->err)
		return g->err;
	/* TX completions free slots. */
	while ((n = vq_drv_get_burst(g->cfg.tx, tokens, lens, 32)) > 0) {
		for (i = 0; i < n; i++) {
			unsigned s = untok(tokens[i]);

			if (s >= g->ntx || g->tx_nfree >= g->ntx)
				return vsg_bad_token(g, VQ_VSOCK_TXQ, s, g->ntx);
			g->tx_free[g->tx_nfree++] = s;
		}
		total += n;
	}
	return n < 0 ? ring_failed(g, VQ_VSOCK_TXQ, n) : total;
}

/* 5.10.6.7: TRANSPORT_RESET closes every connection (Linux resets every
 * socket); listening goes on. */
static void event(struct vq_vsg *g, const uint8_t *buf, uint32_t len)
{
	struct vq_vsock_event e;

	if (len < sizeof(e)) {
		vsg_bad(g, "5.10.6.7: event of %u bytes, less than the %zu of an event",
			len, sizeof(e));
		return;
	}
	memcpy(&e, buf, sizeof(e));
	if (vq_le32(e.id) != VQ_VSOCK_EVENT_TRANSPORT_RESET) {
		vsg_bad(g, "5.10.6.7: event id %u unknown", vq_le32(e.id));
		return;
	}
	g->st.resets++;
	for (struct vq_vsg_conn *c = g->conns; c; c = c->next) {
		c->state = VQ_VSG_CLOSED;
		c->pend = 0;
	}
}

const uint8_t *vsg_rx_slot(const struct vq_vsg *g, unsigned s)
{
	return g->cfg.rx_area.hva + (uint64_t)s * g->rx_slot;
}

static bool handle_ev(struct vq_vsg *g, unsigned s, uint32_t len)
{
	event(g, g->cfg.ev_area.hva + (uint64_t)s * VSG_EV_SIZE, len);
	return false;
}

/* Queue q's used buffers (of nslots slots): each handled, then posted
 * again unless handle kept it.  How many, or -errno. */
static int poll_q(struct vq_vsg *g, unsigned q, unsigned nslots,
		  bool (*handle)(struct vq_vsg *g, unsigned s, uint32_t len),
		  int (*post)(struct vq_vsg *g, unsigned s))
{
	void *tokens[32];
	uint32_t lens[32];
	int n, i, r, total = 0;

	while ((n = vq_drv_get_burst(qdrv(g, q), tokens, lens, 32)) > 0) {
		for (i = 0; i < n; i++) {
			unsigned s = untok(tokens[i]);

			if (s >= nslots)
				return vsg_bad_token(g, q, s, nslots);
			if (handle(g, s, lens[i]))
				continue;
			r = post(g, s);
			if (r < 0)
				return r;
		}
		total += n;
	}
	return n < 0 ? ring_failed(g, q, n) : total;
}

int vq_vsg_poll(struct vq_vsg *g)
{
	int total, n, r;

	total = vq_vsg_reap_tx(g);
	if (total < 0)
		return total;
	n = poll_q(g, VQ_VSOCK_RXQ, g->nrx, vsg_rx_packet, vsg_post_rx);
	if (n < 0)
		return n;
	total += n;
	if (g->cfg.ev) {
		n = poll_q(g, VQ_VSOCK_EVQ, g->nev, handle_ev, post_ev);
		if (n < 0)
			return n;
		total += n;
	}
	vsg_send_pending(g);
	r = flush_all(g);
	return r < 0 ? r : total;
}

int vq_vsg_error(const struct vq_vsg *g)
{
	return g->err;
}

const char *vq_vsg_error_msg(const struct vq_vsg *g)
{
	return g->err_msg;
}

const char *vq_vsg_last_bad(const struct vq_vsg *g)
{
	return g->bad_msg;
}

const struct vq_vsg_stats *vq_vsg_stats(const struct vq_vsg *g)
{
	return &g->st;
}

unsigned vq_vsg_tx_free(const struct vq_vsg *g)
{
	return g->tx_nfree;
}
