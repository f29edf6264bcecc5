// SPDX-License-Identifier: MIT
/*
 * virtq-perf ring: the two-thread ring benchmark (the shape of the kernel's
 * tools/virtio/ringtest).  A driver thread on one CPU posts buffers in
 * bursts and reaps them; a device thread on another runs the runtime loop
 * over the queue, popping bursts and publishing used entries every
 * --used-batch fills (0: once per pop burst).  Either side that runs out
 * of work busy polls for --busy-poll us, then sleeps on its eventfd; kicks
 * and calls are sent only when the ring's suppression logic asks for them.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf.h"

#define GPA_BASE   0x40000000ull
#define MAX_BURST  256

struct bench {
	const struct ring_opts *o;
	uint8_t *mem;
	uint64_t mem_size;
	struct vq_mem *map;
	struct vq_drv *drv;
	struct vq_dev *dev;
	uint64_t bufs_gpa;
	uint32_t stride;
	uint32_t seg_len;
	int kick_fd, call_fd;
	struct vq_rt_loop *loop;
	struct vq_rt_queue *q;
	uint8_t *scratch;               /* the device's side of the copy */
	int go;                         /* atomic: start line */
	int dev_err;
	int drv_err;
	uint64_t t0, t1;
	uint64_t done;
	struct vq_rt_counters drv_cnt;
};

/* ---- device side ---- */

static void copy_payload(struct bench *b, const struct vq_chain *c)
{
	uint32_t left = b->o->size;
	uint32_t i, first = b->o->rx ? c->nout : 0;
	uint32_t end = b->o->rx ? c->nout + c->nin : c->nout;
	uint8_t *s = b->scratch;

	for (i = first; i < end && left; i++) {
		size_t n = c->iov[i].iov_len < left ? c->iov[i].iov_len : left;

		if (b->o->rx)
			memcpy(c->iov[i].iov_base, s, n);
		else
			memcpy(s, c->iov[i].iov_base, n);
		s += n;
		left -= (uint32_t)n;
	}
}

static int dev_process(struct vq_rt_queue *q, void *arg,
		       const struct vq_rt_budget *bud, uint64_t *bytes)
{
	struct bench *b = arg;
	struct iovec iov[MAX_BURST * 2];
	struct vq_chain c[MAX_BURST];
	unsigned done = 0, staged = 0, i, want;
	unsigned ub = b->o->used_batch;
	int n, r;

	for (i = 0; i < b->o->burst; i++) {
		c[i].iov = &iov[2 * i];
		c[i].iov_max = 2;
	}
	while (!vq_rt_budget_spent(bud, done + staged, *bytes)) {
		want = bud->pkts - (done + staged);
		if (want > b->o->burst)
			want = b->o->burst;
		n = vq_dev_pop_burst(b->dev, c, want);
		if (n < 0)
			return n;
		if (n == 0)
			break;
		for (i = 0; i < (unsigned)n; i++) {
			uint32_t len = 0;

			if (b->o->size) {
				copy_payload(b, &c[i]);
				if (b->o->rx)
					len = (uint32_t)(c[i].in_len < b->o->size ?
							 c[i].in_len : b->o->size);
			}
			*bytes += b->o->rx ? len : c[i].out_len;
			if (ub == 1) {
				/* the slow path we measure against: one
				 * used entry published on its own */
				r = vq_dev_push(b->dev, &c[i], len);
				if (r < 0)
					return r;
				done++;
				r = vq_rt_queue_signal(q);
				if (r < 0)
					return r;
				continue;
			}
			r = vq_dev_fill(b->dev, &c[i], len);
			if (r < 0)
				return r;
			/* every ub fills; ub 0: at the end of each pop */
			if (++staged < ub || (!ub && i + 1 < (unsigned)n))
				continue;
			r = vq_dev_flush(b->dev);
			if (r < 0)
				return r;
			done += staged;
			staged = 0;
			r = vq_rt_queue_signal(q);
			if (r < 0)
				return r;
		}
	}
	if (staged) {
		/* the loop signals after the turn */
		r = vq_dev_flush(b->dev);
		if (r < 0)
			return r;
		done += staged;
	}
	return (int)done;
}

static void *dev_thread(void *arg)
{
	struct bench *b = arg;

	b->dev_err = vq_rt_loop_run(b->loop);
	if (b->dev_err < 0) {
		/* wake the driver so it sees the failure */
		vq_evt_signal(b->call_fd);
	}
	return NULL;
}

/* ---- driver side ---- */

static bool drv_other(void *arg)
{
	struct bench *b = arg;

	return __atomic_load_n(&b->dev_err, __ATOMIC_RELAXED) != 0;
}

static void *drv_thread(void *arg)
{
	struct bench *b = arg;
	const struct ring_opts *o = b->o;
	unsigned num = o->queue_size;
	uint32_t *freel = malloc(num * sizeof(*freel));
	unsigned nfree = num, i;
	uint64_t posted = 0, deadline;
	bool stopping = false;
	void *tok[MAX_BURST];
	uint32_t len[MAX_BURST];
	struct vq_seg seg[MAX_BURST];
	struct vq_rt_drv_wait w = {
		.call_fd = b->call_fd, .busy_poll_ns = o->busy_poll_us * 1000,
		.other = drv_other, .arg = b,
	};
	int r;

	if (!freel) {
		b->drv_err = -ENOMEM;
		return NULL;
	}
	for (i = 0; i < num; i++)
		freel[i] = num - 1 - i;
	vq_drv_disable_cb(b->drv);
	__atomic_store_n(&b->go, 1, __ATOMIC_RELEASE);
	b->t0 = vq_rt_now_ns();
	deadline = b->t0 + (uint64_t)(o->seconds * 1e9);
	for (;;) {
		unsigned added = 0;
		int n;

		if (!stopping) {
			if (o->ops ? posted >= o->ops : vq_rt_now_ns() >= deadline)
				stopping = true;
		}
		if (!stopping) {
			unsigned want = nfree < o->burst ? nfree : o->burst;

			if (o->ops && want > o->ops - posted)
				want = (unsigned)(o->ops - posted);
			for (i = 0; i < want; i++) {
				uint32_t idx = freel[nfree - 1 - i];

				seg[i] = (struct vq_seg){ b->bufs_gpa + (uint64_t)idx * b->stride,
							  b->seg_len };
				tok[i] = (void *)(uintptr_t)(idx + 1);
			}
			r = want ? vq_drv_add_burst(b->drv, seg, tok, want, o->rx) : 0;
			if (r < 0)
				goto fail;
			added = (unsigned)r;
			nfree -= added;
			posted += added;
		}
		if (added) {
			r = vq_rt_drv_kick(b->drv, b->kick_fd, &b->drv_cnt);
			if (r < 0)
				goto fail;
		}
		n = vq_drv_get_burst(b->drv, tok, len, o->burst);
		if (n < 0) {
			r = n;
			goto fail;
		}
		for (i = 0; i < (unsigned)n; i++)
			freel[nfree++] = (uint32_t)((uintptr_t)tok[i] - 1);
		b->done += (unsigned)n;
		b->drv_cnt.packets += (unsigned)n;
		if (stopping && nfree == num)
			break;
		if (n == 0 && (nfree == 0 || stopping || added == 0)) {
			r = vq_rt_drv_wait_used(b->drv, &w, 1000, &b->drv_cnt);
			if (r < 0)
				goto fail;
			if (__atomic_load_n(&b->dev_err, __ATOMIC_RELAXED)) {
				r = b->dev_err;
				goto fail;
			}
		}
	}
	b->t1 = vq_rt_now_ns();
	free(freel);
	return NULL;
fail:
	b->t1 = vq_rt_now_ns();
	b->drv_err = r;
	free(freel);
	return NULL;
}

/* ---- setup ---- */

static int start_pinned(pthread_t *t, int cpu, void *(*fn)(void *), void *arg)
{
	pthread_attr_t at;
	cpu_set_t s;
	int r;

	pthread_attr_init(&at);
	if (cpu >= 0) {
		CPU_ZERO(&s);
		CPU_SET(cpu, &s);
		pthread_attr_setaffinity_np(&at, sizeof(s), &s);
	}
	r = pthread_create(t, &at, fn, arg);
	pthread_attr_destroy(&at);
	return -r;
}

static int bench_setup(struct bench *b, const struct ring_opts *o)
{
	uint64_t features = VQ_BIT(VQ_F_VERSION_1);
	uint64_t off[3], ring_size, ring_gpa;
	struct vq_mem_region reg;
	struct vq_ring_addr ra;
	int r;

	if (o->packed)
		features |= VQ_BIT(VQ_F_RING_PACKED);
	if (o->in_order)
		features |= VQ_BIT(VQ_F_IN_ORDER);
	if (o->event_idx)
		features |= VQ_BIT(VQ_F_EVENT_IDX);
	ring_size = vq_ring_layout(features, (uint16_t)o->queue_size, off);
	if (!ring_size || o->queue_size > 32768)
		return -EINVAL;
	b->o = o;
	b->seg_len = o->size ? o->size : 64;
	b->stride = (b->seg_len + 63) & ~63u;
	ring_gpa = GPA_BASE;
	b->bufs_gpa = GPA_BASE + ((ring_size + 4095) & ~4095ull);
	b->mem_size = (b->bufs_gpa - GPA_BASE) +
		      (uint64_t)b->stride * o->queue_size;
	b->mem_size = (b->mem_size + 4095) & ~4095ull;
	b->mem = aligned_alloc(4096, b->mem_size);
	b->scratch = malloc(o->size ? o->size : 1);
	if (!b->mem || !b->scratch)
		return -ENOMEM;
	memset(b->mem, 0, b->mem_size);
	memset(b->scratch, 0x5a, o->size ? o->size : 1);
	if (vq_mem_new(&b->map) < 0)
		return -ENOMEM;
	reg = (struct vq_mem_region){ .gpa = GPA_BASE, .size = b->mem_size,
				      .uaddr = (uintptr_t)b->mem, .hva = b->mem };
	r = vq_mem_add(b->map, &reg);
	if (r < 0)
		return r;
	ra.desc = b->mem + (ring_gpa - GPA_BASE) + off[0];
	ra.driver = b->mem + (ring_gpa - GPA_BASE) + off[1];
	ra.device = b->mem + (ring_gpa - GPA_BASE) + off[2];
	{
		struct vq_drv_config dc = { .features = features,
					    .num = (uint16_t)o->queue_size,
					    .ring = ra };
		struct vq_dev_config vc = { .features = features,
					    .num = (uint16_t)o->queue_size,
					    .ring = ra, .mem = b->map,
					    .avail_idx = o->packed ? 0x8000 : 0,
					    .used_idx = o->packed ? 0x8000 : 0 };

		r = vq_drv_new(&dc, &b->drv);
		if (r < 0)
			return r;
		r = vq_dev_new(&vc, &b->dev);
		if (r < 0)
			return r;
	}
	b->kick_fd = vq_evt_new();
	b->call_fd = vq_evt_new();
	if (b->kick_fd < 0 || b->call_fd < 0)
		return -EMFILE;
	{
		struct vq_rt_loop_config lc = { .busy_poll_ns = o->busy_poll_us * 1000 };
		struct vq_rt_queue_config qc = {
			.dev = b->dev, .kick_fd = b->kick_fd, .call_fd = b->call_fd,
			.process = dev_process, .arg = b,
		};

		r = vq_rt_loop_new(&lc, &b->loop);
		if (r < 0)
			return r;
		r = vq_rt_loop_add(b->loop, &qc, &b->q);
		if (r < 0)
			return r;
	}
	return 0;
}

static void bench_teardown(struct bench *b)
{
	vq_rt_loop_free(b->loop);
	if (b->kick_fd > 0)
		close(b->kick_fd);
	if (b->call_fd > 0)
		close(b->call_fd);
	vq_drv_free(b->drv);
	vq_dev_free(b->dev);
	vq_mem_free(b->map);
	free(b->mem);
	free(b->scratch);
}

static double probe(const struct ring_opts *o)
{
	double ns;

	if (!o->placement)
		return NAN;
	ns = perf_c2c_ns(o->cpu[0], o->cpu[1]);
	return ns < 0 ? NAN : ns;
}

int perf_ring_run(const struct ring_opts *o, struct ring_result *res)
{
	struct bench b = { .kick_fd = -1, .call_fd = -1 };
	pthread_t td, tv;
	int r;

	memset(res, 0, sizeof(*res));
	r = bench_setup(&b, o);
	if (r < 0) {
		bench_teardown(&b);
		return r;
	}
	res->c2c_before = probe(o);
	r = start_pinned(&tv, o->cpu[1], dev_thread, &b);
	if (r < 0)
		goto out;
	r = start_pinned(&td, o->cpu[0], drv_thread, &b);
	if (r < 0) {
		vq_rt_loop_stop(b.loop);
		pthread_join(tv, NULL);
		goto out;
	}
	pthread_join(td, NULL);
	vq_rt_loop_stop(b.loop);
	pthread_join(tv, NULL);
	res->c2c_after = probe(o);
	res->place = perf_place_classify(res->c2c_before, res->c2c_after);
	if (b.drv_err) {
		fprintf(stderr, "virtq-perf ring: driver: %s%s%s\n",
			strerror(-b.drv_err), vq_drv_error(b.drv) ? ": " : "",
			vq_drv_error(b.drv) ? vq_drv_error_msg(b.drv) : "");
		r = b.drv_err;
		goto out;
	}
	if (b.dev_err) {
		fprintf(stderr, "virtq-perf ring: device: %s%s%s\n",
			strerror(-b.dev_err), vq_dev_error(b.dev) ? ": " : "",
			vq_dev_error(b.dev) ? vq_dev_error_msg(b.dev) : "");
		r = b.dev_err;
		goto out;
	}
	res->ops = b.done;
	res->elapsed = (double)(b.t1 - b.t0) / 1e9;
	res->ops_per_sec = res->elapsed > 0 ? (double)res->ops / res->elapsed : 0;
	res->drv = b.drv_cnt;
	res->dev = *vq_rt_queue_counters(b.q);
out:
	bench_teardown(&b);
	return r;
}

/* ---- command line ---- */

static void ring_usage(FILE *f)
{
	fprintf(f,
"usage: virtq-perf ring [options]\n"
"  --layout split|packed   ring layout (split)\n"
"  --in-order on|off       VIRTIO_F_IN_ORDER (off)\n"
"  --event-idx on|off      VIRTIO_F_EVENT_IDX (on)\n"
"  --used-batch N          the device publishes used entries every N; 1 =\n"
"                          each on its own, 0 = once per pop burst (32)\n"
"  --burst N               buffers per driver add burst / device pop, at\n"
"                          most the queue size (32)\n"
"  --busy-poll USEC        busy-poll window of both sides; 0 = sleep on\n"
"                          the eventfd when dry (0)\n"
"  --queue-size N          (256; split: a power of two)\n"
"  --size S[K|M]           payload bytes the device copies; 0 = none (0)\n"
"  --direction tx|rx       with --size: the device reads (tx) or writes (rx)\n"
"                          the payload (tx)\n"
"  --seconds T | --ops N   run length (2 s)\n"
"  --cpu A,B               driver and device CPUs (0,1)\n"
"  --placement on|off      probe core-to-core latency before/after (on)\n"
"  --json                  one JSON object on stdout\n"
"  --help, --version\n");
}

static void perf_ring_defaults(struct ring_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->event_idx = true;
	o->used_batch = 32;
	o->burst = 32;
	o->queue_size = 256;
	o->seconds = 2;
	o->cpu[0] = 0;
	o->cpu[1] = 1;
	o->placement = true;
}

enum { O_LAYOUT, O_INORDER, O_EIDX, O_UB, O_BURST, O_BP, O_QS, O_SIZE,
       O_DIR, O_SEC, O_OPS, O_CPU, O_PLACE, O_JSON };

static const struct option ring_long[] = {
	{ "layout", required_argument, 0, O_LAYOUT },
	{ "in-order", required_argument, 0, O_INORDER },
	{ "event-idx", required_argument, 0, O_EIDX },
	{ "used-batch", required_argument, 0, O_UB },
	{ "burst", required_argument, 0, O_BURST },
	{ "busy-poll", required_argument, 0, O_BP },
	{ "queue-size", required_argument, 0, O_QS },
	{ "size", required_argument, 0, O_SIZE },
	{ "direction", required_argument, 0, O_DIR },
	{ "seconds", required_argument, 0, O_SEC },
	{ "ops", required_argument, 0, O_OPS },
	{ "cpu", required_argument, 0, O_CPU },
	{ "placement", required_argument, 0, O_PLACE },
	{ "json", no_argument, 0, O_JSON },
	PERF_OPT_HELP, PERF_OPT_VERSION,
	{ 0, 0, 0, 0 },
};

static const char *const layouts[] = { "split", "packed", NULL };
static const char *const directions[] = { "tx", "rx", NULL };

/* What the options say together: refuse what conflicts or does nothing. */
static void ring_check(struct ring_opts *o, unsigned given)
{
	cpu_set_t allowed;

	if ((given & 1u << O_SEC) && (given & 1u << O_OPS))
		cli_usage_error("--seconds and --ops: give one run length");
	if ((given & 1u << O_DIR) && !o->size)
		cli_usage_error("--direction: without --size no payload moves");
	if (!vq_ring_num_valid(o->packed ? VQ_BIT(VQ_F_RING_PACKED) : 0,
			       o->queue_size))
		cli_usage_error("--queue-size: %u is not valid for the %s layout "
				"(split: a power of two)", o->queue_size,
				o->packed ? "packed" : "split");
	if (o->burst > o->queue_size) {
		if (given & 1u << O_BURST)
			cli_usage_error("--burst: %u is more than the queue size %u",
					o->burst, o->queue_size);
		o->burst = o->queue_size;
	}
	if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0 &&
	    (!CPU_ISSET(o->cpu[0], &allowed) || !CPU_ISSET(o->cpu[1], &allowed)))
		cli_usage_error("--cpu: CPUs %d,%d are not both available to this "
				"process", o->cpu[0], o->cpu[1]);
}

static void ring_option(void *opts, int c, const char *name, const char *v)
{
	struct ring_opts *o = opts;

	switch (c) {
	case O_LAYOUT: o->packed = cli_choice(name, v, layouts); break;
	case O_INORDER: o->in_order = cli_onoff(name, v); break;
	case O_EIDX: o->event_idx = cli_onoff(name, v); break;
	case O_PLACE: o->placement = cli_onoff(name, v); break;
	case O_UB: o->used_batch = (unsigned)cli_u64(name, v, 0, 65536); break;
	case O_BURST: o->burst = (unsigned)cli_u64(name, v, 1, MAX_BURST); break;
	case O_BP: o->busy_poll_us = cli_u64(name, v, 0, 10000000); break;
	case O_QS: o->queue_size = (unsigned)cli_u64(name, v, 1, 32768); break;
	case O_SIZE: o->size = (unsigned)cli_size(name, v, 0, 1u << 24); break;
	case O_DIR: o->rx = cli_choice(name, v, directions); break;
	case O_SEC: o->seconds = cli_double(name, v, 1e-3, 86400); break;
	case O_OPS: o->ops = cli_u64(name, v, 1, UINT64_MAX); break;
	case O_CPU: perf_cpu_pair(name, v, o->cpu, true); break;
	case O_JSON: o->json = true; break;
	}
}

static void ring_parse(int argc, char **argv, struct ring_opts *o)
{
	uint64_t given;

	perf_ring_defaults(o);
	given = perf_opts_parse(argc, argv, "ring", ":", ring_long, O_JSON + 1, ring_usage,
				ring_option, o);
	perf_opts_end(argc, argv);
	ring_check(o, (unsigned)given);
}

int perf_ring_main(int argc, char **argv)
{
	struct ring_opts o;
	struct ring_result res;
	int r;

	ring_parse(argc, argv, &o);
	r = perf_ring_run(&o, &res);
	if (r < 0) {
		fprintf(stderr, "virtq-perf ring: %s\n", strerror(-r));
		return 1;
	}
	if (o.json)
		perf_ring_json(stdout, &o, &res);
	else
		perf_ring_report(stdout, &o, &res);
	return 0;
}
