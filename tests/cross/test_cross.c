// SPDX-License-Identifier: MIT
/*
 * The randomized cross-test: our driver and our device on one ring in one
 * process, driven by a random interleaving of everything each side can do -
 * add (one buffer or a burst), publish/kick, pop in bursts, give back (unpop), fill and flush in
 * random batches with partial writes, get in bursts, and both sides going to
 * sleep through the notification protocol.  An oracle checks:
 *
 *  - every token comes back exactly once, with the length the device wrote,
 *    and the bytes the device wrote are the bytes the driver reads;
 *  - the device sees exactly the segments the driver posted, readable then
 *    writable, with the driver's bytes (2.7.4 / 2.8.6 "Message Framing");
 *  - no notification the spec requires is suppressed: a side asleep after
 *    its enable call returned 0 is woken (2.7.10, 2.7.7, 2.8.10);
 *  - with IN_ORDER, completions are in order and one used entry may finish a
 *    batch, yet each buffer gets its own length (2.7.9, 2.8.8);
 *  - after the device stops, used plus detached buffers are every buffer.
 *
 * Usage: test_cross [OPS]  (default 100000 per configuration; VQ_TEST_SEED
 * sets the seed).  All 16 combinations of layout, in_order, event_idx and
 * indirect run; each prints its notification counts per operation.
 */
#include <stdbool.h>

#include "ring_pair.h"

#define MAX_SEGS   6
#define SEG_MAX    1536
#define SLOT_BYTES (MAX_SEGS * SEG_MAX)

/* One buffer the driver may post; the token is its address. */
struct slot {
	bool busy;              /* added, not yet returned or detached */
	uint64_t serial;        /* changes on every add */
	unsigned nout, nin;
	struct vq_seg seg[MAX_SEGS];
	uint64_t in_len;
	/* Written by the device side of the oracle: */
	bool done;              /* completed by the device */
	bool owed;              /* outstanding when the driver slept (delayed) */
	uint32_t written;
	uint64_t wserial;
};

struct popped {
	struct vq_chain c;
	struct iovec iov[MAX_SEGS];
	struct slot *s;
	uint64_t seq;           /* pop order, to know what unpop may take */
};

struct sim {
	struct ring_pair p;
	bool in_order, packed;
	uint64_t rng;
	uint16_t num;
	struct slot *slots;
	uint64_t data_gpa;
	uint64_t serial;

	/* device side */
	struct popped *pop;     /* popped, not yet filled (FIFO) */
	unsigned npop;
	uint64_t pop_seq;       /* pops minus unpops */
	unsigned staged;        /* filled, not yet flushed */
	bool dev_asleep;
	uint64_t wserial;

	/* driver side */
	unsigned outstanding;   /* added, not yet returned */
	unsigned unpublished;   /* added, not yet through kick_prepare */
	unsigned added_asleep;  /* added while the device sleeps */
	bool drv_asleep;
	/* A sleeping driver is owed a call at the first used buffer (plain
	 * enable), or once every buffer outstanding when it slept is used
	 * (delayed: the event index lies before the end of those). */
	bool owe_first;
	unsigned owed_left;
	struct slot **staged_slots;     /* filled, not yet flushed */

	/* counts */
	unsigned detached;      /* at the end, by detach_unused */
	uint64_t ops, adds, gets, kicks, calls, kick_checks, call_checks;
};

static uint64_t rnd(struct sim *s, uint64_t n)
{
	return vq_test_rand(&s->rng) % n;
}

static uint8_t pattern(uint64_t serial, uint64_t off)
{
	uint64_t x = serial * 0x9E3779B97F4A7C15ull + off * 0xBF58476D1CE4E5B9ull;

	return (uint8_t)(x >> 56);
}

static struct slot *slot_of_gpa(struct sim *s, uint64_t gpa)
{
	uint64_t i = (gpa - s->data_gpa) / SLOT_BYTES;

	CHECK(gpa >= s->data_gpa && i < s->num);
	return &s->slots[i];
}

static uint64_t slot_gpa(struct sim *s, struct slot *sl)
{
	return s->data_gpa + (uint64_t)(sl - s->slots) * SLOT_BYTES;
}

/* ---- driver actions ---- */

/* A random free slot, or NULL. */
static struct slot *free_slot(struct sim *s)
{
	unsigned i;

	for (i = 0; i < s->num; i++) {
		struct slot *c = &s->slots[(rnd(s, s->num) + i) % s->num];

		if (!c->busy)
			return c;
	}
	return NULL;
}

/* Give sl nout readable segments with the driver's bytes and nin writable
 * ones, of random lengths. */
static void slot_fill(struct sim *s, struct slot *sl, unsigned nout, unsigned nin)
{
	uint64_t gpa = slot_gpa(s, sl);
	unsigned i;

	sl->serial = ++s->serial;
	sl->in_len = 0;
	for (i = 0; i < nout + nin; i++) {
		uint32_t len = 1 + rnd(s, SEG_MAX);

		sl->seg[i] = (struct vq_seg){ gpa + (uint64_t)i * SEG_MAX, len };
		if (i < nout) {
			uint8_t *p = pair_hva(&s->p, sl->seg[i].addr);

			for (uint32_t k = 0; k < len; k++)
				p[k] = pattern(sl->serial, (uint64_t)i * SEG_MAX + k);
		} else {
			sl->in_len += len;
			memset(pair_hva(&s->p, sl->seg[i].addr), 0xEE, len);
		}
	}
	sl->nout = nout;
	sl->nin = nin;
}

static void slot_added(struct sim *s, struct slot *sl)
{
	sl->busy = true;
	sl->done = false;
	s->outstanding++;
	s->unpublished++;
	if (s->dev_asleep)
		s->added_asleep++;
	s->adds++;
}

static void drv_add(struct sim *s)
{
	struct slot *sl = free_slot(s);
	unsigned nout, nin;
	int r;

	if (!sl)
		return;
	do {
		nout = rnd(s, 4);
		nin = rnd(s, 4);
	} while (nout + nin == 0 || nout + nin > MAX_SEGS);
	slot_fill(s, sl, nout, nin);
	r = vq_drv_add(s->p.drv, sl->seg, nout, nin, sl);
	if (r == -ENOSPC) {
		/* Only legal when the ring really is short of slots. */
		unsigned need = nout + nin;

		CHECK(vq_drv_free_slots(s->p.drv) < need ||
		      vq_drv_outstanding(s->p.drv) == s->num);
		return;
	}
	CHECK_EQ(r, 0);
	slot_added(s, sl);
}

/* vq_drv_add_burst: up to 8 one-segment buffers, all readable or all
 * writable; it adds as many as there are free slots, no fewer.  Packed:
 * one release store publishes the burst (the first head's flags last). */
static void drv_add_burst(struct sim *s)
{
	struct slot *sl[8];
	struct vq_seg seg[8];
	void *tok[8];
	unsigned want = 1 + rnd(s, 8), n = 0, room, i;
	bool writable = rnd(s, 2);
	int r;

	while (n < want) {
		struct slot *c = free_slot(s);

		if (!c)
			break;
		slot_fill(s, c, !writable, writable);
		c->busy = true;         /* so free_slot skips it */
		sl[n] = c;
		seg[n] = c->seg[0];
		tok[n++] = c;
	}
	for (i = 0; i < n; i++)
		sl[i]->busy = false;
	if (!n)
		return;
	room = vq_drv_free_slots(s->p.drv);
	r = vq_drv_add_burst(s->p.drv, seg, tok, n, writable);
	CHECK_EQ(r, n < room ? n : room);
	for (i = 0; i < (unsigned)r; i++)
		slot_added(s, sl[i]);
}

static void dev_wake(struct sim *s)
{
	s->dev_asleep = false;
	s->added_asleep = 0;
	if (rnd(s, 2))
		vq_dev_disable_notify(s->p.dev);
}

static void drv_kick(struct sim *s)
{
	int r = vq_drv_kick_prepare(s->p.drv);

	CHECK(r == 0 || r == 1);
	/*
	 * 2.7.10 / 2.8.10: a device that enabled notifications and found the
	 * ring empty must be notified of the first new buffers.  Split buffers
	 * become visible here, so every unpublished one is new to it; packed
	 * ones are visible as soon as they are added, so only those added
	 * after it went to sleep are (earlier ones it consumed, or its
	 * re-check would not have let it sleep).
	 */
	if (s->dev_asleep && (s->packed ? s->added_asleep : s->unpublished)) {
		s->kick_checks++;
		if (r != 1) {
			fprintf(stderr, "lost kick: device asleep, %u buffers published, no notification\n",
				s->unpublished);
			exit(1);
		}
	}
	s->unpublished = 0;
	s->added_asleep = 0;
	if (r == 1) {
		s->kicks++;
		if (s->dev_asleep)
			dev_wake(s);
	}
}

static void drv_get(struct sim *s)
{
	void *tok[16];
	uint32_t len[16];
	int n = vq_drv_get_burst(s->p.drv, tok, len, 1 + rnd(s, 16));

	if (n < 0) {
		fprintf(stderr, "driver broken: %s\n", vq_drv_error_msg(s->p.drv));
		exit(1);
	}
	for (int i = 0; i < n; i++) {
		struct slot *sl = tok[i];
		uint64_t left = len[i];

		CHECK(sl >= s->slots && sl < s->slots + s->num);
		CHECK(sl->busy);                /* exactly once */
		CHECK(sl->done);                /* only what the device completed */
		CHECK_EQ(len[i], sl->written);
		/* The bytes the device wrote, in the writable segments in order. */
		for (unsigned k = sl->nout; k < sl->nout + sl->nin && left; k++) {
			const uint8_t *p = pair_hva(&s->p, sl->seg[k].addr);
			uint64_t m = left < sl->seg[k].len ? left : sl->seg[k].len;

			for (uint64_t b = 0; b < m; b++)
				CHECK(p[b] == pattern(sl->wserial, (sl->written - left) + b));
			left -= m;
		}
		sl->busy = false;
		s->outstanding--;
		s->gets++;
	}
}

static void drv_sleep(struct sim *s)
{
	bool delayed = rnd(s, 2);
	int r = delayed ? vq_drv_enable_cb_delayed(s->p.drv) :
			  vq_drv_enable_cb(s->p.drv);

	CHECK(r == 0 || r == 1);
	if (r == 1)
		return;         /* used buffers pending: must not sleep */
	/* Plain enable returned 0: nothing is pending, so the first used buffer
	 * must bring a call.  Delayed: at the latest when every buffer
	 * outstanding now is used. */
	s->drv_asleep = true;
	s->owed_left = 0;
	for (unsigned i = 0; i < s->num; i++) {
		struct slot *sl = &s->slots[i];

		sl->owed = delayed && sl->busy && !sl->done;
		s->owed_left += sl->owed;
	}
	s->owe_first = !delayed || s->owed_left == 0;
}

/* ---- device actions ---- */

static void check_chain(struct sim *s, struct popped *pp)
{
	struct vq_chain *c = &pp->c;
	struct slot *sl;

	CHECK(c->nout + c->nin > 0);
	sl = slot_of_gpa(s, (uint64_t)((uint8_t *)c->iov[0].iov_base - s->p.guest) + GUEST_BASE);
	CHECK(sl->busy && !sl->done);
	CHECK_EQ(c->nout, sl->nout);
	CHECK_EQ(c->nin, sl->nin);
	CHECK_EQ(c->in_len, sl->in_len);
	for (unsigned k = 0; k < c->nout + c->nin; k++) {
		CHECK(c->iov[k].iov_base == pair_hva(&s->p, sl->seg[k].addr));
		CHECK_EQ(c->iov[k].iov_len, sl->seg[k].len);
	}
	for (unsigned k = 0; k < c->nout; k++) {
		const uint8_t *p = c->iov[k].iov_base;

		for (size_t b = 0; b < c->iov[k].iov_len; b++)
			CHECK(p[b] == pattern(sl->serial, (uint64_t)k * SEG_MAX + b));
	}
	for (unsigned i = 0; i < s->npop; i++)
		CHECK(s->pop[i].s != sl);       /* not popped twice */
	pp->s = sl;
}

static void dev_pop(struct sim *s)
{
	struct vq_chain ch[8];
	struct iovec iov[8][MAX_SEGS];
	unsigned want = 1 + rnd(s, 8);
	int n;

	if (s->dev_asleep)
		return;
	if (want > s->num - s->npop)
		want = s->num - s->npop;
	for (unsigned i = 0; i < want; i++) {
		ch[i].iov = iov[i];
		ch[i].iov_max = MAX_SEGS;
	}
	n = vq_dev_pop_burst(s->p.dev, ch, want);
	if (n < 0) {
		fprintf(stderr, "device broken: %s\n", vq_dev_error_msg(s->p.dev));
		exit(1);
	}
	for (int i = 0; i < n; i++) {
		struct popped *pp = &s->pop[s->npop];

		pp->c = ch[i];
		memcpy(pp->iov, iov[i], sizeof(pp->iov));
		pp->c.iov = pp->iov;
		check_chain(s, pp);
		pp->seq = s->pop_seq++;
		s->npop++;
	}
}

static void dev_unpop(struct sim *s)
{
	struct vq_chain ch[8];
	unsigned n = 1 + rnd(s, 4), first;

	unsigned ok = 0;

	/* Only the most recent pops, none of them filled since. */
	while (ok < s->npop && s->pop[s->npop - 1 - ok].seq == s->pop_seq - 1 - ok)
		ok++;
	if (n > ok)
		n = ok;
	if (!n)
		return;
	first = s->npop - n;
	for (unsigned i = 0; i < n; i++)
		ch[i] = s->pop[first + i].c;
	CHECK_EQ(vq_dev_unpop(s->p.dev, ch, n), 0);
	s->npop = first;
	s->pop_seq -= n;
}

static void dev_flush(struct sim *s)
{
	int n = vq_dev_flush(s->p.dev);

	CHECK(n >= 0);
	CHECK_EQ(n, s->staged);
	s->staged = 0;
	if (!n)
		return;
	for (int i = 0; i < n; i++) {
		struct slot *sl = s->staged_slots[i];

		if (sl->owed) {
			sl->owed = false;
			s->owed_left--;
		}
	}
	if (vq_dev_should_signal(s->p.dev)) {
		s->calls++;
		s->drv_asleep = false;
		if (rnd(s, 2))
			vq_drv_disable_cb(s->p.drv);
	} else if (s->drv_asleep) {
		s->call_checks++;
		if (s->owe_first || s->owed_left == 0) {
			fprintf(stderr, "lost call: driver asleep (%s), %d used published, no notification\n",
				s->owe_first ? "enable_cb" : "enable_cb_delayed", n);
			exit(1);
		}
	}
}

static void dev_complete(struct sim *s)
{
	unsigned n = 1 + rnd(s, 8);

	while (n-- && s->npop) {
		/* In order: the oldest pop; otherwise any of them. */
		unsigned i = s->in_order ? 0 : rnd(s, s->npop);
		struct popped pp = s->pop[i];
		struct slot *sl = pp.s;
		uint64_t len, off = 0;

		pp.c.iov = pp.iov;      /* entries move in the FIFO: re-point */

		memmove(&s->pop[i], &s->pop[i + 1], (s->npop - i - 1) * sizeof(*s->pop));
		s->npop--;
		/* Often complete (so in-order batches form), sometimes partial. */
		switch (rnd(s, 4)) {
		case 0: len = pp.c.in_len ? rnd(s, pp.c.in_len + 1) : 0; break;
		case 1: len = 0; break;
		default: len = pp.c.in_len; break;
		}
		sl->wserial = ++s->wserial;
		for (unsigned k = pp.c.nout; k < pp.c.nout + pp.c.nin && off < len; k++) {
			uint8_t *p = pp.c.iov[k].iov_base;
			uint64_t m = len - off < pp.c.iov[k].iov_len ? len - off : pp.c.iov[k].iov_len;

			for (uint64_t b = 0; b < m; b++)
				p[b] = pattern(sl->wserial, off + b);
			off += m;
		}
		sl->written = (uint32_t)len;
		sl->done = true;
		CHECK_EQ(vq_dev_fill(s->p.dev, &pp.c, (uint32_t)len), 0);
		s->staged_slots[s->staged++] = sl;
		if (rnd(s, 4) == 0)
			dev_flush(s);
	}
	if (rnd(s, 2))
		dev_flush(s);
}

static void dev_sleep(struct sim *s)
{
	int r;

	/* A device sleeps only with nothing left to finish. */
	if (s->dev_asleep || s->npop || s->staged)
		return;
	r = vq_dev_enable_notify(s->p.dev);
	CHECK(r == 0 || r == 1);
	if (r == 0)
		s->dev_asleep = true;
	else if (rnd(s, 2))
		vq_dev_disable_notify(s->p.dev);
}

static void step(struct sim *s)
{
	unsigned op = rnd(s, 100);

	if (op < 18)
		drv_add(s);
	else if (op < 25)
		drv_add_burst(s);
	else if (op < 37)
		drv_kick(s);
	else if (op < 52)
		dev_pop(s);
	else if (op < 55)
		dev_unpop(s);
	else if (op < 72)
		dev_complete(s);
	else if (op < 77)
		dev_flush(s);
	else if (op < 90) {
		if (!s->drv_asleep)
			drv_get(s);
	} else if (op < 95) {
		if (!s->drv_asleep)
			drv_sleep(s);
	} else {
		dev_sleep(s);
	}
	s->ops++;
}

/* Stop the device mid-flight, then account for every buffer: used ones via
 * get, the rest via detach_unused. */
static void drain_and_detach(struct sim *s)
{
	void *tok;
	unsigned detached = 0;

	drv_kick(s);
	s->dev_asleep = false;
	dev_pop(s);
	/* Complete about half of what is popped, publish it, stop. */
	s->npop /= 2;
	dev_complete(s);
	dev_flush(s);
	s->npop = 0;
	s->drv_asleep = false;
	while (vq_drv_has_used(s->p.drv))
		drv_get(s);
	while ((tok = vq_drv_detach_unused(s->p.drv)) != NULL) {
		struct slot *sl = tok;

		CHECK(sl >= s->slots && sl < s->slots + s->num && sl->busy);
		sl->busy = false;
		s->outstanding--;
		detached++;
	}
	CHECK_EQ(s->outstanding, 0);
	CHECK_EQ(vq_drv_outstanding(s->p.drv), 0);
	for (unsigned i = 0; i < s->num; i++)
		CHECK(!s->slots[i].busy);
	s->detached = detached;
}

/* Let everything in flight finish and check that all tokens came home. */
static void drain_all(struct sim *s)
{
	for (int round = 0; round < 4 * s->num + 8 && s->outstanding; round++) {
		drv_kick(s);
		s->dev_asleep = false;
		dev_pop(s);
		while (s->npop)
			dev_complete(s);
		dev_flush(s);
		s->drv_asleep = false;
		drv_get(s);
	}
	CHECK_EQ(s->outstanding, 0);
	CHECK_EQ(vq_drv_outstanding(s->p.drv), 0);
}

static void run(bool packed, bool in_order, bool event_idx, bool indirect,
		uint64_t ops, uint64_t seed)
{
	static const uint16_t split_sizes[] = { 8, 64, 256 };
	static const uint16_t packed_sizes[] = { 8, 100, 256 };
	struct sim s = { .packed = packed, .in_order = in_order, .rng = seed | 1 };
	uint64_t f = pair_features(packed, in_order, event_idx, indirect);

	s.num = packed ? packed_sizes[rnd(&s, 3)] : split_sizes[rnd(&s, 3)];
	pair_init(&s.p, f, s.num, 1, 1);
	s.data_gpa = pair_alloc(&s.p, (uint64_t)SLOT_BYTES * s.num);
	s.slots = calloc(s.num, sizeof(*s.slots));
	s.pop = calloc(s.num, sizeof(*s.pop));
	s.staged_slots = calloc(s.num, sizeof(*s.staged_slots));
	CHECK(s.slots && s.pop && s.staged_slots);

	fprintf(stderr, "%s in_order=%d event_idx=%d indirect=%d num=%u seed=0x%llx: ",
		packed ? "packed" : "split ", in_order, event_idx, indirect, s.num,
		(unsigned long long)seed);
	while (s.ops < ops)
		step(&s);
	if (seed & 2)
		drain_and_detach(&s);
	else
		drain_all(&s);
	CHECK_EQ(vq_dev_error(s.p.dev), 0);
	CHECK_EQ(vq_drv_error(s.p.drv), 0);
	fprintf(stderr, "%llu ops, %llu buffers (%u detached), kicks/op %.3f calls/op %.3f, "
		"%llu kick and %llu call obligations checked\n",
		(unsigned long long)s.ops, (unsigned long long)s.gets, s.detached,
		(double)s.kicks / s.ops, (double)s.calls / s.ops,
		(unsigned long long)s.kick_checks, (unsigned long long)s.call_checks);
	CHECK(s.gets > ops / 20);       /* traffic really flowed */
	free(s.slots);
	free(s.pop);
	free(s.staged_slots);
	pair_fini(&s.p);
}

int main(int argc, char **argv)
{
	uint64_t ops = argc > 1 ? strtoull(argv[1], NULL, 0) : 100000;
	uint64_t seed = vq_test_seed(0x5eed0001);

	for (int cfg = 0; cfg < 16; cfg++)
		run(cfg & 8, cfg & 4, cfg & 2, cfg & 1, ops,
		    seed + (uint64_t)cfg * 0x1000193);
	return 0;
}
