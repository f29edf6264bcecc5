// SPDX-License-Identifier: MIT
/*
 * Seqpacket connections (virtio 1.2 5.10.6.6, VQ_VSOCK_F_SEQPACKET):
 * message bounds kept both ways between our guest driver and a host
 * SOCK_SEQPACKET socket, through fragmentation, a slow host and the
 * guest's credit; and the limits: a host message the guest could never
 * take, a guest that leaves a message unfinished, a backlog without end.
 * Split and packed rings.
 */
#include "vsock_fixture.h"

static const struct fx_opts dflt = { 0 };

#define SEQ VQ_VSOCK_TYPE_SEQPACKET

static uint8_t msg[300000], got[300000];

static void fill(uint8_t *p, uint32_t len, uint64_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		p[i] = fx_byte(seed, i);
}

static bool same(const uint8_t *p, uint32_t len, uint64_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		if (p[i] != fx_byte(seed, i))
			return false;
	return true;
}

/* A guest seqpacket connection to host port `port`, established. */
static struct vq_vsg_conn *seq_connect(struct fx *f, uint32_t port)
{
	struct vq_vsg_conn *c;
	int i;

	fx_listen(f, port);
	c = fx_connect(f, port, SEQ);
	CHECK(c);
	for (i = 0; i < 100 && vq_vsg_state(c) == VQ_VSG_CONNECTING; i++)
		fx_round(f);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_ESTABLISHED);
	return c;
}

/* The host end must be a SOCK_SEQPACKET socket. */
static void host_is_seqpacket(int hfd)
{
	int type = 0;
	socklen_t l = sizeof(type);

	CHECK_EQ(getsockopt(hfd, SOL_SOCKET, SO_TYPE, &type, &l), 0);
	CHECK_EQ(type, SOCK_SEQPACKET);
}

static void vsock_5_10_6_6_guest_messages_keep_bounds(void)
{
	static const uint32_t sizes[] = { 1, 0, 100, 4096, 65536, 65537, 200000, 7 };
	struct fx f;
	struct vq_vsg_conn *c;
	int hfd;

	fx_init(&f, &dflt);
	c = seq_connect(&f, 10);
	hfd = fx_host(&f, 0);
	host_is_seqpacket(hfd);
	for (unsigned i = 0; i < FX_ARRAY_SIZE(sizes); i++) {
		fill(msg, sizes[i], i);
		CHECK_EQ(vq_vsg_write_msg(c, msg, sizes[i]), (long)sizes[i]);
		fx_settle(&f);
		/* one read, one message: exactly its bytes */
		CHECK_EQ(recv(hfd, got, sizeof(got), MSG_DONTWAIT), (ssize_t)sizes[i]);
		CHECK(same(got, sizes[i], i));
	}
	CHECK_EQ(recv(hfd, got, sizeof(got), MSG_DONTWAIT), -1);
	CHECK_EQ(vq_vsock_stats(f.dev)->bad_seq, 0);
	CHECK_EQ(vq_vsock_stats(f.dev)->rst_sent, 0);
	fx_fini(&f);
}

static void vsock_5_10_6_6_host_messages_keep_bounds_eom(void)
{
	/* 5000: more than one 4 KiB RX buffer; 70000: more than one packet */
	static const uint32_t sizes[] = { 1, 0, 5000, 70000, 100, 4052 };
	struct fx f;
	struct vq_vsg_conn *c;
	int hfd;

	fx_init(&f, &dflt);
	c = seq_connect(&f, 11);
	hfd = fx_host(&f, 0);
	for (unsigned i = 0; i < FX_ARRAY_SIZE(sizes); i++) {
		fill(msg, sizes[i], 100 + i);
		CHECK_EQ(send(hfd, msg, sizes[i], 0), (ssize_t)sizes[i]);
	}
	fx_settle(&f);
	for (unsigned i = 0; i < FX_ARRAY_SIZE(sizes); i++) {
		CHECK_EQ(vq_vsg_read_msg(c, got, sizeof(got)), (long)sizes[i]);
		CHECK(same(got, sizes[i], 100 + i));
	}
	CHECK_EQ(vq_vsg_read_msg(c, got, sizeof(got)), -EAGAIN);
	/* the host closes: the guest gets SHUTDOWN, no phantom message */
	close(hfd);
	f.host[0] = -1;
	fx_settle(&f);
	CHECK(vq_vsg_eof(c));
	CHECK_EQ(vq_vsg_read_msg(c, got, sizeof(got)), -EAGAIN);
	CHECK_EQ(vq_vsock_stats(f.dev)->host_msg_too_big, 0);
	fx_fini(&f);
}

/* A host that reads slowly: messages wait whole in the device, in order,
 * the guest's window closes and reopens, nothing is merged or lost. */
static void seqpacket_slow_host_in_order(void)
{
	enum { N = 600, SZ = 1500 };
	struct fx f;
	struct vq_vsg_conn *c;
	unsigned sent = 0, recvd = 0, rounds = 0;
	int hfd;

	fx_init(&f, &dflt);
	c = seq_connect(&f, 12);
	hfd = fx_host(&f, 0);
	while (recvd < N) {
		CHECK(++rounds < 100000);
		while (sent < N) {
			fill(msg, SZ - sent % 7, sent);
			long r = vq_vsg_write_msg(c, msg, SZ - sent % 7);

			CHECK(r >= 0);
			if (r == 0)
				break;
			sent++;
		}
		fx_round(&f);
		/* the host wakes up now and then, and reads a few */
		if (rounds % 16 == 0) {
			for (int k = 0; k < 20 && recvd < N; k++) {
				ssize_t r = recv(hfd, got, sizeof(got), MSG_DONTWAIT);

				if (r < 0)
					break;
				CHECK_EQ(r, (ssize_t)(SZ - recvd % 7));
				CHECK(same(got, (uint32_t)r, recvd));
				recvd++;
			}
		}
	}
	CHECK(vq_vsock_stats(f.dev)->host_stalls > 0);
	CHECK_EQ(vq_vsock_stats(f.dev)->bad_seq, 0);
	CHECK_EQ(vq_vsock_stats(f.dev)->bad_credit, 0);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_ESTABLISHED);
	fx_fini(&f);
}

/* A host message larger than the guest's whole buffer could never be
 * received: the connection is reset and counted, not wedged. */
static void seqpacket_host_message_too_big_resets(void)
{
	static const struct fx_opts small = { .guest_buf_alloc = 8192 };
	struct fx f;
	struct vq_vsg_conn *c;
	int hfd;

	fx_init(&f, &small);
	c = seq_connect(&f, 13);
	hfd = fx_host(&f, 0);
	fill(msg, 8192, 1);
	CHECK_EQ(send(hfd, msg, 8192, 0), 8192);        /* fits exactly */
	CHECK_EQ(send(hfd, msg, 8193, 0), 8193);
	fx_settle(&f);
	CHECK_EQ(vq_vsg_read_msg(c, got, sizeof(got)), 8192);
	fx_settle(&f);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_CLOSED);
	CHECK_EQ(vq_vsock_stats(f.dev)->host_msg_too_big, 1);
	CHECK_EQ(vq_vsock_conn_count(f.dev), 0);
	/* closed with the refused message unread: the host sees a reset */
	CHECK_EQ(recv(hfd, got, sizeof(got), MSG_DONTWAIT), -1);
	CHECK_EQ(errno, ECONNRESET);
	fx_fini(&f);
}

/* A guest that stops sending in the middle of a message: the part never
 * reaches the host as a message, the host reads EOF. */
static void seqpacket_guest_shutdown_mid_message(void)
{
	struct fx f;
	struct vq_vsg_conn *c;
	struct vq_vsock_hdr h;
	uint8_t pkt[44 + 10];
	int hfd;

	fx_init(&f, &dflt);
	c = seq_connect(&f, 14);
	hfd = fx_host(&f, 0);
	vq_vsg_hdr(f.g, &h, vq_vsg_local_port(c), 14, VQ_VSOCK_OP_RW, 10);
	h.type = vq_le16(SEQ);          /* no SEQ_EOM */
	memcpy(pkt, &h, sizeof(h));
	memset(pkt + 44, 'p', 10);
	CHECK_EQ(vq_vsg_send_bytes(f.g, pkt, sizeof(pkt)), 0);
	fx_settle(&f);
	CHECK_EQ(recv(hfd, got, sizeof(got), MSG_DONTWAIT), -1);
	CHECK_EQ(vq_vsg_shutdown(c, VQ_VSOCK_SHUTDOWN_SEND | VQ_VSOCK_SHUTDOWN_RCV), 0);
	fx_settle(&f);
	CHECK_EQ(vq_vsock_stats(f.dev)->bad_seq, 1);
	CHECK_EQ(recv(hfd, got, sizeof(got), MSG_DONTWAIT), 0);  /* EOF */
	fx_fini(&f);
}

/* Messages into a host that reads none cost the device a slot each and
 * the guest (for tiny ones) almost no credit: the backlog is bounded. */
static void seqpacket_backlog_bounded(void)
{
	struct fx f;
	struct vq_vsg_conn *c;
	unsigned i;

	fx_init(&f, &dflt);
	c = seq_connect(&f, 15);
	for (i = 0; i < 20000 && vq_vsg_state(c) == VQ_VSG_ESTABLISHED; i++) {
		long r = vq_vsg_write_msg(c, "m", 1);

		CHECK(r >= 0);
		if (r == 0 || i % 64 == 0)
			fx_settle(&f);
	}
	fx_settle(&f);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_CLOSED);
	CHECK_EQ(vq_vsock_stats(f.dev)->bad_seq, 1);
	CHECK_EQ(vq_vsock_conn_count(f.dev), 0);
	fx_fini(&f);
}

/* A host SOCK_SEQPACKET socket attached to the device: hybrid CONNECT with
 * the line as the first message; "OK <port>\n" comes back as one message;
 * a message sent right behind the line is the connection's first. */
static void hybrid_seqpacket_connect_messages(void)
{
	struct fx f;
	struct vq_vsg_conn *c;
	char line[32];
	int sv[2];
	ssize_t r;

	fx_init(&f, &dflt);
	CHECK_EQ(vq_vsg_listen(f.g, 20), 0);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	fx_set_nonblock(sv[0]);
	CHECK_EQ(vq_vsock_host_attach(f.dev, sv[0]), 0);
	CHECK_EQ(send(sv[1], "CONNECT 20\n", 11, 0), 11);
	CHECK_EQ(send(sv[1], "hello", 5, 0), 5);
	fx_settle(&f);
	c = vq_vsg_accept(f.g, 20);
	CHECK(c);
	r = recv(sv[1], line, sizeof(line), MSG_DONTWAIT);
	CHECK(r > 4);
	line[r] = 0;
	CHECK(!strncmp(line, "OK ", 3) && line[r - 1] == '\n');
	CHECK_EQ(strtoul(line + 3, NULL, 10), vq_vsg_peer_port(c));
	fx_settle(&f);
	CHECK_EQ(vq_vsg_read_msg(c, got, sizeof(got)), 5);
	CHECK(!memcmp(got, "hello", 5));
	CHECK_EQ(vq_vsg_write_msg(c, "world!", 6), 6);
	fx_settle(&f);
	CHECK_EQ(recv(sv[1], got, sizeof(got), MSG_DONTWAIT), 6);
	CHECK(!memcmp(got, "world!", 6));
	close(sv[1]);
	fx_fini(&f);
}

/* The line without its LF is fine; a bad line, or a seqpacket CONNECT to a
 * guest that did not negotiate seqpacket, closes without a reply. */
static void hybrid_seqpacket_connect_refusals(void)
{
	static const struct fx_opts no_seq = { .no_seqpacket = true };
	static const char *const lines[] = { "CONNECT 21", "CONNECT x\n",
					     "CONNECT 21\n\n" };
	struct fx f;
	int sv[2];

	for (unsigned i = 0; i < 4; i++) {
		fx_init(&f, i == 3 ? &no_seq : &dflt);
		CHECK_EQ(vq_vsg_listen(f.g, 21), 0);
		CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
		fx_set_nonblock(sv[0]);
		CHECK_EQ(vq_vsock_host_attach(f.dev, sv[0]), 0);
		CHECK(send(sv[1], lines[i % 3], strlen(lines[i % 3]), 0) > 0);
		fx_settle(&f);
		if (i == 0) {
			CHECK(vq_vsg_accept(f.g, 21));
			CHECK(recv(sv[1], got, sizeof(got), MSG_DONTWAIT) > 0);
		} else {
			CHECK(!vq_vsg_accept(f.g, 21));
			CHECK_EQ(recv(sv[1], got, sizeof(got), MSG_DONTWAIT), 0);
			CHECK_EQ(vq_vsock_stats(f.dev)->bad_connect_line, i < 3);
		}
		close(sv[1]);
		fx_fini(&f);
	}
}

/* Host messages the guest takes only in pieces are held whole, but over
 * all connections no more than msg_budget (one message past it at most):
 * guests that give no credit cannot make the device hold a megabyte per
 * connection.  The others wait in their sockets, and all arrive intact and
 * in order once the guests read. */
static void seqpacket_held_messages_bounded(void)
{
	enum { NC = 3, NM = 3, SZ = 200000, BUDGET = 256 * 1024 };
	static const struct fx_opts o = { .guest_buf_alloc = 512 * 1024,
					   .msg_budget = BUDGET };
	struct vq_vsg_conn *c[NC];
	unsigned sent[NC] = { 0 }, recvd[NC] = { 0 }, total = 0, i, round;
	uint64_t held_max = 0;
	struct fx f;
	int hfd[NC];

	fx_init(&f, &o);
	for (i = 0; i < NC; i++) {
		c[i] = seq_connect(&f, 20 + i);
		hfd[i] = fx_host(&f, i);
	}
	/* the hosts send, the guests read nothing */
	for (round = 0; round < 300; round++) {
		for (i = 0; i < NC; i++) {
			while (sent[i] < NM) {
				ssize_t r;

				fill(msg, SZ, i * 16 + sent[i]);
				r = send(hfd[i], msg, SZ, MSG_DONTWAIT);
				if (r < 0) {
					CHECK(errno == EAGAIN || errno == ENOBUFS);
					break;
				}
				CHECK_EQ(r, SZ);
				sent[i]++;
			}
		}
		fx_round(&f);
		if (vq_vsock_held_bytes(f.dev) > held_max)
			held_max = vq_vsock_held_bytes(f.dev);
	}
	CHECK(held_max > 0);
	CHECK(held_max <= BUDGET);
	CHECK(vq_vsock_stats(f.dev)->host_msg_deferred > 0);
	/* the guests read: everything arrives */
	for (round = 0; total < NC * NM; round++) {
		CHECK(round < 100000);
		for (i = 0; i < NC; i++) {
			while (sent[i] < NM) {
				ssize_t r;

				fill(msg, SZ, i * 16 + sent[i]);
				r = send(hfd[i], msg, SZ, MSG_DONTWAIT);
				if (r < 0)
					break;
				sent[i]++;
			}
			for (;;) {
				long r = vq_vsg_read_msg(c[i], got, sizeof(got));

				if (r == -EAGAIN)
					break;
				CHECK_EQ(r, SZ);
				CHECK(same(got, SZ, i * 16 + recvd[i]));
				recvd[i]++;
				total++;
			}
		}
		fx_round(&f);
		CHECK(vq_vsock_held_bytes(f.dev) <= BUDGET);
	}
	CHECK_EQ(vq_vsock_held_bytes(f.dev), 0);
	for (i = 0; i < NC; i++)
		CHECK_EQ(vq_vsg_state(c[i]), VQ_VSG_ESTABLISHED);
	CHECK_EQ(vq_vsock_stats(f.dev)->bad_seq, 0);
	fx_fini(&f);
}

/* Host -> guest (issue 26): a host message larger than one guest buffer
 * is read once, straight into as many buffers as it takes (no copy held
 * in the device), SEQ_EOM on its last packet only. */
static void seqpacket_one_read_per_message(void)
{
	static const uint32_t sizes[] = { 10000, 100, 4052, 4053, 65536 };
	struct fx f;
	struct vq_vsg_conn *c;
	uint64_t reads;
	int hfd;

	fx_init(&f, &dflt);
	c = seq_connect(&f, 13);
	hfd = fx_host(&f, 0);
	reads = vq_vsock_stats(f.dev)->host_read_calls;
	for (unsigned i = 0; i < FX_ARRAY_SIZE(sizes); i++) {
		fill(msg, sizes[i], 200 + i);
		CHECK_EQ(send(hfd, msg, sizes[i], 0), (ssize_t)sizes[i]);
	}
	fx_settle(&f);
	for (unsigned i = 0; i < FX_ARRAY_SIZE(sizes); i++) {
		CHECK_EQ(vq_vsg_read_msg(c, got, sizeof(got)), (long)sizes[i]);
		CHECK(same(got, sizes[i], 200 + i));
	}
	CHECK_EQ(vq_vsg_read_msg(c, got, sizeof(got)), -EAGAIN);
	CHECK_EQ(vq_vsock_stats(f.dev)->host_read_calls - reads, FX_ARRAY_SIZE(sizes));
	CHECK_EQ(vq_vsock_held_bytes(f.dev), 0);
	fx_fini(&f);
}

/* Guest -> host (issue 26): the whole messages of one burst, one packet
 * or several each, go out in one sendmmsg, each message whole. */
static void seqpacket_one_write_per_burst(void)
{
	struct fx_opts o = { .tx_pkt_max = 1024 };
	struct fx f;
	struct vq_vsg_conn *c;
	uint64_t writes;
	int hfd;

	fx_init(&f, &o);
	c = seq_connect(&f, 14);
	hfd = fx_host(&f, 0);
	fx_settle(&f);
	writes = vq_vsock_stats(f.dev)->host_write_calls;
	for (unsigned i = 0; i < 10; i++) {
		fill(msg, 1000, 300 + i);
		CHECK_EQ(vq_vsg_write_msg(c, msg, 1000), 1000);
	}
	fill(msg, 3000, 310);                   /* three packets */
	CHECK_EQ(vq_vsg_write_msg(c, msg, 3000), 3000);
	CHECK_EQ(vq_vsock_process_tx(f.dev, 256), 13);
	CHECK_EQ(vq_vsock_stats(f.dev)->host_write_calls - writes, 1);
	for (unsigned i = 0; i < 11; i++) {
		uint32_t len = i < 10 ? 1000 : 3000;

		CHECK_EQ(recv(hfd, got, sizeof(got), MSG_DONTWAIT), (ssize_t)len);
		CHECK(same(got, len, 300 + i));
	}
	CHECK_EQ(recv(hfd, got, sizeof(got), MSG_DONTWAIT), -1);
	fx_fini(&f);
}

/* Guest -> host: a message whose packets come in different bursts waits
 * whole in the device and goes out as one message when it ends. */
static void seqpacket_message_across_bursts(void)
{
	struct fx_opts o = { .tx_pkt_max = 1024 };
	struct fx f;
	struct vq_vsg_conn *c;
	int hfd;

	fx_init(&f, &o);
	c = seq_connect(&f, 15);
	hfd = fx_host(&f, 0);
	fx_settle(&f);
	fill(msg, 3000, 400);
	CHECK_EQ(vq_vsg_write_msg(c, msg, 3000), 3000);
	fill(msg, 500, 401);
	CHECK_EQ(vq_vsg_write_msg(c, msg, 500), 500);
	for (unsigned i = 0; i < 3; i++) {
		CHECK_EQ(recv(hfd, got, sizeof(got), MSG_DONTWAIT), -1);
		CHECK_EQ(vq_vsock_process_tx(f.dev, 1), 1);
	}
	CHECK_EQ(recv(hfd, got, sizeof(got), MSG_DONTWAIT), 3000);
	CHECK(same(got, 3000, 400));
	CHECK_EQ(vq_vsock_process_tx(f.dev, 1), 1);
	CHECK_EQ(recv(hfd, got, sizeof(got), MSG_DONTWAIT), 500);
	CHECK(same(got, 500, 401));
	CHECK_EQ(vq_vsock_stats(f.dev)->bad_seq, 0);
	fx_fini(&f);
}

static void run_all(void)
{
	RUN(vsock_5_10_6_6_guest_messages_keep_bounds);
	RUN(vsock_5_10_6_6_host_messages_keep_bounds_eom);
	RUN(seqpacket_slow_host_in_order);
	RUN(seqpacket_host_message_too_big_resets);
	RUN(seqpacket_guest_shutdown_mid_message);
	RUN(seqpacket_backlog_bounded);
	RUN(seqpacket_held_messages_bounded);
	RUN(hybrid_seqpacket_connect_messages);
	RUN(hybrid_seqpacket_connect_refusals);
	RUN(seqpacket_one_read_per_message);
	RUN(seqpacket_one_write_per_burst);
	RUN(seqpacket_message_across_bursts);
}

int main(void)
{
	fprintf(stderr, "== split\n");
	fx_features = 0;
	run_all();
	fprintf(stderr, "== packed\n");
	fx_features = VQ_BIT(VQ_F_RING_PACKED);
	run_all();
	return 0;
}
