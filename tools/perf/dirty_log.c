// SPDX-License-Identifier: MIT
/* virtq-perf --dirty-log: see dirty_log.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <virtq/mem.h>
#include <virtq/spec.h>
#include <virtq/guest/frontend.h>

#include "dirty_log.h"

int perf_dlog_on(struct perf_dlog *d, struct vq_vhu_frontend *f, const char *who)
{
	int r = vq_vhu_frontend_set_logging(f, true);

	if (r < 0) {
		fprintf(stderr, "%s: --dirty-log: %s\n", who, vq_vhu_frontend_error_msg(f));
		return r;
	}
	d->log = vq_vhu_frontend_log(f, &d->size);
	return 0;
}

/* The back-end writes the log while we read it: bytes, never torn. */
static bool page_marked(const struct perf_dlog *d, uint64_t p)
{
	return p / 8 < d->size &&
	       (__atomic_load_n(&d->log[p / 8], __ATOMIC_RELAXED) & (1u << (p % 8)));
}

bool perf_dlog_marked(const struct perf_dlog *d, uint64_t gpa, uint64_t len)
{
	uint64_t p, last;

	if (!len)
		return true;
	last = (gpa + len - 1) / VQ_DIRTY_LOG_PAGE;
	for (p = gpa / VQ_DIRTY_LOG_PAGE; p <= last; p++)
		if (!page_marked(d, p))
			return false;
	return true;
}

int perf_dlog_watch(struct perf_dlog_watch *w, const void *hva, uint64_t gpa,
		    uint64_t len, bool packed_desc)
{
	if (w->n == PERF_DLOG_RANGES)
		return -ENOSPC;
	w->r[w->n].copy = malloc(len ? len : 1);
	if (!w->r[w->n].copy)
		return -ENOMEM;
	memcpy(w->r[w->n].copy, hva, len);
	w->r[w->n].hva = hva;
	w->r[w->n].gpa = gpa;
	w->r[w->n].len = len;
	w->r[w->n].packed_desc = packed_desc;
	w->n++;
	return 0;
}

/* Did the device write [at, at+n) of range k since the copy? */
static bool device_changed(const struct perf_dlog_watch *w, unsigned k, uint64_t at,
			   uint64_t n)
{
	const uint8_t *now = w->r[k].hva + at, *was = w->r[k].copy + at;
	uint64_t i;

	if (!w->r[k].packed_desc)
		return memcmp(now, was, n) != 0;
	/* slots (struct vq_packed_desc) are 16-byte aligned in the ring:
	 * never across a page */
	for (i = 0; i + 16 <= n; i += 16) {
		struct vq_packed_desc d;
		bool avail, used;

		memcpy(&d, now + i, sizeof(d));
		avail = vq_le16(d.flags) & VQ_DESC_F_AVAIL;
		used = vq_le16(d.flags) & VQ_DESC_F_USED;
		if (avail == used && memcmp(now + i, was + i, sizeof(d)))
			return true;
	}
	return false;
}

uint64_t perf_dlog_unmarked(const struct perf_dlog_watch *w, const struct perf_dlog *d,
			    uint64_t *changed)
{
	uint64_t bad = 0;
	unsigned k;

	for (k = 0; k < w->n; k++) {
		uint64_t at = 0;

		while (at < w->r[k].len) {
			uint64_t gpa = w->r[k].gpa + at;
			uint64_t n = VQ_DIRTY_LOG_PAGE - gpa % VQ_DIRTY_LOG_PAGE;

			if (n > w->r[k].len - at)
				n = w->r[k].len - at;
			if (device_changed(w, k, at, n)) {
				(*changed)++;
				if (!page_marked(d, gpa / VQ_DIRTY_LOG_PAGE))
					bad++;
			}
			at += n;
		}
	}
	return bad;
}

void perf_dlog_watch_free(struct perf_dlog_watch *w)
{
	while (w->n)
		free(w->r[--w->n].copy);
}

int perf_dlog_watch_rings(struct perf_dlog_watch *w, struct vq_vhu_frontend *f,
			  unsigned nrings)
{
	bool packed = vq_vhu_frontend_features(f) & VQ_BIT(VQ_F_RING_PACKED);
	struct vq_gpa_range a[3];
	int r = 0;

	for (unsigned i = 0; i < nrings && r == 0; i++) {
		r = vq_vhu_frontend_ring_gpa(f, i, a);
		if (r == 0)
			r = perf_dlog_watch(w, vq_vhu_frontend_phys_hva(f, a[2].gpa, a[2].len),
					    a[2].gpa, a[2].len, false);
		if (r == 0 && packed)
			r = perf_dlog_watch(w, vq_vhu_frontend_phys_hva(f, a[0].gpa, a[0].len),
					    a[0].gpa, a[0].len, true);
	}
	return r;
}

int64_t perf_dlog_stop_check(const struct perf_dlog_watch *w, const struct perf_dlog *d,
			     struct vq_vhu_frontend *f, unsigned nrings,
			     uint64_t *changed, const char *who)
{
	uint32_t base;

	for (unsigned i = 0; i < nrings; i++)
		if (vq_vhu_frontend_stop_queue(f, i, &base) < 0) {
			fprintf(stderr, "%s: --dirty-log: stopping ring %u: %s\n", who, i,
				vq_vhu_frontend_error_msg(f));
			return -1;
		}
	return (int64_t)perf_dlog_unmarked(w, d, changed);
}
