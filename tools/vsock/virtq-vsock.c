// SPDX-License-Identifier: MIT
/*
 * virtq-vsock: a vhost-user-vsock backend with the host side on UNIX
 * sockets (the hybrid-vsock convention of Firecracker and vhost-device-vsock,
 * docs/virtq-vsock.md).
 *
 *   virtq-vsock (--socket-path PATH | --fd N) --guest-cid N --uds-path HOST_PATH
 *   virtq-vsock --vm guest-cid=N,socket=PATH,uds-path=HOST_PATH... | --config FILE
 *
 * (options.c reads the command line.)
 *
 * Each VM is a device on the library's framework (virtq/framework.h): its
 * three rings are one group, so one worker runs them and the host sockets
 * (the device's epoll set, an fd of the worker's loop), and the device
 * layer needs no locks; the control thread serves every VM's vhost-user
 * socket, and one VM's front-end going away (or coming back) touches no
 * other VM.  The VMs' devices share a hub (virtq/vsock.h), through which
 * their guests reach each other when they share a group.  A
 * ring the device has nothing for (no data for the guest, TX held back by
 * replies waiting for RX buffers) asks for no kicks; work found for it
 * elsewhere (host data, a reply, credit) wakes it.  Busy polling
 * (adaptive, or --busy-poll's fixed window) covers rings and host sockets
 * alike, and the loop's quiet look finds the kicks and calls a guest's
 * failed barrier lost.
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

#include <virtq/framework.h>
#include <virtq/runtime.h>
#include <virtq/vsock.h>

#include "virtq-vsock.h"

#define NQ 3u

struct vm;

/* A ring as the device sees it (the worker's). */
struct ring {
	struct vm *d;
	unsigned index;
	bool running;
	struct vq_fw_ring *fr;
	struct vq_dev *dev;
	bool armed;                     /* idle, waiting for a kick */
};

struct snap {
	struct vqd_count c;
	struct vq_vsock_stats s;
	uint64_t kicks_missed, calls_late;
	unsigned conns;
	struct vqd_queue_count q[3];    /* by ring: rx, tx, event */
};

/* One VM: its device, its rings, its host side. */
struct vm {
	struct daemon *dm;
	const struct vsock_vm *o;
	const struct vqd_opts *com;
	char tag[32];                   /* "" or "CID 4: ", before its messages */
	struct vq_vsock *vs;
	struct vq_fw_dev *fwd;
	struct vq_vhu_backend *b;       /* for its IOTLB statistics */
	struct ring q[NQ];
	struct vq_rt_fd *host;          /* the host sockets, on the worker's loop */
	/* Per front-end connection: did its first start resume rings that
	 * another backend ran, and was the guest told? */
	bool session_started, session_resumed, reset_sent;
	bool tx_started;                /* since attach() last looked */
	unsigned refusals_logged;       /* on the device's worker */
	struct snap st;                 /* its part of the newest line */
};

struct daemon {
	struct vsock_opts o;
	struct vqd_opts com;            /* the options every daemon takes */
	struct snap st_now, st_prev;    /* the statistics line's ends */
	struct vq_fw *fw;
	struct vq_vsock_hub *hub;
	struct vm vm[VSOCK_VMS_MAX];
	struct vqd_sock sock[VSOCK_VMS_MAX];
	unsigned nvm;
	uint64_t vm_prev[VSOCK_VMS_MAX][2];     /* per VM: tx, rx bytes at the last line */
};

static const char *const qname[NQ] = { "rx", "tx", "event" };

/* virtio-vsock's bits by name (virtio 1.2, 5.10.3), for the messages. */
static const struct vqd_feature vsock_features[] = {
	{ VQ_VSOCK_F_STREAM, "STREAM" }, { VQ_VSOCK_F_SEQPACKET, "SEQPACKET" },
	{ 2, "NO_IMPLIED_STREAM" },
	{ 0, NULL },
};

/* ------------------------------------------------------------------ */

/* On the device's worker: a connection the policy refuses, said on
 * stderr for the first few even with --quiet (an operator wants to know
 * who was refused); a guest that keeps trying is counted
 * (policy_refused), not logged line by line. */
#define REFUSALS_LOGGED 16u
static void refused(struct vm *d, const char *what, uint32_t port, const char *opt)
{
	if (d->refusals_logged > REFUSALS_LOGGED)
		return;
	if (d->refusals_logged++ < REFUSALS_LOGGED)
		fprintf(stderr, "virtq-vsock: %s%s port %u refused: not in %s\n", d->tag,
			what, port, opt);
	else
		fprintf(stderr, "virtq-vsock: more refused connections are counted "
			"(policy_refused), not logged\n");
}

static int host_connect(void *arg, uint32_t port, uint16_t type)
{
	struct vm *d = arg;

	if (!port_set_has(&d->o->host_ports, port)) {
		refused(d, "guest connection to host", port, "--host-ports");
		return -EACCES;
	}
	return vq_vsock_uds_connect(d->o->uds, port, type);
}

static int host_request(void *arg, uint32_t port, uint16_t type)
{
	struct vm *d = arg;

	(void)type;
	if (!port_set_has(&d->o->guest_ports, port)) {
		refused(d, "host connection to guest", port, "--guest-ports");
		return -EACCES;
	}
	return 0;
}

/* After the device published used entries on ring qi. */
static void dev_notify(void *arg, unsigned qi)
{
	struct vm *d = arg;

	if (d->q[qi].running)
		vq_fw_ring_signal(d->q[qi].fr);
}

static bool ring_fresh(const struct vq_dev *dev)
{
	struct vq_dev_state s = vq_dev_get_state(dev);
	uint16_t z = (vq_dev_features(dev) & VQ_BIT(VQ_F_RING_PACKED)) ? 0x8000 : 0;

	return s.avail_idx == z && s.used_idx == z;
}

static void attach(struct vm *d)
{
	struct ring *rx = &d->q[VQ_VSOCK_RXQ], *tx = &d->q[VQ_VSOCK_TXQ];
	struct ring *ev = &d->q[VQ_VSOCK_EVQ];

	if (!rx->running || !tx->running)
		return;
	/* A TX ring that starts where it never moved means a new driver
	 * session: whatever connections we hold belong to a guest that is
	 * gone.  (One that moved is the same session after an fd change:
	 * keep them.)  Asked only when TX itself starts, not when another
	 * ring joins or leaves (the event queue after RX and TX, or stopped
	 * alone): a host connection made in between has its REQUEST out and
	 * the guest's answer still to come, so TX has not moved yet either. */
	if (d->tx_started) {
		bool fresh = ring_fresh(tx->dev);

		d->tx_started = false;
		if (fresh && vq_vsock_conn_count(d->vs))
			vq_vsock_stop(d->vs);
		if (!d->session_started) {
			d->session_started = true;
			d->session_resumed = !fresh;
		}
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

/* ------------------------------------------------------------------ */
/* Data path: the rings are the loop's queues, the host sockets its fd */
/* ------------------------------------------------------------------ */

/* Does the device want ring qi's buffers now? */
static bool ring_wanted(struct vm *d, unsigned qi)
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
static void wake_wanted(struct vm *d)
{
	unsigned i;

	for (i = 0; i < NQ; i++) {
		struct ring *r = &d->q[i];

		if (!r->running || vq_fw_ring_active(r->fr))
			continue;
		if (ring_wanted(d, i)) {
			if (!r->armed)
				vq_fw_ring_wake(r->fr);
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
		vq_fw_ring_broken(r->fr);
		return 0;
	}
	r->armed = k == 0;
	return k;
}

static const struct vq_rt_ring_ops ring_ops = {
	.has_avail = q_has_avail, .disable_notify = q_disable,
	.enable_notify = q_enable,
};

/* A ring's turn.  A ring the device broke (its own, or the other one a
 * reply goes to) is said broken with its own message. */
static int q_process(struct vq_rt_queue *q, void *arg,
		     const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct ring *r = arg;
	struct vm *d = r->d;
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
	for (unsigned i = 0; n < 0 && i < NQ; i++)
		if (d->q[i].running && vq_dev_error(d->q[i].dev))
			vq_fw_ring_broken(d->q[i].fr);
	*bytes += s->tx_bytes + s->rx_bytes - before;
	wake_wanted(d);
	return n < 0 ? 0 : n;
}

/* The host sockets' turn (the device's epoll set is readable). */
static int host_turn(struct vq_rt_fd *h, void *arg, uint32_t revents,
		     const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct vm *d = arg;
	int n = vq_vsock_process_host(d->vs);

	if (n < 0) {
		fprintf(stderr, "virtq-vsock: %shost sockets: %s\n", d->tag, strerror(-n));
		return 0;
	}
	wake_wanted(d);
	return n;
}

/* ------------------------------------------------------------------ */
/* The device's callbacks (the worker)                                 */
/* ------------------------------------------------------------------ */

static int vsock_ring_start(void *opaque, struct vq_fw_ring *fr, bool resumed,
			    struct vq_fw_turn *t)
{
	struct vm *d = opaque;
	struct ring *r = &d->q[vq_fw_ring_index(fr)];
	char fb[256];

	r->running = true;
	r->dev = vq_fw_ring_vq(fr);
	r->armed = false;
	vq_dev_disable_notify(r->dev);
	if (r->index == VQ_VSOCK_TXQ)
		d->tx_started = true;
	if (!d->com->quiet)
		fprintf(stderr, "virtq-vsock: %squeue %u (%s) started, %u entries, features %s\n",
			d->tag, r->index, qname[r->index], vq_dev_num(r->dev),
			vqd_features_str(fb, sizeof(fb), vq_dev_features(r->dev),
					 vsock_features));
	attach(d);
	t->process = q_process;
	t->arg = r;
	t->ops = &ring_ops;
	t->ring = r;
	return 0;
}

/* Keep the connections either way: a ring that pauses resumes, and one
 * the front-end stopped may start again (QEMU stops and starts them on a
 * guest's suspend); a reset or disconnect ends them. */
static void vsock_ring_stop(void *opaque, struct vq_fw_ring *fr, bool paused)
{
	struct vm *d = opaque;
	struct ring *r = &d->q[vq_fw_ring_index(fr)];

	if (!r->running)
		return;
	vq_vsock_detach(d->vs);
	r->running = false;
	r->dev = NULL;
	r->armed = false;
	if (!d->com->quiet)
		fprintf(stderr, "virtq-vsock: %squeue %u (%s) %s\n", d->tag, r->index,
			qname[r->index], paused ? "paused" : "stopped");
	attach(d);
}

static void vsock_reset(void *opaque, unsigned group)
{
	struct vm *d = opaque;

	vq_vsock_stop(d->vs);
	d->session_started = d->session_resumed = d->reset_sent = false;
}

/* Control thread: the config space is the guest's CID, fixed. */
static void vsock_get_config(void *opaque, uint32_t off, void *buf, uint32_t len)
{
	struct vm *d = opaque;
	struct vq_vsock_config_space c = { .guest_cid = vq_le64(d->o->cid) };

	/* The library checked off + len against config_len. */
	memcpy(buf, (uint8_t *)&c + off, len);
}

static const struct vq_fw_device_ops vsock_ops = {
	.ring_start = vsock_ring_start,
	.ring_stop = vsock_ring_stop,
	.reset = vsock_reset,
	.get_config = vsock_get_config,
};

/* On the worker: the host sockets join its loop, or leave it. */
static void host_on_loop(void *arg)
{
	struct vm *d = arg;
	int r = vq_rt_loop_add_fd(vq_fw_dev_loop(d->fwd, 0), vq_vsock_fd(d->vs),
				  EPOLLIN, host_turn, d, &d->host);

	if (r < 0)
		fprintf(stderr, "virtq-vsock: %scannot watch the host sockets: %s\n",
			d->tag, strerror(-r));
}

static void host_off_loop(void *arg)
{
	struct vm *d = arg;

	vq_rt_fd_remove(d->host);
	d->host = NULL;
}

/* ------------------------------------------------------------------ */
/* Statistics                                                          */
/* ------------------------------------------------------------------ */

struct snap_call {
	struct vm *d;
	struct snap *p;
};

/* On the worker: what the device and its rings counted. */
static void snap_worker(void *arg)
{
	struct snap_call *sc = arg;
	struct vm *d = sc->d;
	struct snap *p = sc->p;

	memset(p, 0, sizeof(*p));
	p->s = *vq_vsock_stats(d->vs);
	for (unsigned i = 0; i < NQ; i++) {
		const struct vq_rt_counters *c = vq_fw_ring_counters(d->q[i].fr);

		p->c.kicks += c->kicks_recv;
		p->c.calls += c->calls_sent;
		p->kicks_missed += c->kicks_missed;
		p->calls_late += c->calls_late;
		p->q[i] = vqd_queue_count_of(c);
	}
	/* the device counts packets by direction: the rx and tx rings' */
	p->q[0].pkts = p->s.rx_pkts;
	p->q[0].bytes = p->s.rx_bytes;
	p->q[1].pkts = p->s.tx_pkts;
	p->q[1].bytes = p->s.tx_bytes;
	p->conns = vq_vsock_conn_count(d->vs);
}

/* a += b, counter by counter (struct vq_vsock_stats holds nothing else) */
static void stats_add(struct vq_vsock_stats *a, const struct vq_vsock_stats *b)
{
	uint64_t *x = (uint64_t *)a;
	const uint64_t *y = (const uint64_t *)b;

	_Static_assert(sizeof(*a) % sizeof(uint64_t) == 0, "counters only");
	for (size_t i = 0; i < sizeof(*a) / sizeof(uint64_t); i++)
		x[i] += y[i];
}

/* Every VM's counters (each VM's in its st), and their sum in p. */
static void snap_take(struct daemon *dm, struct snap *p)
{
	memset(p, 0, sizeof(*p));
	for (unsigned v = 0; v < dm->nvm; v++) {
		struct vm *d = &dm->vm[v];
		struct snap_call sc = { d, &d->st };

		vq_fw_dev_call(d->fwd, 0, snap_worker, &sc);
		stats_add(&p->s, &d->st.s);
		p->c.kicks += d->st.c.kicks;
		p->c.calls += d->st.c.calls;
		p->kicks_missed += d->st.kicks_missed;
		p->calls_late += d->st.calls_late;
		p->conns += d->st.conns;
		for (unsigned i = 0; i < NQ; i++) {
			p->q[i].pkts += d->st.q[i].pkts;
			p->q[i].bytes += d->st.q[i].bytes;
			p->q[i].kicks += d->st.q[i].kicks;
			p->q[i].calls += d->st.q[i].calls;
		}
	}
	p->c.tx_pkts = p->s.tx_pkts;
	p->c.tx_bytes = p->s.tx_bytes;
	p->c.rx_pkts = p->s.rx_pkts;
	p->c.rx_bytes = p->s.rx_bytes;
}

static uint64_t bad_total(const struct vq_vsock_stats *s)
{
	return s->bad_short_buf + s->bad_len + s->bad_type + s->bad_op +
	       s->bad_addr + s->bad_credit + s->bad_rx_buf + s->bad_connect_line +
	       s->bad_seq;
}

/* --per-queue: a line (JSON: an object of "queues") per ring. */
static void queue_lines(const struct daemon *d, const struct snap *now,
			const struct snap *prev, double dt)
{
	if (d->com.json)
		printf(",\"queues\":[");
	for (unsigned i = 0; i < NQ; i++)
		vqd_queue_line(d->com.json, i == 0, i, qname[i], &now->q[i], &prev->q[i], dt);
	if (d->com.json)
		printf("]");
}

/* With several VMs: one line (JSON: an object of "vms") each, its
 * traffic over the line's interval and what its siblings did. */
static void vm_lines(struct daemon *dm, double dt, bool final)
{
	if (dm->nvm < 2)
		return;
	if (dm->com.json)
		printf(",\"vms\":[");
	for (unsigned v = 0; v < dm->nvm; v++) {
		const struct vm *d = &dm->vm[v];
		const struct vq_vsock_stats *s = &d->st.s;
		uint64_t *prev = dm->vm_prev[v];
		double tx = (double)(s->tx_bytes - (final ? 0 : prev[0])) * 8 / dt / 1e9;
		double rx = (double)(s->rx_bytes - (final ? 0 : prev[1])) * 8 / dt / 1e9;

		if (dm->com.json)
			printf("%s{\"cid\":%" PRIu64 ",\"tx_bytes\":%" PRIu64 ",\"rx_bytes\":%"
			       PRIu64 ",\"tx_gbps\":%.4f,\"rx_gbps\":%.4f,\"conns\":%u"
			       ",\"sibling_conns\":%" PRIu64 ",\"cid_unknown\":%" PRIu64
			       ",\"cid_refused\":%" PRIu64 ",\"policy_refused\":%" PRIu64 "}",
			       v ? "," : "", d->o->cid, s->tx_bytes, s->rx_bytes, tx, rx,
			       d->st.conns, s->sibling_conns, s->cid_unknown, s->cid_refused,
			       s->policy_refused);
		else
			printf("  vm cid %" PRIu64 " tx %.3f Gbit/s rx %.3f Gbit/s  conns %u"
			       "  siblings %" PRIu64 "  refused cid %" PRIu64 " group %" PRIu64
			       " policy %" PRIu64 "\n", d->o->cid, tx, rx, d->st.conns,
			       s->sibling_conns, s->cid_unknown, s->cid_refused,
			       s->policy_refused);
		prev[0] = s->tx_bytes;
		prev[1] = s->rx_bytes;
	}
	if (dm->com.json)
		printf("]");
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
		       ",\"pkts_held\":%" PRIu64 ",\"credit_requests_sent\":%" PRIu64
		       ",\"kicks_missed\":%" PRIu64 ",\"calls_late\":%" PRIu64
		       ",\"errors\":{\"short_buf\":%" PRIu64 ",\"bad_len\":%" PRIu64
		       ",\"bad_type\":%" PRIu64 ",\"bad_op\":%" PRIu64 ",\"bad_addr\":%" PRIu64
		       ",\"bad_credit\":%" PRIu64 ",\"bad_rx_buf\":%" PRIu64
		       ",\"no_listener\":%" PRIu64 ",\"conn_limit\":%" PRIu64
		       ",\"bad_connect_line\":%" PRIu64 ",\"bad_seq\":%" PRIu64
		       ",\"host_msg_too_big\":%" PRIu64 "}",
		       now->conns, s->conns_opened, s->conns_closed,
		       s->rst_sent, s->rst_recv, s->credit_updates_sent, s->host_stalls,
		       s->host_msg_deferred, s->pkts_held, s->credit_requests_sent,
		       now->kicks_missed, now->calls_late,
		       s->bad_short_buf, s->bad_len, s->bad_type, s->bad_op, s->bad_addr,
		       s->bad_credit, s->bad_rx_buf, s->no_listener, s->conn_limit,
		       s->bad_connect_line, s->bad_seq, s->host_msg_too_big);
		printf(",\"policy_refused\":%" PRIu64 ",\"sibling_conns\":%" PRIu64
		       ",\"cid_unknown\":%" PRIu64 ",\"cid_refused\":%" PRIu64,
		       s->policy_refused, s->sibling_conns, s->cid_unknown, s->cid_refused);
		if (final)
			vqd_json_backend(d->vm[0].b);
		if (d->com.per_queue)
			queue_lines(d, now, prev, dt);
		vm_lines(d, dt, final);
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
		if (s->policy_refused)
			printf("  refused by policy %" PRIu64, s->policy_refused);
		if (s->sibling_conns || s->cid_unknown || s->cid_refused)
			printf("  siblings %" PRIu64 " (refused: unknown cid %" PRIu64
			       ", no shared group %" PRIu64 ")", s->sibling_conns,
			       s->cid_unknown, s->cid_refused);
		if (final)
			printf("\nsummary tx %" PRIu64 " packets %" PRIu64 " bytes, rx %" PRIu64
			       " packets %" PRIu64 " bytes, %" PRIu64 " rx flushes, "
			       "%" PRIu64 " connection%s, %" PRIu64 " RST sent",
			       s->tx_pkts, s->tx_bytes, s->rx_pkts, s->rx_bytes,
			       s->rx_flushes, s->conns_opened, s->conns_opened == 1 ? "" : "s",
			       s->rst_sent);
		printf("\n");
		if (d->com.per_queue)
			queue_lines(d, now, prev, dt);
		vm_lines(d, dt, final);
	}
	fflush(stdout);
	*prev = *now;
}

static uint64_t offered_features(const struct daemon *d)
{
	/* Streams are implied (no NO_IMPLIED_STREAM, 5.10.3: Linux 6.1 does
	 * not know it); SEQPACKET adds message sockets. */
	return vqd_features(&d->com, VQ_BIT(VQ_F_VERSION_1) |
			    VQ_BIT(VQ_F_RING_PACKED) |
			    VQ_BIT(VQ_F_IN_ORDER) | VQ_BIT(VQ_F_EVENT_IDX) |
			    VQ_BIT(VQ_F_INDIRECT_DESC) |
			    (d->o.no_seqpacket ? 0 : VQ_BIT(VQ_VSOCK_F_SEQPACKET)));
}

/* A listening socket at path for the device's host side. */
static int host_listener(struct vm *d, struct vqd_ctl *ctl, const char *opt,
			 const char *path, int type)
{
	struct vq_unix_listener *l;
	int fd = vqd_listen(ctl, opt, path, type, &l), r;

	if (fd < 0)
		return fd;
	r = vq_vsock_set_listener(d->vs, fd);
	if (r < 0) {
		fprintf(stderr, "virtq-vsock: cannot take host connections on %s: %s\n",
			path, strerror(-r));
		return r;
	}
	vq_unix_listener_release_fd(l);        /* the device's now */
	return 0;
}

/* The host side: HOST_PATH for streams and, unless --no-seqpacket,
 * HOST_PATH.seqpacket for seqpacket connections, and HOST_PATH_seqpacket,
 * the name Cloud Hypervisor's seqpacket proposal gives it, as well. */
static int host_listen(struct vm *d, struct vqd_ctl *ctl)
{
	char seq[sizeof(((struct sockaddr_un *)0)->sun_path)];
	const char *opt = d->dm->nvm > 1 || d->dm->o.sockets_per_vm ? d->o->where :
			  "--uds-path";
	int r = host_listener(d, ctl, opt, d->o->uds, SOCK_STREAM);

	if (r < 0 || d->dm->o.no_seqpacket)
		return r;
	/* options.c checked that they fit */
	snprintf(seq, sizeof(seq), "%s" VSOCK_SEQ_SUFFIX, d->o->uds);
	r = host_listener(d, ctl, opt, seq, SOCK_SEQPACKET);
	if (r < 0)
		return r;
	snprintf(seq, sizeof(seq), "%s" VSOCK_SEQ_ALIAS, d->o->uds);
	return host_listener(d, ctl, opt, seq, SOCK_SEQPACKET);
}

/* VM d: its device on the framework, in the hub. */
static int vm_new(struct daemon *dm, struct vm *d, const struct vsock_vm *o)
{
	struct vq_vsock_config vc = {
		.guest_cid = o->cid, .buf_alloc = o->buf_alloc,
		.max_conns = dm->o.max_conns,
		/* 0: one flush per burst, whatever its size */
		.used_batch = dm->com.used_batch ? dm->com.used_batch : UINT32_MAX,
		.host_connect = host_connect, .notify = dev_notify, .arg = d,
		.host_request = host_request,
	};
	struct vq_fw_device dev = {
		.name = "virtq-vsock", .features = offered_features(dm),
		.nqueues = NQ, .config_len = sizeof(struct vq_vsock_config_space),
		.group_size = NQ, .ops = &vsock_ops, .opaque = d,
	};
	int r;

	d->dm = dm;
	d->o = o;
	d->com = &dm->com;
	if (dm->nvm > 1)
		snprintf(d->tag, sizeof(d->tag), "CID %" PRIu64 ": ", o->cid);
	r = vq_vsock_new(&vc, &d->vs);
	if (r == 0)
		r = vq_vsock_hub_join(dm->hub, d->vs, o->groups);
	if (r == 0)
		r = vq_fw_dev_new(dm->fw, &dev, &d->fwd);
	if (r < 0) {
		fprintf(stderr, "virtq-vsock: %s%s\n", d->tag, strerror(-r));
		return r;
	}
	for (unsigned i = 0; i < NQ; i++)
		d->q[i] = (struct ring){ .d = d, .index = i, .fr = vq_fw_dev_ring(d->fwd, i) };
	d->b = vq_fw_dev_backend(d->fwd);
	return 0;
}

/* The framework, the hub, and every VM's device, host side and socket. */
static int daemon_new(struct daemon *dm, struct vqd_ctl *ctl)
{
	struct vq_fw_config fc = {
		.threads = dm->o.threads ? dm->o.threads : 1,
		.cpus = dm->o.cpus, .ncpus = dm->o.ncpus,
	};
	int r;

	vqd_poll_config(&dm->com, &fc);
	r = vq_fw_new(&fc, &dm->fw);
	if (r == 0)
		r = vq_vsock_hub_new(&dm->hub);
	if (r < 0) {
		fprintf(stderr, "virtq-vsock: %s\n", strerror(-r));
		return r;
	}
	dm->nvm = dm->o.nvm;
	for (unsigned i = 0; i < dm->nvm; i++) {
		struct vm *d = &dm->vm[i];

		r = vm_new(dm, d, &dm->o.vm[i]);
		/* The vhost-user socket last: a front-end that sees it finds
		 * the host side ready. */
		if (r == 0)
			r = host_listen(d, ctl);
		if (r < 0)
			return r;
		vq_fw_dev_call(d->fwd, 0, host_on_loop, d);
		dm->sock[i] = (struct vqd_sock){
			.b = d->b, .path = d->o->socket, .fd = d->o->socket ? -1 : dm->com.fd,
			.opt = dm->o.sockets_per_vm ? d->o->where : "--socket-path",
		};
	}
	ctl->socks = dm->sock;
	ctl->nsocks = dm->nvm;
	return 0;
}

static void daemon_free(struct daemon *dm, struct vqd_ctl *ctl)
{
	/* every VM off its worker first: no sibling's turn can then reach
	 * a device being freed */
	for (unsigned i = 0; i < dm->nvm; i++)
		if (dm->vm[i].fwd)
			vq_fw_dev_call(dm->vm[i].fwd, 0, host_off_loop, &dm->vm[i]);
	for (unsigned i = 0; i < dm->nvm; i++) {
		/* the device owns the back-end: freeing it resets the device */
		vq_fw_dev_free(dm->vm[i].fwd);
		dm->sock[i].b = NULL;
	}
	ctl->b = NULL;
	vqd_close(ctl);
	vq_fw_free(dm->fw);
	for (unsigned i = 0; i < dm->nvm; i++)
		vq_vsock_free(dm->vm[i].vs);
	vq_vsock_hub_free(dm->hub);
}

int main(int argc, char **argv)
{
	static struct daemon d;
	struct vqd_ctl ctl = { .o = &d.com, .stats = stats_line, .arg = &d };
	char fb[256], pb[64];
	int rc = 1;

	ctl.cli = vsock_parse(argc, argv, &d.o, &d.com);
	vqd_log_to_stderr(d.com.quiet);
	if (daemon_new(&d, &ctl) < 0)
		goto out;
	if (vqd_open(&ctl) < 0)
		goto out;
	if (!d.com.quiet)
		for (unsigned i = 0; i < d.nvm; i++)
			fprintf(stderr, "virtq-vsock: guest CID %" PRIu64 ", host side %s, "
				"used batch %u, %s, features offered %s\n",
				d.vm[i].o->cid, d.vm[i].o->uds, d.com.used_batch,
				vqd_poll_str(pb, sizeof(pb), &d.com),
				vqd_features_str(fb, sizeof(fb), offered_features(&d),
						 vsock_features));
	rc = vqd_run(&ctl);
	vqd_summary(&ctl);
out:
	daemon_free(&d, &ctl);
	return rc;
}
