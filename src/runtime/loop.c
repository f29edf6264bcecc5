// SPDX-License-Identifier: MIT
/*
 * The device-side poll loop.  Each queue is either active (notifications
 * disabled, processed every round) or idle (its ring read each busy round,
 * its kick eventfd in the epoll set).  A queue goes idle after it ran dry
 * and its busy-poll window (if any) found nothing, with notifications
 * still off: while the loop works on other queues or fds it reads the ring
 * anyway, and a driver that sees notifications off does not kick for
 * nothing.  Only before the loop sleeps does each idle queue enable them,
 * and vq_dev_enable_notify's re-check finding nothing is what lets it
 * sleep: the order that loses no kick (V4).  Other fds (fd.c) share the
 * rounds and the epoll set.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "runtime_internal.h"

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
	if (!VQ_RESERVED_ZERO(cfg) || (cfg->busy_poll_ns && cfg->busy_poll_max_ns))
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
	rt_fds_free(l);
	close(l->wake_fd);
	close(l->epfd);
	free(l);
}

struct vq_rt_budget rt_budget(struct vq_rt_budget b)
{
	if (b.pkts == 0 && b.bytes == 0)
		return (struct vq_rt_budget){ VQ_RT_WEIGHT_PKTS, VQ_RT_WEIGHT_BYTES };
	if (b.pkts == 0)
		b.pkts = UINT32_MAX;
	else if (b.bytes == 0)
		b.bytes = UINT64_MAX;
	return b;
}

/* Each ring call: the caller's op on its ring, or the vq_dev call on dev. */
#define RT_PICK(r, o, op, fn, farg, own, dev) do {                     \
	(r)->fn = (o)->op ? (o)->op : dev_ops.op;                       \
	(r)->farg = (o)->op ? (own) : (dev);                            \
} while (0)

static int resolve_ring(struct rt_ring *r, const struct vq_rt_queue_config *qc)
{
	const struct vq_rt_ring_ops *o = qc->ops ? qc->ops : &dev_ops;
	void *own = qc->ops ? qc->ring : qc->dev;
	struct vq_dev *dev = qc->dev;

	if (!dev && (!o->has_avail || !o->disable_notify || !o->enable_notify ||
		     !o->should_signal))
		return -EINVAL;
	RT_PICK(r, o, has_avail, has_avail, has_avail_arg, own, dev);
	RT_PICK(r, o, disable_notify, disable_notify, disable_arg, own, dev);
	RT_PICK(r, o, enable_notify, enable_notify, enable_arg, own, dev);
	RT_PICK(r, o, should_signal, should_signal, should_arg, own, dev);
	if (o->signal_owed || dev)
		RT_PICK(r, o, signal_owed, signal_owed, owed_arg, own, dev);
	return 0;
}

int vq_rt_loop_add(struct vq_rt_loop *l, const struct vq_rt_queue_config *qc,
		   struct vq_rt_queue **out)
{
	struct vq_rt_queue *q, **nq;
	int err;

	if (out)
		*out = NULL;
	if (!VQ_RESERVED_ZERO(qc) || (qc->ops && !VQ_RESERVED_ZERO(qc->ops)) ||
	    !qc->process || (!qc->ops && !qc->dev))
		return -EINVAL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	err = resolve_ring(&q->r, qc);
	if (err < 0) {
		free(q);
		return err;
	}
	nq = realloc(l->q, (l->nq + 1) * sizeof(*nq));
	if (!nq) {
		free(q);
		return -ENOMEM;
	}
	l->q = nq;
	q->kind = RT_QUEUE;
	q->loop = l;
	q->kick_fd = qc->kick_fd;
	q->call_fd = qc->call_fd;
	q->process = qc->process;
	q->arg = qc->arg;
	q->budget = rt_budget(qc->budget);
	if (q->kick_fd >= 0) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = q };

		if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, q->kick_fd, &ev) < 0) {
			err = -errno;
			free(q);
			return err;
		}
	}
	/* Start active: buffers may already be there, and a kick sent before
	 * we listened would be lost otherwise. */
	q->active = true;
	l->nactive++;
	q->r.disable_notify(q->r.disable_arg);
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
	if (!q->r.should_signal(q->r.should_arg))
		return 0;
	return queue_call(q);
}

static uint64_t loop_now(struct vq_rt_loop *l)
{
	return l->cfg.now_ns ? l->cfg.now_ns(l->cfg.clock_arg) : vq_rt_now_ns();
}

/* Adaptive window: the queue's buffers came back gap ns after it ran dry,
 * past its window.  A gap the ceiling covers is worth polling across next
 * time (a kick and a wake-up cost more); a longer one is not, and neither
 * is anything shorter while the traffic is that sparse. */
static void poll_adapt(struct vq_rt_queue *q)
{
	uint64_t max = q->loop->cfg.busy_poll_max_ns;
	uint64_t gap = loop_now(q->loop) - q->dry_ns;

	if (gap > max)
		q->poll_ns = 0;
	else if (q->poll_ns < max)
		q->poll_ns = q->poll_ns ? 2 * q->poll_ns : VQ_RT_ADAPT_START_NS;
	if (q->poll_ns > max)
		q->poll_ns = max;
}

/* An idle queue has work: process it, with notifications off again. */
static void queue_wake(struct vq_rt_queue *q)
{
	if (q->active || q->removed)
		return;
	if (q->loop->cfg.busy_poll_max_ns)
		poll_adapt(q);
	q->active = true;
	q->armed = false;
	q->loop->nactive++;
	q->r.disable_notify(q->r.disable_arg);
}

void vq_rt_queue_wake(struct vq_rt_queue *q)
{
	queue_wake(q);
}

static void queue_sleep(struct vq_rt_queue *q)
{
	q->active = false;
	q->armed = false;
	q->loop->nactive--;
}

void vq_rt_queue_remove(struct vq_rt_queue *q)
{
	struct vq_rt_loop *l;

	if (!q || q->removed)
		return;
	l = q->loop;
	/* Out of the set now (an fd already closed is out anyway): no event
	 * can name it once this returns. */
	if (q->kick_fd >= 0)
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, q->kick_fd, NULL);
	if (q->active)
		queue_sleep(q);
	q->removed = true;
	l->q_removed = true;
}

/* Free the removed queues, keeping the others' order: at a round's start,
 * when no turn, busy-poll window or event holds a pointer to one. */
static void queues_reap(struct vq_rt_loop *l)
{
	unsigned i, j = 0;

	for (i = 0; i < l->nq; i++) {
		if (l->q[i]->removed)
			free(l->q[i]);
		else
			l->q[j++] = l->q[i];
	}
	l->nq = j;
	l->q_removed = false;
	if (l->rr >= j)
		l->rr = 0;
}

bool vq_rt_queue_active(const struct vq_rt_queue *q)
{
	return q->active;
}

const struct vq_rt_counters *vq_rt_queue_counters(const struct vq_rt_queue *q)
{
	return &q->cnt;
}

/* Busy-poll probes between two looks at the fds: an fd cannot be read
 * like a ring, only asked about (epoll_wait without sleeping, a few
 * hundred ns), so ask every few probes. */
#define BP_FD_PROBES 8u

/* Ask epoll, without sleeping, whether an fd or an idle queue's kick
 * brought work. */
static bool fds_peek(struct vq_rt_loop *l)
{
	struct epoll_event ev[16];
	int n = epoll_wait(l->epfd, ev, (int)VQ_ARRAY_SIZE(ev), 0);

	/* an error ends the window too: the sleep's epoll_wait reports it */
	return n != 0 && (n < 0 || rt_take_events(l, ev, n, false) != 0);
}

/* Busy-poll probes: this queue's ring, and "anything else to do" = another
 * queue has buffers (for an idle queue that is what its kick would say,
 * read without a syscall), an fd is ready or the loop is asked to stop. */
static bool bp_ready(void *arg)
{
	struct vq_rt_loop *l = arg;

	return rt_has_avail(l->polling);
}

static bool bp_other(void *arg)
{
	struct vq_rt_loop *l = arg;
	unsigned i;

	if (vq_rt_loop_stopped(l) || l->nready || rt_flag_fd_ready(l))
		return true;
	for (i = 0; i < l->nq; i++) {
		struct vq_rt_queue *o = l->q[i];

		if (o != l->polling && !o->removed && rt_has_avail(o))
			return true;
	}
	return rt_fds_asked(l) && ++l->bp_probes % BP_FD_PROBES == 0 && fds_peek(l);
}

/* The loop's clock: the one configured, or NULL for the busy poll's
 * default (vq_rt_now_ns, read every few probes). */
static uint64_t bp_now(void *arg)
{
	struct vq_rt_loop *l = arg;

	return l->cfg.now_ns(l->cfg.clock_arg);
}

/* One turn of an active queue.  Returns chains processed or -errno. */
static int queue_turn(struct vq_rt_loop *l, struct vq_rt_queue *q)
{
	uint64_t bytes = 0, window;
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

	/* Ran dry: one clock reading opens the window and, adaptive, dates
	 * the gap poll_adapt measures. */
	window = l->cfg.busy_poll_max_ns ? q->poll_ns : l->cfg.busy_poll_ns;
	if (window || l->cfg.busy_poll_max_ns)
		q->dry_ns = loop_now(l);
	if (window) {
		struct vq_bp_probe p = {
			.now_ns = l->cfg.now_ns ? bp_now : NULL, .ready = bp_ready,
			.other = bp_other, .arg = l,
		};
		enum vq_bp_result b;

		l->polling = q;
		l->bp_probes = 0;
		b = rt_busy_poll(&p, q->dry_ns, window, l->cfg.busy_poll_yield_ns);
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
	/* Idle, notifications still off until the loop sleeps (idle_look). */
	queue_sleep(q);
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

		if (q->active || q->removed)
			continue;
		if (q->r.signal_owed && q->r.signal_owed(q->r.owed_arg)) {
			int r = queue_call(q);

			if (r < 0)
				return r;
			q->cnt.calls_late++;
		}
		if (rt_has_avail(q)) {
			queue_wake(q);
			q->cnt.kicks_missed++;
		}
	}
	return 0;
}

int rt_take_events(struct vq_rt_loop *l, const struct epoll_event *ev, int n,
		   bool slept)
{
	int i, woke = 0;

	for (i = 0; i < n; i++) {
		struct vq_rt_queue *q;
		int64_t k;

		if (!ev[i].data.ptr) {
			vq_evt_drain(l->wake_fd);
			continue;
		}
		if (*(enum rt_kind *)ev[i].data.ptr == RT_FD) {
			struct vq_rt_fd *h = ev[i].data.ptr;

			h->revents = ev[i].events;
			if (!h->ready) {
				h->ready = true;
				l->nready++;
				woke++;
			}
			continue;
		}
		q = ev[i].data.ptr;
		k = vq_evt_drain(q->kick_fd);
		if (k < 0)
			return (int)k;
		q->cnt.kicks_recv += (uint64_t)k;
		/* A kick whose buffers wake_ready already found (or that
		 * brought none) leaves the queue idle: a syscall on both
		 * sides orders the driver's publish before this read. */
		if (!q->active && rt_has_avail(q)) {
			queue_wake(q);
			woke++;
			if (slept)
				q->cnt.wakeups++;
		}
	}
	return woke;
}

/* Collect kicks and ready fds, sleeping up to timeout_ms. */
static int poll_events(struct vq_rt_loop *l, int timeout_ms)
{
	struct epoll_event ev[16];
	int n, r;

	n = epoll_wait(l->epfd, ev, (int)VQ_ARRAY_SIZE(ev), timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	if (n == 0 && timeout_ms != 0)
		return quiet_recheck(l);
	r = rt_take_events(l, ev, n, timeout_ms != 0);
	return r < 0 ? r : 0;
}

/* While other queues keep the loop busy, a kick sits unread in its
 * eventfd: nothing waits on it, the idle rings themselves are read every
 * round (wake_ready), and vq_rt_loop_stop sets a word the loop reads.  The
 * loop still reads such kicks now and then, so that the counters see them
 * and a sleep does not start with stale ones: once this long has passed,
 * the clock read every KICK_DRAIN_ROUNDS busy rounds.  An epoll_wait costs
 * a microsecond or more in a VM: not one per few rounds on the path of a
 * round trip. */
#define KICK_DRAIN_ROUNDS 64u
#define KICK_DRAIN_NS 10000000ull
/* An fd only epoll can tell about: a ready one waits at most this many
 * busy rounds for its turn. */
#define FD_POLL_ROUNDS 8u

/* Is it time to ask epoll in a busy round? */
static bool busy_ask_due(struct vq_rt_loop *l)
{
	uint64_t now;

	if (rt_fds_asked(l))
		return ++l->undrained >= FD_POLL_ROUNDS;
	if (++l->undrained < KICK_DRAIN_ROUNDS)
		return false;
	l->undrained = 0;
	now = loop_now(l);
	if (now - l->drained_ns < KICK_DRAIN_NS)
		return false;
	l->drained_ns = now;
	return true;
}

/* Activate the idle queues whose rings have buffers, as their kick would:
 * the driver made them available with notifications enabled, so the kick
 * is on its way or already in the eventfd, read later. */
static void wake_ready(struct vq_rt_loop *l)
{
	unsigned i;

	for (i = 0; i < l->nq; i++) {
		struct vq_rt_queue *q = l->q[i];

		if (!q->active && !q->removed && rt_has_avail(q))
			queue_wake(q);
	}
}

/*
 * Nothing active: look at the idle rings not asking for kicks (their
 * driver does not kick), and, before a sleep (arm), have each ask for them
 * and look again (V4): buffers published meanwhile, which the driver may
 * not have kicked for, are processed instead of slept on.  Returns how many
 * queues woke, or -errno.
 */
static int idle_look(struct vq_rt_loop *l, bool arm)
{
	unsigned i;
	int woke = 0, r;

	for (i = 0; i < l->nq; i++) {
		struct vq_rt_queue *q = l->q[i];

		if (q->active || q->armed || q->removed)
			continue;
		if (rt_has_avail(q)) {
			queue_wake(q);
			woke++;
			continue;
		}
		if (!arm)
			continue;
		r = q->r.enable_notify(q->r.enable_arg);
		if (r < 0)
			return r;
		if (r > 0) {
			queue_wake(q);
			woke++;
		} else {
			q->armed = true;
		}
	}
	return woke;
}

/* Every active queue's turn, the first one rotating. */
static int queues_round(struct vq_rt_loop *l)
{
	unsigned k;
	int done = 0, r;

	for (k = 0; k < l->nq; k++) {
		struct vq_rt_queue *q = l->q[(l->rr + k) % l->nq];

		if (!q->active)
			continue;
		r = queue_turn(l, q);
		if (r < 0)
			return r;
		done += r;
	}
	if (l->nq)
		l->rr = (l->rr + 1) % l->nq;
	return done;
}

int vq_rt_loop_run_once(struct vq_rt_loop *l, int timeout_ms)
{
	int done, r;

	if (l->q_removed)
		queues_reap(l);
	done = queues_round(l);
	if (done < 0)
		return done;
	if (l->nfds) {
		r = rt_fds_round(l);
		if (r < 0)
			return r;
		done += r;
	}
	if (vq_rt_loop_stopped(l)) {
		timeout_ms = 0;
	} else if (l->nactive || l->nready) {
		/* Busy: nothing sleeps, and epoll has news only of idle
		 * queues and of fds.  An epoll_wait per round would cost a
		 * syscall per burst of the busy queues: read the idle rings
		 * instead, and ask epoll only every few rounds. */
		rt_flag_fd_ready(l);
		if (l->nactive == l->nq && !rt_fds_asked(l))
			return done;
		wake_ready(l);
		if (!busy_ask_due(l))
			return done;
		timeout_ms = 0;
	} else {
		r = idle_look(l, timeout_ms != 0);
		if (r != 0)
			return r < 0 ? r : done;
		if (timeout_ms < 0 || timeout_ms > VQ_RT_QUIET_MS)
			timeout_ms = VQ_RT_QUIET_MS;
	}
	l->undrained = 0;
	r = poll_events(l, timeout_ms);
	return r < 0 ? r : done;
}

int vq_rt_loop_run(struct vq_rt_loop *l)
{
	while (!vq_rt_loop_stopped(l)) {
		int r = vq_rt_loop_run_once(l, -1);

		if (r < 0)
			return r;
	}
	return 0;
}
