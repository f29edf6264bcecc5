// SPDX-License-Identifier: MIT
/*
 * Two threads, real rings, real eventfds: a device thread running the
 * runtime loop and a driver thread posting buffers.  Every buffer must come
 * back, and a thread that goes to sleep must be woken: a lost wakeup shows
 * as a driver wait that times out.  The ping-pong mode makes the device go
 * idle before nearly every buffer, so the driver's add races the device's
 * enable-notify re-check (V4 / D4) thousands of times.
 */
#include <virtq/runtime.h>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ring_pair.h"

#define WAIT_MS 3000

struct dev_side {
	struct ring_pair *p;
	struct vq_rt_loop *loop;
	struct vq_rt_queue *q;
	int err;
};

static int dev_process(struct vq_rt_queue *q, void *arg,
		       const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct dev_side *ds = arg;
	struct iovec iov[4 * 32];
	struct vq_chain c[32];
	unsigned i, want, done = 0;
	int n;

	while (!vq_rt_budget_spent(b, done, *bytes)) {
		want = b->pkts - done < 32 ? b->pkts - done : 32;
		for (i = 0; i < want; i++) {
			c[i].iov = &iov[4 * i];
			c[i].iov_max = 4;
		}
		n = vq_dev_pop_burst(ds->p->dev, c, want);
		if (n < 0)
			return n;
		if (n == 0)
			break;
		for (i = 0; i < (unsigned)n; i++) {
			int r = vq_dev_fill(ds->p->dev, &c[i], 0);

			if (r < 0)
				return r;
			*bytes += c[i].out_len;
		}
		n = vq_dev_flush(ds->p->dev);
		if (n < 0)
			return n;
		done += (unsigned)n;
		n = vq_rt_queue_signal(q);
		if (n < 0)
			return n;
	}
	return (int)done;
}

static void *dev_thread(void *arg)
{
	struct dev_side *ds = arg;

	ds->err = vq_rt_loop_run(ds->loop);
	return NULL;
}

/* Can this layout be created at all (the ring may not be built yet)? */
static int layout_available(uint64_t features)
{
	struct ring_pair p;
	uint64_t off[3];
	void *mem;
	struct vq_drv *q = NULL;
	struct vq_drv_config dc = { .features = features | VQ_BIT(VQ_F_VERSION_1),
				    .num = 64 };
	int r;

	(void)p;
	mem = aligned_alloc(4096, 1 << 16);
	CHECK(mem);
	CHECK(vq_ring_layout(dc.features, 64, off));
	dc.ring = (struct vq_ring_addr){ (char *)mem + off[0], (char *)mem + off[1],
					 (char *)mem + off[2] };
	r = vq_drv_new(&dc, &q);
	vq_drv_free(q);
	free(mem);
	return r;
}

static void run(uint64_t features, uint64_t bp_ns, unsigned total,
		bool pingpong, uint64_t seed)
{
	struct ring_pair p;
	struct dev_side ds = { .p = &p };
	struct vq_rt_counters dc = { 0 };
	struct vq_rt_loop_config lc = { .busy_poll_ns = bp_ns };
	struct vq_rt_queue_config qc;
	pthread_t t;
	unsigned added = 0, got = 0, i;
	uint64_t expect_sum = 0, sum = 0, bufs;
	int kick = vq_evt_new(), call = vq_evt_new();
	struct vq_rt_drv_wait w = { .call_fd = call, .busy_poll_ns = bp_ns };
	uint64_t s = seed;

	fprintf(stderr, "   %s event_idx=%d busy_poll=%lluns %s n=%u\n",
		features & VQ_BIT(VQ_F_RING_PACKED) ? "packed" : "split",
		!!(features & VQ_BIT(VQ_F_EVENT_IDX)),
		(unsigned long long)bp_ns, pingpong ? "ping-pong" : "stream", total);
	CHECK(kick >= 0 && call >= 0);
	pair_init(&p, features, 128, 1, 1);
	bufs = pair_alloc(&p, 64ull * 128);
	CHECK_EQ(vq_rt_loop_new(&lc, &ds.loop), 0);
	qc = (struct vq_rt_queue_config){ .dev = p.dev, .kick_fd = kick,
					  .call_fd = call, .process = dev_process,
					  .arg = &ds };
	CHECK_EQ(vq_rt_loop_add(ds.loop, &qc, &ds.q), 0);
	CHECK_EQ(pthread_create(&t, NULL, dev_thread, &ds), 0);

	vq_drv_disable_cb(p.drv);
	while (got < total) {
		unsigned burst = pingpong ? 1 : 1 + vq_test_rand(&s) % 64;
		void *tok[64];
		uint32_t len[64];
		int n, r;

		for (i = 0; i < burst && added < total; i++) {
			/* token: serial + 1 (never NULL); payload size varies */
			struct vq_seg seg = { bufs + 64 * (added % 128),
					      1 + (uint32_t)(added % 64) };

			if (added - got >= 128)
				break;
			r = vq_drv_add(p.drv, &seg, 1, 0,
				       (void *)(uintptr_t)(added + 1));
			if (r == -ENOSPC)
				break;
			CHECK_EQ(r, 0);
			expect_sum += added + 1;
			added++;
		}
		CHECK(vq_rt_drv_kick(p.drv, kick, &dc) >= 0);
		n = vq_drv_get_burst(p.drv, tok, len, 64);
		CHECK(n >= 0);
		for (i = 0; i < (unsigned)n; i++) {
			sum += (uintptr_t)tok[i];
			/* single-threaded device: used in posting order */
			CHECK_EQ((uintptr_t)tok[i], got + 1);
			CHECK_EQ(len[i], 0);
			got++;
		}
		if (n > 0 && !pingpong)
			continue;
		if (n == 0 && (pingpong || added == total ||
			       added - got >= 128)) {
			r = vq_rt_drv_wait_used(p.drv, &w, WAIT_MS, &dc);
			if (r == 0) {
				fprintf(stderr, "lost wakeup: added %u got %u, device "
					"packets %llu kicks sent %llu recv %llu\n",
					added, got,
					(unsigned long long)vq_rt_queue_counters(ds.q)->packets,
					(unsigned long long)dc.kicks_sent,
					(unsigned long long)vq_rt_queue_counters(ds.q)->kicks_recv);
			}
			CHECK_EQ(r, 1);
		}
	}
	vq_rt_loop_stop(ds.loop);
	pthread_join(t, NULL);
	CHECK_EQ(ds.err, 0);
	CHECK_EQ(sum, expect_sum);
	CHECK_EQ(vq_rt_queue_counters(ds.q)->packets, total);
	CHECK(vq_rt_queue_counters(ds.q)->kicks_recv <= dc.kicks_sent);
	CHECK(dc.calls_recv <= vq_rt_queue_counters(ds.q)->calls_sent);
	CHECK_EQ(vq_dev_error(p.dev), 0);
	CHECK_EQ(vq_drv_error(p.drv), 0);
	vq_rt_loop_free(ds.loop);
	pair_fini(&p);
	close(kick);
	close(call);
}

static bool layouts[2];

static void each(unsigned pp_iters, unsigned stream_iters, uint64_t bp_ns)
{
	int packed, eidx;

	for (packed = 0; packed < 2; packed++) {
		if (!layouts[packed])
			continue;
		for (eidx = 0; eidx < 2; eidx++) {
			uint64_t f = (packed ? VQ_BIT(VQ_F_RING_PACKED) : 0) |
				     (eidx ? VQ_BIT(VQ_F_EVENT_IDX) : 0);

			run(f, bp_ns, pp_iters, true, vq_test_seed(1));
			run(f, bp_ns, stream_iters, false, vq_test_seed(2));
		}
	}
}

/* Sleeping device and driver: each buffer goes through a kick and a call,
 * racing add against enable_notify and get against enable_cb. */
static void runtime_sleeping_loop_wakes_on_every_kick(void)
{
	each(4000, 40000, 0);
}

/* With busy-poll windows on both sides, the windows end and the sleep path
 * is still exercised; nothing may be lost either way. */
static void runtime_busy_poll_loses_nothing(void)
{
	each(2000, 40000, 20000);
}

/* ---- a host socket on the loop ---- */

/*
 * The shape of a vsock backend's receive path: the loop's fd callback reads
 * what the peer wrote to a socket and wakes a queue (vq_rt_queue_wake),
 * whose turn writes the answer back.  Between them the queue's busy-poll
 * window (when on) asks epoll about the socket.  The peer thread sends one
 * number at a time and waits for it to come back: a lost wakeup shows as a
 * wait that times out.
 */
struct echo {
	int fd;                         /* the loop's end */
	struct vq_rt_queue *q;
	uint64_t held[64];
	unsigned nheld;
	uint64_t echoed;
	int err;
};

static int echo_read(struct vq_rt_fd *h, void *arg, uint32_t revents,
		     const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct echo *e = arg;
	ssize_t n;

	if (e->nheld == (sizeof(e->held) / sizeof(e->held[0])))
		return (int)b->pkts;    /* no room: come back next round */
	n = read(e->fd, e->held + e->nheld,
		 ((sizeof(e->held) / sizeof(e->held[0])) - e->nheld) * sizeof(uint64_t));
	if (n < 0 && errno == EAGAIN)
		return 0;
	if (n <= 0 || n % 8) {
		e->err = n < 0 ? -errno : -EPROTO;
		return e->err;
	}
	e->nheld += (unsigned)n / 8;
	*bytes += (uint64_t)n;
	vq_rt_queue_wake(e->q);
	return (int)(n / 8);
}

static bool echo_pending(void *ring)
{
	return ((struct echo *)ring)->nheld > 0;
}

static void echo_nop(void *ring)
{
}

static int echo_enable(void *ring)
{
	return echo_pending(ring);
}

static bool echo_no_call(void *ring)
{
	return false;
}

static const struct vq_rt_ring_ops echo_ops = {
	.has_avail = echo_pending, .disable_notify = echo_nop,
	.enable_notify = echo_enable, .should_signal = echo_no_call,
};

static int echo_write(struct vq_rt_queue *q, void *arg,
		      const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct echo *e = arg;
	unsigned n = e->nheld;

	if (!n)
		return 0;
	CHECK_EQ(write(e->fd, e->held, n * 8), (ssize_t)n * 8);
	e->echoed += n;
	e->nheld = 0;
	*bytes += n * 8;
	return (int)n;
}

static void *loop_thread(void *arg)
{
	struct vq_rt_loop *l = arg;
	int r = vq_rt_loop_run(l);

	return (void *)(intptr_t)r;
}

static void echo_run(uint64_t bp_ns, unsigned total)
{
	struct vq_rt_loop_config lc = { .busy_poll_ns = bp_ns };
	struct vq_rt_queue_config qc = {
		.ops = &echo_ops, .kick_fd = -1, .call_fd = -1,
		.process = echo_write,
	};
	struct vq_rt_loop *l;
	struct echo e = { 0 };
	pthread_t t;
	void *ret;
	uint64_t i, v;
	int sp[2];

	fprintf(stderr, "   busy_poll=%lluns n=%u\n", (unsigned long long)bp_ns, total);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	CHECK_EQ(fcntl(sp[0], F_SETFL, O_NONBLOCK), 0);
	e.fd = sp[0];
	qc.ring = qc.arg = &e;
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	CHECK_EQ(vq_rt_loop_add(l, &qc, &e.q), 0);
	CHECK_EQ(vq_rt_loop_add_fd(l, e.fd, EPOLLIN, echo_read, &e, NULL), 0);
	CHECK_EQ(pthread_create(&t, NULL, loop_thread, l), 0);
	for (i = 1; i <= total; i++) {
		struct pollfd pf = { .fd = sp[1], .events = POLLIN };

		CHECK_EQ(write(sp[1], &i, 8), 8);
		if (poll(&pf, 1, WAIT_MS) != 1)
			fprintf(stderr, "lost wakeup at %llu\n", (unsigned long long)i);
		CHECK_EQ(read(sp[1], &v, 8), 8);
		CHECK_EQ(v, i);
	}
	vq_rt_loop_stop(l);
	pthread_join(t, &ret);
	CHECK_EQ((intptr_t)ret, 0);
	CHECK_EQ(e.err, 0);
	CHECK_EQ(e.echoed, total);
	vq_rt_loop_free(l);
	close(sp[0]);
	close(sp[1]);
}

/* Sleeping and busy-polling loops alike answer every message. */
static void runtime_fd_wakes_queue_loses_nothing(void)
{
	echo_run(0, 5000);
	echo_run(20000, 5000);
}

int main(void)
{
	layouts[0] = layout_available(0) == 0;
	layouts[1] = layout_available(VQ_BIT(VQ_F_RING_PACKED)) == 0;
	if (!layouts[0] && !layouts[1]) {
		fprintf(stderr, "no ring layout is implemented yet\n");
		return VQ_TEST_SKIP;
	}
	if (!layouts[1])
		fprintf(stderr, "packed ring not available: split only\n");
	RUN(runtime_sleeping_loop_wakes_on_every_kick);
	RUN(runtime_busy_poll_loses_nothing);
	RUN(runtime_fd_wakes_queue_loses_nothing);
	return 0;
}
