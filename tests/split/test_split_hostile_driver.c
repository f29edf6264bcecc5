// SPDX-License-Identifier: MIT
/*
 * Our device against a hostile driver: each case forges the split ring in
 * guest memory (no driver object), pops, and expects the exact -errno, a
 * broken queue with a message naming the problem, fail-fast later calls,
 * and a reset that clears the state (RULES "Device validation").
 */
#include "split_test.h"

#define IND  VQ_BIT(VQ_F_INDIRECT_DESC)
#define NUM  8

static uint64_t data;           /* a 64 KiB buffer area in guest memory */

static void setup(struct ring_pair *p, uint64_t features)
{
	pair_init(p, features, NUM, 0, 1);
	data = pair_alloc(p, 65536);
}

static int pop1(struct ring_pair *p)
{
	struct chainbuf b;

	return vq_dev_pop(p->dev, cb_init(&b));
}

/* After a reset the device reads the (now repaired) ring from the start. */
static void expect_works_after_repair(struct ring_pair *p)
{
	struct chainbuf b;

	memset(p->ring.desc, 0, 16 * NUM);
	forge_desc(p, 0, data, 16, VQ_DESC_F_WRITE, 0);
	forge_avail(p, 0, 0);
	CHECK_EQ(vq_dev_pop(p->dev, cb_init(&b)), 1);
	CHECK_EQ(b.c.id, 0);
	CHECK_EQ(b.c.in_len, 16);
	CHECK_EQ(vq_dev_error(p->dev), 0);
}

/* 2.7.5.2 / vhost "Loop detected": 0 -> 1 -> 0. */
static void hostile_descriptor_loop(void)
{
	struct ring_pair p;

	setup(&p, 0);
	forge_desc(&p, 0, data, 8, VQ_DESC_F_NEXT, 1);
	forge_desc(&p, 1, data, 8, VQ_DESC_F_NEXT, 0);
	forge_avail(&p, 0, 0);
	expect_dev_broken(&p, pop1(&p), -EINVAL, "loop");
	expect_works_after_repair(&p);
	pair_fini(&p);
}

/* A chain through every descriptor and back: longer than the queue. */
static void hostile_chain_longer_than_queue(void)
{
	struct ring_pair p;

	setup(&p, 0);
	for (uint16_t i = 0; i < NUM; i++)
		forge_desc(&p, i, data, 8, VQ_DESC_F_NEXT, (i + 1) % NUM);
	forge_avail(&p, 0, 3);
	expect_dev_broken(&p, pop1(&p), -EINVAL, "longer than the queue size");
	pair_fini(&p);
}

/* 2.7.5.3.1: "The driver MUST NOT set the VQ_DESC_F_INDIRECT flag
 * within an indirect descriptor". */
static void hostile_nested_indirect(void)
{
	struct ring_pair p;
	uint64_t tgpa;
	struct vq_desc *t;

	setup(&p, IND);
	tgpa = pair_alloc(&p, 64);
	t = pair_hva(&p, tgpa);
	forge_table_desc(&t[0], data, 8, VQ_DESC_F_NEXT, 1);
	forge_table_desc(&t[1], tgpa, 32, VQ_DESC_F_INDIRECT, 0);
	forge_desc(&p, 0, tgpa, 32, VQ_DESC_F_INDIRECT, 0);
	forge_avail(&p, 0, 0);
	expect_dev_broken(&p, pop1(&p), -EINVAL, "nested indirect");
	pair_fini(&p);
}

/* 2.7.5.3.1: "The driver MUST NOT set both VQ_DESC_F_INDIRECT and
 * VQ_DESC_F_NEXT in flags". */
static void hostile_indirect_with_next(void)
{
	struct ring_pair p;
	uint64_t tgpa;

	setup(&p, IND);
	tgpa = pair_alloc(&p, 16);
	forge_table_desc(pair_hva(&p, tgpa), data, 8, 0, 0);
	forge_desc(&p, 0, tgpa, 16, VQ_DESC_F_INDIRECT | VQ_DESC_F_NEXT, 1);
	forge_desc(&p, 1, data, 8, 0, 0);
	forge_avail(&p, 0, 0);
	expect_dev_broken(&p, pop1(&p), -EINVAL, "INDIRECT together with NEXT");
	pair_fini(&p);
}

/* Normal descriptors followed by one indirect table: accepted, as vhost and
 * vringh do. */
static void split_normal_then_indirect_accepted(void)
{
	struct ring_pair p;
	uint64_t tgpa;
	struct vq_desc *t;
	struct chainbuf b;

	setup(&p, IND);
	tgpa = pair_alloc(&p, 32);
	t = pair_hva(&p, tgpa);
	forge_table_desc(&t[0], data + 100, 20, VQ_DESC_F_WRITE | VQ_DESC_F_NEXT, 1);
	forge_table_desc(&t[1], data + 200, 30, VQ_DESC_F_WRITE, 0);
	forge_desc(&p, 0, data, 10, VQ_DESC_F_NEXT, 5);
	forge_desc(&p, 5, tgpa, 32, VQ_DESC_F_INDIRECT, 0);
	forge_avail(&p, 0, 0);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b)), 1);
	CHECK_EQ(b.c.ndesc, 2);
	CHECK_EQ(b.c.nout, 1);
	CHECK_EQ(b.c.nin, 2);
	CHECK_EQ(b.c.out_len, 10);
	CHECK_EQ(b.c.in_len, 50);
	CHECK(b.iov[2].iov_base == pair_hva(&p, data + 200));
	pair_fini(&p);
}

static void hostile_indirect_len_zero(void)
{
	struct ring_pair p;

	setup(&p, IND);
	forge_desc(&p, 0, data, 0, VQ_DESC_F_INDIRECT, 0);
	forge_avail(&p, 0, 0);
	expect_dev_broken(&p, pop1(&p), -EINVAL, "multiple of 16");
	pair_fini(&p);
}

static void hostile_indirect_len_not_multiple_of_16(void)
{
	struct ring_pair p;

	setup(&p, IND);
	forge_desc(&p, 0, data, 24, VQ_DESC_F_INDIRECT, 0);
	forge_avail(&p, 0, 0);
	expect_dev_broken(&p, pop1(&p), -EINVAL, "multiple of 16");
	pair_fini(&p);
}

/* vhost "Indirect buffer length too big": more than 65536 entries. */
static void hostile_indirect_table_too_big(void)
{
	struct ring_pair p;
	uint64_t tgpa;

	setup(&p, IND);
	tgpa = pair_alloc(&p, 65537ull * 16);
	forge_desc(&p, 0, tgpa, 65537u * 16, VQ_DESC_F_INDIRECT, 0);
	forge_avail(&p, 0, 0);
	expect_dev_broken(&p, pop1(&p), -EINVAL, "too big");
	pair_fini(&p);
}

/* The table must lie in guest memory (one region). */
static void hostile_indirect_table_outside_memory(void)
{
	struct ring_pair p;

	setup(&p, IND);
	forge_desc(&p, 0, GUEST_BASE + GUEST_SIZE - 16, 32, VQ_DESC_F_INDIRECT, 0);
	forge_avail(&p, 0, 0);
	expect_dev_broken(&p, pop1(&p), -EFAULT, "memory region");
	pair_fini(&p);
}

/* A loop inside an indirect table (2.7.5.3: NEXT is followed inside it). */
static void hostile_indirect_loop(void)
{
	struct ring_pair p;
	uint64_t tgpa;
	struct vq_desc *t;

	setup(&p, IND);
	tgpa = pair_alloc(&p, 48);
	t = pair_hva(&p, tgpa);
	forge_table_desc(&t[0], data, 8, VQ_DESC_F_NEXT, 1);
	forge_table_desc(&t[1], data, 8, VQ_DESC_F_NEXT, 2);
	forge_table_desc(&t[2], data, 8, VQ_DESC_F_NEXT, 0);
	forge_desc(&p, 0, tgpa, 48, VQ_DESC_F_INDIRECT, 0);
	forge_avail(&p, 0, 0);
	expect_dev_broken(&p, pop1(&p), -EINVAL, "loop");
	pair_fini(&p);
}

static void hostile_indirect_next_out_of_range(void)
{
	struct ring_pair p;
	uint64_t tgpa;
	struct vq_desc *t;

	setup(&p, IND);
	tgpa = pair_alloc(&p, 32);
	t = pair_hva(&p, tgpa);
	forge_table_desc(&t[0], data, 8, VQ_DESC_F_NEXT, 2);
	forge_table_desc(&t[1], data, 8, 0, 0);
	forge_desc(&p, 0, tgpa, 32, VQ_DESC_F_INDIRECT, 0);
	forge_avail(&p, 0, 0);
	expect_dev_broken(&p, pop1(&p), -EINVAL, "table size");
	pair_fini(&p);
}

/* 2.7.5.2: next must name a descriptor of the table. */
static void hostile_next_index_out_of_range(void)
{
	struct ring_pair p;

	setup(&p, 0);
	forge_desc(&p, 0, data, 8, VQ_DESC_F_NEXT, NUM);
	forge_avail(&p, 0, 0);
	expect_dev_broken(&p, pop1(&p), -EINVAL, "next index 8");
	pair_fini(&p);
}

/* vringh "Wrapping descriptor": addr + len past 2^64. */
static void hostile_address_wraps(void)
{
	struct ring_pair p;

	setup(&p, 0);
	forge_desc(&p, 0, UINT64_MAX - 10, 100, 0, 0);
	forge_avail(&p, 0, 0);
	expect_dev_broken(&p, pop1(&p), -EFAULT, "outside guest memory");
	pair_fini(&p);
}

static void hostile_address_outside_memory(void)
{
	struct ring_pair p;

	setup(&p, 0);
	forge_desc(&p, 0, 0x1000, 100, 0, 0);
	forge_avail(&p, 0, 0);
	expect_dev_broken(&p, pop1(&p), -EFAULT, "outside guest memory");
	/* Straddling the end of the region. */
	forge_desc(&p, 0, GUEST_BASE + GUEST_SIZE - 50, 100, 0, 0);
	expect_dev_broken(&p, pop1(&p), -EFAULT, "outside guest memory");
	pair_fini(&p);
}

/* 2.7.4.2: "The driver MUST place any device-writable descriptor elements
 * after any device-readable descriptor elements." */
static void hostile_readable_after_writable(void)
{
	struct ring_pair p;
	uint64_t tgpa;
	struct vq_desc *t;

	setup(&p, IND);
	forge_desc(&p, 0, data, 8, VQ_DESC_F_WRITE | VQ_DESC_F_NEXT, 1);
	forge_desc(&p, 1, data + 8, 8, 0, 0);
	forge_avail(&p, 0, 0);
	expect_dev_broken(&p, pop1(&p), -EINVAL, "readable after writable");

	/* The same inside an indirect table. */
	tgpa = pair_alloc(&p, 32);
	t = pair_hva(&p, tgpa);
	forge_table_desc(&t[0], data, 8, VQ_DESC_F_WRITE | VQ_DESC_F_NEXT, 1);
	forge_table_desc(&t[1], data + 8, 8, 0, 0);
	forge_desc(&p, 0, tgpa, 32, VQ_DESC_F_INDIRECT, 0);
	expect_dev_broken(&p, pop1(&p), -EINVAL, "indirect descriptor 1: readable after writable");
	pair_fini(&p);
}

/* RULES V1: the avail index cannot move by more than the queue size. */
static void hostile_avail_index_jump(void)
{
	struct ring_pair p;

	setup(&p, 0);
	forge_desc(&p, 0, data, 8, 0, 0);
	ring_avail(&p)->idx = vq_le16(NUM + 1);
	expect_dev_broken(&p, pop1(&p), -EINVAL, "avail index moved from 0 to 9");
	/* Caught by enable_notify's re-check too. */
	CHECK_EQ(vq_dev_enable_notify(p.dev), -EINVAL);
	CHECK_EQ(vq_dev_error(p.dev), -EINVAL);
	vq_dev_reset(p.dev);
	/* Exactly the queue size is fine. */
	ring_avail(&p)->idx = vq_le16(NUM);
	CHECK_EQ(pop1(&p), 1);
	pair_fini(&p);
}

static void hostile_head_out_of_range(void)
{
	struct ring_pair p;

	setup(&p, 0);
	forge_avail(&p, 0, NUM);
	expect_dev_broken(&p, pop1(&p), -EINVAL, "head 8 >= queue size");
	pair_fini(&p);
}

/* A head made available again while the device still holds it. */
static void hostile_head_already_in_flight(void)
{
	struct ring_pair p;
	struct chainbuf b;

	setup(&p, 0);
	forge_desc(&p, 2, data, 8, VQ_DESC_F_WRITE, 0);
	forge_avail(&p, 0, 2);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b)), 1);
	forge_avail(&p, 1, 2);
	expect_dev_broken(&p, pop1(&p), -EINVAL, "in flight");
	/* Once used, the head may come back. */
	forge_avail(&p, 0, 2);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b)), 1);
	CHECK_EQ(vq_dev_push(p.dev, &b.c, 0), 1);
	forge_avail(&p, 1, 2);
	CHECK_EQ(pop1(&p), 1);
	CHECK_EQ(vq_dev_error(p.dev), 0);
	pair_fini(&p);
}

/* A chain that reuses an in-flight chain's descriptors: more descriptors in
 * flight than the table holds. */
static void hostile_descriptors_shared_with_in_flight_chain(void)
{
	struct ring_pair p;
	struct chainbuf b;

	setup(&p, 0);
	for (uint16_t i = 0; i < NUM; i++)
		forge_desc(&p, i, data, 8, i + 1 < NUM ? VQ_DESC_F_NEXT : 0, i + 1);
	forge_avail(&p, 0, 0);                  /* all 8 descriptors */
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b)), 1);
	CHECK_EQ(b.c.ndesc, NUM);
	forge_avail(&p, 1, 7);                  /* the chain's last one */
	expect_dev_broken(&p, pop1(&p), -EINVAL, "in flight");
	pair_fini(&p);
}

/* 2.7.9: with IN_ORDER the heads come in table order. */
static void hostile_in_order_violation(void)
{
	struct ring_pair p;
	struct chainbuf b;

	setup(&p, VQ_BIT(VQ_F_IN_ORDER));
	forge_desc(&p, 0, data, 8, VQ_DESC_F_NEXT, 1);
	forge_desc(&p, 1, data, 8, 0, 0);
	forge_desc(&p, 3, data, 8, 0, 0);
	forge_avail(&p, 0, 0);
	CHECK_EQ(vq_dev_pop(p.dev, cb_init(&b)), 1);
	forge_avail(&p, 1, 3);                  /* expected head 2 */
	expect_dev_broken(&p, pop1(&p), -EINVAL, "IN_ORDER violated: head 3");

	/* A chain that does not continue at x + 1. */
	forge_desc(&p, 0, data, 8, VQ_DESC_F_NEXT, 2);
	forge_desc(&p, 2, data, 8, 0, 0);
	forge_avail(&p, 0, 0);
	expect_dev_broken(&p, pop1(&p), -EINVAL, "IN_ORDER violated: descriptor 0 chains to 2");
	pair_fini(&p);
}

/* 2.7.5.3.1: INDIRECT only when VQ_F_INDIRECT_DESC was negotiated. */
static void hostile_indirect_without_feature(void)
{
	struct ring_pair p;
	uint64_t tgpa;

	setup(&p, 0);
	tgpa = pair_alloc(&p, 16);
	forge_table_desc(pair_hva(&p, tgpa), data, 8, 0, 0);
	forge_desc(&p, 0, tgpa, 16, VQ_DESC_F_INDIRECT, 0);
	forge_avail(&p, 0, 0);
	expect_dev_broken(&p, pop1(&p), -EINVAL, "without VIRTIO_F_INDIRECT_DESC");
	pair_fini(&p);
}

/* A chain needing more iovecs than the caller gave: -ENOBUFS. */
static void hostile_chain_exceeds_iov_max(void)
{
	struct ring_pair p;
	struct chainbuf b;

	setup(&p, 0);
	for (uint16_t i = 0; i < 4; i++)
		forge_desc(&p, i, data, 8, i < 3 ? VQ_DESC_F_NEXT : 0, i + 1);
	forge_avail(&p, 0, 0);
	cb_init(&b);
	b.c.iov_max = 3;
	expect_dev_broken(&p, vq_dev_pop(p.dev, &b.c), -ENOBUFS, "more than 3 iovecs");
	pair_fini(&p);
}

/* A burst stops at the bad chain: chains before it are returned, valid;
 * the next call reports the error. */
static void hostile_burst_keeps_earlier_chains(void)
{
	struct ring_pair p;
	struct chainbuf b[4];
	struct vq_chain c[4];

	setup(&p, 0);
	forge_desc(&p, 0, data, 10, 0, 0);
	forge_desc(&p, 1, data + 64, 20, VQ_DESC_F_WRITE, 0);
	forge_desc(&p, 2, data, 8, VQ_DESC_F_NEXT, 2);   /* loop */
	ring_avail(&p)->ring[0] = vq_le16(0);
	ring_avail(&p)->ring[1] = vq_le16(1);
	ring_avail(&p)->ring[2] = vq_le16(2);
	ring_avail(&p)->idx = vq_le16(3);
	for (int i = 0; i < 4; i++)
		c[i] = *cb_init(&b[i]);
	CHECK_EQ(vq_dev_pop_burst(p.dev, c, 4), 2);
	CHECK_EQ(vq_dev_error(p.dev), -EINVAL);
	CHECK_EQ(c[0].id, 0);
	CHECK_EQ(c[0].out_len, 10);
	CHECK(c[0].iov[0].iov_base == pair_hva(&p, data));
	CHECK_EQ(c[1].id, 1);
	CHECK_EQ(c[1].in_len, 20);
	CHECK(c[1].iov[0].iov_base == pair_hva(&p, data + 64));
	CHECK_EQ(vq_dev_pop_burst(p.dev, c, 4), -EINVAL);
	expect_dev_broken(&p, -EINVAL, -EINVAL, "loop");
	pair_fini(&p);
}

/* 2.7.13.1 in a burst: a run of single-descriptor chains is popped with
 * the queue's state in registers (sd_pop_singles), and a head repeated
 * inside the run, or one out of range, still stops it and breaks the
 * queue; the chains before it are returned. */
static void hostile_burst_head_repeated_or_out_of_range(void)
{
	const uint16_t bad[2] = { 1, NUM };

	for (int k = 0; k < 2; k++) {
		struct ring_pair p;
		struct chainbuf b[4];
		struct vq_chain c[4];

		setup(&p, 0);
		for (uint16_t i = 0; i < 3; i++)
			forge_desc(&p, i, data + 64 * i, 8, 0, 0);
		ring_avail(&p)->ring[0] = vq_le16(0);
		ring_avail(&p)->ring[1] = vq_le16(1);
		ring_avail(&p)->ring[2] = vq_le16(2);
		ring_avail(&p)->ring[3] = vq_le16(bad[k]);
		ring_avail(&p)->idx = vq_le16(4);
		for (int i = 0; i < 4; i++)
			c[i] = *cb_init(&b[i]);
		CHECK_EQ(vq_dev_pop_burst(p.dev, c, 4), 3);
		for (int i = 0; i < 3; i++) {
			CHECK_EQ(c[i].id, i);
			CHECK(c[i].iov[0].iov_base == pair_hva(&p, data + 64 * (unsigned)i));
		}
		expect_dev_broken(&p, vq_dev_pop_burst(p.dev, c, 4), -EINVAL,
				  k ? "head 8 >= queue size" : "in flight");
		pair_fini(&p);
	}
}

int main(void)
{
	RUN(hostile_descriptor_loop);
	RUN(hostile_chain_longer_than_queue);
	RUN(hostile_nested_indirect);
	RUN(hostile_indirect_with_next);
	RUN(split_normal_then_indirect_accepted);
	RUN(hostile_indirect_len_zero);
	RUN(hostile_indirect_len_not_multiple_of_16);
	RUN(hostile_indirect_table_too_big);
	RUN(hostile_indirect_table_outside_memory);
	RUN(hostile_indirect_loop);
	RUN(hostile_indirect_next_out_of_range);
	RUN(hostile_next_index_out_of_range);
	RUN(hostile_address_wraps);
	RUN(hostile_address_outside_memory);
	RUN(hostile_readable_after_writable);
	RUN(hostile_avail_index_jump);
	RUN(hostile_head_out_of_range);
	RUN(hostile_head_already_in_flight);
	RUN(hostile_descriptors_shared_with_in_flight_chain);
	RUN(hostile_in_order_violation);
	RUN(hostile_indirect_without_feature);
	RUN(hostile_chain_exceeds_iov_max);
	RUN(hostile_burst_keeps_earlier_chains);
	RUN(hostile_burst_head_repeated_or_out_of_range);
	return 0;
}
