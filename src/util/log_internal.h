/* SPDX-License-Identifier: MIT */
/* The library's side of virtq/log.h: how a layer says something. */
#ifndef VIRTQ_LOG_INTERNAL_H
#define VIRTQ_LOG_INTERNAL_H

#include <stdbool.h>

#include <virtq/log.h>

#include "util.h"

/* The most verbose level the callback takes; -1 while none is set. */
VQ_INTERNAL extern int vq_log_max;

/* Would a message of this level go anywhere?  One relaxed load: a check
 * that costs nothing while the library is silent. */
static inline bool vq_log_on(enum vq_log_level level)
{
	return (int)level <= __atomic_load_n(&vq_log_max, __ATOMIC_RELAXED);
}

VQ_INTERNAL void vq_log_emit(enum vq_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Log a message: formatted only when a callback takes its level. */
#define vq_log(level, ...) do {                                 \
	if (unlikely(vq_log_on(level)))                         \
		vq_log_emit(level, __VA_ARGS__);                \
} while (0)

#endif
