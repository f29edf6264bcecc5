// SPDX-License-Identifier: MIT
/*
 * virtq-vsock: a vhost-user-vsock backend with the host side on UNIX
 * sockets (the hybrid-vsock convention of Firecracker and vhost-device-vsock,
 * docs/virtq-vsock.md).
 *
 *   virtq-vsock (--socket-path PATH | --fd N) --guest-cid N --uds-path HOST_PATH
 *
 * (options.c reads the command line.)
 *
 * One thread does everything: the vhost-user control socket, the rings and
 * the host sockets share one poll set, so a ring is never touched after
 * queue_stop returns and the device layer needs no locks.  The data path
 * follows the runtime's rules: a ring with work is processed with its
 * notifications off; when everything ran dry it busy polls (--busy-poll),
 * then enables notifications, re-checks, and sleeps.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <virtq/runtime.h>
#include <virtq/vhost_user_backend.h>
#include <virtq/vsock.h>

#include "virtq-vsock.h"

#define NQ 3u
#define BUDGET 256u

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
	struct vsock_opts o;
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

/* The host side: HOST_PATH for streams and, unless --no-seqpacket,
 * HOST_PATH.seqpacket for seqpacket connections, handed to the device. */
static int host_listen(struct daemon *d, struct vqd_ctl *ctl)
{
	char seq[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct vq_unix_listener *l;
	int fd, r;

	fd = vqd_listen(ctl, "--uds-path", d->o.uds, SOCK_STREAM, &l);
	if (fd < 0)
		return fd;
	r = vq_vsock_set_listener(d->vs, fd);
	if (r < 0)
		goto bad;
	vq_unix_listener_release_fd(l);        /* the device's now */
	if (d->o.no_seqpacket)
		return 0;
	/* options.c checked that it fits */
	snprintf(seq, sizeof(seq), "%s" VSOCK_SEQ_SUFFIX, d->o.uds);
	fd = vqd_listen(ctl, "--uds-path", seq, SOCK_SEQPACKET, &l);
	if (fd < 0)
		return fd;
	r = vq_vsock_set_listener(d->vs, fd);
	if (r < 0)
		goto bad;
	vq_unix_listener_release_fd(l);
	return 0;
bad:
	fprintf(stderr, "virtq-vsock: cannot take host connections: %s\n", strerror(-r));
	return r;
}

static int device_new(struct daemon *d)
{
	struct vq_vsock_config vc = {
		.guest_cid = d->o.cid, .buf_alloc = d->o.buf_alloc,
		.max_conns = d->o.max_conns,
		/* 0: one flush per burst, whatever its size */
		.used_batch = d->com.used_batch ? d->com.used_batch : UINT32_MAX,
		.host_connect = host_connect, .notify = dev_notify, .arg = d,
	};
	int r = vq_vsock_new(&vc, &d->vs);

	if (r < 0)
		fprintf(stderr, "virtq-vsock: %s\n", strerror(-r));
	return r;
}

int main(int argc, char **argv)
{
	static struct daemon d;
	struct vq_vhu_device dev;
	struct vqd_ctl ctl = { .o = &d.com, .stats = stats_line, .hooks = &hooks,
			       .arg = &d };
	int r, rc = 1;
	unsigned i;

	ctl.cli = vsock_parse(argc, argv, &d.o, &d.com);
	for (i = 0; i < NQ; i++)
		d.q[i].kick_fd = d.q[i].call_fd = d.q[i].err_fd = -1;
	if (device_new(&d) < 0)
		return 1;
	dev = (struct vq_vhu_device){
		.name = "virtq-vsock", .features = offered_features(&d),
		.nqueues = NQ, .config_len = sizeof(struct vq_vsock_config_space),
		.ops = &vsock_ops, .opaque = &d,
	};
	vqd_log_to_stderr(d.com.quiet);
	r = vq_vhu_backend_new(&dev, &ctl.b);
	if (r < 0) {
		fprintf(stderr, "virtq-vsock: %s\n", strerror(-r));
		goto out;
	}
	d.b = ctl.b;
	/* The vhost-user socket last: a front-end that sees it finds the
	 * host side ready. */
	if (host_listen(&d, &ctl) < 0 || vqd_open(&ctl) < 0)
		goto out;
	if (!d.com.quiet)
		fprintf(stderr, "virtq-vsock: guest CID %" PRIu64 ", host side %s, features 0x%" PRIx64
			", used batch %u, busy poll %" PRIu64 " us\n",
			d.o.cid, d.o.uds, dev.features, d.com.used_batch, d.com.busy_poll_us);
	rc = vqd_run(&ctl);
	vqd_summary(&ctl);
out:
	/* the backend first: its teardown resets the device */
	vqd_close(&ctl);
	vq_vsock_free(d.vs);
	return rc;
}
