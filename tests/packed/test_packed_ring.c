// SPDX-License-Identifier: MIT
/*
 * The packed virtqueue (virtio 1.2 §2.8) between a well-behaved driver and
 * device: descriptor flags, wrap counters, buffer ids, chains, bursts,
 * indirect tables, event suppression and resuming.
 */
#include "packed_util.h"

/* 2.8.1 / 2.8.2: one buffer there and back, bytes and flag bits checked. */
static void round_trip(uint16_t num)
{
	struct ring_pair p;
	struct popped pc;
	struct gbuf out, in;
	uint8_t got[256];
	void *tok;
	uint32_t len;
	int token = 1;

	pair_init(&p, PACKED, num, 1, 1);
	out = gbuf_new(&p, 64);
	in = gbuf_new(&p, 128);
	pattern(out.hva, 64, 1);
	CHECK_EQ(vq_drv_free_slots(p.drv), num);
	CHECK(!vq_dev_has_avail(p.dev));
	CHECK_EQ(pop1(&p, &pc), 0);
	add_rw(&p, &out, &in, &token);
	CHECK_EQ(vq_drv_free_slots(p.drv), num - 2);
	CHECK_EQ(vq_drv_outstanding(p.drv), 1);
	/* Wrap counter 1: AVAIL set, USED clear; NEXT on the head. */
	CHECK_EQ(slot_flags(&p, 0), F_AVAIL | VQ_DESC_F_NEXT);
	CHECK_EQ(slot_flags(&p, 1), F_AVAIL | VQ_DESC_F_WRITE);
	CHECK_EQ(vq_le64(ring_desc(&p)[0].addr), out.gpa);
	CHECK_EQ(vq_le32(ring_desc(&p)[1].len), 128);
	CHECK(vq_dev_has_avail(p.dev));
	/* vq_dev_prefetch_avail is only a hint: nothing moves */
	vq_dev_prefetch_avail(p.dev);
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 0x8000);

	CHECK_EQ(pop1(&p, &pc), 1);
	CHECK_EQ(pc.c.nout, 1);
	CHECK_EQ(pc.c.nin, 1);
	CHECK_EQ(pc.c.out_len, 64);
	CHECK_EQ(pc.c.in_len, 128);
	CHECK_EQ(pc.c.ndesc, 2);
	CHECK_EQ(pc.c.id, vq_le16(ring_desc(&p)[1].id));
	CHECK(pc.iov[0].iov_base == out.hva && pc.iov[0].iov_len == 64);
	CHECK(pc.iov[1].iov_base == in.hva && pc.iov[1].iov_len == 128);
	iov_read(pc.iov, 1, got, 64);
	CHECK(pattern_ok(got, 64, 1));
	pattern(got, 100, 2);
	iov_write(pc.iov + 1, 1, got, 100);
	CHECK_EQ(pop1(&p, &pc), 0);

	CHECK_EQ(vq_dev_push(p.dev, &pc.c, 100), 1);
	/* Used: AVAIL = USED = 1, the id and the written length in slot 0. */
	CHECK_EQ(slot_flags(&p, 0) & (F_AVAIL | F_USED), F_AVAIL | F_USED);
	CHECK_EQ(vq_le16(ring_desc(&p)[0].id), pc.c.id);
	CHECK_EQ(vq_le32(ring_desc(&p)[0].len), 100);

	CHECK(vq_drv_has_used(p.drv));
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == &token);
	CHECK_EQ(len, 100);
	CHECK(pattern_ok(in.hva, 100, 2));
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 0);
	CHECK(!vq_drv_has_used(p.drv));
	CHECK_EQ(vq_drv_free_slots(p.drv), num);
	CHECK_EQ(vq_drv_outstanding(p.drv), 0);
	/* Two slots further; on a ring of 2 that is a full lap: wrap 0. */
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, num > 2 ? 0x8002 : 0);
	CHECK_EQ(vq_dev_get_state(p.dev).used_idx, num > 2 ? 0x8002 : 0);
	pair_fini(&p);
}

static void packed_2_8_basic_round_trip(void)
{
	round_trip(8);
	round_trip(100);        /* packed sizes need not be powers of two */
	round_trip(2);
}

/* 2.8.6 / 2.8.2: a chain of several slots gets one used descriptor; both
 * sides skip all of its slots, also when used out of order. */
static void packed_2_8_6_chain_skips_slots(void)
{
	struct ring_pair p;
	struct popped a, b;
	struct gbuf g[6];
	struct vq_seg s[5];
	int ta, tb;
	void *tok;
	uint32_t len;

	pair_init(&p, PACKED, 16, 1, 1);
	for (int i = 0; i < 6; i++)
		g[i] = gbuf_new(&p, 32 + i);
	for (int i = 0; i < 5; i++)
		s[i] = (struct vq_seg){ g[i].gpa, g[i].len };
	CHECK_EQ(vq_drv_add(p.drv, s, 2, 3, &ta), 0);
	add_in(&p, g[5].gpa, g[5].len, &tb);
	CHECK_EQ(vq_drv_free_slots(p.drv), 10);
	for (int i = 0; i < 4; i++)
		CHECK(slot_flags(&p, i) & VQ_DESC_F_NEXT);
	CHECK(!(slot_flags(&p, 4) & VQ_DESC_F_NEXT));
	CHECK_EQ(slot_flags(&p, 2), F_AVAIL | VQ_DESC_F_NEXT | VQ_DESC_F_WRITE);

	CHECK_EQ(pop1(&p, &a), 1);
	CHECK_EQ(a.c.ndesc, 5);
	CHECK_EQ(a.c.nout, 2);
	CHECK_EQ(a.c.nin, 3);
	CHECK_EQ(a.c.out_len, 32 + 33);
	CHECK_EQ(a.c.in_len, 34 + 35 + 36);
	CHECK_EQ(pop1(&p, &b), 1);
	CHECK_EQ(b.c.ndesc, 1);
	CHECK(b.iov[0].iov_base == g[5].hva);
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 0x8006);

	/* Use b first: its used descriptor goes to slot 0, a's to slot 1. */
	CHECK_EQ(vq_dev_push(p.dev, &b.c, 7), 1);
	CHECK_EQ(vq_le16(ring_desc(&p)[0].id), b.c.id);
	CHECK_EQ(vq_dev_get_state(p.dev).used_idx, 0x8001);
	CHECK_EQ(vq_dev_push(p.dev, &a.c, 100), 1);
	CHECK_EQ(vq_le16(ring_desc(&p)[1].id), a.c.id);
	CHECK_EQ(vq_le32(ring_desc(&p)[1].len), 100);
	CHECK_EQ(vq_dev_get_state(p.dev).used_idx, 0x8006);

	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == &tb);
	CHECK_EQ(len, 7);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == &ta);
	CHECK_EQ(len, 100);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 0);
	CHECK_EQ(vq_drv_free_slots(p.drv), 16);
	/* The next buffer goes after both chains: slot 6. */
	add_in(&p, g[5].gpa, 1, &ta);
	CHECK_EQ(slot_flags(&p, 6), F_AVAIL | VQ_DESC_F_WRITE);
	CHECK_EQ(pop1(&p, &a), 1);
	CHECK_EQ(vq_dev_push(p.dev, &a.c, 1), 1);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK_EQ(vq_le16(ring_desc(&p)[6].id), a.c.id);
	pair_fini(&p);
}

/* 2.8.1 / 2.8.2: many laps of chains of 1..3 slots over a ring of 100;
 * both wrap counters flip on crossing the end, and the flag bits at every
 * head are the ones the current phase demands. */
static void packed_2_8_1_wrap_counters_flip(void)
{
	struct ring_pair p;
	struct popped pc;
	struct gbuf g = { 0 };
	unsigned pos = 0, laps = 0;
	bool wrap = true;
	uint64_t seed = vq_test_seed(42);
	int crossed_inside = 0;

	pair_init(&p, PACKED, 100, 1, 1);
	g = gbuf_new(&p, 3 * 16);
	for (int round = 0; round < 400; round++) {
		unsigned k = 1 + vq_test_rand(&seed) % 3, i;
		struct vq_seg s[3];
		uint16_t want_avail = wrap ? F_AVAIL : F_USED;
		void *tok;
		uint32_t len;
		unsigned p2 = pos;
		bool w2 = wrap;

		for (i = 0; i < k; i++)
			s[i] = (struct vq_seg){ g.gpa + 16 * i, 16 };
		CHECK_EQ(vq_drv_add(p.drv, s, 0, k, &round), 0);
		/* Every slot of the chain in its own phase. */
		for (i = 0; i < k; i++) {
			CHECK_EQ(slot_flags(&p, p2) & (F_AVAIL | F_USED),
				 w2 ? F_AVAIL : F_USED);
			if (++p2 == 100) {
				p2 = 0;
				w2 = !w2;
				if (i + 1 < k)
					crossed_inside = 1;
			}
		}
		CHECK_EQ(slot_flags(&p, pos) & (F_AVAIL | F_USED), want_avail);
		CHECK_EQ(pop1(&p, &pc), 1);
		CHECK_EQ(pc.c.ndesc, k);
		CHECK_EQ(pc.c.in_len, 16 * k);
		CHECK_EQ(vq_dev_push(p.dev, &pc.c, 5), 1);
		/* Used: AVAIL = USED = the head's wrap counter. */
		CHECK_EQ(slot_flags(&p, pos) & (F_AVAIL | F_USED),
			 wrap ? F_AVAIL | F_USED : 0);
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
		CHECK(tok == &round);
		CHECK_EQ(len, 5);
		if (p2 < pos)
			laps++;
		pos = p2;
		wrap = w2;
		CHECK_EQ(vq_dev_get_state(p.dev).avail_idx,
			 pos | (wrap ? 0x8000 : 0));
		CHECK_EQ(vq_dev_get_state(p.dev).used_idx,
			 pos | (wrap ? 0x8000 : 0));
	}
	CHECK(laps >= 7);
	CHECK(crossed_inside);
	pair_fini(&p);
}

/* 2.8.1: a chain that straddles the end: head at the last slot in phase 1,
 * its other slots at 0 and 1 in phase 0; the used descriptor goes in the
 * head's slot with AVAIL = USED = 1, the next one at slot 2 with both 0. */
static void packed_2_8_1_flags_at_wrap_point(void)
{
	struct ring_pair p;
	struct popped pc;
	struct gbuf g;
	struct vq_seg s[3];
	void *tok;
	uint32_t len;
	int t;

	pair_init(&p, PACKED, 8, 1, 1);
	g = gbuf_new(&p, 64);
	for (int i = 0; i < 7; i++) {
		add_in(&p, g.gpa, 8, &t);
		CHECK_EQ(pop1(&p, &pc), 1);
		CHECK_EQ(vq_dev_push(p.dev, &pc.c, 8), 1);
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	}
	for (int i = 0; i < 3; i++)
		s[i] = (struct vq_seg){ g.gpa + 8 * i, 8 };
	CHECK_EQ(vq_drv_add(p.drv, s, 1, 2, &t), 0);
	CHECK_EQ(slot_flags(&p, 7), F_AVAIL | VQ_DESC_F_NEXT);
	CHECK_EQ(slot_flags(&p, 0), F_USED | VQ_DESC_F_NEXT | VQ_DESC_F_WRITE);
	CHECK_EQ(slot_flags(&p, 1), F_USED | VQ_DESC_F_WRITE);
	add_in(&p, g.gpa, 8, &t);
	CHECK_EQ(slot_flags(&p, 2), F_USED | VQ_DESC_F_WRITE);

	CHECK_EQ(pop1(&p, &pc), 1);
	CHECK_EQ(pc.c.ndesc, 3);
	CHECK_EQ(pc.c.id, vq_le16(ring_desc(&p)[1].id));
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 0x0002);
	CHECK_EQ(vq_dev_push(p.dev, &pc.c, 16), 1);
	CHECK_EQ(slot_flags(&p, 7) & (F_AVAIL | F_USED), F_AVAIL | F_USED);
	CHECK_EQ(vq_dev_get_state(p.dev).used_idx, 0x0002);
	CHECK_EQ(pop1(&p, &pc), 1);
	CHECK_EQ(vq_dev_push(p.dev, &pc.c, 0), 1);
	/* Phase 0: used means AVAIL = USED = 0 (no WRITE: nothing written). */
	CHECK_EQ(slot_flags(&p, 2), 0);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK_EQ(len, 16);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK_EQ(len, 0);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 0);
	pair_fini(&p);
}

/* 2.8.6: "Buffer ID ... in the last descriptor": ids in earlier slots of a
 * chain are ignored. */
static void packed_2_8_6_buffer_id_in_last_descriptor(void)
{
	struct ring_pair p;
	struct popped pc;
	struct vq_packed_desc *d;
	uint64_t buf;

	pair_init(&p, PACKED, 8, 0, 1);
	d = ring_desc(&p);
	buf = pair_alloc(&p, 64);
	for (int i = 0; i < 3; i++) {
		d[i].addr = vq_le64(buf + 16 * i);
		d[i].len = vq_le32(16);
		d[i].id = vq_le16(0x7777);      /* garbage, not last */
	}
	d[2].id = vq_le16(5);
	d[2].flags = vq_le16(F_AVAIL);
	d[1].flags = vq_le16(F_AVAIL | VQ_DESC_F_NEXT);
	__atomic_store_n(&d[0].flags, vq_le16(F_AVAIL | VQ_DESC_F_NEXT), __ATOMIC_RELEASE);
	CHECK_EQ(pop1(&p, &pc), 1);
	CHECK_EQ(pc.c.id, 5);
	CHECK_EQ(pc.c.ndesc, 3);
	CHECK_EQ(vq_dev_push(p.dev, &pc.c, 0), 1);
	CHECK_EQ(vq_le16(d[0].id), 5);
	CHECK_EQ(vq_le16(d[0].flags) & (F_AVAIL | F_USED), F_AVAIL | F_USED);
	CHECK_EQ(vq_dev_error(p.dev), 0);
	pair_fini(&p);
}

/* Add n single-slot writable buffers of 8 bytes at gpa + 8*i. */
static void add_singles(struct ring_pair *p, uint64_t gpa, unsigned n, int *toks)
{
	for (unsigned i = 0; i < n; i++)
		add_in(p, gpa + 8 * i, 8, &toks[i]);
}

/* 2.8.1: a queue of one slot: every buffer flips both wrap counters. */
static void packed_2_8_1_queue_of_one(void)
{
	struct ring_pair p;
	struct popped pc;
	uint64_t buf;
	int t;
	void *tok;
	uint32_t len;

	pair_init(&p, PACKED | EVIDX, 1, 1, 1);
	buf = pair_alloc(&p, 64);
	for (int i = 0; i < 5; i++) {
		bool wrap = !(i & 1);

		add_in(&p, buf, 8, &t);
		CHECK_EQ(vq_drv_add(p.drv, &(struct vq_seg){ buf, 8 }, 0, 1, &t),
			 -ENOSPC);
		CHECK_EQ(slot_flags(&p, 0) & (F_AVAIL | F_USED),
			 wrap ? F_AVAIL : F_USED);
		CHECK_EQ(pop1(&p, &pc), 1);
		CHECK_EQ(pop1(&p, &pc), 0);
		CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, wrap ? 0 : 0x8000);
		CHECK_EQ(vq_dev_push(p.dev, &pc.c, 8), 1);
		CHECK_EQ(slot_flags(&p, 0) & (F_AVAIL | F_USED),
			 wrap ? F_AVAIL | F_USED : 0);
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 0);
	}
	pair_fini(&p);
}

/* DPDK-style batches of 4 single-descriptor chains in one cache line, and
 * the fallback to single pops wherever the batch does not apply. */
static void packed_burst_pop_batch_of_4(void)
{
	struct ring_pair p;
	struct popped pc[9];
	struct vq_chain c[9];
	uint64_t buf;
	int toks[16];
	void *tok;
	uint32_t len;

	pair_init(&p, PACKED, 12, 1, 1);
	buf = pair_alloc(&p, 256);
	for (int i = 0; i < 9; i++) {
		pc[i].c.iov = pc[i].iov;
		pc[i].c.iov_max = MAX_IOV;
		c[i] = pc[i].c;
	}
	/* 9 singles from slot 0: two batches, then one single pop. */
	add_singles(&p, buf, 9, toks);
	CHECK_EQ(vq_dev_pop_burst(p.dev, c, 9), 9);
	for (int i = 0; i < 9; i++) {
		CHECK_EQ(c[i].ndesc, 1);
		CHECK_EQ(c[i].nin, 1);
		CHECK_EQ(c[i].id, vq_le16(ring_desc(&p)[i].id));
		CHECK(c[i].iov[0].iov_base == pair_hva(&p, buf + 8 * i));
	}
	CHECK_EQ(vq_dev_pop_burst(p.dev, c, 9), 0);
	for (int i = 0; i < 9; i++)
		CHECK_EQ(vq_dev_fill(p.dev, &c[i], 1), 0);
	CHECK_EQ(vq_dev_flush(p.dev), 9);
	for (int i = 0; i < 9; i++) {
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
		CHECK(tok == &toks[i]);
	}

	/* Slots 9, 10, 11, 0..4: the first group is not aligned and the ring
	 * wraps at 12, so singles until slot 0; then slots 0-3 batch (phase
	 * 0) and slot 4 single. */
	add_singles(&p, buf, 8, toks);
	CHECK_EQ(vq_dev_pop_burst(p.dev, c, 9), 8);
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 0x0005);
	for (int i = 0; i < 8; i++)
		CHECK_EQ(vq_dev_fill(p.dev, &c[i], 8), 0);
	CHECK_EQ(vq_dev_flush(p.dev), 8);
	for (int i = 0; i < 8; i++) {
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
		CHECK(tok == &toks[i]);
		CHECK_EQ(len, 8);
	}

	/* Slots 5-7 singles, then 8-9 a chain of two and 10, 11 singles: the
	 * group at 8 has NEXT, so no batch; 6 chains popped in all. */
	{
		struct vq_seg s[2] = { { buf, 8 }, { buf + 8, 8 } };

		add_singles(&p, buf, 3, toks);
		CHECK_EQ(vq_drv_add(p.drv, s, 0, 2, &toks[3]), 0);
		add_singles(&p, buf, 2, &toks[4]);
	}
	CHECK_EQ(vq_dev_pop_burst(p.dev, c, 9), 6);
	CHECK_EQ(c[3].ndesc, 2);
	CHECK_EQ(c[3].in_len, 16);
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 0x8000);
	for (int i = 0; i < 6; i++)
		CHECK_EQ(vq_dev_fill(p.dev, &c[i], 0), 0);
	CHECK_EQ(vq_dev_flush(p.dev), 6);
	for (int i = 0; i < 6; i++) {
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
		CHECK(tok == &toks[i]);
	}
	/* Only 3 of a batch available: single pops take them. */
	add_singles(&p, buf, 3, toks);
	CHECK_EQ(vq_dev_pop_burst(p.dev, c, 8), 3);
	CHECK_EQ(vq_dev_error(p.dev), 0);
	pair_fini(&p);
}

/*
 * A burst's descriptors in two memory regions: the device keeps the region
 * of the last one it translated, and a descriptor in the other region, or
 * crossing into it, must still be translated there (2.8.13): low, high,
 * across the boundary (two iovecs), low, in one line and the next.
 */
static void packed_burst_across_memory_regions(void)
{
	const uint64_t at = GUEST_SIZE / 2;
	const uint64_t gpa[8] = {
		GUEST_BASE + at - 4096, GUEST_BASE + at + 4096,
		GUEST_BASE + at - 32, GUEST_BASE + at - 2048,
		GUEST_BASE + at + 64, GUEST_BASE + at + 128,
		GUEST_BASE + at - 1024, GUEST_BASE + at - 16,
	};
	struct ring_pair p;
	struct popped pc[8];
	struct vq_chain c[8];
	struct vq_seg seg[8];
	void *tokens[8];
	int toks[8];

	pair_init(&p, PACKED, 8, 1, 1);
	pair_split_memory(&p, at);
	for (int i = 0; i < 8; i++) {
		pc[i].c.iov = pc[i].iov;
		pc[i].c.iov_max = MAX_IOV;
		c[i] = pc[i].c;
		seg[i] = (struct vq_seg){ gpa[i], 64 };
		tokens[i] = &toks[i];
	}
	CHECK_EQ(vq_drv_add_burst(p.drv, seg, tokens, 8, true), 8);
	pair_pop_split_burst(&p, c, 8, gpa, 64, true, at);
	pair_fini(&p);
}

/* A bad chain inside a batch: those popped before it stay valid, the
 * queue breaks, and the next burst fails fast. */
static void packed_burst_pop_stops_at_bad_chain(void)
{
	struct ring_pair p;
	struct popped pc[4];
	struct vq_chain c[4];
	struct vq_packed_desc *d;
	uint64_t buf;

	pair_init(&p, PACKED, 8, 0, 1);
	d = ring_desc(&p);
	buf = pair_alloc(&p, 64);
	for (int i = 0; i < 4; i++) {
		pc[i].c.iov = pc[i].iov;
		pc[i].c.iov_max = MAX_IOV;
		c[i] = pc[i].c;
		d[i].addr = vq_le64(buf + 8 * i);
		d[i].len = vq_le32(8);
		d[i].id = vq_le16((uint16_t)i);
	}
	d[2].id = vq_le16(8);           /* == num: out of range */
	for (int i = 3; i >= 0; i--)
		__atomic_store_n(&d[i].flags, vq_le16(F_AVAIL), __ATOMIC_RELEASE);
	CHECK_EQ(vq_dev_pop_burst(p.dev, c, 4), 2);
	CHECK_EQ(c[0].id, 0);
	CHECK_EQ(c[1].id, 1);
	CHECK(c[1].iov[0].iov_base == pair_hva(&p, buf + 8));
	CHECK_DEV_BROKEN(&p, -EINVAL);
	CHECK_EQ(vq_dev_pop_burst(p.dev, c, 4), -EINVAL);
	pair_fini(&p);
}

/* Fill stages; flush publishes: nothing is visible before the flush, and
 * afterwards the driver sees every used descriptor, in fill order. */
static void packed_flush_publishes_head_flags_last(void)
{
	struct ring_pair p;
	struct popped pc[3];
	uint64_t buf;
	int toks[3];
	void *tok;
	uint32_t len;
	const int order[3] = { 2, 0, 1 };

	pair_init(&p, PACKED, 8, 1, 1);
	buf = pair_alloc(&p, 64);
	add_singles(&p, buf, 3, toks);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(pop1(&p, &pc[i]), 1);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(vq_dev_fill(p.dev, &pc[order[i]].c, (uint32_t)order[i] + 1), 0);
	/* A chain filled twice, or never popped, is refused. */
	CHECK_EQ(vq_dev_fill(p.dev, &pc[0].c, 1), -EINVAL);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(slot_flags(&p, i), F_AVAIL | VQ_DESC_F_WRITE);
	CHECK(!vq_drv_has_used(p.drv));
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 0);
	CHECK_EQ(vq_dev_get_state(p.dev).used_idx, 0x8000);

	CHECK_EQ(vq_dev_flush(p.dev), 3);
	CHECK_EQ(vq_dev_flush(p.dev), 0);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(slot_flags(&p, i), F_AVAIL | F_USED | VQ_DESC_F_WRITE);
		CHECK_EQ(vq_le16(ring_desc(&p)[i].id), pc[order[i]].c.id);
		CHECK_EQ(vq_le32(ring_desc(&p)[i].len), order[i] + 1);
	}
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
		CHECK(tok == &toks[order[i]]);
		CHECK_EQ(len, order[i] + 1);
	}
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 0);
	pair_fini(&p);
}

/* 2.8.19: an indirect table takes one ring slot; the device reads len/16
 * packed descriptors from it. */
static void packed_2_8_19_indirect_round_trip(void)
{
	struct ring_pair p;
	struct popped pc;
	struct gbuf g[5];
	struct vq_seg s[5];
	struct vq_packed_desc *t;
	uint8_t got[64];
	void *tok;
	uint32_t len;
	int tk;

	pair_init(&p, PACKED | INDIRECT, 8, 1, 1);
	for (int i = 0; i < 5; i++) {
		g[i] = gbuf_new(&p, 16 + i);
		s[i] = (struct vq_seg){ g[i].gpa, g[i].len };
		pattern(g[i].hva, g[i].len, (unsigned)i);
	}
	CHECK_EQ(vq_drv_add(p.drv, s, 2, 3, &tk), 0);
	CHECK_EQ(vq_drv_free_slots(p.drv), 7);
	CHECK_EQ(slot_flags(&p, 0), F_AVAIL | VQ_DESC_F_INDIRECT);
	CHECK_EQ(vq_le32(ring_desc(&p)[0].len), 5 * 16);
	CHECK_EQ(vq_le64(ring_desc(&p)[0].addr),
		 p.indirect_gpa + 16ull * p.indirect_max * vq_le16(ring_desc(&p)[0].id));
	t = pair_hva(&p, vq_le64(ring_desc(&p)[0].addr));
	CHECK_EQ(vq_le64(t[1].addr), g[1].gpa);
	CHECK_EQ(vq_le16(t[1].flags), 0);
	CHECK_EQ(vq_le16(t[2].flags), VQ_DESC_F_WRITE);

	CHECK_EQ(pop1(&p, &pc), 1);
	CHECK_EQ(pc.c.ndesc, 1);
	CHECK_EQ(pc.c.nout, 2);
	CHECK_EQ(pc.c.nin, 3);
	CHECK_EQ(pc.c.out_len, 16 + 17);
	CHECK_EQ(pc.c.in_len, 18 + 19 + 20);
	for (int i = 0; i < 5; i++) {
		CHECK(pc.iov[i].iov_base == g[i].hva);
		iov_read(&pc.iov[i], 1, got, g[i].len);
		CHECK(pattern_ok(got, g[i].len, (unsigned)i));
	}
	CHECK_EQ(vq_dev_push(p.dev, &pc.c, 57), 1);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == &tk);
	CHECK_EQ(len, 57);
	CHECK_EQ(vq_drv_free_slots(p.drv), 8);

	/* One segment, or more than indirect_max: direct descriptors. */
	add_in(&p, g[0].gpa, 4, &tk);
	CHECK_EQ(slot_flags(&p, 1), F_AVAIL | VQ_DESC_F_WRITE);
	CHECK_EQ(pop1(&p, &pc), 1);
	CHECK_EQ(vq_dev_push(p.dev, &pc.c, 4), 1);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	{
		struct vq_seg many[17];

		for (int i = 0; i < 17; i++)
			many[i] = (struct vq_seg){ g[0].gpa, 1 };
		CHECK_EQ(vq_drv_add(p.drv, many, 17, 0, &tk), -EINVAL); /* > num */
		CHECK_EQ(vq_drv_add(p.drv, many, 7, 0, &tk), 0);
		CHECK_EQ(vq_drv_free_slots(p.drv), 7);   /* indirect */
	}
	pair_fini(&p);
}

/* Without room: -ENOSPC, and nothing was written. */
static void packed_add_full_ring_enospc(void)
{
	struct ring_pair p;
	struct vq_seg s[3];
	uint64_t buf;
	int t;

	pair_init(&p, PACKED, 4, 1, 0);
	buf = pair_alloc(&p, 64);
	for (int i = 0; i < 3; i++)
		s[i] = (struct vq_seg){ buf, 8 };
	CHECK_EQ(vq_drv_add(p.drv, s, 3, 0, &t), 0);
	CHECK_EQ(vq_drv_add(p.drv, s, 2, 0, &t), -ENOSPC);
	CHECK_EQ(slot_flags(&p, 3), 0);
	CHECK_EQ(vq_drv_add(p.drv, s, 1, 0, &t), 0);
	CHECK_EQ(vq_drv_add(p.drv, s, 1, 0, &t), -ENOSPC);
	CHECK_EQ(vq_drv_free_slots(p.drv), 0);
	CHECK_EQ(vq_drv_outstanding(p.drv), 2);
	pair_fini(&p);
}

static void packed_2_8_10_driver_event_enable_disable(void)
{
	struct ring_pair p;
	struct popped pc;
	uint64_t buf;
	int t;

	pair_init(&p, PACKED, 8, 1, 1);
	buf = pair_alloc(&p, 64);
	/* Fresh ring: the device structure is zero, ENABLE. */
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 0);        /* nothing added */
	add_in(&p, buf, 8, &t);
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 1);
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 0);        /* nothing new */
	vq_dev_disable_notify(p.dev);
	CHECK_EQ(vq_le16(dev_event(&p)->flags), VQ_EVENT_F_DISABLE);
	add_in(&p, buf, 8, &t);
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 0);
	/* Without EVENT_IDX enable means ENABLE; the re-check sees the two
	 * buffers already there. */
	CHECK_EQ(vq_dev_enable_notify(p.dev), 1);
	CHECK_EQ(vq_le16(dev_event(&p)->flags), VQ_EVENT_F_ENABLE);
	CHECK_EQ(pop1(&p, &pc), 1);
	CHECK_EQ(pop1(&p, &pc), 1);
	CHECK_EQ(vq_dev_enable_notify(p.dev), 0);
	add_in(&p, buf, 8, &t);
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 1);
	pair_fini(&p);
}

/* Device-side enable_notify with EVENT_IDX: off_wrap = next position and
 * wrap counter, flags DESC; the driver kicks only when crossing it,
 * including across the wrap. */
static void packed_2_8_10_desc_event_driver_kick(void)
{
	struct ring_pair p;
	struct popped pc;
	uint64_t buf;
	int t;
	void *tok;
	uint32_t len;

	pair_init(&p, PACKED | EVIDX, 8, 1, 1);
	buf = pair_alloc(&p, 64);
	for (int i = 0; i < 3; i++) {
		add_in(&p, buf, 8, &t);
		CHECK_EQ(pop1(&p, &pc), 1);
		CHECK_EQ(vq_dev_push(p.dev, &pc.c, 0), 1);
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	}
	vq_drv_kick_prepare(p.drv);
	CHECK_EQ(vq_dev_enable_notify(p.dev), 0);
	CHECK_EQ(vq_le16(dev_event(&p)->off_wrap), 0x8003);
	CHECK_EQ(vq_le16(dev_event(&p)->flags), VQ_EVENT_F_DESC);
	add_in(&p, buf, 8, &t);                 /* slot 3: the event */
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 1);
	add_in(&p, buf, 8, &t);                 /* slot 4: past it */
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 0);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(pop1(&p, &pc), 1);
		CHECK_EQ(vq_dev_push(p.dev, &pc.c, 0), 1);
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	}
	/* Device at slot 5: ask for a kick on slot 1 of the next lap, which
	 * has wrap counter 0 (forged: off 1, wrap 0). */
	__atomic_store_n(&dev_event(&p)->off_wrap, vq_le16(0x0001), __ATOMIC_RELAXED);
	add_in(&p, buf, 8, &t);                 /* 5 */
	add_in(&p, buf, 8, &t);                 /* 6 */
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 0);
	add_in(&p, buf, 8, &t);                 /* 7 */
	add_in(&p, buf, 8, &t);                 /* 0, wrap 0 */
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 0);
	add_in(&p, buf, 8, &t);                 /* 1, wrap 0: the event */
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 1);
	/* The device asks for slot 6 of lap 1 while the driver is already in
	 * lap 0: "wrap != my counter, event -= N" places it behind. */
	for (int i = 0; i < 5; i++) {
		CHECK_EQ(pop1(&p, &pc), 1);
		CHECK_EQ(vq_dev_push(p.dev, &pc.c, 0), 1);
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	}
	CHECK_EQ(vq_dev_enable_notify(p.dev), 0);
	CHECK_EQ(vq_le16(dev_event(&p)->off_wrap), 0x0002);      /* slot 2, wrap 0 */
	__atomic_store_n(&dev_event(&p)->off_wrap, vq_le16(0x8006), __ATOMIC_RELAXED);
	add_in(&p, buf, 8, &t);                 /* 2: event at -2, passed */
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 0);
	/* A burst that crosses the end and the event in the old lap. */
	__atomic_store_n(&dev_event(&p)->off_wrap, vq_le16(0x0007), __ATOMIC_RELAXED);
	for (int i = 0; i < 6; i++)             /* 3 .. 7, 0 (wrap 1) */
		add_in(&p, buf, 8, &t);
	CHECK_EQ(vq_dev_error(p.dev), 0);
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 1);
	/* DISABLE wins over the event. */
	vq_dev_disable_notify(p.dev);
	CHECK_EQ(vq_le16(dev_event(&p)->flags), VQ_EVENT_F_DISABLE);
	pair_fini(&p);
}

/* Driver-side callbacks: DISABLE / ENABLE flags and the device's decision
 * to signal. */
static void packed_2_8_10_device_signal_enable_disable(void)
{
	struct ring_pair p;
	struct popped pc;
	uint64_t buf;
	int t;
	void *tok;
	uint32_t len;

	pair_init(&p, PACKED, 8, 1, 1);
	buf = pair_alloc(&p, 64);
	CHECK(!vq_dev_should_signal(p.dev));    /* nothing published */
	vq_drv_disable_cb(p.drv);
	CHECK_EQ(vq_le16(drv_event(&p)->flags), VQ_EVENT_F_DISABLE);
	add_in(&p, buf, 8, &t);
	add_in(&p, buf, 8, &t);
	CHECK_EQ(pop1(&p, &pc), 1);
	CHECK_EQ(vq_dev_push(p.dev, &pc.c, 0), 1);
	CHECK(!vq_dev_should_signal(p.dev));
	CHECK_EQ(vq_drv_enable_cb(p.drv), 1);  /* one is pending */
	CHECK_EQ(vq_le16(drv_event(&p)->flags), VQ_EVENT_F_ENABLE);
	CHECK(vq_dev_should_signal(p.dev));
	CHECK(!vq_dev_should_signal(p.dev));   /* already signalled */
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK_EQ(vq_drv_enable_cb(p.drv), 0);
	CHECK_EQ(pop1(&p, &pc), 1);
	CHECK_EQ(vq_dev_push(p.dev, &pc.c, 0), 1);
	CHECK(vq_dev_should_signal(p.dev));
	pair_fini(&p);
}

/* Driver enable_cb with EVENT_IDX: off_wrap = last_used | used_wrap << 15,
 * flags DESC; the device signals exactly when it publishes that slot, also
 * across the wrap. */
static void packed_2_8_10_desc_event_device_signal(void)
{
	struct ring_pair p;
	struct popped pc[8];
	uint64_t buf;
	int t;
	void *tok;
	uint32_t len;

	pair_init(&p, PACKED | EVIDX, 8, 1, 1);
	buf = pair_alloc(&p, 64);
	for (int i = 0; i < 6; i++) {
		add_in(&p, buf, 8, &t);
		CHECK_EQ(pop1(&p, &pc[0]), 1);
		CHECK_EQ(vq_dev_push(p.dev, &pc[0].c, 0), 1);
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	}
	CHECK(vq_dev_should_signal(p.dev));    /* ENABLE (zeroed struct) */
	vq_drv_disable_cb(p.drv);
	for (int i = 0; i < 4; i++)             /* slots 6, 7, 0, 1 */
		add_in(&p, buf, 8, &t);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(pop1(&p, &pc[i]), 1);
	CHECK_EQ(vq_drv_enable_cb(p.drv), 0);
	CHECK_EQ(vq_le16(drv_event(&p)->off_wrap), 0x8006);
	CHECK_EQ(vq_le16(drv_event(&p)->flags), VQ_EVENT_F_DESC);
	CHECK_EQ(vq_dev_push(p.dev, &pc[0].c, 0), 1); /* slot 6: the event */
	CHECK(vq_dev_should_signal(p.dev));
	CHECK_EQ(vq_dev_push(p.dev, &pc[1].c, 0), 1); /* slot 7 */
	CHECK(!vq_dev_should_signal(p.dev));
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	/* The driver is now at slot 0 of the next lap: wrap counter 0. */
	CHECK_EQ(vq_drv_enable_cb(p.drv), 0);
	CHECK_EQ(vq_le16(drv_event(&p)->off_wrap), 0x0000);
	CHECK_EQ(vq_dev_fill(p.dev, &pc[2].c, 0), 0);
	CHECK_EQ(vq_dev_fill(p.dev, &pc[3].c, 0), 0);
	CHECK_EQ(vq_dev_flush(p.dev), 2);
	CHECK(vq_dev_should_signal(p.dev));
	/* An event one lap behind (wrap 1, slot 1) has been passed. */
	__atomic_store_n(&drv_event(&p)->off_wrap, vq_le16(0x8001), __ATOMIC_RELAXED);
	add_in(&p, buf, 8, &t);
	CHECK_EQ(pop1(&p, &pc[0]), 1);
	CHECK_EQ(vq_dev_push(p.dev, &pc[0].c, 0), 1);
	CHECK(!vq_dev_should_signal(p.dev));
	vq_drv_disable_cb(p.drv);
	CHECK_EQ(vq_le16(drv_event(&p)->flags), VQ_EVENT_F_DISABLE);
	pair_fini(&p);
}

/* 2.8.10 / V4: a buffer added between disable and enable is reported by
 * enable_notify's re-check, with and without EVENT_IDX. */
static void packed_enable_notify_recheck(void)
{
	for (int ev = 0; ev < 2; ev++) {
		struct ring_pair p;
		struct popped pc;
		uint64_t buf;
		int t;

		pair_init(&p, PACKED | (ev ? EVIDX : 0), 8, 1, 1);
		buf = pair_alloc(&p, 64);
		vq_dev_disable_notify(p.dev);
		CHECK_EQ(vq_dev_enable_notify(p.dev), 0);
		vq_dev_disable_notify(p.dev);
		add_in(&p, buf, 8, &t);
		CHECK_EQ(vq_dev_enable_notify(p.dev), 1);
		CHECK_EQ(vq_le16(dev_event(&p)->flags),
			 ev ? VQ_EVENT_F_DESC : VQ_EVENT_F_ENABLE);
		if (ev)
			CHECK_EQ(vq_le16(dev_event(&p)->off_wrap), 0x8000);
		CHECK_EQ(pop1(&p, &pc), 1);
		CHECK_EQ(vq_dev_enable_notify(p.dev), 0);
		if (ev)
			CHECK_EQ(vq_le16(dev_event(&p)->off_wrap), 0x8001);
		pair_fini(&p);
	}
}

/* enable_cb_delayed: DESC about 3/4 of the outstanding slots ahead (wrap
 * adjusted); ENABLE without EVENT_IDX. */
static void packed_enable_cb_delayed(void)
{
	struct ring_pair p;
	struct popped pc[8];
	uint64_t buf;
	int t;
	void *tok;
	uint32_t len;

	pair_init(&p, PACKED | EVIDX, 16, 1, 1);
	buf = pair_alloc(&p, 64);
	for (int i = 0; i < 8; i++)
		add_in(&p, buf, 8, &t);
	for (int i = 0; i < 8; i++)
		CHECK_EQ(pop1(&p, &pc[i]), 1);
	CHECK_EQ(vq_drv_enable_cb_delayed(p.drv), 0);
	CHECK_EQ(vq_le16(drv_event(&p)->off_wrap), 0x8006);     /* 0 + 8 * 3/4 */
	CHECK_EQ(vq_le16(drv_event(&p)->flags), VQ_EVENT_F_DESC);
	CHECK(vq_dev_should_signal(p.dev) == false);   /* nothing yet */
	for (int i = 0; i < 6; i++) {
		CHECK_EQ(vq_dev_push(p.dev, &pc[i].c, 0), 1);
		if (i == 0)
			CHECK(vq_dev_should_signal(p.dev)); /* no signal yet: valid */
		else
			CHECK(!vq_dev_should_signal(p.dev));
	}
	CHECK_EQ(vq_dev_push(p.dev, &pc[6].c, 0), 1);  /* slot 6 */
	CHECK(vq_dev_should_signal(p.dev));
	CHECK_EQ(vq_dev_push(p.dev, &pc[7].c, 0), 1);
	for (int i = 0; i < 8; i++)
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	/* From slot 12: 8 outstanding, event at 12 + 6 = 18 -> slot 2 of the
	 * next lap, wrap 0. */
	for (int i = 0; i < 4; i++) {
		add_in(&p, buf, 8, &t);
		CHECK_EQ(pop1(&p, &pc[0]), 1);
		CHECK_EQ(vq_dev_push(p.dev, &pc[0].c, 0), 1);
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	}
	for (int i = 0; i < 8; i++)
		add_in(&p, buf, 8, &t);
	CHECK_EQ(vq_drv_enable_cb_delayed(p.drv), 0);
	CHECK_EQ(vq_le16(drv_event(&p)->off_wrap), 0x0002);
	for (int i = 0; i < 8; i++)
		CHECK_EQ(pop1(&p, &pc[i]), 1);
	vq_dev_should_signal(p.dev);
	for (int i = 0; i < 6; i++) {           /* 12..15, 0, 1 */
		CHECK_EQ(vq_dev_push(p.dev, &pc[i].c, 0), 1);
		CHECK(!vq_dev_should_signal(p.dev));
	}
	CHECK_EQ(vq_dev_push(p.dev, &pc[6].c, 0), 1);  /* slot 2, wrap 0 */
	CHECK(vq_dev_should_signal(p.dev));
	/* A pending used buffer: the re-check says so. */
	CHECK_EQ(vq_drv_enable_cb_delayed(p.drv), 1);
	pair_fini(&p);

	pair_init(&p, PACKED, 16, 1, 1);
	vq_drv_disable_cb(p.drv);
	CHECK_EQ(vq_drv_enable_cb_delayed(p.drv), 0);
	CHECK_EQ(vq_le16(drv_event(&p)->flags), VQ_EVENT_F_ENABLE);
	pair_fini(&p);
}

/* Unpop rewinds by ring slots, across the wrap back into the old phase. */
static void packed_unpop_across_wrap(void)
{
	struct ring_pair p;
	struct popped pc[3], again;
	struct vq_chain c[3];
	struct vq_seg s[2];
	uint64_t buf;
	int t[3];
	void *tok;
	uint32_t len;

	pair_init(&p, PACKED, 8, 1, 1);
	buf = pair_alloc(&p, 64);
	for (int i = 0; i < 6; i++) {
		add_in(&p, buf, 8, &t[0]);
		CHECK_EQ(pop1(&p, &pc[0]), 1);
		CHECK_EQ(vq_dev_push(p.dev, &pc[0].c, 0), 1);
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	}
	s[0] = (struct vq_seg){ buf, 8 };
	s[1] = (struct vq_seg){ buf + 8, 8 };
	add_in(&p, buf, 8, &t[0]);                              /* 6 */
	CHECK_EQ(vq_drv_add(p.drv, s, 0, 2, &t[1]), 0);         /* 7, 0 */
	add_in(&p, buf, 8, &t[2]);                              /* 1 */
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(pop1(&p, &pc[i]), 1);
		c[i] = pc[i].c;
	}
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 0x0002);
	/* Only the most recently popped chains can be given back. */
	CHECK_EQ(vq_dev_unpop(p.dev, &c[0], 1), -EINVAL);
	CHECK_EQ(vq_dev_unpop(p.dev, &c[1], 1), -EINVAL);
	{
		struct vq_chain twice[2] = { c[2], c[2] };

		CHECK_EQ(vq_dev_unpop(p.dev, twice, 2), -EINVAL);
	}
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 0x0002);
	CHECK_EQ(vq_dev_unpop(p.dev, &c[1], 2), 0);
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 0x8007);
	/* Unpopping what is no longer in flight is refused. */
	CHECK_EQ(vq_dev_unpop(p.dev, &c[1], 1), -EINVAL);
	CHECK_EQ(pop1(&p, &again), 1);
	CHECK_EQ(again.c.id, c[1].id);
	CHECK_EQ(again.c.ndesc, 2);
	CHECK_EQ(again.c.in_len, 16);
	c[1] = again.c;
	CHECK_EQ(pop1(&p, &pc[2]), 1);
	CHECK_EQ(pc[2].c.id, c[2].id);
	c[2] = pc[2].c;
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 0x0002);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(vq_dev_fill(p.dev, &c[i], (uint32_t)i), 0);
	CHECK_EQ(vq_dev_flush(p.dev), 3);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
		CHECK(tok == &t[i]);
		CHECK_EQ(len, i);
	}
	CHECK_EQ(vq_dev_get_state(p.dev).used_idx, 0x0002);
	pair_fini(&p);
}

/* After the device stopped, every buffer never used comes back once. */
static void packed_detach_unused(void)
{
	struct ring_pair p;
	struct popped pc;
	uint64_t buf;
	int t[3];
	void *tok, *a, *b;
	uint32_t len;

	pair_init(&p, PACKED, 8, 1, 1);
	buf = pair_alloc(&p, 64);
	for (int i = 0; i < 3; i++)
		add_in(&p, buf, 8, &t[i]);
	CHECK_EQ(pop1(&p, &pc), 1);
	CHECK_EQ(vq_dev_push(p.dev, &pc.c, 0), 1);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == &t[0]);
	a = vq_drv_detach_unused(p.drv);
	b = vq_drv_detach_unused(p.drv);
	CHECK((a == &t[1] && b == &t[2]) || (a == &t[2] && b == &t[1]));
	CHECK(vq_drv_detach_unused(p.drv) == NULL);
	CHECK_EQ(vq_drv_outstanding(p.drv), 0);
	CHECK_EQ(vq_drv_free_slots(p.drv), 8);
	/* Reset zeroes the ring: a fresh start at slot 0, wrap 1. */
	vq_drv_reset(p.drv);
	CHECK_EQ(slot_flags(&p, 0), 0);
	add_in(&p, buf, 8, &t[0]);
	CHECK_EQ(slot_flags(&p, 0), F_AVAIL | VQ_DESC_F_WRITE);
	vq_dev_reset(p.dev);
	CHECK_EQ(pop1(&p, &pc), 1);
	CHECK_EQ(vq_dev_push(p.dev, &pc.c, 3), 1);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == &t[0]);
	pair_fini(&p);
}

/* get_state/resume: positions with wrap counters, a new device started at
 * a nonzero position with wrap 0 carries on. */
static void packed_get_state_resume(void)
{
	struct ring_pair p;
	struct popped pc;
	struct vq_dev_state st;
	struct vq_dev_config vc;
	uint64_t buf;
	int t;
	void *tok;
	uint32_t len;

	pair_init(&p, PACKED, 8, 1, 1);
	buf = pair_alloc(&p, 64);
	for (int i = 0; i < 13; i++) {
		add_in(&p, buf, 8, &t);
		CHECK_EQ(pop1(&p, &pc), 1);
		CHECK_EQ(vq_dev_push(p.dev, &pc.c, 1), 1);
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	}
	add_in(&p, buf, 8, &t);
	CHECK_EQ(pop1(&p, &pc), 1);
	/* Staged but unflushed: not counted. */
	CHECK_EQ(vq_dev_fill(p.dev, &pc.c, 1), 0);
	st = vq_dev_get_state(p.dev);
	CHECK_EQ(st.avail_idx, 0x0006);
	CHECK_EQ(st.used_idx, 0x0005);
	CHECK_EQ(vq_dev_flush(p.dev), 1);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	st = vq_dev_get_state(p.dev);
	CHECK_EQ(st.avail_idx, 0x0006);
	CHECK_EQ(st.used_idx, 0x0006);
	vq_dev_free(p.dev);

	vc = (struct vq_dev_config){ .features = p.features, .num = 8,
				     .ring = p.ring, .mem = p.mem,
				     .avail_idx = 0x0008, .used_idx = 0x0006 };
	CHECK_EQ(vq_dev_new(&vc, &p.dev), -EINVAL);     /* position >= num */
	vc.avail_idx = st.avail_idx;
	CHECK_EQ(vq_dev_new(&vc, &p.dev), 0);
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 0x0006);
	for (int i = 0; i < 20; i++) {
		add_in(&p, buf, 8, &t);
		CHECK_EQ(pop1(&p, &pc), 1);
		CHECK_EQ(vq_dev_push(p.dev, &pc.c, 2), 1);
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
		CHECK_EQ(len, 2);
	}
	/* 14 + 20 = 34 slots since the start = 4 laps + 2: wrap 1 again. */
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 0x8002);
	CHECK_EQ(vq_dev_get_state(p.dev).used_idx, 0x8002);
	/* Reset goes back to the configured indices. */
	vq_dev_reset(p.dev);
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 0x0006);
	CHECK_EQ(vq_dev_get_state(p.dev).used_idx, 0x0006);
	pair_fini(&p);
}

int main(void)
{
	RUN(packed_2_8_basic_round_trip);
	RUN(packed_2_8_6_chain_skips_slots);
	RUN(packed_2_8_1_wrap_counters_flip);
	RUN(packed_2_8_1_flags_at_wrap_point);
	RUN(packed_2_8_1_queue_of_one);
	RUN(packed_2_8_6_buffer_id_in_last_descriptor);
	RUN(packed_burst_pop_batch_of_4);
	RUN(packed_burst_pop_stops_at_bad_chain);
	RUN(packed_burst_across_memory_regions);
	RUN(packed_flush_publishes_head_flags_last);
	RUN(packed_2_8_19_indirect_round_trip);
	RUN(packed_add_full_ring_enospc);
	RUN(packed_2_8_10_driver_event_enable_disable);
	RUN(packed_2_8_10_desc_event_driver_kick);
	RUN(packed_2_8_10_device_signal_enable_disable);
	RUN(packed_2_8_10_desc_event_device_signal);
	RUN(packed_enable_notify_recheck);
	RUN(packed_enable_cb_delayed);
	RUN(packed_unpop_across_wrap);
	RUN(packed_detach_unused);
	RUN(packed_get_state_resume);
	return 0;
}
