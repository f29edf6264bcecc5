/* SPDX-License-Identifier: MIT */
/*
 * virtq-perf: a cycle counter for timing steps far shorter than a clock
 * read (rr --rr-breakdown).  x86's time-stamp counter, unordered: a step
 * is bracketed by loads and stores the CPU may move across it by a few
 * cycles, which is below what a step of interest costs; elsewhere the
 * monotonic clock in ns stands in for it.
 */
#ifndef VIRTQ_PERF_TSC_H
#define VIRTQ_PERF_TSC_H

#include <stdbool.h>
#include <stdint.h>

#include <virtq/runtime.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t perf_tsc(void)
{
	return __rdtsc();
}
#define PERF_TSC_NAME "TSC cycles"
#else
static inline uint64_t perf_tsc(void)
{
	return vq_rt_now_ns();
}
#define PERF_TSC_NAME "ns"
#endif

/* The counter and the clock read together: where a rate is measured
 * from. */
struct perf_tsc_mark {
	uint64_t tsc, ns;
};

static inline struct perf_tsc_mark perf_tsc_mark(void)
{
	return (struct perf_tsc_mark){ perf_tsc(), vq_rt_now_ns() };
}

/* perf_tsc()'s ticks per second since m, against the clock.  Waits until
 * 1 ms has passed since m, so that the clock's coarse steps cannot skew
 * the rate of a short run. */
double perf_tsc_hz_since(struct perf_tsc_mark m);

/* Does perf_tsc() tick at one rate on every CPU and in every state, so
 * that it can time an interval in place of the clock? */
bool perf_tsc_invariant(void);

/* Do the counters of all CPUs agree, so that a thread that moves between
 * them still reads one time line? */
bool perf_tsc_synced(void);

#endif
