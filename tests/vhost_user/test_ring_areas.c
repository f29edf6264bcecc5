// SPDX-License-Identifier: MIT
/*
 * The ring-layer calls the vhost-user back-end checks ring addresses with
 * and resumes a split ring from: vq_ring_areas (the spec's size and
 * alignment table, 2.7 and 2.8.10.1) and vq_ring_used_idx.
 */
#include <virtq/ring.h>

#include "vq_test.h"

#define V1 VQ_BIT(VQ_F_VERSION_1)
#define EVENT VQ_BIT(VQ_F_EVENT_IDX)
#define PACKED VQ_BIT(VQ_F_RING_PACKED)

/* 2.7: descriptors 16 * num (16-aligned), avail 6 + 2 * num (2-aligned),
 * used 6 + 8 * num (4-aligned), the last two bytes of each the event word. */
static void split_2_7_sizes_and_alignment(void)
{
	uint64_t size[3], align[3];

	CHECK_EQ(vq_ring_areas(V1 | EVENT, 256, size, align), 0);
	CHECK_EQ(size[0], 4096);
	CHECK_EQ(size[1], 6 + 2 * 256);
	CHECK_EQ(size[2], 6 + 8 * 256);
	CHECK_EQ(align[0], 16);
	CHECK_EQ(align[1], 2);
	CHECK_EQ(align[2], 4);
	/* without EVENT_IDX nobody touches used_event / avail_event */
	CHECK_EQ(vq_ring_areas(V1, 256, size, align), 0);
	CHECK_EQ(size[1], 4 + 2 * 256);
	CHECK_EQ(size[2], 4 + 8 * 256);
	CHECK_EQ(vq_ring_areas(V1, 1, size, align), 0);
	CHECK_EQ(size[0], 16);
	CHECK_EQ(size[1], 6);
	CHECK_EQ(size[2], 12);
}

/* 2.8.10.1: the descriptor ring 16 * num (16-aligned), each event
 * suppression structure 4 bytes (4-aligned); any size up to 32768. */
static void packed_2_8_10_1_sizes_and_alignment(void)
{
	uint64_t size[3], align[3];

	CHECK_EQ(vq_ring_areas(V1 | PACKED | EVENT, 100, size, align), 0);
	CHECK_EQ(size[0], 1600);
	CHECK_EQ(size[1], 4);
	CHECK_EQ(size[2], 4);
	CHECK_EQ(align[0], 16);
	CHECK_EQ(align[1], 4);
	CHECK_EQ(align[2], 4);
	CHECK_EQ(vq_ring_areas(V1 | PACKED, 32768, size, align), 0);
	CHECK_EQ(size[0], 16ull * 32768);
}

/* "Queue Size": a split ring's is a power of two, none is 0 or over 32768. */
static void queue_size_not_valid_refused(void)
{
	uint64_t size[3] = { 7, 7, 7 }, align[3] = { 7, 7, 7 };

	CHECK_EQ(vq_ring_areas(V1, 100, size, align), -EINVAL);
	CHECK_EQ(vq_ring_areas(V1, 0, size, align), -EINVAL);
	CHECK_EQ(vq_ring_areas(V1 | PACKED, 0, size, align), -EINVAL);
	CHECK_EQ(size[0], 7);                   /* nothing written */
}

/* The areas fit the block vq_ring_layout lays out, each where it is
 * aligned: the two calls agree for every layout. */
static void areas_fit_the_layout(void)
{
	static const uint64_t feats[] = { V1, V1 | EVENT, V1 | PACKED,
					  V1 | PACKED | EVENT };

	for (unsigned f = 0; f < sizeof(feats) / sizeof(feats[0]); f++) {
		for (unsigned num = 1; num <= 32768; num *= 2) {
			uint64_t off[3], size[3], align[3], total;

			total = vq_ring_layout(feats[f], (uint16_t)num, off);
			CHECK(total > 0);
			CHECK_EQ(vq_ring_areas(feats[f], (uint16_t)num, size, align), 0);
			for (unsigned k = 0; k < 3; k++) {
				uint64_t end = k < 2 ? off[k + 1] : total;

				CHECK_EQ(off[k] % align[k], 0);
				CHECK(off[k] + size[k] <= end);
			}
			if (num == 32768)
				break;
		}
	}
}

/* 2.7.8: the used index is the device's, little-endian, in the used ring;
 * a packed ring has none in memory. */
static void used_idx_read_from_split_ring(void)
{
	struct {
		uint16_t flags, idx;
		uint32_t ring[8];
	} used = { 0, vq_le16(0x1234), { 0 } };
	uint16_t idx = 0;

	CHECK_EQ(vq_ring_used_idx(V1, &used, &idx), 0);
	CHECK_EQ(idx, 0x1234);
	used.idx = vq_le16(0xffff);
	CHECK_EQ(vq_ring_used_idx(V1 | EVENT, &used, &idx), 0);
	CHECK_EQ(idx, 0xffff);
	idx = 7;
	CHECK_EQ(vq_ring_used_idx(V1 | PACKED, &used, &idx), -EINVAL);
	CHECK_EQ(idx, 7);
}

int main(void)
{
	RUN(split_2_7_sizes_and_alignment);
	RUN(packed_2_8_10_1_sizes_and_alignment);
	RUN(queue_size_not_valid_refused);
	RUN(areas_fit_the_layout);
	RUN(used_idx_read_from_split_ring);
	return 0;
}
