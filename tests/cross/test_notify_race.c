// SPDX-License-Identifier: MIT
/*
 * The lost-wakeup races, hammered (docs/RULES.md D2/V4 and D4/V3, packed
 * P2/P4 and their device halves): one buffer at a time goes round the
 * ring, so every round one side enables notifications and re-checks while
 * the other publishes and decides whether to notify.  Neither side
 * sleeps: the waiter spins on a flag the other side sets when the ring
 * says "notify", so the race window is hit hundreds of thousands of times
 * a second, not a few hundred as with eventfds (test_threads).
 *
 * A kick the driver judged unneeded while the device was waiting, or a
 * call the device judged unneeded while the driver was, stalls the
 * ping-pong for good: after WAIT_MS the test fails with "lost kick" or
 * "lost call".  Without the full fence in either side's enable/re-check
 * or publish/decide pair, the store can wait in the store buffer while
 * the load that follows reads the other side's old value; both then wait.
 *
 * Usage: test_notify_race [MILLISECONDS per configuration] (default 1000)
 */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <time.h>

#include "ring_pair.h"

#define WAIT_MS 2000

struct race {
	struct ring_pair p;
	bool kick_side;                 /* the device waits (else the driver) */
	bool stop;                      /* __atomic: the run is over */
	int kicked, called;             /* __atomic: "notify" flags */
	uint64_t rounds, waits;
};

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* Spin until *flag is set (and clear it) or the run stops; a wait longer
 * than WAIT_MS while the other side's work is in the ring is a lost
 * notification. */
static void wait_flag(struct race *r, int *flag, bool (*work)(struct race *),
		      const char *what)
{
	uint64_t start = now_ms();

	r->waits++;
	while (!__atomic_exchange_n(flag, 0, __ATOMIC_ACQ_REL)) {
		if (__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE))
			return;
		if (now_ms() - start > WAIT_MS && work(r)) {
			fprintf(stderr, "%s: waited %d ms with work in the ring, "
				"after %llu rounds\n", what, WAIT_MS,
				(unsigned long long)r->rounds);
			exit(1);
		}
		sched_yield();  /* two CPUs, often shared: let the other run */
	}
}

static bool dev_has_work(struct race *r)
{
	return vq_dev_has_avail(r->p.dev);
}

static bool drv_has_work(struct race *r)
{
	return vq_drv_has_used(r->p.drv);
}

/* The device: take each buffer, give it back, say whether to call. */
static void *device_thread(void *arg)
{
	struct race *r = arg;
	struct vq_dev *d = r->p.dev;
	struct iovec iov[2];
	struct vq_chain c = { .iov = iov, .iov_max = 2 };

	vq_dev_disable_notify(d);
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		int n = vq_dev_pop(d, &c);

		CHECK(n >= 0);
		if (n == 0) {
			if (!r->kick_side) {
				sched_yield();  /* polling: the driver's race */
				continue;
			}
			n = vq_dev_enable_notify(d);
			CHECK(n >= 0);
			if (n == 0)
				wait_flag(r, &r->kicked, dev_has_work, "lost kick");
			vq_dev_disable_notify(d);
			continue;
		}
		CHECK_EQ(vq_dev_push(d, &c, 0), 1);
		if (vq_dev_should_signal(d))
			__atomic_store_n(&r->called, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* The driver: one buffer out, wait for it back, again. */
static void driver_loop(struct race *r, uint64_t ms)
{
	struct vq_drv *q = r->p.drv;
	struct vq_seg seg = { pair_alloc(&r->p, 64), 64 };
	uint64_t end = now_ms() + ms;
	void *tok;
	uint32_t len;

	vq_drv_disable_cb(q);
	while (now_ms() < end) {
		int n;

		CHECK_EQ(vq_drv_add(q, &seg, 1, 0, &seg), 0);
		n = vq_drv_kick_prepare(q);
		CHECK(n >= 0);
		if (n)
			__atomic_store_n(&r->kicked, 1, __ATOMIC_RELEASE);
		for (;;) {
			n = vq_drv_get(q, &tok, &len);
			CHECK(n >= 0);
			if (n)
				break;
			if (r->kick_side) {
				sched_yield();  /* polling: the device's race */
				continue;
			}
			n = vq_drv_enable_cb(q);
			CHECK(n >= 0);
			if (n == 0)
				wait_flag(r, &r->called, drv_has_work, "lost call");
			vq_drv_disable_cb(q);
		}
		CHECK(tok == &seg);
		r->rounds++;
	}
}

static void run(bool packed, bool event_idx, bool kick_side, uint64_t ms)
{
	struct race r;
	pthread_t t;

	memset(&r, 0, sizeof(r));
	r.kick_side = kick_side;
	pair_init(&r.p, pair_features(packed, 0, event_idx, 0), 8, 1, 1);
	CHECK_EQ(pthread_create(&t, NULL, device_thread, &r), 0);
	driver_loop(&r, ms);
	__atomic_store_n(&r.stop, true, __ATOMIC_RELEASE);
	CHECK_EQ(pthread_join(t, NULL), 0);
	fprintf(stderr, "%s event_idx=%d %s: %llu rounds, %llu waits\n",
		packed ? "packed" : "split ", event_idx,
		kick_side ? "kick (device waits)" : "call (driver waits)",
		(unsigned long long)r.rounds, (unsigned long long)r.waits);
	CHECK(r.rounds > 0);
	pair_fini(&r.p);
}

int main(int argc, char **argv)
{
	uint64_t ms = argc > 1 ? strtoull(argv[1], NULL, 0) : 1000;

	for (int packed = 0; packed < 2; packed++)
		for (int event_idx = 0; event_idx < 2; event_idx++)
			for (int kick_side = 1; kick_side >= 0; kick_side--)
				run(packed, event_idx, kick_side, ms);
	return 0;
}
