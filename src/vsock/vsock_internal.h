/* SPDX-License-Identifier: MIT */
/*
 * The virtio-vsock device's private state, shared by its files:
 *   vsock.c  lifecycle and the public getters
 *   conn.c   the connection table, the RX list, the reply queue, credit
 *   host.c   host sockets: listeners, the CONNECT handshake, epoll events,
 *            the host-bound buffer (obuf) and its draining
 *   tx.c     guest -> host packets (the TX queue)
 *   rx.c     host -> guest packets (the RX queue) and the event queue
 *   bad.c    the checks on what the guest sends, one helper each
 *   io.c     a connection's other end: a host socket, or a sibling's link
 *   link.c   connections between two guests of one hub, ring to ring
 *   hub.c    the hub: the devices siblings reach, their inboxes
 */
#ifndef VIRTQ_VSOCK_INTERNAL_H
#define VIRTQ_VSOCK_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <virtq/vsock.h>

#include "util.h"

#define VS_IOV_MAX      256u    /* iovecs per chain */
#define VS_TX_BURST     32u
#define VS_REPLY_MAX    256u    /* TX stops while this many RSTs wait */
/* Listening host sockets: one per type, and an alias of each (the other
 * VMMs' names for the same listener). */
#define VS_LISTENERS    4u
#define VS_LINE_MAX     32u     /* "CONNECT 4294967295" fits */
#define VS_OK_MAX       24u     /* "OK 4294967295\n" */
#define VS_SEQ_BACKLOG  4096u   /* guest messages waiting for a host socket */
#define VS_SEQ_MSG_MAX  (1u << 20)      /* host message read for the guest */
#define VS_PORT_FIRST   1024u
#define VS_PORT_LAST    0x7fffffffu
#define VS_MSG_MAX      160u    /* the last bad input's message */
#define VS_SYSCALL_IOV  1024u   /* iovecs one readv / writev takes (IOV_MAX) */
#define VS_RX_BATCH     64u     /* guest buffers one host read fills */
#define VS_RX_IOV       (VS_SYSCALL_IOV + VS_IOV_MAX)  /* their chains' iovecs */

enum vs_state {
	VS_HANDSHAKE,           /* host socket, reading its CONNECT line */
	VS_LINKING,             /* the guest's REQUEST went to a sibling, which
				 * has not answered */
	VS_CONNECTING,          /* REQUEST sent to the guest, no RESPONSE yet */
	VS_ESTABLISHED,
	VS_CLOSING,             /* sent SHUTDOWN both ways, waiting for RST */
};

/* What a call that may close its connection left of it.  A closed
 * connection is freed only when the public call returns (vs_reap), so
 * the caller may still look at it, but must not act on it. */
enum vs_fate {
	VS_OPEN = 0,
	VS_CLOSED,
};

/* What a step of the RX path did with the chain it was offered: a
 * count of buffers filled (a read may fill more than the one offered), or
 * a negative -errno. */
enum vs_rx {
	VS_RX_UNUSED = 0,       /* nothing to send: the chain is still free */
	VS_RX_USED = 1,         /* a packet went into it (and none other) */
};

/* Control packets a connection owes the guest. */
#define P_REQUEST       (1u << 0)
#define P_RESPONSE      (1u << 1)
#define P_CREDIT_UPDATE (1u << 2)
#define P_SHUTDOWN      (1u << 3)
#define P_CREDIT_REQUEST (1u << 4)

/*
 * Credit counts bytes; Linux (6.12.92 on) also counts packets: it resets a
 * connection once (its queued packets + 1) * SKB_TRUESIZE(0) would exceed
 * its buf_alloc, whatever their bytes.  We count each RW packet a guest
 * has not yet read to its end against buf_alloc / VS_PKT_TRUESIZE (above
 * SKB_TRUESIZE(0), 576 on 64-bit builds, for kernels whose sk_buff
 * grows), at most VS_PKTS_MAX.  A connection at its count waits; the
 * guest tells its reads only when its free space runs low, which tiny
 * packets never make it, so a waiting connection asks (CREDIT_REQUEST)
 * every VS_CREQ_NS.
 */
#define VS_PKT_TRUESIZE 1024u
#define VS_PKTS_MAX     1024u
#define VS_CREQ_NS      (100ull * 1000000)

/* What an epoll event points at. */
enum vs_kind { VS_EP_LISTENER = 1, VS_EP_CONN = 2, VS_EP_INBOX = 3 };

struct vs_link;
struct vs_member;

struct vs_conn {
	enum vs_kind kind;              /* first: epoll data points here */
	enum vs_state state;
	int fd;                         /* the host socket, or -1 (link) */
	struct vs_link *link;           /* a sibling's connection, or NULL */
	uint8_t side;                   /* ours of the link's two */
	uint16_t type;                  /* VQ_VSOCK_TYPE_* */
	uint64_t pcid;                  /* the other end's CID: 2, or a sibling's */
	uint32_t lport, pport;          /* other end, guest side */
	struct vs_conn *hnext;          /* hash chain */
	struct vs_conn *prev, *next;    /* every connection */
	struct vs_conn *rprev, *rnext;  /* RX list */
	bool on_rx;
	bool dead;                      /* freed at the end of the public call */
	unsigned pend;                  /* P_* */
	uint32_t shut_flags;            /* for P_SHUTDOWN */
	/* host -> guest: the guest's credit */
	uint32_t peer_buf_alloc, peer_fwd_cnt, tx_cnt;
	/* guest -> host: our credit */
	uint32_t buf_alloc;             /* what we advertise on this one */
	uint32_t rx_cnt, fwd_cnt, adv_fwd_cnt;
	uint8_t *obuf;                  /* bytes for the host socket */
	uint32_t ohead, olen, oextra;   /* oextra: the OK line, not credit */
	/* seqpacket, guest -> host: lengths of the whole messages in obuf,
	 * and the bytes of the unfinished one at its tail */
	uint32_t *mq;
	uint32_t mq_cap, mq_head, mq_len, msg_open;
	/* seqpacket, host -> guest: the message being sent */
	uint8_t *ibuf;
	uint32_t ilen, ioff;
	bool ibuf_wait;                 /* a message waits for msg_budget */
	bool host_readable, host_writable, host_eof, host_wr_shut;
	bool host_rdhup;                /* the host shut down its side */
	uint8_t rx_hint;                /* guest buffers the next read fills */
	/* host -> guest: tx_cnt at the end of each RW packet the guest has
	 * not read to its end (its queue, oldest first; a ring of pt_cap) */
	uint32_t *ptail;
	uint16_t pt_cap, pt_head, pt_len;
	bool pkt_held;                  /* waiting for the guest's packet count */
	uint64_t creq_ns;               /* when we last asked for its credit */
	uint32_t guest_shut;            /* SHUTDOWN flags the guest sent */
	char line[VS_LINE_MAX + 1];
	uint32_t linelen;
};

/* A listening host socket, one per type; epoll data points at kind. */
struct vs_listener {
	enum vs_kind kind;
	int fd;
};

struct vs_reply {
	uint64_t cid;                   /* the RST's source */
	uint32_t lport, pport;
	uint16_t type;
};

struct vq_vsock {
	struct vs_listener lst[VS_LISTENERS]; /* host programs connect here */
	struct vq_vsock_config cfg;
	struct vq_dev *rx, *tx, *ev;
	int epfd;
	struct vs_conn **hash;
	uint32_t hmask;
	struct vs_conn *all;
	unsigned nconns;                /* in the hash */
	unsigned nhandshake;
	struct vs_conn *rx_head, *rx_tail;
	struct vs_reply *replies;       /* ring of reply_cap */
	uint32_t reply_cap, reply_head, reply_len;
	uint32_t next_port;
	struct vs_conn *dead;           /* closed, freed by vs_reap() */
	bool reset_pending;
	bool seqpacket;                 /* VQ_VSOCK_F_SEQPACKET negotiated */
	uint64_t ibuf_bytes;            /* held in every ibuf, <= msg_budget */
	unsigned ibuf_waiters;          /* connections with ibuf_wait */
	unsigned npkt_held;             /* connections with pkt_held */
	uint64_t creq_due_ns;           /* when one of them asks again */
	/* TX chain storage */
	struct vq_chain txc[VS_TX_BURST];
	struct iovec *iov;              /* VS_TX_BURST * VS_IOV_MAX */
	struct iovec slice[VS_IOV_MAX];
	struct vs_gather *gat;          /* TX: payloads for one write */
	/* RX: the chains popped and not yet filled or given back, in pop
	 * order; rxb[0] is the one the loop hands out, the rest those a
	 * read into many buffers took */
	struct vq_chain rxb[VS_RX_BATCH];
	unsigned rx_n;
	unsigned rx_staged;             /* filled since the last flush */
	bool rx_crowded;                /* others waited when this burst began */
	struct iovec *rx_iov;           /* VS_RX_IOV, the rxb chains' iovecs */
	unsigned rx_iov_used;
	struct iovec *rx_slice;         /* VS_SYSCALL_IOV, their payload areas */
	struct vq_vsock_stats st;
	char bad_msg[VS_MSG_MAX];       /* the last bad input, "" if none */
	/* in a hub: our entry (its inbox is in our epoll set) */
	struct vq_vsock_hub *hub;
	struct vs_member *me;
};

/* An RX buffer the device can put a packet in: writable only, with room
 * past the header (the check that counts a bad one is vs_check_rx_buf). */
static inline bool vs_rx_buf_usable(const struct vq_chain *ch)
{
	return ch->nout == 0 && ch->in_len > VQ_VSOCK_HDR_SIZE;
}

static inline bool vs_is_fatal_sock_err(int e)
{
	return e != EAGAIN && e != EWOULDBLOCK && e != EINTR;
}

/* conn.c */
VQ_INTERNAL struct vs_conn *vs_conn_find(struct vq_vsock *v, uint64_t pcid,
					 uint32_t lport, uint32_t pport);
VQ_INTERNAL void vs_hash_add(struct vq_vsock *v, struct vs_conn *c);
VQ_INTERNAL void vs_rx_add(struct vq_vsock *v, struct vs_conn *c);
VQ_INTERNAL void vs_rx_del(struct vq_vsock *v, struct vs_conn *c);
VQ_INTERNAL uint32_t vs_peer_credit(const struct vs_conn *c);
/* RW packets the guest may still be sent on c (its packet count). */
VQ_INTERNAL uint32_t vs_peer_pkts(const struct vs_conn *c);
/* The guest's fwd_cnt moved: forget the packets it has read, and let go
 * of c if it waited for them. */
VQ_INTERNAL void vs_pkts_read(struct vq_vsock *v, struct vs_conn *c);
/* An RW packet ending at tx_cnt went out on c.  0, or -ENOMEM. */
VQ_INTERNAL int vs_pkts_sent(struct vq_vsock *v, struct vs_conn *c);
/* Host data arrived for c: held by the count, c asks for credit. */
VQ_INTERNAL void vs_pkts_check(struct vq_vsock *v, struct vs_conn *c);
/* RX: connections held by their count whose time to ask again came. */
VQ_INTERNAL void vs_pkts_ask(struct vq_vsock *v);
VQ_INTERNAL bool vs_data_ready(const struct vs_conn *c);
VQ_INTERNAL bool vs_has_rx_work(const struct vs_conn *c);
VQ_INTERNAL void vs_reply_rst(struct vq_vsock *v, uint64_t cid, uint32_t lport,
			      uint32_t pport, uint16_t type);
/* A connection on the host socket fd (in the epoll set), or, fd -1, on a
 * link (the caller sets it). */
VQ_INTERNAL struct vs_conn *vs_conn_new(struct vq_vsock *v, int fd,
					enum vs_state st);
VQ_INTERNAL void vs_conn_close(struct vq_vsock *v, struct vs_conn *c, bool rst);
VQ_INTERNAL void vs_close_all(struct vq_vsock *v);
VQ_INTERNAL void vs_reap(struct vq_vsock *v);
VQ_INTERNAL void vs_ibuf_release(struct vq_vsock *v, struct vs_conn *c);
VQ_INTERNAL void vs_conn_check_done(struct vq_vsock *v, struct vs_conn *c);
VQ_INTERNAL void vs_maybe_credit_update(struct vq_vsock *v, struct vs_conn *c);
VQ_INTERNAL unsigned vs_iov_slice(const struct iovec *iov, unsigned n, size_t off,
				  size_t len, struct iovec *dst, unsigned max);

/* host.c */
VQ_INTERNAL void vs_host_wrote(struct vs_conn *c, uint32_t n);
/* What epoll said of c's host socket (or its link, the same way). */
VQ_INTERNAL void vs_conn_event(struct vq_vsock *v, struct vs_conn *c,
			       uint32_t events);
VQ_INTERNAL int vs_obuf_put_iov(struct vs_conn *c, const struct iovec *iov,
				unsigned n, size_t len);
VQ_INTERNAL enum vs_fate vs_obuf_drain(struct vq_vsock *v, struct vs_conn *c);
VQ_INTERNAL void vs_seq_fit_window(struct vs_conn *c);

/* io.c: the other end of c, a host socket or a link, the way the
 * socket calls answer (-1 with errno: EAGAIN, EPIPE, ...) */
VQ_INTERNAL ssize_t vs_io_writev(struct vs_conn *c, struct iovec *iov, unsigned n);
/* Seqpacket: whole messages, as sendmmsg; msg_len set on each sent. */
VQ_INTERNAL int vs_io_sendmsgs(struct vs_conn *c, struct mmsghdr *m, unsigned n);
VQ_INTERNAL ssize_t vs_io_readv(struct vs_conn *c, struct iovec *iov, unsigned n);
/* Seqpacket: the next message's length, without taking it. */
VQ_INTERNAL ssize_t vs_io_peek_len(struct vs_conn *c);
/* Seqpacket: take the next message into iov (room for all of it). */
VQ_INTERNAL ssize_t vs_io_recv_msg(struct vs_conn *c, struct iovec *iov, unsigned n);
/* The other end sends no more (what a 0-byte seqpacket read means). */
VQ_INTERNAL bool vs_io_hung_up(struct vs_conn *c);
VQ_INTERNAL void vs_io_shut_wr(struct vs_conn *c);

/* link.c */
/* A guest's REQUEST to the sibling CID cid: its half, waiting for the
 * sibling's answer, or NULL (RST queued, counted). */
VQ_INTERNAL struct vs_conn *vs_link_open(struct vq_vsock *v, uint64_t cid,
					 uint32_t lport, uint32_t pport,
					 uint16_t type);
/* The guest answered the sibling's REQUEST on c (RESPONSE). */
VQ_INTERNAL void vs_link_accept(struct vq_vsock *v, struct vs_conn *c);
/* c is closed: its end of the link goes, the sibling hears of it. */
VQ_INTERNAL void vs_link_release(struct vq_vsock *v, struct vs_conn *c);
/* The inbox said so: take what siblings left for us. */
VQ_INTERNAL int vs_link_news(struct vq_vsock *v);
VQ_INTERNAL ssize_t vs_link_writev(struct vs_conn *c, const struct iovec *iov,
				   unsigned n);
VQ_INTERNAL int vs_link_sendmsgs(struct vs_conn *c, struct mmsghdr *m, unsigned n);
VQ_INTERNAL ssize_t vs_link_readv(struct vs_conn *c, const struct iovec *iov,
				  unsigned n);
VQ_INTERNAL ssize_t vs_link_peek_len(struct vs_conn *c);
VQ_INTERNAL ssize_t vs_link_recv_msg(struct vs_conn *c, const struct iovec *iov,
				     unsigned n);
VQ_INTERNAL bool vs_link_hung_up(const struct vs_conn *c);
/* The sibling's half is gone (its guest's RST, or its device's reset). */
VQ_INTERNAL bool vs_link_peer_closed(const struct vs_conn *c);
VQ_INTERNAL void vs_link_shut_wr(struct vs_conn *c);

/* tx.c, rx.c */
VQ_INTERNAL int vs_process_tx(struct vq_vsock *v, unsigned budget);
VQ_INTERNAL struct vs_gather *vs_gather_new(void);
/* Write what TX gathered for c, if anything: before c changes hands. */
VQ_INTERNAL void vs_gather_flush_conn(struct vq_vsock *v, struct vs_conn *c);
VQ_INTERNAL int vs_process_rx(struct vq_vsock *v, unsigned budget);

/* bad.c: each returns true when the input passed; otherwise it counted
 * it, wrote the message, and the caller drops or resets. */
VQ_INTERNAL bool vs_check_chain(struct vq_vsock *v, const struct vq_chain *ch);
VQ_INTERNAL bool vs_check_addr(struct vq_vsock *v, uint64_t src_cid,
			       uint64_t dst_cid);
VQ_INTERNAL bool vs_check_len(struct vq_vsock *v, uint32_t len,
			      const struct vq_chain *ch);
VQ_INTERNAL bool vs_check_type(struct vq_vsock *v, uint16_t type,
			       const struct vs_conn *c);
VQ_INTERNAL bool vs_check_credit(struct vq_vsock *v, const struct vs_conn *c,
				 uint32_t len);
VQ_INTERNAL bool vs_check_rx_buf(struct vq_vsock *v, const struct vq_chain *ch);
VQ_INTERNAL bool vs_check_ev_buf(struct vq_vsock *v, const struct vq_chain *ch);
VQ_INTERNAL void vs_bad_op(struct vq_vsock *v, const struct vs_conn *c,
			   uint16_t op, const char *why);
VQ_INTERNAL void vs_bad_seq(struct vq_vsock *v, const struct vs_conn *c,
			    const char *why, uint32_t n);
VQ_INTERNAL void vs_bad_host_msg(struct vq_vsock *v, const struct vs_conn *c,
				 uint64_t len);

#endif
