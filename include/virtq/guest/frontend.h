/* SPDX-License-Identifier: MIT */
/*
 * virtq/guest/frontend.h - the driver side of vhost-user (the
 * "virtio-user" role).
 *
 * The front-end owns guest memory (a memfd, optionally MFD_HUGETLB), lays out
 * the rings in it, negotiates features as the intersection of what the
 * caller wants and what the back-end offers, sends the memory table and the
 * ring setup, creates the kick and call eventfds and hands the driver-side
 * rings (struct vq_drv) to the caller.  It speaks the protocol as
 * docs/interop/vhost-user.rst writes it, so it works against any conforming
 * back-end, not only ours.
 *
 * Calls block on the socket (bounded by a timeout).  One thread per handle.
 *
 * Growth (docs/DESIGN.md, "ABI"): struct vq_vhu_frontend_config ends in
 * reserved words that must be zero (-EINVAL otherwise), so a field added
 * later takes one and its zero means the old behaviour (profile and
 * device_id took the first).
 */
#ifndef VIRTQ_VHOST_USER_FRONTEND_H
#define VIRTQ_VHOST_USER_FRONTEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <virtq/ring.h>
#include <virtq/vhost_user.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Whose front-end to play (docs/vmm-profiles.md says what was read where,
 * and what is not reproduced).  A profile changes what is negotiated
 * (features, protocol features), the order of the set-up messages, the
 * config-space reads, and the memory message, as that VMM does them.
 */
enum vq_vhu_profile {
	VQ_VHU_PROFILE_DEFAULT = 0,     /* this library's own sequence */
	VQ_VHU_PROFILE_CROSVM = 1,      /* crosvm's vhost_user_frontend */
	VQ_VHU_PROFILE_CLOUD_HYPERVISOR = 2,  /* Cloud Hypervisor's vhost_user */
};

struct vq_vhu_frontend_config {
	/* Virtio features wanted (device bits and ring bits); VERSION_1 is
	 * always asked for.  The result is wanted & offered. */
	uint64_t features;
	unsigned nqueues;               /* 1..VQ_VHU_MAX_QUEUES */
	uint16_t queue_size;            /* valid for the negotiated layout */
	uint64_t mem_size;              /* guest memory; 0: 16 MiB */
	bool hugetlb;                   /* back guest memory with MFD_HUGETLB */
	uint16_t indirect_max;          /* descriptors per indirect table; 0: none */
	unsigned timeout_ms;            /* reply timeout; 0: 5000 */
	/* Protocol features not to negotiate even if offered (tests). */
	uint64_t protocol_mask_out;
	/* Non-zero: play a guest behind a vIOMMU with long-lived mappings
	 * (as DPDK in a guest keeps them).  VQ_F_ACCESS_PLATFORM is
	 * negotiated (the back-end must offer it, with REPLY_ACK and
	 * BACKEND_REQ), rings and buffers are given at I/O virtual addresses
	 * (vq_vhu_frontend_alloc returns those), and guest memory is mapped
	 * by IOTLB updates of this many bytes each (a power of two, 4096 or
	 * more; at most 2048 of them) once the rings are set up.  A miss from
	 * the back-end after that is counted and answered when
	 * vq_vhu_frontend_iotlb_misses() is called. */
	uint64_t iommu_page;
	char *err;                      /* optional: why connect failed */
	size_t errlen;
	/* enum vq_vhu_profile; -EINVAL for another value, and for a profile
	 * with iommu_page (neither VMM sends IOTLB updates). */
	uint32_t profile;
	/* With a profile: the virtio device ID played (virtio 1.2, 5: 1 net,
	 * 19 vsock), which decides the VMM's device code path and its
	 * config reads; 0 or another ID: no config reads. */
	uint32_t device_id;
	/* Must be zero: fields a later version adds. */
	uint64_t reserved[3];
};

struct vq_vhu_frontend;

/*
 * Connect to the back-end at path (or use the connected socket fd, which the
 * front-end then owns, closing it on failure) and negotiate: SET_OWNER,
 * features, protocol features, queue count (MQ), guest memory
 * (SET_MEM_TABLE, or ADD_MEM_REG with CONFIGURE_MEM_SLOTS).  With a
 * profile: up to the config reads; features and memory wait for start, as
 * those VMMs send them at DRIVER_OK.  The rings are not set up yet.  Returns 0 or -errno (and cfg->err says why); -EINVAL for
 * a reserved word that is not zero.
 */
int vq_vhu_frontend_connect(const char *path,
			    const struct vq_vhu_frontend_config *cfg,
			    struct vq_vhu_frontend **out);
int vq_vhu_frontend_adopt_fd(int fd, const struct vq_vhu_frontend_config *cfg,
			     struct vq_vhu_frontend **out);

/* Lay out and set up every ring (CALL, NUM, BASE, ADDR, KICK, ENABLE) and
 * create the driver-side queues.  With a profile, SET_FEATURES and the
 * memory table are sent here (both VMMs send them when the guest sets
 * DRIVER_OK), then the rings in that VMM's order.  0 or -errno. */
int vq_vhu_frontend_start(struct vq_vhu_frontend *f);

/* Stop ring i (GET_VRING_BASE); *base gets the back-end's answer.  0,
 * -EINVAL (no ring i), -EPROTO (an answer for another ring), or the
 * message's -errno. */
int vq_vhu_frontend_stop_queue(struct vq_vhu_frontend *f, unsigned i,
			       uint32_t *base);

/* Start ring i again after vq_vhu_frontend_stop_queue (CALL, NUM, BASE,
 * ADDR, KICK, ENABLE, as vq_vhu_frontend_start sets one up), the back-end
 * resuming at base: what the stop returned, as QEMU gives it back.  Its
 * driver-side queue and buffers stay as they were.  0, -EINVAL (not
 * started, or no ring i), or the message's -errno. */
int vq_vhu_frontend_restart_queue(struct vq_vhu_frontend *f, unsigned i,
				  uint32_t base);

/* Close the connection, free the rings and guest memory. */
void vq_vhu_frontend_free(struct vq_vhu_frontend *f);

uint64_t vq_vhu_frontend_features(const struct vq_vhu_frontend *f);
uint64_t vq_vhu_frontend_protocol_features(const struct vq_vhu_frontend *f);
/* Why the last call failed. */
const char *vq_vhu_frontend_error_msg(const struct vq_vhu_frontend *f);
/* With a profile: the config space as connect read it the VMM's way, up to
 * len bytes from offset 0 into buf (bytes not read are zero).  Returns how
 * many bytes from offset 0 the reads covered; 0 when none were made. */
uint32_t vq_vhu_frontend_profile_config(const struct vq_vhu_frontend *f,
					void *buf, uint32_t len);

/* After start: the driver side of ring i and its eventfds. */
struct vq_drv *vq_vhu_frontend_queue(struct vq_vhu_frontend *f, unsigned i);
int vq_vhu_frontend_kick_fd(const struct vq_vhu_frontend *f, unsigned i);
int vq_vhu_frontend_call_fd(const struct vq_vhu_frontend *f, unsigned i);

/* After start: where ring i's three areas lie in guest-physical memory, in
 * struct vq_ring_addr's order (descriptors, driver area, device area), each
 * as long as vq_ring_areas() says, so a caller can check what the back-end
 * wrote there against the dirty log.  0, or -EINVAL for a ring that is not
 * set up. */
int vq_vhu_frontend_ring_gpa(const struct vq_vhu_frontend *f, unsigned i,
			     struct vq_gpa_range area[3]);

/* Guest memory for buffers: len bytes, 64-byte aligned; the host pointer,
 * and in *gpa the address descriptors carry: guest-physical, or an I/O
 * virtual address with iommu_page.  NULL when memory is exhausted. */
void *vq_vhu_frontend_alloc(struct vq_vhu_frontend *f, uint64_t len,
			    uint64_t *gpa);
/* A host pointer for [gpa, gpa+len) (an address alloc gave), or NULL. */
void *vq_vhu_frontend_hva(struct vq_vhu_frontend *f, uint64_t gpa, uint64_t len);
/* The guest-physical address of an address alloc gave (the same address
 * without iommu_page): what the dirty log marks.  Its host pointer, for a
 * guest-physical range (vq_vhu_frontend_ring_gpa's), or NULL. */
uint64_t vq_vhu_frontend_guest_phys(const struct vq_vhu_frontend *f, uint64_t addr);
void *vq_vhu_frontend_phys_hva(struct vq_vhu_frontend *f, uint64_t gpa, uint64_t len);
/* With iommu_page: the IOTLB misses the back-end sent since the start
 * (read from the back-end channel now, without blocking, and answered).
 * 0 without. */
uint64_t vq_vhu_frontend_iotlb_misses(struct vq_vhu_frontend *f);

/*
 * Live-migration logging, switched as QEMU switches it while the rings run.
 * On: SET_LOG_BASE with a new log (a memfd, one bit per 4 KiB guest page
 * from address 0), SET_FEATURES with VHOST_F_LOG_ALL, and every started
 * ring's SET_VRING_ADDR again with VHOST_VRING_F_LOG.  Off: the same without
 * the bits, and the log is freed.  -EOPNOTSUPP when the back-end does not
 * offer LOG_ALL with LOG_SHMFD.
 */
int vq_vhu_frontend_set_logging(struct vq_vhu_frontend *f, bool on);
/* The log while logging is on (its size in *size), else NULL. */
const uint8_t *vq_vhu_frontend_log(const struct vq_vhu_frontend *f,
				   uint64_t *size);

/* VHOST_USER_SEND_RARP: what QEMU sends a net back-end after a live
 * migration when the guest cannot announce itself.  -ENOTSUP without
 * PROTOCOL_F_RARP. */
int vq_vhu_frontend_send_rarp(struct vq_vhu_frontend *f, const uint8_t mac[6]);
/* VHOST_USER_NET_SET_MTU: what QEMU sends a net back-end when the guest is
 * given an MTU (host_mtu) and the back-end negotiated PROTOCOL_F_MTU.
 * -ENOTSUP without PROTOCOL_F_MTU, -EIO when the back-end refuses it
 * (REPLY_ACK). */
int vq_vhu_frontend_net_set_mtu(struct vq_vhu_frontend *f, uint16_t mtu);

/* VHOST_USER_GET_CONFIG / SET_CONFIG (needs PROTOCOL_F_CONFIG).  0,
 * -ENOTSUP without it, -EINVAL (len over VQ_VHU_CONFIG_MAX), -EPROTO (a
 * GET_CONFIG reply for another offset or size), -EIO (refused), or the
 * message's -errno. */
int vq_vhu_frontend_get_config(struct vq_vhu_frontend *f, uint32_t off,
			       void *buf, uint32_t len);
int vq_vhu_frontend_set_config(struct vq_vhu_frontend *f, uint32_t off,
			       const void *buf, uint32_t len);

#ifdef __cplusplus
}
#endif
#endif
