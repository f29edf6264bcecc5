// SPDX-License-Identifier: MIT
/* virtq-perf vsock's command line (cli.h's convention): what each option
 * takes, and what the options mean together. */
#include <getopt.h>
#include <string.h>

#include <virtq/ring.h>
#include <virtq/vsock.h>

#include "perf.h"
#include "profile.h"
#include "vsock_check.h"
#include "vsock_opts.h"

static void vs_usage(FILE *f)
{
	fprintf(f,
"usage: virtq-perf vsock (--socket-path PATH --uds-path HOST_PATH | --backend CMD) [options]\n"
"       virtq-perf vsock --peer guest (--socket-path PATH --peer-socket-path PATH |\n"
"                        --backend CMD) [options]\n"
"       virtq-perf vsock --transport unix [options]\n"
"Both ends of a vsock transfer around a vhost-user-vsock backend: the guest\n"
"(our front-end and virtio-vsock driver) and the host program (on the\n"
"backend's UNIX sockets).  Checks byte count and checksum of every transfer.\n"
"  --transport vsock|unix  vsock (default), or the baseline: the same transfer\n"
"                        between the same two threads over a UNIX socket pair\n"
"  --socket-path PATH    the backend's vhost-user socket\n"
"  --uds-path HOST_PATH  the backend's host side (its --uds-path)\n"
"  --backend CMD         start this backend instead: \"CMD --socket-path TMP\n"
"                        --uds-path TMP ...\" through /bin/sh; stopped after\n"
"  --backend-arg ARG     --backend: one more word for CMD (repeatable)\n"
"  --peer host|guest     the other end: a host program on the backend's UNIX\n"
"                        sockets (default), or a second guest of the same\n"
"                        backend (sibling vsock, ring to ring)\n"
"  --peer-socket-path PATH  --peer guest: the second guest's vhost-user socket\n"
"                        (its VM must share a group with the first's)\n"
"  --used-batch N        --backend: its --used-batch (RX: the device publishes\n"
"                        used entries every N; 1: each, 0: once per burst)\n"
"  --backend-busy-poll USEC  --backend: its --busy-poll\n"
"  --direction rx|tx     rx: host -> guest (default); tx: guest -> host\n"
"                        (--peer guest: the second guest is the host's side)\n"
"  --bytes N[K|M|G]      bytes to transfer (64M)\n"
"  --seconds S           transfer for S seconds instead of --bytes\n"
"  --buf-size N[K|M]     sender's write size (64K)\n"
"  --rcvbuf N[K|M]       guest receive buffer (buf_alloc) per connection (256K)\n"
"  --rcvlowat N[K|M]     stream: the guest reads only when N bytes are queued (1)\n"
"  --type stream|seqpacket  SOCK_STREAM (default) or SOCK_SEQPACKET: --buf-size\n"
"                        messages, each checked whole, in order, exact length\n"
"  --latency             ping-pong of --buf-size messages, percentiles\n"
"  --busy-poll USEC      our side (guest rings, host thread's sockets) polls\n"
"                        this long before it sleeps (0)\n"
"  --conns N             N concurrent streams (1 to 1024), --bytes shared\n"
"                        among them; per-connection rates and fairness\n"
"  --stall K             --conns: the receiver reads nothing from K of them\n"
"                        until the others have ended\n"
"  --cpu G,H             pin the guest side to CPU G, the host program (or\n"
"                        the second guest) to H\n"
"                        (may be the same; a backend we start is not pinned)\n"
"  --iters N             --latency: round trips (10000)\n"
"  --queue-size N        ring size (256)\n"
"  --packed on|off --event-idx on|off   ring features asked for (off, on)\n"
"  --cid N               with --socket-path: the guest CID to expect\n"
"  --placement on|off    probe the c2c latency of CPUs 0 and 1 before and after\n"
"                        (the vCPUs' placement, for virtq-perf ab) (off)\n"
"  --dirty-log           live-migration logging on first, as QEMU does; at the\n"
"                        end every page the backend wrote must be marked\n"
"  --drop-kicks N        fault injection: send no kick for every Nth the\n"
"                        ring asks for (a driver whose barrier failed)\n"
"  --profile default|crosvm|cloud-hypervisor\n"
"                        negotiate, read the config space and order the\n"
"                        set-up messages as that VMM's front-end does, and\n"
"                        print what was negotiated and read (default: ours)\n"
"  --json                one JSON object (\"ops_per_sec\" = bytes/s)\n"
"  --help, --version\n");
}

enum {
	V_SOCK, V_UDS, V_BACKEND, V_BARG, V_UB, V_BBP, V_DIR, V_BYTES, V_SECS,
	V_BUF, V_RCVBUF, V_LOWAT, V_TYPE, V_LAT, V_ITERS, V_QSIZE, V_PACKED,
	V_EVIDX, V_CID, V_PLACE, V_DLOG, V_DROPK, V_JSON, V_TRANSPORT, V_BP, V_CONNS,
	V_STALL, V_CPU, V_PROFILE, V_PEER, V_PEER_SOCK, V_LAST = V_PEER_SOCK,
};

static const struct option vs_long[] = {
	{ "socket-path", required_argument, NULL, V_SOCK },
	{ "uds-path", required_argument, NULL, V_UDS },
	{ "backend", required_argument, NULL, V_BACKEND },
	{ "backend-arg", required_argument, NULL, V_BARG },
	{ "used-batch", required_argument, NULL, V_UB },
	{ "backend-busy-poll", required_argument, NULL, V_BBP },
	{ "direction", required_argument, NULL, V_DIR },
	{ "bytes", required_argument, NULL, V_BYTES },
	{ "seconds", required_argument, NULL, V_SECS },
	{ "buf-size", required_argument, NULL, V_BUF },
	{ "rcvbuf", required_argument, NULL, V_RCVBUF },
	{ "rcvlowat", required_argument, NULL, V_LOWAT },
	{ "type", required_argument, NULL, V_TYPE },
	{ "latency", no_argument, NULL, V_LAT },
	{ "iters", required_argument, NULL, V_ITERS },
	{ "queue-size", required_argument, NULL, V_QSIZE },
	{ "packed", required_argument, NULL, V_PACKED },
	{ "event-idx", required_argument, NULL, V_EVIDX },
	{ "cid", required_argument, NULL, V_CID },
	{ "placement", required_argument, NULL, V_PLACE },
	{ "dirty-log", no_argument, NULL, V_DLOG },
	{ "drop-kicks", required_argument, NULL, V_DROPK },
	{ "json", no_argument, NULL, V_JSON },
	{ "transport", required_argument, NULL, V_TRANSPORT },
	{ "busy-poll", required_argument, NULL, V_BP },
	{ "conns", required_argument, NULL, V_CONNS },
	{ "stall", required_argument, NULL, V_STALL },
	{ "cpu", required_argument, NULL, V_CPU },
	{ "profile", required_argument, NULL, V_PROFILE },
	{ "peer", required_argument, NULL, V_PEER },
	{ "peer-socket-path", required_argument, NULL, V_PEER_SOCK },
	PERF_OPT_HELP, PERF_OPT_VERSION,
	{ NULL, 0, NULL, 0 },
};

static void vs_defaults(struct vs_opts *o)
{
	memset(o, 0, sizeof(*o));
	perf_backend_opts_init(&o->bo);
	o->rx = true;
	o->bytes = 64ull << 20;
	o->buf_size = 65536;
	o->rcvbuf = 256 * 1024;
	o->rcvlowat = 1;
	o->queue_size = 256;
	o->event_idx = true;
	o->iters = 10000;
	o->cpu[0] = o->cpu[1] = -1;
}

/* One option's value into o. */
static void vs_option(void *opts, int c, const char *name, const char *v)
{
	static const char *const dirs[] = { "tx", "rx", NULL };
	static const char *const types[] = { "stream", "seqpacket", NULL };
	static const char *const transports[] = { "vsock", "unix", NULL };
	static const char *const peers[] = { "host", "guest", NULL };
	struct vs_opts *o = opts;

	switch (c) {
	case V_SOCK: o->socket_path = v; break;
	case V_UDS: o->uds = v; break;
	case V_BACKEND: o->backend = v; break;
	case V_BARG: case V_UB: case V_BBP: perf_backend_opt(&o->bo, name, v); break;
	case V_DIR: o->rx = cli_choice(name, v, dirs); break;
	case V_BYTES: o->bytes = cli_size(name, v, 1, UINT64_MAX >> 1); break;
	case V_SECS: o->seconds = cli_double(name, v, 1e-3, 86400); break;
	case V_BUF: o->buf_size = (uint32_t)cli_size(name, v, 1, 16u << 20); break;
	case V_RCVBUF:
		o->rcvbuf = (uint32_t)cli_size(name, v, 4096, 64u << 20);
		o->rcvbuf_given = true;
		break;
	case V_LOWAT: o->rcvlowat = (uint32_t)cli_size(name, v, 1, 64u << 20); break;
	case V_TYPE: o->seqpacket = cli_choice(name, v, types); break;
	case V_LAT: o->latency = true; break;
	case V_ITERS: o->iters = cli_u64(name, v, 1, 100000000); break;
	case V_QSIZE: o->queue_size = (unsigned)cli_u64(name, v, 16, 32768); break;
	case V_PACKED: o->packed = cli_onoff(name, v); break;
	case V_EVIDX: o->event_idx = cli_onoff(name, v); break;
	/* CIDs 0-2 are the hypervisor's and the host's; -1U is "any" */
	case V_CID: o->cid = cli_u64(name, v, 3, UINT32_MAX - 1); break;
	case V_PLACE: o->placement = cli_onoff(name, v); break;
	case V_DLOG: o->dirty_log = true; break;
	case V_DROPK: o->drop_kicks = (unsigned)cli_u64(name, v, 1, UINT32_MAX); break;
	case V_JSON: o->json = true; break;
	case V_TRANSPORT: o->unix_socket = cli_choice(name, v, transports); break;
	case V_BP: o->busy_poll_us = cli_u64(name, v, 0, 10000000); break;
	case V_CONNS: o->conns = (unsigned)cli_u64(name, v, 1, VS_CONNS_MAX); break;
	case V_STALL: o->stall = (unsigned)cli_u64(name, v, 1, VS_CONNS_MAX - 1); break;
	case V_CPU: perf_cpu_pair(name, v, o->cpu, false); break;
	case V_PROFILE: o->profile = perf_profile_parse(name, v); break;
	case V_PEER: o->peer_guest = cli_choice(name, v, peers); break;
	case V_PEER_SOCK: o->peer_socket = v; break;
	}
}

#define GIVEN(o) (given & (1ull << (o)))

/* The UNIX socket pair has no backend, rings nor guest memory: what
 * only the vsock transport takes is refused. */
static void vs_check_unix(const struct vs_opts *o, uint64_t given)
{
	static const int vsock_only[] = {
		V_SOCK, V_UDS, V_BACKEND, V_BARG, V_UB, V_BBP, V_QSIZE, V_PACKED,
		V_EVIDX, V_CID, V_DLOG, V_DROPK, V_PROFILE, V_PEER_SOCK,
	};

	for (unsigned i = 0; i < sizeof(vsock_only) / sizeof(vsock_only[0]); i++)
		if (GIVEN(vsock_only[i]))
			cli_usage_error("--%s: --transport unix has no backend, rings "
					"or guest memory", vs_long[vsock_only[i]].name);
	/* SO_RCVLOWAT holds only a blocking read back */
	if (o->rcvlowat > 1 && (o->conns || o->busy_poll_us))
		cli_usage_error("--rcvlowat: with --transport unix and %s the reads do "
				"not block, and SO_RCVLOWAT binds only blocking ones",
				o->conns ? "--conns" : "--busy-poll");
}

/* Where the backend is: one of the two ways, and what only --backend
 * or only --socket-path takes. */
static void vs_check_backend(const struct vs_opts *o, uint64_t given)
{
	if (o->unix_socket && o->peer_guest)
		cli_usage_error("--peer guest: two guests need a backend between "
				"them, not --transport unix");
	if (o->unix_socket) {
		vs_check_unix(o, given);
		return;
	}
	if (o->backend && (o->socket_path || o->uds || o->peer_socket))
		cli_usage_error("--backend: it makes its own sockets; give it or "
				"--socket-path and --uds-path");
	/* --peer-socket-path is taken with --peer host and --uds-path with
	 * --peer guest, unused, so that one command line serves both sides
	 * of a virtq-perf ab run on a daemon already running. */
	if (!o->backend && o->peer_guest && !(o->socket_path && o->peer_socket))
		cli_usage_error("--peer guest: give --backend, or --socket-path and "
				"--peer-socket-path");
	if (o->peer_guest && o->socket_path && o->peer_socket &&
	    !strcmp(o->socket_path, o->peer_socket))
		cli_usage_error("--peer-socket-path: the second guest's VM is another "
				"socket than --socket-path");
	if (!o->backend && !o->peer_guest && !(o->socket_path && o->uds))
		cli_usage_error("give --backend, or --socket-path and --uds-path");
	perf_backend_opts_check(&o->bo, o->backend);
	if (o->profile) {
		uint64_t ring = (o->packed ? VQ_BIT(VQ_F_RING_PACKED) : 0) |
				(o->seqpacket ? VQ_BIT(VQ_VSOCK_F_SEQPACKET) : 0);
		const char *no = perf_profile_refuses(o->profile, 19, ring);

		if (no)
			cli_usage_error("--profile %s: that VMM's front-end never negotiates %s",
					perf_profile_name(o->profile), no);
	}
	if (o->backend && GIVEN(V_CID))
		cli_usage_error("--cid: a backend we start gets CID 3; --cid checks one "
				"at --socket-path");
}

/* What the transfer options mean together. */
static void vs_check_transfer(const struct vs_opts *o, uint64_t given)
{
	if (GIVEN(V_SECS) && GIVEN(V_BYTES))
		cli_usage_error("--seconds and --bytes: give one length");
	if (o->latency && (GIVEN(V_SECS) || GIVEN(V_BYTES) || GIVEN(V_DIR)))
		cli_usage_error("--%s: --latency runs --iters round trips, host first",
				vs_long[GIVEN(V_SECS) ? V_SECS : GIVEN(V_BYTES) ? V_BYTES : V_DIR].name);
	if (!o->latency && GIVEN(V_ITERS))
		cli_usage_error("--iters: only with --latency");
	if (!vq_ring_num_valid(o->packed ? VQ_BIT(VQ_F_RING_PACKED) : 0, o->queue_size))
		cli_usage_error("--queue-size: a split ring's size is a power of two, "
				"not %u", o->queue_size);
	if (o->rcvlowat > o->rcvbuf)
		cli_usage_error("--rcvlowat: %u is more than --rcvbuf %u", o->rcvlowat,
				o->rcvbuf);
	if (o->latency && o->buf_size > o->rcvbuf)
		cli_usage_error("--buf-size: a latency message (%u) must fit --rcvbuf %u",
				o->buf_size, o->rcvbuf);
	/* The ping-pong's pinger and the many streams' senders are host
	 * programs; the guest side plays only one connection's ends. */
	if (o->peer_guest && (o->latency || o->conns))
		cli_usage_error("--peer guest: one stream or seqpacket transfer, "
				"without %s", o->latency ? "--latency" : "--conns");
	if (o->conns && (o->latency || o->seqpacket || o->dirty_log))
		cli_usage_error("--conns: streams only, without %s",
				o->latency ? "--latency" : o->seqpacket ? "--type seqpacket" :
				"--dirty-log");
	if (GIVEN(V_STALL) && !o->conns)
		cli_usage_error("--stall: only with --conns");
	if (GIVEN(V_STALL) && o->stall >= o->conns)
		cli_usage_error("--stall: %u of --conns %u: some connection must run",
				o->stall, o->conns);
	if (!o->seqpacket)
		return;
	/* Each message carries its number and checksum. */
	if (o->buf_size < VS_MSG_HDR)
		cli_usage_error("--buf-size: a seqpacket message needs at least %u bytes",
				VS_MSG_HDR);
	/* The guest holds a message until it is whole (as Linux). */
	if (o->buf_size > o->rcvbuf)
		cli_usage_error("--buf-size: a seqpacket message (%u) must fit --rcvbuf %u",
				o->buf_size, o->rcvbuf);
	if (GIVEN(V_LOWAT))
		cli_usage_error("--rcvlowat: applies to streams; a seqpacket message "
				"is read whole");
}

void vs_parse(int argc, char **argv, struct vs_opts *o)
{
	uint64_t given;

	vs_defaults(o);
	given = perf_opts_parse(argc, argv, "vsock", ":", vs_long, V_LAST + 1, vs_usage,
				vs_option, o);
	perf_opts_end(argc, argv);
	vs_check_backend(o, given);
	vs_check_transfer(o, given);
}
