// SPDX-License-Identifier: MIT
/*
 * Our driver against a hostile device: each case forges the used ring in
 * guest memory (no device object) and expects the exact -errno, a broken
 * queue with a message naming the problem, fail-fast later calls and a
 * reset that clears the state (virtio 1.2 §2.7.8, §2.7.9; RULES D3).
 */
#include "split_test.h"

#define TOK(n) ((void *)(uintptr_t)(0x1000 + (n)))
#define NUM 8

static void setup(struct ring_pair *p, uint64_t features)
{
	pair_init(p, features, NUM, 1, 0);
}

/* Add a buffer of nout readable and nin writable 16-byte segments. */
static void add_buf(struct ring_pair *p, unsigned nout, unsigned nin, void *tok)
{
	struct vq_seg seg[8];

	for (unsigned i = 0; i < nout + nin; i++)
		seg[i] = (struct vq_seg){ GUEST_BASE + (32ull << 20) + i * 16, 16 };
	CHECK_EQ(vq_drv_add(p->drv, seg, nout, nin, tok), 0);
}

static int get1(struct ring_pair *p)
{
	void *tok;
	uint32_t len;

	return vq_drv_get(p->drv, &tok, &len);
}

/* Linux BAD_RING "id %u is not a head!": an id that is free... */
static void hostile_used_id_never_made_available(void)
{
	struct ring_pair p;

	setup(&p, 0);
	add_buf(&p, 0, 1, TOK(0));              /* head 0 */
	vq_drv_kick_prepare(p.drv);
	forge_used(&p, 0, 1, 0);
	ring_used(&p)->idx = vq_le16(1);
	expect_drv_broken(&p, get1(&p), -EINVAL, "used id 1 was never made available");

	/* ...a descriptor inside a chain, not its head... */
	add_buf(&p, 1, 2, TOK(0));              /* head 0, then 1, 2 */
	vq_drv_kick_prepare(p.drv);
	forge_used(&p, 0, 2, 0);
	ring_used(&p)->idx = vq_le16(1);
	expect_drv_broken(&p, get1(&p), -EINVAL, "used id 2 was never made available");

	/* ...a head added but not yet published to the device... */
	add_buf(&p, 0, 1, TOK(0));
	vq_drv_kick_prepare(p.drv);
	add_buf(&p, 0, 1, TOK(1));              /* head 1, not published */
	forge_used(&p, 0, 1, 0);
	ring_used(&p)->idx = vq_le16(1);
	expect_drv_broken(&p, get1(&p), -EINVAL, "used id 1 was never made available");

	/* ...or one already returned. */
	add_buf(&p, 0, 1, TOK(0));
	add_buf(&p, 0, 1, TOK(1));
	vq_drv_kick_prepare(p.drv);
	forge_used(&p, 0, 0, 4);
	forge_used(&p, 1, 0, 4);
	ring_used(&p)->idx = vq_le16(2);
	CHECK_EQ(get1(&p), 1);
	expect_drv_broken(&p, get1(&p), -EINVAL, "used id 0 was never made available");
	pair_fini(&p);
}

static void hostile_used_id_out_of_range(void)
{
	struct ring_pair p;

	setup(&p, 0);
	add_buf(&p, 0, 1, TOK(0));
	vq_drv_kick_prepare(p.drv);
	forge_used(&p, 0, NUM, 0);
	ring_used(&p)->idx = vq_le16(1);
	expect_drv_broken(&p, get1(&p), -EINVAL, "used id 8 >= queue size 8");
	add_buf(&p, 0, 1, TOK(0));
	vq_drv_kick_prepare(p.drv);
	forge_used(&p, 0, 0x10000, 0);          /* would alias head 0 as u16 */
	ring_used(&p)->idx = vq_le16(1);
	expect_drv_broken(&p, get1(&p), -EINVAL, "used id 65536");
	pair_fini(&p);
}

/* 2.7.8.1: "The device MUST NOT write more than len bytes"; a used length
 * beyond the writable bytes is a lie. */
static void hostile_used_len_too_large(void)
{
	struct ring_pair p;
	void *tok;
	uint32_t len;

	setup(&p, 0);
	add_buf(&p, 2, 2, TOK(0));              /* 32 writable bytes */
	vq_drv_kick_prepare(p.drv);
	forge_used(&p, 0, 0, 32);
	ring_used(&p)->idx = vq_le16(1);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);     /* exactly full is fine */
	CHECK_EQ(len, 32);
	add_buf(&p, 2, 2, TOK(0));
	vq_drv_kick_prepare(p.drv);
	forge_used(&p, 1, 0, 33);
	ring_used(&p)->idx = vq_le16(2);
	expect_drv_broken(&p, get1(&p), -EINVAL, "used length 33 larger than the buffer's 32");
	pair_fini(&p);
}

/* RULES D3: the used index cannot run ahead of what is outstanding. */
static void hostile_used_index_jump(void)
{
	struct ring_pair p;

	setup(&p, 0);
	add_buf(&p, 0, 1, TOK(0));
	add_buf(&p, 0, 1, TOK(1));
	vq_drv_kick_prepare(p.drv);
	forge_used(&p, 0, 0, 0);
	forge_used(&p, 1, 1, 0);
	forge_used(&p, 2, 1, 0);
	ring_used(&p)->idx = vq_le16(3);
	expect_drv_broken(&p, get1(&p), -EINVAL, "used index moved from 0 to 3 with 2 buffers outstanding");
	/* Added but unpublished buffers do not count as outstanding. */
	add_buf(&p, 0, 1, TOK(0));
	add_buf(&p, 0, 1, TOK(1));
	ring_used(&p)->idx = vq_le16(1);
	expect_drv_broken(&p, get1(&p), -EINVAL, "with 0 buffers outstanding");
	pair_fini(&p);
}

/* 2.7.9: an in-order used element must name an outstanding head... */
static void hostile_in_order_batch_id_not_outstanding(void)
{
	struct ring_pair p;

	setup(&p, VQ_BIT(VQ_F_IN_ORDER));
	add_buf(&p, 1, 1, TOK(0));              /* head 0 (0, 1) */
	add_buf(&p, 0, 1, TOK(1));              /* head 2 */
	vq_drv_kick_prepare(p.drv);
	forge_used(&p, 0, 1, 0);                /* not a head */
	ring_used(&p)->idx = vq_le16(2);
	expect_drv_broken(&p, get1(&p), -EINVAL, "used id 1 was never made available");

	add_buf(&p, 0, 1, TOK(0));              /* head 0 */
	vq_drv_kick_prepare(p.drv);
	forge_used(&p, 0, 5, 0);                /* never used yet */
	ring_used(&p)->idx = vq_le16(1);
	expect_drv_broken(&p, get1(&p), -EINVAL, "used id 5 was never made available");
	pair_fini(&p);
}

/* ...and the batch it completes cannot exceed what the index says is used. */
static void hostile_in_order_batch_larger_than_used(void)
{
	struct ring_pair p;

	setup(&p, VQ_BIT(VQ_F_IN_ORDER));
	add_buf(&p, 0, 1, TOK(0));              /* head 0 */
	add_buf(&p, 0, 1, TOK(1));              /* head 1 */
	add_buf(&p, 0, 1, TOK(2));              /* head 2 */
	vq_drv_kick_prepare(p.drv);
	forge_used(&p, 0, 2, 0);                /* completes 3 ... */
	ring_used(&p)->idx = vq_le16(2);                 /* ... but only 2 used */
	expect_drv_broken(&p, get1(&p), -EINVAL, "completes 3 buffers, only 2 used");
	pair_fini(&p);
}

/* The in-order length check applies to the batch's last buffer. */
static void hostile_in_order_len_too_large(void)
{
	struct ring_pair p;

	setup(&p, VQ_BIT(VQ_F_IN_ORDER));
	add_buf(&p, 0, 1, TOK(0));
	add_buf(&p, 0, 2, TOK(1));              /* head 1, 32 writable */
	vq_drv_kick_prepare(p.drv);
	forge_used(&p, 0, 1, 33);
	ring_used(&p)->idx = vq_le16(2);
	expect_drv_broken(&p, get1(&p), -EINVAL, "used length 33 larger than the buffer's 32");
	pair_fini(&p);
}

/* detach_unused still hands back every token of a broken queue. */
static void hostile_detach_after_break(void)
{
	struct ring_pair p;
	unsigned n = 0;

	setup(&p, 0);
	add_buf(&p, 0, 1, TOK(0));
	add_buf(&p, 0, 1, TOK(1));
	vq_drv_kick_prepare(p.drv);
	forge_used(&p, 0, 7, 0);
	ring_used(&p)->idx = vq_le16(1);
	CHECK_EQ(get1(&p), -EINVAL);
	while (vq_drv_detach_unused(p.drv))
		n++;
	CHECK_EQ(n, 2);
	CHECK_EQ(vq_drv_outstanding(p.drv), 0);
	pair_fini(&p);
}

int main(void)
{
	RUN(hostile_used_id_never_made_available);
	RUN(hostile_used_id_out_of_range);
	RUN(hostile_used_len_too_large);
	RUN(hostile_used_index_jump);
	RUN(hostile_in_order_batch_id_not_outstanding);
	RUN(hostile_in_order_batch_larger_than_used);
	RUN(hostile_in_order_len_too_large);
	RUN(hostile_detach_after_break);
	return 0;
}
