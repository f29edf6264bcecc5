// SPDX-License-Identifier: MIT
/*
 * The virtio-net device layer: TX (transmitq, the guest's frames to us) and
 * RX (receiveq, our frames to the guest) over vq_dev queues.
 *
 * The rules a driver must follow here, and what we do when it does not:
 *  - A TX chain is device-readable only and starts with a whole header
 *    (5.1.6.2): otherwise the queue breaks ("Unexpected descriptor format
 *    for TX", as vhost-net says).
 *  - A TX header is read only when VQ_NET_F_CSUM was negotiated;
 *    without it the header can ask for nothing and is ignored.  One asking
 *    for an offload not negotiated, or breaking the rules of one (5.1.6.2.1:
 *    a segmentation type without NEEDS_CSUM or gso_size, a checksum place
 *    outside the frame, an RX-only flag), is dropped and counted (bad
 *    header); the chain goes back used, length 0.  Flag bits we do not
 *    know are ignored (5.1.6.2.2).
 *  - An RX header given with a frame may carry only what the guest
 *    negotiated (5.1.6.4.2): flags only with GUEST_CSUM, a segmentation
 *    type only with its GUEST_* bit; a frame whose header asks for more is
 *    dropped and counted (bad header).
 *  - An RX chain is device-writable only (5.1.6.3); with MRG_RXBUF every
 *    buffer holds at least a header (5.1.6.3.1): otherwise the queue breaks.
 *  - An RX frame that does not fit what the guest gave us is dropped and
 *    counted, and the chains popped for it are given back (vq_dev_unpop):
 *    a used entry is written only for a buffer we wrote, with the exact
 *    length, so the guest can never see stale bytes as a frame.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <virtq/net.h>
#include <virtq/runtime.h>

#include "util.h"
#include "mem_lib.h"
#include "cpu.h"

/* Segments one RX chain may have (vhost's UIO_MAXIOV is 1024; real drivers
 * use 1 with MRG_RXBUF and at most MAX_SKB_FRAGS + 2 without). */
#define VQ_NET_RX_IOV 256u

struct vq_net_queue {
	struct vq_dev *dev;
	enum vq_net_role role;
	unsigned used_batch;
	uint32_t max_frame;
	uint32_t hdr_len;
	bool mrg;
	bool csum;              /* VQ_NET_F_CSUM: TX may ask for a checksum */
	uint32_t tx_gso;        /* 1 << gso type the guest may send (HOST_*) */
	uint32_t rx_gso;        /* 1 << gso type the guest takes (GUEST_*) */
	bool tx_ecn, rx_ecn;    /* HOST_ECN, GUEST_ECN */
	uint8_t rx_flags;       /* header flags the guest takes (GUEST_CSUM) */
	unsigned staged;        /* filled, not yet flushed */
	unsigned nchains;
	struct vq_chain *chains;
	struct iovec *iov;      /* nchains * per-chain segments */
	unsigned iov_per_chain;
	struct vq_net_stats st;
	bool prefetchw;         /* the CPU has PREFETCHW */
	bool tx_evict;          /* flush taken frames now (see config) */
	bool evict_auto;        /* VQ_NET_TX_EVICT_AUTO: tx_evict by measurement */
	struct evict_tuner {
		uint64_t (*now_ns)(void *arg);
		void *clock_arg;
		uint64_t t0;            /* window start; 0: none yet */
		uint32_t frames;        /* taken in this window */
		uint32_t calls;         /* tx_process calls in it */
		unsigned window;        /* < EVICT_PROBES: measuring */
		double best[2];         /* fastest probe window, ns per frame, [tx_evict] */
	} tune;
};

/* AUTO: windows measured per decision, alternating off and on; the clock
 * is read every EVICT_CLOCK_CALLS calls at most, and a window slower than
 * EVICT_WINDOW_MAX_NS says nothing about this choice (the guest is idle or
 * slow) and restarts the measurement. */
#define EVICT_PROBES 6u
#define EVICT_CLOCK_CALLS 256u
#define EVICT_WINDOW_MAX_NS 50000000ull

_Static_assert(VQ_NET_DROP_MAX <= VQ_NET_DROP_SLOTS,
	       "a new drop reason needs a slot in struct vq_net_stats");

static const char *const drop_names[VQ_NET_DROP_MAX] = {
	[VQ_NET_DROP_NO_RX_BUF] = "no_rx_buf",
	[VQ_NET_DROP_BAD_HDR] = "bad_hdr",
	[VQ_NET_DROP_OVERSIZE] = "oversize",
	[VQ_NET_DROP_SINK_FULL] = "sink_full",
	[VQ_NET_DROP_RUNT] = "runt",
	[VQ_NET_DROP_SINK] = "sink",
};

const char *vq_net_drop_name(enum vq_net_drop why)
{
	if ((unsigned)why >= VQ_NET_DROP_MAX)
		return "unknown";
	return drop_names[why];
}

int vq_net_queue_new(const struct vq_net_queue_config *cfg,
		     struct vq_net_queue **out)
{
	struct vq_net_queue *q;
	unsigned i;
	uint64_t f;

	*out = NULL;
	if (!VQ_RESERVED_ZERO(cfg) || !cfg->dev ||
	    (cfg->role != VQ_NET_RX && cfg->role != VQ_NET_TX) ||
	    cfg->max_frame > VQ_NET_MAX_FRAME)
		return -EINVAL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	f = vq_dev_features(cfg->dev);
	q->dev = cfg->dev;
	q->role = cfg->role;
	q->used_batch = cfg->used_batch;
	q->max_frame = cfg->max_frame ? cfg->max_frame : VQ_NET_MAX_FRAME;
	q->hdr_len = vq_net_hdr_len(f);
	q->mrg = f & VQ_BIT(VQ_NET_F_MRG_RXBUF);
	q->csum = f & VQ_BIT(VQ_NET_F_CSUM);
	if (q->csum) {
		/* 5.1.3.1: the HOST_* bits need CSUM; without it the header
		 * is not even read */
		if (f & VQ_BIT(VQ_NET_F_HOST_TSO4))
			q->tx_gso |= 1u << VQ_NET_HDR_GSO_TCPV4;
		if (f & VQ_BIT(VQ_NET_F_HOST_TSO6))
			q->tx_gso |= 1u << VQ_NET_HDR_GSO_TCPV6;
		if (f & VQ_BIT(VQ_NET_F_HOST_UFO))
			q->tx_gso |= 1u << VQ_NET_HDR_GSO_UDP;
		q->tx_ecn = f & VQ_BIT(VQ_NET_F_HOST_ECN);
	}
	if (f & VQ_BIT(VQ_NET_F_GUEST_CSUM)) {
		q->rx_flags = VQ_NET_HDR_F_NEEDS_CSUM | VQ_NET_HDR_F_DATA_VALID;
		if (f & VQ_BIT(VQ_NET_F_GUEST_TSO4))
			q->rx_gso |= 1u << VQ_NET_HDR_GSO_TCPV4;
		if (f & VQ_BIT(VQ_NET_F_GUEST_TSO6))
			q->rx_gso |= 1u << VQ_NET_HDR_GSO_TCPV6;
		if (f & VQ_BIT(VQ_NET_F_GUEST_UFO))
			q->rx_gso |= 1u << VQ_NET_HDR_GSO_UDP;
		q->rx_ecn = f & VQ_BIT(VQ_NET_F_GUEST_ECN);
	}
	q->prefetchw = vq_has_prefetchw();
	if (cfg->role == VQ_NET_TX && cfg->tx_evict != VQ_NET_TX_EVICT_OFF &&
	    vq_has_clflushopt()) {
		q->evict_auto = cfg->tx_evict == VQ_NET_TX_EVICT_AUTO;
		q->tx_evict = true;
	}
	q->tune.now_ns = cfg->now_ns;
	q->tune.clock_arg = cfg->clock_arg;
	if (cfg->role == VQ_NET_TX) {
		q->nchains = VQ_NET_BURST;
		q->iov_per_chain = VQ_NET_TX_IOV;
	} else {
		q->nchains = VQ_NET_RX_MAX_BUFS;
		q->iov_per_chain = VQ_NET_RX_IOV;
	}
	/* calloc'd: only the pages a chain actually uses are ever touched. */
	q->chains = calloc(q->nchains, sizeof(*q->chains));
	q->iov = calloc((size_t)q->nchains * q->iov_per_chain, sizeof(*q->iov));
	if (!q->chains || !q->iov) {
		vq_net_queue_free(q);
		return -ENOMEM;
	}
	/* Each chain owns its slice of iov for good (the ring layer never
	 * moves it): set once here rather than for every slot of every
	 * burst, which cost more than the ring work on short bursts. */
	for (i = 0; i < q->nchains; i++) {
		q->chains[i].iov = q->iov + (size_t)i * q->iov_per_chain;
		q->chains[i].iov_max = q->iov_per_chain;
	}
	*out = q;
	return 0;
}

void vq_net_queue_free(struct vq_net_queue *q)
{
	if (!q)
		return;
	free(q->chains);
	free(q->iov);
	free(q);
}

static void tune_restart(struct evict_tuner *t)
{
	t->t0 = 0;
	t->window = 0;
	t->best[0] = t->best[1] = 0;
}

void vq_net_queue_reset(struct vq_net_queue *q)
{
	q->staged = 0;
	memset(&q->st, 0, sizeof(q->st));
	tune_restart(&q->tune);
}

struct vq_dev *vq_net_queue_dev(const struct vq_net_queue *q)
{
	return q->dev;
}

const struct vq_net_stats *vq_net_queue_stats(const struct vq_net_queue *q)
{
	return &q->st;
}

void vq_net_queue_count_drop(struct vq_net_queue *q, enum vq_net_drop why)
{
	if ((unsigned)why < VQ_NET_DROP_MAX)
		q->st.drops[why]++;
}

static int net_flush(struct vq_net_queue *q)
{
	int r;

	if (!q->staged)
		return 0;
	r = vq_dev_flush(q->dev);
	if (r < 0)
		return r;
	q->staged = 0;
	q->st.flushes++;
	return r;
}

/* Stage a used entry and publish by the used_batch rule. */
static int net_fill(struct vq_net_queue *q, const struct vq_chain *c, uint32_t len)
{
	int r = vq_dev_fill(q->dev, c, len);

	if (r < 0)
		return r;
	q->staged++;
	q->st.buffers++;
	if (q->used_batch && q->staged >= q->used_batch)
		return net_flush(q);
	return 0;
}

/* Is segmentation type t (ECN bit included) one of mask's, with ecn? */
static bool gso_allowed(uint8_t t, uint32_t mask, bool ecn)
{
	unsigned type = t & ~VQ_NET_HDR_GSO_ECN;

	if (type == VQ_NET_HDR_GSO_NONE)
		return !(t & VQ_NET_HDR_GSO_ECN);
	return type < 32 && (mask >> type & 1) && (ecn || !(t & VQ_NET_HDR_GSO_ECN));
}

/*
 * Is this TX header (read with VQ_NET_F_CSUM) one we can honour for a
 * frame of len bytes (5.1.6.2.1)?  No RX-only flag; a checksum place inside
 * the frame; a segmentation type only if negotiated, and then with
 * NEEDS_CSUM and an MSS no smaller than TCP's least (a guest asking for
 * 1-byte segments would have the host kernel cut one 64 KiB frame into
 * 65535: work it did not pay for).
 */
static bool tx_hdr_ok(const struct vq_net_queue *q, const struct vq_net_hdr *h,
		      uint32_t len)
{
	if (h->flags & (VQ_NET_HDR_F_DATA_VALID | VQ_NET_HDR_F_RSC_INFO))
		return false;
	if ((h->flags & VQ_NET_HDR_F_NEEDS_CSUM) &&
	    (uint32_t)h->csum_start + h->csum_offset + 2 > len)
		return false;
	if (h->gso_type == VQ_NET_HDR_GSO_NONE)
		return true;
	return gso_allowed(h->gso_type, q->tx_gso, q->tx_ecn) &&
	       (h->flags & VQ_NET_HDR_F_NEEDS_CSUM) &&
	       h->gso_size >= VQ_NET_MIN_GSO_SIZE;
}

/*
 * Both directions touch each buffer's first two lines (the header and the
 * frame after it) and ask for them some chains ahead of the copy: a whole
 * burst at once overflows the core's miss buffers and the excess
 * prefetches are dropped.  RX asks for ownership (PREFETCHW), which waits
 * longer and fills them sooner: against DPDK's virtio-user, 4 ahead beat
 * 2, 8 and 16 (measured in a131294 and 124a0e6).  TX reads: 8.
 */
#define TX_PREFETCH_AHEAD 8u
#define RX_PREFETCH_AHEAD 4u

/* TX passes the frame on to be read, and reads the header only when an
 * offload was negotiated (tx_one). */
static inline void tx_prefetch(const struct vq_net_queue *q, const struct vq_chain *c)
{
	const struct iovec *v = &c->iov[0];

	/* a chain with nothing readable is refused later: iov[0] is not its */
	if (unlikely(!c->nout))
		return;
	if (q->csum)
		__builtin_prefetch(v->iov_base);
	if (v->iov_len > q->hdr_len)
		__builtin_prefetch((const uint8_t *)v->iov_base + q->hdr_len);
}

/* The first two lines of a frame the sink has taken (tx_evict in
 * vq_net_queue_config): a 64 B frame's, or the start of a larger one. */
static void tx_evict(const struct iovec *frame)
{
	uintptr_t p = (uintptr_t)frame->iov_base & ~(uintptr_t)63;
	uintptr_t end = (uintptr_t)frame->iov_base +
			(frame->iov_len < 128 ? frame->iov_len : 128);

	for (; p < end; p += 64)
		vq_evict_line((const void *)p);
}

/* Validate one TX chain and pass its frame to fn.  Returns 0 (taken or
 * dropped), or -errno (queue broken, or fn's error). */
static int tx_one(struct vq_net_queue *q, struct vq_chain *c, vq_net_tx_fn fn,
		  void *arg, uint64_t *bytes)
{
	uint8_t hb[12];
	struct vq_net_hdr h;
	struct iovec *iov = c->iov;
	unsigned cnt = c->nout;
	uint64_t skip = q->hdr_len;
	uint32_t len;
	int r;

	if (unlikely(c->nin))
		return vq_dev_fail(q->dev, -EINVAL,
				   "5.1.6.2: Unexpected descriptor format for TX: chain %u has %u writable segments",
				   c->id, c->nin);
	if (unlikely(c->out_len < q->hdr_len))
		return vq_dev_fail(q->dev, -EINVAL,
				   "5.1.6.2: Unexpected header len for TX: chain %u has %llu bytes, the header is %u",
				   c->id, (unsigned long long)c->out_len, q->hdr_len);
	if (unlikely(c->out_len - q->hdr_len > q->max_frame)) {
		q->st.drops[VQ_NET_DROP_OVERSIZE]++;
		return 0;
	}
	len = (uint32_t)(c->out_len - q->hdr_len);
	/*
	 * Without VQ_NET_F_CSUM (we offer no GSO) the header may ask for
	 * nothing (5.1.6.2: the driver must leave flags and gso_type clear),
	 * so it is not read at all: its line is one the guest rewrites for
	 * its next frame, and our copy of it costs the guest an invalidation
	 * round trip each time (measured in 10dbe6a).
	 */
	if (q->csum) {
		/* Read the header in place when it is in one piece (it nearly
		 * always is); copying it first costs a store-forwarding stall
		 * per frame. */
		if (likely(iov->iov_len >= q->hdr_len)) {
			vq_net_hdr_decode(iov->iov_base, q->hdr_len, &h);
		} else {
			vq_iov_to_buf(iov, cnt, 0, hb, q->hdr_len);
			vq_net_hdr_decode(hb, q->hdr_len, &h);
		}
		if (unlikely(!tx_hdr_ok(q, &h, len))) {
			q->st.drops[VQ_NET_DROP_BAD_HDR]++;
			return 0;
		}
	} else {
		memset(&h, 0, sizeof(h));
	}
	if (unlikely(len < VQ_NET_MIN_FRAME)) {
		q->st.drops[VQ_NET_DROP_RUNT]++;
		return 0;
	}
	/* Strip the header in our own iovec copy (the chain's storage). */
	while (skip && skip >= iov->iov_len) {
		skip -= iov->iov_len;
		iov++;
		cnt--;
	}
	iov->iov_base = (uint8_t *)iov->iov_base + skip;
	iov->iov_len -= skip;

	r = fn(arg, iov, cnt, len, &h);
	if (r < 0)
		return r;
	if (q->tx_evict && r == 0) {
		tx_evict(iov);
		q->st.evicted++;
	}
	if (r > 0) {
		vq_net_queue_count_drop(q, (enum vq_net_drop)(r - 1));
		return 0;
	}
	q->st.packets++;
	q->st.bytes += len;
	if (h.gso_type)
		q->st.gso++;
	if (bytes)
		*bytes += len;
	return 0;
}

/*
 * AUTO: count the frames of this call; at the end of a window of
 * VQ_NET_EVICT_WINDOW frames, account its time to the setting it ran with.
 * The first EVICT_PROBES windows of a round alternate the setting; the one
 * whose fastest window was faster (the guest's rate when it is the
 * bottleneck, ours when we are; the fastest, because a pause in the
 * traffic inside a window makes it look slow) is kept for
 * VQ_NET_EVICT_KEEP windows, then a new round measures again.  Costs a
 * clock read per window, not per frame.
 */
static void tune_evict(struct vq_net_queue *q, unsigned frames)
{
	struct evict_tuner *t = &q->tune;
	uint64_t now, ns;

	t->frames += frames;
	t->calls++;
	if (t->t0 && t->frames < VQ_NET_EVICT_WINDOW && t->calls % EVICT_CLOCK_CALLS)
		return;
	now = t->now_ns ? t->now_ns(t->clock_arg) : vq_rt_now_ns();
	ns = now - t->t0;
	if (!t->t0 || (t->frames < VQ_NET_EVICT_WINDOW && ns > EVICT_WINDOW_MAX_NS)) {
		/* No window yet, or one too slow to compare: start over. */
		if (t->t0 && t->window < EVICT_PROBES)
			tune_restart(t);
		goto next;
	}
	if (t->frames < VQ_NET_EVICT_WINDOW)
		return;
	if (t->window < EVICT_PROBES) {
		double r = (double)ns / t->frames;

		if (!t->best[q->tx_evict] || r < t->best[q->tx_evict])
			t->best[q->tx_evict] = r;
	}
	t->window++;
	if (t->window < EVICT_PROBES) {
		q->tx_evict = !q->tx_evict;
	} else if (t->window == EVICT_PROBES) {
		q->tx_evict = t->best[1] < t->best[0];
	} else if (t->window == EVICT_PROBES + VQ_NET_EVICT_KEEP) {
		tune_restart(t);
	}
next:
	t->t0 = now;
	t->frames = 0;
	t->calls = 0;
}

int vq_net_tx_process(struct vq_net_queue *q, unsigned max_pkts,
		      vq_net_tx_fn fn, void *arg, uint64_t *bytes)
{
	unsigned done = 0, i;
	int n, r, ret = 0;

	if (q->role != VQ_NET_TX)
		return -EINVAL;
	for (;;) {
		unsigned want = VQ_NET_BURST;

		if (max_pkts && max_pkts - done < want)
			want = max_pkts - done;
		if (!want)
			break;
		n = vq_dev_pop_burst(q->dev, q->chains, want);
		if (n < 0) {
			ret = n;
			break;
		}
		for (i = 0; i < (unsigned)n && i < TX_PREFETCH_AHEAD; i++)
			tx_prefetch(q, &q->chains[i]);
		for (i = 0; i < (unsigned)n; i++) {
			if (i + TX_PREFETCH_AHEAD < (unsigned)n)
				tx_prefetch(q, &q->chains[i + TX_PREFETCH_AHEAD]);
			r = tx_one(q, &q->chains[i], fn, arg, bytes);
			if (r < 0 && vq_dev_error(q->dev)) {
				/* The chain broke the queue: nothing more
				 * reaches the guest, say why. */
				return r;
			}
			if (r == -EAGAIN) {
				/* "Not now": this frame and the rest stay. */
				r = vq_dev_unpop(q->dev, &q->chains[i], n - i);
				done += i;
				ret = r < 0 ? r : 0;
				goto out;
			}
			if (r < 0) {
				/* The sink failed: this chain is consumed, the
				 * rest go back to the ring untouched. */
				int u = net_fill(q, &q->chains[i], 0);

				if (u == 0 && i + 1 < (unsigned)n)
					u = vq_dev_unpop(q->dev, &q->chains[i + 1],
							 n - i - 1);
				done += i + 1;
				ret = u < 0 ? u : r;
				goto out;
			}
			r = net_fill(q, &q->chains[i], 0);
			if (r < 0)
				return r;
		}
		done += n;
		/* Once per burst: the guest gets its buffers back while we
		 * pop the next burst. */
		if (!q->used_batch && (r = net_flush(q)) < 0)
			return r;
		if ((unsigned)n < want)
			break;
	}
out:
	r = net_flush(q);
	if (q->evict_auto && done)
		tune_evict(q, done);
	if (ret < 0)
		return ret;
	if (r < 0)
		return r;
	return done;
}

/* Copy len bytes from src (starting at byte soff) into dst. */
static void iov_copy(const struct iovec *dst, unsigned dcnt, uint64_t doff,
		     const struct iovec *src, unsigned scnt, uint64_t *soff,
		     unsigned *si, uint32_t len)
{
	unsigned di = 0;

	while (di < dcnt && doff >= dst[di].iov_len)
		doff -= dst[di++].iov_len;
	while (len && di < dcnt && *si < scnt) {
		size_t dn = dst[di].iov_len - doff;
		size_t sn = src[*si].iov_len - *soff;
		size_t n = dn < sn ? dn : sn;

		if (n > len)
			n = len;
		memcpy((uint8_t *)dst[di].iov_base + doff,
		       (const uint8_t *)src[*si].iov_base + *soff, n);
		len -= n;
		doff += n;
		*soff += n;
		if (doff == dst[di].iov_len) {
			di++;
			doff = 0;
		}
		if (*soff == src[*si].iov_len) {
			(*si)++;
			*soff = 0;
		}
	}
}

/* Write the header bytes hb[0, n) at the start of chain c. */
static void write_hdr(const struct vq_chain *c, const uint8_t *hb, uint32_t n)
{
	struct iovec s = { .iov_base = (void *)hb, .iov_len = n };
	uint64_t soff = 0;
	unsigned si = 0;

	iov_copy(c->iov + c->nout, c->nin, 0, &s, 1, &soff, &si, n);
}

static uint64_t iov_total(const struct iovec *iov, unsigned cnt)
{
	uint64_t t = 0;
	unsigned i;

	for (i = 0; i < cnt; i++)
		t += iov[i].iov_len;
	return t;
}

static int rx_drop(struct vq_net_queue *q, unsigned popped, enum vq_net_drop why)
{
	int r = popped ? vq_dev_unpop(q->dev, q->chains, popped) : 0;

	if (r < 0)
		return r;
	/* The ring is not out of buffers, it waits for the IOTLB: the frame
	 * waits too, uncounted (vhost-net leaves it in the socket). */
	if (why == VQ_NET_DROP_NO_RX_BUF && vq_dev_iotlb_waiting(q->dev))
		return -EAGAIN;
	q->st.drops[why]++;
	return 0;
}

/* May the guest be given this header (5.1.6.4.2)?  Its flags are cut to
 * what GUEST_CSUM allows where it is written (rx_flags). */
/* An RX chain the guest made available: device-writable only (5.1.6.3)
 * and, with MRG_RXBUF, room for the header in its first buffer
 * (5.1.6.3.1).  0, or the error that broke the queue. */
static inline int rx_chain_check(struct vq_net_queue *q, const struct vq_chain *c)
{
	if (unlikely(c->nout))
		return vq_dev_fail(q->dev, -EINVAL,
				   "5.1.6.3: Unexpected descriptor format for RX: chain %u has %u readable segments",
				   c->id, c->nout);
	if (q->mrg && unlikely(c->in_len < q->hdr_len))
		return vq_dev_fail(q->dev, -EINVAL,
				   "5.1.6.3.1: RX buffer %u of %llu bytes is smaller than the %u-byte header",
				   c->id, (unsigned long long)c->in_len, q->hdr_len);
	return 0;
}

static bool rx_hdr_ok(const struct vq_net_queue *q, const struct vq_net_hdr *h)
{
	return gso_allowed(h->gso_type, q->rx_gso, q->rx_ecn);
}

/* The header written for a frame: the caller's (checked) or zeros. */
static inline void rx_hdr_fill(const struct vq_net_queue *q, struct vq_net_hdr *h,
			       const struct vq_net_hdr *from, uint16_t nbufs)
{
	if (from) {
		*h = *from;
		h->flags &= q->rx_flags;
	} else {
		*h = (struct vq_net_hdr){ 0 };
	}
	h->num_buffers = nbufs;
}

int vq_net_rx_deliver(struct vq_net_queue *q, const struct iovec *iov,
		      unsigned iovcnt, uint32_t len, const struct vq_net_hdr *hdr)
{
	uint32_t lens[VQ_NET_RX_MAX_BUFS];
	uint64_t need, got = 0, soff = 0;
	unsigned k = 0, maxbufs = q->mrg ? q->nchains : 1, i, si = 0;
	struct vq_net_hdr h = { 0 };
	uint8_t hb[12];
	int r;

	if (q->role != VQ_NET_RX)
		return -EINVAL;
	if (unlikely(vq_dev_error(q->dev)))
		return vq_dev_error(q->dev);
	if (unlikely(len > q->max_frame || iov_total(iov, iovcnt) < len)) {
		q->st.drops[VQ_NET_DROP_OVERSIZE]++;
		return 0;
	}
	if (hdr && unlikely(!rx_hdr_ok(q, hdr))) {
		q->st.drops[VQ_NET_DROP_BAD_HDR]++;
		return 0;
	}
	need = (uint64_t)q->hdr_len + len;
	while (got < need) {
		struct vq_chain *c;

		if (k == maxbufs)       /* only with MRG_RXBUF */
			return rx_drop(q, k, VQ_NET_DROP_OVERSIZE);
		c = &q->chains[k];
		r = vq_dev_pop(q->dev, c);
		if (r < 0)
			return r;
		if (r == 0)
			return rx_drop(q, k, VQ_NET_DROP_NO_RX_BUF);
		k++;
		r = rx_chain_check(q, c);
		if (r)
			return r;
		if (!q->mrg && c->in_len < need)
			/* One chain must hold it all; a smaller frame may
			 * still fit this buffer later, so give it back. */
			return rx_drop(q, k, VQ_NET_DROP_OVERSIZE);
		lens[k - 1] = (uint32_t)(c->in_len < need - got ? c->in_len : need - got);
		got += lens[k - 1];
	}

	/* Every buffer is in hand: write, then fill each with exactly what
	 * it got. */
	rx_hdr_fill(q, &h, hdr, (uint16_t)(q->mrg ? k : 1));
	{
		const struct vq_chain *c0 = &q->chains[0];
		const struct iovec *w = &c0->iov[c0->nout];

		if (likely(w->iov_len >= q->hdr_len)) {
			vq_net_hdr_encode(w->iov_base, q->hdr_len, &h);
		} else {
			vq_net_hdr_encode(hb, q->hdr_len, &h);
			write_hdr(c0, hb, q->hdr_len);
		}
	}
	for (i = 0; i < k; i++) {
		const struct vq_chain *c = &q->chains[i];
		uint32_t off = i == 0 ? q->hdr_len : 0;

		iov_copy(c->iov + c->nout, c->nin, off, iov, iovcnt, &soff, &si,
			 lens[i] - off);
	}
	for (i = 0; i < k; i++) {
		r = net_fill(q, &q->chains[i], lens[i]);
		if (r < 0)
			return r;
	}
	q->st.packets++;
	q->st.bytes += len;
	if (h.gso_type)
		q->st.gso++;
	return 1;
}

/* RX writes a buffer's first two lines (header, then the frame): ask for
 * them with intent to write. */
static inline void rx_prefetch(const struct vq_net_queue *q, const struct vq_chain *c)
{
	/* An empty chain (refused later) has no iov[0]: its stale or NULL
	 * base is only prefetched, which never faults, so no branch here;
	 * the address is computed as an integer, which is defined for any. */
	uintptr_t p = (uintptr_t)c->iov[0].iov_base;

	vq_prefetch_w(q->prefetchw, (const void *)p);
	vq_prefetch_w(q->prefetchw, (const void *)(p + 64));
}

/* Copy one frame into one chain known to hold it: header, then data. */
static void rx_into_chain(struct vq_net_queue *q, const struct vq_chain *c,
			  const struct vq_net_frame *f)
{
	const struct iovec *w = &c->iov[c->nout];
	struct vq_net_hdr h;
	uint8_t hb[12];
	uint64_t soff = 0;
	unsigned si = 0;

	rx_hdr_fill(q, &h, f->hdr, 1);
	if (f->hdr && f->hdr->gso_type)
		q->st.gso++;
	if (likely(w->iov_len >= q->hdr_len)) {
		vq_net_hdr_encode(w->iov_base, q->hdr_len, &h);
	} else {
		vq_net_hdr_encode(hb, q->hdr_len, &h);
		write_hdr(c, hb, q->hdr_len);
	}
	iov_copy(w, c->nin, q->hdr_len, f->iov, f->iovcnt, &soff, &si, f->len);
}

int vq_net_rx_deliver_burst(struct vq_net_queue *q, const struct vq_net_frame *f,
			    unsigned n)
{
	unsigned done = 0, i;
	int k, r;

	if (q->role != VQ_NET_RX)
		return -EINVAL;
	while (done < n) {
		unsigned want = n - done;

		if (want > VQ_NET_BURST)
			want = VQ_NET_BURST;
		k = vq_dev_pop_burst(q->dev, q->chains, want);
		if (k < 0)
			return k;
		if (k == 0)
			break;  /* no buffer: the caller decides */
		for (i = 0; i < (unsigned)k; i++) {
			r = rx_chain_check(q, &q->chains[i]);
			if (r)
				return r;
		}
		for (i = 0; i < (unsigned)k && i < RX_PREFETCH_AHEAD; i++)
			rx_prefetch(q, &q->chains[i]);
		for (i = 0; i < (unsigned)k; i++) {
			const struct vq_chain *c = &q->chains[i];
			const struct vq_net_frame *fr = &f[done + i];
			uint64_t need = (uint64_t)q->hdr_len + fr->len;

			if (i + RX_PREFETCH_AHEAD < (unsigned)k)
				rx_prefetch(q, &q->chains[i + RX_PREFETCH_AHEAD]);

			if (unlikely(need > c->in_len || fr->len > q->max_frame ||
				     iov_total(fr->iov, fr->iovcnt) < fr->len) ||
			    unlikely(fr->hdr && !rx_hdr_ok(q, fr->hdr))) {
				/* Several buffers, or a drop: give this chain
				 * and the rest back, take the one-frame path. */
				r = vq_dev_unpop(q->dev, c, (unsigned)k - i);
				if (r < 0)
					return r;
				r = vq_net_rx_deliver(q, fr->iov, fr->iovcnt, fr->len,
						      fr->hdr);
				if (r < 0)
					return r;
				done += i + 1;
				goto next;
			}
			rx_into_chain(q, c, fr);
			r = net_fill(q, c, (uint32_t)need);
			if (r < 0)
				return r;
			q->st.packets++;
			q->st.bytes += fr->len;
		}
		done += k;
next:
		;
	}
	return (int)done;
}

int vq_net_rx_flush(struct vq_net_queue *q)
{
	return net_flush(q);
}

bool vq_net_rx_has_buffers(struct vq_net_queue *q)
{
	return vq_dev_has_avail(q->dev);
}

int vq_net_mac_swapped(const struct iovec *iov, unsigned iovcnt, uint32_t len,
		       uint8_t mac[12], struct iovec *out)
{
	uint8_t orig[12];
	uint64_t off = 12;
	unsigned i, n = 1;

	if (len < 12 || vq_iov_to_buf(iov, iovcnt, 0, orig, 12) != 12)
		return -EINVAL;
	memcpy(mac, orig + 6, 6);
	memcpy(mac + 6, orig, 6);
	out[0].iov_base = mac;
	out[0].iov_len = 12;
	for (i = 0; i < iovcnt; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		out[n].iov_base = (uint8_t *)iov[i].iov_base + off;
		out[n].iov_len = iov[i].iov_len - off;
		off = 0;
		n++;
	}
	return n;
}

unsigned vq_net_rarp_frame(const uint8_t mac[6], uint8_t frame[VQ_NET_RARP_LEN])
{
	/* hardware type 1 (Ethernet), protocol 0x0800 (IPv4), address
	 * lengths 6 and 4, opcode 3 ("request reverse") */
	static const uint8_t arp[8] = { 0, 1, 0x08, 0x00, 6, 4, 0, 3 };
	uint8_t *p = frame;

	memset(frame, 0, VQ_NET_RARP_LEN);
	memset(p, 0xff, 6);
	memcpy(p + 6, mac, 6);
	p[12] = 0x80;                   /* EtherType 0x8035: RARP */
	p[13] = 0x35;
	p += 14;
	memcpy(p, arp, sizeof(arp));
	p += sizeof(arp);
	/* sender and target hardware addresses are both the announced MAC;
	 * the protocol addresses stay 0 (unknown) */
	memcpy(p, mac, 6);
	memcpy(p + 10, mac, 6);
	return VQ_NET_RARP_LEN;
}
