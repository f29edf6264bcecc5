// SPDX-License-Identifier: MIT
/*
 * vhost-user message I/O on a UNIX stream socket: whole messages only,
 * SCM_RIGHTS in and out, every wait in poll() to a deadline of our own (a
 * peer holding a duplicate of our socket can change its flags and
 * timeouts, never ours).  Compiled into the guest library too, for our
 * front-end.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vhu_internal.h"

static uint64_t deadline_in(unsigned timeout_ms)
{
	return vhu_now_ns() + (uint64_t)timeout_ms * 1000000ull;
}

/*
 * Wait until sock is ready for events, or the deadline: 0 (try again; a
 * hang-up or an error shows in that call) or -ETIMEDOUT.  The wait is
 * ours: every sendmsg and recvmsg is MSG_DONTWAIT, so nothing the peer
 * sets on a description it shares with us (O_NONBLOCK, SO_RCVTIMEO,
 * SO_SNDTIMEO: an inherited --fd) changes how long we wait.
 */
static int wait_ready(int sock, short events, uint64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = sock, .events = events };
		uint64_t now = vhu_now_ns(), ms;
		int r;

		if (now >= deadline)
			return -ETIMEDOUT;
		ms = (deadline - now + 999999) / 1000000;
		r = poll(&p, 1, ms > INT_MAX ? INT_MAX : (int)ms);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

int vhu_send(int sock, const struct vq_vhu_msg *m, const int *fds,
	     unsigned nfds, unsigned timeout_ms)
{
	uint8_t buf[VQ_VHU_MSG_MAX];
	union {
		char b[CMSG_SPACE(sizeof(int) * VQ_VHU_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct msghdr mh = { 0 };
	struct iovec iov;
	ssize_t len = vq_vhu_encode(m, buf, sizeof(buf)), done = 0;
	uint64_t deadline = deadline_in(timeout_ms);

	if (len < 0)
		return (int)len;
	if (nfds > VQ_VHU_MAX_FDS)
		return -EINVAL;
	while (done < len) {
		ssize_t n;

		iov.iov_base = buf + done;
		iov.iov_len = len - done;
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = NULL;
		mh.msg_controllen = 0;
		if (done == 0 && nfds) {
			struct cmsghdr *c;

			memset(&ctl, 0, sizeof(ctl));
			mh.msg_control = ctl.b;
			mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
			c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
			memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
		}
		n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			int r = 0;

			if (errno == EAGAIN || errno == EWOULDBLOCK)
				r = wait_ready(sock, POLLOUT, deadline);
			else if (errno != EINTR)
				r = -errno;
			if (r)
				return r;
			continue;
		}
		done += n;
	}
	return 0;
}

/* Collect SCM_RIGHTS fds from mh into fds[*nfds..]; excess ones are closed
 * and reported as -EBADF. */
static int take_fds(struct msghdr *mh, int *fds, unsigned *nfds)
{
	int ret = 0;

	if (mh->msg_flags & MSG_CTRUNC)
		ret = -EBADF;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		unsigned n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (unsigned i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*nfds < VQ_VHU_MAX_FDS) {
				fds[(*nfds)++] = fd;
			} else {
				close(fd);
				ret = -EBADF;
			}
		}
	}
	return ret;
}

/* Read exactly len bytes (or fail) by the deadline; fds may arrive with
 * any part.  nowait: the first byte of a message (first) is not waited
 * for. */
static int recv_exact(int sock, uint8_t *p, size_t len, bool nowait,
		      uint64_t deadline, int *fds, unsigned *nfds, bool first)
{
	size_t done = 0;
	int bad = 0;

	while (done < len) {
		union {
			char b[CMSG_SPACE(sizeof(int) * VQ_VHU_MAX_FDS)];
			struct cmsghdr align;
		} ctl;
		struct msghdr mh = { 0 };
		struct iovec iov = { p + done, len - done };
		ssize_t n;

		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = ctl.b;
		mh.msg_controllen = sizeof(ctl.b);
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n < 0) {
			int r = 0;

			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				if (nowait && first && done == 0)
					return -EAGAIN;
				r = wait_ready(sock, POLLIN, deadline);
			} else if (errno != EINTR) {
				r = -errno;
			}
			if (r)
				return r;
			continue;
		}
		if (take_fds(&mh, fds, nfds))
			bad = -EBADF;
		if (n == 0)
			return (first && done == 0) ? -ECONNRESET : -EPIPE;
		done += n;
	}
	return bad;
}

static void close_fds(int *fds, unsigned *nfds)
{
	for (unsigned i = 0; i < *nfds; i++)
		close(fds[i]);
	*nfds = 0;
}

int vhu_recv(int sock, bool request, bool nowait, unsigned timeout_ms,
	     uint8_t *buf, size_t *len, int *fds, unsigned *nfds)
{
	uint64_t deadline = deadline_in(timeout_ms);
	uint32_t size;
	int r;

	*nfds = 0;
	*len = 0;
	r = recv_exact(sock, buf, VQ_VHU_HDR_SIZE, nowait, deadline, fds, nfds, true);
	if (r)
		goto err;
	if (request) {
		r = vq_vhu_check_request_hdr(buf, &size);
		if (r) {
			*len = VQ_VHU_HDR_SIZE;
			goto err;
		}
	} else {
		memcpy(&size, buf + 8, 4);
		if (size > VQ_VHU_PAYLOAD_MAX) {
			r = -EMSGSIZE;
			goto err;
		}
	}
	r = recv_exact(sock, buf + VQ_VHU_HDR_SIZE, size, false, deadline, fds,
		       nfds, false);
	if (r)
		goto err;
	*len = VQ_VHU_HDR_SIZE + size;
	return (int)*len;
err:
	close_fds(fds, nfds);
	return r;
}
