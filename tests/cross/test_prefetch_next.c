// SPDX-License-Identifier: MIT
/*
 * vq_dev_prefetch_next, a hint for an idle device: it asks only for lines
 * of a buffer the driver has made available, inside guest memory, as far
 * as the device has already validated (split: the avail index V1 read;
 * packed: flags available in the current phase, 2.8.1), and it never pops,
 * breaks the queue, or asks the front-end for a translation.  A prefetch
 * cannot fault, so the lines it asks for are what is checked: the count it
 * returns.
 */
#include <virtq/ring.h>

#include "ring_pair.h"
#include "vq_test.h"

#define NUM 8
#define LINE 64

static void init(struct ring_pair *p, bool packed, bool drv)
{
	pair_init(p, pair_features(packed, false, false, true), NUM, drv, 1);
}

static void add_in(struct ring_pair *p, uint64_t gpa, uint32_t len)
{
	struct vq_seg s = { gpa, len };

	CHECK_EQ(vq_drv_add(p->drv, &s, 0, 1, (void *)1), 0);
	CHECK(vq_drv_kick_prepare(p->drv) >= 0);
}

/* The chain is still the next pop's, whole. */
static void pop_is(struct ring_pair *p, uint64_t gpa, uint32_t len)
{
	struct iovec iov[4];
	struct vq_chain c = { .iov = iov, .iov_max = 4 };

	CHECK_EQ(vq_dev_pop(p->dev, &c), 1);
	CHECK_EQ(c.nin, 1);
	CHECK_EQ(c.in_len, len);
	CHECK(iov[0].iov_base == pair_hva(p, gpa));
	CHECK_EQ(vq_dev_error(p->dev), 0);
}

/* 2.7.13.3 / 2.8.1: the lines of the first bytes of the next available
 * buffer, clipped to its length, none when nothing is available; the
 * chain stays the next pop's. */
static void prefetch_next_asks_for_available_lines(bool packed)
{
	struct ring_pair p;
	uint64_t first, buf;

	init(&p, packed, true);
	first = pair_alloc(&p, 64);
	buf = pair_alloc(&p, 4096);
	CHECK_EQ(vq_dev_prefetch_next(p.dev, 128), 0);
	add_in(&p, first, 64);
	add_in(&p, buf, 4096);
	if (!packed) {
		/* V1: the index is the device's to read and check first,
		 * which a pop does; the hint reads none. */
		CHECK_EQ(vq_dev_prefetch_next(p.dev, 128), 0);
		CHECK(vq_dev_has_avail(p.dev));
		CHECK_EQ(vq_dev_prefetch_next(p.dev, 128), 0);
	} else {
		CHECK_EQ(vq_dev_prefetch_next(p.dev, 128), 1);
	}
	pop_is(&p, first, 64);
	CHECK_EQ(vq_dev_prefetch_next(p.dev, 128), 2);
	CHECK_EQ(vq_dev_prefetch_next(p.dev, 1), 1);
	CHECK_EQ(vq_dev_prefetch_next(p.dev, 0), 0);
	CHECK_EQ(vq_dev_prefetch_next(p.dev, 1u << 20), 4096 / LINE);
	pop_is(&p, buf, 4096);
	CHECK_EQ(vq_dev_prefetch_next(p.dev, 128), 0);

	/* 12 bytes from 4 before a line's end: two lines; 8 bytes inside
	 * one line: one, never past the buffer. */
	add_in(&p, first, 8);
	add_in(&p, buf + LINE - 4, 12);
	add_in(&p, buf + LINE, 8);
	pop_is(&p, first, 8);
	CHECK_EQ(vq_dev_prefetch_next(p.dev, 128), 2);
	pop_is(&p, buf + LINE - 4, 12);
	CHECK_EQ(vq_dev_prefetch_next(p.dev, 128), 1);
	pair_fini(&p);
}

static void prefetch_next_split(void) { prefetch_next_asks_for_available_lines(false); }
static void prefetch_next_packed(void) { prefetch_next_asks_for_available_lines(true); }

/* Forge split chain pos: head, one descriptor (unless head is outside
 * the table), published up to it. */
static void forge_split(struct ring_pair *p, uint16_t pos, uint16_t head,
			uint64_t addr, uint32_t len, uint16_t flags)
{
	struct vq_desc *d = p->ring.desc;
	struct vq_avail *a = p->ring.driver;

	if (head < NUM)
		d[head] = (struct vq_desc){ vq_le64(addr), vq_le32(len), vq_le16(flags), 0 };
	a->ring[pos] = vq_le16(head);
	a->idx = vq_le16(pos + 1);
}

/* A good chain at 0, the forged one at 1, then the good one popped: the
 * device has read and checked the index (V1) past the forged chain, so the
 * hint looks at it.  For a packed ring the forged one is at slot 0. */
static void forge_next(struct ring_pair *p, bool packed, uint16_t head,
		       uint64_t addr, uint32_t len, uint16_t flags)
{
	struct vq_packed_desc *pd = p->ring.desc;
	struct iovec iov[4];
	struct vq_chain c = { .iov = iov, .iov_max = 4 };

	if (packed) {
		pd[0] = (struct vq_packed_desc){ vq_le64(addr), vq_le32(len), 0,
						 vq_le16(flags | VQ_DESC_F_AVAIL) };
		return;
	}
	forge_split(p, 0, 0, pair_alloc(p, 64), 64, VQ_DESC_F_WRITE);
	forge_split(p, 1, head, addr, len, flags);
	CHECK_EQ(vq_dev_pop(p->dev, &c), 1);
}

/* The hint saw nothing and broke nothing; the pop after it says what was
 * wrong, as it would without the hint. */
static void none_then_pop_breaks(struct ring_pair *p, const char *says)
{
	struct iovec iov[4];
	struct vq_chain c = { .iov = iov, .iov_max = 4 };

	CHECK_EQ(vq_dev_prefetch_next(p->dev, 128), 0);
	CHECK_EQ(vq_dev_error(p->dev), 0);
	CHECK(vq_dev_pop(p->dev, &c) < 0);
	CHECK(strstr(vq_dev_error_msg(p->dev), says));
	/* broken: no more hints */
	CHECK_EQ(vq_dev_prefetch_next(p->dev, 128), 0);
}

/* The same ring with a good buffer in the forged one's place: the hint
 * does look there (so a 0 above is the check, not the position). */
static void control_good(bool packed)
{
	struct ring_pair p;

	init(&p, packed, false);
	forge_next(&p, packed, 2, pair_alloc(&p, 256), 256, VQ_DESC_F_WRITE);
	CHECK_EQ(vq_dev_prefetch_next(p.dev, 128), 2);
	pair_fini(&p);
}

/* 2.7.6 (hostile driver): a head past the table is not followed. */
static void prefetch_next_hostile_head_out_of_table(void)
{
	struct ring_pair p;

	control_good(false);
	init(&p, false, false);
	forge_next(&p, false, NUM + 3, 0, 0, 0);
	none_then_pop_breaks(&p, "2.7.6");
	pair_fini(&p);
}

/* 2.7.5 / 2.8.13 (hostile driver): a buffer outside guest memory, or
 * starting inside and running past its end, gets no line at all (the
 * hint clips to its bytes only after the whole buffer translated). */
static void prefetch_next_hostile_buffer_outside_memory(bool packed)
{
	const uint64_t end = GUEST_BASE + GUEST_SIZE;
	const struct { uint64_t addr; uint32_t len; } bad[] = {
		{ end, 64 }, { GUEST_BASE - 4096, 64 }, { end - 64, 1u << 20 },
		{ UINT64_MAX - 63, 128 },
	};

	control_good(packed);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ring_pair p;

		init(&p, packed, false);
		forge_next(&p, packed, 2, bad[i].addr, bad[i].len, VQ_DESC_F_WRITE);
		none_then_pop_breaks(&p, packed ? "2.8.13" : "2.7.5");
		pair_fini(&p);
	}
}

static void prefetch_next_hostile_outside_split(void)
{
	prefetch_next_hostile_buffer_outside_memory(false);
}

static void prefetch_next_hostile_outside_packed(void)
{
	prefetch_next_hostile_buffer_outside_memory(true);
}

/* 2.8.1: a descriptor in the wrong phase (AVAIL and USED both set, the
 * device's own used mark) is not available: no line. */
static void prefetch_next_packed_wrong_phase(void)
{
	struct ring_pair p;
	struct vq_packed_desc *d;
	uint64_t buf;

	init(&p, true, false);
	d = p.ring.desc;
	buf = pair_alloc(&p, 4096);
	forge_next(&p, true, 0, buf, 4096, VQ_DESC_F_WRITE);
	CHECK_EQ(vq_dev_prefetch_next(p.dev, 128), 2);
	d[0].flags = vq_le16(VQ_DESC_F_WRITE | VQ_DESC_F_AVAIL | VQ_DESC_F_USED);
	CHECK_EQ(vq_dev_prefetch_next(p.dev, 128), 0);
	pair_fini(&p);
}

/* 2.7.5.3 / 2.8.19: an indirect table is the device's to check before
 * anything in it is followed: no line. */
static void prefetch_next_indirect_left_alone(void)
{
	for (int packed = 0; packed < 2; packed++) {
		struct ring_pair p;

		control_good(packed);
		init(&p, packed, false);
		forge_next(&p, packed, 1, p.indirect_gpa, 32, VQ_DESC_F_INDIRECT);
		CHECK_EQ(vq_dev_prefetch_next(p.dev, 128), 0);
		pair_fini(&p);
	}
}

static void on_miss(void *arg, uint64_t iova, unsigned access)
{
	(void)iova;
	(void)access;
	(*(unsigned *)arg)++;
}

/* Through an IOTLB a translation may ask the front-end (a message): the
 * hint asks nothing, and prefetches nothing, where the same ring without
 * one gets its lines. */
static void prefetch_next_iotlb_asks_nothing(void)
{
	struct ring_pair p;
	unsigned misses = 0;
	struct vq_dev_config vc;

	init(&p, true, false);
	forge_next(&p, true, 0, pair_alloc(&p, 4096), 4096, VQ_DESC_F_WRITE);
	CHECK_EQ(vq_dev_prefetch_next(p.dev, 128), 2);
	vq_dev_free(p.dev);
	CHECK_EQ(vq_mem_iotlb_enable(p.mem, on_miss, &misses), 0);
	vc = (struct vq_dev_config){ .features = p.features, .num = NUM,
				     .ring = p.ring, .mem = p.mem,
				     .avail_idx = 0x8000, .used_idx = 0x8000 };
	CHECK_EQ(vq_dev_new(&vc, &p.dev), 0);
	CHECK(vq_dev_has_avail(p.dev));
	CHECK_EQ(vq_dev_prefetch_next(p.dev, 128), 0);
	CHECK_EQ(misses, 0);
	CHECK_EQ(vq_dev_error(p.dev), 0);
	vq_dev_free(p.dev);
	p.dev = NULL;
	vq_mem_iotlb_disable(p.mem);
	pair_fini(&p);
}

int main(void)
{
	RUN(prefetch_next_split);
	RUN(prefetch_next_packed);
	RUN(prefetch_next_hostile_head_out_of_table);
	RUN(prefetch_next_hostile_outside_split);
	RUN(prefetch_next_hostile_outside_packed);
	RUN(prefetch_next_packed_wrong_phase);
	RUN(prefetch_next_indirect_left_alone);
	RUN(prefetch_next_iotlb_asks_nothing);
	return 0;
}
