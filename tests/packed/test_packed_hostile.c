// SPDX-License-Identifier: MIT
/*
 * A hostile peer on the packed ring.  The test forges descriptors in ring
 * memory; the other side must break the queue with the exact errno and a
 * message, fail fast afterwards, never touch memory outside the guest map,
 * and come back after a reset.
 */
#include "packed_util.h"

/* ---- hostile driver: forged available descriptors ---- */

static void forge(struct ring_pair *p, unsigned slot, uint64_t addr,
		  uint32_t len, uint16_t id, uint16_t flags)
{
	struct vq_packed_desc *d = &ring_desc(p)[slot];

	d->addr = vq_le64(addr);
	d->len = vq_le32(len);
	d->id = vq_le16(id);
	__atomic_store_n(&d->flags, vq_le16(flags), __ATOMIC_RELEASE);
}

/* Forge slot 0 last so the chain appears at once, as a driver would. */
#define AV  F_AVAIL                     /* available, wrap 1 */
#define NX  VQ_DESC_F_NEXT
#define WR  VQ_DESC_F_WRITE
#define IND VQ_DESC_F_INDIRECT

/* The queue is broken with err: pop fails fast, nothing else moves; after a
 * reset and a repaired slot 0 it works again. */
static void expect_broken(struct ring_pair *p, int err)
{
	struct popped pc;
	struct vq_chain c[4];
	uint64_t buf;

	CHECK_EQ(pop1(p, &pc), err);
	CHECK_DEV_BROKEN(p, err);
	CHECK_EQ(pop1(p, &pc), err);            /* fail fast */
	CHECK_EQ(vq_dev_pop_burst(p->dev, c, 4), err);
	CHECK_EQ(vq_dev_enable_notify(p->dev), err);
	CHECK(!vq_dev_has_avail(p->dev));
	CHECK_EQ(vq_dev_get_state(p->dev).avail_idx, 0x8000);
	vq_dev_reset(p->dev);
	CHECK_EQ(vq_dev_error(p->dev), 0);
	CHECK_EQ(vq_dev_error_msg(p->dev)[0], '\0');
	buf = pair_alloc(p, 16);
	forge(p, 0, buf, 16, 0, AV);
	CHECK_EQ(pop1(p, &pc), 1);
	CHECK_EQ(pc.c.id, 0);
	CHECK_EQ(pc.c.ndesc, 1);
}

static void hostile_buffer_id_out_of_range(void)
{
	struct ring_pair p;

	pair_init(&p, PACKED, 8, 0, 1);
	forge(&p, 0, pair_alloc(&p, 16), 16, 8, AV);
	expect_broken(&p, -EINVAL);
	pair_fini(&p);
}

static void hostile_buffer_id_already_in_flight(void)
{
	struct ring_pair p;
	struct popped pc;
	uint64_t buf;

	pair_init(&p, PACKED, 8, 0, 1);
	buf = pair_alloc(&p, 64);
	forge(&p, 1, buf, 16, 3, AV);
	forge(&p, 0, buf, 16, 3, AV);
	CHECK_EQ(pop1(&p, &pc), 1);
	CHECK_EQ(pc.c.id, 3);
	CHECK_EQ(pop1(&p, &pc), -EINVAL);
	CHECK_DEV_BROKEN(&p, -EINVAL);
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 0x8001);
	/* After it is used, the id may come again. */
	vq_dev_reset(p.dev);
	CHECK_EQ(pop1(&p, &pc), 1);
	CHECK_EQ(vq_dev_push(p.dev, &pc.c, 0), 1);
	forge(&p, 1, buf, 16, 3, AV);
	CHECK_EQ(pop1(&p, &pc), 1);
	CHECK_EQ(pc.c.id, 3);
	pair_fini(&p);
}

/* 2.8.6 / vhost "Loop detected": every slot chained, NEXT on the last. */
static void hostile_chain_longer_than_ring(void)
{
	struct ring_pair p;
	uint64_t buf;

	pair_init(&p, PACKED, 8, 0, 1);
	buf = pair_alloc(&p, 16);
	for (int i = 7; i >= 0; i--)
		forge(&p, (unsigned)i, buf, 1, 0, AV | NX);
	CHECK_EQ(pop1(&p, &(struct popped){ 0 }), -EINVAL);
	CHECK(strstr(vq_dev_error_msg(p.dev), "longer than the queue size"));
	vq_dev_reset(p.dev);
	expect_broken(&p, -EINVAL);
	pair_fini(&p);
}

/* A chained slot marked available for the other lap: AVAIL == USED, or
 * the previous lap's pattern. */
static void hostile_wrap_counter_confusion_chained_slot(void)
{
	const uint16_t bad[3] = { F_USED, F_AVAIL | F_USED, 0 };

	for (int i = 0; i < 3; i++) {
		struct ring_pair p;
		uint64_t buf;

		pair_init(&p, PACKED, 8, 0, 1);
		buf = pair_alloc(&p, 16);
		forge(&p, 1, buf, 8, 0, bad[i]);
		forge(&p, 0, buf, 8, 0, AV | NX);
		CHECK_EQ(pop1(&p, &(struct popped){ 0 }), -EINVAL);
		CHECK(strstr(vq_dev_error_msg(p.dev), "wrap-counter confusion"));
		vq_dev_reset(p.dev);
		expect_broken(&p, -EINVAL);
		pair_fini(&p);
	}
}

/* At the wrap: the head in the last slot (phase 1) chains to slot 0, which
 * is marked for phase 1 too instead of phase 0. */
static void hostile_wrap_counter_confusion_across_end(void)
{
	struct ring_pair p;
	struct popped pc;
	struct vq_dev_config vc;
	uint64_t buf;

	pair_init(&p, PACKED, 8, 0, 0);
	buf = pair_alloc(&p, 16);
	vc = (struct vq_dev_config){ .features = p.features, .num = 8,
				     .ring = p.ring, .mem = p.mem,
				     .avail_idx = 0x8007, .used_idx = 0x8007 };
	CHECK_EQ(vq_dev_new(&vc, &p.dev), 0);
	forge(&p, 0, buf, 8, 1, AV);            /* phase 1: wrong */
	forge(&p, 7, buf, 8, 0, AV | NX);
	CHECK_EQ(pop1(&p, &pc), -EINVAL);
	CHECK_DEV_BROKEN(&p, -EINVAL);
	/* The right phase for slot 0 after the wrap is USED set, AVAIL clear. */
	vq_dev_reset(p.dev);
	forge(&p, 0, buf, 8, 1, F_USED);
	CHECK_EQ(pop1(&p, &pc), 1);
	CHECK_EQ(pc.c.ndesc, 2);
	CHECK_EQ(pc.c.id, 1);
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 0x0001);
	pair_fini(&p);
}

/* 2.8.1: a head with AVAIL == USED is not available (it is a used
 * descriptor of this lap or the last): no buffer, no error. */
static void hostile_head_avail_equals_used_not_available(void)
{
	struct ring_pair p;
	struct popped pc;
	uint64_t buf;

	pair_init(&p, PACKED, 8, 0, 1);
	buf = pair_alloc(&p, 16);
	forge(&p, 0, buf, 8, 0, F_AVAIL | F_USED);
	CHECK(!vq_dev_has_avail(p.dev));
	CHECK_EQ(pop1(&p, &pc), 0);
	forge(&p, 0, buf, 8, 0, 0);
	CHECK_EQ(pop1(&p, &pc), 0);
	forge(&p, 0, buf, 8, 0, F_USED);        /* phase 0 pattern */
	CHECK_EQ(pop1(&p, &pc), 0);
	CHECK_EQ(vq_dev_enable_notify(p.dev), 0);
	CHECK_EQ(vq_dev_error(p.dev), 0);
	pair_fini(&p);
}

static void hostile_indirect_with_next(void)
{
	struct ring_pair p;
	uint64_t t;

	pair_init(&p, PACKED | INDIRECT, 8, 0, 1);
	t = pair_alloc(&p, 64);
	forge(&p, 1, pair_alloc(&p, 8), 8, 0, AV);
	forge(&p, 0, t, 32, 0, AV | IND | NX);
	expect_broken(&p, -EINVAL);
	pair_fini(&p);
}

static void hostile_nested_indirect(void)
{
	struct ring_pair p;
	struct vq_packed_desc *tb;
	uint64_t t, buf;

	pair_init(&p, PACKED | INDIRECT, 8, 0, 1);
	t = pair_alloc(&p, 64);
	buf = pair_alloc(&p, 64);
	tb = pair_hva(&p, t);
	tb[0] = (struct vq_packed_desc){ .addr = vq_le64(buf), .len = vq_le32(8) };
	tb[1] = (struct vq_packed_desc){ .addr = vq_le64(t), .len = vq_le32(32),
					    .flags = vq_le16(VQ_DESC_F_INDIRECT) };
	forge(&p, 0, t, 32, 0, AV | IND);
	expect_broken(&p, -EINVAL);
	pair_fini(&p);
}

static void hostile_indirect_bad_length(void)
{
	const uint32_t lens[3] = { 0, 20, 15 };

	for (int i = 0; i < 3; i++) {
		struct ring_pair p;
		uint64_t t;

		pair_init(&p, PACKED | INDIRECT, 8, 0, 1);
		t = pair_alloc(&p, 64);
		forge(&p, 0, t, lens[i], 0, AV | IND);
		expect_broken(&p, -EINVAL);
		pair_fini(&p);
	}
}

static void hostile_indirect_without_feature(void)
{
	struct ring_pair p;
	struct vq_packed_desc *tb;
	uint64_t t;

	pair_init(&p, PACKED, 8, 0, 1);
	t = pair_alloc(&p, 64);
	tb = pair_hva(&p, t);
	tb[0] = (struct vq_packed_desc){ .addr = vq_le64(t), .len = vq_le32(8) };
	forge(&p, 0, t, 16, 0, AV | IND);
	expect_broken(&p, -EINVAL);
	pair_fini(&p);
}

/* The table itself outside guest memory, and an entry that is. */
static void hostile_indirect_outside_memory(void)
{
	struct ring_pair p;
	struct vq_packed_desc *tb;
	uint64_t t;

	pair_init(&p, PACKED | INDIRECT, 8, 0, 1);
	forge(&p, 0, 0x1000, 32, 0, AV | IND);
	expect_broken(&p, -EFAULT);
	pair_fini(&p);

	pair_init(&p, PACKED | INDIRECT, 8, 0, 1);
	t = pair_alloc(&p, 64);
	tb = pair_hva(&p, t);
	tb[0] = (struct vq_packed_desc){ .addr = vq_le64(GUEST_BASE + GUEST_SIZE - 4),
					    .len = vq_le32(8) };
	forge(&p, 0, t, 16, 0, AV | IND);
	expect_broken(&p, -EFAULT);
	pair_fini(&p);
}

static void hostile_address_outside_every_region(void)
{
	struct ring_pair p;

	pair_init(&p, PACKED, 8, 0, 1);
	forge(&p, 0, GUEST_BASE + GUEST_SIZE, 1, 0, AV);
	expect_broken(&p, -EFAULT);
	pair_fini(&p);

	pair_init(&p, PACKED, 8, 0, 1);
	forge(&p, 0, GUEST_BASE - 16, 32, 0, AV);
	expect_broken(&p, -EFAULT);
	pair_fini(&p);
}

static void hostile_address_length_overflow(void)
{
	struct ring_pair p;

	pair_init(&p, PACKED, 8, 0, 1);
	forge(&p, 0, UINT64_MAX - 10, 100, 0, AV);
	expect_broken(&p, -EFAULT);
	pair_fini(&p);
}

/* 2.8.6: no device-readable descriptor after a device-writable one, in
 * the ring and in an indirect table. */
static void hostile_readable_after_writable(void)
{
	struct ring_pair p;
	struct vq_packed_desc *tb;
	uint64_t buf, t;

	pair_init(&p, PACKED, 8, 0, 1);
	buf = pair_alloc(&p, 64);
	forge(&p, 1, buf, 8, 0, AV);
	forge(&p, 0, buf, 8, 0, AV | NX | WR);
	expect_broken(&p, -EINVAL);
	pair_fini(&p);

	pair_init(&p, PACKED | INDIRECT, 8, 0, 1);
	buf = pair_alloc(&p, 64);
	t = pair_alloc(&p, 64);
	tb = pair_hva(&p, t);
	tb[0] = (struct vq_packed_desc){ .addr = vq_le64(buf), .len = vq_le32(8),
					    .flags = vq_le16(VQ_DESC_F_WRITE) };
	tb[1] = (struct vq_packed_desc){ .addr = vq_le64(buf), .len = vq_le32(8) };
	forge(&p, 0, t, 32, 0, AV | IND);
	expect_broken(&p, -EINVAL);
	pair_fini(&p);
}

/* More iovecs than the caller's chain holds: -ENOBUFS. */
static void hostile_chain_needs_more_iovecs(void)
{
	struct ring_pair p;
	struct vq_chain c;
	struct iovec iov[2];
	uint64_t buf;

	pair_init(&p, PACKED, 8, 0, 1);
	buf = pair_alloc(&p, 64);
	forge(&p, 2, buf, 8, 0, AV);
	forge(&p, 1, buf, 8, 0, AV | NX);
	forge(&p, 0, buf, 8, 0, AV | NX);
	c.iov = iov;
	c.iov_max = 2;
	CHECK_EQ(vq_dev_pop(p.dev, &c), -ENOBUFS);
	CHECK_DEV_BROKEN(&p, -ENOBUFS);
	pair_fini(&p);
}

/*
 * pop_burst takes a 64-byte line of four single descriptors at once
 * (packed_dev.c pop_batch); each descriptor still gets every check pop
 * makes.  A line at slots 0-3 (slot 0 forged last): slot i a readable
 * 16-byte buffer at buf + 16 i with id i, but slot k as given, and chains
 * c[0..3] of MAX_IOV iovecs but c[k] of iov_max.
 */
static void forge_line(struct ring_pair *p, struct popped *pc,
		       struct vq_chain *c, uint64_t buf, unsigned k,
		       const struct vq_packed_desc *dk, uint32_t iov_max)
{
	for (int i = 3; i >= 0; i--) {
		pc[i].c.iov = pc[i].iov;
		pc[i].c.iov_max = (unsigned)i == k ? iov_max : MAX_IOV;
		c[i] = pc[i].c;
		if ((unsigned)i == k)
			forge(p, k, dk->addr, dk->len, dk->id, dk->flags);
		else
			forge(p, (unsigned)i, buf + 16 * (unsigned)i, 16,
			      (uint16_t)i, AV);
	}
}

/* Slot k forged bad: the ones before it are popped and valid, the queue
 * breaks with err, the position stays at k. */
static void hostile_burst_line(unsigned k, uint64_t addr, uint32_t len,
			       uint16_t id, uint32_t iov_max, int err)
{
	const struct vq_packed_desc dk = { addr, len, id, AV };
	struct ring_pair p;
	struct popped pc[4];
	struct vq_chain c[4];
	uint64_t buf;

	pair_init(&p, PACKED, 8, 0, 1);
	buf = pair_alloc(&p, 64);
	forge_line(&p, pc, c, buf, k, &dk, iov_max);
	CHECK_EQ(vq_dev_pop_burst(p.dev, c, 4), k ? (int)k : err);
	for (unsigned i = 0; i < k; i++) {
		CHECK_EQ(c[i].id, i);
		CHECK_EQ(c[i].nout, 1);
		CHECK_EQ(c[i].out_len, 16);
		CHECK(c[i].iov[0].iov_base == pair_hva(&p, buf + 16 * i));
	}
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 0x8000 | k);
	CHECK_DEV_BROKEN(&p, err);
	CHECK_EQ(vq_dev_pop_burst(p.dev, c, 4), err);
	pair_fini(&p);
}

/* 2.8.6 an id repeated inside the line; 2.8.13 an address outside memory,
 * or crossing its end; 2.8.18 a chain with no room for its iovec. */
static void hostile_burst_line_each_descriptor_checked(void)
{
	hostile_burst_line(2, GUEST_BASE + 0x10000, 16, 0, MAX_IOV, -EINVAL);
	hostile_burst_line(3, GUEST_BASE + 0x10000, 16, 3 + 8, MAX_IOV, -EINVAL);
	hostile_burst_line(1, GUEST_BASE + GUEST_SIZE, 16, 1, MAX_IOV, -EFAULT);
	hostile_burst_line(0, GUEST_BASE - 8, 16, 0, MAX_IOV, -EFAULT);
	hostile_burst_line(3, GUEST_BASE + GUEST_SIZE - 8, 16, 3, MAX_IOV, -EFAULT);
	hostile_burst_line(2, GUEST_BASE + 0x10000, 16, 2, 0, -ENOBUFS);
}

/* A zero-length descriptor inside a line is a buffer with no iovec, as
 * pop makes it, and the line around it is popped too. */
static void hostile_burst_line_zero_length(void)
{
	struct ring_pair p;
	struct popped pc[4];
	struct vq_chain c[4];
	struct vq_packed_desc dk = { 0, 0, 1, AV | WR };
	uint64_t buf;

	pair_init(&p, PACKED, 8, 0, 1);
	buf = pair_alloc(&p, 64);
	dk.addr = buf + 16;
	forge_line(&p, pc, c, buf, 1, &dk, MAX_IOV);
	CHECK_EQ(vq_dev_pop_burst(p.dev, c, 4), 4);
	CHECK_EQ(c[1].id, 1);
	CHECK_EQ(c[1].nout + c[1].nin, 0);
	CHECK_EQ(c[1].in_len + c[1].out_len, 0);
	CHECK_EQ(c[2].nout, 1);
	CHECK(c[2].iov[0].iov_base == pair_hva(&p, buf + 32));
	CHECK_EQ(vq_dev_error(p.dev), 0);
	pair_fini(&p);
}

/* ---- hostile device: forged used descriptors ---- */

static void forge_used(struct ring_pair *p, unsigned slot, uint16_t id,
		       uint32_t len, bool wrap)
{
	struct vq_packed_desc *d = &ring_desc(p)[slot];

	d->id = vq_le16(id);
	d->len = vq_le32(len);
	__atomic_store_n(&d->flags, vq_le16(wrap ? F_AVAIL | F_USED : 0),
			 __ATOMIC_RELEASE);
}

/* The driver is broken with err: get fails fast; reset clears it. */
static void expect_drv_broken(struct ring_pair *p, int err)
{
	void *tok;
	uint32_t len;
	void *toks[2];
	uint32_t lens[2];
	int t;

	CHECK_EQ(vq_drv_get(p->drv, &tok, &len), err);
	CHECK_DRV_BROKEN(p, err);
	CHECK_EQ(vq_drv_get(p->drv, &tok, &len), err);
	CHECK_EQ(vq_drv_get_burst(p->drv, toks, lens, 2), err);
	CHECK_EQ(vq_drv_add(p->drv, &(struct vq_seg){ GUEST_BASE, 8 }, 1, 0, &t),
		 err);
	CHECK_EQ(vq_drv_kick_prepare(p->drv), err);
	CHECK_EQ(vq_drv_enable_cb(p->drv), err);
	CHECK(!vq_drv_has_used(p->drv));
	vq_drv_reset(p->drv);
	CHECK_EQ(vq_drv_error(p->drv), 0);
	CHECK_EQ(vq_drv_error_msg(p->drv)[0], '\0');
	CHECK_EQ(vq_drv_get(p->drv, &tok, &len), 0);
	CHECK_EQ(vq_drv_add(p->drv, &(struct vq_seg){ GUEST_BASE, 8 }, 1, 0, &t),
		 0);
}

static void hostile_used_id_never_made_available(void)
{
	struct ring_pair p;
	uint64_t buf;
	int t;

	pair_init(&p, PACKED, 8, 1, 0);
	buf = pair_alloc(&p, 64);
	add_in(&p, buf, 8, &t);
	CHECK_EQ(vq_le16(ring_desc(&p)[0].id), 0);
	forge_used(&p, 0, 5, 0, true);
	expect_drv_broken(&p, -EINVAL);
	pair_fini(&p);
}

/* The same id used twice: the second time it is no longer outstanding. */
static void hostile_used_id_twice(void)
{
	struct ring_pair p;
	uint64_t buf;
	int t[2];
	void *tok;
	uint32_t len;

	pair_init(&p, PACKED, 8, 1, 0);
	buf = pair_alloc(&p, 64);
	add_in(&p, buf, 8, &t[0]);
	add_in(&p, buf, 8, &t[1]);
	forge_used(&p, 0, vq_le16(ring_desc(&p)[0].id), 8, true);
	forge_used(&p, 1, vq_le16(ring_desc(&p)[0].id), 8, true);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == &t[0]);
	expect_drv_broken(&p, -EINVAL);
	pair_fini(&p);
}

static void hostile_used_id_ge_num(void)
{
	struct ring_pair p;
	uint64_t buf;
	int t;

	pair_init(&p, PACKED, 8, 1, 0);
	buf = pair_alloc(&p, 64);
	add_in(&p, buf, 8, &t);
	forge_used(&p, 0, 8, 0, true);
	expect_drv_broken(&p, -EINVAL);
	pair_fini(&p);

	pair_init(&p, PACKED, 8, 1, 0);
	add_in(&p, buf, 8, &t);
	forge_used(&p, 0, 0xffff, 0, true);
	expect_drv_broken(&p, -EINVAL);
	pair_fini(&p);
}

static void hostile_used_len_larger_than_buffer(void)
{
	struct ring_pair p;
	struct vq_seg s[2];
	uint64_t buf;
	int t;

	pair_init(&p, PACKED, 8, 1, 0);
	buf = pair_alloc(&p, 64);
	s[0] = (struct vq_seg){ buf, 16 };      /* readable: does not count */
	s[1] = (struct vq_seg){ buf + 16, 8 };
	CHECK_EQ(vq_drv_add(p.drv, s, 1, 1, &t), 0);
	forge_used(&p, 0, vq_le16(ring_desc(&p)[1].id), 9, true);
	expect_drv_broken(&p, -EINVAL);
	pair_fini(&p);
}

static void hostile_in_order_batch_id_not_outstanding(void)
{
	struct ring_pair p;
	uint64_t buf;
	int t[2];
	void *tok;
	uint32_t len;

	pair_init(&p, PACKED | INORDER, 8, 1, 0);
	buf = pair_alloc(&p, 64);
	add_in(&p, buf, 8, &t[0]);
	add_in(&p, buf, 8, &t[1]);
	CHECK_EQ(vq_le16(ring_desc(&p)[0].id), 0);
	CHECK_EQ(vq_le16(ring_desc(&p)[1].id), 1);
	forge_used(&p, 0, 4, 8, true);
	expect_drv_broken(&p, -EINVAL);
	pair_fini(&p);

	/* A batch naming the second buffer completes both; the id again
	 * afterwards is not outstanding. */
	pair_init(&p, PACKED | INORDER, 8, 1, 0);
	add_in(&p, buf, 8, &t[0]);
	add_in(&p, buf, 8, &t[1]);
	forge_used(&p, 0, 1, 2, true);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == &t[0]);
	CHECK_EQ(len, 8);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == &t[1]);
	CHECK_EQ(len, 2);
	forge_used(&p, 2, 1, 2, true);
	expect_drv_broken(&p, -EINVAL);
	pair_fini(&p);

	/* Ids go out in sequence, modulo the queue size; a used id behind
	 * the oldest outstanding one (completed already) is refused even
	 * while others are outstanding. */
	pair_init(&p, PACKED | INORDER, 4, 1, 0);
	for (int i = 0; i < 4; i++) {
		add_in(&p, buf, 8, &t[0]);
		CHECK_EQ(vq_le16(ring_desc(&p)[i].id), i);
		forge_used(&p, (unsigned)i, (uint16_t)i, 8, true);
		CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	}
	add_in(&p, buf, 8, &t[0]);                      /* slot 0, id 0 */
	add_in(&p, buf, 8, &t[1]);                      /* slot 1, id 1 */
	CHECK_EQ(vq_le16(ring_desc(&p)[1].id), 1);
	forge_used(&p, 0, 0, 8, false);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == &t[0]);
	forge_used(&p, 1, 0, 8, false);                 /* id 0 again */
	expect_drv_broken(&p, -EINVAL);
	pair_fini(&p);

	/* In-order used length larger than the last buffer. */
	pair_init(&p, PACKED | INORDER, 8, 1, 0);
	add_in(&p, buf, 8, &t[0]);
	forge_used(&p, 0, 0, 9, true);
	expect_drv_broken(&p, -EINVAL);
	pair_fini(&p);
}

/* IN_ORDER keeps a buffer in flight by its pop sequence number: an id
 * popped, or filled and not yet flushed, may not come again; once flushed
 * it may. */
static void hostile_in_order_buffer_id_already_in_flight(void)
{
	struct ring_pair p;
	struct popped pc[2];
	uint64_t buf;

	pair_init(&p, PACKED | INORDER, 8, 0, 1);
	buf = pair_alloc(&p, 64);
	forge(&p, 1, buf, 16, 3, AV);
	forge(&p, 0, buf, 16, 3, AV);
	CHECK_EQ(pop1(&p, &pc[0]), 1);
	CHECK_EQ(pop1(&p, &pc[1]), -EINVAL);            /* popped */
	CHECK_DEV_BROKEN(&p, -EINVAL);
	CHECK_EQ(vq_dev_get_state(p.dev).avail_idx, 0x8001);

	vq_dev_reset(p.dev);
	CHECK_EQ(pop1(&p, &pc[0]), 1);
	CHECK_EQ(vq_dev_fill(p.dev, &pc[0].c, 0), 0);
	CHECK_EQ(pop1(&p, &pc[1]), -EINVAL);            /* filled, staged */
	CHECK_DEV_BROKEN(&p, -EINVAL);

	vq_dev_reset(p.dev);
	forge(&p, 1, buf, 16, 3, AV);
	CHECK_EQ(pop1(&p, &pc[0]), 1);
	CHECK_EQ(vq_dev_push(p.dev, &pc[0].c, 0), 1);
	CHECK_EQ(pop1(&p, &pc[1]), 1);                  /* flushed: free */
	CHECK_EQ(pc[1].c.id, 3);
	/* Filled twice: refused. */
	CHECK_EQ(vq_dev_fill(p.dev, &pc[1].c, 0), 0);
	CHECK_EQ(vq_dev_fill(p.dev, &pc[1].c, 0), -EINVAL);
	CHECK_EQ(vq_dev_flush(p.dev), 1);
	CHECK_EQ(vq_dev_flush(p.dev), 0);
	CHECK_EQ(vq_dev_error(p.dev), 0);
	pair_fini(&p);
}

/* A driver that re-offers a whole ring of slots still in flight (new
 * phase flags on slots the device has not used yet) makes the in-order
 * batch longer than the ring; the device splits it, never moving its used
 * position by more than a ring at once. */
static void hostile_in_order_batch_longer_than_ring(void)
{
	struct ring_pair p;
	struct popped pc[2];
	uint64_t buf;

	pair_init(&p, PACKED | INORDER, 4, 0, 1);
	buf = pair_alloc(&p, 16);
	/* id 0: slots 0-3, a chain of the whole ring (phase 1) ... */
	for (int i = 3; i >= 0; i--)
		forge(&p, (unsigned)i, buf, 1, 0, AV | (i < 3 ? NX : 0));
	CHECK_EQ(pop1(&p, &pc[0]), 1);
	CHECK_EQ(pc[0].c.ndesc, 4);
	/* ... and id 1 on the same slots in phase 0 (AVAIL 0, USED 1). */
	for (int i = 3; i >= 0; i--)
		forge(&p, (unsigned)i, buf, 1, 1, F_USED | (i < 3 ? NX : 0));
	CHECK_EQ(pop1(&p, &pc[1]), 1);
	CHECK_EQ(pc[1].c.ndesc, 4);
	CHECK_EQ(vq_dev_fill(p.dev, &pc[0].c, 0), 0);
	CHECK_EQ(vq_dev_fill(p.dev, &pc[1].c, 0), 0);
	CHECK_EQ(vq_dev_flush(p.dev), 2);
	/* Two used descriptors (both at slot 0, one per lap): eight slots,
	 * back in phase 1. */
	CHECK_EQ(vq_dev_get_state(p.dev).used_idx, 0x8000);
	CHECK_EQ(vq_dev_error(p.dev), 0);
	pair_fini(&p);
}

int main(void)
{
	RUN(hostile_buffer_id_out_of_range);
	RUN(hostile_buffer_id_already_in_flight);
	RUN(hostile_chain_longer_than_ring);
	RUN(hostile_wrap_counter_confusion_chained_slot);
	RUN(hostile_wrap_counter_confusion_across_end);
	RUN(hostile_head_avail_equals_used_not_available);
	RUN(hostile_indirect_with_next);
	RUN(hostile_nested_indirect);
	RUN(hostile_indirect_bad_length);
	RUN(hostile_indirect_without_feature);
	RUN(hostile_indirect_outside_memory);
	RUN(hostile_address_outside_every_region);
	RUN(hostile_address_length_overflow);
	RUN(hostile_readable_after_writable);
	RUN(hostile_chain_needs_more_iovecs);
	RUN(hostile_burst_line_each_descriptor_checked);
	RUN(hostile_burst_line_zero_length);
	RUN(hostile_used_id_never_made_available);
	RUN(hostile_used_id_twice);
	RUN(hostile_used_id_ge_num);
	RUN(hostile_used_len_larger_than_buffer);
	RUN(hostile_in_order_batch_id_not_outstanding);
	RUN(hostile_in_order_buffer_id_already_in_flight);
	RUN(hostile_in_order_batch_longer_than_ring);
	return 0;
}
