// SPDX-License-Identifier: MIT
/* virtq-perf net's command line (cli.h's convention): what each option
 * takes, and what the options mean together. */
#include <getopt.h>
#include <string.h>
#include <unistd.h>

#include <virtq/net.h>
#include <virtq/ring.h>

#include "net.h"
#include "perf.h"
#include "profile.h"
#include "tsc.h"

static void net_usage(FILE *f)
{
	fprintf(f,
"usage: virtq-perf net (--socket-path PATH | --backend CMD) [options]\n"
"  --socket-path PATH    the backend's vhost-user socket\n"
"  --backend CMD         start this backend: \"CMD --socket-path TMP\" through\n"
"                        /bin/sh; stopped at the end\n"
"  --backend-arg ARG     --backend: one more word for CMD (repeatable, up to\n"
"                        16; what 'virtq-perf ab' can vary)\n"
"  --used-batch N        --backend: its --used-batch (the device publishes\n"
"                        used entries every N; 1: each, 0: once per burst)\n"
"  --backend-busy-poll USEC  --backend: its --busy-poll\n"
"  --direction tx|rx|rr  we send, we receive, or request-response (tx)\n"
"  --size BYTES[K]       frame size without the virtio-net header (64);\n"
"                        in rx only with --verify, as the length expected\n"
"  --packed on|off       packed ring (off)\n"
"  --in-order on|off     VIRTIO_F_IN_ORDER (off)\n"
"  --event-idx on|off    VIRTIO_F_EVENT_IDX (on)\n"
"  --mrg-rxbuf on|off    VIRTIO_NET_F_MRG_RXBUF (on)\n"
"  --indirect on|off     VIRTIO_F_INDIRECT_DESC (off)\n"
"  --busy-poll USEC      poll this long for used buffers, then sleep on the\n"
"                        call eventfd; default: poll without sleeping\n"
"  --queue-size N        ring size (256)\n"
"  --burst N             tx, rx: frames per burst (32)\n"
"  --rate PPS            tx: offer this many frames a second, each sent when\n"
"                        its time comes (bursts of --burst at most), waiting\n"
"                        by polling; to compare back-ends' CPU per frame at\n"
"                        one load (default: as fast as the ring takes them)\n"
"  --seconds S           run time (5)\n"
"  --count N             stop after N frames (or transactions)\n"
"  --cpu N               pin to CPU N\n"
"  --peer-cpu N|off      the backend's CPU: probe the core-to-core latency\n"
"                        between it and --cpu before and after the run and\n"
"                        report the placement (default with --backend and\n"
"                        --cpu on a 2-CPU machine: the other CPU; the probe\n"
"                        runs while no backend is polling)\n"
"  --probe-every S       rr: probe the placement every S seconds of the run\n"
"                        too, with sending paused (1; 0: before and after)\n"
"  --rx-refill N         rr: give receive buffers back once N are taken,\n"
"                        together (1: after every answer)\n"
"  --rr-breakdown        rr: time each step of a transaction in cycles, on\n"
"                        our side, and what a poll's pieces cost\n"
"  --rr-clock tsc|monotonic\n"
"                        rr: what times each round trip (tsc where it ticks\n"
"                        at one rate on every CPU and, unpinned, the kernel's\n"
"                        clocksource is tsc; else monotonic)\n"
"  --hugetlb             guest memory on huge pages\n"
"  --verify              rx, rr: check every received frame's length and bytes;\n"
"                        with --iommu: fail on any IOTLB miss\n"
"  --dirty-log           switch on live-migration logging first, as QEMU does\n"
"                        when a migration starts; with --verify, check that\n"
"                        every byte the backend wrote into a receive buffer\n"
"                        lies in a page it marked before returning it; at\n"
"                        the end, with the rings stopped, every used-ring\n"
"                        page it changed must be marked too\n"
"  --iommu PAGE[K|M]     be a guest behind a vIOMMU: VIRTIO_F_ACCESS_PLATFORM,\n"
"                        rings and buffers at I/O virtual addresses, all\n"
"                        memory mapped up front in IOTLB entries of PAGE\n"
"                        bytes (a power of two >= 4096); the backend's\n"
"                        misses are counted (with --verify, any fails)\n"
"  --drop-kicks N        fault injection: send no kick for every Nth the\n"
"                        ring asks for (a driver whose barrier failed):\n"
"                        the backend must find those buffers on its own\n"
"  --profile default|crosvm|cloud-hypervisor\n"
"                        negotiate, read the config space and order the\n"
"                        set-up messages as that VMM's front-end does, and\n"
"                        print what was negotiated and read (default: ours)\n"
"  --json                one JSON object with ops_per_sec\n"
"  --help, --version\n");
}

enum {
	N_SOCK, N_BACKEND, N_BARG, N_UB, N_BBP, N_DIR, N_SIZE, N_PACKED,
	N_INORDER, N_EVIDX, N_MRG, N_INDIRECT, N_BP, N_QSIZE, N_BURST, N_SECS,
	N_COUNT, N_CPU, N_PEER, N_PEVERY, N_REFILL, N_RRBD, N_RRCLK, N_HUGE, N_VERIFY, N_DLOG, N_IOMMU, N_DROPK,
	N_PROFILE, N_RATE, N_JSON, N_LAST = N_JSON,
};

static const struct option net_long[] = {
	{ "socket-path", required_argument, NULL, N_SOCK },
	{ "backend", required_argument, NULL, N_BACKEND },
	{ "backend-arg", required_argument, NULL, N_BARG },
	{ "used-batch", required_argument, NULL, N_UB },
	{ "backend-busy-poll", required_argument, NULL, N_BBP },
	{ "direction", required_argument, NULL, N_DIR },
	{ "size", required_argument, NULL, N_SIZE },
	{ "packed", required_argument, NULL, N_PACKED },
	{ "in-order", required_argument, NULL, N_INORDER },
	{ "event-idx", required_argument, NULL, N_EVIDX },
	{ "mrg-rxbuf", required_argument, NULL, N_MRG },
	{ "indirect", required_argument, NULL, N_INDIRECT },
	{ "busy-poll", required_argument, NULL, N_BP },
	{ "queue-size", required_argument, NULL, N_QSIZE },
	{ "burst", required_argument, NULL, N_BURST },
	{ "seconds", required_argument, NULL, N_SECS },
	{ "count", required_argument, NULL, N_COUNT },
	{ "cpu", required_argument, NULL, N_CPU },
	{ "peer-cpu", required_argument, NULL, N_PEER },
	{ "probe-every", required_argument, NULL, N_PEVERY },
	{ "rx-refill", required_argument, NULL, N_REFILL },
	{ "rr-breakdown", no_argument, NULL, N_RRBD },
	{ "rr-clock", required_argument, NULL, N_RRCLK },
	{ "hugetlb", no_argument, NULL, N_HUGE },
	{ "verify", no_argument, NULL, N_VERIFY },
	{ "dirty-log", no_argument, NULL, N_DLOG },
	{ "iommu", required_argument, NULL, N_IOMMU },
	{ "drop-kicks", required_argument, NULL, N_DROPK },
	{ "profile", required_argument, NULL, N_PROFILE },
	{ "rate", required_argument, NULL, N_RATE },
	{ "json", no_argument, NULL, N_JSON },
	PERF_OPT_HELP, PERF_OPT_VERSION,
	{ NULL, 0, NULL, 0 },
};

static void net_defaults(struct net_opts *o)
{
	memset(o, 0, sizeof(*o));
	perf_backend_opts_init(&o->bo);
	o->dir = D_TX;
	o->size = 64;
	o->event_idx = o->mrg = true;
	o->busy_poll_us = -1;
	o->queue_size = 256;
	o->burst = 32;
	o->seconds = 5;
	o->cpu = o->peer_cpu = -1;
	o->probe_every = 1;
	o->rx_refill = 1;
}

/* One option's value into o. */
static void net_option(void *opts, int c, const char *name, const char *v)
{
	static const char *const dirs[] = { "tx", "rx", "rr", NULL };
	struct net_opts *o = opts;

	switch (c) {
	case N_SOCK: o->socket_path = v; break;
	case N_BACKEND: o->backend = v; break;
	case N_BARG: case N_UB: case N_BBP: perf_backend_opt(&o->bo, name, v); break;
	case N_DIR: o->dir = (enum net_dir)cli_choice(name, v, dirs); break;
	case N_SIZE: o->size = (unsigned)cli_size(name, v, VQ_NET_MIN_FRAME, NET_RXBUF - 12); break;
	case N_PACKED: o->packed = cli_onoff(name, v); break;
	case N_INORDER: o->in_order = cli_onoff(name, v); break;
	case N_EVIDX: o->event_idx = cli_onoff(name, v); break;
	case N_MRG: o->mrg = cli_onoff(name, v); break;
	case N_INDIRECT: o->indirect = cli_onoff(name, v); break;
	case N_BP: o->busy_poll_us = (int64_t)cli_u64(name, v, 0, 10000000); break;
	case N_QSIZE: o->queue_size = (unsigned)cli_u64(name, v, 2, 32768); break;
	case N_BURST: o->burst = (unsigned)cli_u64(name, v, 1, 256); break;
	case N_RATE: o->rate = cli_double(name, v, 1, 1e9); break;
	case N_SECS: o->seconds = cli_double(name, v, 1e-3, 86400); break;
	case N_COUNT: o->count = cli_u64(name, v, 1, UINT64_MAX); break;
	case N_CPU: o->cpu = cli_cpu(name, v); break;
	case N_PEER: o->peer_cpu = strcmp(v, "off") ? cli_cpu(name, v) : -1; break;
	case N_PEVERY: o->probe_every = v[0] == '0' && !v[1] ? 0 : cli_double(name, v, 0.01, 86400); break;
	case N_REFILL: o->rx_refill = (unsigned)cli_u64(name, v, 1, 32767); break;
	case N_RRBD: o->rr_breakdown = true; break;
	case N_RRCLK:
		if (!strcmp(v, "tsc"))
			o->rr_clock = RR_CLOCK_TSC;
		else if (!strcmp(v, "monotonic"))
			o->rr_clock = RR_CLOCK_MONOTONIC;
		else
			cli_usage_error("%s: '%s' is not tsc or monotonic", name, v);
		break;
	case N_HUGE: o->hugetlb = true; break;
	case N_VERIFY: o->verify = true; break;
	case N_DLOG: o->dirty_log = true; break;
	case N_IOMMU:
		o->iommu_page = cli_size(name, v, 4096, 1ull << 30);
		if (o->iommu_page & (o->iommu_page - 1))
			cli_usage_error("%s: '%s' is not a power of two", name, v);
		break;
	case N_DROPK: o->drop_kicks = (unsigned)cli_u64(name, v, 1, UINT32_MAX); break;
	case N_PROFILE: o->profile = perf_profile_parse(name, v); break;
	case N_JSON: o->json = true; break;
	}
}

#define GIVEN(o) (given & (1ull << (o)))

/* What the options mean together: refuse a conflict, or an option that
 * does nothing in the mode chosen. */
/* rr's counters: --rr-breakdown and --rr-clock tsc need one time line
 * (an unpinned thread may read two CPUs' counters); the default clock is
 * the TSC where it gives one. */
static void rr_check_clock(struct net_opts *o)
{
	static const char apart[] = "the CPUs' counters may disagree (the "
				    "kernel's clocksource is not tsc): pin with --cpu";
	bool invariant = perf_tsc_invariant();
	bool one_line = o->cpu >= 0 || perf_tsc_synced();

	if (o->rr_breakdown && !one_line)
		cli_usage_error("--rr-breakdown: %s", apart);
	if (o->rr_clock == RR_CLOCK_TSC && !invariant)
		cli_usage_error("--rr-clock tsc: this CPU's counter does not tick at "
				"one rate everywhere (no constant_tsc and nonstop_tsc)");
	if (o->rr_clock == RR_CLOCK_TSC && !one_line)
		cli_usage_error("--rr-clock tsc: %s", apart);
	if (o->rr_clock == RR_CLOCK_AUTO)
		o->rr_clock = invariant && one_line ? RR_CLOCK_TSC : RR_CLOCK_MONOTONIC;
}

static void net_check(struct net_opts *o, uint64_t given)
{
	if (!o->socket_path == !o->backend)
		cli_usage_error("give one of --socket-path and --backend");
	perf_backend_opts_check(&o->bo, o->backend);
	if (o->verify && o->dir == D_TX && !o->iommu_page)
		cli_usage_error("--verify: tx receives nothing to check (rx, rr; "
				"with --iommu, tx checks that no entry was missed)");
	if (GIVEN(N_SIZE) && o->dir == D_RX && !o->verify)
		cli_usage_error("--size: rx receives what the backend sends; the size "
				"is only what --verify expects");
	if (GIVEN(N_BURST) && o->dir == D_RR)
		cli_usage_error("--burst: rr sends one frame at a time");
	if (GIVEN(N_RATE) && o->dir != D_TX)
		cli_usage_error("--rate: only tx offers a load (rx takes what the backend "
				"sends, rr one frame per answer)");
	if (GIVEN(N_RATE) && GIVEN(N_DROPK))
		cli_usage_error("--rate: not with --drop-kicks (which sends a burst at a "
				"time and waits for it)");
	if (GIVEN(N_PEVERY) && o->dir != D_RR)
		cli_usage_error("--probe-every: only rr pauses to probe");
	if (GIVEN(N_REFILL) && o->dir != D_RR)
		cli_usage_error("--rx-refill: only rr refills by count (rx gives each "
				"--burst back)");
	if (GIVEN(N_RRBD) && o->dir != D_RR)
		cli_usage_error("--rr-breakdown: only rr has round trips");
	if (GIVEN(N_RRCLK) && o->dir != D_RR)
		cli_usage_error("--rr-clock: only rr has round trips to time");
	if (o->dir == D_RR)
		rr_check_clock(o);
	if (!vq_ring_num_valid(o->packed ? VQ_BIT(VQ_F_RING_PACKED) : 0, o->queue_size))
		cli_usage_error("--queue-size: a split ring's size is a power of two, "
				"not %u", o->queue_size);
	/* the answer in flight needs a buffer the refill has not withheld */
	if (GIVEN(N_REFILL) && o->rx_refill >= o->queue_size)
		cli_usage_error("--rx-refill: below --queue-size (%u), or the device "
				"is left without a receive buffer", o->queue_size);
	if (o->profile) {
		uint64_t ring = (o->packed ? VQ_BIT(VQ_F_RING_PACKED) : 0) |
				(o->in_order ? VQ_BIT(VQ_F_IN_ORDER) : 0) |
				(o->indirect ? VQ_BIT(VQ_F_INDIRECT_DESC) : 0);
		const char *no = perf_profile_refuses(o->profile, 1, ring);

		if (no)
			cli_usage_error("--profile %s: that VMM's front-end never negotiates %s",
					perf_profile_name(o->profile), no);
		if (o->iommu_page)
			cli_usage_error("--iommu: --profile %s sends no IOTLB updates",
					perf_profile_name(o->profile));
	}
	/* An external backend may be polling the peer CPU, which would
	 * starve the probe: only a backend we start and stop is probed by
	 * default. */
	if (!GIVEN(N_PEER) && o->backend && o->cpu >= 0 &&
	    sysconf(_SC_NPROCESSORS_ONLN) == 2)
		o->peer_cpu = o->cpu == 0 ? 1 : 0;
	if (o->peer_cpu >= 0 && o->cpu < 0)
		cli_usage_error("--peer-cpu: needs --cpu (the probe runs between the two)");
	if (o->peer_cpu >= 0 && o->peer_cpu == o->cpu)
		cli_usage_error("--peer-cpu: %d is --cpu itself", o->peer_cpu);
}

void net_parse(int argc, char **argv, struct net_opts *o)
{
	uint64_t given;

	net_defaults(o);
	given = perf_opts_parse(argc, argv, "net", ":", net_long, N_LAST + 1, net_usage,
				net_option, o);
	perf_opts_end(argc, argv);
	net_check(o, given);
}
