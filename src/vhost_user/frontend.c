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
#include <virtq/vhost_user_frontend.h>

#include "vhu_internal.h"

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif

/* virtio 1.2, 2.1 "Device Status Field" */
#define ST_ACKNOWLEDGE 1
#define ST_DRIVER      2
#define ST_DRIVER_OK   4
#define ST_FEATURES_OK 8

/* Guest-physical address of guest memory's first byte. */
#define GUEST_GPA 0x100000ull
/* With iommu_page, its I/O virtual address: far from any GPA, so a
 * back-end that took one for the other fails at once. */
#define GUEST_IOVA 0x10000000000ull

/* Protocol features the front-end knows how to use. */
#define FRONTEND_PROTOCOL (VIRTQ_BIT(VQ_VHU_PROTOCOL_F_MQ) |                 \
			   VIRTQ_BIT(VQ_VHU_PROTOCOL_F_REPLY_ACK) |          \
			   VIRTQ_BIT(VQ_VHU_PROTOCOL_F_CONFIG) |             \
			   VIRTQ_BIT(VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS) | \
			   VIRTQ_BIT(VQ_VHU_PROTOCOL_F_STATUS) |             \
			   VIRTQ_BIT(VQ_VHU_PROTOCOL_F_RARP) |               \
			   VIRTQ_BIT(VQ_VHU_PROTOCOL_F_MTU) |                \
			   VIRTQ_BIT(VQ_VHU_PROTOCOL_F_LOG_SHMFD))

struct fqueue {
	struct vq_drv *drv;
	int kick_fd, call_fd;
	uint64_t ring_gpa;              /* guest-physical (for the log) */
	uint64_t ring_dev;              /* as the device sees it */
	uint64_t off[3];
	struct vq_vhu_msg addr;         /* its SET_VRING_ADDR, to resend */
};

struct vq_vhu_frontend {
	struct vq_vhu_frontend_config cfg;
	int sock;
	uint64_t offered, features, protocol;
	bool started;
	uint8_t *log;                   /* dirty log while logging, else NULL */
	uint64_t log_size;
	int mem_fd;
	uint8_t *mem;
	uint64_t mem_size, brk;
	int chan;                       /* back-end channel (our end), or -1 */
	uint64_t misses;
	struct fqueue *q;
	char errmsg[256];
};

static int ferr(struct vq_vhu_frontend *f, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int ferr(struct vq_vhu_frontend *f, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(f->errmsg, sizeof(f->errmsg), fmt, ap);
	va_end(ap);
	if (f->cfg.err && f->cfg.errlen)
		snprintf(f->cfg.err, f->cfg.errlen, "%s", f->errmsg);
	return err;
}

static bool proto(const struct vq_vhu_frontend *f, unsigned bit)
{
	return f->protocol & VIRTQ_BIT(bit);
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

	r = vhu_recv(f->sock, false, false, buf, &len, fds, &nfds);
	if (r == -EAGAIN)
		r = -ETIMEDOUT;         /* SO_RCVTIMEO expired */
	if (r < 0)
		return ferr(f, r, "%s: no reply (%s)", vq_vhu_request_name(req),
			    r == -ECONNRESET || r == -EPIPE ?
			    "the back-end closed the connection" :
			    r == -ETIMEDOUT ? "timed out" :
			    strerror(-r));
	r = vq_vhu_decode_reply(buf, len, fds, nfds, req, ack, rep, err,
				sizeof(err));
	if (r)
		return ferr(f, r, "%s: bad reply: %s", vq_vhu_request_name(req), err);
	return 0;
}

/* Send a request; with REPLY_ACK (and no reply of its own) ask for and
 * check the ack.  rep (may be NULL) receives an explicit reply. */
static int call(struct vq_vhu_frontend *f, struct vq_vhu_msg *m,
		const int *fds, unsigned nfds, struct vq_vhu_msg *rep)
{
	bool has_reply = vq_vhu_request_has_reply(m->request);
	bool ack = !has_reply && proto(f, VQ_VHU_PROTOCOL_F_REPLY_ACK);
	struct vq_vhu_msg tmp;
	int r;

	m->flags = VQ_VHU_VERSION | (ack ? VQ_VHU_FLAG_NEED_REPLY : 0);
	r = vhu_send(f->sock, m, fds, nfds);
	if (r)
		return ferr(f, r, "%s: send failed (%s)",
			    vq_vhu_request_name(m->request), strerror(-r));
	if (!has_reply && !ack)
		return 0;
	if (!rep)
		rep = &tmp;
	r = recv_reply(f, m->request, ack, rep);
	if (r)
		return r;
	if (ack && rep->u.u64 != 0)
		return ferr(f, -EIO, "%s: the back-end refused it (ack %llu)",
			    vq_vhu_request_name(m->request),
			    (unsigned long long)rep->u.u64);
	return 0;
}

static int call_none(struct vq_vhu_frontend *f, uint32_t req)
{
	struct vq_vhu_msg m = { .request = req, .kind = VQ_VHU_P_NONE };

	return call(f, &m, NULL, 0, NULL);
}

static int call_u64(struct vq_vhu_frontend *f, uint32_t req, uint64_t v)
{
	struct vq_vhu_msg m = { .request = req, .kind = VQ_VHU_P_U64, .u.u64 = v };

	return call(f, &m, NULL, 0, NULL);
}

static int get_u64(struct vq_vhu_frontend *f, uint32_t req, uint64_t *v)
{
	struct vq_vhu_msg m = { .request = req, .kind = VQ_VHU_P_NONE }, rep;
	int r = call(f, &m, NULL, 0, &rep);

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
	return call(f, &m, NULL, 0, NULL);
}

static int call_vring_fd(struct vq_vhu_frontend *f, uint32_t req, uint32_t idx,
			 int fd)
{
	struct vq_vhu_msg m = { .request = req, .kind = VQ_VHU_P_VRING_FD };

	m.u.vring_fd.index = idx;
	m.u.vring_fd.nofd = fd < 0;
	return call(f, &m, &fd, fd < 0 ? 0 : 1, NULL);
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static int alloc_guest(struct vq_vhu_frontend *f)
{
	uint64_t size = f->cfg.mem_size ? f->cfg.mem_size : 16ull << 20;
	unsigned flags = MFD_CLOEXEC | (f->cfg.hugetlb ? MFD_HUGETLB : 0);
	struct statfs sfs;
	void *p;

	f->mem_fd = memfd_create("virtq-guest", flags);
	if (f->mem_fd < 0)
		return ferr(f, -errno, "memfd_create%s failed: %s",
			    f->cfg.hugetlb ? " (MFD_HUGETLB)" : "", strerror(errno));
	/* the size must be a multiple of the (huge) page size */
	if (fstatfs(f->mem_fd, &sfs) < 0)
		return ferr(f, -errno, "guest memory: fstatfs failed");
	size = align_up(size, (uint64_t)sfs.f_bsize);
	if (ftruncate(f->mem_fd, (off_t)size) < 0)
		return ferr(f, -errno, "guest memory: ftruncate failed: %s",
			    strerror(errno));
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, f->mem_fd, 0);
	if (p == MAP_FAILED)
		return ferr(f, -errno, "guest memory: mmap failed: %s",
			    strerror(errno));
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
	uint64_t off = align_up(f->brk, 64);

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

/* Give the back-end its channel (for IOTLB misses). */
static int iommu_channel(struct vq_vhu_frontend *f)
{
	uint64_t page = f->cfg.iommu_page;
	struct vq_vhu_msg m = { .request = VQ_VHU_SET_BACKEND_REQ_FD, .kind = VQ_VHU_P_NONE };
	int sv[2], r;

	if (page < 4096 || (page & (page - 1)) || f->mem_size % page ||
	    f->mem_size / page > VQ_IOTLB_MAX_ENTRIES)
		return ferr(f, -EINVAL,
			    "IOMMU page of %llu bytes: a power of two >= 4096 dividing the %llu bytes of guest memory into at most %u",
			    (unsigned long long)page, (unsigned long long)f->mem_size,
			    VQ_IOTLB_MAX_ENTRIES);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return ferr(f, -errno, "back-end channel: socketpair failed");
	r = call(f, &m, &sv[1], 1, NULL);
	close(sv[1]);
	f->chan = sv[0];
	return r;
}

/* One IOTLB entry: the iommu_page holding off, read and write. */
static int iommu_map(struct vq_vhu_frontend *f, uint64_t off)
{
	struct vq_vhu_msg m = { .request = VQ_VHU_IOTLB_MSG, .kind = VQ_VHU_P_IOTLB };

	off &= ~(f->cfg.iommu_page - 1);
	m.u.iotlb.iova = GUEST_IOVA + off;
	m.u.iotlb.size = f->cfg.iommu_page;
	m.u.iotlb.uaddr = (uintptr_t)f->mem + off;
	m.u.iotlb.perm = VQ_VHU_IOTLB_PERM_RW;
	m.u.iotlb.type = VQ_VHU_IOTLB_UPDATE;
	return call(f, &m, NULL, 0, NULL);
}

/* Answer the misses waiting on the back-end channel (no waiting). */
static int iommu_serve(struct vq_vhu_frontend *f)
{
	uint8_t buf[VQ_VHU_HDR_SIZE + 32];
	struct vq_vhu_msg m;
	char err[160];
	ssize_t n;
	int r;

	while (f->chan >= 0 &&
	       (n = recv(f->chan, buf, sizeof(buf), MSG_DONTWAIT | MSG_WAITALL)) > 0) {
		if ((size_t)n != sizeof(buf) ||
		    vq_vhu_decode_backend_request(buf, (size_t)n, NULL, 0, &m, err,
						  sizeof(err)))
			return ferr(f, -EPROTO, "back-end channel: a bad message");
		f->misses++;
		if (m.u.iotlb.type != VQ_VHU_IOTLB_MISS)
			continue;       /* an access failure: nothing to give */
		if (m.u.iotlb.iova < GUEST_IOVA ||
		    m.u.iotlb.iova - GUEST_IOVA >= f->mem_size)
			continue;       /* not ours to map: the queue stays stuck */
		r = iommu_map(f, m.u.iotlb.iova - GUEST_IOVA);
		if (r)
			return r;
	}
	return 0;
}

/* Map all of guest memory, iommu_page bytes per entry (after the rings
 * exist: DPDK's vhost files an update under each ring it has, so one sent
 * before them is lost), then answer what was asked meanwhile. */
static int iommu_map_all(struct vq_vhu_frontend *f)
{
	int r;

	for (uint64_t off = 0; off < f->mem_size; off += f->cfg.iommu_page) {
		r = iommu_map(f, off);
		if (r)
			return r;
	}
	/* the rings asked before any entry existed: answered, not counted
	 * (each was sent before the acks we waited for) */
	r = iommu_serve(f);
	f->misses = 0;
	return r;
}

uint64_t vq_vhu_frontend_iotlb_misses(struct vq_vhu_frontend *f)
{
	iommu_serve(f);
	return f->misses;
}

static int send_memory(struct vq_vhu_frontend *f)
{
	struct vq_vhu_region reg = { .gpa = GUEST_GPA, .size = f->mem_size,
				     .uaddr = (uintptr_t)f->mem, .mmap_offset = 0 };
	struct vq_vhu_msg m = { 0 };

	if (proto(f, VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS)) {
		uint64_t slots;
		int r = get_u64(f, VQ_VHU_GET_MAX_MEM_SLOTS, &slots);

		if (r)
			return r;
		if (slots < 1)
			return ferr(f, -ENOSPC, "the back-end has no memory slots");
		m.request = VQ_VHU_ADD_MEM_REG;
		m.kind = VQ_VHU_P_REGION;
		m.u.region = reg;
	} else {
		m.request = VQ_VHU_SET_MEM_TABLE;
		m.kind = VQ_VHU_P_MEM;
		m.u.mem.nregions = 1;
		m.u.mem.regions[0] = reg;
	}
	return call(f, &m, &f->mem_fd, 1, NULL);
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
	if (!(offered & VIRTQ_BIT(VIRTIO_F_VERSION_1)))
		return ferr(f, -ENOTSUP,
			    "the back-end does not offer VIRTIO_F_VERSION_1 (0x%llx)",
			    (unsigned long long)offered);
	if (offered & VIRTQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES)) {
		r = get_u64(f, VQ_VHU_GET_PROTOCOL_FEATURES, &pofs);
		if (r)
			return r;
		pofs &= (FRONTEND_PROTOCOL |
			 (f->cfg.iommu_page ? VIRTQ_BIT(VQ_VHU_PROTOCOL_F_BACKEND_REQ) : 0)) &
			~f->cfg.protocol_mask_out;
		if (f->cfg.iommu_page &&
		    (~pofs & (VIRTQ_BIT(VQ_VHU_PROTOCOL_F_BACKEND_REQ) |
			      VIRTQ_BIT(VQ_VHU_PROTOCOL_F_REPLY_ACK))))
			return ferr(f, -ENOTSUP,
				    "IOMMU: the back-end does not offer REPLY_ACK and BACKEND_REQ (0x%llx)",
				    (unsigned long long)pofs);
		r = call_u64(f, VQ_VHU_SET_PROTOCOL_FEATURES, pofs);
		if (r)
			return r;
		/* acks apply from the next message on */
		f->protocol = pofs;
	}
	if (proto(f, VQ_VHU_PROTOCOL_F_MQ)) {
		uint64_t nq;

		r = get_u64(f, VQ_VHU_GET_QUEUE_NUM, &nq);
		if (r)
			return r;
		if (nq < f->cfg.nqueues)
			return ferr(f, -ENOSPC, "the back-end has %llu queues, %u wanted",
				    (unsigned long long)nq, f->cfg.nqueues);
	}
	/* logging is switched on later, as a migration does */
	want = (f->cfg.features | VIRTQ_BIT(VIRTIO_F_VERSION_1)) &
	       ~VIRTQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES) & ~VIRTQ_BIT(VQ_VHU_F_LOG_ALL);
	if (f->cfg.iommu_page) {
		if (!(offered & VIRTQ_BIT(VIRTIO_F_ACCESS_PLATFORM)) || !f->protocol)
			return ferr(f, -ENOTSUP,
				    "IOMMU: the back-end does not offer VIRTIO_F_ACCESS_PLATFORM with protocol features");
		want |= VIRTQ_BIT(VIRTIO_F_ACCESS_PLATFORM);
	} else {
		want &= ~VIRTQ_BIT(VIRTIO_F_ACCESS_PLATFORM);
	}
	f->features = (want & offered) |
		      (offered & VIRTQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES));
	if (!vq_ring_num_valid(f->features, f->cfg.queue_size))
		return ferr(f, -EINVAL, "queue size %u is not valid for the %s layout",
			    f->cfg.queue_size,
			    f->features & VIRTQ_BIT(VIRTIO_F_RING_PACKED) ?
			    "packed" : "split");
	r = call_u64(f, VQ_VHU_SET_FEATURES, f->features);
	if (r)
		return r;
	if (proto(f, VQ_VHU_PROTOCOL_F_STATUS)) {
		r = call_u64(f, VQ_VHU_SET_STATUS,
			     ST_ACKNOWLEDGE | ST_DRIVER | ST_FEATURES_OK);
		if (r)
			return r;
	}
	r = send_memory(f);
	if (!r && f->cfg.iommu_page)
		r = iommu_channel(f);
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
	return f & ~VIRTQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES) &
	       ~VIRTQ_BIT(VIRTIO_F_ACCESS_PLATFORM);
}

static int setup_queue(struct vq_vhu_frontend *f, unsigned i)
{
	struct fqueue *q = &f->q[i];
	uint64_t size, idxmax = f->cfg.indirect_max, ind_gpa = 0;
	uint16_t num = f->cfg.queue_size;
	bool pk = f->features & VIRTQ_BIT(VIRTIO_F_RING_PACKED);
	struct vq_drv_config dc = { 0 };
	struct vq_vhu_msg m = { .request = VQ_VHU_SET_VRING_ADDR, .kind = VQ_VHU_P_ADDR };
	void *ring, *ind = NULL;
	int r;

	size = vq_ring_layout(drv_features(f->features), num, q->off);
	ring = vq_vhu_frontend_alloc(f, align_up(size, 4096) + 4096, &q->ring_dev);
	if (!ring)
		return ferr(f, -ENOMEM, "guest memory too small for ring %u", i);
	/* page-align the ring inside its allocation */
	{
		uint64_t pad = align_up(q->ring_dev, 4096) - q->ring_dev;

		q->ring_dev += pad;
		ring = (char *)ring + pad;
	}
	q->ring_gpa = gpa_of(f, ring);
	if (idxmax) {
		ind = vq_vhu_frontend_alloc(f, 16ull * idxmax * num, &ind_gpa);
		if (!ind)
			return ferr(f, -ENOMEM, "guest memory too small for ring %u", i);
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
		return ferr(f, r, "ring %u: vq_drv_new failed (%d)", i, r);
	q->kick_fd = vq_evt_new();
	q->call_fd = vq_evt_new();
	if (q->kick_fd < 0 || q->call_fd < 0)
		return ferr(f, -EMFILE, "ring %u: eventfd failed", i);
	r = call_vring_fd(f, VQ_VHU_SET_VRING_CALL, i, q->call_fd);
	if (!r)
		r = call_state(f, VQ_VHU_SET_VRING_NUM, i, num);
	if (!r)
		r = call_state(f, VQ_VHU_SET_VRING_BASE, i, pk ? 0x80008000u : 0);
	if (r)
		return r;
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
	r = call(f, &m, NULL, 0, NULL);
	if (!r)
		r = call_vring_fd(f, VQ_VHU_SET_VRING_KICK, i, q->kick_fd);
	if (!r && (f->features & VIRTQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES)))
		r = call_state(f, VQ_VHU_SET_VRING_ENABLE, i, 1);
	return r;
}

int vq_vhu_frontend_start(struct vq_vhu_frontend *f)
{
	int r;

	for (unsigned i = 0; i < f->cfg.nqueues; i++) {
		r = setup_queue(f, i);
		if (r)
			return r;
	}
	if (f->cfg.iommu_page) {
		r = iommu_map_all(f);
		if (r)
			return r;
	}
	f->started = true;
	if (proto(f, VQ_VHU_PROTOCOL_F_STATUS))
		return call_u64(f, VQ_VHU_SET_STATUS, ST_ACKNOWLEDGE | ST_DRIVER |
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
	r = call(f, &m, NULL, 0, &rep);
	if (r)
		return r;
	if (rep.u.state.index != i)
		return ferr(f, -EPROTO, "GET_VRING_BASE: reply for ring %u, asked %u",
			    rep.u.state.index, i);
	*base = rep.u.state.num;
	return 0;
}

static int frontend_init(int sock, const struct vq_vhu_frontend_config *cfg,
			 struct vq_vhu_frontend **out)
{
	struct vq_vhu_frontend *f;
	unsigned ms = cfg->timeout_ms ? cfg->timeout_ms : 5000;
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
	int r;

	*out = NULL;
	f = calloc(1, sizeof(*f));
	if (!f) {
		close(sock);
		return -ENOMEM;
	}
	f->cfg = *cfg;
	f->sock = sock;
	f->mem_fd = -1;
	f->chan = -1;
	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (cfg->nqueues == 0 || cfg->nqueues > VQ_VHU_MAX_QUEUES) {
		r = ferr(f, -EINVAL, "queue count %u not in 1..%u", cfg->nqueues,
			 VQ_VHU_MAX_QUEUES);
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
	return frontend_init(fd, cfg, out);
}

int vq_vhu_frontend_connect(const char *path,
			    const struct vq_vhu_frontend_config *cfg,
			    struct vq_vhu_frontend **out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	*out = NULL;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = -errno;

		if (cfg->err && cfg->errlen)
			snprintf(cfg->err, cfg->errlen, "connect %s: %s", path,
				 strerror(errno));
		close(fd);
		return r;
	}
	return frontend_init(fd, cfg, out);
}

/* Every ring's address again, used-ring logging on or off. */
static int resend_addrs(struct vq_vhu_frontend *f, bool log)
{
	for (unsigned i = 0; f->started && i < f->cfg.nqueues; i++) {
		struct vq_vhu_msg m = f->q[i].addr;
		int r;

		m.u.addr.flags = log ? VQ_VHU_VRING_F_LOG : 0;
		r = call(f, &m, NULL, 0, NULL);
		if (r)
			return r;
	}
	return 0;
}

static void log_free(struct vq_vhu_frontend *f)
{
	if (f->log)
		munmap(f->log, f->log_size);
	f->log = NULL;
	f->log_size = 0;
}

int vq_vhu_frontend_set_logging(struct vq_vhu_frontend *f, bool on)
{
	uint64_t pages = (GUEST_GPA + f->mem_size + VQ_LOG_PAGE - 1) / VQ_LOG_PAGE;
	struct vq_vhu_msg m = { .request = VQ_VHU_SET_LOG_BASE, .kind = VQ_VHU_P_LOG };
	int fd, r;
	void *p;

	if (!on) {
		if (!f->log)
			return 0;
		r = call_u64(f, VQ_VHU_SET_FEATURES, f->features);
		if (!r)
			r = resend_addrs(f, false);
		log_free(f);
		return r;
	}
	if (!(f->offered & VIRTQ_BIT(VQ_VHU_F_LOG_ALL)) || !proto(f, VQ_VHU_PROTOCOL_F_LOG_SHMFD))
		return ferr(f, -EOPNOTSUPP,
			    "the back-end does not offer VHOST_F_LOG_ALL with LOG_SHMFD");
	if (f->log)
		return 0;
	/* QEMU's log: whole u64s, bit n for guest page n, from address 0 */
	f->log_size = align_up((pages + 7) / 8, 8);
	fd = memfd_create("virtq-log", MFD_CLOEXEC);
	if (fd < 0)
		return ferr(f, -errno, "log: memfd_create failed: %s", strerror(errno));
	if (ftruncate(fd, (off_t)f->log_size) < 0) {
		close(fd);
		return ferr(f, -errno, "log: ftruncate failed");
	}
	p = mmap(NULL, f->log_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return ferr(f, -errno, "log: mmap failed");
	}
	f->log = p;
	m.u.log.size = f->log_size;
	m.u.log.offset = 0;
	r = call(f, &m, &fd, 1, NULL);
	close(fd);
	if (!r)
		r = call_u64(f, VQ_VHU_SET_FEATURES, f->features | VIRTQ_BIT(VQ_VHU_F_LOG_ALL));
	if (!r)
		r = resend_addrs(f, true);
	if (r)
		log_free(f);
	return r;
}

int vq_vhu_frontend_send_rarp(struct vq_vhu_frontend *f, const uint8_t mac[6])
{
	uint64_t v = 0;

	if (!proto(f, VQ_VHU_PROTOCOL_F_RARP))
		return ferr(f, -ENOTSUP, "SEND_RARP: PROTOCOL_F_RARP not negotiated");
	/* The MAC's bytes in payload order, as QEMU copies them: the codec
	 * writes the u64 as it is in memory (vhost-user numbers are native). */
	memcpy(&v, mac, 6);
	return call_u64(f, VQ_VHU_SEND_RARP, v);
}

int vq_vhu_frontend_net_set_mtu(struct vq_vhu_frontend *f, uint16_t mtu)
{
	if (!proto(f, VQ_VHU_PROTOCOL_F_MTU))
		return ferr(f, -ENOTSUP, "NET_SET_MTU: PROTOCOL_F_MTU not negotiated");
	return call_u64(f, VQ_VHU_NET_SET_MTU, mtu);
}

const uint8_t *vq_vhu_frontend_log(const struct vq_vhu_frontend *f, uint64_t *size)
{
	if (size)
		*size = f->log_size;
	return f->log;
}

void vq_vhu_frontend_free(struct vq_vhu_frontend *f)
{
	if (!f)
		return;
	log_free(f);
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
	const struct fqueue *q;
	uint64_t size;

	if (i >= f->cfg.nqueues || !f->q || !f->q[i].drv)
		return -EINVAL;
	q = &f->q[i];
	size = vq_ring_layout(drv_features(f->features), f->cfg.queue_size,
			      (uint64_t[3]){ 0 });
	area[0] = (struct vq_gpa_range){ q->ring_gpa + q->off[0], q->off[1] - q->off[0] };
	area[1] = (struct vq_gpa_range){ q->ring_gpa + q->off[1], q->off[2] - q->off[1] };
	area[2] = (struct vq_gpa_range){ q->ring_gpa + q->off[2], size - q->off[2] };
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

int vq_vhu_frontend_get_config(struct vq_vhu_frontend *f, uint32_t off,
			       void *buf, uint32_t len)
{
	struct vq_vhu_msg m = { .request = VQ_VHU_GET_CONFIG, .kind = VQ_VHU_P_CONFIG };
	struct vq_vhu_msg rep;
	int r;

	if (!proto(f, VQ_VHU_PROTOCOL_F_CONFIG))
		return ferr(f, -ENOTSUP, "GET_CONFIG: PROTOCOL_F_CONFIG not negotiated");
	if (len > VQ_VHU_CONFIG_MAX)
		return -EINVAL;
	m.u.config.offset = off;
	m.u.config.size = len;
	r = call(f, &m, NULL, 0, &rep);
	if (r)
		return r;
	/* "payload size MUST match the front-end's request" */
	if (rep.u.config.size != len || rep.u.config.offset != off)
		return ferr(f, -EPROTO, "GET_CONFIG: reply of %u bytes at %u, asked %u at %u",
			    rep.u.config.size, rep.u.config.offset, len, off);
	memcpy(buf, rep.u.config.data, len);
	return 0;
}

int vq_vhu_frontend_set_config(struct vq_vhu_frontend *f, uint32_t off,
			       const void *buf, uint32_t len)
{
	struct vq_vhu_msg m = { .request = VQ_VHU_SET_CONFIG, .kind = VQ_VHU_P_CONFIG };

	if (!proto(f, VQ_VHU_PROTOCOL_F_CONFIG))
		return ferr(f, -ENOTSUP, "SET_CONFIG: PROTOCOL_F_CONFIG not negotiated");
	if (len > VQ_VHU_CONFIG_MAX)
		return -EINVAL;
	m.u.config.offset = off;
	m.u.config.size = len;
	memcpy(m.u.config.data, buf, len);
	return call(f, &m, NULL, 0, NULL);
}
