// SPDX-License-Identifier: MIT
/*
 * virtq-perf net: drive a vhost-user-net backend the way a guest would, with
 * our vhost-user front-end (the virtio-user role).
 *
 *   tx  we send frames of --size bytes as fast as the backend takes them
 *       (testpmd txonly); the rate is the completions per second.  Like a
 *       guest's stack, we write each frame's virtio-net header and its
 *       protocol headers before we post it, so the backend's reads cost
 *       what they cost with a real guest (lines the sender just wrote)
 *   rx  we post receive buffers and count the frames that arrive (rxonly)
 *   rr  one frame out, wait for it to come back from a loopback backend;
 *       round-trip latency percentiles (netperf TCP_RR's shape)
 *
 * The backend is either at --socket-path or started by us (--backend CMD,
 * run through /bin/sh with "--socket-path TMP" appended) and stopped at the
 * end.  --json prints one object with "ops_per_sec", so `virtq-perf ab`
 * can pair runs of it.  The options are net_opts.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <virtq/net.h>
#include <virtq/runtime.h>
#include <virtq/guest/frontend.h>

#include "backend.h"
#include "dirty_log.h"
#include "net.h"
#include "perf.h"
#include "prefetch.h"

#define RXBUF NET_RXBUF

struct net_run {
	struct net_opts o;
	struct vq_vhu_frontend *f;
	struct vq_drv *rxq, *txq;
	int rx_kick, rx_call, tx_kick, tx_call;
	uint32_t hdr_len;
	uint8_t *txmem;                 /* queue_size frames */
	uint64_t txgpa;
	uint32_t txstride;
	uint32_t txseq;
	uint8_t txhdrs[42];             /* template of what tx writes per frame */
	bool prefetchw;                 /* the CPU has PREFETCHW */
	uint8_t *rxmem;                 /* queue_size buffers of RXBUF */
	uint64_t rxaddr;                /* the receive buffers, as descriptors carry them */
	struct vq_rt_counters tc, rc;   /* kicks sent, calls received ... */
	uint64_t kicks_owed, kicks_dropped;     /* --drop-kicks */
	uint64_t pkts, bytes, bad;
	struct perf_dlog dlog;          /* --dirty-log: the backend's log */
	uint64_t iotlb_misses;          /* --iommu: asked by the backend */
	struct perf_dlog_watch wring;   /* and the ring areas it writes */
	uint64_t unlogged, ring_pages;
	double elapsed;
	uint64_t features;              /* negotiated */
	double c2c_before, c2c_after;   /* placement probe, ns; NaN: none */
	enum perf_place place;
	double *lat;                    /* rr: microseconds */
	uint64_t nlat, lat_cap;
	struct perf_backend be;
	char sock[100];
};

/* ---- the backend we start ---- */

/* It serves once its socket accepts. */
static bool backend_ready(void *arg)
{
	struct net_run *n = arg;

	if (!perf_unix_accepts(n->sock))
		return false;
	/* That probe was a connection: let the backend see it end before the
	 * real one. */
	usleep(20000);
	return true;
}

/* "CMD [--used-batch N] [--busy-poll U] [ARG...] --socket-path TMP" */
static int backend_start(struct net_run *n)
{
	const char *args[PERF_BACKEND_MAX_ARGS + 7];
	unsigned k;
	int r;

	r = perf_backend_mkdir(&n->be, "virtq-perf net", "net");
	if (r < 0)
		return r;
	perf_backend_path(&n->be, "net.sock", n->sock, sizeof(n->sock));
	k = perf_backend_opts_words(&n->o.bo, args, 0);
	args[k++] = "--socket-path";
	args[k++] = n->sock;
	args[k] = NULL;
	return perf_backend_start(&n->be, n->o.backend, args, backend_ready, n);
}

/* ---- set-up ---- */

static uint64_t wanted_features(const struct net_opts *o)
{
	uint64_t f = VQ_BIT(VQ_F_VERSION_1);

	if (o->packed)
		f |= VQ_BIT(VQ_F_RING_PACKED);
	if (o->in_order)
		f |= VQ_BIT(VQ_F_IN_ORDER);
	if (o->event_idx)
		f |= VQ_BIT(VQ_F_EVENT_IDX);
	if (o->mrg)
		f |= VQ_BIT(VQ_NET_F_MRG_RXBUF);
	if (o->indirect)
		f |= VQ_BIT(VQ_F_INDIRECT_DESC);
	return f;
}

static void frame_fill(uint8_t *p, unsigned size, uint32_t seq)
{
	static const uint8_t dst[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };
	static const uint8_t src[6] = { 0x52, 0x54, 0x00, 0x00, 0x00, 0x02 };

	memcpy(p, dst, 6);
	memcpy(p + 6, src, 6);
	p[12] = 0x88;
	p[13] = 0xb5;
	for (unsigned i = 14; i < size; i++)
		p[i] = (uint8_t)(i + seq);
	if (size >= 18)
		memcpy(p + 14, &seq, 4);
}

/* What a sender writes into each frame before it posts it: the virtio-net
 * header and the Ethernet, IPv4 and UDP headers (testpmd txonly copies the
 * same 42 bytes per packet), with a sequence number in them.  (Writing the
 * whole first line from a template in fewer, wider stores was no faster:
 * measured in 2d39bed.) */
static void tx_write(struct net_run *n, uint8_t *p)
{
	unsigned k = n->o.size < sizeof(n->txhdrs) ? n->o.size : sizeof(n->txhdrs);

	memset(p, 0, n->hdr_len);
	p += n->hdr_len;
	memcpy(p, n->txhdrs, k);
	if (k >= 18)
		memcpy(p + 14, &n->txseq, 4);
	n->txseq++;
}

static int post_rx(struct net_run *n, unsigned i)
{
	struct vq_seg s = { n->rxaddr + (uint64_t)i * RXBUF, RXBUF };

	return vq_drv_add(n->rxq, &s, 0, 1, (void *)(uintptr_t)(i + 1));
}

/* Publish and kick as the ring says; with --drop-kicks, every Nth kick it
 * asks for is not sent. */
static int net_kick(struct net_run *n, struct vq_drv *q, int fd,
		    struct vq_rt_counters *c)
{
	int r;

	if (!n->o.drop_kicks)
		return vq_rt_drv_kick(q, fd, c);
	r = vq_drv_kick_prepare(q);
	if (r <= 0)
		return r;
	if (++n->kicks_owed % n->o.drop_kicks == 0) {
		n->kicks_dropped++;
		return 0;
	}
	if ((r = vq_evt_signal(fd)) < 0)
		return r;
	c->kicks_sent++;
	return 1;
}

static int net_setup(struct net_run *n)
{
	struct net_opts *o = &n->o;
	char err[256] = "";
	struct vq_vhu_frontend_config fc = {
		.features = wanted_features(o), .nqueues = 2,
		.queue_size = (uint16_t)o->queue_size,
		.mem_size = 0, .hugetlb = o->hugetlb,
		.indirect_max = o->indirect ? 16 : 0,
		.iommu_page = o->iommu_page,
		.err = err, .errlen = sizeof(err),
	};
	uint64_t need;
	const char *path = o->socket_path ? o->socket_path : n->sock;
	unsigned i;
	int r;

	n->txstride = (12 + o->size + 63) & ~63u;
	need = (uint64_t)o->queue_size * (n->txstride + RXBUF) + (8u << 20);
	fc.mem_size = need < (16u << 20) ? 16u << 20 : (need + (2u << 20) - 1) & ~((2ull << 20) - 1);
	r = vq_vhu_frontend_connect(path, &fc, &n->f);
	if (r == 0)
		r = vq_vhu_frontend_start(n->f);
	if (r < 0) {
		fprintf(stderr, "virtq-perf net: %s: %s\n", path,
			err[0] ? err : n->f ? vq_vhu_frontend_error_msg(n->f) : strerror(-r));
		return r;
	}
	/* A backend may refuse what we want: say what we got. */
	if ((vq_vhu_frontend_features(n->f) & fc.features) != fc.features) {
		fprintf(stderr, "virtq-perf net: backend does not offer features 0x%" PRIx64 "\n",
			fc.features & ~vq_vhu_frontend_features(n->f));
		return -ENOTSUP;
	}
	n->features = vq_vhu_frontend_features(n->f);
	if (o->dirty_log) {
		r = perf_dlog_on(&n->dlog, n->f, "virtq-perf net");
		if (r == 0)
			r = perf_dlog_watch_rings(&n->wring, n->f, 2);
		if (r < 0)
			return r;
	}
	n->prefetchw = perf_cpu_prefetchw();
	n->hdr_len = vq_net_hdr_len(n->features);
	n->rxq = vq_vhu_frontend_queue(n->f, 0);
	n->txq = vq_vhu_frontend_queue(n->f, 1);
	n->rx_kick = vq_vhu_frontend_kick_fd(n->f, 0);
	n->rx_call = vq_vhu_frontend_call_fd(n->f, 0);
	n->tx_kick = vq_vhu_frontend_kick_fd(n->f, 1);
	n->tx_call = vq_vhu_frontend_call_fd(n->f, 1);
	n->txmem = vq_vhu_frontend_alloc(n->f, (uint64_t)o->queue_size * n->txstride, &n->txgpa);
	n->rxmem = vq_vhu_frontend_alloc(n->f, (uint64_t)o->queue_size * RXBUF, &n->rxaddr);
	if (!n->rxq || !n->txq || !n->txmem || !n->rxmem) {
		fprintf(stderr, "virtq-perf net: front-end set-up failed\n");
		return -ENOMEM;
	}
	for (i = 0; i < o->queue_size; i++) {
		memset(n->txmem + (uint64_t)i * n->txstride, 0, n->hdr_len);
		frame_fill(n->txmem + (uint64_t)i * n->txstride + n->hdr_len, o->size, i);
	}
	frame_fill(n->txhdrs, sizeof(n->txhdrs), 0);
	vq_drv_disable_cb(n->txq);
	vq_drv_disable_cb(n->rxq);
	if (o->dir != D_TX) {
		for (i = 0; i < o->queue_size; i++)
			if ((r = post_rx(n, i)) < 0)
				return r;
		r = net_kick(n, n->rxq, n->rx_kick, &n->rc);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Wait for used buffers on q as --busy-poll says.  1: there may be some. */
static int wait_used(struct net_run *n, struct vq_drv *q, int call_fd,
		     struct vq_rt_counters *c)
{
	struct vq_rt_drv_wait w = {
		.call_fd = call_fd,
		.busy_poll_ns = n->o.busy_poll_us > 0 ? (uint64_t)n->o.busy_poll_us * 1000 : 0,
	};

	if (n->o.busy_poll_us < 0)
		return vq_drv_has_used(q);
	return vq_rt_drv_wait_used(q, &w, 100, c);
}

static bool time_up(struct net_run *n, uint64_t t0, uint64_t *checks)
{
	if (n->o.count && n->pkts >= n->o.count)
		return true;
	/* Polling: the clock every 64 rounds; sleeping: every round (a
	 * round may have waited up to 100 ms). */
	if (n->o.busy_poll_us < 0 && (++*checks & 63) != 0)
		return false;
	return (double)(vq_rt_now_ns() - t0) / 1e9 >= n->o.seconds;
}

/* ---- tx: keep the ring full of frames, count completions ---- */

static int run_tx(struct net_run *n, uint64_t t0)
{
	void *tok[256];
	uint32_t len[256];
	struct vq_seg seg[256];
	unsigned free_list_n = n->o.queue_size, burst = n->o.burst, i;
	uint32_t *free_list = malloc(sizeof(uint32_t) * n->o.queue_size);
	uint64_t checks = 0;
	int r = 0;

	if (!free_list)
		return -ENOMEM;
	for (i = 0; i < free_list_n; i++)
		free_list[i] = n->o.queue_size - 1 - i;
	if (burst > 256)
		burst = 256;
	while (!time_up(n, t0, &checks)) {
		unsigned added = 0, want = burst;

		if (want > free_list_n)
			want = free_list_n;
		/* --drop-kicks: one burst at a time, so that each finds the
		 * backend asleep and owes a kick (see below). */
		if (n->o.drop_kicks && free_list_n < n->o.queue_size)
			want = 0;
		if (want > vq_drv_free_slots(n->txq))
			want = vq_drv_free_slots(n->txq);
		if (n->o.count && want > n->o.count - n->pkts - (n->o.queue_size - free_list_n))
			want = (unsigned)(n->o.count - n->pkts - (n->o.queue_size - free_list_n));
		for (i = 0; i < want; i++) {
			uint32_t b = free_list[free_list_n - 1 - i];

			tx_write(n, n->txmem + (uint64_t)b * n->txstride);
			seg[i].addr = n->txgpa + (uint64_t)b * n->txstride;
			seg[i].len = n->hdr_len + n->o.size;
			tok[i] = (void *)(uintptr_t)(b + 1);
		}
		if (want) {
			r = vq_drv_add_burst(n->txq, seg, tok, want, false);
			if (r < 0)
				goto out;
			/* Frames written but not added are written again
			 * next round. */
			added = (unsigned)r;
			free_list_n -= added;
		}
		if (added && (r = net_kick(n, n->txq, n->tx_kick, &n->tc)) < 0)
			goto out;
		r = vq_drv_get_burst(n->txq, tok, len, 256);
		if (r < 0)
			goto out;
		if (r == 0 && (!free_list_n || !added)) {
			r = wait_used(n, n->txq, n->tx_call, &n->tc);
			if (r < 0)
				goto out;
			continue;
		}
		for (i = 0; i < (unsigned)r; i++) {
			uintptr_t b = (uintptr_t)tok[i];

			if (b == 0 || b > n->o.queue_size) {
				r = -EPROTO;
				goto out;
			}
			free_list[free_list_n++] = (uint32_t)(b - 1);
			/* The backend is done with it and we write it next
			 * (the free list is a stack): ask for its line now,
			 * in parallel with the rest, not store by store. */
			perf_prefetch_for_write(n->prefetchw, n->txmem + (b - 1) * n->txstride);
		}
		n->pkts += (unsigned)r;
		n->bytes += (uint64_t)r * n->o.size;
		/* --drop-kicks: the burst is back; let the backend go to
		 * sleep, so that the next one owes a kick (which is dropped). */
		if (n->o.drop_kicks && free_list_n == n->o.queue_size)
			usleep(2000);
	}
	r = 0;
out:
	free(free_list);
	if (r < 0 && vq_drv_error(n->txq))
		fprintf(stderr, "virtq-perf net: tx queue: %s\n", vq_drv_error_msg(n->txq));
	return r;
}

/* ---- rx ---- */

static uint16_t le16_at(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

/* One used RX buffer: count frames (with MRG_RXBUF the first buffer of a
 * frame says how many follow), optionally check it.  The caller posts it
 * again. */
static int rx_consume(struct net_run *n, void *tok, uint32_t len,
		      unsigned *more, uint32_t *seq_out)
{
	uintptr_t b = (uintptr_t)tok;
	uint8_t *p;

	if (b == 0 || b > n->o.queue_size || len > RXBUF)
		return -EPROTO;
	p = n->rxmem + (uint64_t)(b - 1) * RXBUF;
	/* The backend marks before it publishes the buffer, so the bits
	 * are there when we see it. */
	if (n->dlog.log && n->o.verify &&
	    !perf_dlog_marked(&n->dlog, vq_vhu_frontend_guest_phys(n->f,
				n->rxaddr + (uint64_t)(b - 1) * RXBUF), len))
		n->unlogged++;
	if (*more) {
		(*more)--;
	} else {
		uint16_t nb = n->hdr_len >= 12 ? le16_at(p + 10) : 1;

		if (len < n->hdr_len || nb == 0)
			return -EPROTO;
		*more = nb - 1;
		n->pkts++;
		n->bytes += len - n->hdr_len;
		if (seq_out && len >= n->hdr_len + 18)
			memcpy(seq_out, p + n->hdr_len + 14, 4);
		if (n->o.verify && nb == 1 && len != n->hdr_len + n->o.size)
			n->bad++;
	}
	return 0;
}

/* Post the used RX buffers tok[0, k) again, in one burst. */
static int repost_rx(struct net_run *n, void *const *tok, unsigned k)
{
	struct vq_seg seg[256];
	unsigned i;
	int r;

	for (i = 0; i < k; i++) {
		seg[i].addr = n->rxaddr + (uint64_t)((uintptr_t)tok[i] - 1) * RXBUF;
		seg[i].len = RXBUF;
	}
	r = vq_drv_add_burst(n->rxq, seg, tok, k, true);
	/* Each came back from the ring, so each has its slot back. */
	return r < 0 ? r : (unsigned)r == k ? 0 : -ENOSPC;
}

static int run_rx(struct net_run *n, uint64_t t0)
{
	void *tok[256];
	uint32_t len[256];
	unsigned more = 0, burst = n->o.burst > 256 ? 256 : n->o.burst;
	uint64_t checks = 0;
	int r, i;

	/* --burst at a time, like an RX burst of a NIC driver: buffers given
	 * back in one burst become visible together, so a whole ring at once
	 * would leave the device without any meanwhile. */
	while (!time_up(n, t0, &checks)) {
		r = vq_drv_get_burst(n->rxq, tok, len, burst);
		if (r < 0)
			goto err;
		if (r == 0) {
			r = wait_used(n, n->rxq, n->rx_call, &n->rc);
			if (r < 0)
				goto err;
			continue;
		}
		for (i = 0; i < r; i++) {
			/* --count: count exactly that many; the rest are
			 * just given back. */
			if (n->o.count && n->pkts >= n->o.count && !more)
				continue;
			if (rx_consume(n, tok[i], len[i], &more, NULL) < 0) {
				r = -EPROTO;
				goto err;
			}
		}
		if ((r = repost_rx(n, tok, (unsigned)r)) < 0 ||
		    (r = net_kick(n, n->rxq, n->rx_kick, &n->rc)) < 0)
			goto err;
	}
	return 0;
err:
	if (vq_drv_error(n->rxq))
		fprintf(stderr, "virtq-perf net: rx queue: %s\n", vq_drv_error_msg(n->rxq));
	return r;
}

/* ---- rr: one frame out, wait for it back ---- */

/* Wait until the frame numbered seq comes back or tdead passes: 1 back,
 * 0 not (lost, or the run is over), or -errno.  Other frames that arrive
 * (late answers) are given back. */
static int rr_await(struct net_run *n, uint32_t seq, uint64_t tdead)
{
	for (;;) {
		uint64_t pkts = n->pkts, bytes = n->bytes;
		uint32_t got = ~0u, len;
		unsigned more = 0;
		void *tok;
		int r = vq_drv_get(n->rxq, &tok, &len);

		if (r < 0)
			return r;
		if (r == 0) {
			if (vq_rt_now_ns() >= tdead)
				return 0;
			if ((r = wait_used(n, n->rxq, n->rx_call, &n->rc)) < 0)
				return r;
			continue;
		}
		/* rx_consume counts frames; rr counts transactions */
		r = rx_consume(n, tok, len, &more, &got);
		n->pkts = pkts;
		n->bytes = bytes;
		if (r < 0 || (r = repost_rx(n, &tok, 1)) < 0)
			return r;
		if ((r = net_kick(n, n->rxq, n->rx_kick, &n->rc)) < 0)
			return r;
		if (got == seq)
			return 1;
	}
}

/* A transaction waits for its answer up to 1 s, and never past the end
 * of the run: against a backend that answers nothing, --seconds still
 * ends it.  -ENOMSG: not one transaction was answered. */
static int run_rr(struct net_run *n, uint64_t t0)
{
	uint64_t end = t0 + (uint64_t)(n->o.seconds * 1e9), lost = 0;
	uint32_t seq = 0;
	bool cut = false;
	int r;

	n->lat_cap = 1 << 20;
	n->lat = malloc(sizeof(double) * n->lat_cap);
	if (!n->lat)
		return -ENOMEM;
	while (!(n->o.count && n->pkts >= n->o.count)) {
		struct vq_seg s = { n->txgpa, n->hdr_len + n->o.size };
		uint64_t ts = vq_rt_now_ns(), tdead = ts + 1000000000ull;
		void *tok;
		uint32_t len;
		int back;

		if (ts >= end)
			break;
		if (tdead > end)
			tdead = end;
		frame_fill(n->txmem + n->hdr_len, n->o.size, seq);
		if ((r = vq_drv_add(n->txq, &s, 1, 0, (void *)1)) < 0)
			return r;
		if ((r = net_kick(n, n->txq, n->tx_kick, &n->tc)) < 0)
			return r;
		if ((back = rr_await(n, seq, tdead)) < 0)
			return back;
		/* The TX buffer comes back once the backend consumed it. */
		while ((r = vq_drv_get(n->txq, &tok, &len)) == 0) {
			if (vq_rt_now_ns() > tdead + 1000000000ull)
				return -ETIMEDOUT;
		}
		if (r < 0)
			return r;
		if (back) {
			if (n->nlat < n->lat_cap)
				n->lat[n->nlat++] = (double)(vq_rt_now_ns() - ts) / 1e3;
			n->pkts++;
			n->bytes += n->o.size;
		} else if (tdead < end) {
			lost++;
		} else {
			cut = true;     /* by the end of the run, not lost */
		}
		seq++;
	}
	if ((lost || cut) && !n->pkts)
		return -ENOMSG;
	if (lost)
		fprintf(stderr, "virtq-perf net: %" PRIu64 " transactions got no answer within 1 s\n", lost);
	return 0;
}

static const char *const dir_names[] = { "tx", "rx", "rr" };

/* One-way core-to-core latency between us and the backend's CPU. */
static double probe(const struct net_opts *o)
{
	double ns;

	if (o->peer_cpu < 0)
		return NAN;
	ns = perf_c2c_ns(o->cpu, o->peer_cpu);
	return ns < 0 ? NAN : ns;
}

static void net_report(struct net_run *n)
{
	struct net_opts *o = &n->o;
	double pps = n->elapsed > 0 ? (double)n->pkts / n->elapsed : 0;
	double gbps = n->elapsed > 0 ? (double)n->bytes * 8 / n->elapsed / 1e9 : 0;
	double kpp = n->pkts ? (double)(n->tc.kicks_sent + n->rc.kicks_sent) / (double)n->pkts : 0;
	double wpp = n->pkts ? (double)(n->tc.wakeups + n->rc.wakeups) / (double)n->pkts : 0;
	struct perf_lat l;

	perf_lat_pcts(n->lat, o->dir == D_RR ? n->nlat : 0, &l);
	if (o->json) {
		printf("{\"workload\":\"net\",\"direction\":\"%s\",\"size\":%u,"
		       "\"packed\":%s,\"in_order\":%s,\"event_idx\":%s,\"mrg_rxbuf\":%s,"
		       "\"features\":\"0x%" PRIx64 "\",\"packets\":%" PRIu64 ",\"bytes\":%" PRIu64
		       ",\"seconds\":%.4f,\"ops_per_sec\":%.1f,\"mpps\":%.4f,\"gbps\":%.4f,"
		       "\"kicks_per_pkt\":%.6f,\"wakeups_per_pkt\":%.6f,\"bad\":%" PRIu64
		       ",\"dirty_log\":%s,\"ring_pages\":%" PRIu64 ",\"unlogged\":%" PRIu64
		       ",\"iommu_page\":%" PRIu64 ",\"iotlb_misses\":%" PRIu64
		       ",\"kicks_dropped\":%" PRIu64,
		       dir_names[o->dir], o->size, o->packed ? "true" : "false",
		       o->in_order ? "true" : "false", o->event_idx ? "true" : "false",
		       o->mrg ? "true" : "false", n->features,
		       n->pkts, n->bytes, n->elapsed, pps, pps / 1e6, gbps, kpp, wpp, n->bad,
		       n->o.dirty_log ? "true" : "false", n->ring_pages, n->unlogged,
		       o->iommu_page, n->iotlb_misses, n->kicks_dropped);
		if (!isnan(n->c2c_before) && !isnan(n->c2c_after))
			printf(",\"c2c_ns_before\":%.1f,\"c2c_ns_after\":%.1f",
			       n->c2c_before, n->c2c_after);
		printf(",\"placement\":\"%s\"", perf_place_name(n->place));
		if (o->dir == D_RR && n->nlat)
			printf(",\"p50_us\":%.2f,\"p90_us\":%.2f,\"p99_us\":%.2f,\"p999_us\":%.2f",
			       l.p50, l.p90, l.p99, l.p999);
		printf("}\n");
	} else {
		printf("net %s %u B %s%s%s: %" PRIu64 " %s in %.2f s = %.3f M/s, %.3f Gbit/s, "
		       "kicks/pkt %.4f, wakeups/pkt %.4f\n",
		       dir_names[o->dir], o->size, o->packed ? "packed" : "split",
		       o->in_order ? " in-order" : "", o->mrg ? " mrg" : "",
		       n->pkts, o->dir == D_RR ? "transactions" : "frames", n->elapsed,
		       pps / 1e6, gbps, kpp, wpp);
		if (o->dir == D_RR && n->nlat)
			printf("rr latency us: p50 %.2f p90 %.2f p99 %.2f p99.9 %.2f\n",
			       l.p50, l.p90, l.p99, l.p999);
		if (n->bad)
			printf("%" PRIu64 " frames had the wrong length\n", n->bad);
		if (o->iommu_page)
			printf("behind an IOMMU (%" PRIu64 "-byte entries): %" PRIu64
			       " IOTLB misses\n", o->iommu_page, n->iotlb_misses);
		if (o->dirty_log)
			printf("dirty log on: %" PRIu64 " received buffers or used-ring pages "
			       "unmarked (%" PRIu64 " ring pages changed)\n",
			       n->unlogged, n->ring_pages);
		if (!isnan(n->c2c_before) && !isnan(n->c2c_after))
			printf("placement: %s (c2c %.1f ns before, %.1f ns after; near < %.0f ns)\n",
			       perf_place_name(n->place), n->c2c_before, n->c2c_after,
			       PERF_NEAR_NS);
	}
	fflush(stdout);
}

int perf_net_main(int argc, char **argv)
{
	static struct net_run n;
	uint64_t t0;
	int r;

	memset(&n, 0, sizeof(n));
	net_parse(argc, argv, &n.o);
	signal(SIGPIPE, SIG_IGN);
	n.c2c_before = probe(&n.o);
	if (n.o.backend && backend_start(&n) < 0) {
		perf_backend_stop(&n.be);
		return 1;
	}
	if (n.o.cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(n.o.cpu, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	r = net_setup(&n);
	if (r == 0) {
		t0 = vq_rt_now_ns();
		r = n.o.dir == D_TX ? run_tx(&n, t0) : n.o.dir == D_RX ? run_rx(&n, t0)
								 : run_rr(&n, t0);
		n.elapsed = (double)(vq_rt_now_ns() - t0) / 1e9;
		if (r == -ENOMSG)
			fprintf(stderr, "virtq-perf net: rr: nothing answered in %g s: "
				"is the backend in loopback mode?\n", n.o.seconds);
		else if (r < 0)
			fprintf(stderr, "virtq-perf net: %s: %s\n", dir_names[n.o.dir],
				strerror(-r));
	}
	/* the used rings the backend wrote must be marked too (each buffer
	 * was checked as it came back) */
	if (r == 0 && n.dlog.log) {
		int64_t u = perf_dlog_stop_check(&n.wring, &n.dlog, n.f, 2, &n.ring_pages,
						 "virtq-perf net");

		if (u < 0)
			r = -EIO;
		else
			n.unlogged += (uint64_t)u;
	}
	perf_dlog_watch_free(&n.wring);
	if (n.f)
		n.iotlb_misses = vq_vhu_frontend_iotlb_misses(n.f);
	vq_vhu_frontend_free(n.f);
	perf_backend_stop(&n.be);
	n.c2c_after = probe(&n.o);
	n.place = perf_place_classify(n.c2c_before, n.c2c_after);
	if (r == 0)
		net_report(&n);
	free(n.lat);
	if (r == 0 && n.o.verify && n.bad)
		return 1;
	if (r == 0 && n.unlogged)
		return 1;
	if (r == 0 && n.o.verify && n.iotlb_misses)
		return 1;       /* everything was mapped: the backend lost entries */
	return r < 0 ? 1 : 0;
}
