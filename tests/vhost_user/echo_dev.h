/* SPDX-License-Identifier: MIT */
/*
 * A small vhost-user test device: every chain's device-readable bytes are
 * copied into its device-writable buffers and the chain is returned with the
 * number of bytes copied.  Two queues, an 8-byte config space (the last four
 * bytes writable), and a single-threaded poll loop over the control socket
 * and the kick eventfds, or (threaded) a thread per started queue, as a
 * real device runs them.  Also counts fds and mappings for leak checks.
 */
#ifndef VQ_ECHO_DEV_H
#define VQ_ECHO_DEV_H

#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <virtq/runtime.h>
#include <virtq/vhost_user_backend.h>

#include "vq_test.h"

#define ECHO_NQ 2
#define ECHO_FEATURES (VQ_BIT(VQ_F_VERSION_1) | VQ_RING_FEATURES)

struct echo {
	struct vq_vhu_backend *b;
	struct echo_q {
		struct vq_dev *vq;
		int kick, call, err;
		bool on, dead;
		uint64_t chains;
		pthread_t th;           /* threaded: serves the queue */
		bool th_on;             /* ... and has not been joined */
		int stop;               /* atomic: the thread must return */
		struct echo *owner;     /* for the thread */
		unsigned index;
	} q[ECHO_NQ];
	/* Each started queue gets a thread (echo_thread) until queue_stop
	 * joins it; while it runs, only it touches the queue's fields. */
	bool threaded;
	uint8_t config[8];
	unsigned starts, stops, resets;
	unsigned pauses;                /* queue_stop(resumes) */
	unsigned rarps;                 /* SEND_RARP calls */
	uint8_t rarp_mac[6];            /* the last one's MAC */
	int rarp_err;                   /* what send_rarp answers */
	unsigned mtu;                   /* the last NET_SET_MTU */
	/* called by queue_stop, as a device joins its queue's thread */
	void (*stop_hook)(struct echo *e, unsigned index);
	void *hook_arg;
};

static void *echo_thread(void *arg);

static inline int echo_start(void *o, const struct vq_vhu_queue *q)
{
	struct echo *e = o;

	e->q[q->index].vq = q->vq;
	e->q[q->index].kick = q->kick_fd;
	e->q[q->index].call = q->call_fd;
	e->q[q->index].err = q->err_fd;
	e->q[q->index].on = true;
	e->q[q->index].dead = false;
	e->starts++;
	if (e->threaded) {
		e->q[q->index].stop = 0;
		e->q[q->index].owner = e;
		e->q[q->index].index = q->index;
		CHECK_EQ(pthread_create(&e->q[q->index].th, NULL, echo_thread,
					&e->q[q->index]), 0);
		e->q[q->index].th_on = true;
	}
	return 0;
}

static inline void echo_stop(void *o, unsigned i, bool resumes)
{
	struct echo *e = o;

	if (e->q[i].th_on) {
		__atomic_store_n(&e->q[i].stop, 1, __ATOMIC_RELEASE);
		CHECK_EQ(pthread_join(e->q[i].th, NULL), 0);
		e->q[i].th_on = false;
	}
	e->q[i].on = false;
	e->q[i].vq = NULL;
	if (e->stop_hook)
		e->stop_hook(e, i);
	if (resumes)
		e->pauses++;
	else
		e->stops++;
}

static inline void echo_get_config(void *o, uint32_t off, void *buf, uint32_t len)
{
	struct echo *e = o;

	memcpy(buf, e->config + off, len);
}

static inline int echo_set_config(void *o, uint32_t off, const void *buf,
				  uint32_t len, uint32_t flags)
{
	struct echo *e = o;

	if (off < 4 && !(flags & 1))
		return -EPERM;  /* bytes 0-3 are read-only */
	memcpy(e->config + off, buf, len);
	return 0;
}

static inline void echo_reset(void *o)
{
	struct echo *e = o;

	e->resets++;
	memcpy(e->config, "echo", 4);
	memset(e->config + 4, 0, 4);
}

static inline int echo_send_rarp(void *o, const uint8_t mac[6])
{
	struct echo *e = o;

	e->rarps++;
	memcpy(e->rarp_mac, mac, 6);
	/* a group address announces no guest; the first byte says which */
	return mac[0] & 1 ? -EINVAL : e->rarp_err;
}

static inline int echo_set_mtu(void *o, uint16_t mtu)
{
	struct echo *e = o;

	/* a device with 9 KiB frames at most */
	if (mtu > 9000)
		return -EMSGSIZE;
	e->mtu = mtu;
	return 0;
}

static const struct vq_vhu_device_ops echo_ops = {
	.queue_start = echo_start,
	.queue_stop = echo_stop,
	.get_config = echo_get_config,
	.set_config = echo_set_config,
	.reset = echo_reset,
	.send_rarp = echo_send_rarp,
	.set_mtu = echo_set_mtu,
};

static inline void echo_init(struct echo *e)
{
	struct vq_vhu_device d = {
		.name = "echo", .features = ECHO_FEATURES, .nqueues = ECHO_NQ,
		.config_len = sizeof(e->config), .ops = &echo_ops, .opaque = e,
	};

	memset(e, 0, sizeof(*e));
	echo_reset(e);
	e->resets = 0;
	CHECK_EQ(vq_vhu_backend_new(&d, &e->b), 0);
}

/* Copy the readable bytes into the writable ones; returns bytes copied. */
static inline uint32_t echo_copy(const struct vq_chain *c)
{
	unsigned o = 0, i = c->nout;
	size_t ooff = 0, ioff = 0;
	uint32_t total = 0;

	while (o < c->nout && i < c->nout + c->nin) {
		size_t n = c->iov[o].iov_len - ooff;

		if (n > c->iov[i].iov_len - ioff)
			n = c->iov[i].iov_len - ioff;
		memcpy((char *)c->iov[i].iov_base + ioff,
		       (char *)c->iov[o].iov_base + ooff, n);
		total += n;
		ooff += n;
		ioff += n;
		if (ooff == c->iov[o].iov_len) {
			o++;
			ooff = 0;
		}
		if (ioff == c->iov[i].iov_len) {
			i++;
			ioff = 0;
		}
	}
	return total;
}

/* Serve one queue until it is empty with notifications re-enabled. */
static inline void echo_run_queue(struct echo *e, unsigned qi)
{
	struct vq_dev *vq = e->q[qi].vq;
	struct iovec iov[16][64];
	struct vq_chain c[16];
	int r;

	if (!e->q[qi].on || e->q[qi].dead)
		return;
	do {
		vq_dev_disable_notify(vq);
		for (;;) {
			for (unsigned k = 0; k < 16; k++) {
				c[k].iov = iov[k];
				c[k].iov_max = 64;
			}
			r = vq_dev_pop_burst(vq, c, 16);
			if (r <= 0)
				break;
			for (int k = 0; k < r; k++)
				CHECK_EQ(vq_dev_fill(vq, &c[k], echo_copy(&c[k])), 0);
			e->q[qi].chains += vq_dev_flush(vq);
			if (vq_dev_should_signal(vq) && e->q[qi].call >= 0)
				vq_evt_signal(e->q[qi].call);
		}
		if (r < 0) {
			fprintf(stderr, "echo: queue %u broken: %s\n", qi,
				vq_dev_error_msg(vq));
			e->q[qi].dead = true;
			if (e->q[qi].err >= 0)
				vq_evt_signal(e->q[qi].err);
			return;
		}
		r = vq_dev_enable_notify(vq);
	} while (r == 1);
}

/* A started queue's thread (threaded): drain the kick, serve the ring if
 * it shows work (as a runtime loop looks at it), wait up to 20 ms for the
 * next kick, until queue_stop.  It drains after a timeout too: a
 * front-end holding the same eventfd can take the count between our poll
 * and our read, and this makes that race certain. */
static void *echo_thread(void *arg)
{
	struct echo_q *q = arg;

	while (!__atomic_load_n(&q->stop, __ATOMIC_ACQUIRE)) {
		struct pollfd p = { .fd = q->kick, .events = POLLIN };

		if (q->kick >= 0)
			vq_evt_drain(q->kick);
		if (vq_dev_has_avail(q->vq))
			echo_run_queue(q->owner, q->index);
		poll(&p, q->kick >= 0, 20);
	}
	return NULL;
}

/* Poll the control socket and kicks once (up to timeout_ms).  Returns the
 * backend's process() result, or 0. */
static inline int echo_poll_once(struct echo *e, int timeout_ms)
{
	struct pollfd p[1 + ECHO_NQ];
	unsigned n = 0, map[ECHO_NQ];
	int r = 0;

	p[n++] = (struct pollfd){ .fd = vq_vhu_backend_fd(e->b), .events = POLLIN };
	for (unsigned i = 0; i < ECHO_NQ; i++) {
		if (e->q[i].on && e->q[i].kick >= 0) {
			map[n - 1] = i;
			p[n++] = (struct pollfd){ .fd = e->q[i].kick, .events = POLLIN };
		}
	}
	if (poll(p, n, timeout_ms) < 0)
		return -errno;
	for (unsigned k = 1; k < n; k++) {
		if (p[k].revents & POLLIN) {
			vq_evt_drain(p[k].fd);
			echo_run_queue(e, map[k - 1]);
		}
	}
	if (p[0].revents) {
		bool was = vq_vhu_backend_connected(e->b);

		r = vq_vhu_backend_process(e->b);
		/* a ring may have started with buffers already posted */
		for (unsigned i = 0; i < ECHO_NQ; i++)
			if (e->q[i].on)
				echo_run_queue(e, i);
		if (r == 0 && was && !vq_vhu_backend_connected(e->b))
			r = -ECONNRESET;
	}
	return r;
}

/* A pthread body: the echo back-end served on its own thread until its
 * connection ends. */
static inline void *echo_serve_thread(void *arg)
{
	struct echo *e = arg;

	while (vq_vhu_backend_connected(e->b))
		if (echo_poll_once(e, 50) < 0)
			break;
	return NULL;
}

/* sendmsg the niov iovecs with fd beside them (SCM_RIGHTS; fd < 0: none),
 * as a peer that means to send exactly this. */
static inline ssize_t send_with_fd(int s, struct iovec *iov, int niov, int fd)
{
	union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr a; } c;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)niov };
	struct cmsghdr *cm;

	if (fd >= 0) {
		mh.msg_control = c.b;
		mh.msg_controllen = sizeof(c.b);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	return sendmsg(s, &mh, 0);
}

/* ---- leak checks ---- */

static inline int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	CHECK(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;   /* the DIR's own fd */
}

/* Mappings of memfds (guest memory): the ones a teardown must undo.  Other
 * lines of /proc/self/maps move with malloc and are not counted. */
static inline int count_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	CHECK(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "memfd:"))
			n++;
	fclose(f);
	return n;
}

#endif
