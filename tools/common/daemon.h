/* SPDX-License-Identifier: MIT */
/*
 * What the two vhost-user backend daemons (virtq-net, virtq-vsock) share:
 * the options they both take (daemon_opts.c: the vhost-user socket, the
 * sockets' mode and group, features, statistics), starting up (the
 * sockets, signals), and the control loop (daemon.c): serve the vhost-user
 * socket, print statistics every --stats-interval and on SIGUSR1, end on
 * SIGTERM, when
 * --once says so or when an inherited connection hangs up, then print a
 * summary.
 *
 * Both data paths run on the library's device framework, off this
 * thread.  Compiled into each daemon; not part of libvirtq.  The command
 * line follows cli.h: a bad one ends the program with one line, exit 2.
 */
#ifndef VIRTQ_TOOLS_DAEMON_H
#define VIRTQ_TOOLS_DAEMON_H

#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <virtq/framework.h>
#include <virtq/vhost_user_backend.h>

#include "cli.h"

/* getopt values of the shared options; a tool numbers its own from
 * VQD_O_TOOL up to VQD_O_END. */
enum {
	VQD_O_SOCKET_PATH = 256, VQD_O_FD, VQD_O_CLIENT, VQD_O_SOCKET_MODE,
	VQD_O_SOCKET_GROUP, VQD_O_PRINT_CAPS, VQD_O_USED_BATCH,
	VQD_O_BUSY_POLL, VQD_O_NO_PACKED, VQD_O_NO_EVENT_IDX,
	VQD_O_NO_INDIRECT, VQD_O_NO_IN_ORDER, VQD_O_STATS, VQD_O_JSON,
	VQD_O_ONCE, VQD_O_QUIET, VQD_O_HELP, VQD_O_VERSION, VQD_O_BUSY_POLL_YIELD,
	VQD_O_PER_QUEUE, VQD_O_BUSY_POLL_MAX,
	VQD_O_TOOL = 320, VQD_O_END = 384,
};

/* Without --busy-poll: each queue's window adapts, up to this. */
#define VQD_BUSY_POLL_MAX_US 32u

/* The options both daemons take (docs/virtq-net.md, docs/virtq-vsock.md). */
struct vqd_opts {
	/* the vhost-user socket: one of path (listen, or --client) and fd */
	const char *socket_path;
	int fd;                         /* -1: none */
	bool client;
	/* the sockets the daemon creates */
	unsigned socket_mode;           /* 0: 0600 */
	bool socket_group_set;
	uint32_t socket_gid;
	/* the rings */
	unsigned used_batch;
	uint64_t busy_poll_us;          /* a fixed window (--busy-poll) */
	uint64_t busy_poll_max_us;      /* else an adaptive one's ceiling */
	uint64_t busy_poll_yield_us;    /* 0: the spin never yields */
	bool no_packed, no_event_idx, no_indirect, no_in_order;
	/* statistics and lifetime */
	double stats_interval;
	bool json, once, quiet;
	bool per_queue;                 /* a line per ring under each line */
	bool seen[VQD_O_END - VQD_O_SOCKET_PATH];       /* given on the line */
};

/* Was option c (a VQD_O_* or a tool's code) given? */
static inline bool vqd_seen(const struct vqd_opts *o, int c)
{
	return c >= VQD_O_SOCKET_PATH && c < VQD_O_END && o->seen[c - VQD_O_SOCKET_PATH];
}

/* Help text of the shared options, for the tools' usage(). */
#define VQD_USAGE_SOCKET \
"  --socket-path PATH    listen on a UNIX socket (vhost-user server)\n" \
"  --fd N                use an inherited socket, listening or connected\n" \
"  --client              connect to PATH instead; wait for it to appear,\n" \
"                        and reconnect every second after a disconnect\n" \
"  --socket-mode MODE    permissions of the sockets created, in octal as\n" \
"                        chmod takes them (0600)\n" \
"  --socket-group GROUP  group of the sockets created (name or GID)\n"
#define VQD_USAGE_POLL \
"  --busy-poll USEC      poll a dry queue this long before sleeping on its\n" \
"                        kick (0: sleep at once)\n" \
"  --busy-poll-max USEC  without --busy-poll, each queue polls as long as\n" \
"                        its buffers have been coming back within, up to\n" \
"                        this (32; 0: sleep at once)\n" \
"  --busy-poll-yield USEC  after this long with nothing, offer the CPU at\n" \
"                        every probe (for CPUs shared with the guest)\n"
#define VQD_USAGE_STATS \
"  --stats-interval SEC  print statistics every SEC seconds (0: none but\n" \
"                        SIGUSR1's and the summary)\n" \
"  --json                statistics as JSON lines\n" \
"  --per-queue           each statistics line followed by one per queue\n" \
"                        (JSON: a \"queues\" array)\n" \
"  --once                exit when the first front-end disconnects\n" \
"  --quiet               no queue start/stop messages\n" \
"  --print-capabilities  print the vhost-user capabilities as JSON and exit\n" \
"  --version             print the version and exit\n"

struct vqd_cli {
	const char *name;               /* "virtq-net": prefixes messages */
	const char *type;               /* --print-capabilities "type" */
	const struct option *opts;      /* the tool's own, NULL-terminated */
	/* One of the tool's options; a bad value ends the program through
	 * cli_usage_error (one line, exit 2). */
	void (*opt)(void *arg, int c, const char *val);
	void (*usage)(FILE *f);
	void *arg;
	/* The daemon creates sockets besides the vhost-user one (virtq-vsock's
	 * host side): --socket-mode and --socket-group apply with --fd and
	 * --client too. */
	bool own_sockets;
	/* Set (by the tool's options) when the vhost-user sockets are named
	 * elsewhere (virtq-vsock's --vm): then --socket-path and --fd are
	 * neither needed nor taken. */
	const bool *sockets_elsewhere;
};

/*
 * Parse the command line: the shared options into *o, the tool's through
 * cli->opt, then check the shared ones against each other (one of
 * --socket-path and --fd; --client and the socket's mode and group only
 * where they mean something).  --print-capabilities anywhere prints the
 * capabilities and exits 0 (the others are ignored, as vhost-user.rst
 * asks); --help prints the usage and --version the version, exit 0; a bad
 * line is one message and exit 2.  Leaves optind at the first positional
 * argument.
 */
void vqd_parse(const struct vqd_cli *cli, int argc, char **argv,
	       struct vqd_opts *o);

/* Option c (the tool's or a shared one) was given where it has no effect
 * or conflicts with another: "PROG: --name: <why>", exit 2. */
_Noreturn void vqd_refuse(const struct vqd_cli *cli, int c, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* --cpu (option c) names at most one CPU per worker thread, or refuse. */
void vqd_check_cpus(const struct vqd_cli *cli, int c, unsigned ncpus, unsigned threads);

/* The workers' busy polling, as the options say. */
void vqd_poll_config(const struct vqd_opts *o, struct vq_fw_config *fc);
/* "busy poll 5 us", "adaptive busy poll up to 32 us" or "no busy poll",
 * into buf (n bytes); returns buf. */
const char *vqd_poll_str(char *buf, size_t n, const struct vqd_opts *o);

/* f without the features the --no-* options withdraw. */
uint64_t vqd_features(const struct vqd_opts *o, uint64_t f);

/* A feature bit's name as the virtio spec writes it, without the
 * VIRTIO_<DEVICE>_F_ prefix; a table ends with { 0, NULL }. */
struct vqd_feature {
	unsigned bit;
	const char *name;
};

/*
 * "NAME NAME ... (0x...)": the bits of f by name, the device's from dev
 * and the transport's (VERSION_1, RING_PACKED, ..., vhost-user's
 * PROTOCOL_FEATURES) from one table here, a bit neither knows as "bitN".
 * Into buf (n bytes, cut short if too small); returns buf.
 */
const char *vqd_features_str(char *buf, size_t n, uint64_t f,
			     const struct vqd_feature *dev);

/* The library's log on stderr, one line a message: warnings and errors,
 * and connections opening and ending unless quiet (the library prints
 * nothing itself: virtq/log.h). */
void vqd_log_to_stderr(bool quiet);

/* CLOCK_MONOTONIC in seconds. */
double vqd_now(void);

/* Set by SIGTERM, SIGINT or SIGQUIT once vqd_open() ran. */
extern volatile sig_atomic_t vqd_stop;

/* ---- statistics lines ---- */

/* The counters every statistics line starts with. */
struct vqd_count {
	uint64_t tx_pkts, tx_bytes, rx_pkts, rx_bytes;
	uint64_t kicks, calls;
};

/* Open the line: text "stats   12.00s tx RATES rx RATES kicks/pkt ...
 * total tx N pkts N B ... calls N" (the rates in the unit that fits, then
 * the running totals; "snapshot" for SIGUSR1's line; the tool
 * goes on with its own fields), or JSON {"stats":true,"t":12.000 (the tool
 * adds its fields, then calls vqd_json_rates). */
void vqd_line_start(bool json, const struct vqd_count *now,
		    const struct vqd_count *prev, double dt, double t, bool final);
/* JSON: ,"iotlb":{...},"postcopy":{...}, the backend's IOTLB and postcopy
 * counters, and ,"process":{...}, the daemon's voluntary and involuntary
 * context switches and CPU seconds (for the summary). */
void vqd_json_backend(struct vq_vhu_backend *b);
/* JSON: the counters and rates; per_pkt adds kicks_per_pkt/calls_per_pkt
 * (a tool may put fields of its own between the two calls). */
void vqd_json_rates(const struct vqd_count *now, const struct vqd_count *prev,
		    double dt, bool counts, bool per_pkt);

/* One ring's counters, for --per-queue. */
struct vqd_queue_count {
	uint64_t pkts, bytes, kicks, calls;
	/* how the ring's thread waited for it: woken by its kick, or its
	 * busy-poll windows finding work or not */
	uint64_t wakeups, poll_hits, poll_misses;
};

/* A ring's line from its loop counters; pkts and bytes are the tool's. */
static inline struct vqd_queue_count vqd_queue_count_of(const struct vq_rt_counters *c)
{
	return (struct vqd_queue_count){
		.kicks = c->kicks_recv, .calls = c->calls_sent, .wakeups = c->wakeups,
		.poll_hits = c->bp_hits, .poll_misses = c->bp_misses,
	};
}

/* --per-queue: ring index's line under the statistics line, over [prev,
 * now] in dt seconds: text "  queue 0 (rx) RATES total ...\n", or JSON
 * one object of the "queues" array (the tool opens and closes it; first:
 * the first object, no comma before it). */
void vqd_queue_line(bool json, bool first, unsigned index, const char *name,
		    const struct vqd_queue_count *now,
		    const struct vqd_queue_count *prev, double dt);

/* ---- the control loop ---- */

/* Sockets the daemon creates (virtq-vsock: four per VM), and vhost-user
 * sockets one loop serves. */
#define VQD_MAX_LISTENERS 260
#define VQD_MAX_SOCKS 64

/* One vhost-user socket the control loop serves. */
struct vqd_sock {
	struct vq_vhu_backend *b;
	const char *path;               /* listen here (--client: connect) */
	int fd;                         /* or an inherited one; -1: none */
	const char *opt;                /* what named it, for messages */
	bool was_connected;
	bool done;                      /* inherited, hung up: nothing more */
};

struct vqd_ctl {
	const struct vqd_cli *cli;
	const struct vqd_opts *o;
	struct vq_vhu_backend *b;
	/* The sockets served: the tool's (virtq-vsock's VMs), or, nsocks 0,
	 * the one of --socket-path or --fd, with b. */
	struct vqd_sock *socks;
	unsigned nsocks;
	struct vqd_sock one;
	/* A statistics line over [prev, now]: dt seconds, t since the start;
	 * final: the summary (prev is the start). */
	void (*stats)(void *arg, double dt, double t, bool final);
	void *arg;                      /* for stats */
	double t0, last, next_stats;
	/* The sockets we created, removed at the end if still ours. */
	struct vq_unix_listener *lst[VQD_MAX_LISTENERS];
	unsigned nlst;
};

/*
 * Listen on a socket of the daemon's own at path (type SOCK_STREAM or
 * SOCK_SEQPACKET), with --socket-mode and --socket-group, kept for
 * vqd_close.  opt names the option the path came from, for the message.
 * The fd (still owned by the listener until vq_unix_listener_release_fd),
 * or -errno with one line said.
 */
int vqd_listen(struct vqd_ctl *c, const char *opt, const char *path, int type,
	       struct vq_unix_listener **out);

/*
 * Open the backends' sockets: listen at --socket-path, connect to it with
 * --client (waiting, with one line saying so, while nobody listens there
 * yet), or take over --fd; the same for each of socks[] if given.  Take the signals (daemon.c: SIGTERM, SIGINT
 * and SIGQUIT into vqd_stop, SIGUSR1 into a snapshot line, SIGHUP, SIGUSR2
 * and SIGPIPE ignored), and start the clock of c.  0, or -errno with one
 * line said.
 */
int vqd_open(struct vqd_ctl *c);

/*
 * Run until SIGTERM (SIGINT, SIGQUIT), a poll error, (--once) the first front-end gone, or an
 * inherited connection (--fd) hung up: nothing can come after it, so the
 * daemon ends, saying so in one line (with several sockets: when none is
 * left that could ever connect again; one front-end's end leaves the
 * others served).  Returns the exit status: 0, or 1
 * for a poll error or such a hang-up without --once (the daemon cannot
 * listen again).
 */
int vqd_run(struct vqd_ctl *c);

/* Print the summary line over the whole run. */
void vqd_summary(struct vqd_ctl *c);

/* Free the backend (b, and those of socks[] still set), close our sockets
 * and remove the ones still ours. */
void vqd_close(struct vqd_ctl *c);

#endif
