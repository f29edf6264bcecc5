/* SPDX-License-Identifier: MIT */
/* virtq-perf net: its options (net_opts.c), shared with the generator
 * (net.c). */
#ifndef VIRTQ_PERF_NET_H
#define VIRTQ_PERF_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"

/* Each receive buffer's bytes. */
#define NET_RXBUF 2048u

enum net_dir { D_TX, D_RX, D_RR };

struct net_opts {
	const char *socket_path;
	const char *backend;            /* a shell command */
	struct perf_backend_opts bo;    /* what it is given */
	enum net_dir dir;
	unsigned size;
	bool packed, in_order, event_idx, mrg, indirect;
	int64_t busy_poll_us;           /* -1: poll forever (never sleep) */
	unsigned queue_size;
	unsigned burst;
	double seconds;
	uint64_t count;
	int cpu;
	int peer_cpu;                   /* placement probe partner; -1: none */
	double probe_every;             /* rr: s between probes in the run; 0: none */
	unsigned rx_refill;             /* rr: receive buffers given back per batch */
	bool rr_breakdown;              /* rr: time each step of a transaction */
	enum { RR_CLOCK_AUTO, RR_CLOCK_TSC, RR_CLOCK_MONOTONIC } rr_clock;
	bool json;
	bool hugetlb;
	bool verify;
	bool dirty_log;
	uint64_t iommu_page;            /* --iommu: bytes per IOTLB entry */
	unsigned drop_kicks;            /* send no kick for every Nth owed */
	double rate;                    /* tx: frames a second offered; 0: all */
	unsigned profile;               /* --profile: enum vq_vhu_profile */
};

/* Parse argv into o; a bad command line is one line on stderr and exit 2,
 * --help and --version exit 0. */
void net_parse(int argc, char **argv, struct net_opts *o);

#endif
