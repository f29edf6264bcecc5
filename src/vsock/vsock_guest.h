/* SPDX-License-Identifier: MIT */
/*
 * The old private path of the userspace vsock driver, for
 * tools/perf/vsock.c until the merge points it at <virtq/vsock_guest.h>:
 * the old names on top of the public ones.  Delete at merge.
 */
#ifndef VIRTQ_VSOCK_GUEST_COMPAT_H
#define VIRTQ_VSOCK_GUEST_COMPAT_H

#include <virtq/vsock_guest.h>

#define VSG_CONNECTING  VQ_VSG_CONNECTING
#define VSG_ESTABLISHED VQ_VSG_ESTABLISHED
#define VSG_CLOSED      VQ_VSG_CLOSED

static inline struct vq_vsg_conn *vsg_compat_connect(struct vq_vsg *g, uint32_t port,
						     uint16_t type)
{
	struct vq_vsg_conn *c;

	return (vq_vsg_connect)(g, port, type, &c) < 0 ? NULL : c;
}

#define vq_vsg_connect(g, port) vsg_compat_connect(g, port, VQ_VSOCK_TYPE_STREAM)
#define vq_vsg_connect_type(g, port, type) vsg_compat_connect(g, port, type)

#endif
