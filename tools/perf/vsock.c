// SPDX-License-Identifier: MIT
/*
 * virtq-perf vsock: a full vsock transfer without a VM.  This process is
 * both ends around a vhost-user-vsock backend (virtq-vsock):
 *  - the guest: our vhost-user front-end owns guest memory and the rings,
 *    and our userspace virtio-vsock driver (src/vsock/guest.c) speaks the
 *    vsock protocol on them (main thread);
 *  - the host program: a second thread on the backend's UNIX sockets, the
 *    hybrid-vsock way (CONNECT <port> to reach the guest; HOST_PATH_<port>
 *    to be reached): vsock_host.c.
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
 * --transport unix runs the same transfers between the same threads over
 * a UNIX socket pair (vsock_unix.c): the limit the vsock path is measured
 * against.  --conns runs many streams at once (vsock_conns.c).  This file
 * sets the vsock transport up and gives its calls (struct vs_xport), runs
 * one transfer and reports it.
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <virtq/runtime.h>
#include <virtq/guest/frontend.h>
#include <virtq/vsock.h>
#include <virtq/guest/vsock.h>

#include "perf.h"
#include "profile.h"
#include "vsock_run.h"

/* ---- the backend we start ---- */

/* It serves once its sockets exist (no probing connection: --once). */
static bool backend_ready(void *arg)
{
	struct vs_run *n = arg;
	struct stat sb;

	return stat(n->sock, &sb) == 0 && stat(n->uds, &sb) == 0 &&
	       (!n->o.peer_guest || (stat(n->peer_sock, &sb) == 0 &&
				     stat(n->peer_uds, &sb) == 0));
}

/* --peer guest: "--vm guest-cid=C,socket=S,uds-path=U,groups=perf" for
 * each guest, so that the two share a group. */
static unsigned backend_vms(struct vs_run *n, const char **args, char vm[2][320])
{
	const char *sock[2] = { n->sock, n->peer_sock }, *uds[2] = { n->uds, n->peer_uds };
	unsigned k = 0;

	perf_backend_path(&n->be, "vu2.sock", n->peer_sock, sizeof(n->peer_sock));
	perf_backend_path(&n->be, "h2.sock", n->peer_uds, sizeof(n->peer_uds));
	for (unsigned i = 0; i < 2; i++) {
		snprintf(vm[i], sizeof(vm[i]), "guest-cid=%u,socket=%s,uds-path=%s,groups=perf",
			 3 + i, sock[i], uds[i]);
		args[k++] = "--vm";
		args[k++] = vm[i];
	}
	n->o.peer_socket = n->peer_sock;
	return k;
}

/* "CMD --socket-path TMP/vu.sock --uds-path TMP/h.sock --guest-cid 3
 * --quiet --once [--used-batch N] [--busy-poll U] [ARG...]"; --peer
 * guest: two --vm (backend_vms) in place of the first six words. */
static int backend_start(struct vs_run *n)
{
	const char *args[13 + PERF_BACKEND_MAX_ARGS] = {
		"--socket-path", n->sock, "--uds-path", n->uds, "--guest-cid", "3",
	};
	char vm[2][320];
	unsigned k = 6;
	int r;

	r = perf_backend_mkdir(&n->be, "virtq-perf vsock", "vsock");
	if (r < 0)
		return r;
	perf_backend_path(&n->be, "vu.sock", n->sock, sizeof(n->sock));
	perf_backend_path(&n->be, "h.sock", n->uds, sizeof(n->uds));
	if (n->o.peer_guest)
		k = backend_vms(n, args, vm);
	args[k++] = "--quiet";
	args[k++] = "--once";
	args[perf_backend_opts_words(&n->o.bo, args, k)] = NULL;
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

int vs_guest_setup(struct vs_run *n)
{
	struct vq_vhu_frontend_config fc = {
		.features = VQ_BIT(VQ_F_VERSION_1),
		.nqueues = 3, .queue_size = (uint16_t)n->o.queue_size,
		.mem_size = 64ull << 20,
		.profile = n->o.profile, .device_id = 19,       /* virtio 1.2, 5 */
	};
	struct vq_vsg_config gc = { .rx_buf_size = 4096, .buf_alloc = n->o.rcvbuf,
				    .kick = guest_kick, .arg = n,
				    .siblings = n->o.peer_guest };
	struct vq_vsock_config_space vc;
	char err[256] = "";
	unsigned i;
	int r;

	if (n->o.packed)
		fc.features |= VQ_BIT(VQ_F_RING_PACKED);
	if (n->o.event_idx)
		fc.features |= VQ_BIT(VQ_F_EVENT_IDX);
	if (n->o.seqpacket)
		fc.features |= VQ_BIT(VQ_VSOCK_F_SEQPACKET);
	fc.err = err;
	fc.errlen = sizeof(err);
	/* A backend we just started may have bound its socket and not yet
	 * listen()ed: retry a refused connection for a while. */
	for (i = 0; i < 200; i++) {
		r = vq_vhu_frontend_connect(n->o.socket_path, &fc, &n->fe);
		if (!n->o.backend || (r != -ECONNREFUSED && r != -ENOENT))
			break;
		usleep(10000);
	}
	if (r < 0) {
		fprintf(stderr, "virtq-perf vsock: connect %s: %s\n", n->o.socket_path,
			err[0] ? err : strerror(-r));
		return r;
	}
	if ((vq_vhu_frontend_features(n->fe) ^ fc.features) &
	    VQ_BIT(VQ_F_RING_PACKED)) {
		fprintf(stderr, "virtq-perf vsock: the backend does not offer the ring layout asked for\n");
		return -ENOTSUP;
	}
	if (n->o.seqpacket &&
	    !(vq_vhu_frontend_features(n->fe) & VQ_BIT(VQ_VSOCK_F_SEQPACKET))) {
		fprintf(stderr, "virtq-perf vsock: the backend does not offer VQ_VSOCK_F_SEQPACKET\n");
		return -ENOTSUP;
	}
	/* a profile read it already, as that VMM does */
	if (vq_vhu_frontend_profile_config(n->fe, &vc, sizeof(vc)) >= sizeof(vc))
		r = 0;
	else
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
	perf_profile_report(stderr, "virtq-perf vsock", n->o.profile, n->fe);
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
	/* --conns: the host program connects them all before we accept */
	gc.backlog = n->nends;
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
	/* no calls until we sleep (guest_wait) */
	vq_drv_disable_cb(gc.rx);
	vq_drv_disable_cb(gc.tx);
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

/* Nothing moved: sleep until the device calls (callbacks on, re-check).
 * The TX ring's calls only when a send found no TX buffer since the last
 * sleep: otherwise a used TX buffer is nothing to wake for (it is taken
 * back at the next poll), and each call costs the device an eventfd
 * write and us a wake-up (a ping-pong: one of each per round trip). */
static int guest_wait(struct vs_run *n, int timeout_ms)
{
	struct vq_drv *rx = vq_vhu_frontend_queue(n->fe, 0);
	struct vq_drv *tx = vq_vhu_frontend_queue(n->fe, 1);
	struct pollfd pf[2] = { { .fd = n->call[0], .events = POLLIN },
				{ .fd = n->call[1], .events = POLLIN } };
	bool want_tx = n->tx_blocked || vq_vsg_tx_free(n->g) == 0;
	int a = vq_drv_enable_cb(rx), b = want_tx ? vq_drv_enable_cb(tx) : 0, r = 0;

	if (a < 0 || b < 0)
		return a < 0 ? a : b;
	if (a == 0 && b == 0) {
		n->guest_waits++;
		r = poll(pf, want_tx ? 2 : 1, timeout_ms);
		if (r < 0 && errno != EINTR)
			r = -errno;
		for (unsigned i = 0; r > 0 && i < 2; i++)
			if (pf[i].revents)
				vq_evt_drain(n->call[i]);
	}
	vq_drv_disable_cb(rx);
	if (want_tx)
		vq_drv_disable_cb(tx);
	n->tx_blocked = false;
	return r < 0 ? r : 0;
}

/* ---- the vsock transport's calls ---- */

/* A send that could not take all of len for want of TX buffers or
 * descriptors (not of credit: that comes on the RX ring) makes the next
 * sleep wait for used TX buffers too.  r is what the send returned. */
static long vx_sent(struct vs_end *e, long r, uint32_t len, uint32_t need)
{
	if (r == -ENOSPC || (r >= 0 && (uint32_t)r < len && vq_vsg_credit(e->c) >= need))
		e->n->tx_blocked = true;
	return r;
}

static uint32_t vx_room(struct vs_end *e)
{
	if (vq_vsg_state(e->c) != VQ_VSG_ESTABLISHED)
		return UINT32_MAX;      /* the write says why not */
	if (!vq_vsg_tx_free(e->n->g)) {
		e->n->tx_blocked = true;
		return 0;
	}
	return vq_vsg_credit(e->c);
}

static long vx_write(struct vs_end *e, const void *buf, uint32_t len)
{
	return vx_sent(e, vq_vsg_write(e->c, buf, len), len, 1);
}

static long vx_write_msg(struct vs_end *e, const void *buf, uint32_t len)
{
	/* all or nothing: short of credit unless it takes the whole message */
	return vx_sent(e, vq_vsg_write_msg(e->c, buf, len), len, len);
}

static long vx_read(struct vs_end *e, void *buf, uint32_t len, bool *eof)
{
	struct vq_vsg_conn *c = e->c;
	uint32_t avail = vq_vsg_readable(c);

	*eof = false;
	if (avail && (avail >= e->n->o.rcvlowat || vq_vsg_peer_shutdown(c)))
		return vq_vsg_read(c, buf, len);
	if (vq_vsg_eof(c)) {
		*eof = true;
		return 0;
	}
	return vq_vsg_state(c) == VQ_VSG_CLOSED ? -ECONNRESET : 0;
}

static long vx_read_msg(struct vs_end *e, void *buf, uint32_t cap)
{
	struct vq_vsg_conn *c = e->c;
	long k = vq_vsg_read_msg(c, buf, cap);

	if (k != -EAGAIN)
		return k;
	/* The device sends SHUTDOWN behind the last byte: bytes left over
	 * then are a message that never ended. */
	if (vq_vsg_peer_shutdown(c) & VQ_VSOCK_SHUTDOWN_SEND) {
		if (!vq_vsg_readable(c))
			return -EPIPE;
		snprintf(e->n->guest_err, sizeof(e->n->guest_err), "%u bytes without an end",
			 vq_vsg_readable(c));
		return -EBADMSG;
	}
	return vq_vsg_state(c) == VQ_VSG_CLOSED ? -ECONNRESET : -EAGAIN;
}

/* rx and latency: the host program connects; tx: the guest connects,
 * at most 32 ahead of the host program's accepts: the backend's connect
 * to a listener whose backlog is full fails, and the guest sees a
 * refusal. */
static unsigned vx_open_more(struct vs_run *n, unsigned opened)
{
	uint16_t type = n->o.seqpacket ? VQ_VSOCK_TYPE_SEQPACKET : VQ_VSOCK_TYPE_STREAM;
	bool connect = !n->o.rx && !n->o.latency;
	unsigned accepted = __atomic_load_n(&n->host_opened, __ATOMIC_ACQUIRE);

	while (opened < n->nends && (!connect || opened < accepted + 32)) {
		struct vq_vsg_conn *c = NULL;

		if (connect && n->peer_cid)
			vq_vsg_connect_cid(n->g, n->peer_cid, VS_PORT, type, &c);
		else if (connect)
			vq_vsg_connect(n->g, VS_PORT, type, &c);
		else
			c = vq_vsg_accept(n->g, VS_PORT);
		if (!c)
			break;
		n->ends[opened++].c = c;
	}
	return opened;
}

static int vx_open(struct vs_run *n)
{
	uint64_t end = vq_rt_now_ns() + 10 * 1000000000ull;
	unsigned opened = 0;

	for (;;) {
		unsigned i, ready = 0, before = opened;
		int p;

		for (i = 0; i < opened; i++) {
			enum vq_vsg_state st = vq_vsg_state(n->ends[i].c);

			if (st == VQ_VSG_CLOSED && n->peer_cid)
				snprintf(n->guest_err, sizeof(n->guest_err),
					 "guest %" PRIu64 " refused the connection (do the two "
					 "VMs share a group?)", n->peer_cid);
			if (st == VQ_VSG_CLOSED)
				return -ECONNREFUSED;
			ready += st == VQ_VSG_ESTABLISHED;
		}
		if (ready == n->nends)
			return 0;
		opened = vx_open_more(n, opened);
		p = vq_vsg_poll(n->g);
		if (p < 0)
			return p;
		if (vq_rt_now_ns() > end)
			return -ETIMEDOUT;
		/* the host program failed to connect (a backend that closed
		 * its CONNECT): no connection is coming */
		if (__atomic_load_n(&n->host_gone, __ATOMIC_ACQUIRE) && n->host_rc)
			return -ECONNABORTED;
		if (p > 0 || opened > before)
			vs_guest_moved(n);
		else if ((p = vs_guest_idle(n, n->ends, n->nends)) < 0)
			return p;
	}
}

static int vx_finish(struct vs_end *e)
{
	if (vq_vsg_state(e->c) == VQ_VSG_CLOSED)
		return 0;
	return (int)vx_sent(e, vq_vsg_shutdown(e->c, VQ_VSOCK_SHUTDOWN_SEND |
							VQ_VSOCK_SHUTDOWN_RCV), 0, 0);
}

static void vx_abort(struct vs_end *e)
{
	if (e->c)
		vq_vsg_reset(e->c);
	e->c = NULL;
}

static bool vx_closed(struct vs_end *e)
{
	return !e->c || vq_vsg_state(e->c) == VQ_VSG_CLOSED;
}

static int vx_pump(struct vs_run *n)
{
	return vq_vsg_poll(n->g);
}

static int vx_wait(struct vs_run *n, struct vs_end *ends, unsigned nends, int ms)
{
	(void)ends;
	(void)nends;
	return guest_wait(n, ms);
}

const struct vs_xport vs_xport_vsock = {
	.name = "vsock",
	.write = vx_write, .room = vx_room, .read = vx_read,
	.write_msg = vx_write_msg, .read_msg = vx_read_msg,
	.open = vx_open, .finish = vx_finish, .abort = vx_abort, .closed = vx_closed,
	.pump = vx_pump, .wait = vx_wait,
};

int64_t vs_backend_rss_anon(struct vs_run *n)
{
	char path[64], line[128];
	int64_t kb = -1;
	FILE *f;

	if (!n->be.pid)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)n->be.pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %" SCNd64, &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* ---- one run ---- */

/* Each party's share between two marks; the host thread's is the
 * process's less ours (no other thread of ours runs). */
static void vs_cpu_spent(struct vs_run *n, const struct perf_cpu_mark *a,
			 const struct perf_cpu_mark *b)
{
	int64_t process = perf_cpu_diff(a->process, b->process);

	n->cpu_guest_ns = process >= 0 ? perf_cpu_diff(a->thread, b->thread) : -1;
	n->cpu_host_ns = n->cpu_guest_ns >= 0 ? process - n->cpu_guest_ns : -1;
	n->cpu_backend_ns = perf_cpu_diff(a->backend, b->backend);
	n->cpu_wall_ns = b->wall - a->wall;
}

/* The two vCPUs' one-way latency (ns), NaN if it cannot be probed. */
static double probe(void)
{
	double ns = perf_c2c_ns(0, 1);

	return ns < 0 ? NAN : ns;
}

/* --cpu: the set of CPU cpu. */
static cpu_set_t vs_cpu_set(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return set;
}

/* The host program's side, then its thread: in tx over vsock the guest
 * connects to HOST_PATH_PORT, so that listens first; in rx the guest
 * listens first.  --peer guest: the second guest's thread instead.  0 or
 * -1 (said). */
static int host_start(struct vs_run *n)
{
	void *(*fn)(void *) = n->o.conns ? vs_conns_host : vs_host_main;
	pthread_attr_t attr;
	int r;

	if (n->o.peer_guest) {
		vs_peer_prepare(n);
		fn = vs_peer_main;
	} else if (!n->o.unix_socket && !n->o.latency && !n->o.rx) {
		snprintf(n->host_path, sizeof(n->host_path), "%s_%u", n->o.uds, VS_PORT);
		n->host_lfd = vq_vsock_uds_listen(n->host_path, n->o.seqpacket ?
						   VQ_VSOCK_TYPE_SEQPACKET : VQ_VSOCK_TYPE_STREAM);
		if (n->host_lfd < 0) {
			fprintf(stderr, "virtq-perf vsock: listen %s: %s\n", n->host_path,
				strerror(-n->host_lfd));
			return -1;
		}
	} else if (!n->o.unix_socket) {
		vq_vsg_listen(n->g, VS_PORT);
	}
	pthread_attr_init(&attr);
	if (n->o.cpu[1] >= 0) {
		cpu_set_t set = vs_cpu_set(n->o.cpu[1]);

		pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	}
	r = pthread_create(&n->host, &attr, fn, n);
	pthread_attr_destroy(&attr);
	if (r) {
		fprintf(stderr, "virtq-perf vsock: cannot start the host thread: %s\n",
			strerror(r));
		return -1;
	}
	return 0;
}

int vs_guest_run(struct vs_run *n)
{
	const struct vs_opts *o = &n->o;
	struct vs_end *e = &n->ends[0];
	uint64_t dl;
	int r;

	r = n->x->open(n);
	/* tx: the clock runs from the connection */
	if (!o->latency && !o->rx)
		n->t_first = vq_rt_now_ns();
	dl = o->seconds > 0 ? vq_rt_now_ns() + (uint64_t)(o->seconds * 1e9) : 0;
	if (r == 0)
		r = vs_guest_transfer(n, e, n->host_total, dl);
	if (r < 0) {
		vs_give_up(n);
		/* A host blocked on the connection learns of the end only
		 * from the other side: reset it. */
		n->x->abort(e);
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

/* The CPU time per KiB moved or (--latency) per round trip: JSON keys,
 * or a line of its own. */
static void vs_cpu_report(const struct vs_run *n, bool json)
{
	const struct perf_cpu_part p[] = {
		{ "guest", "guest", n->cpu_guest_ns },
		{ "host", n->peer ? "second guest" : "host program", n->cpu_host_ns },
		{ "backend", "backend", n->cpu_backend_ns },
	};

	perf_cpu_report(stdout, json, p, 3,
			n->o.latency ? (double)n->nlat : (double)n->guest_bytes / 1024,
			n->o.latency ? "rt" : "kib", n->o.latency ? "round trip" : "KiB",
			n->cpu_wall_ns);
}

static void vs_json(struct vs_run *n, const struct vs_rates *v, bool ok)
{
	const char *dir = n->o.latency ? "latency" : n->o.rx ? "rx" : "tx";

	printf("{\"workload\":\"vsock\",\"transport\":\"%s\",\"peer\":\"%s\""
	       ",\"cpu\":[%d,%d],\"busy_poll_us\":%" PRIu64
	       ",\"type\":\"%s\",\"direction\":\"%s\",\"bytes\":%" PRIu64
	       ",\"buf_size\":%u,\"rcvbuf\":%u,\"rcvlowat\":%u,\"seconds\":%.6f"
	       ",\"ops_per_sec\":%.1f,\"gbps\":%.4f,\"verified\":%s"
	       ",\"checksum\":\"%016" PRIx64 "\",\"guest_kicks\":%" PRIu64
	       ",\"guest_waits\":%" PRIu64 ",\"kicks_dropped\":%" PRIu64,
	       n->x->name, n->peer ? "guest" : "host", n->o.cpu[0], n->o.cpu[1],
	       n->o.busy_poll_us,
	       n->o.seqpacket ? "seqpacket" : "stream", dir, n->guest_bytes, n->o.buf_size,
	       n->o.rcvbuf, n->o.rcvlowat, v->secs, v->bps,
	       n->o.latency ? 0 : v->bps * 8 / 1e9, ok ? "true" : "false", n->guest_csum,
	       n->guest_kicks, n->guest_waits, n->kicks_dropped);
	if (n->peer)
		printf(",\"cid\":%" PRIu64 ",\"peer_cid\":%" PRIu64 ",\"peer_kicks\":%" PRIu64
		       ",\"peer_waits\":%" PRIu64, n->cid, n->peer_cid, n->peer->guest_kicks,
		       n->peer->guest_waits);
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
		printf(",\"iters\":%" PRIu64 ",\"p50_us\":%.3f,\"p90_us\":%.3f"
		       ",\"p99_us\":%.3f,\"p999_us\":%.3f",
		       n->nlat, v->l.p50, v->l.p90, v->l.p99, v->l.p999);
	vs_cpu_report(n, true);
	/* last: its list of rates may be long */
	if (n->o.conns)
		vs_conns_json(n);
	printf("}\n");
}

static void vs_text(struct vs_run *n, const struct vs_rates *v, bool ok)
{
	const struct perf_lat *l = &v->l;
	const char *dir = n->o.rx ? "rx" : "tx";
	char peer_dir[64];

	/* the second guest sends in rx, receives in tx */
	if (n->peer) {
		snprintf(peer_dir, sizeof(peer_dir), "%s, guest %" PRIu64 " -> guest %" PRIu64,
			 dir, n->o.rx ? n->peer_cid : n->cid, n->o.rx ? n->cid : n->peer_cid);
		dir = peer_dir;
	}

	if (n->o.seqpacket && n->o.latency)
		printf("%s latency seqpacket: %" PRIu64 " round trips of %u B messages, %.0f/s; us: p50 %.2f p90 %.2f p99 %.2f p99.9 %.2f; %s\n",
		       n->x->name, n->nlat, n->o.buf_size, v->bps, l->p50, l->p90, l->p99, l->p999,
		       ok ? "verified" : "MESSAGE COUNT MISMATCH");
	else if (n->o.seqpacket)
		printf("%s %s seqpacket: %" PRIu64 " messages of %u B = %" PRIu64 " bytes in %.3f s = "
		       "%.0f msg/s, %.3f Gbit/s (rcvbuf %u); check sum %016" PRIx64 " %s\n",
		       n->x->name, dir, n->guest_msgs, n->o.buf_size, n->guest_bytes, v->secs, v->mps,
		       v->bps * 8 / 1e9, n->o.rcvbuf, n->guest_csum, ok ? "verified" : "MISMATCH");
	else if (n->o.latency)
		printf("%s latency: %" PRIu64 " round trips of %u B, %.0f/s; us: p50 %.2f p90 %.2f p99 %.2f p99.9 %.2f; %s\n",
		       n->x->name, n->nlat, n->o.buf_size, v->bps, l->p50, l->p90, l->p99, l->p999,
		       ok ? "verified" : "ECHO MISMATCH (bytes or content)");
	else
		printf("%s %s: %" PRIu64 " bytes in %.3f s = %.3f Gbit/s (buf %u, rcvbuf %u, rcvlowat %u); "
		       "checksum %016" PRIx64 " %s\n",
		       n->x->name, dir, n->guest_bytes, v->secs, v->bps * 8 / 1e9, n->o.buf_size, n->o.rcvbuf,
		       n->o.rcvlowat, n->guest_csum, ok ? "verified" : "MISMATCH");
	if (n->o.placement)
		printf("placement: %s (c2c %.1f ns before, %.1f ns after; near < %.0f ns)\n",
		       perf_place_name(perf_place_classify(n->c2c_before, n->c2c_after)),
		       n->c2c_before, n->c2c_after, PERF_NEAR_NS);
	vs_cpu_report(n, false);
	if (n->o.dirty_log)
		printf("dirty log on: the backend changed %" PRIu64 " buffer and %" PRIu64
		       " ring pages; %" PRIu64 " of them not marked\n",
		       n->buf_pages, n->ring_pages, n->unlogged);
	if (n->o.conns)
		vs_conns_text(n);
}

/* The result, and why a check failed (stderr).  The exit status. */
static int vs_report(struct vs_run *n)
{
	bool ok = n->o.conns ? vs_conns_verified(n) : vs_verified(n);
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
	else if (!ok && !n->o.conns)
		fprintf(stderr, "virtq-perf vsock: transfer check failed: guest %" PRIu64
			" bytes csum %016" PRIx64 ", host %" PRIu64 " bytes csum %016" PRIx64 "\n",
			n->guest_bytes, n->guest_csum, n->host_bytes, n->host_csum);
	return ok && !n->unlogged ? 0 : 1;
}

/* The host program ends once its connections did; --conns and the second
 * guest: if it has not ended 10 s after our side did, it is told to give
 * up. */
static void vs_join_host(struct vs_run *n)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += 10;
	if ((n->o.conns || n->peer) && pthread_timedjoin_np(n->host, NULL, &t) == 0)
		return;
	vs_give_up(n);
	pthread_join(n->host, NULL);
}

/* Room for --conns: each is a descriptor here (two with a socket pair)
 * and, when we start it, one in the backend; raise the soft limit as far
 * as the hard one allows.  0 or -1 (said). */
static int vs_fd_room(struct vs_run *n)
{
	rlim_t need = 64 + (rlim_t)n->nends * (n->o.unix_socket ? 2 : 1);
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= need)
		return 0;
	rl.rlim_cur = rl.rlim_max < need ? rl.rlim_max : need;
	if (setrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= need)
		return 0;
	fprintf(stderr, "virtq-perf vsock: --conns %u needs %llu file descriptors; "
		"the limit is %llu (ulimit -n)\n", n->nends, (unsigned long long)need,
		(unsigned long long)rl.rlim_max);
	return -1;
}

/* The transport up: the socket pairs, or the backend and our guest. */
static int vs_setup(struct vs_run *n)
{
	unsigned i;

	n->x = n->o.unix_socket ? &vs_xport_unix : &vs_xport_vsock;
	n->nends = n->o.conns ? n->o.conns : 1;
	n->ends = calloc(n->nends, sizeof(*n->ends));
	if (!n->ends)
		return -1;
	for (i = 0; i < n->nends; i++)
		n->ends[i] = (struct vs_end){ .n = n, .fd = -1 };
	if (vs_fd_room(n) < 0 || (n->o.conns && vs_conns_prepare(n) < 0))
		return -1;
	if (n->o.unix_socket)
		return vs_unix_setup(n) < 0 ? -1 : 0;
	if (n->o.backend && backend_start(n) < 0)
		return -1;
	if (vs_guest_setup(n) < 0)
		return -1;
	return n->o.peer_guest ? vs_peer_setup(n, n->peer) : 0;
}

static void vs_teardown(struct vs_run *n)
{
	if (n->host_lfd >= 0) {
		close(n->host_lfd);
		unlink(n->host_path);
	}
	vs_unix_free(n);
	if (n->peer)
		vs_peer_free(n->peer);
	vq_vsg_free(n->g);
	vq_vhu_frontend_free(n->fe);
	perf_dlog_watch_free(&n->wbuf);
	perf_dlog_watch_free(&n->wring);
	perf_backend_stop(&n->be);
	free(n->ends);
	free(n->lat);
	vs_conns_free(n);
}

int perf_vsock_main(int argc, char **argv)
{
	static struct vs_run n, peer;
	char me[32] = "guest side", other[32] = "host side";
	struct perf_cpu_mark cpu0, cpu1;
	int r, rc = 1;

	vs_parse(argc, argv, &n.o);
	if (n.o.peer_guest)
		n.peer = &peer;
	signal(SIGPIPE, SIG_IGN);
	vs_pattern_init(0x5eed);
	n.host_lfd = -1;
	n.rss_idle_kb = -1;
	n.c2c_before = n.c2c_after = NAN;
	if (n.o.placement)
		n.c2c_before = probe();
	if (vs_setup(&n) < 0)
		goto out;
	/* after the backend started: it would inherit the CPU */
	if (n.o.cpu[0] >= 0) {
		cpu_set_t set = vs_cpu_set(n.o.cpu[0]);

		if ((r = pthread_setaffinity_np(pthread_self(), sizeof(set), &set))) {
			fprintf(stderr, "virtq-perf vsock: --cpu %d: %s\n", n.o.cpu[0],
				strerror(r));
			goto out;
		}
	}
	/* --seconds: until the deadline */
	n.host_total = n.o.seconds > 0 ? UINT64_MAX : n.o.bytes;
	if (n.o.latency && !(n.lat = calloc(n.o.iters, sizeof(double))))
		goto out;
	/* before the host program connects anything */
	n.rss_before_kb = vs_backend_rss_anon(&n);
	perf_cpu_mark(&n.be, &cpu0);
	if (host_start(&n) < 0)
		goto out;
	r = n.o.conns ? vs_conns_guest(&n) : vs_guest_run(&n);
	vs_join_host(&n);
	perf_cpu_mark(&n.be, &cpu1);
	vs_cpu_spent(&n, &cpu0, &cpu1);
	/* the two sides, as errors name them */
	if (n.peer) {
		snprintf(me, sizeof(me), "guest %" PRIu64, n.cid);
		snprintf(other, sizeof(other), "guest %" PRIu64, n.peer_cid);
	}
	if (r < 0) {
		fprintf(stderr, "virtq-perf vsock: %s: %s%s%s%s%s\n", me,
			n.guest_err[0] ? n.guest_err : strerror(-r),
			n.host_err[0] ? "; " : "", n.host_err[0] ? other : "",
			n.host_err[0] ? ": " : "", n.host_err);
		goto out;
	}
	if (n.host_rc != 0) {
		fprintf(stderr, "virtq-perf vsock: %s: %s\n", other, n.host_err);
		goto out;
	}
	if (n.o.dirty_log && dlog_check(&n) < 0)
		goto out;
	if (n.o.placement)
		n.c2c_after = probe();
	rc = vs_report(&n);
out:
	vs_teardown(&n);
	return rc;
}
