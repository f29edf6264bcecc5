/* SPDX-License-Identifier: MIT */
/*
 * Private to the packed virtqueue (packed_dev.c, packed_drv.c): the flag and
 * event-suppression arithmetic both sides share (virtio 1.2 §2.8).
 */
#ifndef VIRTQ_PACKED_H
#define VIRTQ_PACKED_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ring_internal.h"

/* Ring positions carry the wrap counter in bit 15 in vq_dev_config,
 * vq_dev_state and the event structures' off_wrap. */
#define PACKED_POS_MASK 0x7fffu

/* 2.8.1: the driver makes a descriptor available with AVAIL = its wrap
 * counter and USED = the inverse. */
static inline uint16_t packed_avail_flags(bool wrap)
{
	return wrap ? VQ_DESC_F_AVAIL : VQ_DESC_F_USED;
}

/* 2.8.2: the device marks it used with AVAIL = USED = its wrap counter. */
static inline uint16_t packed_used_flags(bool wrap)
{
	return wrap ? (VQ_DESC_F_AVAIL | VQ_DESC_F_USED) : 0;
}

static inline bool packed_is_avail(uint16_t flags, bool wrap)
{
	bool a = flags & VQ_DESC_F_AVAIL, u = flags & VQ_DESC_F_USED;

	return a == wrap && u != wrap;
}

static inline bool packed_is_used(uint16_t flags, bool wrap)
{
	bool a = flags & VQ_DESC_F_AVAIL, u = flags & VQ_DESC_F_USED;

	return a == wrap && u == wrap;
}

/*
 * Store a descriptor's len, id and flags (CPU order) as the one
 * little-endian 8-byte word they form at offset 8, relaxed: for a
 * descriptor that an earlier one's flags, stored later with release,
 * publish.  One store instead of three per descriptor of a burst.
 */
static inline void packed_store_tail(struct vq_packed_desc *d, uint32_t len,
				     uint16_t id, uint16_t flags)
{
	vq_store_relaxed((uint64_t *)(void *)&d->len,
			 vq_le64(len | (uint64_t)id << 32 | (uint64_t)flags << 48));
}

/* Load a descriptor's flags with acquire: it publishes the rest of the
 * descriptor (P1/P3). */
static inline uint16_t packed_flags_acquire(const struct vq_packed_desc *d)
{
	return vq_le16(vq_load_acquire(&d->flags));
}

/*
 * Read an event suppression structure as one 32-bit snapshot (P2): offset,
 * wrap and flags must come from the same moment, or a torn read could pair
 * a new offset with old flags.  The layout is {le16 off_wrap; le16 flags},
 * i.e. the little-endian word off_wrap | flags << 16.
 */
static inline void packed_event_read(const struct vq_event_suppress *e,
				     uint16_t *off_wrap, uint16_t *flags)
{
	uint32_t v = vq_le32(vq_load_acquire((const uint32_t *)(const void *)e));

	*off_wrap = (uint16_t)v;
	*flags = (uint16_t)(v >> 16);
}

/*
 * Has moving our position from old to new (count slots, new with wrap
 * counter new_wrap) crossed the other side's event off_wrap?  An event in
 * the other lap is moved one ring back ("if wrap != my counter, event -= N",
 * virtqueue_kick_prepare_packed), then the split comparison applies to ring
 * positions in 16-bit arithmetic.  A move of a whole ring or more has
 * crossed every position.
 */
static inline bool packed_need_event(uint16_t off_wrap, uint16_t num,
				     uint16_t new_pos, bool new_wrap,
				     uint32_t count)
{
	uint16_t event = off_wrap & PACKED_POS_MASK;
	bool wrap = off_wrap >> VQ_EVENT_WRAP_SHIFT;

	if (count >= num)
		return true;
	if (wrap != new_wrap)
		event = (uint16_t)(event - num);
	return vq_need_event(event, new_pos, (uint16_t)(new_pos - count));
}

/* Advance a ring position by n slots (n <= num), flipping the wrap counter
 * when it crosses the end.  Packed sizes need not be powers of two. */
static inline void packed_advance(uint16_t *pos, bool *wrap, uint32_t n,
				  uint16_t num)
{
	uint32_t p = (uint32_t)*pos + n;

	if (p >= num) {
		p -= num;
		*wrap = !*wrap;
	}
	*pos = (uint16_t)p;
}

#endif
