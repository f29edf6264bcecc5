/* SPDX-License-Identifier: MIT */
/*
 * virtq-perf vsock: what its files share.  One run has a guest side (the
 * main thread) and a host program (a second thread); between them either
 * the vsock path (our front-end and driver, a backend, its UNIX sockets:
 * vsock.c) or the baseline, a UNIX socket pair (vsock_unix.c).  The guest
 * side moves data through a transport's calls (struct vs_xport), so both
 * run the same transfers with the same checks:
 *   vsock_guest.c   one connection, guest side: rx, tx, ping-pong, messages
 *   vsock_host.c    one connection, host program
 *   vsock_conns.c   --conns: many streams, both sides, and their fairness
 *   vsock_peer.c    --peer guest: a second guest in the host program's
 *                   place, on the same backend (sibling vsock)
 */
#ifndef VIRTQ_PERF_VSOCK_RUN_H
#define VIRTQ_PERF_VSOCK_RUN_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <virtq/guest/vsock.h>

#include "backend.h"
#include "dirty_log.h"
#include "vsock_check.h"
#include "vsock_opts.h"

#define VS_PORT 5201u

struct vs_run;
struct vq_vhu_frontend;

/* The guest's end of one connection. */
struct vs_end {
	struct vs_run *n;
	struct vq_vsg_conn *c;  /* vsock */
	int fd;                 /* unix: the guest's socket */
	bool blocking;          /* unix: the calls block (one connection) */
	bool ready;             /* unix, not blocking: worth a call (poll said
				 * so, or none has failed yet) */
	short want;             /* unix, not blocking: POLLIN / POLLOUT the last
				 * call that could not move waits for */
};

/*
 * A transport's calls on the guest side.  The data calls never block on
 * the vsock transport; on a blocking unix end they return only when
 * something moved (a busy-poll window of MSG_DONTWAIT calls first).
 */
struct vs_xport {
	const char *name;       /* "vsock", "unix": the output's first word */
	/* Stream: up to len bytes out: how many, 0 if none can go now,
	 * -errno. */
	long (*write)(struct vs_end *e, const void *buf, uint32_t len);
	/* Stream: how many bytes a write could take now, at most (credit);
	 * UINT32_MAX when only trying tells.  0 makes the next wait wait for
	 * room. */
	uint32_t (*room)(struct vs_end *e);
	/* Stream: up to len bytes in, with --rcvlowat: how many; 0 when none
	 * can be read now, or at the end (*eof true); -errno. */
	long (*read)(struct vs_end *e, void *buf, uint32_t len, bool *eof);
	/* Seqpacket: buf as one whole message: len, 0 if not now, -errno. */
	long (*write_msg)(struct vs_end *e, const void *buf, uint32_t len);
	/* Seqpacket: the next message into buf (cap bytes): its length (a
	 * longer one says its real length), -EPIPE at the end of the
	 * connection, -EAGAIN if none is whole yet, -errno (guest_err may
	 * say why). */
	long (*read_msg)(struct vs_end *e, void *buf, uint32_t cap);
	/* Connect every end (n->ends): accept what the host program
	 * connects, or connect to it.  0 or -errno. */
	int (*open)(struct vs_run *n);
	/* Our side is done: shut both directions down.  0, -ENOSPC if that
	 * cannot go now (no TX buffer), -errno. */
	int (*finish)(struct vs_end *e);
	/* Our side failed: reset the connection, so the host program learns
	 * of it. */
	void (*abort)(struct vs_end *e);
	/* Has the connection closed both ways? */
	bool (*closed)(struct vs_end *e);
	/* Move what is pending on every end (the vsock driver's poll): how
	 * much moved, or -errno. */
	int (*pump)(struct vs_run *n);
	/* Nothing moved: sleep up to ms until one of the ends may move. */
	int (*wait)(struct vs_run *n, struct vs_end *ends, unsigned nends, int ms);
};

extern const struct vs_xport vs_xport_vsock, vs_xport_unix;

/* --conns: one connection's receiving side, for its rate.  The window
 * is the time every connection streamed: from the moment the last one
 * started to the moment the first one ended. */
struct vs_flow {
	struct vs_csum cs;      /* bytes and checksum received */
	uint64_t mark;          /* bytes when the window opened */
	uint64_t win;           /* bytes inside the window */
	uint64_t held;          /* --stall: bytes waiting when it was resumed */
	bool started, done;
};

struct vs_flows {
	struct vs_flow *f;
	unsigned n, started, done;
	unsigned stall;         /* flows 0 .. stall-1 wait for the others */
	bool resumed;           /* the others ended: the stalled ones are read */
	uint64_t t_open, t_close;       /* the window (ns; 0: not yet) */
	uint64_t t_first, t_last;
};

/* --conns: one connection's sending side.  No buffer of its own: what
 * has not gone is made again from the stream (hundreds of 64 KiB
 * buffers fell out of the cache, and every copy missed). */
struct vs_src {
	uint64_t off;           /* bytes sent (atomic: the receiver reads it) */
	uint64_t total;         /* to send; UINT64_MAX: until the deadline */
	struct vs_csum cs;      /* of the bytes sent */
	bool done;
};

struct vs_run {
	struct vs_opts o;
	const struct vs_xport *x;
	struct perf_backend be;
	char sock[128], uds[128];
	struct vq_vhu_frontend *fe;
	struct vq_vsg *g;
	int kick[3], call[3];
	uint64_t cid;
	/* --peer guest: the other guest's run (each points at the other)
	 * and CID; the second socket of a backend we start */
	struct vs_run *peer;
	uint64_t peer_cid;
	char peer_sock[128], peer_uds[128];
	unsigned host_opened;           /* atomic, --conns: connections the host
					 * program has (tx: accepted) */
	/* the guest's ends: one, or --conns */
	struct vs_end *ends;
	unsigned nends;
	/* unix: the host program's sockets, one per end */
	int *host_fds;
	/* host thread */
	pthread_t host;
	int host_rc;
	int host_lfd;                   /* vsock tx: the listener at HOST_PATH_PORT */
	char host_path[160];
	uint64_t host_total;            /* bytes the host sends (rx); UINT64_MAX:
					 * until the deadline */
	uint64_t host_bytes, host_csum;
	uint64_t host_sent_csum;        /* stream latency: what the host sent */
	char host_err[160];
	int stop;                       /* atomic: guest side gave up */
	int host_gone;                  /* atomic: the host thread ended
					 * (host_rc and host_err are set) */
	int go;                         /* atomic, --conns: the senders may start */
	/* guest side */
	uint64_t t_first, t_last;       /* ns: first byte sent, last read */
	uint64_t spin_end;              /* --busy-poll: this idle spell's end (0: none) */
	bool tx_blocked;                /* vsock: a send found no room since the
					 * last sleep */
	double *lat;
	uint64_t nlat;
	uint64_t guest_bytes, guest_csum;
	uint64_t guest_kicks, guest_waits;
	uint64_t kicks_owed, kicks_dropped;     /* --drop-kicks */
	/* seqpacket: whole messages each end checked and counted */
	uint64_t guest_msgs, host_msgs;
	char guest_err[160];
	/* --conns */
	struct vs_flows flows;          /* the receiver's */
	struct vs_src *src;             /* the sender's */
	uint64_t stall_sent;            /* --stall: the most sent on a stalled one
					 * when the others had ended */
	int64_t rss_before_kb;          /* backend's anonymous memory before the
					 * host program starts; -1: unknown */
	int64_t rss_idle_kb;            /* its growth with N idle connections;
					 * -1: unknown */
	/* CPU time from the host program's start to its end (ns; -1: not
	 * measured): this thread (the guest side), the host program's, the
	 * backend's threads */
	int64_t cpu_guest_ns, cpu_host_ns, cpu_backend_ns;
	uint64_t cpu_wall_ns;           /* the wall time they were read over */
	/* --dirty-log: the log, and what the backend may write, watched */
	struct perf_dlog dlog;
	struct perf_dlog_watch wbuf, wring;
	uint64_t buf_pages, ring_pages, unlogged;
	double c2c_before, c2c_after;
};

static inline bool vs_stopped(struct vs_run *n)
{
	return __atomic_load_n(&n->stop, __ATOMIC_ACQUIRE);
}

/* Our side failed: the other side (host program or second guest) is told
 * to stop. */
static inline void vs_give_up(struct vs_run *n)
{
	__atomic_store_n(&n->stop, 1, __ATOMIC_RELEASE);
	if (n->peer)
		__atomic_store_n(&n->peer->stop, 1, __ATOMIC_RELEASE);
}

/* vsock_guest.c: the guest side of one connection */
/* Nothing moved this turn: within --busy-poll's window go on (0), else
 * sleep until the transport may move; -EPIPE once the host side gave up. */
int vs_guest_idle(struct vs_run *n, struct vs_end *ends, unsigned nends);
/* Something moved: the next idle spell starts a new busy-poll window. */
static inline void vs_guest_moved(struct vs_run *n)
{
	n->spin_end = 0;
}
/* The end of a turn in which the caller moved something or not: pump
 * the transport, then a new window if anything moved, else idle.  0 or
 * -errno. */
int vs_guest_next(struct vs_run *n, struct vs_end *ends, unsigned nends, bool moved);
/* Shut e down both ways, pumping until the transport takes it.  0 or
 * -errno. */
int vs_guest_finish(struct vs_run *n, struct vs_end *e);
/* The transfer on the connected end e; 0 or -errno. */
int vs_guest_transfer(struct vs_run *n, struct vs_end *e, uint64_t total, uint64_t deadline);

/* vsock_host.c: the host program */
/* send or recv of up to len bytes with flags: without MSG_DONTWAIT the
 * same call with it through --busy-poll's window first, then blocking.
 * The count, 0 at EOF, -errno (-EAGAIN only with MSG_DONTWAIT). */
ssize_t vs_sock_io(struct vs_run *n, int fd, void *p, size_t len, bool wr, int flags);
/* The host end of the connection to the guest: CONNECT through the
 * backend (rx, latency) or accept at HOST_PATH_PORT (tx); unix: the
 * pair's.  fd or -1 with host_err said. */
int vs_host_connect(struct vs_run *n, unsigned i);
void *vs_host_main(void *arg);

/* vsock_unix.c: the socket pairs, n->nends of them.  0 or -errno (said). */
int vs_unix_setup(struct vs_run *n);
void vs_unix_free(struct vs_run *n);

/* vsock_conns.c: --conns */
/* The senders' and receivers' state, before either side starts.  0 or
 * -ENOMEM. */
int vs_conns_prepare(struct vs_run *n);
void vs_conns_free(struct vs_run *n);
int vs_conns_guest(struct vs_run *n);
/* Both ends saw the same streams?  guest_bytes and guest_csum become the
 * received total and the sum of the checksums; false with the reason on
 * stderr. */
bool vs_conns_verified(struct vs_run *n);
/* What the report adds: JSON fields (",..."), text lines. */
void vs_conns_json(struct vs_run *n);
void vs_conns_text(struct vs_run *n);
/* The receiver's bookkeeping (vsock_conns.c), for both sides. */
void vs_flow_got(struct vs_run *n, unsigned i, const uint8_t *p, size_t k);
void vs_flow_end(struct vs_run *n, unsigned i);
/* Is connection i held back by --stall now? */
bool vs_flow_paused(const struct vs_run *n, unsigned i);
/* The others ended: held[i] are the bytes waiting on stalled i. */
void vs_flow_resume(struct vs_run *n, const uint64_t *held);
/* Sender i's next step: up to --buf-size bytes, no more than room, made
 * in scratch (--buf-size bytes, the calling thread's), and put() what it
 * takes.  Bytes moved, 0, -errno; src.done once all went or the
 * deadline came. */
long vs_src_step(struct vs_run *n, unsigned i, uint64_t deadline, uint8_t *scratch,
		 uint32_t room,
		 long (*put)(void *ctx, unsigned i, const void *p, uint32_t len), void *ctx);

/* vsock_conns_host.c: --conns, the host program */
void *vs_conns_host(void *arg);

/* vsock.c */
/* Our front-end on n->o.socket_path, the rings up, our driver on them.
 * 0 or -errno (said). */
int vs_guest_setup(struct vs_run *n);
/* The guest's side of one connection: connect (tx) or accept, then move
 * the data.  0 or -errno; on an error the other side is told to stop. */
int vs_guest_run(struct vs_run *n);

/* vsock_peer.c: --peer guest */
/* The second guest (p) beside n: the other direction, on the second
 * socket.  0 or -1 (said). */
int vs_peer_setup(struct vs_run *n, struct vs_run *p);
/* Before the second guest's thread starts: the receiving guest listens. */
void vs_peer_prepare(struct vs_run *n);
/* The second guest's thread (arg: n): its side of the transfer; what it
 * saw goes where the host program puts it. */
void *vs_peer_main(void *arg);
void vs_peer_free(struct vs_run *p);

/* The backend's anonymous memory (kB, /proc/PID/status RssAnon), -1 if
 * none was started or it cannot be read. */
int64_t vs_backend_rss_anon(struct vs_run *n);

#endif
