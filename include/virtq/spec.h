/* SPDX-License-Identifier: MIT */
/*
 * virtq/spec.h - virtio structures, feature bits and little-endian accessors.
 *
 * Modern (VIRTIO 1.x) little-endian layout only.  Everything in shared memory
 * is little-endian; the accessors below are the only way the library reads or
 * writes it, so a big-endian host stays correct.
 */
#ifndef VIRTQ_SPEC_H
#define VIRTQ_SPEC_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Feature bits (virtio 1.2 §6 "Reserved Feature Bits"). */
#define VQ_F_INDIRECT_DESC   28
#define VQ_F_EVENT_IDX       29
#define VQ_F_VERSION_1       32
#define VQ_F_ACCESS_PLATFORM 33
#define VQ_F_RING_PACKED     34
#define VQ_F_IN_ORDER        35

#define VQ_BIT(b) (UINT64_C(1) << (b))

/* The largest queue the spec allows (2.6: "Queue Size ... maximum 32768"). */
#define VQ_MAX_QUEUE_SIZE 32768u

/* Split ring (2.7). */
#define VQ_DESC_F_NEXT     1
#define VQ_DESC_F_WRITE    2
#define VQ_DESC_F_INDIRECT 4
/* Packed ring (2.8). */
#define VQ_DESC_F_AVAIL    (1 << 7)
#define VQ_DESC_F_USED     (1 << 15)

#define VQ_AVAIL_F_NO_INTERRUPT 1
#define VQ_USED_F_NO_NOTIFY     1

/* Packed event suppression flags (2.8.10). */
#define VQ_EVENT_F_ENABLE  0
#define VQ_EVENT_F_DISABLE 1
#define VQ_EVENT_F_DESC    2
#define VQ_EVENT_WRAP_SHIFT 15

struct vq_desc {             /* split: 16 bytes, 16-byte aligned */
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

struct vq_avail {            /* split driver area, 2-byte aligned */
	uint16_t flags;
	uint16_t idx;
	uint16_t ring[];        /* [num], then used_event */
};

struct vq_used_elem {
	uint32_t id;
	uint32_t len;
};

struct vq_used {             /* split device area, 4-byte aligned */
	uint16_t flags;
	uint16_t idx;
	struct vq_used_elem ring[]; /* [num], then le16 avail_event */
};

struct vq_packed_desc {      /* packed: 16 bytes, 16-byte aligned */
	uint64_t addr;
	uint32_t len;
	uint16_t id;
	uint16_t flags;
};

struct vq_event_suppress {   /* packed driver/device area, 4-byte aligned */
	uint16_t off_wrap;
	uint16_t flags;
};

/* Sizes of the split areas for a queue of num entries (2.7, "Queue Size"). */
static inline uint64_t vq_split_desc_size(uint32_t num)
{
	return 16ull * num;
}
static inline uint64_t vq_split_avail_size(uint32_t num)
{
	return 6ull + 2ull * num;       /* flags, idx, ring[num], used_event */
}
static inline uint64_t vq_split_used_size(uint32_t num)
{
	return 6ull + 8ull * num;       /* flags, idx, ring[num], avail_event */
}

/* The event-index comparison of the spec (2.7.10): has the other side's
 * event index been crossed by moving our index from old to new? */
static inline int vq_need_event(uint16_t event, uint16_t new_idx, uint16_t old_idx)
{
	return (uint16_t)(new_idx - event - 1) < (uint16_t)(new_idx - old_idx);
}

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline uint16_t vq_le16(uint16_t v) { return v; }
static inline uint32_t vq_le32(uint32_t v) { return v; }
static inline uint64_t vq_le64(uint64_t v) { return v; }
#else
static inline uint16_t vq_le16(uint16_t v) { return __builtin_bswap16(v); }
static inline uint32_t vq_le32(uint32_t v) { return __builtin_bswap32(v); }
static inline uint64_t vq_le64(uint64_t v) { return __builtin_bswap64(v); }
#endif

#ifdef __cplusplus
}
#endif
#endif
