/* SPDX-License-Identifier: MIT */
/*
 * Helpers the packed-ring tests share: feature sets, direct views of the
 * descriptor ring and event structures, and a driver->device->driver round
 * trip with bytes checked.
 */
#ifndef PACKED_UTIL_H
#define PACKED_UTIL_H

#include <virtq/ring.h>

#include "ring_pair.h"

#define PACKED   (VQ_BIT(VQ_F_RING_PACKED))
#define EVIDX    (VQ_BIT(VQ_F_EVENT_IDX))
#define INDIRECT (VQ_BIT(VQ_F_INDIRECT_DESC))
#define INORDER  (VQ_BIT(VQ_F_IN_ORDER))

#define F_AVAIL VQ_DESC_F_AVAIL
#define F_USED  VQ_DESC_F_USED

static inline struct vq_packed_desc *ring_desc(struct ring_pair *p)
{
	return p->ring.desc;
}

static inline struct vq_event_suppress *drv_event(struct ring_pair *p)
{
	return p->ring.driver;
}

static inline struct vq_event_suppress *dev_event(struct ring_pair *p)
{
	return p->ring.device;
}

static inline uint16_t slot_flags(struct ring_pair *p, unsigned slot)
{
	return vq_le16(ring_desc(p)[slot].flags);
}

/* A buffer in guest memory: its address and host pointer. */
struct gbuf {
	uint64_t gpa;
	uint8_t *hva;
	uint32_t len;
};

static inline struct gbuf gbuf_new(struct ring_pair *p, uint32_t len)
{
	struct gbuf b;

	b.gpa = pair_alloc(p, len ? len : 1);
	b.hva = pair_hva(p, b.gpa);
	b.len = len;
	return b;
}

static inline void pattern(uint8_t *b, uint32_t len, unsigned seed)
{
	for (uint32_t i = 0; i < len; i++)
		b[i] = (uint8_t)(seed * 31 + i * 7 + 1);
}

static inline int pattern_ok(const uint8_t *b, uint32_t len, unsigned seed)
{
	for (uint32_t i = 0; i < len; i++)
		if (b[i] != (uint8_t)(seed * 31 + i * 7 + 1))
			return 0;
	return 1;
}

/* Bytes of an iovec list, flattened from offset off. */
static inline void iov_read(const struct iovec *iov, unsigned n, uint8_t *out,
			    uint64_t max)
{
	uint64_t o = 0;

	for (unsigned i = 0; i < n && o < max; i++) {
		uint64_t l = iov[i].iov_len;

		if (l > max - o)
			l = max - o;
		memcpy(out + o, iov[i].iov_base, l);
		o += l;
	}
}

static inline void iov_write(const struct iovec *iov, unsigned n,
			     const uint8_t *in, uint64_t len)
{
	uint64_t o = 0;

	for (unsigned i = 0; i < n && o < len; i++) {
		uint64_t l = iov[i].iov_len;

		if (l > len - o)
			l = len - o;
		memcpy(iov[i].iov_base, in + o, l);
		o += l;
	}
}

#define MAX_IOV 64

struct popped {
	struct vq_chain c;
	struct iovec iov[MAX_IOV];
};

static inline int pop1(struct ring_pair *p, struct popped *pc)
{
	pc->c.iov = pc->iov;
	pc->c.iov_max = MAX_IOV;
	return vq_dev_pop(p->dev, &pc->c);
}

/* Add a buffer of one readable and one writable segment. */
static inline void add_rw(struct ring_pair *p, struct gbuf *out, struct gbuf *in,
			  void *token)
{
	struct vq_seg s[2] = {
		{ .addr = out->gpa, .len = out->len },
		{ .addr = in->gpa, .len = in->len },
	};

	CHECK_EQ(vq_drv_add(p->drv, s, 1, 1, token), 0);
}

/* Add a buffer of n writable single-slot segments of len bytes each. */
static inline void add_in(struct ring_pair *p, uint64_t gpa, uint32_t len,
			  void *token)
{
	struct vq_seg s = { .addr = gpa, .len = len };

	CHECK_EQ(vq_drv_add(p->drv, &s, 0, 1, token), 0);
}

/* Is the queue broken with exactly err and a message? */
#define CHECK_DEV_BROKEN(p, e) do {                                          \
	CHECK_EQ(vq_dev_error((p)->dev), (e));                               \
	CHECK_RULE_FIRST(vq_dev_error_msg((p)->dev));                        \
	fprintf(stderr, "   (dev: %s)\n", vq_dev_error_msg((p)->dev));       \
} while (0)

#define CHECK_DRV_BROKEN(p, e) do {                                          \
	CHECK_EQ(vq_drv_error((p)->drv), (e));                               \
	CHECK_RULE_FIRST(vq_drv_error_msg((p)->drv));                        \
	fprintf(stderr, "   (drv: %s)\n", vq_drv_error_msg((p)->drv));       \
} while (0)

#endif
