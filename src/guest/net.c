// SPDX-License-Identifier: MIT
/*
 * A userspace virtio-net driver (virtq/guest/net.h): fixed slots in the
 * caller's guest memory, TX slots on a free stack, RX buffers given back
 * once their frame is handled.  The token of a buffer is its slot + 1.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <virtq/guest/net.h>

#include "cpu.h"
#include "util.h"

#define NETG_MSG_MAX 192u
/* Buffers moved per ring call: a stack array's worth. */
#define NETG_CHUNK 64u

struct vq_netg {
	struct vq_netg_config cfg;
	uint32_t hdr_len;
	bool mrg;                       /* VQ_NET_F_MRG_RXBUF */
	bool prefetchw;                 /* the CPU has PREFETCHW */
	uint32_t rx_slot, tx_slot;
	unsigned nrx, ntx;
	/* TX: free slots, the next one on top */
	uint32_t *tx_free;
	unsigned tx_nfree;
	/* RX: the used buffers taken and not yet given back, in the order
	 * the device used them: [0, rx_done) belong to frames returned,
	 * [rx_done, rx_ntaken) to the frame whose rest is still to come */
	struct vq_netg_buf *rx_taken;
	uint32_t *rx_taken_slot;        /* and their slots */
	unsigned rx_ntaken, rx_done;
	unsigned rx_need;               /* that frame's buffers; 0: none begun */
	uint32_t rx_next;               /* slot after the last one taken */
	uint32_t rx_len;
	int err;                        /* broken: every call fails with it */
	char err_msg[NETG_MSG_MAX];
};

static const char *const qname[2] = { "rx", "tx" };

static void *tok(unsigned slot)
{
	return (void *)(uintptr_t)(slot + 1);
}

static struct vq_drv *qdrv(const struct vq_netg *g, enum vq_net_role q)
{
	return q == VQ_NET_RX ? g->cfg.rx : g->cfg.tx;
}

static int broken(struct vq_netg *g, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int broken(struct vq_netg *g, int err, const char *fmt, ...)
{
	va_list ap;

	if (g->err)
		return g->err;
	g->err = err;
	va_start(ap, fmt);
	vsnprintf(g->err_msg, sizeof(g->err_msg), fmt, ap);
	va_end(ap);
	return err;
}

/* A ring call failed with r: when the ring is broken (the device broke a
 * rule), so is the driver, saying why.  Returns r. */
static int ring_failed(struct vq_netg *g, enum vq_net_role q, int r)
{
	struct vq_drv *d = qdrv(g, q);

	if (vq_drv_error(d))
		broken(g, r, "%s (net %s queue)", vq_drv_error_msg(d), qname[q]);
	return r;
}

/* Publish what was added to queue q and kick if the ring says so. */
static int publish(struct vq_netg *g, enum vq_net_role q)
{
	int r = vq_drv_kick_prepare(qdrv(g, q));

	if (r < 0)
		return ring_failed(g, q, r);
	if (r > 0 && g->cfg.kick)
		return g->cfg.kick(g->cfg.arg, q);
	return 0;
}

static uint32_t rx_buf_size(uint32_t size)
{
	return size ? size : VQ_NETG_RX_BUF_DEFAULT;
}

static uint32_t tx_frame_max(uint32_t max)
{
	return max ? max : VQ_NETG_TX_FRAME_DEFAULT;
}

/* Slots start on a cache line of their own. */
static uint32_t slot_round(uint32_t bytes)
{
	return (bytes + 63) & ~63u;
}

uint64_t vq_netg_rx_area_size(uint32_t rx_buf, unsigned num)
{
	return (uint64_t)num * slot_round(rx_buf_size(rx_buf));
}

/* A slot's header room is the largest header's, whatever was negotiated. */
uint64_t vq_netg_tx_area_size(uint32_t frame_max, unsigned num)
{
	return (uint64_t)num * slot_round(12 + tx_frame_max(frame_max));
}

static bool config_ok(const struct vq_netg_config *cfg)
{
	return VQ_RESERVED_ZERO(cfg) && (cfg->rx || cfg->tx) &&
	       cfg->rx_buf_size <= (1u << 30) &&
	       (!cfg->rx_buf_size || cfg->rx_buf_size > 12) &&
	       cfg->tx_frame_max <= VQ_NET_MAX_FRAME;
}

/* How many slots of slot bytes fit the area, at most the ring's size. */
static unsigned slots(const struct vq_netg_area *a, uint32_t slot, const struct vq_drv *q)
{
	uint64_t n = a->hva ? a->size / slot : 0;

	return n < vq_drv_num(q) ? (unsigned)n : vq_drv_num(q);
}

int vq_netg_new(const struct vq_netg_config *cfg, struct vq_netg **out)
{
	const struct vq_drv *any = cfg->rx ? cfg->rx : cfg->tx;
	struct vq_netg *g;
	uint64_t f;
	unsigned i;

	*out = NULL;
	if (!config_ok(cfg))
		return -EINVAL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->cfg = *cfg;
	f = vq_drv_features(any);
	g->hdr_len = vq_net_hdr_len(f);
	g->mrg = f & VQ_BIT(VQ_NET_F_MRG_RXBUF);
	g->prefetchw = vq_has_prefetchw();
	g->rx_slot = slot_round(rx_buf_size(cfg->rx_buf_size));
	g->tx_slot = slot_round(12 + tx_frame_max(cfg->tx_frame_max));
	g->cfg.rx_buf_size = rx_buf_size(cfg->rx_buf_size);
	g->cfg.tx_frame_max = tx_frame_max(cfg->tx_frame_max);
	if (cfg->rx)
		g->nrx = slots(&cfg->rx_area, g->rx_slot, cfg->rx);
	if (cfg->tx)
		g->ntx = slots(&cfg->tx_area, g->tx_slot, cfg->tx);
	if ((cfg->rx && !g->nrx) || (cfg->tx && !g->ntx)) {
		free(g);
		return -EINVAL;
	}
	g->tx_free = calloc(g->ntx ? g->ntx : 1, sizeof(*g->tx_free));
	g->rx_taken = calloc(g->nrx ? g->nrx : 1, sizeof(*g->rx_taken));
	g->rx_taken_slot = calloc(g->nrx ? g->nrx : 1, sizeof(*g->rx_taken_slot));
	if (!g->tx_free || !g->rx_taken || !g->rx_taken_slot) {
		vq_netg_free(g);
		return -ENOMEM;
	}
	/* slot 0 on top: the first burst goes out in address order */
	for (i = 0; i < g->ntx; i++)
		g->tx_free[g->tx_nfree++] = g->ntx - 1 - i;
	*out = g;
	return 0;
}

void vq_netg_free(struct vq_netg *g)
{
	if (!g)
		return;
	free(g->tx_free);
	free(g->rx_taken);
	free(g->rx_taken_slot);
	free(g);
}

int vq_netg_error(const struct vq_netg *g)
{
	return g->err;
}

const char *vq_netg_error_msg(const struct vq_netg *g)
{
	return g->err_msg;
}

uint32_t vq_netg_hdr_len(const struct vq_netg *g)
{
	return g->hdr_len;
}

/* Post receive slots slot[0, n) (n <= NETG_CHUNK).  Each has its ring
 * slot: it was posted or came back from the ring. */
static int rx_post(struct vq_netg *g, const uint32_t *slot, unsigned n)
{
	struct vq_seg seg[NETG_CHUNK];
	void *t[NETG_CHUNK];
	unsigned i;
	int r;

	for (i = 0; i < n; i++) {
		seg[i] = (struct vq_seg){ g->cfg.rx_area.gpa + (uint64_t)slot[i] * g->rx_slot,
					  g->cfg.rx_buf_size };
		t[i] = tok(slot[i]);
	}
	r = vq_drv_add_burst(g->cfg.rx, seg, t, n, true);
	if (r < 0)
		return ring_failed(g, VQ_NET_RX, r);
	return (unsigned)r == n ? 0 : -ENOSPC;
}

int vq_netg_start(struct vq_netg *g)
{
	uint32_t slot[NETG_CHUNK];
	unsigned i = 0, k;
	int r;

	if (g->err)
		return g->err;
	if (!g->cfg.rx)
		return 0;
	while (i < g->nrx) {
		for (k = 0; k < NETG_CHUNK && i < g->nrx; k++)
			slot[k] = i++;
		if ((r = rx_post(g, slot, k)) < 0)
			return r;
	}
	return publish(g, VQ_NET_RX);
}

/* ---- TX ---- */

/* Fixed stores, not a call: one per frame. */
static void hdr_zero(uint8_t *p, uint32_t hdr_len)
{
	memset(p, 0, 10);
	if (hdr_len == 12)
		memset(p + 10, 0, 2);
}

static uint8_t *tx_slot_hva(const struct vq_netg *g, uint32_t slot)
{
	return g->cfg.tx_area.hva + (uint64_t)slot * g->tx_slot;
}

int vq_netg_tx_reserve(struct vq_netg *g, uint8_t **frame, unsigned n)
{
	unsigned room, i;

	if (g->err)
		return g->err;
	if (!g->cfg.tx)
		return -EINVAL;
	room = vq_drv_free_slots(g->cfg.tx);
	if (n > g->tx_nfree)
		n = g->tx_nfree;
	if (n > room)
		n = room;
	for (i = 0; i < n; i++)
		frame[i] = tx_slot_hva(g, g->tx_free[g->tx_nfree - 1 - i]) + g->hdr_len;
	return (int)n;
}

int vq_netg_tx_post(struct vq_netg *g, const uint32_t *len,
		    const struct vq_net_hdr *hdr, unsigned n)
{
	struct vq_seg seg[NETG_CHUNK];
	void *t[NETG_CHUNK];
	unsigned posted = 0;
	int r = 0;

	if (g->err)
		return g->err;
	if (!g->cfg.tx || n > g->tx_nfree)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++)
		if (len[i] > g->cfg.tx_frame_max)
			return -EINVAL;
	while (posted < n) {
		unsigned k = n - posted < NETG_CHUNK ? n - posted : NETG_CHUNK, i;

		for (i = 0; i < k; i++) {
			uint32_t slot = g->tx_free[g->tx_nfree - 1 - i];
			uint8_t *p = tx_slot_hva(g, slot);

			if (hdr)
				vq_net_hdr_encode(p, g->hdr_len, &hdr[posted + i]);
			else
				hdr_zero(p, g->hdr_len);
			seg[i] = (struct vq_seg){ g->cfg.tx_area.gpa + (uint64_t)slot * g->tx_slot,
						  g->hdr_len + len[posted + i] };
			t[i] = tok(slot);
		}
		r = vq_drv_add_burst(g->cfg.tx, seg, t, k, false);
		if (r < 0)
			return ring_failed(g, VQ_NET_TX, r);
		g->tx_nfree -= (unsigned)r;
		posted += (unsigned)r;
		if ((unsigned)r < k)
			break;
	}
	if (posted && (r = publish(g, VQ_NET_TX)) < 0)
		return r;
	return (int)posted;
}

int vq_netg_tx_reap(struct vq_netg *g, unsigned max)
{
	void *t[NETG_CHUNK];
	uint32_t lens[NETG_CHUNK];
	unsigned total = 0;
	int n, i;

	if (g->err)
		return g->err;
	if (!g->cfg.tx)
		return -EINVAL;
	for (;;) {
		unsigned want = max && max - total < NETG_CHUNK ? max - total : NETG_CHUNK;

		if (want == 0 || (n = vq_drv_get_burst(g->cfg.tx, t, lens, want)) == 0)
			break;
		if (n < 0)
			return ring_failed(g, VQ_NET_TX, n);
		for (i = 0; i < n; i++) {
			uintptr_t s = (uintptr_t)t[i] - 1;

			/* the ring checked the ids: this would be our bug,
			 * but it must not become a wild write */
			if (s >= g->ntx || g->tx_nfree >= g->ntx)
				return broken(g, -EPROTO, "used buffer of slot %lu on the net tx "
					      "queue, which has %u slots", (unsigned long)s, g->ntx);
			g->tx_free[g->tx_nfree++] = (uint32_t)s;
			/* The device is done with it and we write it next
			 * (a stack): ask for its line now, in parallel with
			 * the rest, not store by store. */
			vq_prefetch_w(g->prefetchw, tx_slot_hva(g, (uint32_t)s));
		}
		total += (unsigned)n;
		if ((unsigned)n < want)
			break;
	}
	return (int)total;
}

unsigned vq_netg_tx_free(const struct vq_netg *g)
{
	return g->tx_nfree;
}

unsigned vq_netg_tx_inflight(const struct vq_netg *g)
{
	return g->ntx - g->tx_nfree;
}

/* ---- RX ---- */

/* The frame that begins with buffer b: how many buffers it takes, or
 * -errno. */
static int rx_frame_bufs(struct vq_netg *g, const struct vq_netg_buf *b)
{
	unsigned nb;

	if (b->len < g->hdr_len)
		return broken(g, -EPROTO, "5.1.6.4: a used receive buffer of %u bytes "
			      "is shorter than the %u-byte header", b->len, g->hdr_len);
	/* num_buffers, bytes 10-11 (5.1.6); without MRG_RXBUF a frame is
	 * one buffer whatever it says (Linux reads it only with the
	 * feature) */
	if (!g->mrg)
		return 1;
	nb = vq_net_rd16(b->data + 10);
	if (nb == 0 || nb > g->nrx)
		return broken(g, -EPROTO, "5.1.6.4: num_buffers %u: a frame takes 1 to "
			      "the %u receive buffers posted", nb, g->nrx);
	return (int)nb;
}

/*
 * Each used buffer joins the frame in progress or begins one; a frame is
 * handed out once its last buffer is in.  The state lives in locals while
 * buffers are taken (the stores into the taken arrays would otherwise
 * make the compiler reload it for each) and goes back to g at the end.
 */
int vq_netg_rx_burst(struct vq_netg *g, struct vq_netg_frame *f, unsigned n)
{
	void *t[NETG_CHUNK];
	uint32_t lens[NETG_CHUNK];
	unsigned got = 0, ntaken = g->rx_ntaken, done = g->rx_done, need = g->rx_need;
	const unsigned nrx = g->nrx;
	uint32_t flen = g->rx_len;
	int k = 0, i, r = 0;

	if (g->err)
		return g->err;
	if (!g->cfg.rx)
		return -EINVAL;
	while (got < n) {
		/* the rest of the frame begun, and one buffer for each
		 * other frame wanted */
		unsigned want = n - got + (need ? need - (ntaken - done) - 1 : 0);

		if (want > NETG_CHUNK)
			want = NETG_CHUNK;
		k = vq_drv_get_burst(g->cfg.rx, t, lens, want);
		if (k < 0) {
			r = ring_failed(g, VQ_NET_RX, k);
			break;
		}
		for (i = 0; i < k; i++) {
			uintptr_t s = (uintptr_t)t[i] - 1;
			struct vq_netg_buf *b = &g->rx_taken[ntaken];

			/* the ring checked the ids: this would be our bug,
			 * but it must not become a wild write */
			if (unlikely(s >= nrx || ntaken >= nrx)) {
				r = broken(g, -EPROTO, "used buffer of slot %lu on the net rx "
					   "queue, which has %u slots", (unsigned long)s, nrx);
				break;
			}
			b->data = g->cfg.rx_area.hva + (uint64_t)s * g->rx_slot;
			b->addr = g->cfg.rx_area.gpa + (uint64_t)s * g->rx_slot;
			b->len = lens[i];
			g->rx_taken_slot[ntaken++] = (uint32_t)s;
			if (!need) {
				if ((r = rx_frame_bufs(g, b)) < 0)
					break;
				need = (unsigned)r;
				flen = b->len - g->hdr_len;
			} else {
				flen += b->len;
			}
			if (ntaken - done < need)
				continue;
			f[got++] = (struct vq_netg_frame){ flen, need, &g->rx_taken[done] };
			done = ntaken;
			need = 0;
		}
		if (r < 0 || (unsigned)k < want)
			break;
	}
	if (ntaken > g->rx_ntaken)
		g->rx_next = g->rx_taken_slot[ntaken - 1] + 1 < nrx ?
			     g->rx_taken_slot[ntaken - 1] + 1 : 0;
	g->rx_ntaken = ntaken;
	g->rx_done = done;
	g->rx_need = need;
	g->rx_len = flen;
	return r < 0 ? r : (int)got;
}

int vq_netg_rx_repost(struct vq_netg *g)
{
	unsigned i, k;
	int r;

	if (g->err)
		return g->err;
	if (!g->cfg.rx)
		return -EINVAL;
	if (!g->rx_done)
		return 0;
	for (i = 0; i < g->rx_done; i += k) {
		k = g->rx_done - i < NETG_CHUNK ? g->rx_done - i : NETG_CHUNK;
		if ((r = rx_post(g, g->rx_taken_slot + i, k)) < 0)
			return r;
	}
	/* the frame still arriving keeps its buffers, now first */
	k = g->rx_ntaken - g->rx_done;
	memmove(g->rx_taken, g->rx_taken + g->rx_done, k * sizeof(*g->rx_taken));
	memmove(g->rx_taken_slot, g->rx_taken_slot + g->rx_done,
		k * sizeof(*g->rx_taken_slot));
	g->rx_ntaken = k;
	g->rx_done = 0;
	return publish(g, VQ_NET_RX);
}

unsigned vq_netg_rx_taken(const struct vq_netg *g)
{
	return g->rx_done;
}

/* Buffers go out in slot order (vq_netg_start) and back in the order they
 * came (vq_netg_rx_repost), so a device using them in order fills the
 * slot after the last one taken. */
const uint8_t *vq_netg_rx_next(const struct vq_netg *g)
{
	if (!g->cfg.rx)
		return NULL;
	return g->cfg.rx_area.hva + (uint64_t)g->rx_next * g->rx_slot;
}
