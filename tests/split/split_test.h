/* SPDX-License-Identifier: MIT */
/*
 * Helpers the split-ring tests share: typed views of the ring areas, chain
 * storage for pops, forging descriptors and avail entries the way a hostile
 * driver would, and the "queue is broken" checks every hostile case makes.
 */
#ifndef SPLIT_TEST_H
#define SPLIT_TEST_H

#include "ring_pair.h"

#define IOV_MAX_TEST 32

struct chainbuf {
	struct vq_chain c;
	struct iovec iov[IOV_MAX_TEST];
};

static inline struct vq_chain *cb_init(struct chainbuf *b)
{
	memset(b, 0, sizeof(*b));
	b->c.iov = b->iov;
	b->c.iov_max = IOV_MAX_TEST;
	return &b->c;
}

static inline struct vq_desc *ring_desc(struct ring_pair *p)
{
	return p->ring.desc;
}

static inline struct vq_avail *ring_avail(struct ring_pair *p)
{
	return p->ring.driver;
}

static inline struct vq_used *ring_used(struct ring_pair *p)
{
	return p->ring.device;
}

/* used_event lives after the avail ring, avail_event after the used ring. */
static inline uint16_t ring_used_event(struct ring_pair *p)
{
	return vq_le16(ring_avail(p)->ring[p->num]);
}

static inline uint16_t ring_avail_event(struct ring_pair *p)
{
	return vq_le16(*(uint16_t *)&ring_used(p)->ring[p->num]);
}

static inline void forge_desc(struct ring_pair *p, uint16_t i, uint64_t addr,
			      uint32_t len, uint16_t flags, uint16_t next)
{
	struct vq_desc *d = &ring_desc(p)[i];

	d->addr = vq_le64(addr);
	d->len = vq_le32(len);
	d->flags = vq_le16(flags);
	d->next = vq_le16(next);
}

static inline void forge_table_desc(struct vq_desc *d, uint64_t addr,
				    uint32_t len, uint16_t flags, uint16_t next)
{
	d->addr = vq_le64(addr);
	d->len = vq_le32(len);
	d->flags = vq_le16(flags);
	d->next = vq_le16(next);
}

/* Put head at avail position pos and move avail->idx to pos + 1. */
static inline void forge_avail(struct ring_pair *p, uint16_t pos, uint16_t head)
{
	ring_avail(p)->ring[pos & (p->num - 1)] = vq_le16(head);
	ring_avail(p)->idx = vq_le16((uint16_t)(pos + 1));
}

static inline void forge_used(struct ring_pair *p, uint16_t pos, uint32_t id,
			      uint32_t len)
{
	ring_used(p)->ring[pos & (p->num - 1)].id = vq_le32(id);
	ring_used(p)->ring[pos & (p->num - 1)].len = vq_le32(len);
}

/* Fill len bytes of guest memory with a pattern derived from seed. */
static inline void fill_pattern(struct ring_pair *p, uint64_t gpa, uint32_t len,
				uint8_t seed)
{
	uint8_t *b = pair_hva(p, gpa);

	for (uint32_t i = 0; i < len; i++)
		b[i] = (uint8_t)(seed + i * 13);
}

static inline void check_pattern(const void *hva, uint32_t len, uint8_t seed,
				 uint32_t from)
{
	const uint8_t *b = hva;

	for (uint32_t i = 0; i < len; i++)
		CHECK_EQ(b[i], (uint8_t)(seed + (from + i) * 13));
}

/* Write len pattern bytes across the chain's writable iovecs. */
static inline void write_in(struct vq_chain *c, uint32_t len, uint8_t seed)
{
	uint32_t off = 0;

	for (unsigned k = c->nout; k < c->nout + c->nin && off < len; k++) {
		uint8_t *b = c->iov[k].iov_base;
		size_t m = c->iov[k].iov_len;

		if (m > len - off)
			m = len - off;
		for (size_t i = 0; i < m; i++)
			b[i] = (uint8_t)(seed + (off + i) * 13);
		off += (uint32_t)m;
	}
	CHECK_EQ(off, len);
}

/*
 * The device queue is broken with err: the pop that found the bad input
 * returned it, the message says why, every later call fails fast with the
 * same error, and a reset clears the state.
 */
static inline void expect_dev_broken(struct ring_pair *p, int r, int err,
				     const char *keyword)
{
	struct chainbuf b;

	CHECK_EQ(r, err);
	CHECK_EQ(vq_dev_error(p->dev), err);
	CHECK_RULE_FIRST(vq_dev_error_msg(p->dev));
	if (keyword && !strstr(vq_dev_error_msg(p->dev), keyword)) {
		fprintf(stderr, "message \"%s\" lacks \"%s\"\n",
			vq_dev_error_msg(p->dev), keyword);
		CHECK(0);
	}
	CHECK_EQ(vq_dev_pop(p->dev, cb_init(&b)), err);
	CHECK_EQ(vq_dev_pop_burst(p->dev, cb_init(&b), 1), err);
	CHECK_EQ(vq_dev_enable_notify(p->dev), err);
	CHECK_EQ(vq_dev_flush(p->dev), err);
	CHECK(!vq_dev_has_avail(p->dev));
	vq_dev_reset(p->dev);
	CHECK_EQ(vq_dev_error(p->dev), 0);
	CHECK_EQ(vq_dev_error_msg(p->dev)[0], '\0');
}

static inline void expect_drv_broken(struct ring_pair *p, int r, int err,
				     const char *keyword)
{
	void *tok;
	uint32_t len;
	struct vq_seg s = { GUEST_BASE, 1 };

	CHECK_EQ(r, err);
	CHECK_EQ(vq_drv_error(p->drv), err);
	CHECK_RULE_FIRST(vq_drv_error_msg(p->drv));
	if (keyword && !strstr(vq_drv_error_msg(p->drv), keyword)) {
		fprintf(stderr, "message \"%s\" lacks \"%s\"\n",
			vq_drv_error_msg(p->drv), keyword);
		CHECK(0);
	}
	CHECK_EQ(vq_drv_get(p->drv, &tok, &len), err);
	CHECK_EQ(vq_drv_add(p->drv, &s, 1, 0, &s), err);
	CHECK_EQ(vq_drv_kick_prepare(p->drv), err);
	CHECK_EQ(vq_drv_enable_cb(p->drv), err);
	CHECK(!vq_drv_has_used(p->drv));
	vq_drv_reset(p->drv);
	CHECK_EQ(vq_drv_error(p->drv), 0);
	CHECK_EQ(vq_drv_outstanding(p->drv), 0);
	CHECK_EQ(vq_drv_free_slots(p->drv), p->num);
}

#endif
