/* SPDX-License-Identifier: MIT */
/*
 * The daemon hostile suite (issue 31): one virtq-net (loopback) or
 * virtq-vsock process for the whole run, a hand-driven hostile front-end
 * (frontend_raw.c) doing what no front-end should, and after each case a
 * check that the same process still serves a new, good front-end with
 * traffic, with its fds, threads and memory back where they were
 * (daemon.c).
 */
#ifndef VQ_HOSTILE_H
#define VQ_HOSTILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <virtq/ring.h>
#include <virtq/vhost_user.h>
#include <virtq/guest/vsock.h>

enum kind { K_NET, K_VSOCK };

/* What the daemon is started with: the vsock guest's CID, and the host
 * ports the guest connects to (the good session's has a listener, the
 * hostile traffic's has none, so it is answered by RST). */
#define HOSTILE_CID	 3u
#define GOOD_PORT	 5000u
#define NO_LISTENER_PORT 5999u

/* Bounds: a reply (hang detection), a responsiveness probe, a good
 * session, the daemon's counts settling. */
#define REPLY_MS  2000
#define PROBE_MS  3000
#define GOOD_MS	  10000
#define SETTLE_MS 3000
/* VmRSS may grow this much over the baseline (ASan's quarantine keeps
 * freed memory for a while). */
#define RSS_SLACK_KB (48 * 1024)

/* ---- the daemon under test (daemon.c) ---- */

struct counts {
	int fds, tasks, memfd_maps;
	long rss_kb;
};

struct daemon {
	enum kind kind;
	const char *bin, *name; /* "virtq-net" */
	char dir[64], sock[96], uds[96], log[112];
	int good_listener; /* vsock: the host listener at uds_GOOD_PORT */
	pid_t pid;
	unsigned starts;
	struct counts base;
};

/* Start it and take the baseline after a first good session.  NULL, or
 * why not. */
const char *daemon_start(struct daemon *d);
/* Why the daemon is not running any more (dead, with the log's first
 * sanitizer or error line), or NULL while it runs. */
const char *daemon_gone(struct daemon *d);
/* The same, waiting up to ms for it to end. */
const char *daemon_gone_within(struct daemon *d, int ms);
/* Kill what is left of it (SIGKILL) and reap it. */
void daemon_kill(struct daemon *d);
/* SIGTERM: NULL if it ended within ms with status 0, else why not. */
const char *daemon_term(struct daemon *d, int ms);
/* A new good front-end: handshake and traffic within GOOD_MS.  NULL, or
 * why it failed. */
const char *good_session(struct daemon *d);
void counts_take(pid_t pid, struct counts *c);
/* Counts back to the baseline within SETTLE_MS and RSS within the
 * slack: NULL, or what differs. */
const char *counts_settle(struct daemon *d);

/* ---- shared by the good and the hostile traffic ---- */

/* An Ethernet frame of size bytes with sequence number seq. */
void frame_fill(uint8_t *p, unsigned size, uint32_t seq);
/* Is p (size bytes) frame seq with its MAC addresses swapped, as
 * loopback returns it? */
bool frame_looped(const uint8_t *p, unsigned size, uint32_t seq);
/* Both sessions' vsock rings hold 64 entries; the guest driver's areas. */
#define VSG_NUM	    64u
#define VSG_RX_SIZE (VSG_NUM * 4160u)
#define VSG_TX_SIZE 0x10000u
#define VSG_EV_SIZE 0x1000u
/* The vsock guest driver over rings q (rx, tx, event) and areas a,
 * started (its RX and event buffers posted).  0 or -errno. */
int vsg_make(struct vq_drv *const q[3], const struct vq_vsg_area a[3],
	     void (*kick)(void *, unsigned), void *arg, struct vq_vsg **out);

/* ---- the hostile front-end (frontend_raw.c) ---- */

#define HQ_MAX 3

struct hq {
	int kick, call, err; /* what the ring is given; -1: default / none */
	int kick_wr;	     /* where a kick is written; -1: nowhere */
	int err_rd;	     /* our own error eventfd, to read; -1: none */
	struct vq_drv *drv;  /* our side of the ring, if traffic runs */
};

struct hfe {
	const struct daemon *d;
	unsigned nq;
	int s;
	uint64_t offered, proto_offered;
	uint64_t features, protocol; /* negotiated */
	/* the first thing that went wrong: the daemon closed the connection
	 * (closed), or did not answer within REPLY_MS (stalled) */
	bool closed, stalled;
	char why[256];
	char note[160];	  /* what else the case saw */
	char failed[200]; /* a finding of the case's own */
	bool refused;	  /* a REPLY_ACK said no */
	int tmo_ms;	  /* the socket's reply timeout */
	/* guest memory: a memfd of GUEST_SIZE, also mapped here */
	int memfd;
	uint8_t *mem;
	bool mem_gone; /* truncated: never touch it again */
	uint64_t iova; /* non-zero: rings are given IOVAs */
	struct hq q[HQ_MAX];
	struct vq_vsg *g;
	int own[24]; /* fds to close at the end */
	unsigned nown;
};

#define GUEST_SIZE (1u << 20)

void hfe_init(struct hfe *h, const struct daemon *d);
/* Close the connection and everything the case made. */
void hfe_close(struct hfe *h);
/* Keep fd to close it at the end; returns it. */
int hfe_own(struct hfe *h, int fd);
/* Close an fd hfe_own kept, now. */
void hfe_drop(struct hfe *h, int fd);
bool hfe_ok(const struct hfe *h);

/* Connect, SET_OWNER, features and protocol features (want & offered;
 * the features VERSION_1 and PROTOCOL_FEATURES and extra). */
void hfe_open(struct hfe *h, uint64_t proto_want, uint64_t extra);
/* Send a request; REPLY_ACK is asked for when negotiated, and its ack
 * (or the request's reply, into *rep if given) read. */
void hfe_req(struct hfe *h, struct vq_vhu_msg *m, const int *fds, unsigned nfds,
	     struct vq_vhu_msg *rep);
void hfe_u64(struct hfe *h, uint32_t req, uint64_t v);
/* A zeroed message of the request and payload kind. */
struct vq_vhu_msg hfe_msg(uint32_t req, enum vq_vhu_payload kind);
/* Guest memory as one region, with SET_MEM_TABLE (its reply into rep if
 * one comes: postcopy's echo) or ADD_MEM_REG. */
void hfe_mem_table(struct hfe *h, struct vq_vhu_msg *rep);
void hfe_add_mem_reg(struct hfe *h);
/* Lose guest memory: truncate its file to 0 (the hostile act). */
void hfe_truncate_mem(struct hfe *h);
/* Every ring as QEMU sets it up: CALL, ERR, NUM, BASE, ADDR, KICK,
 * ENABLE (the fds the case chose, else non-blocking eventfds); with
 * drivers, our side of each ring first. */
void hfe_rings(struct hfe *h, bool drivers);
/* Live migration's logging on, as QEMU turns it on while the rings run;
 * the log's memfd goes to *logfd. */
void hfe_logging_on(struct hfe *h, int *logfd);
/* Traffic through the rings: frames looped back (net), a REQUEST to a
 * port nobody listens on answered by RST (vsock).  0, or -ETIMEDOUT. */
int hfe_traffic(struct hfe *h);
/* A connection the daemon kept must still be served: traffic moves, or a
 * ring it stopped serving said so on its error fd.  Else h->failed says
 * what is wrong. */
void hfe_expect_served(struct hfe *h);
/* Kick every ring. */
void hfe_kick_all(struct hfe *h);
/* Break ring i: an avail index that moved by more than the queue size
 * (virtio 2.7.13.3), then a kick. */
void hfe_break_ring(struct hfe *h, unsigned i);
/* Wait up to ms for the daemon to close the connection. */
void hfe_wait_closed(struct hfe *h, int ms);
/* Is the daemon still answering on this connection (or did it close
 * it)?  NULL, or why not. */
const char *hfe_probe(struct hfe *h);

/* Blocking notification fds that cannot take another write. */
int eventfd_at_max(void);
int pipe_full(int *read_end);

#endif
