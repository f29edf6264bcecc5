// SPDX-License-Identifier: MIT
/*
 * The daemons' shared options (daemon.h): QEMU's backend program
 * conventions (--socket-path, --fd, --print-capabilities; vhost-user.rst),
 * the sockets' mode and group, the ring features, statistics.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include <virtq/spec.h>

#include "daemon.h"

#define MAX_OPTS 64

static const struct option common_opts[] = {
	{ "socket-path", required_argument, NULL, VQD_O_SOCKET_PATH },
	{ "fd", required_argument, NULL, VQD_O_FD },
	{ "client", no_argument, NULL, VQD_O_CLIENT },
	{ "socket-mode", required_argument, NULL, VQD_O_SOCKET_MODE },
	{ "socket-group", required_argument, NULL, VQD_O_SOCKET_GROUP },
	{ "print-capabilities", no_argument, NULL, VQD_O_PRINT_CAPS },
	{ "used-batch", required_argument, NULL, VQD_O_USED_BATCH },
	{ "busy-poll", required_argument, NULL, VQD_O_BUSY_POLL },
	{ "busy-poll-max", required_argument, NULL, VQD_O_BUSY_POLL_MAX },
	{ "busy-poll-yield", required_argument, NULL, VQD_O_BUSY_POLL_YIELD },
	{ "no-packed", no_argument, NULL, VQD_O_NO_PACKED },
	{ "no-event-idx", no_argument, NULL, VQD_O_NO_EVENT_IDX },
	{ "no-indirect", no_argument, NULL, VQD_O_NO_INDIRECT },
	{ "no-in-order", no_argument, NULL, VQD_O_NO_IN_ORDER },
	{ "stats-interval", required_argument, NULL, VQD_O_STATS },
	{ "json", no_argument, NULL, VQD_O_JSON },
	{ "per-queue", no_argument, NULL, VQD_O_PER_QUEUE },
	{ "once", no_argument, NULL, VQD_O_ONCE },
	{ "quiet", no_argument, NULL, VQD_O_QUIET },
	{ "help", no_argument, NULL, VQD_O_HELP },
	{ "version", no_argument, NULL, VQD_O_VERSION },
};

/* {"type": "net"}: net and vsock back-ends have no features to list in
 * vhost-user.json's schema. */
static _Noreturn void print_capabilities(const struct vqd_cli *cli)
{
	printf("{\n  \"type\": \"%s\"\n}\n", cli->type);
	exit(0);
}

/* A UNIX socket path: not empty, and it fits sun_path. */
static const char *socket_path(const char *opt, const char *val)
{
	size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;

	if (!*val)
		cli_usage_error("%s: needs a path", opt);
	if (strlen(val) > max)
		cli_usage_error("%s: '%s' is longer than %zu bytes, the most a "
				"UNIX socket path holds", opt, val, max);
	return val;
}

/* A shared option (the value checked, one line and exit 2 if bad). */
static void common_opt(const struct vqd_cli *cli, int c, const char *val,
		       struct vqd_opts *o)
{
	switch (c) {
	case VQD_O_SOCKET_PATH: o->socket_path = socket_path("--socket-path", val); break;
	case VQD_O_FD: o->fd = (int)cli_u64("--fd", val, 0, INT_MAX); break;
	case VQD_O_CLIENT: o->client = true; break;
	case VQD_O_SOCKET_MODE:
		o->socket_mode = cli_mode("--socket-mode", val);
		if (!o->socket_mode)
			cli_usage_error("--socket-mode: 0 lets nobody connect");
		break;
	case VQD_O_SOCKET_GROUP:
		o->socket_gid = cli_group("--socket-group", val);
		o->socket_group_set = true;
		break;
	case VQD_O_PRINT_CAPS: print_capabilities(cli);
	case VQD_O_USED_BATCH:
		o->used_batch = (unsigned)cli_u64("--used-batch", val, 0, 1u << 16);
		break;
	case VQD_O_BUSY_POLL:
		o->busy_poll_us = cli_u64("--busy-poll", val, 0, 10000000);
		break;
	case VQD_O_BUSY_POLL_MAX:
		o->busy_poll_max_us = cli_u64("--busy-poll-max", val, 0, 10000000);
		break;
	case VQD_O_BUSY_POLL_YIELD:
		o->busy_poll_yield_us = cli_u64("--busy-poll-yield", val, 0, 10000000);
		break;
	case VQD_O_NO_PACKED: o->no_packed = true; break;
	case VQD_O_NO_EVENT_IDX: o->no_event_idx = true; break;
	case VQD_O_NO_INDIRECT: o->no_indirect = true; break;
	case VQD_O_NO_IN_ORDER: o->no_in_order = true; break;
	case VQD_O_STATS:
		o->stats_interval = cli_double("--stats-interval", val, 0, 86400);
		break;
	case VQD_O_JSON: o->json = true; break;
	case VQD_O_PER_QUEUE: o->per_queue = true; break;
	case VQD_O_ONCE: o->once = true; break;
	case VQD_O_QUIET: o->quiet = true; break;
	case VQD_O_HELP:
		cli->usage(stdout);
		exit(0);
	case VQD_O_VERSION:
		cli_print_version();
		exit(0);
	}
}

/* The vhost-user socket: exactly one of --socket-path and --fd, and the
 * options about it only where they apply. */
static void check_socket(const struct vqd_cli *cli, const struct vqd_opts *o)
{
	bool creates;

	if (cli->sockets_elsewhere && *cli->sockets_elsewhere) {
		if (o->socket_path || o->fd >= 0)
			cli_usage_error("--%s: not with the VMs' own sockets (--vm, "
					"--config)", o->fd >= 0 ? "fd" : "socket-path");
		return;
	}
	if (o->socket_path && o->fd >= 0)
		cli_usage_error("--fd: not with --socket-path (give one of them)");
	if (!o->socket_path && o->fd < 0)
		cli_usage_error("--socket-path or --fd is required (see --help)");
	if (o->client && o->fd >= 0)
		cli_usage_error("--client: not with --fd (an inherited socket is "
				"connected or listening already)");
	creates = cli->own_sockets || (o->socket_path && !o->client);
	if (creates)
		return;
	if (vqd_seen(o, VQD_O_SOCKET_MODE))
		cli_usage_error("--socket-mode: no socket to create (%s)",
				o->client ? "--client connects" : "--fd is inherited");
	if (vqd_seen(o, VQD_O_SOCKET_GROUP))
		cli_usage_error("--socket-group: no socket to create (%s)",
				o->client ? "--client connects" : "--fd is inherited");
}

/* getopt_long's table: the tool's options, then the shared ones. */
static void build_table(const struct vqd_cli *cli, struct option *all)
{
	unsigned n = 0, i;

	for (i = 0; cli->opts[i].name && n < MAX_OPTS - 1; i++)
		all[n++] = cli->opts[i];
	for (i = 0; i < sizeof(common_opts) / sizeof(common_opts[0]) && n < MAX_OPTS - 1; i++)
		all[n++] = common_opts[i];
	all[n] = (struct option){ NULL, 0, NULL, 0 };
}

/* One window: fixed (--busy-poll) or adaptive (--busy-poll-max, or its
 * default); --busy-poll-yield inside it. */
static void check_poll(struct vqd_opts *o)
{
	bool fixed = vqd_seen(o, VQD_O_BUSY_POLL);
	uint64_t window;

	if (fixed && vqd_seen(o, VQD_O_BUSY_POLL_MAX))
		cli_usage_error("--busy-poll-max: not with --busy-poll (one window: "
				"fixed or adaptive)");
	if (!fixed && !vqd_seen(o, VQD_O_BUSY_POLL_MAX))
		o->busy_poll_max_us = VQD_BUSY_POLL_MAX_US;
	window = fixed ? o->busy_poll_us : o->busy_poll_max_us;
	if (vqd_seen(o, VQD_O_BUSY_POLL_YIELD) && !window)
		cli_usage_error("--busy-poll-yield: no effect without a busy-poll window");
	if (vqd_seen(o, VQD_O_BUSY_POLL_YIELD) && o->busy_poll_yield_us >= window)
		cli_usage_error("--busy-poll-yield: must be less than --busy-poll%s (%" PRIu64
				" us): the spin ends first", fixed ? "" : "-max", window);
}

void vqd_parse(const struct vqd_cli *cli, int argc, char **argv,
	       struct vqd_opts *o)
{
	struct option all[MAX_OPTS];
	int c, i;

	cli_set_prog(cli->name);
	/* "Other options and arguments should be ignored" (vhost-user.rst):
	 * before any of them can be found wrong. */
	for (i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--print-capabilities"))
			print_capabilities(cli);
	memset(o, 0, sizeof(*o));
	o->fd = -1;
	build_table(cli, all);
	/* ':' first: a missing value is told from an unknown option. */
	while ((c = getopt_long(argc, argv, ":h", all, NULL)) != -1) {
		if (c == 'h')
			c = VQD_O_HELP;
		if (c >= VQD_O_SOCKET_PATH && c < VQD_O_END)
			o->seen[c - VQD_O_SOCKET_PATH] = true;
		if (c >= VQD_O_TOOL && c < VQD_O_END)
			cli->opt(cli->arg, c, optarg);
		else if (c >= VQD_O_SOCKET_PATH && c < VQD_O_TOOL)
			common_opt(cli, c, optarg, o);
		else
			cli_getopt_error(c, argv);
	}
	check_socket(cli, o);
	check_poll(o);
}

void vqd_poll_config(const struct vqd_opts *o, struct vq_fw_config *fc)
{
	fc->busy_poll_ns = o->busy_poll_us * 1000;
	fc->busy_poll_max_ns = o->busy_poll_max_us * 1000;
	fc->busy_poll_yield_ns = o->busy_poll_yield_us * 1000;
}

const char *vqd_poll_str(char *buf, size_t n, const struct vqd_opts *o)
{
	if (o->busy_poll_us)
		snprintf(buf, n, "busy poll %" PRIu64 " us", o->busy_poll_us);
	else if (o->busy_poll_max_us)
		snprintf(buf, n, "adaptive busy poll up to %" PRIu64 " us",
			 o->busy_poll_max_us);
	else
		snprintf(buf, n, "no busy poll");
	return buf;
}

/* The long name of option c. */
static const char *opt_name(const struct vqd_cli *cli, int c)
{
	for (unsigned i = 0; cli->opts[i].name; i++)
		if (cli->opts[i].val == c)
			return cli->opts[i].name;
	for (unsigned i = 0; i < sizeof(common_opts) / sizeof(common_opts[0]); i++)
		if (common_opts[i].val == c)
			return common_opts[i].name;
	return "?";
}

void vqd_refuse(const struct vqd_cli *cli, int c, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	cli_usage_error("--%s: %s", opt_name(cli, c), why);
}

void vqd_check_cpus(const struct vqd_cli *cli, int c, unsigned ncpus, unsigned threads)
{
	if (ncpus > threads)
		vqd_refuse(cli, c, "%u CPUs for %u worker thread(s): one CPU each",
			   ncpus, threads);
}

uint64_t vqd_features(const struct vqd_opts *o, uint64_t f)
{
	if (o->no_packed)
		f &= ~VQ_BIT(VQ_F_RING_PACKED);
	if (o->no_event_idx)
		f &= ~VQ_BIT(VQ_F_EVENT_IDX);
	if (o->no_indirect)
		f &= ~VQ_BIT(VQ_F_INDIRECT_DESC);
	if (o->no_in_order)
		f &= ~VQ_BIT(VQ_F_IN_ORDER);
	return f;
}
