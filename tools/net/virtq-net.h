/* SPDX-License-Identifier: MIT */
/*
 * virtq-net's parts: the device (virtq-net.c, with the TAP's queues in
 * tap.c), its command line (options.c), and main.c, which runs the
 * control loop and prints the statistics.
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
	uint8_t mac[6];                 /* --mac: the config space's */
	bool has_mac;                   /* offer VQ_NET_F_MAC */
	unsigned mtu;                   /* --mtu; 0: not given */
	unsigned cpus[MAX_THREADS];
	unsigned ncpus;
};

/* ---- the device (virtq-net.c) ---- */

struct net_dev;

/* Its totals since the start. */
struct net_stats {
	struct vqd_count c;
	uint64_t drops[VQ_NET_DROP_MAX];
	uint64_t evicted;
	uint64_t kicks_missed, calls_late;      /* see vq_rt_counters */
	uint64_t tx_gso, rx_gso;
	uint64_t queue_packets[2 * MAX_PAIRS];  /* by ring index */
	struct vqd_queue_count queue[2 * MAX_PAIRS];    /* by ring index */
	uint64_t rarp_sent;
	unsigned mtu;                           /* the guest's; 0: none told */
};

/* The device as the options say: in tap mode the TAP's queues, then the
 * workers and the framework device on them with its back-end.  0, or
 * -errno said on stderr; *out is freed with net_dev_free either way. */
int net_dev_new(const struct net_opts *o, const struct vqd_opts *com,
		struct net_dev **out);
struct vq_vhu_backend *net_dev_backend(const struct net_dev *d);
/* Read on each pair's worker. */
void net_dev_stats(struct net_dev *d, struct net_stats *s);
void net_dev_free(struct net_dev *d);

/* ---- the command line (options.c) ---- */

/*
 * Parse the command line into *o and *com (the options every daemon
 * takes): a bad one, or an option without effect in the mode, ends the
 * program with one line and exit 2.  Returns the command line's
 * description, for the control loop.
 */
const struct vqd_cli *net_parse(int argc, char **argv, struct net_opts *o,
				struct vqd_opts *com);

#endif
