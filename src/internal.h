/* SPDX-License-Identifier: MIT */
/* Helpers every layer of the library uses internally. */
#ifndef VIRTQ_INTERNAL_H
#define VIRTQ_INTERNAL_H

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* Library-internal functions: not exported from the shared library (the
 * version script exports vq_*, so internal names need this too). */
#define VQ_INTERNAL __attribute__((visibility("hidden")))

#define VQ_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Are a public struct's reserved words all zero?  Constructors refuse a
 * config whose are not (-EINVAL): a caller built against newer headers set
 * a field this library does not know, and ignoring it would be silent
 * (docs/DESIGN.md, "ABI"). */
#define VQ_RESERVED_ZERO(s) vq_bytes_zero((s)->reserved, sizeof((s)->reserved))

static inline int vq_bytes_zero(const void *p, unsigned long n)
{
	const unsigned char *b = (const unsigned char *)p;

	while (n--)
		if (*b++)
			return 0;
	return 1;
}

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct vq_mem;
/* vq_mem_translate for a map without an IOTLB (the ring's per-descriptor
 * path, which knows which it has). */
VQ_INTERNAL int vq_mem_translate_gpa(const struct vq_mem *m, uint64_t gpa,
				     uint64_t len, struct iovec *iov,
				     unsigned max, unsigned *n);

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/*
 * Does this CPU have PREFETCHW (CPUID 0x80000001 ECX bit 8)?  Without
 * -march the compiler turns __builtin_prefetch(p, 1) into a read prefetch,
 * which leaves a line shared: no use for a line we are about to store to.
 * Callers ask once and keep the answer.
 */
static inline bool vq_has_prefetchw(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned eax, ebx, ecx, edx;

	return __get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx) &&
	       (ecx & (1u << 8));
#else
	return false;
#endif
}

/* Does this CPU have CLFLUSHOPT (CPUID 7.0 EBX bit 23)? */
static inline bool vq_has_clflushopt(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned eax, ebx, ecx, edx;

	return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) &&
	       (ebx & (1u << 23));
#else
	return false;
#endif
}

/* Write back and drop the line holding p from every cache (weakly ordered:
 * no fence; only for lines we are done with).  have: vq_has_clflushopt(). */
static inline void vq_evict_line(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("clflushopt %0" : "+m"(*(volatile char *)p));
#else
	(void)p;
#endif
}

/*
 * Ask for the line holding p in exclusive state ahead of our stores to it.
 * A line the other side last touched is not ours: the first store to it
 * waits a cross-core round trip, and a run of such stores fills the store
 * buffer one line at a time.  A prefetch sends those requests early and in
 * parallel.  have: vq_has_prefetchw().
 */
static inline void vq_prefetch_w(bool have, const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
	if (have) {
		__asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
		return;
	}
#endif
	(void)have;
	__builtin_prefetch(p, 1);
}

/* Copy up to len bytes from byte off of an iovec array into dst, or from
 * src into it; return how many were copied (src/mem/iov.c). */
VQ_INTERNAL size_t vq_iov_to_buf(const struct iovec *iov, unsigned cnt,
				 size_t off, void *dst, size_t len);
VQ_INTERNAL size_t vq_iov_from_buf(const struct iovec *iov, unsigned cnt,
				   size_t off, const void *src, size_t len);

/* A UNIX socket address for path; -ENAMETOOLONG if it does not fit
 * (src/vhost_user/sock.c). */
struct sockaddr_un;
VQ_INTERNAL int vq_unix_addr(struct sockaddr_un *sa, const char *path);

/* Listen on path (non-blocking, close-on-exec; mode 0 leaves the mode to
 * the umask).  The path appears only once the socket listens, so a client
 * that sees it is never refused.  A stale socket at path is replaced; a
 * live one is refused (-EADDRINUSE), and so is anything that is not a
 * socket (-EEXIST).  Returns the fd or -errno. */
VQ_INTERNAL int vq_unix_listen(const char *path, unsigned mode, int backlog,
				 int type);

#endif
