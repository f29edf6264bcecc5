// SPDX-License-Identifier: MIT
/*
 * What the front-end sends a running device, as a VMM does: live
 * migration's logging switched on and off (vhost-user "Migration"), the
 * RARP a migrated net device sends, its MTU, and the config space.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "frontend_internal.h"

/* Every ring's address again, used-ring logging on or off. */
static int resend_addrs(struct vq_vhu_frontend *f, bool log)
{
	for (unsigned i = 0; f->started && i < f->cfg.nqueues; i++) {
		struct vq_vhu_msg m = f->q[i].addr;
		int r;

		m.u.addr.flags = log ? VQ_VHU_VRING_F_LOG : 0;
		r = vhu_fe_call(f, &m, NULL, 0, NULL);
		if (r)
			return r;
	}
	return 0;
}

void vhu_fe_log_free(struct vq_vhu_frontend *f)
{
	if (f->log)
		munmap(f->log, f->log_size);
	f->log = NULL;
	f->log_size = 0;
}

int vq_vhu_frontend_set_logging(struct vq_vhu_frontend *f, bool on)
{
	uint64_t pages = (GUEST_GPA + f->mem_size + VQ_DIRTY_LOG_PAGE - 1) / VQ_DIRTY_LOG_PAGE;
	struct vq_vhu_msg m = { .request = VQ_VHU_SET_LOG_BASE, .kind = VQ_VHU_P_LOG };
	int fd, r;
	void *p;

	if (!on) {
		if (!f->log)
			return 0;
		r = vhu_fe_call_u64(f, VQ_VHU_SET_FEATURES, f->features);
		if (!r)
			r = resend_addrs(f, false);
		vhu_fe_log_free(f);
		return r;
	}
	if (!(f->offered & VQ_BIT(VQ_VHU_F_LOG_ALL)) || !vhu_fe_proto(f, VQ_VHU_PROTOCOL_F_LOG_SHMFD))
		return vhu_ferr(f, -EOPNOTSUPP,
				"vhost-user \"Migration\": the back-end does not offer VHOST_F_LOG_ALL with LOG_SHMFD (features 0x%llx, protocol features 0x%llx)",
				(unsigned long long)f->offered, (unsigned long long)f->protocol);
	if (f->log)
		return 0;
	/* QEMU's log: whole u64s, bit n for guest page n, from address 0 */
	f->log_size = vhu_align_up((pages + 7) / 8, 8);
	fd = memfd_create("virtq-log", MFD_CLOEXEC);
	if (fd < 0)
		return vhu_ferr(f, -errno, "vhost-user \"Migration\": log: memfd_create failed: %s",
				strerror(errno));
	if (ftruncate(fd, (off_t)f->log_size) < 0 ||
	    (p = mmap(NULL, f->log_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		      0)) == MAP_FAILED) {
		r = vhu_ferr(f, -errno,
			     "vhost-user \"Migration\": a log of 0x%llx bytes: %s",
			     (unsigned long long)f->log_size, strerror(errno));
		close(fd);
		return r;
	}
	f->log = p;
	m.u.log.size = f->log_size;
	m.u.log.offset = 0;
	r = vhu_fe_call(f, &m, &fd, 1, NULL);
	close(fd);
	if (!r)
		r = vhu_fe_call_u64(f, VQ_VHU_SET_FEATURES, f->features | VQ_BIT(VQ_VHU_F_LOG_ALL));
	if (!r)
		r = resend_addrs(f, true);
	if (r)
		vhu_fe_log_free(f);
	return r;
}

const uint8_t *vq_vhu_frontend_log(const struct vq_vhu_frontend *f, uint64_t *size)
{
	if (size)
		*size = f->log_size;
	return f->log;
}

int vq_vhu_frontend_send_rarp(struct vq_vhu_frontend *f, const uint8_t mac[6])
{
	int r = vhu_fe_need_proto(f, VQ_VHU_SEND_RARP, VQ_VHU_PROTOCOL_F_RARP, "RARP");
	uint64_t v = 0;

	if (r)
		return r;
	/* The MAC's bytes in payload order, as QEMU copies them: the codec
	 * writes the u64 as it is in memory (vhost-user numbers are native). */
	memcpy(&v, mac, 6);
	return vhu_fe_call_u64(f, VQ_VHU_SEND_RARP, v);
}

int vq_vhu_frontend_net_set_mtu(struct vq_vhu_frontend *f, uint16_t mtu)
{
	int r = vhu_fe_need_proto(f, VQ_VHU_NET_SET_MTU, VQ_VHU_PROTOCOL_F_MTU, "MTU");

	return r ? r : vhu_fe_call_u64(f, VQ_VHU_NET_SET_MTU, mtu);
}

/* A GET_ or SET_CONFIG of len bytes at off: legal only with
 * PROTOCOL_F_CONFIG, at most VQ_VHU_CONFIG_MAX bytes in one message. */
static int config_msg(struct vq_vhu_frontend *f, uint32_t req, uint32_t off,
		      uint32_t len, struct vq_vhu_msg *m)
{
	int r = vhu_fe_need_proto(f, req, VQ_VHU_PROTOCOL_F_CONFIG, "CONFIG");

	if (r)
		return r;
	if (len > VQ_VHU_CONFIG_MAX)
		return -EINVAL;
	*m = (struct vq_vhu_msg){ .request = req, .kind = VQ_VHU_P_CONFIG };
	m->u.config.offset = off;
	m->u.config.size = len;
	return 0;
}

int vq_vhu_frontend_get_config(struct vq_vhu_frontend *f, uint32_t off,
			       void *buf, uint32_t len)
{
	return vhu_fe_get_config(f, off, buf, len, 0);
}

int vhu_fe_get_config(struct vq_vhu_frontend *f, uint32_t off, void *buf,
		      uint32_t len, uint32_t flags)
{
	struct vq_vhu_msg m, rep;
	int r = config_msg(f, VQ_VHU_GET_CONFIG, off, len, &m);

	if (!r) {
		m.u.config.flags = flags;
		r = vhu_fe_call(f, &m, NULL, 0, &rep);
	}
	if (r)
		return r;
	/* "payload size MUST match the front-end's request" */
	if (rep.u.config.size != len || rep.u.config.offset != off)
		return vhu_ferr(f, -EPROTO,
				"VHOST_USER_GET_CONFIG: a reply of %u bytes at offset %u, asked for %u at %u",
				rep.u.config.size, rep.u.config.offset, len, off);
	memcpy(buf, rep.u.config.data, len);
	return 0;
}

int vq_vhu_frontend_set_config(struct vq_vhu_frontend *f, uint32_t off,
			       const void *buf, uint32_t len)
{
	struct vq_vhu_msg m;
	int r = config_msg(f, VQ_VHU_SET_CONFIG, off, len, &m);

	if (r)
		return r;
	memcpy(m.u.config.data, buf, len);
	return vhu_fe_call(f, &m, NULL, 0, NULL);
}
