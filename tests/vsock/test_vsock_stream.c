// SPDX-License-Identifier: MIT
/*
 * virtio-vsock streams (virtio 1.2 5.10.6): connection set-up both ways,
 * data both ways with every byte checked, credit flow control, half-close,
 * many connections, RX used-entry batching, the transport reset event.
 * Runs over split and packed rings.
 */
#include <signal.h>
#include <stddef.h>
#include <sys/ioctl.h>

#include "vsock_fixture.h"

static const struct fx_opts dflt = { 0 };
static struct fx f_pc;                  /* large: not on the stack */

/* Pump until the guest connection leaves CONNECTING. */
static void wait_state(struct fx *f, struct vq_vsg_conn *c)
{
	int i;

	for (i = 0; i < 1000 && vq_vsg_state(c) == VQ_VSG_CONNECTING; i++)
		fx_round(f);
}

static void vsock_5_10_6_header_is_44_bytes_le(void)
{
	struct vq_vsock_hdr h;

	CHECK_EQ(sizeof(h), 44);
	CHECK_EQ(offsetof(struct vq_vsock_hdr, dst_cid), 8);
	CHECK_EQ(offsetof(struct vq_vsock_hdr, src_port), 16);
	CHECK_EQ(offsetof(struct vq_vsock_hdr, dst_port), 20);
	CHECK_EQ(offsetof(struct vq_vsock_hdr, len), 24);
	CHECK_EQ(offsetof(struct vq_vsock_hdr, type), 28);
	CHECK_EQ(offsetof(struct vq_vsock_hdr, op), 30);
	CHECK_EQ(offsetof(struct vq_vsock_hdr, flags), 32);
	CHECK_EQ(offsetof(struct vq_vsock_hdr, buf_alloc), 36);
	CHECK_EQ(offsetof(struct vq_vsock_hdr, fwd_cnt), 40);
	CHECK_EQ(sizeof(struct vq_vsock_config_space), 8);
}

static void hybrid_connect_line_parse(void)
{
	uint32_t p = 0;

	CHECK_EQ(vq_vsock_parse_connect("CONNECT 1234", &p), 0);
	CHECK_EQ(p, 1234);
	CHECK_EQ(vq_vsock_parse_connect("CONNECT 4294967295", &p), 0);
	CHECK_EQ(p, 4294967295u);
	CHECK_EQ(vq_vsock_parse_connect("CONNECT 5\r", &p), 0);
	CHECK_EQ(p, 5);
	CHECK_EQ(vq_vsock_parse_connect("CONNECT 4294967296", &p), -EINVAL);
	CHECK_EQ(vq_vsock_parse_connect("CONNECT ", &p), -EINVAL);
	CHECK_EQ(vq_vsock_parse_connect("CONNECT -1", &p), -EINVAL);
	CHECK_EQ(vq_vsock_parse_connect("CONNECT 12x", &p), -EINVAL);
	CHECK_EQ(vq_vsock_parse_connect("CONNECTX 12", &p), -EINVAL);
	CHECK_EQ(vq_vsock_parse_connect("CONNECT", &p), -EINVAL);
	CHECK_EQ(vq_vsock_parse_connect("CONNECT +", &p), -EINVAL);
	CHECK_EQ(vq_vsock_parse_connect("12", &p), -EINVAL);
	/* what Firecracker's and Cloud Hypervisor's muxers take too: any
	 * case, any white space, a '+', words after the port */
	CHECK_EQ(vq_vsock_parse_connect("connect 12", &p), 0);
	CHECK_EQ(p, 12);
	CHECK_EQ(vq_vsock_parse_connect("  Connect\t 0013 ", &p), 0);
	CHECK_EQ(p, 13);
	CHECK_EQ(vq_vsock_parse_connect("CONNECT +14 extra words", &p), 0);
	CHECK_EQ(p, 14);
}

static void vsock_5_10_6_5_request_to_no_listener_gets_rst(void)
{
	struct fx f;
	struct vq_vsg_conn *c;

	fx_init(&f, &dflt);
	c = fx_connect(&f, 9999, VQ_VSOCK_TYPE_STREAM);
	CHECK(c);
	fx_settle(&f);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_CLOSED);
	CHECK_EQ(vq_vsg_stats(f.g)->rst_recv, 1);
	CHECK_EQ(vq_vsock_stats(f.dev)->no_listener, 1);
	CHECK_EQ(vq_vsock_stats(f.dev)->rst_sent, 1);
	CHECK_EQ(vq_vsock_conn_count(f.dev), 0);
	fx_fini(&f);
}

/* Guest sends total bytes on c; the host end reads and checks them. */
static void guest_to_host(struct fx *f, struct vq_vsg_conn *c, int hfd,
			  uint64_t total, uint64_t seed)
{
	static uint8_t buf[65536];
	uint64_t sent = 0, got = 0;
	int rounds = 0;

	while (got < total) {
		if (sent < total) {
			uint32_t k = total - sent > sizeof(buf) ? sizeof(buf)
							     : (uint32_t)(total - sent);
			uint64_t i;
			long w;

			for (i = 0; i < k; i++)
				buf[i] = fx_byte(seed, sent + i);
			w = vq_vsg_write(c, buf, k);
			CHECK(w >= 0);
			sent += (uint64_t)w;
		}
		fx_round(f);
		for (;;) {
			ssize_t r = read(hfd, buf, sizeof(buf));
			ssize_t i;

			if (r <= 0)
				break;
			for (i = 0; i < r; i++)
				CHECK_EQ(buf[i], fx_byte(seed, got + (uint64_t)i));
			got += (uint64_t)r;
		}
		CHECK(++rounds < 200000);
	}
	CHECK_EQ(got, total);
}

static void host_to_guest(struct fx *f, struct vq_vsg_conn *c, int hfd,
			  uint64_t total, uint64_t seed)
{
	static uint8_t buf[65536];
	uint64_t sent = 0, got = 0;
	int rounds = 0;

	while (got < total) {
		if (sent < total) {
			uint32_t k = total - sent > sizeof(buf) ? sizeof(buf)
							     : (uint32_t)(total - sent);
			uint64_t i;
			ssize_t w;

			for (i = 0; i < k; i++)
				buf[i] = fx_byte(seed, sent + i);
			w = write(hfd, buf, k);
			if (w > 0)
				sent += (uint64_t)w;
		}
		fx_round(f);
		for (;;) {
			uint32_t r = vq_vsg_read(c, buf, sizeof(buf)), i;

			if (!r)
				break;
			for (i = 0; i < r; i++)
				CHECK_EQ(buf[i], fx_byte(seed, got + i));
			got += r;
		}
		CHECK(++rounds < 200000);
	}
	CHECK_EQ(got, total);
}

static void vsock_guest_connects_host_stream_both_ways(void)
{
	struct fx f;
	struct vq_vsg_conn *c;

	fx_init(&f, &dflt);
	fx_listen(&f, 1234);
	c = fx_connect(&f, 1234, VQ_VSOCK_TYPE_STREAM);
	wait_state(&f, c);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_ESTABLISHED);
	CHECK_EQ(f.nhost, 1);
	CHECK_EQ(vq_vsock_conn_count(f.dev), 1);
	guest_to_host(&f, c, fx_host(&f, 0), 3u << 20, 1);
	host_to_guest(&f, c, fx_host(&f, 0), (3u << 20) + 777, 2);
	CHECK_EQ(vq_vsg_stats(f.g)->bad, 0);
	CHECK_EQ(vq_vsock_stats(f.dev)->bad_credit, 0);
	fx_fini(&f);
}

/* The host's CONNECT line and its first payload arrive in one write: the
 * device must take the line and leave every payload byte for the guest. */
static void hybrid_connect_keeps_payload_behind_line(void)
{
	struct fx f;
	struct vq_vsg_conn *c = NULL;
	int sv[2], i;
	char line[64];
	const char msg[] = "CONNECT 5000\nPAYLOAD-1234567890";
	char got[64] = { 0 };
	uint32_t n = 0, okport = 0;
	ssize_t r;

	fx_init(&f, &dflt);
	CHECK_EQ(vq_vsg_listen(f.g, 5000), 0);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	CHECK_EQ(write(sv[1], msg, sizeof(msg) - 1), (ssize_t)sizeof(msg) - 1);
	CHECK_EQ(vq_vsock_host_attach(f.dev, sv[0]), 0);
	for (i = 0; i < 100 && !c; i++) {
		fx_round(&f);
		c = vq_vsg_accept(f.g, 5000);
	}
	CHECK(c);
	fx_settle(&f);
	/* "OK <port>\n" with the port the guest sees as the source. */
	r = read(sv[1], line, sizeof(line) - 1);
	CHECK(r > 0);
	line[r] = '\0';
	CHECK_EQ(sscanf(line, "OK %u\n", &okport), 1);
	CHECK_EQ(okport, vq_vsg_peer_port(c));
	CHECK_EQ(line[r - 1], '\n');
	CHECK_EQ((size_t)r, strlen("OK \n") + (size_t)snprintf(got, sizeof(got), "%u", okport));
	n = vq_vsg_read(c, got, sizeof(got));
	CHECK_EQ(n, strlen("PAYLOAD-1234567890"));
	CHECK(memcmp(got, "PAYLOAD-1234567890", n) == 0);
	/* and the stream goes on both ways */
	host_to_guest(&f, c, sv[1], 200000, 3);
	guest_to_host(&f, c, sv[1], 200000, 4);
	close(sv[1]);
	fx_fini(&f);
}

static void hybrid_connect_bad_line_or_no_guest_listener_closes(void)
{
	struct fx f;
	int sv[2], sw[2], sl[2];
	char b[64];

	fx_init(&f, &dflt);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	CHECK_EQ(write(sv[1], "HELLO 12\n", 9), 9);
	CHECK_EQ(vq_vsock_host_attach(f.dev, sv[0]), 0);
	/* the guest does not listen on 6000: it answers the REQUEST with RST */
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sw), 0);
	CHECK_EQ(write(sw[1], "CONNECT 6000\n", 13), 13);
	CHECK_EQ(vq_vsock_host_attach(f.dev, sw[0]), 0);
	/* a line that never ends is cut at the limit */
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sl), 0);
	memset(b, '7', sizeof(b));
	memcpy(b, "CONNECT ", 8);
	CHECK_EQ(write(sl[1], b, sizeof(b)), (ssize_t)sizeof(b));
	CHECK_EQ(vq_vsock_host_attach(f.dev, sl[0]), 0);
	fx_settle(&f);
	CHECK_EQ(read(sv[1], b, sizeof(b)), 0);         /* closed, no reply */
	CHECK_EQ(read(sw[1], b, sizeof(b)), 0);
	/* closed with our bytes unread: a UNIX socket reports a reset */
	errno = 0;
	CHECK(read(sl[1], b, sizeof(b)) <= 0 && errno != EAGAIN);
	CHECK_EQ(vq_vsock_stats(f.dev)->bad_connect_line, 2);
	CHECK_EQ(vq_vsock_stats(f.dev)->rst_recv, 1);
	/* a connection the guest refused was never open, so never closed */
	CHECK_EQ(vq_vsock_stats(f.dev)->conns_opened, 0);
	CHECK_EQ(vq_vsock_stats(f.dev)->conns_closed, 0);
	CHECK_EQ(vq_vsock_conn_count(f.dev), 0);
	close(sv[1]);
	close(sw[1]);
	close(sl[1]);
	fx_fini(&f);
}

/* The host's policy refuses port 6000 both ways: a CONNECT to it is
 * closed without a reply and the guest, listening there, is never asked;
 * a guest REQUEST to it gets RST (5.10.6.3) though a host socket listens.
 * Both are counted as policy_refused, not as a missing listener. */
static void hybrid_connect_and_request_refused_by_policy(void)
{
	struct fx f;
	struct vq_vsg_conn *c;
	int sv[2];
	char b[16];

	fx_init(&f, &dflt);
	f.deny = true;
	f.deny_port = 6000;
	CHECK_EQ(vq_vsg_listen(f.g, 6000), 0);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	CHECK_EQ(write(sv[1], "CONNECT 6000\n", 13), 13);
	CHECK_EQ(vq_vsock_host_attach(f.dev, sv[0]), 0);
	fx_settle(&f);
	CHECK_EQ(read(sv[1], b, sizeof(b)), 0);
	CHECK(!vq_vsg_accept(f.g, 6000));
	CHECK_EQ(vq_vsock_stats(f.dev)->policy_refused, 1);
	fx_listen(&f, 6000);
	c = fx_connect(&f, 6000, VQ_VSOCK_TYPE_STREAM);
	wait_state(&f, c);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_CLOSED);
	CHECK_EQ(f.nhost, 0);
	CHECK_EQ(vq_vsock_stats(f.dev)->policy_refused, 2);
	CHECK_EQ(vq_vsock_stats(f.dev)->no_listener, 0);
	CHECK_EQ(vq_vsock_conn_count(f.dev), 0);
	close(sv[1]);
	fx_fini(&f);
}

/* 5.10.6.3: the device never sends more than buf_alloc - (tx_cnt -
 * fwd_cnt).  The guest does not read; the host has lots to send. */
static void vsock_5_10_6_3_device_respects_guest_credit(void)
{
	struct fx_opts o = { .guest_buf_alloc = 16384 };
	static uint8_t buf[1 << 20];
	struct fx f;
	struct vq_vsg_conn *c;
	ssize_t w;
	uint64_t rx0;

	fx_init(&f, &o);
	fx_listen(&f, 77);
	c = fx_connect(&f, 77, VQ_VSOCK_TYPE_STREAM);
	wait_state(&f, c);
	memset(buf, 0x5a, sizeof(buf));
	w = write(fx_host(&f, 0), buf, sizeof(buf));
	CHECK(w > 16384);
	fx_settle(&f);
	CHECK_EQ(vq_vsg_readable(c), 16384);
	CHECK_EQ(vq_vsg_stats(f.g)->bad, 0);
	rx0 = vq_vsock_stats(f.dev)->rx_bytes;
	fx_settle(&f);
	CHECK_EQ(vq_vsock_stats(f.dev)->rx_bytes, rx0);     /* stays stopped */
	/* Reading gives credit back (CREDIT_UPDATE), data flows again. */
	CHECK_EQ(vq_vsg_read(c, buf, 16384), 16384);
	fx_settle(&f);
	CHECK_EQ(vq_vsg_readable(c), 16384);
	CHECK(vq_vsg_stats(f.g)->credit_updates_sent >= 1);
	fx_fini(&f);
}

/* A slow host socket: the device stops taking the guest's data (credit
 * goes to zero), buffers at most buf_alloc, and loses nothing. */
static void backpressure_slow_host_bounded_no_loss(void)
{
	struct fx_opts o = { .dev_buf_alloc = 65536 };
	static uint8_t buf[65536];
	struct fx f;
	struct vq_vsg_conn *c;
	uint64_t sent = 0, got = 0, i;
	int k;

	fx_init(&f, &o);
	fx_listen(&f, 80);
	c = fx_connect(&f, 80, VQ_VSOCK_TYPE_STREAM);
	wait_state(&f, c);
	/* Host reads nothing: the guest can push the socket buffer full plus
	 * at most one window, then its credit is zero. */
	for (k = 0; k < 200; k++) {
		long w;

		for (i = 0; i < sizeof(buf); i++)
			buf[i] = fx_byte(9, sent + i);
		w = vq_vsg_write(c, buf, sizeof(buf));
		CHECK(w >= 0);
		sent += (uint64_t)w;
		fx_round(&f);
	}
	fx_settle(&f);
	CHECK_EQ(vq_vsg_credit(c), 0);
	CHECK(vq_vsock_stats(f.dev)->host_stalls > 0);
	CHECK(sent < 64ull << 20);
	/* Now the host drains: every byte, in order. */
	for (k = 0; got < sent && k < 100000; k++) {
		ssize_t r;

		while ((r = read(fx_host(&f, 0), buf, sizeof(buf))) > 0) {
			for (i = 0; i < (uint64_t)r; i++)
				CHECK_EQ(buf[i], fx_byte(9, got + i));
			got += (uint64_t)r;
		}
		fx_round(&f);
	}
	CHECK_EQ(got, sent);
	/* and the window opened again */
	CHECK_EQ(vq_vsg_credit(c), 65536);
	CHECK_EQ(vq_vsock_stats(f.dev)->bad_credit, 0);
	fx_fini(&f);
}

/* 5.10.6.5: guest SHUTDOWN(SEND) reaches the host as EOF after the data;
 * the host can still answer; host EOF reaches the guest as SHUTDOWN(SEND);
 * then the device ends the connection with RST. */
static void vsock_5_10_6_5_half_close_both_directions(void)
{
	struct fx f;
	struct vq_vsg_conn *c;
	char b[64];
	int hfd;

	fx_init(&f, &dflt);
	fx_listen(&f, 81);
	c = fx_connect(&f, 81, VQ_VSOCK_TYPE_STREAM);
	wait_state(&f, c);
	hfd = fx_host(&f, 0);
	CHECK_EQ(vq_vsg_write(c, "question", 8), 8);
	CHECK_EQ(vq_vsg_shutdown(c, VQ_VSOCK_SHUTDOWN_SEND), 0);
	fx_settle(&f);
	CHECK_EQ(read(hfd, b, sizeof(b)), 8);
	CHECK_EQ(read(hfd, b, sizeof(b)), 0);           /* EOF */
	CHECK_EQ(vq_vsock_conn_count(f.dev), 1);        /* half open */
	CHECK_EQ(write(hfd, "answer", 6), 6);
	fx_settle(&f);
	CHECK_EQ(vq_vsg_read(c, b, sizeof(b)), 6);
	CHECK(memcmp(b, "answer", 6) == 0);
	CHECK_EQ(vq_vsg_peer_shutdown(c) & VQ_VSOCK_SHUTDOWN_SEND, 0);
	shutdown(hfd, SHUT_WR);
	fx_settle(&f);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_CLOSED);          /* RST after both ends */
	CHECK_EQ(vq_vsock_conn_count(f.dev), 0);
	CHECK_EQ(vq_vsock_stats(f.dev)->conns_closed, 1);
	fx_fini(&f);
}

static void vsock_5_10_6_5_host_eof_then_guest_still_sends(void)
{
	struct fx f;
	struct vq_vsg_conn *c;
	char b[64];
	int hfd;

	fx_init(&f, &dflt);
	fx_listen(&f, 82);
	c = fx_connect(&f, 82, VQ_VSOCK_TYPE_STREAM);
	wait_state(&f, c);
	hfd = fx_host(&f, 0);
	CHECK_EQ(write(hfd, "bye", 3), 3);
	shutdown(hfd, SHUT_WR);
	fx_settle(&f);
	CHECK_EQ(vq_vsg_read(c, b, sizeof(b)), 3);
	CHECK(vq_vsg_eof(c));
	CHECK_EQ(vq_vsg_peer_shutdown(c), VQ_VSOCK_SHUTDOWN_SEND);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_ESTABLISHED);
	CHECK_EQ(vq_vsg_write(c, "late", 4), 4);
	fx_settle(&f);
	CHECK_EQ(read(hfd, b, sizeof(b)), 4);
	/* guest closes like Linux: SHUTDOWN both -> device RST */
	CHECK_EQ(vq_vsg_shutdown(c, 3), 0);
	fx_settle(&f);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_CLOSED);
	CHECK_EQ(vq_vsock_conn_count(f.dev), 0);
	CHECK_EQ(read(hfd, b, sizeof(b)), 0);
	fx_fini(&f);
}

/* Guest RST closes the host socket at once. */
static void vsock_5_10_6_5_guest_rst_closes_host_socket(void)
{
	struct fx f;
	struct vq_vsg_conn *c;
	char b[8];

	fx_init(&f, &dflt);
	fx_listen(&f, 83);
	c = fx_connect(&f, 83, VQ_VSOCK_TYPE_STREAM);
	wait_state(&f, c);
	vq_vsg_reset(c);
	fx_settle(&f);
	CHECK_EQ(read(fx_host(&f, 0), b, sizeof(b)), 0);
	CHECK_EQ(vq_vsock_conn_count(f.dev), 0);
	CHECK_EQ(vq_vsock_stats(f.dev)->rst_recv, 1);
	fx_fini(&f);
}

/* Many connections at once, interleaved, keyed by (local, peer) port: the
 * same host port from different guest ports, different host ports. */
static void vsock_many_connections_interleaved(void)
{
	enum { N = 40, BYTES = 50000 };
	static uint8_t buf[4096];
	struct fx f;
	struct vq_vsg_conn *c[N];
	uint64_t sent[N] = { 0 }, got[N] = { 0 }, i;
	unsigned k, done = 0;
	int rounds = 0;

	fx_init(&f, &dflt);
	fx_listen(&f, 90);
	fx_listen(&f, 91);
	for (k = 0; k < N; k++)
		c[k] = fx_connect(&f, 90 + k % 2, VQ_VSOCK_TYPE_STREAM);
	fx_settle(&f);
	CHECK_EQ(f.nhost, N);
	CHECK_EQ(vq_vsock_conn_count(f.dev), N);
	while (done < N) {
		done = 0;
		for (k = 0; k < N; k++) {
			uint32_t n = sizeof(buf);
			long w;

			if (sent[k] < BYTES) {
				if (n > BYTES - sent[k])
					n = (uint32_t)(BYTES - sent[k]);
				for (i = 0; i < n; i++)
					buf[i] = fx_byte(k, sent[k] + i);
				w = vq_vsg_write(c[k], buf, n);
				CHECK(w >= 0);
				sent[k] += (uint64_t)w;
			}
		}
		fx_round(&f);
		/* host ends are in connect order: map back through the
		 * guest's ports (fx_host order == REQUEST order == k) */
		for (k = 0; k < N; k++) {
			ssize_t r;

			while ((r = read(fx_host(&f, k), buf, sizeof(buf))) > 0) {
				for (i = 0; i < (uint64_t)r; i++)
					CHECK_EQ(buf[i], fx_byte(k, got[k] + i));
				got[k] += (uint64_t)r;
			}
			done += got[k] == BYTES;
		}
		CHECK(++rounds < 100000);
	}
	fx_fini(&f);
}

/* The RX path publishes used entries every used_batch buffers (1: each on
 * its own, the behaviour before the batching patch). */
static void rx_used_batch(uint32_t batch, uint64_t want_flushes)
{
	struct fx_opts o = { .used_batch = batch, .rx_buf_size = 256 };
	static uint8_t buf[4096];
	struct fx f;
	struct vq_vsg_conn *c;
	uint64_t fl;
	int r;

	fx_init(&f, &o);
	fx_listen(&f, 84);
	c = fx_connect(&f, 84, VQ_VSOCK_TYPE_STREAM);
	wait_state(&f, c);
	fx_settle(&f);
	memset(buf, 1, sizeof(buf));
	CHECK_EQ(write(fx_host(&f, 0), buf, sizeof(buf)), (ssize_t)sizeof(buf));
	CHECK(vq_vsock_process_host(f.dev) >= 1);
	fl = vq_vsock_stats(f.dev)->rx_flushes;
	r = vq_vsock_process_rx(f.dev, 256);
	CHECK_EQ(r, 16);                /* 4096 / 256 */
	CHECK_EQ(vq_vsock_stats(f.dev)->rx_flushes - fl, want_flushes);
	fx_settle(&f);
	CHECK_EQ(vq_vsg_read(c, buf, sizeof(buf)), 4096);
	fx_fini(&f);
}

static void rx_used_batch_1_each_alone(void)
{
	rx_used_batch(1, 16);
}

static void rx_used_batch_8_in_bursts(void)
{
	rx_used_batch(8, 2);
}

static void rx_used_batch_5_tail_flushed(void)
{
	rx_used_batch(5, 4);            /* 5+5+5+1 */
}

/* 5.10.6.7: the transport reset event reaches the guest through the event
 * queue; without one (QEMU keeps it) the call says so. */
static void vsock_5_10_6_7_transport_reset_event(void)
{
	struct fx_opts o = { .no_ev = true };
	struct fx f;
	struct vq_vsg_conn *c;

	fx_init(&f, &dflt);
	fx_listen(&f, 85);
	c = fx_connect(&f, 85, VQ_VSOCK_TYPE_STREAM);
	wait_state(&f, c);
	CHECK_EQ(vq_vsock_reset_event(f.dev), 1);
	fx_settle(&f);
	CHECK_EQ(vq_vsg_stats(f.g)->resets, 1);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_CLOSED);
	CHECK_EQ(vq_vsock_stats(f.dev)->reset_events, 1);
	fx_fini(&f);

	fx_init(&f, &o);
	CHECK_EQ(vq_vsock_reset_event(f.dev), -ENODEV);
	fx_fini(&f);
}

/* A device stop (reset) closes every host socket. */
static void vsock_stop_closes_host_sockets(void)
{
	struct fx f;
	struct vq_vsg_conn *c;
	char b[8];

	fx_init(&f, &dflt);
	fx_listen(&f, 86);
	c = fx_connect(&f, 86, VQ_VSOCK_TYPE_STREAM);
	wait_state(&f, c);
	vq_vsock_stop(f.dev);
	CHECK_EQ(read(fx_host(&f, 0), b, sizeof(b)), 0);
	CHECK_EQ(vq_vsock_conn_count(f.dev), 0);
	CHECK_EQ(vq_vsock_process_tx(f.dev, 1), -ENODEV);
	fx_fini(&f);
}

/* Host -> guest (issue 26): one readv fills many guest buffers.  128 KiB
 * into 4 KiB buffers is 32 full packets (each hdr.len what landed in
 * it), read in a handful of system calls as the reads learn the stream
 * is long, not one per buffer. */
static void rx_one_read_fills_many_buffers(void)
{
	static uint8_t buf[128 << 10], got[128 << 10];
	struct fx f;
	struct vq_vsg_conn *c;
	uint64_t reads, pkts;

	fx_init(&f, &dflt);
	fx_listen(&f, 87);
	c = fx_connect(&f, 87, VQ_VSOCK_TYPE_STREAM);
	wait_state(&f, c);
	fx_settle(&f);
	for (unsigned i = 0; i < sizeof(buf); i++)
		buf[i] = fx_byte(87, i);
	reads = vq_vsock_stats(f.dev)->host_read_calls;
	pkts = vq_vsg_stats(f.g)->rx_pkts;
	CHECK_EQ(write(fx_host(&f, 0), buf, sizeof(buf)), (ssize_t)sizeof(buf));
	fx_settle(&f);
	CHECK_EQ(vq_vsg_read(c, got, sizeof(got)), sizeof(got));
	CHECK(memcmp(buf, got, sizeof(buf)) == 0);
	CHECK_EQ(vq_vsg_stats(f.g)->rx_pkts - pkts, 32);
	reads = vq_vsock_stats(f.dev)->host_read_calls - reads;
	fprintf(stderr, "   128 KiB in 32 buffers: %" PRIu64 " reads\n", reads);
	CHECK(reads <= 8);
	fx_fini(&f);
}

/* Host -> guest: a read never takes more than the guest's credit, however
 * many buffers it could fill (5.10.6.3). */
static void rx_batch_stops_at_credit(void)
{
	static uint8_t buf[64 << 10], got[64 << 10];
	struct fx_opts o = { .guest_buf_alloc = 10000 };
	struct fx f;
	struct vq_vsg_conn *c;
	uint32_t at = 0;
	int rounds = 0;

	fx_init(&f, &o);
	fx_listen(&f, 88);
	c = fx_connect(&f, 88, VQ_VSOCK_TYPE_STREAM);
	wait_state(&f, c);
	for (unsigned i = 0; i < sizeof(buf); i++)
		buf[i] = fx_byte(88, i);
	CHECK_EQ(write(fx_host(&f, 0), buf, sizeof(buf)), (ssize_t)sizeof(buf));
	fx_settle(&f);
	CHECK_EQ(vq_vsg_readable(c), 10000);    /* the window, not a byte more */
	while (at < sizeof(got)) {
		CHECK(++rounds < 1000);
		at += vq_vsg_read(c, got + at, sizeof(got) - at);
		CHECK(vq_vsg_readable(c) <= 10000);
		fx_settle(&f);
	}
	CHECK(memcmp(buf, got, sizeof(buf)) == 0);
	fx_fini(&f);
}

/* Guest -> host (issue 26): the payloads of one connection's packets in a
 * burst go out in one writev; packets of two connections interleaved
 * keep each stream's order. */
static void tx_one_write_per_burst(void)
{
	static uint8_t buf[64 << 10], got[64 << 10];
	struct fx_opts o = { .tx_pkt_max = 2048 };
	struct fx f;
	struct vq_vsg_conn *a, *b;
	uint64_t writes;

	fx_init(&f, &o);
	fx_listen(&f, 89);
	a = fx_connect(&f, 89, VQ_VSOCK_TYPE_STREAM);
	b = fx_connect(&f, 89, VQ_VSOCK_TYPE_STREAM);
	wait_state(&f, a);
	wait_state(&f, b);
	fx_settle(&f);
	for (unsigned i = 0; i < sizeof(buf); i++)
		buf[i] = fx_byte(89, i);
	writes = vq_vsock_stats(f.dev)->host_write_calls;
	CHECK_EQ(vq_vsg_write(a, buf, sizeof(buf)), (long)sizeof(buf));
	CHECK_EQ(vq_vsock_process_tx(f.dev, 256), 32);
	CHECK_EQ(vq_vsock_stats(f.dev)->host_write_calls - writes, 1);
	CHECK_EQ(read(fx_host(&f, 0), got, sizeof(got)), (ssize_t)sizeof(got));
	CHECK(memcmp(buf, got, sizeof(buf)) == 0);
	/* a, b, a, b: each switch writes what was gathered */
	for (unsigned i = 0; i < 4; i++)
		CHECK_EQ(vq_vsg_write(i % 2 ? b : a, buf + i * 2048, 2048), 2048);
	writes = vq_vsock_stats(f.dev)->host_write_calls;
	CHECK_EQ(vq_vsock_process_tx(f.dev, 256), 4);
	CHECK_EQ(vq_vsock_stats(f.dev)->host_write_calls - writes, 4);
	CHECK_EQ(read(fx_host(&f, 0), got, sizeof(got)), 4096);
	CHECK(memcmp(got, buf, 2048) == 0 && memcmp(got + 2048, buf + 4096, 2048) == 0);
	CHECK_EQ(read(fx_host(&f, 1), got, sizeof(got)), 4096);
	CHECK(memcmp(got, buf + 2048, 2048) == 0 && memcmp(got + 2048, buf + 6144, 2048) == 0);
	fx_fini(&f);
}

/* Guest -> host: a gathered write the socket takes only in part keeps the
 * rest in order, forwards (fwd_cnt) only what reached the socket, so the
 * guest's credit stays exact, and loses nothing. */
static void tx_partial_write_keeps_order_and_credit(void)
{
	static uint8_t buf[64 << 10], got[64 << 10];
	struct fx_opts o = { .tx_pkt_max = 2048, .host_sndbuf = 16384,
			     .dev_buf_alloc = 64 << 10 };
	struct fx f;
	struct vq_vsg_conn *c;
	int hfd, queued = 0, rounds = 0;
	uint32_t at = 0;

	fx_init(&f, &o);
	fx_listen(&f, 90);
	c = fx_connect(&f, 90, VQ_VSOCK_TYPE_STREAM);
	wait_state(&f, c);
	fx_settle(&f);
	hfd = fx_host(&f, 0);
	for (unsigned i = 0; i < sizeof(buf); i++)
		buf[i] = fx_byte(90, i);
	CHECK_EQ(vq_vsg_credit(c), sizeof(buf));
	CHECK_EQ(vq_vsg_write(c, buf, sizeof(buf)), (long)sizeof(buf));
	CHECK_EQ(vq_vsock_process_tx(f.dev, 256), 32);
	CHECK(vq_vsock_stats(f.dev)->host_stalls >= 1);
	fx_settle(&f);
	CHECK_EQ(ioctl(hfd, FIONREAD, &queued), 0);
	CHECK(queued > 0 && queued < (int)sizeof(buf));
	/* the guest may send again only what reached the host socket */
	CHECK(vq_vsg_credit(c) <= (uint32_t)queued);
	while (at < sizeof(got)) {
		ssize_t r = read(hfd, got + at, sizeof(got) - at);

		CHECK(++rounds < 10000);
		if (r > 0)
			at += (uint32_t)r;
		fx_settle(&f);
	}
	CHECK(memcmp(buf, got, sizeof(buf)) == 0);
	/* forwarded: the window is open again (the device tells the guest
	 * when its view of the window falls under half) */
	CHECK(vq_vsg_credit(c) >= sizeof(buf) / 2);
	fx_fini(&f);
}

/* Host -> guest, many streams (issue 26): while other connections wait,
 * a turn offers the whole batch and so drains what the socket holds.
 * Two connections that trickled a moment ago (their reads learned "one
 * buffer") now hold 32 KiB each: one read each, not 1, 2, 4, ... per
 * turn.  Sized by history, a stream that had been slow got about half
 * its share of 256 (measured in f4eb3ad). */
static void rx_turn_drains_socket_while_others_wait(void)
{
	static uint8_t buf[32 << 10], got[32 << 10];
	struct fx f;
	struct vq_vsg_conn *c[2];
	uint64_t reads;
	unsigned i;

	fx_init(&f, &dflt);
	fx_listen(&f, 91);
	for (i = 0; i < 2; i++) {
		c[i] = fx_connect(&f, 91, VQ_VSOCK_TYPE_STREAM);
		wait_state(&f, c[i]);
	}
	fx_settle(&f);
	for (i = 0; i < 2; i++) {
		CHECK_EQ(write(fx_host(&f, i), "x", 1), 1);
		fx_settle(&f);
		CHECK_EQ(vq_vsg_read(c[i], got, sizeof(got)), 1);
	}
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = fx_byte(91, i);
	for (i = 0; i < 2; i++)
		CHECK_EQ(write(fx_host(&f, i), buf, sizeof(buf)), (ssize_t)sizeof(buf));
	reads = vq_vsock_stats(f.dev)->host_read_calls;
	CHECK(vq_vsock_process_host(f.dev) >= 0);
	CHECK_EQ(vq_vsock_process_rx(f.dev, 256), 16);
	reads = vq_vsock_stats(f.dev)->host_read_calls - reads;
	fprintf(stderr, "   2 x 32 KiB after a trickle: %" PRIu64 " reads\n", reads);
	CHECK_EQ(reads, 2);
	fx_settle(&f);
	for (i = 0; i < 2; i++) {
		CHECK_EQ(vq_vsg_read(c[i], got, sizeof(got)), sizeof(got));
		CHECK(memcmp(buf, got, sizeof(buf)) == 0);
	}
	fx_fini(&f);
}

/*
 * Credit counts bytes, and Linux since 6.12.92 also counts packets: it
 * resets a connection once (its queued packets + 1) * SKB_TRUESIZE(0)
 * (576 B) would pass its buf_alloc (libkrun #795).  The host writes a
 * byte at a time while the guest's reader is stalled, then the reader
 * reads: the device sends no more packets than the guest's count takes,
 * so no reset, and asks for the guest's credit (the guest says nothing
 * while its free bytes are plenty) until every byte is through, in order.
 */
static void vsock_packet_count_small_writes_stalled_reader(void)
{
	struct fx_opts o = { .guest_pkt_truesize = 576, .guest_buf_alloc = 64 * 1024 };
	const uint64_t seed = 7;
	uint64_t total = 0;
	struct vq_vsg_conn *c;
	int hfd;

	signal(SIGPIPE, SIG_IGN);       /* a reset shows in the counters */
	fx_init(&f_pc, &o);
	fx_listen(&f_pc, 1300);
	c = fx_connect(&f_pc, 1300, VQ_VSOCK_TYPE_STREAM);
	wait_state(&f_pc, c);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_ESTABLISHED);
	hfd = fx_host(&f_pc, 0);
	/* as many one-byte writes as the host socket takes (each costs it
	 * far more than a byte), the device's rounds in between */
	for (int i = 0; i < 3000; i++) {
		uint8_t b = fx_byte(seed, total);

		if (write(hfd, &b, 1) != 1)
			break;
		total++;
		fx_round(&f_pc);
	}
	fx_settle(&f_pc);
	CHECK_EQ(vq_vsg_stats(f_pc.g)->pkt_resets, 0);
	CHECK(total > 200);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_ESTABLISHED);
	CHECK(vq_vsock_stats(f_pc.dev)->pkts_held > 0);
	fx_read_check(c, seed, total, fx_turn, &f_pc);
	fprintf(stderr, "   %llu one-byte writes, %llu credit requests, held %llu times\n",
		(unsigned long long)total,
		(unsigned long long)vq_vsock_stats(f_pc.dev)->credit_requests_sent,
		(unsigned long long)vq_vsock_stats(f_pc.dev)->pkts_held);
	CHECK_EQ(vq_vsg_stats(f_pc.g)->pkt_resets, 0);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_ESTABLISHED);
	fx_fini(&f_pc);
}

static void run_all(void)
{
	RUN(vsock_5_10_6_5_request_to_no_listener_gets_rst);
	RUN(vsock_guest_connects_host_stream_both_ways);
	RUN(hybrid_connect_keeps_payload_behind_line);
	RUN(hybrid_connect_bad_line_or_no_guest_listener_closes);
	RUN(hybrid_connect_and_request_refused_by_policy);
	RUN(vsock_5_10_6_3_device_respects_guest_credit);
	RUN(backpressure_slow_host_bounded_no_loss);
	RUN(vsock_5_10_6_5_half_close_both_directions);
	RUN(vsock_5_10_6_5_host_eof_then_guest_still_sends);
	RUN(vsock_5_10_6_5_guest_rst_closes_host_socket);
	RUN(vsock_many_connections_interleaved);
	RUN(rx_used_batch_1_each_alone);
	RUN(rx_used_batch_8_in_bursts);
	RUN(rx_used_batch_5_tail_flushed);
	RUN(vsock_5_10_6_7_transport_reset_event);
	RUN(vsock_stop_closes_host_sockets);
	RUN(rx_one_read_fills_many_buffers);
	RUN(rx_batch_stops_at_credit);
	RUN(rx_turn_drains_socket_while_others_wait);
	RUN(tx_one_write_per_burst);
	RUN(tx_partial_write_keeps_order_and_credit);
	RUN(vsock_packet_count_small_writes_stalled_reader);
}

/* The config's reserved words must be zero: an old library refuses a
 * field a newer caller set rather than ignore it (the ABI growth rule). */
static void vsock_config_reserved_must_be_zero(void)
{
	struct fx dummy = { 0 };
	struct vq_vsock_config dc = { .guest_cid = FX_CID,
				      .host_connect = fx_host_connect, .arg = &dummy };
	struct vq_vsock *v = (struct vq_vsock *)1;

	for (unsigned i = 0; i < FX_ARRAY_SIZE(dc.reserved); i++) {
		dc.reserved[i] = 1u << i;
		CHECK_EQ(vq_vsock_new(&dc, &v), -EINVAL);
		CHECK(v == NULL);
		dc.reserved[i] = 0;
	}
	dc.guest_cid = 2;
	CHECK_EQ(vq_vsock_new(&dc, &v), -EINVAL);
	dc.guest_cid = FX_CID;
	dc.host_connect = NULL;
	CHECK_EQ(vq_vsock_new(&dc, &v), -EINVAL);
	dc.host_connect = fx_host_connect;
	CHECK_EQ(vq_vsock_new(&dc, &v), 0);
	CHECK_EQ(vq_vsock_last_bad(v)[0], '\0');
	vq_vsock_free(v);
}

int main(void)
{
	RUN(vsock_config_reserved_must_be_zero);
	RUN(vsock_5_10_6_header_is_44_bytes_le);
	RUN(hybrid_connect_line_parse);
	fprintf(stderr, "== split\n");
	fx_features = 0;
	run_all();
	fprintf(stderr, "== packed\n");
	fx_features = VQ_BIT(VQ_F_RING_PACKED);
	run_all();
	/* IN_ORDER: RX buffers popped and given back (nothing to send) must
	 * keep the pop order the device fills in. */
	fprintf(stderr, "== split in-order\n");
	fx_features = VQ_BIT(VQ_F_IN_ORDER);
	run_all();
	fprintf(stderr, "== packed in-order\n");
	fx_features = VQ_BIT(VQ_F_RING_PACKED) | VQ_BIT(VQ_F_IN_ORDER);
	run_all();
	return 0;
}
