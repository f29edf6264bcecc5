// SPDX-License-Identifier: MIT
/*
 * The back-end's rings: a ring starts (a struct vq_dev over guest memory)
 * once it has memory, features, a size, addresses and a kick fd, and the
 * device's queue_start runs when it is also enabled.  Any change the
 * library makes under a running ring suspends it, keeping its place, and
 * starts it again; the front-end's own stops end it.
 */
#include <errno.h>
#include <string.h>

#include "backend_internal.h"
#include "backend_lib.h"
#include "ring_lib.h"

void vhu_backend_defer_used_idx(struct vq_vhu_backend *b)
{
	b->defer_used_idx = true;
}

int vhu_ring_areas(const struct vq_vhu_backend *b, unsigned i,
		   uint64_t size[3], uint64_t align[3])
{
	return vq_ring_areas(vhu_ring_features(b->features), b->rings[i].num,
			     size, align);
}

const char *vhu_area_name(const struct vq_vhu_backend *b, unsigned k)
{
	static const char *const name[2][3] = {
		{ "descriptor table", "available ring", "used ring" },
		{ "descriptor ring", "driver event suppression",
		  "device event suppression" },
	};

	return name[vhu_packed(b)][k];
}

/* 2.7, 2.8: a queue size the layout allows (the codec checked 1..32768). */
static int ring_num_check(struct vq_vhu_backend *b, unsigned i, uint32_t num)
{
	if (vq_ring_num_valid(vhu_ring_features(b->features), num))
		return 0;
	return vhu_berr(b, -EINVAL, "%s: queue %u: size %u is not %s",
			vhu_packed(b) ? "2.8" : "2.7", i, num,
			vhu_packed(b) ? "1 to 32768" : "a power of 2 up to 32768");
}

/*
 * The ring areas' addresses: each aligned as the spec requires (2.7,
 * 2.8.10.1) and, without an IOTLB, each inside one memory region
 * (vhost-user "Memory access"); IOVAs are checked when the IOTLB maps
 * them.  With hva, where each area is here.
 */
static int ring_areas_check(struct vq_vhu_backend *b, unsigned i, void *hva[3])
{
	const struct ring *q = &b->rings[i];
	uint64_t size[3], align[3];

	if (vhu_ring_areas(b, i, size, align))
		return ring_num_check(b, i, q->num);
	for (unsigned k = 0; k < 3; k++) {
		void *p = NULL;

		if (q->ua[k] % align[k])
			return vhu_berr(b, -EINVAL,
					"%s: queue %u: %s at 0x%llx is not %llu-byte aligned",
					vhu_packed(b) ? "2.8.10.1" : "2.7", i,
					vhu_area_name(b, k), (unsigned long long)q->ua[k],
					(unsigned long long)align[k]);
		if (!vhu_iommu(b) &&
		    !(p = vq_mem_uaddr_to_hva(b->mem, q->ua[k], size[k])))
			return vhu_berr(b, -EFAULT,
					"vhost-user \"Memory access\": queue %u: %s at 0x%llx (%llu bytes) is not inside one memory region",
					i, vhu_area_name(b, k), (unsigned long long)q->ua[k],
					(unsigned long long)size[k]);
		if (hva)
			hva[k] = p;
	}
	return 0;
}

/* resumes: the ring pauses for a change of the library's own (memory,
 * addresses, IOTLB, fds) and starts again at its place; a paused ring
 * that then stops for good is told so. */
void vhu_dev_stop(struct vq_vhu_backend *b, unsigned i, bool resumes)
{
	struct ring *q = &b->rings[i];

	if (q->dev_running || (q->dev_paused && !resumes)) {
		q->dev_running = false;
		q->dev_paused = resumes;
		if (b->dev.ops->queue_stop)
			b->dev.ops->queue_stop(b->dev.opaque, i, resumes);
	}
}

static int dev_start(struct vq_vhu_backend *b, unsigned i)
{
	struct ring *q = &b->rings[i];
	struct vq_vhu_queue vq;
	int r = 0;

	if (!q->vq || !q->enabled || q->dev_running)
		return 0;
	vq = (struct vq_vhu_queue){ .index = i, .vq = q->vq,
		.kick_fd = q->kick_fd, .call_fd = q->call_fd,
		.err_fd = q->err_fd };
	if (b->dev.ops->queue_start)
		r = b->dev.ops->queue_start(b->dev.opaque, &vq);
	if (r)
		return vhu_berr(b, r < 0 ? r : -EIO,
				"vhost-user \"Ring states\": queue %u: the device failed to start it (%d)",
				i, r);
	q->dev_running = true;
	q->dev_paused = false;
	return 0;
}

/* Stop a started ring and keep its position in base, so a restart (after a
 * memory or address change, or SET_VRING_BASE) resumes where it was. */
void vhu_ring_suspend(struct vq_vhu_backend *b, unsigned i, bool resumes)
{
	struct ring *q = &b->rings[i];
	struct vq_dev_state st;

	vhu_dev_stop(b, i, resumes);
	if (!q->vq)
		return;
	/* a fill the device did not flush still wrote the ring */
	if (vhu_logging(b))
		for (unsigned k = 0; k < q->log_nring; k++)
			vq_dirty_log_mark(&b->log, q->log_ring[k].gpa, q->log_ring[k].len);
	st = vq_dev_get_state(q->vq);
	q->base = vhu_packed(b) ? (uint32_t)st.avail_idx | (uint32_t)st.used_idx << 16
				: st.avail_idx;
	q->has_base = true;
	vq_dev_free(q->vq);
	q->vq = NULL;
}

/*
 * Where a ring resumes (vhost-user "Vring descriptor indices for packed
 * virtqueues", SET_VRING_BASE): a packed ring's avail and used positions
 * from its base; a split ring's avail index from its base and its used
 * index from memory, where the driver keeps it.
 */
static int ring_base(struct vq_vhu_backend *b, unsigned i, struct vq_dev_config *cfg)
{
	struct ring *q = &b->rings[i];
	uint32_t base;

	if (!vhu_packed(b)) {
		cfg->avail_idx = q->has_base ? (uint16_t)q->base : 0;
		if (b->defer_used_idx) {
			cfg->used_idx = 0;      /* the device's thread reads it */
			return 0;
		}
		return vq_ring_used_idx(cfg->features, cfg->ring.device,
					&cfg->used_idx);
	}
	base = q->has_base ? q->base : 0x80008000u;
	/* Front-ends that send only the avail half (DPDK 22.11's
	 * virtio-user sends 0x8000 for a fresh ring) mean "used where
	 * avail is", as DPDK's own vhost reads it. */
	if (!(base >> 16))
		base |= base << 16;
	if ((base & 0x7fff) >= q->num || ((base >> 16) & 0x7fff) >= q->num)
		return vhu_berr(b, -EINVAL,
				"vhost-user \"Vring descriptor indices for packed virtqueues\": queue %u: base 0x%x puts avail at %u and used at %u, not below the ring size %u",
				i, base, base & 0x7fff, (base >> 16) & 0x7fff, q->num);
	cfg->avail_idx = base & 0xffff;
	cfg->used_idx = base >> 16;
	return 0;
}

/* Create the ring (a struct vq_dev) once it has everything, then start the
 * device on it if it is enabled. */
int vhu_ring_try_start(struct vq_vhu_backend *b, unsigned i)
{
	struct ring *q = &b->rings[i];
	struct vq_dev_config cfg;
	void *hva[3];
	int r;

	if (b->pc.ack_pending)
		return 0;       /* started by the front-end's postcopy ack */
	if (q->vq)
		return dev_start(b, i);
	if (!q->has_kick || !q->has_addr || !q->has_num || !b->features_set ||
	    vq_mem_count(b->mem) == 0)
		return 0;
	memset(&cfg, 0, sizeof(cfg));
	cfg.features = vhu_ring_features(b->features);
	cfg.num = q->num;
	cfg.mem = b->mem;
	/* again: the memory table may have changed since SET_VRING_ADDR */
	r = ring_areas_check(b, i, hva);
	if (r)
		return r;
	if (vhu_iommu(b)) {
		bool mapped;

		r = vhu_ring_map_iova(b, i, &cfg.ring, &mapped);
		if (r || !mapped)
			return r;       /* or waiting for the front-end's IOTLB */
	} else {
		cfg.ring = (struct vq_ring_addr){ hva[0], hva[1], hva[2] };
	}
	r = ring_base(b, i, &cfg);
	if (!r)
		r = vhu_ring_log_setup(b, i, &cfg.ring);
	if (r)
		return r;
	r = vq_dev_new(&cfg, &q->vq);
	if (r)
		return vhu_berr(b, r,
				"vhost-user \"Ring states\": queue %u: the ring layer refused it: %s",
				i, strerror(-r));
	if (b->defer_used_idx)
		vq_dev_defer_used_idx(q->vq);
	if (vhu_logging(b)) {
		r = vq_dev_set_log(q->vq, &b->log, q->log_ring, q->log_nring);
		if (r) {
			vq_dev_free(q->vq);
			q->vq = NULL;
			return vhu_berr(b, r,
					"vhost-user \"Migration\": queue %u: no memory to log the ring",
					i);
		}
	}
	return dev_start(b, i);
}

void vhu_ring_reset(struct vq_vhu_backend *b, unsigned i)
{
	struct ring *q = &b->rings[i];

	vhu_dev_stop(b, i, false);
	vq_dev_free(q->vq);
	vhu_close_fd(&q->kick_fd);
	vhu_close_fd(&q->call_fd);
	vhu_close_fd(&q->err_fd);
	memset(q, 0, sizeof(*q));
	q->kick_fd = q->call_fd = q->err_fd = -1;
}

void vhu_suspend_all(struct vq_vhu_backend *b)
{
	for (unsigned i = 0; i < b->dev.nqueues; i++)
		vhu_ring_suspend(b, i, true);
}

int vhu_start_all(struct vq_vhu_backend *b)
{
	for (unsigned i = 0; i < b->dev.nqueues; i++) {
		int r = vhu_ring_try_start(b, i);

		if (r)
			return r;
	}
	return 0;
}

/* SET_VRING_NUM and _BASE change what a ring is built on: not while it
 * runs (vhost-user "Ring states"). */
static int ring_stopped_check(struct vq_vhu_backend *b, unsigned i,
			      const struct vq_vhu_msg *m)
{
	if (!b->rings[i].vq)
		return 0;
	return vhu_berr(b, -EBUSY, "%s: queue %u is running (GET_VRING_BASE stops it)",
			vq_vhu_request_name(m->request), i);
}

int vhu_h_vring_num(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	unsigned i = m->u.state.index;
	struct ring *q = &b->rings[i];
	int r;

	r = ring_stopped_check(b, i, m);
	if (!r)
		r = ring_num_check(b, i, m->u.state.num);
	if (r)
		return r;
	q->num = m->u.state.num;
	q->has_num = true;
	return vhu_ring_try_start(b, i);
}

int vhu_h_vring_addr(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	unsigned i = m->u.addr.index;
	struct ring *q = &b->rings[i];
	const char *missing = vq_mem_count(b->mem) == 0 ? "SET_MEM_TABLE" :
			      !b->features_set ? "SET_FEATURES" :
			      !q->has_num ? "SET_VRING_NUM" : NULL;
	int r;

	/* the areas' sizes and meaning depend on all three */
	if (missing)
		return vhu_berr(b, -EPROTO,
				"VHOST_USER_SET_VRING_ADDR: queue %u before VHOST_USER_%s",
				i, missing);
	vhu_ring_suspend(b, i, true);
	q->ua[0] = m->u.addr.desc;
	q->ua[1] = m->u.addr.avail;
	q->ua[2] = m->u.addr.used;
	q->log_used = m->u.addr.flags & VQ_VHU_VRING_F_LOG;
	q->log_gpa = m->u.addr.log;
	q->has_addr = true;
	/* now, so the error comes with this message */
	r = ring_areas_check(b, i, NULL);
	return r ? r : vhu_ring_try_start(b, i);
}

int vhu_h_vring_base(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	unsigned i = m->u.state.index;
	struct ring *q = &b->rings[i];
	int r = ring_stopped_check(b, i, m);

	if (r)
		return r;
	if (!vhu_packed(b) && (m->u.state.num >> 16))
		return vhu_berr(b, -EINVAL,
				"VHOST_USER_SET_VRING_BASE: split queue %u base 0x%x sets bits 16-31, which are reserved",
				i, m->u.state.num);
	q->base = m->u.state.num;
	q->has_base = true;
	return vhu_ring_try_start(b, i);
}

int vhu_h_get_vring_base(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	unsigned i = m->u.state.index;
	struct ring *q = &b->rings[i];
	struct vq_vhu_msg rep = { .kind = VQ_VHU_P_STATE };

	vhu_ring_suspend(b, i, false);
	/* stopped: a restart needs a new kick (spec, "Ring states") */
	vhu_close_fd(&q->kick_fd);
	q->has_kick = false;
	rep.u.state.index = i;
	rep.u.state.num = q->has_base ? q->base : vhu_packed(b) ? 0x80008000u : 0;
	return vhu_reply(b, m, &rep);
}

/*
 * The kick, call and err fds are eventfds ("the event file descriptor"):
 * anything else (a pipe, a socket, a memfd) would block a queue thread or
 * fail it in odd ways, so it is refused before any ring sees it.  The one
 * taken is made non-blocking; its open file description is the
 * front-end's too, which sees the flag and may clear it again: no read of
 * ours waits anyway (vq_evt_drain), and the control thread polls before
 * it writes (vhu_fe_signal).
 */
static int vring_fd_take(struct vq_vhu_backend *b, const struct vq_vhu_msg *m,
			 unsigned i, int fd)
{
	char kind[80];
	int r = vhu_fd_eventfd(fd, kind, sizeof(kind));

	if (r == -EINVAL)
		return vhu_berr(b, r, "%s: queue %u: the fd is %s, not an eventfd",
				vq_vhu_request_name(m->request), i, kind);
	if (!r)
		r = vhu_fd_nonblock(fd);
	if (r)
		return vhu_berr(b, r, "%s: queue %u: the fd cannot be used: %s",
				vq_vhu_request_name(m->request), i, strerror(-r));
	return 0;
}

int vhu_h_vring_fd(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	unsigned i = m->u.vring_fd.index;
	struct ring *q = &b->rings[i];
	int fd = m->u.vring_fd.nofd ? -1 : m->fds[0];
	int *slot = m->request == VQ_VHU_SET_VRING_KICK ? &q->kick_fd :
		    m->request == VQ_VHU_SET_VRING_CALL ? &q->call_fd : &q->err_fd;

	/* refused: the fd stays the message's, closed with it */
	if (fd >= 0) {
		int r = vring_fd_take(b, m, i, fd);

		if (r)
			return r;
	}
	m->nfds = 0;
	/* the device must let go of the old fd before it is closed */
	vhu_dev_stop(b, i, true);
	vhu_close_fd(slot);
	*slot = fd;
	/* A new call fd gets one signal: a completion whose call went to the
	 * old fd, or was never sent by a back-end that died (reconnect),
	 * still reaches the driver; a spurious one finds nothing used. */
	if (m->request == VQ_VHU_SET_VRING_CALL && fd >= 0)
		vhu_fe_signal(fd);
	if (m->request == VQ_VHU_SET_VRING_KICK)
		q->has_kick = true;
	return vhu_ring_try_start(b, i);
}

int vhu_h_vring_enable(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	unsigned i = m->u.state.index;
	struct ring *q = &b->rings[i];

	q->enabled = m->u.state.num;
	if (!q->enabled) {
		vhu_dev_stop(b, i, false);
		return VHU_DONE;
	}
	return vhu_ring_try_start(b, i);
}
