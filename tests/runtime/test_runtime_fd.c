// SPDX-License-Identifier: MIT
/*
 * Other fds on the runtime loop (vq_rt_loop_add_fd): a callback when epoll
 * says the fd is ready, turns within a budget shared fairly with the
 * queues, pausing and resuming, busy polling that sees an fd without a
 * sleep, removal from inside callbacks, and a queue woken by an fd's
 * callback (vq_rt_queue_wake).  Pipes for fds, fake rings for queues.
 */
#include <virtq/runtime.h>

#include <fcntl.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "fake_ring.h"
#include "runtime_internal.h"

/* ---- an fd and what its callback saw ---- */
struct ffd {
	int rd, wr;                     /* a non-blocking pipe */
	struct vq_rt_fd *h;
	unsigned calls;
	uint32_t revents;
	unsigned long long units;       /* work done in all */
	/* the callback's behaviour */
	unsigned backlog;               /* units it holds beyond the pipe */
	bool pause_when_called;         /* as a consumer without room */
	struct vq_rt_fd *remove_other;  /* removes this one (and itself) */
	bool remove_self;
	struct vq_rt_queue *wake;       /* wakes this queue */
	char name;
	char *log;
};

static void ffd_open(struct ffd *f, char name)
{
	int p[2];

	memset(f, 0, sizeof(*f));
	CHECK_EQ(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	f->rd = p[0];
	f->wr = p[1];
	f->name = name;
}

static void ffd_close(struct ffd *f)
{
	if (f->rd >= 0)
		close(f->rd);
	if (f->wr >= 0)
		close(f->wr);
}

static void ffd_put(struct ffd *f, unsigned n)
{
	char b[256] = { 0 };

	CHECK(n <= sizeof(b));
	CHECK_EQ(write(f->wr, b, n), n);
}

/* Take what the pipe holds (a byte a unit) into the backlog, then do up
 * to the budget of the backlog. */
static int ffd_cb(struct vq_rt_fd *h, void *arg, uint32_t revents,
		  const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct ffd *f = arg;
	char buf[256];
	ssize_t n;
	unsigned done;

	CHECK(h == f->h);
	f->calls++;
	f->revents = revents;
	log_turn(f->log, f->name);
	if (f->wake)
		vq_rt_queue_wake(f->wake);
	if (f->remove_other)
		vq_rt_fd_remove(f->remove_other);
	if (f->remove_self) {
		vq_rt_fd_remove(h);
		return 0;
	}
	if (f->pause_when_called) {
		CHECK_EQ(vq_rt_fd_set_events(h, 0), 0);
		return 0;
	}
	while ((n = read(f->rd, buf, sizeof(buf))) > 0)
		f->backlog += (unsigned)n;
	done = f->backlog < b->pkts ? f->backlog : b->pkts;
	f->backlog -= done;
	f->units += done;
	*bytes += done;
	return (int)done;
}

static void ffd_add(struct vq_rt_loop *l, struct ffd *f, uint32_t events)
{
	CHECK_EQ(vq_rt_loop_add_fd(l, f->rd, events, ffd_cb, f, &f->h), 0);
	CHECK(f->h != NULL);
}

/* A loop with default config and the fd f (a new pipe) on it, EPOLLIN. */
static struct vq_rt_loop *loop_with_fd(struct ffd *f)
{
	struct vq_rt_loop_config lc = { 0 };
	struct vq_rt_loop *l;

	ffd_open(f, 'f');
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	ffd_add(l, f, EPOLLIN);
	return l;
}

static void loop_end(struct vq_rt_loop *l, struct ffd *f)
{
	vq_rt_loop_free(l);
	ffd_close(f);
}

/* Let epoll say the fd is ready (the sleep ends at once), then run the
 * round that gives it its turn: the work done. */
static int ready_then_round(struct vq_rt_loop *l)
{
	CHECK_EQ(vq_rt_loop_run_once(l, 1000), 0);
	return vq_rt_loop_run_once(l, 0);
}

static uint64_t ms_now(void)
{
	return vq_rt_now_ns() / 1000000;
}

/* ---- cases ---- */

/* Epoll readiness (level-triggered): nothing to read, no call; data, one
 * call with EPOLLIN, and none after the callback drained it. */
static void fd_callback_runs_when_readable(void)
{
	struct ffd f;
	struct vq_rt_loop *l = loop_with_fd(&f);

	CHECK_EQ(vq_rt_fd_events(f.h), EPOLLIN);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 10), 0);       /* quiet: no call */
	CHECK_EQ(f.calls, 0);
	ffd_put(&f, 5);
	CHECK_EQ(vq_rt_loop_run_once(l, 1000), 0);     /* epoll says ready */
	CHECK_EQ(f.calls, 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 5);        /* its turn */
	CHECK_EQ(f.calls, 1);
	CHECK(f.revents & EPOLLIN);
	CHECK_EQ(f.units, 5);
	CHECK_EQ(vq_rt_loop_run_once(l, 10), 0);       /* drained */
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 0);
	CHECK_EQ(f.calls, 1);
	loop_end(l, &f);
}

/*
 * A turn that spends its budget (the vhost weight, 256 units) keeps the fd
 * ready: the next round calls it again although epoll has nothing to say
 * (the pipe is empty, the callback holds the rest).  A turn that leaves
 * budget over ends its turns until epoll reports it again.
 */
static void fd_budget_spent_gets_next_round(void)
{
	struct ffd f;
	struct vq_rt_loop *l = loop_with_fd(&f);

	f.backlog = 500;
	ffd_put(&f, 100);
	CHECK_EQ(ready_then_round(l), 256);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 256);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 88);
	CHECK_EQ(f.calls, 3);
	CHECK_EQ(vq_rt_loop_run_once(l, 10), 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 0);
	CHECK_EQ(f.calls, 3);
	CHECK_EQ(f.units, 600);
	loop_end(l, &f);
}

/*
 * A consumer without room pauses its fd: the data waits in the pipe and no
 * turn comes, not even for a hang-up (EPOLLHUP is reported whatever one
 * asks for, so paused means out of the epoll set).  Resumed, the fd is
 * ready again at once and nothing was lost.
 */
static void fd_pause_and_resume(void)
{
	struct ffd f;
	struct vq_rt_loop *l = loop_with_fd(&f);

	ffd_put(&f, 7);
	f.pause_when_called = true;
	CHECK_EQ(ready_then_round(l), 0);
	CHECK_EQ(f.calls, 1);
	CHECK_EQ(vq_rt_fd_events(f.h), 0);
	/* paused: neither data nor a hang-up gives it a turn */
	close(f.wr);
	f.wr = -1;
	CHECK_EQ(vq_rt_loop_run_once(l, 10), 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 0);
	CHECK_EQ(f.calls, 1);
	/* room again */
	f.pause_when_called = false;
	CHECK_EQ(vq_rt_fd_set_events(f.h, EPOLLIN), 0);
	CHECK_EQ(ready_then_round(l), 7);
	CHECK_EQ(f.calls, 2);
	CHECK(f.revents & EPOLLIN);
	CHECK(f.revents & EPOLLHUP);
	/* a hang-up stays: the callback takes the fd away */
	f.remove_self = true;
	CHECK_EQ(ready_then_round(l), 0);
	CHECK_EQ(f.calls, 3);
	CHECK_EQ(vq_rt_loop_run_once(l, 10), 0);
	CHECK_EQ(f.calls, 3);
	loop_end(l, &f);
}

/* What add and set refuse: readiness the loop cannot keep (edge-triggered,
 * one-shot, exclusive), no callback, no fd, an fd twice, a regular file. */
static void fd_add_refuses_what_it_cannot_watch(void)
{
	struct vq_rt_fd *h = (void *)1;
	struct ffd f;
	struct vq_rt_loop *l = loop_with_fd(&f);
	int file;
	char path[] = "/tmp/vq-fd-XXXXXX";

	CHECK_EQ(vq_rt_loop_add_fd(l, f.rd, EPOLLIN, ffd_cb, &f, &h), -EEXIST);
	vq_rt_fd_remove(f.h);
	CHECK_EQ(vq_rt_loop_add_fd(l, f.rd, EPOLLIN | EPOLLET, ffd_cb, &f, &h), -EINVAL);
	CHECK(h == NULL);
	CHECK_EQ(vq_rt_loop_add_fd(l, f.rd, EPOLLIN | EPOLLONESHOT, ffd_cb, &f, &h), -EINVAL);
	CHECK_EQ(vq_rt_loop_add_fd(l, f.rd, EPOLLIN | EPOLLEXCLUSIVE, ffd_cb, &f, &h), -EINVAL);
	CHECK_EQ(vq_rt_loop_add_fd(l, f.rd, EPOLLIN, NULL, &f, &h), -EINVAL);
	CHECK_EQ(vq_rt_loop_add_fd(l, -1, EPOLLIN, ffd_cb, &f, &h), -EINVAL);
	ffd_add(l, &f, EPOLLIN);        /* again, once removed */
	CHECK_EQ(vq_rt_fd_set_events(f.h, EPOLLIN | EPOLLET), -EINVAL);
	CHECK_EQ(vq_rt_fd_events(f.h), EPOLLIN);
	file = mkstemp(path);
	CHECK(file >= 0);
	unlink(path);
	CHECK_EQ(vq_rt_loop_add_fd(l, file, EPOLLIN, ffd_cb, &f, &h), -EPERM);
	close(file);
	/* the refusals left the loop as it was */
	ffd_put(&f, 3);
	CHECK_EQ(ready_then_round(l), 3);
	loop_end(l, &f);
}

/*
 * Fairness under a flood: a queue that always has work and an fd that
 * always has more than its budget each get one turn a round, in rotating
 * order, neither more than the weight.
 */
static void fd_and_queue_share_rounds_under_flood(void)
{
	struct vq_rt_loop_config lc = { 0 };
	struct fring a = { .avail = ~0ull, .name = 'a' };
	struct vq_rt_loop *l;
	struct ffd f, g;
	char log[64] = "";
	int i;

	ffd_open(&f, 'f');
	ffd_open(&g, 'g');
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	a.log = f.log = g.log = log;
	add_fake(l, &a, -1);
	ffd_add(l, &f, EPOLLIN);
	ffd_add(l, &g, EPOLLIN);
	f.backlog = g.backlog = 1000000;
	ffd_put(&f, 1);
	ffd_put(&g, 1);
	/* the queue's turns, with epoll asked every few busy rounds: a
	 * ready fd waits a few busy rounds at most */
	for (i = 0; i < 64 && !f.calls; i++)
		CHECK(vq_rt_loop_run_once(l, 0) >= 256);
	CHECK(i >= 2 && i <= 9);
	CHECK_EQ(f.calls, 1);
	CHECK_EQ(g.calls, 1);
	memset(log, 0, sizeof(log));
	for (i = 0; i < 10; i++)
		CHECK_EQ(vq_rt_loop_run_once(l, 0), 3 * 256);
	CHECK_EQ(f.calls, 11);
	CHECK_EQ(g.calls, 11);
	/* each round: the queue, then both fds, the first fd rotating */
	CHECK_EQ(strlen(log), 30);
	for (i = 0; i < 30; i += 3) {
		CHECK_EQ(log[i], 'a');
		CHECK((log[i + 1] == 'f' && log[i + 2] == 'g') ||
		      (log[i + 1] == 'g' && log[i + 2] == 'f'));
		if (i)
			CHECK(log[i + 1] != log[i - 2]);
	}
	CHECK_EQ(a.enables, 0);
	vq_rt_loop_free(l);
	ffd_close(&f);
	ffd_close(&g);
}

/* ---- a clock that makes data arrive at the Nth reading ---- */
struct arrival {
	uint64_t t;
	unsigned reads;
	unsigned at;                    /* write the pipe at this reading */
	struct ffd *f;
};

static uint64_t arrival_now(void *arg)
{
	struct arrival *a = arg;

	if (++a->reads == a->at)
		ffd_put(a->f, 1);
	return a->t += 100;
}

/*
 * Busy polling covers fds (issue 26: "busy polling on the host sockets as
 * on the rings"): data written to the fd while a queue's window is open
 * ends the window early (the loop asks epoll without sleeping every few
 * probes) and the fd's turn comes in the same round.  The queue never
 * enabled notifications: the loop did not go to sleep.
 */
static void busy_poll_sees_fd_without_sleeping(void)
{
	struct arrival clk = { .at = 5 };
	struct vq_rt_loop_config lc = { .busy_poll_ns = 1000000000, .now_ns = arrival_now,
					.clock_arg = &clk };
	struct fring a = { .avail = 1 };
	struct vq_rt_queue *q;
	struct vq_rt_loop *l;
	struct ffd f;

	ffd_open(&f, 'f');
	clk.f = &f;
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	q = add_fake(l, &a, -1);
	ffd_add(l, &f, EPOLLIN);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1 + 1);     /* a's chain, f's byte */
	CHECK_EQ(f.calls, 1);
	CHECK_EQ(vq_rt_queue_counters(q)->bp_misses, 1);
	CHECK_EQ(vq_rt_queue_counters(q)->bp_hits, 0);
	CHECK_EQ(a.enables, 0);
	CHECK(vq_rt_queue_active(q));
	/* a window of 10^7 readings ended within a few probes of the data */
	CHECK(clk.reads >= 5 && clk.reads <= 5 + 8 + 1);
	vq_rt_loop_free(l);
	ffd_close(&f);
}

/* A clock that sets a word at one of its readings. */
struct flagclk {
	uint64_t t;
	unsigned reads;
	unsigned at;                    /* set *word at this reading */
	int *word;
};

static uint64_t flag_now(void *arg)
{
	struct flagclk *c = arg;

	if (++c->reads == c->at)
		__atomic_store_n(c->word, 1, __ATOMIC_RELEASE);
	return c->t += 100;
}

/*
 * A flagged fd (rt_fd_flagged: the framework's mailbox, whose poster sets
 * a word before it writes the eventfd) is not asked about while the loop
 * busy polls, its word is read at every probe instead: written with its
 * word clear, it leaves a window to its end (asked, epoll would have ended
 * it within 8 probes); its word set ends the window at the next probe, and
 * the fd has its turn in the same round.  A busy poll with no syscall.
 */
static void flagged_fd_is_a_word_while_busy(void)
{
	int word = 0;
	struct flagclk clk = { .word = &word };
	struct vq_rt_loop_config lc = { .busy_poll_ns = 2000, .now_ns = flag_now,
					.clock_arg = &clk };
	struct fring a = { .avail = 1 };
	struct vq_rt_queue *q;
	struct vq_rt_loop *l;
	unsigned reads;
	struct ffd f;

	ffd_open(&f, 'f');
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	q = add_fake(l, &a, -1);
	ffd_add(l, &f, EPOLLIN);
	rt_fd_flagged(f.h, &word);

	/* one reading opens the window, one follows each of its 20 probes */
	ffd_put(&f, 1);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);
	CHECK_EQ(clk.reads, 21);
	CHECK_EQ(f.calls, 0);
	CHECK_EQ(vq_rt_queue_counters(q)->bp_misses, 1);
	/* idle, the loop asked epoll: the byte's turn comes next round */
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);
	CHECK_EQ(f.calls, 1);

	/* the word set at the window's third reading */
	a.avail = 1;
	while (!vq_rt_queue_active(q))
		CHECK_EQ(vq_rt_loop_run_once(l, 0), 0);
	reads = clk.reads;
	clk.at = reads + 3;
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);
	CHECK_EQ(clk.reads, reads + 3);
	CHECK_EQ(f.calls, 2);
	CHECK_EQ(f.revents, EPOLLIN);
	CHECK_EQ(vq_rt_queue_counters(q)->bp_misses, 2);
	CHECK(vq_rt_queue_active(q));   /* ended by other work, not dry */
	vq_rt_loop_free(l);
	ffd_close(&f);
}

/*
 * Removal from inside callbacks: an fd's callback removes another ready fd
 * (which then gets no turn) and itself; a queue's turn removes a third.
 * The handles are freed when the round ends (ASan checks the use and the
 * leak), and the fds can be added again.
 */
static int q_remove_process(struct vq_rt_queue *q, void *arg,
			    const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct vq_rt_fd **h = arg;

	if (*h) {
		vq_rt_fd_remove(*h);
		*h = NULL;
	}
	return 0;
}

static void fd_removed_during_callbacks(void)
{
	struct vq_rt_loop_config lc = { 0 };
	struct vq_rt_queue_config qc = {
		.ops = &fr_ops, .kick_fd = -1, .call_fd = -1,
		.process = q_remove_process,
	};
	struct fring idle = { 0 };
	struct vq_rt_fd *third;
	struct vq_rt_loop *l;
	struct ffd f, g, h;
	char log[64] = "";

	ffd_open(&f, 'f');
	ffd_open(&g, 'g');
	ffd_open(&h, 'h');
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	ffd_add(l, &f, EPOLLIN);
	ffd_add(l, &g, EPOLLIN);
	ffd_add(l, &h, EPOLLIN);
	f.log = g.log = h.log = log;
	third = h.h;
	qc.ring = &idle;
	qc.arg = &third;
	ffd_put(&f, 1);
	ffd_put(&g, 1);
	ffd_put(&h, 1);
	CHECK_EQ(vq_rt_loop_run_once(l, 1000), 0);      /* all three ready */
	f.remove_other = g.h;
	f.remove_self = true;
	g.remove_other = f.h;   /* would be a use after free if g ran */
	CHECK_EQ(vq_rt_loop_add(l, &qc, NULL), 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 0);
	CHECK(third == NULL);
	CHECK(strcmp(log, "f") == 0);
	CHECK_EQ(g.calls + h.calls, 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 10), 0);
	CHECK(strcmp(log, "f") == 0);
	/* freed and out of the epoll set: the same fds come back */
	f.remove_other = g.remove_other = NULL;
	f.remove_self = false;
	ffd_add(l, &f, EPOLLIN);
	ffd_add(l, &g, EPOLLIN);
	CHECK_EQ(vq_rt_loop_run_once(l, 1000), 0);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 2);
	CHECK_EQ(f.calls, 2);
	CHECK_EQ(g.calls, 1);
	vq_rt_loop_free(l);
	ffd_close(&f);
	ffd_close(&g);
	ffd_close(&h);
}

/*
 * An fd's callback gives an idle queue work its ring does not show (host
 * data for a receive ring): vq_rt_queue_wake.  The loop must not go to
 * sleep with the queue woken, and the queue's next turn takes the work.
 */
static void fd_callback_wakes_idle_queue(void)
{
	struct vq_rt_loop_config lc = { 0 };
	struct fring a = { .avail = 0 };
	struct vq_rt_queue *q;
	struct vq_rt_loop *l;
	struct ffd f;
	uint64_t t0;

	ffd_open(&f, 'f');
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	q = add_fake(l, &a, -1);
	ffd_add(l, &f, EPOLLIN);
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 0);
	CHECK(!vq_rt_queue_active(q));
	f.wake = q;
	ffd_put(&f, 1);
	CHECK_EQ(vq_rt_loop_run_once(l, 1000), 0);      /* f ready */
	CHECK_EQ(a.enables, 1);                         /* a slept on its kick */
	a.woken_work = true;
	t0 = ms_now();
	CHECK_EQ(vq_rt_loop_run_once(l, 5000), 1);      /* f's turn wakes a */
	CHECK(ms_now() - t0 < 2000);                    /* and did not sleep */
	CHECK(vq_rt_queue_active(q));
	CHECK_EQ(vq_rt_loop_run_once(l, 0), 1);         /* a's turn */
	CHECK_EQ(a.turns, 2);
	CHECK(!vq_rt_queue_active(q));
	CHECK_EQ(a.enables, 1);
	vq_rt_loop_free(l);
	ffd_close(&f);
}

/* The loop sleeps at most VQ_RT_QUIET_MS whatever the timeout, so the quiet
 * look comes even to a caller that asks to sleep until something happens. */
static void loop_sleep_bounded_by_quiet_period(void)
{
	struct vq_rt_loop_config lc = { 0 };
	struct vq_rt_loop *l;
	uint64_t t0;

	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);
	t0 = ms_now();
	CHECK_EQ(vq_rt_loop_run_once(l, -1), 0);
	CHECK(ms_now() - t0 >= VQ_RT_QUIET_MS - 10);
	CHECK(ms_now() - t0 < 10 * VQ_RT_QUIET_MS);
	vq_rt_loop_free(l);
}

int main(void)
{
	RUN(fd_callback_runs_when_readable);
	RUN(fd_budget_spent_gets_next_round);
	RUN(fd_pause_and_resume);
	RUN(fd_add_refuses_what_it_cannot_watch);
	RUN(fd_and_queue_share_rounds_under_flood);
	RUN(busy_poll_sees_fd_without_sleeping);
	RUN(flagged_fd_is_a_word_while_busy);
	RUN(fd_removed_during_callbacks);
	RUN(fd_callback_wakes_idle_queue);
	RUN(loop_sleep_bounded_by_quiet_period);
	return 0;
}
