// SPDX-License-Identifier: MIT
/*
 * The fds a hostile front-end hands the back-end are its own: it keeps
 * their open file descriptions and may change their flags whenever it
 * likes.  A ring's kick, call and err fds must be eventfds (anything else
 * is refused at its SET_VRING_*, with the connection closed, nothing
 * leaked and the next front-end served).  Every step that could hang is
 * bounded by alarm(), so a regression fails instead of hanging the test
 * run.
 */
#include <sys/stat.h>
#include <sys/timerfd.h>

#include "backend_fixture.h"

static void on_alarm(int sig)
{
	static const char m[] = "a step blocked past its bound (alarm)\n";

	(void)sig;
	if (write(2, m, sizeof(m) - 1) < 0)
		_exit(1);
	_exit(1);
}

/* What the front-end passes instead of an eventfd, and how the back-end
 * must name it. */
enum kind { K_PIPE, K_PIPE_NO_READER, K_SOCKET, K_MEMFD, K_FIFO, K_FILE,
	    K_TIMERFD, K_N };

static const char *const kind_name[K_N] = {
	"a pipe", "a pipe", "a socket", "a memfd", "a FIFO", "a regular file",
	"anon_inode:[timerfd]",
};

static const char *const kind_label[K_N] = {
	"a pipe", "a pipe whose reader is closed", "a socket", "a memfd",
	"a FIFO", "a regular file", "a timerfd",
};

static int open_kind(struct fx *x, enum kind k)
{
	char path[96];
	int p[2], fd = -1;

	switch (k) {
	case K_PIPE:
		CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
		close(p[1]);
		return p[0];
	case K_PIPE_NO_READER:
		CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
		close(p[0]);
		return p[1];
	case K_SOCKET:
		CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p), 0);
		close(p[1]);
		return p[0];
	case K_MEMFD:
		fd = memfd_create("vhu-test-not-an-eventfd", MFD_CLOEXEC);
		break;
	case K_FIFO:
		snprintf(path, sizeof(path), "%s/fifo", x->dir);
		CHECK_EQ(mkfifo(path, 0600), 0);
		fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
		unlink(path);
		break;
	case K_FILE:
		snprintf(path, sizeof(path), "%s/file", x->dir);
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		unlink(path);
		break;
	case K_TIMERFD:
		fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
		break;
	case K_N:
		break;
	}
	CHECK(fd >= 0);
	return fd;
}

static const char *const req_name[3] = {
	"VHOST_USER_SET_VRING_KICK", "VHOST_USER_SET_VRING_CALL",
	"VHOST_USER_SET_VRING_ERR",
};

/*
 * vhost-user SET_VRING_KICK, _CALL, _ERR pass "the event file descriptor":
 * an fd that is not an eventfd is refused at its message, with an error
 * naming the request, the queue and what the fd is, before any ring uses
 * it (the ring is neither paused nor restarted with it); the connection
 * closes, leaking nothing, and the next one is served.  A kick on a ring
 * set up to its addresses, a call on a running ring, an err on queue 1
 * before it has anything.
 */
static void vring_fds_must_be_eventfds(struct fx *x)
{
	static const uint32_t req[3] = { VQ_VHU_SET_VRING_KICK,
					 VQ_VHU_SET_VRING_CALL,
					 VQ_VHU_SET_VRING_ERR };

	for (unsigned ri = 0; ri < 3; ri++) {
		for (unsigned k = 0; k < K_N; k++) {
			int s = cli(x), good = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
			int bad = open_kind(x, (enum kind)k), r;
			unsigned q = req[ri] == VQ_VHU_SET_VRING_ERR ? 1 : 0;
			unsigned starts, pauses;
			char want[160];

			fprintf(stderr, "   %s with %s\n", req_name[ri], kind_label[k]);
			split_ring(x, s, SPLIT, req[ri] == VQ_VHU_SET_VRING_KICK ? -1 : good);
			starts = x->e.starts;
			pauses = x->e.pauses;
			snd_vring_fd(s, req[ri], q, bad);
			close(bad);
			close(good);
			alarm(10);
			r = pump(x);
			alarm(0);
			snprintf(want, sizeof(want), "%s: queue %u: the fd is %s, not an eventfd",
				 req_name[ri], q, kind_name[k]);
			if (strcmp(vq_vhu_backend_error_msg(x->e.b), want))
				fprintf(stderr, "   expected: %s\n", want);
			CHECK(!strcmp(vq_vhu_backend_error_msg(x->e.b), want));
			CHECK_EQ(x->e.starts, starts);
			CHECK_EQ(x->e.pauses, pauses);
			closed_with(x, s, r, -EINVAL);
			x->e.starts = x->e.stops = x->e.pauses = 0;
		}
	}
}

int main(void)
{
	struct fx x;

	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, on_alarm);
	fx_init(&x);
	T(vring_fds_must_be_eventfds);
	fx_fini(&x);
	return 0;
}
