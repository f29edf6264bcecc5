/* SPDX-License-Identifier: MIT */
/* virtq-perf vsock: its options (vsock_opts.c), shared with the transfer
 * (vsock.c). */
#ifndef VIRTQ_PERF_VSOCK_OPTS_H
#define VIRTQ_PERF_VSOCK_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"

/* --conns at most (each is a file descriptor on both sides, and two for
 * a socket pair). */
#define VS_CONNS_MAX 1024u

struct vs_opts {
	const char *socket_path, *uds;
	const char *backend;            /* a shell command */
	struct perf_backend_opts bo;    /* what it is given */
	bool rx;                        /* host -> guest */
	bool latency;
	uint64_t bytes;
	double seconds;                 /* 0: --bytes decides */
	uint32_t buf_size;
	uint32_t rcvbuf, rcvlowat;
	bool rcvbuf_given;              /* unix: the sockets' buffers are set */
	unsigned queue_size;
	bool packed, event_idx;
	uint64_t iters;                 /* latency round trips */
	uint64_t cid;                   /* with --socket-path: expected CID (0: any) */
	bool json;
	bool seqpacket;                 /* --type seqpacket: whole messages */
	bool dirty_log;
	bool placement;                 /* probe CPUs 0 and 1 around the run */
	unsigned drop_kicks;            /* send no kick for every Nth owed */
	bool unix_socket;               /* --transport unix: the baseline */
	uint64_t busy_poll_us;          /* our own side polls this long first */
	unsigned conns;                 /* --conns: 0 = the one-connection run */
	unsigned stall;                 /* receivers not read until the others end */
	int cpu[2];                     /* --cpu: guest side, host program; -1: free */
	unsigned profile;               /* --profile: enum vq_vhu_profile */
	bool peer_guest;                /* --peer guest: the other end is a second
					 * guest of the backend, not a host program */
	const char *peer_socket;        /* --peer-socket-path: that guest's
					 * vhost-user socket */
};

/* Parse argv into o; a bad command line is one line on stderr and exit 2,
 * --help and --version exit 0. */
void vs_parse(int argc, char **argv, struct vs_opts *o);

#endif
