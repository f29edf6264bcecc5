// SPDX-License-Identifier: MIT
/*
 * The guest memory map.  Regions are kept sorted by guest-physical address so
 * a lookup is a binary search; there are few regions (8 for a plain
 * SET_MEM_TABLE) and the map only changes while the queues are stopped, so a
 * sorted array beats anything fancier.  The IOTLB, when enabled, sits in
 * front of it: IOVA -> front-end address -> region.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <virtq/mem.h>

#include "util.h"
#include "mem_lib.h"

/* An entry, and where its range starts here when it lies in one region
 * (found when it was added; NULL: it spans regions, resolved on use). */
struct iotlb_ent {
	uint64_t iova, size, uaddr;
	unsigned perm;
	char *hva;
};

/* An IOTLB snapshot: entries sorted by iova, none overlapping; never
 * changed once published. */
struct iotlb_snap {
	unsigned n;
	struct iotlb_ent e[];
};

struct iotlb {
	struct iotlb_snap *cur;         /* queues load it with acquire */
	struct iotlb_snap **retired;    /* replaced, maybe still being read */
	uint32_t gen;                   /* bumped (release) on each publish */
	unsigned nretired, capretired;
	vq_iotlb_miss_fn miss;
	void *arg;
};

struct vq_mem {
	unsigned n, cap;
	struct vq_mem_region *r;        /* sorted by gpa */
	struct iotlb *iotlb;            /* NULL: addresses are guest-physical */
};

int vq_mem_new(struct vq_mem **out)
{
	*out = calloc(1, sizeof(struct vq_mem));
	return *out ? 0 : -ENOMEM;
}

void vq_mem_free(struct vq_mem *m)
{
	if (m) {
		vq_mem_iotlb_disable(m);
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

	if (!VQ_RESERVED_ZERO(r) || !range_end(r->gpa, r->size, &glast) ||
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

static void iotlb_forget_region(struct vq_mem *m, const struct vq_mem_region *r);

int vq_mem_remove(struct vq_mem *m, uint64_t gpa, uint64_t size,
		  struct vq_mem_region *out)
{
	for (unsigned i = 0; i < m->n; i++) {
		if (m->r[i].gpa != gpa || m->r[i].size != size)
			continue;
		iotlb_forget_region(m, &m->r[i]);
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

/* Out of line: a map without an IOTLB runs the code it ran before. */
static int __attribute__((noinline))
translate_iova(const struct vq_mem *m, uint64_t addr, uint64_t len,
	       unsigned access, struct iovec *iov, unsigned max, unsigned *n);

int vq_mem_translate_access(const struct vq_mem *m, uint64_t addr,
			    uint64_t len, unsigned access, struct iovec *iov,
			    unsigned max, unsigned *n)
{
	if (m->iotlb)
		return len ? translate_iova(m, addr, len, access, iov, max, n) : 0;
	return vq_mem_translate_gpa(m, addr, len, iov, max, n);
}

int vq_mem_translate(const struct vq_mem *m, uint64_t addr, uint64_t len,
		     struct iovec *iov, unsigned max, unsigned *n)
{
	if (unlikely(m->iotlb))
		return len ? translate_iova(m, addr, len, VQ_ACCESS_RW, iov, max, n) : 0;
	return vq_mem_translate_gpa(m, addr, len, iov, max, n);
}

int vq_mem_translate_gpa(const struct vq_mem *m, uint64_t addr, uint64_t len,
			 struct iovec *iov, unsigned max, unsigned *n)
{
	unsigned k = *n;
	uint64_t last;

	if (len == 0)
		return 0;
	if (!range_end(addr, len, &last))
		return -EFAULT;
	while (len) {
		const struct vq_mem_region *r = find_gpa(m, addr);
		uint64_t off, chunk;

		if (!r)
			return -EFAULT;
		if (k == max)
			return -ENOBUFS;
		off = addr - r->gpa;
		chunk = r->size - off;
		if (chunk > len)
			chunk = len;
		iov[k].iov_base = (char *)r->hva + off;
		iov[k].iov_len = chunk;
		k++;
		addr += chunk;
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

int vq_mem_map_contig(const struct vq_mem *m, uint64_t addr, uint64_t len,
		      unsigned access, void **hva)
{
	struct iovec iov;
	unsigned n = 0;
	int r;

	if (!m->iotlb) {
		*hva = vq_mem_gpa_to_hva(m, addr, len);
		return *hva ? 0 : -EFAULT;
	}
	if (len == 0)
		return -EFAULT;
	r = vq_mem_translate_access(m, addr, len, access, &iov, 1, &n);
	if (r)
		return r == -ENOBUFS ? -EFAULT : r;
	*hva = iov.iov_base;
	return 0;
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


/* ---- IOTLB ---- */

/* The region holding the front-end address ua, or NULL.  Linear: a map has
 * a few regions, and this runs only with an IOTLB. */
static const struct vq_mem_region *find_uaddr(const struct vq_mem *m, uint64_t ua)
{
	for (unsigned i = 0; i < m->n; i++) {
		const struct vq_mem_region *r = &m->r[i];

		if (ua >= r->uaddr && ua - r->uaddr < r->size)
			return r;
	}
	return NULL;
}

/* The entry holding iova, or NULL. */
static const struct iotlb_ent *iotlb_find(const struct iotlb_snap *s,
					  uint64_t iova)
{
	unsigned lo = 0, hi = s->n;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		const struct iotlb_ent *e = &s->e[mid];

		if (iova < e->iova)
			hi = mid;
		else if (iova - e->iova >= e->size)
			lo = mid + 1;
		else
			return e;
	}
	return NULL;
}

/*
 * The entry this thread found last, tried before the search: a burst's
 * buffers mostly share one entry, and the search cost TX a quarter of its
 * rate (64 B, 256 entries).  Only an index, checked against the current
 * snapshot before use, so a replaced table can never make it wrong.
 */
static __thread unsigned iotlb_last __attribute__((tls_model("initial-exec")));

static const struct iotlb_ent *iotlb_lookup(const struct iotlb_snap *s,
					    uint64_t iova)
{
	unsigned i = iotlb_last;
	const struct iotlb_ent *e;

	if (likely(i < s->n) && iova - s->e[i].iova < s->e[i].size &&
	    iova >= s->e[i].iova)
		return &s->e[i];
	e = iotlb_find(s, iova);
	if (e)
		iotlb_last = (unsigned)(e - s->e);
	return e;
}

static int translate_iova(const struct vq_mem *m, uint64_t addr, uint64_t len,
			  unsigned access, struct iovec *iov, unsigned max,
			  unsigned *n)
{
	const struct iotlb *t = m->iotlb;
	uint64_t last;

	if (!range_end(addr, len, &last))
		return -EFAULT;
	const struct iotlb_snap *s = __atomic_load_n(&t->cur, __ATOMIC_ACQUIRE);
	const struct iotlb_ent *e = iotlb_lookup(s, addr);
	unsigned k = *n, first = *n;

	/* the common case: one entry in one region holds it all */
	if (likely(e && e->hva && (e->perm & access) == access &&
		   len <= e->size - (addr - e->iova))) {
		if (unlikely(k == max))
			return -ENOBUFS;
		iov[k].iov_base = e->hva + (addr - e->iova);
		iov[k].iov_len = len;
		*n = k + 1;
		return 0;
	}
	while (len) {
		e = iotlb_lookup(s, addr);
		uint64_t off, chunk, ua;

		if (!e) {
			if (t->miss)
				t->miss(t->arg, addr, access);
			return -EAGAIN;
		}
		if ((e->perm & access) != access)
			return -EFAULT;
		off = addr - e->iova;
		chunk = e->size - off;
		if (chunk > len)
			chunk = len;
		ua = e->uaddr + off;    /* the update checked it cannot wrap */
		addr += chunk;
		len -= chunk;
		while (chunk) {
			const struct vq_mem_region *r = find_uaddr(m, ua);
			uint64_t roff, piece;
			char *h;

			/* the map may have shrunk since the update */
			if (!r)
				return -EFAULT;
			roff = ua - r->uaddr;
			piece = r->size - roff;
			if (piece > chunk)
				piece = chunk;
			h = (char *)r->hva + roff;
			/* IOTLB entries are often single pages of one
			 * contiguous buffer: join them again */
			if (k > first &&
			    (char *)iov[k - 1].iov_base + iov[k - 1].iov_len == h) {
				iov[k - 1].iov_len += piece;
			} else {
				if (k == max)
					return -ENOBUFS;
				iov[k].iov_base = h;
				iov[k].iov_len = piece;
				k++;
			}
			ua += piece;
			chunk -= piece;
		}
	}
	*n = k;
	return 0;
}

int vq_mem_iotlb_enable(struct vq_mem *m, vq_iotlb_miss_fn miss, void *arg)
{
	struct iotlb *t;

	vq_mem_iotlb_disable(m);
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->cur = calloc(1, sizeof(*t->cur));
	if (!t->cur) {
		free(t);
		return -ENOMEM;
	}
	t->miss = miss;
	t->arg = arg;
	m->iotlb = t;
	return 0;
}

void vq_mem_iotlb_disable(struct vq_mem *m)
{
	struct iotlb *t = m->iotlb;

	if (!t)
		return;
	vq_mem_iotlb_reclaim(m);
	free(t->retired);
	free(t->cur);
	free(t);
	m->iotlb = NULL;
}

bool vq_mem_iotlb_enabled(const struct vq_mem *m)
{
	return m->iotlb != NULL;
}

unsigned vq_mem_iotlb_count(const struct vq_mem *m)
{
	return m->iotlb ? m->iotlb->cur->n : 0;
}

uint32_t vq_mem_iotlb_generation(const struct vq_mem *m)
{
	return m->iotlb ? __atomic_load_n(&m->iotlb->gen, __ATOMIC_ACQUIRE) : 0;
}

unsigned vq_mem_iotlb_retired(const struct vq_mem *m)
{
	return m->iotlb ? m->iotlb->nretired : 0;
}

void vq_mem_iotlb_reclaim(struct vq_mem *m)
{
	struct iotlb *t = m->iotlb;

	if (!t)
		return;
	for (unsigned i = 0; i < t->nretired; i++)
		free(t->retired[i]);
	t->nretired = 0;
}

/* Publish s in place of the current snapshot, which is retired. */
static int iotlb_publish(struct iotlb *t, struct iotlb_snap *s)
{
	if (t->nretired == t->capretired) {
		unsigned cap = t->capretired ? t->capretired * 2 : 16;
		struct iotlb_snap **nr = realloc(t->retired, cap * sizeof(*nr));

		if (!nr) {
			free(s);
			return -ENOMEM;
		}
		t->retired = nr;
		t->capretired = cap;
	}
	t->retired[t->nretired++] = t->cur;
	__atomic_store_n(&t->cur, s, __ATOMIC_RELEASE);
	__atomic_store_n(&t->gen, t->gen + 1, __ATOMIC_RELEASE);
	return 0;
}

/* A copy of the current snapshot without the entries overlapping
 * [iova, last], with room for `extra` more; *dropped counts the others. */
static struct iotlb_snap *iotlb_without(const struct iotlb_snap *cur,
					uint64_t iova, uint64_t last,
					unsigned extra, unsigned *dropped)
{
	struct iotlb_snap *s = malloc(sizeof(*s) + (cur->n + extra) * sizeof(s->e[0]));

	if (!s)
		return NULL;
	s->n = 0;
	*dropped = 0;
	for (unsigned i = 0; i < cur->n; i++) {
		const struct iotlb_ent *e = &cur->e[i];

		if (overlaps(iova, last, e->iova, e->iova + (e->size - 1)))
			(*dropped)++;
		else
			s->e[s->n++] = *e;
	}
	return s;
}

int vq_mem_iotlb_update(struct vq_mem *m, const struct vq_iotlb_entry *e)
{
	struct iotlb *t = m->iotlb;
	struct iotlb_snap *s;
	uint64_t last, ulast, ua, left;
	unsigned dropped, pos;

	if (!t)
		return -ENXIO;
	if (!VQ_RESERVED_ZERO(e) || !range_end(e->iova, e->size, &last) ||
	    !range_end(e->uaddr, e->size, &ulast) || !e->perm ||
	    (e->perm & ~VQ_ACCESS_RW))
		return -EINVAL;
	/* vhost-user: the range must lie in the regions of the memory table */
	for (ua = e->uaddr, left = e->size; left;) {
		const struct vq_mem_region *r = find_uaddr(m, ua);
		uint64_t piece;

		if (!r)
			return -EINVAL;
		piece = r->size - (ua - r->uaddr);
		if (piece >= left)
			break;
		ua += piece;
		left -= piece;
	}
	s = iotlb_without(t->cur, e->iova, last, 1, &dropped);
	if (!s)
		return -ENOMEM;
	if (s->n >= VQ_IOTLB_MAX_ENTRIES) {
		free(s);
		return -ENOSPC;
	}
	for (pos = s->n; pos > 0 && s->e[pos - 1].iova > e->iova; pos--)
		s->e[pos] = s->e[pos - 1];
	s->e[pos] = (struct iotlb_ent){ e->iova, e->size, e->uaddr, e->perm, NULL };
	{
		const struct vq_mem_region *r = find_uaddr(m, e->uaddr);

		if (e->size <= r->size - (e->uaddr - r->uaddr))
			s->e[pos].hva = (char *)r->hva + (e->uaddr - r->uaddr);
	}
	s->n++;
	return iotlb_publish(t, s);
}

int vq_mem_iotlb_invalidate(struct vq_mem *m, uint64_t iova, uint64_t size)
{
	struct iotlb *t = m->iotlb;
	struct iotlb_snap *s;
	uint64_t last;
	unsigned dropped;
	int r;

	if (!t)
		return 0;
	if (!range_end(iova, size, &last))
		last = UINT64_MAX;
	s = iotlb_without(t->cur, iova, last, 0, &dropped);
	if (!s)
		return -ENOMEM;
	if (!dropped) {
		free(s);
		return 0;
	}
	r = iotlb_publish(t, s);
	return r ? r : (int)dropped;
}

/* A region leaves the map: entries into it go too (the front-end would
 * answer a miss for them now with what replaced it).  Callers change the
 * map only while no queue translates. */
static void iotlb_forget_region(struct vq_mem *m, const struct vq_mem_region *r)
{
	struct iotlb *t = m->iotlb;
	struct iotlb_snap *s;
	unsigned n = 0;

	if (!t)
		return;
	s = malloc(sizeof(*s) + t->cur->n * sizeof(s->e[0]));
	if (!s) {
		/* no memory for a copy: an empty table (the header fits
		 * where the entries were) */
		t->cur->n = 0;
		return;
	}
	for (unsigned i = 0; i < t->cur->n; i++) {
		const struct iotlb_ent *e = &t->cur->e[i];

		if (!overlaps(e->uaddr, e->uaddr + (e->size - 1), r->uaddr,
			      r->uaddr + (r->size - 1)))
			s->e[n++] = *e;
	}
	s->n = n;
	if (n == t->cur->n) {
		free(s);
		return;
	}
	if (iotlb_publish(t, s))
		t->cur->n = 0;
}
