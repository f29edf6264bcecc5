/* SPDX-License-Identifier: MIT */
/* What the memory layer offers the layers above it, and no one else. */
#ifndef VIRTQ_MEM_LIB_H
#define VIRTQ_MEM_LIB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "util.h"

struct vq_mem;
/* vq_mem_translate for a map without an IOTLB (the ring's per-descriptor
 * path, which knows which it has). */
VQ_INTERNAL int vq_mem_translate_gpa(const struct vq_mem *m, uint64_t gpa,
				     uint64_t len, struct iovec *iov,
				     unsigned max, unsigned *n);

/* Copy up to len bytes from byte off of an iovec array into dst, or from
 * src into it; return how many were copied. */
VQ_INTERNAL size_t vq_iov_to_buf(const struct iovec *iov, unsigned cnt,
				 size_t off, void *dst, size_t len);
VQ_INTERNAL size_t vq_iov_from_buf(const struct iovec *iov, unsigned cnt,
				   size_t off, const void *src, size_t len);

#endif
