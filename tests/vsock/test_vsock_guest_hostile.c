// SPDX-License-Identifier: MIT
/*
 * The userspace vsock driver against a hostile device.  What breaks a
 * ring rule (a used id never made available, a used length beyond the
 * buffer) breaks the driver: a clear -errno and message naming the queue,
 * and every later call fails fast.  A header that lies is counted, leaves
 * a message (spec section first, the numbers), and resets the connection
 * it names; bytes accepted before stay readable, other connections go on,
 * and nothing grows without bound.  Split and packed rings.
 */
#include "guest_fixture.h"

static uint64_t ring_features;

static bool packed(void)
{
	return ring_features & VQ_BIT(VQ_F_RING_PACKED);
}

/* Write a used entry into queue q's ring by hand, at the first used
 * position of a ring whose device side has used nothing yet. */
static void forge_first_used(struct gfx *x, unsigned q, uint16_t id, uint32_t len)
{
	if (packed()) {
		struct vq_packed_desc *d = x->vq.ring[q].desc;

		d[0].id = vq_le16(id);
		d[0].len = vq_le32(len);
		__atomic_store_n(&d[0].flags, vq_le16(VQ_DESC_F_AVAIL | VQ_DESC_F_USED),
				 __ATOMIC_RELEASE);
	} else {
		struct vq_used *u = x->vq.ring[q].device;

		u->ring[0].id = vq_le32(id);
		u->ring[0].len = vq_le32(len);
		__atomic_store_n(&u->idx, vq_le16(1), __ATOMIC_RELEASE);
	}
}

static void last_bad_is(struct gfx *x, const char *want)
{
	if (strcmp(vq_vsg_last_bad(x->g), want)) {
		fprintf(stderr, "last bad: \"%s\"\n  expected \"%s\"\n",
			vq_vsg_last_bad(x->g), want);
		CHECK(!"the message names the rule and the numbers");
	}
}

/* The driver broke on queue q: the ring's own message (whose format is
 * the ring's: spec section first), then the queue named; every later
 * call fails fast with err. */
static void expect_broken(struct gfx *x, int err, unsigned q, const char *ring_msg)
{
	static const char *const qname[] = { "rx", "tx", "event" };
	const char *m = vq_vsg_error_msg(x->g);
	char want[256];
	struct vq_vsg_conn *c = (struct vq_vsg_conn *)1;

	fprintf(stderr, "   broken: %s\n", m);
	CHECK_EQ(vq_vsg_error(x->g), err);
	CHECK(strstr(vq_drv_error_msg(x->vq.drv[q]), ring_msg) != NULL);
	snprintf(want, sizeof(want), "%s (vsock %s queue)", vq_drv_error_msg(x->vq.drv[q]),
		 qname[q]);
	CHECK(strcmp(m, want) == 0);
	CHECK_EQ(vq_vsg_poll(x->g), err);
	CHECK_EQ(vq_vsg_reap_tx(x->g), err);
	CHECK_EQ(vq_vsg_connect(x->g, 1, VQ_VSOCK_TYPE_STREAM, &c), err);
	CHECK(c == NULL);
	CHECK_EQ(vq_vsg_send_bytes(x->g, "x", 1), err);
}

/* 2.7.8 / 2.8.21: an RX used id the driver never made available. */
static void hostile_rx_used_id_never_made_available(void)
{
	struct gfx x;

	gfx_init(&x, ring_features, 64);
	x.gc.rx_area.size = 8 * 4160;           /* ids 0-7 posted, 20 is not */
	gfx_start(&x);
	forge_first_used(&x, VQ_VSOCK_RXQ, 20, 100);
	CHECK_EQ(vq_vsg_poll(x.g), -EINVAL);
	expect_broken(&x, -EINVAL, VQ_VSOCK_RXQ, "used id 20");
	CHECK_EQ(vq_vsg_stats(x.g)->rx_pkts, 0);
	gfx_fini(&x);
}

/* An RX used length beyond the buffer the driver posted. */
static void hostile_rx_used_len_beyond_buffer(void)
{
	struct gfx x;

	gfx_init(&x, ring_features, 64);
	gfx_start(&x);
	forge_first_used(&x, VQ_VSOCK_RXQ, 0, VQ_VSOCK_HDR_SIZE + 4096 + 1);
	CHECK_EQ(vq_vsg_poll(x.g), -EINVAL);
	expect_broken(&x, -EINVAL, VQ_VSOCK_RXQ, "used length 4141");
	gfx_fini(&x);
}

/* A TX used id never made available: the TX slots stay ours. */
static void hostile_tx_used_id_never_made_available(void)
{
	struct gfx x;
	struct vq_vsg_conn *c;
	unsigned free_before;

	gfx_init(&x, ring_features, 64);
	gfx_start(&x);
	CHECK_EQ(vq_vsg_connect(x.g, 1, VQ_VSOCK_TYPE_STREAM, &c), 0);
	free_before = vq_vsg_tx_free(x.g);
	forge_first_used(&x, VQ_VSOCK_TXQ, 5, 0);
	CHECK_EQ(vq_vsg_reap_tx(x.g), -EINVAL);
	expect_broken(&x, -EINVAL, VQ_VSOCK_TXQ, "used id 5");
	CHECK_EQ(vq_vsg_tx_free(x.g), free_before);
	CHECK_EQ(vq_vsg_write(c, "x", 1), -EINVAL);
	gfx_fini(&x);
}

/* 5.10.6: a header len beyond what the device wrote: the stream lost
 * bytes, so the connection is reset; what came before stays readable. */
static void hostile_hdr_len_beyond_used(void)
{
	static uint8_t pkt[VQ_VSOCK_HDR_SIZE + 100];
	struct gfx x;
	struct vq_vsg_conn *c, *other;
	struct vq_vsock_hdr h;
	char b[16];

	c = gfx_up(&x, ring_features, VQ_VSOCK_TYPE_STREAM);
	other = gfx_connected(&x, VQ_VSOCK_TYPE_STREAM);
	gfx_send_on(&x, c, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_RW, 0, "first", 5);
	gfx_hdr(&x, &h, 1, vq_vsg_local_port(c), VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_RW, 500);
	memcpy(pkt, &h, sizeof(h));
	CHECK_EQ(gfx_dev_write(&x, VQ_VSOCK_RXQ, pkt, sizeof(pkt), sizeof(pkt)), 0);
	CHECK(vq_vsg_poll(x.g) >= 2);
	CHECK_EQ(vq_vsg_error(x.g), 0);
	CHECK_EQ(vq_vsg_stats(x.g)->bad, 1);
	CHECK_EQ(vq_vsg_stats(x.g)->conns_reset, 1);
	last_bad_is(&x, "5.10.6: header len 500, more than the 100 payload bytes the device wrote");
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_CLOSED);
	CHECK_EQ(gfx_dev_recv_op(&x), VQ_VSOCK_OP_RST);
	CHECK_EQ(vq_vsg_read(c, b, sizeof(b)), 5);
	CHECK(memcmp(b, "first", 5) == 0);
	CHECK(vq_vsg_eof(c));
	CHECK_EQ(vq_vsg_state(other), VQ_VSG_ESTABLISHED);
	CHECK_EQ(vq_vsg_write(other, "ok", 2), 2);
	gfx_fini(&x);
}

/* A used length shorter than a header, and CIDs that are not the host's
 * and ours: dropped, counted, nobody reset. */
static void hostile_short_packets_and_wrong_cids(void)
{
	struct gfx x;
	struct vq_vsg_conn *c;
	struct vq_vsock_hdr h;

	c = gfx_up(&x, ring_features, VQ_VSOCK_TYPE_STREAM);
	gfx_hdr(&x, &h, 1, vq_vsg_local_port(c), VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_RST, 0);
	CHECK_EQ(gfx_dev_write(&x, VQ_VSOCK_RXQ, &h, sizeof(h), 20), 0);
	CHECK(vq_vsg_poll(x.g) >= 1);
	last_bad_is(&x, "5.10.6: RX buffer used for 20 bytes, less than the 44-byte header");
	h.src_cid = vq_le64(7);
	gfx_dev_send(&x, &h, NULL, 0);
	CHECK(vq_vsg_poll(x.g) >= 1);
	last_bad_is(&x, "5.10.6.4: packet from CID 7 to CID 3, not from the host's 2 to our 3");
	gfx_hdr(&x, &h, 1, vq_vsg_local_port(c), VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_RST, 0);
	h.dst_cid = vq_le64(4);
	gfx_dev_send(&x, &h, NULL, 0);
	CHECK(vq_vsg_poll(x.g) >= 1);
	CHECK_EQ(vq_vsg_stats(x.g)->bad, 3);
	CHECK_EQ(vq_vsg_stats(x.g)->conns_reset, 0);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_ESTABLISHED);  /* the RSTs were not taken */
	CHECK_EQ(gfx_dev_recv_op(&x), -1);
	gfx_fini(&x);
}

/* 5.10.6.3: data beyond the credit we gave resets the connection; the
 * bytes within it stay, and the receive buffer never overflows. */
static void hostile_rw_beyond_credit_resets(void)
{
	static uint8_t data[4000], got[4096];
	struct gfx x;
	struct vq_vsg_conn *c;

	gfx_init(&x, ring_features, 64);
	x.gc.buf_alloc = 4096;
	gfx_start(&x);
	c = gfx_connected(&x, VQ_VSOCK_TYPE_STREAM);
	memset(data, 'a', sizeof(data));
	gfx_send_on(&x, c, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_RW, 0, data, 4000);
	gfx_send_on(&x, c, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_RW, 0, data, 200);
	CHECK(vq_vsg_poll(x.g) >= 2);
	last_bad_is(&x, "5.10.6.3: RW of 200 bytes on ports 1 -> 50000, beyond the 96 bytes of credit left");
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_CLOSED);
	CHECK_EQ(gfx_dev_recv_op(&x), VQ_VSOCK_OP_RST);
	CHECK_EQ(vq_vsg_readable(c), 4000);
	CHECK_EQ(vq_vsg_read(c, got, sizeof(got)), 4000);
	CHECK(memcmp(got, data, 4000) == 0);
	gfx_fini(&x);
}

/* 5.10.6.5: ops the connection's state forbids, an op of no spec and a
 * type not the connection's: each resets that connection only. */
static void hostile_ops_in_wrong_state_reset(void)
{
	static const struct {
		uint16_t op, type;
		bool connecting;
		const char *msg;
	} cases[] = {
		{ VQ_VSOCK_OP_RW, 1, true,
		  "5.10.6.5: op 5 on ports 1 -> 50000: RW before the connection is established" },
		{ VQ_VSOCK_OP_RESPONSE, 1, false,
		  "5.10.6.5: op 2 on ports 1 -> 50000: RESPONSE to no REQUEST of ours" },
		{ VQ_VSOCK_OP_REQUEST, 1, false,
		  "5.10.6.5: op 1 on ports 1 -> 50000: REQUEST for a connection that exists" },
		{ 42, 1, false, "5.10.6.5: op 42 on ports 1 -> 50000: not an op of the spec" },
		{ VQ_VSOCK_OP_RW, 2, false,
		  "5.10.6.2: type 2 (seqpacket) on the stream connection of ports 1 -> 50000" },
	};

	for (unsigned i = 0; i < FX_ARRAY_SIZE(cases); i++) {
		struct gfx x;
		struct vq_vsg_conn *c, *other;
		struct vq_vsock_hdr h;

		gfx_init(&x, ring_features, 64);
		gfx_start(&x);
		if (cases[i].connecting) {
			CHECK_EQ(vq_vsg_connect(x.g, 1, VQ_VSOCK_TYPE_STREAM, &c), 0);
			CHECK_EQ(gfx_dev_recv_op(&x), VQ_VSOCK_OP_REQUEST);
		} else {
			c = gfx_connected(&x, VQ_VSOCK_TYPE_STREAM);
		}
		other = gfx_connected(&x, VQ_VSOCK_TYPE_STREAM);
		gfx_hdr(&x, &h, 1, vq_vsg_local_port(c), cases[i].type, cases[i].op, 0);
		gfx_dev_send(&x, &h, NULL, 0);
		CHECK(vq_vsg_poll(x.g) >= 1);
		last_bad_is(&x, cases[i].msg);
		CHECK_EQ(vq_vsg_state(c), VQ_VSG_CLOSED);
		CHECK_EQ(gfx_dev_recv_op(&x), VQ_VSOCK_OP_RST);
		CHECK_EQ(vq_vsg_state(other), VQ_VSG_ESTABLISHED);
		CHECK_EQ(vq_vsg_stats(x.g)->conns_reset, 1);
		gfx_fini(&x);
	}
}

/* REQUESTs the guest never accepts: at most backlog connections wait,
 * the rest get RST (no memory per REQUEST). */
static void hostile_request_flood_bounded_by_backlog(void)
{
	struct gfx x;
	struct vq_vsock_hdr h;
	unsigned rst = 0, resp = 0;
	int op;

	gfx_init(&x, ring_features, 64);
	x.gc.backlog = 8;
	gfx_start(&x);
	CHECK_EQ(vq_vsg_listen(x.g, 5), 0);
	for (uint32_t i = 0; i < 200; i++) {
		gfx_hdr(&x, &h, 10000 + i, 5, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_REQUEST, 0);
		gfx_dev_send(&x, &h, NULL, 0);
		CHECK(vq_vsg_poll(x.g) >= 1);
		while ((op = gfx_dev_recv_op(&x)) >= 0) {
			rst += op == VQ_VSOCK_OP_RST;
			resp += op == VQ_VSOCK_OP_RESPONSE;
		}
	}
	CHECK_EQ(resp, 8);
	CHECK_EQ(rst, 192);
	CHECK_EQ(vq_vsg_stats(x.g)->backlog_full, 192);
	for (unsigned i = 0; i < 8; i++)
		CHECK(vq_vsg_accept(x.g, 5) != NULL);
	CHECK(vq_vsg_accept(x.g, 5) == NULL);
	gfx_fini(&x);
}

/* 5.10.6.6: message ends past the bound of unread messages reset the
 * connection instead of losing a boundary; the messages before stay. */
static void hostile_message_ends_bounded(void)
{
	struct gfx x;
	struct vq_vsg_conn *c;
	struct vq_vsock_hdr h;
	char b[4];
	unsigned n;

	c = gfx_up(&x, ring_features, VQ_VSOCK_TYPE_SEQPACKET);
	for (n = 0; n < 4097; n++) {
		gfx_hdr(&x, &h, 1, vq_vsg_local_port(c), VQ_VSOCK_TYPE_SEQPACKET,
			VQ_VSOCK_OP_RW, 1);
		h.flags = vq_le32(VQ_VSOCK_SEQ_EOM);
		gfx_dev_send(&x, &h, "m", 1);
		CHECK(vq_vsg_poll(x.g) >= 1);
	}
	last_bad_is(&x, "5.10.6.6: a message end on ports 1 -> 50000 past the 4096 unread");
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_CLOSED);
	for (n = 0; vq_vsg_read_msg(c, b, sizeof(b)) == 1; n++)
		;
	CHECK_EQ(n, 4096);
	gfx_fini(&x);
}

/* 5.10.6.3: a fwd_cnt ahead of what we sent gives no credit, not 4 GiB. */
static void hostile_credit_lie_gives_none(void)
{
	struct gfx x;
	struct vq_vsg_conn *c;

	c = gfx_up(&x, ring_features, VQ_VSOCK_TYPE_STREAM);
	x.dev_fwd_cnt = 1u << 31;
	gfx_send_on(&x, c, VQ_VSOCK_TYPE_STREAM, VQ_VSOCK_OP_CREDIT_UPDATE, 0, NULL, 0);
	CHECK(vq_vsg_poll(x.g) >= 1);
	CHECK_EQ(vq_vsg_credit(c), 0);
	CHECK_EQ(vq_vsg_write(c, "x", 1), 0);
	gfx_fini(&x);
}

/* 5.10.6.7: a short event and an unknown id are counted; nothing closes. */
static void hostile_bad_events(void)
{
	struct gfx x;
	struct vq_vsg_conn *c;
	struct vq_vsock_event e = { vq_le32(77) };

	c = gfx_up(&x, ring_features, VQ_VSOCK_TYPE_STREAM);
	CHECK_EQ(gfx_dev_write(&x, VQ_VSOCK_EVQ, &e, sizeof(e), 2), 0);
	CHECK(vq_vsg_poll(x.g) >= 1);
	last_bad_is(&x, "5.10.6.7: event of 2 bytes, less than the 4 of an event");
	CHECK_EQ(gfx_dev_write(&x, VQ_VSOCK_EVQ, &e, sizeof(e), sizeof(e)), 0);
	CHECK(vq_vsg_poll(x.g) >= 1);
	last_bad_is(&x, "5.10.6.7: event id 77 unknown");
	CHECK_EQ(vq_vsg_stats(x.g)->bad, 2);
	CHECK_EQ(vq_vsg_stats(x.g)->resets, 0);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_ESTABLISHED);
	/* the event buffers were posted again */
	CHECK_EQ(gfx_dev_write(&x, VQ_VSOCK_EVQ, &e, sizeof(e), sizeof(e)), 0);
	gfx_fini(&x);
}

static void run_all(void)
{
	RUN(hostile_rx_used_id_never_made_available);
	RUN(hostile_rx_used_len_beyond_buffer);
	RUN(hostile_tx_used_id_never_made_available);
	RUN(hostile_hdr_len_beyond_used);
	RUN(hostile_short_packets_and_wrong_cids);
	RUN(hostile_rw_beyond_credit_resets);
	RUN(hostile_ops_in_wrong_state_reset);
	RUN(hostile_request_flood_bounded_by_backlog);
	RUN(hostile_message_ends_bounded);
	RUN(hostile_credit_lie_gives_none);
	RUN(hostile_bad_events);
}

int main(void)
{
	return gfx_main(&ring_features, run_all);
}
