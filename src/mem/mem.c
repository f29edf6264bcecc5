// SPDX-License-Identifier: MIT
/*
 * The guest memory map.  Regions are kept sorted by guest-physical address so
 * a lookup is a binary search; there are few regions (8 for a plain
 * SET_MEM_TABLE) and the map only changes while the queues are stopped, so a
 * sorted array beats anything fancier.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <virtq/mem.h>

struct vq_mem {
	unsigned n, cap;
	struct vq_mem_region *r;        /* sorted by gpa */
};

struct vq_mem *vq_mem_new(void)
{
	return calloc(1, sizeof(struct vq_mem));
}

void vq_mem_free(struct vq_mem *m)
{
	if (m) {
		free(m->r);
		free(m);
	}
}

/* Last byte of [start, start+size), or false if the range wraps. */
static bool range_end(uint64_t start, uint64_t size, uint64_t *last)
{
	if (size == 0 || start + (size - 1) < start)
		return false;
	*last = start + (size - 1);
	return true;
}

static bool overlaps(uint64_t a, uint64_t alast, uint64_t b, uint64_t blast)
{
	return a <= blast && b <= alast;
}

int vq_mem_add(struct vq_mem *m, const struct vq_mem_region *r)
{
	uint64_t glast, ulast, hlast;
	unsigned i, pos;

	if (!range_end(r->gpa, r->size, &glast) ||
	    !range_end(r->uaddr, r->size, &ulast) ||
	    !range_end((uintptr_t)r->hva, r->size, &hlast) || !r->hva)
		return -EINVAL;
	for (i = 0; i < m->n; i++) {
		const struct vq_mem_region *o = &m->r[i];

		if (overlaps(r->gpa, glast, o->gpa, o->gpa + (o->size - 1)) ||
		    overlaps(r->uaddr, ulast, o->uaddr, o->uaddr + (o->size - 1)))
			return -EINVAL;
	}
	/* Rings, descriptors and indirect tables are checked for alignment
	 * by their guest or front-end address and then read in place. */
	if ((((uintptr_t)r->hva - r->gpa) | ((uintptr_t)r->hva - r->uaddr)) &
	    (VQ_MEM_ALIGN_KEPT - 1))
		return -EXDEV;
	if (m->n == VQ_MEM_MAX_REGIONS)
		return -ENOSPC;
	if (m->n == m->cap) {
		unsigned cap = m->cap ? m->cap * 2 : 8;
		struct vq_mem_region *nr = realloc(m->r, cap * sizeof(*nr));

		if (!nr)
			return -ENOMEM;
		m->r = nr;
		m->cap = cap;
	}
	for (pos = 0; pos < m->n && m->r[pos].gpa < r->gpa; pos++)
		;
	memmove(&m->r[pos + 1], &m->r[pos], (m->n - pos) * sizeof(*m->r));
	m->r[pos] = *r;
	m->n++;
	return 0;
}

int vq_mem_remove(struct vq_mem *m, uint64_t gpa, uint64_t size,
		  struct vq_mem_region *out)
{
	for (unsigned i = 0; i < m->n; i++) {
		if (m->r[i].gpa != gpa || m->r[i].size != size)
			continue;
		if (out)
			*out = m->r[i];
		memmove(&m->r[i], &m->r[i + 1], (m->n - i - 1) * sizeof(*m->r));
		m->n--;
		return 0;
	}
	return -ENOENT;
}

unsigned vq_mem_count(const struct vq_mem *m)
{
	return m->n;
}

const struct vq_mem_region *vq_mem_region_at(const struct vq_mem *m, unsigned i)
{
	return i < m->n ? &m->r[i] : NULL;
}

/* The region holding gpa, or NULL. */
static const struct vq_mem_region *find_gpa(const struct vq_mem *m, uint64_t gpa)
{
	unsigned lo = 0, hi = m->n;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		const struct vq_mem_region *r = &m->r[mid];

		if (gpa < r->gpa)
			hi = mid;
		else if (gpa - r->gpa >= r->size)
			lo = mid + 1;
		else
			return r;
	}
	return NULL;
}

int vq_mem_translate(const struct vq_mem *m, uint64_t gpa, uint64_t len,
		     struct iovec *iov, unsigned max, unsigned *n)
{
	unsigned k = *n;
	uint64_t last;

	if (len == 0)
		return 0;
	if (!range_end(gpa, len, &last))
		return -EFAULT;
	while (len) {
		const struct vq_mem_region *r = find_gpa(m, gpa);
		uint64_t off, chunk;

		if (!r)
			return -EFAULT;
		if (k == max)
			return -ENOBUFS;
		off = gpa - r->gpa;
		chunk = r->size - off;
		if (chunk > len)
			chunk = len;
		iov[k].iov_base = (char *)r->hva + off;
		iov[k].iov_len = chunk;
		k++;
		gpa += chunk;
		len -= chunk;
	}
	*n = k;
	return 0;
}

void *vq_mem_gpa_to_hva(const struct vq_mem *m, uint64_t gpa, uint64_t len)
{
	const struct vq_mem_region *r = find_gpa(m, gpa);
	uint64_t off;

	if (!r || len == 0)
		return NULL;
	off = gpa - r->gpa;
	if (len > r->size - off)
		return NULL;
	return (char *)r->hva + off;
}

void *vq_mem_uaddr_to_hva(const struct vq_mem *m, uint64_t uaddr, uint64_t len)
{
	for (unsigned i = 0; i < m->n; i++) {
		const struct vq_mem_region *r = &m->r[i];

		if (uaddr < r->uaddr || uaddr - r->uaddr >= r->size)
			continue;
		if (len == 0 || len > r->size - (uaddr - r->uaddr))
			return NULL;
		return (char *)r->hva + (uaddr - r->uaddr);
	}
	return NULL;
}

int vq_mem_uaddr_to_gpa(const struct vq_mem *m, uint64_t uaddr, uint64_t *gpa)
{
	for (unsigned i = 0; i < m->n; i++) {
		const struct vq_mem_region *r = &m->r[i];

		if (uaddr >= r->uaddr && uaddr - r->uaddr < r->size) {
			*gpa = r->gpa + (uaddr - r->uaddr);
			return 0;
		}
	}
	return -EFAULT;
}

const struct vq_mem_region *vq_mem_region_of_hva(const struct vq_mem *m,
						 const void *hva)
{
	uintptr_t p = (uintptr_t)hva;

	for (unsigned i = 0; i < m->n; i++) {
		const struct vq_mem_region *r = &m->r[i];

		if (p >= (uintptr_t)r->hva && p - (uintptr_t)r->hva < r->size)
			return r;
	}
	return NULL;
}

