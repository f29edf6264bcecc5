/* SPDX-License-Identifier: MIT */
/*
 * Paired A/B statistics, pure functions: geometric means, the change B/A - 1
 * from unrounded values, how many pairs B won, and the 95% Student t
 * interval (n - 1 degrees of freedom) of the mean of the paired log(B/A).
 */
#ifndef VIRTQ_PERF_STATS_H
#define VIRTQ_PERF_STATS_H

#include <stdbool.h>
#include <stddef.h>

/* Pairs below which no interval exists (one pair has no spread), and below
 * which the interval rests on too few runs to trust: with 5 pairs
 * t(0.975, 4) = 2.78 makes it 42% wider than the normal one would be. */
#define PERF_AB_MIN_PAIRS 2
#define PERF_AB_FEW_PAIRS 6

/* t(0.975, df): the two-sided 95% quantile of Student's t with df degrees
 * of freedom (df >= 1; NaN for 0). */
double perf_t975(unsigned df);

/* Is n pairs enough?  -1: fewer than PERF_AB_MIN_PAIRS (refuse), 1: fewer
 * than PERF_AB_FEW_PAIRS (warn; msg says why), 0: enough.  msg gets a
 * phrase without the program's name. */
int perf_ab_pairs_check(unsigned n, char *msg, size_t len);

struct perf_ab_stats {
	unsigned n;             /* pairs */
	double gmean_a;
	double gmean_b;
	double change;          /* gmean_b / gmean_a - 1 */
	unsigned faster;        /* pairs where B beat A */
	double mean_log;        /* mean of log(b_i / a_i) */
	double sd_log;          /* its sample standard deviation (n - 1) */
	double ci_lo;           /* exp(mean_log -+ t * sd_log / sqrt(n)) - 1, */
	double ci_hi;           /* t = perf_t975(n - 1); NaN when n < 2 */
	bool few_pairs;         /* n < PERF_AB_FEW_PAIRS */
};

/* Geometric mean of n > 0 positive values (through logs: no overflow);
 * NaN if n is 0 or a value is not positive. */
double perf_geomean(const double *x, unsigned n);

/*
 * The statistics of n pairs (a[i], b[i]), all positive.  higher_better says
 * which way "faster" goes (throughput: B faster when b > a; latency: when
 * b < a).  Returns 0, or -1 if n is 0 or a value is not positive.
 */
int perf_ab_compute(const double *a, const double *b, unsigned n,
		    bool higher_better, struct perf_ab_stats *s);

/* The placement of one run from the probes before and after it, and of a
 * pair from its two members. */
enum perf_place { PLACE_UNKNOWN = 0, PLACE_NEAR, PLACE_FAR, PLACE_MIXED };

/* One-way core-to-core latency under which a placement is "near" (ns). */
#define PERF_NEAR_NS 60.0

enum perf_place perf_place_classify(double ns_before, double ns_after);
enum perf_place perf_place_pair(enum perf_place a, enum perf_place b);
const char *perf_place_name(enum perf_place p);
enum perf_place perf_place_parse(const char *s);
/* "N/F/M" pairs per placement (place[] by enum perf_place); pairs whose
 * placement was never probed are said, not hidden: "unknown" when all
 * were, else " +U unknown" after the counts. */
const char *perf_place_counts(char *buf, size_t n, const unsigned place[4]);

#endif
