// SPDX-License-Identifier: MIT
/*
 * virtq-perf: the measurement tool.  Subcommands:
 *   ring   the two-thread ring benchmark
 *   net    a vhost-user-net guest against a backend
 *   vsock  both ends of a vsock transfer around a backend
 *   ab     paired A/B runs of a workload, with geometric means and intervals
 *   c2c    the core-to-core placement probe on its own
 */
#include <stdlib.h>
#include <string.h>

#include "perf.h"

uint64_t perf_opts_parse(int argc, char **argv, const char *workload,
			 const char *optstring, const struct option *lo, int nopts,
			 void (*usage)(FILE *), perf_opt_fn *option, void *opts)
{
	/* The workload's name, kept for messages ("virtq-perf ring"). */
	static char prog[32];
	uint64_t given = 0;
	int c, i;

	snprintf(prog, sizeof(prog), "virtq-perf %s", workload);
	cli_set_prog(prog);
	optind = 1;
	while ((c = getopt_long(argc, argv, optstring, lo, NULL)) != -1) {
		char name[40];

		if (c == 'h') {
			usage(stdout);
			exit(0);
		}
		if (c == 'V') {
			cli_print_version();
			exit(0);
		}
		if (c < 0 || c >= nopts)
			cli_getopt_error(c, argv);
		for (i = 0; lo[i].name && lo[i].val != c; i++)
			;
		snprintf(name, sizeof(name), "--%s", lo[i].name ? lo[i].name : "?");
		given |= 1ull << c;
		option(opts, c, name, optarg);
	}
	return given;
}

void perf_opts_end(int argc, char **argv)
{
	if (optind < argc)
		cli_usage_error("unexpected argument '%s' (see --help)", argv[optind]);
}

void perf_cpu_pair(const char *opt, const char *val, int cpu[2])
{
	const char *comma = strchr(val, ',');
	char first[24];

	if (!comma || (size_t)(comma - val) >= sizeof(first))
		cli_usage_error("%s: '%s' is not two CPUs A,B", opt, val);
	memcpy(first, val, (size_t)(comma - val));
	first[comma - val] = '\0';
	cpu[0] = cli_cpu(opt, first);
	cpu[1] = cli_cpu(opt, comma + 1);
	if (cpu[0] == cpu[1])
		cli_usage_error("%s: '%s' names one CPU twice; the two sides need two",
				opt, val);
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
"  --help, --version\n"
"'virtq-perf COMMAND --help' for a command's options; see virtq-perf(1).\n");
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*main)(int argc, char **argv);
	} cmds[] = {
		{ "ring", perf_ring_main }, { "net", perf_net_main },
		{ "vsock", perf_vsock_main }, { "ab", perf_ab_main },
		{ "c2c", perf_c2c_main },
	};
	unsigned i;

	cli_set_prog("virtq-perf");
	if (argc < 2)
		cli_usage_error("a command is needed: ring, net, vsock, ab or c2c "
				"(see --help)");
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		cli_print_version();
		return 0;
	}
	cli_usage_error("unknown command '%s': ring, net, vsock, ab or c2c "
			"(see --help)", argv[1]);
}
