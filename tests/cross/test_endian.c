// SPDX-License-Identifier: MIT
/*
 * The spec's little-endian rule (virtio 1.2 §1.4 "Structure
 * Specifications": le16, le32, le64): every multi-byte field the two sides
 * share is little-endian in memory, whatever the host's byte order.  The
 * checks read ring memory byte by byte, never through the library's own
 * accessors, so on a big-endian host (the s390x build run under qemu-user)
 * a missing swap fails here instead of passing both ways.
 */
#include <virtq/net.h>

#include "ring_pair.h"

/* An address and lengths whose every byte differs. */
#define ADDR_OFF 0x10203ull     /* GUEST_BASE + this: 03 02 01 00 01 00 00 00 */
#define BUF_LEN  0x0405u
#define USED_LEN 0x0304u

static void bytes_are(const void *p, const uint8_t *want, unsigned n,
		      const char *what)
{
	const uint8_t *b = p;

	for (unsigned i = 0; i < n; i++) {
		if (b[i] != want[i]) {
			fprintf(stderr, "%s: byte %u is 0x%02x, want 0x%02x\n",
				what, i, b[i], want[i]);
			CHECK(0);
		}
	}
}

static const uint8_t addr_le[8] = { 0x03, 0x02, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00 };
static const uint8_t len_le[4] = { 0x05, 0x04, 0x00, 0x00 };
static const uint8_t used_len_le[4] = { 0x04, 0x03, 0x00, 0x00 };

/* A ring with EVENT_IDX, one buffer round it: the driver adds, the device
 * pops and uses, the driver gets.  Each side's stores are little-endian and
 * each reads the other's as such.  The descriptor's le64 addr is at its
 * start in both layouts (2.7.5, 2.8.13). */
static void round_trip(struct ring_pair *p, bool packed)
{
	struct vq_seg seg = { GUEST_BASE + ADDR_OFF, BUF_LEN };
	struct iovec iov[2];
	struct vq_chain c = { .iov = iov, .iov_max = 2 };
	void *tok;
	uint32_t len;

	pair_init(p, pair_features(packed, 0, 1, 0), 8, 1, 1);
	CHECK_EQ(vq_drv_add(p->drv, &seg, 0, 1, &seg), 0);
	CHECK(vq_drv_kick_prepare(p->drv) >= 0);
	CHECK_EQ(vq_dev_pop(p->dev, &c), 1);
	CHECK_EQ(c.nin, 1);
	CHECK(c.iov[0].iov_base == pair_hva(p, GUEST_BASE + ADDR_OFF));
	CHECK_EQ(c.iov[0].iov_len, BUF_LEN);
	CHECK_EQ(vq_dev_push(p->dev, &c, USED_LEN), 1);
	CHECK_EQ(vq_drv_get(p->drv, &tok, &len), 1);
	CHECK(tok == &seg);
	CHECK_EQ(len, USED_LEN);
	bytes_are(p->ring.desc, addr_le, 8, "desc.addr");
}

static void split_ring_is_little_endian(void)
{
	struct ring_pair p;
	const uint8_t *desc, *avail, *used;
	const uint8_t idx1[2] = { 0x01, 0x00 };
	const uint8_t write_flag[2] = { VQ_DESC_F_WRITE, 0x00 };
	const uint8_t head0[4] = { 0, 0, 0, 0 };

	round_trip(&p, false);
	desc = p.ring.desc;
	avail = p.ring.driver;
	used = p.ring.device;
	/* 2.7.5: le32 len, le16 flags after le64 addr */
	bytes_are(desc + 8, len_le, 4, "desc.len");
	bytes_are(desc + 12, write_flag, 2, "desc.flags");
	/* 2.7.6: le16 idx, le16 ring[] */
	bytes_are(avail + 2, idx1, 2, "avail.idx");
	bytes_are(avail + 4, head0, 2, "avail.ring[0]");
	/* 2.7.8: le16 idx, le32 id, le32 len */
	bytes_are(used + 2, idx1, 2, "used.idx");
	bytes_are(used + 4, head0, 4, "used.ring[0].id");
	bytes_are(used + 8, used_len_le, 4, "used.ring[0].len");
	/* 2.7.10: the event indices at the ring ends, le16 */
	vq_drv_disable_cb(p.drv);
	CHECK_EQ(vq_drv_enable_cb(p.drv), 0);
	bytes_are(avail + 4 + 2 * 8, idx1, 2, "used_event");
	CHECK_EQ(vq_dev_enable_notify(p.dev), 0);
	bytes_are(used + 4 + 8 * 8, idx1, 2, "avail_event");
	pair_fini(&p);
}

static void packed_ring_is_little_endian(void)
{
	struct ring_pair p;
	const uint8_t *desc, *drv_evt, *dev_evt;
	const uint8_t id0[2] = { 0, 0 };
	/* 2.8.1: AVAIL (bit 7) and USED (bit 15) set by the device on use,
	 * WRITE (bit 1) as the driver made it available */
	const uint8_t used_flags[2] = { 0x80, 0x80 };
	const uint8_t off1_wrap1[2] = { 0x01, 0x80 };
	const uint8_t desc_flag[2] = { VQ_EVENT_F_DESC, 0x00 };

	round_trip(&p, true);
	desc = p.ring.desc;
	drv_evt = p.ring.driver;
	dev_evt = p.ring.device;
	/* 2.8.13: le32 len, le16 id, le16 flags after le64 addr; the used
	 * descriptor overwrote the available one in place */
	bytes_are(desc + 8, used_len_le, 4, "used desc.len");
	bytes_are(desc + 12, id0, 2, "desc.id");
	CHECK_EQ(desc[14] & used_flags[0], used_flags[0]);
	CHECK_EQ(desc[15], used_flags[1]);
	/* 2.8.14: le16 off_wrap, le16 flags; with EVENT_IDX the driver asks
	 * for a call at slot 1 of wrap 1 (bit 15) */
	vq_drv_disable_cb(p.drv);
	CHECK_EQ(vq_drv_enable_cb(p.drv), 0);
	bytes_are(drv_evt, off1_wrap1, 2, "driver event off_wrap");
	bytes_are(drv_evt + 2, desc_flag, 2, "driver event flags");
	CHECK_EQ(vq_dev_enable_notify(p.dev), 0);
	bytes_are(dev_evt, off1_wrap1, 2, "device event off_wrap");
	bytes_are(dev_evt + 2, desc_flag, 2, "device event flags");
	pair_fini(&p);
}

/* 5.1.6: struct virtio_net_hdr's le16 fields. */
static void net_header_is_little_endian(void)
{
	struct vq_net_hdr h = { .flags = 1, .gso_type = 3, .hdr_len = 0x0102,
				.gso_size = 0x0304, .csum_start = 0x0506,
				.csum_offset = 0x0708, .num_buffers = 0x090a };
	const uint8_t want[12] = { 1, 3, 0x02, 0x01, 0x04, 0x03, 0x06, 0x05,
				   0x08, 0x07, 0x0a, 0x09 };
	uint8_t b[12];
	struct vq_net_hdr back;

	vq_net_hdr_encode(b, 12, &h);
	bytes_are(b, want, 12, "virtio_net_hdr");
	vq_net_hdr_decode(want, 12, &back);
	CHECK_EQ(back.hdr_len, 0x0102);
	CHECK_EQ(back.csum_offset, 0x0708);
	CHECK_EQ(back.num_buffers, 0x090a);
}

int main(void)
{
	fprintf(stderr, "host byte order: %s-endian\n",
		__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? "little" : "big");
	RUN(split_ring_is_little_endian);
	RUN(packed_ring_is_little_endian);
	RUN(net_header_is_little_endian);
	return 0;
}
