/* SPDX-License-Identifier: MIT */
/*
 * virtq/net.h - the virtio-net device layer (VIRTIO 1.2 §5.1), device side.
 *
 * Pure over struct vq_dev queues: no sockets, no threads.  A TX queue
 * (guest -> us, transmitq) is drained in bursts and every frame is handed to
 * a sink callback as iovecs straight into guest memory (no copy); an RX
 * queue (us -> guest, receiveq) takes frames given as iovecs and copies them
 * into guest buffers, merging several buffers for one frame when
 * VQ_NET_F_MRG_RXBUF was negotiated.
 *
 * Used entries are filled as frames complete and flushed in batches
 * (used_batch).  A used entry is written only for a buffer that was written,
 * with the exact number of bytes written: a buffer popped for a frame that
 * is then dropped goes back to the ring unused (vq_dev_unpop), so the guest
 * never sees a stale frame in it.
 *
 * Nothing is lost silently: every frame dropped is counted by reason.
 * A driver that breaks the device type's rules (a TX chain with a writable
 * part, a chain shorter than the header, an RX chain with a readable part)
 * breaks the queue (vq_dev_fail) with the rule in the message.
 */
#ifndef VIRTQ_NET_H
#define VIRTQ_NET_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include <virtq/ring.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Feature bits (5.1.3). */
#define VQ_NET_F_CSUM        0
#define VQ_NET_F_GUEST_CSUM  1
#define VQ_NET_F_CTRL_GUEST_OFFLOADS 2
#define VQ_NET_F_MTU         3
#define VQ_NET_F_MAC         5
#define VQ_NET_F_GUEST_TSO4  7
#define VQ_NET_F_GUEST_TSO6  8
#define VQ_NET_F_GUEST_ECN   9
#define VQ_NET_F_GUEST_UFO   10
#define VQ_NET_F_HOST_TSO4   11
#define VQ_NET_F_HOST_TSO6   12
#define VQ_NET_F_HOST_ECN    13
#define VQ_NET_F_HOST_UFO    14
#define VQ_NET_F_MRG_RXBUF   15
#define VQ_NET_F_STATUS      16
#define VQ_NET_F_CTRL_VQ     17
#define VQ_NET_F_GUEST_ANNOUNCE 21
#define VQ_NET_F_MQ          22

/* Config space (5.1.4), the fields up to mtu; little-endian.  mac exists
 * with VQ_NET_F_MAC, status with VQ_NET_F_STATUS, max_virtqueue_pairs with
 * VQ_NET_F_MQ, mtu with VQ_NET_F_MTU. */
struct vq_net_config_space {
	uint8_t mac[6];
	uint16_t status;
	uint16_t max_virtqueue_pairs;
	uint16_t mtu;
} __attribute__((packed));

#define VQ_NET_S_LINK_UP  1
#define VQ_NET_S_ANNOUNCE 2

/* Header flags and GSO types (5.1.6). */
#define VQ_NET_HDR_F_NEEDS_CSUM 1
#define VQ_NET_HDR_F_DATA_VALID 2
#define VQ_NET_HDR_F_RSC_INFO   4
#define VQ_NET_HDR_GSO_NONE     0
#define VQ_NET_HDR_GSO_TCPV4    1
#define VQ_NET_HDR_GSO_UDP      3
#define VQ_NET_HDR_GSO_TCPV6    4
#define VQ_NET_HDR_GSO_ECN      0x80

/* struct virtio_net_hdr, little-endian in guest memory.  The last field
 * exists on the wire only when the header is 12 bytes (vq_net_hdr_len). */
struct vq_net_hdr {
	uint8_t flags;
	uint8_t gso_type;
	uint16_t hdr_len;
	uint16_t gso_size;
	uint16_t csum_start;
	uint16_t csum_offset;
	uint16_t num_buffers;
};

/* The header size on the wire (5.1.6): 12 bytes with VERSION_1 or
 * MRG_RXBUF, 10 for a legacy device without MRG_RXBUF. */
static inline uint32_t vq_net_hdr_len(uint64_t features)
{
	return (features & (VQ_BIT(VQ_F_VERSION_1) |
			    VQ_BIT(VQ_NET_F_MRG_RXBUF))) ? 12 : 10;
}

/* The header from and to its wire form (little-endian, hdr_len bytes:
 * num_buffers only in a 12-byte one).  A TAP opened with IFF_VNET_HDR
 * speaks the same form. */
static inline uint16_t vq_net_rd16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return vq_le16(v);
}

static inline void vq_net_wr16(uint8_t *p, uint16_t v)
{
	v = vq_le16(v);
	memcpy(p, &v, 2);
}

static inline void vq_net_hdr_decode(const uint8_t *b, uint32_t hdr_len,
				     struct vq_net_hdr *h)
{
	h->flags = b[0];
	h->gso_type = b[1];
	h->hdr_len = vq_net_rd16(b + 2);
	h->gso_size = vq_net_rd16(b + 4);
	h->csum_start = vq_net_rd16(b + 6);
	h->csum_offset = vq_net_rd16(b + 8);
	h->num_buffers = hdr_len >= 12 ? vq_net_rd16(b + 10) : 0;
}

/* Field by field: RX writes one per frame into guest memory, and fixed
 * stores are cheaper there than a copy of variable length. */
static inline void vq_net_hdr_encode(uint8_t *b, uint32_t hdr_len,
				     const struct vq_net_hdr *h)
{
	b[0] = h->flags;
	b[1] = h->gso_type;
	vq_net_wr16(b + 2, h->hdr_len);
	vq_net_wr16(b + 4, h->gso_size);
	vq_net_wr16(b + 6, h->csum_start);
	vq_net_wr16(b + 8, h->csum_offset);
	if (hdr_len >= 12)
		vq_net_wr16(b + 10, h->num_buffers);
}

/* Virtqueue numbering (5.1.2): receiveq k is 2k, transmitq k is 2k+1. */
static inline bool vq_net_is_tx_queue(unsigned vq_index)
{
	return vq_index & 1;
}

/* The features this layer implements (on top of VQ_RING_FEATURES).
 * GUEST_ANNOUNCE needs nothing here: under vhost-user the VMM owns the
 * config space and the control queue, and the guest's announcements travel
 * as ordinary TX frames; the backend only has to let QEMU offer it. */
#define VQ_NET_FEATURES (VQ_BIT(VQ_NET_F_MRG_RXBUF) | \
			 VQ_BIT(VQ_NET_F_MQ) |     \
			 VQ_BIT(VQ_NET_F_GUEST_ANNOUNCE) | VQ_NET_OFFLOADS)

/*
 * Checksum and segmentation offloads.  The layer checks TX headers against
 * the HOST_* bits negotiated and RX headers against the GUEST_* bits, and
 * passes them on; doing the work is the sink's and the source's (a TAP
 * opened with IFF_VNET_HDR and told the guest's offloads does it all).  A
 * backend offers them only if its sink and source can: a sink that would
 * put a partial checksum or a 64 KiB TSO frame on a wire cannot.
 */
#define VQ_NET_OFFLOADS (VQ_BIT(VQ_NET_F_CSUM) |        \
			 VQ_BIT(VQ_NET_F_GUEST_CSUM) |  \
			 VQ_BIT(VQ_NET_F_GUEST_TSO4) |  \
			 VQ_BIT(VQ_NET_F_GUEST_TSO6) |  \
			 VQ_BIT(VQ_NET_F_GUEST_ECN) |   \
			 VQ_BIT(VQ_NET_F_HOST_TSO4) |   \
			 VQ_BIT(VQ_NET_F_HOST_TSO6) |   \
			 VQ_BIT(VQ_NET_F_HOST_ECN))

/* Default and largest frame (without the header) the layer accepts: the
 * largest TSO frame, an IPv6 payload of 65535 bytes behind its header and
 * an Ethernet header (5.1.6.3). */
#define VQ_NET_MAX_FRAME 65589u
/* The least MSS a transmitted segmentation frame may ask for: Linux's
 * TCP_MIN_MSS.  Smaller ones are dropped as bad headers (no guest TCP
 * stack sends them; vhost-net would pass them to the host to cut up). */
#define VQ_NET_MIN_GSO_SIZE 88u
/* Shortest frame accepted: an Ethernet header. */
#define VQ_NET_MIN_FRAME 14u
/* Chains popped per TX burst, and segments one TX chain may have. */
#define VQ_NET_BURST     32u
#define VQ_NET_TX_IOV    256u
/* The most guest buffers one RX frame may be merged into. */
#define VQ_NET_RX_MAX_BUFS 64u

/* Why a frame was dropped. */
enum vq_net_drop {
	VQ_NET_DROP_NO_RX_BUF = 0,  /* the guest had no (or not enough) RX buffers */
	VQ_NET_DROP_BAD_HDR,        /* a header asks for an offload not negotiated
				     * or breaks its rules (TX: read only with
				     * VQ_NET_F_CSUM) */
	VQ_NET_DROP_OVERSIZE,       /* frame larger than the limit or the buffer */
	VQ_NET_DROP_SINK_FULL,      /* the sink had no room now (a TAP that would block) */
	VQ_NET_DROP_RUNT,           /* shorter than an Ethernet header */
	VQ_NET_DROP_SINK,           /* the sink refused it for another reason */
	VQ_NET_DROP_MAX,
};
#define VQ_NET_DROP_SLOTS 16u

/* Name of a drop reason ("no_rx_buf", ...), for statistics. */
const char *vq_net_drop_name(enum vq_net_drop why);

struct vq_net_stats {
	uint64_t packets;           /* frames delivered (RX) or passed on (TX) */
	uint64_t bytes;             /* their bytes, header excluded */
	uint64_t buffers;           /* guest chains used */
	uint64_t flushes;           /* used-index publications */
	uint64_t evicted;           /* TX frames whose lines were flushed */
	uint64_t gso;               /* of packets: segmentation offload frames */
	/* Indexed by enum vq_net_drop; a reason added later takes a slot
	 * from [VQ_NET_DROP_MAX, VQ_NET_DROP_SLOTS), so the fields after
	 * this one keep their offsets.  New counters append at the end. */
	uint64_t drops[VQ_NET_DROP_SLOTS];
};

enum vq_net_tx_evict {
	VQ_NET_TX_EVICT_OFF = 0,
	VQ_NET_TX_EVICT_ON,
	/* Alternate on and off over a few windows of VQ_NET_EVICT_WINDOW
	 * frames, keep the setting that took frames faster for
	 * VQ_NET_EVICT_KEEP windows, then measure again: the placement of
	 * the guest's vCPU relative to ours may change under us. */
	VQ_NET_TX_EVICT_AUTO,
};
#define VQ_NET_EVICT_WINDOW 32768u
#define VQ_NET_EVICT_KEEP 64u

enum vq_net_role {
	VQ_NET_RX = 0,              /* receiveq: we write frames for the guest */
	VQ_NET_TX = 1,              /* transmitq: the guest's frames to us */
};

struct vq_net_queue_config {
	struct vq_dev *dev;         /* the ring; features come from it */
	enum vq_net_role role;
	/* Publish used entries every used_batch buffers: 1 = each on its own
	 * (vq_dev_push), 0 = once per burst (the default).  Whatever is staged
	 * is always published before vq_net_tx_process() returns and by
	 * vq_net_rx_flush(). */
	unsigned used_batch;
	uint32_t max_frame;         /* 0: VQ_NET_MAX_FRAME */
	/* TX: once the sink has taken a frame, flush its first two lines out
	 * of this core's caches (CLFLUSHOPT; off without it).  The guest
	 * rewrites those lines for a later frame; a copy left here costs it a
	 * cross-core invalidation, a flushed line only a miss.  Which is
	 * cheaper depends on where the guest's core is: flushing wins when it
	 * shares no cache with ours and loses when it shares the L3 (a miss
	 * to memory instead of a hit there; measured in 88f2fb1).  AUTO measures both
	 * and keeps the faster, again and again (see enum).  Only for a sink
	 * that reads the frame: a line it never touched lives only in the
	 * guest's cache, and flushing it there costs the guest a miss for
	 * nothing. */
	enum vq_net_tx_evict tx_evict;
	/* The clock AUTO measures with; NULL: vq_rt_now_ns. */
	uint64_t (*now_ns)(void *arg);
	void *clock_arg;
	/* Zero: room for fields a later version adds (0 = today's
	 * behaviour); vq_net_queue_new refuses others with -EINVAL. */
	uint64_t reserved[4];
};

struct vq_net_queue;

/* -EINVAL (no dev, a role that is neither, max_frame over
 * VQ_NET_MAX_FRAME, a reserved word not zero), -ENOMEM. */
int vq_net_queue_new(const struct vq_net_queue_config *cfg,
		     struct vq_net_queue **out);
void vq_net_queue_free(struct vq_net_queue *q);
/* Forget staged state and statistics (after the ring was reset). */
void vq_net_queue_reset(struct vq_net_queue *q);

struct vq_dev *vq_net_queue_dev(const struct vq_net_queue *q);
const struct vq_net_stats *vq_net_queue_stats(const struct vq_net_queue *q);
/* Count a drop that happened outside this layer (e.g. a source that found
 * no RX buffer before building a frame). */
void vq_net_queue_count_drop(struct vq_net_queue *q, enum vq_net_drop why);

/*
 * The TX sink: one frame (header stripped) as iovecs into guest memory,
 * valid only until the callback returns.  hdr is the frame's header in host
 * byte order.  Return 0 if the frame was taken, a positive enum vq_net_drop
 * + 1 to have it counted as dropped for that reason, or -errno to stop
 * processing (the chain is still returned to the guest).
 */
typedef int (*vq_net_tx_fn)(void *arg, const struct iovec *iov, unsigned iovcnt,
			    uint32_t len, const struct vq_net_hdr *hdr);

/* Sink return value for a drop. */
#define VQ_NET_SINK_DROP(why) ((int)(why) + 1)

/*
 * Drain up to max_pkts TX chains (0: no limit but the ring) in bursts of
 * VQ_NET_BURST, passing each valid frame to fn and returning every chain as
 * used with length 0.  Adds the frame bytes to *bytes if bytes is not NULL.
 * Returns the number of chains consumed, or -errno when the queue is broken
 * (by the ring or by this layer's rules) or fn returned -errno (-EINVAL
 * too for an RX queue).  fn may
 * return -EAGAIN for "not now": that frame and the rest stay in the ring,
 * and the chains consumed so far are returned.
 */
int vq_net_tx_process(struct vq_net_queue *q, unsigned max_pkts,
		      vq_net_tx_fn fn, void *arg, uint64_t *bytes);

/*
 * Deliver one frame of len bytes, gathered from iov[0, iovcnt), to the
 * guest: a header (hdr, or all-zero if NULL; num_buffers is set here)
 * followed by the frame, in one RX chain, or in several with MRG_RXBUF.
 * The used entries are staged and published by the used_batch rule or
 * vq_net_rx_flush().
 * Returns 1 if delivered, 0 if dropped (counted: no RX buffer, oversize),
 * -EAGAIN if the ring waits for an IOTLB entry (nothing counted: deliver
 * the frame again after the next kick), -errno if the queue is broken
 * (-EINVAL too for a TX queue).
 */
int vq_net_rx_deliver(struct vq_net_queue *q, const struct iovec *iov,
		      unsigned iovcnt, uint32_t len, const struct vq_net_hdr *hdr);

/* One frame for vq_net_rx_deliver_burst. */
struct vq_net_frame {
	const struct iovec *iov;
	unsigned iovcnt;
	uint32_t len;
	const struct vq_net_hdr *hdr;   /* NULL: all-zero */
};

/*
 * Deliver frames in order as vq_net_rx_deliver() would, but popping the
 * guest's buffers in bursts and prefetching them before the copies (a frame
 * that needs several buffers, or does not fit, takes the one-frame path).
 * Stops at the first frame for which the guest has no buffer at all,
 * without counting it: the caller keeps or drops it.  Returns how many
 * frames were handled (delivered, or dropped and counted by the one-frame
 * path), or -errno if the queue is broken (-EINVAL too for a TX queue).
 */
int vq_net_rx_deliver_burst(struct vq_net_queue *q, const struct vq_net_frame *f,
			    unsigned n);

/* Publish staged RX used entries.  Returns the buffers published or -errno. */
int vq_net_rx_flush(struct vq_net_queue *q);

/* Are RX buffers available?  (cheap probe, no validation) */
bool vq_net_rx_has_buffers(struct vq_net_queue *q);

/*
 * For loopback: describe the frame in iov[0, iovcnt) with its destination
 * and source MAC addresses swapped, without writing guest memory (TX
 * buffers are device-readable only).  mac[12] receives the swapped
 * addresses; out (room for iovcnt + 1 entries) gets mac followed by the rest
 * of the frame.  Returns the number of entries in out, or -EINVAL for a
 * frame shorter than 12 bytes.
 */
int vq_net_mac_swapped(const struct iovec *iov, unsigned iovcnt, uint32_t len,
		       uint8_t mac[12], struct iovec *out);

/* A RARP request (RFC 903) "from" mac, broadcast: what announces a migrated
 * guest to the switches (VHOST_USER_SEND_RARP), padded to the 60-byte
 * Ethernet minimum.  Returns VQ_NET_RARP_LEN. */
#define VQ_NET_RARP_LEN 60u
unsigned vq_net_rarp_frame(const uint8_t mac[6], uint8_t frame[VQ_NET_RARP_LEN]);

#ifdef __cplusplus
}
#endif
#endif
