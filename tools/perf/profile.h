/* SPDX-License-Identifier: MIT */
/* virtq-perf --profile: whose front-end the guest side plays
 * (docs/vmm-profiles.md), shared by net and vsock. */
#ifndef VIRTQ_PERF_PROFILE_H
#define VIRTQ_PERF_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include <virtq/guest/frontend.h>

/* default|crosvm|cloud-hypervisor as enum vq_vhu_profile; a usage error
 * (exit 2) for another name. */
unsigned perf_profile_parse(const char *opt, const char *val);
const char *perf_profile_name(unsigned profile);

/* The ring features the profile's VMM never asks for (a usage error when
 * one is asked for): its name, or NULL when it may be. */
const char *perf_profile_refuses(unsigned profile, unsigned device_id,
				 uint64_t features);

/* With a profile, the features a guest driver acks beside the ring's
 * that only say which config fields exist (net: MAC, STATUS, MTU), so the
 * VMM's config reads happen as with a real guest; 0 without. */
uint64_t perf_profile_guest_extra(unsigned profile, unsigned device_id);

/* One line on f after start, for tests and the curious:
 * "TOOL: profile NAME: features 0x.. protocol 0x.. config HEX". */
void perf_profile_report(FILE *f, const char *tool, unsigned profile,
			 const struct vq_vhu_frontend *fe);

#endif
