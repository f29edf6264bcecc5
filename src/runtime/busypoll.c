// SPDX-License-Identifier: MIT
/* The busy-poll window and the clock. */
#include <errno.h>
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

int vq_busy_poll(const struct vq_bp_probe *p, uint64_t window_ns)
{
	uint64_t (*now)(void *) = p->now_ns ? p->now_ns : default_now;
	uint64_t deadline;

	if (!VQ_RESERVED_ZERO(p))
		return -EINVAL;
	if (window_ns == 0)
		return VQ_BP_TIMEOUT;
	deadline = now(p->arg) + window_ns;
	for (;;) {
		/* Work first: a buffer that arrives exactly at the deadline
		 * is still a hit. */
		if (p->ready(p->arg))
			return VQ_BP_HIT;
		if (p->other && p->other(p->arg))
			return VQ_BP_OTHER;
		if (now(p->arg) >= deadline)
			return VQ_BP_TIMEOUT;
		vq_cpu_relax();
	}
}
