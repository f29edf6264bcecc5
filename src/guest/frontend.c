// SPDX-License-Identifier: MIT
/*
 * The vhost-user front-end (virtio-user role): guest memory as a memfd, the
 * rings laid out in it, and the protocol sequence a VMM follows, with every
 * reply decoded by the codec.  Nothing the back-end answers is trusted: a
 * reply of the wrong type, size or shape, or fds where none belong, fails
 * the call with a message saying which.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <unistd.h>

#include <virtq/runtime.h>
#include <virtq/guest/frontend.h>

#include "frontend_internal.h"

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif

/* virtio 1.2, 2.1 "Device Status Field" */
#define ST_ACKNOWLEDGE 1
#define ST_DRIVER      2
#define ST_DRIVER_OK   4
#define ST_FEATURES_OK 8

/* Protocol features the front-end knows how to use. */
#define FRONTEND_PROTOCOL (VQ_BIT(VQ_VHU_PROTOCOL_F_MQ) |                 \
			   VQ_BIT(VQ_VHU_PROTOCOL_F_REPLY_ACK) |          \
			   VQ_BIT(VQ_VHU_PROTOCOL_F_CONFIG) |             \
			   VQ_BIT(VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS) | \
			   VQ_BIT(VQ_VHU_PROTOCOL_F_STATUS) |             \
			   VQ_BIT(VQ_VHU_PROTOCOL_F_RARP) |               \
			   VQ_BIT(VQ_VHU_PROTOCOL_F_MTU) |                \
			   VQ_BIT(VQ_VHU_PROTOCOL_F_LOG_SHMFD))

int vhu_ferr(struct vq_vhu_frontend *f, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(f->errmsg, sizeof(f->errmsg), fmt, ap);
	va_end(ap);
	if (f->cfg.err && f->cfg.errlen)
		snprintf(f->cfg.err, f->cfg.errlen, "%s", f->errmsg);
	return err;
}

/* A request only legal with a protocol feature: -ENOTSUP without it. */
int vhu_fe_need_proto(struct vq_vhu_frontend *f, uint32_t req, unsigned bit,
		      const char *name)
{
	if (vhu_fe_proto(f, bit))
		return 0;
	return vhu_ferr(f, -ENOTSUP,
			"%s: only legal with VHOST_USER_PROTOCOL_F_%s (bit %u), not negotiated (protocol features 0x%llx)",
			vq_vhu_request_name(req), name, bit,
			(unsigned long long)f->protocol);
}

/* Receive and decode the reply to req (ack: a REPLY_ACK u64). */
static int recv_reply(struct vq_vhu_frontend *f, uint32_t req, bool ack,
		      struct vq_vhu_msg *rep)
{
	uint8_t buf[VQ_VHU_MSG_MAX];
	int fds[VQ_VHU_MAX_FDS];
	unsigned nfds;
	size_t len;
	char err[160];
	int r;

	r = vhu_recv(f->sock, false, false, f->cfg.timeout_ms, buf, &len, fds,
		     &nfds);
	if (r == -ETIMEDOUT)
		return vhu_ferr(f, r, "%s: no reply within %u ms", vq_vhu_request_name(req),
				f->cfg.timeout_ms);
	if (r == -EMSGSIZE)
		return vhu_ferr(f, r, "%s: a reply of more than %u payload bytes",
				vq_vhu_request_name(req), VQ_VHU_PAYLOAD_MAX);
	if (r < 0)
		return vhu_ferr(f, r, "%s: no reply: %s", vq_vhu_request_name(req),
				r == -ECONNRESET || r == -EPIPE ?
				"the back-end closed the connection" : strerror(-r));
	r = vq_vhu_decode_reply(buf, len, fds, nfds, req, ack, rep, err,
				sizeof(err));
	if (r)
		return vhu_ferr(f, r, "%s: bad reply: %s", vq_vhu_request_name(req), err);
	return 0;
}

/* Send a request; with REPLY_ACK (and no reply of its own) ask for and
 * check the ack.  rep (may be NULL) receives an explicit reply. */
int vhu_fe_call(struct vq_vhu_frontend *f, struct vq_vhu_msg *m,
		const int *fds, unsigned nfds, struct vq_vhu_msg *rep)
{
	bool has_reply = vq_vhu_request_has_reply(m->request);
	bool ack = !has_reply && vhu_fe_proto(f, VQ_VHU_PROTOCOL_F_REPLY_ACK) &&
		   !f->no_need_reply;
	struct vq_vhu_msg tmp;
	int r;

	/* on a request with a reply the flag asks for nothing more */
	m->flags = VQ_VHU_VERSION |
		   (ack || (has_reply && f->need_reply_all &&
			    vhu_fe_proto(f, VQ_VHU_PROTOCOL_F_REPLY_ACK)) ?
		    VQ_VHU_FLAG_NEED_REPLY : 0);
	r = vhu_send(f->sock, m, fds, nfds, f->cfg.timeout_ms);
	if (r)
		return vhu_ferr(f, r, "%s: send failed (%s)",
				vq_vhu_request_name(m->request), strerror(-r));
	if (!has_reply && !ack)
		return 0;
	if (!rep)
		rep = &tmp;
	r = recv_reply(f, m->request, ack, rep);
	if (r)
		return r;
	if (ack && rep->u.u64 != 0)
		return vhu_ferr(f, -EIO, "%s: the back-end refused it (ack %llu)",
				vq_vhu_request_name(m->request),
				(unsigned long long)rep->u.u64);
	return 0;
}

static int call_none(struct vq_vhu_frontend *f, uint32_t req)
{
	struct vq_vhu_msg m = { .request = req, .kind = VQ_VHU_P_NONE };

	return vhu_fe_call(f, &m, NULL, 0, NULL);
}

int vhu_fe_call_u64(struct vq_vhu_frontend *f, uint32_t req, uint64_t v)
{
	struct vq_vhu_msg m = { .request = req, .kind = VQ_VHU_P_U64, .u.u64 = v };

	return vhu_fe_call(f, &m, NULL, 0, NULL);
}

static int get_u64(struct vq_vhu_frontend *f, uint32_t req, uint64_t *v)
{
	struct vq_vhu_msg m = { .request = req, .kind = VQ_VHU_P_NONE }, rep;
	int r = vhu_fe_call(f, &m, NULL, 0, &rep);

	if (!r)
		*v = rep.u.u64;
	return r;
}

static int call_state(struct vq_vhu_frontend *f, uint32_t req, uint32_t idx,
		      uint32_t num)
{
	struct vq_vhu_msg m = { .request = req, .kind = VQ_VHU_P_STATE };

	m.u.state.index = idx;
	m.u.state.num = num;
	return vhu_fe_call(f, &m, NULL, 0, NULL);
}

static int call_vring_fd(struct vq_vhu_frontend *f, uint32_t req, uint32_t idx,
			 int fd)
{
	struct vq_vhu_msg m = { .request = req, .kind = VQ_VHU_P_VRING_FD };

	m.u.vring_fd.index = idx;
	m.u.vring_fd.nofd = fd < 0;
	return vhu_fe_call(f, &m, &fd, fd < 0 ? 0 : 1, NULL);
}

static int alloc_guest(struct vq_vhu_frontend *f)
{
	uint64_t size = f->cfg.mem_size ? f->cfg.mem_size : 16ull << 20;
	unsigned flags = MFD_CLOEXEC | (f->cfg.hugetlb ? MFD_HUGETLB : 0);
	struct statfs sfs;
	void *p;

	f->mem_fd = memfd_create("virtq-guest", flags);
	if (f->mem_fd < 0)
		return vhu_ferr(f, -errno,
				"vhost-user \"Memory access\": guest memory: memfd_create%s failed: %s",
				f->cfg.hugetlb ? " (MFD_HUGETLB)" : "", strerror(errno));
	/* the size must be a multiple of the (huge) page size */
	if (fstatfs(f->mem_fd, &sfs) < 0)
		return vhu_ferr(f, -errno,
				"vhost-user \"Memory access\": guest memory: fstatfs failed: %s",
				strerror(errno));
	size = vhu_align_up(size, (uint64_t)sfs.f_bsize);
	if (ftruncate(f->mem_fd, (off_t)size) < 0)
		return vhu_ferr(f, -errno,
				"vhost-user \"Memory access\": guest memory: ftruncate to 0x%llx bytes failed: %s",
				(unsigned long long)size, strerror(errno));
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, f->mem_fd, 0);
	if (p == MAP_FAILED)
		return vhu_ferr(f, -errno,
				"vhost-user \"Memory access\": guest memory: mmap of 0x%llx bytes failed: %s",
				(unsigned long long)size, strerror(errno));
	f->mem = p;
	f->mem_size = size;
	f->brk = 0;
	return 0;
}

/* Where guest memory starts for the device: descriptors and rings. */
static uint64_t dev_base(const struct vq_vhu_frontend *f)
{
	return f->cfg.iommu_page ? GUEST_IOVA : GUEST_GPA;
}

void *vq_vhu_frontend_alloc(struct vq_vhu_frontend *f, uint64_t len,
			    uint64_t *gpa)
{
	uint64_t off = vhu_align_up(f->brk, 64);

	if (len == 0 || off > f->mem_size || len > f->mem_size - off)
		return NULL;
	f->brk = off + len;
	*gpa = dev_base(f) + off;
	return f->mem + off;
}

void *vq_vhu_frontend_hva(struct vq_vhu_frontend *f, uint64_t gpa, uint64_t len)
{
	uint64_t base = dev_base(f);

	if (gpa < base || gpa - base > f->mem_size ||
	    len > f->mem_size - (gpa - base))
		return NULL;
	return f->mem + (gpa - base);
}

uint64_t vq_vhu_frontend_guest_phys(const struct vq_vhu_frontend *f, uint64_t addr)
{
	return addr - dev_base(f) + GUEST_GPA;
}

void *vq_vhu_frontend_phys_hva(struct vq_vhu_frontend *f, uint64_t gpa, uint64_t len)
{
	return vq_vhu_frontend_hva(f, gpa - GUEST_GPA + dev_base(f), len);
}

static int send_memory(struct vq_vhu_frontend *f)
{
	struct vq_vhu_region reg = { .gpa = GUEST_GPA, .size = f->mem_size,
				     .uaddr = (uintptr_t)f->mem, .mmap_offset = 0 };
	struct vq_vhu_msg m = { 0 };

	/* Cloud Hypervisor acks CONFIGURE_MEM_SLOTS yet sends the table at
	 * activation (ADD_MEM_REG only for hot-plugged memory); crosvm
	 * never asks for it */
	if (vhu_fe_proto(f, VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS) &&
	    f->cfg.profile == VQ_VHU_PROFILE_DEFAULT) {
		uint64_t slots;
		int r = get_u64(f, VQ_VHU_GET_MAX_MEM_SLOTS, &slots);

		if (r)
			return r;
		if (slots < 1)
			return vhu_ferr(f, -ENOSPC,
					"VHOST_USER_GET_MAX_MEM_SLOTS: the back-end has %llu memory slots",
					(unsigned long long)slots);
		m.request = VQ_VHU_ADD_MEM_REG;
		m.kind = VQ_VHU_P_REGION;
		m.u.region = reg;
	} else {
		m.request = VQ_VHU_SET_MEM_TABLE;
		m.kind = VQ_VHU_P_MEM;
		m.u.mem.nregions = 1;
		m.u.mem.regions[0] = reg;
	}
	return vhu_fe_call(f, &m, &f->mem_fd, 1, NULL);
}

static bool profiled(const struct vq_vhu_frontend *f)
{
	return f->cfg.profile != VQ_VHU_PROFILE_DEFAULT;
}

static int negotiate(struct vq_vhu_frontend *f)
{
	uint64_t offered, want, pofs = 0;
	int r;

	r = call_none(f, VQ_VHU_SET_OWNER);
	if (r)
		return r;
	r = get_u64(f, VQ_VHU_GET_FEATURES, &offered);
	if (r)
		return r;
	f->offered = offered;
	if (!(offered & VQ_BIT(VQ_F_VERSION_1)))
		return vhu_ferr(f, -ENOTSUP,
				"VHOST_USER_GET_FEATURES: the back-end does not offer VIRTIO_F_VERSION_1 (0x%llx)",
				(unsigned long long)offered);
	if (offered & VQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES)) {
		r = get_u64(f, VQ_VHU_GET_PROTOCOL_FEATURES, &pofs);
		if (r)
			return r;
		pofs &= (FRONTEND_PROTOCOL |
			 (f->cfg.iommu_page || profiled(f) ?
			  VQ_BIT(VQ_VHU_PROTOCOL_F_BACKEND_REQ) : 0)) &
			vhu_fe_profile_protocol(f) & ~f->cfg.protocol_mask_out;
		if (f->cfg.iommu_page &&
		    (~pofs & (VQ_BIT(VQ_VHU_PROTOCOL_F_BACKEND_REQ) |
			      VQ_BIT(VQ_VHU_PROTOCOL_F_REPLY_ACK))))
			return vhu_ferr(f, -ENOTSUP,
					"vhost-user \"IOMMU support\": the back-end does not offer REPLY_ACK and BACKEND_REQ (0x%llx)",
					(unsigned long long)pofs);
		r = vhu_fe_call_u64(f, VQ_VHU_SET_PROTOCOL_FEATURES, pofs);
		if (r)
			return r;
		/* acks apply from the next message on */
		f->protocol = pofs;
		f->no_need_reply = f->cfg.profile == VQ_VHU_PROFILE_CROSVM;
		f->need_reply_all = f->cfg.profile == VQ_VHU_PROFILE_CLOUD_HYPERVISOR;
		/* crosvm gives the channel at once, before GET_QUEUE_NUM */
		if (f->cfg.profile == VQ_VHU_PROFILE_CROSVM &&
		    vhu_fe_proto(f, VQ_VHU_PROTOCOL_F_BACKEND_REQ)) {
			r = vhu_fe_channel(f);
			if (r)
				return r;
		}
	}
	if (vhu_fe_proto(f, VQ_VHU_PROTOCOL_F_MQ)) {
		uint64_t nq;

		r = get_u64(f, VQ_VHU_GET_QUEUE_NUM, &nq);
		if (r)
			return r;
		if (nq < f->cfg.nqueues)
			return vhu_ferr(f, -ENOSPC,
					"VHOST_USER_GET_QUEUE_NUM: the back-end has %llu queues, %u wanted",
					(unsigned long long)nq, f->cfg.nqueues);
	}
	/* logging is switched on later, as a migration does */
	want = (f->cfg.features | VQ_BIT(VQ_F_VERSION_1)) &
	       ~VQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES) & ~VQ_BIT(VQ_VHU_F_LOG_ALL) &
	       vhu_fe_profile_features(f);
	if (f->cfg.iommu_page) {
		if (!(offered & VQ_BIT(VQ_F_ACCESS_PLATFORM)) || !f->protocol)
			return vhu_ferr(f, -ENOTSUP,
					"vhost-user \"IOMMU support\": the back-end does not offer VIRTIO_F_ACCESS_PLATFORM with protocol features (0x%llx)",
					(unsigned long long)offered);
		want |= VQ_BIT(VQ_F_ACCESS_PLATFORM);
	} else {
		want &= ~VQ_BIT(VQ_F_ACCESS_PLATFORM);
	}
	f->features = (want & offered) |
		      (offered & VQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES));
	if (!vq_ring_num_valid(f->features, f->cfg.queue_size))
		return vhu_ferr(f, -EINVAL, "%s: queue size %u is not %s",
				f->features & VQ_BIT(VQ_F_RING_PACKED) ? "2.8" : "2.7",
				f->cfg.queue_size,
				f->features & VQ_BIT(VQ_F_RING_PACKED) ?
				"1 to 32768" : "a power of 2 up to 32768");
	/* The VMMs read the config space before the guest sets DRIVER_OK
	 * and send features and memory only then (start). */
	if (profiled(f))
		return vhu_fe_profile_read_config(f);
	r = vhu_fe_call_u64(f, VQ_VHU_SET_FEATURES, f->features);
	if (r)
		return r;
	if (vhu_fe_proto(f, VQ_VHU_PROTOCOL_F_STATUS)) {
		r = vhu_fe_call_u64(f, VQ_VHU_SET_STATUS,
				    ST_ACKNOWLEDGE | ST_DRIVER | ST_FEATURES_OK);
		if (r)
			return r;
	}
	r = send_memory(f);
	if (!r && f->cfg.iommu_page)
		r = vhu_fe_iommu_channel(f);
	return r;
}

/* The guest-physical address of a pointer into guest memory. */
static uint64_t gpa_of(const struct vq_vhu_frontend *f, const void *p)
{
	return GUEST_GPA + (uint64_t)((const uint8_t *)p - f->mem);
}

/* The ring's features: not vhost-user's bit 30, nor ACCESS_PLATFORM (the
 * addresses we give are what the device sees; the ring does not care). */
static uint64_t drv_features(uint64_t f)
{
	return f & ~VQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES) &
	       ~VQ_BIT(VQ_F_ACCESS_PLATFORM);
}

/* Guest memory for a part of ring i, or NULL with the error set. */
static void *ring_alloc(struct vq_vhu_frontend *f, unsigned i, const char *what,
			uint64_t len, uint64_t *gpa)
{
	void *p = vq_vhu_frontend_alloc(f, len, gpa);

	if (!p)
		vhu_ferr(f, -ENOMEM,
			 "vhost-user \"Memory access\": ring %u: no room for its %s (0x%llx bytes) in 0x%llx bytes of guest memory",
			 i, what, (unsigned long long)len,
			 (unsigned long long)f->mem_size);
	return p;
}

/* Ring i in guest memory, its driver side and eventfds, its SET_VRING_ADDR
 * (in q->addr): all but the messages. */
static int prepare_queue(struct vq_vhu_frontend *f, unsigned i)
{
	struct fqueue *q = &f->q[i];
	uint64_t size, idxmax = f->cfg.indirect_max, ind_gpa = 0;
	uint16_t num = f->cfg.queue_size;
	struct vq_drv_config dc = { 0 };
	struct vq_vhu_msg m = { .request = VQ_VHU_SET_VRING_ADDR, .kind = VQ_VHU_P_ADDR };
	void *ring, *ind = NULL;
	int r;

	size = vq_ring_layout(drv_features(f->features), num, q->off);
	ring = ring_alloc(f, i, "areas", vhu_align_up(size, 4096) + 4096, &q->ring_dev);
	if (!ring)
		return -ENOMEM;
	/* page-align the ring inside its allocation */
	{
		uint64_t pad = vhu_align_up(q->ring_dev, 4096) - q->ring_dev;

		q->ring_dev += pad;
		ring = (char *)ring + pad;
	}
	q->ring_gpa = gpa_of(f, ring);
	if (idxmax) {
		ind = ring_alloc(f, i, "indirect tables",
				 sizeof(struct vq_desc) * idxmax * num, &ind_gpa);
		if (!ind)
			return -ENOMEM;
	}
	dc.features = drv_features(f->features);
	dc.num = num;
	dc.ring.desc = (char *)ring + q->off[0];
	dc.ring.driver = (char *)ring + q->off[1];
	dc.ring.device = (char *)ring + q->off[2];
	dc.indirect = ind;
	dc.indirect_gpa = ind_gpa;
	dc.indirect_max = idxmax;
	/* before the back-end can see the ring: vq_drv_new zeroes it */
	r = vq_drv_new(&dc, &q->drv);
	if (r)
		return vhu_ferr(f, r,
				"vhost-user \"Ring states\": ring %u: the ring layer refused it: %s",
				i, strerror(-r));
	q->kick_fd = vq_evt_new();
	q->call_fd = vq_evt_new();
	if (q->kick_fd < 0 || q->call_fd < 0)
		return vhu_ferr(f, q->kick_fd < 0 ? q->kick_fd : q->call_fd,
				"vhost-user \"Ring states\": ring %u: no eventfd for its kick and call: %s",
				i, strerror(-(q->kick_fd < 0 ? q->kick_fd : q->call_fd)));
	m.u.addr.index = i;
	if (f->cfg.iommu_page) {
		/* behind an IOMMU, ring addresses are IOVAs too */
		m.u.addr.desc = q->ring_dev + q->off[0];
		m.u.addr.avail = q->ring_dev + q->off[1];
		m.u.addr.used = q->ring_dev + q->off[2];
	} else {
		m.u.addr.desc = (uintptr_t)dc.ring.desc;
		m.u.addr.avail = (uintptr_t)dc.ring.driver;
		m.u.addr.used = (uintptr_t)dc.ring.device;
	}
	/* QEMU gives the used ring's own address here, an IOVA behind an
	 * IOMMU (vhost and DPDK's vhost then log through the IOTLB) */
	m.u.addr.log = f->cfg.iommu_page ? m.u.addr.used : q->ring_gpa + q->off[2];
	q->addr = m;
	/* both wrap counters start at 1 (2.8.1) */
	q->base = f->features & VQ_BIT(VQ_F_RING_PACKED) ? 0x80008000u : 0;
	return 0;
}

/* One ring message; what each profile orders. */
enum ring_step { S_CALL, S_NUM, S_BASE, S_ADDR, S_KICK, S_ENABLE, S_END };

static int ring_msg(struct vq_vhu_frontend *f, unsigned i, enum ring_step s)
{
	struct fqueue *q = &f->q[i];

	switch (s) {
	case S_CALL:
		return call_vring_fd(f, VQ_VHU_SET_VRING_CALL, i, q->call_fd);
	case S_NUM:
		return call_state(f, VQ_VHU_SET_VRING_NUM, i, f->cfg.queue_size);
	case S_BASE:
		return call_state(f, VQ_VHU_SET_VRING_BASE, i, q->base);
	case S_ADDR:
		return vhu_fe_call(f, &q->addr, NULL, 0, NULL);
	case S_KICK:
		return call_vring_fd(f, VQ_VHU_SET_VRING_KICK, i, q->kick_fd);
	case S_ENABLE:
		/* "only when VHOST_USER_F_PROTOCOL_FEATURES has been
		 * negotiated": all three agree */
		if (!(f->features & VQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES)))
			return 0;
		return call_state(f, VQ_VHU_SET_VRING_ENABLE, i, 1);
	default:
		return 0;
	}
}

static int ring_steps(struct vq_vhu_frontend *f, unsigned i,
		      const enum ring_step *s)
{
	int r = 0;

	for (; !r && *s != S_END; s++)
		r = ring_msg(f, i, *s);
	return r;
}

static int each_ring(struct vq_vhu_frontend *f, const enum ring_step *s)
{
	int r = 0;

	for (unsigned i = 0; !r && i < f->cfg.nqueues; i++)
		r = ring_steps(f, i, s);
	return r;
}

/* This library's own order, also for a ring started again. */
static const enum ring_step def[] = { S_CALL, S_NUM, S_BASE, S_ADDR, S_KICK,
				      S_ENABLE, S_END };

static int start_rings(struct vq_vhu_frontend *f)
{
	/* activate_vring (vhost_user_frontend/mod.rs) */
	static const enum ring_step crosvm[] = { S_NUM, S_ADDR, S_BASE, S_CALL,
						 S_KICK, S_ENABLE, S_END };
	/* setup_vhost_user (vu_common_ctrl.rs): every NUM first, then the
	 * rest ring by ring, every ENABLE last */
	static const enum ring_step ch_num[] = { S_NUM, S_END };
	static const enum ring_step ch_ring[] = { S_ADDR, S_BASE, S_CALL, S_KICK, S_END };
	static const enum ring_step ch_enable[] = { S_ENABLE, S_END };
	int r = 0;

	if (!profiled(f)) {
		/* each ring laid out just before its messages, as always */
		for (unsigned i = 0; !r && i < f->cfg.nqueues; i++) {
			r = prepare_queue(f, i);
			if (!r)
				r = ring_steps(f, i, def);
		}
		return r;
	}
	/* both VMMs: SET_FEATURES, then the memory table, at activation */
	r = vhu_fe_call_u64(f, VQ_VHU_SET_FEATURES, f->features);
	if (!r)
		r = send_memory(f);
	for (unsigned i = 0; !r && i < f->cfg.nqueues; i++)
		r = prepare_queue(f, i);
	if (r)
		return r;
	if (f->cfg.profile == VQ_VHU_PROFILE_CROSVM)
		return each_ring(f, crosvm);
	r = each_ring(f, ch_num);
	if (!r)
		r = each_ring(f, ch_ring);
	if (!r)
		r = each_ring(f, ch_enable);
	/* the generic device's channel comes after the rings */
	if (!r && vhu_fe_proto(f, VQ_VHU_PROTOCOL_F_BACKEND_REQ))
		r = vhu_fe_channel(f);
	return r;
}

int vq_vhu_frontend_start(struct vq_vhu_frontend *f)
{
	int r;

	r = start_rings(f);
	if (r)
		return r;
	if (f->cfg.iommu_page) {
		r = vhu_fe_iommu_map_all(f);
		if (r)
			return r;
	}
	f->started = true;
	if (vhu_fe_proto(f, VQ_VHU_PROTOCOL_F_STATUS))
		return vhu_fe_call_u64(f, VQ_VHU_SET_STATUS, ST_ACKNOWLEDGE | ST_DRIVER |
				       ST_FEATURES_OK | ST_DRIVER_OK);
	return 0;
}

int vq_vhu_frontend_stop_queue(struct vq_vhu_frontend *f, unsigned i,
			       uint32_t *base)
{
	struct vq_vhu_msg m = { .request = VQ_VHU_GET_VRING_BASE, .kind = VQ_VHU_P_STATE };
	struct vq_vhu_msg rep;
	int r;

	if (i >= f->cfg.nqueues)
		return -EINVAL;
	m.u.state.index = i;
	r = vhu_fe_call(f, &m, NULL, 0, &rep);
	if (r)
		return r;
	if (rep.u.state.index != i)
		return vhu_ferr(f, -EPROTO,
				"VHOST_USER_GET_VRING_BASE: a reply for ring %u, asked for %u",
				rep.u.state.index, i);
	*base = rep.u.state.num;
	return 0;
}

int vq_vhu_frontend_restart_queue(struct vq_vhu_frontend *f, unsigned i,
				  uint32_t base)
{
	if (!f->started || i >= f->cfg.nqueues)
		return -EINVAL;
	f->q[i].base = base;
	return ring_steps(f, i, def);
}

/* Reserved words a caller set: fields of a later version we would ignore. */
static bool config_reserved_set(const struct vq_vhu_frontend_config *cfg)
{
	for (unsigned i = 0; i < VQ_ARRAY_SIZE(cfg->reserved); i++)
		if (cfg->reserved[i])
			return true;
	return false;
}

static int frontend_init(int sock, const struct vq_vhu_frontend_config *cfg,
			 struct vq_vhu_frontend **out)
{
	struct vq_vhu_frontend *f;
	int r;

	*out = NULL;
	f = calloc(1, sizeof(*f));
	if (!f) {
		close(sock);
		return -ENOMEM;
	}
	f->cfg = *cfg;
	/* every send and the wait for each reply (vhu_send, vhu_recv) */
	if (!f->cfg.timeout_ms)
		f->cfg.timeout_ms = 5000;
	f->sock = sock;
	f->mem_fd = -1;
	f->chan = -1;
	if (cfg->profile > VQ_VHU_PROFILE_CLOUD_HYPERVISOR ||
	    (cfg->profile != VQ_VHU_PROFILE_DEFAULT && cfg->iommu_page)) {
		r = vhu_ferr(f, -EINVAL,
			     "profile %u: not a profile, or with iommu_page (neither VMM's front-end sends IOTLB updates)",
			     cfg->profile);
		goto fail;
	}
	if (cfg->nqueues == 0 || cfg->nqueues > VQ_VHU_MAX_QUEUES) {
		r = vhu_ferr(f, -EINVAL,
			     "vhost-user \"Multiple queue support\": %u queues, not 1 to %u",
			     cfg->nqueues, VQ_VHU_MAX_QUEUES);
		goto fail;
	}
	f->q = calloc(cfg->nqueues, sizeof(*f->q));
	if (!f->q) {
		r = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < cfg->nqueues; i++)
		f->q[i].kick_fd = f->q[i].call_fd = -1;
	r = alloc_guest(f);
	if (!r)
		r = negotiate(f);
	if (r)
		goto fail;
	/* cfg->err is for connect only: the caller's buffer may be gone */
	f->cfg.err = NULL;
	f->cfg.errlen = 0;
	*out = f;
	return 0;
fail:
	vq_vhu_frontend_free(f);
	return r;
}

int vq_vhu_frontend_adopt_fd(int fd, const struct vq_vhu_frontend_config *cfg,
			     struct vq_vhu_frontend **out)
{
	*out = NULL;
	if (config_reserved_set(cfg)) {
		close(fd);
		return -EINVAL;
	}
	return frontend_init(fd, cfg, out);
}

int vq_vhu_frontend_connect(const char *path,
			    const struct vq_vhu_frontend_config *cfg,
			    struct vq_vhu_frontend **out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	*out = NULL;
	if (config_reserved_set(cfg))
		return -EINVAL;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = -errno;

		if (cfg->err && cfg->errlen)
			snprintf(cfg->err, cfg->errlen,
				 "vhost-user \"Communication\": connect to %s failed: %s",
				 path, strerror(errno));
		close(fd);
		return r;
	}
	return frontend_init(fd, cfg, out);
}

void vq_vhu_frontend_free(struct vq_vhu_frontend *f)
{
	if (!f)
		return;
	vhu_fe_log_free(f);
	if (f->sock >= 0)
		close(f->sock);
	if (f->chan >= 0)
		close(f->chan);
	for (unsigned i = 0; f->q && i < f->cfg.nqueues; i++) {
		vq_drv_free(f->q[i].drv);
		if (f->q[i].kick_fd >= 0)
			close(f->q[i].kick_fd);
		if (f->q[i].call_fd >= 0)
			close(f->q[i].call_fd);
	}
	free(f->q);
	if (f->mem)
		munmap(f->mem, f->mem_size);
	if (f->mem_fd >= 0)
		close(f->mem_fd);
	free(f);
}

uint64_t vq_vhu_frontend_features(const struct vq_vhu_frontend *f)
{
	return f->features;
}

uint64_t vq_vhu_frontend_protocol_features(const struct vq_vhu_frontend *f)
{
	return f->protocol;
}

const char *vq_vhu_frontend_error_msg(const struct vq_vhu_frontend *f)
{
	return f->errmsg;
}

struct vq_drv *vq_vhu_frontend_queue(struct vq_vhu_frontend *f, unsigned i)
{
	return i < f->cfg.nqueues ? f->q[i].drv : NULL;
}

int vq_vhu_frontend_ring_gpa(const struct vq_vhu_frontend *f, unsigned i,
			     struct vq_gpa_range area[3])
{
	uint64_t size[3], align[3];

	if (i >= f->cfg.nqueues || !f->q || !f->q[i].drv)
		return -EINVAL;
	if (vq_ring_areas(drv_features(f->features), f->cfg.queue_size, size, align))
		return -EINVAL;
	for (unsigned k = 0; k < 3; k++)
		area[k] = (struct vq_gpa_range){ f->q[i].ring_gpa + f->q[i].off[k],
						 size[k] };
	return 0;
}

int vq_vhu_frontend_kick_fd(const struct vq_vhu_frontend *f, unsigned i)
{
	return i < f->cfg.nqueues ? f->q[i].kick_fd : -1;
}

int vq_vhu_frontend_call_fd(const struct vq_vhu_frontend *f, unsigned i)
{
	return i < f->cfg.nqueues ? f->q[i].call_fd : -1;
}
