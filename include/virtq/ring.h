/* SPDX-License-Identifier: MIT */
/*
 * virtq/ring.h - both ends of a virtqueue, split and packed.
 *
 * The device side (struct vq_dev) consumes available buffers and publishes
 * used ones: the vhost role.  The driver side (struct vq_drv) posts buffers
 * and reaps them: the virtio_ring.c role.  The layout (split or packed) and
 * the variants (VQ_F_IN_ORDER, VQ_F_EVENT_IDX, VQ_F_INDIRECT_DESC)
 * are chosen once, from the negotiated features, when a queue is created.
 *
 * Conventions:
 *  - Functions return 0 or a positive count on success and a negative errno
 *    on failure.  The library has no event loop and does no I/O.
 *  - Anything read from shared memory is validated.  A bad value moves the
 *    queue to a broken state: every later call fails fast with the same
 *    error, and vq_*_error_msg() says why.  Only a reset leaves that state.
 *  - A queue handle is used by one thread at a time.  The driver side and the
 *    device side of one ring may run on different threads (or processes):
 *    their only shared state is the ring memory, accessed with the ordering
 *    the spec requires.
 */
#ifndef VIRTQ_RING_H
#define VIRTQ_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <virtq/mem.h>
#include <virtq/spec.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The features the ring layer implements (and so may be negotiated). */
#define VQ_RING_FEATURES (VQ_BIT(VQ_F_VERSION_1) |             \
			  VQ_BIT(VQ_F_INDIRECT_DESC) |          \
			  VQ_BIT(VQ_F_EVENT_IDX) |              \
			  VQ_BIT(VQ_F_RING_PACKED) |            \
			  VQ_BIT(VQ_F_IN_ORDER))

/* Where a ring's three areas are in this process. */
struct vq_ring_addr {
	void *desc;     /* split: descriptor table  packed: descriptor ring */
	void *driver;   /* split: available ring    packed: driver event suppression */
	void *device;   /* split: used ring         packed: device event suppression */
};

/*
 * Layout of a ring in one contiguous block: offsets of the three areas from
 * the block's start, each aligned as the spec requires, and the block size.
 * Returns the size, or 0 if num is not valid for the layout.
 */
uint64_t vq_ring_layout(uint64_t features, uint16_t num, uint64_t off[3]);

/* Is num a valid queue size for this layout?  (split: a power of two;
 * packed: any size; both at most 32768) */
bool vq_ring_num_valid(uint64_t features, uint32_t num);

/*
 * The size and alignment the spec gives each of a ring's three areas, in
 * struct vq_ring_addr's order (2.7 split, 2.8.10.1 packed), for a layout and
 * queue size: what a device checks the addresses it is given against.  A
 * split ring's event words (used_event, avail_event) count only with
 * VQ_F_EVENT_IDX, as only then are they touched.  0, or -EINVAL if num
 * is not valid for the layout.
 */
int vq_ring_areas(uint64_t features, uint16_t num, uint64_t size[3],
		  uint64_t align[3]);

/*
 * The used index of a split ring whose device area is at device, read from
 * memory with acquire: where a device resumes a ring the driver kept
 * (vhost-user's SET_VRING_BASE gives only the avail index).  0, or -EINVAL
 * for a packed ring, which keeps no used index in memory.
 */
int vq_ring_used_idx(uint64_t features, const void *device, uint16_t *idx);

/* ------------------------------------------------------------------ */
/* Device side                                                         */
/* ------------------------------------------------------------------ */

struct vq_dev;

/* A guest-physical address range. */
struct vq_gpa_range {
	uint64_t gpa, len;
};

struct vq_dev_config {
	uint64_t features;          /* negotiated */
	uint16_t num;               /* queue size */
	struct vq_ring_addr ring;   /* host addresses of the areas */
	const struct vq_mem *mem;   /* translates descriptor addresses */
	/*
	 * Where to resume (vhost-user SET_VRING_BASE).  Split: the next avail
	 * index to read and the used index to write (read used->idx for a ring
	 * that was running).  Packed: bits 0-14 the ring position, bit 15 the
	 * wrap counter; {0x8000, 0x8000} for a fresh ring.
	 */
	uint16_t avail_idx;
	uint16_t used_idx;
	/* Zero: room for fields a later version adds (0 = today's
	 * behaviour); vq_dev_new refuses others with -EINVAL. */
	uint64_t reserved[4];
};

/* A chain popped from the available ring, as iovecs into guest memory. */
struct vq_chain {
	struct iovec *iov;          /* caller's storage ... */
	uint32_t iov_max;           /* ... and its capacity */
	uint32_t nout;              /* iov[0, nout) are device-readable */
	uint32_t nin;               /* iov[nout, nout+nin) are device-writable */
	uint64_t out_len;           /* sum of readable lengths */
	uint64_t in_len;            /* sum of writable lengths */
	uint16_t id;                /* head index (split) or buffer id (packed) */
	uint16_t ndesc;             /* ring slots taken (an indirect table is one) */
};

struct vq_dev_state {
	uint16_t avail_idx;         /* same encoding as vq_dev_config */
	uint16_t used_idx;
};

/* Validate the config (sizes, alignment, features) and create the queue.
 * -EINVAL for a bad config (no memory map, a packed position not below
 * num, a reserved word not zero included), -ENOMEM. */
int vq_dev_new(const struct vq_dev_config *cfg, struct vq_dev **out);
void vq_dev_free(struct vq_dev *d);
/* Back to the state vq_dev_new() made (indices from the config, not broken,
 * nothing staged). */
void vq_dev_reset(struct vq_dev *d);

/*
 * Live-migration logging: from now on every chain's written bytes are marked
 * in log when it is filled, and the guest-physical ranges ring[0, nring) (the
 * areas this side writes: split used ring, packed descriptor ring and device
 * area) after each flush and notification change.  A NULL log turns it off.
 * Call while no thread uses the queue.  A queue that does not log runs the
 * layout's own functions: logging costs nothing until it is on.
 * 0, -EINVAL (nring > 2) or -ENOMEM.
 */
int vq_dev_set_log(struct vq_dev *d, const struct vq_dirty_log *log,
		   const struct vq_gpa_range *ring, unsigned nring);

/*
 * Pop the next available chain into c (whose iov/iov_max the caller set).
 * Returns 1, 0 if none is available, or -errno if the queue is broken
 * (possibly by this chain).  A chain needing more than iov_max iovecs breaks
 * the queue with -ENOBUFS.
 */
int vq_dev_pop(struct vq_dev *d, struct vq_chain *c);

/* With an IOTLB (cfg.mem had one when the queue was made): is no chain
 * translated before this call still in the device's hands?  For the thread
 * that invalidates IOTLB entries, which waits for every queue to say so
 * once after the invalidation before it may report it done.  Always true
 * without an IOTLB. */
bool vq_dev_iotlb_quiescent(const struct vq_dev *d);

/* Did the last pop stop at an IOTLB miss (so it returned 0 with chains
 * still available, and the queue looks empty until the front-end
 * answers, or for 250 ms: then it looks again, and a pop asks again if
 * the miss handler wants to)?  (Its own thread.) */
bool vq_dev_iotlb_waiting(struct vq_dev *d);
/* Make d look empty for as long as other waits for the IOTLB: a device
 * that cannot use d's buffers without other's (a loopback's transmit ring
 * waiting for receive buffers) sleeps instead of spinning.  Both queues
 * must share one memory map; the caller runs both. */
void vq_dev_iotlb_wait_like(struct vq_dev *d, struct vq_dev *other);

/* Pop up to n chains.  Returns how many, or -errno if the queue was broken
 * before any was popped; chains popped before a bad one are returned and
 * their iovecs stay valid, but the queue is broken: fill and flush fail,
 * nothing more is published until vq_dev_reset(). */
int vq_dev_pop_burst(struct vq_dev *d, struct vq_chain *c, unsigned n);

/* Give back the last n popped chains (c[0..n) in pop order), which must not
 * have been filled: the next pop sees them again.  0, -EINVAL (c[0..n) are
 * not the last n popped, or one was filled), or the queue's -errno if it
 * is broken. */
int vq_dev_unpop(struct vq_dev *d, const struct vq_chain *c, unsigned n);

/*
 * Stage a used entry for chain c, of which len bytes were written (len <=
 * c->in_len).  Nothing is visible to the driver until vq_dev_flush().
 * With IN_ORDER chains must be filled in the order they were popped;
 * consecutive chains written completely are then published as one used
 * entry (2.7.9 / 2.8.8 "In-order use of descriptors").
 * Returns 0, -EINVAL (caller error: length too big, a chain not popped or
 * filled already, order broken; the queue is not broken by it), or the
 * queue's -errno if it is broken (nothing is staged).
 */
int vq_dev_fill(struct vq_dev *d, const struct vq_chain *c, uint32_t len);

/* Publish everything staged: used entries first, then one release store of
 * the used index (split) or the first head's flags (packed).
 * Returns the number of buffers published, or the queue's -errno if it is
 * broken (nothing is published). */
int vq_dev_flush(struct vq_dev *d);

/* fill + flush: one used entry published on its own.  As flush, or fill's
 * -errno. */
int vq_dev_push(struct vq_dev *d, const struct vq_chain *c, uint32_t len);

/*
 * After a flush: must the driver be notified of the used buffers published
 * since the last notification?  Applies VQ_F_EVENT_IDX or the flags, with
 * the full barrier the spec requires before reading them.  Returning true
 * records the notification as sent.
 */
bool vq_dev_should_signal(struct vq_dev *d);

/*
 * should_signal judged over every used buffer published since the last
 * notification sent, not only those since the last look: a driver whose
 * barrier failed may have moved used_event (or cleared the flag) before our
 * look and we read the old value.  For a queue gone quiet; it may send a
 * notification the driver does not need, never skip one it asked for.
 */
bool vq_dev_signal_owed(struct vq_dev *d);

/* Ask the driver not to kick (a hint; the driver may kick anyway). */
void vq_dev_disable_notify(struct vq_dev *d);

/*
 * Ask the driver to kick on new buffers, then re-check: returns 1 if buffers
 * became available meanwhile (the caller must process them rather than
 * sleep; notifications stay enabled), 0 if it may sleep, or -errno.
 */
int vq_dev_enable_notify(struct vq_dev *d);

/* Is a chain available?  A cheap probe for busy polling (no barrier beyond
 * an acquire load; no validation: vq_dev_pop does that). */
bool vq_dev_has_avail(struct vq_dev *d);

/* Start fetching the line the next vq_dev_pop reads first, for a device
 * that knows it will pop soon but has other misses to wait for first (a
 * loopback answering a frame it still has to read).  Only a hint: no
 * barrier, no validation, never faults; on a split ring, nothing. */
void vq_dev_prefetch_avail(const struct vq_dev *d);

/* The indices to resume from (vhost-user GET_VRING_BASE).  Staged but
 * unflushed entries are not counted. */
struct vq_dev_state vq_dev_get_state(const struct vq_dev *d);

uint16_t vq_dev_num(const struct vq_dev *d);
uint64_t vq_dev_features(const struct vq_dev *d);

/* 0, or the negative errno that broke the queue, and why. */
int vq_dev_error(const struct vq_dev *d);
/*
 * Break the queue for a device type's own rule (virtio-net's "Unexpected
 * descriptor format for TX", ...): the same broken state a ring rule
 * violation leads to.  The first error wins; returns the queue's error.
 */
int vq_dev_fail(struct vq_dev *d, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
const char *vq_dev_error_msg(const struct vq_dev *d);

/* ------------------------------------------------------------------ */
/* Driver side                                                         */
/* ------------------------------------------------------------------ */

struct vq_drv;

struct vq_drv_config {
	uint64_t features;          /* negotiated */
	uint16_t num;               /* queue size */
	struct vq_ring_addr ring;   /* host addresses; vq_drv_new zeroes them */
	/*
	 * Optional pool for indirect tables, in guest memory: num tables of
	 * indirect_max descriptors each, indirect_gpa being the pool's
	 * guest-physical address.  NULL: never use indirect descriptors.
	 */
	void *indirect;
	uint64_t indirect_gpa;
	uint16_t indirect_max;
	/* Zero: room for fields a later version adds (0 = today's
	 * behaviour); vq_drv_new refuses others with -EINVAL. */
	uint64_t reserved[4];
};

/* A guest-physical buffer segment. */
struct vq_seg {
	uint64_t addr;
	uint32_t len;
};

/* Validate the config and create the queue, zeroing the ring.  -EINVAL for
 * a bad config (features, size, areas as vq_dev_new; an indirect pool not
 * 16-byte aligned or with indirect_max below 2; a reserved word not zero),
 * -ENOMEM. */
int vq_drv_new(const struct vq_drv_config *cfg, struct vq_drv **out);
void vq_drv_free(struct vq_drv *q);
/* Forget every buffer and zero the ring (after the device was reset). */
void vq_drv_reset(struct vq_drv *q);

/*
 * Add a buffer: seg[0, nout) device-readable, seg[nout, nout+nin)
 * device-writable, with a non-NULL token given back by vq_drv_get().  An
 * indirect table is used when the features and the pool allow it and it
 * saves ring slots.  The buffer is visible to the device at the latest after
 * vq_drv_kick_prepare().
 * Returns 0, -ENOSPC (no room now), -EINVAL or -errno if broken.
 */
int vq_drv_add(struct vq_drv *q, const struct vq_seg *seg, unsigned nout,
	       unsigned nin, void *token);

/*
 * Add up to n buffers of one segment each, seg[i] with token tokens[i] (all
 * non-NULL), all device-readable or all device-writable: what a NIC-like
 * queue posts.  The same as n calls of vq_drv_add with nout or nin 1, but
 * the queue's state is read and written once per burst and (packed) one
 * release store makes the whole burst available.  Returns how many were
 * added (fewer than n, or 0, when the ring is full), -EINVAL or -errno if
 * broken.
 */
int vq_drv_add_burst(struct vq_drv *q, const struct vq_seg *seg,
		     void *const *tokens, unsigned n, bool writable);

/* Publish added buffers; returns 1 if the device must be notified (event
 * index or flags, after a full barrier), 0 if not, -errno if broken. */
int vq_drv_kick_prepare(struct vq_drv *q);

/*
 * Get one used buffer: its token and the length the device wrote.  With
 * IN_ORDER one used entry may complete several buffers; each is returned on
 * its own, in order.  Returns 1, 0 if none, -errno if the device misbehaved
 * (id never made available, length larger than the buffer, ...).
 */
int vq_drv_get(struct vq_drv *q, void **token, uint32_t *len);

/* Up to n at once; returns how many, or -errno if broken before any. */
int vq_drv_get_burst(struct vq_drv *q, void **tokens, uint32_t *lens, unsigned n);

/* Used-buffer notifications ("callbacks"). */
void vq_drv_disable_cb(struct vq_drv *q);
/* Enable; returns 1 if used buffers are already pending (process them, do
 * not sleep), 0 if the caller may sleep, -errno if broken. */
int vq_drv_enable_cb(struct vq_drv *q);
/* Enable, but with EVENT_IDX ask to be notified only when about 3/4 of the
 * outstanding buffers are used.  Same return values. */
int vq_drv_enable_cb_delayed(struct vq_drv *q);

/* Is a used buffer pending?  (acquire load only) */
bool vq_drv_has_used(struct vq_drv *q);

/* After the device stopped: return the token of one buffer that was added
 * but never used, or NULL when none is left. */
void *vq_drv_detach_unused(struct vq_drv *q);

/* Ring slots free for vq_drv_add (a chain of k segments takes k, or 1 if it
 * goes indirect). */
unsigned vq_drv_free_slots(const struct vq_drv *q);
/* Buffers added and not yet returned by vq_drv_get. */
unsigned vq_drv_outstanding(const struct vq_drv *q);

uint16_t vq_drv_num(const struct vq_drv *q);
uint64_t vq_drv_features(const struct vq_drv *q);
int vq_drv_error(const struct vq_drv *q);
const char *vq_drv_error_msg(const struct vq_drv *q);

#ifdef __cplusplus
}
#endif
#endif
