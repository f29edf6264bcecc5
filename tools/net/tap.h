/* SPDX-License-Identifier: MIT */
/*
 * virtq-net's TAP (tap.c): one queue of the TAP device per queue pair.
 * With more than one pair the TAP is multi-queue, and a queue is attached
 * to the device only while its pair's receive ring runs: the kernel steers
 * each flow to an attached queue, so no flow waits on a queue nobody reads
 * (a guest that uses fewer pairs than offered, or one whose RX ring
 * stopped).  While the ring runs, the queue's fd is on the pair's worker
 * loop and its frames go into the ring (virtq-net.c, the device, calls
 * tap_start and tap_stop from the ring's callbacks).
 */
#ifndef VIRTQ_TOOLS_NET_TAP_H
#define VIRTQ_TOOLS_NET_TAP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <virtq/framework.h>
#include <virtq/net.h>
#include <virtq/runtime.h>

struct tap;

struct tapq {
	struct tap *tap;
	unsigned index;         /* its pair's */
	int fd;
	bool attached;          /* under the tap's lock */
	int tx_fd;              /* atomic: where the pair's TX frames go */
	bool serving;           /* feeds its pair's running receive ring */
	bool paused;            /* no guest buffers: the ring's kick resumes it */
	bool read_failed;       /* said so once */
	struct vq_rt_fd *fdh;   /* on the worker's loop */
	uint8_t *buf;           /* the frame being delivered */
	ssize_t held;           /* bytes of a frame in buf not yet delivered
				 * (kept while the fd is paused or the ring
				 * stopped) */
	/* the receive ring it feeds, while serving */
	struct vq_fw_ring *rx;
	struct vq_dev *rx_dev;
	struct vq_net_queue *rx_nq;
};

struct tap {
	const char *name;
	unsigned nqueues;
	bool mq;                        /* IFF_MULTI_QUEUE */
	bool quiet;                     /* say nothing of attaching */
	pthread_mutex_t lock;           /* attaching and detaching queues */
	int vnet_len;                   /* atomic: the virtio-net header's size */
	struct tapq *q;                 /* [nqueues] */
};

/* Open the TAP name with nqueues queues (multi-queue if more than one),
 * detached, with a 12-byte header and no offloads until a guest says
 * otherwise.  0, or -errno said on stderr (tap_close cleans up). */
int tap_open(struct tap *t, const char *name, unsigned nqueues, bool quiet);
void tap_close(struct tap *t);

/* The pair's receive ring runs (on its worker, fr with dev and nq): the
 * queue attaches, takes the guest's offloads and feeds the ring from
 * loop.  It starts paused: the ring's first turn (tap_resume) delivers if
 * the guest has buffers, the frame in hand first, or asks for the kick
 * that will. */
void tap_start(struct tapq *q, struct vq_rt_loop *loop, struct vq_fw_ring *fr,
	       struct vq_dev *dev, struct vq_net_queue *nq);
/* The ring stops: the queue leaves the loop; for good (leave) it is
 * detached too and the kernel drops what waits in it.  True when a frame
 * in hand was dropped with it (the caller counts it). */
bool tap_stop(struct tapq *q, bool leave);
/* The receive ring's turn: deliver within b if the queue waits for
 * buffers and the guest posted some.  Frames delivered. */
int tap_resume(struct tapq *q, const struct vq_rt_budget *b, uint64_t *bytes);
/* Waiting for guest buffers: the receive ring wants its kicks. */
bool tap_paused(const struct tapq *q);

/* The TX sink (vq_net_tx_fn, arg the pair's tapq): the guest's frame
 * behind its header, the kernel does the offloads it asks for. */
int tap_sink(void *arg, const struct iovec *iov, unsigned cnt, uint32_t len,
	     const struct vq_net_hdr *h);
/* One frame of len bytes, with an empty header, onto the network through
 * an attached queue.  0 or -errno. */
int tap_write_frame(struct tap *t, const uint8_t *frame, unsigned len);
/* The TAP's MTU.  0 or -errno. */
int tap_set_mtu(struct tap *t, unsigned mtu);
/* Whether the interface is up (IFF_UP); false when that cannot be read. */
bool tap_is_up(const struct tap *t);

#endif
