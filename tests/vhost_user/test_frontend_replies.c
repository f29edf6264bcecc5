// SPDX-License-Identifier: MIT
/*
 * The front-end against a back-end that answers badly: a reply without the
 * reply flag, to another request, truncated, oversized, with an fd where
 * none belongs, missing, or without VQ_F_VERSION_1: each fails the
 * connect with its error, and nothing leaks.  And one that answers well
 * on a non-blocking socket, served on a thread.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <virtq/guest/frontend.h>

#include "echo_dev.h"
#include "spec_msg.h"

static int fe_bad(const void *reply, size_t len, int fd, bool half_close,
		  char *err, size_t errlen)
{
	struct vq_vhu_frontend_config c = {
		.features = ECHO_FEATURES, .nqueues = 1, .queue_size = 64,
		.mem_size = 1 << 20, .timeout_ms = 200, .err = err, .errlen = errlen,
	};
	struct vq_vhu_frontend *f = (void *)1;
	int sv[2], r;

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	if (len)
		CHECK(send_with_fd(sv[1], &(struct iovec){ (void *)reply, len }, 1,
				   fd) == (ssize_t)len);
	if (half_close)
		shutdown(sv[1], SHUT_WR);
	r = vq_vhu_frontend_adopt_fd(sv[0], &c, &f);
	CHECK(f == NULL);
	close(sv[1]);
	fprintf(stderr, "   -> %d: %s\n", r, err);
	CHECK(spec_section_first(err));
	return r;
}

static void frontend_bad_replies(void)
{
	char err[256];
	int fds0 = count_fds(), maps0 = count_maps(), efd;
	uint32_t rep[5] = { VQ_VHU_GET_FEATURES, VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY, 8, 0, 1 };

	/* GET_FEATURES reply without the reply flag */
	rep[1] = VQ_VHU_VERSION;
	CHECK_EQ(fe_bad(rep, 20, -1, false, err, sizeof(err)), -EINVAL);
	/* a reply to another request */
	rep[0] = VQ_VHU_GET_PROTOCOL_FEATURES;
	rep[1] = VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY;
	CHECK_EQ(fe_bad(rep, 20, -1, false, err, sizeof(err)), -EPROTO);
	/* truncated, then the back-end is gone */
	rep[0] = VQ_VHU_GET_FEATURES;
	CHECK_EQ(fe_bad(rep, 14, -1, true, err, sizeof(err)), -EPIPE);
	/* oversized */
	rep[2] = 4096;
	CHECK_EQ(fe_bad(rep, 20, -1, false, err, sizeof(err)), -EMSGSIZE);
	/* an fd where none belongs: refused and closed */
	rep[2] = 8;
	efd = eventfd(0, EFD_CLOEXEC);
	CHECK_EQ(fe_bad(rep, 20, efd, false, err, sizeof(err)), -EBADF);
	close(efd);
	/* no answer at all */
	CHECK_EQ(fe_bad(NULL, 0, -1, false, err, sizeof(err)), -ETIMEDOUT);
	/* VERSION_1 not offered */
	rep[3] = 0;
	rep[4] = 0;
	CHECK_EQ(fe_bad(rep, 20, -1, false, err, sizeof(err)), -ENOTSUP);
	CHECK_EQ(count_fds(), fds0);
	CHECK_EQ(count_maps(), maps0);
}

/* The front-end waits for each reply in poll(), to its own timeout: a
 * socket handed to it non-blocking (inherited so) is served as a blocking
 * one is, not failed at the first read that finds no reply yet. */
static void frontend_waits_for_replies_on_a_nonblocking_socket(void)
{
	struct vq_vhu_frontend_config c = {
		.features = ECHO_FEATURES, .nqueues = 1, .queue_size = 64,
		.mem_size = 1 << 20, .timeout_ms = 2000,
	};
	int fds0 = count_fds(), sv[2];
	struct vq_vhu_frontend *f;
	struct echo e;
	pthread_t th;

	echo_init(&e);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
	CHECK_EQ(vq_vhu_backend_adopt_fd(e.b, sv[1]), 0);
	CHECK_EQ(pthread_create(&th, NULL, echo_serve_thread, &e), 0);
	CHECK_EQ(vq_vhu_frontend_adopt_fd(sv[0], &c, &f), 0);
	vq_vhu_frontend_free(f);
	CHECK_EQ(pthread_join(th, NULL), 0);
	vq_vhu_backend_free(e.b);
	CHECK_EQ(count_fds(), fds0);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	RUN(frontend_bad_replies);
	RUN(frontend_waits_for_replies_on_a_nonblocking_socket);
	return 0;
}
