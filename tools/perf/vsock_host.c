// SPDX-License-Identifier: MIT
/*
 * virtq-perf vsock, the host program (a second thread): in rx the
 * sender, in tx the receiver, in --latency the pinger; on the backend's
 * UNIX sockets the hybrid-vsock way (CONNECT <port> to reach the guest,
 * a listener at HOST_PATH_<port> to be reached), or on its half of the
 * socket pair with --transport unix.  Blocking calls, each after a
 * --busy-poll window of the same call with MSG_DONTWAIT.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <virtq/runtime.h>
#include <virtq/guest/frontend.h>

#include "vsock_run.h"

ssize_t vs_sock_io(struct vs_run *n, int fd, void *p, size_t len, bool wr, int flags)
{
	bool block = !(flags & MSG_DONTWAIT);
	uint64_t end = 0;
	ssize_t r;

	if (block && n->o.busy_poll_us)
		end = vq_rt_now_ns() + n->o.busy_poll_us * 1000;
	for (;;) {
		int f = flags | (end ? MSG_DONTWAIT : 0);

		r = wr ? send(fd, p, len, f | MSG_NOSIGNAL) : recv(fd, p, len, f);
		if (r >= 0)
			return r;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN || !block)
			return -errno;
		if (vq_rt_now_ns() >= end)
			end = 0;
		else
			sched_yield();  /* as the guest's spin (vs_guest_idle) */
	}
}

/* All n bytes or an error (-errno, -EPIPE at EOF). */
static int io_full(struct vs_run *n, int fd, uint8_t *p, size_t len, bool wr)
{
	while (len) {
		ssize_t r = vs_sock_io(n, fd, p, len, wr, 0);

		if (r <= 0)
			return r < 0 ? (int)r : -EPIPE;
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

static int read_full(struct vs_run *n, int fd, void *buf, size_t len)
{
	return io_full(n, fd, buf, len, false);
}

static int write_full(struct vs_run *n, int fd, const void *buf, size_t len)
{
	/* send() does not change it */
	return io_full(n, fd, (uint8_t *)(uintptr_t)buf, len, true);
}

/* The hybrid handshake: "CONNECT <port>\n", then "OK <host_port>\n" read
 * one byte at a time (what follows belongs to the stream).  Seqpacket: at
 * HOST_PATH.seqpacket, the line and the reply are one message each. */
static int host_connect_guest(struct vs_run *n, uint32_t port)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	bool seq = n->o.seqpacket;
	char line[64];
	unsigned i = 0, hp;
	int fd, len;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s%s", n->o.uds, seq ? ".seqpacket" : "");
	fd = socket(AF_UNIX, (seq ? SOCK_SEQPACKET : SOCK_STREAM) | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		snprintf(n->host_err, sizeof(n->host_err), "connect %s: %s", a.sun_path,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	len = snprintf(line, sizeof(line), "CONNECT %u\n", port);
	if (write_full(n, fd, line, (size_t)len) < 0)
		goto fail;
	if (seq) {
		ssize_t r = recv(fd, line, sizeof(line) - 1, 0);

		if (r <= 0 || line[r - 1] != '\n')
			goto fail;
		i = (unsigned)r - 1;
	}
	while (!seq && i < sizeof(line) - 1) {
		if (read_full(n, fd, &line[i], 1) < 0)
			goto fail;
		if (line[i] == '\n')
			break;
		i++;
	}
	line[i] = '\0';
	if (sscanf(line, "OK %u", &hp) != 1) {
		snprintf(n->host_err, sizeof(n->host_err), "handshake reply '%s'", line);
		close(fd);
		return -1;
	}
	return fd;
fail:
	snprintf(n->host_err, sizeof(n->host_err), "handshake: connection closed");
	close(fd);
	return -1;
}

static int host_listen_accept(struct vs_run *n, int lfd)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	int i, fd;

	for (i = 0; i < 300 && !vs_stopped(n); i++) {
		if (poll(&p, 1, 100) > 0)
			break;
	}
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		snprintf(n->host_err, sizeof(n->host_err), "accept: %s", strerror(errno));
		return -1;
	}
	/* blocking from now on */
	return fd;
}

int vs_host_connect(struct vs_run *n, unsigned i)
{
	if (n->o.unix_socket) {
		int fd = n->host_fds[i];

		n->host_fds[i] = -1;    /* the caller's now */
		return fd;
	}
	if ((n->o.latency || n->o.rx) && n->o.profile == VQ_VHU_PROFILE_CROSVM) {
		/* crosvm sets no NEED_REPLY: its rings may still be on their
		 * way to the backend, which refuses a CONNECT with no guest.
		 * Retry for a while, as a host program retries a guest that
		 * is not up yet. */
		for (int k = 0; k < 200 && !vs_stopped(n); k++) {
			int fd = host_connect_guest(n, VS_PORT);

			if (fd >= 0 || strcmp(n->host_err, "handshake: connection closed"))
				return fd;
			usleep(10000);
		}
		return -1;
	}
	if (n->o.latency || n->o.rx)
		return host_connect_guest(n, VS_PORT);
	return host_listen_accept(n, n->host_lfd);
}

/* One message from the guest, checked: 0, 1 at EOF if eof_ok (the guest
 * sends no empty message), or -1 with host_err set.  The buffer has room
 * for one byte more, so a merged message shows. */
static int host_recv_msg(struct vs_run *n, int fd, uint8_t *buf, uint64_t seq,
			 uint64_t *check, bool eof_ok)
{
	uint32_t len = n->o.buf_size;
	ssize_t r = vs_sock_io(n, fd, buf, (size_t)len + 1, false, 0);

	if (r < 0) {
		snprintf(n->host_err, sizeof(n->host_err), "recv: %s", strerror((int)-r));
		return -1;
	}
	if (r == 0 && eof_ok)
		return 1;
	if (r == 0) {
		snprintf(n->host_err, sizeof(n->host_err), "connection closed before message %"
			 PRIu64, seq);
		return -1;
	}
	if (!vs_msg_check(buf, (size_t)r, seq, len, check, n->host_err, sizeof(n->host_err)))
		return -1;
	return 0;
}

static int host_send_msg(struct vs_run *n, int fd, const uint8_t *buf, uint64_t seq)
{
	ssize_t r = vs_sock_io(n, fd, (void *)(uintptr_t)buf, n->o.buf_size, true, 0);

	if (r != (ssize_t)n->o.buf_size) {
		snprintf(n->host_err, sizeof(n->host_err), "send message %" PRIu64 ": %s", seq,
			 r < 0 ? strerror((int)-r) : "sent in part");
		return -1;
	}
	return 0;
}

/* After our last byte: EOF tells the guest the stream is complete; wait
 * for the guest to close (its RST closes our socket). */
static void host_sent_all(struct vs_run *n, int fd, uint8_t *buf)
{
	shutdown(fd, SHUT_WR);
	while (vs_sock_io(n, fd, buf, 1, false, 0) > 0)
		;
}

/* With --type seqpacket: the same three roles in whole messages, every
 * message received checked.  host_csum sums the messages' check values. */
static void host_messages(struct vs_run *n, int fd, uint8_t *buf)
{
	uint32_t len = n->o.buf_size;
	uint64_t seq = 0, sum = 0, c;

	if (n->o.latency) {
		for (; seq < n->o.iters && !vs_stopped(n); seq++) {
			uint64_t t = vq_rt_now_ns();

			vs_msg_fill(buf, seq, len);
			if (host_send_msg(n, fd, buf, seq) < 0 ||
			    host_recv_msg(n, fd, buf, seq, &c, false) < 0)
				return;
			n->lat[n->nlat++] = (double)(vq_rt_now_ns() - t) / 1e3;
			sum += c;
		}
	} else if (n->o.rx) {
		uint64_t total = n->host_total;
		uint64_t nmsg = total == UINT64_MAX ? UINT64_MAX : (total + len - 1) / len;
		uint64_t t0 = vq_rt_now_ns();
		uint64_t dl = n->o.seconds > 0 ? t0 + (uint64_t)(n->o.seconds * 1e9) : 0;

		n->t_first = t0;
		for (; seq < nmsg && !vs_stopped(n); seq++) {
			if (dl && vq_rt_now_ns() >= dl)
				break;
			sum += vs_msg_fill(buf, seq, len);
			if (host_send_msg(n, fd, buf, seq) < 0)
				return;
		}
		host_sent_all(n, fd, buf);
	} else {
		for (;;) {
			int r = host_recv_msg(n, fd, buf, seq, &c, true);

			if (r < 0)
				return;
			if (r > 0)
				break;
			sum += c;
			seq++;
		}
		n->t_last = vq_rt_now_ns();
	}
	n->host_msgs = seq;
	n->host_bytes = seq * len;
	n->host_csum = sum;
	n->host_rc = 0;
}

/* Stream ping-pong: the echo is checked whole: its sum must be the sum of
 * what was sent, byte for byte at the same stream offsets. */
static void host_ping(struct vs_run *n, int fd, uint8_t *buf)
{
	struct vs_csum sent = { 0 }, cs = { 0 };
	uint64_t i;

	for (i = 0; i < n->o.iters && !vs_stopped(n); i++) {
		uint64_t t = vq_rt_now_ns();

		vs_stream_fill(buf, i * n->o.buf_size, n->o.buf_size);
		vs_csum_add(&sent, buf, n->o.buf_size);
		if (write_full(n, fd, buf, n->o.buf_size) < 0 ||
		    read_full(n, fd, buf, n->o.buf_size) < 0) {
			snprintf(n->host_err, sizeof(n->host_err), "ping-pong: connection lost");
			return;
		}
		n->lat[n->nlat++] = (double)(vq_rt_now_ns() - t) / 1e3;
		vs_csum_add(&cs, buf, n->o.buf_size);
	}
	n->host_bytes = cs.off;
	n->host_csum = vs_csum_final(&cs);
	n->host_sent_csum = vs_csum_final(&sent);
	n->host_rc = 0;
}

/* rx: the stream's host_total bytes (or until the deadline). */
static void host_send(struct vs_run *n, int fd, uint8_t *buf)
{
	uint64_t off = 0, t0 = vq_rt_now_ns(), total = n->host_total;
	uint64_t dl = n->o.seconds > 0 ? t0 + (uint64_t)(n->o.seconds * 1e9) : 0;
	struct vs_csum cs = { 0 };

	/* Read by the main thread only after the join. */
	n->t_first = t0;
	while (off < total && !vs_stopped(n)) {
		size_t k = n->o.buf_size;

		if (dl && vq_rt_now_ns() >= dl)
			break;
		if (k > total - off)
			k = (size_t)(total - off);
		vs_stream_fill(buf, off, k);
		vs_csum_add(&cs, buf, k);
		if (write_full(n, fd, buf, k) < 0) {
			snprintf(n->host_err, sizeof(n->host_err),
				 "write: connection lost at %" PRIu64, off);
			return;
		}
		off += k;
	}
	n->host_bytes = cs.off;
	n->host_csum = vs_csum_final(&cs);
	host_sent_all(n, fd, buf);
	n->host_rc = 0;
}

/* tx: read until the guest closes. */
static void host_receive(struct vs_run *n, int fd, uint8_t *buf)
{
	struct vs_csum cs = { 0 };

	for (;;) {
		ssize_t r = vs_sock_io(n, fd, buf, 65536, false, 0);

		if (r < 0) {
			snprintf(n->host_err, sizeof(n->host_err), "read: %s", strerror((int)-r));
			return;
		}
		if (r == 0)
			break;
		vs_csum_add(&cs, buf, (size_t)r);
	}
	n->t_last = vq_rt_now_ns();
	n->host_bytes = cs.off;
	n->host_csum = vs_csum_final(&cs);
	n->host_rc = 0;
}

void *vs_host_main(void *arg)
{
	struct vs_run *n = arg;
	/* seqpacket: one byte more, to see a message that is too long */
	uint8_t *buf = malloc(n->o.buf_size >= 65536 ? n->o.buf_size + 1 : 65536);
	int fd = -1;

	n->host_rc = -1;
	if (!buf)
		goto out;
	fd = vs_host_connect(n, 0);
	if (fd < 0)
		goto out;
	if (n->o.seqpacket)
		host_messages(n, fd, buf);
	else if (n->o.latency)
		host_ping(n, fd, buf);
	else if (n->o.rx)
		host_send(n, fd, buf);
	else
		host_receive(n, fd, buf);
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	__atomic_store_n(&n->host_gone, 1, __ATOMIC_RELEASE);
	return NULL;
}
