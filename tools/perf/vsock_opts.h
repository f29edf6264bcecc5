/* SPDX-License-Identifier: MIT */
/* virtq-perf vsock: its options (vsock_opts.c), shared with the transfer
 * (vsock.c). */
#ifndef VIRTQ_PERF_VSOCK_OPTS_H
#define VIRTQ_PERF_VSOCK_OPTS_H

#include <stdbool.h>
#include <stdint.h>

/* Words --backend-arg may append. */
#define VS_MAX_BACKEND_ARGS 16

struct vs_opts {
	const char *socket_path, *uds, *backend;
	const char *backend_arg[VS_MAX_BACKEND_ARGS];
	unsigned nbackend_arg;
	int64_t used_batch;             /* the backend's; -1: its default */
	int64_t backend_busy_poll;      /* the backend's; -1: its default */
	bool rx;                        /* host -> guest */
	bool latency;
	uint64_t bytes;
	double seconds;                 /* 0: --bytes decides */
	uint32_t buf_size;
	uint32_t rcvbuf, rcvlowat;
	unsigned queue_size;
	bool packed, event_idx;
	uint64_t iters;                 /* latency round trips */
	uint64_t cid;                   /* with --socket-path: expected CID (0: any) */
	bool json;
	bool seqpacket;                 /* --type seqpacket: whole messages */
	bool dirty_log;
	bool placement;                 /* probe CPUs 0 and 1 around the run */
	unsigned drop_kicks;            /* send no kick for every Nth owed */
};

/* Parse argv into o; a bad command line is one line on stderr and exit 2,
 * --help and --version exit 0. */
void vs_parse(int argc, char **argv, struct vs_opts *o);

#endif
