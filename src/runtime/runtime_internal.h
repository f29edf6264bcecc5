/* SPDX-License-Identifier: MIT */
/* Private to the runtime layer. */
#ifndef VIRTQ_RUNTIME_INTERNAL_H
#define VIRTQ_RUNTIME_INTERNAL_H

#include <sys/epoll.h>

#include <virtq/runtime.h>

#include "util.h"

/* Tell the CPU we are spinning (frees the sibling hyperthread, saves power
 * and avoids the memory-order machine clear on loop exit). */
static inline void vq_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* ---- the device-side loop (loop.c) and its fds (fd.c) ---- */

/* What an epoll event of the loop points at (each struct's first field);
 * NULL is the loop's own wakeup eventfd. */
enum rt_kind { RT_QUEUE = 1, RT_FD };

/* A ring call resolved once at vq_rt_loop_add: the caller's op on its
 * ring, or the vq_dev call on the queue's dev. */
struct rt_ring {
	bool (*has_avail)(void *);
	void *has_avail_arg;
	void (*disable_notify)(void *);
	void *disable_arg;
	int (*enable_notify)(void *);
	void *enable_arg;
	bool (*should_signal)(void *);
	void *should_arg;
	bool (*signal_owed)(void *);    /* NULL: no late call */
	void *owed_arg;
};

struct vq_rt_queue {
	enum rt_kind kind;
	struct vq_rt_loop *loop;
	struct rt_ring r;
	int kick_fd;
	int call_fd;
	vq_rt_process_fn process;
	void *arg;
	struct vq_rt_budget budget;
	bool active;
	bool armed;                     /* idle, notifications enabled */
	bool removed;                   /* vq_rt_queue_remove: freed at the
					 * next round's start */
	uint64_t poll_ns;               /* adaptive: this queue's window */
	uint64_t dry_ns;                /* the loop's clock when the queue
					 * last ran dry (with a window, or
					 * adaptive) */
	struct vq_rt_counters cnt;
};

struct vq_rt_fd {
	enum rt_kind kind;
	struct vq_rt_loop *loop;
	int fd;
	uint32_t events;                /* what epoll watches; 0: paused */
	uint32_t revents;               /* while ready: what epoll said */
	bool ready;                     /* has a turn coming */
	bool removed;                   /* freed when the round ends */
	vq_rt_fd_fn fn;
	void *arg;
	struct vq_rt_budget budget;
};

struct vq_rt_loop {
	struct vq_rt_loop_config cfg;
	int epfd;
	int wake_fd;                    /* vq_rt_loop_stop's wakeup */
	int stop;                       /* atomic */
	struct vq_rt_queue **q;
	unsigned nq;
	unsigned nactive;               /* queues active */
	unsigned rr;                    /* which queue goes first this round */
	unsigned undrained;             /* busy rounds since epoll was asked */
	struct vq_rt_queue *polling;    /* the queue in its busy-poll window */
	unsigned bp_probes;             /* its window's probes so far */
	struct vq_rt_fd **fds;          /* removed ones until the round ends */
	bool q_removed;                 /* some queues wait to be freed */
	unsigned nfds, fds_cap;
	unsigned fd_rr;                 /* which fd goes first this round */
	unsigned nready;                /* fds with a turn coming */
	unsigned nwatched;              /* fds epoll watches (not paused) */
	bool fds_removed;               /* some wait to be freed */
	struct vq_rt_fd *flag_fd;       /* rt_fd_flagged's, or NULL */
	const int *flag;                /* its word */
	uint64_t drained_ns;            /* the loop's clock when a busy round
					 * last read the idle queues' kicks */
};

/* The watched fds only epoll can tell about (not the flagged one). */
static inline unsigned rt_fds_asked(const struct vq_rt_loop *l)
{
	return l->nwatched - (l->flag_fd && l->flag_fd->events == EPOLLIN ? 1u : 0u);
}

static inline bool rt_has_avail(const struct vq_rt_queue *q)
{
	return q->r.has_avail(q->r.has_avail_arg);
}

/* The budget a zero config means (the vhost weights), or the one given
 * with its zero half unbounded. */
VQ_INTERNAL struct vq_rt_budget rt_budget(struct vq_rt_budget b);
/* Sort the events of one epoll_wait: kicks wake idle queues, ready fds get
 * a turn.  Returns how many queues or fds got work they did not have, or
 * -errno (a kick eventfd that cannot be read). */
VQ_INTERNAL int rt_take_events(struct vq_rt_loop *l, const struct epoll_event *ev,
			       int n, bool slept);
/* Every ready fd's turn; then free the removed ones.  Work done or -errno. */
VQ_INTERNAL int rt_fds_round(struct vq_rt_loop *l);
VQ_INTERNAL void rt_fds_free(struct vq_rt_loop *l);
/*
 * h, watched for EPOLLIN alone, is written only after *flag became nonzero (the
 * framework's mailbox: a poster sets its pending word, then writes the
 * eventfd).  While the loop is busy it reads the word instead of asking
 * epoll about h: a loop whose only fd is h busy polls without a syscall.
 * One such fd per loop (the last call's); its sleep still waits on h.
 */
VQ_INTERNAL void rt_fd_flagged(struct vq_rt_fd *h, const int *flag);

/* Has the flagged fd's word been set?  Then the fd gets its turn, as if
 * epoll had said EPOLLIN.  Inline: a busy poll asks at every probe. */
static inline bool rt_flag_fd_ready(struct vq_rt_loop *l)
{
	struct vq_rt_fd *h = l->flag_fd;

	if (!h || h->events != EPOLLIN || !__atomic_load_n(l->flag, __ATOMIC_ACQUIRE))
		return false;
	if (!h->ready) {
		h->ready = true;
		h->revents = EPOLLIN;
		l->nready++;
	}
	return true;
}
/* vq_rt_busy_poll's window (not 0) from start, a reading of p's clock the
 * caller took, offering the CPU at every probe once yield_after_ns of it
 * passed with nothing (0: never; vq_rt_loop_config). */
VQ_INTERNAL int rt_busy_poll(const struct vq_bp_probe *p, uint64_t start,
			     uint64_t window_ns, uint64_t yield_after_ns);

#endif
