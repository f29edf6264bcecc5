// SPDX-License-Identifier: MIT
/*
 * The framework's worker threads.  Each runs one runtime loop for as long
 * as the framework lives; the control thread reaches it with calls: a
 * function queued under the worker's lock, an eventfd on its loop to wake
 * it, and a condition variable the caller waits on until the worker has
 * run it.  A worker runs calls between two rounds of its loop, so a call
 * may add or remove the loop's queues and fds freely.
 *
 * The monitor thread watches every worker's round counter: a worker whose
 * loop has not come back for stall_ms (the loop itself never sleeps
 * longer than VQ_RT_QUIET_MS) is held by something a front-end controls,
 * and that front-end's connection is failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "framework_internal.h"
#include "log_internal.h"
#include "runtime_internal.h"

static uint64_t mono_ns(void)
{
	return vq_rt_now_ns();
}

/* An absolute CLOCK_MONOTONIC time ms from now, for the condition
 * variables (made with that clock). */
static struct timespec deadline_in(unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

static void cond_init_mono(pthread_cond_t *cv)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &a);
	pthread_condattr_destroy(&a);
}

struct fw_worker *fw_worker_of(const struct vq_fw_dev *d, unsigned group)
{
	return &d->fw->w[(d->first + group) % d->fw->nw];
}

bool fw_on_worker(const struct fw_worker *w)
{
	return w->running && pthread_equal(pthread_self(), w->th);
}

bool fw_on_any_worker(const struct vq_fw *fw)
{
	for (unsigned i = 0; i < fw->nw; i++)
		if (fw_on_worker(&fw->w[i]))
			return true;
	return false;
}

/* Run the queued calls.  Returns true once the worker is to quit. */
static bool run_calls(struct fw_worker *w)
{
	struct fw_call *c, *next;
	bool quit;

	pthread_mutex_lock(&w->lock);
	c = w->head;
	w->head = NULL;
	w->tail = &w->head;
	__atomic_store_n(&w->pending, 0, __ATOMIC_RELAXED);
	quit = w->quit;
	pthread_mutex_unlock(&w->lock);
	for (; c; c = next) {
		next = c->next;
		__atomic_store_n(&w->busy, c->dev, __ATOMIC_RELAXED);
		c->fn(c->arg);
		__atomic_store_n(&w->busy, NULL, __ATOMIC_RELAXED);
		pthread_mutex_lock(&w->lock);
		c->done = true;         /* c may be gone once this is seen */
		pthread_cond_broadcast(&w->done_cv);
		pthread_mutex_unlock(&w->lock);
	}
	return quit;
}

/*
 * The mailbox's turn: calls are run after the round (run_calls).  The
 * drain may take the wake-up of a call queued after the last run_calls:
 * then the turn says its budget is spent, so the fd keeps its turn and the
 * loop does not sleep before the worker looks at its queue.
 */
static int mbox_turn(struct vq_rt_fd *h, void *arg, uint32_t revents,
		     const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct fw_worker *w = arg;

	vq_evt_drain(w->mbox_fd);
	return __atomic_load_n(&w->pending, __ATOMIC_ACQUIRE) ? (int)b->pkts : 0;
}

static void *worker_main(void *arg)
{
	struct fw_worker *w = arg;
	uint64_t rounds = 0;
	bool dry = false;
	char name[16];

	__atomic_store_n(&w->tid, (int)gettid(), __ATOMIC_RELAXED);
	snprintf(name, sizeof(name), "virtq-w%u", w->id);
	pthread_setname_np(pthread_self(), name);
	for (;;) {
		int r;

		if (__atomic_load_n(&w->pending, __ATOMIC_ACQUIRE) && run_calls(w))
			break;
		/* A round that found nothing is followed by one more look
		 * before the rings ask for kicks and the loop sleeps: a driver
		 * that keeps adding need not kick for every short gap. */
		r = vq_rt_loop_run_once(w->loop, dry ? -1 : 0);
		dry = r == 0;
		__atomic_store_n(&w->rounds, ++rounds, __ATOMIC_RELAXED);
		/* A ring that broke outside any turn fails the round (its
		 * enable_notify says so): take it off and go on. */
		if (r < 0 && fw_reap_broken(w) == 0)
			vq_log(VQ_LOG_ERR, "framework: worker %u: its loop failed: %s",
			       w->id, strerror(-r));
	}
	return NULL;
}

void fw_call_post(struct fw_worker *w, struct fw_call *c)
{
	c->done = false;
	c->next = NULL;
	pthread_mutex_lock(&w->lock);
	*w->tail = c;
	w->tail = &c->next;
	__atomic_store_n(&w->pending, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&w->lock);
	vq_evt_signal(w->mbox_fd);
}

/* How often a waiting caller looks whether the front-end it waits for
 * has gone (then nobody will serve what holds the worker). */
#define WAIT_SLICE_MS 100u

void fw_call_wait(struct fw_worker *w, struct fw_call *c)
{
	unsigned stall = w->fw->cfg.stall_ms, waited = 0;
	bool released = false;

	if (fw_on_worker(w)) {
		c->fn(c->arg);
		return;
	}
	fw_call_post(w, c);
	pthread_mutex_lock(&w->lock);
	while (!c->done) {
		struct timespec until = deadline_in(WAIT_SLICE_MS);

		if (pthread_cond_timedwait(&w->done_cv, &w->lock, &until) != ETIMEDOUT)
			continue;
		waited += WAIT_SLICE_MS;
		if (!c->dev || (waited < stall && (released || !fw_dev_hung_up(c->dev))))
			continue;
		/* The worker is held by something a front-end controls, one
		 * that is gone or too slow: let it go (that front-end's
		 * connection fails), then wait on. */
		pthread_mutex_unlock(&w->lock);
		fw_unstall(c->dev, w);
		pthread_mutex_lock(&w->lock);
		released = true;
		if (waited >= stall)
			waited = 0;
	}
	pthread_mutex_unlock(&w->lock);
}

void fw_dev_link(struct vq_fw_dev *d)
{
	struct vq_fw *fw = d->fw;

	pthread_mutex_lock(&fw->devs_lock);
	d->next = fw->devs;
	fw->devs = d;
	d->first = fw->next_first;
	fw->next_first = (fw->next_first + 1) % fw->nw;
	fw->ndevs++;
	pthread_mutex_unlock(&fw->devs_lock);
}

void fw_dev_unlink(struct vq_fw_dev *d)
{
	struct vq_fw *fw = d->fw;

	pthread_mutex_lock(&fw->devs_lock);
	for (struct vq_fw_dev **p = &fw->devs; *p; p = &(*p)->next)
		if (*p == d) {
			*p = d->next;
			fw->ndevs--;
			break;
		}
	pthread_mutex_unlock(&fw->devs_lock);
}

/* Does d have a group on w? */
static bool dev_on(const struct vq_fw_dev *d, const struct fw_worker *w)
{
	for (unsigned g = 0; g < d->ngroups && g < d->fw->nw; g++)
		if (fw_worker_of(d, g) == w)
			return true;
	return false;
}

/* What the stuck worker is doing, from the kernel: "in syscall 1 (fd 12)"
 * (/proc/self/task/TID/syscall), or "" where that cannot be read. */
static void stuck_where(const struct fw_worker *w, char *buf, size_t len)
{
	char path[64], line[128];
	long nr;
	unsigned long long a0;
	FILE *f;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall",
		 __atomic_load_n(&w->tid, __ATOMIC_RELAXED));
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(line, sizeof(line), f) && sscanf(line, "%ld %llx", &nr, &a0) == 2 &&
	    nr >= 0)
		snprintf(buf, len, ", blocked in system call %ld on fd %llu", nr, a0);
	else if (strncmp(line, "running", 7) != 0 && line[0] != '-')
		snprintf(buf, len, ", in a page fault or the kernel");
	fclose(f);
}

/* A worker stuck: fail the connection of the device it serves now, or of
 * every device on it when it cannot tell. */
static void worker_stalled(struct vq_fw *fw, struct fw_worker *w)
{
	struct vq_fw_dev *busy = __atomic_load_n(&w->busy, __ATOMIC_RELAXED);
	char where[96];

	stuck_where(w, where, sizeof(where));
	pthread_mutex_lock(&fw->devs_lock);
	for (struct vq_fw_dev *d = fw->devs; d; d = d->next)
		if (busy ? d == busy : dev_on(d, w))
			fw_dev_stalled(d, w, where);
	pthread_mutex_unlock(&fw->devs_lock);
}

static void *monitor_main(void *arg)
{
	struct vq_fw *fw = arg;
	uint64_t stall_ns = (uint64_t)fw->cfg.stall_ms * 1000000;
	unsigned period = fw->cfg.stall_ms / 4 ? fw->cfg.stall_ms / 4 : 1;

	pthread_setname_np(pthread_self(), "virtq-monitor");
	pthread_mutex_lock(&fw->mon_lock);
	while (!fw->mon_quit) {
		struct timespec until = deadline_in(period);
		uint64_t now;

		pthread_cond_timedwait(&fw->mon_cv, &fw->mon_lock, &until);
		if (fw->mon_quit)
			break;
		now = mono_ns();
		for (unsigned i = 0; i < fw->nw; i++) {
			struct fw_worker *w = &fw->w[i];
			uint64_t r = __atomic_load_n(&w->rounds, __ATOMIC_RELAXED);

			if (r != w->seen_rounds || !w->seen_ns) {
				w->seen_rounds = r;
				w->seen_ns = now;
				w->stall_said = false;
			} else if (!w->stall_said && now - w->seen_ns >= stall_ns) {
				w->stall_said = true;
				worker_stalled(fw, w);
			}
		}
	}
	pthread_mutex_unlock(&fw->mon_lock);
	return NULL;
}

/* The worker's thread, born on its CPU when there is a list: it never
 * runs a round elsewhere.  A CPU it may not use (a cpuset) leaves it
 * unpinned, with a warning, as taskset would refuse. */
static int worker_start(struct vq_fw *fw, struct fw_worker *w)
{
	pthread_attr_t attr;
	cpu_set_t set;
	unsigned cpu;
	int r;

	if (!fw->cfg.ncpus)
		return -pthread_create(&w->th, NULL, worker_main, w);
	cpu = fw->cpus[w->id % fw->cfg.ncpus];
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	r = pthread_attr_init(&attr);
	if (r)
		return -r;
	r = pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	if (r == 0)
		r = pthread_create(&w->th, &attr, worker_main, w);
	pthread_attr_destroy(&attr);
	if (r != EINVAL)
		return -r;
	vq_log(VQ_LOG_WARNING, "framework: worker %u cannot run on CPU %u", w->id, cpu);
	return -pthread_create(&w->th, NULL, worker_main, w);
}

static int worker_init(struct vq_fw *fw, struct fw_worker *w, unsigned id)
{
	struct vq_rt_loop_config lc = {
		.busy_poll_ns = fw->cfg.busy_poll_ns,
		.busy_poll_yield_ns = fw->cfg.busy_poll_yield_ns,
		.busy_poll_max_ns = fw->cfg.busy_poll_max_ns,
	};
	struct vq_rt_fd *mbox;
	int r;

	w->fw = fw;
	w->id = id;
	w->mbox_fd = -1;
	w->tail = &w->head;
	pthread_mutex_init(&w->lock, NULL);
	cond_init_mono(&w->done_cv);
	r = vq_rt_loop_new(&lc, &w->loop);
	if (r < 0)
		return r;
	w->mbox_fd = vq_evt_new();
	if (w->mbox_fd < 0)
		return w->mbox_fd;
	r = vq_rt_loop_add_fd(w->loop, w->mbox_fd, EPOLLIN, mbox_turn, w, &mbox);
	if (r < 0)
		return r;
	/* fw_call_post sets pending before it writes the fd: a busy loop
	 * reads the word, not epoll. */
	rt_fd_flagged(mbox, &w->pending);
	r = worker_start(fw, w);
	if (r)
		return r;
	w->running = true;
	return 0;
}

static void worker_fini(struct fw_worker *w)
{
	if (w->running) {
		pthread_mutex_lock(&w->lock);
		w->quit = true;
		__atomic_store_n(&w->pending, 1, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&w->lock);
		vq_evt_signal(w->mbox_fd);
		pthread_join(w->th, NULL);
	}
	vq_rt_loop_free(w->loop);
	if (w->mbox_fd >= 0)
		close(w->mbox_fd);
	pthread_cond_destroy(&w->done_cv);
	pthread_mutex_destroy(&w->lock);
}

int vq_fw_new(const struct vq_fw_config *c, struct vq_fw **out)
{
	struct vq_fw *fw;
	unsigned n = c->threads ? c->threads : 1;
	int r = 0;

	*out = NULL;
	if (!VQ_RESERVED_ZERO(c) || n > VQ_FW_MAX_THREADS ||
	    (c->busy_poll_ns && c->busy_poll_max_ns) ||
	    c->ncpus > VQ_FW_MAX_THREADS || (c->ncpus && !c->cpus))
		return -EINVAL;
	fw = calloc(1, sizeof(*fw));
	if (!fw)
		return -ENOMEM;
	fw->cfg = *c;
	fw->cfg.threads = n;
	fw->cfg.stall_ms = c->stall_ms ? c->stall_ms : VQ_FW_STALL_MS;
	for (unsigned i = 0; i < c->ncpus; i++)
		fw->cpus[i] = c->cpus[i];
	fw->cfg.cpus = NULL;
	pthread_mutex_init(&fw->devs_lock, NULL);
	pthread_mutex_init(&fw->mon_lock, NULL);
	cond_init_mono(&fw->mon_cv);
	fw->w = calloc(n, sizeof(*fw->w));
	if (!fw->w) {
		vq_fw_free(fw);
		return -ENOMEM;
	}
	for (fw->nw = 0; fw->nw < n && r == 0; fw->nw++)
		r = worker_init(fw, &fw->w[fw->nw], fw->nw);
	if (r == 0) {
		r = -pthread_create(&fw->mon, NULL, monitor_main, fw);
		fw->mon_running = r == 0;
	}
	if (r) {
		vq_fw_free(fw);
		return r;
	}
	*out = fw;
	return 0;
}

void vq_fw_free(struct vq_fw *fw)
{
	if (!fw)
		return;
	if (fw->ndevs)
		vq_log(VQ_LOG_ERR, "framework: freed with %u device(s) still on it",
		       fw->ndevs);
	if (fw->mon_running) {
		pthread_mutex_lock(&fw->mon_lock);
		fw->mon_quit = true;
		pthread_cond_broadcast(&fw->mon_cv);
		pthread_mutex_unlock(&fw->mon_lock);
		pthread_join(fw->mon, NULL);
	}
	for (unsigned i = 0; fw->w && i < fw->nw; i++)
		worker_fini(&fw->w[i]);
	free(fw->w);
	pthread_cond_destroy(&fw->mon_cv);
	pthread_mutex_destroy(&fw->mon_lock);
	pthread_mutex_destroy(&fw->devs_lock);
	free(fw);
}
