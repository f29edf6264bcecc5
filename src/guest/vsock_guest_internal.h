/* SPDX-License-Identifier: MIT */
/*
 * The userspace vsock driver's private state (virtq/vsock_guest.h), shared
 * by guest.c (queues, slots, the packets the device sends) and
 * guest_conn.c (the connection calls).
 */
#ifndef VIRTQ_VSOCK_GUEST_INTERNAL_H
#define VIRTQ_VSOCK_GUEST_INTERNAL_H

#include <errno.h>

#include <virtq/guest/vsock.h>

#include "util.h"

#define VSG_LISTEN_MAX  16u
#define VSG_ORPHANS     64u
#define VSG_EV_SLOTS    8u
#define VSG_EV_SIZE     8u
#define VSG_MSGS        4096u   /* seqpacket messages received, unread */
#define VSG_BACKLOG     64u
#define VSG_MSG_MAX     192u
#define VSG_HASH        256u    /* connection buckets, by port pair */
/* An RW payload of at least VSG_HOLD_MIN bytes stays in its RX slot until
 * it is read (one copy, into the reader's buffer), up to VSG_HOLD_CONN
 * slots per connection and half the RX slots in all, so that the device
 * always has buffers for the other connections and for control packets;
 * past that, and below it, payloads are copied into rbuf. */
#define VSG_HOLD_MIN    512u
#define VSG_HOLD_CONN   64u
#define VSG_SEG_RBUF    UINT32_MAX      /* a segment of bytes in rbuf */
#define VSG_SEGS        (2 * VSG_HOLD_CONN + 1)

#define PEND_RESPONSE   (1u << 0)
#define PEND_CREDIT     (1u << 1)
#define PEND_RST        (1u << 2)

struct vq_vsg_conn {
	struct vq_vsg *g;
	struct vq_vsg_conn *next;
	struct vq_vsg_conn *hnext;      /* in its bucket */
	uint64_t pcid;                  /* the peer's CID */
	uint32_t lport, pport;
	uint16_t type;
	enum vq_vsg_state state;
	uint32_t peer_buf_alloc, peer_fwd_cnt, tx_cnt;
	uint32_t rx_cnt, fwd_cnt, adv_fwd_cnt;
	/* unread bytes (rlen in all), oldest first: a ring of segments,
	 * each a held RX slot's payload or the next bytes of rbuf (a ring
	 * of rbuf_len bytes from rhead); adjacent rbuf segments merge, so
	 * at most VSG_SEGS */
	struct vsg_seg {
		uint32_t slot;          /* RX slot, or VSG_SEG_RBUF */
		uint32_t off, len;      /* in the slot: offset of the bytes left */
	} *seg;
	unsigned seg_head, nseg, nheld;
	uint8_t *rbuf;
	uint32_t rhead, rbuf_len, rlen;
	uint32_t peer_shut, local_shut;
	unsigned pend;
	bool to_accept;
	bool released;
	/* seqpacket: rx_cnt at the end of each message not yet read */
	uint32_t *msg_end;
	unsigned msg_head, nmsg;
	/* with pkt_truesize: rx_cnt at the end of each RW packet not yet
	 * read to its end (a ring of pkt_cap, oldest first) */
	uint32_t *pkt_end;
	unsigned pkt_cap, pkt_head, npkt;
};

struct vsg_orphan {
	uint32_t port;
	uint16_t op;
};

struct vq_vsg {
	struct vq_vsg_config cfg;
	struct vq_vsg_conn *conns;
	/* every packet finds its connection here, not in a walk of them
	 * all: hundreds may be open */
	struct vq_vsg_conn *hash[VSG_HASH];
	uint32_t listen[VSG_LISTEN_MAX];
	unsigned nlisten;
	struct vsg_orphan orphans[VSG_ORPHANS];
	unsigned norphan;
	uint32_t rx_slot, tx_slot;
	unsigned nrx, ntx, nev;
	unsigned held;                  /* RX slots connections hold unread */
	bool freeing;                   /* vq_vsg_free: hold nothing, post nothing */
	uint32_t *tx_free;
	unsigned tx_nfree;
	bool dirty[3];
	uint32_t next_port;
	int err;                        /* broken: every call fails with it */
	char err_msg[VSG_MSG_MAX];
	char bad_msg[VSG_MSG_MAX];      /* the newest bad packet */
	struct vq_vsg_stats st;
};

/* guest.c */
VQ_INTERNAL int vsg_flush_q(struct vq_vsg *g, unsigned q);
/* A held RX slot's bytes were read: post it again (kicked at the next
 * flush).  0 or -errno. */
VQ_INTERNAL int vsg_post_rx(struct vq_vsg *g, unsigned slot);
VQ_INTERNAL const uint8_t *vsg_rx_slot(const struct vq_vsg *g, unsigned slot);
VQ_INTERNAL int vsg_send_parts(struct vq_vsg *g, const void *a, uint32_t na,
			       const void *b, uint32_t nb);
VQ_INTERNAL void vsg_bad(struct vq_vsg *g, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* guest_conn.c */
VQ_INTERNAL struct vq_vsg_conn *vsg_conn_find(struct vq_vsg *g, uint64_t pcid,
					      uint32_t lport, uint32_t pport);
VQ_INTERNAL struct vq_vsg_conn *vsg_conn_alloc(struct vq_vsg *g, uint64_t pcid,
					       uint32_t lport, uint32_t pport,
					       uint16_t type);
VQ_INTERNAL void vsg_conn_unlink(struct vq_vsg *g, struct vq_vsg_conn *c);
VQ_INTERNAL int vsg_conn_send(struct vq_vsg_conn *c, uint16_t op, uint32_t flags,
			      const void *payload, uint32_t len);
VQ_INTERNAL void vsg_close_rst(struct vq_vsg_conn *c);
VQ_INTERNAL void vsg_send_pending(struct vq_vsg *g);
/* The packet in RX slot slot, used bytes: true when a connection holds
 * the slot (its payload unread), false when it may be posted again. */
VQ_INTERNAL bool vsg_rx_packet(struct vq_vsg *g, unsigned slot, uint32_t used);

#endif
