/* SPDX-License-Identifier: MIT */
/*
 * virtq-perf --dirty-log (net, vsock): live-migration logging switched on
 * as QEMU switches it, and the checks that the back-end marked what it
 * wrote (vhost-user "Migration": every page it writes, marked in the log).
 */
#ifndef VIRTQ_PERF_DIRTY_LOG_H
#define VIRTQ_PERF_DIRTY_LOG_H

#include <stdbool.h>
#include <stdint.h>

struct vq_vhu_frontend;

struct perf_dlog {
	const uint8_t *log;     /* one bit per 4 KiB guest page; NULL: off */
	uint64_t size;
};

/* Logging on (LOG_ALL and SET_LOG_BASE); says why not on stderr, after
 * who.  0 or -errno. */
int perf_dlog_on(struct perf_dlog *d, struct vq_vhu_frontend *f, const char *who);

/* Is every page of [gpa, gpa+len) marked?  (true for len 0) */
bool perf_dlog_marked(const struct perf_dlog *d, uint64_t gpa, uint64_t len);

/*
 * Guest memory copied when watching starts, checked at the end: a page
 * whose bytes changed must be marked, which is what a migration must send
 * again.  For memory only the back-end writes (receive buffers, a split
 * used ring) every change is the back-end's.  A packed descriptor ring is
 * written by both sides: a slot counts when it changed and ends as a used
 * descriptor (AVAIL == USED), which only the device writes.
 */
#define PERF_DLOG_RANGES 8

struct perf_dlog_watch {
	struct {
		const uint8_t *hva;
		uint64_t gpa, len;
		uint8_t *copy;
		bool packed_desc;
	} r[PERF_DLOG_RANGES];
	unsigned n;
};

/* Watch [gpa, gpa+len) at hva from now on.  0, -ENOSPC, -ENOMEM. */
int perf_dlog_watch(struct perf_dlog_watch *w, const void *hva, uint64_t gpa,
		    uint64_t len, bool packed_desc);
/* Pages the back-end changed since (added to *changed) and, returned, how
 * many of them are not marked. */
uint64_t perf_dlog_unmarked(const struct perf_dlog_watch *w, const struct perf_dlog *d,
			    uint64_t *changed);
void perf_dlog_watch_free(struct perf_dlog_watch *w);

/* Watch what the back-end writes of rings [0, nrings): each device area
 * (split: the used ring) and, packed, the descriptors it marks used.
 * 0 or -errno. */
int perf_dlog_watch_rings(struct perf_dlog_watch *w, struct vq_vhu_frontend *f,
			  unsigned nrings);
/* Stop rings [0, nrings) (GET_VRING_BASE, as before a migration's last
 * sync), then the pages of w the back-end changed (added to *changed) and,
 * returned, how many are not marked; -1 when a ring did not stop (said on
 * stderr, after who). */
int64_t perf_dlog_stop_check(const struct perf_dlog_watch *w, const struct perf_dlog *d,
			     struct vq_vhu_frontend *f, unsigned nrings,
			     uint64_t *changed, const char *who);

#endif
