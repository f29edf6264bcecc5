// SPDX-License-Identifier: MIT
/* The busy-poll window and the clock. */
#include <errno.h>
#include <sched.h>
#include <time.h>

#include "runtime_internal.h"

uint64_t vq_rt_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t default_now(void *arg)
{
	(void)arg;
	return vq_rt_now_ns();
}

/* Probes between two readings of the default clock.  clock_gettime costs
 * more than a look at a ring and a pause together: read at every probe, it
 * would more than double a spin, and with it the time to see the other
 * side's store.  A window ends at most this many probes late. */
#define BP_CLOCK_PROBES 16u

int rt_busy_poll(const struct vq_bp_probe *p, uint64_t start, uint64_t window_ns,
		 uint64_t yield_after_ns)
{
	uint64_t (*now)(void *) = p->now_ns ? p->now_ns : default_now;
	unsigned every = p->now_ns ? 1 : BP_CLOCK_PROBES, k = 0;
	bool yield = false;
	uint64_t spun;

	for (;;) {
		/* Work first: a buffer that arrives exactly at the deadline
		 * is still a hit. */
		if (p->ready(p->arg))
			return VQ_BP_HIT;
		if (p->other && p->other(p->arg))
			return VQ_BP_OTHER;
		if (++k == every) {
			k = 0;
			spun = now(p->arg) - start;
			if (spun >= window_ns)
				return VQ_BP_TIMEOUT;
			yield = yield_after_ns && spun >= yield_after_ns;
		}
		/* The kernel's busy loop stops on need_resched(); a thread
		 * can only offer the CPU, which returns at once when nobody
		 * waits for it. */
		if (yield)
			sched_yield();
		else
			vq_cpu_relax();
	}
}

int vq_rt_busy_poll(const struct vq_bp_probe *p, uint64_t window_ns)
{
	if (!VQ_RESERVED_ZERO(p))
		return -EINVAL;
	if (window_ns == 0)
		return VQ_BP_TIMEOUT;
	return rt_busy_poll(p, p->now_ns ? p->now_ns(p->arg) : vq_rt_now_ns(),
			    window_ns, 0);
}
