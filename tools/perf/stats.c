// SPDX-License-Identifier: MIT
/* Paired A/B statistics (see stats.h). */
#include <math.h>
#include <string.h>

#include "stats.h"

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
	double sum = 0, ss = 0;
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
	if (n < 2) {
		s->sd_log = s->ci_lo = s->ci_hi = NAN;
		return 0;
	}
	for (i = 0; i < n; i++) {
		double d = log(b[i] / a[i]) - s->mean_log;

		ss += d * d;
	}
	s->sd_log = sqrt(ss / (n - 1));
	s->ci_lo = exp(s->mean_log - PERF_Z95 * s->sd_log / sqrt(n)) - 1;
	s->ci_hi = exp(s->mean_log + PERF_Z95 * s->sd_log / sqrt(n)) - 1;
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

enum perf_place perf_place_parse(const char *s)
{
	unsigned i;

	for (i = 0; i < sizeof(place_names) / sizeof(place_names[0]); i++)
		if (strcmp(s, place_names[i]) == 0)
			return (enum perf_place)i;
	return PLACE_UNKNOWN;
}
