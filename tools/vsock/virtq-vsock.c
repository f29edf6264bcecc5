// SPDX-License-Identifier: MIT
/*
 * virtq-vsock: a vhost-user-vsock backend with the host side on UNIX
 * sockets (the hybrid-vsock convention of Firecracker and vhost-device-vsock,
 * docs/virtq-vsock.md).
 *
 *   virtq-vsock (--socket-path PATH | --fd N) --guest-cid N --uds-path HOST_PATH
 *
 * One thread does everything: the vhost-user control socket, the rings and
 * the host sockets share one poll set, so a ring is never touched after
 * queue_stop returns and the device layer needs no locks.  The data path
 * follows the runtime's rules: a ring with work is processed with its
 * notifications off; when everything ran dry it busy polls (--busy-poll),
 * then enables notifications, re-checks, and sleeps.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include <virtq/runtime.h>
#include <virtq/vhost_user_backend.h>
#include <virtq/vsock.h>

#include "daemon.h"

#define NQ 3u
#define BUDGET 256u

struct opts {
	uint64_t cid;
	const char *uds;
	uint32_t buf_alloc;
	uint32_t max_conns;
	bool no_seqpacket;
};

struct ring {
	bool running;
	struct vq_dev *dev;
	int kick_fd, call_fd, err_fd;
	bool notify_on;                 /* we asked for kicks */
	bool broken_logged;
	uint64_t kicks, calls;
};

struct snap {
	struct vqd_count c;
	struct vq_vsock_stats s;
	unsigned conns;
};

struct daemon {
	struct opts o;
	struct vqd_opts com;            /* the options every daemon takes */
	struct snap st_now, st_prev;    /* the statistics line's ends */
	struct vq_vsock *vs;
	struct vq_vhu_backend *b;       /* for its IOTLB statistics */
	struct ring q[NQ];
	uint64_t kicks_old, calls_old;  /* from rings that stopped */
	uint64_t kicks_missed, calls_late;      /* see vq_rt_counters */
	/* Per front-end connection: did its first start resume rings that
	 * another backend ran, and was the guest told? */
	bool session_started, session_resumed, reset_sent;
	int kick_ring[1 + NQ];          /* the loop's fds: ring or -1 */
};

static const char *const qname[NQ] = { "rx", "tx", "event" };

/* ------------------------------------------------------------------ */

static int host_connect(void *arg, uint32_t port, uint16_t type)
{
	struct daemon *d = arg;

	return vq_vsock_uds_connect(d->o.uds, port, type);
}

static void dev_notify(void *arg, unsigned qi)
{
	struct daemon *d = arg;
	struct ring *r = &d->q[qi];

	if (!r->running || !vq_dev_should_signal(r->dev))
		return;
	if (r->call_fd >= 0)
		vq_evt_signal(r->call_fd);
	r->calls++;
}

static bool ring_fresh(const struct vq_dev *dev)
{
	struct vq_dev_state s = vq_dev_get_state(dev);
	uint16_t z = (vq_dev_features(dev) & VIRTQ_BIT(VIRTIO_F_RING_PACKED)) ? 0x8000 : 0;

	return s.avail_idx == z && s.used_idx == z;
}

static void attach(struct daemon *d)
{
	struct ring *rx = &d->q[VQ_VSOCK_RXQ], *tx = &d->q[VQ_VSOCK_TXQ];
	struct ring *ev = &d->q[VQ_VSOCK_EVQ];
	bool fresh;

	if (!rx->running || !tx->running)
		return;
	/* A TX ring that never moved means a new driver session: whatever
	 * connections we hold belong to a guest that is gone.  (One that
	 * moved is the same session after an fd change: keep them.) */
	fresh = ring_fresh(tx->dev);
	if (fresh && vq_vsock_conn_count(d->vs))
		vq_vsock_stop(d->vs);
	if (!d->session_started) {
		d->session_started = true;
		d->session_resumed = !fresh;
	}
	vq_vsock_start(d->vs, rx->dev, tx->dev, ev->running ? ev->dev : NULL);
	/* The first rings of this front-end connection resume where another
	 * backend left them: the guest's connections are unknown to us; tell
	 * it once (5.10.6.7), when it gives us the event queue. */
	if (d->session_resumed && !d->reset_sent && ev->running) {
		vq_vsock_reset_event(d->vs);
		d->reset_sent = true;
	}
}

static int dev_queue_start(void *opaque, const struct vq_vhu_queue *q)
{
	struct daemon *d = opaque;
	struct ring *r;

	if (q->index >= NQ)
		return -EINVAL;
	r = &d->q[q->index];
	r->running = true;
	r->dev = q->vq;
	r->kick_fd = q->kick_fd;
	r->call_fd = q->call_fd;
	r->err_fd = q->err_fd;
	r->notify_on = false;
	r->broken_logged = false;
	vq_dev_disable_notify(r->dev);
	if (!d->com.quiet)
		fprintf(stderr, "virtq-vsock: queue %u (%s) started, %u entries, features 0x%" PRIx64 "\n",
			q->index, qname[q->index], vq_dev_num(q->vq), vq_dev_features(q->vq));
	attach(d);
	return 0;
}

static void dev_queue_stop(void *opaque, unsigned index, bool resumes)
{
	struct daemon *d = opaque;
	struct ring *r;

	if (index >= NQ || !d->q[index].running)
		return;
	r = &d->q[index];
	/* Keep the connections either way: a ring that pauses resumes, and
	 * one the front-end stopped may start again (QEMU stops and starts
	 * them on a guest's suspend); a reset or disconnect ends them. */
	vq_vsock_detach(d->vs);
	d->kicks_old += r->kicks;
	d->calls_old += r->calls;
	memset(r, 0, sizeof(*r));
	r->kick_fd = r->call_fd = r->err_fd = -1;
	if (!d->com.quiet)
		fprintf(stderr, "virtq-vsock: queue %u (%s) stopped\n", index, qname[index]);
	attach(d);
}

static void dev_get_config(void *opaque, uint32_t off, void *buf, uint32_t len)
{
	struct daemon *d = opaque;
	struct vq_vsock_config_space c = { .guest_cid = vq_le64(d->o.cid) };

	/* The library checked off + len against config_len. */
	memcpy(buf, (uint8_t *)&c + off, len);
}

static void dev_reset(void *opaque)
{
	struct daemon *d = opaque;

	vq_vsock_stop(d->vs);
	d->session_started = d->session_resumed = d->reset_sent = false;
}

static const struct vq_vhu_device_ops vsock_ops = {
	.queue_start = dev_queue_start,
	.queue_stop = dev_queue_stop,
	.get_config = dev_get_config,
	.reset = dev_reset,
};

/* ------------------------------------------------------------------ */
/* Data path                                                           */
/* ------------------------------------------------------------------ */

static void ring_broken(struct daemon *d, unsigned qi)
{
	struct ring *r = &d->q[qi];

	if (r->broken_logged || !r->running)
		return;
	r->broken_logged = true;
	fprintf(stderr, "virtq-vsock: queue %u (%s) broken: %s\n", qi, qname[qi],
		vq_dev_error_msg(r->dev));
	if (r->err_fd >= 0)
		vq_evt_signal(r->err_fd);
}

static bool ring_ok(struct daemon *d, unsigned qi)
{
	return d->q[qi].running && !vq_dev_error(d->q[qi].dev);
}

/* One pass over everything.  Returns the work done. */
static int pump(struct daemon *d)
{
	int n = 0, r;

	r = vq_vsock_process_host(d->vs);
	if (r > 0)
		n += r;
	if (!vq_vsock_started(d->vs))
		return n;
	if (ring_ok(d, VQ_VSOCK_TXQ)) {
		r = vq_vsock_process_tx(d->vs, BUDGET);
		if (r < 0)
			ring_broken(d, VQ_VSOCK_TXQ);
		else
			n += r;
	}
	if (ring_ok(d, VQ_VSOCK_RXQ) && vq_vsock_rx_pending(d->vs)) {
		r = vq_vsock_process_rx(d->vs, BUDGET);
		if (r < 0)
			ring_broken(d, VQ_VSOCK_RXQ);
		else
			n += r;
	}
	if (ring_ok(d, VQ_VSOCK_EVQ) && vq_vsock_event_pending(d->vs)) {
		r = vq_vsock_process_event(d->vs);
		if (r < 0)
			ring_broken(d, VQ_VSOCK_EVQ);
		else
			n += r;
	}
	return n;
}

/* Would a pump find work on a ring right now?  (cheap: no syscalls) */
static bool rings_ready(struct daemon *d)
{
	if (!vq_vsock_started(d->vs))
		return false;
	if (ring_ok(d, VQ_VSOCK_TXQ) && !vq_vsock_tx_blocked(d->vs) &&
	    vq_dev_has_avail(d->q[VQ_VSOCK_TXQ].dev))
		return true;
	if (ring_ok(d, VQ_VSOCK_RXQ) && vq_vsock_rx_pending(d->vs) &&
	    vq_dev_has_avail(d->q[VQ_VSOCK_RXQ].dev))
		return true;
	return ring_ok(d, VQ_VSOCK_EVQ) && vq_vsock_event_pending(d->vs) &&
	       vq_dev_has_avail(d->q[VQ_VSOCK_EVQ].dev);
}

static bool bp_ready(void *arg)
{
	struct daemon *d = arg;
	struct pollfd p = { .fd = vq_vsock_fd(d->vs), .events = POLLIN };

	return rings_ready(d) || poll(&p, 1, 0) > 0;
}

/* Ask for kicks on the rings we wait for; 1 if one has work already. */
static int arm(struct daemon *d)
{
	unsigned i;
	int again = 0;

	if (!vq_vsock_started(d->vs))
		return 0;
	for (i = 0; i < NQ; i++) {
		struct ring *r = &d->q[i];
		bool want;
		int k;

		if (!ring_ok(d, i))
			continue;
		want = i == VQ_VSOCK_TXQ ? !vq_vsock_tx_blocked(d->vs) :
		       i == VQ_VSOCK_RXQ ? vq_vsock_rx_pending(d->vs) :
		       vq_vsock_event_pending(d->vs);
		if (!want) {
			if (r->notify_on) {
				vq_dev_disable_notify(r->dev);
				r->notify_on = false;
			}
			continue;
		}
		k = vq_dev_enable_notify(r->dev);
		r->notify_on = k == 0;
		if (k < 0)
			ring_broken(d, i);
		if (k > 0) {
			vq_dev_disable_notify(r->dev);
			again = 1;
		}
	}
	return again;
}

static void disarm(struct daemon *d)
{
	unsigned i;

	for (i = 0; i < NQ; i++) {
		if (d->q[i].running && d->q[i].notify_on) {
			vq_dev_disable_notify(d->q[i].dev);
			d->q[i].notify_on = false;
		}
	}
}

/* ------------------------------------------------------------------ */
/* Statistics                                                          */
/* ------------------------------------------------------------------ */

static void snap_take(struct daemon *d, struct snap *p)
{
	unsigned i;

	p->s = *vq_vsock_stats(d->vs);
	p->c = (struct vqd_count){
		.tx_pkts = p->s.tx_pkts, .tx_bytes = p->s.tx_bytes,
		.rx_pkts = p->s.rx_pkts, .rx_bytes = p->s.rx_bytes,
		.kicks = d->kicks_old, .calls = d->calls_old,
	};
	for (i = 0; i < NQ; i++) {
		p->c.kicks += d->q[i].kicks;
		p->c.calls += d->q[i].calls;
	}
	p->conns = vq_vsock_conn_count(d->vs);
}

static uint64_t bad_total(const struct vq_vsock_stats *s)
{
	return s->bad_short_buf + s->bad_len + s->bad_type + s->bad_op +
	       s->bad_addr + s->bad_credit + s->bad_rx_buf + s->bad_connect_line +
	       s->bad_seq;
}

/* One statistics line (vqd_ctl's stats callback). */
static void stats_line(void *arg, double dt, double t, bool final)
{
	struct daemon *d = arg;
	struct snap *now = &d->st_now, *prev = &d->st_prev;
	const struct vq_vsock_stats *s = &now->s;

	snap_take(d, now);
	if (final)
		memset(prev, 0, sizeof(*prev));
	vqd_line_start(d->com.json, &now->c, &prev->c, dt, t, final);
	if (d->com.json) {
		vqd_json_rates(&now->c, &prev->c, dt, true, false);
		printf(",\"rx_flushes\":%" PRIu64, s->rx_flushes);
		vqd_json_rates(&now->c, &prev->c, dt, false, true);
		printf(",\"conns\":%u"
		       ",\"conns_opened\":%" PRIu64 ",\"conns_closed\":%" PRIu64
		       ",\"rst_sent\":%" PRIu64 ",\"rst_recv\":%" PRIu64
		       ",\"credit_updates_sent\":%" PRIu64 ",\"host_stalls\":%" PRIu64
		       ",\"host_msg_deferred\":%" PRIu64
		       ",\"kicks_missed\":%" PRIu64 ",\"calls_late\":%" PRIu64
		       ",\"errors\":{\"short_buf\":%" PRIu64 ",\"bad_len\":%" PRIu64
		       ",\"bad_type\":%" PRIu64 ",\"bad_op\":%" PRIu64 ",\"bad_addr\":%" PRIu64
		       ",\"bad_credit\":%" PRIu64 ",\"bad_rx_buf\":%" PRIu64
		       ",\"no_listener\":%" PRIu64 ",\"conn_limit\":%" PRIu64
		       ",\"bad_connect_line\":%" PRIu64 ",\"bad_seq\":%" PRIu64
		       ",\"host_msg_too_big\":%" PRIu64 "}",
		       now->conns, s->conns_opened, s->conns_closed,
		       s->rst_sent, s->rst_recv, s->credit_updates_sent, s->host_stalls,
		       s->host_msg_deferred, d->kicks_missed, d->calls_late,
		       s->bad_short_buf, s->bad_len, s->bad_type, s->bad_op, s->bad_addr,
		       s->bad_credit, s->bad_rx_buf, s->no_listener, s->conn_limit,
		       s->bad_connect_line, s->bad_seq, s->host_msg_too_big);
		if (final)
			vqd_json_backend(d->b);
		printf("}\n");
	} else {
		printf("  conns %u  errors %" PRIu64, now->conns, bad_total(s));
		if (bad_total(s) || s->no_listener || s->conn_limit || s->host_msg_too_big)
			printf(" (short_buf=%" PRIu64 " bad_len=%" PRIu64 " bad_type=%" PRIu64
			       " bad_op=%" PRIu64 " bad_addr=%" PRIu64 " bad_credit=%" PRIu64
			       " bad_rx_buf=%" PRIu64 " bad_connect_line=%" PRIu64
			       " bad_seq=%" PRIu64 " no_listener=%" PRIu64 " conn_limit=%" PRIu64
			       " host_msg_too_big=%" PRIu64 ")",
			       s->bad_short_buf, s->bad_len, s->bad_type, s->bad_op,
			       s->bad_addr, s->bad_credit, s->bad_rx_buf, s->bad_connect_line,
			       s->bad_seq, s->no_listener, s->conn_limit, s->host_msg_too_big);
		if (final)
			printf("\nsummary tx %" PRIu64 " packets %" PRIu64 " bytes, rx %" PRIu64
			       " packets %" PRIu64 " bytes, %" PRIu64 " rx flushes, "
			       "%" PRIu64 " connections, %" PRIu64 " RST sent",
			       s->tx_pkts, s->tx_bytes, s->rx_pkts, s->rx_bytes,
			       s->rx_flushes, s->conns_opened, s->rst_sent);
		printf("\n");
	}
	fflush(stdout);
	*prev = *now;
}

/* ------------------------------------------------------------------ */
/* The loop's hooks: the data path shares the control thread           */
/* ------------------------------------------------------------------ */

/* Drain the kicks of the rings whose fd fired. */
static void take_kicks(struct daemon *d, const struct pollfd *pf, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		int64_t k;

		if (d->kick_ring[i] < 0 || !pf[i].revents)
			continue;
		k = vq_evt_drain(pf[i].fd);
		if (k > 0)
			d->q[d->kick_ring[i]].kicks += (uint64_t)k;
	}
}

/* Pump; when nothing moved, busy poll, then (V4) arm and re-check before
 * the loop may sleep.  The fds: the host sockets, then each ring's kick. */
static int loop_before(void *arg, struct pollfd *pf, unsigned max, bool *idle)
{
	struct daemon *d = arg;
	unsigned i, n = 0;
	int work;

	work = pump(d);
	if (work == 0 && d->com.busy_poll_us && vq_vsock_started(d->vs)) {
		struct vq_bp_probe p = { .ready = bp_ready, .arg = d };

		if (vq_busy_poll(&p, d->com.busy_poll_us * 1000) == VQ_BP_HIT)
			work = 1;
	}
	/* Sleep only when nothing moves and every ring we wait on has
	 * notifications on. */
	if (work == 0 && arm(d))
		return -1;
	*idle = work == 0;
	pf[n] = (struct pollfd){ .fd = vq_vsock_fd(d->vs), .events = POLLIN };
	d->kick_ring[n++] = -1;
	for (i = 0; i < NQ && n < max; i++) {
		if (!d->q[i].running || d->q[i].kick_fd < 0)
			continue;
		pf[n] = (struct pollfd){ .fd = d->q[i].kick_fd, .events = POLLIN };
		d->kick_ring[n++] = (int)i;
	}
	return (int)n;
}

/*
 * A quiet period ended with nothing: look at the rings once more, as the
 * runtime's loop does (a driver whose barrier failed read our suppression
 * stale, or we read its).  Buffers posted with our notifications on and no
 * kick are taken by the next pump; a call the driver is owed goes now.
 */
static void quiet_look(struct daemon *d)
{
	unsigned i;

	for (i = 0; i < NQ; i++) {
		struct ring *r = &d->q[i];

		if (!r->running)
			continue;
		if (vq_dev_signal_owed(r->dev)) {
			if (r->call_fd >= 0)
				vq_evt_signal(r->call_fd);
			r->calls++;
			d->calls_late++;
		}
		if (r->notify_on && vq_dev_has_avail(r->dev))
			d->kicks_missed++;
	}
}

static void loop_after(void *arg, const struct pollfd *pf, unsigned n, int r,
		       bool idle)
{
	struct daemon *d = arg;

	if (idle && r == 0)
		quiet_look(d);
	if (idle)
		disarm(d);
	if (r > 0)
		take_kicks(d, pf, n);
}

static const struct vqd_hooks hooks = {
	.before = loop_before,
	.after = loop_after,
	.quiet_ms = 200,
};

/* ------------------------------------------------------------------ */
/* Options                                                             */
/* ------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
"usage: virtq-vsock (--socket-path PATH | --fd N) --guest-cid N --uds-path HOST_PATH [options]\n"
"       virtq-vsock --print-capabilities\n"
"A vhost-user-vsock backend.  Guest connections to CID 2 port P go to the\n"
"UNIX socket HOST_PATH_P (SOCK_STREAM, or SOCK_SEQPACKET for a guest\n"
"SOCK_SEQPACKET socket); host programs connect to HOST_PATH (or, with\n"
"SOCK_SEQPACKET, to HOST_PATH.seqpacket) and send\n"
"\"CONNECT <port>\\n\", answered \"OK <host_port>\\n\" (docs/virtq-vsock.md).\n"
VQD_USAGE_SOCKET
"  --guest-cid N         the guest's CID (>= 3), given to the front-end in\n"
"                        the config space (GET_CONFIG)\n"
"  --uds-path HOST_PATH  the host side (see above)\n"
"  --used-batch N        RX: publish used entries every N (1: each on its\n"
"                        own; 0: once per burst, the default)\n"
"  --busy-poll USEC      poll this long before sleeping (0)\n"
"  --buf-alloc BYTES     receive buffer per connection we advertise (262144)\n"
"  --max-conns N         connections at most (1024)\n"
"  --no-packed --no-event-idx --no-indirect --no-in-order --no-seqpacket\n"
"                        stop offering that feature\n"
VQD_USAGE_STATS);
}

enum { O_CID = VQD_O_TOOL, O_UDS, O_BUF_ALLOC, O_MAX_CONNS, O_NO_SEQPACKET };

static const struct option long_opts[] = {
	{ "guest-cid", required_argument, NULL, O_CID },
	{ "uds-path", required_argument, NULL, O_UDS },
	{ "buf-alloc", required_argument, NULL, O_BUF_ALLOC },
	{ "max-conns", required_argument, NULL, O_MAX_CONNS },
	{ "no-seqpacket", no_argument, NULL, O_NO_SEQPACKET },
	{ NULL, 0, NULL, 0 },
};

/* One of virtq-vsock's own options (vqd_cli.opt). */
static int tool_opt(void *arg, int c, const char *val)
{
	struct opts *o = arg;
	uint64_t v;

	switch (c) {
	case O_CID:
		if (!vqd_parse_u64(val, 0xfffffffeull, &v) || v < 3)
			return -1;
		o->cid = v;
		break;
	case O_UDS:
		o->uds = val;
		break;
	case O_BUF_ALLOC:
		if (!vqd_parse_u64(val, 1u << 30, &v) || v < 4096)
			return -1;
		o->buf_alloc = (uint32_t)v;
		break;
	case O_MAX_CONNS:
		if (!vqd_parse_u64(val, 1u << 20, &v) || !v)
			return -1;
		o->max_conns = (uint32_t)v;
		break;
	case O_NO_SEQPACKET:
		o->no_seqpacket = true;
		break;
	}
	return 0;
}

static struct vqd_cli cli = {
	.name = "virtq-vsock", .type = "vsock", .opts = long_opts, .opt = tool_opt,
	.usage = usage,
};

static uint64_t offered_features(const struct daemon *d)
{
	/* Streams are implied (no NO_IMPLIED_STREAM, 5.10.3: Linux 6.1 does
	 * not know it); SEQPACKET adds message sockets. */
	return vqd_features(&d->com, VIRTQ_BIT(VIRTIO_F_VERSION_1) |
			    VIRTQ_BIT(VIRTIO_F_RING_PACKED) |
			    VIRTQ_BIT(VIRTIO_F_IN_ORDER) | VIRTQ_BIT(VIRTIO_F_EVENT_IDX) |
			    VIRTQ_BIT(VIRTIO_F_INDIRECT_DESC) |
			    (d->o.no_seqpacket ? 0 : VIRTQ_BIT(VQ_VSOCK_F_SEQPACKET)));
}

int main(int argc, char **argv)
{
	static struct daemon d;
	struct vq_vhu_opts vo;
	struct vq_vhu_device dev;
	struct vq_vsock_config vc;
	struct vqd_ctl ctl = { .cli = &cli, .o = &d.com, .stats = stats_line,
			       .hooks = &hooks, .arg = &d };
	int r, rc = 1, lfd = -1, sfd = -1;
	char seqpath[sizeof(((struct sockaddr_un *)0)->sun_path) + 16];
	unsigned i;

	cli.arg = &d.o;
	r = vqd_parse(&cli, &argc, argv, &vo, &d.com);
	if (r != 1)
		return r;
	if (optind < argc) {
		fprintf(stderr, "virtq-vsock: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!d.o.cid || !d.o.uds) {
		fprintf(stderr, "virtq-vsock: --guest-cid and --uds-path are required\n");
		return 2;
	}
	if (!vqd_need_socket(&cli, &vo))
		return 2;
	for (i = 0; i < NQ; i++)
		d.q[i].kick_fd = d.q[i].call_fd = d.q[i].err_fd = -1;
	vc = (struct vq_vsock_config){
		.guest_cid = d.o.cid, .buf_alloc = d.o.buf_alloc,
		.max_conns = d.o.max_conns,
		/* 0: one flush per burst, whatever its size */
		.used_batch = d.com.used_batch ? d.com.used_batch : UINT32_MAX,
		.host_connect = host_connect, .notify = dev_notify, .arg = &d,
	};
	r = vq_vsock_new(&vc, &d.vs);
	if (r < 0) {
		fprintf(stderr, "virtq-vsock: %s\n", strerror(-r));
		return 1;
	}
	lfd = vq_vsock_uds_listen(d.o.uds, VQ_VSOCK_TYPE_STREAM);
	if (lfd < 0 || vq_vsock_set_listener(d.vs, lfd) < 0) {
		fprintf(stderr, "virtq-vsock: cannot listen on %s: %s\n", d.o.uds,
			strerror(lfd < 0 ? -lfd : EINVAL));
		goto out;
	}
	if (!d.o.no_seqpacket) {
		/* host programs' seqpacket connections: HOST_PATH.seqpacket */
		if ((size_t)snprintf(seqpath, sizeof(seqpath), "%s.seqpacket", d.o.uds) >=
		    sizeof(seqpath)) {
			fprintf(stderr, "virtq-vsock: %s.seqpacket: path too long\n", d.o.uds);
			goto out;
		}
		sfd = vq_vsock_uds_listen(seqpath, VQ_VSOCK_TYPE_SEQPACKET);
		if (sfd < 0 || vq_vsock_set_listener(d.vs, sfd) < 0) {
			fprintf(stderr, "virtq-vsock: cannot listen on %s: %s\n", seqpath,
				strerror(sfd < 0 ? -sfd : EINVAL));
			goto out;
		}
	}
	dev = (struct vq_vhu_device){
		.name = "virtq-vsock", .features = offered_features(&d),
		.nqueues = NQ, .config_len = sizeof(struct vq_vsock_config_space),
		.ops = &vsock_ops, .opaque = &d,
	};
	r = vq_vhu_backend_new(&dev, &ctl.b);
	if (r < 0) {
		fprintf(stderr, "virtq-vsock: %s\n", strerror(-r));
		goto out;
	}
	d.b = ctl.b;
	if (vqd_open(&ctl, &vo) < 0)
		goto out;
	if (!d.com.quiet)
		fprintf(stderr, "virtq-vsock: guest CID %" PRIu64 ", host side %s, features 0x%" PRIx64
			", used batch %u, busy poll %" PRIu64 " us\n",
			d.o.cid, d.o.uds, dev.features, d.com.used_batch, d.com.busy_poll_us);
	rc = vqd_run(&ctl);
	vqd_summary(&ctl);
out:
	vq_vhu_backend_free(ctl.b);
	vq_vsock_free(d.vs);
	if (lfd >= 0)
		unlink(d.o.uds);        /* ours: we created it */
	if (sfd >= 0)
		unlink(seqpath);
	return rc;
}
