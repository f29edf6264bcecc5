// SPDX-License-Identifier: MIT
/*
 * The core-to-core placement probe: two threads pinned to the two CPUs pass
 * one cache line back and forth; half a round trip is the one-way latency.
 * On these VMs it tells a "near" vCPU placement (under PERF_NEAR_NS) from
 * a "far" one, which changes a cross-core ring benchmark several times
 * over (bench/METHOD.md, "Placement").
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

#define C2C_BATCHES 5
#define C2C_ITERS   1500
#define C2C_BATCH_MAX_NS 10000000ull

struct c2c {
	_Alignas(64) long line;         /* the cache line that moves */
	_Alignas(64) int ready;
	int cpu_a;
	double ns[C2C_BATCHES];
};

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Answer every odd value with the next even one; -1 ends. */
static void *pong(void *arg)
{
	struct c2c *c = arg;

	__atomic_store_n(&c->ready, 1, __ATOMIC_RELEASE);
	for (;;) {
		long v = __atomic_load_n(&c->line, __ATOMIC_ACQUIRE);

		if (v < 0)
			return NULL;
		if (v & 1)
			__atomic_store_n(&c->line, v + 1, __ATOMIC_RELEASE);
		else
			relax();
	}
}

static void *ping(void *arg)
{
	struct c2c *c = arg;
	long v = 0;
	int k, i;

	while (!__atomic_load_n(&c->ready, __ATOMIC_ACQUIRE))
		relax();
	for (k = 0; k < C2C_BATCHES; k++) {
		uint64_t t0 = vq_rt_now_ns(), t1 = t0;

		for (i = 0; i < C2C_ITERS; i++) {
			__atomic_store_n(&c->line, v + 1, __ATOMIC_RELEASE);
			v += 2;
			while (__atomic_load_n(&c->line, __ATOMIC_ACQUIRE) != v)
				;
			/* On a loaded machine the partner may be descheduled
			 * for a whole time slice: cap a batch at 10 ms so the
			 * probe stays short (the median ignores such a batch
			 * anyway when the others are clean). */
			if ((i & 63) == 63) {
				t1 = vq_rt_now_ns();
				if (t1 - t0 > C2C_BATCH_MAX_NS) {
					i++;
					break;
				}
			}
		}
		t1 = vq_rt_now_ns();
		c->ns[k] = (double)(t1 - t0) / i / 2;
	}
	__atomic_store_n(&c->line, -1, __ATOMIC_RELEASE);
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int start_pinned(pthread_t *t, int cpu, void *(*fn)(void *), void *arg)
{
	pthread_attr_t at;
	cpu_set_t s;
	int r;

	pthread_attr_init(&at);
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	/* Created already pinned: never runs on the partner's CPU. */
	pthread_attr_setaffinity_np(&at, sizeof(s), &s);
	r = pthread_create(t, &at, fn, arg);
	pthread_attr_destroy(&at);
	return -r;
}

double perf_c2c_ns(int cpu_a, int cpu_b)
{
	struct c2c *c;
	pthread_t ta, tb;
	double med;
	int r;

	if (cpu_a == cpu_b || cpu_a < 0 || cpu_b < 0 || cpu_a >= CPU_SETSIZE ||
	    cpu_b >= CPU_SETSIZE)
		return -EINVAL;
	c = aligned_alloc(64, sizeof(*c));
	if (!c)
		return -ENOMEM;
	memset(c, 0, sizeof(*c));
	r = start_pinned(&tb, cpu_b, pong, c);
	if (r < 0) {
		free(c);
		return r;
	}
	r = start_pinned(&ta, cpu_a, ping, c);
	if (r < 0) {
		__atomic_store_n(&c->line, -1, __ATOMIC_RELEASE);
		pthread_join(tb, NULL);
		free(c);
		return r;
	}
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	qsort(c->ns, C2C_BATCHES, sizeof(c->ns[0]), cmp_double);
	med = c->ns[C2C_BATCHES / 2];
	free(c);
	return med;
}

/*
 * --gaps: a thread that only reads the clock, on each CPU at once, counts
 * the gaps between two readings longer than GAP_NS.  What interrupts the
 * CPU (the guest's interrupts, the host taking the vCPU) interrupts a
 * polling loop the same way: a round trip's tail percentiles are at least
 * these gaps once their rate reaches the share of transactions they read.
 */
#define GAP_NS 5000ull

struct gaps {
	double seconds;
	uint64_t n, total_ns, max_ns;
};

static void *gaps_spin(void *arg)
{
	struct gaps *g = arg;
	uint64_t t0 = vq_rt_now_ns(), prev = t0, end = t0 + (uint64_t)(g->seconds * 1e9);

	for (;;) {
		uint64_t t = vq_rt_now_ns(), d = t - prev;

		prev = t;
		if (d > GAP_NS) {
			g->n++;
			g->total_ns += d;
			if (d > g->max_ns)
				g->max_ns = d;
		}
		if (t >= end)
			return NULL;
	}
}

static int c2c_gaps(const int cpu[2], double seconds)
{
	struct gaps g[2] = { { .seconds = seconds }, { .seconds = seconds } };
	pthread_t t[2];
	int r, k;

	for (k = 0; k < 2; k++) {
		r = start_pinned(&t[k], cpu[k], gaps_spin, &g[k]);
		if (r < 0) {
			if (k)
				pthread_join(t[0], NULL);
			fprintf(stderr, "virtq-perf c2c: cannot run on CPU %d: %s\n",
				cpu[k], strerror(-r));
			return 1;
		}
	}
	for (k = 0; k < 2; k++)
		pthread_join(t[k], NULL);
	for (k = 0; k < 2; k++)
		printf("gaps CPU %d: %.0f/s over %.0f us, mean %.1f us, max %.1f us, %.2f%% of the time\n",
		       cpu[k], g[k].n / seconds, GAP_NS / 1e3,
		       g[k].n ? g[k].total_ns / 1e3 / g[k].n : 0.0, g[k].max_ns / 1e3,
		       g[k].total_ns / (seconds * 1e9) * 100);
	return 0;
}

static void c2c_usage(FILE *f)
{
	fprintf(f,
"usage: virtq-perf c2c [A,B] [--gaps T]\n"
"One-way core-to-core cache-line latency between CPUs A and B (0,1), and\n"
"the placement it means (near below %.0f ns, else far).\n"
"  --gaps T    then spin T seconds on each CPU at once and count the gaps\n"
"              over %.0f us between two clock readings: what stalls a\n"
"              polling thread there (interrupts, the host taking the vCPU)\n"
"  --help, --version\n", PERF_NEAR_NS, GAP_NS / 1e3);
}

enum { O_GAPS };

static void c2c_option(void *opts, int c, const char *name, const char *val)
{
	if (c == O_GAPS)
		*(double *)opts = cli_double(name, val, 0.01, 60);
}

/* virtq-perf c2c [A,B] [--gaps T]: print the probe and the placement it
 * means, then the gaps. */
int perf_c2c_main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "gaps", required_argument, NULL, O_GAPS },
		PERF_OPT_HELP, PERF_OPT_VERSION, { NULL, 0, NULL, 0 },
	};
	int cpu[2] = { 0, 1 };
	double ns, gaps = 0;

	perf_opts_parse(argc, argv, "c2c", ":", lo, O_GAPS + 1, c2c_usage,
			c2c_option, &gaps);
	if (optind < argc)
		perf_cpu_pair("A,B", argv[optind++], cpu, true);
	perf_opts_end(argc, argv);
	ns = perf_c2c_ns(cpu[0], cpu[1]);
	if (ns < 0) {
		fprintf(stderr, "virtq-perf c2c: cannot run on CPUs %d,%d: %s\n",
			cpu[0], cpu[1], strerror((int)-ns));
		return 1;
	}
	printf("c2c %d,%d: %.1f ns one-way (%s)\n", cpu[0], cpu[1], ns,
	       perf_place_name(perf_place_classify(ns, ns)));
	return gaps > 0 ? c2c_gaps(cpu, gaps) : 0;
}
