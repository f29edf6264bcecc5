// SPDX-License-Identifier: MIT
/*
 * Sibling guests (virtq/vsock.h, the hub): a guest connecting to another
 * guest's CID in the same hub reaches it ring to ring, stream and
 * seqpacket (virtio 1.2 5.10.6.5, 5.10.6.6), every byte checked both ways;
 * credit (5.10.6.3) and the packet count of Linux 6.12.92 on hold at both
 * guests; only guests that share a group meet, others and unknown CIDs get
 * a RST at once, counted; a guest that stops reading holds only its own
 * connections; one guest's device going away resets its siblings'
 * connections to it and nothing else, and it may join again.
 */
#include "sibling_fixture.h"

static const struct sx_opts dflt = { 0 };
static struct sx x;                     /* large: not on the stack */

/* Move len bytes of stream seed from a to b, both directions at once
 * when back is set (b to a, seed + 1), every byte checked. */
static void transfer(struct vq_vsg_conn *a, struct vq_vsg_conn *b, uint64_t len,
		     bool back)
{
	static uint8_t buf[65536];
	uint64_t sent[2] = { 0, back ? 0 : len }, got[2] = { 0, back ? 0 : len };
	struct vq_vsg_conn *src[2] = { a, b }, *dst[2] = { b, a };
	int rounds = 0;

	while (got[0] < len || got[1] < len) {
		for (unsigned d = 0; d < 2; d++) {
			uint32_t k = len - sent[d] < sizeof(buf) ? (uint32_t)(len - sent[d]) :
				     sizeof(buf);
			long w;
			uint32_t r;

			for (uint32_t i = 0; i < k; i++)
				buf[i] = fx_byte(7 + d, sent[d] + i);
			w = k ? vq_vsg_write(src[d], buf, k) : 0;
			CHECK(w >= 0);
			sent[d] += (uint64_t)w;
			while ((r = vq_vsg_read(dst[d], buf, sizeof(buf)))) {
				for (uint32_t i = 0; i < r; i++)
					CHECK_EQ(buf[i], fx_byte(7 + d, got[d] + i));
				got[d] += r;
			}
		}
		sx_round(&x);
		CHECK(++rounds < 1000000);
	}
	CHECK_EQ(got[0], len);
}

static void sibling_5_10_6_stream_both_ways_bytes_checked(void)
{
	struct vq_vsg_conn *a, *b;

	sx_init(&x, 2, &dflt);
	sx_connect(&x, 0, 1, 100, VQ_VSOCK_TYPE_STREAM, &a, &b);
	transfer(a, b, 3u << 20, true);
	CHECK_EQ(vq_vsock_stats(x.vm[0].dev)->sibling_conns, 1);
	CHECK_EQ(vq_vsock_stats(x.vm[1].dev)->sibling_conns, 1);
	/* the guests' credit held: nothing was bad on either side */
	CHECK_EQ(vq_vsock_stats(x.vm[0].dev)->bad_credit, 0);
	CHECK_EQ(vq_vsock_stats(x.vm[1].dev)->bad_credit, 0);
	CHECK_EQ(vq_vsg_stats(x.vm[0].g)->bad, 0);
	CHECK_EQ(vq_vsg_stats(x.vm[1].g)->bad, 0);
	/* the other way too: guest 1 asks guest 0 */
	sx_connect(&x, 1, 0, 101, VQ_VSOCK_TYPE_STREAM, &a, &b);
	transfer(a, b, 100000, false);
	sx_fini(&x);
}

/* Close as Linux does: SHUTDOWN both ways, then RST: both devices forget
 * the connection, the reader sees every byte, then the end. */
static void sibling_5_10_6_5_shutdown_then_close_frees_both(void)
{
	struct vq_vsg_conn *a, *b;
	uint8_t buf[64];

	sx_init(&x, 2, &dflt);
	sx_connect(&x, 0, 1, 100, VQ_VSOCK_TYPE_STREAM, &a, &b);
	CHECK_EQ(vq_vsg_write(a, "last words", 10), 10);
	CHECK_EQ(vq_vsg_shutdown(a, VQ_VSOCK_SHUTDOWN_SEND | VQ_VSOCK_SHUTDOWN_RCV), 0);
	sx_settle(&x);
	CHECK_EQ(vq_vsg_read(b, buf, sizeof(buf)), 10);
	CHECK(!memcmp(buf, "last words", 10));
	sx_settle(&x);
	CHECK(vq_vsg_eof(b));
	CHECK(vq_vsg_peer_shutdown(b) & VQ_VSOCK_SHUTDOWN_SEND);
	vq_vsg_reset(b);
	sx_settle(&x);
	CHECK_EQ(vq_vsg_state(a), VQ_VSG_CLOSED);
	CHECK_EQ(vq_vsock_conn_count(x.vm[0].dev), 0);
	CHECK_EQ(vq_vsock_conn_count(x.vm[1].dev), 0);
	CHECK_EQ(vq_vsock_stats(x.vm[0].dev)->conns_closed, 1);
	CHECK_EQ(vq_vsock_stats(x.vm[1].dev)->conns_closed, 1);
	sx_fini(&x);
}

static void sibling_5_10_6_6_seqpacket_keeps_message_bounds(void)
{
	static uint8_t out[200000], in[200000];
	static const uint32_t lens[] = { 1, 100, 4096, 65536, 65537, 200000 };
	struct vq_vsg_conn *c[2];

	sx_init(&x, 2, &dflt);
	sx_connect(&x, 0, 1, 200, VQ_VSOCK_TYPE_SEQPACKET, &c[0], &c[1]);
	for (unsigned d = 0; d < 2; d++) {
		for (unsigned m = 0; m < FX_ARRAY_SIZE(lens); m++) {
			long r;
			int rounds = 0;

			for (uint32_t i = 0; i < lens[m]; i++)
				out[i] = fx_byte(m + 10 * d, i);
			while ((r = vq_vsg_write_msg(c[d], out, lens[m])) == 0) {
				sx_round(&x);
				CHECK(++rounds < 10000);
			}
			CHECK_EQ(r, lens[m]);
			rounds = 0;
			while ((r = vq_vsg_read_msg(c[!d], in, sizeof(in))) == -EAGAIN) {
				sx_round(&x);
				CHECK(++rounds < 10000);
			}
			CHECK_EQ(r, lens[m]);
			for (uint32_t i = 0; i < lens[m]; i++)
				CHECK_EQ(in[i], fx_byte(m + 10 * d, i));
		}
	}
	CHECK_EQ(vq_vsock_stats(x.vm[0].dev)->bad_seq, 0);
	CHECK_EQ(vq_vsock_stats(x.vm[1].dev)->bad_seq, 0);
	sx_fini(&x);
}

/* Messages a reader does not take wait whole, behind each other (in the
 * pipe, then in the sender's device within its window), and arrive
 * whole and in order. */
static void sibling_5_10_6_6_seqpacket_stalled_reader_keeps_bounds(void)
{
	static uint8_t out[60000], in[65536];
	struct vq_vsg_conn *a, *b;
	unsigned sent = 0, got = 0;
	int rounds = 0;

	sx_init(&x, 2, &dflt);
	sx_connect(&x, 0, 1, 201, VQ_VSOCK_TYPE_SEQPACKET, &a, &b);
	while (rounds < 50) {
		long r;

		for (uint32_t i = 0; i < sizeof(out); i++)
			out[i] = fx_byte(sent, i);
		r = vq_vsg_write_msg(a, out, sizeof(out) - sent);
		CHECK(r >= 0);
		sent += r > 0;
		rounds = r > 0 ? 0 : rounds + 1;
		sx_round(&x);
		CHECK(sent < 100);
	}
	/* the pipe's and the sender device's window, at least */
	CHECK(sent >= 6);
	while (got < sent) {
		long r = vq_vsg_read_msg(b, in, sizeof(in));

		if (r == -EAGAIN) {
			sx_round(&x);
			continue;
		}
		CHECK_EQ(r, sizeof(out) - got);
		for (uint32_t i = 0; i < (uint32_t)r; i++)
			CHECK_EQ(in[i], fx_byte(got, i));
		got++;
	}
	sx_settle(&x);
	CHECK_EQ(vq_vsg_read_msg(b, in, sizeof(in)), -EAGAIN);
	CHECK_EQ(vq_vsg_state(a), VQ_VSG_ESTABLISHED);
	sx_fini(&x);
}

/* Only guests that share a group meet; a CID nobody has, or one outside
 * our groups, is a RST at once (no timeout in the guest), counted. */
static void sibling_groups_refuse_with_rst_at_once(void)
{
	struct sx_opts o = { .groups = { 1, 3, 2 } };   /* 0: a; 1: a+b; 2: b */
	struct vq_vsg_conn *c, *a, *b;

	sx_init(&x, 3, &o);
	CHECK_EQ(vq_vsg_listen(x.vm[0].g, 300), 0);
	CHECK_EQ(vq_vsg_connect_cid(x.vm[2].g, x.vm[0].cid, 300,
				    VQ_VSOCK_TYPE_STREAM, &c), 0);
	/* one round of guest 2's device answers it */
	sx_vm_round(&x.vm[2]);
	sx_vm_round(&x.vm[2]);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_CLOSED);
	CHECK_EQ(vq_vsock_stats(x.vm[2].dev)->cid_refused, 1);
	CHECK(strstr(vq_vsock_last_bad(x.vm[2].dev), "shares no group"));
	sx_settle(&x);
	CHECK_EQ(vq_vsock_conn_count(x.vm[0].dev), 0);
	CHECK(!vq_vsg_accept(x.vm[0].g, 300));
	/* a CID no guest of the hub has */
	CHECK_EQ(vq_vsg_connect_cid(x.vm[0].g, 77, 300, VQ_VSOCK_TYPE_STREAM, &c), 0);
	sx_vm_round(&x.vm[0]);
	sx_vm_round(&x.vm[0]);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_CLOSED);
	CHECK_EQ(vq_vsock_stats(x.vm[0].dev)->cid_unknown, 1);
	/* guest 1 shares a group with each */
	sx_connect(&x, 2, 1, 301, VQ_VSOCK_TYPE_STREAM, &a, &b);
	transfer(a, b, 10000, true);
	sx_connect(&x, 1, 0, 302, VQ_VSOCK_TYPE_SEQPACKET, &a, &b);
	sx_fini(&x);
}

/* A sibling that does not take its REQUEST (no listener) answers RST. */
static void sibling_5_10_6_5_no_listener_rst(void)
{
	struct vq_vsg_conn *c;

	sx_init(&x, 2, &dflt);
	CHECK_EQ(vq_vsg_connect_cid(x.vm[0].g, x.vm[1].cid, 400, VQ_VSOCK_TYPE_STREAM,
				    &c), 0);
	sx_settle(&x);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_CLOSED);
	CHECK_EQ(vq_vsock_stats(x.vm[0].dev)->no_listener, 1);
	CHECK_EQ(vq_vsock_conn_count(x.vm[0].dev), 0);
	CHECK_EQ(vq_vsock_conn_count(x.vm[1].dev), 0);
	sx_fini(&x);
}

/* A guest that stops reading one connection: its sender's bytes wait
 * within the windows and the pipe, never more; the sender's other
 * connection to it goes on; then every byte arrives. */
static void sibling_stalled_reader_holds_only_its_connection(void)
{
	struct sx_opts o = { .dev_buf_alloc = 64 * 1024, .guest_buf_alloc = 64 * 1024 };
	static uint8_t buf[65536];
	struct vq_vsg_conn *a, *b, *a2, *b2;
	uint64_t sent = 0;
	int idle = 0;

	sx_init(&x, 2, &o);
	sx_connect(&x, 0, 1, 500, VQ_VSOCK_TYPE_STREAM, &a, &b);
	sx_connect(&x, 0, 1, 501, VQ_VSOCK_TYPE_STREAM, &a2, &b2);
	while (idle < 4) {
		long w;

		for (uint32_t i = 0; i < sizeof(buf); i++)
			buf[i] = fx_byte(3, sent + i);
		w = vq_vsg_write(a, buf, sizeof(buf));
		CHECK(w >= 0);
		sent += (uint64_t)w;
		idle = w ? 0 : idle + 1;
		sx_round(&x);
		CHECK(sent < (64u << 20));
	}
	/* the receiver's window, the pipe, the sender device's window */
	CHECK(sent <= 3 * 64 * 1024);
	CHECK(sent >= 64 * 1024);
	transfer(a2, b2, 1u << 20, true);
	fx_read_check(b, 3, sent, sx_turn, &x);
	transfer(a, b, 1u << 20, false);
	sx_fini(&x);
}

/* Linux 6.12.92 on resets a connection whose queued packets pass its
 * buf_alloc / SKB_TRUESIZE(0), whatever their bytes.  Guest 0 writes a
 * byte at a time while guest 1 reads nothing: guest 1's device sends no
 * more packets than its count, and every byte arrives. */
static void sibling_packet_count_holds_with_1_byte_writes(void)
{
	struct sx_opts o = { .pkt_truesize = 576 };
	struct vq_vsg_conn *a, *b;
	uint64_t sent = 0;

	sx_init(&x, 2, &o);
	sx_connect(&x, 0, 1, 600, VQ_VSOCK_TYPE_STREAM, &a, &b);
	while (sent < 5000) {
		uint8_t byte = fx_byte(5, sent);
		long w = vq_vsg_write(a, &byte, 1);

		CHECK(w >= 0);
		sent += (uint64_t)w;
		sx_round(&x);
	}
	sx_settle(&x);
	CHECK_EQ(vq_vsg_stats(x.vm[1].g)->pkt_resets, 0);
	CHECK_EQ(vq_vsg_state(b), VQ_VSG_ESTABLISHED);
	fx_read_check(b, 5, sent, sx_turn, &x);
	CHECK_EQ(vq_vsg_stats(x.vm[1].g)->pkt_resets, 0);
	sx_fini(&x);
}

/* The host's connection to guest 0, through a socket pair: "CONNECT". */
static int host_conn(struct sx_vm *m, uint32_t port, struct vq_vsg_conn **c)
{
	char line[32], ok[32];
	int sv[2], n;

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	CHECK_EQ(vq_vsg_listen(m->g, port), 0);
	CHECK_EQ(vq_vsock_host_attach(m->dev, sv[0]), 0);
	n = snprintf(line, sizeof(line), "CONNECT %u\n", port);
	CHECK_EQ(write(sv[1], line, (size_t)n), n);
	sx_settle(&x);
	*c = vq_vsg_accept(m->g, port);
	CHECK(*c);
	CHECK_EQ(read(sv[1], ok, 3), 3);
	CHECK(!memcmp(ok, "OK ", 3));
	while (read(sv[1], ok, 1) == 1 && ok[0] != '\n')
		;
	return sv[1];
}

/* One guest's device stops (its front-end reset it, or went away): the
 * connections its siblings had to it are reset, theirs to the host go on;
 * a new device of that CID joins the hub again and is reached. */
static void sibling_one_device_gone_others_go_on(void)
{
	struct vq_vsg_conn *a, *b, *h;
	uint8_t buf[8];
	int fd;

	sx_init(&x, 2, &dflt);
	sx_connect(&x, 0, 1, 700, VQ_VSOCK_TYPE_STREAM, &a, &b);
	fd = host_conn(&x.vm[0], 701, &h);
	vq_vsock_stop(x.vm[1].dev);
	sx_settle(&x);
	CHECK_EQ(vq_vsg_state(a), VQ_VSG_CLOSED);
	CHECK_EQ(vq_vsock_conn_count(x.vm[0].dev), 1);
	/* the host connection still moves, both ways */
	CHECK_EQ(vq_vsg_write(h, "ping", 4), 4);
	sx_settle(&x);
	CHECK_EQ(read(fd, buf, sizeof(buf)), 4);
	CHECK(!memcmp(buf, "ping", 4));
	CHECK_EQ(write(fd, "pong", 4), 4);
	sx_settle(&x);
	CHECK_EQ(vq_vsg_read(h, buf, sizeof(buf)), 4);
	CHECK(!memcmp(buf, "pong", 4));
	/* the device goes for good, and a new one takes its CID */
	sx_vm_fini(&x.vm[1]);
	CHECK_EQ(vq_vsg_connect_cid(x.vm[0].g, 4, 702, VQ_VSOCK_TYPE_STREAM, &a), 0);
	sx_vm_round(&x.vm[0]);
	sx_vm_round(&x.vm[0]);
	CHECK_EQ(vq_vsg_state(a), VQ_VSG_CLOSED);
	CHECK_EQ(vq_vsock_stats(x.vm[0].dev)->cid_unknown, 1);
	sx_vm_init(&x, 1, &dflt);
	sx_connect(&x, 1, 0, 703, VQ_VSOCK_TYPE_STREAM, &a, &b);
	transfer(a, b, 300000, true);
	close(fd);
	sx_fini(&x);
}

/* 5.10.6.3: a guest that sends beyond the credit its device gave on a
 * sibling connection is reset, and so is its sibling's half; bytes
 * within the credit arrived. */
static void sibling_5_10_6_3_credit_overrun_resets_both(void)
{
	struct sx_opts o = { .dev_buf_alloc = 8192 };
	static uint8_t pkt[44 + 9000];
	struct vq_vsg_conn *a, *b;
	struct vq_vsock_hdr h;

	sx_init(&x, 2, &o);
	sx_connect(&x, 0, 1, 800, VQ_VSOCK_TYPE_STREAM, &a, &b);
	vq_vsg_hdr(x.vm[0].g, &h, vq_vsg_local_port(a), 800, VQ_VSOCK_OP_RW, 9000);
	h.dst_cid = vq_le64(x.vm[1].cid);
	memcpy(pkt, &h, sizeof(h));
	CHECK_EQ(vq_vsg_send_bytes(x.vm[0].g, pkt, sizeof(pkt)), 0);
	sx_settle(&x);
	CHECK_EQ(vq_vsock_stats(x.vm[0].dev)->bad_credit, 1);
	CHECK_EQ(vq_vsg_state(a), VQ_VSG_CLOSED);
	CHECK_EQ(vq_vsg_state(b), VQ_VSG_CLOSED);
	CHECK_EQ(vq_vsock_conn_count(x.vm[0].dev), 0);
	CHECK_EQ(vq_vsock_conn_count(x.vm[1].dev), 0);
	sx_fini(&x);
}

int main(void)
{
	RUN(sibling_5_10_6_stream_both_ways_bytes_checked);
	RUN(sibling_5_10_6_5_shutdown_then_close_frees_both);
	RUN(sibling_5_10_6_6_seqpacket_keeps_message_bounds);
	RUN(sibling_5_10_6_6_seqpacket_stalled_reader_keeps_bounds);
	RUN(sibling_groups_refuse_with_rst_at_once);
	RUN(sibling_5_10_6_5_no_listener_rst);
	RUN(sibling_stalled_reader_holds_only_its_connection);
	RUN(sibling_packet_count_holds_with_1_byte_writes);
	RUN(sibling_one_device_gone_others_go_on);
	RUN(sibling_5_10_6_3_credit_overrun_resets_both);
	fx_features = VQ_BIT(VQ_F_RING_PACKED);
	RUN(sibling_5_10_6_stream_both_ways_bytes_checked);
	RUN(sibling_5_10_6_6_seqpacket_keeps_message_bounds);
	return 0;
}
