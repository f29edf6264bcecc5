// SPDX-License-Identifier: MIT
/*
 * The split virtqueue, device side (virtio 1.2 §2.7): the vhost role.
 *
 * The driver is an adversary.  Every index, head, next link, flag and length
 * read from the ring is validated before it is used; a bad one breaks the
 * queue with a message naming the rule.  Descriptors are copied out of shared
 * memory once, so a driver rewriting them under our feet cannot make us see
 * two different values.
 *
 * Two ops tables: the general one and the VQ_F_IN_ORDER variant, which
 * checks that descriptors are used in table order and publishes one used
 * element per batch.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ring_internal.h"

enum { HEAD_FREE = 0, HEAD_POPPED, HEAD_STAGED };

/* What we remember about a head between pop and flush.  Kept here, not read
 * back from the ring, which the driver may have rewritten. */
struct dev_head {
	uint64_t in_len;
	uint16_t ndesc;
	uint8_t state;
};

struct dev_staged {
	uint16_t id;
	uint32_t len;
};

struct split_dev {
	struct vq_dev base;
	uint16_t num, mask;
	bool event_idx, indirect_ok;
	struct vq_desc *desc;
	struct vq_avail *avail;
	struct vq_used *used;

	uint16_t last_avail;            /* next avail ring entry to read */
	uint16_t avail_shadow;          /* avail->idx as last read (validated) */
	uint16_t used_idx;              /* used->idx as last published */
	uint16_t used_flags;            /* shadow of used->flags */
	bool used_flags_known;          /* shadow matches the ring */
	/* Among 16-bit fields, not beside desc_inflight or nstaged, which a
	 * pop or a fill updates with it: gcc -O3 merged adjacent 32-bit
	 * increments into one 8-byte vector add, whose load waits for the
	 * last pop's 4-byte stores (more instructions per chain and a slower
	 * split ring: measured in a4fa3b4). */
	uint32_t popped_unfilled;       /* chains popped, not filled (unpop bound) */

	/* In-order: descriptor counter, apart from the buffer counter. */
	uint16_t next_head;
	bool next_head_known;           /* false after resuming: learnt from the first pop */
	uint16_t fill_pos;              /* avail position of the next chain to fill */

	uint32_t desc_inflight;         /* descriptors popped and not yet used */

	/* Call suppression (V3). */
	uint16_t signalled_used;
	bool signalled_valid;
	uint32_t unsignalled;           /* buffers published since the last signal */

	struct dev_head *head;          /* [num] */
	uint16_t *log;                  /* [num]: head popped at avail position p & mask */
	struct dev_staged *stage;       /* [num] */
	unsigned nstaged;
};

static inline struct split_dev *to_sd(struct vq_dev *d)
{
	return (struct split_dev *)d;
}

static inline uint16_t *used_event_ptr(struct split_dev *s)
{
	return &s->avail->ring[s->num];
}

static inline uint16_t *avail_event_ptr(struct split_dev *s)
{
	return (uint16_t *)&s->used->ring[s->num];
}

static void sd_reset(struct vq_dev *d)
{
	struct split_dev *s = to_sd(d);

	s->last_avail = d->cfg.avail_idx;
	s->avail_shadow = d->cfg.avail_idx;
	s->used_idx = d->cfg.used_idx;
	s->used_flags = 0;
	s->used_flags_known = false;
	/* A fresh ring starts at descriptor 0; a resumed one continues where
	 * the driver's descriptor counter is, which only the driver knows. */
	s->next_head = 0;
	s->next_head_known = d->cfg.avail_idx == 0 && d->cfg.used_idx == 0;
	s->fill_pos = d->cfg.avail_idx;
	s->desc_inflight = 0;
	s->popped_unfilled = 0;
	s->signalled_used = d->cfg.used_idx;
	s->signalled_valid = false;
	s->unsignalled = 0;
	s->nstaged = 0;
	memset(s->head, 0, sizeof(*s->head) * s->num);
}

/* Take a value of avail->idx just read (V1): it may run at most a queue
 * size ahead of what we consumed.  0, or the error that broke the queue. */
static int sd_take_avail_idx(struct split_dev *s, uint16_t idx)
{
	if (unlikely((uint16_t)(idx - s->last_avail) > s->num))
		return vq_dev_break(&s->base, -EINVAL,
				    "2.7.13.3: avail index moved from %u to %u, more than the queue size %u",
				    s->avail_shadow, idx, s->num);
	s->avail_shadow = idx;
	return 0;
}

/*
 * How many chains the driver has made available beyond last_avail.  Reads
 * avail->idx (acquire, V1) only when the cached value is used up.
 */
static int sd_avail_count(struct split_dev *s)
{
	if (s->last_avail == s->avail_shadow) {
		int r = sd_take_avail_idx(s, vq_le16(vq_load_acquire(&s->avail->idx)));

		if (r)
			return r;
	}
	return (uint16_t)(s->avail_shadow - s->last_avail);
}

/* Walk an indirect table (2.7.5.3): follow NEXT inside it, bounded by its size. */
static int sd_walk_indirect(struct split_dev *s, struct vq_chain *c,
			    struct vq_xlate *x, const struct vq_desc *ind,
			    unsigned at)
{
	struct vq_dev *d = &s->base;
	const struct vq_desc *tbl;
	unsigned count, i = 0, steps = 0;
	int r;

	tbl = vq_indirect_table(d, vq_le64(ind->addr), vq_le32(ind->len), &count,
				c->id);
	if (!tbl)
		return d->err ? d->err : -EAGAIN;
	for (;;) {
		struct vq_desc dsc;
		uint16_t flags;

		memcpy(&dsc, &tbl[i], sizeof(dsc));
		flags = vq_le16(dsc.flags);
		if (unlikely(++steps > count))
			return vq_dev_break(d, -EINVAL,
					    "2.7.5.2: loop in the indirect table of %u entries (head %u, descriptor %u)",
					    count, c->id, at);
		if (unlikely(flags & VQ_DESC_F_INDIRECT))
			return vq_dev_break(d, -EINVAL,
					    "2.7.5.3.1: nested indirect descriptor at entry %u of the indirect table (head %u)",
					    i, c->id);
		r = vq_chain_add_x(d, c, x, vq_le64(dsc.addr), vq_le32(dsc.len),
				   flags & VQ_DESC_F_WRITE, "indirect", i);
		if (r < 0)
			return r;
		if (!(flags & VQ_DESC_F_NEXT))
			return 0;
		i = vq_le16(dsc.next);
		if (unlikely(i >= count))
			return vq_dev_break(d, -EINVAL,
					    "2.7.5.3: indirect next index %u >= table size %u (head %u)",
					    i, count, c->id);
	}
}

/* Pop one chain: the shared part of both variants.  x: the burst's region. */
static inline __attribute__((always_inline)) int
sd_pop_common(struct vq_dev *d, struct vq_chain *c, struct vq_xlate *x,
	      bool in_order)
{
	struct split_dev *s = to_sd(d);
	uint16_t head, i;
	unsigned ndesc = 0;
	int r;

	r = sd_avail_count(s);
	if (r <= 0)
		return r;
	head = vq_le16(s->avail->ring[s->last_avail & s->mask]);
	if (unlikely(head >= s->num))
		return vq_dev_break(d, -EINVAL,
				    "2.7.6: avail ring entry %u: head %u >= queue size %u",
				    s->last_avail, head, s->num);
	if (in_order) {
		if (!s->next_head_known) {
			s->next_head = head;
			s->next_head_known = true;
		}
		if (unlikely(head != s->next_head))
			return vq_dev_break(d, -EINVAL,
					    "2.7.5: IN_ORDER violated: head %u made available, expected %u",
					    head, s->next_head);
	}
	if (unlikely(s->head[head].state != HEAD_FREE))
		return vq_dev_break(d, -EINVAL,
				    "2.7.13.1: head %u made available while still in flight",
				    head);

	vq_chain_begin(c, head);
	i = head;
	for (;;) {
		struct vq_desc dsc;
		uint16_t flags, next;

		if (unlikely(++ndesc > s->num))
			return vq_dev_break(d, -EINVAL,
					    "2.7.5.2: loop: the chain at head %u is longer than the queue size %u",
					    head, s->num);
		memcpy(&dsc, &s->desc[i], sizeof(dsc));
		flags = vq_le16(dsc.flags);
		if (flags & VQ_DESC_F_INDIRECT) {
			if (unlikely(!s->indirect_ok))
				return vq_dev_break(d, -EINVAL,
						    "2.7.5.3.1: descriptor %u (head %u) is INDIRECT without VIRTIO_F_INDIRECT_DESC",
						    i, head);
			if (unlikely(flags & VQ_DESC_F_NEXT))
				return vq_dev_break(d, -EINVAL,
						    "2.7.5.3.1: descriptor %u (head %u) has INDIRECT together with NEXT",
						    i, head);
			/* A chain may end with one indirect table (as vhost
			 * and vringh accept). */
			r = sd_walk_indirect(s, c, x, &dsc, i);
			if (r < 0)
				return r;
			break;
		}
		r = vq_chain_add_x(d, c, x, vq_le64(dsc.addr), vq_le32(dsc.len),
				   flags & VQ_DESC_F_WRITE, "ring", i);
		if (r < 0)
			return r;
		if (!(flags & VQ_DESC_F_NEXT))
			break;
		next = vq_le16(dsc.next);
		if (unlikely(next >= s->num))
			return vq_dev_break(d, -EINVAL,
					    "2.7.5: descriptor %u: next index %u >= queue size %u (head %u)",
					    i, next, s->num, head);
		if (in_order && unlikely(next != ((i + 1) & s->mask)))
			return vq_dev_break(d, -EINVAL,
					    "2.7.5.2: IN_ORDER violated: descriptor %u chains to %u, not %u (head %u)",
					    i, next, (i + 1) & s->mask, head);
		i = next;
	}
	/* The driver cannot have more descriptors in flight than the table
	 * holds: a chain sharing descriptors with an in-flight one. */
	if (unlikely(s->desc_inflight + ndesc > s->num))
		return vq_dev_break(d, -EINVAL,
				    "2.7.13.1: head %u: %u descriptors in flight plus %u exceed the queue size %u",
				    head, s->desc_inflight, ndesc, s->num);

	c->ndesc = ndesc;
	s->head[head].state = HEAD_POPPED;
	s->head[head].ndesc = ndesc;
	s->head[head].in_len = c->in_len;
	s->log[s->last_avail & s->mask] = head;
	s->last_avail++;
	s->desc_inflight += ndesc;
	s->popped_unfilled++;
	if (in_order)
		s->next_head = (s->next_head + ndesc) & s->mask;
	return 1;
}

static int sd_pop(struct vq_dev *d, struct vq_chain *c)
{
	struct vq_xlate x = VQ_XLATE_EMPTY;

	return sd_pop_common(d, c, &x, false);
}

static int sd_pop_in_order(struct vq_dev *d, struct vq_chain *c)
{
	struct vq_xlate x = VQ_XLATE_EMPTY;

	return sd_pop_common(d, c, &x, true);
}

/*
 * Pop the run of plain single-descriptor chains at last_avail, up to n of
 * them (all of them in avail_shadow), with the queue's state in registers:
 * the checks of sd_pop_common for such a chain, folded.  It stops before
 * anything else (a chain, an indirect table, a region the cache does not
 * hold) and anything wrong, which sd_pop_common reads again and handles or
 * reports.  Returns how many it popped.
 */
static inline __attribute__((always_inline)) unsigned
sd_pop_singles(struct split_dev *s, struct vq_chain *c, unsigned n,
	       const struct vq_xlate *x, bool in_order)
{
	uint16_t last = s->last_avail, mask = s->mask, num = s->num;
	uint16_t next_head = s->next_head;
	uint32_t inflight = s->desc_inflight;
	unsigned i;

	if (in_order && !s->next_head_known)
		return 0;
	for (i = 0; i < n; i++) {
		uint16_t pos = (uint16_t)(last + i) & mask, head, flags;
		struct dev_head *h;
		struct vq_desc dsc;
		uint64_t off;
		uint32_t len;
		bool w;

		head = vq_le16(s->avail->ring[pos]);
		if (head >= num || (in_order && head != next_head) ||
		    inflight >= num)
			break;
		h = &s->head[head];
		if (h->state != HEAD_FREE)
			break;
		memcpy(&dsc, &s->desc[head], sizeof(dsc));
		flags = vq_le16(dsc.flags);
		len = vq_le32(dsc.len);
		if ((flags & (VQ_DESC_F_NEXT | VQ_DESC_F_INDIRECT)) ||
		    !vq_xlate_hit(x, vq_le64(dsc.addr), len, &off) ||
		    !c[i].iov_max)
			break;
		w = flags & VQ_DESC_F_WRITE;
		vq_chain_set_one(&c[i], x->hva + off, len, w, head);
		c[i].ndesc = 1;
		h->state = HEAD_POPPED;
		h->ndesc = 1;
		h->in_len = w ? len : 0;
		s->log[pos] = head;
		inflight++;
		next_head = (next_head + 1) & mask;
	}
	s->last_avail = (uint16_t)(last + i);
	s->desc_inflight = inflight;
	s->popped_unfilled += i;
	if (in_order)
		s->next_head = next_head;
	return i;
}

/*
 * Pop up to n chains.  The head descriptors' lines are requested for the
 * whole burst first, so that their misses (lines the driver just wrote)
 * overlap instead of being taken one chain at a time.  The heads read here
 * only steer prefetches (masked into the table); sd_pop_common reads and
 * validates them again.
 */
static inline __attribute__((always_inline)) int
sd_pop_burst_common(struct vq_dev *d, struct vq_chain *c, unsigned n,
		    bool in_order)
{
	struct split_dev *s = to_sd(d);
	struct vq_xlate x = VQ_XLATE_EMPTY;
	int avail = sd_avail_count(s);
	unsigned i;

	if (avail <= 0)
		return avail;
	if (n > (unsigned)avail)
		n = (unsigned)avail;
	for (i = 1; i < n; i++) {
		uint16_t head = vq_le16(s->avail->ring[(uint16_t)(s->last_avail + i) & s->mask]);

		__builtin_prefetch(&s->desc[head & s->mask]);
	}
	for (i = 0; i < n; i++) {
		int r;

		i += sd_pop_singles(s, &c[i], n - i, &x, in_order);
		if (i == n)
			break;
		r = sd_pop_common(d, &c[i], &x, in_order);
		if (r <= 0)
			return i ? (int)i : r;
	}
	return (int)n;
}

static int sd_pop_burst(struct vq_dev *d, struct vq_chain *c, unsigned n)
{
	return sd_pop_burst_common(d, c, n, false);
}

static int sd_pop_burst_in_order(struct vq_dev *d, struct vq_chain *c, unsigned n)
{
	return sd_pop_burst_common(d, c, n, true);
}

static int sd_unpop(struct vq_dev *d, const struct vq_chain *c, unsigned n)
{
	struct split_dev *s = to_sd(d);
	unsigned i, ndesc = 0;

	if (n > s->popped_unfilled)
		return -EINVAL;
	/* c[0..n) must be the last n chains popped, none filled since. */
	for (i = 0; i < n; i++) {
		uint16_t pos = (uint16_t)(s->last_avail - n + i);
		uint16_t id = c[i].id;

		if (id >= s->num || s->log[pos & s->mask] != id ||
		    s->head[id].state != HEAD_POPPED)
			return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		struct dev_head *h = &s->head[c[i].id];

		ndesc += h->ndesc;
		h->state = HEAD_FREE;
	}
	s->last_avail -= n;
	s->popped_unfilled -= n;
	s->desc_inflight -= ndesc;
	s->next_head = (s->next_head - ndesc) & s->mask;
	return 0;
}

static int sd_fill(struct vq_dev *d, const struct vq_chain *c, uint32_t len)
{
	struct split_dev *s = to_sd(d);
	uint16_t id = c->id;

	if (id >= s->num || s->head[id].state != HEAD_POPPED ||
	    len > s->head[id].in_len)
		return -EINVAL;
	s->head[id].state = HEAD_STAGED;
	s->stage[s->nstaged].id = id;
	s->stage[s->nstaged].len = len;
	s->nstaged++;
	s->popped_unfilled--;
	return 0;
}

static int sd_fill_in_order(struct vq_dev *d, const struct vq_chain *c, uint32_t len)
{
	struct split_dev *s = to_sd(d);
	int r;

	/* Chains are filled in the order they were popped. */
	if (s->fill_pos == s->last_avail || c->id != s->log[s->fill_pos & s->mask])
		return -EINVAL;
	r = sd_fill(d, c, len);
	if (r == 0)
		s->fill_pos++;
	return r;
}

/* After publishing: forget the used heads, track call suppression state. */
static void sd_published(struct split_dev *s, uint16_t old, unsigned n)
{
	uint16_t new_idx = (uint16_t)(old + n);
	unsigned i;

	for (i = 0; i < s->nstaged; i++) {
		struct dev_head *h = &s->head[s->stage[i].id];

		s->desc_inflight -= h->ndesc;
		h->state = HEAD_FREE;
	}
	s->nstaged = 0;
	/* The used index passed signalled_used: 2^16 entries went by without
	 * a signal and the old value means nothing any more
	 * (docs/RULES.md, "2^16 without a signal"). */
	if ((uint16_t)(new_idx - s->signalled_used) < (uint16_t)(new_idx - old))
		s->signalled_valid = false;
	s->used_idx = new_idx;
	s->unsignalled += n;
}

static void sd_write_elem(struct split_dev *s, uint16_t pos, uint16_t id, uint32_t len)
{
	struct vq_used_elem *e = &s->used->ring[pos & s->mask];

	e->id = vq_le32(id);
	e->len = vq_le32(len);
}

static int sd_flush(struct vq_dev *d)
{
	struct split_dev *s = to_sd(d);
	unsigned n = s->nstaged, first, i;
	uint16_t old = s->used_idx;

	if (n == 0)
		return 0;
	/* Written in two parts when the burst crosses the end of the used
	 * ring (2.7.8), then one release store of the index (V2). */
	first = s->num - (old & s->mask);
	if (first > n)
		first = n;
	for (i = 0; i < first; i++)
		sd_write_elem(s, old + i, s->stage[i].id, s->stage[i].len);
	for (; i < n; i++)
		sd_write_elem(s, old + i, s->stage[i].id, s->stage[i].len);
	vq_store_release(&s->used->idx, vq_le16((uint16_t)(old + n)));
	sd_published(s, old, n);
	return (int)n;
}

/*
 * In-order (2.7.9): one used element per batch, at the batch's first slot,
 * naming its last buffer with that buffer's length.  A batch is a run of
 * buffers written completely; one written partly ends its batch.
 */
static int sd_flush_in_order(struct vq_dev *d)
{
	struct split_dev *s = to_sd(d);
	unsigned n = s->nstaged, i, start = 0;
	uint16_t old = s->used_idx;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++) {
		const struct dev_staged *st = &s->stage[i];
		bool complete = st->len == s->head[st->id].in_len;

		if (complete && i + 1 < n)
			continue;
		sd_write_elem(s, old + start, st->id, st->len);
		start = i + 1;
	}
	vq_store_release(&s->used->idx, vq_le16((uint16_t)(old + n)));
	sd_published(s, old, n);
	return (int)n;
}

static bool sd_should_signal(struct vq_dev *d)
{
	struct split_dev *s = to_sd(d);
	uint16_t old, event;
	bool valid;

	if (s->unsignalled == 0)
		return false;
	/* Our used index must be visible before we read the driver's
	 * suppression state (V3). */
	vq_mb();
	if (!s->event_idx) {
		if (vq_le16(vq_load_acquire(&s->avail->flags)) & VQ_AVAIL_F_NO_INTERRUPT)
			return false;
		s->unsignalled = 0;
		return true;
	}
	event = vq_le16(vq_load_acquire(used_event_ptr(s)));
	old = s->signalled_used;
	valid = s->signalled_valid;
	s->signalled_used = s->used_idx;
	s->signalled_valid = true;
	if (valid && !vq_need_event(event, s->used_idx, old))
		return false;
	s->unsignalled = 0;
	return true;
}

/* sd_should_signal with the window reaching back to the last signal sent
 * (used_idx - unsignalled) instead of the last look (signalled_used). */
static bool sd_signal_owed(struct vq_dev *d)
{
	struct split_dev *s = to_sd(d);
	uint16_t event;

	if (s->unsignalled == 0 || !s->event_idx)
		return sd_should_signal(d);     /* the flag is read afresh anyway */
	vq_mb();
	event = vq_le16(vq_load_acquire(used_event_ptr(s)));
	if (s->unsignalled <= UINT16_MAX &&
	    !vq_need_event(event, s->used_idx, (uint16_t)(s->used_idx - s->unsignalled)))
		return false;
	s->signalled_used = s->used_idx;
	s->signalled_valid = true;
	s->unsignalled = 0;
	return true;
}

static void sd_set_used_flags(struct split_dev *s, uint16_t flags)
{
	if (s->used_flags_known && s->used_flags == flags)
		return;
	vq_store_release(&s->used->flags, vq_le16(flags));
	s->used_flags = flags;
	s->used_flags_known = true;
}

static void sd_disable_notify(struct vq_dev *d)
{
	struct split_dev *s = to_sd(d);

	/* With EVENT_IDX the driver ignores the flag; avail_event stays where
	 * it is, so at most one more kick comes. */
	if (!s->event_idx)
		sd_set_used_flags(s, VQ_USED_F_NO_NOTIFY);
}

static int sd_enable_notify(struct vq_dev *d)
{
	struct split_dev *s = to_sd(d);
	uint16_t idx;
	int r;

	if (s->event_idx)
		vq_store_release(avail_event_ptr(s), vq_le16(s->last_avail));
	else
		sd_set_used_flags(s, 0);
	/* The store above must be visible before we look again (V4):
	 * otherwise a buffer added meanwhile is never kicked nor seen. */
	vq_mb();
	idx = vq_le16(vq_load_acquire(&s->avail->idx));
	r = sd_take_avail_idx(s, idx);
	if (r)
		return r;
	return idx != s->last_avail;
}

static bool sd_has_avail(struct vq_dev *d)
{
	struct split_dev *s = to_sd(d);

	/* Chains already seen in the index need no look at the driver's line. */
	if (s->avail_shadow != s->last_avail)
		return true;
	return vq_le16(vq_load_acquire(&s->avail->idx)) != s->last_avail;
}

static struct vq_dev_state sd_get_state(const struct vq_dev *d)
{
	const struct split_dev *s = (const struct split_dev *)d;

	return (struct vq_dev_state){ .avail_idx = s->last_avail,
				      .used_idx = s->used_idx };
}

static void sd_destroy(struct vq_dev *d)
{
	struct split_dev *s = to_sd(d);

	free(s->head);
	free(s->log);
	free(s->stage);
	free(s);
}

static const struct vq_dev_ops split_dev_ops = {
	.pop = sd_pop,
	.pop_burst = sd_pop_burst,
	.unpop = sd_unpop,
	.fill = sd_fill,
	.flush = sd_flush,
	.should_signal = sd_should_signal,
	.signal_owed = sd_signal_owed,
	.disable_notify = sd_disable_notify,
	.enable_notify = sd_enable_notify,
	.has_avail = sd_has_avail,
	.get_state = sd_get_state,
	.reset = sd_reset,
	.destroy = sd_destroy,
};

static const struct vq_dev_ops split_dev_in_order_ops = {
	.pop = sd_pop_in_order,
	.pop_burst = sd_pop_burst_in_order,
	.unpop = sd_unpop,
	.fill = sd_fill_in_order,
	.flush = sd_flush_in_order,
	.should_signal = sd_should_signal,
	.signal_owed = sd_signal_owed,
	.disable_notify = sd_disable_notify,
	.enable_notify = sd_enable_notify,
	.has_avail = sd_has_avail,
	.get_state = sd_get_state,
	.reset = sd_reset,
	.destroy = sd_destroy,
};

int vq_split_dev_new(const struct vq_dev_config *cfg, struct vq_dev **out)
{
	struct split_dev *s = vq_ring_zalloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->base.cfg = vq_dev_setup_of(cfg);
	s->num = cfg->num;
	s->mask = cfg->num - 1;
	s->event_idx = vq_has(cfg->features, VQ_F_EVENT_IDX);
	s->indirect_ok = vq_has(cfg->features, VQ_F_INDIRECT_DESC);
	s->desc = cfg->ring.desc;
	s->avail = cfg->ring.driver;
	s->used = cfg->ring.device;
	s->head = vq_ring_zalloc(cfg->num, sizeof(*s->head));
	s->log = vq_ring_zalloc(cfg->num, sizeof(*s->log));
	s->stage = vq_ring_zalloc(cfg->num, sizeof(*s->stage));
	if (!s->head || !s->log || !s->stage) {
		sd_destroy(&s->base);
		return -ENOMEM;
	}
	s->base.ops = vq_has(cfg->features, VQ_F_IN_ORDER) ?
		      &split_dev_in_order_ops : &split_dev_ops;
	sd_reset(&s->base);
	*out = &s->base;
	return 0;
}
