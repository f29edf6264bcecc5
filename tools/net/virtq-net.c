// SPDX-License-Identifier: MIT
/*
 * virtq-net's device (virtq-net.h), on the library's framework
 * (virtq/framework.h): queue pair k runs on worker thread k % --threads,
 * where its rings start and stop and, in tap mode, its TAP queue (tap.c)
 * is an fd of the worker's loop.  This file is what a ring's turn does in
 * each mode, what a pair keeps beside its rings, and their totals; the
 * control plane is main.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <virtq/framework.h>
#include <virtq/net.h>
#include <virtq/runtime.h>

#include "tap.h"
#include "virtq-net.h"

/* What a ring's net queues counted, kept over its starts. */
struct ring_totals {
	uint64_t packets, bytes;
	uint64_t drops[VQ_NET_DROP_MAX];
	uint64_t evicted;               /* TX frames whose lines were flushed */
	uint64_t gso;                   /* segmentation offload frames */
};

/* One ring as the device sees it (its worker's). */
struct ring {
	struct net_dev *d;
	unsigned index;
	bool running;
	bool packed;
	struct vq_fw_ring *fr;
	struct vq_dev *dev;
	struct vq_net_queue *nq;
	struct ring_totals base;        /* from queues already freed */
};

struct net_dev {
	struct net_opts o;
	struct vqd_opts com;            /* the options every daemon takes */
	struct vq_fw *fw;
	struct vq_fw_dev *fwd;
	struct ring rings[2 * MAX_PAIRS];
	uint8_t frame[VQ_NET_MAX_FRAME];        /* source mode template */
	/* A burst of it, built once (read only, so workers share it). */
	struct iovec frame_iov;
	struct vq_net_frame frames[VQ_NET_BURST];
	struct tap tap;
	struct vq_vhu_backend *b;       /* for its IOTLB statistics */
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
	const struct net_dev *d = r->d;

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
	return rg->d->o.mode == M_TAP && tap_paused(&rg->d->tap.q[rg->index / 2]);
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
	/* Publish the answer before the layer completes the request: that
	 * completion is a store to the TX ring's line the guest just wrote,
	 * and stores are seen in order, so an answer published after it
	 * would wait for that line to cross too.  The call stays once per
	 * burst (process_tx). */
	if (r > 0 && vq_net_rx_flush(rx->nq) < 0)
		ring_broken(rx);
	/* Dropped frames were counted by the RX queue. */
	return 0;
}

static int process_tx(struct vq_rt_queue *q, void *arg,
		      const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct ring *r = arg;
	struct net_dev *d = r->d;
	struct ring *rx = &d->rings[r->index - 1];
	int n;

	if (tx_held(r))
		return 0;
	switch (d->o.mode) {
	case M_LOOPBACK:
		/* The answer's descriptor line, fetched beside the frame's:
		 * two misses at once.  In a full packed ring it is the line
		 * the guest's refill last wrote.  (Split has no such line;
		 * even the empty call showed in its round trip.) */
		if (rx->running && rx->packed)
			vq_dev_prefetch_avail(rx->dev);
		n = vq_net_tx_process(r->nq, b->pkts, sink_loopback, rx, bytes);
		if (rx->running && rx->nq) {
			if (vq_net_rx_flush(rx->nq) < 0)
				ring_broken(rx);
			else
				ring_call(rx);
		}
		break;
	case M_TAP:
		n = vq_net_tx_process(r->nq, b->pkts, tap_sink, &d->tap.q[r->index / 2],
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
	struct net_dev *d = r->d;
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

/* Tap: the ring's kick resumes its TAP queue, which waits for buffers. */
static int process_rx_tap(struct vq_rt_queue *q, void *arg,
			  const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct ring *rx = arg;

	return tap_resume(&rx->d->tap.q[rx->index / 2], b, bytes);
}

/* Ring i's turn and ring calls on its worker's loop. */
static vq_rt_process_fn turn_of(const struct net_dev *d, unsigned i,
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
/* The device's callbacks (the ring's worker)                          */
/* ------------------------------------------------------------------ */

/* virtio-net's bits by name (virtio 1.2, 5.1.3), for the messages. */
static const struct vqd_feature net_features[] = {
	{ VQ_NET_F_CSUM, "CSUM" }, { VQ_NET_F_GUEST_CSUM, "GUEST_CSUM" },
	{ VQ_NET_F_CTRL_GUEST_OFFLOADS, "CTRL_GUEST_OFFLOADS" }, { VQ_NET_F_MTU, "MTU" },
	{ VQ_NET_F_MAC, "MAC" }, { VQ_NET_F_GUEST_TSO4, "GUEST_TSO4" },
	{ VQ_NET_F_GUEST_TSO6, "GUEST_TSO6" }, { VQ_NET_F_GUEST_ECN, "GUEST_ECN" },
	{ VQ_NET_F_GUEST_UFO, "GUEST_UFO" }, { VQ_NET_F_HOST_TSO4, "HOST_TSO4" },
	{ VQ_NET_F_HOST_TSO6, "HOST_TSO6" }, { VQ_NET_F_HOST_ECN, "HOST_ECN" },
	{ VQ_NET_F_HOST_UFO, "HOST_UFO" }, { VQ_NET_F_MRG_RXBUF, "MRG_RXBUF" },
	{ VQ_NET_F_STATUS, "STATUS" }, { VQ_NET_F_CTRL_VQ, "CTRL_VQ" },
	{ 18, "CTRL_RX" }, { 19, "CTRL_VLAN" }, { 20, "CTRL_RX_EXTRA" },
	{ VQ_NET_F_GUEST_ANNOUNCE, "GUEST_ANNOUNCE" }, { VQ_NET_F_MQ, "MQ" },
	{ 23, "CTRL_MAC_ADDR" },
	{ 0, NULL },
};

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
	struct net_dev *d = opaque;
	unsigned i = vq_fw_ring_index(fr);
	struct ring *r = &d->rings[i];
	char fb[512];
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
	r->packed = vq_dev_features(r->dev) & VQ_BIT(VQ_F_RING_PACKED);
	if (!d->com.quiet)
		fprintf(stderr, "virtq-net: queue %u %s (%s, %u entries, features %s)\n",
			i, resumed ? "resumed" : "started",
			vq_net_is_tx_queue(i) ? "tx" : "rx", vq_dev_num(r->dev),
			vqd_features_str(fb, sizeof(fb), vq_dev_features(r->dev), net_features));
	if (d->o.mode == M_TAP && !vq_net_is_tx_queue(i))
		tap_start(&d->tap.q[i / 2], vq_fw_dev_loop(d->fwd, i / 2), fr, r->dev, r->nq);
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

/* A ring that pauses keeps its TAP queue attached (tap_stop). */
static void net_ring_stop(void *opaque, struct vq_fw_ring *fr, bool paused)
{
	struct net_dev *d = opaque;
	unsigned i = vq_fw_ring_index(fr);
	struct ring *r = &d->rings[i];

	if (d->o.mode == M_TAP && !vq_net_is_tx_queue(i))
		if (tap_stop(&d->tap.q[i / 2], !paused))
			r->base.drops[VQ_NET_DROP_NO_RX_BUF]++;
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
	struct net_dev *d = opaque;
	uint8_t frame[VQ_NET_RARP_LEN];
	unsigned len;
	char m[18];
	int e;

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
	len = vq_net_rarp_frame(mac, frame);
	if ((e = tap_write_frame(&d->tap, frame, len)) < 0) {
		fprintf(stderr, "virtq-net: RARP for %s on %s failed: %s\n", m,
			d->o.tap_name, strerror(-e));
		return e;
	}
	__atomic_add_fetch(&d->rarp_sent, 1, __ATOMIC_RELAXED);
	if (!d->com.quiet)
		fprintf(stderr, "virtq-net: RARP for %s sent on %s\n", m, d->o.tap_name);
	return 0;
}

/* The link the config space reports: a TAP's is up while the interface
 * is; the other modes have no link to lose. */
static bool net_link_up(struct net_dev *d)
{
	return d->o.mode != M_TAP || tap_is_up(&d->tap);
}

/* QEMU's host_mtu: the guest was told this MTU.  In tap mode the TAP
 * takes it too, so the host sends the guest frames that large without
 * fragmenting, and takes its frames; a TAP that refuses it fails the
 * request (QEMU then does not start the device rather than run it with
 * MTUs that disagree). */
static int dev_set_mtu(void *opaque, uint16_t mtu)
{
	struct net_dev *d = opaque;

	if (d->o.mode == M_TAP) {
		int e = tap_set_mtu(&d->tap, mtu);

		if (e < 0) {
			fprintf(stderr, "virtq-net: cannot set the MTU of %s to %u: %s\n",
				d->o.tap_name, mtu, strerror(-e));
			return e;
		}
	}
	d->mtu = mtu;
	if (!d->com.quiet)
		fprintf(stderr, "virtq-net: MTU %u%s%s\n", mtu,
			d->o.mode == M_TAP ? ", also on " : "",
			d->o.mode == M_TAP ? d->o.tap_name : "");
	return 0;
}

/* The config space served: 5.1.4's fields up to duplex, since Cloud
 * Hypervisor reads all 17 bytes of its VirtioNetConfig in one GET_CONFIG
 * and gives up on the device when refused.  Speed and duplex say
 * "unknown": SPEED_DUPLEX is not offered, the guest never reads them. */
struct net_config_served {
	struct vq_net_config_space c;
	uint32_t speed;
	uint8_t duplex;
} __attribute__((packed));

/* Control thread: the config space (5.1.4), for front-ends that do not
 * keep it themselves (crosvm, Cloud Hypervisor; QEMU keeps its own and
 * does not negotiate PROTOCOL_F_CONFIG for a net device). */
static void dev_get_config(void *opaque, uint32_t off, void *buf, uint32_t len)
{
	struct net_dev *d = opaque;
	unsigned mtu = d->mtu ? d->mtu : d->o.mtu ? d->o.mtu : 1500;
	struct net_config_served s = {
		.c.status = vq_le16(net_link_up(d) ? VQ_NET_S_LINK_UP : 0),
		.c.max_virtqueue_pairs = vq_le16((uint16_t)d->o.pairs),
		.c.mtu = vq_le16((uint16_t)mtu),
		.speed = vq_le32(0xffffffffu), .duplex = 0xff,
	};

	memcpy(s.c.mac, d->o.mac, sizeof(s.c.mac));
	/* The library checked off + len against config_len. */
	memcpy(buf, (uint8_t *)&s + off, len);
}

static const struct vq_fw_device_ops net_ops = {
	.ring_start = net_ring_start,
	.ring_stop = net_ring_stop,
	.get_config = dev_get_config,
	.send_rarp = dev_send_rarp,
	.set_mtu = dev_set_mtu,
};

static uint64_t offered_features(const struct net_dev *d)
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
		     VQ_BIT(VQ_NET_F_GUEST_ANNOUNCE) |
		     VQ_BIT(VQ_NET_F_STATUS);

	if (d->o.has_mac)
		f |= VQ_BIT(VQ_NET_F_MAC);
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

/* The device's state before any front-end: rings, the source's frames. */
static void dev_init(struct net_dev *d)
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
}

/* The workers and the device on them, with its back-end. */
static int workers_new(struct net_dev *d)
{
	char fb[512], pb[64];
	struct vq_fw_config fc = {
		.threads = d->o.threads, .cpus = d->o.cpus, .ncpus = d->o.ncpus,
	};
	struct vq_fw_device dev = {
		.name = "virtq-net", .features = offered_features(d),
		.nqueues = 2 * d->o.pairs, .ops = &net_ops, .opaque = d,
		.config_len = sizeof(struct net_config_served),
	};
	int r;

	vqd_poll_config(&d->com, &fc);
	r = vq_fw_new(&fc, &d->fw);
	if (r == 0)
		r = vq_fw_dev_new(d->fw, &dev, &d->fwd);
	if (r < 0) {
		fprintf(stderr, "virtq-net: %s\n", strerror(-r));
		return r;
	}
	for (unsigned i = 0; i < 2 * d->o.pairs; i++)
		d->rings[i].fr = vq_fw_dev_ring(d->fwd, i);
	d->b = vq_fw_dev_backend(d->fwd);
	if (!d->com.quiet)
		fprintf(stderr, "virtq-net: %s mode, %u queue pair(s), %u thread(s), "
			"%s, features offered %s\n", net_mode_names[d->o.mode], d->o.pairs,
			d->o.threads, vqd_poll_str(pb, sizeof(pb), &d->com),
			vqd_features_str(fb, sizeof(fb), dev.features, net_features));
	return 0;
}


int net_dev_new(const struct net_opts *o, const struct vqd_opts *com,
		struct net_dev **out)
{
	struct net_dev *d = calloc(1, sizeof(*d));
	int r;

	*out = d;
	if (!d)
		return -ENOMEM;
	d->o = *o;
	d->com = *com;
	dev_init(d);
	if (d->o.mode == M_TAP &&
	    (r = tap_open(&d->tap, d->o.tap_name, d->o.pairs, d->com.quiet)) < 0)
		return r;
	if (d->o.mode == M_TAP && d->o.mtu && (r = tap_set_mtu(&d->tap, d->o.mtu)) < 0) {
		fprintf(stderr, "virtq-net: cannot set the MTU of %s to %u: %s\n",
			d->o.tap_name, d->o.mtu, strerror(-r));
		return r;
	}
	return workers_new(d);
}

struct vq_vhu_backend *net_dev_backend(const struct net_dev *d)
{
	return d->b;
}

/* the device owns the back-end: freeing it stops every ring */
void net_dev_free(struct net_dev *d)
{
	if (!d)
		return;
	vq_fw_dev_free(d->fwd);
	vq_fw_free(d->fw);
	tap_close(&d->tap);
	free(d);
}

/* ------------------------------------------------------------------ */
/* Statistics                                                          */
/* ------------------------------------------------------------------ */

struct stats_call {
	struct net_dev *d;
	unsigned pair;
	struct net_stats *s;
};

/* On the pair's worker: its rings' totals into s. */
static void stats_pair(void *arg)
{
	struct stats_call *sc = arg;
	struct net_stats *s = sc->s;

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
		s->queue[i] = vqd_queue_count_of(c);
		s->queue[i].pkts = t.packets;
		s->queue[i].bytes = t.bytes;
	}
}

void net_dev_stats(struct net_dev *d, struct net_stats *s)
{
	memset(s, 0, sizeof(*s));
	for (unsigned k = 0; k < d->o.pairs; k++) {
		struct stats_call sc = { d, k, s };

		vq_fw_dev_call(d->fwd, k, stats_pair, &sc);
	}
	s->rarp_sent = __atomic_load_n(&d->rarp_sent, __ATOMIC_RELAXED);
	s->mtu = d->mtu;
}
