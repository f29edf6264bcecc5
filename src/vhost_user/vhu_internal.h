/* SPDX-License-Identifier: MIT */
/* Private to vhost-user: message I/O over a UNIX stream socket. */
#ifndef VIRTQ_VHU_INTERNAL_H
#define VIRTQ_VHU_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <virtq/vhost_user.h>

#include "util.h"

/*
 * Both calls wait only in poll(), up to timeout_ms from the call: every
 * sendmsg and recvmsg is MSG_DONTWAIT, so no flag or option the peer sets
 * on a socket it shares with us (an inherited connection) makes one wait
 * longer, whether the socket is blocking or not.
 */

/* Encode m and send it with fds[0, nfds) as SCM_RIGHTS.  0, -ETIMEDOUT
 * (the peer took not all of it in time) or -errno. */
VQ_INTERNAL int vhu_send(int sock, const struct vq_vhu_msg *m, const int *fds,
			 unsigned nfds, unsigned timeout_ms);

/*
 * Receive one message into buf (VQ_VHU_MSG_MAX bytes): the header first
 * (nowait: not waiting for its first byte, so an idle socket gives -EAGAIN),
 * then the payload the header announces.  For a request the header is
 * checked before the payload is read, so an oversized or unknown request is
 * refused without reading it; for a reply the size is bounded by
 * VQ_VHU_PAYLOAD_MAX.  Received fds go to fds/nfds (closed on error).
 * Returns the message length, or -EAGAIN, -ECONNRESET (orderly EOF before a
 * header), -EPIPE (EOF inside a message), -ETIMEDOUT (nothing, or not the
 * whole message, by the deadline), -EMSGSIZE, -EBADF (fds truncated), or
 * the header check's error (then the header is in buf and the return is
 * -errno; *len is set to VQ_VHU_HDR_SIZE for diagnosis).
 */
VQ_INTERNAL int vhu_recv(int sock, bool request, bool nowait, unsigned timeout_ms,
			 uint8_t *buf, size_t *len, int *fds, unsigned *nfds);

static inline uint64_t vhu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

#endif
