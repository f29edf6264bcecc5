// SPDX-License-Identifier: MIT
/*
 * A device on the framework: its vhost-user back-end, whose device
 * callbacks are ours, and its rings.  The back-end calls queue_start,
 * queue_stop and reset on the control thread; each becomes a call to the
 * worker of the ring's group, which runs the device's callback there and
 * puts the ring on its loop or takes it off.  A ring that fails to start
 * is left stopped with nothing of it on the loop, so the next start, of
 * this front-end or the next, finds it as new.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "framework_internal.h"
#include "log_internal.h"
#include "ring_lib.h"
#include "backend_lib.h"

static const struct vq_fw_device_ops no_ops;

/* ---- a ring's turn ---- */

static int ring_turn(struct vq_rt_queue *q, void *arg,
		     const struct vq_rt_budget *b, uint64_t *bytes)
{
	struct vq_fw_ring *r = arg;
	int n;

	__atomic_store_n(&r->w->busy, r->dev, __ATOMIC_RELAXED);
	n = r->turn.process(q, r->turn.arg, b, bytes);
	__atomic_store_n(&r->w->busy, NULL, __ATOMIC_RELAXED);
	if (likely(n >= 0))
		return n;
	vq_fw_ring_broken(r);
	return 0;
}

/* A ring without a kick fd (the front-end asked the back-end to poll):
 * no kick will ever wake it, so it never sleeps; its calls are the
 * device's, or the ring's own. */
static bool poll_has_avail(void *p)
{
	struct vq_fw_ring *r = p;

	return r->turn.ops && r->turn.ops->has_avail ?
	       r->turn.ops->has_avail(r->turn.ring) : vq_dev_has_avail(r->vq);
}

static void poll_disable(void *p)
{
	struct vq_fw_ring *r = p;

	if (r->turn.ops && r->turn.ops->disable_notify)
		r->turn.ops->disable_notify(r->turn.ring);
	else
		vq_dev_disable_notify(r->vq);
}

static int poll_enable(void *p)
{
	struct vq_fw_ring *r = p;
	int k = r->turn.ops && r->turn.ops->enable_notify ?
		r->turn.ops->enable_notify(r->turn.ring) :
		vq_dev_enable_notify(r->vq);

	if (k < 0)
		return k;
	return vq_dev_error(r->vq) ? 0 : 1;
}

static bool poll_should_signal(void *p)
{
	struct vq_fw_ring *r = p;

	return r->turn.ops && r->turn.ops->should_signal ?
	       r->turn.ops->should_signal(r->turn.ring) : vq_dev_should_signal(r->vq);
}

static bool poll_signal_owed(void *p)
{
	struct vq_fw_ring *r = p;

	return r->turn.ops && r->turn.ops->signal_owed ?
	       r->turn.ops->signal_owed(r->turn.ring) : vq_dev_signal_owed(r->vq);
}

static int ring_on_loop(struct vq_fw_ring *r)
{
	struct vq_rt_queue_config qc = {
		.dev = r->vq, .ops = r->turn.ops, .ring = r->turn.ring,
		.kick_fd = r->kick_fd, .call_fd = r->call_fd,
		.process = ring_turn, .arg = r,
	};

	if (r->kick_fd < 0) {
		r->poll_ops = (struct vq_rt_ring_ops){
			.has_avail = poll_has_avail, .disable_notify = poll_disable,
			.enable_notify = poll_enable,
			.should_signal = poll_should_signal,
			.signal_owed = poll_signal_owed,
		};
		qc.ops = &r->poll_ops;
		qc.ring = r;
	}
	return vq_rt_loop_add(r->w->loop, &qc, &r->rtq);
}

/* Off the loop, keeping its counters. */
static void ring_off_loop(struct vq_fw_ring *r)
{
	if (!r->rtq)
		return;
	vq_rt_counters_add(&r->base, vq_rt_queue_counters(r->rtq));
	vq_rt_queue_remove(r->rtq);
	r->rtq = NULL;
}

/* ---- the lifecycle, on the ring's worker ---- */

static void ring_start_call(void *arg)
{
	struct start_call *sc = arg;
	struct vq_fw_ring *r = sc->r;
	struct vq_fw_dev *d = r->dev;
	const struct vq_fw_device_ops *ops = d->desc.ops;
	bool resumed = r->state == FR_PAUSED, started = false;
	struct vq_fw_turn t = { 0 };
	int e;

	r->vq = sc->q.vq;
	r->kick_fd = sc->q.kick_fd;
	r->call_fd = sc->q.call_fd;
	r->err_fd = sc->q.err_fd;
	r->broken = false;
	/* here, not on the control thread: the page may be one postcopy has
	 * not brought yet */
	vq_dev_take_used_idx(r->vq);
	e = ops->ring_start ? ops->ring_start(d->desc.opaque, r, resumed, &t) : 0;
	started = e == 0;
	if (e == 0 && !VQ_RESERVED_ZERO(&t))
		e = -EINVAL;
	r->turn = t;
	if (e == 0 && t.process)
		e = ring_on_loop(r);
	if (e) {
		/* what the device set up for it (or kept while it paused) goes */
		if ((started || resumed) && ops->ring_stop) {
			if (!started)
				r->vq = NULL;
			ops->ring_stop(d->desc.opaque, r, false);
		}
		r->rtq = NULL;
		r->vq = NULL;
		r->kick_fd = r->call_fd = r->err_fd = -1;
		r->state = FR_STOPPED;
		vq_vhu_backend_fail(d->b, e,
				    "vhost-user \"Ring states\": %s: queue %u: the device could not start it: %s",
				    d->desc.name, r->index, strerror(-e));
		return;
	}
	r->state = FR_RUNNING;
}

struct stop_call {
	struct vq_fw_ring *r;
	bool paused;
};

static void ring_stop_call(void *arg)
{
	struct stop_call *sc = arg;
	struct vq_fw_ring *r = sc->r;
	struct vq_fw_dev *d = r->dev;
	const struct vq_fw_device_ops *ops = d->desc.ops;

	if (r->state == FR_RUNNING) {
		/* still on the loop: the device's last flush may call */
		if (ops->ring_stop)
			ops->ring_stop(d->desc.opaque, r, sc->paused);
		ring_off_loop(r);
		r->vq = NULL;
		r->kick_fd = r->call_fd = r->err_fd = -1;
		r->state = sc->paused ? FR_PAUSED : FR_STOPPED;
	} else if (r->state == FR_PAUSED && !sc->paused) {
		if (ops->ring_stop)
			ops->ring_stop(d->desc.opaque, r, false);
		r->state = FR_STOPPED;
	}
}

struct reset_call {
	struct vq_fw_dev *d;
	unsigned group;
};

static void reset_call(void *arg)
{
	struct reset_call *rc = arg;

	rc->d->desc.ops->reset(rc->d->desc.opaque, rc->group);
}

/* ---- the back-end's device callbacks (control thread) ---- */

/* Not waited for: a start that fails closes the connection from the
 * worker (vq_vhu_backend_fail), and every later call on the ring runs
 * after it. */
static int fw_queue_start(void *opaque, const struct vq_vhu_queue *q)
{
	struct vq_fw_dev *d = opaque;
	struct vq_fw_ring *r = &d->rings[q->index];

	r->ctl_call_fd = q->call_fd;
	r->ctl_err_fd = q->err_fd;
	r->start = (struct start_call){ .r = r, .q = *q };
	r->start.call = (struct fw_call){ .fn = ring_start_call, .arg = &r->start,
					  .dev = d };
	fw_call_post(r->w, &r->start.call);
	return 0;
}

static void fw_queue_stop(void *opaque, unsigned index, bool resumes)
{
	struct vq_fw_dev *d = opaque;
	struct stop_call sc = { &d->rings[index], resumes };
	struct fw_call c = { .fn = ring_stop_call, .arg = &sc, .dev = d };

	fw_call_wait(sc.r->w, &c);
	sc.r->ctl_call_fd = sc.r->ctl_err_fd = -1;
}

static void fw_reset(void *opaque)
{
	struct vq_fw_dev *d = opaque;

	if (!d->desc.ops->reset)
		return;
	for (unsigned g = 0; g < d->ngroups; g++) {
		struct reset_call rc = { d, g };
		struct fw_call c = { .fn = reset_call, .arg = &rc, .dev = d };

		fw_call_wait(fw_worker_of(d, g), &c);
	}
}

static void fw_get_config(void *opaque, uint32_t off, void *buf, uint32_t len)
{
	struct vq_fw_dev *d = opaque;

	d->desc.ops->get_config(d->desc.opaque, off, buf, len);
}

static int fw_set_config(void *opaque, uint32_t off, const void *buf,
			 uint32_t len, uint32_t flags)
{
	struct vq_fw_dev *d = opaque;

	return d->desc.ops->set_config(d->desc.opaque, off, buf, len, flags);
}

static int fw_send_rarp(void *opaque, const uint8_t mac[6])
{
	struct vq_fw_dev *d = opaque;

	return d->desc.ops->send_rarp(d->desc.opaque, mac);
}

static int fw_set_mtu(void *opaque, uint16_t mtu)
{
	struct vq_fw_dev *d = opaque;

	return d->desc.ops->set_mtu(d->desc.opaque, mtu);
}

/* ---- stalls ---- */

void fw_dev_stalled(struct vq_fw_dev *d, const struct fw_worker *w, const char *where)
{
	vq_vhu_backend_fail(d->b, -ETIMEDOUT,
			    "vhost-user \"Ring states\": %s: worker %u made no progress for %u ms%s: held by a page the front-end does not serve or by one of its fds",
			    d->desc.name, w->id, d->fw->cfg.stall_ms, where);
}

bool fw_dev_hung_up(const struct vq_fw_dev *d)
{
	struct pollfd p = { .fd = vq_vhu_backend_connected(d->b) ?
				  vq_vhu_backend_fd(d->b) : -1,
			    .events = POLLRDHUP };

	return p.fd >= 0 && poll(&p, 1, 0) == 1 &&
	       (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

void fw_unstall(struct vq_fw_dev *d, struct fw_worker *w)
{
	vq_log(VQ_LOG_WARNING, "%s: worker %u is held by a front-end that is gone or slower than %u ms: failing it and releasing the worker",
	       d->desc.name, w->id, d->fw->cfg.stall_ms);
	fw_dev_stalled(d, w, "");
	/* a fault nobody serves: unregistering wakes the thread */
	vhu_backend_unstall(d->b);
	/* a write into a call or err eventfd the front-end made blocking
	 * and filled: emptying it lets the write finish */
	for (unsigned i = 0; i < d->desc.nqueues; i++) {
		struct vq_fw_ring *r = &d->rings[i];

		if (r->w != w)
			continue;
		if (r->ctl_call_fd >= 0)
			vq_evt_drain(r->ctl_call_fd);
		if (r->ctl_err_fd >= 0)
			vq_evt_drain(r->ctl_err_fd);
	}
}

unsigned fw_reap_broken(struct fw_worker *w)
{
	struct vq_fw *fw = w->fw;
	unsigned n = 0;

	pthread_mutex_lock(&fw->devs_lock);
	for (struct vq_fw_dev *d = fw->devs; d; d = d->next)
		for (unsigned i = 0; i < d->desc.nqueues; i++) {
			struct vq_fw_ring *r = &d->rings[i];

			if (r->w == w && r->rtq && vq_dev_error(r->vq)) {
				vq_fw_ring_broken(r);
				n++;
			}
		}
	pthread_mutex_unlock(&fw->devs_lock);
	return n;
}

/* ---- the device ---- */

static bool ops_reserved_set(const struct vq_fw_device_ops *ops)
{
	for (unsigned i = 0; i < VQ_ARRAY_SIZE(ops->reserved); i++)
		if (ops->reserved[i])
			return true;
	return false;
}

int vq_fw_dev_new(struct vq_fw *fw, const struct vq_fw_device *dev,
		  struct vq_fw_dev **out)
{
	struct vq_vhu_device vd;
	struct vq_fw_dev *d;
	int r;

	*out = NULL;
	if (!fw || !dev || !VQ_RESERVED_ZERO(dev) || dev->nqueues == 0 ||
	    dev->nqueues > VQ_VHU_MAX_QUEUES || (dev->ops && ops_reserved_set(dev->ops)))
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->fw = fw;
	d->desc = *dev;
	if (!d->desc.ops)
		d->desc.ops = &no_ops;
	if (!d->desc.name)
		d->desc.name = "vhost-user device";
	d->group_size = dev->group_size ? dev->group_size : 2;
	d->ngroups = (dev->nqueues + d->group_size - 1) / d->group_size;
	d->rings = calloc(dev->nqueues, sizeof(*d->rings));
	if (!d->rings) {
		free(d);
		return -ENOMEM;
	}
	fw_dev_link(d);
	for (unsigned i = 0; i < dev->nqueues; i++)
		d->rings[i] = (struct vq_fw_ring){
			.dev = d, .w = fw_worker_of(d, i / d->group_size), .index = i,
			.kick_fd = -1, .call_fd = -1, .err_fd = -1,
			.ctl_call_fd = -1, .ctl_err_fd = -1,
		};
	d->vops = (struct vq_vhu_device_ops){
		.queue_start = fw_queue_start, .queue_stop = fw_queue_stop,
		.reset = fw_reset,
		.get_config = d->desc.ops->get_config ? fw_get_config : NULL,
		.set_config = d->desc.ops->set_config ? fw_set_config : NULL,
		.send_rarp = d->desc.ops->send_rarp ? fw_send_rarp : NULL,
		.set_mtu = d->desc.ops->set_mtu ? fw_set_mtu : NULL,
	};
	vd = (struct vq_vhu_device){
		.name = d->desc.name, .features = dev->features,
		.nqueues = dev->nqueues, .config_len = dev->config_len,
		.ops = &d->vops, .opaque = d,
	};
	r = vq_vhu_backend_new(&vd, &d->b);
	if (r < 0) {
		fw_dev_unlink(d);
		free(d->rings);
		free(d);
		return r;
	}
	vhu_backend_defer_used_idx(d->b);
	*out = d;
	return 0;
}

void vq_fw_dev_free(struct vq_fw_dev *d)
{
	if (!d)
		return;
	/* its connection closes: every ring stops on its worker */
	vq_vhu_backend_free(d->b);
	fw_dev_unlink(d);
	free(d->rings);
	free(d);
}

struct vq_vhu_backend *vq_fw_dev_backend(const struct vq_fw_dev *d)
{
	return d->b;
}

unsigned vq_fw_dev_groups(const struct vq_fw_dev *d)
{
	return d->ngroups;
}

int vq_fw_dev_call(struct vq_fw_dev *d, unsigned group, void (*fn)(void *arg),
		   void *arg)
{
	struct fw_call c = { .fn = fn, .arg = arg, .dev = d };
	struct fw_worker *w;

	if (group >= d->ngroups || !fn)
		return -EINVAL;
	w = fw_worker_of(d, group);
	if (!fw_on_worker(w) && fw_on_any_worker(d->fw))
		return -EDEADLK;
	fw_call_wait(w, &c);
	return 0;
}

struct vq_rt_loop *vq_fw_dev_loop(const struct vq_fw_dev *d, unsigned group)
{
	return group < d->ngroups ? fw_worker_of(d, group)->loop : NULL;
}

struct vq_fw_ring *vq_fw_dev_ring(const struct vq_fw_dev *d, unsigned index)
{
	return index < d->desc.nqueues ? &d->rings[index] : NULL;
}

unsigned vq_fw_ring_index(const struct vq_fw_ring *r)
{
	return r->index;
}

struct vq_dev *vq_fw_ring_vq(const struct vq_fw_ring *r)
{
	return r->vq;
}

bool vq_fw_ring_running(const struct vq_fw_ring *r)
{
	return r->state == FR_RUNNING;
}

int vq_fw_ring_signal(struct vq_fw_ring *r)
{
	if (r->rtq)
		return vq_rt_queue_signal(r->rtq);
	/* not on the loop (yet: ring_start runs before it is put there, or
	 * at all: a ring without turns of its own): call from here */
	if (!r->vq || r->broken || !vq_dev_should_signal(r->vq))
		return 0;
	if (r->call_fd >= 0) {
		int e = vq_evt_signal(r->call_fd);

		if (e < 0)
			return e;
	}
	r->base.calls_sent++;
	return 1;
}

void vq_fw_ring_wake(struct vq_fw_ring *r)
{
	if (r->rtq)
		vq_rt_queue_wake(r->rtq);
}

bool vq_fw_ring_active(const struct vq_fw_ring *r)
{
	return r->rtq && vq_rt_queue_active(r->rtq);
}

void vq_fw_ring_broken(struct vq_fw_ring *r)
{
	struct vq_fw_dev *d = r->dev;

	if (r->broken || r->state != FR_RUNNING)
		return;
	r->broken = true;
	vq_log(VQ_LOG_ERR, "%s: queue %u broken: %s", d->desc.name, r->index,
	       vq_dev_error(r->vq) ? vq_dev_error_msg(r->vq) :
	       "the device stopped serving it");
	if (r->err_fd >= 0)
		vq_evt_signal(r->err_fd);
	ring_off_loop(r);
}

bool vq_fw_ring_is_broken(const struct vq_fw_ring *r)
{
	return r->broken;
}

const struct vq_rt_counters *vq_fw_ring_counters(struct vq_fw_ring *r)
{
	r->total = r->base;
	if (r->rtq)
		vq_rt_counters_add(&r->total, vq_rt_queue_counters(r->rtq));
	return &r->total;
}
