// SPDX-License-Identifier: MIT
/*
 * The userspace virtio-net driver (virtq/guest/net.h) with the test playing
 * the device on the device side of its receiveq and transmitq, honest (our
 * net layer) or not (raw writes into the driver's buffers): config checks,
 * the buffers it posts, the frames it sends (5.1.6.2) and the whole frames
 * it hands back (5.1.6.4, num_buffers), and the broken state a lying device
 * leads to.  Every layout.
 */
#include <virtq/guest/net.h>

#include "net_layouts.h"
#include "ring_pair.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define MRG VQ_BIT(VQ_NET_F_MRG_RXBUF)
#define NUM 16u

/* Ring 0 is the receiveq, ring 1 the transmitq, in one guest memory. */
struct gx {
	struct ring_pair p;
	struct vq_drv *drv[2];
	struct vq_dev *dev[2];
	struct vq_netg_config c;        /* what vq_netg_new gets */
	struct vq_netg *g;
	unsigned kicks[2];
	int kick_ret;                   /* what the kick callback returns */
};

static int gx_kick(void *arg, enum vq_net_role q)
{
	struct gx *x = arg;

	x->kicks[q]++;
	return x->kick_ret;
}

static void gx_init(struct gx *x, uint64_t features)
{
	int packed = !!(features & VQ_BIT(VQ_F_RING_PACKED));
	uint64_t off[3], size, gpa;
	struct vq_ring_addr ra;

	memset(x, 0, sizeof(*x));
	pair_init(&x->p, features | VQ_BIT(VQ_F_EVENT_IDX), NUM, 1, 1);
	x->drv[0] = x->p.drv;
	x->dev[0] = x->p.dev;
	size = vq_ring_layout(x->p.features, NUM, off);
	gpa = pair_alloc(&x->p, size);
	ra = (struct vq_ring_addr){ pair_hva(&x->p, gpa + off[0]),
				    pair_hva(&x->p, gpa + off[1]),
				    pair_hva(&x->p, gpa + off[2]) };
	CHECK_EQ(vq_drv_new(&(struct vq_drv_config){ .features = x->p.features,
						      .num = NUM, .ring = ra }, &x->drv[1]), 0);
	CHECK_EQ(vq_dev_new(&(struct vq_dev_config){ .features = x->p.features,
		.num = NUM, .ring = ra, .mem = x->p.mem,
		.avail_idx = packed ? 0x8000 : 0, .used_idx = packed ? 0x8000 : 0 },
		&x->dev[1]), 0);
	x->c = (struct vq_netg_config){ .rx = x->drv[0], .tx = x->drv[1],
					.kick = gx_kick, .arg = x };
	x->c.rx_area.size = vq_netg_rx_area_size(0, NUM);
	x->c.rx_area.gpa = pair_alloc(&x->p, x->c.rx_area.size);
	x->c.rx_area.hva = pair_hva(&x->p, x->c.rx_area.gpa);
	x->c.tx_area.size = vq_netg_tx_area_size(0, NUM);
	x->c.tx_area.gpa = pair_alloc(&x->p, x->c.tx_area.size);
	x->c.tx_area.hva = pair_hva(&x->p, x->c.tx_area.gpa);
}

static void gx_start(struct gx *x)
{
	CHECK_EQ(vq_netg_new(&x->c, &x->g), 0);
	CHECK_EQ(vq_netg_start(x->g), 0);
}

static void gx_fini(struct gx *x)
{
	vq_netg_free(x->g);
	vq_drv_free(x->drv[1]);
	vq_dev_free(x->dev[1]);
	pair_fini(&x->p);
}

static uint8_t pat(uint32_t seq, uint32_t i)
{
	return (uint8_t)(seq * 131 + i * 7 + (i >> 8));
}

/* The device writes n bytes of buf into the next receive buffer and says
 * it wrote them. */
static void dev_write(struct gx *x, const uint8_t *buf, uint32_t n)
{
	struct iovec iov[4];
	struct vq_chain ch = { .iov = iov, .iov_max = 4 };

	CHECK_EQ(vq_dev_pop(x->dev[0], &ch), 1);
	CHECK_EQ(ch.nout, 0);
	CHECK(n <= iov[0].iov_len);
	memcpy(iov[0].iov_base, buf, n);
	CHECK(vq_dev_push(x->dev[0], &ch, n) >= 0);
}

/* A 12-byte header naming nb buffers, then len - 12 bytes of pattern. */
static void hdr_frame(uint8_t *b, uint32_t len, uint16_t nb, uint32_t seq)
{
	struct vq_net_hdr h = { .num_buffers = nb };

	vq_net_hdr_encode(b, 12, &h);
	for (uint32_t i = 12; i < len; i++)
		b[i] = pat(seq, i - 12);
}

/* vq_netg_new refuses what it cannot honour, and a reserved word that is
 * not zero, creating nothing. */
static void netg_config_checked(uint64_t lf)
{
	struct gx x;
	struct vq_netg_config c;
	struct vq_netg *g = (struct vq_netg *)1;

	gx_init(&x, lf | MRG);
#define REFUSED(change) do {                                                  \
		c = x.c;                                                      \
		change;                                                       \
		CHECK_EQ(vq_netg_new(&c, &g), -EINVAL);                       \
		CHECK(g == NULL);                                             \
	} while (0)
	REFUSED((c.rx = NULL, c.tx = NULL));
	REFUSED(c.rx_area.hva = NULL);
	REFUSED(c.rx_area.size = VQ_NETG_RX_BUF_DEFAULT - 1);
	REFUSED(c.tx_area.size = 100);
	REFUSED(c.rx_buf_size = 12);
	REFUSED(c.tx_frame_max = VQ_NET_MAX_FRAME + 1);
	for (unsigned i = 0; i < NELEM(c.reserved); i++)
		REFUSED(c.reserved[i] = 1);
#undef REFUSED
	/* one ring is enough, and the other's area is not looked at */
	c = x.c;
	c.rx = NULL;
	c.rx_area = (struct vq_netg_area){ 0 };
	CHECK_EQ(vq_netg_new(&c, &g), 0);
	CHECK_EQ(vq_netg_start(g), 0);
	CHECK_EQ(vq_netg_rx_burst(g, NULL, 1), -EINVAL);
	vq_netg_free(g);
	CHECK_EQ(vq_netg_rx_area_size(0, 4), 4 * 2048);
	CHECK_EQ(vq_netg_rx_area_size(1000, 4), 4 * 1024);
	CHECK_EQ(vq_netg_tx_area_size(64, 4), 4 * 128);
	gx_start(&x);
	CHECK_EQ(vq_netg_error(x.g), 0);
	CHECK_EQ(vq_netg_error_msg(x.g)[0], '\0');
	CHECK_EQ(vq_netg_hdr_len(x.g), 12);
	gx_fini(&x);
}

/* 5.1.6.3: every receive buffer is posted at start, one writable part of
 * rx_buf_size bytes, as many as the area holds (at most the queue size),
 * and the receiveq is kicked once. */
static void netg_5_1_6_3_posts_rx_buffers(uint64_t lf)
{
	struct gx x;
	struct iovec iov[4];
	struct vq_chain ch = { .iov = iov, .iov_max = 4 };
	unsigned n = 0;

	gx_init(&x, lf | MRG);
	x.c.rx_buf_size = 1000;
	x.c.rx_area.size = 10 * 1024 + 5;       /* rounded up to 64 */
	gx_start(&x);
	CHECK_EQ(x.kicks[VQ_NET_RX], 1);
	CHECK_EQ(x.kicks[VQ_NET_TX], 0);
	while (vq_dev_pop(x.dev[0], &ch) == 1) {
		CHECK_EQ(ch.nout, 0);
		CHECK_EQ(ch.in_len, 1000);
		CHECK_EQ((uint8_t *)iov[0].iov_base - x.c.rx_area.hva, n * 1024);
		n++;
	}
	CHECK_EQ(n, 10);
	gx_fini(&x);
}

/* 5.1.6.2: a posted frame is one readable buffer, its header first (all
 * zero, or as given), then the bytes written into the reserved slot; the
 * slot is free again once the device used it, and is the next reserved. */
static void netg_5_1_6_2_tx_frames_as_written(uint64_t lf)
{
	struct gx x;
	struct iovec iov[4];
	struct vq_chain ch = { .iov = iov, .iov_max = 4 };
	struct vq_net_hdr h[3] = { { 0 }, { .flags = VQ_NET_HDR_F_NEEDS_CSUM,
		.csum_start = 34, .csum_offset = 6 }, { .gso_type = VQ_NET_HDR_GSO_TCPV4,
		.gso_size = 1448, .hdr_len = 54 } };
	uint32_t len[3] = { 60, 1514, 14 };
	uint8_t *fr[NUM + 1], *again[1];
	struct vq_net_hdr got;

	gx_init(&x, lf);
	gx_start(&x);
	CHECK_EQ(vq_netg_tx_free(x.g), NUM);
	CHECK_EQ(vq_netg_tx_reserve(x.g, fr, NUM + 1), NUM);
	/* slots in address order, the frame behind its header room */
	for (unsigned i = 0; i < NUM; i++)
		CHECK_EQ(fr[i] - x.c.tx_area.hva, i * 1536 + 12);
	for (unsigned i = 0; i < 3; i++)
		for (uint32_t k = 0; k < len[i]; k++)
			fr[i][k] = pat(i, k);
	/* more than tx_frame_max: nothing posted */
	len[1]++;
	CHECK_EQ(vq_netg_tx_post(x.g, len, h, 3), -EINVAL);
	len[1]--;
	CHECK_EQ(vq_netg_tx_post(x.g, len, h, 3), 3);
	CHECK_EQ(x.kicks[VQ_NET_TX], 1);
	CHECK_EQ(vq_netg_tx_free(x.g), NUM - 3);
	CHECK_EQ(vq_netg_tx_inflight(x.g), 3);
	for (unsigned i = 0; i < 3; i++) {
		const uint8_t *b;

		CHECK_EQ(vq_dev_pop(x.dev[1], &ch), 1);
		CHECK_EQ(ch.nin, 0);
		CHECK_EQ(ch.nout, 1);
		CHECK_EQ(ch.out_len, 12 + len[i]);
		b = iov[0].iov_base;
		vq_net_hdr_decode(b, 12, &got);
		CHECK(!memcmp(&got, &h[i], sizeof(got)));
		for (uint32_t k = 0; k < len[i]; k++)
			CHECK_EQ(b[12 + k], pat(i, k));
		CHECK(vq_dev_push(x.dev[1], &ch, 0) >= 0);
	}
	/* hdr NULL: zero headers */
	memset((uint8_t *)x.c.tx_area.hva + 3 * 1536, 0xee, 12);
	CHECK_EQ(vq_netg_tx_reserve(x.g, fr, 1), 1);
	CHECK_EQ(vq_netg_tx_post(x.g, len, NULL, 1), 1);
	CHECK_EQ(vq_dev_pop(x.dev[1], &ch), 1);
	for (unsigned k = 0; k < 12; k++)
		CHECK_EQ(((uint8_t *)iov[0].iov_base)[k], 0);
	CHECK(vq_dev_push(x.dev[1], &ch, 0) >= 0);
	/* at most max back per call; the slot freed last is reserved first */
	CHECK_EQ(vq_netg_tx_reap(x.g, 3), 3);
	CHECK_EQ(vq_netg_tx_reap(x.g, 0), 1);
	CHECK_EQ(vq_netg_tx_reap(x.g, 0), 0);
	CHECK_EQ(vq_netg_tx_inflight(x.g), 0);
	CHECK_EQ(vq_netg_tx_free(x.g), NUM);
	CHECK_EQ(vq_netg_tx_reserve(x.g, again, 1), 1);
	CHECK_EQ(again[0] - x.c.tx_area.hva, 3 * 1536 + 12);
	gx_fini(&x);
}

/* A kick that fails fails the call that kicked, and does not break the
 * driver. */
static void netg_kick_error_returned(uint64_t lf)
{
	struct gx x;
	uint8_t *fr[1];
	uint32_t len = 60;

	gx_init(&x, lf);
	x.kick_ret = -EIO;
	CHECK_EQ(vq_netg_new(&x.c, &x.g), 0);
	CHECK_EQ(vq_netg_start(x.g), -EIO);
	CHECK_EQ(vq_netg_tx_reserve(x.g, fr, 1), 1);
	CHECK_EQ(vq_netg_tx_post(x.g, &len, NULL, 1), -EIO);
	CHECK_EQ(vq_netg_error(x.g), 0);
	x.kick_ret = 0;
	CHECK_EQ(vq_netg_tx_free(x.g), NUM - 1);        /* it was posted */
	gx_fini(&x);
}

/* 5.1.6.4: with MRG_RXBUF a frame comes back whole, in the num_buffers
 * buffers the net layer merged it into, its bytes exact; repost gives
 * the buffers back to the device. */
static void netg_5_1_6_4_rx_frames_whole(uint64_t lf)
{
	static uint8_t src[3][5000];
	const uint32_t size[3] = { 64, 3000, 5000 };
	struct vq_net_queue *nq;
	struct vq_netg_frame f[4];
	struct vq_net_hdr got;
	struct gx x;

	gx_init(&x, lf | MRG);
	gx_start(&x);
	CHECK_EQ(vq_net_queue_new(&(struct vq_net_queue_config){ .dev = x.dev[0],
		.role = VQ_NET_RX }, &nq), 0);
	for (unsigned i = 0; i < 3; i++) {
		struct iovec v = { src[i], size[i] };

		for (uint32_t k = 0; k < size[i]; k++)
			src[i][k] = pat(i, k);
		CHECK_EQ(vq_net_rx_deliver(nq, &v, 1, size[i], NULL), 1);
	}
	CHECK(vq_net_rx_flush(nq) > 0);
	CHECK_EQ(vq_netg_rx_burst(x.g, f, 4), 3);
	for (unsigned i = 0; i < 3; i++) {
		uint32_t at = 0;

		CHECK_EQ(f[i].len, size[i]);
		CHECK_EQ(f[i].nbufs, (size[i] + 12 + 2047) / 2048);
		vq_net_hdr_decode(f[i].buf[0].data, 12, &got);
		CHECK_EQ(got.num_buffers, f[i].nbufs);
		for (unsigned b = 0; b < f[i].nbufs; b++) {
			uint32_t skip = b ? 0 : 12;

			CHECK_EQ(f[i].buf[b].addr - x.c.rx_area.gpa,
				 f[i].buf[b].data - x.c.rx_area.hva);
			CHECK(!memcmp(f[i].buf[b].data + skip, src[i] + at,
				      f[i].buf[b].len - skip));
			at += f[i].buf[b].len - skip;
		}
		CHECK_EQ(at, size[i]);
	}
	/* 6 buffers used, 10 left; repost makes it 16 again */
	CHECK_EQ(x.kicks[VQ_NET_RX], 1);
	CHECK_EQ(vq_netg_rx_repost(x.g), 0);
	CHECK_EQ(vq_drv_outstanding(x.drv[0]), NUM);
	CHECK_EQ(vq_netg_rx_burst(x.g, f, 4), 0);
	vq_net_queue_free(nq);
	gx_fini(&x);
}

/* A frame whose rest has not been published yet is not handed out, and
 * its buffers stay taken over a repost, until the rest arrives. */
static void netg_5_1_6_4_partial_frame_waits(uint64_t lf)
{
	uint8_t b[2048];
	struct vq_netg_frame f[2];
	struct gx x;

	gx_init(&x, lf | MRG);
	gx_start(&x);
	hdr_frame(b, 64, 1, 0);
	dev_write(&x, b, 64);                   /* a whole frame */
	hdr_frame(b, 2048, 2, 1);
	dev_write(&x, b, 2048);                 /* the first half of one */
	CHECK_EQ(vq_netg_rx_burst(x.g, f, 2), 1);
	CHECK_EQ(f[0].len, 52);
	CHECK_EQ(vq_netg_rx_burst(x.g, f, 2), 0);
	CHECK_EQ(vq_netg_rx_repost(x.g), 0);
	CHECK_EQ(vq_drv_outstanding(x.drv[0]), NUM - 1);
	for (unsigned i = 0; i < 100; i++)
		b[i] = pat(1, 2036 + i);
	dev_write(&x, b, 100);                  /* its rest */
	CHECK_EQ(vq_netg_rx_burst(x.g, f, 2), 1);
	CHECK_EQ(f[0].nbufs, 2);
	CHECK_EQ(f[0].len, 2036 + 100);
	CHECK_EQ(f[0].buf[1].len, 100);
	CHECK_EQ(f[0].buf[0].data[12], pat(1, 0));
	CHECK_EQ(vq_netg_rx_repost(x.g), 0);
	CHECK_EQ(vq_drv_outstanding(x.drv[0]), NUM);
	gx_fini(&x);
}

/* Frames taken over several rx_burst calls stay valid and their buffers
 * taken until one repost gives them all back (a refill in batches, as
 * Linux's after a NAPI poll); rx_taken counts what that repost gives,
 * not the buffers of a frame still arriving (5.1.6.4). */
static void netg_5_1_6_4_rx_taken_batches_the_refill(uint64_t lf)
{
	uint8_t b[2048];
	struct vq_netg_frame f[3], more;
	struct gx x;

	gx_init(&x, lf | MRG);
	gx_start(&x);
	CHECK_EQ(vq_netg_rx_taken(x.g), 0);
	for (unsigned i = 0; i < 3; i++) {
		hdr_frame(b, 64, 1, i);
		dev_write(&x, b, 64);
		CHECK_EQ(vq_netg_rx_burst(x.g, &f[i], 1), 1);
		CHECK_EQ(vq_netg_rx_taken(x.g), i + 1);
	}
	hdr_frame(b, 2048, 2, 9);
	dev_write(&x, b, 2048);                 /* the first half of one */
	CHECK_EQ(vq_netg_rx_burst(x.g, &more, 1), 0);
	CHECK_EQ(vq_netg_rx_taken(x.g), 3);
	CHECK_EQ(vq_drv_outstanding(x.drv[0]), NUM - 4);
	for (unsigned i = 0; i < 3; i++) {
		CHECK_EQ(f[i].len, 52);
		CHECK_EQ(f[i].buf[0].data[12], pat(i, 0));
	}
	CHECK_EQ(x.kicks[VQ_NET_RX], 1);
	CHECK_EQ(vq_netg_rx_repost(x.g), 0);
	CHECK_EQ(vq_netg_rx_taken(x.g), 0);
	CHECK_EQ(vq_drv_outstanding(x.drv[0]), NUM - 1);
	gx_fini(&x);
}

/* rx_burst takes only the buffers of the frames asked for: the rest stay
 * on the ring for the next call. */
static void netg_rx_burst_takes_what_it_returns(uint64_t lf)
{
	uint8_t b[2048];
	struct vq_netg_frame f[3];
	struct gx x;

	gx_init(&x, lf | MRG);
	gx_start(&x);
	for (unsigned i = 0; i < 3; i++) {
		hdr_frame(b, 12 + 60 + i, 1, i);
		dev_write(&x, b, 12 + 60 + i);
	}
	CHECK_EQ(vq_netg_rx_burst(x.g, f, 2), 2);
	CHECK_EQ(f[1].len, 61);
	CHECK_EQ(vq_drv_has_used(x.drv[0]), true);
	CHECK_EQ(vq_netg_rx_burst(x.g, f + 2, 1), 1);
	CHECK_EQ(f[2].len, 62);
	/* frames of both calls stay valid until the repost */
	CHECK_EQ(f[0].buf[0].data[12], pat(0, 0));
	CHECK_EQ(f[2].buf[0].data[12], pat(2, 0));
	gx_fini(&x);
}

/* 5.1.6.3 / 2.7.13 (buffers used in the order made available): the buffer
 * vq_netg_rx_next names is where the next frame lands, through reposts
 * one at a time and in batches and around the ring, as a device using
 * them in order fills them; no receive queue, no guess. */
static void netg_5_1_6_3_rx_next_names_the_next_buffer(uint64_t lf)
{
	uint8_t b[128];
	struct vq_netg_frame f;
	struct vq_netg *g;
	struct vq_netg_config c;
	struct gx x;

	gx_init(&x, lf);
	gx_start(&x);
	CHECK(vq_netg_rx_next(x.g) == x.c.rx_area.hva);
	for (uint32_t i = 0; i < 5 * NUM; i++) {
		const uint8_t *next = vq_netg_rx_next(x.g);

		hdr_frame(b, 64, 1, i);
		dev_write(&x, b, 64);
		CHECK_EQ(vq_netg_rx_burst(x.g, &f, 1), 1);
		CHECK(f.buf[0].data == next);
		CHECK_EQ(f.buf[0].data[12], pat(i, 0));
		/* the first laps one at a time, then in batches of 4 */
		if (i < 2 * NUM || vq_netg_rx_taken(x.g) == 4)
			CHECK_EQ(vq_netg_rx_repost(x.g), 0);
	}
	c = x.c;
	c.rx = NULL;
	CHECK_EQ(vq_netg_new(&c, &g), 0);
	CHECK(vq_netg_rx_next(g) == NULL);
	vq_netg_free(g);
	gx_fini(&x);
}

/* Without MRG_RXBUF a frame is one buffer whatever num_buffers says. */
static void netg_5_1_6_4_num_buffers_ignored_without_mrg(uint64_t lf)
{
	uint8_t b[2048];
	struct vq_netg_frame f[2];
	struct gx x;

	gx_init(&x, lf);
	gx_start(&x);
	hdr_frame(b, 100, 7, 0);
	dev_write(&x, b, 100);
	hdr_frame(b, 100, 0, 1);
	dev_write(&x, b, 100);
	CHECK_EQ(vq_netg_rx_burst(x.g, f, 2), 2);
	CHECK_EQ(f[0].nbufs, 1);
	CHECK_EQ(f[1].len, 88);
	gx_fini(&x);
}

/* A device that lies breaks the driver: the -errno, the rule first in the
 * message, and every later call fails fast with it. */
static void expect_broken(struct gx *x, const char *what)
{
	struct vq_netg_frame f[2];
	uint8_t *fr[1];
	uint32_t len = 60;

	CHECK_EQ(vq_netg_rx_burst(x->g, f, 2), -EPROTO);
	CHECK_EQ(vq_netg_error(x->g), -EPROTO);
	CHECK_RULE_FIRST(vq_netg_error_msg(x->g));
	CHECK(strstr(vq_netg_error_msg(x->g), what));
	CHECK_EQ(vq_netg_rx_burst(x->g, f, 2), -EPROTO);
	CHECK_EQ(vq_netg_rx_repost(x->g), -EPROTO);
	CHECK_EQ(vq_netg_tx_reserve(x->g, fr, 1), -EPROTO);
	CHECK_EQ(vq_netg_tx_post(x->g, &len, NULL, 1), -EPROTO);
	CHECK_EQ(vq_netg_tx_reap(x->g, 0), -EPROTO);
	CHECK_EQ(vq_netg_start(x->g), -EPROTO);
}

/* A first buffer of len bytes whose header names nb buffers. */
static void hostile_first_buffer(uint64_t lf, uint32_t len, uint16_t nb, const char *what)
{
	uint8_t b[2048] = { 0 };
	struct gx x;

	gx_init(&x, lf | MRG);
	gx_start(&x);
	if (len >= 12)
		hdr_frame(b, len, nb, 0);
	dev_write(&x, b, len);
	expect_broken(&x, what);
	gx_fini(&x);
}

static void netg_hostile_short_first_buffer_breaks(uint64_t lf)
{
	hostile_first_buffer(lf, 11, 1, "shorter than the 12-byte header");
}

static void netg_hostile_num_buffers_zero_breaks(uint64_t lf)
{
	hostile_first_buffer(lf, 64, 0, "num_buffers 0");
}

/* A frame of more buffers than were ever posted would never end. */
static void netg_hostile_num_buffers_beyond_posted_breaks(uint64_t lf)
{
	hostile_first_buffer(lf, 64, NUM + 1, "num_buffers 17");
}

/* A ring that breaks breaks the driver, saying which queue: here a split
 * used entry of a length beyond the buffer (2.7.8.2), forged. */
static void netg_hostile_ring_error_names_queue(void)
{
	struct vq_netg_frame f[1];
	struct vq_used *u;
	struct gx x;

	gx_init(&x, 0);
	gx_start(&x);
	u = x.p.ring.device;
	u->ring[0].id = vq_le32(0);
	u->ring[0].len = vq_le32(4096);
	__atomic_store_n(&u->idx, vq_le16(1), __ATOMIC_RELEASE);
	CHECK(vq_netg_rx_burst(x.g, f, 1) < 0);
	CHECK(vq_netg_error(x.g) < 0);
	CHECK_RULE_FIRST(vq_netg_error_msg(x.g));
	CHECK(strstr(vq_netg_error_msg(x.g), "(net rx queue)"));
	gx_fini(&x);
}

int main(void)
{
	RUN_LAYOUTS(netg_config_checked);
	RUN_LAYOUTS(netg_5_1_6_3_posts_rx_buffers);
	RUN_LAYOUTS(netg_5_1_6_2_tx_frames_as_written);
	RUN_LAYOUTS(netg_kick_error_returned);
	RUN_LAYOUTS(netg_5_1_6_4_rx_frames_whole);
	RUN_LAYOUTS(netg_5_1_6_4_partial_frame_waits);
	RUN_LAYOUTS(netg_rx_burst_takes_what_it_returns);
	RUN_LAYOUTS(netg_5_1_6_4_rx_taken_batches_the_refill);
	RUN_LAYOUTS(netg_5_1_6_3_rx_next_names_the_next_buffer);
	RUN_LAYOUTS(netg_5_1_6_4_num_buffers_ignored_without_mrg);
	RUN_LAYOUTS(netg_hostile_short_first_buffer_breaks);
	RUN_LAYOUTS(netg_hostile_num_buffers_zero_breaks);
	RUN_LAYOUTS(netg_hostile_num_buffers_beyond_posted_breaks);
	RUN(netg_hostile_ring_error_names_queue);
	return 0;
}
