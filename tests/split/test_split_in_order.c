// SPDX-License-Identifier: MIT
/*
 * VQ_F_IN_ORDER on the split ring (virtio 1.2 §2.7.9, RULES "In-order"):
 * descriptors in table order, one used element per batch at the batch's
 * first slot naming its last buffer, separate buffer and descriptor counters.
 */
#include "split_test.h"

#define TOK(n) ((void *)(uintptr_t)(0x1000 + (n)))
#define STALE 0xdeadbeefu

static void init_in_order(struct ring_pair *p, uint64_t extra, uint16_t num)
{
	pair_init(p, VQ_BIT(VQ_F_IN_ORDER) | extra, num, 1, 1);
}

/* Add a buffer of nout readable and nin writable segments of seglen bytes. */
static void add_buf(struct ring_pair *p, unsigned nout, unsigned nin,
		    uint32_t seglen, void *tok)
{
	struct vq_seg seg[20];

	for (unsigned i = 0; i < nout + nin; i++)
		seg[i] = (struct vq_seg){ pair_alloc(p, seglen), seglen };
	CHECK_EQ(vq_drv_add(p->drv, seg, nout, nin, tok), 0);
}

static void mark_used_stale(struct ring_pair *p)
{
	for (unsigned i = 0; i < p->num; i++)
		forge_used(p, (uint16_t)i, STALE, STALE);
}

/* 2.7.9: descriptors are used in table order, next = x + 1, and heads
 * advance by each chain's descriptor count. */
static void split_2_7_9_descriptors_in_table_order(void)
{
	struct ring_pair p;
	struct chainbuf b[3];

	init_in_order(&p, 0, 8);
	add_buf(&p, 1, 1, 8, TOK(0));           /* descriptors 0, 1 */
	add_buf(&p, 2, 1, 8, TOK(1));           /* 2, 3, 4 */
	add_buf(&p, 0, 1, 8, TOK(2));           /* 5 */
	CHECK_EQ(vq_le16(ring_desc(&p)[0].next), 1);
	CHECK_EQ(vq_le16(ring_desc(&p)[2].next), 3);
	CHECK_EQ(vq_le16(ring_desc(&p)[3].next), 4);
	CHECK_EQ(vq_le16(ring_avail(&p)->ring[0]), 0);
	CHECK_EQ(vq_le16(ring_avail(&p)->ring[1]), 2);
	CHECK_EQ(vq_le16(ring_avail(&p)->ring[2]), 5);
	CHECK_EQ(vq_drv_free_slots(p.drv), 2);
	vq_drv_kick_prepare(p.drv);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[0])), 1);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[1])), 1);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[2])), 1);
	CHECK_EQ(b[0].c.id, 0);
	CHECK_EQ(b[0].c.ndesc, 2);
	CHECK_EQ(b[1].c.id, 2);
	CHECK_EQ(b[1].c.ndesc, 3);
	CHECK_EQ(b[2].c.id, 5);
	CHECK_EQ(vq_dev_error(p.dev), 0);
	pair_fini(&p);
}

/* 2.7.9: the device writes ONE used element for a batch, at the batch's
 * first slot, with the id and length of its last buffer, and moves the
 * index by the batch size.  The other slots are not written. */
static void split_2_7_9_one_used_element_per_batch(void)
{
	struct ring_pair p;
	struct chainbuf b[4];

	init_in_order(&p, 0, 8);
	mark_used_stale(&p);
	add_buf(&p, 1, 1, 10, TOK(0));
	add_buf(&p, 0, 2, 10, TOK(1));
	add_buf(&p, 0, 1, 30, TOK(2));
	add_buf(&p, 0, 1, 40, TOK(3));
	vq_drv_kick_prepare(p.drv);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[i])), 1);
	/* Complete, complete, complete, partial: one batch of four. */
	CHECK_EQ(vq_dev_fill(p.dev, &b[0].c, 10), 0);
	CHECK_EQ(vq_dev_fill(p.dev, &b[1].c, 20), 0);
	CHECK_EQ(vq_dev_fill(p.dev, &b[2].c, 30), 0);
	CHECK_EQ(vq_dev_fill(p.dev, &b[3].c, 7), 0);
	CHECK_EQ(vq_le16(ring_used(&p)->idx), 0);
	CHECK_EQ(vq_dev_flush(p.dev), 4);
	CHECK_EQ(vq_le16(ring_used(&p)->idx), 4);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[0].id), b[3].c.id);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[0].len), 7);
	for (int i = 1; i < 8; i++) {
		CHECK_EQ(vq_le32(ring_used(&p)->ring[i].id), STALE);
		CHECK_EQ(vq_le32(ring_used(&p)->ring[i].len), STALE);
	}
	pair_fini(&p);
}

/* 2.7.9: a buffer written only partly ends its batch; the next batch's
 * element goes at its own first slot. */
static void split_2_7_9_partial_buffer_ends_batch(void)
{
	struct ring_pair p;
	struct chainbuf b[4];
	void *tok;
	uint32_t len;

	init_in_order(&p, 0, 8);
	mark_used_stale(&p);
	for (int i = 0; i < 4; i++)
		add_buf(&p, 0, 1, 10 * (i + 1), TOK(i));
	vq_drv_kick_prepare(p.drv);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[i])), 1);
	CHECK_EQ(vq_dev_fill(p.dev, &b[0].c, 10), 0);  /* complete */
	CHECK_EQ(vq_dev_fill(p.dev, &b[1].c, 5), 0);   /* partial: ends batch 1 */
	CHECK_EQ(vq_dev_fill(p.dev, &b[2].c, 30), 0);  /* complete */
	CHECK_EQ(vq_dev_fill(p.dev, &b[3].c, 40), 0);  /* complete, last */
	CHECK_EQ(vq_dev_flush(p.dev), 4);
	CHECK_EQ(vq_le16(ring_used(&p)->idx), 4);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[0].id), b[1].c.id);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[0].len), 5);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[1].id), STALE);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[2].id), b[3].c.id);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[2].len), 40);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[3].id), STALE);
	/* The driver: each buffer on its own, in order, with its length. */
	for (int i = 0; i < 4; i++) {
		static const uint32_t want[4] = { 10, 5, 30, 40 };

		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
		CHECK(tok == TOK(i));
		CHECK_EQ(len, want[i]);
	}
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 0);
	CHECK_EQ(vq_drv_free_slots(p.drv), 8);
	pair_fini(&p);
}

/* 2.7.9 driver side: one used element completes every buffer up to its id;
 * earlier buffers get their full writable length, the last the element's
 * length; the skipped used slots are stale and never read. */
static void split_2_7_9_driver_completes_batch(void)
{
	struct ring_pair p;
	void *tok;
	uint32_t len;

	pair_init(&p, VQ_BIT(VQ_F_IN_ORDER), 8, 1, 0);
	add_buf(&p, 1, 1, 16, TOK(0));          /* head 0, in_len 16 */
	add_buf(&p, 0, 3, 16, TOK(1));          /* head 2, in_len 48 */
	add_buf(&p, 0, 1, 64, TOK(2));          /* head 5, in_len 64 */
	add_buf(&p, 0, 1, 64, TOK(3));          /* head 6 */
	vq_drv_kick_prepare(p.drv);
	/* Garbage in the slots a batch skips: must not matter. */
	forge_used(&p, 1, 999, 0xffffffff);
	forge_used(&p, 2, 3, 1);
	forge_used(&p, 0, 5, 33);
	ring_used(&p)->idx = vq_le16(3);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == TOK(0));
	CHECK_EQ(len, 16);
	CHECK(vq_drv_has_used(p.drv));
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == TOK(1));
	CHECK_EQ(len, 48);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == TOK(2));
	CHECK_EQ(len, 33);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 0);
	CHECK_EQ(vq_drv_outstanding(p.drv), 1);
	CHECK_EQ(vq_drv_free_slots(p.drv), 7);
	/* A device that does not batch: one element per buffer works too. */
	forge_used(&p, 3, 6, 2);
	ring_used(&p)->idx = vq_le16(4);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == TOK(3));
	CHECK_EQ(len, 2);
	CHECK_EQ(vq_drv_error(p.drv), 0);
	pair_fini(&p);
}

/* 2.7.9: with IN_ORDER the device fills in pop order. */
static void split_2_7_9_fill_out_of_order_rejected(void)
{
	struct ring_pair p;
	struct chainbuf b[2];

	init_in_order(&p, 0, 8);
	add_buf(&p, 0, 1, 8, TOK(0));
	add_buf(&p, 0, 1, 8, TOK(1));
	vq_drv_kick_prepare(p.drv);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[0])), 1);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[1])), 1);
	CHECK_EQ(vq_dev_fill(p.dev, &b[1].c, 8), -EINVAL);
	CHECK_EQ(vq_dev_fill(p.dev, &b[0].c, 8), 0);
	CHECK_EQ(vq_dev_fill(p.dev, &b[0].c, 8), -EINVAL);
	CHECK_EQ(vq_dev_fill(p.dev, &b[1].c, 8), 0);
	CHECK_EQ(vq_dev_flush(p.dev), 2);
	CHECK_EQ(vq_dev_error(p.dev), 0);
	pair_fini(&p);
}

/* RULES "Rollback": unpop rewinds the descriptor counter by descriptors,
 * not buffers, so the next pop sees the same heads again. */
static void rules_in_order_unpop_rewinds_descriptors(void)
{
	struct ring_pair p;
	struct chainbuf b[3];
	struct vq_chain c[2];

	init_in_order(&p, 0, 16);
	add_buf(&p, 1, 2, 8, TOK(0));           /* head 0, 3 descriptors */
	add_buf(&p, 2, 2, 8, TOK(1));           /* head 3, 4 descriptors */
	add_buf(&p, 0, 1, 8, TOK(2));           /* head 7 */
	vq_drv_kick_prepare(p.drv);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[0])), 1);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[1])), 1);
	c[0] = b[0].c;
	c[1] = b[1].c;
	CHECK_EQ(vq_dev_unpop(p.dev, c, 2), 0);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[0])), 1);
	CHECK_EQ(b[0].c.id, 0);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[1])), 1);
	CHECK_EQ(b[1].c.id, 3);
	c[1] = b[1].c;
	CHECK_EQ(vq_dev_unpop(p.dev, &c[1], 1), 0);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[1])), 1);
	CHECK_EQ(b[1].c.id, 3);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[2])), 1);
	CHECK_EQ(b[2].c.id, 7);
	CHECK_EQ(vq_dev_error(p.dev), 0);
	pair_fini(&p);
}

/* Indirect tables with IN_ORDER: one ring descriptor each, table entries
 * sequential; the device's next head advances by one. */
static void split_2_7_9_in_order_indirect(void)
{
	struct ring_pair p;
	struct chainbuf b[3];
	void *tok;
	uint32_t len;

	init_in_order(&p, VQ_BIT(VQ_F_INDIRECT_DESC), 8);
	add_buf(&p, 1, 3, 8, TOK(0));           /* indirect: head 0 */
	add_buf(&p, 0, 1, 8, TOK(1));           /* direct: head 1 */
	add_buf(&p, 2, 2, 8, TOK(2));           /* indirect: head 2 */
	CHECK_EQ(vq_le16(ring_desc(&p)[0].flags), VQ_DESC_F_INDIRECT);
	CHECK_EQ(vq_le16(ring_desc(&p)[2].flags), VQ_DESC_F_INDIRECT);
	CHECK_EQ(vq_le64(ring_desc(&p)[2].addr), p.indirect_gpa + 2ull * 16 * p.indirect_max);
	vq_drv_kick_prepare(p.drv);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b[i])), 1);
		CHECK_EQ(b[i].c.id, i);
		CHECK_EQ(b[i].c.ndesc, 1);
		CHECK_EQ(vq_dev_fill(p.dev, &b[i].c, (uint32_t)b[i].c.in_len), 0);
	}
	CHECK_EQ(b[0].c.in_len, 24);
	CHECK_EQ(vq_dev_flush(p.dev), 3);
	CHECK_EQ(vq_le32(ring_used(&p)->ring[0].id), 2);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
		CHECK(tok == TOK(i));
	}
	pair_fini(&p);
}

/* In-order over many laps: descriptors and buffers wrap at different
 * rates, batches of varied size cross the ring end. */
static void rules_in_order_counters_apart(void)
{
	struct ring_pair p;
	uint64_t rng = vq_test_seed(0x1234);
	unsigned next_tok = 0, next_get = 0;

	init_in_order(&p, 0, 16);
	for (int round = 0; round < 3000; round++) {
		struct chainbuf b[16];
		unsigned nadd = 1 + vq_test_rand(&rng) % 6, npop;
		uint32_t lens[16];
		int n;

		for (unsigned i = 0; i < nadd; i++) {
			struct vq_seg seg[3];
			unsigned ns = 1 + vq_test_rand(&rng) % 3;

			for (unsigned k = 0; k < ns; k++)
				seg[k] = (struct vq_seg){ GUEST_BASE + (40ull << 20) + k * 64, 16 };
			if (vq_drv_add(p.drv, seg, 0, ns, TOK(next_tok & 0xffff)) == -ENOSPC)
				break;
			next_tok++;
		}
		vq_drv_kick_prepare(p.drv);
		for (npop = 0; npop < 16; npop++)
			if (vq_dev_pop(p.dev, cb_init(&b[npop])) != 1)
				break;
		for (unsigned i = 0; i < npop; i++) {
			lens[i] = vq_test_rand(&rng) % 3 ? (uint32_t)b[i].c.in_len :
				  (uint32_t)(vq_test_rand(&rng) % (b[i].c.in_len + 1));
			CHECK_EQ(vq_dev_fill(p.dev, &b[i].c, lens[i]), 0);
		}
		CHECK_EQ(vq_dev_flush(p.dev), npop);
		for (unsigned i = 0; i < npop; i++) {
			void *tok;
			uint32_t len;

			n = vq_drv_get(p.drv, &tok, &len);
			CHECK_EQ(n, 1);
			CHECK(tok == TOK(next_get & 0xffff));
			CHECK_EQ(len, lens[i]);
			next_get++;
		}
	}
	CHECK(next_get > 3000);
	CHECK_EQ(vq_dev_error(p.dev), 0);
	CHECK_EQ(vq_drv_error(p.drv), 0);
	pair_fini(&p);
}

/* A resumed in-order device learns the driver's descriptor position from
 * the first head (only the driver knows it), then enforces order. */
static void split_2_7_9_in_order_resume(void)
{
	struct ring_pair p;
	struct chainbuf b;
	struct vq_dev_config vc;
	void *tok;
	uint32_t len;

	init_in_order(&p, 0, 8);
	add_buf(&p, 0, 3, 8, TOK(0));           /* descriptors 0..2 */
	vq_drv_kick_prepare(p.drv);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b)), 1);
	CHECK_EQ(vq_dev_push(p.dev, &b.c, 24), 1);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	vq_dev_free(p.dev);
	vc = (struct vq_dev_config){ .features = p.features, .num = p.num,
				     .ring = p.ring, .mem = p.mem,
				     .avail_idx = 1, .used_idx = 1 };
	CHECK_EQ(vq_dev_new(&vc, &p.dev), 0);
	add_buf(&p, 0, 1, 8, TOK(1));           /* head 3 */
	add_buf(&p, 0, 1, 8, TOK(2));           /* head 4 */
	vq_drv_kick_prepare(p.drv);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b)), 1);
	CHECK_EQ(b.c.id, 3);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b)), 1);
	CHECK_EQ(b.c.id, 4);
	pair_fini(&p);
}

int main(void)
{
	RUN(split_2_7_9_descriptors_in_table_order);
	RUN(split_2_7_9_one_used_element_per_batch);
	RUN(split_2_7_9_partial_buffer_ends_batch);
	RUN(split_2_7_9_driver_completes_batch);
	RUN(split_2_7_9_fill_out_of_order_rejected);
	RUN(rules_in_order_unpop_rewinds_descriptors);
	RUN(split_2_7_9_in_order_indirect);
	RUN(rules_in_order_counters_apart);
	RUN(split_2_7_9_in_order_resume);
	return 0;
}
