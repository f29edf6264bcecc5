// SPDX-License-Identifier: MIT
/*
 * The device-side poll loop.  Each queue is either active (notifications
 * disabled, processed every round) or idle (notifications enabled, its kick
 * eventfd in the epoll set, its ring read each busy round).  A queue goes
 * idle only after it ran dry, its busy-poll window (if any) found nothing,
 * and vq_dev_enable_notify's re-check found nothing: the order that loses
 * no kick (V4).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "runtime_internal.h"

struct vq_rt_queue {
	struct vq_rt_loop *loop;
	const struct vq_rt_ring_ops *ops;
	void *ring;
	int kick_fd;
	int call_fd;
	vq_rt_process_fn process;
	void *arg;
	struct vq_rt_budget budget;
	bool active;
	struct vq_rt_counters cnt;
};

struct vq_rt_loop {
	struct vq_rt_loop_config cfg;
	int epfd;
	int wake_fd;                    /* vq_rt_loop_stop's wakeup */
	int stop;                       /* atomic */
	struct vq_rt_queue **q;
	unsigned nq;
	unsigned rr;                    /* which queue goes first this round */
	unsigned undrained;             /* busy rounds since kicks were read */
	struct vq_rt_queue *polling;    /* the queue in its busy-poll window */
};

static bool dev_has_avail(void *r)
{
	return vq_dev_has_avail(r);
}

static void dev_disable_notify(void *r)
{
	vq_dev_disable_notify(r);
}

static int dev_enable_notify(void *r)
{
	return vq_dev_enable_notify(r);
}

static bool dev_should_signal(void *r)
{
	return vq_dev_should_signal(r);
}

static bool dev_signal_owed(void *r)
{
	return vq_dev_signal_owed(r);
}

static const struct vq_rt_ring_ops dev_ops = {
	.has_avail = dev_has_avail,
	.disable_notify = dev_disable_notify,
	.enable_notify = dev_enable_notify,
	.should_signal = dev_should_signal,
	.signal_owed = dev_signal_owed,
};

int vq_rt_loop_new(const struct vq_rt_loop_config *cfg, struct vq_rt_loop **out)
{
	struct vq_rt_loop *l;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	int err;

	*out = NULL;
	if (!VQ_RESERVED_ZERO(cfg))
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->cfg = *cfg;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		err = -errno;
		free(l);
		return err;
	}
	l->wake_fd = vq_evt_new();
	if (l->wake_fd < 0) {
		err = l->wake_fd;
		close(l->epfd);
		free(l);
		return err;
	}
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wake_fd, &ev) < 0) {
		err = -errno;
		close(l->wake_fd);
		close(l->epfd);
		free(l);
		return err;
	}
	*out = l;
	return 0;
}

void vq_rt_loop_free(struct vq_rt_loop *l)
{
	unsigned i;

	if (!l)
		return;
	for (i = 0; i < l->nq; i++)
		free(l->q[i]);
	free(l->q);
	close(l->wake_fd);
	close(l->epfd);
	free(l);
}

int vq_rt_loop_add(struct vq_rt_loop *l, const struct vq_rt_queue_config *qc,
		   struct vq_rt_queue **out)
{
	struct vq_rt_queue *q, **nq;

	if (out)
		*out = NULL;
	if (!VQ_RESERVED_ZERO(qc) || (qc->ops && !VQ_RESERVED_ZERO(qc->ops)) ||
	    !qc->process || (!qc->ops && !qc->dev))
		return -EINVAL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	nq = realloc(l->q, (l->nq + 1) * sizeof(*nq));
	if (!nq) {
		free(q);
		return -ENOMEM;
	}
	l->q = nq;
	q->loop = l;
	q->ops = qc->ops ? qc->ops : &dev_ops;
	q->ring = qc->ops ? qc->ring : qc->dev;
	q->kick_fd = qc->kick_fd;
	q->call_fd = qc->call_fd;
	q->process = qc->process;
	q->arg = qc->arg;
	q->budget = qc->budget;
	if (q->budget.pkts == 0 && q->budget.bytes == 0)
		q->budget = (struct vq_rt_budget){ VQ_RT_WEIGHT_PKTS,
						   VQ_RT_WEIGHT_BYTES };
	else if (q->budget.pkts == 0)
		q->budget.pkts = UINT32_MAX;
	else if (q->budget.bytes == 0)
		q->budget.bytes = UINT64_MAX;
	if (q->kick_fd >= 0) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = q };

		if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, q->kick_fd, &ev) < 0) {
			int err = -errno;

			free(q);
			return err;
		}
	}
	/* Start active: buffers may already be there, and a kick sent before
	 * we listened would be lost otherwise. */
	q->active = true;
	q->ops->disable_notify(q->ring);
	l->q[l->nq++] = q;
	if (out)
		*out = q;
	return 0;
}

void vq_rt_loop_stop(struct vq_rt_loop *l)
{
	__atomic_store_n(&l->stop, 1, __ATOMIC_RELEASE);
	vq_evt_signal(l->wake_fd);
}

bool vq_rt_loop_stopped(const struct vq_rt_loop *l)
{
	return __atomic_load_n(&l->stop, __ATOMIC_ACQUIRE);
}

static int queue_call(struct vq_rt_queue *q)
{
	if (q->call_fd >= 0) {
		int r = vq_evt_signal(q->call_fd);

		if (r < 0)
			return r;
	}
	q->cnt.calls_sent++;
	return 1;
}

int vq_rt_queue_signal(struct vq_rt_queue *q)
{
	if (!q->ops->should_signal(q->ring))
		return 0;
	return queue_call(q);
}

/* An idle queue has buffers: process it, with notifications off again. */
static void queue_wake(struct vq_rt_queue *q)
{
	q->active = true;
	q->ops->disable_notify(q->ring);
}

bool vq_rt_queue_active(const struct vq_rt_queue *q)
{
	return q->active;
}

const struct vq_rt_counters *vq_rt_queue_counters(const struct vq_rt_queue *q)
{
	return &q->cnt;
}

/* Busy-poll probes: this queue's ring, and "anything else to do" = another
 * queue has buffers (for an idle queue that is what its kick would say,
 * read without a syscall) or the loop is asked to stop. */
static bool bp_ready(void *arg)
{
	struct vq_rt_loop *l = arg;

	return l->polling->ops->has_avail(l->polling->ring);
}

static bool bp_other(void *arg)
{
	struct vq_rt_loop *l = arg;
	unsigned i;

	if (vq_rt_loop_stopped(l))
		return true;
	for (i = 0; i < l->nq; i++) {
		struct vq_rt_queue *o = l->q[i];

		if (o != l->polling && o->ops->has_avail(o->ring))
			return true;
	}
	return false;
}

static uint64_t bp_now(void *arg)
{
	struct vq_rt_loop *l = arg;

	return l->cfg.now_ns ? l->cfg.now_ns(l->cfg.clock_arg) : vq_rt_now_ns();
}

/* One turn of an active queue.  Returns chains processed or -errno. */
static int queue_turn(struct vq_rt_loop *l, struct vq_rt_queue *q)
{
	uint64_t bytes = 0;
	int n, r;

	n = q->process(q, q->arg, &q->budget, &bytes);
	if (n < 0)
		return n;
	q->cnt.packets += (unsigned)n;
	q->cnt.bytes += bytes;
	if (n > 0) {
		r = vq_rt_queue_signal(q);
		if (r < 0)
			return r;
	}
	/* Budget spent: there is probably more; stay active, let the others
	 * have their turn first. */
	if (vq_rt_budget_spent(&q->budget, (unsigned)n, bytes))
		return n;

	/* Ran dry. */
	if (l->cfg.busy_poll_ns) {
		struct vq_bp_probe p = {
			.now_ns = bp_now, .ready = bp_ready,
			.other = bp_other, .arg = l,
		};
		enum vq_bp_result b;

		l->polling = q;
		b = vq_busy_poll(&p, l->cfg.busy_poll_ns);
		l->polling = NULL;
		if (b == VQ_BP_HIT) {
			q->cnt.bp_hits++;
			return n;
		}
		q->cnt.bp_misses++;
		/* Interrupted by other work: stay active without enabling
		 * notifications and come back after the others' turns
		 * (vhost-net requeues the poll in that case). */
		if (b == VQ_BP_OTHER)
			return n;
	}
	r = q->ops->enable_notify(q->ring);
	if (r < 0)
		return r;
	if (r > 0) {
		/* Buffers arrived while enabling: process them now; the
		 * driver may have seen notifications disabled and not
		 * kicked. */
		q->ops->disable_notify(q->ring);
		return n;
	}
	q->active = false;
	return n;
}

/*
 * A quiet period ended with no kick: look at the idle rings once.  Buffers
 * there were published with notifications enabled and never kicked: a
 * driver whose barrier did not order its index store before its read of
 * our avail_event (QEMU's TCG drops a uniprocessor guest's barriers) went
 * the other way round from ours (V4), and nothing else would ever wake the
 * queue.  The same race on the used side leaves the driver waiting for a
 * call we judged unneeded: vq_dev_signal_owed judges again.  One look per
 * idle queue per quiet period bounds either loss to that period.
 */
static int quiet_recheck(struct vq_rt_loop *l)
{
	unsigned i;

	for (i = 0; i < l->nq; i++) {
		struct vq_rt_queue *q = l->q[i];

		if (q->active)
			continue;
		if (q->ops->signal_owed && q->ops->signal_owed(q->ring)) {
			int r = queue_call(q);

			if (r < 0)
				return r;
			q->cnt.calls_late++;
		}
		if (q->ops->has_avail(q->ring)) {
			queue_wake(q);
			q->cnt.kicks_missed++;
		}
	}
	return 0;
}

/* Collect kicks; a kick re-activates an idle queue. */
static int poll_kicks(struct vq_rt_loop *l, int timeout_ms)
{
	struct epoll_event ev[16];
	int n, i;

	n = epoll_wait(l->epfd, ev, (int)VQ_ARRAY_SIZE(ev), timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	if (n == 0 && timeout_ms != 0)
		return quiet_recheck(l);
	for (i = 0; i < n; i++) {
		struct vq_rt_queue *q = ev[i].data.ptr;
		int64_t k;

		if (!q) {
			vq_evt_drain(l->wake_fd);
			continue;
		}
		k = vq_evt_drain(q->kick_fd);
		if (k < 0)
			return (int)k;
		q->cnt.kicks_recv += (uint64_t)k;
		/* A kick whose buffers wake_ready already found (or that
		 * brought none) leaves the queue idle: a syscall on both
		 * sides orders the driver's publish before this read. */
		if (!q->active && q->ops->has_avail(q->ring)) {
			queue_wake(q);
			if (timeout_ms != 0)
				q->cnt.wakeups++;
		}
	}
	return 0;
}

/* Bounds how long a kick (and a vq_rt_loop_stop wakeup) sits unread in its
 * eventfd while other queues keep the loop busy; nothing waits on it, the
 * idle rings themselves are read every round (wake_ready). */
#define KICK_DRAIN_ROUNDS 64u

/* Activate the idle queues whose rings have buffers, as their kick would:
 * the driver made them available with notifications enabled, so the kick
 * is on its way or already in the eventfd, read later. */
static void wake_ready(struct vq_rt_loop *l)
{
	unsigned i;

	for (i = 0; i < l->nq; i++) {
		struct vq_rt_queue *q = l->q[i];

		if (!q->active && q->ops->has_avail(q->ring))
			queue_wake(q);
	}
}

int vq_rt_loop_run_once(struct vq_rt_loop *l, int timeout_ms)
{
	unsigned k, nactive = 0;
	int done = 0, r;

	if (l->nq == 0)
		return poll_kicks(l, timeout_ms);
	for (k = 0; k < l->nq; k++) {
		struct vq_rt_queue *q = l->q[(l->rr + k) % l->nq];

		if (!q->active)
			continue;
		r = queue_turn(l, q);
		if (r < 0)
			return r;
		done += r;
		nactive += q->active;
	}
	l->rr = (l->rr + 1) % l->nq;
	if (nactive == l->nq)
		return done;
	/* Idle queues hear their kicks through epoll: block when nothing is
	 * active.  When something is, an epoll_wait per round would cost a
	 * syscall per burst of the busy queues; read the idle rings instead,
	 * and the kick eventfds only every KICK_DRAIN_ROUNDS rounds. */
	if (nactive > 0 && !vq_rt_loop_stopped(l)) {
		wake_ready(l);
		if (++l->undrained < KICK_DRAIN_ROUNDS)
			return done;
		timeout_ms = 0;
	} else if (vq_rt_loop_stopped(l)) {
		timeout_ms = 0;
	}
	l->undrained = 0;
	r = poll_kicks(l, timeout_ms);
	if (r < 0)
		return r;
	return done;
}

int vq_rt_loop_run(struct vq_rt_loop *l)
{
	while (!vq_rt_loop_stopped(l)) {
		int r = vq_rt_loop_run_once(l, VQ_RT_QUIET_MS);

		if (r < 0)
			return r;
	}
	return 0;
}
