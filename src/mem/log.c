// SPDX-License-Identifier: MIT
/*
 * The dirty-page log a migrating frontend shares with us (vhost-user
 * "Migration"): every guest page we write is marked, so the frontend sends
 * it again.  Only touched while migration logging is on.
 */
#include <virtq/mem.h>

bool vq_log_covers(const struct vq_dirty_log *log, uint64_t gpa, uint64_t len)
{
	uint64_t last;

	if (len == 0)
		return true;
	if (gpa + (len - 1) < gpa)
		return false;
	last = (gpa + (len - 1)) / VQ_LOG_PAGE;
	return last / 8 < log->size;
}

bool vq_log_covers_mem(const struct vq_dirty_log *log, const struct vq_mem *m)
{
	for (unsigned i = 0; i < vq_mem_count(m); i++) {
		const struct vq_mem_region *r = vq_mem_region_at(m, i);

		if (!vq_log_covers(log, r->gpa, r->size))
			return false;
	}
	return true;
}

void vq_log_mark(const struct vq_dirty_log *log, uint64_t gpa, uint64_t len)
{
	uint64_t page, last;

	if (len == 0 || gpa + (len - 1) < gpa)
		return;
	last = (gpa + (len - 1)) / VQ_LOG_PAGE;
	for (page = gpa / VQ_LOG_PAGE; page <= last && page / 8 < log->size; page++)
		/* release: the write being recorded is visible first */
		__atomic_fetch_or(&log->bits[page / 8], (uint8_t)(1u << (page % 8)),
				  __ATOMIC_RELEASE);
}

void vq_log_mark_iov(const struct vq_dirty_log *log, const struct vq_mem *m,
		     const struct iovec *iov, unsigned n, uint64_t len)
{
	for (unsigned i = 0; i < n && len; i++) {
		uint64_t chunk = iov[i].iov_len < len ? iov[i].iov_len : len;
		uint64_t gpa;

		/* every iovec came from one region (vq_mem_translate) */
		if (chunk && vq_mem_hva_to_gpa(m, iov[i].iov_base, &gpa) == 0)
			vq_log_mark(log, gpa, chunk);
		len -= chunk;
	}
}
