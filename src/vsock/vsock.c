// SPDX-License-Identifier: MIT
/*
 * The virtio-vsock device: stream and seqpacket connections between the
 * guest and host sockets, credit flow control both ways (5.10.6.3), and the
 * hybrid-vsock CONNECT handshake for host-initiated connections.  This
 * file holds the lifecycle and the public getters; vsock_internal.h says
 * where the rest lives.
 */
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <virtq/runtime.h>

#include "link.h"

static bool config_ok(const struct vq_vsock_config *cfg)
{
	if (!cfg || cfg->guest_cid < 3 || cfg->guest_cid > 0xffffffffull ||
	    !cfg->host_connect)
		return false;
	for (unsigned i = 0; i < VQ_ARRAY_SIZE(cfg->reserved); i++)
		if (cfg->reserved[i])
			return false;
	return true;
}

int vq_vsock_new(const struct vq_vsock_config *cfg, struct vq_vsock **out)
{
	struct vq_vsock *v;
	uint32_t nb = 1;

	*out = NULL;
	if (!config_ok(cfg))
		return -EINVAL;
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (unsigned i = 0; i < VS_LISTENERS; i++)
		v->lst[i] = (struct vs_listener){ VS_EP_LISTENER, -1 };
	v->cfg = *cfg;
	if (!v->cfg.buf_alloc)
		v->cfg.buf_alloc = 256 * 1024;
	if (v->cfg.buf_alloc > (1u << 30))
		v->cfg.buf_alloc = 1u << 30;
	if (!v->cfg.max_conns)
		v->cfg.max_conns = 1024;
	if (!v->cfg.used_batch)
		v->cfg.used_batch = 32;
	if (!v->cfg.msg_budget)
		v->cfg.msg_budget = 64ull << 20;
	while (nb < v->cfg.max_conns && nb < (1u << 20))
		nb <<= 1;
	v->hmask = nb - 1;
	v->hash = calloc(nb, sizeof(*v->hash));
	v->reply_cap = VS_REPLY_MAX + v->cfg.max_conns * 2;
	v->replies = calloc(v->reply_cap, sizeof(*v->replies));
	v->iov = calloc(VS_TX_BURST * VS_IOV_MAX, sizeof(*v->iov));
	v->rx_iov = calloc(VS_RX_IOV, sizeof(*v->rx_iov));
	v->rx_slice = calloc(VS_SYSCALL_IOV, sizeof(*v->rx_slice));
	v->gat = vs_gather_new();
	v->epfd = epoll_create1(EPOLL_CLOEXEC);
	v->next_port = VS_PORT_FIRST;
	if (!v->hash || !v->replies || !v->iov || !v->rx_iov || !v->rx_slice ||
	    !v->gat || v->epfd < 0) {
		int err = v->epfd < 0 ? -errno : -ENOMEM;

		vq_vsock_free(v);
		return err;
	}
	*out = v;
	return 0;
}

void vq_vsock_free(struct vq_vsock *v)
{
	if (!v)
		return;
	vs_close_all(v);
	vs_reap(v);
	vs_hub_leave(v);
	for (unsigned i = 0; i < VS_LISTENERS; i++)
		if (v->lst[i].fd >= 0)
			close(v->lst[i].fd);
	if (v->epfd >= 0)
		close(v->epfd);
	free(v->hash);
	free(v->replies);
	free(v->iov);
	free(v->rx_iov);
	free(v->rx_slice);
	free(v->gat);
	free(v);
}

int vq_vsock_start(struct vq_vsock *v, struct vq_dev *rx, struct vq_dev *tx,
		   struct vq_dev *ev)
{
	if (!rx || !tx)
		return -EINVAL;
	v->rx = rx;
	v->tx = tx;
	v->ev = ev;
	v->seqpacket = vq_dev_features(rx) & VQ_BIT(VQ_VSOCK_F_SEQPACKET);
	v->rx_n = 0;
	v->rx_staged = 0;
	return 0;
}

void vq_vsock_detach(struct vq_vsock *v)
{
	/* process_rx never keeps a popped chain between calls, so there is
	 * nothing to give back. */
	v->rx = v->tx = v->ev = NULL;
	v->rx_n = 0;
	v->rx_staged = 0;
}

bool vq_vsock_started(const struct vq_vsock *v)
{
	return v->rx && v->tx;
}

void vq_vsock_stop(struct vq_vsock *v)
{
	/* Pending handshakes belong to the host, not the guest: keep them
	 * (they will connect after the next start); the rest is gone. */
	struct vs_conn *c = v->all, *n;

	for (; c; c = n) {
		n = c->next;
		if (c->state != VS_HANDSHAKE)
			vs_conn_close(v, c, false);
	}
	vs_reap(v);
	v->reply_len = 0;
	v->reply_head = 0;
	v->rx = v->tx = v->ev = NULL;
	v->rx_n = 0;
	v->rx_staged = 0;
	v->reset_pending = false;
}

int vq_vsock_fd(const struct vq_vsock *v)
{
	return v->epfd;
}

unsigned vq_vsock_conn_count(const struct vq_vsock *v)
{
	return v->nconns;
}

uint64_t vq_vsock_held_bytes(const struct vq_vsock *v)
{
	return v->ibuf_bytes;
}

const struct vq_vsock_stats *vq_vsock_stats(const struct vq_vsock *v)
{
	return &v->st;
}

const char *vq_vsock_last_bad(const struct vq_vsock *v)
{
	return v->bad_msg;
}

bool vq_vsock_rx_pending(const struct vq_vsock *v)
{
	/* (a clock read only while a connection waits for the count) */
	return v->reply_len || v->rx_head ||
	       (v->npkt_held && vq_rt_now_ns() >= v->creq_due_ns);
}

bool vq_vsock_tx_blocked(const struct vq_vsock *v)
{
	return v->reply_len >= VS_REPLY_MAX;
}

int vq_vsock_process_tx(struct vq_vsock *v, unsigned budget)
{
	int r = vs_process_tx(v, budget);

	vs_reap(v);
	return r;
}

int vq_vsock_process_rx(struct vq_vsock *v, unsigned budget)
{
	int r = vs_process_rx(v, budget);

	vs_reap(v);
	return r;
}
