// SPDX-License-Identifier: MIT
/*
 * Notification suppression on the split ring (virtio 1.2 §2.7.7, §2.7.10):
 * VQ_F_EVENT_IDX (avail_event / used_event and vq_need_event) and the
 * flags without it, including the re-checks that close the lost-wakeup race
 * (RULES D2, D4, V3, V4).
 */
#include "split_test.h"

#define TOK(n) ((void *)(uintptr_t)(0x1000 + (n)))

static void add1(struct ring_pair *p, void *tok)
{
	struct vq_seg s = { GUEST_BASE + (32ull << 20), 8 };

	CHECK_EQ(vq_drv_add(p->drv, &s, 0, 1, tok), 0);
}

/* Pop and push one chain (fill + flush). */
static void dev_complete1(struct ring_pair *p)
{
	struct chainbuf b;

	CHECK_EQ(vq_dev_pop(p->dev, cb_init(&b)), 1);
	CHECK_EQ(vq_dev_push(p->dev, &b.c, 4), 1);
}

static void drv_get1(struct ring_pair *p)
{
	void *tok;
	uint32_t len;

	CHECK_EQ(vq_drv_get(p->drv, &tok, &len), 1);
}

/* 2.7.10 / RULES V4, D2: the device asks for a kick at avail_event =
 * last_avail; the driver kicks iff its index crossed it
 * (vq_need_event(avail_event, new, old)). */
static void split_2_7_10_kick_suppression_event_idx(void)
{
	struct ring_pair p;

	pair_init(&p, VQ_BIT(VQ_F_EVENT_IDX), 8, 1, 1);
	CHECK_EQ(vq_dev_enable_notify(p.dev), 0);
	CHECK_EQ(ring_avail_event(&p), 0);
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 0);       /* nothing new */
	add1(&p, TOK(0));
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 1);       /* 0 in [0, 1) */
	add1(&p, TOK(1));
	add1(&p, TOK(2));
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 0);       /* 0 not in [1, 3) */
	CHECK_EQ(vq_le16(ring_avail(&p)->idx), 3);              /* published anyway */
	dev_complete1(&p);
	dev_complete1(&p);
	/* Device caught up to 2 and re-enables: buffer 2 is still there. */
	CHECK_EQ(vq_dev_enable_notify(p.dev), 1);
	CHECK_EQ(ring_avail_event(&p), 2);
	dev_complete1(&p);
	CHECK_EQ(vq_dev_enable_notify(p.dev), 0);
	CHECK_EQ(ring_avail_event(&p), 3);
	add1(&p, TOK(3));
	add1(&p, TOK(4));
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 1);       /* 3 in [3, 5) */
	/* Device disabled (EVENT_IDX: avail_event stays): no further kicks. */
	vq_dev_disable_notify(p.dev);
	CHECK_EQ(vq_le16(ring_used(&p)->flags), 0);
	add1(&p, TOK(5));
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 0);
	pair_fini(&p);
}

/* 2.7.10 / RULES V3, D4: the driver asks for a call at used_event =
 * last_used; the device signals iff its used index crossed it. */
static void split_2_7_10_call_suppression_event_idx(void)
{
	struct ring_pair p;

	pair_init(&p, VQ_BIT(VQ_F_EVENT_IDX), 8, 1, 1);
	for (int i = 0; i < 6; i++)
		add1(&p, TOK(i));
	vq_drv_kick_prepare(p.drv);
	CHECK_EQ(vq_drv_enable_cb(p.drv), 0);
	CHECK_EQ(ring_used_event(&p), 0);
	CHECK(!vq_dev_should_signal(p.dev));            /* nothing published */
	dev_complete1(&p);
	CHECK(vq_dev_should_signal(p.dev));             /* 0 in [0, 1) */
	CHECK(!vq_dev_should_signal(p.dev));            /* recorded: not twice */
	dev_complete1(&p);
	CHECK(!vq_dev_should_signal(p.dev));            /* 0 not in [1, 2) */
	drv_get1(&p);
	drv_get1(&p);
	CHECK_EQ(vq_drv_enable_cb(p.drv), 0);
	CHECK_EQ(ring_used_event(&p), 2);
	dev_complete1(&p);
	dev_complete1(&p);
	CHECK(vq_dev_should_signal(p.dev));             /* 2 in [2, 4) */
	/* Used buffers already pending at enable time: process, do not sleep. */
	dev_complete1(&p);
	CHECK_EQ(vq_drv_enable_cb(p.drv), 1);
	CHECK_EQ(ring_used_event(&p), 2);
	pair_fini(&p);
}

/* enable_cb_delayed: used_event = last_used + 3/4 of the outstanding
 * buffers; the call comes when the used index passes it. */
static void split_2_7_10_enable_cb_delayed(void)
{
	struct ring_pair p;

	pair_init(&p, VQ_BIT(VQ_F_EVENT_IDX), 8, 1, 1);
	add1(&p, TOK(99));
	vq_drv_kick_prepare(p.drv);
	dev_complete1(&p);
	CHECK(vq_dev_should_signal(p.dev));
	drv_get1(&p);
	for (int i = 0; i < 8; i++)
		add1(&p, TOK(i));
	vq_drv_kick_prepare(p.drv);
	CHECK_EQ(vq_drv_enable_cb_delayed(p.drv), 0);
	CHECK_EQ(ring_used_event(&p), 1 + 6);
	for (int i = 0; i < 6; i++) {
		dev_complete1(&p);                       /* used idx 2..7 */
		CHECK(!vq_dev_should_signal(p.dev));
	}
	dev_complete1(&p);                               /* 8: crossed 7 */
	CHECK(vq_dev_should_signal(p.dev));
	/* Already more than 3/4 used: returns 1. */
	CHECK_EQ(vq_drv_enable_cb_delayed(p.drv), 1);
	CHECK_EQ(ring_used_event(&p), 1 + 6);
	pair_fini(&p);
}

/* RULES V4: a buffer added between disable_notify and enable_notify is
 * found by enable's re-check (the lost-wakeup race), with or without
 * EVENT_IDX. */
static void rules_v4_enable_notify_recheck(void)
{
	for (int ev = 0; ev < 2; ev++) {
		struct ring_pair p;

		pair_init(&p, ev ? VQ_BIT(VQ_F_EVENT_IDX) : 0, 8, 1, 1);
		vq_dev_disable_notify(p.dev);
		add1(&p, TOK(0));
		CHECK_EQ(vq_drv_kick_prepare(p.drv), ev);  /* flags: suppressed */
		CHECK_EQ(vq_dev_enable_notify(p.dev), 1);
		dev_complete1(&p);
		CHECK_EQ(vq_dev_enable_notify(p.dev), 0);
		add1(&p, TOK(1));
		CHECK_EQ(vq_drv_kick_prepare(p.drv), 1);   /* the sleeper is woken */
		pair_fini(&p);
	}
}

/* RULES D4: used buffers published between disable_cb and enable_cb are
 * found by enable's re-check. */
static void rules_d4_enable_cb_recheck(void)
{
	for (int ev = 0; ev < 2; ev++) {
		struct ring_pair p;

		pair_init(&p, ev ? VQ_BIT(VQ_F_EVENT_IDX) : 0, 8, 1, 1);
		add1(&p, TOK(0));
		add1(&p, TOK(1));
		vq_drv_kick_prepare(p.drv);
		vq_drv_disable_cb(p.drv);
		CHECK_EQ(vq_le16(ring_avail(&p)->flags), VQ_AVAIL_F_NO_INTERRUPT);
		dev_complete1(&p);
		CHECK_EQ(vq_drv_enable_cb(p.drv), 1);
		CHECK_EQ(vq_le16(ring_avail(&p)->flags), 0);
		drv_get1(&p);
		CHECK_EQ(vq_drv_enable_cb(p.drv), 0);
		pair_fini(&p);
	}
}

/* 2.7.7: without EVENT_IDX, used->flags NO_NOTIFY suppresses kicks and
 * avail->flags NO_INTERRUPT suppresses calls. */
static void split_2_7_7_flags_suppression(void)
{
	struct ring_pair p;

	pair_init(&p, 0, 8, 1, 1);
	add1(&p, TOK(0));
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 1);
	vq_dev_disable_notify(p.dev);
	CHECK_EQ(vq_le16(ring_used(&p)->flags), VQ_USED_F_NO_NOTIFY);
	add1(&p, TOK(1));
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 0);
	CHECK_EQ(vq_dev_enable_notify(p.dev), 1);
	CHECK_EQ(vq_le16(ring_used(&p)->flags), 0);
	add1(&p, TOK(2));
	CHECK_EQ(vq_drv_kick_prepare(p.drv), 1);

	dev_complete1(&p);
	CHECK(vq_dev_should_signal(p.dev));
	vq_drv_disable_cb(p.drv);
	CHECK_EQ(vq_le16(ring_avail(&p)->flags), VQ_AVAIL_F_NO_INTERRUPT);
	dev_complete1(&p);
	CHECK(!vq_dev_should_signal(p.dev));
	CHECK_EQ(vq_drv_enable_cb(p.drv), 1);          /* pending */
	dev_complete1(&p);
	CHECK(vq_dev_should_signal(p.dev));
	CHECK(!vq_dev_should_signal(p.dev));            /* nothing new */
	/* EVENT_IDX off: the event words are not written. */
	CHECK_EQ(ring_used_event(&p), 0);
	CHECK_EQ(ring_avail_event(&p), 0);
	pair_fini(&p);
}

/* RULES: when 2^16 used entries pass without a signal, the device's
 * signalled_used is stale and must not suppress the next signal. */
static void rules_signalled_used_invalidated_after_2_16(void)
{
	struct ring_pair p;

	pair_init(&p, VQ_BIT(VQ_F_EVENT_IDX), 4, 1, 1);
	add1(&p, TOK(0));
	vq_drv_kick_prepare(p.drv);
	CHECK_EQ(vq_drv_enable_cb(p.drv), 0);          /* used_event = 0 */
	dev_complete1(&p);
	CHECK(vq_dev_should_signal(p.dev));             /* signalled at 1 */
	drv_get1(&p);
	for (int i = 0; i < 65536; i++) {
		add1(&p, TOK(1));
		vq_drv_kick_prepare(p.drv);
		dev_complete1(&p);
		drv_get1(&p);
	}
	CHECK_EQ(vq_le16(ring_used(&p)->idx), 1);
	/* With a stale signalled_used == 1, vq_need_event(0, 1, 1) would
	 * say no; the wrap invalidated it, so the device signals. */
	CHECK(vq_dev_should_signal(p.dev));
	pair_fini(&p);
}

int main(void)
{
	RUN(split_2_7_10_kick_suppression_event_idx);
	RUN(split_2_7_10_call_suppression_event_idx);
	RUN(split_2_7_10_enable_cb_delayed);
	RUN(rules_v4_enable_notify_recheck);
	RUN(rules_d4_enable_cb_recheck);
	RUN(split_2_7_7_flags_suppression);
	RUN(rules_signalled_used_invalidated_after_2_16);
	return 0;
}
