/* SPDX-License-Identifier: MIT */
/* What the data path asks of the CPU beyond C: feature tests and cache
 * hints, for the rings and the devices. */
#ifndef VIRTQ_CPU_H
#define VIRTQ_CPU_H

#include <stdbool.h>

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

#endif
