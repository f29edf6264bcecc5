/* SPDX-License-Identifier: MIT */
/* Private to the runtime layer. */
#ifndef VIRTQ_RUNTIME_INTERNAL_H
#define VIRTQ_RUNTIME_INTERNAL_H

#include <virtq/runtime.h>

#include "internal.h"

/* Tell the CPU we are spinning (frees the sibling hyperthread, saves power
 * and avoids the memory-order machine clear on loop exit). */
static inline void vq_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

#endif
