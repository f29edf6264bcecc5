// SPDX-License-Identifier: MIT
/*
 * Turning descriptors into iovecs, the same for every layout: the checks a
 * device makes on each buffer a driver hands it.
 */
#include <errno.h>

#include <virtq/mem.h>

#include "ring_internal.h"
#include "mem_lib.h"

/* The spec section of a rule both layouts share: split's or packed's. */
static const char *sec(const struct vq_dev *d, const char *split,
		       const char *packed)
{
	return vq_has(d->cfg.features, VQ_F_RING_PACKED) ? packed : split;
}

static int chain_add(struct vq_dev *d, struct vq_chain *c, uint64_t addr,
		     uint32_t len, bool writable, const char *where, unsigned idx)
{
	unsigned n = c->nout + c->nin;
	int r;

	if (unlikely(!writable && c->nin))
		return vq_dev_break(d, -EINVAL,
				    "%s: %s descriptor %u: readable after writable (head %u)",
				    sec(d, "2.7.4.2", "2.8.17"), where, idx, c->id);
	if (likely(!d->iotlb))
		r = vq_mem_translate_gpa(d->cfg.mem, addr, len, c->iov, c->iov_max, &n);
	else    /* VQ_ACCESS_RO + 1 is VQ_ACCESS_WO */
		r = vq_mem_translate_access(d->cfg.mem, addr, len,
					    VQ_ACCESS_RO + writable, c->iov,
					    c->iov_max, &n);
	if (unlikely(r < 0)) {
		if (r == -EAGAIN)
			return r;       /* an IOTLB miss: the chain waits, unpopped */
		if (r == -ENOBUFS)
			return vq_dev_break(d, r,
					    "%s: %s descriptor %u: chain needs more than %u iovecs (head %u)",
					    sec(d, "2.7.4.1", "2.8.18"), where, idx,
					    c->iov_max, c->id);
		return vq_dev_break(d, -EFAULT,
				    "%s: %s descriptor %u: 0x%llx+%u is outside guest memory or not allowed by the IOTLB (head %u)",
				    sec(d, "2.7.5", "2.8.13"), where, idx,
				    (unsigned long long)addr, len, c->id);
	}
	if (writable) {
		c->nin = n - c->nout;
		c->in_len += len;
	} else {
		c->nout = n;
		c->out_len += len;
	}
	return 0;
}

int vq_chain_add_miss(struct vq_dev *d, struct vq_chain *c, struct vq_xlate *x,
		      uint64_t addr, uint32_t len, bool writable,
		      const char *where, unsigned idx)
{
	int r = chain_add(d, c, addr, len, writable, where, idx);
	unsigned i, n;

	if (r < 0 || d->iotlb || !len)
		return r;
	/* It translated: keep the region it starts in for the next ones. */
	n = vq_mem_count(d->cfg.mem);
	for (i = 0; i < n; i++) {
		const struct vq_mem_region *m = vq_mem_region_at(d->cfg.mem, i);

		if (addr - m->gpa < m->size) {
			*x = (struct vq_xlate){ m->gpa, m->size, m->hva };
			break;
		}
	}
	return 0;
}

/* The kernel's vhost refuses indirect tables of more entries than this. */
#define VQ_INDIRECT_MAX_ENTRIES 65536u

const void *vq_indirect_table(struct vq_dev *d, uint64_t addr, uint32_t len,
			      unsigned *count, unsigned head)
{
	void *table;
	int r;

	if (unlikely(len == 0 || len % 16)) {
		vq_dev_break(d, -EINVAL,
			     "%s: indirect descriptor (head %u): length %u is not a non-zero multiple of 16",
			     sec(d, "2.7.5.3", "2.8.7"), head, len);
		return NULL;
	}
	if (unlikely(len / 16 > VQ_INDIRECT_MAX_ENTRIES)) {
		vq_dev_break(d, -EINVAL,
			     "%s: indirect descriptor (head %u): table of %u entries is too big (at most %u)",
			     sec(d, "2.7.5.3", "2.8.7"), head, len / 16,
			     VQ_INDIRECT_MAX_ENTRIES);
		return NULL;
	}
	/* Descriptor fields are read as naturally aligned words; every real
	 * driver allocates tables at least 8-byte aligned. */
	if (unlikely(addr & 7)) {
		vq_dev_break(d, -EINVAL,
			     "%s: indirect descriptor (head %u): table at 0x%llx is not 8-byte aligned",
			     sec(d, "2.7.5.3", "2.8.7"), head,
			     (unsigned long long)addr);
		return NULL;
	}
	r = vq_mem_map_contig(d->cfg.mem, addr, len, VQ_ACCESS_RO, &table);
	if (unlikely(r == -EAGAIN)) {
		*count = 0;
		return NULL;    /* an IOTLB miss: the chain waits */
	}
	if (unlikely(r)) {
		vq_dev_break(d, -EFAULT,
			     "%s: indirect descriptor (head %u): table 0x%llx+%u is not inside one memory region",
			     sec(d, "2.7.5.3", "2.8.7"), head,
			     (unsigned long long)addr, len);
		return NULL;
	}
	*count = len / 16;
	return table;
}
