// SPDX-License-Identifier: MIT
/*
 * The device framework against our front-end, in one process: an echo
 * device (each ring copies what a chain reads into what it writes) on two
 * workers, its back-end served by a control thread of the test.  Rings
 * run on their group's worker; pauses (a dirty log switched on and off)
 * and failed starts create no thread and lose no counter; a ring that
 * breaks is said once and the others go on; a worker held by a front-end
 * fd fails that front-end, is released, and the next front-end is served.
 * Workers given CPUs run only there.
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <virtq/framework.h>
#include <virtq/log.h>
#include <virtq/guest/frontend.h>

#include "vq_test.h"

#define NQ 4
#define QSIZE 64
#define BUFSZ 1024

/* ---- the echo device ---- */

struct ering {
	struct vq_fw_ring *r;
	int tid;                        /* the thread its last start ran on */
	unsigned starts, resumes, stops, pauses;
};

struct edev {
	struct vq_fw_dev *d;
	struct ering q[NQ];
	/* ring index whose next start fails, or -1: atomic because every
	 * worker's start reads it */
	_Atomic int fail_start;
	int call_inline, call_other;    /* vq_fw_dev_call from ring 0's start */
	bool called;
	unsigned resets;
};

static int echo_turn(struct vq_rt_queue *q, void *arg,
		     const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct ering *e = arg;
	struct vq_dev *vq = vq_fw_ring_vq(e->r);
	struct iovec iov[8];
	struct vq_chain c = { .iov = iov, .iov_max = 8 };
	uint8_t tmp[BUFSZ];
	unsigned n = 0;

	while (n < b->pkts) {
		size_t len = 0, put = 0;
		int k = vq_dev_pop(vq, &c);

		if (k < 0)
			return k;
		if (k == 0)
			break;
		for (unsigned i = 0; i < c.nout; i++) {
			size_t m = iov[i].iov_len < sizeof(tmp) - len ?
				   iov[i].iov_len : sizeof(tmp) - len;

			memcpy(tmp + len, iov[i].iov_base, m);
			len += m;
		}
		for (unsigned i = c.nout; i < c.nout + c.nin && put < len; i++) {
			size_t m = iov[i].iov_len < len - put ? iov[i].iov_len : len - put;

			memcpy(iov[i].iov_base, tmp + put, m);
			put += m;
		}
		if (vq_dev_fill(vq, &c, (uint32_t)put) < 0)
			return -EINVAL;
		n++;
		*bytes += put;
	}
	vq_dev_flush(vq);
	return (int)n;
}

static void mark_called(void *arg)
{
	((struct edev *)arg)->called = true;
}

static int echo_start(void *opaque, struct vq_fw_ring *r, bool resumed,
		      struct vq_fw_turn *t)
{
	struct edev *ed = opaque;
	struct ering *e = &ed->q[vq_fw_ring_index(r)];

	int failing = (int)vq_fw_ring_index(r);

	if (atomic_compare_exchange_strong(&ed->fail_start, &failing, -1))
		return -ENOMEM;
	if (vq_fw_ring_index(r) == 0 && !resumed) {
		/* on group 0's worker: its own group runs at once, another
		 * worker's would wait on a worker */
		ed->called = false;
		ed->call_inline = vq_fw_dev_call(ed->d, 0, mark_called, ed);
		ed->call_other = vq_fw_dev_call(ed->d, 1, mark_called, ed);
	}
	e->r = r;
	e->tid = (int)gettid();
	e->starts++;
	e->resumes += resumed;
	t->process = echo_turn;
	t->arg = e;
	return 0;
}

static void echo_stop(void *opaque, struct vq_fw_ring *r, bool paused)
{
	struct ering *e = &((struct edev *)opaque)->q[vq_fw_ring_index(r)];

	e->stops++;
	e->pauses += paused;
}

static void echo_reset(void *opaque, unsigned group)
{
	((struct edev *)opaque)->resets++;
}

static const struct vq_fw_device_ops echo_ops = {
	.ring_start = echo_start, .ring_stop = echo_stop, .reset = echo_reset,
};

/* ---- the control thread: serves the back-end until told to stop ---- */

struct ctl {
	struct vq_vhu_backend *b;
	pthread_t th;
	int stop;                       /* atomic */
	int closes;                     /* atomic: connections closed */
	char why[256];                  /* the last close's error */
	pthread_mutex_t lock;
};

static void *ctl_main(void *arg)
{
	struct ctl *c = arg;

	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		struct pollfd p = { .fd = vq_vhu_backend_fd(c->b), .events = POLLIN };
		int r;

		if (poll(&p, 1, 20) <= 0)
			continue;
		r = vq_vhu_backend_process(c->b);
		if (r < 0) {
			pthread_mutex_lock(&c->lock);
			snprintf(c->why, sizeof(c->why), "%s", vq_vhu_backend_error_msg(c->b));
			pthread_mutex_unlock(&c->lock);
			__atomic_fetch_add(&c->closes, 1, __ATOMIC_RELEASE);
		}
	}
	return NULL;
}

/* Wait (bounded) for the n-th connection to close; its error. */
static void ctl_wait_close(struct ctl *c, int n, char *why, size_t len)
{
	for (int i = 0; i < 1000 && __atomic_load_n(&c->closes, __ATOMIC_ACQUIRE) < n; i++)
		usleep(10000);
	CHECK(__atomic_load_n(&c->closes, __ATOMIC_ACQUIRE) >= n);
	pthread_mutex_lock(&c->lock);
	snprintf(why, len, "%s", c->why);
	pthread_mutex_unlock(&c->lock);
}

/* ---- the fixture ---- */

struct fx {
	struct vq_fw *fw;
	struct edev ed;
	struct ctl ctl;
	char dir[32], path[64];
};

static int count_tasks(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int n = 0;

	CHECK(d);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The workers busy poll for busy_poll_ns when dry, or adaptively up to
 * busy_poll_max_ns (0 and 0: not at all). */
static void fx_init_poll(struct fx *x, unsigned stall_ms, uint64_t busy_poll_ns,
			 uint64_t busy_poll_max_ns)
{
	struct vq_fw_config fc = { .threads = 2, .stall_ms = stall_ms,
				   .busy_poll_ns = busy_poll_ns,
				   .busy_poll_max_ns = busy_poll_max_ns };
	struct vq_fw_device dev = {
		.name = "fw-echo", .features = VQ_BIT(VQ_F_VERSION_1) |
			VQ_BIT(VQ_F_RING_PACKED) | VQ_BIT(VQ_F_EVENT_IDX),
		.nqueues = NQ, .ops = &echo_ops, .opaque = &x->ed,
	};

	memset(x, 0, sizeof(*x));
	x->ed.fail_start = -1;
	CHECK_EQ(vq_fw_new(&fc, &x->fw), 0);
	CHECK_EQ(vq_fw_dev_new(x->fw, &dev, &x->ed.d), 0);
	CHECK_EQ(vq_fw_dev_groups(x->ed.d), 2);
	strcpy(x->dir, "/tmp/vq-fw-XXXXXX");
	CHECK(mkdtemp(x->dir));
	snprintf(x->path, sizeof(x->path), "%s/sock", x->dir);
	x->ctl.b = vq_fw_dev_backend(x->ed.d);
	vq_vhu_backend_set_recv_timeout(x->ctl.b, 1000);
	CHECK_EQ(vq_vhu_backend_listen(x->ctl.b, x->path, 0), 0);
	pthread_mutex_init(&x->ctl.lock, NULL);
	CHECK_EQ(pthread_create(&x->ctl.th, NULL, ctl_main, &x->ctl), 0);
}

static void fx_init(struct fx *x, unsigned stall_ms)
{
	fx_init_poll(x, stall_ms, 0, 0);
}

static void fx_fini(struct fx *x)
{
	__atomic_store_n(&x->ctl.stop, 1, __ATOMIC_RELEASE);
	pthread_join(x->ctl.th, NULL);
	vq_fw_dev_free(x->ed.d);
	vq_fw_free(x->fw);
	pthread_mutex_destroy(&x->ctl.lock);
	rmdir(x->dir);
}

static struct vq_vhu_frontend *fe_open(struct fx *x, bool packed, bool start)
{
	char err[256] = "";
	struct vq_vhu_frontend_config c = {
		.features = VQ_BIT(VQ_F_VERSION_1) |
			    (packed ? VQ_BIT(VQ_F_RING_PACKED) : 0),
		.nqueues = NQ, .queue_size = QSIZE, .mem_size = 4u << 20,
		.err = err, .errlen = sizeof(err),
	};
	struct vq_vhu_frontend *f = NULL;
	int r = vq_vhu_frontend_connect(x->path, &c, &f);

	if (r)
		fprintf(stderr, "connect: %d %s\n", r, err);
	CHECK_EQ(r, 0);
	if (start) {
		r = vq_vhu_frontend_start(f);
		if (r)
			fprintf(stderr, "start: %d %s\n", r, vq_vhu_frontend_error_msg(f));
		CHECK_EQ(r, 0);
	}
	return f;
}

/* Each ring's buffers in the current front-end's memory, made once. */
static struct bufs {
	struct vq_vhu_frontend *f;
	uint8_t *out[QSIZE], *in[QSIZE];
	uint64_t og[QSIZE], ig[QSIZE];
} bufs[NQ];

static void fe_close(struct vq_vhu_frontend *f)
{
	for (unsigned q = 0; q < NQ; q++)
		if (bufs[q].f == f)
			bufs[q].f = NULL;
	vq_vhu_frontend_free(f);
}

/* Echo n buffers of varying length through ring qi and check each. */
static void echo_n(struct vq_vhu_frontend *f, unsigned qi, unsigned n, uint64_t *seed)
{
	struct vq_drv *d = vq_vhu_frontend_queue(f, qi);
	int kick = vq_vhu_frontend_kick_fd(f, qi), call = vq_vhu_frontend_call_fd(f, qi);
	struct bufs *b = &bufs[qi];
	uint8_t **out = b->out, **in = b->in;
	uint64_t *og = b->og, *ig = b->ig;
	uint32_t lens[QSIZE];
	unsigned freel[QSIZE], nfree = 0, sent = 0, done = 0;

	for (unsigned i = 0; i < QSIZE; i++) {
		if (b->f != f) {
			out[i] = vq_vhu_frontend_alloc(f, BUFSZ, &og[i]);
			in[i] = vq_vhu_frontend_alloc(f, BUFSZ, &ig[i]);
			CHECK(out[i] && in[i]);
		}
		freel[nfree++] = i;
	}
	b->f = f;
	while (done < n) {
		bool progress = false;
		uint32_t len;
		void *tok;

		while (sent < n && nfree && vq_drv_free_slots(d) >= 2) {
			unsigned i = freel[--nfree];
			struct vq_seg seg[2];

			lens[i] = 1 + vq_test_rand(seed) % BUFSZ;
			for (uint32_t k = 0; k < lens[i]; k++)
				out[i][k] = (uint8_t)(sent + k * 7 + qi);
			seg[0] = (struct vq_seg){ og[i], lens[i] };
			seg[1] = (struct vq_seg){ ig[i], BUFSZ };
			CHECK_EQ(vq_drv_add(d, seg, 1, 1, (void *)(uintptr_t)(i + 1)), 0);
			sent++;
			progress = true;
		}
		if (vq_drv_kick_prepare(d) == 1)
			CHECK_EQ(vq_evt_signal(kick), 0);
		while (vq_drv_get(d, &tok, &len) == 1) {
			unsigned i = (unsigned)(uintptr_t)tok - 1;

			CHECK(i < QSIZE);
			CHECK_EQ(len, lens[i]);
			CHECK(!memcmp(in[i], out[i], len));
			freel[nfree++] = i;
			done++;
			progress = true;
		}
		CHECK_EQ(vq_drv_error(d), 0);
		if (!progress) {
			int r = vq_drv_enable_cb(d);

			CHECK(r >= 0);
			if (r == 0)
				CHECK(vq_evt_wait(call, 5000) > 0);
			vq_drv_disable_cb(d);
		}
	}
}

struct counters_call {
	struct edev *ed;
	unsigned first, n;
	struct vq_rt_counters sum;
};

static void sum_counters(void *arg)
{
	struct counters_call *cc = arg;

	for (unsigned i = cc->first; i < cc->first + cc->n; i++) {
		const struct vq_rt_counters *c = vq_fw_ring_counters(vq_fw_dev_ring(cc->ed->d, i));

		cc->sum.packets += c->packets;
		cc->sum.wakeups += c->wakeups;
		cc->sum.bp_hits += c->bp_hits;
	}
}

/* Every ring's packets, wake-ups and busy-poll hits since the device was
 * made, read on the rings' workers. */
static struct vq_rt_counters counters_total(struct edev *ed)
{
	struct counters_call cc = { .ed = ed };

	for (unsigned g = 0; g < 2; g++) {
		cc.first = 2 * g;
		cc.n = 2;
		CHECK_EQ(vq_fw_dev_call(ed->d, g, sum_counters, &cc), 0);
	}
	return cc.sum;
}

static uint64_t packets_total(struct edev *ed)
{
	return counters_total(ed).packets;
}

/* ---- cases ---- */

/* Queue pair k runs on worker k % threads: both rings of a pair on one
 * thread, the two pairs on two, none on the control thread; a call from
 * a worker to its own group runs at once, to another worker's fails. */
static void rings_run_on_their_groups_worker(void)
{
	struct fx x;
	struct vq_vhu_frontend *f;
	uint64_t seed = vq_test_seed(1);

	fx_init(&x, 0);
	for (int packed = 0; packed < 2; packed++) {
		f = fe_open(&x, packed, true);
		for (unsigned q = 0; q < NQ; q++)
			echo_n(f, q, 300, &seed);
		CHECK(x.ed.q[0].tid && x.ed.q[0].tid == x.ed.q[1].tid);
		CHECK(x.ed.q[2].tid && x.ed.q[2].tid == x.ed.q[3].tid);
		CHECK(x.ed.q[0].tid != x.ed.q[2].tid);
		CHECK(x.ed.q[0].tid != (int)gettid());
		CHECK_EQ(x.ed.call_inline, 0);
		CHECK(x.ed.called);
		CHECK_EQ(x.ed.call_other, -EDEADLK);
		fe_close(f);
	}
	fx_fini(&x);
}

/*
 * vhost-user "Migration": switching the dirty log on and off pauses and
 * resumes every ring (SET_LOG_BASE, SET_FEATURES with LOG_ALL, the rings'
 * SET_VRING_ADDR): each is a message to the ring's worker, so no thread
 * comes or goes, the rings resume where they were, and the framework's
 * counters keep every packet.
 */
static void pauses_keep_threads_and_counters(void)
{
	struct fx x;
	struct vq_vhu_frontend *f;
	uint64_t seed = vq_test_seed(2);
	int tasks;
	unsigned total = 0, resumes = 0;

	fx_init(&x, 0);
	f = fe_open(&x, false, true);
	echo_n(f, 0, 100, &seed);
	total += 100;
	tasks = count_tasks();
	for (int i = 0; i < 10; i++) {
		CHECK_EQ(vq_vhu_frontend_set_logging(f, i % 2 == 0), 0);
		for (unsigned q = 0; q < NQ; q++)
			echo_n(f, q, 50, &seed);
		total += NQ * 50;
	}
	CHECK_EQ(count_tasks(), tasks);
	for (unsigned q = 0; q < NQ; q++) {
		CHECK(x.ed.q[q].resumes >= 10);
		CHECK_EQ(x.ed.q[q].resumes, x.ed.q[q].pauses);
		resumes += x.ed.q[q].resumes;
	}
	CHECK_EQ(packets_total(&x.ed), total);
	fprintf(stderr, "   %u packets over %u pauses, %d threads throughout\n",
		total, resumes, tasks);
	fe_close(f);
	/* the device was reset on each group's worker */
	for (int i = 0; i < 100 && x.ed.resets < 2; i++)
		usleep(10000);
	CHECK_EQ(x.ed.resets, 2);
	CHECK_EQ(packets_total(&x.ed), total);
	fx_fini(&x);
}

/*
 * vhost-user "Ring states": a ring the device cannot start stays stopped,
 * with nothing of it left on the loop, and the connection closes; the next
 * front-end starts every ring, that one included, on the same workers.
 */
static void failed_start_leaves_ring_stopped(void)
{
	struct fx x;
	struct vq_vhu_frontend *f;
	uint64_t seed = vq_test_seed(3);
	char why[256];
	int tasks;

	fx_init(&x, 0);
	f = fe_open(&x, false, true);
	fe_close(f);
	ctl_wait_close(&x.ctl, 1, why, sizeof(why));
	tasks = count_tasks();
	x.ed.fail_start = 1;
	f = fe_open(&x, false, false);
	/* the start runs on the worker: its failure may come after the
	 * front-end's last reply, as a closed connection */
	vq_vhu_frontend_start(f);
	ctl_wait_close(&x.ctl, 2, why, sizeof(why));
	fe_close(f);
	fprintf(stderr, "   closed: %s\n", why);
	CHECK(strstr(why, "queue 1"));
	CHECK(!vq_fw_ring_running(vq_fw_dev_ring(x.ed.d, 1)));
	f = fe_open(&x, false, true);
	for (unsigned q = 0; q < NQ; q++)
		echo_n(f, q, 100, &seed);
	CHECK_EQ(count_tasks(), tasks);
	fe_close(f);
	fx_fini(&x);
}

struct logged {
	pthread_mutex_t lock;
	unsigned broken;                /* "queue 0 broken" messages */
};

static void log_count(void *arg, enum vq_log_level level, const char *msg)
{
	struct logged *l = arg;

	pthread_mutex_lock(&l->lock);
	if (strstr(msg, "queue 0 broken"))
		l->broken++;
	pthread_mutex_unlock(&l->lock);
}

/*
 * 2.7.5.1 (a descriptor's buffer must be in guest memory): the ring that
 * gets one breaks, is said broken once and no longer served; the other
 * rings of its worker go on.
 */
static void broken_ring_said_once_others_go_on(void)
{
	struct logged l = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct fx x;
	struct vq_vhu_frontend *f;
	struct vq_drv *d;
	uint64_t seed = vq_test_seed(4);
	struct vq_seg seg[2] = { { 1ull << 40, 64 }, { 1ull << 40, 64 } };

	vq_log_set(log_count, &l, VQ_LOG_ERR);
	fx_init(&x, 0);
	f = fe_open(&x, false, true);
	d = vq_vhu_frontend_queue(f, 0);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(vq_drv_add(d, seg, 1, 1, (void *)(uintptr_t)(i + 1)), 0);
		vq_drv_kick_prepare(d);
		CHECK_EQ(vq_evt_signal(vq_vhu_frontend_kick_fd(f, 0)), 0);
	}
	for (int i = 0; i < 200; i++) {
		pthread_mutex_lock(&l.lock);
		bool seen = l.broken;
		pthread_mutex_unlock(&l.lock);
		if (seen)
			break;
		usleep(10000);
	}
	echo_n(f, 1, 200, &seed);       /* same worker */
	echo_n(f, 2, 200, &seed);
	pthread_mutex_lock(&l.lock);
	CHECK_EQ(l.broken, 1);
	pthread_mutex_unlock(&l.lock);
	fe_close(f);
	fx_fini(&x);
	vq_log_set(NULL, NULL, VQ_LOG_ERR);
}

/*
 * No thread waits forever on a front-end's fd: a front-end that clears
 * O_NONBLOCK on its call eventfd (it shares the open file with us) and
 * fills it to the top holds the worker in write(2).  The monitor fails
 * that connection after stall_ms; stopping its rings, the control thread
 * empties the fd, which lets the worker go; the next front-end is served
 * by the same workers.
 */
static void worker_held_by_call_fd_is_released(void)
{
	struct fx x;
	struct vq_vhu_frontend *f;
	struct vq_drv *d;
	uint64_t seed = vq_test_seed(5), full = 0xfffffffffffffffeull;
	uint8_t *buf;
	uint64_t gpa;
	struct vq_seg seg[2];
	char why[256];
	int call, tasks;

	fx_init(&x, 500);
	f = fe_open(&x, false, true);
	echo_n(f, 0, 10, &seed);
	tasks = count_tasks();
	d = vq_vhu_frontend_queue(f, 0);
	call = vq_vhu_frontend_call_fd(f, 0);
	buf = vq_vhu_frontend_alloc(f, 128, &gpa);
	CHECK(buf);
	vq_evt_drain(call);
	CHECK_EQ(fcntl(call, F_SETFL, fcntl(call, F_GETFL) & ~O_NONBLOCK), 0);
	CHECK_EQ(write(call, &full, 8), 8);
	seg[0] = (struct vq_seg){ gpa, 64 };
	seg[1] = (struct vq_seg){ gpa + 64, 64 };
	CHECK_EQ(vq_drv_enable_cb(d), 0);       /* ask for the call */
	CHECK_EQ(vq_drv_add(d, seg, 1, 1, (void *)1), 0);
	vq_drv_kick_prepare(d);
	CHECK_EQ(vq_evt_signal(vq_vhu_frontend_kick_fd(f, 0)), 0);
	ctl_wait_close(&x.ctl, 1, why, sizeof(why));
	fprintf(stderr, "   closed: %s\n", why);
	CHECK(strstr(why, "no progress"));
	fe_close(f);
	f = fe_open(&x, false, true);
	for (unsigned q = 0; q < NQ; q++)
		echo_n(f, q, 100, &seed);
	CHECK_EQ(count_tasks(), tasks);
	fe_close(f);
	fx_fini(&x);
}

static void nothing(void *arg)
{
}

/*
 * A call's wake-up is never lost: calls made back to back, each waking a
 * worker that may still be draining the last one's, are each run at once,
 * not when the worker's loop next wakes by itself (VQ_RT_QUIET_MS).  A
 * lost wake-up costs that whole period; a slow machine costs far less.
 */
static void back_to_back_calls_lose_no_wakeup(void)
{
	struct fx x;
	unsigned slow = 0;
	cpu_set_t one, all;

	/* one CPU for the caller and the workers: the woken caller runs
	 * before the worker has finished its round, the race at its widest */
	CHECK_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	CHECK_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
	fx_init(&x, 0);
	for (int i = 0; i < 2000; i++) {
		uint64_t t0 = vq_rt_now_ns();

		CHECK_EQ(vq_fw_dev_call(x.ed.d, i % 2, nothing, NULL), 0);
		if (vq_rt_now_ns() - t0 >= (uint64_t)VQ_RT_QUIET_MS * 1000000 * 3 / 4)
			slow++;
	}
	fprintf(stderr, "   %u of 2000 calls waited for the quiet period\n", slow);
	CHECK(slow <= 1);
	fx_fini(&x);
	CHECK_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
}

/*
 * A call reaches a worker inside its busy-poll window at once: the loop
 * reads the mailbox's pending word at every probe instead of asking epoll
 * about its eventfd, and the word ends the window.  Windows of 2 s, each
 * worker polling its dry rings: a call that waited for a window's end, or
 * for a sleep, would take that long.
 */
static void call_ends_busy_poll_window(void)
{
	struct fx x;
	struct vq_vhu_frontend *f;
	uint64_t seed = 7, worst = 0;

	fx_init_poll(&x, 10000, 2000000000ull, 0);
	f = fe_open(&x, false, true);
	for (unsigned q = 0; q < NQ; q++)
		echo_n(f, q, 10, &seed);
	for (int i = 0; i < 20; i++) {
		uint64_t t0 = vq_rt_now_ns(), t;

		CHECK_EQ(vq_fw_dev_call(x.ed.d, i % 2, nothing, NULL), 0);
		t = vq_rt_now_ns() - t0;
		if (t > worst)
			worst = t;
	}
	fprintf(stderr, "   slowest call into a polling worker: %.3f ms\n", worst / 1e6);
	CHECK(worst < 500000000ull);
	fe_close(f);
	fx_fini(&x);
}

/*
 * vq_fw_config.busy_poll_max_ns reaches every worker's loop: with adaptive
 * windows the rings echo as before, and whatever found the later bursts
 * (a kick's wake-up or a window) is counted.  One window at a time: a
 * fixed one and an adaptive one together are refused, nothing started.
 */
static void adaptive_workers_serve_and_refuse_both(void)
{
	struct vq_fw_config both = { .busy_poll_ns = 1000, .busy_poll_max_ns = 32000 };
	struct vq_fw *fw;
	struct vq_vhu_frontend *f;
	struct vq_rt_counters sum;
	uint64_t seed = 11;
	struct fx x;

	CHECK_EQ(vq_fw_new(&both, &fw), -EINVAL);
	CHECK(fw == NULL);
	fx_init_poll(&x, 10000, 0, 32000);
	f = fe_open(&x, false, true);
	for (int round = 0; round < 5; round++)
		for (unsigned q = 0; q < NQ; q++)
			echo_n(f, q, 10, &seed);
	sum = counters_total(&x.ed);
	CHECK_EQ(sum.packets, 5 * NQ * 10);
	CHECK(sum.wakeups + sum.bp_hits > 0);
	fe_close(f);
	fx_fini(&x);
}

static void read_affinity(void *arg)
{
	CHECK_EQ(sched_getaffinity(0, sizeof(cpu_set_t), arg), 0);
}

/*
 * vq_fw_config.cpus: worker k is born on cpus[k % ncpus] and stays there,
 * so a device's group runs only on its worker's CPU.  Two workers on the
 * last CPU and on CPU 0 (the same one on a one-CPU machine).
 */
static void workers_run_on_their_cpus(void)
{
	unsigned last = (unsigned)sysconf(_SC_NPROCESSORS_ONLN) - 1;
	unsigned cpus[2] = { last, 0 };
	struct vq_fw_config fc = { .threads = 2, .cpus = cpus, .ncpus = 2 };
	struct vq_fw_device dev = {
		.name = "fw-pinned", .features = VQ_BIT(VQ_F_VERSION_1),
		.nqueues = NQ, .ops = &echo_ops,
	};
	struct edev ed = { .fail_start = -1 };
	cpu_set_t set[2];
	struct vq_fw *fw;
	bool seen_last = false, seen_0 = false;

	dev.opaque = &ed;
	CHECK_EQ(vq_fw_new(&fc, &fw), 0);
	CHECK_EQ(vq_fw_dev_new(fw, &dev, &ed.d), 0);
	CHECK_EQ(vq_fw_dev_groups(ed.d), 2);
	for (unsigned g = 0; g < 2; g++) {
		CHECK_EQ(vq_fw_dev_call(ed.d, g, read_affinity, &set[g]), 0);
		CHECK_EQ(CPU_COUNT(&set[g]), 1);
		seen_last |= CPU_ISSET(last, &set[g]);
		seen_0 |= CPU_ISSET(0, &set[g]);
	}
	CHECK(seen_last && seen_0);
	/* the two groups are on different workers */
	CHECK(last == 0 || !CPU_EQUAL(&set[0], &set[1]));
	vq_fw_dev_free(ed.d);
	vq_fw_free(fw);
}

int main(void)
{
	RUN(back_to_back_calls_lose_no_wakeup);
	RUN(workers_run_on_their_cpus);
	RUN(adaptive_workers_serve_and_refuse_both);
	RUN(rings_run_on_their_groups_worker);
	RUN(pauses_keep_threads_and_counters);
	RUN(failed_start_leaves_ring_stopped);
	RUN(broken_ring_said_once_others_go_on);
	RUN(worker_held_by_call_fd_is_released);
	RUN(call_ends_busy_poll_window);
	return 0;
}
