// SPDX-License-Identifier: MIT
/*
 * The packed virtqueue, driver side (virtio 1.2 §2.8; the role of Linux's
 * virtqueue_*_packed).
 *
 * Buffers are named by ids from a private free list; everything about a
 * buffer (token, slots, writable length) lives in private arrays, so a used
 * descriptor is only ever an index into them, checked before use.  Chains
 * are written at next_avail with the head's flags stored last (P1); used
 * descriptors are read at last_used, flags first (P3).
 *
 * Two ops tables: the plain one, and the VQ_F_IN_ORDER one, where a used
 * descriptor names the last buffer of a batch and completes every buffer
 * outstanding before it.  In order, buffers come back in the order they
 * were added, so ids are handed out in sequence (modulo num) instead of
 * from the free list: the outstanding ids are the run [oldest, oldest +
 * nbufs), and the next one to complete is always oldest.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "packed.h"
#include "cpu.h"

#define ID_NONE 0xffffu

struct pdrv_id {
	void *token;            /* NULL: free */
	uint64_t in_len;        /* writable bytes */
	uint16_t ndesc;         /* ring slots taken */
	uint16_t next_free;
};

struct packed_drv {
	struct vq_drv base;
	struct vq_packed_desc *desc;
	struct vq_event_suppress *drv_event;         /* we write it */
	struct vq_event_suppress *dev_event;         /* the device writes it */
	uint16_t num;
	bool event_idx, indirect, in_order;
	bool prefetchw;                 /* the CPU has PREFETCHW */

	uint16_t next_avail;
	bool avail_wrap;
	uint16_t last_used;
	bool used_wrap;

	uint32_t free_slots;
	uint32_t nbufs;                 /* outstanding buffers */
	uint32_t num_added;             /* slots added since kick_prepare */
	uint16_t free_head;
	uint16_t drv_flags_shadow;

	/* IN_ORDER: the oldest outstanding id, and the used descriptor being
	 * consumed: it completes every buffer up to batch_id; the slots it
	 * skipped are stale and never read. */
	uint16_t oldest;
	bool batch;
	uint16_t batch_id;
	uint32_t batch_len;

	struct pdrv_id *ids;            /* [num] */
};

static inline struct packed_drv *to_pq(struct vq_drv *q)
{
	return (struct packed_drv *)q;
}

static inline const struct packed_drv *to_pq_const(const struct vq_drv *q)
{
	return (const struct packed_drv *)q;
}

/* ---- add ---- */

/* The next id to hand out: in order the one after the outstanding run,
 * otherwise the free list's head (never empty while a slot is free: every
 * buffer takes at least one slot and there are num ids). */
static uint16_t take_id(struct packed_drv *pq, uint32_t ahead)
{
	uint16_t id;

	if (pq->in_order) {
		uint32_t t = (uint32_t)pq->oldest + pq->nbufs + ahead;

		return (uint16_t)(t >= pq->num ? t - pq->num : t);
	}
	id = pq->free_head;
	pq->free_head = pq->ids[id].next_free;
	return id;
}

static int packed_add(struct vq_drv *q, const struct vq_seg *seg, unsigned nout,
		      unsigned nin, void *token)
{
	struct packed_drv *pq = to_pq(q);
	unsigned total = nout + nin, i, need;
	uint16_t id, pos = pq->next_avail, head = pos, head_flags = 0;
	bool wrap = pq->avail_wrap, indirect;
	struct pdrv_id *s;
	uint64_t in_len = 0;

	indirect = pq->indirect && total > 1 && total <= q->cfg.indirect_max;
	need = indirect ? 1 : total;
	if (need > pq->num)
		return -EINVAL;         /* could never fit */
	if (need > pq->free_slots)
		return -ENOSPC;
	id = take_id(pq, 0);
	s = &pq->ids[id];

	for (i = 0; i < total; i++)
		if (i >= nout)
			in_len += seg[i].len;

	if (indirect) {
		uint64_t off = (uint64_t)id * q->cfg.indirect_max * 16;
		struct vq_packed_desc *t =
			(struct vq_packed_desc *)((uint8_t *)q->cfg.indirect + off);

		for (i = 0; i < total; i++) {
			t[i].addr = vq_le64(seg[i].addr);
			t[i].len = vq_le32(seg[i].len);
			t[i].id = 0;
			t[i].flags = vq_le16(i >= nout ? VQ_DESC_F_WRITE : 0);
		}
		pq->desc[pos].addr = vq_le64(q->cfg.indirect_gpa + off);
		pq->desc[pos].len = vq_le32(total * 16);
		pq->desc[pos].id = vq_le16(id);
		head_flags = VQ_DESC_F_INDIRECT | packed_avail_flags(wrap);
		packed_advance(&pos, &wrap, 1, pq->num);
	} else {
		for (i = 0; i < total; i++) {
			uint16_t f = packed_avail_flags(wrap);

			if (i + 1 < total)
				f |= VQ_DESC_F_NEXT;
			if (i >= nout)
				f |= VQ_DESC_F_WRITE;
			pq->desc[pos].addr = vq_le64(seg[i].addr);
			pq->desc[pos].len = vq_le32(seg[i].len);
			/* 2.8.6: the id counts in the last descriptor; writing
			 * it in every one costs nothing. */
			pq->desc[pos].id = vq_le16(id);
			if (i)
				vq_store_relaxed(&pq->desc[pos].flags, vq_le16(f));
			else
				head_flags = f;
			packed_advance(&pos, &wrap, 1, pq->num);
		}
	}

	s->token = token;
	s->in_len = in_len;
	s->ndesc = (uint16_t)need;
	pq->nbufs++;
	pq->free_slots -= need;
	/* Saturates: a whole ring added already means "kick". */
	pq->num_added = pq->num_added + need > pq->num ? pq->num :
			pq->num_added + need;
	pq->next_avail = pos;
	pq->avail_wrap = wrap;
	/* P1: the head's flags last, with release: they publish the chain. */
	vq_store_release(&pq->desc[head].flags, vq_le16(head_flags));
	return 0;
}

/*
 * n single-descriptor buffers.  Every descriptor but the first is written
 * whole, its len, id and flags in one store; the first one's flags are
 * stored last, with release, and make the whole burst available at once.
 * The device starts descriptors in ring order (2.8 "Device Requirements:
 * Virtqueues"), so it uses none of the others before the first; this is
 * the deferred first flags that "Placing Available Buffers" describes for
 * a chain, applied to a burst.  The queue's own state is written once.
 */
static int packed_add_burst(struct vq_drv *q, const struct vq_seg *seg,
			    void *const *tokens, unsigned n, bool writable)
{
	struct packed_drv *pq = to_pq(q);
	uint16_t pos = pq->next_avail, head = pos, head_flags = 0;
	uint16_t dir = writable ? VQ_DESC_F_WRITE : 0;
	bool wrap = pq->avail_wrap;
	unsigned i;

	if (n > pq->free_slots)
		n = pq->free_slots;
	if (!n)
		return 0;
	for (i = 0; i < n; i++) {
		struct vq_packed_desc *d = &pq->desc[pos];
		uint16_t id = take_id(pq, i), f = packed_avail_flags(wrap) | dir;
		struct pdrv_id *s = &pq->ids[id];

		s->token = tokens[i];
		s->in_len = writable ? seg[i].len : 0;
		s->ndesc = 1;
		d->addr = vq_le64(seg[i].addr);
		if (i) {
			packed_store_tail(d, seg[i].len, id, f);
		} else {
			d->len = vq_le32(seg[i].len);
			d->id = vq_le16(id);
			head_flags = f;
		}
		packed_advance(&pos, &wrap, 1, pq->num);
	}
	pq->nbufs += n;
	pq->free_slots -= n;
	pq->num_added = pq->num_added + n > pq->num ? pq->num : pq->num_added + n;
	pq->next_avail = pos;
	pq->avail_wrap = wrap;
	/* P1: the first head's flags last, with release. */
	vq_store_release(&pq->desc[head].flags, vq_le16(head_flags));
	return (int)n;
}

static int packed_kick_prepare(struct vq_drv *q)
{
	struct packed_drv *pq = to_pq(q);
	uint16_t off_wrap, flags;
	uint32_t added = pq->num_added;

	pq->num_added = 0;
	/* P2: our descriptors before the device's event structure. */
	vq_mb();
	packed_event_read(pq->dev_event, &off_wrap, &flags);
	if (flags == VQ_EVENT_F_DISABLE || !added)
		return 0;
	if (flags == VQ_EVENT_F_DESC && pq->event_idx)
		return packed_need_event(off_wrap, pq->num, pq->next_avail,
					 pq->avail_wrap, added);
	return 1;
}

/* ---- get ---- */

static void free_id(struct packed_drv *pq, uint16_t id)
{
	struct pdrv_id *s = &pq->ids[id];

	pq->free_slots += s->ndesc;
	pq->nbufs--;
	s->token = NULL;
	if (pq->in_order) {
		pq->oldest = pq->oldest + 1 == pq->num ? 0 : pq->oldest + 1;
	} else {
		s->next_free = pq->free_head;
		pq->free_head = id;
	}
}

/*
 * Move last_used past a completed chain of ndesc slots.  When that leaves a
 * line of the ring, the device is done with the line (it wrote the used
 * descriptors there, or skipped them in an in-order batch) and our next
 * adds store there: ask for the line now, so those stores do not wait one
 * cross-core round trip each (the device last read the line, so it is
 * shared).  In a full ring the device reads the line again only after
 * those stores; otherwise the prefetch costs it a miss, never correctness.
 */
static inline void used_advance_at(const struct packed_drv *pq, uint16_t *pos,
				   bool *wrap, uint16_t ndesc)
{
	const struct vq_packed_desc *old = &pq->desc[*pos];

	packed_advance(pos, wrap, ndesc, pq->num);
	if (((uintptr_t)old ^ (uintptr_t)&pq->desc[*pos]) >= 64)
		vq_prefetch_w(pq->prefetchw, old);
}

/*
 * The length a used descriptor gives buffer s (id): 0 for a
 * device-readable-only buffer, whatever the device says (DPDK 22.11's
 * vhost puts the bytes it read there); more than it can hold breaks the
 * queue.  Returns 0 or the error.
 */
static int used_len(struct vq_drv *q, const struct pdrv_id *s, uint16_t id,
		    uint32_t *l)
{
	if (s->in_len == 0)
		*l = 0;
	if (unlikely(*l > s->in_len))
		return vq_drv_break(q, -EINVAL,
				    "2.8.4: used length %u of id %u is larger than its %llu writable bytes",
				    *l, id, (unsigned long long)s->in_len);
	return 0;
}

/* Read the used descriptor at pos, if there is one: 1 with id and len, 0
 * if none.  P3: flags with acquire, then the body they publish. */
static inline int read_used(const struct packed_drv *pq, uint16_t pos,
			    bool wrap, uint16_t *id, uint32_t *len)
{
	const struct vq_packed_desc *d = &pq->desc[pos];

	if (!packed_is_used(packed_flags_acquire(d), wrap))
		return 0;
	*id = vq_le16(d->id);
	*len = vq_le32(d->len);
	return 1;
}

/* A get burst's end: the used position and the counts written back once
 * for the n buffers taken; n, or the error r when none was. */
static inline int get_end(struct packed_drv *pq, uint16_t pos, bool wrap,
			  uint32_t slots, unsigned n, int r)
{
	pq->last_used = pos;
	pq->used_wrap = wrap;
	pq->free_slots += slots;
	pq->nbufs -= n;
	return n || !r ? (int)n : r;
}

/*
 * Up to n used buffers, with the queue's state in registers and written
 * back once.  Each used descriptor's id must name a buffer outstanding
 * (2.8.22) and its length fit it; on a bad one the queue breaks after the
 * good ones before it are returned.
 */
static int packed_get_burst(struct vq_drv *q, void **tokens, uint32_t *lens,
			    unsigned n)
{
	struct packed_drv *pq = to_pq(q);
	uint16_t pos = pq->last_used, free_head = pq->free_head;
	bool wrap = pq->used_wrap;
	uint32_t slots = 0;
	unsigned i;
	int r = 0;

	for (i = 0; i < n; i++) {
		struct pdrv_id *s;
		uint16_t id;
		uint32_t l;

		if (!read_used(pq, pos, wrap, &id, &l))
			break;
		if (unlikely(id >= pq->num || !pq->ids[id].token)) {
			r = vq_drv_break(q, -EINVAL,
					 "2.8.22: used id %u (slot %u) was never made available",
					 id, pos);
			break;
		}
		s = &pq->ids[id];
		if (unlikely(used_len(q, s, id, &l))) {
			r = q->err;
			break;
		}
		tokens[i] = s->token;
		lens[i] = l;
		s->token = NULL;
		s->next_free = free_head;
		free_head = id;
		slots += s->ndesc;
		/* 2.8.2: one used descriptor per chain; skip all its slots. */
		used_advance_at(pq, &pos, &wrap, s->ndesc);
	}
	pq->free_head = free_head;
	return get_end(pq, pos, wrap, slots, i, r);
}

/*
 * In order the buffer to return is always the oldest; a new used
 * descriptor only says how far its batch goes.  The common case, a
 * descriptor naming the oldest buffer itself, keeps no batch state.
 */
static int packed_get_burst_in_order(struct vq_drv *q, void **tokens,
				     uint32_t *lens, unsigned n)
{
	struct packed_drv *pq = to_pq(q);
	uint16_t pos = pq->last_used, oldest = pq->oldest, num = pq->num;
	bool wrap = pq->used_wrap, batch = pq->batch;
	uint32_t slots = 0;
	unsigned i;
	int r = 0;

	for (i = 0; i < n; i++) {
		struct pdrv_id *s = &pq->ids[oldest];
		uint32_t l;

		if (!batch) {
			uint16_t bid;
			uint32_t ahead;

			if (!read_used(pq, pos, wrap, &bid, &l))
				break;
			/* Outstanding ids are the run [oldest, oldest +
			 * nbufs), less the i taken in this call. */
			ahead = bid >= oldest ? (uint32_t)(bid - oldest) :
						(uint32_t)bid + num - oldest;
			if (unlikely(bid >= num || ahead >= pq->nbufs - i)) {
				r = vq_drv_break(q, -EINVAL,
						 "2.8.8: in-order used id %u (slot %u) is not outstanding",
						 bid, pos);
				break;
			}
			if (unlikely(used_len(q, &pq->ids[bid], bid, &l))) {
				r = q->err;
				break;
			}
			if (ahead) {
				/* 2.8.8: it completes every buffer made
				 * available before bid, each written
				 * completely, and bid. */
				batch = true;
				pq->batch_id = bid;
				pq->batch_len = l;
				l = vq_len32(s->in_len);
			}
		} else if (oldest == pq->batch_id) {
			l = pq->batch_len;
			batch = false;
		} else {
			l = vq_len32(s->in_len);
		}
		tokens[i] = s->token;
		lens[i] = l;
		s->token = NULL;
		slots += s->ndesc;
		used_advance_at(pq, &pos, &wrap, s->ndesc);
		oldest = oldest + 1 == num ? 0 : oldest + 1;
	}
	pq->batch = batch;
	pq->oldest = oldest;
	return get_end(pq, pos, wrap, slots, i, r);
}

static int packed_get(struct vq_drv *q, void **token, uint32_t *len)
{
	return packed_get_burst(q, token, len, 1);
}

static int packed_get_in_order(struct vq_drv *q, void **token, uint32_t *len)
{
	return packed_get_burst_in_order(q, token, len, 1);
}

/* ---- used-buffer notifications ---- */

static void set_drv_flags(struct packed_drv *pq, uint16_t flags)
{
	if (pq->drv_flags_shadow != flags) {
		vq_store_release(&pq->drv_event->flags, vq_le16(flags));
		pq->drv_flags_shadow = flags;
	}
}

static void packed_disable_cb(struct vq_drv *q)
{
	set_drv_flags(to_pq(q), VQ_EVENT_F_DISABLE);
}

static bool used_pending(struct packed_drv *pq)
{
	if (pq->batch)
		return true;
	return packed_is_used(packed_flags_acquire(&pq->desc[pq->last_used]),
			      pq->used_wrap);
}

/* Ask for a notification when the used descriptor at ahead slots past
 * last_used is written (EVENT_IDX), or for every one; then re-check (P4). */
static int enable_at(struct packed_drv *pq, uint32_t ahead)
{
	if (pq->event_idx) {
		uint16_t pos = pq->last_used;
		bool wrap = pq->used_wrap;

		packed_advance(&pos, &wrap, ahead, pq->num);
		vq_store_relaxed(&pq->drv_event->off_wrap,
				 vq_le16(pos | (uint16_t)wrap << VQ_EVENT_WRAP_SHIFT));
		/* P4: off_wrap before the flags that make it count. */
		set_drv_flags(pq, VQ_EVENT_F_DESC);
	} else {
		set_drv_flags(pq, VQ_EVENT_F_ENABLE);
	}
	/* P4: the enable must be visible before we look for used buffers,
	 * or one written meanwhile would go unnotified. */
	vq_mb();
	return used_pending(pq);
}

static int packed_enable_cb(struct vq_drv *q)
{
	return enable_at(to_pq(q), 0);
}

static int packed_enable_cb_delayed(struct vq_drv *q)
{
	struct packed_drv *pq = to_pq(q);

	/* About 3/4 of the outstanding slots (enable_cb_delayed_packed). */
	return enable_at(pq, (pq->num - pq->free_slots) * 3 / 4);
}

static bool packed_has_used(struct vq_drv *q)
{
	return used_pending(to_pq(q));
}

static void *packed_detach_unused(struct vq_drv *q)
{
	struct packed_drv *pq = to_pq(q);
	uint16_t id;
	void *token;

	if (!pq->nbufs)
		return NULL;
	if (pq->in_order) {
		id = pq->oldest;
		pq->batch = false;
	} else {
		for (id = 0; !pq->ids[id].token; id++)
			;
	}
	token = pq->ids[id].token;
	free_id(pq, id);
	return token;
}

static unsigned packed_free_slots(const struct vq_drv *q)
{
	return to_pq_const(q)->free_slots;
}

static unsigned packed_outstanding(const struct vq_drv *q)
{
	return to_pq_const(q)->nbufs;
}

static void packed_drv_reset(struct vq_drv *q)
{
	struct packed_drv *pq = to_pq(q);
	uint16_t i;

	memset(pq->desc, 0, sizeof(*pq->desc) * pq->num);
	memset(pq->drv_event, 0, sizeof(*pq->drv_event));
	memset(pq->dev_event, 0, sizeof(*pq->dev_event));
	pq->next_avail = pq->last_used = 0;
	pq->avail_wrap = pq->used_wrap = true;     /* 2.8.1: start at 1 */
	pq->free_slots = pq->num;
	pq->nbufs = pq->num_added = 0;
	pq->drv_flags_shadow = VQ_EVENT_F_ENABLE;
	pq->oldest = 0;
	pq->batch = false;
	for (i = 0; i < pq->num; i++) {
		pq->ids[i].token = NULL;
		pq->ids[i].next_free = i + 1u < pq->num ? i + 1u : ID_NONE;
	}
	pq->free_head = 0;
}

static void packed_drv_destroy(struct vq_drv *q)
{
	struct packed_drv *pq = to_pq(q);

	free(pq->ids);
	free(pq);
}


static const struct vq_drv_ops packed_drv_ops = {
	.add = packed_add,
	.add_burst = packed_add_burst,
	.kick_prepare = packed_kick_prepare,
	.get = packed_get,
	.get_burst = packed_get_burst,
	.disable_cb = packed_disable_cb,
	.enable_cb = packed_enable_cb,
	.enable_cb_delayed = packed_enable_cb_delayed,
	.has_used = packed_has_used,
	.detach_unused = packed_detach_unused,
	.free_slots = packed_free_slots,
	.outstanding = packed_outstanding,
	.reset = packed_drv_reset,
	.destroy = packed_drv_destroy,
};

static const struct vq_drv_ops packed_drv_in_order_ops = {
	.add = packed_add,
	.add_burst = packed_add_burst,
	.kick_prepare = packed_kick_prepare,
	.get = packed_get_in_order,
	.get_burst = packed_get_burst_in_order,
	.disable_cb = packed_disable_cb,
	.enable_cb = packed_enable_cb,
	.enable_cb_delayed = packed_enable_cb_delayed,
	.has_used = packed_has_used,
	.detach_unused = packed_detach_unused,
	.free_slots = packed_free_slots,
	.outstanding = packed_outstanding,
	.reset = packed_drv_reset,
	.destroy = packed_drv_destroy,
};

int vq_packed_drv_new(const struct vq_drv_config *cfg, struct vq_drv **out)
{
	struct packed_drv *pq;
	bool in_order = vq_has(cfg->features, VQ_F_IN_ORDER);

	*out = NULL;
	pq = vq_ring_zalloc(1, sizeof(*pq));
	if (!pq)
		return -ENOMEM;
	pq->ids = vq_ring_zalloc(cfg->num, sizeof(*pq->ids));
	if (!pq->ids) {
		packed_drv_destroy(&pq->base);
		return -ENOMEM;
	}
	pq->base.ops = in_order ? &packed_drv_in_order_ops : &packed_drv_ops;
	pq->base.cfg = vq_drv_setup_of(cfg);
	pq->desc = cfg->ring.desc;
	pq->drv_event = cfg->ring.driver;
	pq->dev_event = cfg->ring.device;
	pq->num = cfg->num;
	pq->event_idx = vq_has(cfg->features, VQ_F_EVENT_IDX);
	pq->in_order = in_order;
	pq->indirect = vq_has(cfg->features, VQ_F_INDIRECT_DESC) &&
		       cfg->indirect;
	pq->prefetchw = vq_has_prefetchw();
	packed_drv_reset(&pq->base);
	*out = &pq->base;
	return 0;
}
