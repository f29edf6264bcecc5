// SPDX-License-Identifier: MIT
/*
 * virtq-vsock's command line (virtq-vsock.h), following cli.h.  One VM
 * by the flags (--guest-cid, --uds-path, --socket-path or --fd), or many,
 * each by a --vm or an entry of --config's file, written as
 * vhost-device-vsock's users write them: the same keys (guest-cid,
 * socket, uds-path, tx-buffer-size, queue-size, groups; '_' or '-'), so a
 * command line or a config file moves over unchanged.  Both forms go
 * through vsock_vm_set, one key at a time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "virtq-vsock.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: virtq-vsock (--socket-path PATH | --fd N) --guest-cid N --uds-path HOST_PATH [options]\n"
"       virtq-vsock --vm guest-cid=N,socket=PATH,uds-path=HOST_PATH[,KEY=VALUE...]... [options]\n"
"       virtq-vsock --config FILE [options]\n"
"       virtq-vsock --print-capabilities | --help | --version\n"
"A vhost-user-vsock backend.  Guest connections to CID 2 port P go to the\n"
"UNIX socket HOST_PATH_P (SOCK_STREAM, or SOCK_SEQPACKET for a guest\n"
"SOCK_SEQPACKET socket); host programs connect to HOST_PATH (or, with\n"
"SOCK_SEQPACKET, to HOST_PATH.seqpacket or HOST_PATH_seqpacket) and send\n"
"\"CONNECT <port>\\n\", answered \"OK <host_port>\\n\" (docs/virtq-vsock.md).\n"
"Guests of one daemon reach each other's CIDs directly when their VMs\n"
"share a group.\n"
VQD_USAGE_SOCKET
"                        (also for HOST_PATH and its seqpacket sockets)\n"
"  --guest-cid N         the guest's CID (>= 3), given to the front-end in\n"
"                        the config space (GET_CONFIG)\n"
"  --uds-path HOST_PATH  the host side (see above); a live socket there is\n"
"                        refused, a stale one replaced\n"
"  --groups A+B          the VM's groups (default: default)\n"
"  --vm KEYS             one VM of several, in vhost-device-vsock's form:\n"
"                        guest-cid=N (3), socket=PATH, uds-path=HOST_PATH,\n"
"                        groups=A+B (default), tx-buffer-size=BYTES (the\n"
"                        --buf-alloc), queue-size=N (any size is served),\n"
"                        host-ports=LIST, guest-ports=LIST (items joined\n"
"                        by +); repeat for each VM\n"
"  --config FILE         the VMs from a YAML file of vhost-device-vsock's\n"
"                        shape: a \"vms:\" list of maps of the same keys\n"
"  --print-config        print the VMs as the daemon would run them, one\n"
"                        --vm line each, and exit\n"
"  --threads N           worker threads for the VMs' rings (1)\n"
"  --cpu LIST            pin worker threads to these CPUs (comma list, at most\n"
"                        one per thread): beside the guest's vCPU, its buffers\n"
"                        stay in one cache\n"
"  --used-batch N        RX: publish used entries every N (1: each on its\n"
"                        own; 0: once per burst, the default)\n"
VQD_USAGE_POLL
"  --buf-alloc BYTES     receive buffer per connection we advertise\n"
"                        (256K; K, M, G accepted)\n"
"  --max-conns N         connections at most, per VM (1024)\n"
"  --host-ports LIST     host ports the guest may connect to: ports and\n"
"                        ranges (22,8000-8099), none or all; a refused one\n"
"                        is reset at once and counted (default: all)\n"
"  --guest-ports LIST    guest ports host programs may CONNECT to, the same\n"
"                        way (none: the guest only connects out)\n"
"  --no-packed --no-event-idx --no-indirect --no-in-order --no-seqpacket\n"
"                        stop offering that feature\n"
VQD_USAGE_STATS);
}

enum {
	O_CID = VQD_O_TOOL, O_UDS, O_BUF_ALLOC, O_MAX_CONNS, O_NO_SEQPACKET,
	O_HOST_PORTS, O_GUEST_PORTS, O_VM, O_CONFIG, O_PRINT_CONFIG, O_GROUPS,
	O_THREADS, O_CPU, O_QUEUE_SIZE,
};

static const struct option long_opts[] = {
	{ "guest-cid", required_argument, NULL, O_CID },
	{ "uds-path", required_argument, NULL, O_UDS },
	{ "buf-alloc", required_argument, NULL, O_BUF_ALLOC },
	{ "max-conns", required_argument, NULL, O_MAX_CONNS },
	{ "no-seqpacket", no_argument, NULL, O_NO_SEQPACKET },
	{ "host-ports", required_argument, NULL, O_HOST_PORTS },
	{ "guest-ports", required_argument, NULL, O_GUEST_PORTS },
	{ "vm", required_argument, NULL, O_VM },
	{ "config", required_argument, NULL, O_CONFIG },
	{ "print-config", no_argument, NULL, O_PRINT_CONFIG },
	{ "groups", required_argument, NULL, O_GROUPS },
	{ "threads", required_argument, NULL, O_THREADS },
	{ "cpu", required_argument, NULL, O_CPU },
	/* vhost-device-vsock's names of the single-VM flags */
	{ "socket", required_argument, NULL, VQD_O_SOCKET_PATH },
	{ "tx-buffer-size", required_argument, NULL, O_BUF_ALLOC },
	{ "queue-size", required_argument, NULL, O_QUEUE_SIZE },
	{ NULL, 0, NULL, 0 },
};

bool port_set_has(const struct port_set *s, uint32_t port)
{
	if (!s->restricted)
		return true;
	for (unsigned i = 0; i < s->n; i++)
		if (port >= s->r[i].lo && port <= s->r[i].hi)
			return true;
	return false;
}

/* "all", "none", or "P" and "LO-HI" items joined by commas (or '+',
 * which a --vm key's value needs): decimal vsock ports (32 bits; 2^32-1
 * is VMADDR_PORT_ANY, no port of a connection). */
static void parse_ports(const char *opt, const char *val, struct port_set *s)
{
	const char *p = val;

	memset(s, 0, sizeof(*s));
	if (!strcmp(val, "all"))
		return;
	s->restricted = true;
	if (!strcmp(val, "none"))
		return;
	for (;;) {
		size_t n = strcspn(p, ",+"), dash;
		char item[24], *hi;

		if (n == 0 || n >= sizeof(item))
			cli_usage_error("%s: '%s' is not a list of ports and ranges "
					"(e.g. 22,8000-8099) or none", opt, val);
		if (s->n == PORT_RANGES_MAX)
			cli_usage_error("%s: more than %u ports and ranges", opt, PORT_RANGES_MAX);
		memcpy(item, p, n);
		item[n] = '\0';
		dash = strcspn(item, "-");
		hi = item[dash] ? item + dash + 1 : item;
		item[dash] = '\0';
		s->r[s->n].lo = (uint32_t)cli_u64(opt, item, 0, 0xfffffffeull);
		s->r[s->n].hi = (uint32_t)cli_u64(opt, hi, 0, 0xfffffffeull);
		if (s->r[s->n].lo > s->r[s->n].hi)
			cli_usage_error("%s: the range %u-%u runs backwards", opt,
					s->r[s->n].lo, s->r[s->n].hi);
		s->n++;
		if (!p[n])
			break;
		p += n + 1;
	}
}

/* "A+B": the bits of the groups named, each name given its bit at its
 * first sight (as vhost-device-vsock, any name but an empty one). */
static uint64_t parse_groups(struct vsock_opts *o, const char *opt, const char *val)
{
	uint64_t bits = 0;
	const char *p = val;

	for (;;) {
		size_t n = strcspn(p, "+");
		unsigned g;

		if (n == 0 || strcspn(p, " \t,") < n)
			cli_usage_error("%s: '%s' is not a list of group names joined by +",
					opt, val);
		for (g = 0; g < o->ngroups; g++)
			if (strlen(o->group[g]) == n && !strncmp(o->group[g], p, n))
				break;
		if (g == o->ngroups) {
			if (g == VSOCK_GROUPS_MAX)
				cli_usage_error("%s: more than %u group names in all", opt,
						VSOCK_GROUPS_MAX);
			o->group[g] = strndup(p, n);
			if (!o->group[g])
				cli_usage_error("%s: out of memory", opt);
			o->ngroups++;
		}
		bits |= 1ull << g;
		if (!p[n])
			return bits;
		p += n + 1;
	}
}

/* A UNIX socket path of a VM's, the VM's own copy (the room for
 * HOST_PATH's seqpacket names is checked with the others, check_uds). */
static const char *vm_path(const char *opt, const char *val)
{
	size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
	char *p;

	if (!*val)
		cli_usage_error("%s: needs a path", opt);
	if (strlen(val) > max)
		cli_usage_error("%s: '%s' is longer than %zu bytes, the most a "
				"UNIX socket path holds", opt, val, max);
	p = strdup(val);
	if (!p)
		cli_usage_error("%s: out of memory", opt);
	return p;
}

/* key in a --vm or a config file: '_' and '-' are one. */
static bool key_is(const char *key, const char *name)
{
	for (; *key && *name; key++, name++)
		if (*key != *name && !(*key == '_' && *name == '-'))
			return false;
	return !*key && !*name;
}

struct vsock_vm *vsock_vm_add(struct vsock_opts *o, const char *where)
{
	struct vsock_vm *vm;

	if (o->nvm == VSOCK_VMS_MAX)
		cli_usage_error("%s: more than %u VMs", where, VSOCK_VMS_MAX);
	vm = &o->vm[o->nvm++];
	*vm = (struct vsock_vm){
		.cid = 3,       /* vhost-device-vsock's default */
		.buf_alloc = o->buf_alloc, .host_ports = o->host_ports,
		.guest_ports = o->guest_ports, .where = where,
	};
	return vm;
}

void vsock_vm_set(struct vsock_opts *o, struct vsock_vm *vm, const char *key,
		  const char *val, const char *where)
{
	char opt[192];

	snprintf(opt, sizeof(opt), "%s: %s", where, key);
	if (key_is(key, "guest-cid"))
		vm->cid = cli_u64(opt, val, 3, 0xfffffffeull);
	else if (key_is(key, "socket"))
		vm->socket = vm_path(opt, val);
	else if (key_is(key, "uds-path"))
		vm->uds = vm_path(opt, val);
	else if (key_is(key, "tx-buffer-size"))
		vm->buf_alloc = (uint32_t)cli_size(opt, val, 4096, 1u << 30);
	else if (key_is(key, "queue-size"))
		cli_u64(opt, val, 1, 32768);    /* the front-end picks; any is served */
	else if (key_is(key, "groups"))
		vm->groups = parse_groups(o, opt, val);
	else if (key_is(key, "host-ports"))
		parse_ports(opt, val, &vm->host_ports);
	else if (key_is(key, "guest-ports"))
		parse_ports(opt, val, &vm->guest_ports);
	else if (key_is(key, "forward-cid") || key_is(key, "forward-listen"))
		cli_usage_error("%s: vhost-device-vsock's AF_VSOCK forwarding is not "
				"served here; give the VM a uds-path", opt);
	else
		cli_usage_error("%s: not a key of a VM (guest-cid, socket, uds-path, "
				"groups, tx-buffer-size, queue-size, host-ports, "
				"guest-ports)", opt);
}

/* One --vm: KEY=VALUE items joined by commas (vhost-device-vsock's). */
static void parse_vm(struct vsock_opts *o, const char *arg, const char *where)
{
	struct vsock_vm *vm = vsock_vm_add(o, where);
	char *s = strdup(arg), *item, *save = NULL;

	if (!s)
		cli_usage_error("%s: out of memory", where);
	for (item = strtok_r(s, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');

		if (!eq || eq == item)
			cli_usage_error("%s: '%s' is not KEY=VALUE", where, item);
		*eq = '\0';
		vsock_vm_set(o, vm, item, eq + 1, where);
	}
	free(s);
}

/* One of virtq-vsock's own options (vqd_cli.opt). */
static void tool_opt(void *arg, int c, const char *val)
{
	struct vsock_opts *o = arg;

	switch (c) {
	case O_CID:
		/* 0-2 are the hypervisor, local and host; 2^32-1 is "any". */
		o->cid = cli_u64("--guest-cid", val, 3, 0xfffffffeull);
		break;
	case O_UDS:
		if (!*val)
			cli_usage_error("--uds-path: needs a path");
		o->uds = val;
		break;
	case O_BUF_ALLOC:
		o->buf_alloc = (uint32_t)cli_size("--buf-alloc", val, 4096, 1u << 30);
		break;
	case O_MAX_CONNS:
		o->max_conns = (uint32_t)cli_u64("--max-conns", val, 1, 1u << 20);
		break;
	case O_NO_SEQPACKET:
		o->no_seqpacket = true;
		break;
	case O_HOST_PORTS: parse_ports("--host-ports", val, &o->host_ports); break;
	case O_GUEST_PORTS: parse_ports("--guest-ports", val, &o->guest_ports); break;
	case O_VM:
		if (o->nvm_arg == VSOCK_VMS_MAX)
			cli_usage_error("--vm: more than %u VMs", VSOCK_VMS_MAX);
		o->vm_arg[o->nvm_arg++] = val;
		o->sockets_per_vm = true;
		break;
	case O_CONFIG:
		o->config = val;
		o->sockets_per_vm = true;
		break;
	case O_PRINT_CONFIG: o->print_config = true; break;
	case O_GROUPS: o->groups = val; break;
	case O_THREADS:
		o->threads = (unsigned)cli_u64("--threads", val, 1, VQ_FW_MAX_THREADS);
		break;
	case O_CPU:
		o->ncpus = cli_cpu_list("--cpu", val, o->cpus, VQ_FW_MAX_THREADS);
		break;
	case O_QUEUE_SIZE:
		cli_u64("--queue-size", val, 1, 32768);
		break;
	}
}

static struct vqd_cli cli = {
	.name = "virtq-vsock", .type = "vsock", .opts = long_opts, .opt = tool_opt,
	.usage = usage, .own_sockets = true,
};

/* The sockets made of HOST_PATH must fit a UNIX socket address. */
static void check_uds(const struct vsock_opts *o, const struct vsock_vm *vm,
		      const char *opt)
{
	size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
	size_t extra = o->no_seqpacket ? 0 : strlen(VSOCK_SEQ_SUFFIX);

	if (strlen(vm->uds) + extra > max)
		cli_usage_error("%s: '%s' is longer than %zu bytes%s", opt, vm->uds,
				max - extra, extra ? " (HOST_PATH" VSOCK_SEQ_SUFFIX
				" must fit a UNIX socket path; or --no-seqpacket)" : "");
}

/* The files a VM's device listens on: its vhost-user socket (when it has
 * one), HOST_PATH and HOST_PATH's two seqpacket names. */
static unsigned vm_files(const struct vsock_opts *o, const struct vsock_vm *vm,
			 char f[4][sizeof(((struct sockaddr_un *)0)->sun_path) + 16])
{
	unsigned n = 0;

	snprintf(f[n++], sizeof(f[0]), "%s", vm->uds);
	if (!o->no_seqpacket) {
		snprintf(f[n++], sizeof(f[0]), "%s" VSOCK_SEQ_SUFFIX, vm->uds);
		snprintf(f[n++], sizeof(f[0]), "%s" VSOCK_SEQ_ALIAS, vm->uds);
	}
	if (vm->socket)
		snprintf(f[n++], sizeof(f[0]), "%s", vm->socket);
	return n;
}

/* No two VMs of one CID, and no file that two sockets would be: the
 * daemon would refuse itself as "another instance" (or, for a CID, the
 * guests could never tell the two apart). */
static void check_unique(const struct vsock_opts *o)
{
	char a[4][sizeof(((struct sockaddr_un *)0)->sun_path) + 16];
	char b[4][sizeof(((struct sockaddr_un *)0)->sun_path) + 16];

	for (unsigned i = 0; i < o->nvm; i++) {
		unsigned na = vm_files(o, &o->vm[i], a);

		for (unsigned j = 0; j <= i; j++) {
			unsigned nb = vm_files(o, &o->vm[j], b);

			if (j < i && o->vm[i].cid == o->vm[j].cid)
				cli_usage_error("%s: guest-cid %llu is %s's too: each VM needs "
						"a CID of its own", o->vm[i].where,
						(unsigned long long)o->vm[i].cid, o->vm[j].where);
			for (unsigned x = 0; x < na; x++)
				for (unsigned y = 0; y < nb; y++)
					if ((j < i || x < y) && !strcmp(a[x], b[y]))
						cli_usage_error("%s: '%s' is a socket of %s too: "
								"each needs a path of its own",
								o->vm[i].where, a[x],
								j < i ? o->vm[j].where : "the same VM");
		}
	}
}

/* The single-VM flags make the one VM; --vm and --config make many. */
static void make_vms(struct vsock_opts *o, const struct vqd_opts *com)
{
	static char where[VSOCK_VMS_MAX][16];
	struct vsock_vm *vm;

	if (o->nvm_arg && o->config)
		cli_usage_error("--config: not with --vm (the file lists the VMs)");
	if (o->sockets_per_vm) {
		if (vqd_seen(com, O_CID) || vqd_seen(com, O_UDS) || o->groups)
			cli_usage_error("--%s: not with --vm or --config (each VM has its own)",
					vqd_seen(com, O_CID) ? "guest-cid" :
					vqd_seen(com, O_UDS) ? "uds-path" : "groups");
		for (unsigned i = 0; i < o->nvm_arg; i++) {
			snprintf(where[i], sizeof(where[i]), "--vm %u", i + 1);
			parse_vm(o, o->vm_arg[i], where[i]);
		}
		if (o->config)
			vsock_config_read(o, o->config);
	} else {
		if (!o->cid)
			cli_usage_error("--guest-cid is required (see --help)");
		if (!o->uds)
			cli_usage_error("--uds-path is required (see --help)");
		vm = vsock_vm_add(o, "--uds-path");
		vm->cid = o->cid;
		vm->uds = o->uds;
		vm->socket = com->socket_path;
		if (o->groups)
			vm->groups = parse_groups(o, "--groups", o->groups);
	}
	for (unsigned i = 0; i < o->nvm; i++) {
		vm = &o->vm[i];
		if (o->sockets_per_vm && !vm->socket)
			cli_usage_error("%s: socket is required (the VM's vhost-user socket)",
					vm->where);
		if (o->sockets_per_vm && !vm->uds)
			cli_usage_error("%s: uds-path is required (the VM's host side)",
					vm->where);
		if (!vm->groups)
			vm->groups = parse_groups(o, vm->where, "default");
		check_uds(o, vm, o->sockets_per_vm ? vm->where : "--uds-path");
	}
}

/* The host side's sockets and the vhost-user socket are different files. */
static void check_collision(const struct vsock_opts *o)
{
	const struct vsock_vm *vm = &o->vm[0];
	const char *vu = vm->socket;
	size_t n = strlen(vm->uds);

	if (!vu)
		return;
	if (!strcmp(vu, vm->uds))
		cli_usage_error("--uds-path: '%s' is the --socket-path too: the host "
				"side needs a path of its own", vm->uds);
	if (!o->no_seqpacket && !strncmp(vu, vm->uds, n) &&
	    (!strcmp(vu + n, VSOCK_SEQ_SUFFIX) || !strcmp(vu + n, VSOCK_SEQ_ALIAS)))
		cli_usage_error("--socket-path: '%s' is the host side's seqpacket "
				"socket (--uds-path %s)", vu, vm->uds);
}

static void print_ports(const char *key, const struct port_set *s)
{
	printf(",%s=", key);
	if (!s->restricted)
		printf("all");
	else if (!s->n)
		printf("none");
	for (unsigned i = 0; i < s->n; i++) {
		printf("%s%u", i ? "+" : "", s->r[i].lo);
		if (s->r[i].hi != s->r[i].lo)
			printf("-%u", s->r[i].hi);
	}
}

/* --print-config: each VM as a --vm line with every key, as it runs. */
static _Noreturn void print_config(const struct vsock_opts *o)
{
	for (unsigned i = 0; i < o->nvm; i++) {
		const struct vsock_vm *vm = &o->vm[i];
		unsigned first = 1;

		printf("--vm guest-cid=%llu,socket=%s,uds-path=%s,tx-buffer-size=%u,groups=",
		       (unsigned long long)vm->cid, vm->socket ? vm->socket : "(--fd)",
		       vm->uds, vm->buf_alloc ? vm->buf_alloc : 256 * 1024);
		for (unsigned g = 0; g < o->ngroups; g++)
			if (vm->groups & (1ull << g)) {
				printf("%s%s", first ? "" : "+", o->group[g]);
				first = 0;
			}
		print_ports("host-ports", &vm->host_ports);
		print_ports("guest-ports", &vm->guest_ports);
		printf("\n");
	}
	exit(0);
}

const struct vqd_cli *vsock_parse(int argc, char **argv, struct vsock_opts *o,
				  struct vqd_opts *com)
{
	memset(o, 0, sizeof(*o));
	cli.arg = o;
	cli.sockets_elsewhere = &o->sockets_per_vm;
	vqd_parse(&cli, argc, argv, com);
	if (optind < argc)
		cli_usage_error("unexpected argument '%s' (see --help)", argv[optind]);
	make_vms(o, com);
	if (!o->sockets_per_vm)
		check_collision(o);
	check_unique(o);
	vqd_check_cpus(&cli, O_CPU, o->ncpus, o->threads ? o->threads : 1);
	if (o->print_config)
		print_config(o);
	return &cli;
}
