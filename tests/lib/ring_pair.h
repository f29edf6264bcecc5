/* SPDX-License-Identifier: MIT */
/*
 * A driver and a device on one ring in one process, over a block of "guest
 * memory" that the test owns: the fixture the ring tests share.
 *
 * Guest memory is one region at GUEST_BASE; the ring, the indirect pool and a
 * data area are carved out of it.  Tests that forge hostile rings write the
 * ring memory directly through pair.ring.
 */
#ifndef VQ_RING_PAIR_H
#define VQ_RING_PAIR_H

#include <sys/mman.h>

#include <stdbool.h>

#include <virtq/ring.h>

#include "vq_test.h"

#define GUEST_BASE   0x100000000ull
#define GUEST_SIZE   (64ull << 20)

struct ring_pair {
	uint64_t features;
	uint16_t num;
	uint8_t *guest;                 /* GUEST_SIZE bytes at GUEST_BASE */
	struct vq_mem *mem;
	struct vq_ring_addr ring;
	uint64_t ring_gpa;
	uint8_t *indirect;
	uint64_t indirect_gpa;
	uint16_t indirect_max;
	uint64_t data_gpa;              /* first free byte for buffers */
	uint64_t data_end;
	struct vq_drv *drv;
	struct vq_dev *dev;
};

static inline void *pair_hva(struct ring_pair *p, uint64_t gpa)
{
	return p->guest + (gpa - GUEST_BASE);
}

/* Bump-allocate len bytes of guest memory, 64-byte aligned. */
static inline uint64_t pair_alloc(struct ring_pair *p, uint64_t len)
{
	uint64_t gpa = (p->data_gpa + 63) & ~63ull;

	CHECK(gpa + len <= p->data_end);
	p->data_gpa = gpa + len;
	return gpa;
}

/* The ring features of one test configuration. */
static inline uint64_t pair_features(bool packed, bool in_order, bool event_idx,
				     bool indirect)
{
	return (packed ? VQ_BIT(VQ_F_RING_PACKED) : 0) |
	       (in_order ? VQ_BIT(VQ_F_IN_ORDER) : 0) |
	       (event_idx ? VQ_BIT(VQ_F_EVENT_IDX) : 0) |
	       (indirect ? VQ_BIT(VQ_F_INDIRECT_DESC) : 0);
}

/* Set up memory and the ring; with_drv/with_dev create either side. */
static inline void pair_init(struct ring_pair *p, uint64_t features,
			     uint16_t num, int with_drv, int with_dev)
{
	uint64_t off[3], size;
	struct vq_mem_region r;

	memset(p, 0, sizeof(*p));
	p->features = features | VQ_BIT(VQ_F_VERSION_1);
	p->num = num;
	/* Anonymous pages are zero and only the touched ones cost anything:
	 * a memset of the whole block made every pair_init slow. */
	p->guest = mmap(NULL, GUEST_SIZE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p->guest != MAP_FAILED);
	CHECK_EQ(vq_mem_new(&p->mem), 0);
	r = (struct vq_mem_region){ .gpa = GUEST_BASE, .size = GUEST_SIZE,
				    .uaddr = (uintptr_t)p->guest, .hva = p->guest };
	CHECK_EQ(vq_mem_add(p->mem, &r), 0);

	size = vq_ring_layout(p->features, num, off);
	CHECK(size);
	p->data_gpa = GUEST_BASE;
	p->data_end = GUEST_BASE + GUEST_SIZE;
	p->ring_gpa = pair_alloc(p, size);
	p->ring.desc = pair_hva(p, p->ring_gpa + off[0]);
	p->ring.driver = pair_hva(p, p->ring_gpa + off[1]);
	p->ring.device = pair_hva(p, p->ring_gpa + off[2]);
	p->indirect_max = 16;
	p->indirect_gpa = pair_alloc(p, 16ull * p->indirect_max * num);
	p->indirect = pair_hva(p, p->indirect_gpa);

	if (with_drv) {
		struct vq_drv_config dc = {
			.features = p->features, .num = num, .ring = p->ring,
			.indirect = p->indirect, .indirect_gpa = p->indirect_gpa,
			.indirect_max = p->indirect_max,
		};
		CHECK_EQ(vq_drv_new(&dc, &p->drv), 0);
	}
	if (with_dev) {
		int packed = !!(p->features & VQ_BIT(VQ_F_RING_PACKED));
		struct vq_dev_config vc = {
			.features = p->features, .num = num, .ring = p->ring,
			.mem = p->mem,
			.avail_idx = packed ? 0x8000 : 0,
			.used_idx = packed ? 0x8000 : 0,
		};
		CHECK_EQ(vq_dev_new(&vc, &p->dev), 0);
	}
}

/* Make guest memory two regions meeting at GUEST_BASE + at, over the same
 * host memory: a buffer may now fall in either, or cross from one into the
 * other (two iovecs). */
static inline void pair_split_memory(struct ring_pair *p, uint64_t at)
{
	struct vq_mem_region r;

	CHECK_EQ(vq_mem_remove(p->mem, GUEST_BASE, GUEST_SIZE, NULL), 0);
	r = (struct vq_mem_region){ .gpa = GUEST_BASE, .size = at,
				    .uaddr = (uintptr_t)p->guest, .hva = p->guest };
	CHECK_EQ(vq_mem_add(p->mem, &r), 0);
	r = (struct vq_mem_region){ .gpa = GUEST_BASE + at, .size = GUEST_SIZE - at,
				    .uaddr = (uintptr_t)p->guest + at,
				    .hva = p->guest + at };
	CHECK_EQ(vq_mem_add(p->mem, &r), 0);
}

/* The iovecs of a len-byte buffer at gpa after pair_split_memory(p, at):
 * one, or two meeting at the boundary when it crosses. */
static inline void pair_check_split_iov(struct ring_pair *p,
					const struct iovec *iov, unsigned n,
					uint64_t gpa, uint64_t len, uint64_t at)
{
	uint64_t end = GUEST_BASE + at;
	bool across = gpa < end && gpa + len > end;

	CHECK_EQ(n, across ? 2u : 1u);
	CHECK(iov[0].iov_base == pair_hva(p, gpa));
	CHECK_EQ(iov[0].iov_len, across ? end - gpa : len);
	if (across) {
		CHECK(iov[1].iov_base == pair_hva(p, end));
		CHECK_EQ(iov[1].iov_len, gpa + len - end);
	}
}

/* The device pops the n len-byte buffers at gpa[] just made available, as
 * one burst after pair_split_memory(p, at): each whole, device-writable
 * (in) or readable, with the iovecs pair_check_split_iov() says, and the
 * queue unbroken. */
static inline void pair_pop_split_burst(struct ring_pair *p, struct vq_chain *c,
					unsigned n, const uint64_t *gpa, uint32_t len,
					bool in, uint64_t at)
{
	CHECK_EQ(vq_dev_pop_burst(p->dev, c, n), n);
	for (unsigned i = 0; i < n; i++) {
		CHECK_EQ(in ? c[i].in_len : c[i].out_len, len);
		pair_check_split_iov(p, c[i].iov, in ? c[i].nin : c[i].nout, gpa[i],
				     len, at);
	}
	CHECK_EQ(vq_dev_error(p->dev), 0);
}

static inline void pair_fini(struct ring_pair *p)
{
	vq_drv_free(p->drv);
	vq_dev_free(p->dev);
	vq_mem_free(p->mem);
	munmap(p->guest, GUEST_SIZE);
}

#endif
