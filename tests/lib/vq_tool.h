/* SPDX-License-Identifier: MIT */
/*
 * For tests that run a tool as a child process and judge it from outside:
 * its exit status within a deadline, what it wrote to a file, whether a
 * socket it should be listening on accepts.
 */
#ifndef VQ_TOOL_H
#define VQ_TOOL_H

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vq_test.h"

/* pid's exit status within ms (128 + the signal if one ended it), or -1:
 * it did not end, and is killed. */
static inline int vq_tool_exit_within(pid_t pid, int ms)
{
	int st;

	for (int i = 0; i < ms / 10; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/* The first n - 1 bytes of the file at path into buf; its lines. */
static inline int vq_tool_file_lines(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY), lines = 0;
	ssize_t len;

	CHECK(fd >= 0);
	len = read(fd, buf, n - 1);
	close(fd);
	CHECK(len >= 0);
	buf[len] = '\0';
	for (ssize_t i = 0; i < len; i++)
		lines += buf[i] == '\n';
	return lines;
}

/* Run argv[0] with argv, its stdout and stderr into the file at log
 * (made anew).  Its pid. */
static inline pid_t vq_tool_spawn(const char *const *argv, const char *log)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, 2);
		dup2(fd, 1);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/* Does a socket of type listen at path (a connect() succeeds)? */
static inline bool vq_test_unix_accepts(const char *path, int type)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	bool ok;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

#endif
