/* SPDX-License-Identifier: MIT */
/*
 * virtq/mem.h - the guest memory map.
 *
 * A map is a set of non-overlapping regions, each known by three addresses:
 * its guest-physical address (what descriptors carry), the address it has in
 * the frontend's process (what vhost-user ring addresses carry) and the
 * address it is mapped at here.  Every translation checks the whole
 * [addr, addr+len) range with overflow-safe arithmetic: nothing the other
 * side sends is trusted.
 */
#ifndef VIRTQ_MEM_H
#define VIRTQ_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vq_mem;

struct vq_mem_region {
	uint64_t gpa;           /* guest-physical start */
	uint64_t size;          /* bytes, > 0 */
	uint64_t uaddr;         /* start in the frontend's address space */
	void *hva;              /* start in this process */
};

/* The most regions a map holds (vhost-user's largest slot count). */
#define VQ_MEM_MAX_REGIONS 509u

struct vq_mem *vq_mem_new(void);
void vq_mem_free(struct vq_mem *m);

/* Add a region.  -EINVAL for a zero size, an address range that wraps, or a
 * guest-physical or frontend range that overlaps an existing region;
 * -EXDEV when hva is not aligned like gpa and uaddr modulo
 * VQ_MEM_ALIGN_KEPT (so an address the ring layer checked for alignment in
 * guest terms could be misaligned here); -ENOSPC when the map is full;
 * -ENOMEM. */
#define VQ_MEM_ALIGN_KEPT 16u
int vq_mem_add(struct vq_mem *m, const struct vq_mem_region *r);

/* Remove the region that matches gpa and size exactly: 0, or -ENOENT.
 * If out is not NULL the removed region is copied there (to unmap it). */
int vq_mem_remove(struct vq_mem *m, uint64_t gpa, uint64_t size,
		  struct vq_mem_region *out);

unsigned vq_mem_count(const struct vq_mem *m);
const struct vq_mem_region *vq_mem_region_at(const struct vq_mem *m, unsigned i);

/*
 * Translate the guest-physical range [gpa, gpa+len) into iovecs, appending
 * to iov[*n .. max).  A range that crosses from one region into an adjacent
 * one becomes one iovec per region.  A zero length adds nothing.
 * Returns 0, -EFAULT (some byte is in no region, or the range wraps) or
 * -ENOBUFS (more than max iovecs would be needed).
 */
int vq_mem_translate(const struct vq_mem *m, uint64_t gpa, uint64_t len,
		     struct iovec *iov, unsigned max, unsigned *n);

/* A contiguous host pointer for [gpa, gpa+len) when the whole range lies in
 * one region; NULL otherwise.  Used for descriptor tables and rings. */
void *vq_mem_gpa_to_hva(const struct vq_mem *m, uint64_t gpa, uint64_t len);

/* The same for an address in the frontend's address space (vhost-user ring
 * addresses). */
void *vq_mem_uaddr_to_hva(const struct vq_mem *m, uint64_t uaddr, uint64_t len);

/* The guest-physical address of a frontend address: 0 and *gpa set, or
 * -EFAULT when no region holds it. */
int vq_mem_uaddr_to_gpa(const struct vq_mem *m, uint64_t uaddr, uint64_t *gpa);
/* The region holding a host pointer, or NULL.  Valid until the map changes. */
const struct vq_mem_region *vq_mem_region_of_hva(const struct vq_mem *m,
						 const void *hva);

/*
 * A dirty-page log (vhost's VHOST_F_LOG_ALL, for live migration): one bit per
 * 4 KiB guest-physical page, bit (gpa / 4096) % 8 of byte gpa / 32768.  The
 * frontend reads and clears it while we write, so bits are set with atomic
 * OR, each after the guest-memory write it records: a bit set first could be
 * harvested before the write lands, and the page would migrate stale.
 */
#define VQ_LOG_PAGE 4096u

struct vq_dirty_log {
	uint8_t *bits;
	uint64_t size;          /* bytes of bitmap: covers size * 8 pages */
};

/* Does the log have a bit for every page of [gpa, gpa+len)? */
bool vq_log_covers(const struct vq_dirty_log *log, uint64_t gpa, uint64_t len);
/* Does it cover every region of the map? */
bool vq_log_covers_mem(const struct vq_dirty_log *log, const struct vq_mem *m);
/* Mark the pages of [gpa, gpa+len) dirty now (pages past the log are
 * skipped: callers check coverage when they set the log up). */
void vq_log_mark(const struct vq_dirty_log *log, uint64_t gpa, uint64_t len);

/*
 * Marks gathered over a burst, then set together: one fence, and an atomic
 * OR only for a bitmap byte that lacks one of the bits (in steady state the
 * frontend harvests every few hundred ms, so most are already set).  Skipping
 * a set bit is safe only after the fence: the writes being recorded are then
 * visible before we look, so a frontend that clears the bit after our look
 * copies the page with them.
 */
#define VQ_LOG_BATCH 16u

struct vq_log_batch {
	const struct vq_dirty_log *log;
	const struct vq_mem_region *hint;       /* the region last translated */
	unsigned n;
	struct {
		uint64_t byte;          /* index into log->bits */
		uint8_t bits;
	} e[VQ_LOG_BATCH];
};

void vq_log_batch_add(struct vq_log_batch *b, uint64_t gpa, uint64_t len);
/* The guest pages under the first len bytes of iov[0, n). */
void vq_log_batch_add_iov(struct vq_log_batch *b, const struct vq_mem *m,
			  const struct iovec *iov, unsigned n, uint64_t len);
void vq_log_batch_flush(struct vq_log_batch *b);

/*
 * The common case of vq_log_batch_add_iov, inline: len bytes at hva in one
 * page of the region last translated, whose bitmap byte the last mark used
 * (a burst's small buffers).  false: nothing was done, take the full path.
 */
static inline bool vq_log_batch_add_fast(struct vq_log_batch *b, const void *hva,
					 uint64_t len)
{
	const struct vq_mem_region *r = b->hint;
	uint64_t off, gpa, page;

	if (!r || !b->n || !len)
		return false;
	off = (uint64_t)((uintptr_t)hva - (uintptr_t)r->hva);
	if (off >= r->size || len > r->size - off)
		return false;
	gpa = r->gpa + off;
	page = gpa / VQ_LOG_PAGE;
	if ((gpa + len - 1) / VQ_LOG_PAGE != page || b->e[b->n - 1].byte != page / 8)
		return false;
	b->e[b->n - 1].bits |= (uint8_t)(1u << (page % 8));
	return true;
}

#ifdef __cplusplus
}
#endif
#endif
