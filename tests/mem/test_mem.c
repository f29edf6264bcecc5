// SPDX-License-Identifier: MIT
/* The guest memory map: translation never trusts an address or a length. */
#include <virtq/mem.h>

#include "log_batch.h"

#include "vq_test.h"

static _Alignas(4096) uint8_t a[4096], b[4096];

static struct vq_mem *two_adjacent_regions(void)
{
	struct vq_mem *m;
	struct vq_mem_region ra = { .gpa = 0x10000, .size = sizeof(a), .uaddr = 0x7000000, .hva = a };
	struct vq_mem_region rb = { .gpa = 0x11000, .size = sizeof(b), .uaddr = 0x9000000, .hva = b };

	CHECK_EQ(vq_mem_new(&m), 0);
	CHECK_EQ(vq_mem_add(m, &rb), 0);
	CHECK_EQ(vq_mem_add(m, &ra), 0);
	return m;
}

/* A buffer that crosses two regions becomes two iovecs (vhost translate_desc). */
static void translate_crosses_regions(void)
{
	struct vq_mem *m = two_adjacent_regions();
	struct iovec iov[4];
	unsigned n = 0;

	CHECK_EQ(vq_mem_translate(m, 0x10ff0, 0x20, iov, 4, &n), 0);
	CHECK_EQ(n, 2);
	CHECK(iov[0].iov_base == a + 0xff0 && iov[0].iov_len == 0x10);
	CHECK(iov[1].iov_base == b && iov[1].iov_len == 0x10);
	/* Not enough room for the second iovec. */
	n = 3;
	CHECK_EQ(vq_mem_translate(m, 0x10ff0, 0x20, iov, 4, &n), -ENOBUFS);
	CHECK_EQ(n, 3);
	vq_mem_free(m);
}

static void translate_rejects_outside_and_wrap(void)
{
	struct vq_mem *m = two_adjacent_regions();
	struct iovec iov[4];
	unsigned n = 0;

	CHECK_EQ(vq_mem_translate(m, 0x11ff0, 0x20, iov, 4, &n), -EFAULT); /* runs off the end */
	CHECK_EQ(vq_mem_translate(m, 0xfff0, 0x20, iov, 4, &n), -EFAULT);  /* starts before */
	CHECK_EQ(vq_mem_translate(m, 0x10000, UINT64_MAX, iov, 4, &n), -EFAULT); /* wraps */
	CHECK_EQ(vq_mem_translate(m, UINT64_MAX - 1, 4, iov, 4, &n), -EFAULT);
	CHECK_EQ(n, 0);
	CHECK_EQ(vq_mem_translate(m, 0x999999, 0, iov, 4, &n), 0); /* empty: nothing */
	CHECK_EQ(n, 0);
	vq_mem_free(m);
}

static void contiguous_lookups(void)
{
	struct vq_mem *m = two_adjacent_regions();

	CHECK(vq_mem_gpa_to_hva(m, 0x10010, 16) == a + 16);
	CHECK(vq_mem_gpa_to_hva(m, 0x10ff0, 0x20) == NULL);     /* spans two */
	CHECK(vq_mem_gpa_to_hva(m, 0x11000, 0x1000) == b);
	CHECK(vq_mem_gpa_to_hva(m, 0x11000, 0x1001) == NULL);
	CHECK(vq_mem_gpa_to_hva(m, 0x11000, 0) == NULL);
	CHECK(vq_mem_uaddr_to_hva(m, 0x9000010, 8) == b + 16);
	CHECK(vq_mem_uaddr_to_hva(m, 0x9000ff8, 16) == NULL);
	CHECK(vq_mem_uaddr_to_hva(m, 0x8000000, 1) == NULL);
	vq_mem_free(m);
}

static void add_rejects_overlap_and_wrap(void)
{
	struct vq_mem *m = two_adjacent_regions();
	struct vq_mem_region r = { .gpa = 0x10800, .size = 0x100, .uaddr = 0x1, .hva = a };
	struct vq_mem_region out;

	CHECK_EQ(vq_mem_add(m, &r), -EINVAL);                    /* gpa overlap */
	r = (struct vq_mem_region){ .gpa = 0x20000, .size = 0x100, .uaddr = 0x7000010, .hva = a };
	CHECK_EQ(vq_mem_add(m, &r), -EINVAL);                    /* uaddr overlap */
	r = (struct vq_mem_region){ .gpa = UINT64_MAX - 10, .size = 0x100, .uaddr = 0x1, .hva = a };
	CHECK_EQ(vq_mem_add(m, &r), -EINVAL);                    /* wraps */
	r = (struct vq_mem_region){ .gpa = 0x20000, .size = 0, .uaddr = 0x1, .hva = a };
	CHECK_EQ(vq_mem_add(m, &r), -EINVAL);                    /* empty */
	/* the host mapping must be aligned like the guest and front-end
	 * addresses (mod 16), or an aligned ring could be misaligned here */
	r = (struct vq_mem_region){ .gpa = 0x20000, .size = 0x100, .uaddr = 0x7000000 + 0x100000, .hva = a + 4 };
	CHECK_EQ(vq_mem_add(m, &r), -EXDEV);                     /* gpa 16k, hva 16k+4 */
	r = (struct vq_mem_region){ .gpa = 0x20004, .size = 0x100, .uaddr = 0x7100000, .hva = a + 4 };
	CHECK_EQ(vq_mem_add(m, &r), -EXDEV);                     /* uaddr 16k, hva 16k+4 */
	r = (struct vq_mem_region){ .gpa = 0x20004, .size = 0x100, .uaddr = 0x7100004, .hva = a + 4 };
	CHECK_EQ(vq_mem_add(m, &r), 0);                          /* all three alike */
	CHECK_EQ(vq_mem_remove(m, 0x20004, 0x100, NULL), 0);
	CHECK_EQ(vq_mem_count(m), 2);
	CHECK_EQ(vq_mem_remove(m, 0x10000, 0x1000, &out), 0);
	CHECK(out.hva == a);
	CHECK_EQ(vq_mem_remove(m, 0x10000, 0x1000, &out), -ENOENT);
	CHECK(vq_mem_gpa_to_hva(m, 0x10000, 1) == NULL);
	vq_mem_free(m);
}

/* vhost-user "Migration": the pages under every byte written get their
 * bit, set at flush, by the inline fast path (same page, same bitmap byte
 * as the last mark, in the region last translated) or the full one. */
static void dirty_log_batch_marks_written_pages(void)
{
	struct vq_mem *m = two_adjacent_regions();
	uint8_t bits[8] = { 0 };
	struct vq_dirty_log log = { .bits = bits, .size = sizeof(bits) };
	struct vq_log_batch bt = { .log = &log };
	struct iovec one = { a + 0x100, 64 }, across[2] = { { a + 0xfc0, 64 }, { b, 64 } };

	/* nothing translated yet: the fast path declines */
	CHECK(!vq_log_batch_add_fast(&bt, a + 0x100, 64));
	vq_log_batch_add_iov(&bt, m, &one, 1, 64);
	CHECK_EQ(bits[2], 0);                   /* held until the flush */
	/* page 0x10 again, and a zero-length write: fast path, or nothing */
	CHECK(vq_log_batch_add_fast(&bt, a + 0x800, 100));
	CHECK(!vq_log_batch_add_fast(&bt, a + 0x800, 0));
	/* past the region, and across a page: the full path's */
	CHECK(!vq_log_batch_add_fast(&bt, b, 8));
	CHECK(!vq_log_batch_add_fast(&bt, a + 0xff8, 16));
	vq_log_batch_flush(&bt);
	CHECK_EQ(bits[2], 0x01);
	/* after a flush the batch is empty: the first mark takes the full path */
	CHECK(!vq_log_batch_add_fast(&bt, a + 0x100, 64));
	/* a buffer in two regions marks both pages, only the bytes written */
	vq_log_batch_add_iov(&bt, m, across, 2, 64 + 1);
	vq_log_batch_flush(&bt);
	CHECK_EQ(bits[2], 0x03);
	for (unsigned i = 0; i < sizeof(bits); i++)
		CHECK(i == 2 || bits[i] == 0);
	vq_mem_free(m);
}

/* ---- IOTLB (vhost-user "IOMMU support") ---- */

static _Alignas(4096) uint8_t big[4 * 4096];

struct misses {
	unsigned n;
	uint64_t iova;
	unsigned access;
};

static void on_miss(void *arg, uint64_t iova, unsigned access)
{
	struct misses *ms = arg;

	ms->n++;
	ms->iova = iova;
	ms->access = access;
}

/* One region of 4 pages at front-end address 0x7000000; an IOTLB on it. */
static struct vq_mem *iotlb_map(struct misses *ms)
{
	struct vq_mem *m;
	struct vq_mem_region r = { .gpa = 0x40000, .size = sizeof(big), .uaddr = 0x7000000, .hva = big };

	CHECK_EQ(vq_mem_new(&m), 0);
	CHECK_EQ(vq_mem_add(m, &r), 0);
	CHECK_EQ(vq_mem_iotlb_enable(m, on_miss, ms), 0);
	CHECK(vq_mem_iotlb_enabled(m));
	return m;
}

static int update(struct vq_mem *m, uint64_t iova, uint64_t size, uint64_t ua,
		  unsigned perm)
{
	struct vq_iotlb_entry e = { .iova = iova, .size = size, .uaddr = ua, .perm = perm };

	return vq_mem_iotlb_update(m, &e);
}

/* With an IOTLB, addresses are IOVAs: a miss asks once per lookup and
 * translates nothing; the pages of one buffer, mapped page by page,
 * come back as one iovec. */
static void iotlb_miss_then_translate(void)
{
	struct misses ms = { 0 };
	struct vq_mem *m = iotlb_map(&ms);
	struct iovec iov[4];
	unsigned n = 0;
	uint32_t g0 = vq_mem_iotlb_generation(m);

	CHECK_EQ(vq_mem_translate_access(m, 0xfeed1ff0, 0x20, VQ_ACCESS_WO, iov, 4, &n), -EAGAIN);
	CHECK_EQ(n, 0);
	CHECK_EQ(ms.n, 1);
	CHECK_EQ(ms.iova, 0xfeed1ff0);
	CHECK_EQ(ms.access, VQ_ACCESS_WO);
	/* the guest-physical address means nothing now */
	CHECK_EQ(vq_mem_translate_access(m, 0x40000, 0x10, VQ_ACCESS_RO, iov, 4, &n), -EAGAIN);

	CHECK_EQ(update(m, 0xfeed1000, 0x1000, 0x7001000, VQ_ACCESS_RW), 0);
	CHECK(vq_mem_iotlb_generation(m) != g0);
	/* half the buffer is mapped: still a miss, for the second page */
	CHECK_EQ(vq_mem_translate_access(m, 0xfeed1ff0, 0x20, VQ_ACCESS_WO, iov, 4, &n), -EAGAIN);
	CHECK_EQ(ms.iova, 0xfeed2000);
	CHECK_EQ(update(m, 0xfeed2000, 0x1000, 0x7002000, VQ_ACCESS_RW), 0);
	CHECK_EQ(vq_mem_translate_access(m, 0xfeed1ff0, 0x20, VQ_ACCESS_WO, iov, 4, &n), 0);
	CHECK_EQ(n, 1);
	CHECK(iov[0].iov_base == big + 0x1ff0);
	CHECK_EQ(iov[0].iov_len, 0x20);
	CHECK_EQ(vq_mem_iotlb_count(m), 2);
	vq_mem_free(m);
}

/* IOVA pages that are not neighbours here stay apart; the iovecs of an
 * earlier descriptor are never joined with this one's. */
static void iotlb_scattered_pages(void)
{
	struct misses ms = { 0 };
	struct vq_mem *m = iotlb_map(&ms);
	struct iovec iov[4];
	unsigned n = 0;
	void *h;

	CHECK_EQ(update(m, 0x1000, 0x1000, 0x7003000, VQ_ACCESS_RW), 0);
	CHECK_EQ(update(m, 0x2000, 0x1000, 0x7000000, VQ_ACCESS_RW), 0);
	CHECK_EQ(vq_mem_translate_access(m, 0x1800, 0x1000, VQ_ACCESS_RO, iov, 4, &n), 0);
	CHECK_EQ(n, 2);
	CHECK(iov[0].iov_base == big + 0x3800 && iov[0].iov_len == 0x800);
	CHECK(iov[1].iov_base == big && iov[1].iov_len == 0x800);
	/* a next descriptor right after in host memory is its own iovec */
	CHECK_EQ(vq_mem_translate_access(m, 0x2800, 0x10, VQ_ACCESS_RO, iov, 4, &n), 0);
	CHECK_EQ(n, 3);
	CHECK_EQ(vq_mem_translate_access(m, 0x1800, 0x1000, VQ_ACCESS_RO, iov, 1, &(unsigned){ 0 }), -ENOBUFS);
	/* rings and tables need one piece */
	CHECK_EQ(vq_mem_map_contig(m, 0x1800, 0x1000, VQ_ACCESS_RO, &h), -EFAULT);
	CHECK_EQ(vq_mem_map_contig(m, 0x2010, 0x100, VQ_ACCESS_RO, &h), 0);
	CHECK(h == big + 0x10);
	CHECK_EQ(vq_mem_map_contig(m, 0x5000, 0x10, VQ_ACCESS_RO, &h), -EAGAIN);
	CHECK_EQ(ms.n, 1);
	vq_mem_free(m);
}

/* An entry's permission is the most the device may do there (vhost
 * translate_desc: -EPERM). */
static void iotlb_permission_checked(void)
{
	struct misses ms = { 0 };
	struct vq_mem *m = iotlb_map(&ms);
	struct iovec iov[2];
	unsigned n = 0;

	CHECK_EQ(update(m, 0x1000, 0x1000, 0x7000000, VQ_ACCESS_RO), 0);
	CHECK_EQ(update(m, 0x2000, 0x1000, 0x7001000, VQ_ACCESS_WO), 0);
	CHECK_EQ(vq_mem_translate_access(m, 0x1000, 0x10, VQ_ACCESS_RO, iov, 2, &n), 0);
	CHECK_EQ(vq_mem_translate_access(m, 0x1000, 0x10, VQ_ACCESS_WO, iov, 2, &n), -EFAULT);
	CHECK_EQ(vq_mem_translate_access(m, 0x2000, 0x10, VQ_ACCESS_WO, iov, 2, &n), 0);
	CHECK_EQ(vq_mem_translate_access(m, 0x2000, 0x10, VQ_ACCESS_RO, iov, 2, &n), -EFAULT);
	CHECK_EQ(vq_mem_translate_access(m, 0x1ff0, 0x20, VQ_ACCESS_RO, iov, 2, &(unsigned){ 0 }), -EFAULT);
	CHECK_EQ(ms.n, 0);
	vq_mem_free(m);
}

/* An update the front-end should never send is refused: empty, wrapping,
 * no permission, or naming memory outside the table (vhost-user: "must be
 * within vhost memory regions"). */
static void iotlb_update_checked(void)
{
	struct misses ms = { 0 };
	struct vq_mem *m = iotlb_map(&ms);

	CHECK_EQ(update(m, 0x1000, 0, 0x7000000, VQ_ACCESS_RW), -EINVAL);
	CHECK_EQ(update(m, UINT64_MAX - 0xfff, 0x2000, 0x7000000, VQ_ACCESS_RW), -EINVAL);
	CHECK_EQ(update(m, 0x1000, 0x1000, UINT64_MAX - 0xfff, VQ_ACCESS_RW), -EINVAL);
	CHECK_EQ(update(m, 0x1000, 0x1000, 0x7000000, 0), -EINVAL);
	CHECK_EQ(update(m, 0x1000, 0x1000, 0x7000000, 4), -EINVAL);
	CHECK_EQ(update(m, 0x1000, 0x1000, 0x6fff000, VQ_ACCESS_RW), -EINVAL);
	CHECK_EQ(update(m, 0x1000, 0x1000, 0x7003800, VQ_ACCESS_RW), -EINVAL);
	CHECK_EQ(update(m, 0x1000, sizeof(big), 0x7000000, VQ_ACCESS_RW), 0);
	CHECK_EQ(vq_mem_iotlb_count(m), 1);
	vq_mem_free(m);

	CHECK_EQ(vq_mem_new(&m), 0);
	CHECK_EQ(update(m, 0x1000, 0x1000, 0x7000000, VQ_ACCESS_RW), -ENXIO);
	CHECK_EQ(vq_mem_iotlb_invalidate(m, 0, 0), 0);
	vq_mem_free(m);
}

/* A newer entry replaces the ones it overlaps; an invalidation drops every
 * entry it touches (whole: vhost_iotlb_del_range), and the replaced tables
 * wait for a reclaim; the table holds at most VQ_IOTLB_MAX_ENTRIES. */
static void iotlb_replace_invalidate_reclaim(void)
{
	struct misses ms = { 0 };
	struct vq_mem *m = iotlb_map(&ms);
	struct iovec iov[2];
	unsigned n = 0, i;
	uint32_t g;

	CHECK_EQ(update(m, 0x1000, 0x2000, 0x7000000, VQ_ACCESS_RW), 0);
	CHECK_EQ(update(m, 0x2000, 0x1000, 0x7003000, VQ_ACCESS_RW), 0);
	CHECK_EQ(vq_mem_iotlb_count(m), 1);     /* the first was overlapped */
	CHECK_EQ(vq_mem_translate_access(m, 0x1000, 0x10, VQ_ACCESS_RO, iov, 2, &n), -EAGAIN);
	CHECK_EQ(vq_mem_translate_access(m, 0x2000, 0x10, VQ_ACCESS_RO, iov, 2, &n), 0);
	CHECK(iov[0].iov_base == big + 0x3000);
	CHECK_EQ(update(m, 0x8000, 0x1000, 0x7000000, VQ_ACCESS_RW), 0);
	CHECK_EQ(update(m, 0x9000, 0x1000, 0x7001000, VQ_ACCESS_RW), 0);
	CHECK_EQ(vq_mem_iotlb_retired(m), 4);
	g = vq_mem_iotlb_generation(m);
	CHECK_EQ(vq_mem_iotlb_invalidate(m, 0x4000, 0x1000), 0);   /* nothing there */
	CHECK_EQ(vq_mem_iotlb_generation(m), g);
	CHECK_EQ(vq_mem_iotlb_invalidate(m, 0x8fff, 2), 2);
	CHECK(vq_mem_iotlb_generation(m) != g);
	CHECK_EQ(vq_mem_iotlb_count(m), 1);
	CHECK_EQ(vq_mem_translate_access(m, 0x9000, 0x10, VQ_ACCESS_RO, iov, 2, &n), -EAGAIN);
	CHECK_EQ(vq_mem_iotlb_retired(m), 5);
	vq_mem_iotlb_reclaim(m);
	CHECK_EQ(vq_mem_iotlb_retired(m), 0);
	CHECK_EQ(vq_mem_translate_access(m, 0x2000, 0x10, VQ_ACCESS_RO, iov, 2, &(unsigned){ 0 }), 0);
	/* size 0: everything (QEMU's global invalidation) */
	CHECK_EQ(vq_mem_iotlb_invalidate(m, 0, 0), 1);
	CHECK_EQ(vq_mem_iotlb_count(m), 0);

	for (i = 0; i < VQ_IOTLB_MAX_ENTRIES; i++) {
		CHECK_EQ(update(m, 0x100000 + (uint64_t)i * 0x1000, 0x1000, 0x7000000, VQ_ACCESS_RO), 0);
		if (vq_mem_iotlb_retired(m) > 64)
			vq_mem_iotlb_reclaim(m);
	}
	CHECK_EQ(update(m, 0x1000, 0x1000, 0x7000000, VQ_ACCESS_RO), -ENOSPC);
	/* replacing one still fits */
	CHECK_EQ(update(m, 0x100000, 0x1000, 0x7001000, VQ_ACCESS_RO), 0);
	CHECK_EQ(vq_mem_iotlb_count(m), VQ_IOTLB_MAX_ENTRIES);
	vq_mem_iotlb_disable(m);
	CHECK(!vq_mem_iotlb_enabled(m));
	CHECK_EQ(vq_mem_translate_access(m, 0x40000, 0x10, VQ_ACCESS_RO, iov, 2, &(unsigned){ 0 }), 0);
	vq_mem_free(m);
}

/* A region that leaves the map takes the entries into it along (a queue
 * must never reach memory that is unmapped, or mapped anew for something
 * else); entries elsewhere stay. */
static void iotlb_region_removed_forgets_entries(void)
{
	struct misses ms = { 0 };
	struct vq_mem *m = iotlb_map(&ms);
	struct vq_mem_region other = { .gpa = 0x80000, .size = sizeof(a), .uaddr = 0x9000000, .hva = a };
	struct iovec iov[2];

	CHECK_EQ(vq_mem_add(m, &other), 0);
	CHECK_EQ(update(m, 0x1000, 0x1000, 0x7001000, VQ_ACCESS_RW), 0);
	CHECK_EQ(update(m, 0x2000, 0x1000, 0x9000000, VQ_ACCESS_RW), 0);
	CHECK_EQ(vq_mem_remove(m, 0x40000, sizeof(big), NULL), 0);
	CHECK_EQ(vq_mem_iotlb_count(m), 1);
	CHECK_EQ(vq_mem_translate_access(m, 0x1000, 0x10, VQ_ACCESS_RO, iov, 2, &(unsigned){ 0 }), -EAGAIN);
	CHECK_EQ(vq_mem_translate_access(m, 0x2000, 0x10, VQ_ACCESS_RO, iov, 2, &(unsigned){ 0 }), 0);
	CHECK(iov[0].iov_base == a);
	vq_mem_free(m);
}

int main(void)
{
	RUN(translate_crosses_regions);
	RUN(translate_rejects_outside_and_wrap);
	RUN(contiguous_lookups);
	RUN(add_rejects_overlap_and_wrap);
	RUN(dirty_log_batch_marks_written_pages);
	RUN(iotlb_miss_then_translate);
	RUN(iotlb_scattered_pages);
	RUN(iotlb_permission_checked);
	RUN(iotlb_update_checked);
	RUN(iotlb_replace_invalidate_reclaim);
	RUN(iotlb_region_removed_forgets_entries);
	return 0;
}
