// SPDX-License-Identifier: MIT
/*
 * virtq-perf's A/B statistics against values computed by hand: geometric
 * mean, change = B/A - 1, "faster" k/N and the 95% Student t interval
 * (n - 1 degrees of freedom) of the mean of the paired log(B/A); the t
 * quantiles against published tables; when too few pairs are refused or
 * warned about; and the placement labels.
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
 *   t(0.975, 3) * se = 3.182446 * 0.0816497 = 0.2598457
 *   interval exp(0.1 -+ 0.2598457) - 1 = [-14.7725%, +43.3108%]
 *   (z = 1.96 would have said [-5.83%, +29.70%]: far too narrow)
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
	CHECK_NEAR(s.ci_lo, -0.147724675, 1e-8);
	CHECK_NEAR(s.ci_hi, 0.433108201, 1e-8);
	CHECK(s.few_pairs);

	/* For a latency (lower is better) B is faster in 1 of 4 pairs. */
	CHECK_EQ(perf_ab_compute(a, b, 4, false, &s), 0);
	CHECK_EQ(s.faster, 1);
}

/*
 * Six pairs, the fewest without a warning: d = log(B/A) =
 * {0.02, 0.04, -0.01, 0.03, 0.05, 0.01}, mean 0.0233333, sum of squared
 * deviations 0.0023333, sd = sqrt(0.0023333 / 5) = 0.0216025,
 * se = sd / sqrt(6) = 0.0088192; t(0.975, 5) = 2.570582:
 * half-width 0.0226704, interval exp(0.0233333 -+ 0.0226704) - 1 =
 * [+0.0663%, +4.7078%].
 */
static void stats_ab_six_pairs_student_t(void)
{
	double r[] = { 0.02, 0.04, -0.01, 0.03, 0.05, 0.01 };
	double a[6], b[6];
	struct perf_ab_stats s;
	int i;

	for (i = 0; i < 6; i++) {
		a[i] = 1e6 + i;
		b[i] = a[i] * exp(r[i]);
	}
	CHECK_EQ(perf_ab_compute(a, b, 6, true, &s), 0);
	CHECK_NEAR(s.sd_log, 0.021602469, 1e-8);
	CHECK_NEAR(s.ci_lo, 0.000663152, 1e-8);
	CHECK_NEAR(s.ci_hi, 0.047078321, 1e-8);
	CHECK(!s.few_pairs);
}

/*
 * t(0.975, df) against the published two-sided 95% critical values (to
 * three decimals, as every table prints them): the table part (df <= 30)
 * and the expansion beyond it (40, 60, 120, and z = 1.960 far out).
 */
static void student_t975_known_values(void)
{
	static const struct { unsigned df; double t; } known[] = {
		{ 1, 12.706 }, { 2, 4.303 }, { 3, 3.182 }, { 4, 2.776 },
		{ 5, 2.571 }, { 9, 2.262 }, { 10, 2.228 }, { 19, 2.093 },
		{ 29, 2.045 }, { 30, 2.042 }, { 40, 2.021 }, { 60, 2.000 },
		{ 120, 1.980 }, { 100000, 1.960 },
	};
	unsigned i;

	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		CHECK_NEAR(perf_t975(known[i].df), known[i].t, 0.0005);
	/* and more closely where the table hands over to the expansion */
	CHECK_NEAR(perf_t975(30), 2.042272456, 1e-8);
	CHECK_NEAR(perf_t975(31), 2.039513446, 1e-7);
	CHECK_NEAR(perf_t975(50), 2.008559112, 1e-8);
	CHECK(isnan(perf_t975(0)));
}

/* t falls as df grows and stays above z(0.975) = 1.959964: no step where
 * the table ends. */
static void student_t975_monotone(void)
{
	unsigned df;

	for (df = 1; df < 2000; df++) {
		CHECK(perf_t975(df + 1) < perf_t975(df));
		CHECK(perf_t975(df) > 1.959963984);
	}
}

/* Fewer than 2 pairs give no interval and are refused; 2 to 5 are
 * accepted with a warning that names the count; 6 and more are fine. */
static void ab_pairs_check_thresholds(void)
{
	char msg[160];

	CHECK_EQ(perf_ab_pairs_check(0, msg, sizeof(msg)), -1);
	CHECK_EQ(perf_ab_pairs_check(1, msg, sizeof(msg)), -1);
	CHECK(strstr(msg, "1 pair:") && strstr(msg, "at least 2"));
	CHECK_EQ(perf_ab_pairs_check(2, msg, sizeof(msg)), 1);
	CHECK(strstr(msg, "2 pairs") && strstr(msg, "12.71"));
	CHECK_EQ(perf_ab_pairs_check(5, msg, sizeof(msg)), 1);
	CHECK(strstr(msg, "5 pairs") && strstr(msg, "below 6") && !strchr(msg, '\n'));
	CHECK_EQ(perf_ab_pairs_check(6, msg, sizeof(msg)), 0);
	CHECK_EQ(perf_ab_pairs_check(20, msg, sizeof(msg)), 0);
	CHECK_EQ(msg[0], '\0');
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
	RUN(stats_ab_six_pairs_student_t);
	RUN(student_t975_known_values);
	RUN(student_t975_monotone);
	RUN(ab_pairs_check_thresholds);
	RUN(stats_ab_unrounded_and_ties);
	RUN(stats_ab_degenerate);
	RUN(placement_classify);
	return 0;
}
