// SPDX-License-Identifier: MIT
/*
 * The userspace vsock driver's contract (virtq/vsock_guest.h), with the
 * test playing an honest device: config checks, the buffers it posts, the
 * packets it sends for each call (5.10.6.3 credit, 5.10.6.5 connections,
 * 5.10.6.6 seqpacket messages, 5.10.6.7 events).  Split and packed rings.
 */
#include "guest_fixture.h"

static uint64_t ring_features;

/* vq_vsg_new refuses what it cannot honour, and a reserved word that is
 * not zero (an old library never ignores a field a newer caller set). */
static void guest_config_checked(void)
{
	struct gfx x;
	struct vq_vsg_config c;
	struct vq_vsg *g = (struct vq_vsg *)1;

	gfx_init(&x, ring_features, 64);
#define REFUSED(change) do {                                                  \
		c = x.gc;                                                     \
		change;                                                       \
		CHECK_EQ(vq_vsg_new(&c, &g), -EINVAL);                        \
		CHECK(g == NULL);                                             \
	} while (0)
	REFUSED(c.rx = NULL);
	REFUSED(c.tx = NULL);
	REFUSED(c.cid = 2);
	REFUSED(c.cid = 1ull << 32);
	REFUSED(c.tx_pkt_max = VQ_VSOCK_MAX_PKT + 1);
	REFUSED(c.rx_area.size = VQ_VSOCK_HDR_SIZE + 4096 - 1);
	REFUSED(c.rx_area.hva = NULL);
	REFUSED(c.tx_area.size = 100);
	REFUSED(c.ev_area.size = 4);
	for (unsigned i = 0; i < FX_ARRAY_SIZE(c.reserved); i++)
		REFUSED(c.reserved[i] = 1);
#undef REFUSED
	c = x.gc;
	c.ev = NULL;
	c.ev_area.size = 0;             /* no event queue, no area needed */
	CHECK_EQ(vq_vsg_new(&c, &g), 0);
	vq_vsg_free(g);
	gfx_start(&x);
	CHECK_EQ(vq_vsg_error(x.g), 0);
	CHECK_EQ(vq_vsg_error_msg(x.g)[0], '\0');
	CHECK_EQ(vq_vsg_last_bad(x.g)[0], '\0');
	gfx_fini(&x);
}

/* 5.10.5: RX and event buffers are posted at start, each RX buffer one
 * writable part of header + rx_buf_size, as many as the area holds (at
 * most the queue size), and the queues are kicked. */
static void vsock_5_10_5_posts_rx_and_event_buffers(void)
{
	struct gfx x;
	struct iovec iov[4];
	struct vq_chain ch = { .iov = iov, .iov_max = 4 };
	unsigned n = 0;

	gfx_init(&x, ring_features, 64);
	x.gc.rx_buf_size = 1000;
	x.gc.rx_area.size = 10 * 1088 + 5;      /* 44 + 1000, rounded to 64 */
	gfx_start(&x);
	CHECK_EQ(x.kicks[VQ_VSOCK_RXQ], 1);
	CHECK_EQ(x.kicks[VQ_VSOCK_EVQ], 1);
	while (vq_dev_pop(x.vq.dq[VQ_VSOCK_RXQ], &ch) == 1) {
		CHECK_EQ(ch.nout, 0);
		CHECK_EQ(ch.in_len, VQ_VSOCK_HDR_SIZE + 1000);
		n++;
	}
	CHECK_EQ(n, 10);
	n = 0;
	while (vq_dev_pop(x.vq.dq[VQ_VSOCK_EVQ], &ch) == 1) {
		CHECK_EQ(ch.in_len, sizeof(struct vq_vsock_event));
		n++;
	}
	CHECK_EQ(n, 8);
	gfx_fini(&x);
}

/* 5.10.6.5: connect sends REQUEST with our CID, the port, the type and
 * our credit; the device's RESPONSE establishes it. */
static void vsock_5_10_6_5_connect_request_response(void)
{
	struct gfx x;
	struct vq_vsg_conn *c;
	struct vq_vsock_hdr h;

	gfx_init(&x, ring_features, 64);
	x.gc.buf_alloc = 12345;
	gfx_start(&x);
	CHECK_EQ(vq_vsg_connect(x.g, 7, 0, &c), -EINVAL);
	CHECK(c == NULL);
	CHECK_EQ(vq_vsg_connect(x.g, 7, 3, &c), -EINVAL);
	CHECK_EQ(vq_vsg_connect(x.g, 7, VQ_VSOCK_TYPE_SEQPACKET, &c), 0);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_CONNECTING);
	CHECK_EQ(vq_vsg_write(c, "x", 1), 0);   /* not yet */
	CHECK_EQ(gfx_dev_recv(&x, &h, NULL, 0), 0);
	CHECK_EQ(vq_le64(h.src_cid), FX_CID);
	CHECK_EQ(vq_le64(h.dst_cid), VQ_VSOCK_CID_HOST);
	CHECK_EQ(vq_le32(h.src_port), vq_vsg_local_port(c));
	CHECK_EQ(vq_le32(h.dst_port), 7);
	CHECK_EQ(vq_vsg_peer_port(c), 7);
	CHECK_EQ(vq_le16(h.type), VQ_VSOCK_TYPE_SEQPACKET);
	CHECK_EQ(vq_le16(h.op), VQ_VSOCK_OP_REQUEST);
	CHECK_EQ(vq_le32(h.buf_alloc), 12345);
	CHECK_EQ(vq_le32(h.fwd_cnt), 0);
	CHECK_EQ(x.kicks[VQ_VSOCK_TXQ], 1);
	gfx_hdr(&x, &h, 7, vq_vsg_local_port(c), VQ_VSOCK_TYPE_SEQPACKET,
		VQ_VSOCK_OP_RESPONSE, 0);
	gfx_dev_send(&x, &h, NULL, 0);
	CHECK_EQ(vq_vsg_poll(x.g), 2);          /* the REQUEST's buffer, the RESPONSE */
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_ESTABLISHED);
	CHECK_EQ(vq_vsg_stats(x.g)->rx_pkts, 1);
	CHECK_EQ(vq_vsg_stats(x.g)->bad, 0);
	gfx_fini(&x);
}

/* 5.10.6.3: RW only within the device's credit, in packets of at most
 * tx_pkt_max; a CREDIT_UPDATE opens the window again. */
static void vsock_5_10_6_3_write_within_device_credit(void)
{
	static uint8_t buf[5000], got[5000];
	struct gfx x;
	struct vq_vsg_conn *c;
	struct vq_vsock_hdr h;
	uint32_t at = 0;
	long n;

	gfx_init(&x, ring_features, 64);
	x.gc.tx_pkt_max = 256;
	x.dev_buf_alloc = 1000;
	gfx_start(&x);
	c = gfx_connected(&x, VQ_VSOCK_TYPE_STREAM);
	for (unsigned i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7);
	CHECK_EQ(vq_vsg_credit(c), 1000);
	CHECK_EQ(vq_vsg_write(c, buf, sizeof(buf)), 1000);
	CHECK_EQ(vq_vsg_write(c, buf, sizeof(buf)), 0);
	while ((n = gfx_dev_recv(&x, &h, got + at, sizeof(got) - at)) >= 0) {
		CHECK_EQ(vq_le16(h.op), VQ_VSOCK_OP_RW);
		CHECK(n <= 256);
		at += (uint32_t)n;
	}
	CHECK_EQ(at, 1000);
	x.dev_fwd_cnt = 600;
	gfx_send_on(&x, c, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_CREDIT_UPDATE, 0, NULL, 0);
	CHECK_EQ(vq_vsg_poll(x.g), 1 + 4);      /* the update, 4 TX returned */
	CHECK_EQ(vq_vsg_credit(c), 600);
	CHECK_EQ(vq_vsg_write(c, buf + 1000, sizeof(buf) - 1000), 600);
	while ((n = gfx_dev_recv(&x, &h, got + at, sizeof(got) - at)) >= 0)
		at += (uint32_t)n;
	CHECK_EQ(at, 1600);
	CHECK(memcmp(buf, got, 1600) == 0);
	gfx_fini(&x);
}

/* 5.10.6.3: reading gives credit back: a CREDIT_UPDATE once the device's
 * view of our free space is under half; a CREDIT_REQUEST gets one too. */
static void vsock_5_10_6_3_credit_update_after_read(void)
{
	static uint8_t data[3000], got[3000];
	struct gfx x;
	struct vq_vsg_conn *c;
	struct vq_vsock_hdr h;

	gfx_init(&x, ring_features, 64);
	x.gc.buf_alloc = 4096;
	gfx_start(&x);
	c = gfx_connected(&x, VQ_VSOCK_TYPE_STREAM);
	memset(data, 'd', sizeof(data));
	gfx_send_on(&x, c, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_RW, 0, data, sizeof(data));
	CHECK_EQ(vq_vsg_poll(x.g), 1);
	CHECK_EQ(vq_vsg_readable(c), 3000);
	CHECK_EQ(gfx_dev_recv_op(&x), -1);      /* nothing owed yet */
	CHECK_EQ(vq_vsg_read(c, got, 1000), 1000);
	CHECK_EQ(gfx_dev_recv_op(&x), -1);      /* 1000 unadvertised: too little */
	CHECK_EQ(vq_vsg_read(c, got + 1000, 2000), 2000);
	CHECK_EQ(gfx_dev_recv(&x, &h, NULL, 0), 0);
	CHECK_EQ(vq_le16(h.op), VQ_VSOCK_OP_CREDIT_UPDATE);
	CHECK_EQ(vq_le32(h.fwd_cnt), 3000);
	CHECK_EQ(vq_le32(h.buf_alloc), 4096);
	CHECK(memcmp(data, got, sizeof(data)) == 0);
	gfx_send_on(&x, c, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_CREDIT_REQUEST, 0, NULL, 0);
	CHECK(vq_vsg_poll(x.g) >= 1);
	CHECK_EQ(gfx_dev_recv_op(&x), VQ_VSOCK_OP_CREDIT_UPDATE);
	CHECK_EQ(vq_vsg_stats(x.g)->credit_updates_sent, 2);
	gfx_fini(&x);
}

/* 5.10.6.5: a REQUEST to a port nobody listens on gets RST; to a
 * listening port, RESPONSE and a connection to accept.  16 ports. */
static void vsock_5_10_6_5_listen_and_accept(void)
{
	struct gfx x;
	struct vq_vsg_conn *c;
	struct vq_vsock_hdr h;

	gfx_init(&x, ring_features, 64);
	gfx_start(&x);
	gfx_hdr(&x, &h, 3000, 7, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_REQUEST, 0);
	gfx_dev_send(&x, &h, NULL, 0);
	CHECK(vq_vsg_poll(x.g) >= 1);
	CHECK_EQ(gfx_dev_recv(&x, &h, NULL, 0), 0);
	CHECK_EQ(vq_le16(h.op), VQ_VSOCK_OP_RST);
	CHECK_EQ(vq_le32(h.dst_port), 3000);
	CHECK_EQ(vq_le32(h.src_port), 7);
	CHECK_EQ(vq_vsg_orphan_op(x.g, 7), VQ_VSOCK_OP_REQUEST);
	CHECK(vq_vsg_accept(x.g, 7) == NULL);
	for (uint32_t p = 0; p < 16; p++)
		CHECK_EQ(vq_vsg_listen(x.g, 7 + p), 0);
	CHECK_EQ(vq_vsg_listen(x.g, 99), -ENOSPC);
	gfx_hdr(&x, &h, 3001, 7, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_REQUEST, 0);
	gfx_dev_send(&x, &h, NULL, 0);
	CHECK(vq_vsg_poll(x.g) >= 1);
	CHECK_EQ(gfx_dev_recv(&x, &h, NULL, 0), 0);
	CHECK_EQ(vq_le16(h.op), VQ_VSOCK_OP_RESPONSE);
	CHECK_EQ(vq_le32(h.dst_port), 3001);
	c = vq_vsg_accept(x.g, 7);
	CHECK(c != NULL);
	CHECK(vq_vsg_accept(x.g, 7) == NULL);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_ESTABLISHED);
	CHECK_EQ(vq_vsg_peer_port(c), 3001);
	CHECK_EQ(vq_vsg_local_port(c), 7);
	CHECK_EQ(vq_vsg_write(c, "hi", 2), 2);
	gfx_fini(&x);
}

/* 5.10.6.6: a message goes in packets of tx_pkt_max, SEQ_EOM on the
 * last, only when the credit takes all of it; received messages keep
 * their bounds. */
static void vsock_5_10_6_6_messages_keep_bounds(void)
{
	static uint8_t msg[700], got[700];
	struct gfx x;
	struct vq_vsg_conn *c, *s;
	struct vq_vsock_hdr h;
	long n;
	unsigned pkts = 0;

	gfx_init(&x, ring_features, 64);
	x.gc.tx_pkt_max = 300;
	x.dev_buf_alloc = 600;
	gfx_start(&x);
	s = gfx_connected(&x, VQ_VSOCK_TYPE_STREAM);
	CHECK_EQ(vq_vsg_write_msg(s, msg, 10), -EINVAL);
	c = gfx_connected(&x, VQ_VSOCK_TYPE_SEQPACKET);
	CHECK_EQ(vq_vsg_write_msg(c, msg, 700), 0);     /* credit 600: not now */
	CHECK_EQ(vq_vsg_write_msg(c, msg, 600), 600);
	while ((n = gfx_dev_recv(&x, &h, NULL, 0)) >= 0) {
		pkts++;
		CHECK_EQ(vq_le32(h.flags), pkts == 2 ? VQ_VSOCK_SEQ_EOM : 0);
		CHECK_EQ(n, 300);
	}
	CHECK_EQ(pkts, 2);
	/* from the device: 100 + 50 bytes, then an empty message */
	CHECK_EQ(vq_vsg_read_msg(c, got, sizeof(got)), -EAGAIN);
	gfx_send_on(&x, c, VQ_VSOCK_TYPE_SEQPACKET, VQ_VSOCK_OP_RW, 0, msg, 100);
	CHECK(vq_vsg_poll(x.g) >= 1);
	CHECK_EQ(vq_vsg_read_msg(c, got, sizeof(got)), -EAGAIN);
	gfx_send_on(&x, c, VQ_VSOCK_TYPE_SEQPACKET, VQ_VSOCK_OP_RW, VQ_VSOCK_SEQ_EOM, msg, 50);
	gfx_send_on(&x, c, VQ_VSOCK_TYPE_SEQPACKET, VQ_VSOCK_OP_RW, VQ_VSOCK_SEQ_EOM, NULL, 0);
	CHECK(vq_vsg_poll(x.g) >= 2);
	CHECK_EQ(vq_vsg_read_msg(c, got, 149), -EMSGSIZE);
	CHECK_EQ(vq_vsg_read_msg(c, got, 150), 150);
	CHECK_EQ(vq_vsg_read_msg(c, got, 150), 0);
	CHECK_EQ(vq_vsg_read_msg(c, got, 150), -EAGAIN);
	gfx_fini(&x);
}

/* 5.10.6.5: the device's SHUTDOWN of both directions ends the
 * connection with our RST once every byte was read; after RST writes
 * fail with -EPIPE and the end reads as EOF. */
static void vsock_5_10_6_5_shutdown_then_rst(void)
{
	struct gfx x;
	struct vq_vsg_conn *c, *d;
	struct vq_vsock_hdr h;
	char b[8];

	c = gfx_up(&x, ring_features, VQ_VSOCK_TYPE_STREAM);
	gfx_send_on(&x, c, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_RW, 0, "tail", 4);
	gfx_send_on(&x, c, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_SHUTDOWN,
		    VQ_VSOCK_SHUTDOWN_RCV | VQ_VSOCK_SHUTDOWN_SEND, NULL, 0);
	CHECK(vq_vsg_poll(x.g) >= 2);
	CHECK_EQ(vq_vsg_peer_shutdown(c), 3);
	CHECK(!vq_vsg_eof(c));
	CHECK_EQ(vq_vsg_write(c, "x", 1), -EPIPE);      /* the peer receives no more */
	CHECK_EQ(gfx_dev_recv_op(&x), -1);
	CHECK_EQ(vq_vsg_read(c, b, sizeof(b)), 4);
	CHECK(vq_vsg_eof(c));
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_CLOSED);
	CHECK_EQ(gfx_dev_recv_op(&x), VQ_VSOCK_OP_RST);
	vq_vsg_release(c);
	/* the device's RST */
	d = gfx_connected(&x, VQ_VSOCK_TYPE_STREAM);
	gfx_send_on(&x, d, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_RST, 0, NULL, 0);
	CHECK(vq_vsg_poll(x.g) >= 1);
	CHECK_EQ(vq_vsg_state(d), VQ_VSG_CLOSED);
	CHECK_EQ(vq_vsg_write(d, "x", 1), -EPIPE);
	CHECK_EQ(vq_vsg_shutdown(d, VQ_VSOCK_SHUTDOWN_SEND), -EPIPE);
	CHECK(vq_vsg_eof(d));
	CHECK_EQ(vq_vsg_stats(x.g)->rst_recv, 1);
	vq_vsg_release(d);
	/* ours */
	d = gfx_connected(&x, VQ_VSOCK_TYPE_STREAM);
	CHECK_EQ(vq_vsg_shutdown(d, VQ_VSOCK_SHUTDOWN_SEND), 0);
	CHECK_EQ(gfx_dev_recv(&x, &h, NULL, 0), 0);
	CHECK_EQ(vq_le16(h.op), VQ_VSOCK_OP_SHUTDOWN);
	CHECK_EQ(vq_le32(h.flags), VQ_VSOCK_SHUTDOWN_SEND);
	CHECK_EQ(vq_vsg_write(d, "x", 1), -EPIPE);
	vq_vsg_reset(d);
	CHECK_EQ(gfx_dev_recv_op(&x), VQ_VSOCK_OP_RST);
	gfx_fini(&x);
}

/* 5.10.6.7: TRANSPORT_RESET closes every connection; listening goes on. */
static void vsock_5_10_6_7_transport_reset(void)
{
	struct gfx x;
	struct vq_vsg_conn *c;
	struct vq_vsock_event e = { vq_le32(VQ_VSOCK_EVENT_TRANSPORT_RESET) };
	struct vq_vsock_hdr h;

	gfx_init(&x, ring_features, 64);
	gfx_start(&x);
	CHECK_EQ(vq_vsg_listen(x.g, 9), 0);
	c = gfx_connected(&x, VQ_VSOCK_TYPE_STREAM);
	CHECK_EQ(gfx_dev_write(&x, VQ_VSOCK_EVQ, &e, sizeof(e), sizeof(e)), 0);
	CHECK(vq_vsg_poll(x.g) >= 1);
	CHECK_EQ(vq_vsg_stats(x.g)->resets, 1);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_CLOSED);
	CHECK_EQ(gfx_dev_recv_op(&x), -1);      /* no RST: the transport is gone */
	gfx_hdr(&x, &h, 4000, 9, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_REQUEST, 0);
	gfx_dev_send(&x, &h, NULL, 0);
	CHECK(vq_vsg_poll(x.g) >= 1);
	CHECK_EQ(gfx_dev_recv_op(&x), VQ_VSOCK_OP_RESPONSE);
	CHECK(vq_vsg_accept(x.g, 9) != NULL);
	gfx_fini(&x);
}

/* 5.10.6.4 (driver): a packet of an unknown type gets RST. */
static void vsock_5_10_6_4_unknown_type_gets_rst(void)
{
	struct gfx x;
	struct vq_vsock_hdr h;

	gfx_init(&x, ring_features, 64);
	gfx_start(&x);
	CHECK_EQ(vq_vsg_listen(x.g, 9), 0);
	gfx_hdr(&x, &h, 4000, 9, 9, VQ_VSOCK_OP_REQUEST, 0);
	gfx_dev_send(&x, &h, NULL, 0);
	CHECK(vq_vsg_poll(x.g) >= 1);
	CHECK_EQ(gfx_dev_recv(&x, &h, NULL, 0), 0);
	CHECK_EQ(vq_le16(h.op), VQ_VSOCK_OP_RST);
	CHECK_EQ(vq_le16(h.type), 9);
	CHECK(vq_vsg_accept(x.g, 9) == NULL);
	CHECK_EQ(vq_vsg_stats(x.g)->bad, 1);
	CHECK(strcmp(vq_vsg_last_bad(x.g), "5.10.6.4: type 9 unknown") == 0);
	gfx_fini(&x);
}

/* 5.10.6: a packet belongs to the connection of its port pair, however
 * many are open: 300 connections the guest made and 300 it accepted on
 * one port (the same local port, peers apart), each given its own
 * bytes in an order of its own; a reset one takes nothing more and a
 * packet for it finds no other. */
#define MANY 300u

static void vsock_5_10_6_packets_find_their_connection_among_many(void)
{
	static struct vq_vsg_conn *c[2 * MANY];
	struct gfx x;
	struct vq_vsock_hdr h;
	uint8_t b[8];
	unsigned i;

	gfx_init(&x, ring_features, 64);
	x.gc.backlog = MANY;
	gfx_start(&x);
	for (i = 0; i < MANY; i++)
		c[i] = gfx_connected(&x, VQ_VSOCK_TYPE_STREAM);
	CHECK_EQ(vq_vsg_listen(x.g, 9), 0);
	for (i = 0; i < MANY; i++) {
		gfx_hdr(&x, &h, 20000 + i, 9, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_REQUEST, 0);
		gfx_dev_send(&x, &h, NULL, 0);
		CHECK(vq_vsg_poll(x.g) >= 1);
		CHECK_EQ(gfx_dev_recv_op(&x), VQ_VSOCK_OP_RESPONSE);
		c[MANY + i] = vq_vsg_accept(x.g, 9);
		CHECK(c[MANY + i] != NULL);
	}
	vq_vsg_reset(c[7]);
	CHECK_EQ(gfx_dev_recv_op(&x), VQ_VSOCK_OP_RST);
	/* backwards, so no connection is found by being the newest */
	for (i = 2 * MANY; i-- > 0;) {
		if (i == 7)
			continue;
		memcpy(b, &i, sizeof(i));
		memcpy(b + 4, &i, sizeof(i));
		gfx_send_on(&x, c[i], VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_RW, 0, b, 8);
		CHECK(vq_vsg_poll(x.g) >= 1);
	}
	gfx_hdr(&x, &h, 1, 50007, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_RW, 1);
	gfx_dev_send(&x, &h, "z", 1);           /* the reset one's ports */
	CHECK(vq_vsg_poll(x.g) >= 1);
	CHECK_EQ(vq_vsg_orphan_op(x.g, 50007), VQ_VSOCK_OP_RW);
	for (i = 0; i < 2 * MANY; i++) {
		unsigned got[2];

		if (i == 7)
			continue;
		CHECK_EQ(vq_vsg_readable(c[i]), 8);
		CHECK_EQ(vq_vsg_read(c[i], got, 8), 8);
		CHECK_EQ(got[0], i);
		CHECK_EQ(got[1], i);
	}
	CHECK_EQ(vq_vsg_stats(x.g)->bad, 0);
	gfx_fini(&x);
}

/*
 * The packet count of Linux 6.12.92 on, as the driver plays it when asked
 * (pkt_truesize): with 576 B a packet and a 64 KiB window, 113 one-byte
 * packets queue, the 114th resets the connection whatever credit is left;
 * packets read to their end leave the count.
 */
static void guest_packet_count_resets_as_linux(void)
{
	struct gfx x;
	struct vq_vsg_conn *c;
	uint8_t b = 'x', out[64];

	gfx_init(&x, ring_features, 256);
	x.gc.buf_alloc = 64 * 1024;
	x.gc.pkt_truesize = 576;
	gfx_start(&x);
	c = gfx_connected(&x, VQ_VSOCK_TYPE_STREAM);
	for (int i = 0; i < 113; i++) {
		gfx_send_on(&x, c, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_RW, 0, &b, 1);
		CHECK(vq_vsg_poll(x.g) >= 1);
	}
	CHECK_EQ(vq_vsg_stats(x.g)->pkt_resets, 0);
	/* reading ten frees ten places */
	CHECK_EQ(vq_vsg_read(c, out, 10), 10);
	for (int i = 0; i < 10; i++) {
		gfx_send_on(&x, c, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_RW, 0, &b, 1);
		CHECK(vq_vsg_poll(x.g) >= 1);
	}
	CHECK_EQ(vq_vsg_stats(x.g)->pkt_resets, 0);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_ESTABLISHED);
	gfx_send_on(&x, c, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_RW, 0, &b, 1);
	vq_vsg_poll(x.g);
	CHECK_EQ(vq_vsg_stats(x.g)->pkt_resets, 1);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_CLOSED);
	CHECK_EQ(gfx_dev_recv_op(&x), VQ_VSOCK_OP_RST);
	gfx_fini(&x);
}

/* RX buffers the device may fill now: popped, counted, given back. */
static unsigned rx_posted(struct gfx *x)
{
	static struct iovec iov[512 * 8];
	static struct vq_chain ch[512];
	unsigned n = 0;

	for (;;) {
		CHECK(n < 512);
		ch[n] = (struct vq_chain){ .iov = iov + 8 * n, .iov_max = 8 };
		if (vq_dev_pop(x->vq.dq[VQ_VSOCK_RXQ], &ch[n]) <= 0)
			break;
		n++;
	}
	if (n)
		CHECK_EQ(vq_dev_unpop(x->vq.dq[VQ_VSOCK_RXQ], ch, n), 0);
	return n;
}

/*
 * 5.10.6.3 read: a payload stays in its RX buffer until it is read (one
 * copy), within bounds: half the RX buffers at most stay with the
 * connections, the rest (and small packets) are copied and posted again
 * at once; the bytes come out whole and in order either way, and a
 * buffer goes back to the device when its bytes are read, or when its
 * connection goes.
 */
static void vsock_5_10_6_3_rx_buffers_held_until_read(void)
{
	enum { BIG = 1000, NBIG = 40, NRX = 64 };
	static uint8_t want[NBIG * (BIG + 3)], got[sizeof(want)];
	struct gfx x;
	struct vq_vsg_conn *c, *d;
	uint32_t at = 0, n;

	gfx_init(&x, ring_features, NRX);
	gfx_start(&x);
	c = gfx_connected(&x, VQ_VSOCK_TYPE_STREAM);
	CHECK_EQ(rx_posted(&x), NRX);
	for (unsigned i = 0; i < NBIG; i++) {
		/* a big payload, held (up to the bound), then a small one, copied */
		for (unsigned k = 0; k < BIG + 3; k++)
			want[at + k] = (uint8_t)(i * 7 + k);
		gfx_send_on(&x, c, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_RW, 0, want + at, BIG);
		gfx_send_on(&x, c, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_RW, 0, want + at + BIG, 3);
		at += BIG + 3;
		CHECK(vq_vsg_poll(x.g) >= 2);
	}
	CHECK_EQ(vq_vsg_readable(c), at);
	CHECK_EQ(rx_posted(&x), NRX - NRX / 2);
	/* reads that end inside a held buffer and inside the copied bytes */
	for (n = 0; n < at;) {
		uint32_t k = n % 3 ? 999 : 1501;

		n += vq_vsg_read(c, got + n, k < at - n ? k : at - n);
	}
	CHECK_EQ(n, at);
	CHECK(memcmp(got, want, at) == 0);
	CHECK_EQ(vq_vsg_readable(c), 0);
	CHECK_EQ(rx_posted(&x), NRX);
	/* a connection that goes with its bytes unread gives its buffers back */
	d = gfx_connected(&x, VQ_VSOCK_TYPE_STREAM);
	for (unsigned i = 0; i < 5; i++)
		gfx_send_on(&x, d, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_RW, 0, want, BIG);
	CHECK_EQ(vq_vsg_poll(x.g), 5);
	CHECK_EQ(rx_posted(&x), NRX - 5);
	vq_vsg_reset(d);
	CHECK_EQ(rx_posted(&x), NRX);
	CHECK_EQ(vq_vsg_stats(x.g)->bad, 0);
	gfx_fini(&x);
}

/* The other bound: one connection keeps at most 64 RX buffers, however
 * many the ring has; the bytes past them are copied, still in order. */
static void vsock_5_10_6_3_rx_buffers_held_per_connection(void)
{
	enum { BIG = 1000, NBIG = 100, NRX = 256 };
	static uint8_t want[NBIG * BIG], got[sizeof(want)];
	struct gfx x;
	struct vq_vsg_conn *c;

	gfx_init(&x, ring_features, NRX);
	gfx_start(&x);
	c = gfx_connected(&x, VQ_VSOCK_TYPE_STREAM);
	for (unsigned i = 0; i < sizeof(want); i++)
		want[i] = (uint8_t)(i * 13 + i / BIG);
	for (unsigned i = 0; i < NBIG; i++) {
		gfx_send_on(&x, c, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_RW, 0, want + i * BIG, BIG);
		CHECK_EQ(vq_vsg_poll(x.g), 1);
	}
	CHECK_EQ(rx_posted(&x), NRX - 64);
	CHECK_EQ(vq_vsg_read(c, got, sizeof(got)), sizeof(got));
	CHECK(memcmp(got, want, sizeof(want)) == 0);
	CHECK_EQ(rx_posted(&x), NRX);
	CHECK_EQ(vq_vsg_stats(x.g)->bad, 0);
	gfx_fini(&x);
}

static void run_all(void)
{
	RUN(guest_config_checked);
	RUN(vsock_5_10_5_posts_rx_and_event_buffers);
	RUN(vsock_5_10_6_5_connect_request_response);
	RUN(vsock_5_10_6_3_write_within_device_credit);
	RUN(vsock_5_10_6_3_credit_update_after_read);
	RUN(vsock_5_10_6_5_listen_and_accept);
	RUN(vsock_5_10_6_6_messages_keep_bounds);
	RUN(vsock_5_10_6_5_shutdown_then_rst);
	RUN(vsock_5_10_6_7_transport_reset);
	RUN(vsock_5_10_6_4_unknown_type_gets_rst);
	RUN(vsock_5_10_6_packets_find_their_connection_among_many);
	RUN(guest_packet_count_resets_as_linux);
	RUN(vsock_5_10_6_3_rx_buffers_held_until_read);
	RUN(vsock_5_10_6_3_rx_buffers_held_per_connection);
}

int main(void)
{
	return gfx_main(&ring_features, run_all);
}
