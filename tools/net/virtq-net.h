/* SPDX-License-Identifier: MIT */
/*
 * virtq-net's command line (options.c), as the daemon (virtq-net.c) reads
 * it.
 */
#ifndef VIRTQ_TOOLS_NET_H
#define VIRTQ_TOOLS_NET_H

#include <stdbool.h>
#include <stdint.h>

#include <virtq/net.h>

#include "daemon.h"

#define MAX_PAIRS   64u
#define MAX_THREADS 64u

enum mode { M_SINK, M_SOURCE, M_LOOPBACK, M_TAP };
extern const char *const net_mode_names[];      /* by enum mode */

struct net_opts {
	enum mode mode;
	const char *tap_name;
	unsigned size;
	unsigned pairs;
	unsigned threads;
	bool no_mrg;
	bool no_announce;               /* do not offer GUEST_ANNOUNCE */
	bool no_offloads;               /* tap: do not offer checksum/TSO */
	bool copy;                      /* sink: copy each frame out */
	enum vq_net_tx_evict tx_evict;  /* --tx-evict */
	uint64_t count;                 /* source: frames to send in all (0: no limit) */
	int cpus[MAX_THREADS];
	unsigned ncpus;
};

/*
 * Parse the command line into *o and *com (the options every daemon
 * takes): a bad one, or an option without effect in the mode, ends the
 * program with one line and exit 2.  Returns the command line's
 * description, for the control loop.
 */
const struct vqd_cli *net_parse(int argc, char **argv, struct net_opts *o,
				struct vqd_opts *com);

#endif
