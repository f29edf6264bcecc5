// SPDX-License-Identifier: MIT
/*
 * virtq-perf net: drive a vhost-user-net backend the way a guest would, with
 * our vhost-user front-end (the virtio-user role) and the library's guest
 * net driver (virtq/guest/net.h) on its rings; this file is the workload.
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
#include <virtq/guest/net.h>

#include "backend.h"
#include "dirty_log.h"
#include "net.h"
#include "perf.h"
#include "profile.h"
#include "rr_bd.h"
#include "tsc.h"

/* Placement probes kept: before, after, and rr's during the run. */
#define NET_PROBES_MAX 64

struct net_run {
	struct net_opts o;
	struct vq_vhu_frontend *f;
	struct vq_netg *g;              /* the guest's driver */
	struct vq_drv *rxq, *txq;
	int rx_kick, rx_call, tx_kick, tx_call;
	uint32_t txseq;
	uint8_t txhdrs[42];             /* template of what tx writes per frame */
	struct vq_rt_counters tc, rc;   /* kicks sent, calls received ... */
	uint64_t kicks_owed, kicks_dropped;     /* --drop-kicks */
	uint64_t pkts, bytes, bad;
	struct perf_dlog dlog;          /* --dirty-log: the backend's log */
	uint64_t iotlb_misses;          /* --iommu: asked by the backend */
	struct perf_dlog_watch wring;   /* and the ring areas it writes */
	uint64_t unlogged, ring_pages;
	double elapsed;
	/* CPU time over the run (ns; -1: not measured): the driver's (this
	 * thread; the placement probes' threads are left out) and the
	 * started backend's, and the wall time they were read over */
	int64_t cpu_driver_ns, cpu_backend_ns;
	uint64_t cpu_wall_ns;
	uint64_t features;              /* negotiated */
	double c2c_before, c2c_after;   /* placement probe, ns; NaN: none */
	double c2c[NET_PROBES_MAX];     /* every probe that answered, in order */
	unsigned nc2c;
	double c2c_med, c2c_min, c2c_max;       /* over c2c[]; NaN: none */
	enum perf_place place;
	uint64_t unrecorded;            /* rr: transactions after a mid-run probe */
	struct rr_bd *bd;               /* rr --rr-breakdown; NULL: off */
	double *lat;                    /* rr: microseconds (in the run: ticks) */
	uint64_t nlat, lat_cap;         /* kept, room for */
	uint64_t lat_seen;              /* recorded, kept or not */
	uint64_t lat_rng;               /* xorshift64 state of the sampling */
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

/* What a sender writes into each frame before it posts it: the Ethernet,
 * IPv4 and UDP headers (testpmd txonly copies the same 42 bytes per
 * packet, the driver writes the virtio-net header before them), with a
 * sequence number in them.  (Writing the whole first line from a template
 * in fewer, wider stores was no faster: measured in 2d39bed.) */
static void tx_write(struct net_run *n, uint8_t *frame)
{
	unsigned k = n->o.size < sizeof(n->txhdrs) ? n->o.size : sizeof(n->txhdrs);

	memcpy(frame, n->txhdrs, k);
	if (k >= 18)
		memcpy(frame + 14, &n->txseq, 4);
	n->txseq++;
}

/* The driver owes the backend a kick on queue q; with --drop-kicks, every
 * Nth is not sent. */
static int net_kick(void *arg, enum vq_net_role q)
{
	struct net_run *n = arg;
	int r;

	if (n->o.drop_kicks && ++n->kicks_owed % n->o.drop_kicks == 0) {
		n->kicks_dropped++;
		return 0;
	}
	if ((r = vq_evt_signal(q == VQ_NET_RX ? n->rx_kick : n->tx_kick)) < 0)
		return r;
	(q == VQ_NET_RX ? &n->rc : &n->tc)->kicks_sent++;
	return 0;
}

/* The driver on the rings: TX slots of --size frames (in tx and rr),
 * receive buffers of NET_RXBUF (in rx and rr), each frame prepared once
 * in full; tx rewrites only its headers. */
static int driver_setup(struct net_run *n, uint64_t txgpa, uint8_t *txmem,
			uint64_t rxgpa, uint8_t *rxmem)
{
	const struct net_opts *o = &n->o;
	struct vq_netg_config gc = {
		.rx = o->dir != D_TX ? n->rxq : NULL, .tx = o->dir != D_RX ? n->txq : NULL,
		.rx_area = { rxmem, rxgpa, vq_netg_rx_area_size(NET_RXBUF, o->queue_size) },
		.tx_area = { txmem, txgpa, vq_netg_tx_area_size(o->size, o->queue_size) },
		.rx_buf_size = NET_RXBUF, .tx_frame_max = o->size,
		.kick = net_kick, .arg = n,
	};
	uint8_t **frame;
	int r, i;

	r = vq_netg_new(&gc, &n->g);
	if (r < 0 || !gc.tx)
		return r;
	frame = malloc(sizeof(*frame) * o->queue_size);
	if (!frame)
		return -ENOMEM;
	r = vq_netg_tx_reserve(n->g, frame, o->queue_size);
	for (i = 0; i < r; i++)
		frame_fill(frame[i], o->size, (uint32_t)i);
	free(frame);
	return r < 0 ? r : 0;
}

static int net_setup(struct net_run *n)
{
	struct net_opts *o = &n->o;
	char err[256] = "";
	struct vq_vhu_frontend_config fc = {
		.features = wanted_features(o) | perf_profile_guest_extra(o->profile, 1),
		.nqueues = 2,
		.queue_size = (uint16_t)o->queue_size,
		.mem_size = 0, .hugetlb = o->hugetlb,
		.indirect_max = o->indirect ? 16 : 0,
		.iommu_page = o->iommu_page,
		.err = err, .errlen = sizeof(err),
		.profile = o->profile, .device_id = 1,  /* virtio 1.2, 5 */
	};
	uint64_t need, txgpa, rxgpa;
	uint8_t *txmem, *rxmem;
	const char *path = o->socket_path ? o->socket_path : n->sock;
	int r;

	need = vq_netg_tx_area_size(o->size, o->queue_size) +
	       vq_netg_rx_area_size(NET_RXBUF, o->queue_size) + (8u << 20);
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
	fc.features = wanted_features(o);
	if ((vq_vhu_frontend_features(n->f) & fc.features) != fc.features) {
		fprintf(stderr, "virtq-perf net: backend does not offer features 0x%" PRIx64 "\n",
			fc.features & ~vq_vhu_frontend_features(n->f));
		return -ENOTSUP;
	}
	n->features = vq_vhu_frontend_features(n->f);
	perf_profile_report(stderr, "virtq-perf net", o->profile, n->f);
	if (o->dirty_log) {
		r = perf_dlog_on(&n->dlog, n->f, "virtq-perf net");
		if (r == 0)
			r = perf_dlog_watch_rings(&n->wring, n->f, 2);
		if (r < 0)
			return r;
	}
	n->rxq = vq_vhu_frontend_queue(n->f, 0);
	n->txq = vq_vhu_frontend_queue(n->f, 1);
	n->rx_kick = vq_vhu_frontend_kick_fd(n->f, 0);
	n->rx_call = vq_vhu_frontend_call_fd(n->f, 0);
	n->tx_kick = vq_vhu_frontend_kick_fd(n->f, 1);
	n->tx_call = vq_vhu_frontend_call_fd(n->f, 1);
	txmem = vq_vhu_frontend_alloc(n->f, vq_netg_tx_area_size(o->size, o->queue_size),
				      &txgpa);
	rxmem = vq_vhu_frontend_alloc(n->f, vq_netg_rx_area_size(NET_RXBUF, o->queue_size),
				      &rxgpa);
	if (!n->rxq || !n->txq || !txmem || !rxmem) {
		fprintf(stderr, "virtq-perf net: front-end set-up failed\n");
		return -ENOMEM;
	}
	if ((r = driver_setup(n, txgpa, txmem, rxgpa, rxmem)) < 0) {
		fprintf(stderr, "virtq-perf net: guest driver: %s\n", strerror(-r));
		return r;
	}
	frame_fill(n->txhdrs, sizeof(n->txhdrs), 0);
	vq_drv_disable_cb(n->txq);
	vq_drv_disable_cb(n->rxq);
	return vq_netg_start(n->g);
}

/*
 * rr: while the answer is on its way, ask again and again for the line it
 * most likely begins in.  Once the device's write takes the line away,
 * the next ask brings the answer's bytes over while the used entry that
 * announces them is still crossing.  --rr-breakdown: the busy poll's
 * probes of other work are where a spin is seen from outside the library
 * (one call, no clock read, so the window spins as it does without it).
 */
static bool rr_spin(void *arg)
{
	struct net_run *n = arg;

	__builtin_prefetch(vq_netg_rx_next(n->g));
	if (n->bd)
		rr_bd_spin(n->bd);
	return false;
}

/* Wait for used buffers on q as --busy-poll says.  1: there may be some. */
static int wait_used(struct net_run *n, struct vq_drv *q, int call_fd,
		     struct vq_rt_counters *c)
{
	bool rr = n->o.dir == D_RR && q == n->rxq;
	struct vq_rt_drv_wait w = {
		.call_fd = call_fd,
		.busy_poll_ns = n->o.busy_poll_us > 0 ? (uint64_t)n->o.busy_poll_us * 1000 : 0,
		.other = rr ? rr_spin : NULL, .arg = n,
	};

	if (n->o.busy_poll_us < 0) {
		if (rr)
			rr_spin(n);
		return vq_drv_has_used(q);
	}
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

/* --rate: how many of the next frames are due by now (at most want).
 * Paced from the start, so that a late round catches up; polled, since a
 * sleep would round a gap of microseconds up to the timer's slack. */
static unsigned tx_due(struct net_run *n, uint64_t t0, uint64_t sent, unsigned want)
{
	double due = (double)(vq_rt_now_ns() - t0) * n->o.rate / 1e9 - (double)sent;

	if (due < 1)
		return 0;
	return due < want ? (unsigned)due : want;
}

static int run_tx(struct net_run *n, uint64_t t0)
{
	uint8_t *frame[256];
	uint32_t len[256];
	unsigned burst = n->o.burst > 256 ? 256 : n->o.burst, i;
	uint64_t checks = 0, sent = 0;
	int r = 0;

	for (i = 0; i < burst; i++)
		len[i] = n->o.size;
	while (!time_up(n, t0, &checks)) {
		unsigned added = 0, want = burst, inflight = vq_netg_tx_inflight(n->g);

		/* --drop-kicks: one burst at a time, so that each finds the
		 * backend asleep and owes a kick (see below). */
		if (n->o.drop_kicks && inflight)
			want = 0;
		if (n->o.count && want > n->o.count - n->pkts - inflight)
			want = (unsigned)(n->o.count - n->pkts - inflight);
		if (n->o.rate > 0)
			want = tx_due(n, t0, sent, want);
		if (want) {
			r = vq_netg_tx_reserve(n->g, frame, want);
			if (r < 0)
				return r;
			for (i = 0; i < (unsigned)r; i++)
				tx_write(n, frame[i]);
			/* Frames written but not posted are written again
			 * next round. */
			r = vq_netg_tx_post(n->g, len, NULL, (unsigned)r);
			if (r < 0)
				return r;
			added = (unsigned)r;
			sent += added;
		}
		r = vq_netg_tx_reap(n->g, 256);
		if (r < 0)
			return r;
		/* paced: nothing due is no reason to wait for used buffers */
		if (r == 0 && n->o.rate > 0 && vq_netg_tx_free(n->g))
			continue;
		if (r == 0 && (!vq_netg_tx_free(n->g) || !added)) {
			r = wait_used(n, n->txq, n->tx_call, &n->tc);
			if (r < 0)
				return r;
			continue;
		}
		n->pkts += (unsigned)r;
		n->bytes += (uint64_t)r * n->o.size;
		/* --drop-kicks: the burst is back; let the backend go to
		 * sleep, so that the next one owes a kick (which is dropped). */
		if (n->o.drop_kicks && !vq_netg_tx_inflight(n->g))
			usleep(2000);
	}
	return 0;
}

/* ---- rx ---- */

/* One received frame: count it, optionally check it (and what the
 * backend wrote of it against the dirty log); its sequence number into
 * *seq_out. */
static void rx_count(struct net_run *n, const struct vq_netg_frame *f, uint32_t *seq_out)
{
	uint32_t hdr_len = vq_netg_hdr_len(n->g);

	/* The backend marks before it publishes the buffer, so the bits
	 * are there when we see it. */
	if (n->dlog.log && n->o.verify)
		for (unsigned b = 0; b < f->nbufs; b++)
			if (!perf_dlog_marked(&n->dlog, vq_vhu_frontend_guest_phys(n->f,
					      f->buf[b].addr), f->buf[b].len))
				n->unlogged++;
	n->pkts++;
	n->bytes += f->len;
	if (seq_out && f->buf[0].len >= hdr_len + 18)
		memcpy(seq_out, f->buf[0].data + hdr_len + 14, 4);
	if (n->o.verify && f->len != n->o.size)
		n->bad++;
}

static int run_rx(struct net_run *n, uint64_t t0)
{
	struct vq_netg_frame f[256];
	unsigned burst = n->o.burst > 256 ? 256 : n->o.burst;
	uint64_t checks = 0;
	int r, i;

	/* --burst at a time, like an RX burst of a NIC driver: buffers given
	 * back in one burst become visible together, so a whole ring at once
	 * would leave the device without any meanwhile. */
	while (!time_up(n, t0, &checks)) {
		r = vq_netg_rx_burst(n->g, f, burst);
		if (r < 0)
			return r;
		if (r == 0) {
			r = wait_used(n, n->rxq, n->rx_call, &n->rc);
			if (r < 0)
				return r;
			continue;
		}
		/* --count: count exactly that many; the rest are just given
		 * back. */
		for (i = 0; i < r && !(n->o.count && n->pkts >= n->o.count); i++)
			rx_count(n, &f[i], NULL);
		if ((r = vq_netg_rx_repost(n->g)) < 0)
			return r;
	}
	return 0;
}

/* ---- rr: one frame out, wait for it back ---- */

/* Wait until the frame numbered seq comes back or tdead passes: 1 back,
 * 0 not (lost, or the run is over), or -errno.  The frames taken (late
 * answers too) are given back by the next rr_book. */
static int rr_await(struct net_run *n, uint32_t seq, uint64_t tdead)
{
	for (;;) {
		uint64_t pkts = n->pkts, bytes = n->bytes;
		struct vq_netg_frame f;
		uint32_t got = ~0u;
		uint64_t t = n->bd ? perf_tsc() : 0;
		int r = vq_netg_rx_burst(n->g, &f, 1);

		if (r < 0)
			return r;
		if (r == 0) {
			if (vq_rt_now_ns() >= tdead)
				return 0;
			if ((r = wait_used(n, n->rxq, n->rx_call, &n->rc)) < 0)
				return r;
			continue;
		}
		/* rx_count counts frames; rr counts transactions */
		rx_count(n, &f, &got);
		n->pkts = pkts;
		n->bytes = bytes;
		if (n->bd) {
			rr_bd_frame(n->bd, f.buf[0].data, got == seq);
			n->bd->t_used = t;
		}
		if (got == seq)
			return 1;
	}
}

/* TX slots in flight past which rr_book takes them back. */
#define RR_REAP_AT 1u

/*
 * A request is out: while the device works on it, give back the receive
 * buffers of the answers taken and take back the TX slots the device is
 * done with, off the answer's path.  Linux's virtio-net does the same
 * after the fact: it refills receive buffers after a NAPI poll and frees
 * sent buffers on the next transmit.  The buffers go back --rx-refill at
 * a time, to measure whether a batch spares the ring line the device
 * reads for the next answer; the default gives each back at once.
 */
static int rr_book(struct net_run *n)
{
	int r = 0;

	if (vq_netg_rx_taken(n->g) >= n->o.rx_refill)
		r = vq_netg_rx_repost(n->g);

	if (r >= 0 && vq_netg_tx_inflight(n->g) > RR_REAP_AT)
		r = vq_netg_tx_reap(n->g, 0);
	return r < 0 ? r : 0;
}

/* One-way core-to-core latency between us and the backend's CPU, kept
 * with the others of the run. */
static double probe(struct net_run *n)
{
	double ns;

	if (n->o.peer_cpu < 0)
		return NAN;
	ns = perf_c2c_ns(n->o.cpu, n->o.peer_cpu);
	if (ns < 0)
		return NAN;
	if (n->nc2c < NET_PROBES_MAX)
		n->c2c[n->nc2c++] = ns;
	return ns;
}

/* rr, --probe-every: stop sending, wait for the backend to give up
 * polling (its --busy-poll window, or without one its adaptive window of
 * 32 us at most, then a millisecond more), and probe between the two
 * CPUs it and we run on.  The placement moves every few seconds: the
 * probes before and after a run cannot see a move and back inside it. */
static void rr_probe_pause(struct net_run *n)
{
	int64_t bp = n->o.bo.busy_poll;

	usleep((useconds_t)((bp > 0 ? bp : 0) + 1000));
	probe(n);
}

/* rr's stopwatch, in ticks of --rr-clock. */
static uint64_t lat_now(const struct net_run *n)
{
	return n->o.rr_clock == RR_CLOCK_TSC ? perf_tsc() : vq_rt_now_ns();
}

/*
 * Keep one latency.  A near run records a million round trips in a
 * quarter of a second, more than the room for them: past the first
 * lat_cap, the k-th one replaces a kept one, picked at random, with
 * probability lat_cap / k (reservoir sampling), so that what is kept is
 * a uniform sample of the whole run and so are its percentiles.
 */
static void lat_keep(struct net_run *n, double ticks)
{
	uint64_t k = ++n->lat_seen, x = n->lat_rng, j;

	if (n->nlat < n->lat_cap) {
		n->lat[n->nlat++] = ticks;
		return;
	}
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	n->lat_rng = x;
	j = x % k;
	if (j < n->lat_cap)
		n->lat[j] = ticks;
}

/* The latencies from ticks into microseconds: the TSC's at its rate
 * measured since start; the monotonic clock's ticks are ns. */
static void lat_to_us(struct net_run *n, struct perf_tsc_mark start)
{
	double us_per_tick = 1e-3;

	if (n->o.rr_clock == RR_CLOCK_TSC)
		us_per_tick = 1e6 / perf_tsc_hz_since(start);
	for (uint64_t i = 0; i < n->nlat; i++)
		n->lat[i] *= us_per_tick;
}

/* A transaction waits for its answer up to 1 s, and never past the end
 * of the run: against a backend that answers nothing, --seconds still
 * ends it.  -ENOMSG: not one transaction was answered. */
static int run_rr(struct net_run *n, uint64_t t0)
{
	uint64_t end = t0 + (uint64_t)(n->o.seconds * 1e9), lost = 0;
	uint64_t every = (uint64_t)(n->o.probe_every * 1e9), next_probe = t0 + every;
	uint32_t seq = 0, len = n->o.size;
	bool cut = false, record = true;
	struct rr_bd *bd = n->bd;
	struct perf_tsc_mark start;
	int r;

	n->lat_cap = 1 << 20;
	n->lat_rng = 0x9e3779b97f4a7c15ull;
	n->lat = malloc(sizeof(double) * n->lat_cap);
	if (!n->lat)
		return -ENOMEM;
	if (bd)
		rr_bd_costs(bd, n->rxq);
	start = perf_tsc_mark();
	while (!(n->o.count && n->pkts >= n->o.count)) {
		uint64_t ts = vq_rt_now_ns(), tdead = ts + 1000000000ull, t_lat;
		uint8_t *frame;
		int back;

		if (ts >= end)
			break;
		if (every && n->o.peer_cpu >= 0 && ts >= next_probe && ts + every / 2 < end) {
			rr_probe_pause(n);
			/* the backend slept: the next answer costs a kick and a
			 * wake-up that no other transaction pays */
			record = false;
			next_probe = vq_rt_now_ns() + every;
			continue;
		}
		if (tdead > end)
			tdead = end;
		/* the monotonic stopwatch starts from the clock read above */
		t_lat = n->o.rr_clock == RR_CLOCK_TSC ? perf_tsc() : ts;
		if (bd) {
			rr_bd_begin(bd, seq);
			bd->t_start = perf_tsc();
		}
		/* a slot the device is done with, taken back by rr_book or
		 * here: it consumed the frame before it answered */
		while ((r = vq_netg_tx_reserve(n->g, &frame, 1)) == 0) {
			if ((r = vq_netg_tx_reap(n->g, 0)) < 0)
				return r;
			if (r == 0 && bd)
				bd->reaps++;
			if (r == 0 && vq_rt_now_ns() > tdead + 1000000000ull)
				return -ETIMEDOUT;
		}
		if (r < 0)
			return r;
		frame_fill(frame, n->o.size, seq);
		if (bd)
			bd->t_filled = perf_tsc();
		if ((r = vq_netg_tx_post(n->g, &len, NULL, 1)) < 0)
			return r;
		if (bd)
			bd->t_posted = perf_tsc();
		if ((r = rr_book(n)) < 0)
			return r;
		if (bd)
			bd->t_booked = perf_tsc();
		if ((back = rr_await(n, seq, tdead)) < 0)
			return back;
		t_lat = lat_now(n) - t_lat;
		if (bd)
			rr_bd_end(bd, back && record, n->tc.kicks_sent + n->rc.kicks_sent,
				  n->rc.wakeups);
		if (back) {
			if (!record)
				n->unrecorded++;
			else
				lat_keep(n, (double)t_lat);
			n->pkts++;
			n->bytes += n->o.size;
		} else if (tdead < end) {
			lost++;
		} else {
			cut = true;     /* by the end of the run, not lost */
		}
		record = true;
		seq++;
	}
	lat_to_us(n, start);
	if ((lost || cut) && !n->pkts)
		return -ENOMSG;
	if (lost)
		fprintf(stderr, "virtq-perf net: %" PRIu64 " transactions got no answer within 1 s\n", lost);
	return 0;
}

static const char *const dir_names[] = { "tx", "rx", "rr" };

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The run's placement from all its probes: near or far if every probe
 * says so, mixed if they differ; unknown unless both the probe before
 * and the one after answered. */
static void place_summary(struct net_run *n)
{
	double v[NET_PROBES_MAX];

	n->c2c_med = n->c2c_min = n->c2c_max = NAN;
	n->place = PLACE_UNKNOWN;
	if (!n->nc2c)
		return;
	memcpy(v, n->c2c, sizeof(v[0]) * n->nc2c);
	qsort(v, n->nc2c, sizeof(v[0]), cmp_double);
	n->c2c_med = n->nc2c & 1 ? v[n->nc2c / 2]
				 : (v[n->nc2c / 2 - 1] + v[n->nc2c / 2]) / 2;
	n->c2c_min = v[0];
	n->c2c_max = v[n->nc2c - 1];
	if (!isnan(n->c2c_before) && !isnan(n->c2c_after))
		n->place = perf_place_classify(n->c2c_min, n->c2c_max);
}

static void json_ns(const char *key, double v)
{
	if (isnan(v))
		printf(",\"%s\":null", key);
	else
		printf(",\"%s\":%.1f", key, v);
}

/* The CPU time per frame (rr: per transaction): JSON keys, or a line. */
static void net_cpu_report(const struct net_run *n, bool json)
{
	const struct perf_cpu_part p[] = {
		{ "driver", "driver", n->cpu_driver_ns },
		{ "backend", "backend", n->cpu_backend_ns },
	};

	perf_cpu_report(stdout, json, p, 2, (double)n->pkts, "pkt",
			n->o.dir == D_RR ? "transaction" : "frame", n->cpu_wall_ns);
}

static const char *rr_clock_name(const struct net_opts *o)
{
	return o->rr_clock == RR_CLOCK_TSC ? "tsc" : "monotonic";
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
		       ",\"kicks_dropped\":%" PRIu64 ",\"rate_pps\":%.0f",
		       dir_names[o->dir], o->size, o->packed ? "true" : "false",
		       o->in_order ? "true" : "false", o->event_idx ? "true" : "false",
		       o->mrg ? "true" : "false", n->features,
		       n->pkts, n->bytes, n->elapsed, pps, pps / 1e6, gbps, kpp, wpp, n->bad,
		       n->o.dirty_log ? "true" : "false", n->ring_pages, n->unlogged,
		       o->iommu_page, n->iotlb_misses, n->kicks_dropped, o->rate);
		if (!isnan(n->c2c_before) && !isnan(n->c2c_after))
			printf(",\"c2c_ns_before\":%.1f,\"c2c_ns_after\":%.1f",
			       n->c2c_before, n->c2c_after);
		printf(",\"placement\":\"%s\"", perf_place_name(n->place));
		/* every probe of the run, before, during (rr) and after */
		json_ns("c2c_ns", n->c2c_med);
		json_ns("c2c_ns_min", n->c2c_min);
		json_ns("c2c_ns_max", n->c2c_max);
		json_ns("c2c_rtt_ns", 2 * n->c2c_med);
		printf(",\"c2c_probes\":%u", n->nc2c);
		if (o->dir == D_RR && n->nlat)
			printf(",\"p50_us\":%.3f,\"p90_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f",
			       l.p50, l.p90, l.p99, l.p999);
		if (o->dir == D_RR)
			printf(",\"rr_clock\":\"%s\",\"latencies\":%" PRIu64
			       ",\"latencies_seen\":%" PRIu64 ",\"unrecorded\":%" PRIu64,
			       rr_clock_name(o), n->nlat, n->lat_seen, n->unrecorded);
		net_cpu_report(n, true);
		if (n->bd)
			rr_bd_json(stdout, n->bd);
		printf("}\n");
	} else {
		printf("net %s %u B %s%s%s: %" PRIu64 " %s in %.2f s = %.3f M/s, %.3f Gbit/s, "
		       "kicks/pkt %.4f, wakeups/pkt %.4f\n",
		       dir_names[o->dir], o->size, o->packed ? "packed" : "split",
		       o->in_order ? " in-order" : "", o->mrg ? " mrg" : "",
		       n->pkts, o->dir == D_RR ? "transactions" : "frames", n->elapsed,
		       pps / 1e6, gbps, kpp, wpp);
		if (o->dir == D_RR && n->nlat) {
			printf("rr latency us: p50 %.2f p90 %.2f p99 %.2f p99.9 %.2f",
			       l.p50, l.p90, l.p99, l.p999);
			printf(" (timed by %s", rr_clock_name(o));
			if (!isnan(n->c2c_med))
				printf("; p50 = %.1f cache-line round trips",
				       l.p50 * 1e3 / (2 * n->c2c_med));
			printf(")\n");
		}
		net_cpu_report(n, false);
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
		else if (o->dir == D_RR)
			printf("placement: unknown (%s)\n", o->peer_cpu < 0 ?
			       "not probed: give --cpu, and --peer-cpu unless a backend "
			       "we start shares a 2-CPU machine" : "a probe failed");
		/* the figure each latency is to be read against */
		if (o->dir == D_RR && !isnan(n->c2c_med))
			printf("cache line: %.1f ns one-way, %.1f ns round trip (median of %u "
			       "probes, %.1f-%.1f one-way)\n", n->c2c_med, 2 * n->c2c_med,
			       n->nc2c, n->c2c_min, n->c2c_max);
		if (n->bd)
			rr_bd_report(stdout, n->bd);
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
	n.c2c_before = probe(&n);
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
	if (r == 0 && n.o.rr_breakdown) {
		/* frame_fill puts the sequence number at 14 when there is room */
		n.bd = rr_bd_new(n.o.queue_size,
				 n.o.size >= 18 ? vq_netg_hdr_len(n.g) + 14 : 0);
		if (!n.bd)
			r = -ENOMEM;
	}
	if (r == 0) {
		struct perf_cpu_mark m0, m1;

		perf_cpu_mark(&n.be, &m0);
		t0 = vq_rt_now_ns();
		r = n.o.dir == D_TX ? run_tx(&n, t0) : n.o.dir == D_RX ? run_rx(&n, t0)
								 : run_rr(&n, t0);
		n.elapsed = (double)(vq_rt_now_ns() - t0) / 1e9;
		perf_cpu_mark(&n.be, &m1);
		n.cpu_driver_ns = perf_cpu_diff(m0.thread, m1.thread);
		n.cpu_backend_ns = perf_cpu_diff(m0.backend, m1.backend);
		n.cpu_wall_ns = m1.wall - m0.wall;
		if (r == -ENOMSG)
			fprintf(stderr, "virtq-perf net: rr: nothing answered in %g s: "
				"is the backend in loopback mode?\n", n.o.seconds);
		else if (r < 0 && vq_netg_error(n.g))
			fprintf(stderr, "virtq-perf net: %s: %s\n", dir_names[n.o.dir],
				vq_netg_error_msg(n.g));
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
	vq_netg_free(n.g);
	vq_vhu_frontend_free(n.f);
	perf_backend_stop(&n.be);
	n.c2c_after = probe(&n);
	place_summary(&n);
	if (r == 0)
		net_report(&n);
	free(n.lat);
	rr_bd_free(n.bd);
	if (r == 0 && n.o.verify && n.bad)
		return 1;
	if (r == 0 && n.unlogged)
		return 1;
	if (r == 0 && n.o.verify && n.iotlb_misses)
		return 1;       /* everything was mapped: the backend lost entries */
	return r < 0 ? 1 : 0;
}
