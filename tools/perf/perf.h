/* SPDX-License-Identifier: MIT */
/* virtq-perf: what its modules share. */
#ifndef VIRTQ_PERF_H
#define VIRTQ_PERF_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <virtq/runtime.h>

#include "cli.h"
#include "stats.h"

/* ---- command lines: every workload follows cli.h ----
 * Each workload's long options include these two. */
#define PERF_OPT_HELP { "help", no_argument, NULL, 'h' }
#define PERF_OPT_VERSION { "version", no_argument, NULL, 'V' }

/* The callback perf_opts_parse gives each option: c is its val, name is
 * "--name" (for messages), val its value or NULL. */
typedef void perf_opt_fn(void *opts, int c, const char *name, const char *val);

/*
 * Parse a workload's argv (argv[0] is its name) with getopt_long and lo:
 * messages say "virtq-perf WORKLOAD"; an option whose val is below nopts
 * goes to option(opts, ...) and sets bit val of the mask returned;
 * --help prints usage on stdout and exits 0, --version prints the version
 * and exits 0, anything else is getopt's error (one line, exit 2).
 * optstring is ":" or, to stop at the first word that is not an option,
 * "+:".  optind is left at the first word not parsed.
 */
uint64_t perf_opts_parse(int argc, char **argv, const char *workload,
			 const char *optstring, const struct option *lo, int nopts,
			 void (*usage)(FILE *), perf_opt_fn *option, void *opts);

/* After the options: a word left over is an error (one line, exit 2). */
void perf_opts_end(int argc, char **argv);

/* "A,B": two CPUs this machine has; different ones if distinct. */
void perf_cpu_pair(const char *opt, const char *val, int cpu[2], bool distinct);

/* ---- the ring workload (ring.c) ---- */
struct ring_opts {
	bool packed;
	bool in_order;
	bool event_idx;
	bool rx;                /* device writes the payload (default: reads) */
	unsigned used_batch;    /* fills per flush; 1 = vq_dev_push each,
				 * 0 = one flush per pop burst */
	unsigned burst;         /* driver adds / device pops per burst */
	uint64_t busy_poll_us;
	unsigned queue_size;
	unsigned size;          /* payload bytes the device copies; 0: none */
	double seconds;
	uint64_t ops;           /* stop after this many (0: use seconds) */
	int cpu[2];             /* driver, device */
	bool placement;         /* probe the core-to-core latency */
	bool json;
};

struct ring_result {
	uint64_t ops;
	double elapsed;         /* s */
	double ops_per_sec;
	struct vq_rt_counters drv;
	struct vq_rt_counters dev;
	double c2c_before;      /* one-way ns; NaN if not probed */
	double c2c_after;
	enum perf_place place;
};

int perf_ring_main(int argc, char **argv);
int perf_ring_run(const struct ring_opts *o, struct ring_result *r);

/* ---- the vhost-user-net generator (net.c) ---- */
int perf_net_main(int argc, char **argv);

/* ---- the vhost-user-vsock transfer (vsock.c) ---- */
int perf_vsock_main(int argc, char **argv);

/* ---- the A/B runner (ab.c) ---- */
int perf_ab_main(int argc, char **argv);

/* ---- core-to-core placement probe (placement.c) ---- */
/* One-way cache-line latency between two CPUs in ns (median of batches of
 * a ping-pong), or a negative errno. */
double perf_c2c_ns(int cpu_a, int cpu_b);
int perf_c2c_main(int argc, char **argv);

/* ---- reports (report.c) ---- */
void perf_ring_report(FILE *f, const struct ring_opts *o,
		      const struct ring_result *r);
void perf_ring_json(FILE *f, const struct ring_opts *o,
		    const struct ring_result *r);

/* One workload of an A/B run and its pairs. */
struct ab_pair {
	double a, b;
	enum perf_place pa, pb;
	bool a_first;
};

struct ab_workload {
	char label[128];        /* the expanded values, e.g. "size=512" */
	char args[512];         /* the member's workload arguments */
	struct ab_pair *pairs;
	unsigned npairs;
	struct perf_ab_stats st;        /* over the pairs kept */
	unsigned kept;
	unsigned place[4];              /* pairs per enum perf_place */
	int err;                        /* -1: statistics not computable */
};

struct ab_run {
	const char *a, *b;              /* the A and B arguments */
	const char *exe[2];             /* A's and B's virtq-perf; NULL: this one */
	bool pairs_read;                /* --pairs-file: each w[i].args a file
					 * of pairs read, not run */
	const char *cmd;                /* the workload command line */
	unsigned pairs;
	double seconds;                 /* added to members that set no length */
	const char *metric;             /* the runs' JSON number compared */
	bool lower_better;              /* the metric is a time */
	bool ratio;                     /* the table shows B/A, not B/A - 1 */
	char bound[256];                /* what ends each run: "0.5 s", "64M bytes" */
	bool bound_same;                /* one bound for every run */
	bool same_placement;
	struct ab_workload *w;
	unsigned nw;
};

void perf_ab_table(FILE *f, const struct ab_run *r);
void perf_ab_json(FILE *f, const struct ab_run *r);
/* gnuplot's terminal for file's extension (.png, .svg, .txt), or NULL. */
const char *perf_ab_plot_term(const char *file);
/* Can the chart be drawn: gnuplot installed and file writable?  0, or -1
 * said in one line. */
int perf_ab_plot_ready(const char *file);
/* Draw it (gnuplot's output never reaches our stdout).  0, or -1 said in
 * one line. */
int perf_ab_plot(const char *file, const struct ab_run *r);

/* 12.3M style, three significant digits (main.c). */
void perf_si(char *buf, size_t n, double v);

#endif
