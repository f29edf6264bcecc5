// SPDX-License-Identifier: MIT
/*
 * The packed virtqueue, device side (virtio 1.2 §2.8; the vhost role).
 *
 * The device walks the descriptor ring at last_avail, taking descriptors
 * whose flags say "available in the current phase", and writes one used
 * descriptor per chain at last_used, skipping the chain's slots.  Nothing it
 * reads from the ring is trusted: a buffer id is checked against the queue
 * size and against the buffers already in flight, chains are bounded by the
 * ring, and every descriptor of a chain must be available in its own phase.
 *
 * Two ops tables: the plain one, and the VQ_F_IN_ORDER one whose flush
 * writes one used descriptor per batch of completely written buffers
 * (2.8.8 "In-order use of descriptors").  In order, a buffer's place in
 * the queue is its pop sequence number: fill checks it is the next one,
 * flush releases every filled buffer by moving one counter, and fill merges
 * a buffer into the open batch, so nothing is walked per buffer at flush.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "packed.h"

enum { ID_FREE = 0, ID_POPPED, ID_STAGED };

struct pdev_id {
	uint64_t in_len;        /* writable bytes of the chain, for IN_ORDER */
	uint64_t seq;           /* IN_ORDER: pop sequence number (from 1);
				 * in flight while above flushed */
	uint16_t ndesc;         /* ring slots the chain took */
	uint16_t head;          /* its first slot | wrap << 15, for unpop */
	uint8_t state;          /* ID_*, without IN_ORDER */
};

/* A used descriptor to write: one per buffer, or with IN_ORDER one per
 * batch (the id and length of its last buffer, the slots of all). */
struct pdev_stage {
	uint16_t id;
	uint16_t ndesc;
	uint32_t len;
	bool complete;          /* IN_ORDER: written completely, batch open */
};

struct packed_dev {
	struct vq_dev base;
	struct vq_packed_desc *desc;
	struct vq_event_suppress *drv_event;         /* the driver writes it */
	struct vq_event_suppress *dev_event;         /* we write it */
	uint16_t num;
	bool event_idx, indirect, in_order;

	uint16_t last_avail;
	bool avail_wrap;
	uint16_t last_used;     /* where the next used descriptor goes */
	bool used_wrap;

	/* Slots published since the last signal, and whether the last
	 * signal's position is known (vhost's signalled_used_valid). */
	uint32_t unsignalled;
	bool signalled_valid;

	uint16_t dev_flags_shadow;      /* last flags written to dev_event */

	struct pdev_stage *stage;       /* [num]: filled, not flushed */
	uint32_t nstage;

	/* IN_ORDER: buffers popped, filled and flushed so far.  64 bits
	 * never wrap, so a sequence number is never taken for another. */
	uint64_t popped, filled, flushed;

	struct pdev_id *ids;            /* [num] */
};

#define DEV_FLAGS_UNKNOWN 0xffffu

static inline struct packed_dev *to_pd(struct vq_dev *d)
{
	return (struct packed_dev *)d;
}

static inline const struct packed_dev *to_pd_const(const struct vq_dev *d)
{
	return (const struct packed_dev *)d;
}

/* ---- pop ---- */

/* Record a walked chain as popped: validate its buffer id (the driver could
 * name any 16-bit value, or reuse one in flight).  The caller moves
 * last_avail past the chain's slots afterwards. */
static inline __attribute__((always_inline)) int
pop_commit(struct packed_dev *pd, struct vq_chain *c, uint16_t id,
	   uint16_t head, uint16_t ndesc, bool in_order)
{
	struct vq_dev *d = &pd->base;
	struct pdev_id *s;

	if (unlikely(id >= pd->num))
		return vq_dev_break(d, -EINVAL,
				    "2.8.6: buffer id %u of the chain at slot %u is not below the queue size %u",
				    id, head, pd->num);
	s = &pd->ids[id];
	if (unlikely(in_order ? s->seq > pd->flushed : s->state != ID_FREE))
		return vq_dev_break(d, -EINVAL,
				    "2.8.6: buffer id %u (chain at slot %u) is already in flight",
				    id, head);
	if (in_order)
		s->seq = ++pd->popped;
	else
		s->state = ID_POPPED;
	s->ndesc = ndesc;
	s->head = head | (uint16_t)pd->avail_wrap << VQ_EVENT_WRAP_SHIFT;
	s->in_len = c->in_len;
	c->id = id;
	c->ndesc = ndesc;
	return 1;
}

/* Walk an indirect table (2.8.19): packed descriptors read in order,
 * len/16 of them; their NEXT and id are ignored. */
static int pop_indirect(struct packed_dev *pd, struct vq_chain *c,
			struct vq_xlate *x, uint64_t addr, uint32_t len,
			uint16_t head)
{
	struct vq_dev *d = &pd->base;
	const struct vq_packed_desc *t;
	unsigned count, i;
	int r;

	t = vq_indirect_table(d, addr, len, &count, head);
	if (!t)
		return d->err ? d->err : -EAGAIN;
	for (i = 0; i < count; i++) {
		uint64_t a = vq_le64(t[i].addr);
		uint32_t l = vq_le32(t[i].len);
		uint16_t f = vq_le16(t[i].flags);

		if (unlikely(f & VQ_DESC_F_INDIRECT))
			return vq_dev_break(d, -EINVAL,
					    "2.8.19: nested indirect descriptor at entry %u (chain at slot %u)",
					    i, head);
		r = vq_chain_add_x(d, c, x, a, l, f & VQ_DESC_F_WRITE,
				   "indirect", i);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Pop the chain whose head flags (already loaded with acquire and found
 * available) are hflags. */
static int pop_chain(struct packed_dev *pd, struct vq_chain *c,
		     struct vq_xlate *x, uint16_t hflags, bool in_order)
{
	struct vq_dev *d = &pd->base;
	uint16_t head = pd->last_avail, pos = head, n = 0;
	bool wrap = pd->avail_wrap;
	uint16_t flags = hflags, id;
	int r;

	vq_chain_begin(c, head);
	for (;;) {
		const struct vq_packed_desc *desc = &pd->desc[pos];
		uint64_t addr;
		uint32_t len;

		if (n) {
			/* Every slot of the chain must be available in its own
			 * phase; anything else is a driver mixing laps. */
			flags = packed_flags_acquire(desc);
			if (unlikely(!packed_is_avail(flags, wrap)))
				return vq_dev_break(d, -EINVAL,
						    "2.8.1: slot %u (chain at slot %u) not available in wrap phase %u (flags 0x%x): wrap-counter confusion",
						    pos, head, wrap, flags);
		}
		addr = vq_le64(desc->addr);
		len = vq_le32(desc->len);
		id = vq_le16(desc->id);
		if (flags & VQ_DESC_F_INDIRECT) {
			if (unlikely(!pd->indirect))
				return vq_dev_break(d, -EINVAL,
						    "2.8.19: indirect descriptor at slot %u without VIRTIO_F_INDIRECT_DESC",
						    pos);
			if (unlikely(flags & VQ_DESC_F_NEXT))
				return vq_dev_break(d, -EINVAL,
						    "2.8.19: descriptor at slot %u has both INDIRECT and NEXT",
						    pos);
			r = pop_indirect(pd, c, x, addr, len, head);
		} else {
			r = vq_chain_add_x(d, c, x, addr, len,
					   flags & VQ_DESC_F_WRITE, "ring", pos);
		}
		if (r < 0)
			return r;
		n++;
		packed_advance(&pos, &wrap, 1, pd->num);
		if (!(flags & VQ_DESC_F_NEXT))
			break;
		if (unlikely(n >= pd->num))
			return vq_dev_break(d, -EINVAL,
					    "2.8.17: chain at slot %u is longer than the queue size %u",
					    head, pd->num);
	}
	/* 2.8.6: the buffer id is in the last descriptor of the chain. */
	r = pop_commit(pd, c, id, head, n, in_order);
	if (r > 0) {
		pd->last_avail = pos;
		pd->avail_wrap = wrap;
	}
	return r;
}

static inline __attribute__((always_inline)) int
pop_one(struct packed_dev *pd, struct vq_chain *c, struct vq_xlate *x,
	bool in_order)
{
	uint16_t flags = packed_flags_acquire(&pd->desc[pd->last_avail]);

	if (!packed_is_avail(flags, pd->avail_wrap))
		return 0;
	return pop_chain(pd, c, x, flags, in_order);
}

static int packed_pop(struct vq_dev *d, struct vq_chain *c)
{
	struct packed_dev *pd = to_pd(d);
	struct vq_xlate x = VQ_XLATE_EMPTY;

	return pop_one(pd, c, &x, pd->in_order);
}

/* Descriptors in one 64-byte line of the ring. */
#define BATCH 4
/* Unrolled whole: the four stay in registers, not in an array on the stack. */
#define VQ_UNROLL _Pragma("GCC unroll 4")
/* The flags bits that must read "available, single descriptor": AVAIL and
 * USED as the phase says, no NEXT, no INDIRECT.  WRITE may be either. */
#define BATCH_FLAGS (VQ_DESC_F_AVAIL | VQ_DESC_F_USED | VQ_DESC_F_NEXT | \
		     VQ_DESC_F_INDIRECT)

/*
 * Pop the four single-descriptor chains of one 64-byte line of the ring
 * (DPDK's batched dequeue).  The four flags words are loaded and checked
 * together, then the four bodies read and their translations through the
 * burst's region checked together; when all four pass, each id is checked
 * and the chain recorded with no other test.  A line that is not all
 * available, single and translatable from the cache goes descriptor by
 * descriptor through the same checks as pop_chain.  Returns 4; 0 when the
 * line is not all available single descriptors (the caller pops one by
 * one); or on a bad descriptor the count popped before it, or -errno if
 * none, with the queue broken.
 */
static inline __attribute__((always_inline)) int
pop_batch(struct packed_dev *pd, struct vq_chain *c, struct vq_xlate *x,
	  bool in_order)
{
	struct vq_dev *d = &pd->base;
	uint16_t pos = pd->last_avail, num = pd->num;
	const struct vq_packed_desc *dp = &pd->desc[pos];
	bool wrap = pd->avail_wrap;
	uint16_t want = packed_avail_flags(wrap), f[BATCH], id[BATCH];
	uint64_t addr[BATCH], off[BATCH];
	uint32_t len[BATCH];
	uint8_t *hva = x->hva;
	bool fast = true;
	unsigned i;

	if (pos % BATCH || pos + BATCH > num)
		return 0;
	/* In ring order, each with acquire (P1): a line the driver is still
	 * filling is left to the one-by-one path. */
	VQ_UNROLL
	for (i = 0; i < BATCH; i++)
		f[i] = packed_flags_acquire(&dp[i]);
	if (((f[0] ^ want) | (f[1] ^ want) | (f[2] ^ want) | (f[3] ^ want)) &
	    BATCH_FLAGS)
		return 0;
	/* The bodies, each read once: the driver may rewrite them. */
	VQ_UNROLL
	for (i = 0; i < BATCH; i++) {
		addr[i] = vq_le64(dp[i].addr);
		len[i] = vq_le32(dp[i].len);
		id[i] = vq_le16(dp[i].id);
		fast &= vq_xlate_hit(x, addr[i], len[i], &off[i]) &
			(c[i].iov_max != 0);
	}
	VQ_UNROLL
	for (i = 0; i < BATCH; i++) {
		bool w = f[i] & VQ_DESC_F_WRITE;
		int r = 0;

		if (likely(fast))
			vq_chain_set_one(&c[i], hva + off[i], len[i], w, pos + i);
		else
			r = vq_chain_one(d, &c[i], x, pos + i, addr[i], len[i],
					 w, "ring", pos + i);
		if (likely(r >= 0))
			r = pop_commit(pd, &c[i], id[i], pos + i, 1, in_order);
		if (unlikely(r < 0)) {
			pd->last_avail = pos + i;
			return i ? (int)i : r;
		}
	}
	packed_advance(&pd->last_avail, &pd->avail_wrap, BATCH, num);
	return BATCH;
}

static inline __attribute__((always_inline)) int
pop_burst(struct vq_dev *d, struct vq_chain *c, unsigned n, bool in_order)
{
	struct packed_dev *pd = to_pd(d);
	struct vq_xlate x = VQ_XLATE_EMPTY;
	unsigned done = 0;
	int r;

	while (done < n) {
		if (n - done >= BATCH) {
			r = pop_batch(pd, &c[done], &x, in_order);
			if (r == BATCH) {
				done += BATCH;
				continue;
			}
			if (r != 0)
				return r > 0 ? (int)done + r : (done ? (int)done : r);
		}
		r = pop_one(pd, &c[done], &x, in_order);
		if (r <= 0)
			return done ? (int)done : r;
		done++;
	}
	return (int)done;
}

static int packed_pop_burst(struct vq_dev *d, struct vq_chain *c, unsigned n)
{
	return pop_burst(d, c, n, false);
}

static int packed_pop_burst_in_order(struct vq_dev *d, struct vq_chain *c,
				     unsigned n)
{
	return pop_burst(d, c, n, true);
}

/* Move a position (with its wrap counter) n slots back, n <= num. */
static void rewind_pos(uint16_t *pos, bool *wrap, uint32_t n, uint16_t num)
{
	uint32_t p = *pos;

	if (p < n) {
		p += num;
		*wrap = !*wrap;
	}
	*pos = (uint16_t)(p - n);
}

static int packed_unpop(struct vq_dev *d, const struct vq_chain *c, unsigned n)
{
	struct packed_dev *pd = to_pd(d);
	uint16_t pos = pd->last_avail;
	bool wrap = pd->avail_wrap;
	unsigned i;

	if (n > pd->num || (pd->in_order && n > pd->popped - pd->filled))
		return -EINVAL;
	/* The chains must be the last ones popped, unfilled: walking back
	 * from last_avail by their slots must land on each one's head. */
	for (i = n; i-- > 0;) {
		uint16_t id = c[i].id;
		const struct pdev_id *s;

		if (id >= pd->num)
			return -EINVAL;
		s = &pd->ids[id];
		if (pd->in_order ? s->seq <= pd->filled : s->state != ID_POPPED)
			return -EINVAL;
		rewind_pos(&pos, &wrap, s->ndesc, pd->num);
		if (s->head != (pos | (uint16_t)wrap << VQ_EVENT_WRAP_SHIFT))
			return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		pd->ids[c[i].id].state = ID_FREE;
		pd->ids[c[i].id].seq = 0;
	}
	if (pd->in_order)
		pd->popped -= n;
	/* Rewound by slots, not buffers, the phase flipped back across 0. */
	pd->last_avail = pos;
	pd->avail_wrap = wrap;
	return 0;
}

/* ---- fill and flush ---- */

static int packed_fill(struct vq_dev *d, const struct vq_chain *c, uint32_t len)
{
	struct packed_dev *pd = to_pd(d);
	uint16_t id = c->id;
	uint32_t k = pd->nstage;
	struct pdev_id *s;

	if (unlikely(id >= pd->num))
		return -EINVAL;
	s = &pd->ids[id];
	if (unlikely(s->state != ID_POPPED || len > s->in_len))
		return -EINVAL;
	s->state = ID_STAGED;
	pd->stage[k] = (struct pdev_stage){ .id = id, .ndesc = s->ndesc,
					    .len = len };
	pd->nstage = k + 1;
	return 0;
}

static int packed_fill_in_order(struct vq_dev *d, const struct vq_chain *c,
				uint32_t len)
{
	struct packed_dev *pd = to_pd(d);
	struct pdev_stage *st;
	struct pdev_id *s;

	if (c->id >= pd->num)
		return -EINVAL;
	s = &pd->ids[c->id];
	/* 2.8.8: buffers are used in the order they were made available:
	 * this one must be the oldest popped and not yet filled. */
	if (s->seq != pd->filled + 1 || len > s->in_len)
		return -EINVAL;
	pd->filled++;
	/* Join the open batch (its buffers so far all written completely),
	 * or open one.  A partly written buffer closes its batch; so does a
	 * whole ring of slots, which only a driver re-offering slots still
	 * in flight can reach: one advance never moves more than a ring. */
	st = pd->nstage ? &pd->stage[pd->nstage - 1] : NULL;
	if (!st || !st->complete || st->ndesc + s->ndesc > pd->num) {
		st = &pd->stage[pd->nstage++];
		st->ndesc = 0;
	}
	st->id = c->id;
	st->len = len;
	st->ndesc = (uint16_t)(st->ndesc + s->ndesc);
	st->complete = len == s->in_len;
	return 0;
}

static uint16_t used_flags(bool wrap, uint32_t len)
{
	/* WRITE says the device wrote len bytes, as Linux's vhost does. */
	return packed_used_flags(wrap) | (len ? VQ_DESC_F_WRITE : 0);
}

/* Count published slots; a whole ring or more already means "signal", so
 * the count saturates there instead of wrapping. */
static void add_unsignalled(struct packed_dev *pd, uint32_t slots)
{
	pd->unsignalled += slots;
	if (pd->unsignalled > pd->num)
		pd->unsignalled = pd->num;
}

/*
 * Write the staged used descriptors at last_used and publish them.  The
 * driver reads used descriptors in ring order from the first, so every
 * other one is written whole (len, id and flags in one store) and the
 * first one's flags, stored last with release, publish the lot.  Without
 * IN_ORDER each buffer's id leaves flight here.
 */
static inline __attribute__((always_inline)) void
publish_stage(struct packed_dev *pd, bool in_order)
{
	/* Locals: the compiler cannot tell the ring's stores from pd's. */
	const struct pdev_stage *st = pd->stage;
	struct vq_packed_desc *desc = pd->desc;
	struct pdev_id *ids = pd->ids;
	uint16_t pos = pd->last_used, first = pos, first_flags, num = pd->num;
	bool wrap = pd->used_wrap;
	uint32_t i, k = pd->nstage, slots = 0;

	first_flags = used_flags(wrap, st[0].len);
	desc[pos].id = vq_le16(st[0].id);
	desc[pos].len = vq_le32(st[0].len);
	for (i = 0; i < k; i++) {
		if (i)
			packed_store_tail(&desc[pos], st[i].len, st[i].id,
					  used_flags(wrap, st[i].len));
		if (!in_order)
			ids[st[i].id].state = ID_FREE;
		packed_advance(&pos, &wrap, st[i].ndesc, num);
		slots += st[i].ndesc;
	}
	vq_store_release(&desc[first].flags, vq_le16(first_flags));
	pd->last_used = pos;
	pd->used_wrap = wrap;
	add_unsignalled(pd, slots);
	pd->nstage = 0;
}

static int packed_flush(struct vq_dev *d)
{
	struct packed_dev *pd = to_pd(d);
	uint32_t k = pd->nstage;

	if (!k)
		return 0;
	publish_stage(pd, false);
	return (int)k;
}

/*
 * IN_ORDER: one used descriptor per batch, at the batch's first slot, with
 * the id and length of its last buffer; the used position skips every slot
 * of the batch.  fill built the batches; the buffers in them leave flight
 * together as flushed catches up with filled.
 */
static int packed_flush_in_order(struct vq_dev *d)
{
	struct packed_dev *pd = to_pd(d);
	uint64_t k = pd->filled - pd->flushed;

	if (!k)
		return 0;
	publish_stage(pd, true);
	pd->flushed = pd->filled;
	return (int)k;
}

/* ---- notifications ---- */

static bool packed_should_signal(struct vq_dev *d)
{
	struct packed_dev *pd = to_pd(d);
	uint16_t off_wrap, flags;
	bool need;

	if (!pd->unsignalled)
		return false;
	/* V3: our used descriptors before the driver's event structure. */
	vq_mb();
	packed_event_read(pd->drv_event, &off_wrap, &flags);
	if (flags == VQ_EVENT_F_DISABLE)
		return false;
	if (flags == VQ_EVENT_F_DESC && pd->event_idx && pd->signalled_valid)
		need = packed_need_event(off_wrap, pd->num, pd->last_used,
					 pd->used_wrap, pd->unsignalled);
	else
		need = true;    /* ENABLE, or nothing to compare against */
	if (need) {
		pd->unsignalled = 0;
		pd->signalled_valid = true;
	}
	return need;
}

static void set_dev_flags(struct packed_dev *pd, uint16_t flags)
{
	if (pd->dev_flags_shadow != flags) {
		vq_store_release(&pd->dev_event->flags, vq_le16(flags));
		pd->dev_flags_shadow = flags;
	}
}

static void packed_disable_notify(struct vq_dev *d)
{
	set_dev_flags(to_pd(d), VQ_EVENT_F_DISABLE);
}

static bool avail_now(struct packed_dev *pd)
{
	return packed_is_avail(packed_flags_acquire(&pd->desc[pd->last_avail]),
			       pd->avail_wrap);
}

static int packed_enable_notify(struct vq_dev *d)
{
	struct packed_dev *pd = to_pd(d);

	if (pd->event_idx) {
		/* P4: the event offset before the flags that enable it. */
		vq_store_relaxed(&pd->dev_event->off_wrap,
				 vq_le16(pd->last_avail |
					 (uint16_t)pd->avail_wrap << VQ_EVENT_WRAP_SHIFT));
		set_dev_flags(pd, VQ_EVENT_F_DESC);
	} else {
		set_dev_flags(pd, VQ_EVENT_F_ENABLE);
	}
	/* V4: the enable must be visible before we look at the ring again,
	 * or a buffer added meanwhile would go unnoticed by both sides. */
	vq_mb();
	return avail_now(pd);
}

static bool packed_has_avail(struct vq_dev *d)
{
	return avail_now(to_pd(d));
}

static void packed_prefetch_avail(const struct vq_dev *d)
{
	const struct packed_dev *pd = to_pd_const(d);

	__builtin_prefetch(&pd->desc[pd->last_avail]);
}

static struct vq_dev_state packed_get_state(const struct vq_dev *d)
{
	const struct packed_dev *pd = to_pd_const(d);

	return (struct vq_dev_state){
		.avail_idx = pd->last_avail |
			     (uint16_t)pd->avail_wrap << VQ_EVENT_WRAP_SHIFT,
		.used_idx = pd->last_used |
			    (uint16_t)pd->used_wrap << VQ_EVENT_WRAP_SHIFT,
	};
}

static void packed_dev_reset(struct vq_dev *d)
{
	struct packed_dev *pd = to_pd(d);

	pd->last_avail = d->cfg.avail_idx & PACKED_POS_MASK;
	pd->avail_wrap = d->cfg.avail_idx >> VQ_EVENT_WRAP_SHIFT;
	pd->last_used = d->cfg.used_idx & PACKED_POS_MASK;
	pd->used_wrap = d->cfg.used_idx >> VQ_EVENT_WRAP_SHIFT;
	pd->unsignalled = 0;
	pd->signalled_valid = false;
	pd->dev_flags_shadow = DEV_FLAGS_UNKNOWN;
	pd->nstage = 0;
	pd->popped = pd->filled = pd->flushed = 0;
	memset(pd->ids, 0, sizeof(*pd->ids) * pd->num);
}

static void packed_dev_destroy(struct vq_dev *d)
{
	struct packed_dev *pd = to_pd(d);

	free(pd->stage);
	free(pd->ids);
	free(pd);
}

static const struct vq_dev_ops packed_dev_ops = {
	.pop = packed_pop,
	.pop_burst = packed_pop_burst,
	.unpop = packed_unpop,
	.fill = packed_fill,
	.flush = packed_flush,
	.should_signal = packed_should_signal,
	.disable_notify = packed_disable_notify,
	.enable_notify = packed_enable_notify,
	.has_avail = packed_has_avail,
	.prefetch_avail = packed_prefetch_avail,
	.get_state = packed_get_state,
	.reset = packed_dev_reset,
	.destroy = packed_dev_destroy,
};

static const struct vq_dev_ops packed_dev_in_order_ops = {
	.pop = packed_pop,
	.pop_burst = packed_pop_burst_in_order,
	.unpop = packed_unpop,
	.fill = packed_fill_in_order,
	.flush = packed_flush_in_order,
	.should_signal = packed_should_signal,
	.disable_notify = packed_disable_notify,
	.enable_notify = packed_enable_notify,
	.has_avail = packed_has_avail,
	.prefetch_avail = packed_prefetch_avail,
	.get_state = packed_get_state,
	.reset = packed_dev_reset,
	.destroy = packed_dev_destroy,
};

int vq_packed_dev_new(const struct vq_dev_config *cfg, struct vq_dev **out)
{
	struct packed_dev *pd;

	*out = NULL;
	if ((cfg->avail_idx & PACKED_POS_MASK) >= cfg->num ||
	    (cfg->used_idx & PACKED_POS_MASK) >= cfg->num)
		return -EINVAL;
	pd = vq_ring_zalloc(1, sizeof(*pd));
	if (!pd)
		return -ENOMEM;
	pd->stage = vq_ring_zalloc(cfg->num, sizeof(*pd->stage));
	pd->ids = vq_ring_zalloc(cfg->num, sizeof(*pd->ids));
	pd->in_order = vq_has(cfg->features, VQ_F_IN_ORDER);
	if (!pd->stage || !pd->ids) {
		packed_dev_destroy(&pd->base);
		return -ENOMEM;
	}
	pd->base.ops = pd->in_order ? &packed_dev_in_order_ops : &packed_dev_ops;
	pd->base.cfg = vq_dev_setup_of(cfg);
	pd->desc = cfg->ring.desc;
	pd->drv_event = cfg->ring.driver;
	pd->dev_event = cfg->ring.device;
	pd->num = cfg->num;
	pd->event_idx = vq_has(cfg->features, VQ_F_EVENT_IDX);
	pd->indirect = vq_has(cfg->features, VQ_F_INDIRECT_DESC);
	packed_dev_reset(&pd->base);
	*out = &pd->base;
	return 0;
}
