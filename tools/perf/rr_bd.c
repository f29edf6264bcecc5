// SPDX-License-Identifier: MIT
/* virtq-perf net rr --rr-breakdown: the marks of each transaction into
 * steps, the costs of a poll's pieces, and the report (rr_bd.h). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <virtq/ring.h>
#include <virtq/runtime.h>

#include "rr_bd.h"

#define RR_BD_CAP (1u << 20)
#define COST_ITERS 20000u

static const char *const step_key[RS_N] = {
	"fill", "post", "book", "wait", "data", "used", "rx", "total",
	"spins", "reap_polls",
};

static const char *const step_what[RS_N] = {
	"reserve a TX slot, write the frame",
	"publish it, kick if the ring says so",
	"post -> buffers given back, TX slots taken",
	"post -> the RX used entry seen",
	"  post -> the answer's bytes seen in its buffer",
	"  those bytes -> the RX used entry seen",
	"take the frame",
	"one transaction",
	"looks at the ring while waiting (spins)",
	"TX reaps that found no slot",
};

struct rr_bd *rr_bd_new(unsigned qsize, uint32_t seq_off)
{
	struct rr_bd *b = calloc(1, sizeof(*b));
	unsigned i;

	if (!b)
		return NULL;
	b->cap = RR_BD_CAP;
	b->seq_off = seq_off;
	b->fifo_size = 2 * qsize;
	b->fifo = calloc(b->fifo_size, sizeof(*b->fifo));
	for (i = 0; i < RS_N; i++)
		if (!(b->v[i] = malloc(sizeof(uint32_t) * b->cap)))
			break;
	if (!b->fifo || i < RS_N) {
		rr_bd_free(b);
		return NULL;
	}
	b->start = perf_tsc_mark();
	return b;
}

void rr_bd_free(struct rr_bd *b)
{
	if (!b)
		return;
	for (unsigned i = 0; i < RS_N; i++)
		free(b->v[i]);
	free(b->fifo);
	free(b);
}

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Units per call of what the library's busy poll does per spin (a pause,
 * a look at the ring; a clock read every few spins) and of the look at
 * the fds a device loop with fds epoll alone can tell about takes between
 * spins (epoll_wait without sleeping). */
void rr_bd_costs(struct rr_bd *b, struct vq_drv *rxq)
{
	volatile uint64_t sink = 0;
	struct epoll_event ev = { .events = EPOLLIN };
	uint64_t t;
	unsigned i;
	int ep, efd;

	t = perf_tsc();
	for (i = 0; i < COST_ITERS; i++)
		sink += vq_rt_now_ns();
	b->cost_clock = (double)(perf_tsc() - t) / COST_ITERS;
	t = perf_tsc();
	for (i = 0; i < COST_ITERS; i++)
		sink += perf_tsc();
	b->cost_tsc = (double)(perf_tsc() - t) / COST_ITERS;
	t = perf_tsc();
	for (i = 0; i < COST_ITERS; i++)
		relax();
	b->cost_pause = (double)(perf_tsc() - t) / COST_ITERS;
	t = perf_tsc();
	for (i = 0; i < COST_ITERS; i++)
		sink += vq_drv_has_used(rxq);
	b->cost_has_used = (double)(perf_tsc() - t) / COST_ITERS;
	b->cost_epoll = NAN;
	ep = epoll_create1(EPOLL_CLOEXEC);
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ep >= 0 && efd >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev) == 0) {
		t = perf_tsc();
		for (i = 0; i < COST_ITERS / 10; i++)
			sink += (uint64_t)epoll_wait(ep, &ev, 1, 0);
		b->cost_epoll = (double)(perf_tsc() - t) / (COST_ITERS / 10);
	}
	if (efd >= 0)
		close(efd);
	if (ep >= 0)
		close(ep);
	(void)sink;
}

void rr_bd_begin(struct rr_bd *b, uint32_t seq)
{
	b->spins = b->reaps = 0;
	b->t_data = 0;
	b->watch = NULL;
	b->predicted = NULL;
	if (!b->seq_off || !b->depth || b->got < b->depth)
		return;
	b->predicted = b->fifo[(b->got - b->depth) % b->fifo_size];
	b->watch = b->predicted + b->seq_off;
	memcpy(b->want, &seq, 4);
}

void rr_bd_frame(struct rr_bd *b, uint8_t *data, bool answer)
{
	/* The device takes the buffers in the order they were posted, and
	 * they are posted again in the order they come back: once the first
	 * one comes round again, the order repeats every depth frames. */
	if (!b->depth && b->got && data == b->fifo[0])
		b->depth = (unsigned)b->got;
	if (answer && b->predicted && data != b->predicted) {
		b->mispredicted++;
		b->t_data = 0;
	}
	b->fifo[b->got % b->fifo_size] = data;
	b->got++;
}

static void keep(struct rr_bd *b, enum rr_step s, uint64_t v)
{
	if (b->n[s] < b->cap)
		b->v[s][b->n[s]++] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

void rr_bd_end(struct rr_bd *b, bool record, uint64_t kicks, uint64_t wakeups)
{
	uint64_t end = perf_tsc();

	uint64_t dk = kicks - b->kicks0, dw = wakeups - b->wakeups0;

	b->watch = NULL;
	b->kicks0 = kicks;
	b->wakeups0 = wakeups;
	if (!record)
		return;
	b->kicks += dk;
	b->wakeups += dw;
	b->recorded++;
	keep(b, RS_FILL, b->t_filled - b->t_start);
	keep(b, RS_POST, b->t_posted - b->t_filled);
	keep(b, RS_BOOK, b->t_booked - b->t_posted);
	keep(b, RS_WAIT, b->t_used - b->t_posted);
	if (b->t_data && b->t_data <= b->t_used) {
		keep(b, RS_DATA, b->t_data - b->t_posted);
		keep(b, RS_USED, b->t_used - b->t_data);
	} else if (b->predicted) {
		b->unseen++;
	}
	keep(b, RS_RX, end - b->t_used);
	keep(b, RS_TOTAL, end - b->t_start);
	keep(b, RS_SPINS, b->spins);
	keep(b, RS_REAPS, b->reaps);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

struct step_stat {
	double p50, p99, mean;
};

static struct step_stat step_stat(struct rr_bd *b, enum rr_step s)
{
	struct step_stat st = { NAN, NAN, NAN };
	uint64_t n = b->n[s], i;
	double sum = 0;

	if (!n)
		return st;
	qsort(b->v[s], n, sizeof(uint32_t), cmp_u32);
	for (i = 0; i < n; i++)
		sum += b->v[s][i];
	st.p50 = b->v[s][(n - 1) / 2];
	st.p99 = b->v[s][(uint64_t)ceil(0.99 * (double)n) - 1];
	st.mean = sum / (double)n;
	return st;
}

/* Counter units per second, measured once, after the run. */
static double tsc_hz(struct rr_bd *b)
{
	if (!b->hz)
		b->hz = perf_tsc_hz_since(b->start);
	return b->hz;
}

void rr_bd_report(FILE *f, struct rr_bd *b)
{
	double hz = tsc_hz(b), r = b->recorded ? (double)b->recorded : 1;

	fprintf(f, "rr breakdown: %" PRIu64 " transactions, %s at %.3f GHz; "
		"p50 p99 mean:\n", b->recorded, PERF_TSC_NAME, hz / 1e9);
	for (unsigned s = 0; s < RS_N; s++) {
		struct step_stat st = step_stat(b, (enum rr_step)s);

		if (s == RS_SPINS)
			fprintf(f, "  per transaction (counts):\n");
		/* data and used need a spin that saw the bytes: none when
		 * every wait slept */
		if (!b->n[s])
			fprintf(f, "  %-12s %-48s %7s %7s %8s\n", step_key[s], step_what[s],
				"-", "-", "-");
		else
			fprintf(f, "  %-12s %-48s %7.0f %7.0f %8.1f\n", step_key[s],
				step_what[s], st.p50, st.p99, st.mean);
	}
	fprintf(f, "  kicks %.4f, sleeps %.4f per transaction; answer's buffer "
		"predicted %" PRIu64 " times wrong, bytes unseen before the entry %"
		PRIu64 "\n", (double)b->kicks / r, (double)b->wakeups / r,
		b->mispredicted, b->unseen);
	fprintf(f, "  one call, in %s: clock read %.1f, counter read %.1f, pause %.1f, "
		"ring look %.1f, epoll_wait(0) %.1f\n", PERF_TSC_NAME, b->cost_clock,
		b->cost_tsc, b->cost_pause, b->cost_has_used, b->cost_epoll);
}

static void json_num(FILE *f, double v)
{
	if (isnan(v))
		fputs("null", f);
	else
		fprintf(f, "%.1f", v);
}

void rr_bd_json(FILE *f, struct rr_bd *b)
{
	double r = b->recorded ? (double)b->recorded : 1;

	fprintf(f, ",\"breakdown\":{\"unit\":\"%s\",\"unit_hz\":",
		PERF_TSC_NAME[0] == 'T' ? "tsc" : "ns");
	json_num(f, tsc_hz(b));
	fprintf(f, ",\"transactions\":%" PRIu64, b->recorded);
	for (unsigned s = 0; s < RS_N; s++) {
		struct step_stat st = step_stat(b, (enum rr_step)s);

		fprintf(f, ",\"%s\":{\"n\":%" PRIu64 ",\"p50\":", step_key[s], b->n[s]);
		json_num(f, st.p50);
		fputs(",\"p99\":", f);
		json_num(f, st.p99);
		fputs(",\"mean\":", f);
		json_num(f, st.mean);
		fputc('}', f);
	}
	fprintf(f, ",\"kicks_per_rt\":%.4f,\"sleeps_per_rt\":%.4f,\"mispredicted\":%" PRIu64
		",\"unseen\":%" PRIu64 ",\"cost\":{\"clock_read\":", (double)b->kicks / r,
		(double)b->wakeups / r, b->mispredicted, b->unseen);
	json_num(f, b->cost_clock);
	fputs(",\"counter_read\":", f);
	json_num(f, b->cost_tsc);
	fputs(",\"pause\":", f);
	json_num(f, b->cost_pause);
	fputs(",\"ring_look\":", f);
	json_num(f, b->cost_has_used);
	fputs(",\"epoll_wait0\":", f);
	json_num(f, b->cost_epoll);
	fputs("}}", f);
}
