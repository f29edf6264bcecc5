// SPDX-License-Identifier: MIT
/*
 * The split virtqueue, driver side (virtio 1.2 §2.7): the virtio_ring.c role.
 *
 * The device is an adversary.  Everything we need to free a buffer (the
 * chain's links, its descriptor count, its token, how many bytes it can
 * take) lives in private per-head state; from the used ring we read only the
 * index, the id and the length, and validate all three.
 *
 * Two ops tables: the general one (a free list of descriptors) and the
 * VQ_F_IN_ORDER variant (descriptors taken in table order, buffers
 * completed in add order, one used element possibly completing a batch).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ring_internal.h"
#include "cpu.h"

struct drv_head {
	void *token;                    /* non-NULL while outstanding */
	uint64_t in_len;                /* writable bytes of the buffer */
	uint16_t ndesc;                 /* ring descriptors taken */
	uint16_t avail_pos;             /* avail index it was added at */
	bool indirect;
};

struct split_drv {
	struct vq_drv base;
	uint16_t num, mask;
	bool event_idx, can_indirect;
	bool prefetchw;                 /* the CPU has PREFETCHW */
	struct vq_desc *desc;
	struct vq_avail *avail;
	struct vq_used *used;

	uint16_t avail_shadow;          /* next avail index to add at */
	uint16_t kicked;                /* avail->idx as last published */
	uint16_t avail_flags;           /* shadow of avail->flags */
	uint16_t last_used;             /* next used index to consume */
	uint16_t used_shadow;           /* used->idx as last read (validated) */

	unsigned num_free;              /* free descriptors */
	unsigned outstanding;           /* buffers added, not yet returned */
	uint16_t free_head;             /* general: free list head */
	uint16_t *next;                 /* general: shadow of desc[].next links */

	/* In-order: descriptor counter apart from the buffer counters. */
	uint16_t next_desc;             /* first free descriptor */
	uint16_t *fifo;                 /* [num] outstanding heads in add order */
	unsigned fifo_head;
	unsigned batch_left;            /* buffers left in the current used batch */
	uint32_t batch_last_len;        /* length of the batch's last buffer */

	struct drv_head *head;          /* [num] */
};

static inline struct split_drv *to_sq(struct vq_drv *q)
{
	return (struct split_drv *)q;
}

static inline const struct split_drv *to_csq(const struct vq_drv *q)
{
	return (const struct split_drv *)q;
}

static inline uint16_t *used_event_ptr(struct split_drv *s)
{
	return &s->avail->ring[s->num];
}

static inline uint16_t *avail_event_ptr(struct split_drv *s)
{
	return (uint16_t *)&s->used->ring[s->num];
}

static void sq_reset(struct vq_drv *q)
{
	struct split_drv *s = to_sq(q);
	unsigned i;

	memset(s->desc, 0, vq_split_desc_size(s->num));
	memset(s->avail, 0, vq_split_avail_size(s->num));
	memset(s->used, 0, vq_split_used_size(s->num));
	s->avail_shadow = s->kicked = 0;
	s->avail_flags = 0;
	s->last_used = s->used_shadow = 0;
	s->num_free = s->num;
	s->outstanding = 0;
	s->free_head = 0;
	for (i = 0; i < s->num; i++)
		s->next[i] = (i + 1) & s->mask;
	s->next_desc = 0;
	s->fifo_head = 0;
	s->batch_left = 0;
	s->batch_last_len = 0;
	memset(s->head, 0, sizeof(*s->head) * s->num);
}

/* Two stores, not four: the table line is usually one the device read
 * last, and until it is ours again every store behind it waits in the
 * store buffer. */
static void sq_write_desc(struct vq_desc *d, uint64_t addr, uint32_t len,
			  uint16_t flags, uint16_t next)
{
	struct { uint32_t len; uint16_t flags, next; } rest = {
		vq_le32(len), vq_le16(flags), vq_le16(next),
	};

	d->addr = vq_le64(addr);
	memcpy(&d->len, &rest, sizeof(rest));
}

static uint16_t seg_flags(unsigned i, unsigned nout, unsigned n)
{
	uint16_t f = i >= nout ? VQ_DESC_F_WRITE : 0;

	return i + 1 < n ? f | VQ_DESC_F_NEXT : f;
}

/* Fill the indirect table of pool slot head; point desc[at] at it. */
static void sq_write_indirect(struct split_drv *s, uint16_t at, uint16_t head,
			      const struct vq_seg *seg, unsigned nout, unsigned n)
{
	uint64_t off = (uint64_t)head * s->base.cfg.indirect_max * 16;
	struct vq_desc *tbl = (struct vq_desc *)((char *)s->base.cfg.indirect + off);
	unsigned i;

	for (i = 0; i < n; i++)
		sq_write_desc(&tbl[i], seg[i].addr, seg[i].len,
			      seg_flags(i, nout, n), (uint16_t)(i + 1));
	sq_write_desc(&s->desc[at], s->base.cfg.indirect_gpa + off, n * 16u,
		      VQ_DESC_F_INDIRECT, 0);
}

/* Use an indirect table when it saves ring slots and the pool allows it. */
static bool sq_use_indirect(const struct split_drv *s, unsigned n)
{
	return s->can_indirect && n > 1 && n <= s->base.cfg.indirect_max;
}

/* The ring slots a chain of n segments takes (1 when it goes indirect):
 * the count, -EINVAL if it could never fit, -ENOSPC if it does not now. */
static int sq_slots(const struct split_drv *s, unsigned n, bool *indirect)
{
	unsigned ndesc;

	*indirect = sq_use_indirect(s, n);
	ndesc = *indirect ? 1 : n;
	if (ndesc > s->num)
		return -EINVAL;
	if (ndesc > s->num_free)
		return -ENOSPC;
	return (int)ndesc;
}

/* Record a head as added and put it in the avail ring (published later, in
 * kick_prepare: D1, one release store per batch). */
static void sq_expose(struct split_drv *s, uint16_t head, const struct vq_seg *seg,
		      unsigned nout, unsigned n, unsigned ndesc, bool indirect,
		      void *token)
{
	struct drv_head *h = &s->head[head];
	uint64_t in_len = 0;
	unsigned i;

	for (i = nout; i < n; i++)
		in_len += seg[i].len;
	h->token = token;
	h->in_len = in_len;
	h->ndesc = ndesc;
	h->indirect = indirect;
	h->avail_pos = s->avail_shadow;
	/* An entry that already names this head is left alone (in order it
	 * always does after the first lap): its line stays shared with the
	 * device instead of bouncing to us and back. */
	if (s->avail->ring[s->avail_shadow & s->mask] != vq_le16(head))
		s->avail->ring[s->avail_shadow & s->mask] = vq_le16(head);
	s->avail_shadow++;
	s->num_free -= ndesc;
	s->outstanding++;
}

static int sq_add(struct vq_drv *q, const struct vq_seg *seg, unsigned nout,
		  unsigned nin, void *token)
{
	struct split_drv *s = to_sq(q);
	unsigned n = nout + nin, i;
	uint16_t head = s->free_head, at;
	bool indirect;
	int ndesc = sq_slots(s, n, &indirect);

	if (ndesc < 0)
		return ndesc;
	if (indirect) {
		sq_write_indirect(s, head, head, seg, nout, n);
		s->free_head = s->next[head];
	} else {
		/* The chain follows the free list's links, which we keep in
		 * private memory: freeing it later needs nothing from the ring. */
		at = head;
		for (i = 0; i < n; i++) {
			sq_write_desc(&s->desc[at], seg[i].addr, seg[i].len,
				      seg_flags(i, nout, n), s->next[at]);
			if (i + 1 < n)
				at = s->next[at];
		}
		s->free_head = s->next[at];
	}
	sq_expose(s, head, seg, nout, n, ndesc, indirect, token);
	return 0;
}

static int sq_add_in_order(struct vq_drv *q, const struct vq_seg *seg,
			   unsigned nout, unsigned nin, void *token)
{
	struct split_drv *s = to_sq(q);
	unsigned n = nout + nin, i;
	uint16_t head = s->next_desc, at;
	bool indirect;
	int ndesc = sq_slots(s, n, &indirect);

	if (ndesc < 0)
		return ndesc;
	/* Descriptors in table order: next = x + 1, wrapping to 0 (2.7.9). */
	if (indirect) {
		sq_write_indirect(s, head, head, seg, nout, n);
	} else {
		at = head;
		for (i = 0; i < n; i++) {
			uint16_t nx = (at + 1) & s->mask;

			sq_write_desc(&s->desc[at], seg[i].addr, seg[i].len,
				      seg_flags(i, nout, n), nx);
			at = nx;
		}
	}
	s->next_desc = (head + ndesc) & s->mask;
	s->fifo[(s->fifo_head + s->outstanding) % s->num] = head;
	sq_expose(s, head, seg, nout, n, ndesc, indirect, token);
	return 0;
}

/*
 * n single-descriptor buffers, the queue's own state written once.  Nothing
 * is visible before kick_prepare publishes the index (D1), so the order of
 * the stores within the burst does not matter.
 */
static int sq_add_burst_common(struct split_drv *s, const struct vq_seg *seg,
			       void *const *tokens, unsigned n, bool writable,
			       bool in_order)
{
	uint16_t flags = writable ? VQ_DESC_F_WRITE : 0;
	uint16_t pos = s->avail_shadow, head = in_order ? s->next_desc : s->free_head;
	unsigned i;

	if (n > s->num_free)
		n = s->num_free;
	for (i = 0; i < n; i++) {
		struct drv_head *h = &s->head[head];
		uint16_t *entry = &s->avail->ring[pos & s->mask];
		uint16_t next = in_order ? (head + 1) & s->mask : s->next[head];
		struct vq_desc *d = &s->desc[head];

		/* As the avail entries below: a descriptor that already says
		 * this is left alone.  Without NEXT its link means nothing to
		 * the device, so it is written as 0 (ours is in s->next). */
		if (d->addr != vq_le64(seg[i].addr) || d->len != vq_le32(seg[i].len) ||
		    d->flags != vq_le16(flags) || d->next != (in_order ? vq_le16(next) : 0))
			sq_write_desc(d, seg[i].addr, seg[i].len, flags,
				      in_order ? next : 0);
		h->token = tokens[i];
		h->in_len = writable ? seg[i].len : 0;
		h->ndesc = 1;
		h->indirect = false;
		h->avail_pos = pos;
		if (in_order)
			s->fifo[(s->fifo_head + s->outstanding + i) % s->num] = head;
		/* As in sq_expose: an entry already naming the head stays. */
		if (*entry != vq_le16(head))
			*entry = vq_le16(head);
		pos++;
		head = next;
	}
	if (in_order)
		s->next_desc = head;
	else
		s->free_head = head;
	s->avail_shadow = pos;
	s->num_free -= n;
	s->outstanding += n;
	return (int)n;
}

static int sq_add_burst(struct vq_drv *q, const struct vq_seg *seg,
			void *const *tokens, unsigned n, bool writable)
{
	return sq_add_burst_common(to_sq(q), seg, tokens, n, writable, false);
}

static int sq_add_burst_in_order(struct vq_drv *q, const struct vq_seg *seg,
				 void *const *tokens, unsigned n, bool writable)
{
	return sq_add_burst_common(to_sq(q), seg, tokens, n, writable, true);
}

static int sq_kick_prepare(struct vq_drv *q)
{
	struct split_drv *s = to_sq(q);
	uint16_t old = s->kicked, new_idx = s->avail_shadow;

	if (new_idx == old)
		return 0;
	/* Descriptors and ring entries before the index (D1). */
	vq_store_release(&s->avail->idx, vq_le16(new_idx));
	s->kicked = new_idx;
	/* The index must be visible before we read the device's suppression
	 * state (D2), or we could miss that it wants a kick. */
	vq_mb();
	if (s->event_idx)
		return vq_need_event(vq_le16(vq_load_acquire(avail_event_ptr(s))),
					new_idx, old);
	return !(vq_le16(vq_load_acquire(&s->used->flags)) & VQ_USED_F_NO_NOTIFY);
}

/* Buffers the device can see and has not returned. */
static unsigned sq_published(const struct split_drv *s)
{
	return s->outstanding - (uint16_t)(s->avail_shadow - s->kicked);
}

/* Was the head's buffer published to the device (not just added)? */
static bool sq_head_published(const struct split_drv *s, const struct drv_head *h)
{
	return (uint16_t)(s->avail_shadow - h->avail_pos) >
	       (uint16_t)(s->avail_shadow - s->kicked);
}

/* How many used entries are waiting: reads used->idx (acquire, D3) when the
 * cached value is used up, and validates it. */
static int sq_used_count(struct split_drv *s)
{
	if (s->last_used == s->used_shadow) {
		uint16_t idx = vq_le16(vq_load_acquire(&s->used->idx));

		if (unlikely((uint16_t)(idx - s->last_used) > sq_published(s)))
			return vq_drv_break(&s->base, -EINVAL,
					    "2.7.8: used index moved from %u to %u with %u buffers outstanding",
					    s->last_used, idx, sq_published(s));
		s->used_shadow = idx;
	}
	return (uint16_t)(s->used_shadow - s->last_used);
}

static void sq_free_chain(struct split_drv *s, uint16_t id)
{
	struct drv_head *h = &s->head[id];
	uint16_t last = id;
	unsigned i;

	for (i = 1; i < h->ndesc; i++)
		last = s->next[last];
	s->next[last] = s->free_head;
	s->free_head = id;
	s->num_free += h->ndesc;
	s->outstanding--;
	h->token = NULL;
}

/* Read and check the used element at last_used: a published, outstanding
 * head and a length that fits its buffer. */
static int sq_read_used(struct split_drv *s, uint16_t *idp, uint32_t *lenp)
{
	const struct vq_used_elem *e = &s->used->ring[s->last_used & s->mask];
	uint32_t id = vq_le32(e->id), len = vq_le32(e->len);

	if (unlikely(id >= s->num))
		return vq_drv_break(&s->base, -EINVAL,
				    "2.7.8: used id %u >= queue size %u", id, s->num);
	if (unlikely(!s->head[id].token || !sq_head_published(s, &s->head[id])))
		return vq_drv_break(&s->base, -EINVAL,
				    "2.7.8: used id %u was never made available", id);
	if (unlikely(len > s->head[id].in_len))
		return vq_drv_break(&s->base, -EINVAL,
				    "2.7.8.2: used length %u larger than the buffer's %llu (id %u)",
				    len, (unsigned long long)s->head[id].in_len, id);
	*idp = (uint16_t)id;
	*lenp = len;
	return 0;
}

static int sq_get(struct vq_drv *q, void **token, uint32_t *len)
{
	struct split_drv *s = to_sq(q);
	uint16_t id = 0;        /* gcc -O3 cannot see sq_read_used set it */
	int r;

	r = sq_used_count(s);
	if (r <= 0)
		return r;
	r = sq_read_used(s, &id, len);
	if (r < 0)
		return r;
	*token = s->head[id].token;
	sq_free_chain(s, id);
	s->last_used++;
	return 1;
}

/*
 * In-order: the used element at last_used names the LAST buffer of a batch
 * (2.7.9).  The buffers before it were used completely and their used slots
 * are stale, never read.
 */
static int sq_get_in_order(struct vq_drv *q, void **token, uint32_t *len)
{
	struct split_drv *s = to_sq(q);
	struct drv_head *h;
	uint16_t id = 0, front; /* id, l: gcc -O3 cannot see sq_read_used set them */
	int r;

	if (s->batch_left == 0) {
		unsigned k;
		uint32_t l = 0;
		int avail = sq_used_count(s);

		if (avail <= 0)
			return avail;
		r = sq_read_used(s, &id, &l);
		if (r < 0)
			return r;
		front = s->fifo[s->fifo_head];
		k = (uint16_t)(s->head[id].avail_pos - s->head[front].avail_pos) + 1u;
		if (unlikely(k > s->outstanding || k > (unsigned)avail))
			return vq_drv_break(q, -EINVAL,
					    "2.7.9: in-order used id %u completes %u buffers, only %d used",
					    id, k, avail);
		s->batch_left = k;
		s->batch_last_len = l;
	}
	front = s->fifo[s->fifo_head];
	h = &s->head[front];
	*token = h->token;
	*len = s->batch_left == 1 ? s->batch_last_len : vq_len32(h->in_len);
	s->batch_left--;
	s->fifo_head = (s->fifo_head + 1) % s->num;
	s->num_free += h->ndesc;
	s->outstanding--;
	h->token = NULL;
	s->last_used++;
	/* Once a table line's last descriptor is free the device is done
	 * with the line, and our adds write it next lap: ask for it now. */
	if ((((front + h->ndesc) ^ front) & ~3u) || h->ndesc >= 4)
		vq_prefetch_w(s->prefetchw, &s->desc[front]);
	return 1;
}

static void sq_set_avail_flags(struct split_drv *s, uint16_t flags)
{
	if (s->avail_flags == flags)
		return;
	s->avail_flags = flags;
	vq_store_release(&s->avail->flags, vq_le16(flags));
}

static void sq_disable_cb(struct vq_drv *q)
{
	/* With EVENT_IDX the device ignores the flag; used_event stays where
	 * it was, so at most one more notification comes. */
	sq_set_avail_flags(to_sq(q), VQ_AVAIL_F_NO_INTERRUPT);
}

/* Ask for a notification once used->idx passes last_used + bufs, then
 * re-check (D4). */
static int sq_enable_cb_at(struct split_drv *s, uint16_t bufs)
{
	uint16_t idx;

	sq_set_avail_flags(s, 0);
	if (s->event_idx)
		vq_store_release(used_event_ptr(s), vq_le16((uint16_t)(s->last_used + bufs)));
	vq_mb();
	idx = vq_le16(vq_load_acquire(&s->used->idx));
	return (uint16_t)(idx - s->last_used) > bufs;
}

static int sq_enable_cb(struct vq_drv *q)
{
	return sq_enable_cb_at(to_sq(q), 0);
}

static int sq_enable_cb_delayed(struct vq_drv *q)
{
	struct split_drv *s = to_sq(q);

	/* Without EVENT_IDX every flush notifies: nothing to delay. */
	return sq_enable_cb_at(s, s->event_idx ? (uint16_t)(s->outstanding * 3 / 4) : 0);
}

static bool sq_has_used(struct vq_drv *q)
{
	struct split_drv *s = to_sq(q);

	return vq_le16(vq_load_acquire(&s->used->idx)) != s->last_used;
}

static void *sq_detach_unused(struct vq_drv *q)
{
	struct split_drv *s = to_sq(q);
	unsigned i;

	for (i = 0; i < s->num; i++) {
		void *t = s->head[i].token;

		if (t) {
			sq_free_chain(s, (uint16_t)i);
			return t;
		}
	}
	return NULL;
}

static void *sq_detach_unused_in_order(struct vq_drv *q)
{
	struct split_drv *s = to_sq(q);
	struct drv_head *h;
	void *t;

	if (s->outstanding == 0)
		return NULL;
	h = &s->head[s->fifo[s->fifo_head]];
	t = h->token;
	s->fifo_head = (s->fifo_head + 1) % s->num;
	s->num_free += h->ndesc;
	s->outstanding--;
	h->token = NULL;
	if (s->batch_left)
		s->batch_left--;
	return t;
}

static unsigned sq_free_slots(const struct vq_drv *q)
{
	return to_csq(q)->num_free;
}

static unsigned sq_outstanding(const struct vq_drv *q)
{
	return to_csq(q)->outstanding;
}

static void sq_destroy(struct vq_drv *q)
{
	struct split_drv *s = to_sq(q);

	free(s->next);
	free(s->fifo);
	free(s->head);
	free(s);
}

VQ_DRV_GET_BURST(sq_get_burst, sq_get)
VQ_DRV_GET_BURST(sq_get_burst_in_order, sq_get_in_order)

static const struct vq_drv_ops split_drv_ops = {
	.add = sq_add,
	.add_burst = sq_add_burst,
	.kick_prepare = sq_kick_prepare,
	.get = sq_get,
	.get_burst = sq_get_burst,
	.disable_cb = sq_disable_cb,
	.enable_cb = sq_enable_cb,
	.enable_cb_delayed = sq_enable_cb_delayed,
	.has_used = sq_has_used,
	.detach_unused = sq_detach_unused,
	.free_slots = sq_free_slots,
	.outstanding = sq_outstanding,
	.reset = sq_reset,
	.destroy = sq_destroy,
};

static const struct vq_drv_ops split_drv_in_order_ops = {
	.add = sq_add_in_order,
	.add_burst = sq_add_burst_in_order,
	.kick_prepare = sq_kick_prepare,
	.get = sq_get_in_order,
	.get_burst = sq_get_burst_in_order,
	.disable_cb = sq_disable_cb,
	.enable_cb = sq_enable_cb,
	.enable_cb_delayed = sq_enable_cb_delayed,
	.has_used = sq_has_used,
	.detach_unused = sq_detach_unused_in_order,
	.free_slots = sq_free_slots,
	.outstanding = sq_outstanding,
	.reset = sq_reset,
	.destroy = sq_destroy,
};

int vq_split_drv_new(const struct vq_drv_config *cfg, struct vq_drv **out)
{
	struct split_drv *s = vq_ring_zalloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->base.cfg = vq_drv_setup_of(cfg);
	s->num = cfg->num;
	s->mask = cfg->num - 1;
	s->event_idx = vq_has(cfg->features, VQ_F_EVENT_IDX);
	s->prefetchw = vq_has_prefetchw();
	s->can_indirect = vq_has(cfg->features, VQ_F_INDIRECT_DESC) &&
			  cfg->indirect;
	s->desc = cfg->ring.desc;
	s->avail = cfg->ring.driver;
	s->used = cfg->ring.device;
	s->next = vq_ring_zalloc(cfg->num, sizeof(*s->next));
	s->fifo = vq_ring_zalloc(cfg->num, sizeof(*s->fifo));
	s->head = vq_ring_zalloc(cfg->num, sizeof(*s->head));
	if (!s->next || !s->fifo || !s->head) {
		sq_destroy(&s->base);
		return -ENOMEM;
	}
	s->base.ops = vq_has(cfg->features, VQ_F_IN_ORDER) ?
		      &split_drv_in_order_ops : &split_drv_ops;
	sq_reset(&s->base);
	*out = &s->base;
	return 0;
}
