// SPDX-License-Identifier: MIT
/*
 * The driver side: kick only when the ring says so; wait for used buffers
 * by polling, then by sleeping on the call eventfd after enabling callbacks
 * and honouring the re-check (D4/P4).
 */
#include <errno.h>

#include "runtime_internal.h"

int vq_rt_drv_kick(struct vq_drv *q, int kick_fd, struct vq_rt_counters *c)
{
	int r = vq_drv_kick_prepare(q);

	if (r <= 0)
		return r;
	if (kick_fd >= 0) {
		r = vq_evt_signal(kick_fd);
		if (r < 0)
			return r;
	}
	c->kicks_sent++;
	return 1;
}

struct drv_probe {
	struct vq_drv *q;
	const struct vq_rt_drv_wait *w;
};

static uint64_t drv_now(void *arg)
{
	struct drv_probe *p = arg;

	return p->w->now_ns(p->w->arg);
}

static bool drv_ready(void *arg)
{
	struct drv_probe *p = arg;

	return vq_drv_has_used(p->q);
}

static bool drv_other(void *arg)
{
	struct drv_probe *p = arg;

	return p->w->other(p->w->arg);
}

int vq_rt_drv_wait_used(struct vq_drv *q, const struct vq_rt_drv_wait *w,
			int timeout_ms, struct vq_rt_counters *c)
{
	int64_t e;
	int r;

	if (!VQ_RESERVED_ZERO(w))
		return -EINVAL;
	if (vq_drv_has_used(q))
		return 1;
	if (w->busy_poll_ns) {
		struct drv_probe dp = { q, w };
		struct vq_bp_probe p = {
			.now_ns = w->now_ns ? drv_now : NULL, .ready = drv_ready,
			.other = w->other ? drv_other : NULL, .arg = &dp,
		};
		int b = vq_rt_busy_poll(&p, w->busy_poll_ns);

		if (b == VQ_BP_HIT) {
			c->bp_hits++;
			return 1;
		}
		c->bp_misses++;
		if (b == VQ_BP_OTHER)
			return 0;
	}
	r = w->delayed ? vq_drv_enable_cb_delayed(q) : vq_drv_enable_cb(q);
	if (r < 0)
		return r;
	if (r > 0) {
		vq_drv_disable_cb(q);
		return 1;
	}
	if (w->call_fd < 0) {
		vq_drv_disable_cb(q);
		return -EINVAL;
	}
	e = vq_evt_wait(w->call_fd, timeout_ms);
	vq_drv_disable_cb(q);
	if (e < 0)
		return (int)e;
	if (e == 0)
		return vq_drv_has_used(q) ? 1 : 0;
	c->calls_recv += (uint64_t)e;
	c->wakeups++;
	return 1;
}
