// SPDX-License-Identifier: MIT
/*
 * virtq-perf vsock --conns N: N streams at once, host -> guest (rx) or
 * guest -> host (tx), each checked byte for byte (its own byte count and
 * checksum; each stream's bytes differ from every other's, so bytes that
 * cross to another connection show too).  --bytes is shared among them.
 *
 * The receiver (the guest in rx, the host program in tx) times each
 * connection over the window in which all of them streamed: from the
 * moment the last one started to the moment the first one ended.  Their
 * rates there give the slowest against the fair share (the window's
 * total over N): how fair the device is.  The aggregate rate is end to
 * end, every byte from the senders' start to the last byte read, the
 * figure to set against one connection's.
 *
 * --stall K: the receiver reads nothing from K of the connections until
 * the others have ended (backpressure on K; the others must go on at
 * speed), then reads them to their end, checked as the others.
 *
 * Memory per idle connection: the backend's anonymous memory (RssAnon)
 * with the N connections open and idle, against none open.
 *
 * This file: the guest side, the receiver's bookkeeping, the senders'
 * chunks, the report; the host program is vsock_conns_host.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include <virtq/runtime.h>

#include "vsock_run.h"

/* Where stream i starts in the test pattern: far from every other. */
static uint64_t src_base(unsigned i)
{
	return (uint64_t)i << 40;
}

int vs_conns_prepare(struct vs_run *n)
{
	unsigned i, k = n->nends;

	n->flows.f = calloc(k, sizeof(*n->flows.f));
	n->src = calloc(k, sizeof(*n->src));
	if (!n->flows.f || !n->src)
		return -ENOMEM;
	n->flows.n = k;
	n->flows.stall = n->o.stall;
	for (i = 0; i < k; i++)
		n->src[i].total = n->o.seconds > 0 ? UINT64_MAX :
				  n->o.bytes / k + (i < n->o.bytes % k);
	return 0;
}

void vs_conns_free(struct vs_run *n)
{
	free(n->src);
	free(n->flows.f);
}

/* ---- the receiver's bookkeeping ---- */

void vs_flow_got(struct vs_run *n, unsigned i, const uint8_t *p, size_t k)
{
	struct vs_flows *fl = &n->flows;
	struct vs_flow *f = &fl->f[i];
	uint64_t now = vq_rt_now_ns();

	if (!f->started) {
		f->started = true;
		/* the last running one starts, none ended: the window opens */
		if (i >= fl->stall && ++fl->started == fl->n - fl->stall && !fl->t_close) {
			fl->t_open = now;
			for (unsigned j = fl->stall; j < fl->n; j++)
				fl->f[j].mark = fl->f[j].cs.off;
		}
	}
	vs_csum_add(&f->cs, p, k);
	fl->t_last = now;
}

void vs_flow_end(struct vs_run *n, unsigned i)
{
	struct vs_flows *fl = &n->flows;
	uint64_t now = vq_rt_now_ns();

	fl->f[i].done = true;
	fl->done++;
	fl->t_last = now;
	/* the first running one ends: the window closes */
	if (i >= fl->stall && fl->t_open && !fl->t_close) {
		fl->t_close = now;
		for (unsigned j = fl->stall; j < fl->n; j++)
			fl->f[j].win = fl->f[j].cs.off - fl->f[j].mark;
	}
}

bool vs_flow_paused(const struct vs_run *n, unsigned i)
{
	return i < n->flows.stall && !n->flows.resumed;
}

void vs_flow_resume(struct vs_run *n, const uint64_t *held)
{
	uint64_t most = 0;

	for (unsigned i = 0; i < n->flows.stall; i++) {
		uint64_t s = __atomic_load_n(&n->src[i].off, __ATOMIC_RELAXED);

		n->flows.f[i].held = held[i];
		most = s > most ? s : most;
	}
	n->stall_sent = most;
	n->flows.resumed = true;
}

/* ---- the senders ---- */

long vs_src_step(struct vs_run *n, unsigned i, uint64_t deadline, uint8_t *scratch,
		 uint32_t room,
		 long (*put)(void *ctx, unsigned i, const void *p, uint32_t len), void *ctx)
{
	struct vs_src *s = &n->src[i];
	uint64_t k = n->o.buf_size;
	long w;

	if (s->off == s->total || (deadline && vq_rt_now_ns() >= deadline)) {
		s->done = true;
		return 0;
	}
	if (k > s->total - s->off)
		k = s->total - s->off;
	if (k > room)
		k = room;
	if (!k)
		return 0;
	vs_stream_fill(scratch, src_base(i) + s->off, k);
	w = put(ctx, i, scratch, (uint32_t)k);
	if (w > 0) {
		vs_csum_add(&s->cs, scratch, (size_t)w);
		__atomic_store_n(&s->off, s->off + (uint64_t)w, __ATOMIC_RELAXED);
	}
	return w;
}

/* ---- the guest side ---- */

static long guest_put(void *ctx, unsigned i, const void *p, uint32_t len)
{
	struct vs_run *n = ctx;

	return n->x->write(&n->ends[i], p, len);
}

/* One turn of the guest's senders: each connection its next step, as
 * credit allows, starting at the one the last turn could not serve
 * (*start): starting at the first each time gave the first ones every
 * TX buffer the device freed, and the last ones none.  A connection
 * closes when its share went (*left counts the others).  0 or -errno. */
static int guest_send_turn(struct vs_run *n, uint64_t deadline, uint8_t *scratch,
			   unsigned *left, unsigned *start)
{
	int p = n->x->pump(n);
	bool moved = p > 0, blocked = false;
	unsigned i, k;

	if (p < 0)
		return p;
	for (k = 0; k < n->nends; k++) {
		struct vs_end *e;
		long w;

		i = (*start + k) % n->nends;
		e = &n->ends[i];
		if (n->src[i].done)
			continue;
		w = vs_src_step(n, i, deadline, scratch, n->x->room(e), guest_put, n);
		if (w < 0)
			return (int)w;
		moved |= w > 0;
		if (w == 0 && !n->src[i].done && !blocked) {
			blocked = true;
			*start = i;
		}
		if (n->src[i].done) {
			int f = vs_guest_finish(n, e);

			if (f < 0)
				return f;
			(*left)--;
			moved = true;
		}
	}
	if (moved)
		vs_guest_moved(n);
	else if ((p = vs_guest_idle(n, n->ends, n->nends)) < 0)
		return p;
	return 0;
}

/* tx: every connection's share, round robin as credit allows. */
static int guest_send_all(struct vs_run *n, uint64_t deadline)
{
	unsigned left = n->nends, start = 0;
	uint8_t *scratch = malloc(n->o.buf_size);
	int r = 0;

	if (!scratch)
		return -ENOMEM;
	while (left && r == 0)
		r = guest_send_turn(n, deadline, scratch, &left, &start);
	free(scratch);
	return r;
}

/* Bytes waiting on the stalled connections as they resume. */
static void guest_resume(struct vs_run *n)
{
	uint64_t held[VS_CONNS_MAX];

	for (unsigned i = 0; i < n->flows.stall; i++) {
		struct vs_end *e = &n->ends[i];
		int q = 0;

		if (e->c)
			held[i] = vq_vsg_readable(e->c);
		else
			held[i] = ioctl(e->fd, FIONREAD, &q) == 0 ? (uint64_t)q : 0;
	}
	vs_flow_resume(n, held);
}

/* One receive call on end i: 1 if it moved, 0, -errno. */
static int guest_recv_one(struct vs_run *n, unsigned i, uint8_t *buf)
{
	struct vs_end *e = &n->ends[i];
	bool eof = false;
	long k = n->x->read(e, buf, n->o.rcvbuf, &eof);

	if (k < 0)
		return (int)k;
	if (k > 0) {
		vs_flow_got(n, i, buf, (size_t)k);
		return 1;
	}
	if (!eof)
		return 0;
	vs_flow_end(n, i);
	k = vs_guest_finish(n, e);
	return k < 0 ? (int)k : 1;
}

/* rx: read every connection to its end, the stalled ones last. */
static int guest_recv_all(struct vs_run *n)
{
	struct vs_flows *fl = &n->flows;
	uint8_t *buf = malloc(n->o.rcvbuf);
	int r = 0;

	if (!buf)
		return -ENOMEM;
	while (fl->done < fl->n && r >= 0) {
		int p = n->x->pump(n);
		bool moved = p > 0;

		if (p < 0) {
			r = p;
			break;
		}
		if (fl->stall && !fl->resumed && fl->done == fl->n - fl->stall)
			guest_resume(n);
		for (unsigned i = 0; i < fl->n && r >= 0; i++) {
			if (fl->f[i].done || vs_flow_paused(n, i))
				continue;
			r = guest_recv_one(n, i, buf);
			moved |= r > 0;
		}
		if (r < 0)
			break;
		if (moved)
			vs_guest_moved(n);
		else
			r = vs_guest_idle(n, n->ends, n->nends);
	}
	n->t_last = fl->t_last;
	free(buf);
	return r < 0 ? r : 0;
}

/* Every connection closed both ways, or 5 s. */
static void guest_all_closed(struct vs_run *n)
{
	uint64_t end = vq_rt_now_ns() + 5000000000ull;

	for (unsigned i = 0; i < n->nends && vq_rt_now_ns() < end; i++)
		while (!n->x->closed(&n->ends[i]) && vq_rt_now_ns() < end)
			if (vs_guest_next(n, n->ends, n->nends, false) < 0)
				return;
}

int vs_conns_guest(struct vs_run *n)
{
	uint64_t deadline;
	int r = n->x->open(n);
	int64_t after = vs_backend_rss_anon(n);

	if (n->rss_before_kb >= 0 && after >= 0)
		n->rss_idle_kb = after - n->rss_before_kb;
	n->t_first = vq_rt_now_ns();
	deadline = n->o.seconds > 0 ? n->t_first + (uint64_t)(n->o.seconds * 1e9) : 0;
	__atomic_store_n(&n->go, 1, __ATOMIC_RELEASE);
	if (r == 0)
		r = n->o.rx ? guest_recv_all(n) : guest_send_all(n, deadline);
	if (r == 0)
		guest_all_closed(n);
	if (r < 0) {
		__atomic_store_n(&n->stop, 1, __ATOMIC_RELEASE);
		for (unsigned i = 0; i < n->nends; i++)
			n->x->abort(&n->ends[i]);
	}
	return r;
}

/* ---- the check and the report ---- */

struct stream_sum {
	uint64_t bytes, csum;
};

static int sum_cmp(const void *a, const void *b)
{
	const struct stream_sum *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? -1 : 1;
	return x->csum < y->csum ? -1 : x->csum > y->csum;
}

/* The received streams must be the sent ones, as a set: the receiver
 * does not know which sender a connection came from. */
bool vs_conns_verified(struct vs_run *n)
{
	unsigned i, k = n->nends;
	struct stream_sum *got = calloc(k, sizeof(*got)), *sent = calloc(k, sizeof(*sent));
	bool ok = got && sent;

	n->guest_bytes = n->guest_csum = 0;
	for (i = 0; ok && i < k; i++) {
		got[i] = (struct stream_sum){ n->flows.f[i].cs.off, vs_csum_final(&n->flows.f[i].cs) };
		sent[i] = (struct stream_sum){ n->src[i].off, vs_csum_final(&n->src[i].cs) };
		n->guest_bytes += got[i].bytes;
		n->guest_csum += got[i].csum;
	}
	if (ok) {
		qsort(got, k, sizeof(*got), sum_cmp);
		qsort(sent, k, sizeof(*sent), sum_cmp);
	}
	for (i = 0; ok && i < k; i++) {
		if (got[i].bytes == sent[i].bytes && got[i].csum == sent[i].csum)
			continue;
		fprintf(stderr, "virtq-perf vsock: transfer check failed: a stream of %" PRIu64
			" bytes (checksum %016" PRIx64 ") arrived where %" PRIu64
			" bytes (checksum %016" PRIx64 ") were sent\n",
			got[i].bytes, got[i].csum, sent[i].bytes, sent[i].csum);
		ok = false;
	}
	/* A guest receiver holds no more than the window it advertised. */
	for (i = 0; ok && n->o.rx && !n->o.unix_socket && i < n->flows.stall; i++) {
		if (n->flows.f[i].held <= n->o.rcvbuf)
			continue;
		fprintf(stderr, "virtq-perf vsock: stalled connection %u had %" PRIu64
			" bytes waiting, more than its window %u\n", i, n->flows.f[i].held,
			n->o.rcvbuf);
		ok = false;
	}
	free(got);
	free(sent);
	return ok;
}

/* The running connections' rates (bytes/s) over the window, or over the
 * whole run when no window formed; their min, max and the fair share. */
struct conns_rates {
	double secs;            /* the window */
	bool whole;             /* no window: the whole run */
	double min, max, fair;
	double total;           /* the running ones' rates summed */
};

static double flow_rate(const struct vs_run *n, unsigned i, const struct conns_rates *c)
{
	const struct vs_flow *f = &n->flows.f[i];

	return c->secs > 0 ? (double)(c->whole ? f->cs.off : f->win) / c->secs : 0;
}

static void conns_rates(const struct vs_run *n, struct conns_rates *c)
{
	const struct vs_flows *fl = &n->flows;
	double sum = 0;

	c->whole = !(fl->t_open && fl->t_close > fl->t_open);
	c->secs = c->whole ? (n->t_last > n->t_first ? (double)(n->t_last - n->t_first) / 1e9 : 0)
			   : (double)(fl->t_close - fl->t_open) / 1e9;
	c->min = INFINITY;
	c->max = 0;
	for (unsigned i = fl->stall; i < fl->n; i++) {
		double r = flow_rate(n, i, c);

		c->min = fmin(c->min, r);
		c->max = fmax(c->max, r);
		sum += r;
	}
	c->total = sum;
	c->fair = sum / (fl->n - fl->stall);
}

static uint64_t most_held(const struct vs_run *n)
{
	uint64_t most = 0;

	for (unsigned i = 0; i < n->flows.stall; i++)
		most = n->flows.f[i].held > most ? n->flows.f[i].held : most;
	return most;
}

void vs_conns_json(struct vs_run *n)
{
	struct conns_rates c;

	conns_rates(n, &c);
	printf(",\"conns\":%u,\"window_s\":%.6f,\"window\":\"%s\",\"window_gbps\":%.4f"
	       ",\"conn_gbps_min\":%.4f,\"conn_gbps_max\":%.4f,\"fair_gbps\":%.4f"
	       ",\"fairness\":%.4f",
	       n->nends, c.secs, c.whole ? "whole run" : "all streaming", c.total * 8 / 1e9,
	       c.min * 8 / 1e9, c.max * 8 / 1e9, c.fair * 8 / 1e9,
	       c.fair > 0 ? c.min / c.fair : 0);
	if (n->flows.stall)
		printf(",\"stall\":%u,\"stall_held\":%" PRIu64 ",\"stall_sent\":%" PRIu64,
		       n->flows.stall, most_held(n), n->stall_sent);
	if (n->rss_idle_kb >= 0)
		printf(",\"idle_rss_anon_kb\":%" PRId64 ",\"idle_kb_per_conn\":%.2f",
		       n->rss_idle_kb, (double)n->rss_idle_kb / n->nends);
	printf(",\"conn_gbps\":[");
	for (unsigned i = 0; i < n->nends; i++)
		printf("%s%.4f", i ? "," : "", flow_rate(n, i, &c) * 8 / 1e9);
	printf("]");
}

void vs_conns_text(struct vs_run *n)
{
	struct conns_rates c;
	unsigned i;

	conns_rates(n, &c);
	printf("  %u connections; over the %.3f s %s: per connection min %.3f max %.3f "
	       "Gbit/s, fair share %.3f, slowest/fair %.2f\n",
	       n->nends, c.secs, c.whole ? "of the whole run (no window formed)" :
	       "all streamed", c.min * 8 / 1e9, c.max * 8 / 1e9, c.fair * 8 / 1e9,
	       c.fair > 0 ? c.min / c.fair : 0);
	if (n->flows.stall)
		printf("  --stall %u: read nothing until the others ended; then up to %" PRIu64
		       " bytes waited at the receiver, up to %" PRIu64 " had been sent\n",
		       n->flows.stall, most_held(n), n->stall_sent);
	if (n->rss_idle_kb >= 0)
		printf("  idle connections: the backend's RssAnon grew %" PRId64 " kB for %u "
		       "(%.2f kB each)\n", n->rss_idle_kb, n->nends,
		       (double)n->rss_idle_kb / n->nends);
	printf("  per connection Gbit/s:");
	for (i = 0; i < n->nends; i++)
		printf("%s %.3f", i % 12 ? "" : "\n   ", flow_rate(n, i, &c) * 8 / 1e9);
	printf("\n");
}
