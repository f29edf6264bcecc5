// SPDX-License-Identifier: MIT
/*
 * The runtime over real rings, one thread, with the races staged exactly:
 * the driver adds a buffer after the device found the queue dry and before
 * it enables notifications (the driver sees notifications disabled and does
 * not kick); and the device publishes a used buffer after the driver found
 * none and before it enables callbacks (the device sees callbacks disabled
 * and does not call).  The enable re-checks (V4, D4/P4) must catch both.
 * The device loop enables notifications only before it sleeps.
 */
#include <virtq/runtime.h>

#include <unistd.h>

#include "ring_pair.h"

/* Run a case on each layout and notification mode. */
static void each_layout(void (*fn)(uint64_t features))
{
	fn(0);
	fn(VQ_BIT(VQ_F_EVENT_IDX));
	fn(VQ_BIT(VQ_F_RING_PACKED));
	fn(VQ_BIT(VQ_F_RING_PACKED) | VQ_BIT(VQ_F_EVENT_IDX));
}

struct stage {
	struct ring_pair *p;
	uint64_t buf;
	unsigned dry_seen;
	int inject_kick;        /* what kick_prepare said for the injected add */
	unsigned processed;
	bool inject_on_enable;  /* play the driver in the enable race once */
};

/* The driver adds a buffer as the device enables notifications, before
 * the device's store is visible: it sees them disabled and does not kick. */
static int stage_enable(void *ring)
{
	struct stage *s = ring;

	if (s->inject_on_enable) {
		struct vq_seg seg = { s->buf, 64 };

		s->inject_on_enable = false;
		CHECK_EQ(vq_drv_add(s->p->drv, &seg, 1, 0, (void *)3), 0);
		s->inject_kick = vq_drv_kick_prepare(s->p->drv);
	}
	return vq_dev_enable_notify(s->p->dev);
}

/* Only enable_notify is staged; the rest are the ring's own. */
static const struct vq_rt_ring_ops stage_ops = { .enable_notify = stage_enable };

/* Device process: pop and push everything; the first time the queue is
 * found dry, play the driver: add a buffer and publish it. */
static int stage_process(struct vq_rt_queue *q, void *arg,
			 const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct stage *s = arg;
	struct iovec iov[4];
	struct vq_chain c = { .iov = iov, .iov_max = 4 };
	unsigned n = 0;
	int r;

	while ((r = vq_dev_pop(s->p->dev, &c)) == 1) {
		CHECK_EQ(vq_dev_push(s->p->dev, &c, 0), 1);
		n++;
	}
	CHECK_EQ(r, 0);
	if (s->dry_seen++ == 0) {
		struct vq_seg seg = { s->buf, 64 };

		CHECK_EQ(vq_drv_add(s->p->drv, &seg, 1, 0, (void *)1), 0);
		s->inject_kick = vq_drv_kick_prepare(s->p->drv);
	}
	s->processed += n;
	return (int)n;
}

static void device_recheck(uint64_t features)
{
	struct ring_pair p;
	struct stage s = { .p = &p };
	struct vq_rt_loop_config lc = { 0 };
	struct vq_rt_queue_config qc;
	struct vq_rt_queue *q;
	struct vq_rt_loop *l;
	int kick = vq_evt_new();

	fprintf(stderr, "   features %#llx\n", (unsigned long long)features);
	pair_init(&p, features, 16, 1, 1);
	s.buf = pair_alloc(&p, 64);
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	qc = (struct vq_rt_queue_config){ .dev = p.dev, .ops = &stage_ops,
					  .ring = &s, .kick_fd = kick, .call_fd = -1,
					  .process = stage_process, .arg = &s };
	CHECK_EQ(vq_rt_loop_add(l, &qc, &q), 0);
	/* Three buffers first, so that with EVENT_IDX the device's
	 * avail_event is stale (0) by the time the queue runs dry at 3: the
	 * driver's add at 3 then needs no kick (vring_need_event(0, 4, 3) is
	 * false), exactly as with the NO_NOTIFY flag. */
	{
		struct vq_seg seg = { s.buf, 64 };
		int i;

		for (i = 0; i < 3; i++)
			CHECK_EQ(vq_drv_add(p.drv, &seg, 1, 0, (void *)9), 0);
		CHECK(vq_drv_kick_prepare(p.drv) >= 0);
		vq_evt_drain(kick);
	}

	/* Round 1: 3 buffers, then dry; the driver adds right after the
	 * device found the ring dry, with notifications disabled, so it does
	 * not kick ... */
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 3);
	CHECK_EQ(s.inject_kick, 0);
	CHECK_EQ(vq_evt_drain(kick), 0);
	/* ... and the idle ring is read before anything sleeps: active */
	CHECK(vq_rt_queue_active(q));
	/* Round 2 processes it without any kick. */
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);
	CHECK_EQ(s.processed, 4);
	CHECK(!vq_rt_queue_active(q));
	CHECK_EQ(vq_rt_queue_counters(q)->packets, 4);
	CHECK_EQ(vq_rt_queue_counters(q)->kicks_recv, 0);

	/* Round 3, V4 proper: about to sleep, the device enables
	 * notifications; the driver adds before that store is visible and
	 * does not kick; enable_notify's re-check must find the buffer and
	 * the loop must not sleep. */
	s.inject_on_enable = true;
	{
		uint64_t t0 = vq_rt_now_ns();

		CHECK_EQ(vq_rt_loop_run_once(l, 2000), 0);
		CHECK(vq_rt_now_ns() - t0 < 1000000000ull);
	}
	CHECK_EQ(s.inject_kick, 0);
	CHECK_EQ(vq_evt_drain(kick), 0);
	CHECK(vq_rt_queue_active(q));
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);
	CHECK_EQ(s.processed, 5);
	CHECK(!vq_rt_queue_active(q));

	/* Asleep with notifications on: the next add must kick. */
	CHECK_EQ(vq_rt_loop_run_once(l, 1), 0);
	{
		struct vq_seg seg = { s.buf, 64 };

		CHECK_EQ(vq_drv_add(p.drv, &seg, 1, 0, (void *)2), 0);
		CHECK_EQ(vq_rt_drv_kick(p.drv, kick, &(struct vq_rt_counters){ 0 }), 1);
	}
	CHECK_EQ(vq_rt_loop_run_once(l, 100), 0);       /* woken by the kick */
	CHECK(vq_rt_queue_active(q));
	CHECK_EQ(vq_rt_queue_counters(q)->kicks_recv, 1);
	CHECK_EQ(vq_rt_queue_counters(q)->wakeups, 1);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);
	vq_rt_loop_free(l);
	pair_fini(&p);
	close(kick);
}

/* V4 lost-wakeup race on the device side, each layout and notification
 * mode. */
static void runtime_v4_device_enable_notify_recheck(void)
{
	each_layout(device_recheck);
}

/*
 * V4 broken by the driver: it publishes while notifications are enabled
 * and owes a kick it never sends (a guest whose barrier does not order its
 * index store before its avail_event read: QEMU 7.2's TCG with maxcpus=1).
 * Nothing wakes the queue but the quiet-period look at idle rings.
 */
static int drain_process(struct vq_rt_queue *q, void *arg,
			 const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct ring_pair *p = arg;
	struct iovec iov[4];
	struct vq_chain c = { .iov = iov, .iov_max = 4 };
	int n = 0, r;

	while ((r = vq_dev_pop(p->dev, &c)) == 1) {
		CHECK_EQ(vq_dev_push(p->dev, &c, 0), 1);
		n++;
	}
	return r < 0 ? r : n;
}

static void device_missed_kick(uint64_t features)
{
	struct ring_pair p;
	struct vq_rt_loop_config lc = { 0 };
	struct vq_rt_queue_config qc;
	struct vq_rt_queue *q;
	struct vq_rt_loop *l;
	struct vq_seg seg;
	int kick = vq_evt_new();

	fprintf(stderr, "   features %#llx\n", (unsigned long long)features);
	pair_init(&p, features, 16, 1, 1);
	seg = (struct vq_seg){ pair_alloc(&p, 64), 64 };
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	qc = (struct vq_rt_queue_config){ .dev = p.dev, .kick_fd = kick,
					  .call_fd = -1, .process = drain_process,
					  .arg = &p };
	CHECK_EQ(vq_rt_loop_add(l, &qc, &q), 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 0);        /* dry: goes idle */
	CHECK(!vq_rt_queue_active(q));
	CHECK_EQ(vq_rt_loop_run_once(l, 1), 0);        /* asleep on its kick */

	CHECK_EQ(vq_drv_add(p.drv, &seg, 1, 0, (void *)1), 0);
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 1);       /* owed, not sent */
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 0);        /* no sleep, no look */
	CHECK(!vq_rt_queue_active(q));
	CHECK_EQ(vq_rt_loop_run_once(l, 20), 0);       /* 20 ms of quiet */
	CHECK(vq_rt_queue_active(q));
	CHECK_EQ(vq_rt_queue_counters(q)->kicks_missed, 1);
	CHECK_EQ(vq_rt_queue_counters(q)->wakeups, 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);
	CHECK(!vq_rt_queue_active(q));

	/* A quiet period with nothing posted is not a missed kick. */
	CHECK_EQ(vq_rt_loop_run_once(l, 20), 0);
	CHECK(!vq_rt_queue_active(q));
	CHECK_EQ(vq_rt_queue_counters(q)->kicks_missed, 1);
	vq_rt_loop_free(l);
	pair_fini(&p);
	close(kick);
}

/*
 * The same race on the used side (2.7.10 used buffer notification): the
 * device published B and read the driver's suppression before the driver's
 * update of it (used_event := B's index, or the flag cleared) became
 * visible; the driver's own re-check read the used index stale and it
 * sleeps.  should_signal judged only what was new since its last look and
 * said no; when the queue has gone quiet the loop judges again over
 * everything unsignalled, and the call goes out, once.
 */
/*
 * B was used and, callbacks off, not called.  The driver asks for B's
 * call; its re-check says B is there, which the driver with the failed
 * barrier did not see: it sleeps.  The queue's quiet look judges again
 * and calls, once; the driver's buffer is no missed kick.
 */
static void late_call_judged_again(struct ring_pair *p, struct vq_rt_loop *l,
				   struct vq_rt_queue *q, int call)
{
	const struct vq_rt_counters *c = vq_rt_queue_counters(q);

	CHECK_EQ(vq_drv_enable_cb(p->drv), 1);
	CHECK_EQ(vq_rt_loop_run_once(l, 20), 0);       /* quiet: judged again */
	CHECK_EQ(c->calls_late, 1);
	CHECK_EQ(c->calls_sent, 2);
	CHECK_EQ(vq_evt_drain(call), 1);
	CHECK_EQ(c->kicks_missed, 0);
	CHECK(!vq_rt_queue_active(q));
}

static void device_late_call(uint64_t features)
{
	struct ring_pair p;
	struct vq_rt_loop_config lc = { 0 };
	struct vq_rt_queue_config qc;
	const struct vq_rt_counters *c;
	struct vq_rt_counters dc = { 0 };
	struct vq_rt_queue *q;
	struct vq_rt_loop *l;
	struct vq_seg seg;
	void *tok;
	uint32_t len;
	int kick = vq_evt_new(), call = vq_evt_new();

	fprintf(stderr, "   features %#llx\n", (unsigned long long)features);
	pair_init(&p, features, 16, 1, 1);
	seg = (struct vq_seg){ pair_alloc(&p, 64), 64 };
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	qc = (struct vq_rt_queue_config){ .dev = p.dev, .kick_fd = kick,
					  .call_fd = call, .process = drain_process,
					  .arg = &p };
	CHECK_EQ(vq_rt_loop_add(l, &qc, &q), 0);
	c = vq_rt_queue_counters(q);

	/* A: used and called (callbacks were on). */
	CHECK_EQ(vq_drv_add(p.drv, &seg, 1, 0, (void *)1), 0);
	CHECK(vq_rt_drv_kick(p.drv, kick, &dc) >= 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);
	CHECK_EQ(c->calls_sent, 1);
	CHECK_EQ(vq_evt_drain(call), 1);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);

	/* B, with callbacks off: used, not called. */
	vq_drv_disable_cb(p.drv);
	CHECK_EQ(vq_drv_add(p.drv, &seg, 1, 0, (void *)2), 0);
	CHECK(vq_rt_drv_kick(p.drv, kick, &dc) >= 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 100), 0);      /* found (read or kicked) */
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);
	CHECK(!vq_rt_queue_active(q));
	CHECK_EQ(c->calls_sent, 1);

	CHECK_EQ(vq_evt_drain(call), 0);
	late_call_judged_again(&p, l, q, call);
	/* Owed once: the next quiet period sends nothing. */
	CHECK_EQ(vq_rt_loop_run_once(l, 20), 0);
	CHECK_EQ(c->calls_late, 1);
	CHECK_EQ(vq_evt_drain(call), 0);
	vq_rt_loop_free(l);
	pair_fini(&p);
	close(kick);
	close(call);
}

static void runtime_used_call_judged_again_after_quiet_period(void)
{
	each_layout(device_late_call);
}

static void runtime_v4_missed_kick_found_after_quiet_period(void)
{
	each_layout(device_missed_kick);
}

/*
 * A ring filled outside its own turn (a receive ring an fd's callback
 * fills): the device overrides only has_avail ("nothing to put in it"),
 * the loop takes the vq_dev calls for the rest from dev, and its quiet look
 * covers the ring like any other: the call the driver asked for and we
 * judged too early goes out (2.7.10 used buffer notification).
 */
static bool nothing_to_put(void *ring)
{
	(void)ring;
	return false;
}

static int no_turn(struct vq_rt_queue *q, void *arg,
		   const struct vq_rt_budget *b, uint64_t *bytes)
{
	return 0;
}

static void device_filled_elsewhere_late_call(uint64_t features)
{
	static const struct vq_rt_ring_ops some = { .has_avail = nothing_to_put };
	struct ring_pair p;
	struct vq_rt_loop_config lc = { 0 };
	struct vq_rt_queue_config qc;
	struct vq_rt_queue *q;
	struct vq_rt_loop *l;
	struct iovec iov[4];
	struct vq_chain ch = { .iov = iov, .iov_max = 4 };
	struct vq_seg seg;
	void *tok;
	uint32_t len;
	int call = vq_evt_new();

	fprintf(stderr, "   features %#llx\n", (unsigned long long)features);
	pair_init(&p, features, 16, 1, 1);
	seg = (struct vq_seg){ pair_alloc(&p, 64), 64 };
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	/* ops alone must name every call but signal_owed */
	qc = (struct vq_rt_queue_config){ .ops = &some, .kick_fd = -1,
					  .call_fd = call, .process = no_turn };
	CHECK_EQ(vq_rt_loop_add(l, &qc, &q), -EINVAL);
	qc.dev = p.dev;
	CHECK_EQ(vq_rt_loop_add(l, &qc, &q), 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 0);        /* goes idle */
	CHECK(!vq_rt_queue_active(q));

	/* A, filled elsewhere with callbacks on: called (dev's should_signal
	 * through vq_rt_queue_signal). */
	CHECK_EQ(vq_drv_add(p.drv, &seg, 1, 0, (void *)4), 0);
	CHECK(vq_drv_kick_prepare(p.drv) >= 0);
	CHECK_EQ(vq_dev_pop(p.dev, &ch), 1);
	CHECK_EQ(vq_dev_push(p.dev, &ch, 0), 1);
	CHECK_EQ(vq_rt_queue_signal(q), 1);
	CHECK_EQ(vq_evt_drain(call), 1);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	/* B, with callbacks off: not called. */
	vq_drv_disable_cb(p.drv);
	CHECK_EQ(vq_drv_add(p.drv, &seg, 1, 0, (void *)5), 0);
	CHECK(vq_drv_kick_prepare(p.drv) >= 0);
	CHECK_EQ(vq_dev_pop(p.dev, &ch), 1);
	CHECK_EQ(vq_dev_push(p.dev, &ch, 0), 1);
	CHECK_EQ(vq_rt_queue_signal(q), 0);
	late_call_judged_again(&p, l, q, call);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	vq_rt_loop_free(l);
	pair_fini(&p);
	close(call);
}

static void runtime_quiet_look_covers_ring_filled_elsewhere(void)
{
	each_layout(device_filled_elsewhere_late_call);
}

/* ---- driver side ---- */

struct dstage {
	struct ring_pair *p;
	uint64_t t;
	unsigned others;
	bool signalled;
};

static uint64_t dclock(void *arg)
{
	struct dstage *d = arg;

	return d->t += 1000;
}

/* Runs inside the driver's busy-poll window: the device publishes the
 * used buffer now (callbacks are disabled, so it must not call). */
static bool device_acts(void *arg)
{
	struct dstage *d = arg;
	struct iovec iov[4];
	struct vq_chain c = { .iov = iov, .iov_max = 4 };

	/* The third probe: the window has just checked for used buffers
	 * and found none; publish now, in the gap before enable_cb. */
	if (++d->others == 3) {
		CHECK_EQ(vq_dev_pop(d->p->dev, &c), 1);
		CHECK_EQ(vq_dev_push(d->p->dev, &c, 0), 1);
		d->signalled = vq_dev_should_signal(d->p->dev);
	}
	return false;
}

static void driver_recheck(uint64_t features)
{
	struct ring_pair p;
	struct dstage d = { .p = &p };
	struct vq_rt_counters c = { 0 };
	int call = vq_evt_new();
	struct vq_rt_drv_wait w = { .call_fd = call, .busy_poll_ns = 2500,
				    .now_ns = dclock, .other = device_acts,
				    .arg = &d };
	struct vq_seg seg;
	void *tok;
	uint32_t len;

	fprintf(stderr, "   features %#llx\n", (unsigned long long)features);
	pair_init(&p, features, 16, 1, 1);
	seg = (struct vq_seg){ pair_alloc(&p, 64), 64 };
	vq_drv_disable_cb(p.drv);
	/* Three buffers round trip first, so that with EVENT_IDX the
	 * driver's used_event is stale (callbacks disabled) when the staged
	 * buffer is used: the device then needs no call for it, exactly as
	 * with the NO_INTERRUPT flag. */
	{
		struct iovec iov[4];
		struct vq_chain ch = { .iov = iov, .iov_max = 4 };
		int i;

		for (i = 0; i < 3; i++)
			CHECK_EQ(vq_drv_add(p.drv, &seg, 1, 0, (void *)8), 0);
		CHECK(vq_drv_kick_prepare(p.drv) >= 0);
		for (i = 0; i < 3; i++) {
			CHECK_EQ(vq_dev_pop(p.dev, &ch), 1);
			CHECK_EQ(vq_dev_push(p.dev, &ch, 0), 1);
			vq_dev_should_signal(p.dev);
		}
		for (i = 0; i < 3; i++)
			CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	}
	CHECK_EQ(vq_drv_add(p.drv, &seg, 1, 0, (void *)7), 0);
	CHECK(vq_drv_kick_prepare(p.drv) >= 0);

	/* Window 2500 ns with a clock of +1000 per reading: 3 probes.  The
	 * device publishes during the third, after the used check of that
	 * probe: the window misses it, and enable_cb's re-check catches it
	 * (the device did not call: callbacks were disabled). */
	{
		/* and returns at once: no sleep on the call that never comes */
		uint64_t t0 = vq_rt_now_ns();

		CHECK_EQ(vq_rt_drv_wait_used(p.drv, &w, 2000, &c), 1);
		CHECK(vq_rt_now_ns() - t0 < 1000000000ull);
	}
	CHECK(!d.signalled);
	CHECK_EQ(c.bp_misses, 1);
	CHECK_EQ(c.bp_hits, 0);
	CHECK_EQ(c.wakeups, 0);
	CHECK_EQ(vq_evt_drain(call), 0);
	CHECK_EQ(vq_drv_get(p.drv, &tok, &len), 1);
	CHECK(tok == (void *)7);

	/* Nothing outstanding: the wait sleeps and times out. */
	w.other = NULL;
	CHECK_EQ(vq_rt_drv_wait_used(p.drv, &w, 0, &c), 0);
	CHECK_EQ(c.bp_misses, 2);
	pair_fini(&p);
	close(call);
}

/* D4/P4 on the driver side, each layout and notification mode. */
static void runtime_d4_driver_enable_cb_recheck(void)
{
	each_layout(driver_recheck);
}

/* A sleeping driver is woken by the device's call and counts it. */
static void runtime_driver_sleeps_and_wakes_on_call(void)
{
	struct ring_pair p;
	struct vq_rt_counters c = { 0 };
	struct vq_rt_queue_config qc;
	struct vq_rt_loop_config lc = { 0 };
	struct vq_rt_loop *l;
	struct vq_rt_queue *q;
	int kick = vq_evt_new(), call = vq_evt_new();
	struct vq_rt_drv_wait w = { .call_fd = call };
	struct iovec iov[4];
	struct vq_chain ch = { .iov = iov, .iov_max = 4 };
	struct vq_seg seg;

	pair_init(&p, VQ_BIT(VQ_F_EVENT_IDX), 16, 1, 1);
	seg = (struct vq_seg){ pair_alloc(&p, 64), 64 };
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	qc = (struct vq_rt_queue_config){ .dev = p.dev, .kick_fd = kick,
					  .call_fd = call, .process = NULL };
	/* a queue needs a process callback */
	CHECK_EQ(vq_rt_loop_add(l, &qc, &q), -EINVAL);
	vq_rt_loop_free(l);

	vq_drv_disable_cb(p.drv);
	CHECK_EQ(vq_drv_add(p.drv, &seg, 1, 0, (void *)3), 0);
	CHECK(vq_drv_kick_prepare(p.drv) >= 0);
	/* nothing used yet: enable callbacks, sleep, time out */
	CHECK_EQ(vq_rt_drv_wait_used(p.drv, &w, 0, &c), 0);
	/* the device uses it while callbacks are enabled (as a sleeping
	 * driver leaves them); it must call */
	CHECK_EQ(vq_drv_enable_cb(p.drv), 0);
	CHECK_EQ(vq_dev_pop(p.dev, &ch), 1);
	CHECK_EQ(vq_dev_push(p.dev, &ch, 0), 1);
	CHECK(vq_dev_should_signal(p.dev));
	CHECK_EQ(vq_evt_signal(call), 0);
	vq_drv_disable_cb(p.drv);
	CHECK_EQ(vq_rt_drv_wait_used(p.drv, &w, 0, &c), 1);
	pair_fini(&p);
	close(kick);
	close(call);
}

int main(void)
{
	RUN(runtime_v4_device_enable_notify_recheck);
	RUN(runtime_v4_missed_kick_found_after_quiet_period);
	RUN(runtime_used_call_judged_again_after_quiet_period);
	RUN(runtime_quiet_look_covers_ring_filled_elsewhere);
	RUN(runtime_d4_driver_enable_cb_recheck);
	RUN(runtime_driver_sleeps_and_wakes_on_call);
	return 0;
}
