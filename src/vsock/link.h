/* SPDX-License-Identifier: MIT */
/*
 * Sibling connections (link.c) and the hub they go through (hub.c).
 *
 * Two guests of one hub talk ring to ring: each device keeps its guest's
 * half of the connection in its own table (struct vs_conn, as for a host
 * socket), and the two halves share a struct vs_link that stands where
 * the host socket would: a byte pipe each way (stream bytes, or seqpacket
 * messages each behind its 4-byte length) and the flags a socket pair
 * has (shut down, closed).  Each pipe has one writer and one reader, the
 * two devices, which may run on different threads: the indices are
 * atomics, and nobody ever waits for the other side.
 *
 * A device hears of its sibling's doings through its inbox (struct
 * vs_member, in the hub): a list of link ends with news, under a mutex
 * held for a few instructions, and an eventfd in the device's epoll set.
 * An end is on the list at most once, so the list is bounded by the
 * links, and a side posts only what its peer asked for (data while it
 * waited for data, room while it waited for room) and the rare events
 * (an offer, an answer, a shutdown, a close).
 */
#ifndef VIRTQ_VSOCK_LINK_H
#define VIRTQ_VSOCK_LINK_H

#include <pthread.h>
#include <stdatomic.h>

#include "vsock_internal.h"

#define VS_HUB_MAX      1024u   /* devices in a hub */
#define VS_NEWS_BUDGET  256u    /* inbox entries one turn takes */
#define VS_FRAME        4u      /* a seqpacket message's length, in its pipe */

/* One direction's bytes: a ring of cap (a power of two) bytes that one
 * side writes (tail) and the other reads (head); free-running counts. */
struct vs_pipe {
	uint8_t *buf;
	uint32_t cap;
	_Atomic uint32_t head, tail;
};

/* One side of a link. */
struct vs_end {
	struct vs_link *link;
	struct vs_member *m;            /* its device's inbox */
	struct vs_end *next;            /* in m's inbox: under m->mu */
	bool queued;                    /* under m->mu */
	/* m's device's thread only */
	struct vs_conn *conn;           /* NULL until taken, and once closed */
	bool taken;                     /* (the acceptor's) the offer was seen */
	/* what the side did, for the other to see */
	atomic_bool shut;               /* sends no more */
	atomic_bool closed;             /* gone: neither sends nor reads */
	/* the side waits: for data from the peer, for room to the peer */
	atomic_bool rd_wait, wr_wait;
};

struct vs_link {
	atomic_uint refs;               /* the two sides, and each inbox entry */
	atomic_bool accepted;           /* the acceptor's guest said RESPONSE */
	uint16_t type;
	/* side 0 asked (its guest's REQUEST), side 1 was asked */
	uint64_t cid[2];
	uint32_t port[2];
	struct vs_pipe pipe[2];         /* pipe[i]: side i writes */
	struct vs_end end[2];
};

/* A device in the hub as its siblings see it: cid, groups and buf_alloc
 * are fixed once joined, the rest is under mu.  epoll data points at
 * kind. */
struct vs_member {
	enum vs_kind kind;
	uint64_t cid;
	/* Set at each join: a sibling that saw the last device live may still
	 * read them while a new device of this CID joins. */
	_Atomic uint64_t groups;
	_Atomic uint32_t buf_alloc;
	int efd;                        /* readable: news in the inbox */
	pthread_mutex_t mu;
	struct vs_end *head, *tail;     /* the inbox */
	atomic_bool live;               /* a device is joined */
};

/* hub.c */
/* The member at cid (live or not), or NULL. */
VQ_INTERNAL struct vs_member *vs_hub_find(struct vq_vsock_hub *h, uint64_t cid);
/* Put e in m's inbox (a reference to its link with it), unless it is
 * there already or m's device is gone. */
VQ_INTERNAL void vs_member_post(struct vs_member *m, struct vs_end *e);
/* The oldest entry of m's inbox, or NULL: the caller drops its reference. */
VQ_INTERNAL struct vs_end *vs_member_pop(struct vs_member *m);
/* v is freed: its inbox takes nothing more. */
VQ_INTERNAL void vs_hub_leave(struct vq_vsock *v);

/* link.c */
VQ_INTERNAL void vs_link_ref(struct vs_link *l);
VQ_INTERNAL void vs_link_unref(struct vs_link *l);

#endif
