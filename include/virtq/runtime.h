/* SPDX-License-Identifier: MIT */
/*
 * virtq/runtime.h - one event loop for the tools: eventfd notifications, a
 * device-side poll loop over one or more queues with per-queue work budgets
 * and an optional busy-poll window, the driver-side mirror (poll for used
 * buffers or sleep on the call eventfd), and per-queue counters.
 *
 * The ring layer has no loop of its own; this is one loop built on its
 * public calls (vq_dev_enable_notify, vq_dev_should_signal, vq_drv_kick_prepare,
 * vq_drv_enable_cb ...).  A notification is sent only when the ring's
 * suppression logic says so, and every enable is followed by the re-check
 * the ring returns, so a buffer added while notifications were being enabled
 * is never lost.
 *
 * The parts that decide (the busy-poll window, the budget) are small
 * functions with an injectable clock and probes, so they can be tested
 * without threads or timing.
 */
#ifndef VIRTQ_RUNTIME_H
#define VIRTQ_RUNTIME_H

#include <stdbool.h>
#include <stdint.h>

#include <virtq/ring.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Notifications over eventfd                                          */
/* ------------------------------------------------------------------ */

/* A non-blocking, close-on-exec eventfd: the fd, or -errno. */
int vq_evt_new(void);
/* Notify: add 1 to the counter.  0 or -errno.  A counter at its maximum
 * is a notification pending (0); on an fd without O_NONBLOCK that write
 * would wait. */
int vq_evt_signal(int fd);
/* Consume pending notifications without blocking, even on an fd without
 * O_NONBLOCK (RWF_NOWAIT, where the kernel has it): returns how many were
 * coalesced in the counter (0 if none), or -errno. */
int64_t vq_evt_drain(int fd);
/* Wait up to timeout_ms (-1: forever) for fd to become readable, then drain
 * it.  Returns the drained count (> 0), 0 on timeout, or -errno. */
int64_t vq_evt_wait(int fd, int timeout_ms);

/* ------------------------------------------------------------------ */
/* Counters: the "exits" of a queue, reported per packet by the tools  */
/* ------------------------------------------------------------------ */

/* New counters are appended at the end.  The calls below that add to a
 * caller's struct name the fields they touch: a later version's calls
 * never write a field an older caller's struct lacks. */

struct vq_rt_counters {
	uint64_t packets;       /* chains processed (device) or completed (driver) */
	uint64_t bytes;
	uint64_t kicks_sent;    /* driver -> device eventfd writes */
	uint64_t kicks_recv;    /* kicks the device consumed (coalesced ones count) */
	uint64_t calls_sent;    /* device -> driver eventfd writes */
	uint64_t calls_recv;
	uint64_t wakeups;       /* times the thread slept and was woken */
	uint64_t kicks_missed;  /* idle rings found with buffers after a quiet
				 * period: kicks the driver owed and never sent
				 * (or, rarely, one sent just then) */
	uint64_t calls_late;    /* calls sent on that look: the driver asked for
				 * one we did not see in time (vq_dev_signal_owed) */
	uint64_t bp_hits;       /* busy-poll windows that found work */
	uint64_t bp_misses;     /* windows that ended without it */
};

/* Inline: sum is the caller's, and only the caller's build knows which
 * fields its struct has (a newer library's counters may have more). */
static inline void vq_rt_counters_add(struct vq_rt_counters *sum,
				      const struct vq_rt_counters *c)
{
	sum->packets += c->packets;
	sum->bytes += c->bytes;
	sum->kicks_sent += c->kicks_sent;
	sum->kicks_recv += c->kicks_recv;
	sum->calls_sent += c->calls_sent;
	sum->calls_recv += c->calls_recv;
	sum->wakeups += c->wakeups;
	sum->kicks_missed += c->kicks_missed;
	sum->calls_late += c->calls_late;
	sum->bp_hits += c->bp_hits;
	sum->bp_misses += c->bp_misses;
}

/* CLOCK_MONOTONIC in nanoseconds (the default clock). */
uint64_t vq_rt_now_ns(void);

/* ------------------------------------------------------------------ */
/* Work budget (vhost's weights)                                       */
/* ------------------------------------------------------------------ */

/* vhost-net's VHOST_NET_WEIGHT and VHOST_NET_PKT_WEIGHT: the most one queue
 * may do in one turn before the others get theirs. */
#define VQ_RT_WEIGHT_BYTES 0x80000u
#define VQ_RT_WEIGHT_PKTS  256u

struct vq_rt_budget {
	uint32_t pkts;
	uint64_t bytes;
};

/* Has a turn that did pkts packets and bytes bytes used up its budget?
 * (vhost_exceeds_weight: either limit reached ends the turn.) */
static inline bool vq_rt_budget_spent(const struct vq_rt_budget *b,
				      uint64_t pkts, uint64_t bytes)
{
	return pkts >= b->pkts || bytes >= b->bytes;
}

/* ------------------------------------------------------------------ */
/* The busy-poll window                                                */
/* ------------------------------------------------------------------ */

/* An adaptive window's first size (vq_rt_loop_config.busy_poll_max_ns). */
#define VQ_RT_ADAPT_START_NS 4000u

enum vq_bp_result {
	VQ_BP_TIMEOUT = 0,      /* the window reached its deadline */
	VQ_BP_HIT = 1,          /* this queue has work */
	VQ_BP_OTHER = 2,        /* something else needs the thread: stop early */
};

struct vq_bp_probe {
	uint64_t (*now_ns)(void *arg);  /* NULL: vq_rt_now_ns */
	bool (*ready)(void *arg);       /* this queue has work (has_avail/has_used) */
	bool (*other)(void *arg);       /* other work pending; NULL: never */
	void *arg;
	/* Zero: room for fields a later version adds (0 = today's
	 * behaviour); vq_rt_busy_poll refuses others with -EINVAL. */
	void * reserved[4];
};

/*
 * Poll p->ready for up to window_ns (vhost-net busyloop_timeout): returns
 * VQ_BP_HIT as soon as it is true, VQ_BP_OTHER as soon as p->other is, and
 * VQ_BP_TIMEOUT once the clock reaches start + window_ns.  The probes are
 * checked before the clock, so a window always probes at least once; a
 * window of 0 returns VQ_BP_TIMEOUT without probing (no busy polling).
 * A p->now_ns given is read after every probe; the default clock only
 * every few probes (a reading costs more than a probe), so the window may
 * end those few probes late.
 * -EINVAL: a reserved word is not zero.
 */
int vq_rt_busy_poll(const struct vq_bp_probe *p, uint64_t window_ns);

/* ------------------------------------------------------------------ */
/* Device side: the poll loop                                          */
/* ------------------------------------------------------------------ */

struct vq_rt_loop;
struct vq_rt_queue;

/*
 * Process one turn of a queue: pop, do the work, fill and flush, within
 * budget b.  Return the number of chains processed (>= 0) and add the bytes
 * to *bytes, or -errno to stop the loop.  Returning fewer chains than the
 * budget allows and less than its bytes means "the queue ran dry".  Call
 * vq_rt_queue_signal() after a flush to notify the driver mid-turn; the
 * loop also does it once at the end of every turn that processed chains.
 */
typedef int (*vq_rt_process_fn)(struct vq_rt_queue *q, void *arg,
				 const struct vq_rt_budget *b, uint64_t *bytes);

/* How the loop talks to a queue's ring.  NULL ops in the config: the vq_dev
 * calls on dev; tests may put a fake here.  With ops and dev both set, a
 * NULL op is dev's vq_dev call (a device overrides only what it must, e.g.
 * has_avail for a ring it has nothing to put in yet); with ops alone, only
 * signal_owed may be NULL (then the quiet look sends no late call). */
struct vq_rt_ring_ops {
	bool (*has_avail)(void *ring);
	void (*disable_notify)(void *ring);
	int  (*enable_notify)(void *ring);
	bool (*should_signal)(void *ring);
	bool (*signal_owed)(void *ring);        /* optional: vq_dev_signal_owed */
	/* Zero: room for fields a later version adds (0 = today's
	 * behaviour); vq_rt_loop_add refuses others with -EINVAL. */
	void * reserved[4];
};

struct vq_rt_queue_config {
	struct vq_dev *dev;             /* the ring (with ops: for NULL ops) */
	const struct vq_rt_ring_ops *ops;
	void *ring;                     /* passed to ops (with ops set) */
	int kick_fd;                    /* eventfd the driver kicks; -1: none */
	int call_fd;                    /* eventfd to call the driver; -1: none */
	vq_rt_process_fn process;
	void *arg;
	struct vq_rt_budget budget;     /* {0, 0}: the vhost weights */
	/* Zero: room for fields a later version adds (0 = today's
	 * behaviour); vq_rt_loop_add refuses others with -EINVAL. */
	uint64_t reserved[4];
};

struct vq_rt_loop_config {
	uint64_t busy_poll_ns;          /* 0: go idle at once when dry */
	uint64_t (*now_ns)(void *arg);  /* NULL: vq_rt_now_ns */
	void *clock_arg;
	/* Once a busy-poll window has gone this long with nothing, offer the
	 * CPU (sched_yield) at every further probe; 0: never.  For threads
	 * that share CPUs with the work they wait for: a spinner holds the
	 * CPU its producer needs.  It costs a quiet, unpinned ping-pong
	 * (measured in 12d27c7 and 7b48e0c), hence not the default. */
	uint64_t busy_poll_yield_ns;
	/* Adaptive busy polling, instead of busy_poll_ns (setting both is
	 * -EINVAL): each queue's window starts at 0, doubles (from
	 * VQ_RT_ADAPT_START_NS) each time the queue's buffers came back within
	 * this ceiling after it went idle, and drops to 0 when they took
	 * longer, so a stream that drains between bursts polls across its gaps
	 * and sparse or stopped traffic does not poll at all (QEMU's
	 * iothread poll-max-ns).  0: the window is busy_poll_ns. */
	uint64_t busy_poll_max_ns;
	/* Zero: room for fields a later version adds (0 = today's
	 * behaviour); vq_rt_loop_new refuses others with -EINVAL. */
	uint64_t reserved[2];
};

/* 0, -EINVAL (a reserved word not zero), -ENOMEM, or -errno from
 * epoll_create1 or eventfd. */
int vq_rt_loop_new(const struct vq_rt_loop_config *cfg, struct vq_rt_loop **out);
/* Frees the loop and its queues (not the rings or fds). */
void vq_rt_loop_free(struct vq_rt_loop *l);

/* Add a queue; it starts active (notifications disabled, processed on the
 * next turn).  -EINVAL, -ENOMEM, or -errno from epoll. */
int vq_rt_loop_add(struct vq_rt_loop *l, const struct vq_rt_queue_config *qc,
		   struct vq_rt_queue **out);

/*
 * One round: give every active queue one turn; a queue that ran dry busy
 * polls (if configured), then goes idle with notifications still off
 * (while the loop has other work its ring is read each round instead, and
 * its driver need not kick).  If every queue is idle and nothing else is
 * ready, the idle rings are read, and before a sleep each queue enables
 * notifications and re-checks (processing, not sleeping, if it finds
 * buffers).  The sleep is in epoll for up to timeout_ms (-1: until a kick,
 * an fd or vq_rt_loop_stop), and at most VQ_RT_QUIET_MS.  A sleep that times out reads the idle rings
 * once: buffers found there were never kicked (counted in kicks_missed) and
 * are processed, and a call the driver is owed is sent (calls_late).
 * Ready fds (vq_rt_loop_add_fd) get a turn in the same round as the queues.
 * Returns the chains processed plus the fd callbacks' work, or -errno from
 * a callback or epoll.
 */
int vq_rt_loop_run_once(struct vq_rt_loop *l, int timeout_ms);

/* The longest the loop sleeps at a time, whatever timeout_ms asks: the
 * quiet period after which it looks at its idle rings (above), so a kick
 * the driver owed and never sent costs at most this. */
#define VQ_RT_QUIET_MS 200

/* Run rounds until vq_rt_loop_stop().  0 or -errno. */
int vq_rt_loop_run(struct vq_rt_loop *l);

/* Ask vq_rt_loop_run to return; safe from any thread. */
void vq_rt_loop_stop(struct vq_rt_loop *l);
bool vq_rt_loop_stopped(const struct vq_rt_loop *l);

/* If the ring says the driver must be notified, write the call eventfd.
 * Returns 1 if a call was sent, 0 if not, -errno. */
int vq_rt_queue_signal(struct vq_rt_queue *q);

/*
 * Take the queue off the loop: it gets no further turn, and no ring call
 * is made on it (its kick fd leaves the epoll set at once), so its ring and
 * fds may go as soon as this returns.  Its memory, counters included, is
 * freed when the next round starts: read them first.  Safe inside any
 * callback of the loop (a queue that breaks another's ring); for the
 * loop's thread.
 */
void vq_rt_queue_remove(struct vq_rt_queue *q);

/* Is the queue active (being processed) rather than asleep on its kick? */
bool vq_rt_queue_active(const struct vq_rt_queue *q);
/* The queue's counters, in the loop's memory (valid until it is freed). */
const struct vq_rt_counters *vq_rt_queue_counters(const struct vq_rt_queue *q);

/*
 * The queue has work its ring does not show (an fd callback or another
 * queue's turn gave it some, e.g. host data for a receive ring): give it a
 * turn from the next one on, with notifications disabled, as a kick would.
 * If the turn finds nothing, the queue goes idle the usual way (busy poll,
 * enable_notify and its re-check).  Nothing happens to an active queue.
 * For the loop's thread (its callbacks included).
 */
void vq_rt_queue_wake(struct vq_rt_queue *q);

/* ------------------------------------------------------------------ */
/* Other file descriptors on the loop                                  */
/* ------------------------------------------------------------------ */

/*
 * A host socket, a TAP, an epoll set: any fd the thread also serves.  The
 * loop watches it (epoll, level-triggered) and, once it is ready, calls
 * its callback in the same rounds as the queues' turns, with the same kind
 * of budget, so neither a busy fd nor a busy ring starves the other:
 *  - while queues keep the loop busy it still asks epoll about its fds
 *    every few rounds (a ring is read directly, an fd cannot be);
 *  - busy polling covers fds: a queue's busy-poll window also asks epoll,
 *    without sleeping, every few probes, and a ready fd ends the window
 *    early (VQ_BP_OTHER), so data on a socket is seen without a wake-up.
 * Nothing is allocated per event.  Everything here is for the loop's
 * thread, its callbacks included.
 */
struct vq_rt_fd;

/*
 * An fd's turn: revents are the epoll events it reported (EPOLLIN,
 * EPOLLOUT, EPOLLHUP, EPOLLERR ...).  Do up to budget b of work (b->pkts
 * units: frames, messages, events; b->bytes bytes, added to *bytes) and
 * return the units done, or -errno to stop the loop.  A turn that spends
 * its budget means more may be waiting: the fd gets another turn next
 * round (same revents) without asking epoll.  One that returns less means
 * the fd is drained: it waits until epoll says it is ready again.  Level
 * triggered: an fd whose condition stays (EPOLLHUP, EPOLLERR, or data the
 * callback leaves) is reported again, so such a callback removes or pauses
 * the fd (vq_rt_fd_set_events(h, 0)).
 */
typedef int (*vq_rt_fd_fn)(struct vq_rt_fd *h, void *arg, uint32_t revents,
			   const struct vq_rt_budget *b, uint64_t *bytes);

/*
 * Watch fd for events (EPOLLIN, EPOLLOUT, EPOLLPRI, EPOLLRDHUP; 0: added
 * paused) and call cb when it is ready, with the vhost weights as budget.
 * The fd stays the caller's: remove it before closing it.  0; -EINVAL (no
 * callback, a negative fd, or events outside those: EPOLLET, EPOLLONESHOT
 * and EPOLLEXCLUSIVE would hide readiness the loop relies on), -ENOMEM, or
 * -errno from epoll (-EEXIST: fd is already on the loop, as a queue's kick
 * or an fd; -EPERM: a regular file).
 */
int vq_rt_loop_add_fd(struct vq_rt_loop *l, int fd, uint32_t events,
		      vq_rt_fd_fn cb, void *arg, struct vq_rt_fd **out);

/*
 * Change what the loop waits for; 0 pauses the fd (it is not watched at
 * all, so not even EPOLLHUP calls it): e.g. while its consumer has no room
 * (a receive ring without buffers), resumed when there is.  A paused fd
 * loses a turn it had coming.  0, -EINVAL (events as above), or -errno
 * from epoll.
 */
int vq_rt_fd_set_events(struct vq_rt_fd *h, uint32_t events);
uint32_t vq_rt_fd_events(const struct vq_rt_fd *h);

/* Stop watching and forget h (freed when the round ends: safe inside any
 * callback of the loop, h's own included; h gets no further turn). */
void vq_rt_fd_remove(struct vq_rt_fd *h);

/* ------------------------------------------------------------------ */
/* Driver side                                                         */
/* ------------------------------------------------------------------ */

/* Publish added buffers and kick the device through kick_fd if the ring
 * says so (counted in c->kicks_sent, the only field it touches).  Returns
 * 1 if kicked, 0, -errno. */
int vq_rt_drv_kick(struct vq_drv *q, int kick_fd, struct vq_rt_counters *c);

struct vq_rt_drv_wait {
	int call_fd;                    /* eventfd the device calls */
	uint64_t busy_poll_ns;          /* 0: no busy polling */
	bool delayed;                   /* vq_drv_enable_cb_delayed */
	uint64_t (*now_ns)(void *arg);  /* NULL: vq_rt_now_ns */
	bool (*other)(void *arg);       /* ends the busy-poll window early */
	void *arg;
	/* Zero: room for fields a later version adds (0 = today's
	 * behaviour); vq_rt_drv_wait_used refuses others with -EINVAL. */
	uint64_t reserved[4];
};

/*
 * Wait until used buffers are pending: return at once if they are; else
 * busy poll for up to w->busy_poll_ns; else enable callbacks (re-checking
 * what the ring returns) and sleep on the call eventfd for up to timeout_ms.
 * Callbacks are disabled again on return.  Returns 1 when used buffers are
 * (or may be) pending, 0 on timeout or when w->other ended the busy-poll
 * window, -errno (-EINVAL: a reserved word of w is not zero, or it would
 * sleep and w->call_fd is negative).  Adds to c's bp_hits, bp_misses,
 * calls_recv and wakeups only.
 */
int vq_rt_drv_wait_used(struct vq_drv *q, const struct vq_rt_drv_wait *w,
			int timeout_ms, struct vq_rt_counters *c);

#ifdef __cplusplus
}
#endif
#endif
