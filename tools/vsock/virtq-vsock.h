/* SPDX-License-Identifier: MIT */
/*
 * virtq-vsock's command line (options.c) and config file (config.c), as
 * the daemon (virtq-vsock.c) reads them.
 */
#ifndef VIRTQ_TOOLS_VSOCK_H
#define VIRTQ_TOOLS_VSOCK_H

#include <stdbool.h>
#include <stdint.h>

#include <virtq/framework.h>

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

/* VMs one daemon serves, and the group names they use (a bit each). */
#define VSOCK_VMS_MAX    64u
#define VSOCK_GROUPS_MAX 64u

/* One VM: its device (a vhost-user socket, a guest CID, a host side). */
struct vsock_vm {
	uint64_t cid;
	const char *socket;             /* the vhost-user socket (NULL: --fd) */
	const char *uds;                /* HOST_PATH */
	uint32_t buf_alloc;             /* 0: the device's default */
	uint64_t groups;                /* bits of vsock_opts.group */
	struct port_set host_ports;     /* host ports the guest may connect to */
	struct port_set guest_ports;    /* guest ports host programs may connect to */
	const char *where;              /* "--vm 2", "FILE:7": for messages */
};

struct vsock_opts {
	/* the single-VM form's flags, and what every VM starts from */
	uint64_t cid;
	const char *uds;
	uint32_t buf_alloc;             /* 0: the device's default */
	uint32_t max_conns;             /* 0: the device's default */
	bool no_seqpacket;
	struct port_set host_ports;
	struct port_set guest_ports;
	const char *groups;             /* the single VM's --groups */
	unsigned threads;               /* framework workers */
	unsigned cpus[VQ_FW_MAX_THREADS];       /* --cpu: worker k on cpus[k] */
	unsigned ncpus;
	/* the VMs, from the single-VM flags, --vm or --config */
	const char *vm_arg[VSOCK_VMS_MAX];
	unsigned nvm_arg;
	const char *config;
	bool print_config;
	bool sockets_per_vm;            /* --vm or --config: no --socket-path */
	struct vsock_vm vm[VSOCK_VMS_MAX];
	unsigned nvm;
	char *group[VSOCK_GROUPS_MAX];
	unsigned ngroups;
};

/* The host programs' seqpacket socket: HOST_PATH.seqpacket, and the same
 * listener's other name, HOST_PATH_seqpacket (Cloud Hypervisor's). */
#define VSOCK_SEQ_SUFFIX ".seqpacket"
#define VSOCK_SEQ_ALIAS  "_seqpacket"

/*
 * Parse the command line (and --config's file) into *o and *com (the
 * options every daemon takes): a bad one ends the program with one line
 * and exit 2.  --print-config prints the VMs and exits 0.  Returns the
 * command line's description, for the control loop.
 */
const struct vqd_cli *vsock_parse(int argc, char **argv, struct vsock_opts *o,
				  struct vqd_opts *com);

/* options.c, for config.c: set key of vm (a --vm key, or a config file's
 * key: '-' and '_' alike) to val (the VM keeps copies of what it needs);
 * where names it in a message. */
void vsock_vm_set(struct vsock_opts *o, struct vsock_vm *vm, const char *key,
		  const char *val, const char *where);
/* A new VM with the command line's defaults; where outlives it. */
struct vsock_vm *vsock_vm_add(struct vsock_opts *o, const char *where);

/* config.c: the VMs of a config file in vhost-device-vsock's YAML shape
 * (a "vms:" list of maps); an error names the line and key, exit 2. */
void vsock_config_read(struct vsock_opts *o, const char *path);

#endif
