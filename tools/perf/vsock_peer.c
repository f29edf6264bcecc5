// SPDX-License-Identifier: MIT
/*
 * virtq-perf vsock --peer guest: the other end is a second guest of the
 * same backend, in the host program's place.  Its own front-end and
 * driver on the backend's second vhost-user socket, its own thread (two
 * VMs' vCPUs run at once), and the guest side's own transfer code
 * (vsock_guest.c) run in the other direction: in rx it connects to the
 * first guest's CID and sends, in tx it listens and receives.  So the
 * bytes go ring to ring through the backend (sibling vsock), and both
 * guests do the same work and checks as the guest of a host-path run.
 * Its results land where the host program's would (host_bytes, ...), so
 * the check and the report are the host path's.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <virtq/guest/frontend.h>

#include "vsock_run.h"

int vs_peer_setup(struct vs_run *n, struct vs_run *p)
{
	p->o = n->o;
	p->o.rx = !n->o.rx;
	p->o.socket_path = n->o.peer_socket;
	p->o.cid = 0;
	p->o.cpu[0] = n->o.cpu[1];
	p->o.cpu[1] = -1;
	/* the first guest's alone: one log, one probe */
	p->o.dirty_log = false;
	p->o.placement = false;
	p->x = &vs_xport_vsock;
	p->peer = n;
	p->host_lfd = -1;
	p->nends = 1;
	p->ends = calloc(1, sizeof(*p->ends));
	if (!p->ends)
		return -1;
	p->ends[0] = (struct vs_end){ .n = p, .fd = -1 };
	if (vs_guest_setup(p) < 0)
		return -1;
	if (p->cid == n->cid) {
		fprintf(stderr, "virtq-perf vsock: both sockets say guest CID %" PRIu64
			": two VMs of one backend have two CIDs\n", n->cid);
		return -1;
	}
	n->peer_cid = p->cid;
	p->peer_cid = n->cid;
	return 0;
}

void *vs_peer_main(void *arg)
{
	struct vs_run *n = arg, *p = n->peer;
	int r = vs_guest_run(p);

	if (r < 0) {
		snprintf(n->host_err, sizeof(n->host_err), "%s",
			 p->guest_err[0] ? p->guest_err : strerror(-r));
	} else {
		n->host_bytes = p->guest_bytes;
		n->host_csum = p->guest_csum;
		n->host_msgs = p->guest_msgs;
		/* the clock: from the sender's first byte to the receiver's last */
		if (n->o.rx)
			n->t_first = p->t_first;
		else
			n->t_last = p->t_last;
	}
	n->host_rc = r < 0 ? -1 : 0;
	__atomic_store_n(&n->host_gone, 1, __ATOMIC_RELEASE);
	return NULL;
}

void vs_peer_prepare(struct vs_run *n)
{
	/* the receiver listens before the sender connects: A in rx, B in tx */
	vq_vsg_listen(n->o.rx ? n->g : n->peer->g, VS_PORT);
	n->peer->host_total = n->host_total;
}

void vs_peer_free(struct vs_run *p)
{
	vq_vsg_free(p->g);
	vq_vhu_frontend_free(p->fe);
	free(p->ends);
}
