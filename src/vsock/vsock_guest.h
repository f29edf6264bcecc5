/* SPDX-License-Identifier: MIT */
/*
 * A userspace virtio-vsock guest driver over struct vq_drv: what the tests
 * and virtq-perf vsock use to play the guest.  Stream sockets with credit
 * flow control, modelled on what the Linux driver does on the wire (it
 * answers SHUTDOWN+empty with RST, sends CREDIT_UPDATE when the peer's view
 * of its free space gets low, closes with SHUTDOWN both ways).  Not a
 * hardened peer: it trusts the device only as far as not to crash.
 *
 * Internal to the project (tests and tools link the static library).
 */
#ifndef VIRTQ_VSOCK_GUEST_H
#define VIRTQ_VSOCK_GUEST_H

#include <stdbool.h>
#include <stdint.h>

#include <virtq/ring.h>
#include <virtq/vsock.h>

#include "internal.h"

struct vq_vsg;
struct vq_vsg_conn;

/* Guest memory the driver may use for one queue's buffers. */
struct vq_vsg_area {
	uint8_t *hva;
	uint64_t gpa;
	uint64_t size;
};

struct vq_vsg_config {
	struct vq_drv *rx, *tx, *ev;    /* ev may be NULL */
	struct vq_vsg_area rx_area, tx_area, ev_area;
	uint64_t cid;
	uint32_t rx_buf_size;           /* payload room per RX buffer; 0: 4096 */
	uint32_t tx_pkt_max;            /* payload per TX packet; 0: 65536 */
	uint32_t buf_alloc;             /* per connection; 0: 256 KiB */
	/* The ring says notify queue q (after vq_drv_kick_prepare). */
	void (*kick)(void *arg, unsigned q);
	void *arg;
};

enum vq_vsg_state {
	VSG_CONNECTING,
	VSG_ESTABLISHED,
	VSG_CLOSED,             /* RST received or sent */
};

struct vq_vsg_stats {
	uint64_t rx_pkts, tx_pkts;
	uint64_t rst_recv, resets;      /* resets: TRANSPORT_RESET events */
	uint64_t bad;                   /* packets that made no sense */
	uint64_t credit_updates_sent;
};

VQ_INTERNAL int vq_vsg_new(const struct vq_vsg_config *cfg, struct vq_vsg **out);
VQ_INTERNAL void vq_vsg_free(struct vq_vsg *g);
/* Post every RX and event buffer and kick.  0 or -errno. */
VQ_INTERNAL int vq_vsg_start(struct vq_vsg *g);
/* Reap used buffers on every queue, handle the packets, repost, send what
 * is owed.  Returns the number of used buffers handled, or -errno. */
VQ_INTERNAL int vq_vsg_poll(struct vq_vsg *g);
/* Only take back used TX buffers.  Count or -errno. */
VQ_INTERNAL int vq_vsg_reap_tx(struct vq_vsg *g);

/* Send exactly n bytes as one TX chain (hostile tests).  0, -ENOSPC. */
VQ_INTERNAL int vq_vsg_send_bytes(struct vq_vsg *g, const void *buf, uint32_t n);
/* A header filled in for this guest (host order in, LE out). */
VQ_INTERNAL void vq_vsg_hdr(struct vq_vsg *g, struct vq_vsock_hdr *h,
			    uint32_t src_port, uint32_t dst_port, uint16_t op,
			    uint32_t len);

VQ_INTERNAL struct vq_vsg_conn *vq_vsg_connect(struct vq_vsg *g, uint32_t port);
/* A connection of the type (VQ_VSOCK_TYPE_*). */
VQ_INTERNAL struct vq_vsg_conn *vq_vsg_connect_type(struct vq_vsg *g, uint32_t port,
						    uint16_t type);
VQ_INTERNAL int vq_vsg_listen(struct vq_vsg *g, uint32_t port);
/* A connection that arrived on a listening port, or NULL. */
VQ_INTERNAL struct vq_vsg_conn *vq_vsg_accept(struct vq_vsg *g, uint32_t port);

VQ_INTERNAL enum vq_vsg_state vq_vsg_state(const struct vq_vsg_conn *c);
/* Send up to len bytes (credit and TX slots permitting): bytes sent, 0 if
 * none could go now, -EPIPE after RST or our SHUTDOWN SEND. */
VQ_INTERNAL long vq_vsg_write(struct vq_vsg_conn *c, const void *buf, uint32_t len);
/* Seqpacket: send one message (packets of tx_pkt_max, the last with
 * SEQ_EOM) if the credit and TX slots take all of it: len, 0 if not now,
 * -EPIPE, -EINVAL on a stream. */
VQ_INTERNAL long vq_vsg_write_msg(struct vq_vsg_conn *c, const void *buf, uint32_t len);
/* Seqpacket: take the next whole message: its length, -EAGAIN if none has
 * ended yet, -EMSGSIZE if it is longer than cap (left in place). */
VQ_INTERNAL long vq_vsg_read_msg(struct vq_vsg_conn *c, void *buf, uint32_t cap);
/* Take up to len received bytes; 0 if none (check vq_vsg_eof). */
VQ_INTERNAL uint32_t vq_vsg_read(struct vq_vsg_conn *c, void *buf, uint32_t len);
VQ_INTERNAL uint32_t vq_vsg_readable(const struct vq_vsg_conn *c);
/* The peer sent SHUTDOWN SEND (or RST) and every byte was read. */
VQ_INTERNAL bool vq_vsg_eof(const struct vq_vsg_conn *c);
VQ_INTERNAL uint32_t vq_vsg_peer_shutdown(const struct vq_vsg_conn *c);
VQ_INTERNAL int vq_vsg_shutdown(struct vq_vsg_conn *c, uint32_t flags);
/* Send RST and forget c. */
VQ_INTERNAL void vq_vsg_reset(struct vq_vsg_conn *c);
/* Forget c without a packet (after VSG_CLOSED). */
VQ_INTERNAL void vq_vsg_release(struct vq_vsg_conn *c);
VQ_INTERNAL uint32_t vq_vsg_local_port(const struct vq_vsg_conn *c);
VQ_INTERNAL uint32_t vq_vsg_peer_port(const struct vq_vsg_conn *c);
/* Bytes the peer's credit allows now. */
VQ_INTERNAL uint32_t vq_vsg_credit(const struct vq_vsg_conn *c);
/* The last packet's op the device sent on (src_port, dst_port) when it
 * matched no connection (an RST to a refused REQUEST), or 0. */
VQ_INTERNAL uint16_t vq_vsg_orphan_op(struct vq_vsg *g, uint32_t local_port);
VQ_INTERNAL const struct vq_vsg_stats *vq_vsg_stats(const struct vq_vsg *g);
/* Free TX slots. */
VQ_INTERNAL unsigned vq_vsg_tx_free(const struct vq_vsg *g);

#endif
