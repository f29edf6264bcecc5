/* SPDX-License-Identifier: MIT */
/*
 * Private to the vhost-user front-end: its state and what its parts share.
 *
 *   frontend.c          guest memory, negotiation, the rings, the calls
 *   frontend_iommu.c    a guest behind a vIOMMU: IOTLB updates and misses
 *   frontend_device.c   requests to a running device: migration logging,
 *                       RARP, MTU, config space
 *   frontend_profile.c  what crosvm's and Cloud Hypervisor's front-ends
 *                       negotiate and read (docs/vmm-profiles.md)
 */
#ifndef VIRTQ_VHU_FRONTEND_INTERNAL_H
#define VIRTQ_VHU_FRONTEND_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <virtq/guest/frontend.h>

#include "vhu_internal.h"

/* Guest-physical address of guest memory's first byte. */
#define GUEST_GPA 0x100000ull
/* With iommu_page, its I/O virtual address: far from any GPA, so a
 * back-end that took one for the other fails at once. */
#define GUEST_IOVA 0x10000000000ull

struct fqueue {
	struct vq_drv *drv;
	int kick_fd, call_fd;
	uint64_t ring_gpa;              /* guest-physical (for the log) */
	uint64_t ring_dev;              /* as the device sees it */
	uint64_t off[3];
	struct vq_vhu_msg addr;         /* its SET_VRING_ADDR, to resend */
	uint32_t base;                  /* its next SET_VRING_BASE */
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
	/* crosvm negotiates REPLY_ACK and never sets NEED_REPLY; Cloud
	 * Hypervisor (rust-vmm's vhost crate) sets it on every request, those
	 * with replies of their own too */
	bool no_need_reply, need_reply_all;
	/* the config space as a profile read it at connect */
	uint8_t pcfg[VQ_VHU_CONFIG_MAX];
	uint32_t pcfg_len;
	char errmsg[256];
};

static inline bool vhu_fe_proto(const struct vq_vhu_frontend *f, unsigned bit)
{
	return f->protocol & VQ_BIT(bit);
}

static inline uint64_t vhu_align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* frontend.c: errors and calls */
/* Set the error message (and cfg.err during connect); returns err. */
VQ_INTERNAL int vhu_ferr(struct vq_vhu_frontend *f, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A request only legal with a protocol feature: -ENOTSUP without it. */
VQ_INTERNAL int vhu_fe_need_proto(struct vq_vhu_frontend *f, uint32_t req,
				  unsigned bit, const char *name);
/* Send a request; with REPLY_ACK (and no reply of its own) ask for and
 * check the ack.  rep (may be NULL) receives an explicit reply. */
VQ_INTERNAL int vhu_fe_call(struct vq_vhu_frontend *f, struct vq_vhu_msg *m,
			    const int *fds, unsigned nfds, struct vq_vhu_msg *rep);
VQ_INTERNAL int vhu_fe_call_u64(struct vq_vhu_frontend *f, uint32_t req, uint64_t v);

/* frontend_iommu.c */
/* Give the back-end its channel (for IOTLB misses). */
VQ_INTERNAL int vhu_fe_iommu_channel(struct vq_vhu_frontend *f);
/* Map all of guest memory, then answer what was asked meanwhile. */
VQ_INTERNAL int vhu_fe_iommu_map_all(struct vq_vhu_frontend *f);

/* Give the back-end a channel (SET_BACKEND_REQ_FD); our end in f->chan. */
VQ_INTERNAL int vhu_fe_channel(struct vq_vhu_frontend *f);

/* frontend_device.c */
VQ_INTERNAL void vhu_fe_log_free(struct vq_vhu_frontend *f);
/* GET_CONFIG with the given flags (VHOST_USER_CONFIG_* of the spec). */
VQ_INTERNAL int vhu_fe_get_config(struct vq_vhu_frontend *f, uint32_t off,
				  void *buf, uint32_t len, uint32_t flags);

/* frontend_profile.c */
/* The virtio features the profile's VMM asks the back-end for (a mask over
 * what the caller wants); all ones for DEFAULT. */
VQ_INTERNAL uint64_t vhu_fe_profile_features(const struct vq_vhu_frontend *f);
/* The protocol features the profile's VMM offers; all ones for DEFAULT. */
VQ_INTERNAL uint64_t vhu_fe_profile_protocol(const struct vq_vhu_frontend *f);
/* The config reads the VMM makes before the guest sets DRIVER_OK (into
 * f->pcfg); 0 or -errno. */
VQ_INTERNAL int vhu_fe_profile_read_config(struct vq_vhu_frontend *f);

#endif
