// SPDX-License-Identifier: MIT
/* virtq-perf: the backend daemon a workload starts, and latency percentiles. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "cli.h"

/* The longest name a workload or its daemon makes in the directory:
 * "h.sock.seqpacket" with vq_unix_listen's ".<pid>" while it binds. */
#define LONGEST_NAME 24

/* ---- what a fatal signal cleans up ----
 * The backends with a directory, for the handler; slots are set and
 * cleared with atomics, and the handler reads only pids and paths. */
#define MAX_BACKENDS 4
static struct perf_backend *live[MAX_BACKENDS];
static pid_t owner;     /* the process that installed the handler */

/* SIGTERM, then up to 5 s for it to go, then SIGKILL; reaped either way.
 * Async-signal-safe: the handler and perf_backend_stop share it. */
static void reap(pid_t pid)
{
	struct timespec tick = { 0, 10 * 1000 * 1000 };
	int i;

	kill(pid, SIGTERM);
	for (i = 0; i < 500; i++) {
		pid_t r = waitpid(pid, NULL, WNOHANG);

		/* gone, or reaped by the other of main and handler */
		if (r == pid || (r < 0 && errno != EINTR))
			return;
		nanosleep(&tick, NULL);
	}
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* Remove dir and the files in it (only sockets live there), with
 * async-signal-safe calls only: no opendir, which allocates. */
static void remove_dir(const char *dir)
{
	char buf[4096] __attribute__((aligned(8)));
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ssize_t n;

	while (fd >= 0 && (n = getdents64(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t off = 0; off < n;) {
			struct dirent64 *e = (struct dirent64 *)(buf + off);

			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				unlinkat(fd, e->d_name, 0);
			off += e->d_reclen;
		}
	}
	if (fd >= 0)
		close(fd);
	rmdir(dir);
}

static void on_fatal_signal(int sig)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	unsigned i;

	/* A child between fork and exec runs this too: not its to clean. */
	if (getpid() == owner) {
		for (i = 0; i < MAX_BACKENDS; i++) {
			struct perf_backend *b = __atomic_load_n(&live[i], __ATOMIC_ACQUIRE);
			pid_t pid = b ? __atomic_load_n(&b->pid, __ATOMIC_ACQUIRE) : 0;

			if (pid > 0)
				reap(pid);
			if (b && b->dir[0])
				remove_dir(b->dir);
		}
	}
	/* Blocked while we run: delivered, with its default action, when
	 * we return, so the exit status names the signal. */
	sigaction(sig, &dfl, NULL);
	raise(sig);
}

static void install_handler(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa = { .sa_handler = on_fatal_signal };
	unsigned i;

	if (owner == getpid())
		return;
	owner = getpid();
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&sa.sa_mask, sigs[i]);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

static void track(struct perf_backend *b, bool on)
{
	unsigned i;

	for (i = 0; i < MAX_BACKENDS; i++) {
		struct perf_backend *want = on ? NULL : b, *set = on ? b : NULL;

		if (__atomic_compare_exchange_n(&live[i], &want, set, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return;
	}
}

/* ---- what the workload's options give it ---- */

void perf_backend_opts_init(struct perf_backend_opts *bo)
{
	memset(bo, 0, sizeof(*bo));
	bo->used_batch = bo->busy_poll = -1;
}

bool perf_backend_opt(struct perf_backend_opts *bo, const char *name, const char *val)
{
	static const char *const names[] = {
		"--backend-arg", "--used-batch", "--backend-busy-poll",
	};
	unsigned i;

	for (i = 0; i < 3 && strcmp(name, names[i]); i++)
		;
	switch (i) {
	case 0:
		if (bo->narg == PERF_BACKEND_MAX_ARGS)
			cli_usage_error("%s: at most %u words", name, PERF_BACKEND_MAX_ARGS);
		bo->arg[bo->narg++] = val;
		break;
	case 1: bo->used_batch = (int64_t)cli_u64(name, val, 0, 65536); break;
	case 2: bo->busy_poll = (int64_t)cli_u64(name, val, 0, 10000000); break;
	default: return false;
	}
	if (!bo->given)
		bo->given = names[i];
	return true;
}

void perf_backend_opts_check(const struct perf_backend_opts *bo, bool started)
{
	if (bo->given && !started)
		cli_usage_error("%s: only for a backend started with --backend", bo->given);
}

unsigned perf_backend_opts_words(struct perf_backend_opts *bo, const char **args,
				 unsigned k)
{
	unsigned i;

	if (bo->used_batch >= 0) {
		snprintf(bo->num[0], sizeof(bo->num[0]), "%lld", (long long)bo->used_batch);
		args[k++] = "--used-batch";
		args[k++] = bo->num[0];
	}
	if (bo->busy_poll >= 0) {
		snprintf(bo->num[1], sizeof(bo->num[1]), "%lld", (long long)bo->busy_poll);
		args[k++] = "--busy-poll";
		args[k++] = bo->num[1];
	}
	for (i = 0; i < bo->narg; i++)
		args[k++] = bo->arg[i];
	return k;
}

/* ---- the backend ---- */

int perf_backend_mkdir(struct perf_backend *b, const char *who, const char *tag)
{
	const char *base = getenv("TMPDIR");
	int n;

	b->who = who;
	b->pid = 0;
	b->dir[0] = '\0';
	if (!base || !*base)
		base = "/tmp";
	n = snprintf(b->dir, sizeof(b->dir), "%s/virtq-perf-%s.XXXXXX", base, tag);
	if (n < 0 || (size_t)n + 1 + LONGEST_NAME >= sizeof(((struct sockaddr_un *)0)->sun_path) ||
	    (size_t)n >= sizeof(b->dir)) {
		b->dir[0] = '\0';
		fprintf(stderr, "%s: TMPDIR '%s' is too long for the backend's socket paths\n",
			who, base);
		return -ENAMETOOLONG;
	}
	install_handler();
	if (!mkdtemp(b->dir)) {
		int e = errno;

		fprintf(stderr, "%s: mkdtemp %s: %s\n", who, b->dir, strerror(e));
		b->dir[0] = '\0';
		return -e;
	}
	track(b, true);
	return 0;
}

void perf_backend_path(const struct perf_backend *b, const char *name,
		       char *buf, size_t n)
{
	snprintf(buf, n, "%s/%s", b->dir, name);
}

pid_t perf_spawn(const char *who, const char *path, char *const argv[], int out_fd)
{
	pid_t parent = getpid(), pid;

	/* Nothing buffered may be written twice. */
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* Die with us, even by SIGKILL; if we are already gone (the
		 * race before prctl), do not start at all. */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
			_exit(127);
		dup2(out_fd, 1);
		execv(path, argv);
		fprintf(stderr, "%s: exec %s: %s\n", who, path, strerror(errno));
		_exit(127);
	}
	return pid;
}

/* "exec CMD 'arg' ..." with each ' in an argument written '\''; with
 * both_out, its stderr goes where its stdout goes */
static char *shell_command(const char *cmd, const char *const *args, bool both_out)
{
	size_t n = strlen("exec ") + strlen(cmd) + strlen(" 2>&1") + 1, k;
	unsigned i;
	char *s;

	for (i = 0; args[i]; i++)
		n += 3 + 4 * strlen(args[i]);
	s = malloc(n);
	if (!s)
		return NULL;
	k = (size_t)sprintf(s, "exec %s", cmd);
	for (i = 0; args[i]; i++) {
		s[k++] = ' ';
		s[k++] = '\'';
		for (const char *p = args[i]; *p; p++) {
			if (*p == '\'') {
				memcpy(s + k, "'\\''", 4);
				k += 4;
			} else {
				s[k++] = *p;
			}
		}
		s[k++] = '\'';
	}
	if (both_out)
		k += (size_t)sprintf(s + k, " 2>&1");
	s[k] = '\0';
	return s;
}

/* 0 once ready, -ECHILD when it ended first (*status its wait status),
 * -ETIMEDOUT, or perf_spawn's -errno. */
static int spawn_and_wait(struct perf_backend *b, char *line, int out_fd,
			  bool (*ready)(void *arg), void *arg, int *status)
{
	/* Its statistics must not mix with our JSON on stdout. */
	pid_t pid = perf_spawn(b->who, "/bin/sh", (char *const[]){ "sh", "-c", line, NULL },
			       out_fd);

	if (pid < 0)
		return (int)pid;
	__atomic_store_n(&b->pid, pid, __ATOMIC_RELEASE);
	for (int i = 0; i < 500; i++) {
		if (ready(arg))
			return 0;
		if (waitpid(pid, status, WNOHANG) == pid) {
			__atomic_store_n(&b->pid, 0, __ATOMIC_RELEASE);
			return -ECHILD;
		}
		usleep(10000);
	}
	return -ETIMEDOUT;
}

int perf_backend_start(struct perf_backend *b, const char *cmd,
		       const char *const *args, bool (*ready)(void *arg), void *arg)
{
	const char *log = getenv(PERF_BACKEND_LOG_ENV);
	char *line = shell_command(cmd, args, log && *log);
	int st = 0, out_fd = 2, r;

	/* virtq-perf ab --backend-log: the backend's lines go to the file
	 * instead of into ab's progress lines */
	if (log && *log && (out_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0) {
		int e = errno;

		fprintf(stderr, "%s: %s: %s\n", b->who, log, strerror(e));
		free(line);
		return -e;
	}
	r = line ? spawn_and_wait(b, line, out_fd, ready, arg, &st) : -ENOMEM;
	if (out_fd != 2)
		close(out_fd);
	free(line);
	if (r == -ECHILD && WIFEXITED(st))
		/* its own message, on our stderr, says why */
		fprintf(stderr, "%s: backend '%s' exited with status %d before it "
			"served\n", b->who, cmd, WEXITSTATUS(st));
	else if (r == -ECHILD && WIFSIGNALED(st))
		fprintf(stderr, "%s: backend '%s' was killed by signal %d before it "
			"served\n", b->who, cmd, WTERMSIG(st));
	else if (r < 0)
		fprintf(stderr, "%s: backend '%s' did not come up: %s\n", b->who,
			cmd, strerror(-r));
	if (r < 0)
		perf_backend_stop(b);
	return r;
}

void perf_backend_stop(struct perf_backend *b)
{
	pid_t pid = b->pid;

	if (pid > 0) {
		/* the handler leaves a pid it no longer sees alone */
		__atomic_store_n(&b->pid, 0, __ATOMIC_RELEASE);
		reap(pid);
	}
	if (!b->dir[0])
		return;
	remove_dir(b->dir);
	track(b, false);
	b->dir[0] = '\0';
}

/* A clock's time (ns), -1 if it cannot be read. */
static int64_t clock_cpu_ns(clockid_t clk)
{
	struct timespec t;

	if (clock_gettime(clk, &t) < 0)
		return -1;
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* CPU time of process pid and, to depth levels, of its children (a
 * backend started through a wrapper that forks: perf record, sudo); -1
 * if pid's own clock cannot be read. */
static int64_t tree_cpu_ns(pid_t pid, unsigned depth)
{
	char path[64];
	clockid_t clk;
	int64_t ns;
	FILE *f;
	long child;

	if (clock_getcpuclockid(pid, &clk) != 0 || (ns = clock_cpu_ns(clk)) < 0)
		return -1;
	if (depth == 0)
		return ns;
	/* the main thread's children: a wrapper forks from it */
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	f = fopen(path, "re");
	if (!f)
		return ns;
	while (fscanf(f, "%ld", &child) == 1) {
		int64_t c = tree_cpu_ns((pid_t)child, depth - 1);

		if (c > 0)
			ns += c;
	}
	fclose(f);
	return ns;
}

int64_t perf_backend_cpu_ns(const struct perf_backend *b)
{
	return b->pid > 0 ? tree_cpu_ns(b->pid, 3) : -1;
}

void perf_cpu_mark(const struct perf_backend *b, struct perf_cpu_mark *m)
{
	m->thread = clock_cpu_ns(CLOCK_THREAD_CPUTIME_ID);
	m->process = clock_cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
	m->backend = perf_backend_cpu_ns(b);
	m->wall = (uint64_t)clock_cpu_ns(CLOCK_MONOTONIC);
}

void perf_cpu_report(FILE *f, bool json, const struct perf_cpu_part *p, unsigned n,
		     double units, const char *unit_key, const char *unit_name,
		     uint64_t wall_ns)
{
	double all = 0;
	unsigned i;

	if (!n || p[0].ns < 0 || !(units > 0))
		return;
	for (i = 0; i < n; i++) {
		if (p[i].ns < 0)
			continue;
		all += (double)p[i].ns / units;
		if (json)
			fprintf(f, ",\"cpu_%s_per_%s_ns\":%.1f", p[i].key, unit_key,
				(double)p[i].ns / units);
		else
			fprintf(f, "%s %s %.1f", i ? "," : "cpu:", p[i].name,
				(double)p[i].ns / units);
	}
	if (json)
		fprintf(f, ",\"cpu_per_%s_ns\":%.1f,\"cpus_busy\":%.2f", unit_key, all,
			wall_ns ? all * units / (double)wall_ns : 0);
	else
		fprintf(f, " ns per %s; %.1f in all, %.2f CPUs busy\n", unit_name, all,
			wall_ns ? all * units / (double)wall_ns : 0);
}

bool perf_unix_accepts(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	if (fd < 0)
		return false;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(const double *v, uint64_t n, double p)
{
	uint64_t i = (uint64_t)ceil(p / 100.0 * (double)n);

	return v[i ? (i <= n ? i - 1 : n - 1) : 0];
}

void perf_lat_pcts(double *v, uint64_t n, struct perf_lat *out)
{
	if (!n) {
		out->p50 = out->p90 = out->p99 = out->p999 = NAN;
		return;
	}
	qsort(v, n, sizeof(double), cmp_double);
	out->p50 = pct(v, n, 50);
	out->p90 = pct(v, n, 90);
	out->p99 = pct(v, n, 99);
	out->p999 = pct(v, n, 99.9);
}
