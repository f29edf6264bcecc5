// SPDX-License-Identifier: MIT
/*
 * The split ring without IN_ORDER: our driver and our device on one ring.
 * Each case names the spec clause (virtio 1.2 §2.7) or RULES entry it checks
 * and asserts exact values in the ring and at the API.
 */
#include <sys/mman.h>

#include "split_test.h"

#define TOK(n) ((void *)(uintptr_t)(0x1000 + (n)))

/* Add a one-segment writable buffer of len bytes; return its gpa. */
static uint64_t add_in(struct ring_pair *p, uint32_t len, void *tok)
{
	uint64_t gpa = pair_alloc(p, len);
	struct vq_seg s = { gpa, len };

	CHECK_EQ(vq_drv_add(p->drv, &s, 0, 1, tok), 0);
	return gpa;
}

/* One buffer through the whole ring: add, publish, pop, fill, flush, get. */
static void round_trip(struct ring_pair *p, void *tok, uint32_t len)
{
	struct chainbuf b;
	void *t;
	uint32_t l;

	add_in(p, len, tok);
	CHECK(vq_drv_kick_prepare(p->drv) >= 0);
	CHECK_EQ(vq_dev_pop(p->dev, cb_init(&b)), 1);
	CHECK_EQ(vq_dev_push(p->dev, &b.c, len), 1);
	CHECK_EQ(vq_drv_get(p->drv, &t, &l), 1);
	CHECK(t == tok);
	CHECK_EQ(l, len);
}

/* 2.7.4 / 2.7.13 / 2.7.8: readable then writable segments arrive as iovecs,
 * the device's bytes and length come back with the token. */
static void split_2_7_13_round_trip(void)
{
	struct ring_pair p;
	struct chainbuf b;
	uint64_t out, in1, in2;
	struct vq_seg seg[3];
	void *tok;
	uint32_t len;

	pair_init(&p, 0, 8, 1, 1);
	out = pair_alloc(&p, 100);
	in1 = pair_alloc(&p, 50);
	in2 = pair_alloc(&p, 70);
	fill_pattern(&p, out, 100, 7);
	seg[0] = (struct vq_seg){ out, 100 };
	seg[1] = (struct vq_seg){ in1, 50 };
	seg[2] = (struct vq_seg){ in2, 70 };
	CHECK_EQ(vq_drv_add(p.drv, seg, 1, 2, TOK(1)), 0);
	CHECK_EQ(vq_drv_free_slots(p.drv), 5);
	CHECK_EQ(vq_drv_outstanding(p.drv), 1);
	/* Not visible before kick_prepare (D1: one index store per batch). */
	CHECK_EQ(vq_le16(ring_avail(&p)->idx), 0);
	CHECK(!vq_dev_has_avail(p.dev));
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b)), 0);
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 1);
	CHECK_EQ(vq_le16(ring_avail(&p)->idx), 1);
	CHECK(vq_dev_has_avail(p.dev));
	vq_dev_prefetch_avail(p.dev);   /* a hint, nothing for split: no move */
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 0);

	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b)), 1);
	CHECK_EQ(b.c.id, 0);
	CHECK_EQ(b.c.ndesc, 3);
	CHECK_EQ(b.c.nout, 1);
	CHECK_EQ(b.c.nin, 2);
	CHECK_EQ(b.c.out_len, 100);
	CHECK_EQ(b.c.in_len, 120);
	CHECK(b.iov[0].iov_base == pair_hva(&p, out));
	CHECK_EQ(b.iov[0].iov_len, 100);
	CHECK(b.iov[1].iov_base == pair_hva(&p, in1));
	CHECK_EQ(b.iov[1].iov_len, 50);
	CHECK(b.iov[2].iov_base == pair_hva(&p, in2));
	CHECK_EQ(b.iov[2].iov_len, 70);
	check_pattern(b.iov[0].iov_base, 100, 7, 0);
	{
		struct chainbuf none;

		CHECK_EQ(vq_dev_pop(p.dev, cb_init(&none)), 0);
	}
	write_in(&b.c, 80, 99);
	CHECK_EQ(vq_dev_fill(p.dev, &b.c, 121), -EINVAL);      /* > in_len */
	CHECK_EQ(vq_dev_fill(p.dev, &b.c, 80), 0);
	CHECK_EQ(vq_dev_flush(p.dev), 1);
	CHECK_EQ(vq_le16(ring_used(&p)->idx), 1);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[0].id), 0);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[0].len), 80);

	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == TOK(1));
	CHECK_EQ(len, 80);
	check_pattern(pair_hva(&p, in1), 50, 99, 0);
	check_pattern(pair_hva(&p, in2), 30, 99, 50);
	CHECK_EQ(*(uint8_t *)pair_hva(&p, in2 + 30), 0);       /* not written */
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 0);
	CHECK_EQ(vq_drv_free_slots(p.drv), 8);
	CHECK_EQ(vq_drv_outstanding(p.drv), 0);
	pair_fini(&p);
}

/* Bursts: several chains popped at once, in avail order. */
static void split_burst_pop(void)
{
	struct ring_pair p;
	struct chainbuf b[8];
	struct vq_chain c[8];
	void *tok[8];
	uint32_t len[8];
	int n;

	pair_init(&p, 0, 8, 1, 1);
	for (int i = 0; i < 5; i++)
		add_in(&p, 10 + i, TOK(i));
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 1);
	for (int i = 0; i < 8; i++)
		c[i] = *cb_init(&b[i]);
	n = vq_dev_pop_burst(p.dev, c, 8);
	CHECK_EQ(n, 5);
	for (int i = 0; i < 5; i++) {
		CHECK_EQ(c[i].id, i);
		CHECK_EQ(c[i].in_len, 10 + i);
		CHECK_EQ(vq_dev_fill(p.dev, &c[i], (uint32_t)c[i].in_len), 0);
	}
	CHECK_EQ(vq_dev_flush(p.dev), 5);
	CHECK_EQ(vq_drv_get_burst(p.drv, tok, len, 8), 5);
	for (int i = 0; i < 5; i++) {
		CHECK(tok[i] == TOK(i));
		CHECK_EQ(len[i], 10 + i);
	}
	pair_fini(&p);
}

/*
 * A burst's descriptors in two memory regions: the device keeps the region
 * of the last one it translated, and a descriptor in the other region, or
 * crossing into it, must still be translated there (2.7.5): low, high,
 * across the boundary (two iovecs), low; in order and not.
 */
static void split_burst_across_memory_regions(void)
{
	const uint64_t at = GUEST_SIZE / 2;
	const uint64_t gpa[6] = {
		GUEST_BASE + at - 4096, GUEST_BASE + at + 4096,
		GUEST_BASE + at - 32, GUEST_BASE + at - 2048,
		GUEST_BASE + at + 64, GUEST_BASE + at - 16,
	};

	for (int io = 0; io < 2; io++) {
		struct ring_pair p;
		struct chainbuf b[6];
		struct vq_chain c[6];
		struct vq_seg seg[6];
		void *tokens[6];

		pair_init(&p, io ? VQ_BIT(VQ_F_IN_ORDER) : 0, 8, 1, 1);
		pair_split_memory(&p, at);
		for (int i = 0; i < 6; i++) {
			c[i] = *cb_init(&b[i]);
			seg[i] = (struct vq_seg){ gpa[i], 64 };
			tokens[i] = TOK(i);
		}
		CHECK_EQ(vq_drv_add_burst(p.drv, seg, tokens, 6, false), 6);
		CHECK_EQ(vq_drv_kick_prepare(p.drv), 1);
		pair_pop_split_burst(&p, c, 6, gpa, 64, false, at);
		pair_fini(&p);
	}
}

/* RULES V2: fill stages, flush publishes with one used->idx store; the used
 * elements are in fill order. */
static void rules_v2_fill_then_flush(void)
{
	struct ring_pair p;
	struct chainbuf b[3];
	void *tok;
	uint32_t len;

	pair_init(&p, 0, 8, 1, 1);
	for (int i = 0; i < 3; i++)
		add_in(&p, 100, TOK(i));
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 1);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[i])), 1);
	CHECK_EQ(vq_dev_fill(p.dev, &b[2].c, 3), 0);
	CHECK_EQ(vq_dev_fill(p.dev, &b[2].c, 3), -EINVAL);     /* twice */
	CHECK_EQ(vq_dev_fill(p.dev, &b[0].c, 1), 0);
	CHECK_EQ(vq_dev_fill(p.dev, &b[1].c, 2), 0);
	CHECK_EQ(vq_le16(ring_used(&p)->idx), 0);
	CHECK(!vq_drv_has_used(p.drv));
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 0);
	CHECK_EQ(vq_dev_get_state(p.dev).used_idx, 0);         /* staged: not counted */
	CHECK_EQ(vq_dev_flush(p.dev), 3);
	CHECK_EQ(vq_le16(ring_used(&p)->idx), 3);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[0].id), 2);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[1].id), 0);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[2].id), 1);
	CHECK_EQ(vq_dev_flush(p.dev), 0);                     /* nothing staged */
	CHECK_EQ(vq_le16(ring_used(&p)->idx), 3);
	for (int i = 0; i < 3; i++) {
		static const int order[3] = { 2, 0, 1 };

		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
		CHECK(tok == TOK(order[i]));
		CHECK_EQ(len, order[i] + 1);
	}
	pair_fini(&p);
}

/* 2.7.8: a used burst that crosses the end of the used ring lands in the
 * last slots and then at slot 0. */
static void split_2_7_8_used_ring_wrap(void)
{
	struct ring_pair p;
	struct chainbuf b[4];
	void *tok;
	uint32_t len;

	pair_init(&p, 0, 8, 1, 1);
	for (int i = 0; i < 6; i++)
		round_trip(&p, TOK(100 + i), 4);
	CHECK_EQ(vq_le16(ring_used(&p)->idx), 6);
	for (int i = 0; i < 4; i++)
		add_in(&p, 20, TOK(i));
	vq_drv_kick_prepare(p.drv);
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[i])), 1);
		CHECK_EQ(vq_dev_fill(p.dev, &b[i].c, 10 + i), 0);
	}
	CHECK_EQ(vq_dev_flush(p.dev), 4);
	CHECK_EQ(vq_le16(ring_used(&p)->idx), 10);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[6].id), b[0].c.id);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[7].id), b[1].c.id);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[0].id), b[2].c.id);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[1].id), b[3].c.id);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[0].len), 12);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[1].len), 13);
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
		CHECK(tok == TOK(i));
		CHECK_EQ(len, 10 + i);
	}
	pair_fini(&p);
}

/* RULES "Split index arithmetic": indices are free-running u16 and wrap
 * past 65535 on both rings. */
static void split_2_7_avail_index_wraps(void)
{
	struct ring_pair p;
	const unsigned total = 65536 + 10;

	pair_init(&p, 0, 4, 1, 1);
	for (unsigned i = 0; i < total; i++)
		round_trip(&p, TOK(i & 0xff), 1 + (i & 7));
	CHECK_EQ(vq_le16(ring_avail(&p)->idx), (uint16_t)total);
	CHECK_EQ(vq_le16(ring_used(&p)->idx), (uint16_t)total);
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 10);
	CHECK_EQ(vq_dev_get_state(p.dev).used_idx, 10);
	CHECK_EQ(vq_drv_outstanding(p.drv), 0);
	CHECK_EQ(vq_drv_free_slots(p.drv), 4);
	pair_fini(&p);
}

/* 2.7.5.3: a multi-segment buffer goes into an indirect table and takes one
 * ring slot; the device sees the same segments. */
static void split_2_7_5_3_indirect_round_trip(void)
{
	struct ring_pair p;
	struct chainbuf b;
	struct vq_seg seg[4];
	struct vq_desc *tbl;
	void *tok;
	uint32_t len;

	pair_init(&p, VQ_BIT(VQ_F_INDIRECT_DESC), 8, 1, 1);
	for (int i = 0; i < 4; i++)
		seg[i] = (struct vq_seg){ pair_alloc(&p, 32), 32 };
	fill_pattern(&p, seg[0].addr, 32, 1);
	fill_pattern(&p, seg[1].addr, 32, 2);
	CHECK_EQ(vq_drv_add(p.drv, seg, 2, 2, TOK(1)), 0);
	CHECK_EQ(vq_drv_free_slots(p.drv), 7);
	CHECK_EQ(vq_le16(ring_desc(&p)[0].flags), VQ_DESC_F_INDIRECT);
	CHECK_EQ(vq_le32(ring_desc(&p)[0].len), 4 * 16);
	CHECK_EQ(vq_le64(ring_desc(&p)[0].addr), p.indirect_gpa);      /* pool slot of head 0 */
	tbl = (struct vq_desc *)p.indirect;
	CHECK_EQ(vq_le16(tbl[0].flags), VQ_DESC_F_NEXT);
	CHECK_EQ(vq_le16(tbl[2].flags), VQ_DESC_F_NEXT | VQ_DESC_F_WRITE);
	CHECK_EQ(vq_le16(tbl[3].flags), VQ_DESC_F_WRITE);
	CHECK_EQ(vq_le16(tbl[0].next), 1);
	vq_drv_kick_prepare(p.drv);

	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b)), 1);
	CHECK_EQ(b.c.ndesc, 1);
	CHECK_EQ(b.c.nout, 2);
	CHECK_EQ(b.c.nin, 2);
	CHECK_EQ(b.c.in_len, 64);
	for (int i = 0; i < 4; i++)
		CHECK(b.iov[i].iov_base == pair_hva(&p, seg[i].addr));
	check_pattern(b.iov[1].iov_base, 32, 2, 0);
	write_in(&b.c, 40, 5);
	CHECK_EQ(vq_dev_push(p.dev, &b.c, 40), 1);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == TOK(1));
	CHECK_EQ(len, 40);
	check_pattern(pair_hva(&p, seg[2].addr), 32, 5, 0);
	check_pattern(pair_hva(&p, seg[3].addr), 8, 5, 32);
	CHECK_EQ(vq_drv_free_slots(p.drv), 8);
	pair_fini(&p);
}

/* The driver goes indirect only where it saves ring slots and the pool
 * fits the chain; never without the feature. */
static void split_indirect_saves_ring_space(void)
{
	struct ring_pair p;
	struct vq_seg seg[17];

	pair_init(&p, VQ_BIT(VQ_F_INDIRECT_DESC), 32, 1, 0);
	for (int i = 0; i < 17; i++)
		seg[i] = (struct vq_seg){ pair_alloc(&p, 16), 16 };
	/* One segment: a direct descriptor. */
	CHECK_EQ(vq_drv_add(p.drv, seg, 1, 0, TOK(0)), 0);
	CHECK_EQ(vq_le16(ring_desc(&p)[0].flags), 0);
	CHECK_EQ(vq_drv_free_slots(p.drv), 31);
	/* Two to indirect_max (16) segments: one slot. */
	CHECK_EQ(vq_drv_add(p.drv, seg, 1, 15, TOK(1)), 0);
	CHECK_EQ(vq_le16(ring_desc(&p)[1].flags), VQ_DESC_F_INDIRECT);
	CHECK_EQ(vq_le32(ring_desc(&p)[1].len), 16 * 16);
	CHECK_EQ(vq_le64(ring_desc(&p)[1].addr), p.indirect_gpa + 1 * 16 * 16);
	CHECK_EQ(vq_drv_free_slots(p.drv), 30);
	/* More than the pool's table: a direct chain of 17. */
	CHECK_EQ(vq_drv_add(p.drv, seg, 17, 0, TOK(2)), 0);
	CHECK_EQ(vq_le16(ring_desc(&p)[2].flags), VQ_DESC_F_NEXT);
	CHECK_EQ(vq_drv_free_slots(p.drv), 13);
	/* Not enough slots for another direct chain of 17. */
	CHECK_EQ(vq_drv_add(p.drv, seg, 17, 0, TOK(3)), -ENOSPC);
	pair_fini(&p);

	pair_init(&p, 0, 32, 1, 0);
	CHECK_EQ(vq_drv_add(p.drv, seg, 2, 2, TOK(0)), 0);
	CHECK_EQ(vq_le16(ring_desc(&p)[0].flags), VQ_DESC_F_NEXT);
	CHECK_EQ(vq_drv_free_slots(p.drv), 28);
	pair_fini(&p);
}

/* A ring of num descriptors holds num one-segment buffers; the next add
 * is -ENOSPC until one is used. */
static void split_2_7_ring_full(void)
{
	struct ring_pair p;
	struct chainbuf b;
	void *tok;
	uint32_t len;
	struct vq_seg s = { GUEST_BASE + (32ull << 20), 8 };

	pair_init(&p, 0, 4, 1, 1);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(vq_drv_add(p.drv, &s, 0, 1, TOK(i)), 0);
	CHECK_EQ(vq_drv_add(p.drv, &s, 0, 1, TOK(9)), -ENOSPC);
	CHECK_EQ(vq_drv_free_slots(p.drv), 0);
	vq_drv_kick_prepare(p.drv);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b)), 1);
	CHECK_EQ(vq_dev_push(p.dev, &b.c, 8), 1);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK_EQ(vq_drv_add(p.drv, &s, 0, 1, TOK(9)), 0);
	/* The freed head is reused. */
	CHECK_EQ(vq_le16(ring_avail(&p)->ring[0]), b.c.id);
	pair_fini(&p);
}

/* vq_dev_unpop: the last popped chains come back on the next pop; a filled
 * chain or more than was popped cannot be given back. */
static void split_unpop(void)
{
	struct ring_pair p;
	struct chainbuf b[4];
	struct vq_chain c[3];

	pair_init(&p, 0, 8, 1, 1);
	for (int i = 0; i < 4; i++)
		add_in(&p, 8, TOK(i));
	vq_drv_kick_prepare(p.drv);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[i])), 1);
		c[i] = b[i].c;
	}
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 3);
	CHECK_EQ(vq_dev_unpop(p.dev, &c[1], 2), 0);
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 1);
	/* Only one is still popped: giving back two is a caller error. */
	CHECK_EQ(vq_dev_unpop(p.dev, &c[0], 2), -EINVAL);
	/* Not the last popped: wrong chain. */
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[1])), 1);
	CHECK_EQ(b[1].c.id, 1);
	CHECK_EQ(vq_dev_unpop(p.dev, &c[0], 1), -EINVAL);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[2])), 1);
	CHECK_EQ(b[2].c.id, 2);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[3])), 1);
	CHECK_EQ(b[3].c.id, 3);
	/* A filled chain cannot be given back. */
	CHECK_EQ(vq_dev_fill(p.dev, &b[3].c, 0), 0);
	CHECK_EQ(vq_dev_unpop(p.dev, &b[3].c, 1), -EINVAL);
	CHECK_EQ(vq_dev_flush(p.dev), 1);
	CHECK_EQ(vq_dev_error(p.dev), 0);
	pair_fini(&p);
}

/* After the device stopped, every buffer it never used comes back through
 * detach_unused, once. */
static void split_detach_unused(void)
{
	struct ring_pair p;
	struct chainbuf b;
	void *tok;
	uint32_t len;
	unsigned seen = 0;
	struct vq_seg seg[2] = { { GUEST_BASE + (32ull << 20), 8 },
				 { GUEST_BASE + (33ull << 20), 8 } };

	pair_init(&p, 0, 8, 1, 1);
	CHECK_EQ(vq_drv_add(p.drv, seg, 1, 1, TOK(0)), 0);
	CHECK_EQ(vq_drv_add(p.drv, seg, 1, 1, TOK(1)), 0);
	CHECK_EQ(vq_drv_add(p.drv, seg, 1, 1, TOK(2)), 0);
	vq_drv_kick_prepare(p.drv);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b)), 1);
	CHECK_EQ(vq_dev_push(p.dev, &b.c, 0), 1);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == TOK(0));
	while ((tok = vq_drv_detach_unused(p.drv)) != NULL) {
		CHECK(tok == TOK(1) || tok == TOK(2));
		seen |= 1u << ((uintptr_t)tok - 0x1000);
	}
	CHECK_EQ(seen, 6);
	CHECK_EQ(vq_drv_outstanding(p.drv), 0);
	CHECK_EQ(vq_drv_free_slots(p.drv), 8);
	CHECK(vq_drv_detach_unused(p.drv) == NULL);
	/* After a reset of both sides the ring works from zero again. */
	vq_drv_reset(p.drv);
	vq_dev_reset(p.dev);
	CHECK_EQ(vq_le16(ring_avail(&p)->idx), 0);
	round_trip(&p, TOK(7), 8);
	pair_fini(&p);
}

/* vhost-user GET/SET_VRING_BASE: a device resumed at the saved indices
 * continues the ring where the old one stopped. */
static void split_get_state_resume(void)
{
	struct ring_pair p;
	struct vq_dev_state st;
	struct vq_dev_config vc;
	struct chainbuf b;

	pair_init(&p, 0, 8, 1, 1);
	for (int i = 0; i < 13; i++)
		round_trip(&p, TOK(i), 4);
	/* One popped and not used: the saved avail index counts it. */
	add_in(&p, 4, TOK(50));
	vq_drv_kick_prepare(p.drv);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b)), 1);
	st = vq_dev_get_state(p.dev);
	CHECK_EQ(st.avail_idx, 14);
	CHECK_EQ(st.used_idx, 13);
	vq_dev_free(p.dev);

	/* The new backend resumes one back, so the in-flight chain is redone
	 * (what a backend without inflight tracking does). */
	vc = (struct vq_dev_config){ .features = p.features, .num = p.num,
				     .ring = p.ring, .mem = p.mem,
				     .avail_idx = 13, .used_idx = 13 };
	CHECK_EQ(vq_dev_new(&vc, &p.dev), 0);
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 13);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b)), 1);
	CHECK_EQ(vq_dev_push(p.dev, &b.c, 3), 1);
	CHECK_EQ(vq_le16(ring_used(&p)->idx), 14);
	{
		void *tok;
		uint32_t len;

		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
		CHECK(tok == TOK(50));
		CHECK_EQ(len, 3);
	}
	round_trip(&p, TOK(51), 4);
	st = vq_dev_get_state(p.dev);
	CHECK_EQ(st.avail_idx, 15);
	CHECK_EQ(st.used_idx, 15);
	/* Reset goes back to the configured indices. */
	vq_dev_reset(p.dev);
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 13);
	CHECK_EQ(vq_dev_get_state(p.dev).used_idx, 13);
	pair_fini(&p);
}

/* 2.7.13.1 (the driver writes a buffer's descriptor, then makes it
 * available): a burst that gives back a buffer its descriptor already
 * describes leaves the table alone, so the line stays the device's to
 * read (checked by write-protecting the table: a store would fault), and
 * the device still pops exactly that buffer; a changed one is written. */
static void split_unchanged_descriptor_left_alone(void)
{
	struct ring_pair p;
	struct chainbuf b;
	uint64_t buf[2];
	struct vq_seg s;
	void *tok = TOK(1), *t;
	uint32_t l;

	pair_init(&p, 0, 256, 1, 1);    /* a 4 KiB table, a page of its own */
	CHECK_EQ((uintptr_t)ring_desc(&p) & 4095, 0);
	buf[0] = pair_alloc(&p, 256);
	buf[1] = pair_alloc(&p, 256);
	for (int lap = 0; lap < 4; lap++) {
		s = (struct vq_seg){ buf[lap == 3], 256 };
		if (lap == 1)
			CHECK_EQ(mprotect(ring_desc(&p), 4096, PROT_READ), 0);
		if (lap == 3)
			CHECK_EQ(mprotect(ring_desc(&p), 4096, PROT_READ | PROT_WRITE), 0);
		CHECK_EQ(vq_drv_add_burst(p.drv, &s, &tok, 1, true), 1);
		CHECK(vq_drv_kick_prepare(p.drv) >= 0);
		CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b)), 1);
		CHECK(b.iov[0].iov_base == pair_hva(&p, buf[lap == 3]));
		CHECK_EQ(b.c.nin, 1);
		CHECK_EQ(b.c.in_len, 256);
		CHECK_EQ(vq_dev_push(p.dev, &b.c, 10), 1);
		CHECK_EQ(vq_drv_get(p.drv, &t, &l), 1);
		CHECK(t == tok);
		CHECK_EQ(l, 10);
	}
	pair_fini(&p);
}

int main(void)
{
	RUN(split_2_7_13_round_trip);
	RUN(split_burst_pop);
	RUN(split_burst_across_memory_regions);
	RUN(rules_v2_fill_then_flush);
	RUN(split_2_7_8_used_ring_wrap);
	RUN(split_2_7_avail_index_wraps);
	RUN(split_2_7_5_3_indirect_round_trip);
	RUN(split_indirect_saves_ring_space);
	RUN(split_2_7_ring_full);
	RUN(split_unpop);
	RUN(split_detach_unused);
	RUN(split_get_state_resume);
	RUN(split_unchanged_descriptor_left_alone);
	return 0;
}
