// SPDX-License-Identifier: MIT
/*
 * virtq-net's lifecycle with the vhost-user socket it is given (issue 24):
 *  - --client waits for the front-end's socket to appear (saying so once)
 *    instead of exiting, and connects when it does;
 *  - an inherited connection (--fd) that hangs up ends the daemon with one
 *    line: exit 0 with --once, 1 without (it cannot listen again), even
 *    when the hang-up comes in the same read as the last message.
 * argv[1]: the virtq-net binary.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vq_tool.h"

static const char *bin;
static char dir[40], errlog[64];

/* Start bin with args, stderr into errlog; inherit keeps that fd open. */
static pid_t spawn(const char *const *args, int inherit)
{
	const char *argv[16] = { bin };
	unsigned n = 1;
	pid_t pid;

	for (; args[n - 1] && n < 15; n++)
		argv[n] = args[n - 1];
	argv[n] = NULL;
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int fd = open(errlog, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int nul = open("/dev/null", O_RDWR);

		dup2(fd, 2);
		dup2(nul, 1);
		dup2(nul, 0);
		for (int i = 3; i < 64; i++)
			if (i != inherit)
				close(i);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	return pid;
}

static int listen_at(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	CHECK(fd >= 0);
	CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK_EQ(listen(fd, 1), 0);
	return fd;
}

/* vhost-user.rst: the back-end may be the client; QEMU's socket appears
 * when QEMU starts.  Before: "cannot open" and exit 1 at once. */
static void client_waits_for_the_front_end_socket(void)
{
	char path[64], log[4096];
	const char *args[] = { "--client", "--socket-path", path, "--once", "--quiet", NULL };
	int ls, c = -1;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/fe.sock", dir);
	pid = spawn(args, -1);
	usleep(1500 * 1000);            /* a retry or two */
	CHECK_EQ(waitpid(pid, NULL, WNOHANG), 0);       /* still waiting */
	CHECK_EQ(vq_tool_file_lines(errlog, log, sizeof(log)), 1);       /* said once */
	CHECK(strstr(log, "waiting for a front-end to listen on"));
	CHECK(strstr(log, path));
	ls = listen_at(path);
	for (int i = 0; i < 300; i++) { /* it tries every second */
		c = accept4(ls, NULL, NULL, SOCK_NONBLOCK);
		if (c >= 0)
			break;
		usleep(10000);
	}
	CHECK(c >= 0);
	close(c);                       /* --once: that front-end is gone */
	CHECK_EQ(vq_tool_exit_within(pid, 3000), 0);
	close(ls);
	unlink(path);
}

/*
 * A connection given with --fd carries a message and hangs up before the
 * daemon reads anything: one drain sees both.  Before: --once missed the
 * hang-up and the daemon polled fd -1 for ever.
 */
static int fd_hang_up_after_a_message(bool once, char *log, size_t n)
{
	/* VHOST_USER_SET_OWNER (3), flags: version 1, no payload */
	static const uint32_t set_owner[3] = { 3, 1, 0 };
	const char *args[] = { "--fd", NULL, "--quiet", once ? "--once" : NULL, NULL };
	char fdnum[16];
	int sv[2], rc;
	pid_t pid;

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	CHECK_EQ(write(sv[0], set_owner, sizeof(set_owner)), (ssize_t)sizeof(set_owner));
	close(sv[0]);
	snprintf(fdnum, sizeof(fdnum), "%d", sv[1]);
	args[1] = fdnum;
	pid = spawn(args, sv[1]);
	close(sv[1]);
	rc = vq_tool_exit_within(pid, 3000);
	CHECK_EQ(vq_tool_file_lines(errlog, log, n), 1);
	CHECK(strstr(log, "hung up"));
	return rc;
}

static void fd_hang_up_ends_once(void)
{
	char log[4096];

	CHECK_EQ(fd_hang_up_after_a_message(true, log, sizeof(log)), 0);
}

static void fd_hang_up_without_once_cannot_listen_again(void)
{
	char log[4096];

	CHECK_EQ(fd_hang_up_after_a_message(false, log, sizeof(log)), 1);
	CHECK(strstr(log, "cannot be listened on again"));
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return VQ_TEST_SKIP;
	bin = argv[1];
	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "/tmp/vq-lifecycle.XXXXXX");
	CHECK(mkdtemp(dir));
	snprintf(errlog, sizeof(errlog), "%s/log", dir);
	RUN(fd_hang_up_ends_once);
	RUN(fd_hang_up_without_once_cannot_listen_again);
	RUN(client_waits_for_the_front_end_socket);
	unlink(errlog);
	rmdir(dir);
	return 0;
}
