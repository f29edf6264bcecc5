// SPDX-License-Identifier: MIT
/*
 * virtq-net: a vhost-user-net backend.
 *
 *   virtq-net --socket-path PATH [options] [sink|source|loopback|tap IFNAME]
 *
 * A device on the library's framework (virtq/framework.h): the control
 * plane (the vhost-user socket, statistics, signals) runs on the main
 * thread, and queue pair k on worker thread k % --threads, where its rings
 * start and stop and, in tap mode, its TAP queue is an fd of the worker's
 * loop.  This file is the device: what a ring's turn does in each mode,
 * what a pair keeps beside its rings, and the statistics.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <virtq/framework.h>
#include <virtq/net.h>
#include <virtq/runtime.h>

#include "virtq-net.h"

struct daemon;

/* What a ring's net queues counted, kept over its starts. */
struct ring_totals {
	uint64_t packets, bytes;
	uint64_t drops[VQ_NET_DROP_MAX];
	uint64_t evicted;               /* TX frames whose lines were flushed */
	uint64_t gso;                   /* segmentation offload frames */
};

/* One ring as the device sees it (its worker's). */
struct ring {
	struct daemon *d;
	unsigned index;
	bool running;
	struct vq_fw_ring *fr;
	struct vq_dev *dev;
	struct vq_net_queue *nq;
	struct ring_totals base;        /* from queues already freed */
};

/* The statistics line's totals. */
struct wstats {
	struct vqd_count c;
	uint64_t drops[VQ_NET_DROP_MAX];
	uint64_t evicted;
	uint64_t kicks_missed, calls_late;      /* see vq_rt_counters */
	uint64_t tx_gso, rx_gso;
	uint64_t queue_packets[2 * MAX_PAIRS];  /* by ring index */
};

/*
 * One queue of the TAP device per queue pair.  With more than one pair the
 * TAP is multi-queue, and a queue is attached to the device only while its
 * pair's receive ring runs: the kernel steers each flow to an attached
 * queue, so no flow waits on a queue nobody reads (a guest that uses fewer
 * pairs than offered, or one whose RX ring stopped).  Its fd is on the
 * pair's worker loop while the ring runs.
 */
struct tapq {
	struct daemon *d;
	unsigned pair;
	int fd;
	bool attached;          /* under tap_lock */
	int tx_fd;              /* atomic: where the pair's TX frames go */
	bool serving;           /* feeds its pair's running receive ring */
	bool paused;            /* no guest buffers: the ring's kick resumes it */
	bool read_failed;       /* said so once */
	struct vq_rt_fd *fdh;   /* on the worker's loop */
	uint8_t *buf;           /* the frame being delivered */
	ssize_t held;           /* bytes of a frame in buf not yet delivered
				 * (kept while the fd is paused or the ring
				 * stopped) */
};

struct daemon {
	struct net_opts o;
	struct vqd_opts com;            /* the options every daemon takes */
	struct wstats st_now, st_prev;  /* the statistics line's ends */
	struct vq_fw *fw;
	struct vq_fw_dev *fwd;
	struct ring rings[2 * MAX_PAIRS];
	uint8_t frame[VQ_NET_MAX_FRAME];        /* source mode template */
	/* A burst of it, built once (read only, so workers share it). */
	struct iovec frame_iov;
	struct vq_net_frame frames[VQ_NET_BURST];
	struct tapq taps[MAX_PAIRS];
	bool tap_mq;                    /* IFF_MULTI_QUEUE */
	pthread_mutex_t tap_lock;       /* attaching and detaching queues */
	struct vq_vhu_backend *b;       /* for its IOTLB statistics */
	int tap_vnet_len;               /* atomic: the TAP's virtio-net header size */
	int64_t source_left;            /* atomic; with --count */
	uint64_t rarp_sent;             /* atomic; announcements sent */
	unsigned mtu;                   /* the guest's, from NET_SET_MTU; 0: none */
};

/* ------------------------------------------------------------------ */
/* Ring ops for the loop                                               */
/* ------------------------------------------------------------------ */

/*
 * Loopback has nowhere to put a frame while the pair's receive ring is
 * stopped: QEMU stops RX before TX when a migration ends, and a frame taken
 * in between would be lost.  Leave such frames in the guest's TX ring: the
 * ring's base does not count them, so whoever resumes it (this backend when
 * RX comes back, or the migration's destination) sends them.
 */
static bool tx_held(const struct ring *r)
{
	const struct daemon *d = r->d;

	return d->o.mode == M_LOOPBACK && vq_net_is_tx_queue(r->index) &&
	       !d->rings[r->index - 1].running;
}

static bool r_has_avail(void *p)
{
	struct ring *rg = p;

	return !tx_held(rg) && vq_dev_has_avail(rg->dev);
}

static void r_disable(void *p)
{
	vq_dev_disable_notify(((struct ring *)p)->dev);
}

/* A broken ring sleeps: its turn said so, and the framework took it off. */
static int r_enable(void *p)
{
	struct ring *rg = p;
	int r;

	if (tx_held(rg))
		return 0;       /* sleep: only a restart brings RX back */
	r = vq_dev_enable_notify(rg->dev);
	return r < 0 ? 0 : r;
}

/* The rest (should_signal, and the loop's quiet look) is the ring's own. */
static const struct vq_rt_ring_ops ring_ops = {
	.has_avail = r_has_avail, .disable_notify = r_disable,
	.enable_notify = r_enable,
};

/*
 * A receive ring filled outside its own turns (loopback: from the TX
 * turns; tap: from its TAP queue's fd).  It is a queue of the loop all the
 * same, so the loop's quiet look covers it, and it wants kicks only while
 * its TAP queue waits for buffers.
 */
static bool rx_wants_kick(const struct ring *rg)
{
	return rg->d->o.mode == M_TAP && rg->d->taps[rg->index / 2].paused;
}

static bool rx_has_avail(void *p)
{
	return rx_wants_kick(p) && vq_dev_has_avail(((struct ring *)p)->dev);
}

static int rx_enable(void *p)
{
	if (!rx_wants_kick(p)) {
		r_disable(p);
		return 0;
	}
	return r_enable(p);
}

static const struct vq_rt_ring_ops rx_fed_ops = {
	.has_avail = rx_has_avail, .disable_notify = r_disable,
	.enable_notify = rx_enable,
};

static void ring_broken(struct ring *r)
{
	vq_fw_ring_broken(r->fr);
}

/* Signal the guest for a ring we fill outside its own turn (RX). */
static void ring_call(struct ring *r)
{
	vq_fw_ring_signal(r->fr);
}

/* ------------------------------------------------------------------ */
/* Data path                                                           */
/* ------------------------------------------------------------------ */

static int sink_count(void *arg, const struct iovec *iov, unsigned cnt,
		      uint32_t len, const struct vq_net_hdr *h)
{
	return 0;       /* the layer counts packets and bytes */
}

/* --copy: take each frame out of guest memory, as a switch or DPDK's vhost
 * (which copies into an mbuf) would. */
static int sink_copy(void *arg, const struct iovec *iov, unsigned cnt,
		     uint32_t len, const struct vq_net_hdr *h)
{
	static __thread uint8_t buf[VQ_NET_MAX_FRAME];
	size_t off = 0;

	for (unsigned i = 0; i < cnt && off < sizeof(buf); i++) {
		size_t n = iov[i].iov_len;

		if (n > sizeof(buf) - off)
			n = sizeof(buf) - off;
		memcpy(buf + off, iov[i].iov_base, n);
		off += n;
	}
	__asm__ volatile("" : : "r"(buf) : "memory");  /* keep the copy */
	return 0;
}

static int sink_loopback(void *arg, const struct iovec *iov, unsigned cnt,
			 uint32_t len, const struct vq_net_hdr *h)
{
	struct ring *rx = arg;
	struct iovec out[VQ_NET_TX_IOV + 1];
	uint8_t mac[12];
	int n, r;

	if (!rx->running || !rx->nq)
		return VQ_NET_SINK_DROP(VQ_NET_DROP_NO_RX_BUF);
	n = vq_net_mac_swapped(iov, cnt, len, mac, out);
	if (n < 0)
		return VQ_NET_SINK_DROP(VQ_NET_DROP_RUNT);
	r = vq_net_rx_deliver(rx->nq, out, (unsigned)n, len, NULL);
	if (r == -EAGAIN) {
		/* The receive ring waits for the IOTLB: so does this frame,
		 * and its ring sleeps until the update kicks it. */
		vq_dev_iotlb_wait_like(rx->d->rings[rx->index + 1].dev, rx->dev);
		return -EAGAIN;
	}
	if (r < 0) {
		ring_broken(rx);
		/* Counted on the RX side as nothing; count the loss here. */
		return VQ_NET_SINK_DROP(VQ_NET_DROP_NO_RX_BUF);
	}
	/* Dropped frames were counted by the RX queue. */
	return 0;
}

/* The guest's frame goes to the TAP behind its header: the kernel does the
 * checksum and segmentation the header asks for (checked against the
 * offloads negotiated by the net layer, and again by the kernel). */
static int sink_tap(void *arg, const struct iovec *iov, unsigned cnt,
		    uint32_t len, const struct vq_net_hdr *h)
{
	struct tapq *t = arg;
	struct iovec out[VQ_NET_TX_IOV + 1];
	uint8_t hb[12];
	uint32_t hlen = (uint32_t)__atomic_load_n(&t->d->tap_vnet_len, __ATOMIC_RELAXED);
	ssize_t w;
	int fd = __atomic_load_n(&t->tx_fd, __ATOMIC_RELAXED);

	vq_net_hdr_encode(hb, hlen, h);
	out[0] = (struct iovec){ hb, hlen };
	memcpy(out + 1, iov, cnt * sizeof(*iov));
	w = writev(fd, out, (int)cnt + 1);
	/* the queue was detached between our look and the write (its pair's
	 * receive ring stopped): tap_attach moved tx_fd first, so once more */
	if (w < 0 && errno == EBADFD && fd != __atomic_load_n(&t->tx_fd, __ATOMIC_RELAXED))
		w = writev(__atomic_load_n(&t->tx_fd, __ATOMIC_RELAXED), out, (int)cnt + 1);

	if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS))
		return VQ_NET_SINK_DROP(VQ_NET_DROP_SINK_FULL);
	if (w < 0)
		return VQ_NET_SINK_DROP(VQ_NET_DROP_SINK);
	return 0;
}

static int process_tx(struct vq_rt_queue *q, void *arg,
		      const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct ring *r = arg;
	struct daemon *d = r->d;
	struct ring *rx = &d->rings[r->index - 1];
	int n;

	if (tx_held(r))
		return 0;
	switch (d->o.mode) {
	case M_LOOPBACK:
		n = vq_net_tx_process(r->nq, b->pkts, sink_loopback, rx, bytes);
		if (rx->running && rx->nq) {
			if (vq_net_rx_flush(rx->nq) < 0)
				ring_broken(rx);
			else
				ring_call(rx);
		}
		break;
	case M_TAP:
		n = vq_net_tx_process(r->nq, b->pkts, sink_tap, &d->taps[r->index / 2],
				      bytes);
		break;
	default:
		n = vq_net_tx_process(r->nq, b->pkts, d->o.copy ? sink_copy : sink_count,
				      NULL, bytes);
		break;
	}
	return n;       /* < 0: broken, and the framework takes it off */
}

/* Source: frames of --size bytes for as long as the guest has buffers. */
static int process_rx_source(struct vq_rt_queue *q, void *arg,
			     const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct ring *r = arg;
	struct daemon *d = r->d;
	unsigned n = 0, want;
	int k;

	while (n < b->pkts && vq_dev_has_avail(r->dev)) {
		want = b->pkts - n < VQ_NET_BURST ? b->pkts - n : VQ_NET_BURST;
		if (d->o.count) {
			int64_t left = __atomic_sub_fetch(&d->source_left, want,
							  __ATOMIC_RELAXED);

			if (left < 0) {
				/* Take only what was left; give the rest back. */
				int64_t over = -left < (int64_t)want ? -left : (int64_t)want;

				__atomic_add_fetch(&d->source_left, over, __ATOMIC_RELAXED);
				want -= (unsigned)over;
			}
			if (!want)
				break;
		}
		k = vq_net_rx_deliver_burst(r->nq, d->frames, want);
		if (k < 0 || (!d->com.used_batch && vq_net_rx_flush(r->nq) < 0))
			return -EIO;
		n += (unsigned)k;
		*bytes += (uint64_t)k * d->o.size;
		if ((unsigned)k < want) {
			/* Out of buffers: the rest were not sent. */
			if (d->o.count)
				__atomic_add_fetch(&d->source_left, want - (unsigned)k,
						   __ATOMIC_RELAXED);
			break;
		}
	}
	if (vq_net_rx_flush(r->nq) < 0)
		return -EIO;
	return (int)n;
}

/* Loopback's receive ring: its turns are the TX ring's. */
static int process_rx_none(struct vq_rt_queue *q, void *arg,
			   const struct vq_rt_budget *b, uint64_t *bytes)
{
	return 0;
}

static int process_rx_tap(struct vq_rt_queue *q, void *arg,
			  const struct vq_rt_budget *b, uint64_t *bytes);

/* Ring i's turn and ring calls on its worker's loop. */
static vq_rt_process_fn turn_of(const struct daemon *d, unsigned i,
				const struct vq_rt_ring_ops **ops)
{
	*ops = &ring_ops;
	if (vq_net_is_tx_queue(i))
		return process_tx;
	if (d->o.mode == M_SOURCE)
		return process_rx_source;
	*ops = &rx_fed_ops;
	if (d->o.mode == M_LOOPBACK)
		return process_rx_none;
	if (d->o.mode == M_TAP)
		return process_rx_tap;
	return NULL;            /* sink: nothing ever fills it */
}

/* ------------------------------------------------------------------ */
/* TAP                                                                 */
/* ------------------------------------------------------------------ */

static int tap_open_queue(const char *name, bool mq)
{
	struct ifreq ifr;
	int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	/* IFF_VNET_HDR: every frame read or written carries a virtio-net
	 * header, so the kernel does the guest's offloads */
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | (mq ? IFF_MULTI_QUEUE : 0);
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

/* Send each pair's TX frames to its own queue when that is attached, else
 * to the first attached one: the kernel sends a flow's replies to the queue
 * its frames came in on, and only an attached queue is read. */
static void tap_retarget(struct daemon *d)
{
	int first = d->taps[0].fd;

	for (unsigned k = 0; k < d->o.pairs; k++)
		if (d->taps[k].attached) {
			first = d->taps[k].fd;
			break;
		}
	for (unsigned k = 0; k < d->o.pairs; k++)
		__atomic_store_n(&d->taps[k].tx_fd,
				 d->taps[k].attached ? d->taps[k].fd : first,
				 __ATOMIC_RELAXED);
}

static int tap_attach_locked(struct tapq *t, bool on)
{
	struct daemon *d = t->d;
	struct ifreq ifr;

	if (!d->tap_mq || t->attached == on)
		return 0;
	if (!on) {
		/* move the pair's TX away first: a frame written to a
		 * detached queue is refused (and counted) */
		t->attached = false;
		tap_retarget(d);
	}
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = on ? IFF_ATTACH_QUEUE : IFF_DETACH_QUEUE;
	if (ioctl(t->fd, TUNSETQUEUE, &ifr) < 0) {
		int e = errno;

		fprintf(stderr, "virtq-net: cannot %s TAP queue %u: %s\n",
			on ? "attach" : "detach", t->pair, strerror(e));
		return -e;
	}
	if (on) {
		t->attached = true;
		tap_retarget(d);
	}
	if (!d->com.quiet)
		fprintf(stderr, "virtq-net: TAP queue %u %s\n", t->pair,
			on ? "attached" : "detached");
	return 0;
}

/* Pairs attach on their own workers; where each pair's TX goes depends on
 * which are attached, so one at a time. */
static int tap_attach(struct tapq *t, bool on)
{
	int r;

	pthread_mutex_lock(&t->d->tap_lock);
	r = tap_attach_locked(t, on);
	pthread_mutex_unlock(&t->d->tap_lock);
	return r;
}

/*
 * Tell the TAP the header size and what the guest takes (device-wide,
 * through an attached queue): checksum and segmentation offloads only as
 * the guest negotiated them, so the kernel finishes what the guest cannot
 * before a frame reaches it.
 */
static int tap_configure(struct tapq *t, uint64_t features)
{
	int hlen = (int)vq_net_hdr_len(features);
	unsigned off = 0;

	if (features & VQ_BIT(VQ_NET_F_GUEST_CSUM)) {
		off |= TUN_F_CSUM;
		if (features & VQ_BIT(VQ_NET_F_GUEST_TSO4))
			off |= TUN_F_TSO4;
		if (features & VQ_BIT(VQ_NET_F_GUEST_TSO6))
			off |= TUN_F_TSO6;
		if (features & VQ_BIT(VQ_NET_F_GUEST_ECN))
			off |= TUN_F_TSO_ECN;
	}
	if (ioctl(t->fd, TUNSETVNETHDRSZ, &hlen) < 0 ||
	    ioctl(t->fd, TUNSETOFFLOAD, (unsigned long)off) < 0) {
		int e = errno;

		fprintf(stderr, "virtq-net: cannot set the TAP's offloads: %s\n", strerror(e));
		return -e;
	}
	__atomic_store_n(&t->d->tap_vnet_len, hlen, __ATOMIC_RELAXED);
	return 0;
}

/* One queue per pair; a multi-queue TAP's queues start detached. */
static int tap_open(struct daemon *d)
{
	d->tap_mq = d->o.pairs > 1;
	for (unsigned k = 0; k < d->o.pairs; k++) {
		struct tapq *t = &d->taps[k];
		int fd = tap_open_queue(d->o.tap_name, d->tap_mq);

		/* one pair on a TAP the operator made multi_queue: take it as
		 * a multi-queue TAP of one queue */
		if (fd == -EINVAL && !d->tap_mq) {
			fd = tap_open_queue(d->o.tap_name, true);
			d->tap_mq = fd >= 0;
		}

		if (fd < 0) {
			fprintf(stderr, "virtq-net: cannot open TAP %s%s: %s%s\n",
				d->o.tap_name, d->tap_mq ? " as multi-queue" : "",
				strerror(-fd),
				d->tap_mq && fd == -EINVAL ?
				" (a TAP made without multi_queue serves one pair)" : "");
			return fd;
		}
		t->fd = fd;
		t->attached = true;
		t->buf = malloc(12 + VQ_NET_MAX_FRAME);
		if (!t->buf)
			return -ENOMEM;
	}
	/* until a guest says otherwise: a 12-byte header, no offloads */
	if (tap_configure(&d->taps[0], VQ_BIT(VQ_F_VERSION_1)) < 0)
		return -EIO;
	for (unsigned k = 0; k < d->o.pairs; k++)
		if (tap_attach(&d->taps[k], false) < 0)
			return -EIO;
	tap_retarget(d);
	return 0;
}

static void tap_close(struct daemon *d)
{
	for (unsigned k = 0; k < d->o.pairs; k++) {
		struct tapq *t = &d->taps[k];

		if (t->fd >= 0)
			close(t->fd);
		free(t->buf);
		t->fd = -1;
		t->buf = NULL;
	}
}

/* No guest buffers: stop reading the TAP queue (frames wait there, and the
 * one in hand in buf) until the ring's kick resumes it (process_rx_tap);
 * the ring's queue takes a turn to ask for that kick. */
static void tap_pause(struct tapq *t)
{
	struct ring *rx = &t->d->rings[2 * t->pair];

	t->paused = true;
	vq_rt_fd_set_events(t->fdh, 0);
	vq_fw_ring_wake(rx->fr);
}

/* One frame from the TAP queue (or the one in hand): its length, 0 when
 * the queue is empty, < 0 when reading fails. */
static ssize_t tap_read(struct tapq *t)
{
	ssize_t len = t->held;

	t->held = 0;
	if (len)
		return len;
	len = read(t->fd, t->buf, 12 + VQ_NET_MAX_FRAME);
	if (len < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (len < 0 && !t->read_failed) {
		t->read_failed = true;
		fprintf(stderr, "virtq-net: TAP queue %u: %s\n", t->pair, strerror(errno));
	}
	return len < 0 ? -1 : len;
}

/*
 * Frames from the TAP queue into its pair's receive ring, within budget b.
 * With no guest buffers (or a ring waiting for an IOTLB entry) the fd is
 * paused, keeping the frame in hand; a broken ring, or a TAP that cannot
 * be read, pauses it for good (until the ring restarts).
 */
static int tap_deliver(struct tapq *t, const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct ring *rx = &t->d->rings[2 * t->pair];
	unsigned n = 0;

	while (n < b->pkts && *bytes < b->bytes) {
		uint32_t hlen = (uint32_t)__atomic_load_n(&t->d->tap_vnet_len,
							  __ATOMIC_RELAXED);
		struct vq_net_hdr h;
		struct iovec iov;
		ssize_t len;
		int r;

		if (!vq_dev_has_avail(rx->dev)) {
			tap_pause(t);
			break;
		}
		len = tap_read(t);
		if (len < 0)
			tap_pause(t);
		if (len <= 0)
			break;
		if ((size_t)len < hlen)
			continue;       /* the kernel never does this */
		vq_net_hdr_decode(t->buf, hlen, &h);
		iov = (struct iovec){ t->buf + hlen, (size_t)len - hlen };
		r = vq_net_rx_deliver(rx->nq, &iov, 1, (uint32_t)iov.iov_len, &h);
		if (r == -EAGAIN) {
			t->held = len;
			tap_pause(t);
			break;
		}
		if (r < 0) {
			ring_broken(rx);
			tap_pause(t);
			break;
		}
		n++;
		*bytes += iov.iov_len;
	}
	if (vq_net_rx_flush(rx->nq) < 0)
		ring_broken(rx);
	else
		ring_call(rx);
	return (int)n;
}

/* The TAP queue is readable. */
static int tap_turn(struct vq_rt_fd *h, void *arg, uint32_t revents,
		    const struct vq_rt_budget *b, uint64_t *bytes)
{
	return tap_deliver(arg, b, bytes);
}

/* The receive ring's turn: woken by its kick (or first turn) while its TAP
 * queue waits for buffers: read it again, the frame in hand first. */
static int process_rx_tap(struct vq_rt_queue *q, void *arg,
			  const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct ring *rx = arg;
	struct tapq *t = &rx->d->taps[rx->index / 2];

	if (!t->paused || t->read_failed || !vq_dev_has_avail(rx->dev))
		return 0;
	t->paused = false;
	if (vq_rt_fd_set_events(t->fdh, EPOLLIN) < 0) {
		t->paused = true;
		return 0;
	}
	return tap_deliver(t, b, bytes);
}

/*
 * The pair's receive ring stops (on its worker): its TAP queue leaves the
 * worker's loop.  For good (leave), the queue is detached too, and the
 * kernel drops what waits in it; a ring that only pauses keeps it
 * attached, and the frame in hand.
 */
static void tap_stop(struct tapq *t, bool leave)
{
	vq_rt_fd_remove(t->fdh);
	t->fdh = NULL;
	t->serving = false;
	if (!leave)
		return;
	if (t->held) {
		t->d->rings[2 * t->pair].base.drops[VQ_NET_DROP_NO_RX_BUF]++;
		t->held = 0;
	}
	tap_attach(t, false);
}

/* The pair's receive ring runs (on its worker): its TAP queue feeds it,
 * from the worker's loop.  It starts paused: the ring's first turn
 * resumes it if the guest has buffers, the frame in hand first, or asks
 * for the kick that will. */
static void tap_start(struct tapq *t, struct vq_rt_loop *loop)
{
	const struct ring *rx = &t->d->rings[2 * t->pair];

	if (t->serving)
		return;
	/* a detached queue cannot be read: its pair gets no host frames */
	if (tap_attach(t, true) < 0 || tap_configure(t, vq_dev_features(rx->dev)) < 0)
		return;
	if (vq_rt_loop_add_fd(loop, t->fd, 0, tap_turn, t, &t->fdh) < 0) {
		fprintf(stderr, "virtq-net: TAP queue %u: cannot watch it\n", t->pair);
		return;
	}
	t->serving = true;
	t->paused = true;
	t->read_failed = false;
}

/* ------------------------------------------------------------------ */
/* The device's callbacks (the ring's worker)                          */
/* ------------------------------------------------------------------ */

static void totals_add(struct ring_totals *t, const struct vq_net_stats *ns)
{
	t->packets += ns->packets;
	t->bytes += ns->bytes;
	for (unsigned i = 0; i < VQ_NET_DROP_MAX; i++)
		t->drops[i] += ns->drops[i];
	t->evicted += ns->evicted;
	t->gso += ns->gso;
}

static int net_ring_start(void *opaque, struct vq_fw_ring *fr, bool resumed,
			  struct vq_fw_turn *t)
{
	struct daemon *d = opaque;
	unsigned i = vq_fw_ring_index(fr);
	struct ring *r = &d->rings[i];
	struct vq_net_queue_config nc = {
		.dev = vq_fw_ring_vq(fr),
		.role = vq_net_is_tx_queue(i) ? VQ_NET_TX : VQ_NET_RX,
		.used_batch = d->com.used_batch,
		/* The counting sinks (sink without --copy, and source's
		 * TX) never read a frame: nothing to evict. */
		.tx_evict = d->o.mode == M_LOOPBACK || d->o.mode == M_TAP || d->o.copy ?
			    d->o.tx_evict : VQ_NET_TX_EVICT_OFF,
	};
	int e = vq_net_queue_new(&nc, &r->nq);

	if (e < 0)
		return e;
	r->dev = nc.dev;
	r->running = true;
	if (!d->com.quiet)
		fprintf(stderr, "virtq-net: queue %u %s (%s, %u entries, features 0x%" PRIx64 ")\n",
			i, resumed ? "resumed" : "started",
			vq_net_is_tx_queue(i) ? "tx" : "rx", vq_dev_num(r->dev),
			vq_dev_features(r->dev));
	if (d->o.mode == M_TAP && !vq_net_is_tx_queue(i))
		tap_start(&d->taps[i / 2], vq_fw_dev_loop(d->fwd, i / 2));
	t->process = turn_of(d, i, &t->ops);
	t->arg = r;
	t->ring = r;
	return 0;
}

/*
 * A transmit ring about to stop: take what the guest already posted (at
 * most one ring's worth), so frames it counted as sent are not left behind
 * when the frontend stops right after sending (testpmd does).
 */
static void tx_drain(struct ring *r)
{
	uint64_t bytes = 0;

	if (!vq_net_is_tx_queue(r->index) || vq_dev_error(r->dev) || tx_held(r))
		return;
	if (process_tx(NULL, r, &(struct vq_rt_budget){ vq_dev_num(r->dev), ~0ull },
		       &bytes) > 0)
		ring_call(r);
}

/* A ring that pauses keeps its TAP queue attached: detaching would drop
 * the frames waiting there, and a guest behind a vIOMMU pauses its rings
 * on every IOTLB flush. */
static void net_ring_stop(void *opaque, struct vq_fw_ring *fr, bool paused)
{
	struct daemon *d = opaque;
	unsigned i = vq_fw_ring_index(fr);
	struct ring *r = &d->rings[i];

	if (d->o.mode == M_TAP && !vq_net_is_tx_queue(i))
		tap_stop(&d->taps[i / 2], !paused);
	if (!r->running)
		return;         /* paused before: its TAP queue was all it kept */
	tx_drain(r);
	/* Whatever was filled reaches the guest before the ring goes. */
	if (!vq_net_is_tx_queue(i))
		vq_net_rx_flush(r->nq);
	totals_add(&r->base, vq_net_queue_stats(r->nq));
	vq_net_queue_free(r->nq);
	r->nq = NULL;
	r->dev = NULL;
	r->running = false;
	if (!d->com.quiet)
		fprintf(stderr, "virtq-net: queue %u %s\n", i, paused ? "paused" : "stopped");
}

/* QEMU after migrating a guest without GUEST_ANNOUNCE: broadcast a RARP
 * from its MAC so the switches learn where it went.  Only tap mode has a
 * network to tell. */
static int dev_send_rarp(void *opaque, const uint8_t mac[6])
{
	struct daemon *d = opaque;
	uint8_t frame[12 + VQ_NET_RARP_LEN] = { 0 };    /* an empty header first */
	unsigned len;
	char m[18];

	snprintf(m, sizeof(m), "%02x:%02x:%02x:%02x:%02x:%02x",
		 mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
	if (mac[0] & 1) {
		/* a group address is no guest's: announcing it would teach
		 * the switches nonsense */
		fprintf(stderr, "virtq-net: RARP for %s refused: not a unicast MAC\n", m);
		return -EINVAL;
	}
	if (d->o.mode != M_TAP) {
		if (!d->com.quiet)
			fprintf(stderr, "virtq-net: RARP for %s: no network in %s mode\n",
				m, net_mode_names[d->o.mode]);
		return 0;
	}
	len = (unsigned)__atomic_load_n(&d->tap_vnet_len, __ATOMIC_RELAXED);
	len += vq_net_rarp_frame(mac, frame + len);
	/* any attached queue reaches the network */
	if (write(__atomic_load_n(&d->taps[0].tx_fd, __ATOMIC_RELAXED), frame, len) !=
	    (ssize_t)len) {
		int e = errno;

		fprintf(stderr, "virtq-net: RARP for %s on %s failed: %s\n", m,
			d->o.tap_name, strerror(e));
		return -e;
	}
	__atomic_add_fetch(&d->rarp_sent, 1, __ATOMIC_RELAXED);
	if (!d->com.quiet)
		fprintf(stderr, "virtq-net: RARP for %s sent on %s\n", m, d->o.tap_name);
	return 0;
}

/* QEMU's host_mtu: the guest was told this MTU.  In tap mode the TAP
 * takes it too, so the host sends the guest frames that large without
 * fragmenting, and takes its frames; a TAP that refuses it fails the
 * request (QEMU then does not start the device rather than run it with
 * MTUs that disagree). */
static int dev_set_mtu(void *opaque, uint16_t mtu)
{
	struct daemon *d = opaque;

	if (d->o.mode == M_TAP) {
		struct ifreq ifr = { .ifr_mtu = mtu };
		int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), e = 0;

		snprintf(ifr.ifr_name, IFNAMSIZ, "%s", d->o.tap_name);
		if (s < 0 || ioctl(s, SIOCSIFMTU, &ifr) < 0)
			e = errno;
		if (s >= 0)
			close(s);
		if (e) {
			fprintf(stderr, "virtq-net: cannot set the MTU of %s to %u: %s\n",
				d->o.tap_name, mtu, strerror(e));
			return -e;
		}
	}
	d->mtu = mtu;
	if (!d->com.quiet)
		fprintf(stderr, "virtq-net: MTU %u%s%s\n", mtu,
			d->o.mode == M_TAP ? ", also on " : "",
			d->o.mode == M_TAP ? d->o.tap_name : "");
	return 0;
}

static const struct vq_fw_device_ops net_ops = {
	.ring_start = net_ring_start,
	.ring_stop = net_ring_stop,
	.send_rarp = dev_send_rarp,
	.set_mtu = dev_set_mtu,
};

/* ------------------------------------------------------------------ */
/* Statistics                                                          */
/* ------------------------------------------------------------------ */

struct stats_call {
	struct daemon *d;
	unsigned pair;
	struct wstats *s;
};

/* On the pair's worker: its rings' totals into s. */
static void stats_pair(void *arg)
{
	struct stats_call *sc = arg;
	struct wstats *s = sc->s;

	for (unsigned i = 2 * sc->pair; i < 2 * sc->pair + 2; i++) {
		struct ring *r = &sc->d->rings[i];
		const struct vq_rt_counters *c = vq_fw_ring_counters(r->fr);
		struct ring_totals t = r->base;

		if (r->nq)
			totals_add(&t, vq_net_queue_stats(r->nq));
		if (vq_net_is_tx_queue(i)) {
			s->c.tx_pkts += t.packets;
			s->c.tx_bytes += t.bytes;
			s->tx_gso += t.gso;
		} else {
			s->c.rx_pkts += t.packets;
			s->c.rx_bytes += t.bytes;
			s->rx_gso += t.gso;
		}
		for (unsigned k = 0; k < VQ_NET_DROP_MAX; k++)
			s->drops[k] += t.drops[k];
		s->evicted += t.evicted;
		s->c.kicks += c->kicks_recv;
		s->c.calls += c->calls_sent;
		s->kicks_missed += c->kicks_missed;
		s->calls_late += c->calls_late;
		s->queue_packets[i] = t.packets;
	}
}

static void stats_read(struct daemon *d, struct wstats *s)
{
	memset(s, 0, sizeof(*s));
	for (unsigned k = 0; k < d->o.pairs; k++) {
		struct stats_call sc = { d, k, s };

		vq_fw_dev_call(d->fwd, k, stats_pair, &sc);
	}
}

static uint64_t drops_total(const struct wstats *s)
{
	uint64_t t = 0;

	for (unsigned i = 0; i < VQ_NET_DROP_MAX; i++)
		t += s->drops[i];
	return t;
}

/* One statistics line (vqd_ctl's stats callback). */
static void stats_line(void *arg, double dt, double t, bool final)
{
	struct daemon *d = arg;
	struct wstats *now = &d->st_now, *prev = &d->st_prev;
	unsigned i;

	stats_read(d, now);
	if (final)
		memset(prev, 0, sizeof(*prev));
	vqd_line_start(d->com.json, &now->c, &prev->c, dt, t, final);
	if (d->com.json) {
		printf(",\"mode\":\"%s\"", net_mode_names[d->o.mode]);
		vqd_json_rates(&now->c, &prev->c, dt, true, true);
		printf(",\"drops\":{");
		for (i = 0; i < VQ_NET_DROP_MAX; i++)
			printf("%s\"%s\":%" PRIu64, i ? "," : "",
			       vq_net_drop_name((enum vq_net_drop)i), now->drops[i]);
		printf("},\"tx_evicted\":%" PRIu64 ",\"rarp_sent\":%" PRIu64
		       ",\"tx_gso\":%" PRIu64 ",\"rx_gso\":%" PRIu64 ",\"mtu\":%u"
		       ",\"kicks_missed\":%" PRIu64 ",\"calls_late\":%" PRIu64,
		       now->evicted, __atomic_load_n(&d->rarp_sent, __ATOMIC_RELAXED),
		       now->tx_gso, now->rx_gso, d->mtu, now->kicks_missed,
		       now->calls_late);
		if (final) {
			vqd_json_backend(d->b);
			/* by ring index: receiveq0, transmitq0, receiveq1, ... */
			printf(",\"queue_packets\":[");
			for (i = 0; i < 2 * d->o.pairs; i++)
				printf("%s%" PRIu64, i ? "," : "", now->queue_packets[i]);
			printf("]");
		}
		printf("}\n");
	} else {
		printf("  drops %" PRIu64, drops_total(now));
		if (drops_total(now)) {
			printf(" (");
			for (i = 0; i < VQ_NET_DROP_MAX; i++)
				if (now->drops[i])
					printf(" %s=%" PRIu64, vq_net_drop_name((enum vq_net_drop)i),
					       now->drops[i]);
			printf(" )");
		}
		if (final)
			printf("\nsummary tx %" PRIu64 " packets %" PRIu64 " bytes, rx %" PRIu64
			       " packets %" PRIu64 " bytes, tx evicted %" PRIu64
			       ", rarp sent %" PRIu64,
			       now->c.tx_pkts, now->c.tx_bytes, now->c.rx_pkts,
			       now->c.rx_bytes, now->evicted,
			       __atomic_load_n(&d->rarp_sent, __ATOMIC_RELAXED));
		if (final && (now->tx_gso || now->rx_gso))
			printf("\nsegmentation offload frames: tx %" PRIu64 " rx %" PRIu64,
			       now->tx_gso, now->rx_gso);
		if (final && d->o.pairs > 1)
			for (i = 0; i < d->o.pairs; i++)
				printf("\npair %u: tx %" PRIu64 " rx %" PRIu64 " packets", i,
				       now->queue_packets[2 * i + 1], now->queue_packets[2 * i]);
		printf("\n");
	}
	fflush(stdout);
	*prev = *now;
}

static uint64_t offered_features(const struct daemon *d)
{
	uint64_t f = VQ_BIT(VQ_F_VERSION_1) | VQ_BIT(VQ_F_RING_PACKED) |
		     VQ_BIT(VQ_F_IN_ORDER) | VQ_BIT(VQ_F_EVENT_IDX) |
		     VQ_BIT(VQ_F_INDIRECT_DESC) |
		     VQ_BIT(VQ_NET_F_MRG_RXBUF) |
		     /* QEMU gives the guest an MTU (host_mtu) only if we
		      * offer this; it then tells us (NET_SET_MTU) */
		     VQ_BIT(VQ_NET_F_MTU) |
		     /* after a live migration the guest announces itself
		      * (gratuitous ARP) instead of QEMU sending a RARP */
		     VQ_BIT(VQ_NET_F_GUEST_ANNOUNCE);

	if (d->o.pairs > 1)
		f |= VQ_BIT(VQ_NET_F_MQ);
	if (d->o.no_mrg)
		f &= ~VQ_BIT(VQ_NET_F_MRG_RXBUF);
	/* only the TAP can finish a partial checksum or segment a TSO frame:
	 * the other modes never see a header */
	if (d->o.mode == M_TAP && !d->o.no_offloads)
		f |= VQ_NET_OFFLOADS;
	if (d->o.no_announce)
		f &= ~VQ_BIT(VQ_NET_F_GUEST_ANNOUNCE);
	return vqd_features(&d->com, f);
}

/* A broadcast frame of an experimental EtherType with a counting payload. */
static void build_frame(uint8_t *f, unsigned size)
{
	static const uint8_t src[6] = { 0x52, 0x54, 0x00, 0x00, 0x00, 0x01 };

	memset(f, 0xff, 6);
	memcpy(f + 6, src, 6);
	f[12] = 0x88;
	f[13] = 0xb5;
	for (unsigned i = 14; i < size; i++)
		f[i] = (uint8_t)i;
}

/* The daemon's state before any front-end: rings, the source's frames,
 * the TAP's queues. */
static void daemon_init(struct daemon *d)
{
	unsigned i;

	for (i = 0; i < 2 * MAX_PAIRS; i++) {
		d->rings[i].d = d;
		d->rings[i].index = i;
	}
	build_frame(d->frame, d->o.size);
	d->frame_iov = (struct iovec){ d->frame, d->o.size };
	for (i = 0; i < VQ_NET_BURST; i++)
		d->frames[i] = (struct vq_net_frame){ &d->frame_iov, 1, d->o.size, NULL };
	d->source_left = (int64_t)d->o.count;
	for (i = 0; i < MAX_PAIRS; i++)
		d->taps[i] = (struct tapq){ .d = d, .pair = i, .fd = -1, .tx_fd = -1 };
	pthread_mutex_init(&d->tap_lock, NULL);
}

/* The workers and the device on them, with its back-end. */
static int device_new(struct daemon *d, struct vqd_ctl *ctl)
{
	unsigned cpus[MAX_THREADS];
	struct vq_fw_config fc = {
		.threads = d->o.threads, .cpus = cpus, .ncpus = d->o.ncpus,
		.busy_poll_ns = d->com.busy_poll_us * 1000,
		.busy_poll_yield_ns = d->com.busy_poll_yield_us * 1000,
	};
	struct vq_fw_device dev = {
		.name = "virtq-net", .features = offered_features(d),
		.nqueues = 2 * d->o.pairs, .ops = &net_ops, .opaque = d,
	};
	int r;

	for (unsigned i = 0; i < d->o.ncpus; i++)
		cpus[i] = (unsigned)d->o.cpus[i];
	r = vq_fw_new(&fc, &d->fw);
	if (r == 0)
		r = vq_fw_dev_new(d->fw, &dev, &d->fwd);
	if (r < 0) {
		fprintf(stderr, "virtq-net: %s\n", strerror(-r));
		return r;
	}
	for (unsigned i = 0; i < 2 * d->o.pairs; i++)
		d->rings[i].fr = vq_fw_dev_ring(d->fwd, i);
	ctl->b = d->b = vq_fw_dev_backend(d->fwd);
	if (!d->com.quiet)
		fprintf(stderr, "virtq-net: %s mode, %u queue pair(s), %u thread(s), features 0x%" PRIx64 "\n",
			net_mode_names[d->o.mode], d->o.pairs, d->o.threads, dev.features);
	return 0;
}

int main(int argc, char **argv)
{
	static struct daemon d;
	struct vqd_ctl ctl = { .o = &d.com, .stats = stats_line, .arg = &d };
	int rc = 1;

	ctl.cli = net_parse(argc, argv, &d.o, &d.com);
	daemon_init(&d);
	if (d.o.mode == M_TAP && tap_open(&d) < 0) {
		tap_close(&d);
		return 1;
	}
	vqd_log_to_stderr(d.com.quiet);
	if (device_new(&d, &ctl) < 0 || vqd_open(&ctl) < 0)
		goto out;
	rc = vqd_run(&ctl);
	vqd_summary(&ctl);
out:
	/* the device owns the back-end: freeing it stops every ring */
	vq_fw_dev_free(d.fwd);
	ctl.b = NULL;
	vqd_close(&ctl);
	vq_fw_free(d.fw);
	tap_close(&d);
	return rc;
}
