// SPDX-License-Identifier: MIT
/*
 * The layout-independent half of the ring layer: choosing the ops table once
 * from the features, the broken-queue state, and the public entry points,
 * which fail fast on a broken queue and otherwise call the layout.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log_batch.h"
#include "ring_internal.h"
#include "ring_lib.h"

bool vq_ring_num_valid(uint64_t features, uint32_t num)
{
	if (num == 0 || num > VQ_MAX_QUEUE_SIZE)
		return false;
	if (vq_has(features, VQ_F_RING_PACKED))
		return true;
	return (num & (num - 1)) == 0;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

uint64_t vq_ring_layout(uint64_t features, uint16_t num, uint64_t off[3])
{
	if (!vq_ring_num_valid(features, num))
		return 0;
	off[0] = 0;
	if (vq_has(features, VQ_F_RING_PACKED)) {
		off[1] = 16ull * num;                   /* event structs: 4-aligned */
		off[2] = off[1] + 4;
		return off[2] + 4;
	}
	off[1] = vq_split_desc_size(num);
	/* The used ring is written by the device and read by the driver; give
	 * it its own cache lines, away from the avail ring. */
	off[2] = align_up(off[1] + vq_split_avail_size(num), 64);
	return off[2] + vq_split_used_size(num);
}

int vq_ring_areas(uint64_t features, uint16_t num, uint64_t size[3],
		  uint64_t align[3])
{
	/* the event words only with EVENT_IDX: without it nobody touches them */
	uint64_t event = vq_has(features, VQ_F_EVENT_IDX) ? 2 : 0;

	if (!vq_ring_num_valid(features, num))
		return -EINVAL;
	size[0] = 16ull * num;
	align[0] = 16;
	if (vq_has(features, VQ_F_RING_PACKED)) {
		/* 2.8.10.1: the two event suppression structures */
		size[1] = size[2] = sizeof(struct vq_event_suppress);
		align[1] = align[2] = 4;
		return 0;
	}
	/* 2.7: flags, idx, ring[num], then used_event / avail_event */
	size[1] = vq_split_avail_size(num) - 2 + event;
	align[1] = 2;
	size[2] = vq_split_used_size(num) - 2 + event;
	align[2] = 4;
	return 0;
}

int vq_ring_used_idx(uint64_t features, const void *device, uint16_t *idx)
{
	const struct vq_used *u = device;

	if (vq_has(features, VQ_F_RING_PACKED))
		return -EINVAL;
	/* acquire: what the index covers was written before it */
	*idx = vq_le16(__atomic_load_n(&u->idx, __ATOMIC_ACQUIRE));
	return 0;
}

static int vq_vbreak(int *errp, char *msg, size_t size, int err,
		     const char *fmt, va_list ap)
{
	if (*errp == 0) {
		vsnprintf(msg, size, fmt, ap);
		*errp = err;
	}
	return *errp;
}

int vq_dev_break(struct vq_dev *d, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err = vq_vbreak(&d->err, d->errmsg, sizeof(d->errmsg), err, fmt, ap);
	va_end(ap);
	return err;
}

int vq_dev_fail(struct vq_dev *d, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err = vq_vbreak(&d->err, d->errmsg, sizeof(d->errmsg),
			err < 0 ? err : -EINVAL, fmt, ap);
	va_end(ap);
	return err;
}

int vq_drv_break(struct vq_drv *q, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err = vq_vbreak(&q->err, q->errmsg, sizeof(q->errmsg), err, fmt, ap);
	va_end(ap);
	return err;
}

/* Features a ring can be created with: VERSION_1 is required (no legacy
 * layouts), and nothing the ring layer does not implement. */
static bool ring_features_ok(uint64_t features)
{
	uint64_t ring_bits = VQ_BIT(VQ_F_INDIRECT_DESC) |
			     VQ_BIT(VQ_F_EVENT_IDX) |
			     VQ_BIT(VQ_F_RING_PACKED) |
			     VQ_BIT(VQ_F_IN_ORDER);

	if (!vq_has(features, VQ_F_VERSION_1))
		return false;
	/* Device-specific bits (0-23, 50+) pass through; transport bits we do
	 * not implement (ACCESS_PLATFORM, ...) are refused. */
	uint64_t transport = features & (((VQ_BIT(50) - 1) >> 24) << 24);
	return (transport & ~(ring_bits | VQ_BIT(VQ_F_VERSION_1))) == 0;
}

static bool aligned(const void *p, uintptr_t a)
{
	return ((uintptr_t)p & (a - 1)) == 0;
}

static bool ring_addr_ok(uint64_t features, const struct vq_ring_addr *r)
{
	if (!r->desc || !r->driver || !r->device)
		return false;
	/* 2.7 / 2.8 alignment: descriptors 16; split avail 2, used 4;
	 * packed event structures 4. */
	if (vq_has(features, VQ_F_RING_PACKED))
		return aligned(r->desc, 16) && aligned(r->driver, 4) &&
		       aligned(r->device, 4);
	return aligned(r->desc, 16) && aligned(r->driver, 2) &&
	       aligned(r->device, 4);
}

/*
 * With an IOTLB.  A chain that met a miss stays in the ring, unpopped, and
 * the queue looks empty until the IOTLB changes (the front-end answered):
 * the layouts return -EAGAIN, and callers see 0, "nothing available", so a
 * device's loop sleeps on its kick (the backend kicks after an update)
 * instead of spinning on a chain it cannot read yet.  The generation is
 * taken before the pop, so an update racing with the miss is never missed.
 * After IOTLB_STALL_NS the queue looks again all the same (a loop's quiet
 * look finds it): the question may never have reached the front-end (its
 * channel was full), and the miss handler decides whether to ask again.
 *
 * held counts the chains translated and still in the device's hands, plus
 * one while a pop runs, for the thread that invalidates entries: once it
 * has seen held at 0 after publishing the smaller table, no translation
 * from before is in use (vq_dev_iotlb_quiescent).  The pop's increment is
 * sequentially consistent against that thread's publication: either it
 * sees the pop, or the pop sees the new table.
 *
 * As with logging, such a queue runs a copy of its layout's ops with the
 * calls that pop, give back, fill and look for work wrapped: a queue
 * without an IOTLB runs exactly the code it ran before there was one.
 */
struct vq_dev_iotlb {
	struct vq_dev_ops ops;
	const struct vq_dev_ops *inner; /* the layout's (or what wraps it) */
	bool missed;            /* the last pop stopped at a miss */
	bool stalled;           /* ... and the IOTLB has not changed since */
	uint32_t stall_gen;
	uint64_t stall_ns;      /* when it stopped (CLOCK_MONOTONIC) */
	uint32_t held;          /* written by the queue's thread only */
};

#define IOTLB_STALL_NS 250000000ull

static uint64_t stall_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool stalled(struct vq_dev *d)
{
	struct vq_dev_iotlb *t = d->iotlb;

	return t->stalled &&
	       (t->stalled = vq_mem_iotlb_generation(d->cfg.mem) == t->stall_gen &&
			     stall_now_ns() - t->stall_ns < IOTLB_STALL_NS);
}

static void held_set(struct vq_dev_iotlb *t, uint32_t v)
{
	__atomic_store_n(&t->held, v, __ATOMIC_RELEASE);
}

/* Before a pop: say so, then look at the generation (and, inside the pop,
 * the table). */
static uint32_t pop_enter(struct vq_dev *d)
{
	struct vq_dev_iotlb *t = d->iotlb;

	__atomic_store_n(&t->held, t->held + 1, __ATOMIC_SEQ_CST);
	return vq_mem_iotlb_generation(d->cfg.mem);
}

static int pop_leave(struct vq_dev *d, int r, uint32_t gen)
{
	struct vq_dev_iotlb *t = d->iotlb;

	held_set(t, t->held - 1 + (r > 0 ? (uint32_t)r : 0));
	t->missed = r == -EAGAIN;
	if (likely(!t->missed))
		return r;
	t->stall_gen = gen;
	t->stall_ns = stall_now_ns();
	t->stalled = true;
	return 0;
}

/* After chains left the device's hands (filled or given back). */
static int held_drop(struct vq_dev *d, int r, uint32_t n)
{
	struct vq_dev_iotlb *t = d->iotlb;

	if (!r)
		held_set(t, t->held > n ? t->held - n : 0);
	return r;
}

static int iotlb_pop(struct vq_dev *d, struct vq_chain *c)
{
	uint32_t gen = pop_enter(d);

	return pop_leave(d, d->iotlb->inner->pop(d, c), gen);
}

static int iotlb_pop_burst(struct vq_dev *d, struct vq_chain *c, unsigned n)
{
	const struct vq_dev_ops *in = d->iotlb->inner;
	uint32_t gen = pop_enter(d);
	unsigned i;
	int r = 0;

	if (in->pop_burst)
		return pop_leave(d, in->pop_burst(d, c, n), gen);
	for (i = 0; i < n; i++) {
		r = in->pop(d, &c[i]);
		if (r <= 0)
			break;
	}
	return pop_leave(d, i ? (int)i : r, gen);
}

static int iotlb_unpop(struct vq_dev *d, const struct vq_chain *c, unsigned n)
{
	return held_drop(d, d->iotlb->inner->unpop(d, c, n), n);
}

static int iotlb_fill(struct vq_dev *d, const struct vq_chain *c, uint32_t len)
{
	return held_drop(d, d->iotlb->inner->fill(d, c, len), 1);
}

static bool iotlb_has_avail(struct vq_dev *d)
{
	return !stalled(d) && d->iotlb->inner->has_avail(d);
}

static int iotlb_enable_notify(struct vq_dev *d)
{
	int r = d->iotlb->inner->enable_notify(d);

	/* what arrived is the chain still waiting for the IOTLB */
	return r == 1 && stalled(d) ? 0 : r;
}

static int iotlb_wrap(struct vq_dev *d)
{
	struct vq_dev_iotlb *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->inner = d->ops;
	t->ops = *d->ops;
	t->ops.pop = iotlb_pop;
	t->ops.pop_burst = iotlb_pop_burst;
	t->ops.unpop = iotlb_unpop;
	t->ops.fill = iotlb_fill;
	t->ops.has_avail = iotlb_has_avail;
	t->ops.enable_notify = iotlb_enable_notify;
	d->iotlb = t;
	d->ops = &t->ops;
	return 0;
}

bool vq_dev_iotlb_waiting(struct vq_dev *d)
{
	/* not stalled(): the answer may already be in, and the caller
	 * still has to know why its pop found nothing */
	return d->iotlb && d->iotlb->missed;
}

void vq_dev_iotlb_wait_like(struct vq_dev *d, struct vq_dev *other)
{
	if (d->iotlb && other->iotlb && other->iotlb->missed &&
	    d->cfg.mem == other->cfg.mem) {
		d->iotlb->stall_gen = other->iotlb->stall_gen;
		d->iotlb->stall_ns = other->iotlb->stall_ns;
		d->iotlb->stalled = true;
	}
}

bool vq_dev_iotlb_quiescent(const struct vq_dev *d)
{
	return !d->iotlb || __atomic_load_n(&d->iotlb->held, __ATOMIC_SEQ_CST) == 0;
}

int vq_dev_new(const struct vq_dev_config *cfg, struct vq_dev **out)
{
	int r;

	*out = NULL;
	if (!VQ_RESERVED_ZERO(cfg) || !cfg->mem || !ring_features_ok(cfg->features) ||
	    !vq_ring_num_valid(cfg->features, cfg->num) ||
	    !ring_addr_ok(cfg->features, &cfg->ring))
		return -EINVAL;
	r = vq_has(cfg->features, VQ_F_RING_PACKED) ? vq_packed_dev_new(cfg, out)
							: vq_split_dev_new(cfg, out);
	if (r || !vq_mem_iotlb_enabled(cfg->mem))
		return r;
	r = iotlb_wrap(*out);
	if (r) {
		vq_dev_free(*out);
		*out = NULL;
	}
	return r;
}

void vq_dev_free(struct vq_dev *d)
{
	void (*destroy)(struct vq_dev *);

	if (!d)
		return;
	/* marks of buffers filled and never flushed are set, then the
	 * layout's own ops are back */
	vq_dev_set_log(d, NULL, NULL, 0);
	destroy = d->ops->destroy;
	free(d->iotlb);
	destroy(d);
}

void vq_dev_reset(struct vq_dev *d)
{
	d->err = 0;
	d->errmsg[0] = '\0';
	if (d->iotlb) {
		d->iotlb->missed = d->iotlb->stalled = false;
		held_set(d->iotlb, 0);
	}
	d->ops->reset(d);
}

int vq_dev_pop(struct vq_dev *d, struct vq_chain *c)
{
	if (unlikely(d->err))
		return d->err;
	return d->ops->pop(d, c);
}

int vq_dev_pop_burst(struct vq_dev *d, struct vq_chain *c, unsigned n)
{
	unsigned i;

	if (unlikely(d->err))
		return d->err;
	if (d->ops->pop_burst)
		return d->ops->pop_burst(d, c, n);
	for (i = 0; i < n; i++) {
		int r = d->ops->pop(d, &c[i]);

		if (r <= 0)
			return i ? (int)i : r;
	}
	return (int)i;
}

int vq_dev_unpop(struct vq_dev *d, const struct vq_chain *c, unsigned n)
{
	if (unlikely(d->err))
		return d->err;
	return d->ops->unpop(d, c, n);
}

/* ---- migration logging: a copy of the layout's ops with four wrapped ---- */

struct vq_dev_log {
	struct vq_dev_ops ops;
	const struct vq_dev_ops *layout;
	struct vq_gpa_range ring[2];
	unsigned nring;
	struct vq_log_batch batch;      /* the burst's buffers, marked at flush */
};

/* The ring areas this side writes, after it wrote them.  Set with the next
 * burst's marks, or when the queue stops or is freed: a bit only has to be
 * there before the frontend's last scan, which follows the ring's stop. */
static void log_ring(struct vq_dev_log *l)
{
	for (unsigned i = 0; i < l->nring; i++)
		vq_log_batch_add(&l->batch, l->ring[i].gpa, l->ring[i].len);
}

static int log_fill(struct vq_dev *d, const struct vq_chain *c, uint32_t len)
{
	const struct iovec *w = c->iov + c->nout;

	/* the device wrote these bytes before filling */
	if (!c->nin || len > w->iov_len ||
	    !vq_log_batch_add_fast(&d->log->batch, w->iov_base, len))
		vq_log_batch_add_iov(&d->log->batch, d->cfg.mem, w, c->nin, len);
	return d->log->layout->fill(d, c, len);
}

static int log_flush(struct vq_dev *d)
{
	int r;

	/* the buffers' pages are marked before the driver can see them used */
	vq_log_batch_flush(&d->log->batch);
	r = d->log->layout->flush(d);
	log_ring(d->log);
	return r;
}

static void log_disable_notify(struct vq_dev *d)
{
	d->log->layout->disable_notify(d);
	log_ring(d->log);
}

static int log_enable_notify(struct vq_dev *d)
{
	int r = d->log->layout->enable_notify(d);

	log_ring(d->log);
	return r;
}

int vq_dev_set_log(struct vq_dev *d, const struct vq_dirty_log *log,
		   const struct vq_gpa_range *ring, unsigned nring)
{
	struct vq_dev_log *l = d->log;

	if (nring > 2 || (log && !VQ_RESERVED_ZERO(log)))
		return -EINVAL;
	if (!log) {
		if (l) {
			vq_log_batch_flush(&l->batch);
			d->ops = l->layout;
			d->log = NULL;
			free(l);
		}
		return 0;
	}
	if (!l) {
		l = calloc(1, sizeof(*l));
		if (!l)
			return -ENOMEM;
		l->layout = d->ops;
		l->ops = *d->ops;
		l->ops.fill = log_fill;
		l->ops.flush = log_flush;
		l->ops.disable_notify = log_disable_notify;
		l->ops.enable_notify = log_enable_notify;
	}
	vq_log_batch_flush(&l->batch);
	l->batch.log = log;
	l->batch.hint = NULL;
	l->nring = nring;
	memcpy(l->ring, ring, nring * sizeof(*ring));
	d->log = l;
	d->ops = &l->ops;
	return 0;
}

/* ---- the device side's calls ---- */

int vq_dev_fill(struct vq_dev *d, const struct vq_chain *c, uint32_t len)
{
	if (unlikely(d->err))
		return d->err;
	if (unlikely(len > c->in_len))
		return -EINVAL;
	return d->ops->fill(d, c, len);
}

int vq_dev_flush(struct vq_dev *d)
{
	if (unlikely(d->err))
		return d->err;
	return d->ops->flush(d);
}

int vq_dev_push(struct vq_dev *d, const struct vq_chain *c, uint32_t len)
{
	int r = vq_dev_fill(d, c, len);

	return r < 0 ? r : vq_dev_flush(d);
}

bool vq_dev_should_signal(struct vq_dev *d)
{
	/* A broken queue still signals: the driver must look and find out. */
	return d->ops->should_signal(d);
}

bool vq_dev_signal_owed(struct vq_dev *d)
{
	return d->ops->signal_owed ? d->ops->signal_owed(d) : d->ops->should_signal(d);
}

void vq_dev_disable_notify(struct vq_dev *d)
{
	if (likely(!d->err))
		d->ops->disable_notify(d);
}

int vq_dev_enable_notify(struct vq_dev *d)
{
	if (unlikely(d->err))
		return d->err;
	return d->ops->enable_notify(d);
}

bool vq_dev_has_avail(struct vq_dev *d)
{
	return likely(!d->err) && d->ops->has_avail(d);
}

void vq_dev_prefetch_avail(const struct vq_dev *d)
{
	if (d->ops->prefetch_avail)
		d->ops->prefetch_avail(d);
}

struct vq_dev_state vq_dev_get_state(const struct vq_dev *d)
{
	return d->ops->get_state(d);
}

uint16_t vq_dev_num(const struct vq_dev *d) { return d->cfg.num; }
uint64_t vq_dev_features(const struct vq_dev *d) { return d->cfg.features; }
void vq_dev_defer_used_idx(struct vq_dev *d)
{
	d->cfg.used_idx_unread = !vq_has(d->cfg.features, VQ_F_RING_PACKED);
}

void vq_dev_take_used_idx(struct vq_dev *d)
{
	uint16_t idx;

	if (!d->cfg.used_idx_unread)
		return;
	d->cfg.used_idx_unread = false;
	vq_ring_used_idx(d->cfg.features, d->cfg.ring.device, &idx);
	d->cfg.used_idx = idx;
	vq_dev_reset(d);
}

int vq_dev_error(const struct vq_dev *d) { return d->err; }
const char *vq_dev_error_msg(const struct vq_dev *d) { return d->errmsg; }

/* ---- driver side ---- */

int vq_drv_new(const struct vq_drv_config *cfg, struct vq_drv **out)
{
	*out = NULL;
	if (!VQ_RESERVED_ZERO(cfg) || !ring_features_ok(cfg->features) ||
	    !vq_ring_num_valid(cfg->features, cfg->num) ||
	    !ring_addr_ok(cfg->features, &cfg->ring))
		return -EINVAL;
	if (cfg->indirect && (!aligned(cfg->indirect, 16) ||
			      (cfg->indirect_gpa & 15) || cfg->indirect_max < 2))
		return -EINVAL;
	if (vq_has(cfg->features, VQ_F_RING_PACKED))
		return vq_packed_drv_new(cfg, out);
	return vq_split_drv_new(cfg, out);
}

void vq_drv_free(struct vq_drv *q)
{
	if (q)
		q->ops->destroy(q);
}

void vq_drv_reset(struct vq_drv *q)
{
	q->err = 0;
	q->errmsg[0] = '\0';
	q->ops->reset(q);
}

int vq_drv_add(struct vq_drv *q, const struct vq_seg *seg, unsigned nout,
	       unsigned nin, void *token)
{
	if (unlikely(q->err))
		return q->err;
	if (unlikely(!token || nout + nin == 0 || nout + nin > q->cfg.num * 2u))
		return -EINVAL;
	return q->ops->add(q, seg, nout, nin, token);
}

int vq_drv_add_burst(struct vq_drv *q, const struct vq_seg *seg,
		     void *const *tokens, unsigned n, bool writable)
{
	unsigned i;

	if (unlikely(q->err))
		return q->err;
	if (n > q->cfg.num)
		n = q->cfg.num;
	for (i = 0; i < n; i++)
		if (unlikely(!tokens[i]))
			return -EINVAL;
	return q->ops->add_burst(q, seg, tokens, n, writable);
}

int vq_drv_kick_prepare(struct vq_drv *q)
{
	if (unlikely(q->err))
		return q->err;
	return q->ops->kick_prepare(q);
}

int vq_drv_get(struct vq_drv *q, void **token, uint32_t *len)
{
	if (unlikely(q->err))
		return q->err;
	return q->ops->get(q, token, len);
}

int vq_drv_get_burst(struct vq_drv *q, void **tokens, uint32_t *lens, unsigned n)
{
	if (unlikely(q->err))
		return q->err;
	return q->ops->get_burst(q, tokens, lens, n);
}

void vq_drv_disable_cb(struct vq_drv *q)
{
	if (likely(!q->err))
		q->ops->disable_cb(q);
}

int vq_drv_enable_cb(struct vq_drv *q)
{
	if (unlikely(q->err))
		return q->err;
	return q->ops->enable_cb(q);
}

int vq_drv_enable_cb_delayed(struct vq_drv *q)
{
	if (unlikely(q->err))
		return q->err;
	return q->ops->enable_cb_delayed(q);
}

bool vq_drv_has_used(struct vq_drv *q)
{
	return likely(!q->err) && q->ops->has_used(q);
}

void *vq_drv_detach_unused(struct vq_drv *q)
{
	return q->ops->detach_unused(q);
}

unsigned vq_drv_free_slots(const struct vq_drv *q) { return q->ops->free_slots(q); }
unsigned vq_drv_outstanding(const struct vq_drv *q) { return q->ops->outstanding(q); }
uint16_t vq_drv_num(const struct vq_drv *q) { return q->cfg.num; }
uint64_t vq_drv_features(const struct vq_drv *q) { return q->cfg.features; }
int vq_drv_error(const struct vq_drv *q) { return q->err; }
const char *vq_drv_error_msg(const struct vq_drv *q) { return q->errmsg; }
