/* SPDX-License-Identifier: MIT */
/* Helpers every layer of the library uses internally. */
#ifndef VIRTQ_UTIL_H
#define VIRTQ_UTIL_H

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

#endif
