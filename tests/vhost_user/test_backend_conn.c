// SPDX-License-Identifier: MIT
/*
 * The back-end's connection and dispatch against a hand-driven front-end:
 * every malformed message (truncated, oversized, wrong fd counts, unknown,
 * out of range, a front-end gone mid-message, features not offered or
 * gated by a protocol feature not negotiated) gets its error, a closed
 * connection, a back-end that serves the next one, and no fd or
 * guest-mapping leak; then REPLY_ACK, SEND_RARP, NET_SET_MTU, STATUS and
 * RESET_DEVICE.
 */
#include <poll.h>
#include <pthread.h>
#include <time.h>

#include "backend_fixture.h"

static void bad_truncated_header_frontend_gone(struct fx *x)
{
	int s = cli(x);

	CHECK_EQ(write(s, "\x01\0\0\0\x01\0\0", 7), 7);
	shutdown(s, SHUT_WR);
	expect_closed(x, s, -EPIPE);
}

static void bad_truncated_payload_frontend_stalls(struct fx *x)
{
	int s = cli(x);
	uint32_t h[4] = { VQ_VHU_SET_FEATURES, VQ_VHU_VERSION, 8, 1 };

	CHECK_EQ(write(s, h, 16), 16);  /* 4 of 8 payload bytes, then silence */
	expect_closed(x, s, -ETIMEDOUT);
}

static void bad_oversized_message(struct fx *x)
{
	int s = cli(x);
	uint32_t h[3] = { VQ_VHU_SET_FEATURES, VQ_VHU_VERSION, 4096 };

	CHECK_EQ(write(s, h, 12), 12);
	expect_closed(x, s, -EMSGSIZE);
}

static void bad_wrong_fd_count_kick_without_fd(struct fx *x)
{
	int s = cli(x);
	/* vring 0, "no fd" flag clear, and no fd sent */
	uint32_t m[5] = { VQ_VHU_SET_VRING_KICK, VQ_VHU_VERSION, 8, 0, 0 };

	CHECK_EQ(write(s, m, 20), 20);
	expect_closed(x, s, -EBADF);
}

static void bad_wrong_fd_count_fd_on_set_owner(struct fx *x)
{
	int s = cli(x), fd = eventfd(0, EFD_CLOEXEC);

	snd(s, VQ_VHU_SET_OWNER, 0, VQ_VHU_P_NONE, NULL, &fd, 1);
	close(fd);
	expect_closed(x, s, -EBADF);
}

static void bad_wrong_fd_count_mem_table(struct fx *x)
{
	int s = cli(x);
	struct vq_vhu_region r[2] = { whole(x), { GSIZE, 4096, UA + GSIZE, 0 } };
	uint32_t h[3] = { VQ_VHU_SET_MEM_TABLE, VQ_VHU_VERSION, 8 + 64 };
	uint8_t p[8 + 64] = { 2 };

	memcpy(p + 8, r, sizeof(r));
	/* two regions, one fd */
	CHECK(send_with_fd(s, (struct iovec[2]){ { h, 12 }, { p, sizeof(p) } }, 2,
			   x->gfd) > 0);
	expect_closed(x, s, -EBADF);
}

static void bad_unknown_request(struct fx *x)
{
	int s = cli(x);
	uint32_t h[3] = { 23 /* SET_VRING_ENDIAN: not implemented */, VQ_VHU_VERSION, 0 };

	CHECK_EQ(write(s, h, 12), 12);
	expect_closed(x, s, -EOPNOTSUPP);
}

static void bad_vring_index_past_queue_count(struct fx *x)
{
	int s = cli(x);

	snd_state(s, VQ_VHU_SET_VRING_NUM, ECHO_NQ, 64);
	expect_closed(x, s, -ERANGE);
}

static void bad_frontend_gone_mid_message(struct fx *x)
{
	int s = cli(x);
	uint32_t h[3] = { VQ_VHU_SET_MEM_TABLE, VQ_VHU_VERSION, 8 + 32 };
	uint8_t p[10] = { 1 };

	/* header, an fd and 10 of 40 payload bytes; then the front-end dies */
	CHECK(send_with_fd(s, (struct iovec[2]){ { h, 12 }, { p, sizeof(p) } }, 2,
			   x->gfd) > 0);
	shutdown(s, SHUT_WR);
	expect_closed(x, s, -EPIPE);
}

static void bad_features_not_offered(struct fx *x)
{
	int s = cli(x);

	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT | VQ_BIT(38) /* NOTIFICATION_DATA */);
	expect_closed(x, s, -EINVAL);
}

static void bad_features_without_version_1(struct fx *x)
{
	int s = cli(x);

	snd_u64(s, VQ_VHU_SET_FEATURES, VQ_BIT(VQ_F_EVENT_IDX));
	expect_closed(x, s, -EINVAL);
}

static void bad_request_needs_protocol_feature(struct fx *x)
{
	int s = cli(x);

	snd_none(s, VQ_VHU_GET_MAX_MEM_SLOTS);
	expect_closed(x, s, -EPROTO);
}

static void reply_ack_success_and_failure(struct fx *x)
{
	int s = cli(x);
	struct { uint32_t index, flags; uint64_t desc, used, avail, log; } a =
		{ 0, 0, UA, UA + 0x2000, UA + 0x1000, 0 };
	int r;

	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, VQ_BIT(VQ_VHU_PROTOCOL_F_REPLY_ACK));
	ok(x);
	snd(s, VQ_VHU_SET_OWNER, VQ_VHU_FLAG_NEED_REPLY, VQ_VHU_P_NONE, NULL, NULL, 0);
	ok(x);
	CHECK_EQ(rcv(s, VQ_VHU_SET_OWNER, true).u.u64, 0);
	/* a refused request is acked non-zero, then the connection closes */
	snd(s, VQ_VHU_SET_VRING_ADDR, VQ_VHU_FLAG_NEED_REPLY, VQ_VHU_P_ADDR, &a, NULL, 0);
	r = pump(x);
	CHECK(rcv(s, VQ_VHU_SET_VRING_ADDR, true).u.u64 != 0);
	closed_with(x, s, r, -EPROTO);
}

/* A device without the callback a protocol feature needs (an ops table of
 * queue_start and queue_stop only) is not offered that feature. */
static void not_offered_without_callback(struct fx *x, const char *name,
					 unsigned bit)
{
	static const struct vq_vhu_device_ops bare_ops = {
		.queue_start = echo_start, .queue_stop = echo_stop,
	};
	struct vq_vhu_device d = { .name = name, .features = ECHO_FEATURES,
				   .nqueues = 1, .ops = &bare_ops };
	struct vq_vhu_backend *b;
	char path[80];
	int s;

	CHECK_EQ(vq_vhu_backend_new(&d, &b), 0);
	snprintf(path, sizeof(path), "%s/%s", x->dir, name);
	CHECK_EQ(vq_vhu_backend_listen(b, path, 0), 0);
	s = cli_connect(path);
	CHECK_EQ(vq_vhu_backend_process(b), 1);
	snd_none(s, VQ_VHU_GET_PROTOCOL_FEATURES);
	CHECK_EQ(vq_vhu_backend_process(b), 1);
	CHECK(!(rcv(s, VQ_VHU_GET_PROTOCOL_FEATURES, false).u.u64 & VQ_BIT(bit)));
	close(s);
	vq_vhu_backend_free(b);
	CHECK_EQ(count_fds(), x->fds0);
}

/* vhost-user "VHOST_USER_SEND_RARP": legal only with PROTOCOL_F_RARP, which
 * is offered when the device can announce; the guest's MAC is the payload's
 * first six bytes.  A device that could not send it fails the REPLY_ACK and
 * the connection stays. */
static void send_rarp_mac_and_ack(struct fx *x)
{
	static const uint8_t mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };
	uint64_t v = 0;
	int s, r;

	for (unsigned i = 0; i < 6; i++)
		v |= (uint64_t)mac[i] << (8 * i);
	s = cli(x);
	CHECK(get_u64(x, s, VQ_VHU_GET_PROTOCOL_FEATURES) & VQ_BIT(VQ_VHU_PROTOCOL_F_RARP));
	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, VQ_BIT(VQ_VHU_PROTOCOL_F_RARP) |
		VQ_BIT(VQ_VHU_PROTOCOL_F_REPLY_ACK));
	ok(x);
	snd(s, VQ_VHU_SEND_RARP, VQ_VHU_FLAG_NEED_REPLY, VQ_VHU_P_U64, &v, NULL, 0);
	ok(x);
	CHECK_EQ(rcv(s, VQ_VHU_SEND_RARP, true).u.u64, 0);
	CHECK_EQ(x->e.rarps, 1);
	CHECK(!memcmp(x->e.rarp_mac, mac, 6));
	x->e.rarp_err = -ENETDOWN;
	snd(s, VQ_VHU_SEND_RARP, VQ_VHU_FLAG_NEED_REPLY, VQ_VHU_P_U64, &v, NULL, 0);
	ok(x);
	CHECK(rcv(s, VQ_VHU_SEND_RARP, true).u.u64 != 0);
	x->e.rarp_err = 0;
	CHECK(vq_vhu_backend_connected(x->e.b));
	CHECK_EQ(get_u64(x, s, VQ_VHU_GET_QUEUE_NUM), ECHO_NQ);
	close(s);
	CHECK_EQ(pump(x), -ECONNRESET);

	/* not negotiated: a protocol violation */
	s = cli(x);
	snd_u64(s, VQ_VHU_SEND_RARP, v);
	r = pump(x);
	CHECK_EQ(x->e.rarps, 2);
	closed_with(x, s, r, -EPROTO);

	/* a device without send_rarp does not offer it */
	not_offered_without_callback(x, "no-rarp", VQ_VHU_PROTOCOL_F_RARP);
}

/* vhost-user "VHOST_USER_NET_SET_MTU": legal only with PROTOCOL_F_NET_MTU,
 * offered when the device takes an MTU; 68-65535 (virtio 5.1.4.1), and
 * one the device cannot carry fails the REPLY_ACK with the connection kept. */
static void net_set_mtu_range_and_ack(struct fx *x)
{
	static const struct { uint64_t mtu; bool ok; } c[] = {
		{ 1500, true }, { 68, true }, { 9000, true },
		{ 67, false }, { 9001, false }, { 65536, false }, { 1ull << 40, false },
	};
	int s, r;

	s = cli(x);
	CHECK(get_u64(x, s, VQ_VHU_GET_PROTOCOL_FEATURES) & VQ_BIT(VQ_VHU_PROTOCOL_F_MTU));
	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, VQ_BIT(VQ_VHU_PROTOCOL_F_MTU) |
		VQ_BIT(VQ_VHU_PROTOCOL_F_REPLY_ACK));
	ok(x);
	for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		x->e.mtu = 0;
		snd(s, VQ_VHU_NET_SET_MTU, VQ_VHU_FLAG_NEED_REPLY, VQ_VHU_P_U64, &c[i].mtu, NULL, 0);
		ok(x);
		CHECK_EQ(rcv(s, VQ_VHU_NET_SET_MTU, true).u.u64 == 0, c[i].ok);
		CHECK_EQ(x->e.mtu, c[i].ok ? c[i].mtu : 0);
	}
	CHECK(vq_vhu_backend_connected(x->e.b));
	close(s);
	CHECK_EQ(pump(x), -ECONNRESET);

	/* not negotiated: a protocol violation */
	s = cli(x);
	snd_u64(s, VQ_VHU_NET_SET_MTU, 1500);
	r = pump(x);
	closed_with(x, s, r, -EPROTO);

	/* a device without set_mtu does not offer it */
	not_offered_without_callback(x, "no-mtu", VQ_VHU_PROTOCOL_F_MTU);
}

static void status_set_get(struct fx *x)
{
	int s = cli(x);

	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, VQ_BIT(VQ_VHU_PROTOCOL_F_STATUS));
	ok(x);
	snd_u64(s, VQ_VHU_SET_STATUS, 0xb);
	ok(x);
	CHECK_EQ(get_u64(x, s, VQ_VHU_GET_STATUS), 0xb);
	close(s);
	CHECK_EQ(pump(x), -ECONNRESET);
}

static void reset_device_forgets_state(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC);
	unsigned resets = x->e.resets;

	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, VQ_BIT(VQ_VHU_PROTOCOL_F_RESET_DEVICE));
	ok(x);
	split_ring(x, s, SPLIT, k);
	CHECK(x->e.q[0].on);
	snd_none(s, VQ_VHU_RESET_DEVICE);
	ok(x);
	CHECK(!x->e.q[0].on);
	CHECK_EQ(vq_vhu_backend_features(x->e.b), 0);
	CHECK_EQ(x->e.resets, resets + 1);
	CHECK(vq_vhu_backend_connected(x->e.b));        /* ownership retained */
	close(s);
	close(k);
	CHECK_EQ(pump(x), -ECONNRESET);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

static void *fail_from_thread(void *arg)
{
	vq_vhu_backend_fail(arg, -EFAULT,
			    "vhost-user \"Memory regions description\": a test thread gave up on it");
	return NULL;
}

/* A failure found off the control thread closes the connection: the
 * socket becomes readable however the control thread waits for it, and
 * the next process() closes with the error; a second failure of the same
 * connection does not replace the first, and the next connection has
 * none. */
static void fail_from_another_thread(struct fx *x)
{
	int s = cli(x);
	struct pollfd p = { .fd = vq_vhu_backend_fd(x->e.b), .events = POLLIN };
	pthread_t th;
	int r;

	CHECK_EQ(pthread_create(&th, NULL, fail_from_thread, x->e.b), 0);
	CHECK_EQ(pthread_join(th, NULL), 0);
	vq_vhu_backend_fail(x->e.b, -EIO, "vhost-user: the second failure");
	CHECK_EQ(poll(&p, 1, 2000), 1);
	r = pump(x);
	CHECK(strstr(vq_vhu_backend_error_msg(x->e.b), "test thread"));
	closed_with(x, s, r, -EFAULT);
	/* without a connection it does nothing */
	vq_vhu_backend_fail(x->e.b, -EIO, "vhost-user: nobody to fail");
	s = cli(x);
	CHECK_EQ(get_u64(x, s, VQ_VHU_GET_QUEUE_NUM), ECHO_NQ);
	close(s);
	CHECK_EQ(pump(x), -ECONNRESET);
}

/* A second back-end on an adopted connection (an inherited --fd), whose
 * front-end keeps a dup of the end it gave and makes that socket blocking
 * with no timeouts (SO_RCVTIMEO, SO_SNDTIMEO 0): the flags of the very
 * description we read and write. */
struct adopted {
	struct echo e;
	int s;          /* the front-end's end */
	int dup;        /* its dup of ours */
};

static void adopted_open(struct adopted *a)
{
	struct timeval tv = { 0 };
	int sv[2];

	echo_init(&a->e);
	vq_vhu_backend_set_recv_timeout(a->e.b, 200);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	CHECK_EQ(vq_vhu_backend_adopt_fd(a->e.b, sv[0]), 0);
	a->s = sv[1];
	a->dup = dup(sv[0]);
	CHECK(a->dup >= 0);
	CHECK_EQ(setsockopt(a->dup, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	CHECK_EQ(setsockopt(a->dup, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)), 0);
	CHECK_EQ(fcntl(a->dup, F_SETFL, fcntl(a->dup, F_GETFL) & ~O_NONBLOCK), 0);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The connection closed with err and message text, and left nothing. */
static void adopted_closed(struct fx *x, struct adopted *a, int r, int err,
			   const char *text)
{
	fprintf(stderr, "   -> %d: %s\n", r, vq_vhu_backend_error_msg(a->e.b));
	CHECK_EQ(r, err);
	CHECK(!vq_vhu_backend_connected(a->e.b));
	CHECK(strstr(vq_vhu_backend_error_msg(a->e.b), text));
	vq_vhu_backend_free(a->e.b);
	close(a->s);
	close(a->dup);
	CHECK_EQ(count_fds(), x->fds0);
}

/* vhost-user "Communication": a message that stalls half-way closes the
 * connection after the receive timeout, ours, whatever the front-end set
 * on the socket: blocking, SO_RCVTIMEO cleared. */
static void frontend_stalls_mid_message_on_a_socket_it_made_blocking(struct fx *x)
{
	uint32_t h[4] = { VQ_VHU_SET_FEATURES, VQ_VHU_VERSION, 8, 1 };
	struct adopted a;
	uint64_t t0, ms;
	int r;

	adopted_open(&a);
	CHECK_EQ(write(a.s, h, 16), 16);        /* 4 of 8 payload bytes */
	alarm(10);
	t0 = now_ms();
	r = vq_vhu_backend_process(a.e.b);
	ms = now_ms() - t0;
	alarm(0);
	fprintf(stderr, "   closed after %llu ms\n", (unsigned long long)ms);
	CHECK(ms >= 150 && ms < 2000);
	adopted_closed(x, &a, r, -ETIMEDOUT, "stalled past the receive timeout");
}

/* A reply the front-end does not read: once the socket is full the send
 * waits for the same timeout, ours, then the connection closes; the
 * front-end's blocking flag and cleared SO_SNDTIMEO do not hold us. */
static void frontend_reads_no_reply_on_a_socket_it_made_blocking(struct fx *x)
{
	static uint32_t reqs[3000][3];
	struct adopted a;
	unsigned n = 0;
	int r = 1;

	adopted_open(&a);
	for (unsigned i = 0; i < 3000; i++) {
		reqs[i][0] = VQ_VHU_GET_FEATURES;
		reqs[i][1] = VQ_VHU_VERSION;
	}
	CHECK_EQ(write(a.s, reqs, sizeof(reqs)), (ssize_t)sizeof(reqs));
	alarm(20);
	while (r > 0 && n < 3000) {
		r = vq_vhu_backend_process(a.e.b);
		n++;
	}
	alarm(0);
	fprintf(stderr, "   %u replies went out\n", n - 1);
	adopted_closed(x, &a, r, -ETIMEDOUT,
		       "vhost-user \"Communication\": sending the reply to VHOST_USER_GET_FEATURES failed: Connection timed out");
}

int main(void)
{
	struct fx x;

	signal(SIGPIPE, SIG_IGN);
	alarm_fails();
	fx_init(&x);
	T(bad_truncated_header_frontend_gone);
	T(bad_truncated_payload_frontend_stalls);
	T(bad_oversized_message);
	T(bad_wrong_fd_count_kick_without_fd);
	T(bad_wrong_fd_count_fd_on_set_owner);
	T(bad_wrong_fd_count_mem_table);
	T(bad_unknown_request);
	T(bad_vring_index_past_queue_count);
	T(bad_frontend_gone_mid_message);
	T(bad_features_not_offered);
	T(bad_features_without_version_1);
	T(bad_request_needs_protocol_feature);
	T(reply_ack_success_and_failure);
	T(send_rarp_mac_and_ack);
	T(net_set_mtu_range_and_ack);
	T(status_set_get);
	T(reset_device_forgets_state);
	T(fail_from_another_thread);
	T(frontend_stalls_mid_message_on_a_socket_it_made_blocking);
	T(frontend_reads_no_reply_on_a_socket_it_made_blocking);
	fx_fini(&x);
	return 0;
}
