/* SPDX-License-Identifier: MIT */
/* Private to vhost-user: message I/O over a UNIX stream socket. */
#ifndef VIRTQ_VHU_INTERNAL_H
#define VIRTQ_VHU_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <virtq/vhost_user.h>

#include "internal.h"

/* Encode m and send it with fds[0, nfds) as SCM_RIGHTS.  0 or -errno. */
VQ_INTERNAL int vhu_send(int sock, const struct vq_vhu_msg *m, const int *fds,
			 unsigned nfds);

/*
 * Receive one message into buf (VQ_VHU_MSG_MAX bytes): the header first (with
 * MSG_DONTWAIT if nowait, so an idle socket gives -EAGAIN), then the payload
 * the header announces.  For a request the header is checked before the
 * payload is read, so an oversized or unknown request is refused without
 * reading it; for a reply the size is bounded by VQ_VHU_PAYLOAD_MAX.  Received
 * fds go to fds/nfds (closed on error).  Returns the message length, or
 * -EAGAIN, -ECONNRESET (orderly EOF before a header), -EPIPE (EOF inside a
 * message), -ETIMEDOUT (stalled inside a message), -EMSGSIZE, -EBADF (fds
 * truncated), or the header check's error (then the header is in buf and
 * the return is -errno; *len is set to VQ_VHU_HDR_SIZE for diagnosis).
 */
VQ_INTERNAL int vhu_recv(int sock, bool request, bool nowait, uint8_t *buf,
			 size_t *len, int *fds, unsigned *nfds);

#endif
