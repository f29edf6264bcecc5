// SPDX-License-Identifier: MIT
/*
 * The vhost-user codec's encoder: a message (request or reply) to bytes,
 * header and payload per the request's table entry, the same table the
 * decoder checks against (codec_internal.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/types.h>

#include "codec_internal.h"

static void wr32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void wr64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static void put_region(uint8_t *p, const struct vq_vhu_region *r)
{
	wr64(p, r->gpa);
	wr64(p + 8, r->size);
	wr64(p + 16, r->uaddr);
	wr64(p + 24, r->mmap_offset);
}

/* The payload's size on the wire, or -EINVAL for a table or config no
 * message can carry. */
static int64_t wire_size(const struct vq_vhu_msg *m)
{
	const struct vhu_payload_size *ps = vhu_payload_size(m->kind);

	if (!ps)
		return -EINVAL;
	if (m->kind == VQ_VHU_P_MEM) {
		if (m->u.mem.nregions == 0 || m->u.mem.nregions > VQ_VHU_MEM_TABLE_MAX)
			return -EINVAL;
		return MEM_HDR_WIRE + REGION_WIRE * (int64_t)m->u.mem.nregions;
	}
	if (m->kind == VQ_VHU_P_CONFIG) {
		if (m->u.config.size > VQ_VHU_CONFIG_MAX)
			return -EINVAL;
		return VQ_VHU_CONFIG_HDR_SIZE + (int64_t)m->u.config.size;
	}
	return ps->min;
}

/* The payload kind m must have as d's request or reply (an empty config
 * reply, the back-end's error report, aside). */
static int encode_kind(const struct req_desc *d, const struct vq_vhu_msg *m)
{
	bool reply = m->flags & VQ_VHU_FLAG_REPLY;
	enum vq_vhu_payload kind;

	if (m->kind == VQ_VHU_P_POSTCOPY_ACK) {
		struct vhu_hdr h = { m->request, m->flags, 8 };

		return vhu_postcopy_ack_shape(&h) ? 0 : -EINVAL;
	}
	if (!d)
		return -EINVAL;
	kind = reply ? (d->reply != VQ_VHU_P_NONE ? d->reply : VQ_VHU_P_U64) : d->req;
	if (reply && d->postcopy_echo && m->kind == d->req)
		kind = d->req;
	if (m->kind != kind && !(reply && kind == VQ_VHU_P_CONFIG && m->kind == VQ_VHU_P_NONE))
		return -EINVAL;
	return 0;
}

static ssize_t encode(const struct req_desc *d, const struct vq_vhu_msg *m,
		      void *buf, size_t cap)
{
	int64_t wsize = wire_size(m);
	uint8_t *p = buf, *q;
	uint32_t size;

	if (wsize < 0 || encode_kind(d, m))
		return -EINVAL;
	size = (uint32_t)wsize;
	if (cap < VQ_VHU_HDR_SIZE + (size_t)size)
		return -ENOBUFS;
	memset(p, 0, VQ_VHU_HDR_SIZE + size);
	wr32(p, m->request);
	wr32(p + 4, m->flags);
	wr32(p + 8, size);
	q = p + VQ_VHU_HDR_SIZE;
	switch (m->kind) {
	case VQ_VHU_P_NONE:
	case VQ_VHU_P_EMPTY:
		break;
	case VQ_VHU_P_U64:
	case VQ_VHU_P_POSTCOPY_ACK:
		wr64(q, m->u.u64);
		break;
	case VQ_VHU_P_LOG:
		wr64(q, m->u.log.size);
		wr64(q + 8, m->u.log.offset);
		break;
	case VQ_VHU_P_VRING_FD:
		wr64(q, (m->u.vring_fd.index & VQ_VHU_VRING_IDX_MASK) |
			(m->u.vring_fd.nofd ? VQ_VHU_VRING_NOFD : 0));
		break;
	case VQ_VHU_P_STATE:
		wr32(q, m->u.state.index);
		wr32(q + 4, m->u.state.num);
		break;
	case VQ_VHU_P_ADDR:
		wr32(q, m->u.addr.index);
		wr32(q + 4, m->u.addr.flags);
		wr64(q + 8, m->u.addr.desc);
		wr64(q + 16, m->u.addr.used);
		wr64(q + 24, m->u.addr.avail);
		wr64(q + 32, m->u.addr.log);
		break;
	case VQ_VHU_P_IOTLB:
		wr64(q, m->u.iotlb.iova);
		wr64(q + 8, m->u.iotlb.size);
		wr64(q + 16, m->u.iotlb.uaddr);
		q[24] = m->u.iotlb.perm;
		q[25] = m->u.iotlb.type;
		break;
	case VQ_VHU_P_REGION:
		put_region(q + 8, &m->u.region);
		break;
	case VQ_VHU_P_MEM:
		wr32(q, m->u.mem.nregions);
		for (uint32_t i = 0; i < m->u.mem.nregions; i++)
			put_region(q + MEM_HDR_WIRE + i * REGION_WIRE,
				   &m->u.mem.regions[i]);
		break;
	case VQ_VHU_P_CONFIG:
		wr32(q, m->u.config.offset);
		wr32(q + 4, m->u.config.size);
		wr32(q + 8, m->u.config.flags);
		memcpy(q + VQ_VHU_CONFIG_HDR_SIZE, m->u.config.data, m->u.config.size);
		break;
	}
	return VQ_VHU_HDR_SIZE + size;
}

ssize_t vq_vhu_encode(const struct vq_vhu_msg *m, void *buf, size_t cap)
{
	return encode(vhu_lookup_in(false, m->request), m, buf, cap);
}

ssize_t vq_vhu_encode_backend_request(const struct vq_vhu_msg *m, void *buf,
				      size_t cap)
{
	if (m->flags & VQ_VHU_FLAG_REPLY)
		return -EINVAL;
	return encode(vhu_lookup_in(true, m->request), m, buf, cap);
}
