// SPDX-License-Identifier: MIT
/* virtq-perf: the backend daemon a workload starts, and latency percentiles. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"

int perf_backend_mkdir(struct perf_backend *b, const char *who, const char *tag)
{
	b->who = who;
	b->pid = 0;
	snprintf(b->dir, sizeof(b->dir), "/tmp/virtq-perf-%s.XXXXXX", tag);
	if (!mkdtemp(b->dir)) {
		b->dir[0] = '\0';
		return -errno;
	}
	return 0;
}

void perf_backend_path(const struct perf_backend *b, const char *name,
		       char *buf, size_t n)
{
	snprintf(buf, n, "%s/%s", b->dir, name);
}

pid_t perf_spawn(const char *who, const char *path, char *const argv[], int out_fd)
{
	pid_t pid;

	/* Nothing buffered may be written twice. */
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		dup2(out_fd, 1);
		execv(path, argv);
		fprintf(stderr, "%s: exec %s: %s\n", who, path, strerror(errno));
		_exit(127);
	}
	return pid;
}

static int spawn_and_wait(struct perf_backend *b, const char *path,
			  char *const argv[], bool (*ready)(void *arg), void *arg)
{
	/* Its statistics must not mix with our JSON on stdout. */
	pid_t pid = perf_spawn(b->who, path, argv, 2);

	if (pid < 0)
		return (int)pid;
	b->pid = pid;
	for (int i = 0; i < 500; i++) {
		int st;

		if (ready(arg))
			return 0;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			b->pid = 0;
			return -ECHILD;
		}
		usleep(10000);
	}
	return -ETIMEDOUT;
}

int perf_backend_start(struct perf_backend *b, const char *label, const char *path,
		       char *const argv[], bool (*ready)(void *arg), void *arg)
{
	int r = spawn_and_wait(b, path, argv, ready, arg);

	if (r < 0) {
		fprintf(stderr, "%s: backend '%s' did not come up: %s\n", b->who,
			label, strerror(-r));
		perf_backend_stop(b);
	}
	return r;
}

void perf_backend_stop(struct perf_backend *b)
{
	DIR *dir;
	struct dirent *e;
	int st;

	if (b->pid > 0) {
		kill(b->pid, SIGTERM);
		waitpid(b->pid, &st, 0);
		b->pid = 0;
	}
	if (!b->dir[0])
		return;
	/* Only sockets we or the backend made live here. */
	dir = opendir(b->dir);
	while (dir && (e = readdir(dir))) {
		char p[sizeof(b->dir) + sizeof(e->d_name) + 1];

		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof(p), "%s/%s", b->dir, e->d_name);
			unlink(p);
		}
	}
	if (dir)
		closedir(dir);
	rmdir(b->dir);
	b->dir[0] = '\0';
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
