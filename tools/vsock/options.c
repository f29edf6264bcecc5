// SPDX-License-Identifier: MIT
/* virtq-vsock's command line (virtq-vsock.h), following cli.h. */
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include "virtq-vsock.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: virtq-vsock (--socket-path PATH | --fd N) --guest-cid N --uds-path HOST_PATH [options]\n"
"       virtq-vsock --print-capabilities | --help | --version\n"
"A vhost-user-vsock backend.  Guest connections to CID 2 port P go to the\n"
"UNIX socket HOST_PATH_P (SOCK_STREAM, or SOCK_SEQPACKET for a guest\n"
"SOCK_SEQPACKET socket); host programs connect to HOST_PATH (or, with\n"
"SOCK_SEQPACKET, to HOST_PATH.seqpacket or HOST_PATH_seqpacket) and send\n"
"\"CONNECT <port>\\n\", answered \"OK <host_port>\\n\" (docs/virtq-vsock.md).\n"
VQD_USAGE_SOCKET
"                        (also for HOST_PATH and its seqpacket sockets)\n"
"  --guest-cid N         the guest's CID (>= 3), given to the front-end in\n"
"                        the config space (GET_CONFIG)\n"
"  --uds-path HOST_PATH  the host side (see above); a live socket there is\n"
"                        refused, a stale one replaced\n"
"  --used-batch N        RX: publish used entries every N (1: each on its\n"
"                        own; 0: once per burst, the default)\n"
"  --busy-poll USEC      poll this long before sleeping (0)\n"
"  --busy-poll-yield USEC  after this long with nothing, offer the CPU at\n"
"                        every probe (for CPUs shared with the guest)\n"
"  --buf-alloc BYTES     receive buffer per connection we advertise\n"
"                        (256K; K, M, G accepted)\n"
"  --max-conns N         connections at most (1024)\n"
"  --host-ports LIST     host ports the guest may connect to: ports and\n"
"                        ranges (22,8000-8099) or none; a refused one is\n"
"                        reset at once and counted (default: every port)\n"
"  --guest-ports LIST    guest ports host programs may CONNECT to, the same\n"
"                        way (none: the guest only connects out)\n"
"  --no-packed --no-event-idx --no-indirect --no-in-order --no-seqpacket\n"
"                        stop offering that feature\n"
VQD_USAGE_STATS);
}

enum {
	O_CID = VQD_O_TOOL, O_UDS, O_BUF_ALLOC, O_MAX_CONNS, O_NO_SEQPACKET,
	O_HOST_PORTS, O_GUEST_PORTS,
};

static const struct option long_opts[] = {
	{ "guest-cid", required_argument, NULL, O_CID },
	{ "uds-path", required_argument, NULL, O_UDS },
	{ "buf-alloc", required_argument, NULL, O_BUF_ALLOC },
	{ "max-conns", required_argument, NULL, O_MAX_CONNS },
	{ "no-seqpacket", no_argument, NULL, O_NO_SEQPACKET },
	{ "host-ports", required_argument, NULL, O_HOST_PORTS },
	{ "guest-ports", required_argument, NULL, O_GUEST_PORTS },
	{ NULL, 0, NULL, 0 },
};

bool port_set_has(const struct port_set *s, uint32_t port)
{
	if (!s->restricted)
		return true;
	for (unsigned i = 0; i < s->n; i++)
		if (port >= s->r[i].lo && port <= s->r[i].hi)
			return true;
	return false;
}

/* "none", or "P" and "LO-HI" items joined by commas: decimal vsock ports
 * (32 bits; 2^32-1 is VMADDR_PORT_ANY, no port of a connection). */
static void parse_ports(const char *opt, const char *val, struct port_set *s)
{
	const char *p = val;

	memset(s, 0, sizeof(*s));
	s->restricted = true;
	if (!strcmp(val, "none"))
		return;
	for (;;) {
		size_t n = strcspn(p, ","), dash;
		char item[24], *hi;

		if (n == 0 || n >= sizeof(item))
			cli_usage_error("%s: '%s' is not a list of ports and ranges "
					"(e.g. 22,8000-8099) or none", opt, val);
		if (s->n == PORT_RANGES_MAX)
			cli_usage_error("%s: more than %u ports and ranges", opt, PORT_RANGES_MAX);
		memcpy(item, p, n);
		item[n] = '\0';
		dash = strcspn(item, "-");
		hi = item[dash] ? item + dash + 1 : item;
		item[dash] = '\0';
		s->r[s->n].lo = (uint32_t)cli_u64(opt, item, 0, 0xfffffffeull);
		s->r[s->n].hi = (uint32_t)cli_u64(opt, hi, 0, 0xfffffffeull);
		if (s->r[s->n].lo > s->r[s->n].hi)
			cli_usage_error("%s: the range %u-%u runs backwards", opt,
					s->r[s->n].lo, s->r[s->n].hi);
		s->n++;
		if (!p[n])
			break;
		p += n + 1;
	}
}

/* One of virtq-vsock's own options (vqd_cli.opt). */
static void tool_opt(void *arg, int c, const char *val)
{
	struct vsock_opts *o = arg;

	switch (c) {
	case O_CID:
		/* 0-2 are the hypervisor, local and host; 2^32-1 is "any". */
		o->cid = cli_u64("--guest-cid", val, 3, 0xfffffffeull);
		break;
	case O_UDS:
		if (!*val)
			cli_usage_error("--uds-path: needs a path");
		o->uds = val;
		break;
	case O_BUF_ALLOC:
		o->buf_alloc = (uint32_t)cli_size("--buf-alloc", val, 4096, 1u << 30);
		break;
	case O_MAX_CONNS:
		o->max_conns = (uint32_t)cli_u64("--max-conns", val, 1, 1u << 20);
		break;
	case O_NO_SEQPACKET:
		o->no_seqpacket = true;
		break;
	case O_HOST_PORTS: parse_ports("--host-ports", val, &o->host_ports); break;
	case O_GUEST_PORTS: parse_ports("--guest-ports", val, &o->guest_ports); break;
	}
}

static struct vqd_cli cli = {
	.name = "virtq-vsock", .type = "vsock", .opts = long_opts, .opt = tool_opt,
	.usage = usage, .own_sockets = true,
};

/* The sockets made of --uds-path must fit a UNIX socket address. */
static void check_uds(const struct vsock_opts *o)
{
	size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
	size_t extra = o->no_seqpacket ? 0 : strlen(VSOCK_SEQ_SUFFIX);

	if (strlen(o->uds) + extra > max)
		cli_usage_error("--uds-path: '%s' is longer than %zu bytes%s", o->uds,
				max - extra, extra ? " (HOST_PATH" VSOCK_SEQ_SUFFIX
				" must fit a UNIX socket path; or --no-seqpacket)" : "");
}

/* The host side's sockets and the vhost-user socket are different files:
 * one path for two would have the daemon refuse itself as "another
 * instance". */
static void check_collision(const struct vsock_opts *o, const struct vqd_opts *com)
{
	const char *vu = com->socket_path;
	size_t n = strlen(o->uds);

	if (!vu)
		return;
	if (!strcmp(vu, o->uds))
		cli_usage_error("--uds-path: '%s' is the --socket-path too: the host "
				"side needs a path of its own", o->uds);
	if (!o->no_seqpacket && !strncmp(vu, o->uds, n) &&
	    (!strcmp(vu + n, VSOCK_SEQ_SUFFIX) || !strcmp(vu + n, VSOCK_SEQ_ALIAS)))
		cli_usage_error("--socket-path: '%s' is the host side's seqpacket "
				"socket (--uds-path %s)", vu, o->uds);
}

const struct vqd_cli *vsock_parse(int argc, char **argv, struct vsock_opts *o,
				  struct vqd_opts *com)
{
	memset(o, 0, sizeof(*o));
	cli.arg = o;
	vqd_parse(&cli, argc, argv, com);
	if (optind < argc)
		cli_usage_error("unexpected argument '%s' (see --help)", argv[optind]);
	if (!o->cid)
		cli_usage_error("--guest-cid is required (see --help)");
	if (!o->uds)
		cli_usage_error("--uds-path is required (see --help)");
	check_uds(o);
	check_collision(o, com);
	return &cli;
}
