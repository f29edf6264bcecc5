// SPDX-License-Identifier: MIT
/* Paired A/B statistics (see stats.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "stats.h"

/* t(0.975, df) for df 1..30, to 9 digits (computed from the t
 * distribution's CDF, the regularized incomplete beta function). */
static const double t975_table[] = {
	12.7062047, 4.30265273, 3.18244631, 2.77644511, 2.57058184,
	2.44691185, 2.36462425, 2.30600414, 2.26215716, 2.22813885,
	2.20098516, 2.17881283, 2.16036866, 2.14478669, 2.13144955,
	2.11990530, 2.10981558, 2.10092204, 2.09302405, 2.08596345,
	2.07961384, 2.07387307, 2.06865761, 2.06389856, 2.05953855,
	2.05552944, 2.05183052, 2.04840714, 2.04522964, 2.04227246,
};

/* z(0.975), the normal quantile the expansion starts from */
#define Z975 1.959963984540054

double perf_t975(unsigned df)
{
	double z = Z975, z2 = z * z, v = df, g1, g2, g3, g4;

	if (df == 0)
		return NAN;
	if (df <= sizeof(t975_table) / sizeof(t975_table[0]))
		return t975_table[df - 1];
	/* Beyond the table, the Cornish-Fisher expansion of t in powers of
	 * 1/df around z (Abramowitz & Stegun 26.7.5): off by less than
	 * 3e-8 from df 31 on, and better as df grows. */
	g1 = (z2 + 1) * z / 4;
	g2 = ((5 * z2 + 16) * z2 + 3) * z / 96;
	g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384;
	g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160;
	return z + g1 / v + g2 / (v * v) + g3 / (v * v * v) + g4 / (v * v * v * v);
}

int perf_ab_pairs_check(unsigned n, char *msg, size_t len)
{
	if (n < PERF_AB_MIN_PAIRS) {
		snprintf(msg, len, "%u pair%s: an interval needs at least %u", n,
			 n == 1 ? "" : "s", PERF_AB_MIN_PAIRS);
		return -1;
	}
	if (n < PERF_AB_FEW_PAIRS) {
		snprintf(msg, len, "%u pairs: below %u the 95%% interval "
			 "(t = %.2f) is wide and rests on few runs",
			 n, PERF_AB_FEW_PAIRS, perf_t975(n - 1));
		return 1;
	}
	msg[0] = '\0';
	return 0;
}

double perf_geomean(const double *x, unsigned n)
{
	double s = 0;
	unsigned i;

	if (n == 0)
		return NAN;
	for (i = 0; i < n; i++) {
		if (!(x[i] > 0))
			return NAN;
		s += log(x[i]);
	}
	return exp(s / n);
}

int perf_ab_compute(const double *a, const double *b, unsigned n,
		    bool higher_better, struct perf_ab_stats *s)
{
	double sum = 0, ss = 0, half;
	unsigned i;

	memset(s, 0, sizeof(*s));
	if (n == 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (!(a[i] > 0) || !(b[i] > 0))
			return -1;
		sum += log(b[i] / a[i]);
		if (higher_better ? b[i] > a[i] : b[i] < a[i])
			s->faster++;
	}
	s->n = n;
	s->gmean_a = perf_geomean(a, n);
	s->gmean_b = perf_geomean(b, n);
	/* From the unrounded means; equal to exp(mean_log) - 1. */
	s->change = s->gmean_b / s->gmean_a - 1;
	s->mean_log = sum / n;
	s->few_pairs = n < PERF_AB_FEW_PAIRS;
	if (n < PERF_AB_MIN_PAIRS) {
		s->sd_log = s->ci_lo = s->ci_hi = NAN;
		return 0;
	}
	for (i = 0; i < n; i++) {
		double d = log(b[i] / a[i]) - s->mean_log;

		ss += d * d;
	}
	s->sd_log = sqrt(ss / (n - 1));
	half = perf_t975(n - 1) * s->sd_log / sqrt(n);
	s->ci_lo = exp(s->mean_log - half) - 1;
	s->ci_hi = exp(s->mean_log + half) - 1;
	return 0;
}

static enum perf_place place_of(double ns)
{
	if (!(ns > 0))
		return PLACE_UNKNOWN;
	return ns < PERF_NEAR_NS ? PLACE_NEAR : PLACE_FAR;
}

enum perf_place perf_place_classify(double ns_before, double ns_after)
{
	enum perf_place a = place_of(ns_before), b = place_of(ns_after);

	if (a == PLACE_UNKNOWN || b == PLACE_UNKNOWN)
		return PLACE_UNKNOWN;
	return a == b ? a : PLACE_MIXED;
}

enum perf_place perf_place_pair(enum perf_place a, enum perf_place b)
{
	if (a == PLACE_UNKNOWN || b == PLACE_UNKNOWN)
		return PLACE_UNKNOWN;
	return a == b ? a : PLACE_MIXED;
}

static const char *const place_names[] = {
	[PLACE_UNKNOWN] = "unknown", [PLACE_NEAR] = "near",
	[PLACE_FAR] = "far", [PLACE_MIXED] = "mixed",
};

const char *perf_place_name(enum perf_place p)
{
	return place_names[p];
}

const char *perf_place_counts(char *buf, size_t n, const unsigned place[4])
{
	unsigned known = place[PLACE_NEAR] + place[PLACE_FAR] + place[PLACE_MIXED];

	if (!known && place[PLACE_UNKNOWN])
		snprintf(buf, n, "unknown");
	else if (place[PLACE_UNKNOWN])
		snprintf(buf, n, "%u/%u/%u +%u unknown", place[PLACE_NEAR], place[PLACE_FAR],
			 place[PLACE_MIXED], place[PLACE_UNKNOWN]);
	else
		snprintf(buf, n, "%u/%u/%u", place[PLACE_NEAR], place[PLACE_FAR],
			 place[PLACE_MIXED]);
	return buf;
}

enum perf_place perf_place_parse(const char *s)
{
	unsigned i;

	for (i = 0; i < sizeof(place_names) / sizeof(place_names[0]); i++)
		if (strcmp(s, place_names[i]) == 0)
			return (enum perf_place)i;
	return PLACE_UNKNOWN;
}
