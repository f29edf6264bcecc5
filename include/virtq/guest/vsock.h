/* SPDX-License-Identifier: MIT */
/*
 * virtq/guest/vsock.h - a userspace virtio-vsock driver (virtio 1.2 section
 * 5.10): the guest's side of a vsock device, over the driver side of its
 * rings (struct vq_drv).  What virtio-user is to virtio-net: a program
 * that owns guest memory (e.g. through the vhost-user front-end,
 * virtq/vhost_user.h) talks to a vsock device - ours, QEMU's, a kernel's
 * vhost-vsock - as a Linux guest would, without a VM.  virtq-perf vsock
 * and the vsock tests use it to play the guest.
 *
 * What it speaks, as the Linux driver does on the wire:
 *  - stream and seqpacket connections (5.10.6.5, 5.10.6.6) both ways:
 *    vq_vsg_connect() sends REQUEST; vq_vsg_listen() + vq_vsg_accept()
 *    answer the device's REQUESTs with RESPONSE;
 *  - credit flow control (5.10.6.3): it never sends more than the
 *    device's buf_alloc - (tx_cnt - fwd_cnt); its own window is
 *    cfg.buf_alloc per connection, and it sends CREDIT_UPDATE when the
 *    device's view of the free space gets low;
 *  - SHUTDOWN both ways then RST, as Linux closes; RST to packets for
 *    no connection and to an unknown type (5.10.6.4);
 *  - the TRANSPORT_RESET event (5.10.6.7) closes every connection.
 *
 * Buffers are fixed slots carved out of caller-given guest memory (one
 * area per queue): every RX slot is posted at start and reposted as soon
 * as its packet is handled, except that a connection may keep a data
 * packet's slot until the bytes are read (vq_vsg_read copies them
 * straight out of it), within bounds that leave the device half the RX
 * slots; TX slots come from a free list and return when the device uses
 * them.
 *
 * The device is the adversary.  What the ring layer checks (used ids
 * never made available, used lengths beyond the buffer, the used index
 * running ahead) breaks the driver: vq_vsg_error() says -errno and
 * vq_vsg_error_msg() why, and every later call fails fast.  A packet
 * whose header lies (a length beyond what the device wrote, data beyond
 * the credit we gave, an op the connection's state forbids, a message
 * end past the bound) is counted in stats.bad, leaves a message in
 * vq_vsg_last_bad(), and resets the connection it names (RST); bytes
 * already accepted stay readable.  Nothing the device writes makes the
 * driver read or write outside its slots or grow memory without bound.
 *
 * Nothing blocks and there is no loop: the caller calls vq_vsg_poll()
 * when the device notifies (or busy-polls it), and the cfg.kick callback
 * when a queue must be kicked.  Single-threaded: one thread calls
 * everything.
 *
 * ABI: struct vq_vsg_config ends with reserved words that must be zero
 * (vq_vsg_new() says -EINVAL otherwise); a new field takes words from
 * them, its zero meaning the old behaviour.  struct vq_vsg_stats is
 * library memory (vq_vsg_stats()); new counters are appended.
 */
#ifndef VIRTQ_VSOCK_GUEST_H
#define VIRTQ_VSOCK_GUEST_H

#include <stdbool.h>
#include <stdint.h>

#include <virtq/ring.h>
#include <virtq/vsock.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vq_vsg;
struct vq_vsg_conn;

/* Guest memory the driver may use for one queue's buffers: size bytes at
 * guest-physical gpa, which this process sees at hva. */
struct vq_vsg_area {
	uint8_t *hva;
	uint64_t gpa;
	uint64_t size;
};

struct vq_vsg_config {
	struct vq_drv *rx, *tx, *ev;    /* ev may be NULL (no event queue) */
	struct vq_vsg_area rx_area, tx_area, ev_area;
	uint64_t cid;                   /* the guest's CID (config space) */
	uint32_t rx_buf_size;           /* payload room per RX buffer; 0: 4096 */
	uint32_t tx_pkt_max;            /* payload per TX packet, <= 65536; 0: 65536 */
	uint32_t buf_alloc;             /* our window per connection; 0: 256 KiB */
	uint32_t backlog;               /* connections not yet accepted, per
					 * listening port; 0: 64 */
	/* The ring says notify queue q (VQ_VSOCK_RXQ, _TXQ, _EVQ). */
	void (*kick)(void *arg, unsigned q);
	void *arg;
	/* Count packets as Linux 6.12.92 on does: reset a connection (RST,
	 * counted in pkt_resets) when an RW packet arrives while (its RW
	 * packets not yet read to their end + 1) * pkt_truesize exceeds
	 * buf_alloc; Linux's pkt_truesize is SKB_TRUESIZE(0), 576 on 64-bit
	 * builds.  0: no count. */
	uint32_t pkt_truesize;
	/* Nonzero: take packets from any CID but ours and 0-1 (the sibling
	 * guests a device routes to, as a Linux guest without a host-side
	 * transport takes them); connections are then told apart by the
	 * peer's CID too.  0: only the host's (CID 2). */
	uint32_t siblings;
	uint64_t reserved[7];           /* zero */
};

enum vq_vsg_state {
	VQ_VSG_CONNECTING,
	VQ_VSG_ESTABLISHED,
	VQ_VSG_CLOSED,          /* RST received or sent */
};

/* Counters, in library memory; new ones are appended. */
struct vq_vsg_stats {
	uint64_t rx_pkts, tx_pkts;
	uint64_t rst_recv;
	uint64_t resets;                /* TRANSPORT_RESET events */
	uint64_t bad;                   /* packets whose header lied or made no sense */
	uint64_t credit_updates_sent;
	uint64_t conns_reset;           /* connections reset for a bad packet */
	uint64_t backlog_full;          /* REQUESTs refused: backlog full */
	uint64_t pkt_resets;            /* connections reset by pkt_truesize */
};

/*
 * Check the config and carve the slots: RX slots of 44 + rx_buf_size
 * bytes (rounded up to 64) in rx_area, up to the queue size; TX slots of
 * 44 + tx_pkt_max bytes in tx_area; 8 event slots of 8 bytes in ev_area.
 * -EINVAL: no rx or tx queue, a cid below 3 or above 2^32-1, an area too
 * small for one slot, tx_pkt_max over 65536, rx_buf_size or buf_alloc over
 * 1 GiB, a reserved word not zero; -ENOMEM.
 */
int vq_vsg_new(const struct vq_vsg_config *cfg, struct vq_vsg **out);
void vq_vsg_free(struct vq_vsg *g);
/* Post every RX and event buffer and kick.  0 or -errno. */
int vq_vsg_start(struct vq_vsg *g);
/* Take the used buffers of every queue, handle the packets, repost, send
 * what is owed, kick.  The number of used buffers handled, or -errno
 * (the driver is broken: vq_vsg_error_msg()). */
int vq_vsg_poll(struct vq_vsg *g);
/* Only take back used TX buffers.  Count or -errno. */
int vq_vsg_reap_tx(struct vq_vsg *g);
/* 0, or the -errno that broke the driver, and why (spec section first). */
int vq_vsg_error(const struct vq_vsg *g);
const char *vq_vsg_error_msg(const struct vq_vsg *g);
/* The newest bad packet stats.bad counted, as a message; "" if none. */
const char *vq_vsg_last_bad(const struct vq_vsg *g);
const struct vq_vsg_stats *vq_vsg_stats(const struct vq_vsg *g);
/* Free TX slots. */
unsigned vq_vsg_tx_free(const struct vq_vsg *g);

/* Raw packets, to test a device's checks: send exactly n bytes as one TX
 * chain (0, -ENOSPC, -EINVAL if n is over a slot); a header filled in for
 * this guest (values in host order, the header little-endian). */
int vq_vsg_send_bytes(struct vq_vsg *g, const void *buf, uint32_t n);
void vq_vsg_hdr(struct vq_vsg *g, struct vq_vsock_hdr *h, uint32_t src_port,
		uint32_t dst_port, uint16_t op, uint32_t len);

/* Connect to the host's port with a socket of the type (VQ_VSOCK_TYPE_*):
 * REQUEST sent, *out in VQ_VSG_CONNECTING until the device answers.
 * 0, -EINVAL (type), -ENOSPC (no TX slot now), -ENOMEM, or the error. */
int vq_vsg_connect(struct vq_vsg *g, uint32_t port, uint16_t type,
		   struct vq_vsg_conn **out);
/* The same to another CID (a sibling guest the device routes to; the
 * driver needs cfg.siblings to take its answers).  -EINVAL also for a
 * CID below 2, our own or above 2^32-1. */
int vq_vsg_connect_cid(struct vq_vsg *g, uint64_t cid, uint32_t port,
		       uint16_t type, struct vq_vsg_conn **out);
/* Accept REQUESTs to port (up to 16 ports).  0, -ENOSPC. */
int vq_vsg_listen(struct vq_vsg *g, uint32_t port);
/* A connection that arrived on a listening port (its RESPONSE sent), or
 * NULL if none waits. */
struct vq_vsg_conn *vq_vsg_accept(struct vq_vsg *g, uint32_t port);

enum vq_vsg_state vq_vsg_state(const struct vq_vsg_conn *c);
/* Stream: send up to len bytes (credit and TX slots permitting): bytes
 * sent, 0 if none could go now, -EPIPE after RST or a SHUTDOWN. */
long vq_vsg_write(struct vq_vsg_conn *c, const void *buf, uint32_t len);
/* Seqpacket: send one message (packets of tx_pkt_max, the last with
 * SEQ_EOM) if the credit and TX slots take all of it: len, 0 if not now,
 * -EPIPE, -EINVAL on a stream. */
long vq_vsg_write_msg(struct vq_vsg_conn *c, const void *buf, uint32_t len);
/* Seqpacket: take the next whole message: its length, -EAGAIN if none has
 * ended yet, -EMSGSIZE if it is longer than cap (left in place). */
long vq_vsg_read_msg(struct vq_vsg_conn *c, void *buf, uint32_t cap);
/* Take up to len received bytes; 0 if none (check vq_vsg_eof). */
uint32_t vq_vsg_read(struct vq_vsg_conn *c, void *buf, uint32_t len);
uint32_t vq_vsg_readable(const struct vq_vsg_conn *c);
/* The peer sent SHUTDOWN SEND (or RST) and every byte was read. */
bool vq_vsg_eof(const struct vq_vsg_conn *c);
/* The SHUTDOWN flags the device sent (VQ_VSOCK_SHUTDOWN_*). */
uint32_t vq_vsg_peer_shutdown(const struct vq_vsg_conn *c);
/* Send SHUTDOWN with flags.  0, -EPIPE after RST, -ENOSPC. */
int vq_vsg_shutdown(struct vq_vsg_conn *c, uint32_t flags);
/* Send RST and forget c (freed once the RST went out). */
void vq_vsg_reset(struct vq_vsg_conn *c);
/* Forget c without a packet (after VQ_VSG_CLOSED). */
void vq_vsg_release(struct vq_vsg_conn *c);
uint32_t vq_vsg_local_port(const struct vq_vsg_conn *c);
uint32_t vq_vsg_peer_port(const struct vq_vsg_conn *c);
/* The CID of the connection's other end (2: the host). */
uint64_t vq_vsg_peer_cid(const struct vq_vsg_conn *c);
/* Bytes the device's credit allows now. */
uint32_t vq_vsg_credit(const struct vq_vsg_conn *c);
/* The op of the newest packet to our port local_port that matched no
 * connection (e.g. the RST to a refused REQUEST), or 0. */
uint16_t vq_vsg_orphan_op(struct vq_vsg *g, uint32_t local_port);

#ifdef __cplusplus
}
#endif
#endif
