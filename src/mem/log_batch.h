/* SPDX-License-Identifier: MIT */
/*
 * Dirty-log marks gathered over a burst: the ring layer's, private to the
 * library (its layout is fixed by the inline fast path, so it cannot be
 * a public struct that grows).
 */
#ifndef VIRTQ_MEM_LOG_BATCH_H
#define VIRTQ_MEM_LOG_BATCH_H

#include <virtq/mem.h>

#include "util.h"

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

VQ_INTERNAL void vq_log_batch_add(struct vq_log_batch *b, uint64_t gpa, uint64_t len);
/* The guest pages under the first len bytes of iov[0, n). */
VQ_INTERNAL void vq_log_batch_add_iov(struct vq_log_batch *b, const struct vq_mem *m,
				      const struct iovec *iov, unsigned n,
				      uint64_t len);
VQ_INTERNAL void vq_log_batch_flush(struct vq_log_batch *b);

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
	page = gpa / VQ_DIRTY_LOG_PAGE;
	if ((gpa + len - 1) / VQ_DIRTY_LOG_PAGE != page || b->e[b->n - 1].byte != page / 8)
		return false;
	b->e[b->n - 1].bits |= (uint8_t)(1u << (page % 8));
	return true;
}

#endif
