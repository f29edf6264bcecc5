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

#include <signal.h>
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
	/* Zero: room for fields a later version adds (0 = today's
	 * behaviour); vq_mem_add refuses others with -EINVAL. */
	uint64_t reserved[4];
};

/* The most regions a map holds (vhost-user's largest slot count). */
#define VQ_MEM_MAX_REGIONS 509u

/* An empty map in *out.  0 or -ENOMEM.  A map is not locked: any number of
 * threads may translate through it, but it changes (add, remove, free)
 * only while none does (the back-end stops its rings first). */
int vq_mem_new(struct vq_mem **out);
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

/* How the device accesses a buffer (vhost's VHOST_ACCESS_*): checked
 * against an IOTLB entry's permission, ignored without an IOTLB. */
#define VQ_ACCESS_RO 1u         /* the device reads */
#define VQ_ACCESS_WO 2u         /* the device writes */
#define VQ_ACCESS_RW 3u

/*
 * Translate the device-visible range [addr, addr+len) into iovecs, appending
 * to iov[*n .. max).  addr is guest-physical, or an I/O virtual address
 * when an IOTLB is enabled (below).  A range that crosses from one region
 * into an adjacent one becomes one iovec per region (pieces that are
 * contiguous here are merged).  A zero length adds nothing.
 * Returns 0, -EFAULT (some byte is in no region, the range wraps, or an
 * IOTLB entry does not allow the access), -ENOBUFS (more than max iovecs
 * would be needed) or -EAGAIN (an IOTLB miss: the miss handler was called;
 * try again after an update).
 */
int vq_mem_translate_access(const struct vq_mem *m, uint64_t addr,
			    uint64_t len, unsigned access, struct iovec *iov,
			    unsigned max, unsigned *n);
/* The same for an access that reads and writes (six arguments: they all
 * travel in registers, which the ring's per-descriptor path without an
 * IOTLB keeps to). */
int vq_mem_translate(const struct vq_mem *m, uint64_t addr, uint64_t len,
		     struct iovec *iov, unsigned max, unsigned *n);

/* A contiguous host pointer for the guest-physical [gpa, gpa+len) when the
 * whole range lies in one region; NULL otherwise. */
void *vq_mem_gpa_to_hva(const struct vq_mem *m, uint64_t gpa, uint64_t len);

/* The same for a device-visible address, as vq_mem_translate reads it
 * (descriptor tables and rings, read in place): 0 and *hva, -EFAULT (not
 * in one piece here, or not allowed) or -EAGAIN (an IOTLB miss). */
int vq_mem_map_contig(const struct vq_mem *m, uint64_t addr, uint64_t len,
		      unsigned access, void **hva);

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
 * The IOTLB (VQ_F_ACCESS_PLATFORM behind a virtual IOMMU): the device
 * sees I/O virtual addresses, and the front-end tells us, one entry at a
 * time, which IOVA range maps to which of its addresses with what
 * permission (vhost-user "IOMMU support").  With an IOTLB enabled, every
 * device-visible address goes IOVA -> front-end address -> here.
 *
 * Queues translate on their own threads while one control thread updates:
 * the entries are an immutable sorted snapshot, replaced whole on each
 * change, so a reader never sees a half-made table.  A replaced snapshot
 * is kept until vq_mem_iotlb_reclaim(), which the caller runs only when no
 * queue can still be reading one: all stopped, or each seen by
 * vq_dev_iotlb_quiescent() after the change.  An invalidation must also
 * wait for that: a queue may still be using what it translated before.
 */
#define VQ_IOTLB_MAX_ENTRIES 2048u      /* vhost's default max_iotlb_entries */

struct vq_iotlb_entry {
	uint64_t iova;
	uint64_t size;          /* > 0 */
	uint64_t uaddr;         /* start in the frontend's address space */
	unsigned perm;          /* VQ_ACCESS_* */
	/* Zero: room for fields a later version adds (0 = today's
	 * behaviour); vq_mem_iotlb_update refuses others with -EINVAL. */
	uint64_t reserved[4];
};

/* Called on the translating thread for an address no entry holds.  It
 * should ask the front-end (at most once per address while the question
 * is open: the queue will try again and again). */
typedef void (*vq_iotlb_miss_fn)(void *arg, uint64_t iova, unsigned access);

/* Turn the IOTLB on (empty) or off (entries forgotten).  Only while no
 * queue translates.  0 or -ENOMEM. */
int vq_mem_iotlb_enable(struct vq_mem *m, vq_iotlb_miss_fn miss, void *arg);
void vq_mem_iotlb_disable(struct vq_mem *m);
bool vq_mem_iotlb_enabled(const struct vq_mem *m);
/* Add an entry; entries it overlaps are dropped first.  -EINVAL (empty,
 * wrapping, no permission, or a front-end range outside the memory map),
 * -ENOSPC (full: invalidate first), -ENOMEM, -ENXIO (not enabled). */
int vq_mem_iotlb_update(struct vq_mem *m, const struct vq_iotlb_entry *e);
/* Drop every entry overlapping [iova, iova+size) (size 0 or a wrapping
 * range: to the end).  Returns how many were dropped, or -ENOMEM (nothing
 * was dropped). */
int vq_mem_iotlb_invalidate(struct vq_mem *m, uint64_t iova, uint64_t size);
unsigned vq_mem_iotlb_count(const struct vq_mem *m);
/* Changes with every update and invalidation (0 without an IOTLB): a queue
 * that met a miss waits for it to move. */
uint32_t vq_mem_iotlb_generation(const struct vq_mem *m);
/* Replaced snapshots waiting for vq_mem_iotlb_reclaim. */
unsigned vq_mem_iotlb_retired(const struct vq_mem *m);
void vq_mem_iotlb_reclaim(struct vq_mem *m);

/*
 * A dirty-page log (vhost's VHOST_F_LOG_ALL, for live migration): one bit per
 * 4 KiB guest-physical page, bit (gpa / 4096) % 8 of byte gpa / 32768.  The
 * frontend reads and clears it while we write, so bits are set with atomic
 * OR, each after the guest-memory write it records: a bit set first could be
 * harvested before the write lands, and the page would migrate stale.
 */
#define VQ_DIRTY_LOG_PAGE 4096u

struct vq_dirty_log {
	uint8_t *bits;
	uint64_t size;          /* bytes of bitmap: covers size * 8 pages */
	/* Zero: room for fields a later version adds (0 = today's
	 * behaviour); vq_dev_set_log refuses others with -EINVAL. */
	uint64_t reserved[4];
};

/* Does the log have a bit for every page of [gpa, gpa+len)? */
bool vq_dirty_log_covers(const struct vq_dirty_log *log, uint64_t gpa, uint64_t len);
/* Does it cover every region of the map? */
bool vq_dirty_log_covers_mem(const struct vq_dirty_log *log, const struct vq_mem *m);
/* Mark the pages of [gpa, gpa+len) dirty now (pages past the log are
 * skipped: callers check coverage when they set the log up). */
void vq_dirty_log_mark(const struct vq_dirty_log *log, uint64_t gpa, uint64_t len);

/*
 * Guest memory files a front-end truncates under us.  The vhost-user
 * back-end maps the files the front-end passes (guest memory, the dirty
 * log); touching a page the file no longer has raises SIGBUS on whatever
 * thread touches it.  Unless the file is a memfd sealed against shrinking
 * (QEMU's memory-backend-memfd seals by default; its size was checked when
 * it was mapped), the library guards the mapping: its SIGBUS handler,
 * installed the first time a mapping is guarded, replaces the whole
 * mapping with anonymous zero pages (the faulting access then completes:
 * reads see zeros, writes go to private memory) and shuts down the
 * connection that passed the file, which the back-end then closes with a
 * message naming the region.  Any other SIGBUS goes to the handler
 * installed before ours, or kills the process as it would have.
 *
 * Replacement rather than siglongjmp: no access pays for it (no setjmp
 * around each one), and it covers any code that touches guest memory: the
 * rings read in place, a device's memcpy, an application's callback.  The
 * kernel's own copies from or to guest buffers (read, write, sendmsg) do
 * not raise SIGBUS: they fail with EFAULT or return a short count, which a
 * device meets as a failed I/O.
 *
 * A program that installs its own SIGBUS handler after the library has
 * guarded a mapping calls this first, and returns when it returns true:
 * the fault was in a guarded mapping and is dealt with.  Async-signal-safe.
 */
bool vq_mem_handle_sigbus(const siginfo_t *si);

#ifdef __cplusplus
}
#endif
#endif
