/* SPDX-License-Identifier: MIT */
/*
 * The fds a hostile front-end can pass where the protocol expects an
 * eventfd, a socket or guest memory: each kind cheap to make (a few system
 * calls), so a fuzz target can pass one with every message.  Whatever a
 * kind needs kept open meanwhile (a pipe's other end, a socket's peer, a
 * memfd still to shrink) the set holds until hfd_release().
 */
#ifndef VQ_FUZZ_HOSTILE_FDS_H
#define VQ_FUZZ_HOSTILE_FDS_H

#include <stdbool.h>

enum hfd_kind {
	HFD_EVENTFD,            /* non-blocking, as QEMU passes them */
	HFD_EVENTFD_BLOCKING,   /* a read of its zero count blocks */
	HFD_EVENTFD_MAX,        /* at 0xfffffffffffffffe: a write blocks */
	HFD_EVENTFD_MAX_NB,     /* the same, non-blocking: a write fails */
	HFD_PIPE_READ,          /* an empty pipe's read end, its writer open */
	HFD_PIPE_WRITE,         /* a pipe's write end, its reader open */
	HFD_PIPE_FULL,          /* a full pipe's write end: a write blocks */
	HFD_PIPE_NO_READER,     /* a write raises SIGPIPE */
	HFD_PIPE_NO_WRITER,     /* a read end at EOF */
	HFD_SOCKET,             /* a stream socket, its peer open and silent */
	HFD_SOCKET_FULL,        /* its send buffer full: a send blocks */
	HFD_SOCKET_NO_PEER,     /* its peer closed: a send fails */
	HFD_MEMFD_SHRINKS,      /* 1 MiB, truncated to 0 by hfd_shrink() */
	HFD_FILE,               /* a 1 MiB unnamed file in $TMPDIR or /tmp */
	HFD_MEMFD_SEALED,       /* 1 MiB, sealed: no writable shared mapping */
	HFD_SHARED,             /* one eventfd per set, passed every time */
	HFD_KINDS
};

#define HFD_HOLD_MAX 32u

struct hfd_set {
	int held[HFD_HOLD_MAX];         /* other ends, memfds to shrink */
	bool shrinks[HFD_HOLD_MAX];     /* held[i] is truncated by hfd_shrink */
	unsigned nheld;
	unsigned nshrink;               /* of them, not yet truncated */
	int shared;                     /* HFD_SHARED's, or -1 */
};

void hfd_init(struct hfd_set *s);
/* A new fd of kind k for the caller to pass and close, or -1 when none
 * can be made (the set holds HFD_HOLD_MAX fds already, or a system call
 * failed). */
int hfd_make(struct hfd_set *s, enum hfd_kind k);
/* Memfds of kind HFD_MEMFD_SHRINKS made since the last hfd_shrink(). */
bool hfd_shrink_pending(const struct hfd_set *s);
/* Truncate them to 0: whoever mapped one meanwhile has a mapping past the
 * file's end, which faults (SIGBUS) when touched. */
void hfd_shrink(struct hfd_set *s);
/* Close everything the set holds. */
void hfd_release(struct hfd_set *s);

#endif
