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

#include <stddef.h>
#include <sys/uio.h>

/* Copy up to len bytes from byte off of an iovec array into dst, or from
 * src into it; return how many were copied (src/mem/iov.c). */
VQ_INTERNAL size_t vq_iov_to_buf(const struct iovec *iov, unsigned cnt,
				 size_t off, void *dst, size_t len);
VQ_INTERNAL size_t vq_iov_from_buf(const struct iovec *iov, unsigned cnt,
				   size_t off, const void *src, size_t len);

#endif
