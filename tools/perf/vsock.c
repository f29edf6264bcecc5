// SPDX-License-Identifier: MIT
/*
 * virtq-perf vsock: a full vsock transfer without a VM.  This process is
 * both ends around a vhost-user-vsock backend (virtq-vsock):
 *  - the guest: our vhost-user front-end owns guest memory and the rings,
 *    and our userspace virtio-vsock driver (src/vsock/guest.c) speaks the
 *    vsock protocol on them (main thread);
 *  - the host program: a second thread on the backend's UNIX sockets, the
 *    hybrid-vsock way (CONNECT <port> to reach the guest; HOST_PATH_<port>
 *    to be reached).
 *
 *   --direction rx   host -> guest (the RX path of the device, the one the
 *                    used-batching patch changed)
 *   --direction tx   guest -> host
 *   --latency        ping-pong of --buf-size messages: host sends, guest
 *                    echoes; round-trip percentiles; the echo must be
 *                    what was sent, byte for byte
 *
 * Every transfer is checked: the receiver's byte count and a position-
 * dependent checksum of the stream must match the sender's.  With
 * --type seqpacket the three run in --buf-size messages (SOCK_SEQPACKET
 * vsock, seqpacket UNIX sockets on the host side), and the receiver checks
 * each message as it arrives: whole, in order, exact length and content
 * (vsock_check.c).  --dirty-log switches live-migration logging on first
 * and checks at the end that the backend marked every page it changed
 * (dirty_log.c, shared with net).  The result is
 * the receiver's Gbit/s, end to end (first byte sent to last byte read).
 * vsock_perf's receiver options: --rcvbuf (the guest's buf_alloc, i.e.
 * SO_VM_SOCKETS_BUFFER_SIZE) and --rcvlowat (the guest reads only when that
 * much is queued, SO_RCVLOWAT).
 *
 * With --backend CMD the backend is started here (with --used-batch,
 * --backend-busy-poll, --backend-arg passed on) and stopped at the end, so
 * `virtq-perf ab` can compare backend settings.  The options are
 * vsock_opts.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <virtq/runtime.h>
#include <virtq/vhost_user_frontend.h>
#include <virtq/vsock.h>
#include <virtq/vsock_guest.h>

#include "backend.h"
#include "perf.h"
#include "dirty_log.h"
#include "vsock_check.h"
#include "vsock_opts.h"

#define PORT 5201u

/* ------------------------------------------------------------------ */

struct vs_run {
	struct vs_opts o;
	struct perf_backend be;
	char sock[128], uds[128];
	struct vq_vhu_frontend *fe;
	struct vq_vsg *g;
	int kick[3], call[3];
	uint64_t cid;
	/* host thread */
	pthread_t host;
	int host_rc;
	uint64_t host_bytes, host_csum;
	uint64_t host_sent_csum;        /* stream latency: what the host sent */
	char host_err[160];
	int stop;                       /* atomic: guest side gave up */
	/* guest side */
	uint64_t t_first, t_last;       /* ns: first byte sent, last read */
	double *lat;
	uint64_t nlat;
	uint64_t guest_bytes, guest_csum;
	uint64_t guest_kicks, guest_waits;
	uint64_t kicks_owed, kicks_dropped;     /* --drop-kicks */
	/* seqpacket: whole messages each end checked and counted */
	uint64_t guest_msgs, host_msgs;
	char guest_err[160];
	/* --dirty-log: the log, and what the backend may write, watched */
	struct perf_dlog dlog;
	struct perf_dlog_watch wbuf, wring;
	uint64_t buf_pages, ring_pages, unlogged;
	double c2c_before, c2c_after;
};

/* ---- the backend we start ---- */

/* It serves once both sockets exist (no probing connection: --once). */
static bool backend_ready(void *arg)
{
	struct vs_run *n = arg;
	struct stat sb;

	return stat(n->sock, &sb) == 0 && stat(n->uds, &sb) == 0;
}

/* "CMD --socket-path TMP/vu.sock --uds-path TMP/h.sock --guest-cid 3
 * --quiet --once [--used-batch N] [--busy-poll U] [ARG...]" */
static int backend_start(struct vs_run *n)
{
	const char *args[13 + PERF_BACKEND_MAX_ARGS] = {
		"--socket-path", n->sock, "--uds-path", n->uds, "--guest-cid", "3",
		"--quiet", "--once",
	};
	int r;

	r = perf_backend_mkdir(&n->be, "virtq-perf vsock", "vsock");
	if (r < 0)
		return r;
	perf_backend_path(&n->be, "vu.sock", n->sock, sizeof(n->sock));
	perf_backend_path(&n->be, "h.sock", n->uds, sizeof(n->uds));
	args[perf_backend_opts_words(&n->o.bo, args, 8)] = NULL;
	n->o.socket_path = n->sock;
	n->o.uds = n->uds;
	return perf_backend_start(&n->be, n->o.backend, args, backend_ready, n);
}

/* ---- the guest ---- */

static void guest_kick(void *arg, unsigned q)
{
	struct vs_run *n = arg;

	if (n->o.drop_kicks && ++n->kicks_owed % n->o.drop_kicks == 0) {
		n->kicks_dropped++;
		return;
	}
	vq_evt_signal(n->kick[q]);
	n->guest_kicks++;
}

/* --dirty-log: what only the backend writes: the receive and event
 * buffers and each ring's device area (split: the used ring); packed,
 * also the descriptors it marks used. */
static int dlog_watch(struct vs_run *n, const struct vq_vsg_config *gc)
{
	int r;

	r = perf_dlog_watch(&n->wbuf, gc->rx_area.hva, gc->rx_area.gpa, gc->rx_area.size, false);
	if (r == 0)
		r = perf_dlog_watch(&n->wbuf, gc->ev_area.hva, gc->ev_area.gpa, gc->ev_area.size,
				    false);
	if (r == 0)
		r = perf_dlog_watch_rings(&n->wring, n->fe, 3);
	return r;
}

static int guest_setup(struct vs_run *n)
{
	struct vq_vhu_frontend_config fc = {
		.features = VIRTQ_BIT(VIRTIO_F_VERSION_1),
		.nqueues = 3, .queue_size = (uint16_t)n->o.queue_size,
		.mem_size = 64ull << 20,
	};
	struct vq_vsg_config gc = { .rx_buf_size = 4096, .buf_alloc = n->o.rcvbuf,
				    .kick = guest_kick, .arg = n };
	struct vq_vsock_config_space vc;
	char err[256] = "";
	unsigned i;
	int r;

	if (n->o.packed)
		fc.features |= VIRTQ_BIT(VIRTIO_F_RING_PACKED);
	if (n->o.event_idx)
		fc.features |= VIRTQ_BIT(VIRTIO_F_EVENT_IDX);
	if (n->o.seqpacket)
		fc.features |= VIRTQ_BIT(VQ_VSOCK_F_SEQPACKET);
	fc.err = err;
	fc.errlen = sizeof(err);
	/* A backend we just started may have bound its socket and not yet
	 * listen()ed: retry a refused connection for a while. */
	for (i = 0; i < 200; i++) {
		r = vq_vhu_frontend_connect(n->o.socket_path, &fc, &n->fe);
		if (!n->be.pid || (r != -ECONNREFUSED && r != -ENOENT))
			break;
		usleep(10000);
	}
	if (r < 0) {
		fprintf(stderr, "virtq-perf vsock: connect %s: %s\n", n->o.socket_path,
			err[0] ? err : strerror(-r));
		return r;
	}
	if ((vq_vhu_frontend_features(n->fe) ^ fc.features) &
	    VIRTQ_BIT(VIRTIO_F_RING_PACKED)) {
		fprintf(stderr, "virtq-perf vsock: the backend does not offer the ring layout asked for\n");
		return -ENOTSUP;
	}
	if (n->o.seqpacket &&
	    !(vq_vhu_frontend_features(n->fe) & VIRTQ_BIT(VQ_VSOCK_F_SEQPACKET))) {
		fprintf(stderr, "virtq-perf vsock: the backend does not offer VQ_VSOCK_F_SEQPACKET\n");
		return -ENOTSUP;
	}
	r = vq_vhu_frontend_get_config(n->fe, 0, &vc, sizeof(vc));
	if (r < 0) {
		fprintf(stderr, "virtq-perf vsock: GET_CONFIG: %s\n",
			vq_vhu_frontend_error_msg(n->fe));
		return r;
	}
	n->cid = vq_le64(vc.guest_cid);
	if (n->cid < 3 || (n->o.cid && n->cid != n->o.cid)) {
		fprintf(stderr, "virtq-perf vsock: the backend says guest CID %" PRIu64 "\n", n->cid);
		return -EPROTO;
	}
	r = vq_vhu_frontend_start(n->fe);
	if (r < 0) {
		fprintf(stderr, "virtq-perf vsock: ring setup: %s\n",
			vq_vhu_frontend_error_msg(n->fe));
		return r;
	}
	/* Before any buffer is posted: the device has written nothing yet. */
	if (n->o.dirty_log) {
		r = perf_dlog_on(&n->dlog, n->fe, "virtq-perf vsock");
		if (r < 0)
			return r;
	}
	for (i = 0; i < 3; i++) {
		n->kick[i] = vq_vhu_frontend_kick_fd(n->fe, i);
		n->call[i] = vq_vhu_frontend_call_fd(n->fe, i);
	}
	gc.rx = vq_vhu_frontend_queue(n->fe, VQ_VSOCK_RXQ);
	gc.tx = vq_vhu_frontend_queue(n->fe, VQ_VSOCK_TXQ);
	gc.ev = vq_vhu_frontend_queue(n->fe, VQ_VSOCK_EVQ);
	gc.cid = n->cid;
	gc.rx_area.size = (uint64_t)n->o.queue_size * 4160;
	gc.tx_area.size = 16ull << 20;
	gc.ev_area.size = 4096;
	gc.rx_area.hva = vq_vhu_frontend_alloc(n->fe, gc.rx_area.size, &gc.rx_area.gpa);
	gc.tx_area.hva = vq_vhu_frontend_alloc(n->fe, gc.tx_area.size, &gc.tx_area.gpa);
	gc.ev_area.hva = vq_vhu_frontend_alloc(n->fe, gc.ev_area.size, &gc.ev_area.gpa);
	if (!gc.rx_area.hva || !gc.tx_area.hva || !gc.ev_area.hva)
		return -ENOMEM;
	r = vq_vsg_new(&gc, &n->g);
	if (r == 0 && n->o.dirty_log)
		r = dlog_watch(n, &gc);
	if (r < 0)
		return r;
	return vq_vsg_start(n->g);
}

/* After the rings stopped (GET_VRING_BASE: the backend wrote its last),
 * the pages it changed and which of them the log misses. */
static int dlog_check(struct vs_run *n)
{
	int64_t u = perf_dlog_stop_check(&n->wring, &n->dlog, n->fe, 3, &n->ring_pages,
					 "virtq-perf vsock");

	if (u < 0)
		return -EIO;
	n->unlogged = (uint64_t)u + perf_dlog_unmarked(&n->wbuf, &n->dlog, &n->buf_pages);
	return 0;
}

/* Nothing moved: sleep until the device calls (callbacks on, re-check). */
static int guest_wait(struct vs_run *n, int timeout_ms)
{
	struct vq_drv *rx = vq_vhu_frontend_queue(n->fe, 0);
	struct vq_drv *tx = vq_vhu_frontend_queue(n->fe, 1);
	struct pollfd pf[2] = { { .fd = n->call[0], .events = POLLIN },
				{ .fd = n->call[1], .events = POLLIN } };
	int a = vq_drv_enable_cb(rx), b = vq_drv_enable_cb(tx), r = 0;

	if (a < 0 || b < 0)
		return a < 0 ? a : b;
	if (a == 0 && b == 0) {
		n->guest_waits++;
		r = poll(pf, 2, timeout_ms);
		if (r < 0 && errno != EINTR)
			r = -errno;
		vq_evt_drain(n->call[0]);
		vq_evt_drain(n->call[1]);
	}
	vq_drv_disable_cb(rx);
	vq_drv_disable_cb(tx);
	return r < 0 ? r : 0;
}

/* Pump the guest until cond() or a timeout; -ETIMEDOUT, -errno. */
static int guest_until(struct vs_run *n, bool (*cond)(void *), void *arg,
		       double seconds)
{
	uint64_t end = vq_rt_now_ns() + (uint64_t)(seconds * 1e9);

	for (;;) {
		int r = vq_vsg_poll(n->g);

		if (r < 0)
			return r;
		if (cond(arg))
			return 0;
		if (vq_rt_now_ns() > end)
			return -ETIMEDOUT;
		if (r == 0) {
			r = guest_wait(n, 100);
			if (r < 0)
				return r;
		}
	}
}

/* ---- the host program (second thread) ---- */

/* All n bytes or an error (-errno, -EPIPE at EOF), through EINTR. */
static int io_full(int fd, uint8_t *p, size_t n, bool wr)
{
	while (n) {
		ssize_t r = wr ? write(fd, p, n) : read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EPIPE;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int read_full(int fd, void *buf, size_t n)
{
	return io_full(fd, buf, n, false);
}

static int write_full(int fd, const void *buf, size_t n)
{
	/* write() does not change it */
	return io_full(fd, (uint8_t *)(uintptr_t)buf, n, true);
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
	if (write_full(fd, line, (size_t)len) < 0)
		goto fail;
	if (seq) {
		ssize_t r = recv(fd, line, sizeof(line) - 1, 0);

		if (r <= 0 || line[r - 1] != '\n')
			goto fail;
		i = (unsigned)r - 1;
	}
	while (!seq && i < sizeof(line) - 1) {
		if (read_full(fd, &line[i], 1) < 0)
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

	for (i = 0; i < 300 && !__atomic_load_n(&n->stop, __ATOMIC_ACQUIRE); i++) {
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

/* The host program: in rx, the sender; in tx, the receiver; in latency,
 * the pinger.  Its listener for tx was created before the guest started. */
struct host_arg {
	struct vs_run *n;
	int lfd;
	uint64_t total;         /* bytes to send (rx); UINT64_MAX: until stop */
};

static bool stopped(struct vs_run *n)
{
	return __atomic_load_n(&n->stop, __ATOMIC_ACQUIRE);
}

/* One message from the guest, checked: 0, 1 at EOF if eof_ok (the guest
 * sends no empty message), or -1 with host_err set.  The buffer has room
 * for one byte more, so a merged message shows. */
static int host_recv_msg(struct vs_run *n, int fd, uint8_t *buf, uint64_t seq,
			 uint64_t *check, bool eof_ok)
{
	uint32_t len = n->o.buf_size;
	ssize_t r;

	do
		r = recv(fd, buf, (size_t)len + 1, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		snprintf(n->host_err, sizeof(n->host_err), "recv: %s", strerror(errno));
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
	ssize_t r;

	do
		r = send(fd, buf, n->o.buf_size, 0);
	while (r < 0 && errno == EINTR);
	if (r != (ssize_t)n->o.buf_size) {
		snprintf(n->host_err, sizeof(n->host_err), "send message %" PRIu64 ": %s", seq,
			 r < 0 ? strerror(errno) : "sent in part");
		return -1;
	}
	return 0;
}

/* The host program with --type seqpacket: the same three roles, in whole
 * messages, every message received checked.  host_csum sums the messages'
 * check values. */
static void host_messages(struct host_arg *h, int fd, uint8_t *buf)
{
	struct vs_run *n = h->n;
	uint32_t len = n->o.buf_size;
	uint64_t seq = 0, sum = 0, c;

	if (n->o.latency) {
		for (; seq < n->o.iters && !stopped(n); seq++) {
			uint64_t t = vq_rt_now_ns();

			vs_msg_fill(buf, seq, len);
			if (host_send_msg(n, fd, buf, seq) < 0 ||
			    host_recv_msg(n, fd, buf, seq, &c, false) < 0)
				return;
			n->lat[n->nlat++] = (double)(vq_rt_now_ns() - t) / 1e3;
			sum += c;
		}
	} else if (n->o.rx) {
		uint64_t nmsg = h->total == UINT64_MAX ? UINT64_MAX : (h->total + len - 1) / len;
		uint64_t t0 = vq_rt_now_ns();
		uint64_t dl = n->o.seconds > 0 ? t0 + (uint64_t)(n->o.seconds * 1e9) : 0;

		n->t_first = t0;
		for (; seq < nmsg && !stopped(n); seq++) {
			if (dl && vq_rt_now_ns() >= dl)
				break;
			sum += vs_msg_fill(buf, seq, len);
			if (host_send_msg(n, fd, buf, seq) < 0)
				return;
		}
		shutdown(fd, SHUT_WR);
		while (read(fd, buf, 1) > 0)
			;
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

static void *host_main(void *arg)
{
	struct host_arg *h = arg;
	struct vs_run *n = h->n;
	/* seqpacket: one byte more, to see a message that is too long */
	uint8_t *buf = malloc(n->o.buf_size >= 65536 ? n->o.buf_size + 1 : 65536);
	struct vs_csum cs = { 0 };
	int fd = -1;

	n->host_rc = -1;
	if (!buf)
		goto out;
	if (n->o.latency || n->o.rx)
		fd = host_connect_guest(n, PORT);
	else
		fd = host_listen_accept(n, h->lfd);
	if (fd < 0)
		goto out;
	if (n->o.seqpacket) {
		host_messages(h, fd, buf);
		goto out;
	}
	if (n->o.latency) {
		struct vs_csum sent = { 0 };
		uint64_t i;

		/* the echo is checked whole: its sum must be the sum of what
		 * was sent, byte for byte at the same stream offsets */
		for (i = 0; i < n->o.iters && !stopped(n); i++) {
			uint64_t t = vq_rt_now_ns();

			vs_stream_fill(buf, i * n->o.buf_size, n->o.buf_size);
			vs_csum_add(&sent, buf, n->o.buf_size);
			if (write_full(fd, buf, n->o.buf_size) < 0 ||
			    read_full(fd, buf, n->o.buf_size) < 0) {
				snprintf(n->host_err, sizeof(n->host_err), "ping-pong: connection lost");
				goto out;
			}
			n->lat[n->nlat++] = (double)(vq_rt_now_ns() - t) / 1e3;
			vs_csum_add(&cs, buf, n->o.buf_size);
		}
		n->host_bytes = cs.off;
		n->host_csum = vs_csum_final(&cs);
		n->host_sent_csum = vs_csum_final(&sent);
		n->host_rc = 0;
		goto out;
	}
	if (n->o.rx) {
		uint64_t off = 0, t0 = vq_rt_now_ns();
		uint64_t dl = n->o.seconds > 0 ? t0 + (uint64_t)(n->o.seconds * 1e9) : 0;

		/* Read by the main thread only after the join. */
		n->t_first = t0;
		while (off < h->total && !stopped(n)) {
			size_t k = n->o.buf_size;

			if (dl && vq_rt_now_ns() >= dl)
				break;
			if (k > h->total - off)
				k = (size_t)(h->total - off);
			vs_stream_fill(buf, off, k);
			vs_csum_add(&cs, buf, k);
			if (write_full(fd, buf, k) < 0) {
				snprintf(n->host_err, sizeof(n->host_err), "write: connection lost at %" PRIu64, off);
				goto out;
			}
			off += k;
		}
		/* EOF tells the guest the stream is complete. */
		shutdown(fd, SHUT_WR);
		n->host_bytes = cs.off;
		n->host_csum = vs_csum_final(&cs);
		/* Wait for the guest to close (its RST closes our socket). */
		while (read(fd, buf, 1) > 0)
			;
		n->host_rc = 0;
	} else {
		for (;;) {
			ssize_t r = read(fd, buf, 65536);

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				snprintf(n->host_err, sizeof(n->host_err), "read: %s", strerror(errno));
				goto out;
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
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

/* ---- the transfers, guest side ---- */

struct wait_conn {
	struct vs_run *n;
	struct vq_vsg_conn *c;
	uint32_t port;
};

static bool conn_ready(void *arg)
{
	struct wait_conn *w = arg;

	if (!w->c)
		w->c = vq_vsg_accept(w->n->g, w->port);
	return w->c && vq_vsg_state(w->c) != VQ_VSG_CONNECTING;
}

static bool conn_done(void *arg)
{
	struct wait_conn *w = arg;

	return vq_vsg_state(w->c) == VQ_VSG_CLOSED;
}

/* rx: the guest receives until EOF, checksumming, honouring rcvlowat. */
static int guest_receive(struct vs_run *n, struct vq_vsg_conn *c)
{
	uint8_t *buf = malloc(n->o.rcvbuf);
	struct vs_csum cs = { 0 };
	int r = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		uint32_t avail;
		int p = vq_vsg_poll(n->g);

		if (p < 0) {
			r = p;
			break;
		}
		avail = vq_vsg_readable(c);
		if (avail && (avail >= n->o.rcvlowat || vq_vsg_eof(c) ||
			      vq_vsg_peer_shutdown(c))) {
			uint32_t k = vq_vsg_read(c, buf, avail);

			vs_csum_add(&cs, buf, k);
			continue;
		}
		if (vq_vsg_eof(c))
			break;
		if (vq_vsg_state(c) == VQ_VSG_CLOSED) {
			r = -ECONNRESET;
			break;
		}
		if (p == 0) {
			r = guest_wait(n, 200);
			if (r < 0)
				break;
			if (stopped(n) && n->host_rc != 0) {
				r = -EPIPE;
				break;
			}
		}
	}
	n->t_last = vq_rt_now_ns();
	n->guest_bytes = cs.off;
	n->guest_csum = vs_csum_final(&cs);
	free(buf);
	if (r == 0 && vq_vsg_state(c) != VQ_VSG_CLOSED)
		vq_vsg_shutdown(c, VQ_VSOCK_SHUTDOWN_RCV | VQ_VSOCK_SHUTDOWN_SEND);
	return r;
}

/* tx: the guest sends total bytes in --buf-size writes, then closes. */
static int guest_send(struct vs_run *n, struct vq_vsg_conn *c, uint64_t total,
		      uint64_t deadline)
{
	uint8_t *buf = malloc(n->o.buf_size);
	struct vs_csum cs = { 0 };
	uint64_t off = 0;
	uint32_t have = 0, at = 0;
	int r = 0;

	if (!buf)
		return -ENOMEM;
	while (off < total) {
		long w;
		int p;

		if (have == at) {
			uint64_t k = n->o.buf_size;

			if (deadline && vq_rt_now_ns() >= deadline)
				break;
			if (k > total - off)
				k = total - off;
			vs_stream_fill(buf, off, k);
			vs_csum_add(&cs, buf, k);
			have = (uint32_t)k;
			at = 0;
		}
		w = vq_vsg_write(c, buf + at, have - at);
		if (w < 0) {
			r = (int)w;
			break;
		}
		at += (uint32_t)w;
		off += (uint64_t)w;
		p = vq_vsg_poll(n->g);
		if (p < 0) {
			r = p;
			break;
		}
		if (w == 0 && p == 0) {
			r = guest_wait(n, 200);
			if (r < 0)
				break;
			if (stopped(n)) {
				r = -EPIPE;
				break;
			}
		}
	}
	n->guest_bytes = off;
	n->guest_csum = vs_csum_final(&cs);
	free(buf);
	if (r == 0)
		vq_vsg_shutdown(c, VQ_VSOCK_SHUTDOWN_SEND | VQ_VSOCK_SHUTDOWN_RCV);
	return r;
}

/* latency: echo every message back. */
static int guest_echo(struct vs_run *n, struct vq_vsg_conn *c)
{
	uint8_t *buf = malloc(n->o.buf_size);
	uint64_t want = n->o.iters * n->o.buf_size, done = 0;
	int r = 0;

	if (!buf)
		return -ENOMEM;
	while (done < want) {
		uint32_t k = vq_vsg_read(c, buf, n->o.buf_size);
		uint32_t at = 0;
		int p;

		while (at < k) {
			long w = vq_vsg_write(c, buf + at, k - at);

			if (w < 0) {
				r = (int)w;
				goto out;
			}
			at += (uint32_t)w;
			if (at < k && (p = vq_vsg_poll(n->g)) == 0)
				guest_wait(n, 10);
		}
		done += k;
		p = vq_vsg_poll(n->g);
		if (p < 0) {
			r = p;
			break;
		}
		if (!k && p == 0) {
			if (vq_vsg_eof(c) || vq_vsg_state(c) == VQ_VSG_CLOSED) {
				r = -ECONNRESET;
				break;
			}
			r = guest_wait(n, 200);
			if (r < 0 || stopped(n))
				break;
		}
	}
out:
	free(buf);
	return r;
}

/* ---- the transfers in whole messages (--type seqpacket) ---- */

/* Nothing moved: wait for the device; -EPIPE once the host side gave up. */
static int guest_idle(struct vs_run *n)
{
	int r = guest_wait(n, 200);

	if (r < 0)
		return r;
	return stopped(n) ? -EPIPE : 0;
}

/* The next whole message into buf, checked as message seq: its check value
 * in *check; 1 at the end of the connection when eof_ok; 0; -EBADMSG with
 * guest_err set, -errno. */
static int guest_read_msg(struct vs_run *n, struct vq_vsg_conn *c, uint8_t *buf,
			  uint64_t seq, uint64_t *check, bool eof_ok)
{
	for (;;) {
		long k = vq_vsg_read_msg(c, buf, n->o.rcvbuf);
		int p;

		if (k >= 0)
			return vs_msg_check(buf, (size_t)k, seq, n->o.buf_size, check,
					    n->guest_err, sizeof(n->guest_err)) ? 0 : -EBADMSG;
		if (k != -EAGAIN) {
			snprintf(n->guest_err, sizeof(n->guest_err),
				 "message %" PRIu64 ": %s", seq, strerror((int)-k));
			return -EBADMSG;
		}
		/* The device sends SHUTDOWN behind the last byte: bytes
		 * left over then are a message that never ended. */
		if (vq_vsg_peer_shutdown(c) & VQ_VSOCK_SHUTDOWN_SEND) {
			if (vq_vsg_readable(c)) {
				snprintf(n->guest_err, sizeof(n->guest_err),
					 "message %" PRIu64 ": %u bytes without an end", seq,
					 vq_vsg_readable(c));
				return -EBADMSG;
			}
			return eof_ok ? 1 : -ECONNRESET;
		}
		if (vq_vsg_state(c) == VQ_VSG_CLOSED)
			return -ECONNRESET;
		p = vq_vsg_poll(n->g);
		if (p < 0)
			return p;
		if (p == 0 && (p = guest_idle(n)) < 0)
			return p;
	}
}

/* One message, whole (vq_vsg_write_msg sends all or nothing). */
static int guest_write_msg(struct vs_run *n, struct vq_vsg_conn *c, const uint8_t *buf,
			   uint64_t deadline)
{
	for (;;) {
		long w = vq_vsg_write_msg(c, buf, n->o.buf_size);
		int p;

		if (w < 0)
			return (int)w;
		p = vq_vsg_poll(n->g);
		if (p < 0)
			return p;
		if (w > 0)
			return 0;
		if (deadline && vq_rt_now_ns() >= deadline)
			return 1;
		if (p == 0 && (p = guest_idle(n)) < 0)
			return p;
	}
}

/* The device must give credit for a whole message, or it never goes. */
static int msg_fits(struct vs_run *n, struct vq_vsg_conn *c)
{
	if (vq_vsg_credit(c) >= n->o.buf_size)
		return 0;
	snprintf(n->guest_err, sizeof(n->guest_err),
		 "a %u-byte message is larger than the device's window (%u)",
		 n->o.buf_size, vq_vsg_credit(c));
	return -EMSGSIZE;
}

/* rx, tx and latency in messages; the counts and check sums go where the
 * stream versions put bytes and checksums. */
static int guest_messages(struct vs_run *n, struct vq_vsg_conn *c, uint64_t total,
			  uint64_t deadline)
{
	uint32_t len = n->o.buf_size;
	uint8_t *buf = malloc(n->o.rcvbuf > len ? n->o.rcvbuf : len);
	uint64_t seq = 0, sum = 0, chk;
	int r = 0;

	if (!buf)
		return -ENOMEM;
	if (n->o.latency) {
		r = msg_fits(n, c);
		while (r == 0 && seq < n->o.iters) {
			r = guest_read_msg(n, c, buf, seq, &chk, false);
			if (r == 0)
				r = guest_write_msg(n, c, buf, 0);
			if (r == 0) {
				sum += chk;
				seq++;
			}
		}
	} else if (n->o.rx) {
		for (;;) {
			r = guest_read_msg(n, c, buf, seq, &chk, true);
			if (r)
				break;
			sum += chk;
			seq++;
		}
		n->t_last = vq_rt_now_ns();
		r = r > 0 ? 0 : r;
	} else {
		uint64_t nmsg = total == UINT64_MAX ? UINT64_MAX : (total + len - 1) / len;

		r = msg_fits(n, c);
		while (r == 0 && seq < nmsg) {
			if (deadline && vq_rt_now_ns() >= deadline)
				break;
			chk = vs_msg_fill(buf, seq, len);
			r = guest_write_msg(n, c, buf, deadline);
			if (r == 0) {
				sum += chk;
				seq++;
			}
		}
		r = r > 0 ? 0 : r;      /* the deadline came: seq was not sent */
	}
	n->guest_msgs = seq;
	n->guest_bytes = seq * len;
	n->guest_csum = sum;
	free(buf);
	if (r == 0 && !n->o.latency && vq_vsg_state(c) != VQ_VSG_CLOSED)
		vq_vsg_shutdown(c, VQ_VSOCK_SHUTDOWN_SEND | VQ_VSOCK_SHUTDOWN_RCV);
	return r;
}

/* The two vCPUs' one-way latency (ns), NaN if it cannot be probed. */
static double probe(void)
{
	double ns = perf_c2c_ns(0, 1);

	return ns < 0 ? NAN : ns;
}

/* The host program's side of the connection, then its thread: in tx the
 * guest connects to HOST_PATH_PORT, so that listens first.  0 or -1
 * (said). */
static int host_start(struct vs_run *n, struct host_arg *ha, char *hpath, size_t len)
{
	if (!n->o.latency && !n->o.rx) {
		snprintf(hpath, len, "%s_%u", n->o.uds, PORT);
		ha->lfd = vq_vsock_uds_listen(hpath, n->o.seqpacket ? VQ_VSOCK_TYPE_SEQPACKET
								    : VQ_VSOCK_TYPE_STREAM);
		if (ha->lfd < 0) {
			fprintf(stderr, "virtq-perf vsock: listen %s: %s\n", hpath,
				strerror(-ha->lfd));
			return -1;
		}
	} else {
		vq_vsg_listen(n->g, PORT);
	}
	if (pthread_create(&n->host, NULL, host_main, ha)) {
		fprintf(stderr, "virtq-perf vsock: cannot start the host thread\n");
		return -1;
	}
	return 0;
}

/* The guest's side: connect (tx) or accept, then move the data.  0 or
 * -errno; on an error the host thread is told to stop. */
static int guest_run(struct vs_run *n, struct wait_conn *wc, uint64_t total)
{
	const struct vs_opts *o = &n->o;
	uint64_t dl;
	int r;

	if (!o->latency && !o->rx) {
		r = vq_vsg_connect(n->g, PORT, o->seqpacket ? VQ_VSOCK_TYPE_SEQPACKET
							       : VQ_VSOCK_TYPE_STREAM, &wc->c);
		if (r == 0)
			r = guest_until(n, conn_ready, wc, 10);
		if (r == 0 && vq_vsg_state(wc->c) != VQ_VSG_ESTABLISHED)
			r = -ECONNREFUSED;
		n->t_first = vq_rt_now_ns();
	} else {
		r = guest_until(n, conn_ready, wc, 10);
	}
	/* tx: the clock runs from the connection */
	dl = o->seconds > 0 ? vq_rt_now_ns() + (uint64_t)(o->seconds * 1e9) : 0;
	if (r == 0) {
		if (o->seqpacket)
			r = guest_messages(n, wc->c, total, !o->rx && !o->latency ? dl : 0);
		else if (o->latency)
			r = guest_echo(n, wc->c);
		else if (o->rx)
			/* with --seconds the host ends the stream (EOF) at its deadline */
			r = guest_receive(n, wc->c);
		else
			r = guest_send(n, wc->c, total, dl);
		/* Let the close handshake finish (RST from the device). */
		if (r == 0 && !o->latency)
			guest_until(n, conn_done, wc, 5);
	}
	if (r < 0) {
		__atomic_store_n(&n->stop, 1, __ATOMIC_RELEASE);
		/* A host blocked on the connection learns of the end only
		 * from the device: reset it. */
		if (wc->c) {
			vq_vsg_reset(wc->c);
			wc->c = NULL;
		}
	}
	return r;
}

/* Did both ends see the same transfer? */
static bool vs_verified(struct vs_run *n)
{
	bool ok;

	if (n->o.seqpacket) {
		/* Each message was checked as it arrived; both ends must have
		 * seen the same ones. */
		return n->host_msgs == n->guest_msgs && n->host_bytes == n->guest_bytes &&
		       n->host_csum == n->guest_csum &&
		       (!n->o.latency || n->host_msgs == n->o.iters);
	}
	if (n->o.latency) {
		ok = n->host_bytes == n->o.iters * n->o.buf_size &&
		     n->host_csum == n->host_sent_csum;
		n->guest_bytes = n->host_bytes;
		n->guest_csum = n->host_csum;
		return ok;
	}
	return n->host_bytes == n->guest_bytes && n->host_csum == n->guest_csum;
}

/* The rates: *secs and bytes (or, --latency, round trips) per second. */
struct vs_rates {
	double secs, bps, mps;
	struct perf_lat l;
};

static void vs_rates(struct vs_run *n, struct vs_rates *v)
{
	v->secs = n->t_last > n->t_first ? (double)(n->t_last - n->t_first) / 1e9 : 0;
	v->bps = v->secs > 0 ? (double)n->guest_bytes / v->secs : 0;
	v->mps = v->secs > 0 ? (double)n->guest_msgs / v->secs : 0;
	v->l = (struct perf_lat){ NAN, NAN, NAN, NAN };
	if (n->o.latency && n->nlat) {
		double sum = 0;

		for (uint64_t i = 0; i < n->nlat; i++)
			sum += n->lat[i];
		perf_lat_pcts(n->lat, n->nlat, &v->l);
		/* transactions per second as the A/B metric */
		v->bps = sum > 0 ? (double)n->nlat / (sum / 1e6) : 0;
		v->secs = sum / 1e6;
	}
}

static void vs_json(struct vs_run *n, const struct vs_rates *v, bool ok)
{
	const char *dir = n->o.latency ? "latency" : n->o.rx ? "rx" : "tx";

	printf("{\"workload\":\"vsock\",\"type\":\"%s\",\"direction\":\"%s\",\"bytes\":%" PRIu64
	       ",\"buf_size\":%u,\"rcvbuf\":%u,\"rcvlowat\":%u,\"seconds\":%.6f"
	       ",\"ops_per_sec\":%.1f,\"gbps\":%.4f,\"verified\":%s"
	       ",\"checksum\":\"%016" PRIx64 "\",\"guest_kicks\":%" PRIu64
	       ",\"guest_waits\":%" PRIu64 ",\"kicks_dropped\":%" PRIu64,
	       n->o.seqpacket ? "seqpacket" : "stream", dir, n->guest_bytes, n->o.buf_size,
	       n->o.rcvbuf, n->o.rcvlowat, v->secs, v->bps,
	       n->o.latency ? 0 : v->bps * 8 / 1e9, ok ? "true" : "false", n->guest_csum,
	       n->guest_kicks, n->guest_waits, n->kicks_dropped);
	if (n->o.seqpacket)
		printf(",\"messages\":%" PRIu64, n->guest_msgs);
	if (n->o.seqpacket && !n->o.latency)
		printf(",\"msgs_per_sec\":%.1f", v->mps);
	if (n->o.dirty_log)
		printf(",\"dirty_log\":true,\"dirty_pages\":%" PRIu64
		       ",\"ring_pages\":%" PRIu64 ",\"unlogged\":%" PRIu64,
		       n->buf_pages, n->ring_pages, n->unlogged);
	if (n->o.placement && !isnan(n->c2c_before) && !isnan(n->c2c_after))
		printf(",\"c2c_ns_before\":%.1f,\"c2c_ns_after\":%.1f",
		       n->c2c_before, n->c2c_after);
	if (n->o.placement)
		printf(",\"placement\":\"%s\"",
		       perf_place_name(perf_place_classify(n->c2c_before, n->c2c_after)));
	if (n->o.latency)
		printf(",\"iters\":%" PRIu64 ",\"p50_us\":%.2f,\"p90_us\":%.2f"
		       ",\"p99_us\":%.2f,\"p999_us\":%.2f",
		       n->nlat, v->l.p50, v->l.p90, v->l.p99, v->l.p999);
	printf("}\n");
}

static void vs_text(struct vs_run *n, const struct vs_rates *v, bool ok)
{
	const struct perf_lat *l = &v->l;
	const char *dir = n->o.rx ? "rx" : "tx";

	if (n->o.seqpacket && n->o.latency)
		printf("vsock latency seqpacket: %" PRIu64 " round trips of %u B messages, %.0f/s; us: p50 %.2f p90 %.2f p99 %.2f p99.9 %.2f; %s\n",
		       n->nlat, n->o.buf_size, v->bps, l->p50, l->p90, l->p99, l->p999,
		       ok ? "verified" : "MESSAGE COUNT MISMATCH");
	else if (n->o.seqpacket)
		printf("vsock %s seqpacket: %" PRIu64 " messages of %u B = %" PRIu64 " bytes in %.3f s = "
		       "%.0f msg/s, %.3f Gbit/s (rcvbuf %u); check sum %016" PRIx64 " %s\n",
		       dir, n->guest_msgs, n->o.buf_size, n->guest_bytes, v->secs, v->mps,
		       v->bps * 8 / 1e9, n->o.rcvbuf, n->guest_csum, ok ? "verified" : "MISMATCH");
	else if (n->o.latency)
		printf("vsock latency: %" PRIu64 " round trips of %u B, %.0f/s; us: p50 %.2f p90 %.2f p99 %.2f p99.9 %.2f; %s\n",
		       n->nlat, n->o.buf_size, v->bps, l->p50, l->p90, l->p99, l->p999,
		       ok ? "verified" : "ECHO MISMATCH (bytes or content)");
	else
		printf("vsock %s: %" PRIu64 " bytes in %.3f s = %.3f Gbit/s (buf %u, rcvbuf %u, rcvlowat %u); "
		       "checksum %016" PRIx64 " %s\n",
		       dir, n->guest_bytes, v->secs, v->bps * 8 / 1e9, n->o.buf_size, n->o.rcvbuf,
		       n->o.rcvlowat, n->guest_csum, ok ? "verified" : "MISMATCH");
	if (n->o.placement)
		printf("placement: %s (c2c %.1f ns before, %.1f ns after; near < %.0f ns)\n",
		       perf_place_name(perf_place_classify(n->c2c_before, n->c2c_after)),
		       n->c2c_before, n->c2c_after, PERF_NEAR_NS);
	if (n->o.dirty_log)
		printf("dirty log on: the backend changed %" PRIu64 " buffer and %" PRIu64
		       " ring pages; %" PRIu64 " of them not marked\n",
		       n->buf_pages, n->ring_pages, n->unlogged);
}

/* The result, and why a check failed (stderr).  The exit status. */
static int vs_report(struct vs_run *n)
{
	bool ok = vs_verified(n);
	struct vs_rates v;

	vs_rates(n, &v);
	if (n->o.json)
		vs_json(n, &v, ok);
	else
		vs_text(n, &v, ok);
	if (n->unlogged)
		fprintf(stderr, "virtq-perf vsock: --dirty-log: %" PRIu64
			" pages the backend wrote are not marked in the log\n", n->unlogged);
	if (!ok && n->o.seqpacket)
		fprintf(stderr, "virtq-perf vsock: transfer check failed: guest %" PRIu64
			" messages sum %016" PRIx64 ", host %" PRIu64 " messages sum %016" PRIx64 "\n",
			n->guest_msgs, n->guest_csum, n->host_msgs, n->host_csum);
	else if (!ok)
		fprintf(stderr, "virtq-perf vsock: transfer check failed: guest %" PRIu64
			" bytes csum %016" PRIx64 ", host %" PRIu64 " bytes csum %016" PRIx64 "\n",
			n->guest_bytes, n->guest_csum, n->host_bytes, n->host_csum);
	return ok && !n->unlogged ? 0 : 1;
}

int perf_vsock_main(int argc, char **argv)
{
	static struct vs_run n;
	struct host_arg ha = { .n = &n, .lfd = -1 };
	struct wait_conn wc = { .n = &n, .port = PORT };
	char hpath[160] = "";
	int r, rc = 1;

	vs_parse(argc, argv, &n.o);
	signal(SIGPIPE, SIG_IGN);
	vs_pattern_init(0x5eed);
	n.c2c_before = n.c2c_after = NAN;
	if (n.o.placement)
		n.c2c_before = probe();
	if (n.o.backend && backend_start(&n) < 0) {
		perf_backend_stop(&n.be);
		return 1;
	}
	if (guest_setup(&n) < 0)
		goto out;
	/* --seconds: until the deadline */
	ha.total = n.o.seconds > 0 ? UINT64_MAX : n.o.bytes;
	if (n.o.latency && !(n.lat = calloc(n.o.iters, sizeof(double))))
		goto out;
	if (host_start(&n, &ha, hpath, sizeof(hpath)) < 0)
		goto out;
	r = guest_run(&n, &wc, ha.total);
	pthread_join(n.host, NULL);
	if (r < 0) {
		fprintf(stderr, "virtq-perf vsock: guest side: %s%s%s\n",
			n.guest_err[0] ? n.guest_err : strerror(-r),
			n.host_err[0] ? "; host side: " : "", n.host_err);
		goto out;
	}
	if (n.host_rc != 0) {
		fprintf(stderr, "virtq-perf vsock: host side: %s\n", n.host_err);
		goto out;
	}
	if (n.o.dirty_log && dlog_check(&n) < 0)
		goto out;
	if (n.o.placement)
		n.c2c_after = probe();
	rc = vs_report(&n);
out:
	if (ha.lfd >= 0) {
		close(ha.lfd);
		unlink(hpath);
	}
	vq_vsg_free(n.g);
	vq_vhu_frontend_free(n.fe);
	perf_dlog_watch_free(&n.wbuf);
	perf_dlog_watch_free(&n.wring);
	perf_backend_stop(&n.be);
	free(n.lat);
	return rc;
}
