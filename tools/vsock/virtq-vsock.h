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

/* Ports a policy lets through: every port unless restricted, else those
 * in the ranges (none: nothing). */
#define PORT_RANGES_MAX 64u
struct port_set {
	bool restricted;
	unsigned n;
	struct { uint32_t lo, hi; } r[PORT_RANGES_MAX];
};

bool port_set_has(const struct port_set *s, uint32_t port);

struct vsock_opts {
	uint64_t cid;
	const char *uds;
	uint32_t buf_alloc;             /* 0: the device's default */
	uint32_t max_conns;             /* 0: the device's default */
	bool no_seqpacket;
	struct port_set host_ports;     /* host ports a guest may connect to */
	struct port_set guest_ports;    /* guest ports host programs may connect to */
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
