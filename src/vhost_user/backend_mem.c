// SPDX-License-Identifier: MIT
/*
 * The back-end's guest memory and dirty log: regions mmap'ed from the fds
 * the front-end passes (checked against the file's size, hugetlbfs
 * aligned), the memory-table messages, and the log that live migration
 * has the rings mark (vhost-user "Migration").  A mapping of a file the
 * front-end can still shrink is guarded (mem/guard.h): a page lost under
 * it shuts the connection down, and the control thread closes it naming
 * the region (vhu_mem_lost).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include "backend_internal.h"
#include "guard.h"

#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif

void vhu_unmap_all(struct vq_vhu_backend *b)
{
	for (unsigned i = 0; i < b->nmaps; i++) {
		const struct map *mp = &b->maps[i];

		vq_mem_remove(b->mem, mp->gpa, mp->size, NULL);
		vq_guard_unmap(mp->guard, mp->addr, mp->len);
	}
	b->nmaps = 0;
}

/* Messages about a region: where the rule is, then which region. */
#define REGION "vhost-user \"Memory regions description\": region at guest 0x%llx: "

/* mmap len bytes of fd at off, shared, and guard the mapping if guard
 * says so, with the connection as the socket to shut down: 0, *p and
 * *slot (-1: unguarded), or -errno (vq_guard_add's too). */
static int map_file(struct vq_vhu_backend *b, int fd, bool guard, size_t len,
		    uint64_t off, void **p, int *slot)
{
	*slot = -1;
	*p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
	if (*p == MAP_FAILED)
		return -errno;
	if (guard) {
		*slot = vq_guard_add(*p, len, b->conn_fd);
		if (*slot < 0) {
			int r = *slot;

			munmap(*p, len);
			*slot = -1;
			return r;
		}
	}
	return 0;
}

static const char *map_file_error(int r)
{
	if (r == -ENOSPC)
		return "no guard slot left for it in the process";
	if (r == -ENOTSUP)
		return "no SIGBUS handler could be installed to guard it";
	return strerror(-r);
}

/* What a lost mapping's message says after naming it (vhu_mem_lost). */
#define LOST_MSG "its file was truncated under the mapping (no page at file offset 0x%llx)"

/* mmap one region from fd (which is closed here) and add it to the map. */
static int map_region(struct vq_vhu_backend *b, const struct vq_vhu_region *r,
		      int fd)
{
	struct stat st;
	struct statfs sfs;
	uint64_t align, moff, delta, len;
	struct vq_mem_region mr;
	/* before the size check: see vq_guard_needed */
	bool guard = vq_guard_needed(fd);
	void *p;
	int ret, slot;

	if (fstat(fd, &st) < 0 || fstatfs(fd, &sfs) < 0) {
		ret = vhu_berr(b, -errno, REGION "cannot stat its fd: %s",
			       (unsigned long long)r->gpa, strerror(errno));
		goto out;
	}
	if (r->mmap_offset > (uint64_t)st.st_size ||
	    r->size > (uint64_t)st.st_size - r->mmap_offset) {
		ret = vhu_berr(b, -EINVAL,
			       REGION "0x%llx bytes at offset 0x%llx run past the end of its file (0x%llx bytes)",
			       (unsigned long long)r->gpa,
			       (unsigned long long)r->size,
			       (unsigned long long)r->mmap_offset,
			       (unsigned long long)st.st_size);
		goto out;
	}
	/* hugetlbfs mappings must be aligned to the huge page size */
	align = (sfs.f_type == (typeof(sfs.f_type))HUGETLBFS_MAGIC) ?
		(uint64_t)sfs.f_bsize : (uint64_t)sysconf(_SC_PAGESIZE);
	moff = r->mmap_offset & ~(align - 1);
	delta = r->mmap_offset - moff;
	len = (r->size + delta + align - 1) & ~(align - 1);
	if (len < r->size || len > SIZE_MAX) {
		ret = vhu_berr(b, -EINVAL, REGION "0x%llx bytes are too many to map",
			       (unsigned long long)r->gpa, (unsigned long long)r->size);
		goto out;
	}
	if (b->nmaps == b->capmaps) {
		unsigned cap = b->capmaps ? b->capmaps * 2 : 8;
		struct map *nm = realloc(b->maps, cap * sizeof(*nm));

		if (!nm) {
			ret = vhu_berr(b, -ENOMEM, REGION "no memory for a map of %u regions",
				       (unsigned long long)r->gpa, cap);
			goto out;
		}
		b->maps = nm;
		b->capmaps = cap;
	}
	ret = map_file(b, fd, guard, len, moff, &p, &slot);
	if (ret) {
		ret = vhu_berr(b, ret, REGION "mapping 0x%llx bytes failed: %s",
			       (unsigned long long)r->gpa, (unsigned long long)len,
			       map_file_error(ret));
		goto out;
	}
	mr = (struct vq_mem_region){ .gpa = r->gpa, .size = r->size,
				     .uaddr = r->uaddr, .hva = (char *)p + delta };
	ret = vq_mem_add(b->mem, &mr);
	if (ret) {
		vq_guard_unmap(slot, p, len);
		if (ret == -ENOSPC)
			ret = vhu_berr(b, ret, REGION "one region more than the %u we map",
				       (unsigned long long)r->gpa, VQ_MEM_MAX_REGIONS);
		else if (ret == -ENOMEM)
			ret = vhu_berr(b, ret, REGION "no memory to add it",
				       (unsigned long long)r->gpa);
		else
			ret = vhu_berr(b, -EINVAL,
				       REGION "0x%llx bytes at user 0x%llx, offset 0x%llx: %s",
				       (unsigned long long)r->gpa,
				       (unsigned long long)r->size,
				       (unsigned long long)r->uaddr,
				       (unsigned long long)r->mmap_offset,
				       ret == -EXDEV ? "its file offset, guest and user addresses differ modulo 16 (ring areas in it would be misaligned)" :
				       "it overlaps another region");
		goto out;
	}
	b->maps[b->nmaps++] = (struct map){ p, len, mr.hva, r->gpa, r->size,
					    r->uaddr, r->mmap_offset, st.st_dev,
					    st.st_ino, 1, slot };
out:
	close(fd);
	return ret;
}

void vhu_log_unmap(struct vq_vhu_backend *b)
{
	if (b->log_map)
		vq_guard_unmap(b->log_guard, b->log_map, b->log_map_len);
	b->log_map = NULL;
	b->log_map_len = 0;
	b->log = (struct vq_dirty_log){ 0 };
}

/* The guest-physical ranges a started ring writes, for the log: the used
 * ring (split) or device area (packed) at the address the front-end gave
 * for logging, and a packed ring's descriptors, which the device rewrites
 * (vhost-user "Migration"). */
int vhu_ring_log_setup(struct vq_vhu_backend *b, unsigned i,
		       const struct vq_ring_addr *ra)
{
	struct ring *q = &b->rings[i];
	uint64_t size[3], align[3], desc_gpa = 0;
	unsigned n = 0;

	q->log_nring = 0;
	if (!vhu_logging(b) || vhu_ring_areas(b, i, size, align))
		return 0;
	if (!vq_dirty_log_covers_mem(&b->log, b->mem))
		return vhu_berr(b, -EINVAL,
				"vhost-user \"Migration\": the log of 0x%llx bytes does not cover guest memory",
				(unsigned long long)b->log.size);
	if (vhu_iommu(b)) {
		/* The ring addresses (and QEMU's log address) are IOVAs:
		 * log the guest pages under our own mapping of the areas we
		 * write (vhost's log_write_hva). */
		const void *area[3] = { vhu_packed(b) ? ra->desc : NULL, NULL,
					ra->device };

		for (unsigned k = 0; k < 3; k++) {
			const struct vq_mem_region *r;

			if (!area[k])
				continue;
			r = vq_mem_region_of_hva(b->mem, area[k]);
			if (!r)
				return vhu_berr(b, -EFAULT,
						"vhost-user \"Migration\": queue %u: the %s is in no memory region",
						i, vhu_area_name(b, k));
			q->log_ring[n].gpa = r->gpa + (uint64_t)((const char *)area[k] - (const char *)r->hva);
			q->log_ring[n++].len = size[k];
		}
		q->log_nring = n;
		return 0;
	}
	if (vhu_packed(b)) {
		/* inside one region: ring_areas_check saw to it */
		vq_mem_uaddr_to_gpa(b->mem, q->ua[0], &desc_gpa);
		q->log_ring[n].gpa = desc_gpa;
		q->log_ring[n++].len = size[0];
	}
	if (q->log_used) {
		if (!vq_dirty_log_covers(&b->log, q->log_gpa, size[2]))
			return vhu_berr(b, -EINVAL,
					"vhost-user \"Migration\": queue %u: the %s's log address 0x%llx + %llu bytes is past the log of 0x%llx bytes",
					i, vhu_area_name(b, 2),
					(unsigned long long)q->log_gpa,
					(unsigned long long)size[2],
					(unsigned long long)b->log.size);
		q->log_ring[n].gpa = q->log_gpa;
		q->log_ring[n++].len = size[2];
	}
	q->log_nring = n;
	return 0;
}

int vhu_h_set_log_base(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	struct vq_vhu_msg rep = { .kind = VQ_VHU_P_EMPTY };
	uint64_t size = m->u.log.size, off = m->u.log.offset;
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE), delta = off % pg;
	int fd = m->fds[0], r, slot;
	bool guard = vq_guard_needed(fd);       /* before the size check */
	struct stat st;
	void *p;

	m->nfds = 0;
	r = 0;
	if (fstat(fd, &st) < 0)
		r = vhu_berr(b, -errno, "VHOST_USER_SET_LOG_BASE: cannot stat the log fd: %s",
			     strerror(errno));
	if (!r && (off > (uint64_t)st.st_size || size > (uint64_t)st.st_size - off))
		r = vhu_berr(b, -EINVAL,
			     "VHOST_USER_SET_LOG_BASE: 0x%llx bytes at offset 0x%llx run past the end of the log file (0x%llx bytes)",
			     (unsigned long long)size, (unsigned long long)off,
			     (unsigned long long)st.st_size);
	if (!r && size + delta > SIZE_MAX)
		r = vhu_berr(b, -EINVAL,
			     "VHOST_USER_SET_LOG_BASE: a log of 0x%llx bytes is too large to map",
			     (unsigned long long)size);
	if (r) {
		close(fd);
		return r;
	}
	r = map_file(b, fd, guard, size + delta, off - delta, &p, &slot);
	close(fd);
	if (r)
		return vhu_berr(b, r,
				"VHOST_USER_SET_LOG_BASE: mapping 0x%llx bytes failed: %s",
				(unsigned long long)(size + delta),
				map_file_error(r));
	vhu_suspend_all(b);         /* no ring may still be marking the old log */
	vhu_log_unmap(b);
	b->log_map = p;
	b->log_map_len = size + delta;
	b->log_map_offset = off - delta;
	b->log_guard = slot;
	b->log = (struct vq_dirty_log){ .bits = (uint8_t *)p + delta, .size = size };
	r = vhu_start_all(b);
	return r ? r : vhu_reply(b, m, &rep);
}

int vhu_h_set_mem_table(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	struct vq_vhu_msg echo;
	int r = 0;

	vhu_suspend_all(b);
	vhu_unmap_all(b);
	for (unsigned i = 0; i < m->u.mem.nregions; i++) {
		int fd = m->fds[i];

		m->fds[i] = -1;
		if (r)
			close(fd);
		else
			r = map_region(b, &m->u.mem.regions[i], fd);
	}
	m->nfds = 0;
	if (r) {
		vhu_unmap_all(b);
		return r;
	}
	if (!b->pc.listening)
		return vhu_start_all(b);
	memset(&echo, 0, sizeof(echo));
	for (unsigned i = 0; i < b->nmaps; i++) {
		r = vhu_uffd_register(b, &b->maps[i]);
		if (r)
			return r;
		/* the maps are in the table's order */
		m->u.mem.regions[i].uaddr = (uintptr_t)b->maps[i].hva;
	}
	return vhu_postcopy_mem_changed(b, m, &echo);
}

/* The map of exactly this region (addresses, file and offset), if any. */
static struct map *same_region(struct vq_vhu_backend *b,
			       const struct vq_vhu_region *r, int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return NULL;
	for (unsigned i = 0; i < b->nmaps; i++) {
		struct map *mp = &b->maps[i];

		if (mp->gpa == r->gpa && mp->size == r->size && mp->uaddr == r->uaddr &&
		    mp->mmap_offset == r->mmap_offset && mp->file_dev == st.st_dev &&
		    mp->file_ino == st.st_ino)
			return mp;
	}
	return NULL;
}

int vhu_h_add_mem_reg(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	int fd = m->fds[0], r;
	struct map *mp;

	m->nfds = 0;
	/*
	 * QEMU 7.2 sends ADD and REM_MEM_REG from each vhost device
	 * of the connection, i.e. once per queue pair of a multiqueue net
	 * device: the same region again is one more reference to it, and
	 * only the last REM_MEM_REG unmaps it.  Any other overlap is still
	 * the front-end's error.
	 */
	mp = same_region(b, &m->u.region, fd);
	if (mp) {
		mp->refs++;
		close(fd);
	} else {
		vhu_suspend_all(b);         /* the map may be reallocated */
		r = map_region(b, &m->u.region, fd);
		if (r)
			return r;
		mp = &b->maps[b->nmaps - 1];
		if (b->pc.listening) {
			r = vhu_uffd_register(b, mp);
			if (r)
				return r;
		}
	}
	if (b->pc.listening) {
		struct vq_vhu_msg echo;

		memset(&echo, 0, sizeof(echo));
		m->u.region.uaddr = (uintptr_t)mp->hva;
		return vhu_postcopy_mem_changed(b, m, &echo);
	}
	return vhu_start_all(b);
}

int vhu_h_rem_mem_reg(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	const struct vq_vhu_region *r = &m->u.region;

	for (unsigned i = 0; i < b->nmaps; i++) {
		struct map *mp = &b->maps[i];

		if (mp->gpa != r->gpa || mp->size != r->size || mp->uaddr != r->uaddr)
			continue;
		if (--mp->refs)
			return b->pc.listening ? vhu_postcopy_mem_changed(b, m, NULL) : VHU_DONE;
		vhu_suspend_all(b);
		vq_mem_remove(b->mem, mp->gpa, mp->size, NULL);
		vq_guard_unmap(mp->guard, mp->addr, mp->len);
		b->maps[i] = b->maps[--b->nmaps];
		if (b->pc.listening)
			return vhu_postcopy_mem_changed(b, m, NULL);
		return vhu_start_all(b);
	}
	return vhu_berr(b, -ENOENT,
			"VHOST_USER_REM_MEM_REG: no region at guest 0x%llx of 0x%llx bytes at user 0x%llx",
			(unsigned long long)r->gpa, (unsigned long long)r->size,
			(unsigned long long)r->uaddr);
}

int vhu_mem_lost(struct vq_vhu_backend *b)
{
	uint64_t off;

	for (unsigned i = 0; i < b->nmaps; i++) {
		const struct map *mp = &b->maps[i];
		/* where the mapping starts in the file */
		uint64_t start = mp->mmap_offset -
				 (uint64_t)((char *)mp->hva - (char *)mp->addr);

		if (vq_guard_lost(mp->guard, &off))
			return vhu_berr(b, -EFAULT,
					"vhost-user \"Memory regions description\": region at guest 0x%llx (0x%llx bytes): " LOST_MSG,
					(unsigned long long)mp->gpa,
					(unsigned long long)mp->size,
					(unsigned long long)(start + off));
	}
	if (b->log_map && vq_guard_lost(b->log_guard, &off))
		return vhu_berr(b, -EFAULT,
				"vhost-user \"Migration\": the log of 0x%llx bytes: " LOST_MSG,
				(unsigned long long)b->log.size,
				(unsigned long long)(b->log_map_offset + off));
	return 0;
}
