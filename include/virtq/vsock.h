/* SPDX-License-Identifier: MIT */
/*
 * virtq/vsock.h - the virtio-vsock device (virtio 1.2 section 5.10), stream
 * and seqpacket sockets, with the host side on file descriptors.
 *
 * The device sits on the device side of the rx (0), tx (1) and optional
 * event (2) queues.  Every guest connection is paired with one host socket
 * of its type (a UNIX socket in the daemon, a socketpair in the tests):
 *  - guest -> host: a REQUEST to CID 2 port P calls cfg.host_connect(P,
 *    type), which returns a connected socket (the daemon connects to
 *    HOST_PATH_P);
 *  - host -> guest: a socket handed to vq_vsock_host_attach() (or accepted
 *    on the listener given to vq_vsock_set_listener()) first sends the line
 *    "CONNECT <port>\n"; the device reads it byte by byte (never a byte of
 *    the payload behind it), sends a REQUEST to the guest's port, and once
 *    the guest answers RESPONSE writes "OK <host_port>\n" to the socket,
 *    host_port being the source port the guest sees.  A guest RST, a bad
 *    line or a full connection table closes the socket without a reply.
 *
 * Flow control is the spec's credit scheme both ways: the device never sends
 * the guest more than its buf_alloc - (tx_cnt - fwd_cnt), and advertises a
 * fixed per-connection buffer (cfg.buf_alloc) whose fwd_cnt advances only as
 * bytes reach the host socket: a slow host socket closes the guest's window,
 * nothing is buffered beyond it, and a guest that overruns it is reset.
 *
 * Seqpacket (VQ_VSOCK_F_SEQPACKET negotiated, 5.10.6.6): the host socket
 * is a SOCK_SEQPACKET one and each message keeps its bounds.  A guest
 * message (RW packets up to one with SEQ_EOM) is sent to the host socket
 * whole; a host message goes to the guest in packets as credit allows, the
 * last with SEQ_EOM.  A host message larger than the guest's buf_alloc can
 * never be received and resets the connection (host_msg_too_big).  A host
 * message the guest takes in pieces is held whole meanwhile (a seqpacket
 * read takes a message or nothing); what all connections hold is bounded
 * by msg_budget, so guests that never give credit cannot make the device
 * hold 1 MiB per connection: a message past the budget stays in its
 * socket until another is delivered (host_msg_deferred).
 *
 * System calls per byte: one readv fills as many posted RX buffers as the
 * connection's reads suggest (within the credit), one writev (seqpacket:
 * sendmmsg) takes a TX burst's packets of one connection; the counters
 * host_read_calls / host_write_calls say how many were made.
 *
 * Nothing here blocks and there is no loop: the caller polls vq_vsock_fd()
 * (readable when host sockets have news), kicks and calls, and runs the
 * process functions.  Single-threaded: one thread calls everything.
 */
#ifndef VIRTQ_VSOCK_H
#define VIRTQ_VSOCK_H

#include <stdbool.h>
#include <stdint.h>

#include <virtq/ring.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Device feature bits (5.10.3). */
#define VQ_VSOCK_F_STREAM    0
#define VQ_VSOCK_F_SEQPACKET 1

/* Queues (5.10.2). */
#define VQ_VSOCK_RXQ 0
#define VQ_VSOCK_TXQ 1
#define VQ_VSOCK_EVQ 2

/* Well-known CIDs (5.10.4). */
#define VQ_VSOCK_CID_HOST 2u

#define VQ_VSOCK_TYPE_STREAM    1
#define VQ_VSOCK_TYPE_SEQPACKET 2

/* RW flags of a seqpacket connection (5.10.6.6.1): the packet ends a
 * message, and the message ends a record (MSG_EOR). */
#define VQ_VSOCK_SEQ_EOM (1u << 0)
#define VQ_VSOCK_SEQ_EOR (1u << 1)

enum vq_vsock_op {
	VQ_VSOCK_OP_INVALID = 0,
	VQ_VSOCK_OP_REQUEST = 1,
	VQ_VSOCK_OP_RESPONSE = 2,
	VQ_VSOCK_OP_RST = 3,
	VQ_VSOCK_OP_SHUTDOWN = 4,
	VQ_VSOCK_OP_RW = 5,
	VQ_VSOCK_OP_CREDIT_UPDATE = 6,
	VQ_VSOCK_OP_CREDIT_REQUEST = 7,
};

/* SHUTDOWN flags (5.10.6.5): the sender will receive / send no more. */
#define VQ_VSOCK_SHUTDOWN_RCV  1u
#define VQ_VSOCK_SHUTDOWN_SEND 2u

/* The packet header (5.10.6), little-endian, 44 bytes. */
struct vq_vsock_hdr {
	uint64_t src_cid;
	uint64_t dst_cid;
	uint32_t src_port;
	uint32_t dst_port;
	uint32_t len;
	uint16_t type;
	uint16_t op;
	uint32_t flags;
	uint32_t buf_alloc;
	uint32_t fwd_cnt;
} __attribute__((packed));

#define VQ_VSOCK_HDR_SIZE 44u

/* Event queue (5.10.6.7). */
#define VQ_VSOCK_EVENT_TRANSPORT_RESET 0
struct vq_vsock_event {
	uint32_t id;
};

/* Config space (5.10.4). */
struct vq_vsock_config_space {
	uint64_t guest_cid;
} __attribute__((packed));

/* The largest payload one packet carries (Linux VIRTIO_VSOCK_MAX_PKT_BUF_SIZE). */
#define VQ_VSOCK_MAX_PKT 65536u

/* ------------------------------------------------------------------ */

struct vq_vsock;

struct vq_vsock_config {
	uint64_t guest_cid;             /* >= 3 */
	uint32_t buf_alloc;             /* per-connection receive buffer; 0: 256 KiB */
	uint32_t max_conns;             /* open + opening connections; 0: 1024 */
	uint32_t used_batch;            /* RX used entries per flush; 0: 32, 1: each alone */
	/* seqpacket: bytes of host messages held whole for guests whose
	 * credit or buffers take them only in pieces, over all connections;
	 * a message past it waits in its socket (unless none is held);
	 * 0: 64 MiB */
	uint64_t msg_budget;
	/*
	 * Guest connects to the host's port: return a connected, non-blocking
	 * socket of the type (VQ_VSOCK_TYPE_STREAM: SOCK_STREAM,
	 * _SEQPACKET: SOCK_SEQPACKET; the device owns it from then on) or
	 * -errno, which the guest sees as a RST.
	 */
	int (*host_connect)(void *arg, uint32_t port, uint16_t type);
	/* A used entry was published on queue q (after each flush): the caller
	 * decides whether to notify (vq_dev_should_signal + call eventfd). */
	void (*notify)(void *arg, unsigned q);
	void *arg;
	/*
	 * Optional: a host program's CONNECT line names the guest's port:
	 * 0 lets it through, -errno refuses it (the socket is closed at once
	 * without a reply, counted in policy_refused).  NULL: every port.
	 * A host_connect that refuses by policy returns -EACCES, counted
	 * there too instead of in no_listener.
	 */
	int (*host_request)(void *arg, uint32_t port, uint16_t type);
	/* Zero (vq_vsock_new says -EINVAL otherwise): a new field takes
	 * words from here, its zero meaning the old behaviour. */
	uint64_t reserved[7];
};

/* Counters.  Every bad input has one.  Library memory (vq_vsock_stats());
 * new counters are appended at the end, none moves. */
struct vq_vsock_stats {
	uint64_t rx_pkts, rx_bytes;     /* to the guest: packets, payload bytes */
	uint64_t tx_pkts, tx_bytes;     /* from the guest */
	uint64_t rx_flushes;            /* RX used-index publications */
	uint64_t conns_opened, conns_closed;
	uint64_t rst_sent, rst_recv;
	uint64_t credit_updates_sent, credit_requests_recv;
	uint64_t host_stalls;           /* host socket full: data kept, window shrinks */
	/* bad input */
	uint64_t bad_short_buf;         /* chain shorter than the header */
	uint64_t bad_len;               /* header length larger than the chain or 64 KiB */
	uint64_t bad_type;              /* a type not negotiated, or not the
					 * connection's */
	uint64_t bad_op;                /* unknown op, or an op the state forbids */
	uint64_t bad_addr;              /* wrong source or destination CID */
	uint64_t bad_credit;            /* data beyond the credit we gave */
	uint64_t bad_rx_buf;            /* RX buffer unusable (too small, readable) */
	uint64_t no_listener;           /* guest REQUEST refused by the host side */
	uint64_t conn_limit;            /* REQUEST or CONNECT beyond max_conns */
	uint64_t bad_connect_line;      /* host side sent no valid CONNECT line */
	uint64_t bad_seq;               /* seqpacket: a message the guest left
					 * unfinished, or too many waiting */
	uint64_t host_msg_too_big;      /* seqpacket: a host message larger
					 * than the guest can ever take */
	uint64_t host_msg_deferred;     /* seqpacket: a host message left in
					 * its socket, msg_budget spent */
	uint64_t reset_events;          /* TRANSPORT_RESET events delivered */
	/* system calls that moved payload between host sockets and guest
	 * buffers (readv / recvmsg, writev / sendmsg / sendmmsg): one read
	 * fills many guest buffers, one write takes a burst's packets */
	uint64_t host_read_calls, host_write_calls;
	/* the guest's packet count: a connection stopped sending because
	 * one more packet would have crossed it (its data waits in the host
	 * socket), and the CREDIT_REQUESTs that asked where the guest is */
	uint64_t pkts_held, credit_requests_sent;
	/* connections the host's policy refused: host_connect's -EACCES
	 * (guest to host) and host_request's refusals (host to guest) */
	uint64_t policy_refused;
	/* sibling guests (a hub): REQUESTs to a CID no guest of the hub
	 * has, or whose guest shares no group with ours (each a RST at
	 * once), and connections established with a sibling */
	uint64_t cid_unknown, cid_refused;
	uint64_t sibling_conns;
};

/* -EINVAL (guest_cid below 3 or above 2^32-1, no host_connect, a reserved
 * word not zero), -ENOMEM, or epoll_create1's -errno. */
int vq_vsock_new(const struct vq_vsock_config *cfg, struct vq_vsock **out);
/* Closes every connection and the listener. */
void vq_vsock_free(struct vq_vsock *v);

/*
 * Attach the queues (the driver set DRIVER_OK); ev may be NULL (QEMU keeps
 * the event queue).  Connections from an earlier start are gone: stop()
 * closed them.  0 or -EINVAL.
 */
int vq_vsock_start(struct vq_vsock *v, struct vq_dev *rx, struct vq_dev *tx,
		   struct vq_dev *ev);
/* Forget the queues (they stop: GET_VRING_BASE, an fd change) but keep
 * the connections, for a start() that resumes the same rings. */
void vq_vsock_detach(struct vq_vsock *v);
/* Detach and close every connection's host socket (the guest's side of
 * them is gone with the device reset).  The listener and host sockets
 * still sending their CONNECT line stay. */
void vq_vsock_stop(struct vq_vsock *v);
/* Are queues attached? */
bool vq_vsock_started(const struct vq_vsock *v);

/* An fd that is readable when host sockets need attention: poll it, then
 * call vq_vsock_process_host(). */
int vq_vsock_fd(const struct vq_vsock *v);

/* Accept host-initiated connections on this listening socket (the device
 * owns it): four listeners at most, of either type (a name and an alias
 * for each).  On a
 * seqpacket socket the CONNECT line is the first message (its LF optional)
 * and "OK <host_port>\n" comes back as one.  0, -EINVAL (neither type),
 * -EBUSY (a listener of that type already), or epoll's -errno; on an error
 * the socket stays the caller's. */
int vq_vsock_set_listener(struct vq_vsock *v, int listen_fd);
/* A host socket (SOCK_STREAM or SOCK_SEQPACKET) that will send
 * "CONNECT <port>\n".  The device owns it, and closes it on an error:
 * 0, -EINVAL (neither type), -EAGAIN (max_conns sockets are still sending
 * their line), -ENOMEM. */
int vq_vsock_host_attach(struct vq_vsock *v, int fd);

/* Handle host socket events without blocking: accept, CONNECT lines, data
 * from the host (queued for RX), room to write (drains guest data).
 * Returns the number of events handled or -errno. */
int vq_vsock_process_host(struct vq_vsock *v);

/* Process up to budget TX chains (guest -> host).  Stops early while too
 * many replies wait for RX buffers.  Returns chains processed or -errno
 * (the queue broke; -ENODEV: not started). */
int vq_vsock_process_tx(struct vq_vsock *v, unsigned budget);

/* Fill up to budget RX buffers with what is pending for the guest, flushing
 * every used_batch entries.  Returns buffers filled or -errno (the queue
 * broke; -ENODEV: not started). */
int vq_vsock_process_rx(struct vq_vsock *v, unsigned budget);

/* Is anything waiting for an RX buffer? */
bool vq_vsock_rx_pending(const struct vq_vsock *v);
/* Does TX wait for RX (reply backlog full)? */
bool vq_vsock_tx_blocked(const struct vq_vsock *v);

/* Queue a TRANSPORT_RESET event: delivered on the event queue now or when
 * the guest posts an event buffer.  -ENODEV without an event queue. */
int vq_vsock_reset_event(struct vq_vsock *v);
/* Deliver a pending event if the event queue has a buffer.  1, 0, -errno. */
int vq_vsock_process_event(struct vq_vsock *v);
/* Does an event wait for an event-queue buffer? */
bool vq_vsock_event_pending(const struct vq_vsock *v);

unsigned vq_vsock_conn_count(const struct vq_vsock *v);
/* Seqpacket: bytes of host messages held now (see msg_budget). */
uint64_t vq_vsock_held_bytes(const struct vq_vsock *v);
const struct vq_vsock_stats *vq_vsock_stats(const struct vq_vsock *v);
/* The newest bad input a counter above counted, as a message: the spec
 * section first, then what was wrong, with the numbers ("5.10.6.3: RW of
 * 5000 bytes on ports 50000 -> 1, beyond the 4096 bytes of credit left").
 * "" until there is one.  Valid until the next call into the device. */
const char *vq_vsock_last_bad(const struct vq_vsock *v);

/*
 * Parse a hybrid-vsock CONNECT line (without its '\n') as Firecracker's and
 * Cloud Hypervisor's muxers do: white-space separated words, the first
 * "connect" in any case, the second the port, decimal in [0, 2^32) with an
 * optional '+', any others ignored ("CONNECT 1234", "connect\t+1234 x").
 * 0 or -EINVAL.
 */
int vq_vsock_parse_connect(const char *line, uint32_t *port);

/*
 * Sibling guests.  Devices that join one hub (each device at most one)
 * let their guests reach each other: a guest's REQUEST to another
 * guest's CID goes to that guest's device when their groups share a bit
 * (64 groups, a bit each; a device in none reaches nobody), ring to ring
 * without a host socket, stream and seqpacket.  Each device keeps its own
 * guest's half of the connection, with its own credit and the packet
 * count; between them bytes wait in a pipe of the writer's buf_alloc
 * (rounded up to a power of two) each way, so a guest that stops reading
 * holds its own connections' windows and nothing more.  A REQUEST to a
 * CID no guest of the hub has, or one that shares no group, gets a RST
 * at once (cid_unknown, cid_refused).
 *
 * The devices may run on different threads (each device still on one):
 * they tell each other through an eventfd in each device's
 * vq_vsock_fd() set, and nobody waits for anybody.  A device may join
 * while others run; free every device of a hub before the hub.
 */
struct vq_vsock_hub;

/* 0, -ENOMEM. */
int vq_vsock_hub_new(struct vq_vsock_hub **out);
void vq_vsock_hub_free(struct vq_vsock_hub *h);
/* v's guest joins h at its CID, in groups.  0, -EINVAL, -EBUSY (v is in
 * a hub), -EEXIST (a device of that CID is), -ENOSPC (1024 devices), or
 * -ENOMEM, -errno of the eventfd. */
int vq_vsock_hub_join(struct vq_vsock_hub *h, struct vq_vsock *v,
		      uint64_t groups);

/* The UNIX-socket host side (hybrid vsock). */
/* Connect, non-blocking, to "<base>_<port>" with a socket of the vsock type:
 * the fd or -errno (-ENOENT, -ECONNREFUSED: no listener; -EPROTOTYPE: the
 * listener is of the other type; -ENAMETOOLONG). */
int vq_vsock_uds_connect(const char *base, uint32_t port, uint16_t type);
/* Listen at path with a socket of the vsock type (a stale socket there is
 * replaced; a live one is refused, -EADDRINUSE, and anything else,
 * -EEXIST): the non-blocking fd or -errno. */
int vq_vsock_uds_listen(const char *path, uint16_t type);

#ifdef __cplusplus
}
#endif
#endif
