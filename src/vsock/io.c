// SPDX-License-Identifier: MIT
/*
 * A connection's other end: a host socket, or a sibling's half through a
 * link (link.c).  The rest of the device speaks to both the way the socket
 * calls answer: bytes, or -1 with errno (EAGAIN: not now; anything else:
 * the end is gone), 0 from a read at the end.
 */
#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include "vsock_internal.h"

/* Without SIGPIPE: a host that closed its socket is an error to handle
 * (RST), not a signal that kills the daemon. */
ssize_t vs_io_writev(struct vs_conn *c, struct iovec *iov, unsigned n)
{
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = n };
	struct mmsghdr mm = { .msg_hdr = m };

	if (c->link && c->type == VQ_VSOCK_TYPE_SEQPACKET)
		/* one message, whole or not at all, as on a socket */
		return vs_link_sendmsgs(c, &mm, 1) == 1 ? (ssize_t)mm.msg_len : -1;
	if (c->link)
		return vs_link_writev(c, iov, n);
	return sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

int vs_io_sendmsgs(struct vs_conn *c, struct mmsghdr *m, unsigned n)
{
	if (c->link)
		return vs_link_sendmsgs(c, m, n);
	return sendmmsg(c->fd, m, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

ssize_t vs_io_readv(struct vs_conn *c, struct iovec *iov, unsigned n)
{
	if (c->link)
		return vs_link_readv(c, iov, n);
	return readv(c->fd, iov, (int)n);
}

ssize_t vs_io_peek_len(struct vs_conn *c)
{
	if (c->link)
		return vs_link_peek_len(c);
	return recv(c->fd, NULL, 0, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
}

ssize_t vs_io_recv_msg(struct vs_conn *c, struct iovec *iov, unsigned n)
{
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = n };

	if (c->link)
		return vs_link_recv_msg(c, iov, n);
	return recvmsg(c->fd, &m, MSG_DONTWAIT);
}

bool vs_io_hung_up(struct vs_conn *c)
{
	struct pollfd p = { c->fd, POLLRDHUP, 0 };

	if (c->link)
		return vs_link_hung_up(c);
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

void vs_io_shut_wr(struct vs_conn *c)
{
	if (c->link)
		vs_link_shut_wr(c);
	else
		shutdown(c->fd, SHUT_WR);
}
