// SPDX-License-Identifier: MIT
/*
 * The back-end reports through the log callback (virtq/log.h) and never
 * writes to stderr itself: hostile input (a ring address outside guest
 * memory, an oversized message, a refused SET_CONFIG, a front-end that
 * hangs up) with fd 2 redirected to a pipe that must stay empty, the
 * messages arriving through the callback with their levels instead; and
 * nothing at all without a callback.  The quiet-period warning of an
 * IOTLB invalidation is checked in test_backend_iotlb.c.
 */
#include "backend_fixture.h"

/* A ring address outside guest memory closes the connection: the reason
 * comes through the callback as an error, the connection's opening and
 * each message as info and debug, and fd 2 stays empty. */
static void bad_ring_address_logged_not_printed(struct fx *x)
{
	struct logged l = { 0 };
	int s, r;

	CHECK_EQ(vq_log_set(log_keep, &l, VQ_LOG_DEBUG), 0);
	stderr_to_pipe();
	s = cli(x);
	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT);
	r = pump(x);
	snd_state(s, VQ_VHU_SET_VRING_NUM, 0, 64);
	r = r == 1 ? pump(x) : r;
	snd_addr(s, 0, UA, UA + 0x1000, UA + GSIZE - 16);
	r = r == 1 ? pump(x) : r;       /* the used ring ends past memory */
	CHECK_EQ(stderr_restore(), 0);
	CHECK_EQ(vq_log_set(NULL, NULL, VQ_LOG_ERR), 0);
	log_dump(&l);
	/* SET_MEM_TABLE never came: refused before the addresses are read */
	CHECK_EQ(r, -EPROTO);
	CHECK(log_find(&l, VQ_LOG_INFO, "echo: a front-end connected") >= 0);
	CHECK(log_find(&l, VQ_LOG_DEBUG, "VHOST_USER_SET_FEATURES") >= 0);
	CHECK(log_find(&l, VQ_LOG_DEBUG, "VHOST_USER_SET_VRING_ADDR") >= 0);
	CHECK(log_find(&l, VQ_LOG_ERR, "echo: connection closed:") >= 0);
	CHECK(log_find(&l, VQ_LOG_ERR, vq_vhu_backend_error_msg(x->e.b)) >= 0);
	closed_with(x, s, r, -EPROTO);

	/* with memory: the address itself is wrong */
	memset(&l, 0, sizeof(l));
	CHECK_EQ(vq_log_set(log_keep, &l, VQ_LOG_ERR), 0);
	stderr_to_pipe();
	s = cli(x);
	setup_to_num(x, s, SPLIT, 64);
	snd_addr(s, 0, UA, UA + 0x1000, UA + GSIZE - 16);
	r = pump(x);
	CHECK_EQ(stderr_restore(), 0);
	CHECK_EQ(vq_log_set(NULL, NULL, VQ_LOG_ERR), 0);
	log_dump(&l);
	CHECK_EQ(l.n, 1);               /* errors only: no info, no debug */
	CHECK(log_find(&l, VQ_LOG_ERR, "echo: connection closed:") == 0);
	CHECK(log_find(&l, VQ_LOG_ERR, vq_vhu_backend_error_msg(x->e.b)) == 0);
	closed_with(x, s, r, -EFAULT);
}

/* A refused request keeps the connection and is a warning; the front-end
 * hanging up is info, and leaves no error message behind. */
static void refusal_and_hangup_logged(struct fx *x)
{
	struct { uint32_t off, size, flags; uint8_t data[8]; } cfg = { 6, 4, 0, { 0 } };
	struct logged l = { 0 };
	uint64_t ack;
	int s, r;

	CHECK_EQ(vq_log_set(log_keep, &l, VQ_LOG_INFO), 0);
	stderr_to_pipe();
	s = cli(x);
	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES,
		P_REPLY_ACK | VQ_BIT(VQ_VHU_PROTOCOL_F_CONFIG));
	r = pump(x);
	/* 4 bytes at 6 of an 8-byte config space */
	snd(s, VQ_VHU_SET_CONFIG, VQ_VHU_FLAG_NEED_REPLY, VQ_VHU_P_CONFIG, &cfg,
	    NULL, 0);
	r = r == 1 ? pump(x) : r;
	ack = rcv(s, VQ_VHU_SET_CONFIG, true).u.u64;
	close(s);
	r = r == 1 ? pump(x) : r;
	CHECK_EQ(stderr_restore(), 0);
	CHECK_EQ(vq_log_set(NULL, NULL, VQ_LOG_ERR), 0);
	log_dump(&l);
	CHECK_EQ(r, -ECONNRESET);
	CHECK(ack != 0);
	CHECK(log_find(&l, VQ_LOG_WARNING, "echo: refused: VHOST_USER_SET_CONFIG: ") >= 0);
	CHECK(spec_section_first(strstr(l.msg[log_find(&l, VQ_LOG_WARNING, "")],
					"refused: ") + 9));
	CHECK(log_find(&l, VQ_LOG_INFO, "echo: the front-end closed the connection") >= 0);
	CHECK_EQ(log_find(&l, VQ_LOG_ERR, ""), -1);
	CHECK_EQ(vq_vhu_backend_error_msg(x->e.b)[0], '\0');
	CHECK_EQ(count_fds(), x->fds0);
}

/* vq_vhu_backend_serve() said "connection closed" on stderr; now through
 * the callback (an oversized message, then EOF, serving until the
 * connection ends). */
static void serve_logs_closed_connection(struct fx *x)
{
	struct vq_vhu_device d = { .name = "served", .features = ECHO_FEATURES,
				   .nqueues = 1 };
	uint32_t h[3] = { VQ_VHU_SET_FEATURES, VQ_VHU_VERSION, 4096 };
	struct vq_vhu_backend *b;
	struct logged l = { 0 };
	int sv[2], r;

	(void)x;
	CHECK_EQ(vq_vhu_backend_new(&d, &b), 0);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	CHECK_EQ(vq_vhu_backend_adopt_fd(b, sv[0]), 0);
	CHECK_EQ(write(sv[1], h, sizeof(h)), (ssize_t)sizeof(h));
	CHECK_EQ(vq_log_set(log_keep, &l, VQ_LOG_WARNING), 0);
	stderr_to_pipe();
	r = vq_vhu_backend_serve(b, NULL, true);
	CHECK_EQ(stderr_restore(), 0);
	CHECK_EQ(vq_log_set(NULL, NULL, VQ_LOG_ERR), 0);
	log_dump(&l);
	CHECK_EQ(r, 0);
	CHECK_EQ(l.n, 1);
	CHECK(log_find(&l, VQ_LOG_ERR, "served: connection closed:") == 0);
	CHECK(strstr(l.msg[0], vq_vhu_backend_error_msg(b)));
	close(sv[1]);
	vq_vhu_backend_free(b);
}

/* No callback (the default): the same hostile input is silent. */
static void silent_without_callback(struct fx *x)
{
	uint32_t h[3] = { VQ_VHU_SET_FEATURES, VQ_VHU_VERSION, 4096 };
	int s, r;

	stderr_to_pipe();
	s = cli(x);
	CHECK_EQ(write(s, h, sizeof(h)), (ssize_t)sizeof(h));
	r = pump(x);
	CHECK_EQ(stderr_restore(), 0);
	closed_with(x, s, r, -EMSGSIZE);
}

int main(void)
{
	struct fx x;

	signal(SIGPIPE, SIG_IGN);
	fx_init(&x);
	T(bad_ring_address_logged_not_printed);
	T(refusal_and_hangup_logged);
	T(serve_logs_closed_connection);
	T(silent_without_callback);
	fx_fini(&x);
	return 0;
}
