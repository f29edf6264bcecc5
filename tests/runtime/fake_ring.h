/* SPDX-License-Identifier: MIT */
/*
 * A fake ring for the runtime loop's tests: a count of buffers the
 * "driver" made available, what the loop asked of it (notifications on or
 * off, how often), and a process callback that takes one buffer a chain
 * within the turn's budget, logging which queue had each turn.
 */
#ifndef VQ_TEST_FAKE_RING_H
#define VQ_TEST_FAKE_RING_H

#include <virtq/runtime.h>

#include "vq_test.h"

struct fring {
	unsigned long long avail;       /* buffers made available */
	unsigned pkt_bytes;
	bool notify;                    /* the driver was asked to kick */
	unsigned enables, disables;
	unsigned recheck_add;           /* enable_notify finds this many new */
	unsigned appear_after;          /* has_avail probes until ... */
	unsigned appear_n;              /* ... this many buffers appear */
	bool woken_work;                /* vq_rt_queue_wake brought one */
	unsigned turns;
	char name;
	char *log;                      /* which queue took each turn */
};

/* Append name to the turn log (63 turns at most). */
static inline void log_turn(char *log, char name)
{
	size_t l;

	if (!log)
		return;
	l = strlen(log);
	if (l < 63)
		log[l] = name;
}

static inline bool fr_has_avail(void *r)
{
	struct fring *f = r;

	if (f->appear_after && --f->appear_after == 0)
		f->avail += f->appear_n;
	return f->avail > 0;
}

static inline void fr_disable(void *r)
{
	struct fring *f = r;

	f->notify = false;
	f->disables++;
}

static inline int fr_enable(void *r)
{
	struct fring *f = r;

	f->notify = true;
	f->enables++;
	if (f->recheck_add) {
		/* the driver added while we enabled (and saw notifications
		 * still disabled, so it did not kick) */
		f->avail += f->recheck_add;
		f->recheck_add = 0;
	}
	return f->avail > 0;
}

static inline bool fr_should_signal(void *r)
{
	return true;
}

static const struct vq_rt_ring_ops fr_ops = {
	.has_avail = fr_has_avail, .disable_notify = fr_disable,
	.enable_notify = fr_enable, .should_signal = fr_should_signal,
};

/* Process like a device: one chain at a time until dry or budget spent. */
static inline int fr_process(struct vq_rt_queue *q, void *arg,
			     const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct fring *f = arg;
	unsigned n = 0;

	f->turns++;
	log_turn(f->log, f->name);
	if (f->woken_work) {
		f->woken_work = false;
		n++;
	}
	while (f->avail && !vq_rt_budget_spent(b, n, *bytes)) {
		f->avail--;
		n++;
		*bytes += f->pkt_bytes;
	}
	return (int)n;
}

static inline struct vq_rt_queue *add_fake(struct vq_rt_loop *l, struct fring *f,
					   int kick_fd)
{
	struct vq_rt_queue_config qc = {
		.ops = &fr_ops, .ring = f, .kick_fd = kick_fd, .call_fd = -1,
		.process = fr_process, .arg = f,
	};
	struct vq_rt_queue *q;

	CHECK_EQ(vq_rt_loop_add(l, &qc, &q), 0);
	return q;
}

#endif
