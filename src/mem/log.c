// SPDX-License-Identifier: MIT
/*
 * The dirty-page log a migrating frontend shares with us (vhost-user
 * "Migration"): every guest page we write is marked, so the frontend sends
 * it again.  Only touched while migration logging is on.
 */
#include <virtq/mem.h>

#include "log_batch.h"

bool vq_dirty_log_covers(const struct vq_dirty_log *log, uint64_t gpa, uint64_t len)
{
	uint64_t last;

	if (len == 0)
		return true;
	if (gpa + (len - 1) < gpa)
		return false;
	last = (gpa + (len - 1)) / VQ_DIRTY_LOG_PAGE;
	return last / 8 < log->size;
}

bool vq_dirty_log_covers_mem(const struct vq_dirty_log *log, const struct vq_mem *m)
{
	for (unsigned i = 0; i < vq_mem_count(m); i++) {
		const struct vq_mem_region *r = vq_mem_region_at(m, i);

		if (!vq_dirty_log_covers(log, r->gpa, r->size))
			return false;
	}
	return true;
}

void vq_dirty_log_mark(const struct vq_dirty_log *log, uint64_t gpa, uint64_t len)
{
	uint64_t page, last;

	if (len == 0 || gpa + (len - 1) < gpa)
		return;
	last = (gpa + (len - 1)) / VQ_DIRTY_LOG_PAGE;
	for (page = gpa / VQ_DIRTY_LOG_PAGE; page <= last && page / 8 < log->size; page++)
		/* release: the write being recorded is visible first (V5) */
		__atomic_fetch_or(&log->bits[page / 8], (uint8_t)(1u << (page % 8)),
				  __ATOMIC_RELEASE);
}

void vq_log_batch_flush(struct vq_log_batch *b)
{
	if (!b->n)
		return;
	/* the recorded writes, visible before the bits are looked at (V5) */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (unsigned i = 0; i < b->n; i++) {
		uint8_t *p = &b->log->bits[b->e[i].byte];

		if ((__atomic_load_n(p, __ATOMIC_RELAXED) & b->e[i].bits) != b->e[i].bits)
			__atomic_fetch_or(p, b->e[i].bits, __ATOMIC_RELAXED);
	}
	b->n = 0;
}

void vq_log_batch_add(struct vq_log_batch *b, uint64_t gpa, uint64_t len)
{
	uint64_t page, last;

	if (len == 0 || gpa + (len - 1) < gpa)
		return;
	last = (gpa + (len - 1)) / VQ_DIRTY_LOG_PAGE;
	/* the common case: one page, in the byte the last buffer marked */
	page = gpa / VQ_DIRTY_LOG_PAGE;
	if (page == last && b->n && b->e[b->n - 1].byte == page / 8) {
		b->e[b->n - 1].bits |= (uint8_t)(1u << (page % 8));
		return;
	}
	for (page = gpa / VQ_DIRTY_LOG_PAGE; page <= last && page / 8 < b->log->size; page++) {
		uint64_t byte = page / 8;
		uint8_t bit = (uint8_t)(1u << (page % 8));
		unsigned i;

		/* a burst's buffers share a few bytes: look from the latest */
		for (i = b->n; i > 0 && b->e[i - 1].byte != byte; i--)
			;
		if (i) {
			b->e[i - 1].bits |= bit;
			continue;
		}
		if (b->n == VQ_LOG_BATCH)
			vq_log_batch_flush(b);
		b->e[b->n].byte = byte;
		b->e[b->n++].bits = bit;
	}
}

void vq_log_batch_add_iov(struct vq_log_batch *b, const struct vq_mem *m,
			  const struct iovec *iov, unsigned n, uint64_t len)
{
	for (unsigned i = 0; i < n && len; i++) {
		uint64_t chunk = iov[i].iov_len < len ? iov[i].iov_len : len;
		uintptr_t p = (uintptr_t)iov[i].iov_base;
		const struct vq_mem_region *r = b->hint;

		len -= chunk;
		if (!chunk)
			continue;
		/* every iovec came from one region (vq_mem_translate); a
		 * burst's buffers mostly from the same one */
		if (!r || p < (uintptr_t)r->hva || p - (uintptr_t)r->hva >= r->size) {
			r = vq_mem_region_of_hva(m, iov[i].iov_base);
			if (!r)
				continue;
			b->hint = r;
		}
		vq_log_batch_add(b, r->gpa + (p - (uintptr_t)r->hva), chunk);
	}
}
