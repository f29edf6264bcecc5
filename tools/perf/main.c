// SPDX-License-Identifier: MIT
/*
 * virtq-perf: the measurement tool.  Subcommands:
 *   ring   the two-thread ring benchmark
 *   ab     paired A/B runs of a workload, with geometric means and intervals
 *   c2c    the core-to-core placement probe on its own
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

bool perf_parse_either(const char *s, const char *no, const char *yes, bool *v)
{
	if (strcmp(s, no) && strcmp(s, yes))
		return false;
	*v = !strcmp(s, yes);
	return true;
}

bool perf_parse_onoff(const char *s, bool *v)
{
	if (!strcmp(s, "on") || !strcmp(s, "1") || !strcmp(s, "yes")) {
		*v = true;
		return true;
	}
	if (!strcmp(s, "off") || !strcmp(s, "0") || !strcmp(s, "no")) {
		*v = false;
		return true;
	}
	return false;
}

bool perf_parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!*s || *s == '-')
		return false;
	errno = 0;
	*v = strtoull(s, &end, 0);
	return !errno && *end == '\0';
}

bool perf_parse_double(const char *s, double *v)
{
	char *end;

	errno = 0;
	*v = strtod(s, &end);
	return !errno && *s && *end == '\0' && isfinite(*v);
}

/* 12.3M style, three significant digits. */
void perf_si(char *buf, size_t n, double v)
{
	const char *u = "";

	if (v >= 1e9) {
		v /= 1e9;
		u = "G";
	} else if (v >= 1e6) {
		v /= 1e6;
		u = "M";
	} else if (v >= 1e3) {
		v /= 1e3;
		u = "k";
	}
	snprintf(buf, n, v >= 100 ? "%.0f%s" : v >= 10 ? "%.1f%s" : "%.2f%s", v, u);
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: virtq-perf COMMAND [options]\n"
"  ring   two-thread ring benchmark (driver and device on two CPUs)\n"
"  net    drive a vhost-user-net backend as a guest: tx, rx, rr\n"
"  vsock  both ends of a vsock transfer around a vhost-user-vsock backend\n"
"  ab     paired A/B runs of a workload: geometric means, change, 95%% CI\n"
"  c2c    core-to-core one-way cache-line latency (placement probe)\n"
"'virtq-perf COMMAND --help' for a command's options; see virtq-perf(1).\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "ring"))
		return perf_ring_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "net"))
		return perf_net_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "vsock"))
		return perf_vsock_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "ab"))
		return perf_ab_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "c2c"))
		return perf_c2c_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("virtq-perf %s\n", VIRTQ_VERSION);
		return 0;
	}
	fprintf(stderr, "virtq-perf: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
