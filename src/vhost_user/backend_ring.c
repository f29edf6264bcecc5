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

#include <virtq/runtime.h>

#include "backend_internal.h"

/* Sizes of a ring's three areas. */
void vhu_ring_sizes(const struct vq_vhu_backend *b, uint16_t num,
		       uint64_t *dsz, uint64_t *asz, uint64_t *usz)
{
	bool ev = b->features & VIRTQ_BIT(VIRTIO_F_EVENT_IDX);

	*dsz = 16ull * num;
	if (vhu_packed(b)) {
		*asz = *usz = 4;
	} else {
		*asz = 4 + 2ull * num + (ev ? 2 : 0);
		*usz = 4 + 8ull * num + (ev ? 2 : 0);
	}
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
		return vhu_berr(b, r < 0 ? r : -EIO, "%s: queue %u failed to start (%d)",
			    b->dev.name, i, r);
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
			vq_log_mark(&b->log, q->log_ring[k].gpa, q->log_ring[k].len);
	st = vq_dev_get_state(q->vq);
	q->base = vhu_packed(b) ? (uint32_t)st.avail_idx | (uint32_t)st.used_idx << 16
			    : st.avail_idx;
	q->has_base = true;
	vq_dev_free(q->vq);
	q->vq = NULL;
}

int vhu_ring_try_start(struct vq_vhu_backend *b, unsigned i)
{
	struct ring *q = &b->rings[i];
	uint64_t f = vhu_ring_features(b->features);
	bool pk = vhu_packed(b);
	uint64_t dsz, asz, usz, base;
	struct vq_dev_config cfg;
	int r;

	if (b->pc.ack_pending)
		return 0;       /* started by the front-end's postcopy ack */
	if (q->vq) {
		r = dev_start(b, i);
		return r;
	}
	if (!q->has_kick || !q->has_addr || !q->has_num || !b->features_set ||
	    vq_mem_count(b->mem) == 0)
		return 0;
	if (!vq_ring_num_valid(f, q->num))
		return vhu_berr(b, -EINVAL, "queue %u: size %u is not valid for a %s ring%s",
			    i, q->num, pk ? "packed" : "split",
			    pk ? "" : " (must be a power of two)");
	vhu_ring_sizes(b, q->num, &dsz, &asz, &usz);
	memset(&cfg, 0, sizeof(cfg));
	cfg.features = f;
	cfg.num = q->num;
	cfg.mem = b->mem;
	if (vhu_iommu(b)) {
		bool mapped;

		r = vhu_ring_map_iova(b, i, dsz, asz, usz, &cfg.ring, &mapped);
		if (r || !mapped)
			return r;       /* or waiting for the front-end's IOTLB */
	} else {
		cfg.ring.desc = vq_mem_uaddr_to_hva(b->mem, q->desc_ua, dsz);
		cfg.ring.driver = vq_mem_uaddr_to_hva(b->mem, q->avail_ua, asz);
		cfg.ring.device = vq_mem_uaddr_to_hva(b->mem, q->used_ua, usz);
	}
	if (!cfg.ring.desc || !cfg.ring.driver || !cfg.ring.device)
		return vhu_berr(b, -EFAULT,
			    "queue %u: ring area outside the memory map (desc 0x%llx, %s 0x%llx, %s 0x%llx)",
			    i, (unsigned long long)q->desc_ua,
			    pk ? "driver" : "avail", (unsigned long long)q->avail_ua,
			    pk ? "device" : "used", (unsigned long long)q->used_ua);
	if (q->desc_ua % 16 || q->avail_ua % (pk ? 4 : 2) || q->used_ua % 4)
		return vhu_berr(b, -EINVAL, "queue %u: misaligned ring address", i);
	if (pk) {
		base = q->has_base ? q->base : 0x80008000u;
		/* Front-ends that send only the avail half (DPDK 22.11's
		 * virtio-user sends 0x8000 for a fresh ring) mean "used where
		 * avail is", as DPDK's own vhost reads it. */
		if (!(base >> 16))
			base |= base << 16;
		if ((base & 0x7fff) >= q->num || ((base >> 16) & 0x7fff) >= q->num)
			return vhu_berr(b, -EINVAL,
				    "queue %u: packed base 0x%llx past the ring size %u",
				    i, (unsigned long long)base, q->num);
		cfg.avail_idx = base & 0xffff;
		cfg.used_idx = base >> 16;
	} else {
		const struct virtq_used *u = cfg.ring.device;

		cfg.avail_idx = q->has_base ? q->base : 0;
		/* split: the used index lives in memory (SET_VRING_BASE) */
		cfg.used_idx = vq_le16(__atomic_load_n(&u->idx, __ATOMIC_ACQUIRE));
	}
	r = vhu_ring_log_setup(b, i, &cfg.ring);
	if (r)
		return r;
	r = vq_dev_new(&cfg, &q->vq);
	if (r)
		return vhu_berr(b, r, "queue %u: ring refused (%d)", i, r);
	if (vhu_logging(b)) {
		r = vq_dev_set_log(q->vq, &b->log, q->log_ring, q->log_nring);
		if (r) {
			vq_dev_free(q->vq);
			q->vq = NULL;
			return vhu_berr(b, r, "queue %u: out of memory", i);
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

int vhu_h_vring_num(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	unsigned i = m->u.state.index;
	struct ring *q = &b->rings[i];

	if (q->vq)
		return vhu_berr(b, -EBUSY, "SET_VRING_NUM: queue %u is running", i);
	if (!vq_ring_num_valid(vhu_ring_features(b->features), m->u.state.num))
		return vhu_berr(b, -EINVAL, "SET_VRING_NUM: queue %u size %u is not valid for a %s ring",
			    i, m->u.state.num, vhu_packed(b) ? "packed" :
			    "split (power of two)");
	q->num = m->u.state.num;
	q->has_num = true;
	return vhu_ring_try_start(b, i);
}

int vhu_h_vring_addr(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	unsigned i = m->u.addr.index;
	struct ring *q = &b->rings[i];

	if (vq_mem_count(b->mem) == 0)
		return vhu_berr(b, -EPROTO, "SET_VRING_ADDR for queue %u before SET_MEM_TABLE", i);
	if (!b->features_set)
		return vhu_berr(b, -EPROTO, "SET_VRING_ADDR for queue %u before SET_FEATURES", i);
	if (!q->has_num)
		return vhu_berr(b, -EPROTO, "SET_VRING_ADDR for queue %u before SET_VRING_NUM", i);
	vhu_ring_suspend(b, i, true);
	q->desc_ua = m->u.addr.desc;
	q->avail_ua = m->u.addr.avail;
	q->used_ua = m->u.addr.used;
	q->log_used = m->u.addr.flags & VQ_VHU_VRING_F_LOG;
	q->log_gpa = m->u.addr.log;
	q->has_addr = true;
	/* Validate now, so the error names this message. */
	{
		bool pk = vhu_packed(b);
		uint64_t dsz, asz, usz;

		vhu_ring_sizes(b, q->num, &dsz, &asz, &usz);
		/* IOVAs are checked when the IOTLB maps them */
		if (!vhu_iommu(b) && (!vq_mem_uaddr_to_hva(b->mem, q->desc_ua, dsz) ||
		    !vq_mem_uaddr_to_hva(b->mem, q->avail_ua, asz) ||
		    !vq_mem_uaddr_to_hva(b->mem, q->used_ua, usz)))
			return vhu_berr(b, -EFAULT,
				    "SET_VRING_ADDR: queue %u ring area outside the memory map", i);
		if (q->desc_ua % 16 || q->avail_ua % (pk ? 4 : 2) || q->used_ua % 4)
			return vhu_berr(b, -EINVAL,
				    "SET_VRING_ADDR: queue %u misaligned (desc 0x%llx avail 0x%llx used 0x%llx)",
				    i, (unsigned long long)q->desc_ua,
				    (unsigned long long)q->avail_ua,
				    (unsigned long long)q->used_ua);
	}
	return vhu_ring_try_start(b, i);
}

int vhu_h_vring_base(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	unsigned i = m->u.state.index;
	struct ring *q = &b->rings[i];

	if (q->vq)
		return vhu_berr(b, -EBUSY, "SET_VRING_BASE: queue %u is running", i);
	if (!vhu_packed(b) && (m->u.state.num >> 16))
		return vhu_berr(b, -EINVAL,
			    "SET_VRING_BASE: split queue %u base 0x%x has reserved bits 16-31 set",
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

int vhu_h_vring_fd(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	unsigned i = m->u.vring_fd.index;
	struct ring *q = &b->rings[i];
	int fd = m->u.vring_fd.nofd ? -1 : m->fds[0];
	int *slot = m->request == VQ_VHU_SET_VRING_KICK ? &q->kick_fd :
		    m->request == VQ_VHU_SET_VRING_CALL ? &q->call_fd : &q->err_fd;

	m->nfds = 0;
	/* the device must let go of the old fd before it is closed */
	vhu_dev_stop(b, i, true);
	vhu_close_fd(slot);
	*slot = fd;
	/* A new call fd gets one signal: a completion whose call went to the
	 * old fd, or was never sent by a back-end that died (reconnect),
	 * still reaches the driver; a spurious one finds nothing used. */
	if (m->request == VQ_VHU_SET_VRING_CALL && fd >= 0)
		vq_evt_signal(fd);
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
