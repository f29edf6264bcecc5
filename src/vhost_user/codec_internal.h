/* SPDX-License-Identifier: MIT */
/*
 * Private to the vhost-user codec (codec.c checks and decodes,
 * codec_encode.c encodes): the table of request descriptors and the wire
 * sizes of each payload kind, one place for both directions.
 */
#ifndef VIRTQ_VHU_CODEC_INTERNAL_H
#define VIRTQ_VHU_CODEC_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <virtq/vhost_user.h>

#include "util.h"

enum fd_rule {
	FD_NONE,        /* no fd */
	FD_REGIONS,     /* one per memory region */
	FD_ONE,         /* exactly one */
	FD_VRING,       /* one, unless the payload says "no fd" */
	FD_DISCARD,     /* zero or one, closed unused (REM_MEM_REG, spec) */
};

struct req_desc {
	const char *name;
	enum vq_vhu_payload req;        /* request payload */
	enum vq_vhu_payload reply;      /* explicit reply payload, or NONE */
	enum fd_rule fds;
	bool vring;                     /* carries a vring index */
	enum fd_rule reply_fds;         /* FD_NONE or FD_ONE */
	bool postcopy_echo;             /* listening: the reply echoes req */
};

/* A message header as the wire has it. */
struct vhu_hdr {
	uint32_t request, flags, size;
};

#define REGION_WIRE 32u         /* a memory region description */
#define IOTLB_WIRE 32u          /* struct vhost_iotlb_msg */
#define MEM_HDR_WIRE 8u         /* a memory table's count and padding */

/* The sizes a payload kind takes on the wire: min to max bytes, in steps of
 * step from min (0: min only). */
struct vhu_payload_size {
	uint16_t min, max, step;
};

/* kind's sizes, or NULL for a kind there is none of. */
VQ_INTERNAL const struct vhu_payload_size *vhu_payload_size(enum vq_vhu_payload kind);
/* A request's descriptor, on the front-end's channel or the back-end's;
 * NULL for a request we do not implement. */
VQ_INTERNAL const struct req_desc *vhu_lookup_in(bool backend, uint32_t request);
/* Is this header QEMU's postcopy acknowledgment (VQ_VHU_P_POSTCOPY_ACK)? */
VQ_INTERNAL bool vhu_postcopy_ack_shape(const struct vhu_hdr *h);

#endif
