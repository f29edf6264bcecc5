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

#endif
