/* SPDX-License-Identifier: MIT */
/*
 * virtq-perf's one CPU hint: ask for a line in exclusive state before we
 * write it.  A TX frame's line comes back from the backend's core; without
 * the hint, the first store waits a cross-core round trip.  The library
 * has its own (src/); a tool uses only the public API, so it keeps this.
 */
#ifndef VIRTQ_PERF_PREFETCH_H
#define VIRTQ_PERF_PREFETCH_H

#include <stdbool.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* PREFETCHW is CPUID leaf 0x80000001, ECX bit 8 (3DNowPrefetch).  Without
 * it (or -march), __builtin_prefetch(p, 1) is a read prefetch, which
 * leaves the line shared. */
static inline bool perf_cpu_prefetchw(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned regs[4];

	if (!__get_cpuid(0x80000001, &regs[0], &regs[1], &regs[2], &regs[3]))
		return false;
	return (regs[2] >> 8) & 1;
#else
	return false;
#endif
}

/* have: perf_cpu_prefetchw(), asked once. */
static inline void perf_prefetch_for_write(bool have, const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
	if (have) {
		__asm__ volatile("prefetchw (%0)" : : "r"(p));
		return;
	}
#endif
	(void)have;
	__builtin_prefetch(p, 1);
}

#endif
