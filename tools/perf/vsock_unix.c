// SPDX-License-Identifier: MIT
/*
 * virtq-perf vsock --transport unix: the baseline.  virtq-vsock moves
 * every byte between a guest ring and a host UNIX socket, so the plain
 * socket is the limit of its data path: the same two threads run the
 * same transfers, with the same checks, over a UNIX socket pair
 * (SOCK_STREAM, or SOCK_SEQPACKET with --type seqpacket) instead.
 *
 * One connection: blocking calls, what a plain socket program makes
 * (with --busy-poll, the same call with MSG_DONTWAIT through the window
 * first; SO_RCVLOWAT for --rcvlowat).  --conns: non-blocking calls,
 * waiting in poll(2).  --rcvbuf, when given, is both sockets' SO_SNDBUF
 * (a UNIX socket's window is its sender's buffer); else the kernel's.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vsock_run.h"

static int ux_flags(const struct vs_end *e)
{
	return e->blocking ? 0 : MSG_DONTWAIT;
}

/* -EAGAIN on an end that does not block: 0, and what to wait for. */
static long ux_later(struct vs_end *e, ssize_t r, short want)
{
	if (r != -EAGAIN)
		return r;
	e->ready = false;
	e->want = want;
	return 0;
}

/* A non-blocking end poll(2) has not called ready since its last
 * EAGAIN: no system call to learn that again. */
static bool ux_idle(struct vs_end *e, short want)
{
	if (e->blocking || e->ready)
		return false;
	e->want = want;
	return true;
}

static long ux_write(struct vs_end *e, const void *buf, uint32_t len)
{
	ssize_t r;

	if (ux_idle(e, POLLOUT))
		return 0;
	r = vs_sock_io(e->n, e->fd, (void *)(uintptr_t)buf, len, true, ux_flags(e));
	return ux_later(e, r, POLLOUT);
}

static uint32_t ux_room(struct vs_end *e)
{
	return ux_idle(e, POLLOUT) ? 0 : UINT32_MAX;
}

static long ux_read(struct vs_end *e, void *buf, uint32_t len, bool *eof)
{
	ssize_t r;

	*eof = false;
	if (ux_idle(e, POLLIN))
		return 0;
	/* A MSG_DONTWAIT read takes less than SO_RCVLOWAT: block at once. */
	if (e->blocking && e->n->o.rcvlowat > 1) {
		do
			r = recv(e->fd, buf, len, 0);
		while (r < 0 && errno == EINTR);
		r = r < 0 ? -errno : r;
	} else {
		r = vs_sock_io(e->n, e->fd, buf, len, false, ux_flags(e));
	}
	*eof = r == 0;
	return ux_later(e, r, POLLIN);
}

static long ux_write_msg(struct vs_end *e, const void *buf, uint32_t len)
{
	ssize_t r;

	if (ux_idle(e, POLLOUT))
		return 0;
	r = vs_sock_io(e->n, e->fd, (void *)(uintptr_t)buf, len, true, ux_flags(e));
	if (r == -EMSGSIZE)
		snprintf(e->n->guest_err, sizeof(e->n->guest_err),
			 "a %u-byte message is larger than the socket's buffer", len);
	if (r >= 0 && r != (ssize_t)len)
		return -EIO;    /* a seqpacket socket sends all or nothing */
	return ux_later(e, r, POLLOUT);
}

static long ux_read_msg(struct vs_end *e, void *buf, uint32_t cap)
{
	ssize_t r;

	if (ux_idle(e, POLLIN))
		return -EAGAIN;
	/* MSG_TRUNC: the message's real length, so a long one shows */
	r = vs_sock_io(e->n, e->fd, buf, cap, false, MSG_TRUNC | ux_flags(e));
	if (r == 0)
		return -EPIPE;
	return r == -EAGAIN ? (ux_later(e, r, POLLIN), -EAGAIN) : r;
}

static int ux_open(struct vs_run *n)
{
	(void)n;
	return 0;       /* the pairs are connected */
}

static int ux_finish(struct vs_end *e)
{
	shutdown(e->fd, SHUT_RDWR);
	return 0;
}

static void ux_abort(struct vs_end *e)
{
	shutdown(e->fd, SHUT_RDWR);
}

static bool ux_closed(struct vs_end *e)
{
	(void)e;
	return true;
}

/* poll(2) the ends that wait for something, up to ms: those it names
 * are ready again.  How many, or -errno. */
static int ux_poll(struct vs_end *ends, unsigned nends, int ms)
{
	struct pollfd pf[VS_CONNS_MAX];
	unsigned idx[VS_CONNS_MAX];
	unsigned i, k = 0;
	int r;

	for (i = 0; i < nends && k < VS_CONNS_MAX; i++) {
		if (ends[i].blocking || ends[i].ready || !ends[i].want)
			continue;
		pf[k] = (struct pollfd){ .fd = ends[i].fd, .events = ends[i].want };
		idx[k++] = i;
	}
	if (!k)
		return 0;
	r = poll(pf, k, ms);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	for (i = 0; i < k; i++) {
		if (!pf[i].revents)
			continue;
		ends[idx[i]].ready = true;
		ends[idx[i]].want = 0;
	}
	return r;
}

static int ux_pump(struct vs_run *n)
{
	return ux_poll(n->ends, n->nends, 0);
}

static int ux_wait(struct vs_run *n, struct vs_end *ends, unsigned nends, int ms)
{
	int r = ux_poll(ends, nends, ms);

	(void)n;
	return r < 0 ? r : 0;
}

const struct vs_xport vs_xport_unix = {
	.name = "unix",
	.write = ux_write, .room = ux_room, .read = ux_read,
	.write_msg = ux_write_msg, .read_msg = ux_read_msg,
	.open = ux_open, .finish = ux_finish, .abort = ux_abort, .closed = ux_closed,
	.pump = ux_pump, .wait = ux_wait,
};

/* Each pair's window, when --rcvbuf says it; the guest's read low mark. */
static int ux_tune(struct vs_run *n, int sv[2])
{
	int v = (int)n->o.rcvbuf, lowat = (int)n->o.rcvlowat;

	if (n->o.rcvbuf_given &&
	    (setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) < 0 ||
	     setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) < 0))
		return -errno;
	if (lowat > 1 && setsockopt(sv[0], SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat)) < 0)
		return -errno;
	return 0;
}

int vs_unix_setup(struct vs_run *n)
{
	int type = (n->o.seqpacket ? SOCK_SEQPACKET : SOCK_STREAM) | SOCK_CLOEXEC;
	unsigned i;
	int r = 0;

	n->host_fds = malloc(n->nends * sizeof(*n->host_fds));
	if (!n->host_fds)
		return -ENOMEM;
	for (i = 0; i < n->nends; i++)
		n->host_fds[i] = -1;
	for (i = 0; i < n->nends && r == 0; i++) {
		int sv[2];

		/* --conns: neither side may block on one of many */
		if (socketpair(AF_UNIX, type | (n->o.conns ? SOCK_NONBLOCK : 0), 0, sv) < 0) {
			r = -errno;
			break;
		}
		n->ends[i].fd = sv[0];
		n->ends[i].blocking = !n->o.conns;
		n->ends[i].ready = true;
		n->host_fds[i] = sv[1];
		r = ux_tune(n, sv);
	}
	if (r < 0)
		fprintf(stderr, "virtq-perf vsock: socket pair %u: %s\n", i, strerror(-r));
	return r;
}

void vs_unix_free(struct vs_run *n)
{
	unsigned i;

	for (i = 0; n->host_fds && i < n->nends; i++)
		if (n->host_fds[i] >= 0)
			close(n->host_fds[i]);
	for (i = 0; n->ends && i < n->nends; i++)
		if (n->ends[i].fd >= 0)
			close(n->ends[i].fd);
	free(n->host_fds);
	n->host_fds = NULL;
}
