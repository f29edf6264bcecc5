// SPDX-License-Identifier: MIT
/*
 * The runtime's decisions, deterministically: the busy-poll window against a
 * fake clock, and the device loop over fake rings (work budget, busy poll,
 * the enable-notify re-check, sleeping and waking on a real eventfd kick).
 */
#include <virtq/runtime.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fake_ring.h"

/* ---- a fake clock: every reading advances it by step ns ---- */
struct fclock {
	uint64_t t;
	uint64_t step;
	unsigned reads;
};

static uint64_t fclock_now(void *arg)
{
	struct fclock *c = arg;
	uint64_t t = c->t;

	c->t += c->step;
	c->reads++;
	return t;
}

/* ---- probes for vq_rt_busy_poll ---- */
struct fprobe {
	struct fclock clk;
	unsigned ready_calls, other_calls;
	unsigned ready_at;      /* ready becomes true on this call (0: never) */
	unsigned other_at;
};

static uint64_t fp_now(void *arg)
{
	return fclock_now(&((struct fprobe *)arg)->clk);
}

static bool fp_ready(void *arg)
{
	struct fprobe *p = arg;

	return ++p->ready_calls == p->ready_at;
}

static bool fp_other(void *arg)
{
	struct fprobe *p = arg;

	return ++p->other_calls == p->other_at;
}

/*
 * Window 1000 ns from t = 1000 (deadline 2000), clock +100 per reading:
 * the readings after the start are 1100 ... 2000, the tenth reaches the
 * deadline, and each is preceded by one ready probe: 10 probes, 11 readings.
 */
static void busypoll_window_ends_at_deadline(void)
{
	struct fprobe p = { .clk = { .t = 1000, .step = 100 } };
	struct vq_bp_probe bp = { .now_ns = fp_now, .ready = fp_ready, .other = fp_other, .arg = &p };

	CHECK_EQ(vq_rt_busy_poll(&bp, 1000), VQ_BP_TIMEOUT);
	CHECK_EQ(p.ready_calls, 10);
	CHECK_EQ(p.other_calls, 10);
	CHECK_EQ(p.clk.reads, 11);
	CHECK_EQ(p.clk.t, 2100);
}

/* Work on the 4th probe ends the window there, before the deadline. */
static void busypoll_hit_ends_window(void)
{
	struct fprobe p = { .clk = { .t = 0, .step = 100 }, .ready_at = 4 };
	struct vq_bp_probe bp = { .now_ns = fp_now, .ready = fp_ready, .other = fp_other, .arg = &p };

	CHECK_EQ(vq_rt_busy_poll(&bp, 1000), VQ_BP_HIT);
	CHECK_EQ(p.ready_calls, 4);
	CHECK_EQ(p.other_calls, 3);
	CHECK_EQ(p.clk.reads, 4);       /* the start and 3 deadline checks */
}

/* vhost-net busyloop_timeout: other pending work ends the window early. */
static void busypoll_other_work_ends_window(void)
{
	struct fprobe p = { .clk = { .t = 0, .step = 100 }, .other_at = 3 };
	struct vq_bp_probe bp = { .now_ns = fp_now, .ready = fp_ready, .other = fp_other, .arg = &p };

	CHECK_EQ(vq_rt_busy_poll(&bp, 1000000), VQ_BP_OTHER);
	CHECK_EQ(p.ready_calls, 3);
	CHECK_EQ(p.other_calls, 3);
	CHECK_EQ(p.clk.reads, 3);
}

/* T = 0 means no busy polling: no probe, no clock reading. */
static void busypoll_zero_window_does_not_poll(void)
{
	struct fprobe p = { .clk = { .step = 100 }, .ready_at = 1 };
	struct vq_bp_probe bp = { .now_ns = fp_now, .ready = fp_ready, .other = fp_other, .arg = &p };

	CHECK_EQ(vq_rt_busy_poll(&bp, 0), VQ_BP_TIMEOUT);
	CHECK_EQ(p.ready_calls, 0);
	CHECK_EQ(p.clk.reads, 0);
}

/* Work already there when the window opens is a hit even with a huge
 * clock step (probes come before the deadline check). */
static void busypoll_probes_before_deadline(void)
{
	struct fprobe p = { .clk = { .step = 1000000 }, .ready_at = 1 };
	struct vq_bp_probe bp = { .now_ns = fp_now, .ready = fp_ready, .arg = &p };

	CHECK_EQ(vq_rt_busy_poll(&bp, 1), VQ_BP_HIT);
}

/*
 * The default clock (now_ns NULL) is read every few probes, not after
 * each: a window of 2 ms still ends, no earlier than its deadline and not
 * much later, probing all the while.
 */
static void busypoll_default_clock_window_ends(void)
{
	struct fprobe p = { 0 };
	struct vq_bp_probe bp = { .ready = fp_ready, .other = fp_other, .arg = &p };
	uint64_t t0 = vq_rt_now_ns(), spun;

	CHECK_EQ(vq_rt_busy_poll(&bp, 2000000), VQ_BP_TIMEOUT);
	spun = vq_rt_now_ns() - t0;
	CHECK(spun >= 2000000);
	CHECK(spun < 1000000000);
	CHECK(p.ready_calls >= 16);
	CHECK_EQ(p.ready_calls, p.other_calls);
}

/* vhost weights: at most 256 packets or 0x80000 bytes per turn; a queue
 * with more work stays active and the other queue gets every other turn. */
static void loop_budget_limits_turn_and_shares(void)
{
	struct fclock clk = { .step = 1 };
	struct vq_rt_loop_config lc = { .busy_poll_ns = 0, .now_ns = fclock_now,
					.clock_arg = &clk };
	struct fring a = { .avail = 100000, .pkt_bytes = 64, .name = 'a' };
	struct fring b = { .avail = 100000, .pkt_bytes = 4096, .name = 'b' };
	struct vq_rt_queue *qa, *qb;
	struct vq_rt_loop *l;
	char log[64] = "";
	int i;

	a.log = b.log = log;
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	qa = add_fake(l, &a, -1);
	qb = add_fake(l, &b, -1);
	for (i = 0; i < 3; i++)
		/* a: 256 packets (pkts weight); b: 128 * 4096 = 0x80000
		 * bytes (bytes weight) */
		CHECK_EQ(vq_rt_loop_run_once(l, 0), 256 + 128);
	CHECK_EQ(vq_rt_queue_counters(qa)->packets, 3 * 256);
	CHECK_EQ(vq_rt_queue_counters(qb)->packets, 3 * 128);
	CHECK_EQ(vq_rt_queue_counters(qb)->bytes, 3 * 0x80000);
	/* the first queue of a round rotates */
	CHECK(strcmp(log, "abbaab") == 0);
	CHECK(vq_rt_queue_active(qa) && vq_rt_queue_active(qb));
	/* busy queues never enabled notifications */
	CHECK_EQ(a.enables + b.enables, 0);
	vq_rt_loop_free(l);
}

/* A dry queue busy polls for the window (fake clock), misses and goes
 * idle; it enables notifications when the loop sleeps; a real eventfd kick
 * wakes it; nothing lost. */
static void loop_dry_queue_polls_then_sleeps_and_wakes(void)
{
	struct fclock clk = { .t = 0, .step = 100 };
	struct vq_rt_loop_config lc = { .busy_poll_ns = 1000, .now_ns = fclock_now,
					.clock_arg = &clk };
	struct fring f = { .avail = 10, .pkt_bytes = 64 };
	const struct vq_rt_counters *c;
	struct vq_rt_queue *q;
	struct vq_rt_loop *l;
	int kick = vq_evt_new();

	CHECK(kick >= 0);
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	q = add_fake(l, &f, kick);
	c = vq_rt_queue_counters(q);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 10);
	CHECK_EQ(c->bp_misses, 1);
	CHECK_EQ(c->bp_hits, 0);
	/* 1000 ns window, 100 ns a reading: 11 readings */
	CHECK_EQ(clk.reads, 11);
	CHECK(!vq_rt_queue_active(q));
	CHECK_EQ(c->packets, 10);
	CHECK_EQ(c->calls_sent, 1);
	/* no sleep yet: notifications stay off */
	CHECK_EQ(f.enables, 0);
	CHECK(!f.notify);

	/* Idle and nothing kicked: the loop does not process. */
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 0);
	CHECK_EQ(f.turns, 1);
	CHECK_EQ(f.enables, 0);
	/* A sleep (1 ms, quiet) asks for kicks first. */
	CHECK_EQ(vq_rt_loop_run_once(l, 1), 0);
	CHECK_EQ(f.enables, 1);
	CHECK(f.notify);
	CHECK(!vq_rt_queue_active(q));

	/* The driver adds 5 and kicks (notifications were enabled). */
	f.avail += 5;
	CHECK_EQ(vq_evt_signal(kick), 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 1000), 0);      /* woken */
	CHECK(vq_rt_queue_active(q));
	CHECK(!f.notify);
	CHECK_EQ(c->kicks_recv, 1);
	CHECK_EQ(c->wakeups, 1);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 5);
	CHECK_EQ(c->packets, 15);
	CHECK_EQ(vq_evt_drain(kick), 0);                /* kick consumed */
	vq_rt_loop_free(l);
	close(kick);
}

/* This program's sched_yield takes the place of libc's for the statically
 * linked library: it counts the offers of the CPU. */
static unsigned yields;

int sched_yield(void)
{
	yields++;
	return 0;
}

/*
 * busy_poll_yield_ns: once the window has gone that long with nothing, each
 * further probe offers the CPU (the producer may be waiting for it; the
 * kernel's busy loop stops on need_resched()); 0 never does.  Window
 * 3000 ns, clock +100 a reading from 0: readings 100 ... 3000 after the
 * start; with 1000, those at 1000 ... 2900 (20) yield.  A hit after
 * yielding is still a hit.
 */
static void loop_busy_poll_yields_after_its_time(void)
{
	struct fclock clk = { .step = 100 };
	struct vq_rt_loop_config lc = { .busy_poll_ns = 3000, .now_ns = fclock_now,
					.clock_arg = &clk };
	struct fring f = { .avail = 1 };
	struct fring g = { .avail = 1, .appear_after = 15, .appear_n = 2 };
	struct vq_rt_queue *q;
	struct vq_rt_loop *l;

	yields = 0;
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	q = add_fake(l, &f, -1);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);
	CHECK_EQ(vq_rt_queue_counters(q)->bp_misses, 1);
	CHECK_EQ(yields, 0);
	vq_rt_loop_free(l);

	lc.busy_poll_yield_ns = 1000;
	clk.t = 0;
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	q = add_fake(l, &f, -1);
	f.avail++;
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);
	CHECK_EQ(vq_rt_queue_counters(q)->bp_misses, 1);
	CHECK_EQ(yields, 20);
	vq_rt_loop_free(l);

	yields = 0;
	clk.t = 0;
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	q = add_fake(l, &g, -1);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);
	CHECK_EQ(vq_rt_queue_counters(q)->bp_hits, 1);
	CHECK(yields > 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 2);
	vq_rt_loop_free(l);
}

/* Buffers that appear during the window are a hit: the queue stays active
 * without enabling notifications and processes them next round. */
static void loop_busy_poll_hit_keeps_queue_active(void)
{
	struct fclock clk = { .step = 100 };
	struct vq_rt_loop_config lc = { .busy_poll_ns = 1000, .now_ns = fclock_now,
					.clock_arg = &clk };
	struct fring f = { .avail = 3, .appear_after = 4, .appear_n = 7 };
	struct vq_rt_queue *q;
	struct vq_rt_loop *l;

	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	q = add_fake(l, &f, -1);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 3);
	CHECK_EQ(vq_rt_queue_counters(q)->bp_hits, 1);
	CHECK_EQ(f.enables, 0);
	CHECK(vq_rt_queue_active(q));
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 7);
	vq_rt_loop_free(l);
}

/* V4: before the loop sleeps, an idle queue enables notifications and
 * looks again: buffers the driver added meanwhile (it saw notifications
 * disabled and did not kick) are found.  The loop must not sleep, disable
 * notifications again and process them without waiting for a kick. */
static void loop_enable_notify_recheck_reprocesses(void)
{
	struct vq_rt_loop_config lc = { 0 };
	struct fring f = { .avail = 2, .recheck_add = 4 };
	struct vq_rt_queue *q;
	struct vq_rt_loop *l;
	int kick = vq_evt_new();
	uint64_t t0;

	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	q = add_fake(l, &f, kick);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 2);
	CHECK(!vq_rt_queue_active(q));
	CHECK_EQ(f.enables, 0);
	t0 = vq_rt_now_ns();
	CHECK_EQ(vq_rt_loop_run_once(l, 5000), 0);      /* would sleep: enables */
	CHECK(vq_rt_now_ns() - t0 < 2000000000ull);     /* and did not */
	CHECK_EQ(f.enables, 1);
	CHECK(vq_rt_queue_active(q));
	CHECK(!f.notify);
	/* no kick was sent: the next round still processes the 4 */
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 4);
	CHECK_EQ(vq_rt_queue_counters(q)->packets, 6);
	CHECK(!vq_rt_queue_active(q));
	CHECK_EQ(vq_rt_queue_counters(q)->kicks_recv, 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 1), 0);
	CHECK_EQ(f.enables, 2);
	CHECK(f.notify);
	vq_rt_loop_free(l);
	close(kick);
}

/* A busy-poll window ends as soon as another queue has work: the polling
 * queue neither spins to the deadline nor enables notifications. */
static void loop_busy_poll_ends_when_other_queue_has_work(void)
{
	struct fclock clk = { .step = 100 };
	struct vq_rt_loop_config lc = { .busy_poll_ns = 1000000, .now_ns = fclock_now,
					.clock_arg = &clk };
	struct fring a = { .avail = 1000, .name = 'a' };
	struct fring b = { .avail = 1, .name = 'b' };
	struct vq_rt_queue *qb;
	struct vq_rt_loop *l;

	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	add_fake(l, &a, -1);
	qb = add_fake(l, &b, -1);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 256 + 1);
	CHECK_EQ(vq_rt_queue_counters(qb)->bp_misses, 1);
	CHECK_EQ(b.enables, 0);
	CHECK(vq_rt_queue_active(qb));
	/* one reading to open the window, none to close it */
	CHECK_EQ(clk.reads, 1);
	vq_rt_loop_free(l);
}

/*
 * One buffer published extra ns after the queue's window (if any) ended:
 * the idle loop finds it, processes it, runs dry and polls.  Returns the
 * window that followed, in ns of the fake clock (0: none), read from the
 * clock's readings: one where the queue ran dry, which also opens the
 * window, then one a probe (step ns) until its deadline.
 */
static uint64_t window_after(struct vq_rt_loop *l, struct vq_rt_queue *q,
			     struct fclock *clk, struct fring *f, uint64_t extra)
{
	uint64_t misses = vq_rt_queue_counters(q)->bp_misses;
	unsigned reads;

	CHECK(!vq_rt_queue_active(q));
	clk->t += extra;
	f->avail++;
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 0);        /* found: woken */
	CHECK(vq_rt_queue_active(q));
	reads = clk->reads;
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);
	CHECK(!vq_rt_queue_active(q));
	reads = clk->reads - reads;
	if (vq_rt_queue_counters(q)->bp_misses == misses) {
		CHECK_EQ(reads, 1);
		return 0;
	}
	CHECK_EQ(vq_rt_queue_counters(q)->bp_misses, misses + 1);
	return (uint64_t)(reads - 1) * clk->step;
}

/*
 * busy_poll_max_ns (QEMU's poll-max-ns): a queue's window starts at 0 and
 * doubles from VQ_RT_ADAPT_START_NS each time its buffers came back within
 * the ceiling of it running dry, stops at the ceiling, and drops to 0 at
 * the first gap past it: a window that would have had to be longer than
 * the ceiling is not worth polling.  A hit leaves the window as it is.
 * One window at a time: busy_poll_ns and busy_poll_max_ns together are
 * refused.
 */
static void loop_adaptive_window_follows_the_gaps(void)
{
	struct fclock clk = { .step = 100 };
	struct vq_rt_loop_config lc = { .busy_poll_max_ns = 16000, .now_ns = fclock_now,
					.clock_arg = &clk };
	struct fring f = { .avail = 1 };
	struct vq_rt_queue *q;
	struct vq_rt_loop *l;
	unsigned reads;

	lc.busy_poll_ns = 1000;
	CHECK_EQ(vq_rt_loop_new(&lc, &l), -EINVAL);
	CHECK(l == NULL);
	lc.busy_poll_ns = 0;
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	q = add_fake(l, &f, -1);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);
	CHECK_EQ(vq_rt_queue_counters(q)->bp_misses, 0);        /* no window yet */

	/* back within the ceiling each time: 4, 8, 16, and no further */
	CHECK_EQ(window_after(l, q, &clk, &f, 2000), VQ_RT_ADAPT_START_NS);
	CHECK_EQ(window_after(l, q, &clk, &f, 2000), 8000);
	CHECK_EQ(window_after(l, q, &clk, &f, 2000), 16000);
	/* past a full window, the gap is past the ceiling: none */
	CHECK_EQ(window_after(l, q, &clk, &f, 2000), 0);
	CHECK_EQ(window_after(l, q, &clk, &f, 2000), VQ_RT_ADAPT_START_NS);
	CHECK_EQ(window_after(l, q, &clk, &f, 15000), 0);
	CHECK_EQ(window_after(l, q, &clk, &f, 1000000000), 0);  /* idle: none */
	CHECK_EQ(window_after(l, q, &clk, &f, 0), VQ_RT_ADAPT_START_NS);

	/* Back 1 us after that window (8 us next), and one more buffer
	 * within it: a hit, and the same window (80 probes) after it. */
	clk.t += 1000;
	f.avail++;
	f.appear_after = 10;
	f.appear_n = 1;
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);
	CHECK_EQ(vq_rt_queue_counters(q)->bp_hits, 1);
	CHECK(vq_rt_queue_active(q));
	reads = clk.reads;
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);
	CHECK_EQ(clk.reads - reads, 1 + 8000 / 100);
	vq_rt_loop_free(l);
}

/*
 * While another queue keeps the loop busy, an idle queue's new buffers are
 * found by reading its ring, not by an epoll_wait per round (a syscall per
 * burst of the busy queue).  The kick itself stays in its eventfd until the
 * periodic drain, which also consumes a kick that brought nothing.  The
 * drain comes after a bounded time (the loop's clock, here 1 ms a
 * reading), not after every few rounds: an epoll_wait on a round trip's
 * path costs more than the round trip.
 */
static void loop_idle_queue_read_while_others_busy(void)
{
	struct fclock clk = { .step = 1000000 };
	struct vq_rt_loop_config lc = { .busy_poll_ns = 0, .now_ns = fclock_now,
					.clock_arg = &clk };
	struct fring a = { .avail = 1000000, .name = 'a' };
	struct fring b = { .avail = 1, .name = 'b' };
	const struct vq_rt_counters *cb;
	struct vq_rt_queue *qb;
	struct vq_rt_loop *l;
	int kick = vq_evt_new();
	unsigned rounds;

	CHECK(kick >= 0);
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	add_fake(l, &a, -1);
	qb = add_fake(l, &b, kick);
	cb = vq_rt_queue_counters(qb);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 256 + 1);
	CHECK(!vq_rt_queue_active(qb));
	/* a keeps the loop from sleeping: b's ring is read, not armed */
	CHECK(!b.notify);

	/* The driver adds 3 to b and kicks anyway (a hint it may ignore):
	 * b is active after the next round's ring read, with its kick still
	 * unread. */
	b.avail += 3;
	CHECK_EQ(vq_evt_signal(kick), 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 256);
	CHECK(vq_rt_queue_active(qb));
	CHECK(!b.notify);
	CHECK_EQ(cb->kicks_recv, 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 256 + 3);
	CHECK_EQ(cb->packets, 4);
	CHECK(!vq_rt_queue_active(qb));

	/* The kick is read within a bounded time of busy rounds: the clock
	 * is read every 64 rounds, and 10 ms (10 readings) pass between two
	 * drains. */
	for (rounds = 0; rounds < 64 * 11 && cb->kicks_recv == 0; rounds++)
		CHECK_EQ(vq_rt_loop_run_once(l, 0), 256);
	CHECK_EQ(cb->kicks_recv, 1);
	CHECK(rounds > 1);
	CHECK_EQ(vq_evt_drain(kick), 0);

	/* A kick that brought nothing is read the same way and leaves b
	 * idle: no empty turn for it, nor for the kick above; and not
	 * before its time. */
	CHECK_EQ(vq_evt_signal(kick), 0);
	for (rounds = 0; rounds < 64 * 11 && cb->kicks_recv == 1; rounds++)
		CHECK_EQ(vq_rt_loop_run_once(l, 0), 256);
	CHECK_EQ(cb->kicks_recv, 2);
	CHECK(rounds >= 64 * 9);
	CHECK_EQ(vq_evt_drain(kick), 0);
	CHECK(!vq_rt_queue_active(qb));
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 256);
	CHECK_EQ(b.turns, 2);
	CHECK_EQ(b.enables, 0);         /* the loop never slept */
	vq_rt_loop_free(l);
	close(kick);
}

/* eventfd notifications coalesce and a drain consumes them all. */
static void evt_signal_coalesces_and_drains(void)
{
	int fd = vq_evt_new();

	CHECK(fd >= 0);
	CHECK_EQ(vq_evt_drain(fd), 0);
	CHECK_EQ(vq_evt_signal(fd), 0);
	CHECK_EQ(vq_evt_signal(fd), 0);
	CHECK_EQ(vq_evt_signal(fd), 0);
	CHECK_EQ(vq_evt_wait(fd, 0), 3);
	CHECK_EQ(vq_evt_wait(fd, 0), 0);
	CHECK_EQ(vq_evt_drain(fd), 0);
	close(fd);
}

/* A drain never waits, even on an eventfd without O_NONBLOCK: a
 * front-end's eventfd shares its open file description with the
 * front-end, which can clear the flag whenever it likes (vhost-user
 * "Kick, call and err fds are eventfds": no thread ever blocks on one).
 * alarm() turns a drain that blocks into a failure, not a hung test. */
static void evt_drain_never_waits_on_a_blocking_eventfd(void)
{
	int fd = eventfd(0, EFD_CLOEXEC);

	CHECK(fd >= 0);
	alarm(5);
	CHECK_EQ(vq_evt_drain(fd), 0);
	CHECK_EQ(vq_evt_signal(fd), 0);
	CHECK_EQ(vq_evt_drain(fd), 1);
	CHECK_EQ(vq_evt_drain(fd), 0);
	alarm(0);
	close(fd);
}

/* Where the kernel refuses RWF_NOWAIT (before eventfds supported it), a
 * drain reads as it used to: a child whose preadv2 fails with EOPNOTSUPP
 * (seccomp) still drains. */
static void evt_drain_reads_where_rwf_nowait_is_refused(void)
{
#if defined(__x86_64__)
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_preadv2, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EOPNOTSUPP),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };
	int st, fd = vq_evt_new();
	pid_t pid;

	CHECK(fd >= 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		uint64_t v;
		struct iovec iov = { &v, sizeof(v) };

		CHECK_EQ(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
		CHECK_EQ(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog), 0);
		CHECK_EQ(preadv2(fd, &iov, 1, -1, RWF_NOWAIT), -1);
		CHECK_EQ(errno, EOPNOTSUPP);
		CHECK_EQ(vq_evt_signal(fd), 0);
		CHECK_EQ(vq_evt_drain(fd), 1);
		CHECK_EQ(vq_evt_drain(fd), 0);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(fd);
#endif
}

/* One blocking eventfd as the kick of two queues of a loop (a front-end
 * may pass the same one for two rings): one kick makes both ready, the
 * first drain takes the count and the second finds none, without
 * waiting; both queues wake. */
static void loop_one_blocking_kick_shared_by_two_queues(void)
{
	struct vq_rt_loop_config lc = { 0 };
	struct fring a = { .name = 'a' }, b = { .name = 'b' };
	struct vq_rt_queue *qa, *qb;
	struct vq_rt_loop *l;
	int k = eventfd(0, EFD_CLOEXEC), k2 = dup(k);

	CHECK(k >= 0 && k2 >= 0);
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	qa = add_fake(l, &a, k);
	qb = add_fake(l, &b, k2);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 0);         /* both go idle */
	CHECK_EQ(vq_rt_loop_run_once(l, 1), 0);         /* and ask for kicks */
	a.avail = b.avail = 1;
	CHECK_EQ(vq_evt_signal(k), 0);
	alarm(5);
	CHECK_EQ(vq_rt_loop_run_once(l, 1000), 0);      /* woken, both */
	alarm(0);
	CHECK(vq_rt_queue_active(qa) && vq_rt_queue_active(qb));
	CHECK_EQ(vq_rt_queue_counters(qa)->kicks_recv +
		 vq_rt_queue_counters(qb)->kicks_recv, 1);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 2);
	vq_rt_loop_free(l);
	close(k);
	close(k2);
}

/* vq_rt_loop_stop from "another thread" wakes a sleeping loop. */
static void loop_stop_wakes_sleeper(void)
{
	struct vq_rt_loop_config lc = { 0 };
	struct fring f = { 0 };
	struct vq_rt_loop *l;
	int kick = vq_evt_new();

	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	add_fake(l, &f, kick);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 0);         /* goes idle */
	vq_rt_loop_stop(l);
	CHECK_EQ(vq_rt_loop_run(l), 0);                 /* returns at once */
	CHECK(vq_rt_loop_stopped(l));
	vq_rt_loop_free(l);
	close(kick);
}

/* A queue that removes another in its turn (a device whose TX turn broke
 * the RX ring it delivers to). */
struct remover {
	struct fring f;
	struct vq_rt_queue *victim;
};

static int remover_process(struct vq_rt_queue *q, void *arg,
			   const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct remover *r = arg;

	vq_rt_queue_remove(r->victim);
	vq_rt_queue_remove(r->victim);  /* twice is once */
	return fr_process(q, &r->f, b, bytes);
}

/*
 * A queue taken off the loop gets no turn and no ring call, and its kick
 * no longer wakes anything, whether it is removed between rounds or by
 * another queue's turn in the middle of one; the others go on.
 */
static void loop_removed_queue_is_never_touched(void)
{
	struct vq_rt_loop_config lc = { 0 };
	struct fring a = { .avail = 2, .name = 'a' }, b = { .avail = 1, .name = 'b' };
	struct remover r = { .f = { .avail = 1, .name = 'r' } };
	struct vq_rt_queue_config qc = {
		.ops = &fr_ops, .ring = &r.f, .kick_fd = -1, .call_fd = -1,
		.process = remover_process, .arg = &r,
	};
	struct vq_rt_queue *qa, *qb;
	struct vq_rt_loop *l;
	int ka = vq_evt_new(), kb = vq_evt_new();
	unsigned enables, disables;

	CHECK(ka >= 0 && kb >= 0);
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	qa = add_fake(l, &a, ka);
	qb = add_fake(l, &b, kb);
	/* between rounds: a leaves with buffers still in its ring */
	vq_rt_queue_remove(qa);
	CHECK(!vq_rt_queue_active(qa));
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);         /* b's one buffer */
	CHECK_EQ(a.turns, 0);
	/* a's kick wakes nothing; b sleeps armed until its own */
	enables = a.enables;
	disables = a.disables;
	CHECK_EQ(vq_evt_signal(ka), 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 50), 0);
	CHECK_EQ(a.turns, 0);
	CHECK_EQ(a.enables, enables);
	CHECK_EQ(a.disables, disables);
	b.avail = 1;
	CHECK_EQ(vq_evt_signal(kb), 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 1000), 0);      /* the kick wakes b */
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);
	CHECK_EQ(b.turns, 2);

	/* in a round: r's turn removes b, which has buffers and a kick */
	r.victim = qb;
	CHECK_EQ(vq_rt_loop_add(l, &qc, NULL), 0);
	b.avail = 5;
	CHECK_EQ(vq_evt_signal(kb), 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);         /* r's own buffer */
	for (unsigned i = 0; i < 3; i++)
		CHECK_EQ(vq_rt_loop_run_once(l, 20), 0);
	CHECK_EQ(b.turns, 2);
	CHECK_EQ(b.avail, 5);
	CHECK_EQ(a.turns, 0);
	CHECK_EQ(r.f.turns, 1);
	vq_rt_loop_free(l);
	close(ka);
	close(kb);
}

int main(void)
{
	RUN(busypoll_window_ends_at_deadline);
	RUN(busypoll_hit_ends_window);
	RUN(busypoll_other_work_ends_window);
	RUN(busypoll_zero_window_does_not_poll);
	RUN(busypoll_probes_before_deadline);
	RUN(busypoll_default_clock_window_ends);
	RUN(evt_signal_coalesces_and_drains);
	RUN(loop_budget_limits_turn_and_shares);
	RUN(loop_dry_queue_polls_then_sleeps_and_wakes);
	RUN(loop_busy_poll_hit_keeps_queue_active);
	RUN(loop_busy_poll_yields_after_its_time);
	RUN(loop_enable_notify_recheck_reprocesses);
	RUN(loop_busy_poll_ends_when_other_queue_has_work);
	RUN(loop_adaptive_window_follows_the_gaps);
	RUN(evt_drain_never_waits_on_a_blocking_eventfd);
	RUN(evt_drain_reads_where_rwf_nowait_is_refused);
	RUN(loop_one_blocking_kick_shared_by_two_queues);
	RUN(loop_stop_wakes_sleeper);
	RUN(loop_idle_queue_read_while_others_busy);
	RUN(loop_removed_queue_is_never_touched);
	return 0;
}
