// SPDX-License-Identifier: MIT
/*
 * VQ_F_IN_ORDER on the packed ring (virtio 1.2 §2.8.8 "In-order use of
 * descriptors"): one used descriptor per batch, at the batch's first slot,
 * carrying the id of its last buffer; the buffers before it are used
 * completely and the used position skips every slot of the batch.
 */
#include "packed_util.h"

/* A used descriptor completes its batch: earlier buffers get their whole
 * writable length, the last the descriptor's; skipped slots stay as the
 * driver wrote them (stale). */
static void packed_2_8_22_one_used_desc_per_batch(void)
{
	struct ring_pair p;
	struct popped pc[4];
	struct gbuf g[5];
	struct vq_seg s[2];
	int t[4];
	void *tok;
	uint32_t len;
	const uint32_t want[4] = { 100, 50, 10, 40 };

	pair_init(&p, PACKED | INORDER, 16, 1, 1);
	g[0] = gbuf_new(&p, 100);
	g[1] = gbuf_new(&p, 10);
	g[2] = gbuf_new(&p, 50);
	g[3] = gbuf_new(&p, 30);
	g[4] = gbuf_new(&p, 40);
	add_in(&p, g[0].gpa, 100, &t[0]);                       /* slot 0 */
	s[0] = (struct vq_seg){ g[1].gpa, 10 };
	s[1] = (struct vq_seg){ g[2].gpa, 50 };
	CHECK_EQ(vq_drv_add(p.drv, s, 1, 1, &t[1]), 0);         /* 1, 2 */
	add_in(&p, g[3].gpa, 30, &t[2]);                        /* 3 */
	add_in(&p, g[4].gpa, 40, &t[3]);                        /* 4 */
	for (int i = 0; i < 4; i++)
		CHECK_EQ(pop1(&p, &pc[i]), 1);
	/* Out of pop order is refused. */
	CHECK_EQ(vq_dev_fill(p.dev, &pc[1].c, 50), -EINVAL);
	CHECK_EQ(vq_dev_fill(p.dev, &pc[0].c, 100), 0);  /* complete */
	CHECK_EQ(vq_dev_fill(p.dev, &pc[0].c, 100), -EINVAL);
	CHECK_EQ(vq_dev_fill(p.dev, &pc[1].c, 50), 0);   /* complete */
	CHECK_EQ(vq_dev_fill(p.dev, &pc[2].c, 10), 0);   /* partial: ends it */
	CHECK_EQ(vq_dev_fill(p.dev, &pc[3].c, 40), 0);   /* last staged */
	for (int i = 0; i < 5; i++)
		CHECK_EQ(slot_flags(&p, i) & (F_AVAIL | F_USED), F_AVAIL);
	CHECK(!vq_drv_has_used(p.drv));
	CHECK_EQ(vq_dev_flush(p.dev), 4);
	/* Batch 1 = buffers 0..2 at slot 0 with buffer 2's id and length. */
	CHECK_EQ(slot_flags(&p, 0), F_AVAIL | F_USED | VQ_DESC_F_WRITE);
	CHECK_EQ(vq_le16(ring_desc(&p)[0].id), pc[2].c.id);
	CHECK_EQ(vq_le32(ring_desc(&p)[0].len), 10);
	/* Slots 1..3 untouched. */
	CHECK_EQ(slot_flags(&p, 1), F_AVAIL | VQ_DESC_F_NEXT);
	CHECK_EQ(slot_flags(&p, 2), F_AVAIL | VQ_DESC_F_WRITE);
	CHECK_EQ(slot_flags(&p, 3), F_AVAIL | VQ_DESC_F_WRITE);
	CHECK_EQ(vq_le32(ring_desc(&p)[3].len), 30);
	/* Batch 2 = buffer 3 at its own slot 4. */
	CHECK_EQ(slot_flags(&p, 4), F_AVAIL | F_USED | VQ_DESC_F_WRITE);
	CHECK_EQ(vq_le16(ring_desc(&p)[4].id), pc[3].c.id);
	CHECK_EQ(vq_le32(ring_desc(&p)[4].len), 40);
	CHECK_EQ(vq_dev_get_state(p.dev).used_idx, 0x8005);

	for (int i = 0; i < 4; i++) {
		CHECK(vq_drv_has_used(p.drv));
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
		CHECK(tok == &t[i]);
		CHECK_EQ(len, want[i]);
	}
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 0);
	CHECK(!vq_drv_has_used(p.drv));
	CHECK_EQ(vq_drv_free_slots(p.drv), 16);
	/* The driver is at slot 5 now, like the device. */
	add_in(&p, g[0].gpa, 8, &t[0]);
	CHECK_EQ(slot_flags(&p, 5), F_AVAIL | VQ_DESC_F_WRITE);
	CHECK_EQ(pop1(&p, &pc[0]), 1);
	CHECK_EQ(vq_dev_push(p.dev, &pc[0].c, 8), 1);
	CHECK_EQ(vq_le16(ring_desc(&p)[5].id), pc[0].c.id);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK_EQ(len, 8);
	pair_fini(&p);
}

/* "Skipped used slots are stale": the driver must not read them.  Slots
 * inside a batch forged to look used with a bogus id change nothing. */
static void packed_2_8_22_driver_never_reads_skipped_slots(void)
{
	struct ring_pair p;
	struct popped pc[3];
	uint64_t buf;
	int t[3];
	void *tok;
	uint32_t len;

	pair_init(&p, PACKED | INORDER, 8, 1, 1);
	buf = pair_alloc(&p, 64);
	for (int i = 0; i < 3; i++)
		add_in(&p, buf + 8 * i, 8, &t[i]);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(pop1(&p, &pc[i]), 1);
		CHECK_EQ(vq_dev_fill(p.dev, &pc[i].c, 8), 0);
	}
	CHECK_EQ(vq_dev_flush(p.dev), 3);
	CHECK_EQ(vq_le16(ring_desc(&p)[0].id), pc[2].c.id);
	for (int i = 1; i < 3; i++) {
		ring_desc(&p)[i].id = vq_le16(7777);
		ring_desc(&p)[i].len = vq_le32(9999);
		ring_desc(&p)[i].flags = vq_le16(F_AVAIL | F_USED);
	}
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
		CHECK(tok == &t[i]);
		CHECK_EQ(len, 8);
	}
	CHECK_EQ(vq_drv_error(p.drv), 0);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 0);
	pair_fini(&p);
}

/* A batch that crosses the end of the ring: one used descriptor at its
 * first slot in the old phase; the used position lands in the new one. */
static void packed_2_8_22_batch_across_wrap(void)
{
	struct ring_pair p;
	struct popped pc[4];
	struct vq_chain c[4];
	uint64_t buf;
	int t[4];
	void *tok;
	uint32_t len;

	pair_init(&p, PACKED | INORDER | EVIDX, 6, 1, 1);
	buf = pair_alloc(&p, 64);
	for (int i = 0; i < 4; i++) {
		add_in(&p, buf, 8, &t[0]);
		CHECK_EQ(pop1(&p, &pc[0]), 1);
		CHECK_EQ(vq_dev_push(p.dev, &pc[0].c, 8), 1);
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	}
	for (int i = 0; i < 4; i++)                     /* slots 4, 5, 0, 1 */
		add_in(&p, buf + 8 * i, 8, &t[i]);
	for (int i = 0; i < 4; i++) {
		pc[i].c.iov = pc[i].iov;
		pc[i].c.iov_max = MAX_IOV;
		c[i] = pc[i].c;
	}
	CHECK_EQ(vq_dev_pop_burst(p.dev, c, 4), 4);
	vq_dev_should_signal(p.dev);
	CHECK_EQ(vq_drv_enable_cb(p.drv), 0);
	CHECK_EQ(vq_le16(drv_event(&p)->off_wrap), 0x8004);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(vq_dev_fill(p.dev, &c[i], 8), 0);
	CHECK_EQ(vq_dev_flush(p.dev), 4);
	CHECK(vq_dev_should_signal(p.dev));
	CHECK_EQ(slot_flags(&p, 4), F_AVAIL | F_USED | VQ_DESC_F_WRITE);
	CHECK_EQ(vq_le16(ring_desc(&p)[4].id), c[3].id);
	/* Slots 5 (phase 1) and 0, 1 (phase 0) still say "available". */
	CHECK_EQ(slot_flags(&p, 5) & (F_AVAIL | F_USED), F_AVAIL);
	CHECK_EQ(slot_flags(&p, 0) & (F_AVAIL | F_USED), F_USED);
	CHECK_EQ(vq_dev_get_state(p.dev).used_idx, 0x0002);
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
		CHECK(tok == &t[i]);
		CHECK_EQ(len, 8);
	}
	/* The next buffer at slot 2, phase 0; its used flags are AVAIL =
	 * USED = 0. */
	add_in(&p, buf, 8, &t[0]);
	CHECK_EQ(pop1(&p, &pc[0]), 1);
	CHECK_EQ(vq_dev_push(p.dev, &pc[0].c, 0), 1);
	CHECK_EQ(slot_flags(&p, 2), 0);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == &t[0]);
	pair_fini(&p);
}

/* With EVENT_IDX, an event on a slot a batch skips is still crossed: the
 * device compares ranges of positions, not the slot it wrote. */
static void packed_2_8_22_event_inside_batch(void)
{
	struct ring_pair p;
	struct popped pc[4];
	uint64_t buf;
	int t[4];

	pair_init(&p, PACKED | INORDER | EVIDX, 8, 1, 1);
	buf = pair_alloc(&p, 64);
	for (int i = 0; i < 4; i++)
		add_in(&p, buf, 8, &t[i]);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(pop1(&p, &pc[i]), 1);
	CHECK_EQ(vq_dev_push(p.dev, &pc[0].c, 8), 1);
	CHECK(vq_dev_should_signal(p.dev));
	/* The driver has not reaped slot 0 yet: the re-check says so. */
	CHECK_EQ(vq_drv_enable_cb_delayed(p.drv), 1);   /* slot 0 pending */
	{
		void *tok;
		uint32_t len;

		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	}
	CHECK_EQ(vq_drv_enable_cb_delayed(p.drv), 0);
	CHECK_EQ(vq_le16(drv_event(&p)->off_wrap), 0x8003);      /* 1 + 3 * 3/4 */
	for (int i = 1; i < 4; i++)
		CHECK_EQ(vq_dev_fill(p.dev, &pc[i].c, 8), 0);
	CHECK_EQ(vq_dev_flush(p.dev), 3);
	/* One used descriptor, at slot 1; slot 3 was skipped but crossed. */
	CHECK_EQ(vq_le16(ring_desc(&p)[1].id), pc[3].c.id);
	CHECK_EQ(slot_flags(&p, 3) & (F_AVAIL | F_USED), F_AVAIL);
	CHECK(vq_dev_should_signal(p.dev));
	pair_fini(&p);
}

/* Indirect buffers in order: each takes one slot; a batch of three. */
static void packed_2_8_22_in_order_indirect(void)
{
	struct ring_pair p;
	struct popped pc[3];
	struct vq_seg s[3];
	uint64_t buf;
	int t[3];
	void *tok;
	uint32_t len;

	pair_init(&p, PACKED | INORDER | INDIRECT, 8, 1, 1);
	buf = pair_alloc(&p, 256);
	for (int i = 0; i < 3; i++)
		s[i] = (struct vq_seg){ buf + 16 * i, 16 };
	for (int i = 0; i < 3; i++)
		CHECK_EQ(vq_drv_add(p.drv, s, 1, 2, &t[i]), 0);
	CHECK_EQ(vq_drv_free_slots(p.drv), 5);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(pop1(&p, &pc[i]), 1);
		CHECK_EQ(pc[i].c.ndesc, 1);
		CHECK_EQ(pc[i].c.in_len, 32);
		CHECK_EQ(vq_dev_fill(p.dev, &pc[i].c, i == 2 ? 5 : 32), 0);
	}
	CHECK_EQ(vq_dev_flush(p.dev), 3);
	CHECK_EQ(vq_le16(ring_desc(&p)[0].id), pc[2].c.id);
	CHECK_EQ(vq_le32(ring_desc(&p)[0].len), 5);
	CHECK_EQ(vq_dev_get_state(p.dev).used_idx, 0x8003);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
		CHECK(tok == &t[i]);
		CHECK_EQ(len, i == 2 ? 5 : 32);
	}
	pair_fini(&p);
}

/* Unpop in order: only the most recently popped chains, and then the pop
 * order restarts from them. */
static void packed_2_8_22_in_order_unpop(void)
{
	struct ring_pair p;
	struct popped pc[3];
	uint64_t buf;
	int t[3];
	void *tok;
	uint32_t len;

	pair_init(&p, PACKED | INORDER, 8, 1, 1);
	buf = pair_alloc(&p, 64);
	for (int i = 0; i < 3; i++)
		add_in(&p, buf, 8, &t[i]);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(pop1(&p, &pc[i]), 1);
	CHECK_EQ(vq_dev_unpop(p.dev, &pc[1].c, 1), -EINVAL);   /* not last */
	CHECK_EQ(vq_dev_unpop(p.dev, &pc[2].c, 1), 0);
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 0x8002);
	CHECK_EQ(pop1(&p, &pc[2]), 1);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(vq_dev_fill(p.dev, &pc[i].c, 8), 0);
	CHECK_EQ(vq_dev_flush(p.dev), 3);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
		CHECK(tok == &t[i]);
	}
	pair_fini(&p);
}

/* Many laps with random batch shapes: every buffer comes back, in order,
 * with the right length. */
static void packed_2_8_22_in_order_random_laps(void)
{
	struct ring_pair p;
	struct popped pc[16];
	uint64_t buf, seed = vq_test_seed(7);
	int t[16];
	unsigned expect_len[16];

	pair_init(&p, PACKED | INORDER | EVIDX, 13, 1, 1);
	buf = pair_alloc(&p, 4096);
	for (int round = 0; round < 300; round++) {
		unsigned n = 1 + vq_test_rand(&seed) % 5, k = 0, i;
		void *tok;
		uint32_t len;

		for (i = 0; i < n; i++) {
			unsigned segs = 1 + vq_test_rand(&seed) % 2;
			struct vq_seg s[2] = { { buf, 16 }, { buf + 16, 16 } };

			if (vq_drv_add(p.drv, s, 0, segs, &t[i]) != 0)
				break;
		}
		n = i;
		for (i = 0; i < n; i++) {
			CHECK_EQ(pop1(&p, &pc[i]), 1);
			expect_len[i] = vq_test_rand(&seed) % 3 ?
					(unsigned)pc[i].c.in_len : 3;
			CHECK_EQ(vq_dev_fill(p.dev, &pc[i].c, expect_len[i]), 0);
		}
		CHECK_EQ(vq_dev_flush(p.dev), n);
		while (vq_drv_get(p.drv, &tok, &len) == 1) {
			CHECK(tok == &t[k]);
			CHECK_EQ(len, expect_len[k]);
			k++;
		}
		CHECK_EQ(k, n);
		CHECK_EQ(vq_drv_error(p.drv), 0);
		CHECK_EQ(vq_drv_free_slots(p.drv), 13);
	}
	pair_fini(&p);
}

int main(void)
{
	RUN(packed_2_8_22_one_used_desc_per_batch);
	RUN(packed_2_8_22_driver_never_reads_skipped_slots);
	RUN(packed_2_8_22_batch_across_wrap);
	RUN(packed_2_8_22_event_inside_batch);
	RUN(packed_2_8_22_in_order_indirect);
	RUN(packed_2_8_22_in_order_unpop);
	RUN(packed_2_8_22_in_order_random_laps);
	return 0;
}
