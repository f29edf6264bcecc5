// SPDX-License-Identifier: MIT
/*
 * virtq-net's command line (virtq-net.h): its own options, the positional
 * MODE, and what each option means in which mode.  An option that has no
 * effect in the mode chosen, or conflicts with another, is refused with
 * one line (cli.h), not ignored.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>

#include "virtq-net.h"

const char *const net_mode_names[] = { "sink", "source", "loopback", "tap", NULL };

static void usage(FILE *f)
{
	fprintf(f,
"usage: virtq-net (--socket-path PATH | --fd N) [options] [MODE]\n"
"       virtq-net --print-capabilities | --help | --version\n"
"A vhost-user-net backend.  MODE: sink (count and drop what the guest sends,\n"
"the default), source (send --size byte frames to the guest), loopback (send\n"
"each frame back with the MAC addresses swapped), tap IFNAME (bridge to a TAP).\n"
VQD_USAGE_SOCKET
"  --mode MODE           the same as the positional MODE\n"
"  --tap IFNAME          tap mode: the TAP device (or: tap IFNAME)\n"
"  --size BYTES          source: frame size (64; K, M accepted)\n"
"  --count N             source: send N frames in all, then stop sending\n"
"  --copy                sink: copy each frame out of guest memory (as DPDK's\n"
"                        vhost does into an mbuf) instead of only counting it\n"
"  --tx-evict on|off|auto  where frames are read (loopback, tap, sink --copy):\n"
"                        flush the lines of guest TX frames read (CLFLUSHOPT):\n"
"                        the guest's rewrite of them then costs a miss, not\n"
"                        an invalidation; a win when its vCPU shares no\n"
"                        cache with ours, a loss when it does.  auto\n"
"                        (default) measures both, keeps the faster and\n"
"                        measures again every ~64 windows\n"
"  --queue-pairs N       queue pairs offered (1; more offers VIRTIO_NET_F_MQ;\n"
"                        tap: one queue of a multi-queue TAP per pair)\n"
"  --threads N           worker threads, at most one per pair; pair k is\n"
"                        served by thread k %% N (1)\n"
"  --cpu LIST            pin worker threads to these CPUs (comma list, at most\n"
"                        one per thread; a tap queue's reader runs with its\n"
"                        pair's worker)\n"
"  --used-batch N        publish used entries every N (1: each on its own;\n"
"                        0: once per burst, the default)\n"
VQD_USAGE_POLL
"  --no-in-order --no-packed --no-event-idx --no-indirect --no-mrg-rxbuf\n"
"  --no-guest-announce   stop offering that feature (without\n"
"                        GUEST_ANNOUNCE, QEMU asks us to send a RARP for the\n"
"                        guest after a migration: tap mode sends it)\n"
"  --no-offloads         tap: do not offer the checksum and segmentation\n"
"                        offloads (CSUM, GUEST_CSUM, HOST_/GUEST_TSO4/6/ECN)\n"
"  --mac XX:XX:XX:XX:XX:XX  the guest's MAC in the config space (offers\n"
"                        VIRTIO_NET_F_MAC; without it the guest picks one)\n"
"  --mtu N               the MTU in the config space (68-65535; tap: the\n"
"                        TAP's too); a front-end's NET_SET_MTU replaces it\n"
VQD_USAGE_STATS);
}

enum {
	O_MODE = VQD_O_TOOL, O_TAP, O_SIZE, O_PAIRS, O_THREADS, O_CPU, O_NO_MRG,
	O_COUNT, O_COPY, O_TX_EVICT, O_NO_ANNOUNCE, O_NO_OFFLOADS, O_MAC, O_MTU,
};

static const struct option long_opts[] = {
	{ "mode", required_argument, NULL, O_MODE },
	{ "tap", required_argument, NULL, O_TAP },
	{ "size", required_argument, NULL, O_SIZE },
	{ "queue-pairs", required_argument, NULL, O_PAIRS },
	{ "threads", required_argument, NULL, O_THREADS },
	{ "cpu", required_argument, NULL, O_CPU },
	{ "no-mrg-rxbuf", no_argument, NULL, O_NO_MRG },
	{ "no-guest-announce", no_argument, NULL, O_NO_ANNOUNCE },
	{ "no-offloads", no_argument, NULL, O_NO_OFFLOADS },
	{ "count", required_argument, NULL, O_COUNT },
	{ "copy", no_argument, NULL, O_COPY },
	{ "tx-evict", required_argument, NULL, O_TX_EVICT },
	{ "mac", required_argument, NULL, O_MAC },
	{ "mtu", required_argument, NULL, O_MTU },
	{ NULL, 0, NULL, 0 },
};

/* The command line's view of the options, for the checks across them. */
struct parse {
	struct net_opts *o;
	const char *mode_opt;           /* --mode's value */
	const char *tap_opt;            /* --tap's value */
};

/* A TAP device's name: what TUNSETIFF takes whole. */
static const char *tap_name(const char *opt, const char *val)
{
	if (!*val || strlen(val) >= IFNAMSIZ)
		cli_usage_error("%s: '%s' is not an interface name (1 to %d "
				"characters)", opt, val, IFNAMSIZ - 1);
	return val;
}

/* "52:54:00:12:34:56": a unicast MAC, not all zero (5.1.4: the
 * guest's own address). */
static void parse_mac(struct net_opts *o, const char *val)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t any = 0;

	for (unsigned i = 0; i < 17; i++) {
		char c = val[i];
		const char *h = c ? strchr(hex, c | 0x20) : NULL;

		if (i % 3 == 2 ? c != ':' : !h)
			cli_usage_error("--mac: '%s' is not a MAC address (XX:XX:XX:XX:XX:XX)", val);
		if (i % 3 == 0)
			o->mac[i / 3] = (uint8_t)((h - hex) << 4);
		else if (i % 3 == 1)
			any |= o->mac[i / 3] |= (uint8_t)(h - hex);
	}
	if (val[17])
		cli_usage_error("--mac: '%s' is not a MAC address (XX:XX:XX:XX:XX:XX)", val);
	if (o->mac[0] & 1)
		cli_usage_error("--mac: %s is a group address, not a guest's", val);
	if (!any)
		cli_usage_error("--mac: the zero address is no guest's");
	o->has_mac = true;
}

/* One of virtq-net's own options (vqd_cli.opt). */
static void tool_opt(void *arg, int c, const char *val)
{
	static const char *const evict[] = { "off", "on", "auto", NULL };
	struct parse *p = arg;
	struct net_opts *o = p->o;

	switch (c) {
	case O_MODE:
		o->mode = (enum mode)cli_choice("--mode", val, net_mode_names);
		p->mode_opt = val;
		break;
	case O_TAP: p->tap_opt = tap_name("--tap", val); break;
	case O_SIZE:
		o->size = (unsigned)cli_size("--size", val, VQ_NET_MIN_FRAME,
					     VQ_NET_MAX_FRAME);
		break;
	case O_PAIRS: o->pairs = (unsigned)cli_u64("--queue-pairs", val, 1, MAX_PAIRS); break;
	case O_THREADS: o->threads = (unsigned)cli_u64("--threads", val, 1, MAX_THREADS); break;
	case O_CPU: o->ncpus = cli_cpu_list("--cpu", val, o->cpus, MAX_THREADS); break;
	case O_NO_MRG: o->no_mrg = true; break;
	case O_NO_ANNOUNCE: o->no_announce = true; break;
	case O_NO_OFFLOADS: o->no_offloads = true; break;
	case O_COPY: o->copy = true; break;
	case O_TX_EVICT:
		/* the enum's order: off, on, auto */
		o->tx_evict = (enum vq_net_tx_evict)cli_choice("--tx-evict", val, evict);
		break;
	case O_COUNT: o->count = cli_u64("--count", val, 1, INT64_MAX); break;
	case O_MAC: parse_mac(o, val); break;
	/* 68: the least MTU the device may offer (5.1.4.1) */
	case O_MTU: o->mtu = (unsigned)cli_u64("--mtu", val, 68, 65535); break;
	}
}

static struct parse parse_state;
static struct vqd_cli cli = {
	.name = "virtq-net", .type = "net", .opts = long_opts, .opt = tool_opt,
	.usage = usage, .arg = &parse_state,
};

/* The positional MODE [IFNAME], agreeing with --mode and --tap. */
static void parse_mode_args(int argc, char **argv, struct parse *p)
{
	struct net_opts *o = p->o;

	if (optind < argc) {
		const char *m = argv[optind++];
		enum mode mode = (enum mode)cli_choice("MODE", m, net_mode_names);

		if (p->mode_opt && mode != o->mode)
			cli_usage_error("MODE: '%s' and --mode %s disagree", m, p->mode_opt);
		o->mode = mode;
		if (mode == M_TAP && optind < argc) {
			const char *ifname = tap_name("tap IFNAME", argv[optind++]);

			if (p->tap_opt && strcmp(p->tap_opt, ifname))
				cli_usage_error("--tap: '%s' and 'tap %s' disagree",
						p->tap_opt, ifname);
			p->tap_opt = ifname;
		}
	}
	if (optind < argc)
		cli_usage_error("unexpected argument '%s' (see --help)", argv[optind]);
	o->tap_name = p->tap_opt;
	if (o->mode == M_TAP && !o->tap_name)
		cli_usage_error("tap mode needs an interface name (tap IFNAME, or "
				"--tap IFNAME)");
}

/* Options the mode gives no effect, and counts that do not add up. */
static void check_mode(const struct net_opts *o, const struct vqd_opts *com)
{
	const char *mode = net_mode_names[o->mode];

	if (o->mode != M_TAP && vqd_seen(com, O_TAP))
		vqd_refuse(&cli, O_TAP, "only in tap mode (the mode is %s)", mode);
	if (o->mode != M_SOURCE && vqd_seen(com, O_SIZE))
		vqd_refuse(&cli, O_SIZE, "only in source mode, which makes the "
			   "frames (the mode is %s)", mode);
	if (o->mode != M_SOURCE && vqd_seen(com, O_COUNT))
		vqd_refuse(&cli, O_COUNT, "only in source mode (the mode is %s)", mode);
	if (o->mode != M_SINK && vqd_seen(com, O_COPY))
		vqd_refuse(&cli, O_COPY, "only in sink mode (the mode is %s)", mode);
	if (o->mode != M_TAP && vqd_seen(com, O_NO_OFFLOADS))
		vqd_refuse(&cli, O_NO_OFFLOADS, "only tap mode offers offloads "
			   "(the mode is %s)", mode);
	if (vqd_seen(com, O_TX_EVICT) && o->mode == M_SOURCE)
		vqd_refuse(&cli, O_TX_EVICT, "no effect in source mode: its TX "
			   "frames are counted, never read");
	if (vqd_seen(com, O_TX_EVICT) && o->mode == M_SINK && !o->copy)
		vqd_refuse(&cli, O_TX_EVICT, "no effect in sink mode without --copy: "
			   "the counting sink reads no frame");
	if (o->threads > o->pairs)
		vqd_refuse(&cli, O_THREADS, "%u threads for %u queue pair(s): a pair "
			   "is served by one thread", o->threads, o->pairs);
	vqd_check_cpus(&cli, O_CPU, o->ncpus, o->threads);
}

const struct vqd_cli *net_parse(int argc, char **argv, struct net_opts *o,
				struct vqd_opts *com)
{
	memset(o, 0, sizeof(*o));
	o->size = 64;
	o->pairs = 1;
	o->threads = 1;
	o->tx_evict = VQ_NET_TX_EVICT_AUTO;
	parse_state = (struct parse){ .o = o };
	vqd_parse(&cli, argc, argv, com);
	parse_mode_args(argc, argv, &parse_state);
	check_mode(o, com);
	return &cli;
}
