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
 * One thread does everything: the rings and the host sockets (the device's
 * epoll set) are the queues and an fd of one runtime loop, and the control
 * loop waits for the vhost-user socket on it too, so a ring is never
 * touched after queue_stop returns and the device layer needs no locks.
 * A ring the device has nothing for (no data for the guest, TX held back
 * by replies waiting for RX buffers) asks for no kicks; work found for it
 * elsewhere (host data, a reply, credit) wakes it.  Busy polling
 * (--busy-poll) covers rings and host sockets alike, and the loop's quiet
 * look finds the kicks and calls a guest's failed barrier lost.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <virtq/runtime.h>
#include <virtq/vhost_user_backend.h>
#include <virtq/vsock.h>

#include "virtq-vsock.h"

#define NQ 3u
#define BUDGET 256u

struct daemon;

struct ring {
	struct daemon *d;
	unsigned index;
	bool running;
	struct vq_dev *dev;
	int kick_fd, call_fd, err_fd;
	bool armed;                     /* idle, waiting for a kick */
	bool broken_logged;
	struct vq_rt_queue *rtq;        /* on the loop (while vsock runs) */
	uint64_t calls;                 /* sent off the loop */
};

/* The loop's counters of the rings, kept across loops. */
struct rt_count {
	uint64_t kicks, calls, kicks_missed, calls_late;
};

struct snap {
	struct vqd_count c;
	struct vq_vsock_stats s;
	struct rt_count rt;
	unsigned conns;
};

struct daemon {
	struct vsock_opts o;
	struct vqd_opts com;            /* the options every daemon takes */
	struct snap st_now, st_prev;    /* the statistics line's ends */
	struct vq_vsock *vs;
	struct vq_vhu_backend *b;       /* for its IOTLB statistics */
	struct ring q[NQ];
	struct vq_rt_loop *loop;        /* rings, host sockets, the control socket */
	struct rt_count rt_old;         /* from loops and rings gone */
	bool ctl_ready;                 /* the vhost-user socket is readable */
	/* Per front-end connection: did its first start resume rings that
	 * another backend ran, and was the guest told? */
	bool session_started, session_resumed, reset_sent;
};

static const char *const qname[NQ] = { "rx", "tx", "event" };

/* ------------------------------------------------------------------ */

static int host_connect(void *arg, uint32_t port, uint16_t type)
{
	struct daemon *d = arg;

	return vq_vsock_uds_connect(d->o.uds, port, type);
}

/* After the device published used entries on ring qi. */
static void dev_notify(void *arg, unsigned qi)
{
	struct daemon *d = arg;
	struct ring *r = &d->q[qi];

	if (!r->running)
		return;
	if (r->rtq) {
		vq_rt_queue_signal(r->rtq);
		return;
	}
	/* off the loop: the event queue's reset, from the control side */
	if (!vq_dev_should_signal(r->dev))
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

static void loop_drop(struct daemon *d);
static int loop_build(struct daemon *d);

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
	loop_drop(d);
	r = &d->q[q->index];
	r->running = true;
	r->dev = q->vq;
	r->kick_fd = q->kick_fd;
	r->call_fd = q->call_fd;
	r->err_fd = q->err_fd;
	r->armed = false;
	r->broken_logged = false;
	vq_dev_disable_notify(r->dev);
	if (!d->com.quiet)
		fprintf(stderr, "virtq-vsock: queue %u (%s) started, %u entries, features 0x%" PRIx64 "\n",
			q->index, qname[q->index], vq_dev_num(q->vq), vq_dev_features(q->vq));
	attach(d);
	return loop_build(d);
}

static void dev_queue_stop(void *opaque, unsigned index, bool resumes)
{
	struct daemon *d = opaque;
	struct ring *r;

	if (index >= NQ || !d->q[index].running)
		return;
	r = &d->q[index];
	loop_drop(d);
	/* Keep the connections either way: a ring that pauses resumes, and
	 * one the front-end stopped may start again (QEMU stops and starts
	 * them on a guest's suspend); a reset or disconnect ends them. */
	vq_vsock_detach(d->vs);
	d->rt_old.calls += r->calls;
	*r = (struct ring){ .d = d, .index = index, .kick_fd = -1, .call_fd = -1,
			    .err_fd = -1 };
	if (!d->com.quiet)
		fprintf(stderr, "virtq-vsock: queue %u (%s) stopped\n", index, qname[index]);
	attach(d);
	loop_build(d);
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

	loop_drop(d);
	vq_vsock_stop(d->vs);
	d->session_started = d->session_resumed = d->reset_sent = false;
	loop_build(d);
}

static const struct vq_vhu_device_ops vsock_ops = {
	.queue_start = dev_queue_start,
	.queue_stop = dev_queue_stop,
	.get_config = dev_get_config,
	.reset = dev_reset,
};

/* ------------------------------------------------------------------ */
/* Data path: the rings are the loop's queues, the host sockets its fd */
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

/* Does the device want ring qi's buffers now? */
static bool ring_wanted(struct daemon *d, unsigned qi)
{
	const struct ring *r = &d->q[qi];

	if (!vq_vsock_started(d->vs) || !r->running || vq_dev_error(r->dev))
		return false;
	if (qi == VQ_VSOCK_TXQ)
		return !vq_vsock_tx_blocked(d->vs);
	if (qi == VQ_VSOCK_RXQ)
		return vq_vsock_rx_pending(d->vs);
	return vq_vsock_event_pending(d->vs);
}

static void q_disable(void *p);

/* Work found for rings that asked for no kicks (host data for RX, RX
 * buffers taken that unblock TX): give them a turn.  Rings waiting for a
 * kick they no longer need stop asking for it. */
static void wake_wanted(struct daemon *d)
{
	unsigned i;

	for (i = 0; i < NQ; i++) {
		struct ring *r = &d->q[i];

		if (!r->rtq || vq_rt_queue_active(r->rtq))
			continue;
		if (ring_wanted(d, i)) {
			if (!r->armed)
				vq_rt_queue_wake(r->rtq);
		} else if (r->armed) {
			q_disable(r);
		}
	}
}

static bool q_has_avail(void *p)
{
	struct ring *r = p;

	return ring_wanted(r->d, r->index) && vq_dev_has_avail(r->dev);
}

static void q_disable(void *p)
{
	struct ring *r = p;

	vq_dev_disable_notify(r->dev);
	r->armed = false;
}

/* Going idle: a kick only if the device wants the ring's buffers. */
static int q_enable(void *p)
{
	struct ring *r = p;
	int k;

	if (!ring_wanted(r->d, r->index)) {
		q_disable(r);
		return 0;
	}
	k = vq_dev_enable_notify(r->dev);
	if (k < 0) {
		ring_broken(r->d, r->index);
		return 0;
	}
	r->armed = k == 0;
	return k;
}

static const struct vq_rt_ring_ops ring_ops = {
	.has_avail = q_has_avail, .disable_notify = q_disable,
	.enable_notify = q_enable,
};

/* A ring's turn. */
static int q_process(struct vq_rt_queue *q, void *arg,
		     const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct ring *r = arg;
	struct daemon *d = r->d;
	const struct vq_vsock_stats *s = vq_vsock_stats(d->vs);
	uint64_t before = s->tx_bytes + s->rx_bytes;
	int n = 0;

	if (ring_wanted(d, r->index)) {
		if (r->index == VQ_VSOCK_TXQ)
			n = vq_vsock_process_tx(d->vs, b->pkts);
		else if (r->index == VQ_VSOCK_RXQ)
			n = vq_vsock_process_rx(d->vs, b->pkts);
		else
			n = vq_vsock_process_event(d->vs);
	}
	if (n < 0) {
		ring_broken(d, r->index);
		n = 0;
	}
	*bytes += s->tx_bytes + s->rx_bytes - before;
	wake_wanted(d);
	return n;
}

/* The host sockets' turn (the device's epoll set is readable). */
static int host_turn(struct vq_rt_fd *h, void *arg, uint32_t revents,
		     const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct daemon *d = arg;
	int n = vq_vsock_process_host(d->vs);

	if (n < 0) {
		fprintf(stderr, "virtq-vsock: host sockets: %s\n", strerror(-n));
		return n;
	}
	wake_wanted(d);
	return n;
}

static int ctl_turn(struct vq_rt_fd *h, void *arg, uint32_t revents,
		    const struct vq_rt_budget *b, uint64_t *bytes)
{
	((struct daemon *)arg)->ctl_ready = true;
	return 0;
}

/* Keep the counters of the loop's queues and free it. */
static void loop_drop(struct daemon *d)
{
	unsigned i;

	for (i = 0; i < NQ; i++) {
		struct ring *r = &d->q[i];
		const struct vq_rt_counters *c;

		if (!r->rtq)
			continue;
		c = vq_rt_queue_counters(r->rtq);
		d->rt_old.kicks += c->kicks_recv;
		d->rt_old.calls += c->calls_sent;
		d->rt_old.kicks_missed += c->kicks_missed;
		d->rt_old.calls_late += c->calls_late;
		r->rtq = NULL;
	}
	vq_rt_loop_free(d->loop);
	d->loop = NULL;
}

/* The loop: the host sockets always, the rings while the device runs. */
static int loop_build(struct daemon *d)
{
	struct vq_rt_loop_config lc = {
		.busy_poll_ns = d->com.busy_poll_us * 1000,
		.busy_poll_yield_ns = d->com.busy_poll_yield_us * 1000,
	};
	unsigned i;
	int r;

	r = vq_rt_loop_new(&lc, &d->loop);
	if (r == 0)
		r = vq_rt_loop_add_fd(d->loop, vq_vsock_fd(d->vs), EPOLLIN, host_turn,
				      d, NULL);
	for (i = 0; r == 0 && vq_vsock_started(d->vs) && i < NQ; i++) {
		struct ring *rg = &d->q[i];
		struct vq_rt_queue_config qc = {
			.dev = rg->dev, .ops = &ring_ops, .ring = rg,
			.kick_fd = rg->kick_fd, .call_fd = rg->call_fd,
			.process = q_process, .arg = rg,
		};

		if (rg->running)
			r = vq_rt_loop_add(d->loop, &qc, &rg->rtq);
	}
	if (r < 0) {
		fprintf(stderr, "virtq-vsock: cannot build the data path's loop: %s\n",
			strerror(-r));
		loop_drop(d);
	}
	return r;
}

/* vqd_run's wait: the loop runs until the vhost-user socket is readable
 * or the time is up. */
static int data_wait(void *arg, int fd, int timeout_ms)
{
	struct daemon *d = arg;
	struct vq_rt_fd *ctl = NULL;
	uint64_t now = vq_rt_now_ns();
	uint64_t end = timeout_ms < 0 ? UINT64_MAX : now + (uint64_t)timeout_ms * 1000000;
	int r = 0;

	if (!d->loop) {
		r = loop_build(d);
		if (r < 0)
			return r;
	}
	d->ctl_ready = false;
	if (fd >= 0) {
		r = vq_rt_loop_add_fd(d->loop, fd, EPOLLIN, ctl_turn, d, &ctl);
		if (r < 0)
			return r;
	}
	do {
		uint64_t left = end - now;

		r = vq_rt_loop_run_once(d->loop, end == UINT64_MAX ? -1 :
					(int)((left + 999999) / 1000000));
		now = vq_rt_now_ns();
	} while (r >= 0 && !d->ctl_ready && !vqd_stop && now < end);
	vq_rt_fd_remove(ctl);
	return r < 0 ? r : d->ctl_ready;
}

/* ------------------------------------------------------------------ */
/* Statistics                                                          */
/* ------------------------------------------------------------------ */

static void snap_take(struct daemon *d, struct snap *p)
{
	unsigned i;

	p->s = *vq_vsock_stats(d->vs);
	p->rt = d->rt_old;
	for (i = 0; i < NQ; i++) {
		const struct ring *r = &d->q[i];

		p->rt.calls += r->calls;
		if (r->rtq) {
			const struct vq_rt_counters *c = vq_rt_queue_counters(r->rtq);

			p->rt.kicks += c->kicks_recv;
			p->rt.calls += c->calls_sent;
			p->rt.kicks_missed += c->kicks_missed;
			p->rt.calls_late += c->calls_late;
		}
	}
	p->c = (struct vqd_count){
		.tx_pkts = p->s.tx_pkts, .tx_bytes = p->s.tx_bytes,
		.rx_pkts = p->s.rx_pkts, .rx_bytes = p->s.rx_bytes,
		.kicks = p->rt.kicks, .calls = p->rt.calls,
	};
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
		       s->host_msg_deferred, now->rt.kicks_missed, now->rt.calls_late,
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

static const struct vqd_hooks hooks = { .wait = data_wait };

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
		d.q[i] = (struct ring){ .d = &d, .index = i, .kick_fd = -1,
					.call_fd = -1, .err_fd = -1 };
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
	if (host_listen(&d, &ctl) < 0 || loop_build(&d) < 0 || vqd_open(&ctl) < 0)
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
	loop_drop(&d);
	vq_vsock_free(d.vs);
	return rc;
}
