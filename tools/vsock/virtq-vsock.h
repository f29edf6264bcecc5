/* SPDX-License-Identifier: MIT */
/*
 * virtq-vsock's command line (options.c), as the daemon (virtq-vsock.c)
 * reads it.
 */
#ifndef VIRTQ_TOOLS_VSOCK_H
#define VIRTQ_TOOLS_VSOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon.h"

struct vsock_opts {
	uint64_t cid;
	const char *uds;
	uint32_t buf_alloc;             /* 0: the device's default */
	uint32_t max_conns;             /* 0: the device's default */
	bool no_seqpacket;
};

/* The host programs' seqpacket socket: HOST_PATH.seqpacket, and the same
 * listener's other name, HOST_PATH_seqpacket (Cloud Hypervisor's). */
#define VSOCK_SEQ_SUFFIX ".seqpacket"
#define VSOCK_SEQ_ALIAS  "_seqpacket"

/*
 * Parse the command line into *o and *com (the options every daemon
 * takes): a bad one ends the program with one line and exit 2.  Returns
 * the command line's description, for the control loop.
 */
const struct vqd_cli *vsock_parse(int argc, char **argv, struct vsock_opts *o,
				  struct vqd_opts *com);

#endif
