// SPDX-License-Identifier: MIT
/*
 * The virtio-net device layer against our own driver playing the guest, on
 * every layout (split, split in-order, packed, packed in-order): exact
 * bytes, header sizes, mergeable RX buffers and num_buffers, drops counted
 * by reason, used-entry batching, hostile TX and RX chains, and no stale
 * frame ever seen after the RX ring overflowed.
 */
#include <virtq/net.h>

#include "net_layouts.h"
#include "ring_pair.h"

#define VQ_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define IDX_F (VQ_BIT(VQ_F_INDIRECT_DESC) | VQ_BIT(VQ_F_EVENT_IDX))
#define MRG   VQ_BIT(VQ_NET_F_MRG_RXBUF)

struct np {
	struct ring_pair p;
	struct vq_net_queue *q;
};

static void np_init(struct np *n, uint64_t features, uint16_t num,
		    enum vq_net_role role, unsigned used_batch, uint32_t max_frame)
{
	struct vq_net_queue_config c;

	pair_init(&n->p, features | IDX_F, num, 1, 1);
	c = (struct vq_net_queue_config){ .dev = n->p.dev, .role = role,
		.used_batch = used_batch, .max_frame = max_frame };
	CHECK_EQ(vq_net_queue_new(&c, &n->q), 0);
}

static void np_fini(struct np *n)
{
	vq_net_queue_free(n->q);
	pair_fini(&n->p);
}

static void publish(struct np *n)
{
	CHECK(vq_drv_kick_prepare(n->p.drv) >= 0);
}

static uint8_t pat(uint32_t seq, uint32_t i)
{
	return (uint8_t)(seq * 131 + i * 7 + (i >> 8));
}

/* ---- TX ---- */

struct sink {
	unsigned calls;
	uint8_t buf[64][2048];
	uint32_t len[64];
	struct vq_net_hdr hdr[64];
	int ret;                        /* what to return */
	struct np *n;
	unsigned used_seen[64];         /* driver-visible used entries at call */
};

static int sink_fn(void *arg, const struct iovec *iov, unsigned cnt, uint32_t len,
		   const struct vq_net_hdr *h)
{
	struct sink *s = arg;
	uint32_t off = 0;

	CHECK(s->calls < 64);
	CHECK(len <= sizeof(s->buf[0]));
	for (unsigned i = 0; i < cnt; i++) {
		CHECK(off + iov[i].iov_len <= len);
		memcpy(s->buf[s->calls] + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	CHECK_EQ(off, len);
	s->len[s->calls] = len;
	s->hdr[s->calls] = *h;
	if (s->n)
		s->used_seen[s->calls] = vq_drv_has_used(s->n->p.drv);
	s->calls++;
	return s->ret;
}

/* Put a TX frame (header + len bytes of pattern seq) split as asked:
 * split_at 0 = header and data in one segment, else header alone and the
 * data in nseg pieces. */
static void tx_add(struct np *n, uint32_t seq, uint32_t len, unsigned nseg,
		   const uint8_t *hdr, uint32_t hdr_len)
{
	struct vq_seg seg[8];
	uint64_t gpa = pair_alloc(&n->p, hdr_len + len);
	uint8_t *b = pair_hva(&n->p, gpa);
	unsigned k = 0;

	memcpy(b, hdr, hdr_len);
	for (uint32_t i = 0; i < len; i++)
		b[hdr_len + i] = pat(seq, i);
	if (nseg == 0) {
		seg[k++] = (struct vq_seg){ gpa, hdr_len + len };
	} else {
		uint32_t off = 0, piece = len / nseg;

		seg[k++] = (struct vq_seg){ gpa, hdr_len };
		for (unsigned i = 0; i < nseg; i++) {
			uint32_t l = i + 1 == nseg ? len - off : piece;

			seg[k++] = (struct vq_seg){ gpa + hdr_len + off, l };
			off += l;
		}
	}
	CHECK_EQ(vq_drv_add(n->p.drv, seg, k, 0, (void *)(uintptr_t)(seq + 1)), 0);
}

static const uint8_t zero_hdr[12];

static void tx_5_1_6_2_frames_reach_sink_exact(uint64_t lf)
{
	static struct sink s;
	struct np n;
	uint64_t bytes = 0;
	static const uint32_t lens[] = { 60, 64, 1514, 14, 333, 1000 };

	np_init(&n, lf, 64, VQ_NET_TX, 0, 0);
	memset(&s, 0, sizeof(s));
	for (unsigned i = 0; i < 6; i++)
		tx_add(&n, i, lens[i], i % 4, zero_hdr, 12);
	publish(&n);
	CHECK_EQ(vq_net_tx_process(n.q, 0, sink_fn, &s, &bytes), 6);
	CHECK_EQ(s.calls, 6);
	for (unsigned i = 0; i < 6; i++) {
		CHECK_EQ(s.len[i], lens[i]);
		for (uint32_t j = 0; j < lens[i]; j++)
			CHECK_EQ(s.buf[i][j], pat(i, j));
	}
	CHECK_EQ(bytes, 60 + 64 + 1514 + 14 + 333 + 1000);
	CHECK_EQ(vq_net_queue_stats(n.q)->packets, 6);
	CHECK_EQ(vq_net_queue_stats(n.q)->bytes, bytes);
	/* Every chain comes back used, length 0 (TX writes nothing). */
	for (unsigned i = 0; i < 6; i++) {
		void *tok;
		uint32_t len = 99;

		CHECK_EQ(vq_drv_get(n.p.drv, &tok, &len), 1);
		CHECK_EQ((uintptr_t)tok, i + 1);
		CHECK_EQ(len, 0);
	}
	CHECK_EQ(vq_drv_get(n.p.drv, &(void *){ NULL }, &(uint32_t){ 0 }), 0);
	np_fini(&n);
}

/* A nonzero max_pkts bounds the turn; the rest wait for the next. */
static void tx_budget_bounds_turn(uint64_t lf)
{
	static struct sink s;
	struct np n;

	np_init(&n, lf, 128, VQ_NET_TX, 0, 0);
	memset(&s, 0, sizeof(s));
	for (unsigned i = 0; i < 50; i++)
		tx_add(&n, i, 60, 0, zero_hdr, 12);
	publish(&n);
	CHECK_EQ(vq_net_tx_process(n.q, 40, sink_fn, &s, NULL), 40);
	CHECK_EQ(vq_net_tx_process(n.q, 40, sink_fn, &s, NULL), 10);
	CHECK_EQ(vq_net_tx_process(n.q, 40, sink_fn, &s, NULL), 0);
	CHECK_EQ(s.calls, 50);
	np_fini(&n);
}

/* --used-batch: 1 publishes each entry before the next frame is handled,
 * 0 publishes once per burst, N every N. */
static void tx_used_batch_publication(uint64_t lf)
{
	static struct sink s;
	static const unsigned batches[] = { 1, 0, 4 };

	for (unsigned b = 0; b < 3; b++) {
		struct np n;

		np_init(&n, lf, 64, VQ_NET_TX, batches[b], 0);
		memset(&s, 0, sizeof(s));
		s.n = &n;
		for (unsigned i = 0; i < 10; i++)
			tx_add(&n, i, 60, 0, zero_hdr, 12);
		publish(&n);
		CHECK_EQ(vq_net_tx_process(n.q, 0, sink_fn, &s, NULL), 10);
		CHECK_EQ(s.calls, 10);
		if (batches[b] == 1) {
			CHECK_EQ(s.used_seen[0], 0);
			for (unsigned i = 1; i < 10; i++)
				CHECK_EQ(s.used_seen[i], 1);
			CHECK_EQ(vq_net_queue_stats(n.q)->flushes, 10);
		} else if (batches[b] == 0) {
			for (unsigned i = 0; i < 10; i++)
				CHECK_EQ(s.used_seen[i], 0);
			CHECK_EQ(vq_net_queue_stats(n.q)->flushes, 1);
		} else {
			for (unsigned i = 0; i < 10; i++)
				CHECK_EQ(s.used_seen[i], i >= 4);
			CHECK_EQ(vq_net_queue_stats(n.q)->flushes, 3);
		}
		CHECK(vq_drv_has_used(n.p.drv));
		np_fini(&n);
	}
}

static void tx_hostile_writable_part_breaks(uint64_t lf)
{
	static struct sink s;
	struct np n;
	struct vq_seg seg[2];

	np_init(&n, lf, 16, VQ_NET_TX, 0, 0);
	memset(&s, 0, sizeof(s));
	seg[0] = (struct vq_seg){ pair_alloc(&n.p, 100), 100 };
	seg[1] = (struct vq_seg){ pair_alloc(&n.p, 100), 100 };
	CHECK_EQ(vq_drv_add(n.p.drv, seg, 1, 1, (void *)1), 0);
	publish(&n);
	CHECK_EQ(vq_net_tx_process(n.q, 0, sink_fn, &s, NULL), -EINVAL);
	CHECK_EQ(s.calls, 0);
	CHECK_EQ(vq_dev_error(n.p.dev), -EINVAL);
	CHECK(strstr(vq_dev_error_msg(n.p.dev), "Unexpected descriptor format for TX"));
	CHECK_RULE_FIRST(vq_dev_error_msg(n.p.dev));
	/* Broken stays broken. */
	CHECK_EQ(vq_net_tx_process(n.q, 0, sink_fn, &s, NULL), -EINVAL);
	np_fini(&n);
}

static void tx_hostile_shorter_than_header_breaks(uint64_t lf)
{
	static struct sink s;
	struct np n;
	struct vq_seg seg = { 0, 11 };

	np_init(&n, lf, 16, VQ_NET_TX, 0, 0);
	memset(&s, 0, sizeof(s));
	seg.addr = pair_alloc(&n.p, 11);
	CHECK_EQ(vq_drv_add(n.p.drv, &seg, 1, 0, (void *)1), 0);
	publish(&n);
	CHECK_EQ(vq_net_tx_process(n.q, 0, sink_fn, &s, NULL), -EINVAL);
	CHECK_EQ(s.calls, 0);
	CHECK(strstr(vq_dev_error_msg(n.p.dev), "Unexpected header len for TX"));
	CHECK_RULE_FIRST(vq_dev_error_msg(n.p.dev));
	np_fini(&n);
}

/* 5.1.6.2: a TX buffer of zero bytes holds no header: the queue breaks,
 * and nothing on the way looks at a segment the chain does not have (found
 * by fuzz_ring: the prefetch did arithmetic on an absent iov[0]). */
static void tx_hostile_empty_chain_breaks(uint64_t lf)
{
	static struct sink s;
	struct np n;
	struct vq_seg seg = { 0, 0 };

	np_init(&n, lf, 16, VQ_NET_TX, 0, 0);
	memset(&s, 0, sizeof(s));
	seg.addr = pair_alloc(&n.p, 64);
	CHECK_EQ(vq_drv_add(n.p.drv, &seg, 1, 0, (void *)1), 0);
	publish(&n);
	CHECK(vq_net_tx_process(n.q, 0, sink_fn, &s, NULL) < 0);
	CHECK_EQ(s.calls, 0);
	CHECK(vq_dev_error(n.p.dev) < 0);
	np_fini(&n);
}

/* Headers asking for what was not negotiated (VQ_NET_F_CSUM is, so
 * headers are read), runts, oversize frames and sink refusals: dropped,
 * counted by reason, chains still returned. */
static void tx_drops_counted_by_reason(uint64_t lf)
{
	static struct sink s;
	struct np n;
	uint8_t gso[12] = { 0, 1 };             /* GSO_TCPV4, not offered */
	uint8_t csum[12] = { VQ_NET_HDR_F_NEEDS_CSUM, 0, 0, 0, 0, 0, 14, 0, 16 };
	uint8_t valid[12] = { VQ_NET_HDR_F_DATA_VALID };  /* RX-only flag */
	const struct vq_net_stats *st;

	np_init(&n, lf | VQ_BIT(VQ_NET_F_CSUM), 64, VQ_NET_TX, 0, 1000);
	memset(&s, 0, sizeof(s));
	tx_add(&n, 0, 60, 0, gso, 12);
	tx_add(&n, 1, 60, 1, csum, 12);         /* negotiated: passed on */
	tx_add(&n, 2, 60, 2, valid, 12);
	tx_add(&n, 3, 13, 0, zero_hdr, 12);     /* runt */
	tx_add(&n, 4, 1001, 3, zero_hdr, 12);   /* over max_frame */
	tx_add(&n, 5, 1000, 3, zero_hdr, 12);   /* exactly max_frame: fine */
	tx_add(&n, 6, 60, 0, zero_hdr, 12);
	publish(&n);
	CHECK_EQ(vq_net_tx_process(n.q, 0, sink_fn, &s, NULL), 7);
	CHECK_EQ(s.calls, 3);
	CHECK_EQ(s.len[0], 60);
	CHECK_EQ(s.hdr[0].flags, VQ_NET_HDR_F_NEEDS_CSUM);
	CHECK_EQ(s.hdr[0].csum_start, 14);
	CHECK_EQ(s.hdr[0].csum_offset, 16);
	CHECK_EQ(s.len[1], 1000);
	CHECK_EQ(s.len[2], 60);
	CHECK_EQ(s.buf[2][5], pat(6, 5));
	st = vq_net_queue_stats(n.q);
	CHECK_EQ(st->drops[VQ_NET_DROP_BAD_HDR], 2);
	CHECK_EQ(st->drops[VQ_NET_DROP_RUNT], 1);
	CHECK_EQ(st->drops[VQ_NET_DROP_OVERSIZE], 1);
	CHECK_EQ(st->packets, 3);
	CHECK_EQ(st->buffers, 7);
	CHECK_EQ(vq_dev_error(n.p.dev), 0);
	for (unsigned i = 0; i < 7; i++) {
		void *tok;
		uint32_t len;

		CHECK_EQ(vq_drv_get(n.p.drv, &tok, &len), 1);
		CHECK_EQ((uintptr_t)tok, i + 1);
	}

	/* A sink that reports the TAP full. */
	memset(&s, 0, sizeof(s));
	s.ret = VQ_NET_SINK_DROP(VQ_NET_DROP_SINK_FULL);
	tx_add(&n, 7, 60, 0, zero_hdr, 12);
	tx_add(&n, 8, 60, 0, zero_hdr, 12);
	publish(&n);
	CHECK_EQ(vq_net_tx_process(n.q, 0, sink_fn, &s, NULL), 2);
	CHECK_EQ(st->drops[VQ_NET_DROP_SINK_FULL], 2);
	CHECK_EQ(st->packets, 3);
	np_fini(&n);
}

/* A TX header in wire form. */
static void hdr_wire(uint8_t b[12], uint8_t flags, uint8_t gso_type, uint16_t gso_size,
		     uint16_t csum_start, uint16_t csum_offset)
{
	struct vq_net_hdr h = { .flags = flags, .gso_type = gso_type, .hdr_len = 54,
				.gso_size = gso_size, .csum_start = csum_start,
				.csum_offset = csum_offset };

	vq_net_hdr_encode(b, 12, &h);
}

#define HOST_TSO (VQ_BIT(VQ_NET_F_CSUM) | VQ_BIT(VQ_NET_F_HOST_TSO4) | \
		  VQ_BIT(VQ_NET_F_HOST_TSO6))

/*
 * 5.1.6.2.1 with the offloads negotiated: a segmentation type the guest may
 * use (HOST_TSO4/6, ECN only with HOST_ECN), with NEEDS_CSUM and an MSS, is
 * passed on with its header; anything else is a bad header.  The checksum
 * place must lie in the frame.  Flag bits nobody defined are ignored
 * (5.1.6.2.2).
 */
static void tx_5_1_6_2_segmentation_offload_rules(uint64_t lf)
{
	static struct sink s;
	static const struct {
		uint8_t flags, gso;
		uint16_t mss, cs, co;
		uint32_t len;
		bool passed[2];         /* without, with HOST_ECN */
	} c[] = {
		{ 1, VQ_NET_HDR_GSO_TCPV4, 1448, 34, 16, 1514, { true, true } },
		{ 1, VQ_NET_HDR_GSO_TCPV6, 1428, 54, 16, 1514, { true, true } },
		{ 1, VQ_NET_HDR_GSO_TCPV4 | VQ_NET_HDR_GSO_ECN, 1448, 34, 16, 1514, { false, true } },
		{ 1, VQ_NET_HDR_GSO_UDP, 1472, 34, 6, 1514, { false, false } },  /* no HOST_UFO */
		{ 0, VQ_NET_HDR_GSO_TCPV4, 1448, 34, 16, 1514, { false, false } }, /* no NEEDS_CSUM */
		{ 1, VQ_NET_HDR_GSO_TCPV4, 0, 34, 16, 1514, { false, false } },    /* no MSS */
		/* an MSS below TCP's least would have the host cut one
		 * frame into thousands */
		{ 1, VQ_NET_HDR_GSO_TCPV4, 1, 34, 16, 1514, { false, false } },
		{ 1, VQ_NET_HDR_GSO_TCPV6, VQ_NET_MIN_GSO_SIZE - 1, 54, 16, 1514, { false, false } },
		{ 1, VQ_NET_HDR_GSO_TCPV6, VQ_NET_MIN_GSO_SIZE, 54, 16, 1514, { true, true } },
		{ 1, 0x7f, 1448, 34, 16, 1514, { false, false } },                     /* unknown type */
		{ 0, VQ_NET_HDR_GSO_ECN, 0, 0, 0, 60, { false, false } },          /* ECN alone */
		{ 1, 0, 0, 44, 16, 62, { true, true } },        /* checksum ends at the last byte */
		{ 1, 0, 0, 44, 16, 61, { false, false } },      /* one past it */
		{ 1, 0, 0, 0xffff, 0xffff, 1514, { false, false } },
		{ 0x08 | 0x40, 0, 0, 0, 0, 60, { true, true } }, /* unknown flags: ignored */
	};
	const unsigned n_cases = sizeof(c) / sizeof(c[0]);

	for (unsigned ecn = 0; ecn < 2; ecn++) {
		struct np n;
		unsigned want = 0, bad = 0, gso = 0;

		np_init(&n, lf | HOST_TSO | (ecn ? VQ_BIT(VQ_NET_F_HOST_ECN) : 0),
			64, VQ_NET_TX, 0, 0);
		memset(&s, 0, sizeof(s));
		for (unsigned i = 0; i < n_cases; i++) {
			uint8_t h[12];

			hdr_wire(h, c[i].flags, c[i].gso, c[i].mss, c[i].cs, c[i].co);
			tx_add(&n, i, c[i].len, i % 3, h, 12);
		}
		publish(&n);
		CHECK_EQ(vq_net_tx_process(n.q, 0, sink_fn, &s, NULL), (int)n_cases);
		for (unsigned i = 0; i < n_cases; i++) {
			if (!c[i].passed[ecn]) {
				bad++;
				continue;
			}
			CHECK_EQ(s.len[want], c[i].len);
			CHECK_EQ(s.buf[want][7], pat(i, 7));
			CHECK_EQ(s.hdr[want].gso_type, c[i].gso);
			CHECK_EQ(s.hdr[want].gso_size, c[i].mss);
			CHECK_EQ(s.hdr[want].csum_start, c[i].cs);
			CHECK_EQ(s.hdr[want].csum_offset, c[i].co);
			CHECK_EQ(s.hdr[want].hdr_len, 54);
			gso += c[i].gso != 0;
			want++;
		}
		CHECK_EQ(s.calls, want);
		CHECK_EQ(vq_net_queue_stats(n.q)->drops[VQ_NET_DROP_BAD_HDR], bad);
		CHECK_EQ(vq_net_queue_stats(n.q)->gso, gso);
		CHECK_EQ(vq_dev_error(n.p.dev), 0);
		np_fini(&n);
	}
}

/* tx_evict flushes the lines of frames the sink has taken: the frames and
 * the guest's buffers are exactly as without it, whatever the segment
 * layout (a frame split across segments, one shorter than a line). */
static void tx_evict_frames_intact(uint64_t lf)
{
	static struct sink s;
	struct vq_net_queue_config c;
	struct np n;

	pair_init(&n.p, lf | IDX_F, 16, 1, 1);
	c = (struct vq_net_queue_config){ .dev = n.p.dev, .role = VQ_NET_TX,
		.tx_evict = VQ_NET_TX_EVICT_ON };
	CHECK_EQ(vq_net_queue_new(&c, &n.q), 0);
	memset(&s, 0, sizeof(s));
	tx_add(&n, 0, 60, 0, zero_hdr, 12);
	tx_add(&n, 1, 1514, 3, zero_hdr, 12);
	tx_add(&n, 2, 17, 1, zero_hdr, 12);
	publish(&n);
	CHECK_EQ(vq_net_tx_process(n.q, 0, sink_fn, &s, NULL), 3);
	CHECK_EQ(s.calls, 3);
	CHECK_EQ(s.len[0], 60);
	CHECK_EQ(s.len[1], 1514);
	CHECK_EQ(s.len[2], 17);
	for (unsigned f = 0; f < 3; f++)
		for (uint32_t i = 0; i < s.len[f]; i++)
			CHECK_EQ(s.buf[f][i], pat(f, i));
	CHECK_EQ(vq_dev_error(n.p.dev), 0);
	np_fini(&n);
}

/* AUTO under a clock that makes one setting faster: frames cost on_ns each
 * when their lines are flushed and off_ns when not. */
struct evict_sim {
	struct np n;
	uint64_t gpa[64];
	uint64_t now;
	uint64_t on_ns, off_ns;
};

static uint64_t sim_clock(void *arg)
{
	return ((struct evict_sim *)arg)->now;
}

static int sink_take(void *arg, const struct iovec *iov, unsigned cnt, uint32_t len,
		     const struct vq_net_hdr *h)
{
	(void)arg; (void)iov; (void)cnt; (void)len; (void)h;
	return 0;
}

/* Send `windows` windows of frames, 64 per vq_net_tx_process call; returns
 * the frames flushed among them. */
static uint64_t sim_run(struct evict_sim *e, unsigned windows)
{
	const struct vq_net_stats *st = vq_net_queue_stats(e->n.q);
	uint64_t ev0 = st->evicted;
	unsigned calls = windows * (VQ_NET_EVICT_WINDOW / 64);

	for (unsigned c = 0; c < calls; c++) {
		uint64_t before = st->evicted, on;
		void *tok[64];
		uint32_t len[64];

		for (unsigned i = 0; i < 64; i++) {
			struct vq_seg sg = { e->gpa[i], 12 + 60 };

			CHECK_EQ(vq_drv_add(e->n.p.drv, &sg, 1, 0, (void *)(uintptr_t)(i + 1)), 0);
		}
		publish(&e->n);
		CHECK_EQ(vq_net_tx_process(e->n.q, 0, sink_take, NULL, NULL), 64);
		CHECK_EQ(vq_drv_get_burst(e->n.p.drv, tok, len, 64), 64);
		on = st->evicted - before;
		e->now += on * e->on_ns + (64 - on) * e->off_ns;
	}
	return st->evicted - ev0;
}

/* VQ_NET_TX_EVICT_AUTO keeps whichever setting moves frames faster, and
 * measures again after VQ_NET_EVICT_KEEP windows: when the faster one
 * changes (the guest's vCPU moved), it follows. */
static void tx_evict_auto_follows_faster(uint64_t lf)
{
	static struct evict_sim e;
	const uint64_t window = VQ_NET_EVICT_WINDOW;
	struct vq_net_queue_config c;

	memset(&e, 0, sizeof(e));
	e.now = 1000000000ull;
	pair_init(&e.n.p, lf | IDX_F, 64, 1, 1);
	for (unsigned i = 0; i < 64; i++) {
		e.gpa[i] = pair_alloc(&e.n.p, 12 + 60);
		memset(pair_hva(&e.n.p, e.gpa[i]), 0, 12 + 60);
	}
	c = (struct vq_net_queue_config){ .dev = e.n.p.dev, .role = VQ_NET_TX,
		.tx_evict = VQ_NET_TX_EVICT_AUTO, .now_ns = sim_clock,
		.clock_arg = &e };
	CHECK_EQ(vq_net_queue_new(&c, &e.n.q), 0);

	/* An idle guest first: one frame a millisecond.  Time without
	 * traffic says nothing about either setting and is not counted. */
	e.on_ns = 50;
	e.off_ns = 80;
	for (unsigned k = 0; k < 300; k++) {
		struct vq_seg sg = { e.gpa[0], 12 + 60 };
		void *tok;
		uint32_t len;

		CHECK_EQ(vq_drv_add(e.n.p.drv, &sg, 1, 0, (void *)1), 0);
		publish(&e.n);
		CHECK_EQ(vq_net_tx_process(e.n.q, 0, sink_take, NULL, NULL), 1);
		CHECK_EQ(vq_drv_get(e.n.p.drv, &tok, &len), 1);
		e.now += 1000000;
	}
	/* Flushing is faster (far placement): once measured, every frame. */
	if (sim_run(&e, 8) == 0) {
		/* no CLFLUSHOPT on this CPU: AUTO is OFF, as documented */
		fprintf(stderr, "   no CLFLUSHOPT: AUTO stays off\n");
		CHECK_EQ(sim_run(&e, 4), 0);
		goto out;
	}
	CHECK_EQ(sim_run(&e, 30), 30 * window);
	/* Now keeping the lines is faster (near placement): by the end of
	 * the kept phase and the next measurement it flushes none. */
	e.on_ns = 80;
	e.off_ns = 50;
	sim_run(&e, VQ_NET_EVICT_KEEP);
	CHECK_EQ(sim_run(&e, 30), 0);
	/* It keeps measuring: a cycle of 6 probe windows and the kept ones
	 * flushes in the 3 probes that try the other setting (edges: the
	 * windows started one call after ours). */
	{
		uint64_t ev = sim_run(&e, 6 + VQ_NET_EVICT_KEEP);

		CHECK(ev >= 3 * window - 64 && ev <= 3 * window + 64);
	}
	CHECK_EQ(vq_dev_error(e.n.p.dev), 0);
out:
	np_fini(&e.n);
}

/* 5.1.6.2: without VQ_NET_F_CSUM or GSO the driver may not ask for an
 * offload, and the header is not read: whatever bytes it holds, the frame
 * goes on with a clear header. */
static void tx_5_1_6_2_header_ignored_without_offloads(uint64_t lf)
{
	static struct sink s;
	struct np n;
	uint8_t junk[12] = { 0xff, 0x81, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
	const struct vq_net_stats *st;

	np_init(&n, lf, 16, VQ_NET_TX, 0, 0);
	memset(&s, 0, sizeof(s));
	tx_add(&n, 0, 60, 0, junk, 12);
	tx_add(&n, 1, 60, 2, junk, 12);
	publish(&n);
	CHECK_EQ(vq_net_tx_process(n.q, 0, sink_fn, &s, NULL), 2);
	CHECK_EQ(s.calls, 2);
	for (unsigned i = 0; i < 2; i++) {
		CHECK_EQ(s.len[i], 60);
		CHECK_EQ(s.buf[i][7], pat(i, 7));
		CHECK_EQ(s.hdr[i].flags, 0);
		CHECK_EQ(s.hdr[i].gso_type, 0);
		CHECK_EQ(s.hdr[i].csum_start, 0);
	}
	st = vq_net_queue_stats(n.q);
	CHECK_EQ(st->drops[VQ_NET_DROP_BAD_HDR], 0);
	CHECK_EQ(st->packets, 2);
	np_fini(&n);
}

/* A sink error stops the turn: the chain it saw is returned, the rest of the
 * burst goes back to the ring and is seen again next time. */
static void tx_sink_error_gives_back_rest(uint64_t lf)
{
	static struct sink s;
	struct np n;

	np_init(&n, lf, 64, VQ_NET_TX, 0, 0);
	memset(&s, 0, sizeof(s));
	for (unsigned i = 0; i < 5; i++)
		tx_add(&n, i, 60, 0, zero_hdr, 12);
	publish(&n);
	s.ret = -EIO;
	CHECK_EQ(vq_net_tx_process(n.q, 0, sink_fn, &s, NULL), -EIO);
	CHECK_EQ(s.calls, 1);
	s.ret = 0;
	CHECK_EQ(vq_net_tx_process(n.q, 0, sink_fn, &s, NULL), 4);
	CHECK_EQ(s.calls, 5);
	for (unsigned i = 1; i < 5; i++)
		CHECK_EQ(s.buf[i][0], pat(i, 0));
	for (unsigned i = 0; i < 5; i++) {
		void *tok;
		uint32_t len;

		CHECK_EQ(vq_drv_get(n.p.drv, &tok, &len), 1);
		CHECK_EQ((uintptr_t)tok, i + 1);
	}
	np_fini(&n);
}

/* ---- RX ---- */

struct rxbuf {
	uint64_t gpa;
	uint32_t size;
	unsigned nseg;
};

/* Post an RX buffer of size bytes in nseg segments; token = idx + 1. */
static void rx_post(struct np *n, struct rxbuf *b, unsigned idx)
{
	struct vq_seg seg[8];
	uint32_t off = 0, piece = b->size / b->nseg;

	memset(pair_hva(&n->p, b->gpa), 0xAA, b->size);
	for (unsigned i = 0; i < b->nseg; i++) {
		uint32_t l = i + 1 == b->nseg ? b->size - off : piece;

		seg[i] = (struct vq_seg){ b->gpa + off, l };
		off += l;
	}
	CHECK_EQ(vq_drv_add(n->p.drv, seg, 0, b->nseg, (void *)(uintptr_t)(idx + 1)), 0);
}

static void rx_alloc(struct np *n, struct rxbuf *b, unsigned count,
		     uint32_t size, unsigned nseg)
{
	for (unsigned i = 0; i < count; i++) {
		b[i].size = size;
		b[i].nseg = nseg;
		b[i].gpa = pair_alloc(&n->p, size);
	}
}

/* Frames start with their sequence number (the stale-frame test). */
static bool stamp_seq;

static int deliver(struct np *n, uint32_t seq, uint32_t len)
{
	static uint8_t frame[70000];
	struct iovec iov[3];
	uint32_t a = len / 3, b = len / 2;

	for (uint32_t i = 0; i < len; i++)
		frame[i] = pat(seq, i);
	if (stamp_seq && len >= 4)
		memcpy(frame, &seq, 4);         /* the frame says who it is */
	/* A gathered source: three pieces. */
	iov[0] = (struct iovec){ frame, a };
	iov[1] = (struct iovec){ frame + a, b - a };
	iov[2] = (struct iovec){ frame + b, len - b };
	return vq_net_rx_deliver(n->q, iov, 3, len, NULL);
}

/* The same through the burst path: frame k has sequence seq0 + k. */
static int deliver_burst(struct np *n, uint32_t seq0, const uint32_t *lens,
			 unsigned cnt)
{
	static uint8_t frames[8][70000];
	struct iovec iov[8][2];
	struct vq_net_frame f[8];

	CHECK(cnt <= 8);
	for (unsigned k = 0; k < cnt; k++) {
		uint32_t seq = seq0 + k;

		for (uint32_t i = 0; i < lens[k]; i++)
			frames[k][i] = pat(seq, i);
		memcpy(frames[k], &seq, 4);
		iov[k][0] = (struct iovec){ frames[k], lens[k] / 2 };
		iov[k][1] = (struct iovec){ frames[k] + lens[k] / 2, lens[k] - lens[k] / 2 };
		f[k] = (struct vq_net_frame){ iov[k], 2, lens[k], NULL };
	}
	return vq_net_rx_deliver_burst(n->q, f, cnt);
}

/* deliver() with a header, alone or through the burst path. */
static int deliver_hdr(struct np *n, uint32_t seq, uint32_t len,
		       const struct vq_net_hdr *h, bool burst)
{
	static uint8_t frame[VQ_NET_MAX_FRAME];
	struct iovec iov = { frame, len };
	struct vq_net_frame f = { &iov, 1, len, h };

	for (uint32_t i = 0; i < len; i++)
		frame[i] = pat(seq, i);
	return burst ? vq_net_rx_deliver_burst(n->q, &f, 1)
		     : vq_net_rx_deliver(n->q, &iov, 1, len, h);
}

static uint32_t frame_seq(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint16_t le16_at(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static void rx_5_1_6_4_one_buffer_exact_bytes(uint64_t lf)
{
	static struct rxbuf b[8];
	static const uint32_t lens[] = { 60, 1514, 14, 2036 };
	struct np n;

	np_init(&n, lf, 16, VQ_NET_RX, 0, 0);
	rx_alloc(&n, b, 4, 2048, 1);
	for (unsigned i = 0; i < 4; i++) {
		b[i].nseg = 1 + i % 3;  /* header may straddle segments */
		rx_post(&n, &b[i], i);
	}
	publish(&n);
	for (unsigned i = 0; i < 4; i++)
		CHECK_EQ(deliver(&n, i, lens[i]), 1);
	CHECK(!vq_drv_has_used(n.p.drv));      /* staged, not flushed */
	CHECK_EQ(vq_net_rx_flush(n.q), 4);
	for (unsigned i = 0; i < 4; i++) {
		void *tok;
		uint32_t len;
		uint8_t *p;

		CHECK_EQ(vq_drv_get(n.p.drv, &tok, &len), 1);
		CHECK_EQ((uintptr_t)tok, i + 1);
		CHECK_EQ(len, 12 + lens[i]);
		p = pair_hva(&n.p, b[i].gpa);
		for (unsigned j = 0; j < 10; j++)
			CHECK_EQ(p[j], 0);
		/* 5.1.6.4: num_buffers is 1 without MRG_RXBUF (VERSION_1). */
		CHECK_EQ(le16_at(p + 10), 1);
		for (uint32_t j = 0; j < lens[i]; j++)
			CHECK_EQ(p[12 + j], pat(i, j));
		if (12 + lens[i] < b[i].size)
			CHECK_EQ(p[12 + lens[i]], 0xAA);        /* nothing more written */
	}
	CHECK_EQ(vq_net_queue_stats(n.q)->packets, 4);
	np_fini(&n);
}

/* Without MRG_RXBUF a frame that does not fit one buffer is dropped as
 * oversize and the buffer is given back for the next frame. */
static void rx_5_1_6_3_oversize_without_mrg(uint64_t lf)
{
	static struct rxbuf b[2];
	struct np n;
	void *tok;
	uint32_t len;

	np_init(&n, lf, 16, VQ_NET_RX, 0, 0);
	rx_alloc(&n, b, 2, 100, 2);
	rx_post(&n, &b[0], 0);
	rx_post(&n, &b[1], 1);
	publish(&n);
	CHECK_EQ(deliver(&n, 1, 89), 0);        /* 12 + 89 > 100 */
	CHECK_EQ(vq_net_queue_stats(n.q)->drops[VQ_NET_DROP_OVERSIZE], 1);
	CHECK_EQ(deliver(&n, 2, 88), 1);        /* 12 + 88 = 100: fits */
	CHECK_EQ(vq_net_rx_flush(n.q), 1);
	CHECK_EQ(vq_drv_get(n.p.drv, &tok, &len), 1);
	CHECK_EQ((uintptr_t)tok, 1);
	CHECK_EQ(len, 100);
	CHECK_EQ(((uint8_t *)pair_hva(&n.p, b[0].gpa))[12 + 87], pat(2, 87));
	CHECK_EQ(vq_drv_get(n.p.drv, &tok, &len), 0);
	np_fini(&n);
}

static void rx_5_1_6_4_mrg_splits_and_sets_num_buffers(uint64_t lf)
{
	static struct rxbuf b[16];
	static uint8_t got[4096];
	struct np n;
	uint32_t total = 0;

	np_init(&n, lf | MRG, 32, VQ_NET_RX, 0, 0);
	rx_alloc(&n, b, 16, 256, 1);
	for (unsigned i = 0; i < 16; i++) {
		b[i].nseg = 1 + (i & 1);
		rx_post(&n, &b[i], i);
	}
	publish(&n);
	CHECK_EQ(deliver(&n, 7, 1000), 1);     /* 1012 bytes: 256*3 + 244 */
	CHECK_EQ(deliver(&n, 8, 244), 1);      /* exactly one buffer */
	CHECK_EQ(deliver(&n, 9, 245), 1);      /* one byte into a second */
	CHECK_EQ(vq_net_rx_flush(n.q), 7);
	static const uint32_t want[] = { 256, 256, 256, 244, 256, 256, 1 };
	for (unsigned i = 0; i < 7; i++) {
		void *tok;
		uint32_t len;

		CHECK_EQ(vq_drv_get(n.p.drv, &tok, &len), 1);
		CHECK_EQ((uintptr_t)tok, i + 1);
		CHECK_EQ(len, want[i]);
		memcpy(got + total, pair_hva(&n.p, b[i].gpa), len);
		total += len;
		if (len < 256)
			CHECK_EQ(((uint8_t *)pair_hva(&n.p, b[i].gpa))[len], 0xAA);
	}
	/* First frame: header with num_buffers 4, then the 1000 bytes. */
	CHECK_EQ(le16_at(got + 10), 4);
	for (uint32_t j = 0; j < 1000; j++)
		CHECK_EQ(got[12 + j], pat(7, j));
	CHECK_EQ(le16_at(got + 1012 + 10), 1);
	for (uint32_t j = 0; j < 244; j++)
		CHECK_EQ(got[1012 + 12 + j], pat(8, j));
	CHECK_EQ(le16_at(got + 1012 + 256 + 10), 2);
	for (uint32_t j = 0; j < 245; j++)
		CHECK_EQ(got[1012 + 256 + 12 + j], pat(9, j));
	CHECK_EQ(vq_net_queue_stats(n.q)->buffers, 7);
	np_fini(&n);
}

#define GUEST_TSO (VQ_BIT(VQ_NET_F_GUEST_CSUM) | VQ_BIT(VQ_NET_F_GUEST_TSO4) | \
		   VQ_BIT(VQ_NET_F_GUEST_TSO6))

/*
 * 5.1.6.4.2: the header given to the guest carries only what it negotiated.
 * Without GUEST_CSUM the flags are zero; a segmentation frame without its
 * GUEST_TSO bit is dropped (bad header) and its buffer goes to the next
 * frame.  With them, a 64 KiB TSO frame reaches the guest across merged
 * buffers with its header as given (num_buffers ours), by both paths.
 */
static void rx_5_1_6_4_offload_header_as_negotiated(uint64_t lf)
{
	static struct rxbuf b[64];
	static uint8_t got[VQ_NET_MAX_FRAME + 12];
	const struct vq_net_hdr csum = { .flags = VQ_NET_HDR_F_NEEDS_CSUM |
						  VQ_NET_HDR_F_DATA_VALID,
					 .csum_start = 34, .csum_offset = 16 };
	const struct vq_net_hdr tso = { .flags = VQ_NET_HDR_F_NEEDS_CSUM,
					.gso_type = VQ_NET_HDR_GSO_TCPV4, .hdr_len = 54,
					.gso_size = 1448, .csum_start = 34, .csum_offset = 16,
					.num_buffers = 77 };
	struct np n;
	void *tok;
	uint32_t len;
	uint8_t *p;

	for (unsigned burst = 0; burst < 2; burst++) {
		/* Nothing negotiated. */
		np_init(&n, lf, 16, VQ_NET_RX, 0, 0);
		rx_alloc(&n, b, 2, 2048, 1);
		rx_post(&n, &b[0], 0);
		rx_post(&n, &b[1], 1);
		publish(&n);
		/* dropped: 0 alone, 1 (handled) in a burst */
		CHECK_EQ(deliver_hdr(&n, 1, 1514, &tso, burst), (int)burst);
		CHECK_EQ(deliver_hdr(&n, 2, 1514, &csum, burst), 1);
		CHECK_EQ(vq_net_rx_flush(n.q), 1);
		CHECK_EQ(vq_drv_get(n.p.drv, &tok, &len), 1);
		CHECK_EQ((uintptr_t)tok, 1);            /* the dropped frame's buffer */
		CHECK_EQ(len, 12 + 1514);
		p = pair_hva(&n.p, b[0].gpa);
		CHECK_EQ(p[0], 0);                      /* flags cut: no GUEST_CSUM */
		CHECK_EQ(p[1], 0);
		CHECK_EQ(p[12 + 100], pat(2, 100));
		CHECK_EQ(vq_net_queue_stats(n.q)->drops[VQ_NET_DROP_BAD_HDR], 1);
		CHECK_EQ(vq_net_queue_stats(n.q)->gso, 0);
		np_fini(&n);

		/* GUEST_CSUM and TSO, mergeable buffers of 4 KiB. */
		np_init(&n, lf | MRG | GUEST_TSO, 64, VQ_NET_RX, 0, 0);
		rx_alloc(&n, b, 40, 4096, 1);
		for (unsigned i = 0; i < 40; i++)
			rx_post(&n, &b[i], i);
		publish(&n);
		CHECK_EQ(deliver_hdr(&n, 3, 65550, &tso, burst), 1);
		CHECK_EQ(vq_net_rx_flush(n.q), 17);    /* 65562 bytes in 4 KiB */
		for (unsigned i = 0; i < 17; i++) {
			CHECK_EQ(vq_drv_get(n.p.drv, &tok, &len), 1);
			CHECK_EQ(len, i < 16 ? 4096 : 65562 - 16 * 4096);
			memcpy(got + i * 4096, pair_hva(&n.p, b[i].gpa), len);
		}
		{
			struct vq_net_hdr h;

			vq_net_hdr_decode(got, 12, &h);
			CHECK_EQ(h.flags, VQ_NET_HDR_F_NEEDS_CSUM);
			CHECK_EQ(h.gso_type, VQ_NET_HDR_GSO_TCPV4);
			CHECK_EQ(h.hdr_len, 54);
			CHECK_EQ(h.gso_size, 1448);
			CHECK_EQ(h.csum_start, 34);
			CHECK_EQ(h.csum_offset, 16);
			CHECK_EQ(h.num_buffers, 17);
		}
		for (uint32_t j = 0; j < 65550; j += 251)
			CHECK_EQ(got[12 + j], pat(3, j));
		CHECK_EQ(got[12 + 65549], pat(3, 65549));
		/* ECN was not negotiated: a TSO frame with the ECN bit is not
		 * the guest's */
		{
			struct vq_net_hdr e = tso;

			e.gso_type |= VQ_NET_HDR_GSO_ECN;
			CHECK_EQ(deliver_hdr(&n, 4, 1514, &e, burst), (int)burst);
			CHECK_EQ(vq_net_queue_stats(n.q)->drops[VQ_NET_DROP_BAD_HDR], 1);
		}
		CHECK_EQ(vq_net_queue_stats(n.q)->gso, 1);
		CHECK_EQ(vq_dev_error(n.p.dev), 0);
		np_fini(&n);
	}
}

/* MRG_RXBUF with too few buffers for the frame: the buffers popped for it
 * go back unused, the drop is counted, and a smaller frame then uses them. */
static void rx_mrg_partial_frame_gives_buffers_back(uint64_t lf)
{
	static struct rxbuf b[2];
	struct np n;
	void *tok;
	uint32_t len;

	np_init(&n, lf | MRG, 16, VQ_NET_RX, 0, 0);
	rx_alloc(&n, b, 2, 256, 1);
	rx_post(&n, &b[0], 0);
	rx_post(&n, &b[1], 1);
	publish(&n);
	CHECK_EQ(deliver(&n, 1, 1000), 0);
	CHECK_EQ(vq_net_queue_stats(n.q)->drops[VQ_NET_DROP_NO_RX_BUF], 1);
	CHECK_EQ(vq_net_rx_flush(n.q), 0);
	CHECK(!vq_drv_has_used(n.p.drv));
	CHECK_EQ(deliver(&n, 2, 100), 1);
	CHECK_EQ(deliver(&n, 3, 100), 1);
	CHECK_EQ(deliver(&n, 4, 100), 0);
	CHECK_EQ(vq_net_queue_stats(n.q)->drops[VQ_NET_DROP_NO_RX_BUF], 2);
	CHECK_EQ(vq_net_rx_flush(n.q), 2);
	for (unsigned i = 0; i < 2; i++) {
		uint8_t *p = pair_hva(&n.p, b[i].gpa);

		CHECK_EQ(vq_drv_get(n.p.drv, &tok, &len), 1);
		CHECK_EQ((uintptr_t)tok, i + 1);
		CHECK_EQ(len, 112);
		CHECK_EQ(le16_at(p + 10), 1);
		CHECK_EQ(p[12], pat(2 + i, 0));
		CHECK_EQ(p[111], pat(2 + i, 99));
	}
	np_fini(&n);
}

static void rx_no_buffer_dropped_counted(uint64_t lf)
{
	struct np n;

	np_init(&n, lf, 16, VQ_NET_RX, 1, 0);
	CHECK_EQ(deliver(&n, 1, 60), 0);
	CHECK_EQ(deliver(&n, 2, 60), 0);
	CHECK_EQ(vq_net_queue_stats(n.q)->drops[VQ_NET_DROP_NO_RX_BUF], 2);
	CHECK_EQ(vq_net_queue_stats(n.q)->packets, 0);
	CHECK(!vq_drv_has_used(n.p.drv));
	np_fini(&n);
}

static void rx_used_batch_publication(uint64_t lf)
{
	static struct rxbuf b[8];
	struct np n;
	void *tok[8];
	uint32_t len[8];

	np_init(&n, lf, 16, VQ_NET_RX, 2, 0);
	rx_alloc(&n, b, 5, 128, 1);
	for (unsigned i = 0; i < 5; i++)
		rx_post(&n, &b[i], i);
	publish(&n);
	CHECK_EQ(deliver(&n, 0, 60), 1);
	CHECK(!vq_drv_has_used(n.p.drv));
	CHECK_EQ(deliver(&n, 1, 60), 1);
	CHECK_EQ(vq_drv_get_burst(n.p.drv, tok, len, 8), 2);
	CHECK_EQ(deliver(&n, 2, 60), 1);
	CHECK_EQ(vq_drv_get_burst(n.p.drv, tok, len, 8), 0);
	CHECK_EQ(vq_net_rx_flush(n.q), 1);
	CHECK_EQ(vq_drv_get_burst(n.p.drv, tok, len, 8), 1);
	CHECK_EQ((uintptr_t)tok[0], 3);
	CHECK_EQ(len[0], 72);
	np_fini(&n);
}

/* The burst path: one buffer per frame when it fits, the one-frame path
 * for a frame that needs several (MRG_RXBUF), exact lengths and
 * num_buffers, and a stop without a drop when the guest runs out. */
static void rx_burst_mrg_mixed_sizes(uint64_t lf)
{
	static struct rxbuf b[8];
	static const uint32_t lens[] = { 60, 100, 1000, 60, 200 };
	static const uint32_t want_len[] = { 72, 112, 256, 256, 256, 244, 72, 212 };
	static const uint16_t want_nb[] = { 1, 1, 4, 0, 0, 0, 1, 1 };
	struct np n;

	np_init(&n, lf | MRG, 16, VQ_NET_RX, 0, 0);
	rx_alloc(&n, b, 8, 256, 1);
	for (unsigned i = 0; i < 8; i++)
		rx_post(&n, &b[i], i);
	publish(&n);
	CHECK_EQ(deliver_burst(&n, 0, lens, 5), 5);
	CHECK_EQ(vq_net_rx_flush(n.q), 8);
	for (unsigned i = 0, fr = 0; i < 8; i++) {
		void *tok;
		uint32_t len;
		uint8_t *p = pair_hva(&n.p, b[i].gpa);

		CHECK_EQ(vq_drv_get(n.p.drv, &tok, &len), 1);
		CHECK_EQ((uintptr_t)tok, i + 1);
		CHECK_EQ(len, want_len[i]);
		if (want_nb[i]) {
			CHECK_EQ(le16_at(p + 10), want_nb[i]);
			CHECK_EQ(frame_seq(p + 12), fr);
			CHECK_EQ(p[12 + 5], pat(fr, 5));
			fr++;
		}
	}
	/* No buffer left: the burst stops at once and counts nothing. */
	CHECK_EQ(deliver_burst(&n, 5, lens, 3), 0);
	CHECK_EQ(vq_net_queue_stats(n.q)->drops[VQ_NET_DROP_NO_RX_BUF], 0);
	CHECK_EQ(vq_net_queue_stats(n.q)->packets, 5);
	np_fini(&n);
}

/* Without MRG_RXBUF a frame too big for its buffer is dropped (oversize)
 * and the buffer goes to the next frame; the guest sees exact entries. */
static void rx_burst_oversize_gives_buffer_to_next(uint64_t lf)
{
	static struct rxbuf b[4];
	static const uint32_t lens[] = { 50, 200, 51, 52 };
	struct np n;
	void *tok;
	uint32_t len;

	np_init(&n, lf, 16, VQ_NET_RX, 0, 0);
	rx_alloc(&n, b, 4, 100, 1);
	for (unsigned i = 0; i < 3; i++)
		rx_post(&n, &b[i], i);
	publish(&n);
	CHECK_EQ(deliver_burst(&n, 10, lens, 4), 4);
	CHECK_EQ(vq_net_queue_stats(n.q)->drops[VQ_NET_DROP_OVERSIZE], 1);
	CHECK_EQ(vq_net_rx_flush(n.q), 3);
	for (unsigned i = 0; i < 3; i++) {
		static const uint32_t seqs[] = { 10, 12, 13 };
		uint8_t *p = pair_hva(&n.p, b[i].gpa);

		CHECK_EQ(vq_drv_get(n.p.drv, &tok, &len), 1);
		CHECK_EQ((uintptr_t)tok, i + 1);
		CHECK_EQ(len, 12 + lens[i == 0 ? 0 : i + 1]);
		CHECK_EQ(frame_seq(p + 12), seqs[i]);
		CHECK_EQ(p[len], 0xAA);
	}
	np_fini(&n);
}

static void rx_hostile_readable_part_breaks(uint64_t lf)
{
	struct np n;
	struct vq_seg seg[2];

	np_init(&n, lf, 16, VQ_NET_RX, 0, 0);
	seg[0] = (struct vq_seg){ pair_alloc(&n.p, 64), 64 };
	seg[1] = (struct vq_seg){ pair_alloc(&n.p, 2048), 2048 };
	CHECK_EQ(vq_drv_add(n.p.drv, seg, 1, 1, (void *)1), 0);
	publish(&n);
	CHECK_EQ(deliver(&n, 1, 60), -EINVAL);
	CHECK(strstr(vq_dev_error_msg(n.p.dev), "Unexpected descriptor format for RX"));
	CHECK_RULE_FIRST(vq_dev_error_msg(n.p.dev));
	CHECK_EQ(deliver(&n, 1, 60), -EINVAL);
	CHECK(!vq_drv_has_used(n.p.drv));
	np_fini(&n);
}

/* 5.1.6.3: an RX buffer of zero bytes cannot take a frame: without
 * MRG_RXBUF the frame is dropped and counted, and the burst path does not
 * look at a segment the chain does not have (found by fuzz_ring: the
 * prefetch did arithmetic on an absent iov[0]). */
static void rx_hostile_empty_buffer_dropped(uint64_t lf)
{
	static const uint32_t lens[] = { 60, 60 };
	struct np n;
	struct vq_seg seg = { 0, 0 };

	np_init(&n, lf, 16, VQ_NET_RX, 0, 0);
	seg.addr = pair_alloc(&n.p, 64);
	CHECK_EQ(vq_drv_add(n.p.drv, &seg, 0, 1, (void *)1), 0);
	publish(&n);
	CHECK(deliver_burst(&n, 1, lens, 2) >= 0);
	CHECK_EQ(vq_dev_error(n.p.dev), 0);
	CHECK_EQ(vq_net_queue_stats(n.q)->packets, 0);
	CHECK(vq_net_queue_stats(n.q)->drops[VQ_NET_DROP_OVERSIZE] +
	      vq_net_queue_stats(n.q)->drops[VQ_NET_DROP_NO_RX_BUF] >= 1);
	np_fini(&n);
}

static void rx_hostile_mrg_buffer_smaller_than_header_breaks(uint64_t lf)
{
	struct np n;
	struct vq_seg seg = { 0, 11 };

	np_init(&n, lf | MRG, 16, VQ_NET_RX, 0, 0);
	seg.addr = pair_alloc(&n.p, 11);
	CHECK_EQ(vq_drv_add(n.p.drv, &seg, 0, 1, (void *)1), 0);
	publish(&n);
	CHECK_EQ(deliver(&n, 1, 60), -EINVAL);
	CHECK(strstr(vq_dev_error_msg(n.p.dev), "smaller than the 12-byte header"));
	CHECK_RULE_FIRST(vq_dev_error_msg(n.p.dev));
	np_fini(&n);
}

/*
 * The stale-frame class of bug (seen with a Linux guest, packed=on,
 * mrg_rxbuf=off, against another backend): after the RX ring overflowed and
 * the guest refilled it, the guest received copies of old frames.  Here the
 * guest posts big multi-segment buffers (like its "big packets" mode),
 * frames overflow the ring, the guest reaps some, refills the same memory
 * without clearing it, and frames of new sequence numbers and other sizes
 * arrive.  Every used entry must name a buffer this round wrote, with the
 * exact length of its frame, in order: never an old sequence number.
 */
static void rx_no_stale_frame_after_overflow(uint64_t lf, uint64_t mrg, uint16_t num)
{
	static struct rxbuf b[256];
	static uint32_t len_of[1 << 16];        /* frame length by sequence */
	struct np n;
	uint64_t seed = vq_test_seed(0x57a1e);
	uint32_t seq = 0, received = 0, offered = 0;
	int64_t last_seq = -1;
	unsigned in_ring = 0, free_list[256], nfree = 0;

	np_init(&n, lf | mrg, num, VQ_NET_RX, (unsigned)(seed % 3), 0);
	rx_alloc(&n, b, num, 4096, mrg ? 1 : 3);
	stamp_seq = true;
	for (unsigned i = 0; i < num; i++)
		free_list[nfree++] = i;

	for (unsigned round = 0; round < 40; round++) {
		/* Refill some or all of the free buffers, not cleared: each
		 * still holds the frame it had. */
		unsigned refill = round % 4 == 3 ? nfree / 2 : nfree;

		for (unsigned i = 0; i < refill; i++) {
			unsigned idx = free_list[--nfree];
			struct vq_seg seg[3];
			uint32_t off = 0, piece = b[idx].size / b[idx].nseg;

			for (unsigned s = 0; s < b[idx].nseg; s++) {
				uint32_t l = s + 1 == b[idx].nseg ? b[idx].size - off : piece;

				seg[s] = (struct vq_seg){ b[idx].gpa + off, l };
				off += l;
			}
			CHECK_EQ(vq_drv_add(n.p.drv, seg, 0, b[idx].nseg,
					    (void *)(uintptr_t)(idx + 1)), 0);
			in_ring++;
		}
		publish(&n);
		/* Overflow: offer more frames than there are buffers, one by
		 * one on even rounds, in bursts on odd ones. */
		unsigned offer = in_ring + 1 + (unsigned)(vq_test_rand(&seed) % 8);

		for (unsigned i = 0; i < offer;) {
			uint32_t lens[8];
			unsigned cnt = 1 + (unsigned)(vq_test_rand(&seed) % 8), k = 0;

			if (cnt > offer - i)
				cnt = offer - i;
			for (unsigned j = 0; j < cnt; j++) {
				lens[j] = 18 + (uint32_t)(vq_test_rand(&seed) % (mrg ? 9000 : 4060));
				len_of[(seq + j) & 0xffff] = lens[j];
			}
			if (round & 1) {
				int r = deliver_burst(&n, seq, lens, cnt);

				CHECK(r >= 0 && (unsigned)r <= cnt);
				k = (unsigned)r;
			}
			/* What the burst path left (no buffer): one by one,
			 * which counts the drops. */
			for (; k < cnt; k++)
				CHECK(deliver(&n, seq + k, lens[k]) >= 0);
			seq += cnt;
			i += cnt;
			offered += cnt;
		}
		CHECK(vq_net_rx_flush(n.q) >= 0);
		/* Reap everything used and check every frame: its sequence
		 * number only goes up (never an old frame), its length is
		 * exact and every byte is this frame's. */
		for (;;) {
			void *tok;
			uint32_t len, got = 0, fs, fl;
			uint8_t *p;
			unsigned nb, idx;
			int r = vq_drv_get(n.p.drv, &tok, &len);

			CHECK(r >= 0);
			if (r == 0)
				break;
			idx = (unsigned)(uintptr_t)tok - 1;
			CHECK(idx < num);
			p = pair_hva(&n.p, b[idx].gpa);
			CHECK(len >= 12 + 4);
			nb = le16_at(p + 10);
			fs = frame_seq(p + 12);
			CHECK((int64_t)fs > last_seq);
			CHECK(fs < seq);
			last_seq = fs;
			fl = len_of[fs & 0xffff];
			if (!mrg) {
				CHECK_EQ(nb, 1);
				CHECK_EQ(len, 12 + fl);
			}
			for (unsigned k = 0; k < nb; k++) {
				uint32_t start = k ? 0 : 12;

				if (k) {
					CHECK_EQ(vq_drv_get(n.p.drv, &tok, &len), 1);
					idx = (unsigned)(uintptr_t)tok - 1;
					CHECK(idx < num);
					p = pair_hva(&n.p, b[idx].gpa);
				}
				for (uint32_t j = start; j < len; j++)
					if (got + j - start >= 4)
						CHECK_EQ(p[j], pat(fs, got + j - start));
				got += len - start;
				free_list[nfree++] = idx;
				in_ring--;
			}
			CHECK_EQ(got, fl);
			received++;
		}
	}
	const struct vq_net_stats *st = vq_net_queue_stats(n.q);

	CHECK_EQ(st->packets, received);
	CHECK(st->drops[VQ_NET_DROP_NO_RX_BUF] > 0);
	/* Every frame offered was received or counted as dropped. */
	CHECK_EQ(received + st->drops[VQ_NET_DROP_NO_RX_BUF], offered);
	stamp_seq = false;
	np_fini(&n);
}

static void rx_no_stale_frame_after_overflow_nomrg(uint64_t lf)
{
	rx_no_stale_frame_after_overflow(lf, 0, 64);
}

static void rx_no_stale_frame_after_overflow_mrg(uint64_t lf)
{
	rx_no_stale_frame_after_overflow(lf, MRG, 64);
}

static void rx_no_stale_frame_odd_packed_size(uint64_t lf)
{
	if (lf & VQ_BIT(VQ_F_RING_PACKED))
		rx_no_stale_frame_after_overflow(lf, 0, 37);
}

static void net_5_1_6_header_size(void)
{
	CHECK_EQ(vq_net_hdr_len(VQ_BIT(VQ_F_VERSION_1)), 12);
	CHECK_EQ(vq_net_hdr_len(VQ_BIT(VQ_NET_F_MRG_RXBUF)), 12);
	CHECK_EQ(vq_net_hdr_len(0), 10);
	CHECK(!vq_net_is_tx_queue(0));
	CHECK(vq_net_is_tx_queue(1));
	CHECK(!vq_net_is_tx_queue(2));
}

static void loopback_mac_swapped_view(void)
{
	uint8_t f[64], mac[12];
	struct iovec in[2] = { { f, 5 }, { f + 5, 59 } }, out[3];
	int n;

	for (unsigned i = 0; i < 64; i++)
		f[i] = (uint8_t)i;
	n = vq_net_mac_swapped(in, 2, 64, mac, out);
	CHECK_EQ(n, 2);
	CHECK(out[0].iov_base == mac);
	CHECK_EQ(out[0].iov_len, 12);
	for (unsigned i = 0; i < 6; i++) {
		CHECK_EQ(mac[i], 6 + i);
		CHECK_EQ(mac[6 + i], i);
	}
	CHECK(out[1].iov_base == f + 12);
	CHECK_EQ(out[1].iov_len, 52);
	CHECK_EQ(f[0], 0);                      /* source untouched */
	CHECK_EQ(vq_net_mac_swapped(in, 2, 11, mac, out), -EINVAL);
	CHECK(strcmp(vq_net_drop_name(VQ_NET_DROP_SINK_FULL), "sink_full") == 0);
}

/* RFC 903 (RARP, in RFC 826's packet format), as VHOST_USER_SEND_RARP
 * announces a migrated guest: broadcast, from its MAC, "request reverse",
 * the MAC as sender and target, no IPv4 addresses, padded to 60 bytes. */
static void rarp_announcement_frame(void)
{
	static const uint8_t mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };
	static const uint8_t want[42] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff,     /* destination */
		0x52, 0x54, 0x00, 0x12, 0x34, 0x56,     /* source */
		0x80, 0x35,                             /* EtherType RARP */
		0x00, 0x01, 0x08, 0x00, 6, 4,           /* Ethernet, IPv4 */
		0x00, 0x03,                             /* request reverse */
		0x52, 0x54, 0x00, 0x12, 0x34, 0x56,     /* sender MAC */
		0, 0, 0, 0,                             /* sender IPv4 */
		0x52, 0x54, 0x00, 0x12, 0x34, 0x56,     /* target MAC */
		0, 0, 0, 0,                             /* target IPv4 */
	};
	uint8_t f[VQ_NET_RARP_LEN];

	memset(f, 0xaa, sizeof(f));
	CHECK_EQ(vq_net_rarp_frame(mac, f), 60);
	CHECK(!memcmp(f, want, sizeof(want)));
	for (unsigned i = sizeof(want); i < sizeof(f); i++)
		CHECK_EQ(f[i], 0);
}

int main(void)
{
	RUN(net_5_1_6_header_size);
	RUN(rarp_announcement_frame);
	RUN(loopback_mac_swapped_view);
	RUN_LAYOUTS(tx_5_1_6_2_frames_reach_sink_exact);
	RUN_LAYOUTS(tx_budget_bounds_turn);
	RUN_LAYOUTS(tx_used_batch_publication);
	RUN_LAYOUTS(tx_hostile_writable_part_breaks);
	RUN_LAYOUTS(tx_hostile_shorter_than_header_breaks);
	RUN_LAYOUTS(tx_hostile_empty_chain_breaks);
	RUN_LAYOUTS(tx_drops_counted_by_reason);
	RUN_LAYOUTS(tx_5_1_6_2_header_ignored_without_offloads);
	RUN_LAYOUTS(tx_5_1_6_2_segmentation_offload_rules);
	RUN_LAYOUTS(tx_evict_frames_intact);
	RUN_LAYOUTS(tx_evict_auto_follows_faster);
	RUN_LAYOUTS(tx_sink_error_gives_back_rest);
	RUN_LAYOUTS(rx_5_1_6_4_one_buffer_exact_bytes);
	RUN_LAYOUTS(rx_5_1_6_3_oversize_without_mrg);
	RUN_LAYOUTS(rx_5_1_6_4_mrg_splits_and_sets_num_buffers);
	RUN_LAYOUTS(rx_mrg_partial_frame_gives_buffers_back);
	RUN_LAYOUTS(rx_5_1_6_4_offload_header_as_negotiated);
	RUN_LAYOUTS(rx_no_buffer_dropped_counted);
	RUN_LAYOUTS(rx_used_batch_publication);
	RUN_LAYOUTS(rx_burst_mrg_mixed_sizes);
	RUN_LAYOUTS(rx_burst_oversize_gives_buffer_to_next);
	RUN_LAYOUTS(rx_hostile_readable_part_breaks);
	RUN_LAYOUTS(rx_hostile_empty_buffer_dropped);
	RUN_LAYOUTS(rx_hostile_mrg_buffer_smaller_than_header_breaks);
	RUN_LAYOUTS(rx_no_stale_frame_after_overflow_nomrg);
	RUN_LAYOUTS(rx_no_stale_frame_after_overflow_mrg);
	RUN_LAYOUTS(rx_no_stale_frame_odd_packed_size);
	return 0;
}
