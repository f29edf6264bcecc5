/* SPDX-License-Identifier: MIT */
/*
 * virtq-perf: a backend daemon the workload starts (--backend) and stops,
 * with its sockets in a private directory, and the latency percentiles
 * the net and vsock workloads report.
 *
 * Neither outlives virtq-perf: the daemon gets PR_SET_PDEATHSIG, and on
 * SIGINT, SIGTERM or SIGHUP a handler stops it and removes the directory
 * (async-signal-safe calls only), then re-raises the signal so that the
 * exit status says how virtq-perf ended.
 */
#ifndef VIRTQ_PERF_BACKEND_H
#define VIRTQ_PERF_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct perf_backend {
	const char *who;        /* "virtq-perf net": prefixes messages */
	char dir[80];           /* private directory for its sockets ("": none) */
	pid_t pid;              /* 0: not running (read by the signal handler) */
};

/* What a workload's --backend-arg, --used-batch and --backend-busy-poll
 * give the backend it starts (the same in net and vsock). */
/* Set (to a file name) by virtq-perf ab --backend-log: the backends its
 * runs start write their output there, appended. */
#define PERF_BACKEND_LOG_ENV "VIRTQ_PERF_BACKEND_LOG"

#define PERF_BACKEND_MAX_ARGS 16
struct perf_backend_opts {
	const char *arg[PERF_BACKEND_MAX_ARGS];
	unsigned narg;
	int64_t used_batch;             /* -1: the backend's default */
	int64_t busy_poll;              /* -1: the backend's default */
	const char *given;              /* the first of them given, or NULL */
	char num[2][24];                /* the two numbers as words */
};

void perf_backend_opts_init(struct perf_backend_opts *bo);

/* Take name's value if name is one of the three ("--backend-arg", ...):
 * true, or false for any other option.  A bad value: one line, exit 2. */
bool perf_backend_opt(struct perf_backend_opts *bo, const char *name, const char *val);

/* They are for a backend virtq-perf starts: without one (started false)
 * one line, exit 2. */
void perf_backend_opts_check(const struct perf_backend_opts *bo, bool started);

/* Append them to args[k...] as the backend's words ("--used-batch", "N",
 * "--busy-poll", "U", then each --backend-arg); the new k.  args has room
 * for 4 + PERF_BACKEND_MAX_ARGS more. */
unsigned perf_backend_opts_words(struct perf_backend_opts *bo, const char **args,
				 unsigned k);

/*
 * Make the private directory $TMPDIR/virtq-perf-<tag>.XXXXXX (TMPDIR
 * unset: /tmp) and have it removed, with the daemon stopped, if a signal
 * ends virtq-perf.  0 or -errno (-ENAMETOOLONG: TMPDIR too long for the
 * socket paths inside it), said on stderr.
 */
int perf_backend_mkdir(struct perf_backend *b, const char *who, const char *tag);

/* "<dir>/<name>" into buf. */
void perf_backend_path(const struct perf_backend *b, const char *name,
		       char *buf, size_t n);

/*
 * Start the daemon: "exec CMD ARGS..." through /bin/sh, CMD as the user
 * wrote it (--backend) and each of args[] (NULL-terminated) quoted as one
 * word.  Its stdout goes to our stderr, so its statistics do not mix with
 * our JSON.  Then wait up to 5 s until ready(arg) says it serves.  On
 * failure say so, stop it and return -errno: -ECHILD if it exited,
 * -ETIMEDOUT if it never got ready.
 */
int perf_backend_start(struct perf_backend *b, const char *cmd,
		       const char *const *args, bool (*ready)(void *arg), void *arg);

/* SIGTERM it (SIGKILL if it is still there after 5 s) and reap it; remove
 * the directory and what is in it. */
void perf_backend_stop(struct perf_backend *b);

/* CPU time the running daemon has used so far, all its threads and those
 * of its children (ns), or -1 when none runs or its clock cannot be read. */
int64_t perf_backend_cpu_ns(const struct perf_backend *b);

/* The CPU clocks at one moment (ns; -1 where one cannot be read): the
 * calling thread's, this process's (threads that ended too), the
 * backend's (perf_backend_cpu_ns), and the monotonic clock.  A workload
 * takes one before and one after the work and reports the differences. */
struct perf_cpu_mark {
	int64_t thread, process, backend;
	uint64_t wall;
};
void perf_cpu_mark(const struct perf_backend *b, struct perf_cpu_mark *m);

/* b's clock less a's, or -1 if either could not be read or it went back
 * (a child of the backend's that ended took its time with it). */
static inline int64_t perf_cpu_diff(int64_t a, int64_t b)
{
	return a >= 0 && b >= a ? b - a : -1;
}

/* One party's CPU time over a run: its name in JSON keys and in text, and
 * the ns it spent (-1: not measured, left out). */
struct perf_cpu_part {
	const char *key, *name;
	int64_t ns;
};

/*
 * Print the parties' CPU time per unit of work (units of it done over
 * wall_ns), their sum and the CPUs busy: in JSON as keys
 * "cpu_<key>_per_<unit_key>_ns" ... "cpu_per_<unit_key>_ns", "cpus_busy"
 * (after other keys, each with its leading comma), or as one line
 * "cpu: <name> X, ... ns per <unit_name>; S in all, B CPUs busy".
 * Nothing if the first party or units are missing.
 */
void perf_cpu_report(FILE *f, bool json, const struct perf_cpu_part *p, unsigned n,
		     double units, const char *unit_key, const char *unit_name,
		     uint64_t wall_ns);

/* Run path with argv in a child whose stdout is out_fd (close-on-exec
 * fds are not inherited) and which gets SIGTERM when this thread ends;
 * if exec fails the child says so and exits 127.  The child's pid, or
 * -errno.  Call it from the thread that lives longest (the main one). */
pid_t perf_spawn(const char *who, const char *path, char *const argv[], int out_fd);

/* Does a UNIX stream socket at path accept a connection?  (A probe the
 * backend sees as a front-end that came and went.) */
bool perf_unix_accepts(const char *path);

/* Latency percentiles of v[0..n) in microseconds (sorts v); NaN when n is
 * 0.  Nearest rank: the smallest value with at least p% at or below it. */
struct perf_lat {
	double p50, p90, p99, p999;
};
void perf_lat_pcts(double *v, uint64_t n, struct perf_lat *out);

#endif
