// SPDX-License-Identifier: MIT
/* The guest memory map: translation never trusts an address or a length. */
#include <virtq/mem.h>

#include "vq_test.h"

static _Alignas(4096) uint8_t a[4096], b[4096];

static struct vq_mem *two_adjacent_regions(void)
{
	struct vq_mem *m = vq_mem_new();
	struct vq_mem_region ra = { .gpa = 0x10000, .size = sizeof(a), .uaddr = 0x7000000, .hva = a };
	struct vq_mem_region rb = { .gpa = 0x11000, .size = sizeof(b), .uaddr = 0x9000000, .hva = b };

	CHECK(m);
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
	struct vq_dirty_log log = { bits, sizeof(bits) };
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

int main(void)
{
	RUN(translate_crosses_regions);
	RUN(translate_rejects_outside_and_wrap);
	RUN(contiguous_lookups);
	RUN(add_rejects_overlap_and_wrap);
	RUN(dirty_log_batch_marks_written_pages);
	return 0;
}
