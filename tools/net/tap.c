// SPDX-License-Identifier: MIT
/*
 * virtq-net's TAP queues (tap.h): opening the device, attaching and
 * detaching a pair's queue, its offloads, and the frames both ways: the
 * guest's frames written behind their virtio-net header, the host's read
 * and delivered into the pair's receive ring from the worker's loop,
 * pausing while the guest has no buffers.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tap.h"

/* The guest's frame goes to the TAP behind its header: the kernel does the
 * checksum and segmentation the header asks for (checked against the
 * offloads negotiated by the net layer, and again by the kernel). */
int tap_sink(void *arg, const struct iovec *iov, unsigned cnt, uint32_t len,
	     const struct vq_net_hdr *h)
{
	struct tapq *t = arg;
	struct iovec out[VQ_NET_TX_IOV + 1];
	uint8_t hb[12];
	uint32_t hlen = (uint32_t)__atomic_load_n(&t->tap->vnet_len, __ATOMIC_RELAXED);
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
static void tap_retarget(struct tap *t)
{
	int first = t->q[0].fd;

	for (unsigned k = 0; k < t->nqueues; k++)
		if (t->q[k].attached) {
			first = t->q[k].fd;
			break;
		}
	for (unsigned k = 0; k < t->nqueues; k++)
		__atomic_store_n(&t->q[k].tx_fd, t->q[k].attached ? t->q[k].fd : first,
				 __ATOMIC_RELAXED);
}

static int tap_attach_locked(struct tapq *t, bool on)
{
	struct ifreq ifr;

	if (!t->tap->mq || t->attached == on)
		return 0;
	if (!on) {
		/* move the pair's TX away first: a frame written to a
		 * detached queue is refused (and counted) */
		t->attached = false;
		tap_retarget(t->tap);
	}
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = on ? IFF_ATTACH_QUEUE : IFF_DETACH_QUEUE;
	if (ioctl(t->fd, TUNSETQUEUE, &ifr) < 0) {
		int e = errno;

		fprintf(stderr, "virtq-net: cannot %s TAP queue %u: %s\n",
			on ? "attach" : "detach", t->index, strerror(e));
		return -e;
	}
	if (on) {
		t->attached = true;
		tap_retarget(t->tap);
	}
	if (!t->tap->quiet)
		fprintf(stderr, "virtq-net: TAP queue %u %s\n", t->index,
			on ? "attached" : "detached");
	return 0;
}

/* Pairs attach on their own workers; where each pair's TX goes depends on
 * which are attached, so one at a time. */
static int tap_attach(struct tapq *t, bool on)
{
	int r;

	pthread_mutex_lock(&t->tap->lock);
	r = tap_attach_locked(t, on);
	pthread_mutex_unlock(&t->tap->lock);
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
	__atomic_store_n(&t->tap->vnet_len, hlen, __ATOMIC_RELAXED);
	return 0;
}

/* One queue per pair; a multi-queue TAP's queues start detached. */
int tap_open(struct tap *t, const char *name, unsigned nqueues, bool quiet)
{
	*t = (struct tap){ .name = name, .nqueues = nqueues, .mq = nqueues > 1,
			   .quiet = quiet };
	pthread_mutex_init(&t->lock, NULL);
	t->q = calloc(nqueues, sizeof(*t->q));
	if (!t->q)
		return -ENOMEM;
	for (unsigned k = 0; k < nqueues; k++)
		t->q[k] = (struct tapq){ .tap = t, .index = k, .fd = -1, .tx_fd = -1 };
	for (unsigned k = 0; k < nqueues; k++) {
		struct tapq *q = &t->q[k];
		int fd = tap_open_queue(name, t->mq);

		/* one pair on a TAP the operator made multi_queue: take it as
		 * a multi-queue TAP of one queue */
		if (fd == -EINVAL && !t->mq) {
			fd = tap_open_queue(name, true);
			t->mq = fd >= 0;
		}

		if (fd < 0) {
			fprintf(stderr, "virtq-net: cannot open TAP %s%s: %s%s\n",
				name, t->mq ? " as multi-queue" : "", strerror(-fd),
				t->mq && fd == -EINVAL ?
				" (a TAP made without multi_queue serves one pair)" : "");
			return fd;
		}
		q->fd = fd;
		q->attached = true;
		q->buf = malloc(12 + VQ_NET_MAX_FRAME);
		if (!q->buf)
			return -ENOMEM;
	}
	/* until a guest says otherwise: a 12-byte header, no offloads */
	if (tap_configure(&t->q[0], VQ_BIT(VQ_F_VERSION_1)) < 0)
		return -EIO;
	for (unsigned k = 0; k < nqueues; k++)
		if (tap_attach(&t->q[k], false) < 0)
			return -EIO;
	tap_retarget(t);
	return 0;
}

void tap_close(struct tap *t)
{
	for (unsigned k = 0; t->q && k < t->nqueues; k++) {
		struct tapq *q = &t->q[k];

		if (q->fd >= 0)
			close(q->fd);
		free(q->buf);
	}
	free(t->q);
	t->q = NULL;
}

/* No guest buffers: stop reading the TAP queue (frames wait there, and the
 * one in hand in buf) until the ring's kick resumes it (tap_resume); the
 * ring's queue takes a turn to ask for that kick. */
static void tap_pause(struct tapq *t)
{
	t->paused = true;
	vq_rt_fd_set_events(t->fdh, 0);
	vq_fw_ring_wake(t->rx);
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
		fprintf(stderr, "virtq-net: TAP queue %u: %s\n", t->index, strerror(errno));
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
	unsigned n = 0;

	while (n < b->pkts && *bytes < b->bytes) {
		uint32_t hlen = (uint32_t)__atomic_load_n(&t->tap->vnet_len,
							  __ATOMIC_RELAXED);
		struct vq_net_hdr h;
		struct iovec iov;
		ssize_t len;
		int r;

		if (!vq_dev_has_avail(t->rx_dev)) {
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
		r = vq_net_rx_deliver(t->rx_nq, &iov, 1, (uint32_t)iov.iov_len, &h);
		if (r == -EAGAIN) {
			t->held = len;
			tap_pause(t);
			break;
		}
		if (r < 0) {
			vq_fw_ring_broken(t->rx);
			tap_pause(t);
			break;
		}
		n++;
		*bytes += iov.iov_len;
	}
	if (vq_net_rx_flush(t->rx_nq) < 0)
		vq_fw_ring_broken(t->rx);
	else
		vq_fw_ring_signal(t->rx);
	return (int)n;
}

/* The TAP queue is readable. */
static int tap_turn(struct vq_rt_fd *h, void *arg, uint32_t revents,
		    const struct vq_rt_budget *b, uint64_t *bytes)
{
	return tap_deliver(arg, b, bytes);
}

/* Woken by the ring's kick (or its first turn) while the queue waits for
 * buffers: read it again, the frame in hand first. */
int tap_resume(struct tapq *t, const struct vq_rt_budget *b, uint64_t *bytes)
{
	if (!t->serving || !t->paused || t->read_failed || !vq_dev_has_avail(t->rx_dev))
		return 0;
	t->paused = false;
	if (vq_rt_fd_set_events(t->fdh, EPOLLIN) < 0) {
		t->paused = true;
		return 0;
	}
	return tap_deliver(t, b, bytes);
}

bool tap_paused(const struct tapq *t)
{
	return t->paused;
}

/* A ring that only pauses keeps its queue attached, and the frame in
 * hand: detaching would drop the frames waiting there, and a guest behind
 * a vIOMMU pauses its rings on every IOTLB flush. */
bool tap_stop(struct tapq *t, bool leave)
{
	bool dropped = false;

	vq_rt_fd_remove(t->fdh);
	t->fdh = NULL;
	t->serving = false;
	if (!leave)
		return false;
	if (t->held) {
		dropped = true;
		t->held = 0;
	}
	tap_attach(t, false);
	return dropped;
}

void tap_start(struct tapq *t, struct vq_rt_loop *loop, struct vq_fw_ring *fr,
	       struct vq_dev *dev, struct vq_net_queue *nq)
{
	if (t->serving)
		return;
	t->rx = fr;
	t->rx_dev = dev;
	t->rx_nq = nq;
	/* a detached queue cannot be read: its pair gets no host frames */
	if (tap_attach(t, true) < 0 || tap_configure(t, vq_dev_features(dev)) < 0)
		return;
	if (vq_rt_loop_add_fd(loop, t->fd, 0, tap_turn, t, &t->fdh) < 0) {
		fprintf(stderr, "virtq-net: TAP queue %u: cannot watch it\n", t->index);
		return;
	}
	t->serving = true;
	t->paused = true;
	t->read_failed = false;
}

/* Any attached queue reaches the network. */
int tap_write_frame(struct tap *t, const uint8_t *frame, unsigned len)
{
	uint8_t hdr[12] = { 0 };
	struct iovec iov[2] = {
		{ hdr, (size_t)__atomic_load_n(&t->vnet_len, __ATOMIC_RELAXED) },
		{ (void *)frame, len },
	};
	ssize_t w = writev(__atomic_load_n(&t->q[0].tx_fd, __ATOMIC_RELAXED), iov, 2);

	if (w < 0)
		return -errno;
	return (size_t)w == iov[0].iov_len + len ? 0 : -EIO;
}

int tap_set_mtu(struct tap *t, unsigned mtu)
{
	struct ifreq ifr = { .ifr_mtu = (int)mtu };
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), e = 0;

	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", t->name);
	if (s < 0 || ioctl(s, SIOCSIFMTU, &ifr) < 0)
		e = errno;
	if (s >= 0)
		close(s);
	return -e;
}

bool tap_is_up(const struct tap *t)
{
	struct ifreq ifr = { 0 };
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool up;

	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", t->name);
	up = s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags & IFF_UP);
	if (s >= 0)
		close(s);
	return up;
}
