/* SPDX-License-Identifier: MIT */
/*
 * virtq/guest/net.h - a userspace virtio-net driver (virtio 1.2 section
 * 5.1): the guest's side of a net device, over the driver side of its
 * receiveq and transmitq (struct vq_drv).  A program that owns guest
 * memory (e.g. through the vhost-user front-end, virtq/guest/frontend.h)
 * sends and receives frames as a guest's driver would, without a VM:
 * virtq-perf net plays the guest with it.
 *
 * Buffers are fixed slots carved out of caller-given guest memory (one
 * area per queue), as the vsock driver's are:
 *  - TX: a slot per frame, its virtio_net_hdr first.  The caller reserves
 *    free slots (vq_netg_tx_reserve), writes the frames in place, and
 *    posts them (vq_netg_tx_post), which writes each header; a slot comes
 *    back free when the device has used it (vq_netg_tx_reap).  Free
 *    slots are a stack: the slot reserved next is the one freed last, its
 *    lines asked for in exclusive state as it comes back.
 *  - RX: every slot is posted at vq_netg_start(); vq_netg_rx_burst()
 *    gives whole frames - with VQ_NET_F_MRG_RXBUF, the num_buffers
 *    buffers the first one's header names (5.1.6.4) - and
 *    vq_netg_rx_repost() gives their buffers back to the device.  The
 *    buffers of a frame whose rest has not arrived yet wait, taken.
 *
 * The device is the adversary.  What the ring layer checks (used ids
 * never made available, used lengths beyond the buffer, the used index
 * running ahead) breaks the driver, as does a first buffer shorter than
 * the header or a num_buffers of 0 or beyond the buffers posted:
 * vq_netg_error() says -errno, vq_netg_error_msg() why (the spec section
 * first), and every later call fails fast with it.  Nothing the device
 * writes makes the driver read or write outside its slots.
 *
 * Nothing blocks and there is no loop: the caller waits for used buffers
 * on the rings itself (vq_rt_drv_wait_used, or busy polling), and the
 * cfg.kick callback is called when a queue must be kicked.
 * Single-threaded: one thread calls everything.
 *
 * ABI (none promised for libvirtq-guest, but the same rules): struct
 * vq_netg_config ends with reserved words that must be zero (vq_netg_new
 * says -EINVAL otherwise); the records passed in arrays (struct
 * vq_netg_buf, struct vq_netg_frame) never grow.
 */
#ifndef VIRTQ_NET_GUEST_H
#define VIRTQ_NET_GUEST_H

#include <stdint.h>

#include <virtq/net.h>
#include <virtq/ring.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vq_netg;

/* Guest memory the driver may use for one queue's buffers: size bytes at
 * the address descriptors carry (guest-physical, or an I/O virtual
 * address behind an IOMMU), which this process sees at hva. */
struct vq_netg_area {
	uint8_t *hva;
	uint64_t gpa;
	uint64_t size;
};

/* Receive buffers: 2048 bytes each, the header included. */
#define VQ_NETG_RX_BUF_DEFAULT 2048u
/* A TX slot's frame room: an Ethernet frame of a 1500-byte MTU. */
#define VQ_NETG_TX_FRAME_DEFAULT 1514u

struct vq_netg_config {
	/* receiveq and transmitq; one may be NULL (a driver that only sends,
	 * or only receives).  The features are the rings'. */
	struct vq_drv *rx, *tx;
	struct vq_netg_area rx_area, tx_area;
	uint32_t rx_buf_size;           /* bytes per receive buffer, its header
					 * included; 0: VQ_NETG_RX_BUF_DEFAULT */
	uint32_t tx_frame_max;          /* frame bytes a TX slot holds, its
					 * header not included; 0:
					 * VQ_NETG_TX_FRAME_DEFAULT */
	/* The ring says notify queue q.  0, or a -errno that the call which
	 * kicked returns (the driver is not broken by it). */
	int (*kick)(void *arg, enum vq_net_role q);
	void *arg;
	uint64_t reserved[8];           /* zero */
};

/* The area a queue of num slots needs (rx_buf_size, tx_frame_max as in
 * the config: 0 for the default). */
uint64_t vq_netg_rx_area_size(uint32_t rx_buf_size, unsigned num);
uint64_t vq_netg_tx_area_size(uint32_t tx_frame_max, unsigned num);

/*
 * Check the config and carve the slots, up to each ring's size: RX slots
 * of rx_buf_size bytes, TX slots of the header and tx_frame_max bytes,
 * each rounded up to 64.  -EINVAL: neither ring, a ring without an area
 * for one slot, a receive buffer not longer than the header or over
 * 1 GiB, a TX frame over VQ_NET_MAX_FRAME, a reserved word not zero;
 * -ENOMEM.
 */
int vq_netg_new(const struct vq_netg_config *cfg, struct vq_netg **out);
void vq_netg_free(struct vq_netg *g);
/* Post every receive buffer and kick.  0 or -errno. */
int vq_netg_start(struct vq_netg *g);
/* 0, or the -errno that broke the driver, and why (spec section first;
 * "" while it works). */
int vq_netg_error(const struct vq_netg *g);
const char *vq_netg_error_msg(const struct vq_netg *g);
/* The virtio_net_hdr's size on the wire (vq_net_hdr_len of the rings'
 * features): what precedes a frame in a slot and in a first buffer. */
uint32_t vq_netg_hdr_len(const struct vq_netg *g);

/*
 * Up to n free TX slots, in the order vq_netg_tx_post() posts them:
 * frame[i] is where frame i's bytes go (room for tx_frame_max), its header
 * room before it.  Nothing is taken: slots reserved and not posted are
 * reserved again by the next call, the same ones first.  How many (at most
 * the free slots and the ring's free descriptors), or -errno.
 */
int vq_netg_tx_reserve(struct vq_netg *g, uint8_t **frame, unsigned n);
/*
 * Post the first n reserved slots, frame i of len[i] bytes (at most
 * tx_frame_max: -EINVAL otherwise), behind hdr[i] (hdr NULL: every header
 * zero, no offload asked for), then kick if the ring says so.  How many
 * were posted (fewer when the ring is full), or -errno.
 */
int vq_netg_tx_post(struct vq_netg *g, const uint32_t *len,
		    const struct vq_net_hdr *hdr, unsigned n);
/* Take back up to max TX slots the device used (0: no limit).  How many,
 * or -errno. */
int vq_netg_tx_reap(struct vq_netg *g, unsigned max);
/* TX slots free, and posted but not yet used by the device. */
unsigned vq_netg_tx_free(const struct vq_netg *g);
unsigned vq_netg_tx_inflight(const struct vq_netg *g);

/* A used receive buffer: the bytes the device wrote into it. */
struct vq_netg_buf {
	uint8_t *data;
	uint64_t addr;                  /* as its descriptor carried it */
	uint32_t len;
};

/* A received frame: the buffers that hold it.  buf[0].data begins with
 * its virtio_net_hdr, vq_netg_hdr_len() bytes (vq_net_hdr_decode() reads
 * the offloads it names; the driver reads only num_buffers). */
struct vq_netg_frame {
	uint32_t len;                   /* the frame's bytes, header excluded */
	unsigned nbufs;
	const struct vq_netg_buf *buf;
};

/*
 * Take up to n whole frames the device delivered (taking no more buffers
 * than those frames need).  They stay valid, and their buffers taken,
 * until vq_netg_rx_repost().  How many, or -errno.
 */
int vq_netg_rx_burst(struct vq_netg *g, struct vq_netg_frame *f, unsigned n);
/* Give the buffers of every frame vq_netg_rx_burst() returned back to the
 * device, then kick if the ring says so.  0 or -errno. */
int vq_netg_rx_repost(struct vq_netg *g);
/* The buffers of the frames vq_netg_rx_burst() returned that
 * vq_netg_rx_repost() would give back now: a caller that refills in
 * batches (as Linux's virtio-net after a NAPI poll) reposts once these
 * reach its batch, leaving the ring's other entries untouched meanwhile. */
unsigned vq_netg_rx_taken(const struct vq_netg *g);
/* Where the next frame most likely begins: the buffer a device using
 * buffers in the order given fills next (its header first).  A guess, for
 * a prefetch while waiting; the frame's buffers are vq_netg_rx_burst()'s.
 * NULL without a receive queue. */
const uint8_t *vq_netg_rx_next(const struct vq_netg *g);

#ifdef __cplusplus
}
#endif
#endif
