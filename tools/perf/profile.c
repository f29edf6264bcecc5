// SPDX-License-Identifier: MIT
/*
 * virtq-perf --profile: the names, the ring features a VMM's front-end
 * never negotiates (so a run asking for one fails on the command line, not
 * with a misleading "the backend does not offer"), and the report line.
 */
#include <inttypes.h>
#include <string.h>

#include <virtq/net.h>
#include <virtq/vsock.h>

#include "cli.h"
#include "profile.h"

static const char *const names[] = {
	[VQ_VHU_PROFILE_DEFAULT] = "default",
	[VQ_VHU_PROFILE_CROSVM] = "crosvm",
	[VQ_VHU_PROFILE_CLOUD_HYPERVISOR] = "cloud-hypervisor",
};

unsigned perf_profile_parse(const char *opt, const char *val)
{
	for (unsigned i = 0; i < (sizeof(names) / sizeof(names[0])); i++)
		if (strcmp(val, names[i]) == 0)
			return i;
	cli_usage_error("%s: '%s' is not default, crosvm or cloud-hypervisor", opt, val);
}

const char *perf_profile_name(unsigned profile)
{
	return profile < (sizeof(names) / sizeof(names[0])) ? names[profile] : "?";
}

const char *perf_profile_refuses(unsigned profile, unsigned device_id,
				 uint64_t features)
{
	if (profile == VQ_VHU_PROFILE_DEFAULT)
		return NULL;
	/* neither offers a packed ring to the guest */
	if (features & VQ_BIT(VQ_F_RING_PACKED))
		return "VIRTIO_F_RING_PACKED";
	if (profile == VQ_VHU_PROFILE_CROSVM) {
		if (features & VQ_BIT(VQ_F_INDIRECT_DESC))
			return "VIRTIO_F_INDIRECT_DESC";
		if (features & VQ_BIT(VQ_F_IN_ORDER))
			return "VIRTIO_F_IN_ORDER";
	}
	/* Cloud Hypervisor's generic device passes no device bits */
	if (profile == VQ_VHU_PROFILE_CLOUD_HYPERVISOR && device_id == 19 &&
	    (features & VQ_BIT(VQ_VSOCK_F_SEQPACKET)))
		return "VIRTIO_VSOCK_F_SEQPACKET";
	return NULL;
}

uint64_t perf_profile_guest_extra(unsigned profile, unsigned device_id)
{
	if (profile == VQ_VHU_PROFILE_DEFAULT || device_id != 1)
		return 0;
	return VQ_BIT(VQ_NET_F_MAC) | VQ_BIT(VQ_NET_F_STATUS) | VQ_BIT(VQ_NET_F_MTU);
}

void perf_profile_report(FILE *f, const char *tool, unsigned profile,
			 const struct vq_vhu_frontend *fe)
{
	uint8_t c[64];
	uint32_t n = vq_vhu_frontend_profile_config(fe, c, sizeof(c));

	if (profile == VQ_VHU_PROFILE_DEFAULT)
		return;
	fprintf(f, "%s: profile %s: features 0x%" PRIx64 " protocol 0x%" PRIx64 " config ",
		tool, perf_profile_name(profile), vq_vhu_frontend_features(fe),
		vq_vhu_frontend_protocol_features(fe));
	if (n > sizeof(c))
		n = sizeof(c);
	for (uint32_t i = 0; i < n; i++)
		fprintf(f, "%02x", c[i]);
	fprintf(f, "%s\n", n ? "" : "-");
}
