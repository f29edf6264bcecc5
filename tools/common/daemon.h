/* SPDX-License-Identifier: MIT */
/*
 * What the two vhost-user backend daemons (virtq-net, virtq-vsock) share:
 * the options they both take, starting up (standard vhost-user options,
 * the control socket, signals), and the control loop: serve the vhost-user
 * socket, print statistics every --stats-interval, end on SIGTERM or when
 * --once says so, then print a summary.
 *
 * The data paths differ (virtq-net runs the runtime's poll loop on worker
 * threads; virtq-vsock pumps its rings and host sockets on the control
 * thread), so the loop takes hooks for a data path that shares its thread.
 * Compiled into each daemon; not part of libvirtq.
 */
#ifndef VIRTQ_TOOLS_DAEMON_H
#define VIRTQ_TOOLS_DAEMON_H

#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <virtq/vhost_user_backend.h>

/* The options both daemons take (docs/virtq-net.md, docs/virtq-vsock.md). */
struct vqd_opts {
	unsigned used_batch;
	uint64_t busy_poll_us;
	bool no_packed, no_event_idx, no_indirect, no_in_order;
	double stats_interval;
	bool json, once, client, quiet;
};

/* getopt values of the shared options; a tool numbers its own from
 * VQD_O_TOOL up. */
enum {
	VQD_O_USED_BATCH = 256, VQD_O_BUSY_POLL, VQD_O_NO_PACKED,
	VQD_O_NO_EVENT_IDX, VQD_O_NO_INDIRECT, VQD_O_NO_IN_ORDER, VQD_O_STATS,
	VQD_O_JSON, VQD_O_ONCE, VQD_O_CLIENT, VQD_O_QUIET, VQD_O_HELP,
	VQD_O_TOOL = 320,
};

/* Help text of the shared options, for the tools' usage(). */
#define VQD_USAGE_SOCKET \
"  --socket-path PATH    listen on a UNIX socket (vhost-user server)\n" \
"  --fd N                use an inherited socket\n" \
"  --client              connect to PATH instead, reconnecting every second\n"
#define VQD_USAGE_STATS \
"  --stats-interval SEC  print statistics every SEC seconds (0: only a summary)\n" \
"  --json                statistics as JSON lines\n" \
"  --once                exit when the first front-end disconnects\n" \
"  --quiet               no queue start/stop messages\n"

struct vqd_cli {
	const char *name;               /* "virtq-net": prefixes messages */
	const char *type;               /* --print-capabilities "type" */
	const struct option *opts;      /* the tool's own, NULL-terminated */
	/* One of the tool's options: 0, -1 for a bad value (we say so), or
	 * -2 when the tool already said what is wrong. */
	int (*opt)(void *arg, int c, const char *val);
	void (*usage)(FILE *f);
	void *arg;
};

/*
 * Parse the command line: the standard vhost-user options into *vo (taken
 * out of argv, *argc updated), the shared ones into *o, the tool's through
 * cli->opt.  Leaves optind at the first positional argument.  Returns 1 to go on, or the exit status:
 * 0 after --print-capabilities, 2 for a bad command line (said on stderr).
 * --help prints the usage and exits.
 */
int vqd_parse(const struct vqd_cli *cli, int *argc, char **argv,
	      struct vq_vhu_opts *vo, struct vqd_opts *o);

/* --socket-path or --fd must be given: true, or false with a message. */
bool vqd_need_socket(const struct vqd_cli *cli, const struct vq_vhu_opts *vo);

/* A number in [0, max] (any base strtoull takes, no sign). */
bool vqd_parse_u64(const char *s, uint64_t max, uint64_t *v);

/* f without the features the --no-* options withdraw. */
uint64_t vqd_features(const struct vqd_opts *o, uint64_t f);

/* CLOCK_MONOTONIC in seconds. */
double vqd_now(void);

/* Set by SIGTERM / SIGINT once vqd_open() ran. */
extern volatile sig_atomic_t vqd_stop;

/* ---- statistics lines ---- */

/* The counters every statistics line starts with. */
struct vqd_count {
	uint64_t tx_pkts, tx_bytes, rx_pkts, rx_bytes;
	uint64_t kicks, calls;
};

/* Open the line: text "stats   12.00s tx ... calls/pkt 0.0000" (the tool
 * goes on with its own fields), or JSON {"stats":true,"t":12.000 (the tool
 * adds its fields, then calls vqd_json_rates). */
void vqd_line_start(bool json, const struct vqd_count *now,
		    const struct vqd_count *prev, double dt, double t, bool final);
/* JSON: ,"iotlb":{...},"postcopy":{...}, the backend's IOTLB and postcopy
 * counters (for the summary). */
void vqd_json_backend(struct vq_vhu_backend *b);
/* JSON: the counters and rates; per_pkt adds kicks_per_pkt/calls_per_pkt
 * (a tool may put fields of its own between the two calls). */
void vqd_json_rates(const struct vqd_count *now, const struct vqd_count *prev,
		    double dt, bool counts, bool per_pkt);

/* ---- the control loop ---- */

/* A data path that runs on the control thread (NULL: none). */
struct vqd_hooks {
	/*
	 * Before each sleep: do the work there is, and put the fds to wait on
	 * in pf (at most max).  Returns how many, or -1 to go round again at
	 * once without sleeping.  *idle = false: work moved, only look at the
	 * fds (timeout 0).
	 */
	int (*before)(void *arg, struct pollfd *pf, unsigned max, bool *idle);
	/* After the wait: the same fds with revents, poll's result, idle. */
	void (*after)(void *arg, const struct pollfd *pf, unsigned n, int r,
		      bool idle);
	/* An idle wait lasts at most this long (0: no bound), so that after()
	 * gets a quiet period's r == 0 to look at the rings once more. */
	int quiet_ms;
};

struct vqd_ctl {
	const struct vqd_cli *cli;
	const struct vqd_opts *o;
	struct vq_vhu_backend *b;
	/* A statistics line over [prev, now]: dt seconds, t since the start;
	 * final: the summary (prev is the start). */
	void (*stats)(void *arg, double dt, double t, bool final);
	const struct vqd_hooks *hooks;
	void *arg;                      /* for stats and hooks */
	double t0, last, next_stats;
	bool was_connected;
};

/*
 * Open the backend's socket (--client: connect, retrying every second;
 * else as vo says), take SIGTERM/SIGINT into vqd_stop, ignore SIGPIPE, and
 * start the clock of c.  0, or -errno with a message.
 */
int vqd_open(struct vqd_ctl *c, const struct vq_vhu_opts *vo);

/* Run until SIGTERM, a poll error, or (--once) the first front-end gone.
 * Returns the exit status (0, or 1 for a poll error). */
int vqd_run(struct vqd_ctl *c);

/* Print the summary line over the whole run. */
void vqd_summary(struct vqd_ctl *c);

#endif
