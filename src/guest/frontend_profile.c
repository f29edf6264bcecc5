// SPDX-License-Identifier: MIT
/*
 * Profiles: what crosvm's and Cloud Hypervisor's vhost-user front-ends ask
 * a back-end for, and which config fields they read before DRIVER_OK.
 * docs/vmm-profiles.md names the file of each project every rule here was
 * read from; the message order lives in frontend.c beside the default's.
 *
 * A profile only narrows: what it asks for is still intersected with what
 * this library implements, so a protocol feature the VMM offers and we
 * cannot honour (INFLIGHT_SHMFD, DEVICE_STATE, SHMEM) is never acked.
 */
#include <string.h>

#include <virtq/net.h>
#include <virtq/vsock.h>

#include "frontend_internal.h"

#define DEV_NET   1u    /* virtio 1.2, 5 "Device Types" */
#define DEV_VSOCK 19u

/* Bits 0-23 and 50-63: the device-type range of virtio 1.2, 6, which
 * crosvm passes through for any device (device_constants.rs). */
#define CROSVM_DEVICE_BITS 0xfffc000000ffffffull
/* crosvm's base_features for an unprotected VM: VERSION_1, EVENT_IDX and
 * VIRTIO_F_SUSPEND (bit 42); INDIRECT_DESC and RING_PACKED are not in it,
 * and packed is stripped even when asked for. */
#define CROSVM_BASE (VQ_BIT(VQ_F_VERSION_1) | VQ_BIT(VQ_F_EVENT_IDX) | VQ_BIT(42))

/* Cloud Hypervisor's DEFAULT_VIRTIO_FEATURES (vhost_user/mod.rs), less
 * the vhost-user bits the library handles itself (30, 26): INDIRECT_DESC,
 * EVENT_IDX, VERSION_1, IN_ORDER, ORDER_PLATFORM (36), NOTIFICATION_DATA
 * (38).  No RING_PACKED. */
#define CH_TRANSPORT (VQ_BIT(VQ_F_INDIRECT_DESC) | VQ_BIT(VQ_F_EVENT_IDX) |      \
		      VQ_BIT(VQ_F_VERSION_1) | VQ_BIT(VQ_F_IN_ORDER) | VQ_BIT(36) | \
		      VQ_BIT(38))
/* vhost_user/net.rs: the net bits, with the offloads its defaults turn on
 * (offload_csum, offload_tso, offload_ufo are true unless configured). */
#define CH_NET (VQ_BIT(VQ_NET_F_MRG_RXBUF) | VQ_BIT(VQ_NET_F_CTRL_VQ) |          \
		VQ_BIT(VQ_NET_F_GUEST_ANNOUNCE) | VQ_BIT(VQ_NET_F_MAC) |         \
		VQ_BIT(VQ_NET_F_MTU) | VQ_BIT(VQ_NET_F_MQ) |                     \
		VQ_BIT(VQ_NET_F_CSUM) | VQ_BIT(VQ_NET_F_GUEST_CSUM) |           \
		VQ_BIT(VQ_NET_F_HOST_ECN) | VQ_BIT(VQ_NET_F_HOST_TSO4) |         \
		VQ_BIT(VQ_NET_F_HOST_TSO6) | VQ_BIT(VQ_NET_F_GUEST_ECN) |        \
		VQ_BIT(VQ_NET_F_GUEST_TSO4) | VQ_BIT(VQ_NET_F_GUEST_TSO6) |      \
		VQ_BIT(VQ_NET_F_HOST_UFO) | VQ_BIT(VQ_NET_F_GUEST_UFO))

/* The size of Cloud Hypervisor's VirtioNetConfig (net_util/src/lib.rs,
 * packed): mac, status, max_virtqueue_pairs, mtu, speed (le32), duplex. */
#define CH_NET_CONFIG_LEN 17u

/* vhost-user "Protocol features": VHOST_USER_CONFIG_WRITABLE */
#define CONFIG_WRITABLE 1u

uint64_t vhu_fe_profile_features(const struct vq_vhu_frontend *f)
{
	uint64_t m;

	switch (f->cfg.profile) {
	case VQ_VHU_PROFILE_CROSVM:
		return CROSVM_DEVICE_BITS | CROSVM_BASE;
	case VQ_VHU_PROFILE_CLOUD_HYPERVISOR:
		if (f->cfg.device_id != DEV_NET)
			return CH_TRANSPORT;    /* the generic device: no device bits */
		m = CH_TRANSPORT | CH_NET;
		/* STATUS is offered to the guest only beside CTRL_VQ, and
		 * reaches the back-end through the guest's ack */
		if (f->offered & f->cfg.features & VQ_BIT(VQ_NET_F_CTRL_VQ))
			m |= VQ_BIT(VQ_NET_F_STATUS);
		return m;
	default:
		return ~0ull;
	}
}

uint64_t vhu_fe_profile_protocol(const struct vq_vhu_frontend *f)
{
	const uint64_t common = VQ_BIT(VQ_VHU_PROTOCOL_F_MQ) |
				VQ_BIT(VQ_VHU_PROTOCOL_F_REPLY_ACK) |
				VQ_BIT(VQ_VHU_PROTOCOL_F_CONFIG);

	switch (f->cfg.profile) {
	case VQ_VHU_PROFILE_CROSVM:
		/* also DEVICE_STATE and SHMEM, which we do not implement */
		return common | VQ_BIT(VQ_VHU_PROTOCOL_F_BACKEND_REQ);
	case VQ_VHU_PROFILE_CLOUD_HYPERVISOR:
		/* also INFLIGHT_SHMFD and DEVICE_STATE, which we do not;
		 * BACKEND_REQ only on the generic device */
		return common | VQ_BIT(VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS) |
		       VQ_BIT(VQ_VHU_PROTOCOL_F_LOG_SHMFD) |
		       (f->cfg.device_id != DEV_NET ?
			VQ_BIT(VQ_VHU_PROTOCOL_F_BACKEND_REQ) : 0);
	default:
		return ~0ull;
	}
}

static int read_field(struct vq_vhu_frontend *f, uint32_t off, uint32_t len,
		      uint32_t flags)
{
	int r = vhu_fe_get_config(f, off, f->pcfg + off, len, flags);

	if (!r && off + len > f->pcfg_len)
		f->pcfg_len = off + len;
	return r;
}

int vhu_fe_profile_read_config(struct vq_vhu_frontend *f)
{
	uint64_t feat = f->features;
	int r = 0;

	/* crosvm would send GET_CONFIG without PROTOCOL_F_CONFIG too (and log
	 * the failure); the spec makes it illegal then, so we do not */
	if (!vhu_fe_proto(f, VQ_VHU_PROTOCOL_F_CONFIG))
		return 0;
	switch (f->cfg.profile) {
	case VQ_VHU_PROFILE_CROSVM:
		/* Each guest access becomes one GET_CONFIG (WRITABLE), so the
		 * reads are the driver's: a field when its feature is on
		 * (virtio 1.2, 5.1.4; 5.10.4 the CID). */
		if (f->cfg.device_id == DEV_NET) {
			if (feat & VQ_BIT(VQ_NET_F_MAC))
				r = read_field(f, 0, 6, CONFIG_WRITABLE);
			if (!r && (feat & VQ_BIT(VQ_NET_F_STATUS)))
				r = read_field(f, 6, 2, CONFIG_WRITABLE);
			if (!r && (feat & VQ_BIT(VQ_NET_F_MQ)))
				r = read_field(f, 8, 2, CONFIG_WRITABLE);
			if (!r && (feat & VQ_BIT(VQ_NET_F_MTU)))
				r = read_field(f, 10, 2, CONFIG_WRITABLE);
		} else if (f->cfg.device_id == DEV_VSOCK) {
			r = read_field(f, 0, 8, CONFIG_WRITABLE);
		}
		return r;
	case VQ_VHU_PROFILE_CLOUD_HYPERVISOR:
		/* net: the whole VirtioNetConfig once, at device creation,
		 * kept by the VMM; the guest never reaches the back-end.
		 * Generic: the guest's reads pass through, flags 0. */
		if (f->cfg.device_id == DEV_NET)
			return read_field(f, 0, CH_NET_CONFIG_LEN, CONFIG_WRITABLE);
		if (f->cfg.device_id == DEV_VSOCK)
			return read_field(f, 0, 8, 0);
		return 0;
	default:
		return 0;
	}
}

uint32_t vq_vhu_frontend_profile_config(const struct vq_vhu_frontend *f,
					void *buf, uint32_t len)
{
	if (len > sizeof(f->pcfg))
		len = sizeof(f->pcfg);
	memcpy(buf, f->pcfg, len);
	return f->pcfg_len;
}
