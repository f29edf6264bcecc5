/* SPDX-License-Identifier: MIT */
/*
 * Private to the device framework:
 *
 *   worker.c   the worker threads, the calls the control thread makes to
 *              them, and the monitor that notices a worker stuck on a
 *              front-end's resource
 *   device.c   a device's back-end, its rings' lifecycle and turns
 */
#ifndef VIRTQ_FRAMEWORK_INTERNAL_H
#define VIRTQ_FRAMEWORK_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <virtq/framework.h>

#include "util.h"

/* A function run on a worker for the control thread, which waits for
 * done (the call lives on its stack). */
struct fw_call {
	void (*fn)(void *arg);
	void *arg;
	struct vq_fw_dev *dev;          /* whose it is: a stall fails it */
	bool done;                      /* under the worker's lock */
	struct fw_call *next;
};

struct fw_worker {
	struct vq_fw *fw;
	unsigned id;
	pthread_t th;
	int tid;                        /* atomic: th's, for /proc */
	bool running;                   /* th was started */
	struct vq_rt_loop *loop;
	int mbox_fd;                    /* eventfd: calls are queued */
	pthread_mutex_t lock;           /* the queue below, done flags, quit */
	pthread_cond_t done_cv;
	struct fw_call *head, **tail;
	int pending;                    /* atomic: the queue is not empty */
	bool quit;
	/* Progress, for the monitor (atomic): rounds of the loop run, and
	 * the device whose turn or call runs now (NULL: none, or an fd's). */
	uint64_t rounds;
	struct vq_fw_dev *busy;
	/* The monitor's own view of it. */
	uint64_t seen_rounds, seen_ns;
	bool stall_said;
};

struct vq_fw {
	struct vq_fw_config cfg;        /* cpus copied into cpus[] */
	unsigned cpus[VQ_FW_MAX_THREADS];
	struct fw_worker *w;
	unsigned nw;
	unsigned next_first;            /* the next device's first worker */
	/* The devices, for the monitor: devs and every device's link. */
	pthread_mutex_t devs_lock;
	struct vq_fw_dev *devs;
	unsigned ndevs;
	/* The monitor thread. */
	pthread_t mon;
	bool mon_running;
	pthread_mutex_t mon_lock;
	pthread_cond_t mon_cv;
	bool mon_quit;
};

enum fw_ring_state { FR_STOPPED, FR_RUNNING, FR_PAUSED };

/* A start queued on the ring's worker (the control thread does not wait
 * for it: the ring's first touch of guest memory may wait on a page a
 * postcopy front-end has not served yet). */
struct start_call {
	struct vq_fw_ring *r;
	struct vq_vhu_queue q;
	struct fw_call call;
};

struct vq_fw_ring {
	struct vq_fw_dev *dev;
	struct fw_worker *w;
	unsigned index;
	enum fw_ring_state state;
	bool broken;
	struct vq_dev *vq;
	int kick_fd, call_fd, err_fd;   /* the back-end's, while it runs */
	struct vq_rt_queue *rtq;        /* on the loop */
	struct vq_fw_turn turn;
	/* The control thread's copy of the fds it gave the ring, for
	 * fw_unstall: set at start, cleared when a stop has run. */
	int ctl_call_fd, ctl_err_fd;
	struct start_call start;        /* its last start; done before the
					 * next, as a stop waits between */
	struct vq_rt_ring_ops poll_ops; /* a ring without a kick fd */
	struct vq_rt_counters base;     /* from queues already off the loop */
	struct vq_rt_counters total;    /* vq_fw_ring_counters' answer */
};

struct vq_fw_dev {
	struct vq_fw *fw;
	struct vq_fw_device desc;
	struct vq_vhu_device_ops vops;  /* the back-end's callbacks: ours */
	struct vq_vhu_backend *b;
	unsigned first;                 /* group g on worker (first + g) % nw */
	unsigned group_size, ngroups;
	struct vq_fw_ring *rings;
	struct vq_fw_dev *next;         /* fw->devs, under devs_lock */
};

/* worker.c */
VQ_INTERNAL struct fw_worker *fw_worker_of(const struct vq_fw_dev *d, unsigned group);
/* Queue c on w without waiting: c must live until it has run. */
VQ_INTERNAL void fw_call_post(struct fw_worker *w, struct fw_call *c);
/* Run c on w and wait.  A worker that takes longer than stall_ms, or
 * whose front-end hung up meanwhile, is released (fw_unstall) and the
 * wait goes on. */
VQ_INTERNAL void fw_call_wait(struct fw_worker *w, struct fw_call *c);
VQ_INTERNAL bool fw_on_worker(const struct fw_worker *w);
VQ_INTERNAL bool fw_on_any_worker(const struct vq_fw *fw);
VQ_INTERNAL void fw_dev_link(struct vq_fw_dev *d);
VQ_INTERNAL void fw_dev_unlink(struct vq_fw_dev *d);

/* device.c */
/* After a round that failed: take off the loop the rings of w whose ring
 * broke without a turn saying so.  How many. */
VQ_INTERNAL unsigned fw_reap_broken(struct fw_worker *w);
/* Has d's front-end hung up (control thread)? */
VQ_INTERNAL bool fw_dev_hung_up(const struct vq_fw_dev *d);
/* A worker makes no progress: fail d's connection (any thread). */
VQ_INTERNAL void fw_dev_stalled(struct vq_fw_dev *d, const struct fw_worker *w,
				const char *where);
/* On the control thread, while it waits for w: let go of whatever holds
 * it for d's front-end (its postcopy faults, its rings' call fds). */
VQ_INTERNAL void fw_unstall(struct vq_fw_dev *d, struct fw_worker *w);

#endif
