/* SPDX-License-Identifier: MIT */
/*
 * Private to the ring layer: the ops tables each layout file implements, the
 * state every queue shares, and the helpers that walk descriptors the same
 * way for every layout.
 */
#ifndef VIRTQ_RING_INTERNAL_H
#define VIRTQ_RING_INTERNAL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <virtq/ring.h>

#include "util.h"

/*
 * Memory ordering on shared ring memory (the labels: docs/RULES.md, with
 * each rule's pair and the test that breaks without it).  The ring is
 * plain memory shared with another thread or process.  The words the two sides hand over
 * (indices, flags, event fields) are accessed with atomic builtins; the
 * descriptor bodies and used elements are ordered by the release store that
 * publishes them and the acquire load that discovers them (D1/D3, P1/P3,
 * V1/V2).  A full fence is needed only where a store must be ordered before
 * a later load (D2, D4, P2, P4, V3, V4).
 */
#define vq_load_acquire(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define vq_load_relaxed(p)     __atomic_load_n((p), __ATOMIC_RELAXED)
#define vq_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define vq_store_relaxed(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define vq_mb()                __atomic_thread_fence(__ATOMIC_SEQ_CST)

#define VQ_ERRMSG_MAX 128

struct vq_dev;
struct vq_drv;

struct vq_dev_ops {
	int  (*pop)(struct vq_dev *d, struct vq_chain *c);
	/* Optional: a layout's faster burst (NULL: pop in a loop).  Same
	 * contract as vq_dev_pop_burst. */
	int  (*pop_burst)(struct vq_dev *d, struct vq_chain *c, unsigned n);
	int  (*unpop)(struct vq_dev *d, const struct vq_chain *c, unsigned n);
	int  (*fill)(struct vq_dev *d, const struct vq_chain *c, uint32_t len);
	int  (*flush)(struct vq_dev *d);
	bool (*should_signal)(struct vq_dev *d);
	/* Optional: should_signal over everything published since the last
	 * notification (NULL: should_signal already looks that far). */
	bool (*signal_owed)(struct vq_dev *d);
	void (*disable_notify)(struct vq_dev *d);
	int  (*enable_notify)(struct vq_dev *d);
	bool (*has_avail)(struct vq_dev *d);
	/* Optional (vq_dev_prefetch_avail). */
	void (*prefetch_avail)(const struct vq_dev *d);
	struct vq_dev_state (*get_state)(const struct vq_dev *d);
	void (*reset)(struct vq_dev *d);
	void (*destroy)(struct vq_dev *d);
};

struct vq_dev_log;

/* What a queue keeps of its config: vq_dev_config less the reserved words
 * (adding them to the public struct would have moved every layout's hot
 * fields by 32 bytes).  A field a later version adds to the config is
 * added here too. */
struct vq_dev_setup {
	uint64_t features;
	uint16_t num;
	struct vq_ring_addr ring;
	const struct vq_mem *mem;
	uint16_t avail_idx;
	uint16_t used_idx;
	/* used_idx is not known yet: vq_dev_take_used_idx reads it (in the
	 * struct's tail padding: the queue kept its size) */
	bool used_idx_unread;
};

static inline struct vq_dev_setup vq_dev_setup_of(const struct vq_dev_config *c)
{
	return (struct vq_dev_setup){ .features = c->features, .num = c->num,
		.ring = c->ring, .mem = c->mem, .avail_idx = c->avail_idx,
		.used_idx = c->used_idx };
}

/* The same for vq_drv_config. */
struct vq_drv_setup {
	uint64_t features;
	uint16_t num;
	struct vq_ring_addr ring;
	void *indirect;
	uint64_t indirect_gpa;
	uint16_t indirect_max;
};

static inline struct vq_drv_setup vq_drv_setup_of(const struct vq_drv_config *c)
{
	return (struct vq_drv_setup){ .features = c->features, .num = c->num,
		.ring = c->ring, .indirect = c->indirect,
		.indirect_gpa = c->indirect_gpa, .indirect_max = c->indirect_max };
}

/* State every device-side queue has; each layout embeds it first.  The log
 * pointer took 8 bytes of errmsg, so the size stayed what it was and every
 * layout's hot fields kept their offsets (and cache lines). */
struct vq_dev {
	const struct vq_dev_ops *ops;
	struct vq_dev_setup cfg;
	int err;                        /* 0 or the -errno that broke it */
	/* cfg.mem had an IOTLB at creation: misses and quiescence tracked */
	struct vq_dev_iotlb *iotlb;
	char errmsg[VQ_ERRMSG_MAX - 16];
	/* logging on (vq_dev_set_log): ops is log->ops, a copy of the
	 * layout's with fill, flush and the notification changes wrapped */
	struct vq_dev_log *log;
};

struct vq_drv_ops {
	int  (*add)(struct vq_drv *q, const struct vq_seg *seg, unsigned nout,
		    unsigned nin, void *token);
	/* n single-descriptor buffers (n <= num, tokens checked): returns how
	 * many fitted. */
	int  (*add_burst)(struct vq_drv *q, const struct vq_seg *seg,
			  void *const *tokens, unsigned n, bool writable);
	int  (*kick_prepare)(struct vq_drv *q);
	int  (*get)(struct vq_drv *q, void **token, uint32_t *len);
	int  (*get_burst)(struct vq_drv *q, void **tokens, uint32_t *lens, unsigned n);
	void (*disable_cb)(struct vq_drv *q);
	int  (*enable_cb)(struct vq_drv *q);
	int  (*enable_cb_delayed)(struct vq_drv *q);
	bool (*has_used)(struct vq_drv *q);
	void *(*detach_unused)(struct vq_drv *q);
	unsigned (*free_slots)(const struct vq_drv *q);
	unsigned (*outstanding)(const struct vq_drv *q);
	void (*reset)(struct vq_drv *q);
	void (*destroy)(struct vq_drv *q);
};

struct vq_drv {
	const struct vq_drv_ops *ops;
	struct vq_drv_setup cfg;
	int err;
	char errmsg[VQ_ERRMSG_MAX];
};

/* A layout's get_burst: its get, inlined into the loop (an indirect call
 * per buffer costs a few ns of the ~40 a 64-byte frame has). */
#define VQ_DRV_GET_BURST(name, get)                                          \
static int name(struct vq_drv *q, void **tokens, uint32_t *lens, unsigned n) \
{                                                                            \
	unsigned i;                                                          \
                                                                             \
	for (i = 0; i < n; i++) {                                            \
		int r = get(q, &tokens[i], &lens[i]);                        \
                                                                             \
		if (r <= 0)                                                  \
			return i ? (int)i : r;                               \
	}                                                                    \
	return (int)i;                                                       \
}

/* A buffer's byte count as a 32-bit used length: in order, a buffer the
 * device completed without naming it is taken as written whole. */
static inline uint32_t vq_len32(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* Layout constructors (split.c, packed.c): validate the layout-specific
 * parts of the config, allocate, initialise. */
VQ_INTERNAL int vq_split_dev_new(const struct vq_dev_config *cfg, struct vq_dev **out);
VQ_INTERNAL int vq_packed_dev_new(const struct vq_dev_config *cfg, struct vq_dev **out);
VQ_INTERNAL int vq_split_drv_new(const struct vq_drv_config *cfg, struct vq_drv **out);
VQ_INTERNAL int vq_packed_drv_new(const struct vq_drv_config *cfg, struct vq_drv **out);

/* Break a queue: record err and a message (the first one wins), return err. */
VQ_INTERNAL int vq_dev_break(struct vq_dev *d, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
VQ_INTERNAL int vq_drv_break(struct vq_drv *q, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static inline bool vq_has(uint64_t features, unsigned bit)
{
	return features & VQ_BIT(bit);
}

/* ---- walking a chain (device side), shared by the layouts ---- */

/* Start filling c: counts and lengths to zero. */
static inline void vq_chain_begin(struct vq_chain *c, uint16_t id)
{
	c->nout = c->nin = 0;
	c->out_len = c->in_len = 0;
	c->id = id;
	c->ndesc = 0;
}

/*
 * The memory region the last descriptor of a burst fell in, so that the next
 * ones translate without a search (DPDK keeps the same per burst).  It lives
 * for one pop call only: the map may change between calls (while the queue
 * is stopped), never during one.  size 0: empty.  Never filled with an
 * IOTLB, whose addresses are not guest-physical.
 */
struct vq_xlate {
	uint64_t gpa, size;
	uint8_t *hva;
};

#define VQ_XLATE_EMPTY ((struct vq_xlate){ 0, 0, NULL })

/*
 * Append one descriptor's buffer to c: translate [addr, addr+len) through the
 * memory map, enforce "no readable descriptor after a writable one"
 * (2.7.4.2 / 2.8.6), sum lengths in 64 bits, and keep the region it fell in
 * in x.  Breaks d and returns -errno on bad input; where names the
 * descriptor for the message.  vq_chain_add_x's slow path: a cache miss, or
 * anything but a non-empty buffer that fits.
 */
VQ_INTERNAL int vq_chain_add_miss(struct vq_dev *d, struct vq_chain *c,
				  struct vq_xlate *x, uint64_t addr,
				  uint32_t len, bool writable,
				  const char *where, unsigned idx);

/* Is [addr, addr + len) non-empty and inside x's region?  *off: where in
 * it.  A zero length fails "len - 1 < room". */
static inline bool vq_xlate_hit(const struct vq_xlate *x, uint64_t addr,
				uint32_t len, uint64_t *off)
{
	*off = addr - x->gpa;
	return *off < x->size && (uint64_t)len - 1 < x->size - *off;
}

/*
 * vq_chain_add_miss with the region cached: the same iovec and the same checks
 * (the buffer inside one region, non-empty, room for its iovec, no readable
 * buffer after a writable one), a few instructions when they pass.  A zero
 * length takes the miss path, which adds nothing for it.
 */
static inline int vq_chain_add_x(struct vq_dev *d, struct vq_chain *c,
				 struct vq_xlate *x, uint64_t addr, uint32_t len,
				 bool writable, const char *where, unsigned idx)
{
	unsigned n = c->nout + c->nin;
	uint64_t off;

	if (likely(vq_xlate_hit(x, addr, len, &off) && n < c->iov_max &&
		   (writable || !c->nin))) {
		c->iov[n].iov_base = x->hva + off;
		c->iov[n].iov_len = len;
		if (writable) {
			c->nin++;
			c->in_len += len;
		} else {
			c->nout++;
			c->out_len += len;
		}
		return 0;
	}
	return vq_chain_add_miss(d, c, x, addr, len, writable, where, idx);
}

/* Make c the chain of the one buffer [hva, hva + len), translated and
 * checked (c->iov_max >= 1); the caller sets ndesc. */
static inline void vq_chain_set_one(struct vq_chain *c, void *hva, uint32_t len,
				    bool writable, uint16_t id)
{
	c->iov[0].iov_base = hva;
	c->iov[0].iov_len = len;
	c->nout = !writable;
	c->nin = writable;
	c->out_len = writable ? 0 : len;
	c->in_len = writable ? len : 0;
	c->id = id;
}

/*
 * A chain of one descriptor, through the cache: vq_chain_begin and
 * vq_chain_add_x in one, with what a fresh chain is known to be (no iovec
 * yet, nothing writable before) folded in.
 */
static inline int vq_chain_one(struct vq_dev *d, struct vq_chain *c,
			       struct vq_xlate *x, uint16_t id, uint64_t addr,
			       uint32_t len, bool writable, const char *where,
			       unsigned idx)
{
	uint64_t off;

	if (likely(vq_xlate_hit(x, addr, len, &off) && c->iov_max)) {
		vq_chain_set_one(c, x->hva + off, len, writable, id);
		c->ndesc = 0;
		return 0;
	}
	vq_chain_begin(c, id);
	return vq_chain_add_miss(d, c, x, addr, len, writable, where, idx);
}

/*
 * Map an indirect table given by a descriptor (addr, len): len must be a
 * non-zero multiple of 16 of at most 65536 entries, and the table must lie
 * in one memory region.  Returns the table and sets *count, or NULL after
 * breaking d, or NULL with d unbroken on an IOTLB miss (the chain waits:
 * -EAGAIN).
 */
VQ_INTERNAL const void *vq_indirect_table(struct vq_dev *d, uint64_t addr, uint32_t len,
			      unsigned *count, unsigned head);

/*
 * Zeroed memory on whole cache lines of its own.  Each side's private state
 * is written on every call; sharing a line with the other side's (the two
 * are often allocated back to back, by one thread) would bounce the line
 * between the cores on every buffer.
 */
static inline void *vq_ring_zalloc(size_t n, size_t size)
{
	size_t bytes;
	void *p;

	if (__builtin_mul_overflow(n, size, &bytes) || bytes > SIZE_MAX - 63)
		return NULL;
	bytes = (bytes + 63) & ~(size_t)63;
	p = aligned_alloc(64, bytes);
	if (p)
		memset(p, 0, bytes);
	return p;
}

#endif
