// SPDX-License-Identifier: MIT
/*
 * A guest that breaks the virtio-vsock rules: each bad packet is counted
 * and answered with RST (or dropped when it names no one), and a healthy
 * connection next to it keeps every byte.  Split and packed rings.
 */
#include "vsock_fixture.h"

static const struct fx_opts dflt = { 0 };

/* The device's message for the newest bad input: spec section first, then
 * what was wrong, with the numbers. */
static void last_bad_is(struct vq_vsock *dev, const char *want)
{
	const char *got = vq_vsock_last_bad(dev);

	if (strcmp(got, want)) {
		fprintf(stderr, "last bad input: \"%s\"\n      expected: \"%s\"\n",
			got, want);
		CHECK(!"the message names the rule and the numbers");
	}
}

/* A healthy connection to port 1 and a byte round trip over it. */
static struct vq_vsg_conn *healthy(struct fx *f)
{
	struct vq_vsg_conn *c;
	int i;

	fx_listen(f, 1);
	c = fx_connect(f, 1, VQ_VSOCK_TYPE_STREAM);
	for (i = 0; i < 100 && vq_vsg_state(c) == VQ_VSG_CONNECTING; i++)
		fx_round(f);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_ESTABLISHED);
	return c;
}

static void still_healthy(struct fx *f, struct vq_vsg_conn *c, int hfd)
{
	char b[16];

	CHECK_EQ(vq_vsg_state(c), VQ_VSG_ESTABLISHED);
	CHECK_EQ(vq_vsg_write(c, "ping", 4), 4);
	fx_settle(f);
	CHECK_EQ(read(hfd, b, sizeof(b)), 4);
	CHECK(memcmp(b, "ping", 4) == 0);
	CHECK_EQ(write(hfd, "pong", 4), 4);
	fx_settle(f);
	CHECK_EQ(vq_vsg_read(c, b, sizeof(b)), 4);
	CHECK(memcmp(b, "pong", 4) == 0);
}

/* The header says more payload than the chain holds. */
static void hostile_hdr_len_exceeds_chain(void)
{
	struct fx f;
	struct vq_vsg_conn *c, *v;
	uint8_t pkt[44 + 10];
	struct vq_vsock_hdr h;
	char b[8];

	fx_init(&f, &dflt);
	c = healthy(&f);
	fx_listen(&f, 2);
	v = fx_connect(&f, 2, VQ_VSOCK_TYPE_STREAM);
	fx_settle(&f);
	CHECK_EQ(vq_vsg_state(v), VQ_VSG_ESTABLISHED);
	vq_vsg_hdr(f.g, &h, vq_vsg_local_port(v), 2, VQ_VSOCK_OP_RW, 1000);
	memcpy(pkt, &h, sizeof(h));
	memset(pkt + 44, 'x', 10);
	CHECK_EQ(vq_vsg_send_bytes(f.g, pkt, sizeof(pkt)), 0);
	fx_settle(&f);
	CHECK_EQ(vq_vsock_stats(f.dev)->bad_len, 1);
	last_bad_is(f.dev, "5.10.6: header len 1000, more than the 10 payload bytes of its chain");
	CHECK_EQ(vq_vsg_state(v), VQ_VSG_CLOSED);          /* RST */
	CHECK_EQ(read(fx_host(&f, 1), b, sizeof(b)), 0); /* nothing leaked */
	still_healthy(&f, c, fx_host(&f, 0));
	fx_fini(&f);
}

/* A payload length over 64 KiB (VIRTIO_VSOCK_MAX_PKT_BUF_SIZE). */
static void hostile_hdr_len_over_max_packet(void)
{
	struct fx f;
	struct vq_vsg_conn *c;
	static uint8_t pkt[44 + 70000];
	struct vq_vsock_hdr h;

	fx_init(&f, &(struct fx_opts){ .tx_pkt_max = 65536 });
	c = healthy(&f);
	vq_vsg_hdr(f.g, &h, 4242, 1, VQ_VSOCK_OP_RW, 70000);
	memcpy(pkt, &h, sizeof(h));
	/* the guest's TX slots are 64 KiB: send in a slot that fits by
	 * lying about the payload only */
	CHECK_EQ(vq_vsg_send_bytes(f.g, pkt, 44 + 60000), 0);
	fx_settle(&f);
	CHECK_EQ(vq_vsock_stats(f.dev)->bad_len, 1);
	last_bad_is(f.dev, "5.10.6: header len 70000, more than the 60000 payload bytes of its chain");
	still_healthy(&f, c, fx_host(&f, 0));
	fx_fini(&f);
}

static void hostile_chain_shorter_than_header(void)
{
	struct fx f;
	struct vq_vsg_conn *c;
	uint8_t pkt[20] = { 0 };

	fx_init(&f, &dflt);
	c = healthy(&f);
	CHECK_EQ(vq_vsg_send_bytes(f.g, pkt, sizeof(pkt)), 0);
	fx_settle(&f);
	CHECK_EQ(vq_vsock_stats(f.dev)->bad_short_buf, 1);
	last_bad_is(f.dev, "5.10.6: TX chain of 20 readable bytes, shorter than the 44-byte header");
	still_healthy(&f, c, fx_host(&f, 0));
	fx_fini(&f);
}

static void hostile_unknown_op_and_type(void)
{
	static const struct fx_opts no_seq = { .no_seqpacket = true };
	struct fx f;
	struct vq_vsg_conn *c, *v;
	struct vq_vsock_hdr h;

	fx_init(&f, &no_seq);
	c = healthy(&f);
	fx_listen(&f, 2);
	v = fx_connect(&f, 2, VQ_VSOCK_TYPE_STREAM);
	fx_settle(&f);
	/* unknown op on a live connection: RST, that connection only */
	vq_vsg_hdr(f.g, &h, vq_vsg_local_port(v), 2, 99, 0);
	CHECK_EQ(vq_vsg_send_bytes(f.g, &h, sizeof(h)), 0);
	/* unknown op on no connection: RST back */
	vq_vsg_hdr(f.g, &h, 7001, 2, 0, 0);
	CHECK_EQ(vq_vsg_send_bytes(f.g, &h, sizeof(h)), 0);
	/* seqpacket (not negotiated) and a made-up type: RST */
	vq_vsg_hdr(f.g, &h, 7002, 1, VQ_VSOCK_OP_REQUEST, 0);
	h.type = vq_le16(VQ_VSOCK_TYPE_SEQPACKET);
	CHECK_EQ(vq_vsg_send_bytes(f.g, &h, sizeof(h)), 0);
	vq_vsg_hdr(f.g, &h, 7003, 1, VQ_VSOCK_OP_REQUEST, 0);
	h.type = vq_le16(77);
	CHECK_EQ(vq_vsg_send_bytes(f.g, &h, sizeof(h)), 0);
	fx_settle(&f);
	CHECK_EQ(vq_vsock_stats(f.dev)->bad_op, 2);
	CHECK_EQ(vq_vsock_stats(f.dev)->bad_type, 2);
	last_bad_is(f.dev, "5.10.6.4: type 77 (unknown) was not negotiated");
	CHECK_EQ(vq_vsg_state(v), VQ_VSG_CLOSED);
	CHECK_EQ(vq_vsg_orphan_op(f.g, 7001), VQ_VSOCK_OP_RST);
	CHECK_EQ(vq_vsg_orphan_op(f.g, 7002), VQ_VSOCK_OP_RST);
	CHECK_EQ(vq_vsg_orphan_op(f.g, 7003), VQ_VSOCK_OP_RST);
	CHECK_EQ(vq_vsock_conn_count(f.dev), 1);
	still_healthy(&f, c, fx_host(&f, 0));
	fx_fini(&f);
}

/* Wrong source CID (spoofing) or a destination other than the host. */
static void hostile_wrong_cids_dropped(void)
{
	struct fx f;
	struct vq_vsg_conn *c;
	struct vq_vsock_hdr h;

	fx_init(&f, &dflt);
	c = healthy(&f);
	vq_vsg_hdr(f.g, &h, 7000, 1, VQ_VSOCK_OP_REQUEST, 0);
	h.src_cid = vq_le64(FX_CID + 1);
	CHECK_EQ(vq_vsg_send_bytes(f.g, &h, sizeof(h)), 0);
	vq_vsg_hdr(f.g, &h, 7000, 1, VQ_VSOCK_OP_REQUEST, 0);
	h.dst_cid = vq_le64(FX_CID);
	CHECK_EQ(vq_vsg_send_bytes(f.g, &h, sizeof(h)), 0);
	fx_settle(&f);
	CHECK_EQ(vq_vsock_stats(f.dev)->bad_addr, 2);
	last_bad_is(f.dev, "5.10.6.4: packet from CID 3 to CID 3, not from the guest's CID 3 to the host's 2");
	CHECK_EQ(f.nhost, 1);                   /* no host connect */
	still_healthy(&f, c, fx_host(&f, 0));
	fx_fini(&f);
}

/* Data beyond the credit the device gave: RST, never unbounded buffering. */
static void hostile_credit_overrun_resets(void)
{
	struct fx_opts o = { .dev_buf_alloc = 8192 };
	static uint8_t pkt[44 + 60000];
	struct fx f;
	struct vq_vsg_conn *c, *v;
	struct vq_vsock_hdr h;
	char b[16];
	int i;

	fx_init(&f, &o);
	c = healthy(&f);
	fx_listen(&f, 2);
	v = fx_connect(&f, 2, VQ_VSOCK_TYPE_STREAM);
	fx_settle(&f);
	/* Fill the host socket so nothing drains, then overrun the window. */
	for (i = 0; i < 100; i++) {
		vq_vsg_hdr(f.g, &h, vq_vsg_local_port(v), 2, VQ_VSOCK_OP_RW, 60000);
		memcpy(pkt, &h, sizeof(h));
		CHECK_EQ(vq_vsg_send_bytes(f.g, pkt, sizeof(pkt)), 0);
		fx_round(&f);
		if (vq_vsg_state(v) == VQ_VSG_CLOSED)
			break;
	}
	fx_settle(&f);
	CHECK_EQ(vq_vsg_state(v), VQ_VSG_CLOSED);
	CHECK_EQ(vq_vsock_stats(f.dev)->bad_credit, 1);
	CHECK(strncmp(vq_vsock_last_bad(f.dev), "5.10.6.3: RW of 60000 bytes on ports 50001 -> 2, beyond the ",
		      60) == 0);
	/* what the host got is a prefix of what was sent, nothing more */
	(void)b;
	still_healthy(&f, c, fx_host(&f, 0));
	fx_fini(&f);
}

/* RW before the connection exists / after the guest's SHUTDOWN SEND. */
static void hostile_rw_in_wrong_state(void)
{
	struct fx f;
	struct vq_vsg_conn *c, *v;
	struct vq_vsock_hdr h;
	uint8_t pkt[44 + 4];

	fx_init(&f, &dflt);
	c = healthy(&f);
	vq_vsg_hdr(f.g, &h, 7100, 1, VQ_VSOCK_OP_RW, 4);
	memcpy(pkt, &h, sizeof(h));
	CHECK_EQ(vq_vsg_send_bytes(f.g, pkt, sizeof(pkt)), 0);
	fx_settle(&f);
	CHECK_EQ(vq_vsg_orphan_op(f.g, 7100), VQ_VSOCK_OP_RST);
	fx_listen(&f, 2);
	v = fx_connect(&f, 2, VQ_VSOCK_TYPE_STREAM);
	fx_settle(&f);
	CHECK_EQ(vq_vsg_shutdown(v, VQ_VSOCK_SHUTDOWN_SEND), 0);
	fx_settle(&f);
	vq_vsg_hdr(f.g, &h, vq_vsg_local_port(v), 2, VQ_VSOCK_OP_RW, 4);
	memcpy(pkt, &h, sizeof(h));
	CHECK_EQ(vq_vsg_send_bytes(f.g, pkt, sizeof(pkt)), 0);
	fx_settle(&f);
	CHECK_EQ(vq_vsg_state(v), VQ_VSG_CLOSED);
	CHECK_EQ(vq_vsock_stats(f.dev)->bad_op, 1);
	last_bad_is(f.dev, "5.10.6.5: RW (op 5) on ports 50001 -> 2: after the guest's SHUTDOWN SEND");
	still_healthy(&f, c, fx_host(&f, 0));
	fx_fini(&f);
}

/* A REQUEST flood: at most max_conns connections, the rest RST and
 * counted; the guest posts no RX buffers meanwhile, so replies pile up and
 * TX must stop rather than queue without bound. */
static void hostile_request_flood_bounded(void)
{
	struct fx_opts o = { .max_conns = 8, .num = 256, .rx_buf_size = 1u << 20 };
	struct fx f;
	struct vq_vsg_conn *c;
	struct vq_vsock_hdr h;
	unsigned i, sent = 0;

	fx_init(&f, &o);
	c = healthy(&f);
	fx_listen(&f, 3);
	/* The guest reaps TX but never reposts RX (it has 24 RX buffers). */
	for (i = 0; i < 2000 && !vq_vsock_tx_blocked(f.dev); i++) {
		vq_vsg_hdr(f.g, &h, 20000 + sent, 3, VQ_VSOCK_OP_REQUEST, 0);
		if (vq_vsg_send_bytes(f.g, &h, sizeof(h)) == 0)
			sent++;
		CHECK(vq_vsock_process_tx(f.dev, 256) >= 0);
		CHECK(vq_vsock_process_rx(f.dev, 256) >= 0);
		CHECK(vq_vsg_reap_tx(f.g) >= 0);
	}
	CHECK(vq_vsock_tx_blocked(f.dev));
	CHECK(sent < 2000);
	/* Blocked: TX chains wait in the ring, untouched. */
	vq_vsg_hdr(f.g, &h, 20000 + sent, 3, VQ_VSOCK_OP_REQUEST, 0);
	CHECK_EQ(vq_vsg_send_bytes(f.g, &h, sizeof(h)), 0);
	sent++;
	CHECK_EQ(vq_vsock_process_tx(f.dev, 256), 0);
	CHECK(vq_dev_has_avail(f.vq.dq[1]));
	CHECK_EQ(vq_vsock_conn_count(f.dev), 8);
	/* The guest reads its RX again: everything gets through. */
	for (i = 0; i < 100000 && sent < 2000; i++) {
		vq_vsg_hdr(f.g, &h, 20000 + sent, 3, VQ_VSOCK_OP_REQUEST, 0);
		if (vq_vsg_send_bytes(f.g, &h, sizeof(h)) == 0)
			sent++;
		fx_round(&f);
		CHECK(vq_vsock_conn_count(f.dev) <= 8);
	}
	fx_settle(&f);
	CHECK_EQ(sent, 2000);
	/* Our guest answers the RESPONSEs to REQUESTs it never made with RST
	 * (as Linux does), which frees slots for later REQUESTs; the test's
	 * host side stops accepting after FX_MAX_HOST.  Every REQUEST was
	 * accepted or refused, and counted. */
	CHECK_EQ(vq_vsock_conn_count(f.dev), 1);
	CHECK_EQ(vq_vsock_stats(f.dev)->conns_opened +
		 vq_vsock_stats(f.dev)->conn_limit +
		 vq_vsock_stats(f.dev)->no_listener, 2000 + 1);
	CHECK(vq_vsock_stats(f.dev)->conn_limit >= 200);
	CHECK_EQ(vq_vsock_stats(f.dev)->rst_sent,
		 vq_vsock_stats(f.dev)->conn_limit +
		 vq_vsock_stats(f.dev)->no_listener);
	CHECK_EQ(vq_vsock_stats(f.dev)->conns_closed,
		 vq_vsock_stats(f.dev)->conns_opened - 1);
	CHECK_EQ(vq_vsg_orphan_op(f.g, 20000 + 1999), VQ_VSOCK_OP_RST);
	still_healthy(&f, c, fx_host(&f, 0));
	fx_fini(&f);
}

/* An RX buffer too small for a header, or with a readable part, goes back
 * empty (counted); the next good one carries the packet. */
static void hostile_rx_buffer_too_small(void)
{
	struct ring_pair rx, tx;
	struct vq_vsock *dev;
	struct vq_vsock_config dc = { .guest_cid = FX_CID,
				      .host_connect = fx_host_connect };
	struct fx dummy = { 0 };
	uint64_t small, big, out;
	struct vq_seg s[2];
	struct vq_vsock_hdr h;
	void *t;
	uint32_t len;

	dc.arg = &dummy;
	pair_init(&rx, fx_features, 16, 1, 1);
	pair_init(&tx, fx_features, 16, 1, 1);
	CHECK_EQ(vq_vsock_new(&dc, &dev), 0);
	CHECK_EQ(vq_vsock_start(dev, rx.dev, tx.dev, NULL), 0);
	small = pair_alloc(&rx, 64);
	big = pair_alloc(&rx, 4096);
	out = pair_alloc(&tx, 64);
	s[0] = (struct vq_seg){ small, 20 };
	CHECK_EQ(vq_drv_add(rx.drv, s, 0, 1, (void *)1), 0);
	s[0] = (struct vq_seg){ small + 32, 8 };
	s[1] = (struct vq_seg){ big, 100 };
	CHECK_EQ(vq_drv_add(rx.drv, s, 1, 1, (void *)2), 0);
	s[0] = (struct vq_seg){ big, 4096 };
	CHECK_EQ(vq_drv_add(rx.drv, s, 0, 1, (void *)3), 0);
	CHECK(vq_drv_kick_prepare(rx.drv) >= 0);
	/* a REQUEST to a port nobody listens on: the RST needs a buffer */
	memset(&h, 0, sizeof(h));
	h.src_cid = vq_le64(FX_CID);
	h.dst_cid = vq_le64(2);
	h.src_port = vq_le32(5);
	h.dst_port = vq_le32(6);
	h.type = vq_le16(VQ_VSOCK_TYPE_STREAM);
	h.op = vq_le16(VQ_VSOCK_OP_REQUEST);
	memcpy(pair_hva(&tx, out), &h, sizeof(h));
	s[0] = (struct vq_seg){ out, 44 };
	CHECK_EQ(vq_drv_add(tx.drv, s, 1, 0, (void *)9), 0);
	CHECK(vq_drv_kick_prepare(tx.drv) >= 0);
	CHECK_EQ(vq_vsock_process_tx(dev, 16), 1);
	CHECK_EQ(vq_vsock_process_rx(dev, 16), 1);
	CHECK_EQ(vq_drv_get(rx.drv, &t, &len), 1);
	CHECK_EQ((uintptr_t)t, 1);
	CHECK_EQ(len, 0);
	CHECK_EQ(vq_drv_get(rx.drv, &t, &len), 1);
	CHECK_EQ((uintptr_t)t, 2);
	CHECK_EQ(len, 0);
	CHECK_EQ(vq_drv_get(rx.drv, &t, &len), 1);
	CHECK_EQ((uintptr_t)t, 3);
	CHECK_EQ(len, 44);
	memcpy(&h, pair_hva(&rx, big), sizeof(h));
	CHECK_EQ(vq_le16(h.op), VQ_VSOCK_OP_RST);
	CHECK_EQ(vq_le32(h.dst_port), 5);
	CHECK_EQ(vq_le32(h.src_port), 6);
	CHECK_EQ(vq_le64(h.dst_cid), FX_CID);
	CHECK_EQ(vq_vsock_stats(dev)->bad_rx_buf, 2);
	last_bad_is(dev, "5.10.6.4: RX buffer 1 has 1 device-readable descriptors");
	CHECK_EQ(vq_vsock_stats(dev)->no_listener, 1);
	vq_vsock_free(dev);
	pair_fini(&rx);
	pair_fini(&tx);
}

static void run_all(void)
{
	RUN(hostile_hdr_len_exceeds_chain);
	RUN(hostile_hdr_len_over_max_packet);
	RUN(hostile_chain_shorter_than_header);
	RUN(hostile_unknown_op_and_type);
	RUN(hostile_wrong_cids_dropped);
	RUN(hostile_credit_overrun_resets);
	RUN(hostile_rw_in_wrong_state);
	RUN(hostile_request_flood_bounded);
	RUN(hostile_rx_buffer_too_small);
}

int main(void)
{
	fprintf(stderr, "== split\n");
	fx_features = 0;
	run_all();
	fprintf(stderr, "== packed\n");
	fx_features = VQ_BIT(VQ_F_RING_PACKED);
	run_all();
	fprintf(stderr, "== split in-order\n");
	fx_features = VQ_BIT(VQ_F_IN_ORDER);
	run_all();
	return 0;
}
