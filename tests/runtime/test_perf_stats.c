// SPDX-License-Identifier: MIT
/*
 * virtq-perf's A/B statistics against values computed by hand: geometric
 * mean, change = B/A - 1, "faster" k/N and the 95% normal-approximation
 * interval of the mean of the paired log(B/A); and the placement labels.
 */
#include <math.h>

#include "vq_test.h"
#include "stats.h"

#define CHECK_NEAR(a, b, eps) do {                                          \
	double x_ = (a), y_ = (b);                                          \
	if (!(fabs(x_ - y_) <= (eps))) {                                    \
		fprintf(stderr, "%s:%d: %s == %.9g, expected %.9g\n",       \
			__FILE__, __LINE__, #a, x_, y_);                    \
		exit(1);                                                    \
	}                                                                   \
} while (0)

/* {1, 2, 4, 8}: product 64, fourth root 2*sqrt(2) = 2.8284271. */
static void stats_geomean_known(void)
{
	double x[] = { 1, 2, 4, 8 };
	double one[] = { 5 };
	double bad[] = { 1, 0 };

	CHECK_NEAR(perf_geomean(x, 4), 2.8284271247, 1e-9);
	CHECK_NEAR(perf_geomean(one, 1), 5.0, 1e-12);
	CHECK(isnan(perf_geomean(bad, 2)));
	CHECK(isnan(perf_geomean(x, 0)));
}

/* Geometric mean of large values must not overflow (product 1e1200). */
static void stats_geomean_no_overflow(void)
{
	double x[] = { 1e300, 1e300, 1e300, 1e300 };

	CHECK_NEAR(perf_geomean(x, 4) / 1e300, 1.0, 1e-9);
}

/*
 * A = {100, 200, 400, 800}, B = A * e^{0.1, -0.1, 0.3, 0.1}.
 *   d = log(B/A) = {0.1, -0.1, 0.3, 0.1}; mean 0.1
 *   deviations {0, -0.2, 0.2, 0}; sum of squares 0.08; var 0.08/3
 *   sd = 0.1632993; se = sd / sqrt(4) = 0.0816497
 *   z * se = 1.959964 * 0.0816497 = 0.1600303
 *   interval exp(0.1 -+ 0.1600303) - 1 = [-5.8264%, +29.6969%]
 *   gmean A = 100 * 64^(1/4) = 282.8427; gmean B = 282.8427 * e^0.1 = 312.5895
 *   change = e^0.1 - 1 = +10.5171%; faster 3/4 (all but the -0.1 pair)
 */
static void stats_ab_known_pairs(void)
{
	double a[] = { 100, 200, 400, 800 };
	double r[] = { 0.1, -0.1, 0.3, 0.1 };
	double b[4];
	struct perf_ab_stats s;
	int i;

	for (i = 0; i < 4; i++)
		b[i] = a[i] * exp(r[i]);
	CHECK_EQ(perf_ab_compute(a, b, 4, true, &s), 0);
	CHECK_EQ(s.n, 4);
	CHECK_NEAR(s.gmean_a, 282.842712, 1e-5);
	CHECK_NEAR(s.gmean_b, 312.589540, 1e-5);
	CHECK_NEAR(s.change, 0.105170918, 1e-8);
	CHECK_EQ(s.faster, 3);
	CHECK_NEAR(s.mean_log, 0.1, 1e-12);
	CHECK_NEAR(s.sd_log, 0.163299316, 1e-8);
	CHECK_NEAR(s.ci_lo, -0.058264085, 1e-8);
	CHECK_NEAR(s.ci_hi, 0.296969500, 1e-8);

	/* For a latency (lower is better) B is faster in 1 of 4 pairs. */
	CHECK_EQ(perf_ab_compute(a, b, 4, false, &s), 0);
	CHECK_EQ(s.faster, 1);
}

/* The change comes from unrounded means: A = {3, 3}, B = {4, 4}:
 * 4/3 - 1 = 0.3333..., not a ratio of rounded numbers; equal ratios give a
 * zero-width interval at the change; a tie is not "faster". */
static void stats_ab_unrounded_and_ties(void)
{
	double a[] = { 3, 3 }, b[] = { 4, 4 }, c[] = { 3, 3 };
	struct perf_ab_stats s;

	CHECK_EQ(perf_ab_compute(a, b, 2, true, &s), 0);
	CHECK_NEAR(s.change, 1.0 / 3.0, 1e-12);
	CHECK_NEAR(s.ci_lo, 1.0 / 3.0, 1e-12);
	CHECK_NEAR(s.ci_hi, 1.0 / 3.0, 1e-12);
	CHECK_EQ(s.faster, 2);
	CHECK_EQ(perf_ab_compute(a, c, 2, true, &s), 0);
	CHECK_EQ(s.faster, 0);
	CHECK_NEAR(s.change, 0.0, 1e-15);
}

/* One pair has no spread: no interval (NaN); no pairs or a non-positive
 * value is an error. */
static void stats_ab_degenerate(void)
{
	double a[] = { 2, 1 }, b[] = { 3, -1 };
	struct perf_ab_stats s;

	CHECK_EQ(perf_ab_compute(a, b, 1, true, &s), 0);
	CHECK_NEAR(s.change, 0.5, 1e-12);
	CHECK(isnan(s.ci_lo) && isnan(s.ci_hi));
	CHECK_EQ(perf_ab_compute(a, b, 0, true, &s), -1);
	CHECK_EQ(perf_ab_compute(a, b, 2, true, &s), -1);
}

/* Near below 60 ns one way; a run is near/far only if both probes agree;
 * a pair only if both members agree. */
static void placement_classify(void)
{
	CHECK_EQ(perf_place_classify(27, 30), PLACE_NEAR);
	CHECK_EQ(perf_place_classify(160, 150), PLACE_FAR);
	CHECK_EQ(perf_place_classify(27, 160), PLACE_MIXED);
	CHECK_EQ(perf_place_classify(59.9, 60.0), PLACE_MIXED);
	CHECK_EQ(perf_place_classify(0, 30), PLACE_UNKNOWN);
	CHECK_EQ(perf_place_pair(PLACE_NEAR, PLACE_NEAR), PLACE_NEAR);
	CHECK_EQ(perf_place_pair(PLACE_FAR, PLACE_FAR), PLACE_FAR);
	CHECK_EQ(perf_place_pair(PLACE_NEAR, PLACE_FAR), PLACE_MIXED);
	CHECK_EQ(perf_place_pair(PLACE_MIXED, PLACE_MIXED), PLACE_MIXED);
	CHECK_EQ(perf_place_parse("far"), PLACE_FAR);
	CHECK(strcmp(perf_place_name(PLACE_MIXED), "mixed") == 0);
}

int main(void)
{
	RUN(stats_geomean_known);
	RUN(stats_geomean_no_overflow);
	RUN(stats_ab_known_pairs);
	RUN(stats_ab_unrounded_and_ties);
	RUN(stats_ab_degenerate);
	RUN(placement_classify);
	return 0;
}
