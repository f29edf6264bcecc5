// SPDX-License-Identifier: MIT
/*
 * The front-end as a guest behind a vIOMMU with long-lived mappings
 * (vhost-user "IOMMU support", iommu_page): the back-end channel, guest
 * memory mapped by IOTLB updates once the rings exist, and the misses the
 * back-end sends answered.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frontend_internal.h"

/* Give the back-end its channel (for IOTLB misses). */
int vhu_fe_iommu_channel(struct vq_vhu_frontend *f)
{
	uint64_t page = f->cfg.iommu_page;

	if (page < 4096 || (page & (page - 1)) || f->mem_size % page ||
	    f->mem_size / page > VQ_IOTLB_MAX_ENTRIES)
		return vhu_ferr(f, -EINVAL,
				"vhost-user \"IOMMU support\": an IOMMU page of %llu bytes is not a power of 2 of 4096 or more dividing the %llu bytes of guest memory into at most %u",
				(unsigned long long)page, (unsigned long long)f->mem_size,
				VQ_IOTLB_MAX_ENTRIES);
	return vhu_fe_channel(f);
}

int vhu_fe_channel(struct vq_vhu_frontend *f)
{
	struct vq_vhu_msg m = { .request = VQ_VHU_SET_BACKEND_REQ_FD, .kind = VQ_VHU_P_NONE };
	int sv[2], r;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return vhu_ferr(f, -errno,
				"vhost-user \"Back-end communication\": socketpair failed: %s",
				strerror(errno));
	r = vhu_fe_call(f, &m, &sv[1], 1, NULL);
	close(sv[1]);
	f->chan = sv[0];
	return r;
}

/* One IOTLB entry: the iommu_page holding off, read and write. */
static int iommu_map(struct vq_vhu_frontend *f, uint64_t off)
{
	struct vq_vhu_msg m = { .request = VQ_VHU_IOTLB_MSG, .kind = VQ_VHU_P_IOTLB };

	off &= ~(f->cfg.iommu_page - 1);
	m.u.iotlb.iova = GUEST_IOVA + off;
	m.u.iotlb.size = f->cfg.iommu_page;
	m.u.iotlb.uaddr = (uintptr_t)f->mem + off;
	m.u.iotlb.perm = VQ_VHU_IOTLB_PERM_RW;
	m.u.iotlb.type = VQ_VHU_IOTLB_UPDATE;
	return vhu_fe_call(f, &m, NULL, 0, NULL);
}

/* Answer the misses waiting on the back-end channel (no waiting). */
static int iommu_serve(struct vq_vhu_frontend *f)
{
	uint8_t buf[VQ_VHU_HDR_SIZE + 32];
	struct vq_vhu_msg m;
	char err[160];
	ssize_t n;
	int r;

	while (f->chan >= 0 &&
	       (n = recv(f->chan, buf, sizeof(buf), MSG_DONTWAIT | MSG_WAITALL)) > 0) {
		if ((size_t)n != sizeof(buf))
			return vhu_ferr(f, -EPROTO,
					"vhost-user \"Back-end communication\": a message of %zd bytes, not %zu",
					n, sizeof(buf));
		if (vq_vhu_decode_backend_request(buf, (size_t)n, NULL, 0, &m, err,
						  sizeof(err)))
			return vhu_ferr(f, -EPROTO, "%s", err);
		f->misses++;
		if (m.u.iotlb.type != VQ_VHU_IOTLB_MISS)
			continue;       /* an access failure: nothing to give */
		if (m.u.iotlb.iova < GUEST_IOVA ||
		    m.u.iotlb.iova - GUEST_IOVA >= f->mem_size)
			continue;       /* not ours to map: the queue stays stuck */
		r = iommu_map(f, m.u.iotlb.iova - GUEST_IOVA);
		if (r)
			return r;
	}
	return 0;
}

/* Map all of guest memory, iommu_page bytes per entry (after the rings
 * exist: DPDK's vhost files an update under each ring it has, so one sent
 * before them is lost), then answer what was asked meanwhile. */
int vhu_fe_iommu_map_all(struct vq_vhu_frontend *f)
{
	int r;

	for (uint64_t off = 0; off < f->mem_size; off += f->cfg.iommu_page) {
		r = iommu_map(f, off);
		if (r)
			return r;
	}
	/* the rings asked before any entry existed: answered, not counted
	 * (each was sent before the acks we waited for) */
	r = iommu_serve(f);
	f->misses = 0;
	return r;
}

uint64_t vq_vhu_frontend_iotlb_misses(struct vq_vhu_frontend *f)
{
	iommu_serve(f);
	return f->misses;
}
