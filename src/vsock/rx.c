// SPDX-License-Identifier: MIT
/*
 * RX: packets to the guest.  Connections with something to say sit on a
 * list, served round-robin.  Data is read from the host socket straight
 * into the guest's buffer (readv), never more than the guest's credit.
 * Used entries are published every used_batch buffers.  Replies that
 * belong to no connection (RST) go first; while their queue is full TX
 * stops, as vhost-vsock does, so a REQUEST flood cannot grow memory.
 * Seqpacket: a host message is read whole (its length peeked first) and
 * goes out in packets as the guest's credit allows, the last with SEQ_EOM.
 * Also the event queue (5.10.6.7).
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "vsock_internal.h"

static void hdr_init(struct vq_vsock *v, struct vq_vsock_hdr *h,
		     uint32_t lport, uint32_t pport, uint16_t type, uint16_t op)
{
	memset(h, 0, sizeof(*h));
	h->src_cid = vq_le64(VQ_VSOCK_CID_HOST);
	h->dst_cid = vq_le64(v->cfg.guest_cid);
	h->src_port = vq_le32(lport);
	h->dst_port = vq_le32(pport);
	h->type = vq_le16(type);
	h->op = vq_le16(op);
}

static void hdr_credit(struct vs_conn *c, struct vq_vsock_hdr *h)
{
	h->buf_alloc = vq_le32(c->buf_alloc);
	h->fwd_cnt = vq_le32(c->fwd_cnt);
	c->adv_fwd_cnt = c->fwd_cnt;
	c->pend &= ~P_CREDIT_UPDATE;    /* every packet carries the credit */
}

static int rx_flush(struct vq_vsock *v)
{
	int r;

	if (!v->rx_staged)
		return 0;
	r = vq_dev_flush(v->rx);
	v->rx_staged = 0;
	if (r < 0)
		return r;
	v->st.rx_flushes++;
	if (v->cfg.notify)
		v->cfg.notify(v->cfg.arg, VQ_VSOCK_RXQ);
	return 0;
}

static int rx_complete(struct vq_vsock *v, uint32_t len)
{
	int r = vq_dev_fill(v->rx, &v->rxc, len);

	v->rx_spare = false;
	if (r < 0)
		return r;
	if (++v->rx_staged >= v->cfg.used_batch)
		return rx_flush(v);
	return 0;
}

/* A usable RX chain in v->rxc: 1, 0 if none, -errno. */
static int rx_get(struct vq_vsock *v)
{
	for (;;) {
		int r;

		if (v->rx_spare)
			return 1;
		v->rxc.iov = v->iov + VS_TX_BURST * VS_IOV_MAX;
		v->rxc.iov_max = VS_IOV_MAX;
		r = vq_dev_pop(v->rx, &v->rxc);
		if (r <= 0)
			return r;
		v->rx_spare = true;
		if (vs_check_rx_buf(v, &v->rxc))
			return 1;
		/* Readable parts, or no room past a header: give it back
		 * empty (vhost: "Buffer len too small") and try the next. */
		r = rx_complete(v, 0);
		if (r < 0)
			return r;
	}
}

static int rx_put_hdr(struct vq_vsock *v, const struct vq_vsock_hdr *h,
		      uint32_t payload)
{
	vq_iov_from_buf(v->rxc.iov, v->rxc.nin, 0, h, sizeof(*h));
	v->st.rx_pkts++;
	v->st.rx_bytes += payload;
	return rx_complete(v, VQ_VSOCK_HDR_SIZE + payload);
}

/* The host side hung up: what a zero-length read means on a seqpacket
 * socket, where an empty message reads the same. */
static bool host_hung_up(int fd)
{
	struct pollfd p = { fd, POLLRDHUP, 0 };

	return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* The host sends no more: tell the guest once its data is out. */
static void mark_host_eof(struct vq_vsock *v, struct vs_conn *c)
{
	c->host_eof = true;
	c->shut_flags |= VQ_VSOCK_SHUTDOWN_SEND;
	c->pend |= P_SHUTDOWN;
	vs_conn_check_done(v, c);
}

/* An RW of k payload bytes already in the chain; seqpacket flags. */
static int rx_put_rw(struct vq_vsock *v, struct vs_conn *c, uint32_t k,
		     uint32_t flags)
{
	struct vq_vsock_hdr h;

	hdr_init(v, &h, c->lport, c->pport, c->type, VQ_VSOCK_OP_RW);
	hdr_credit(c, &h);
	h.len = vq_le32(k);
	h.flags = vq_le32(flags);
	c->tx_cnt += k;
	return rx_put_hdr(v, &h, k) < 0 ? -EIO : VS_RX_USED;
}

/* Seqpacket: the length of the host's next message, or -1 when the
 * connection closed or there is none now. */
static ssize_t rx_seq_peek(struct vq_vsock *v, struct vs_conn *c)
{
	ssize_t len;

	do
		len = recv(c->fd, NULL, 0, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
	while (len < 0 && errno == EINTR);
	if (len < 0) {
		if (vs_is_fatal_sock_err(errno))
			vs_conn_close(v, c, true);
		else
			c->host_readable = false;
		return -1;
	}
	if (len == 0 && host_hung_up(c->fd)) {
		mark_host_eof(v, c);
		return -1;
	}
	if ((uint64_t)len > c->peer_buf_alloc || len > VS_SEQ_MSG_MAX) {
		/* The guest takes a message only whole, within its
		 * buffer: this one could never arrive. */
		vs_bad_host_msg(v, c, (uint64_t)len);
		vs_conn_close(v, c, true);
		return -1;
	}
	return len;
}

/* Seqpacket: hold the host's next message of len bytes whole in c->ibuf,
 * if msg_budget allows. */
static enum vs_fate rx_seq_hold(struct vq_vsock *v, struct vs_conn *c, ssize_t len)
{
	ssize_t r;

	if (v->ibuf_bytes && v->ibuf_bytes + (uint64_t)len > v->cfg.msg_budget) {
		/* it waits in its socket (its sender feels that) until a
		 * held message is delivered; alone, any message may be held */
		c->host_readable = false;
		if (!c->ibuf_wait) {
			c->ibuf_wait = true;
			v->ibuf_waiters++;
			v->st.host_msg_deferred++;
		}
		return VS_OPEN;
	}
	c->ibuf = malloc(len ? (size_t)len : 1);
	if (!c->ibuf) {
		vs_conn_close(v, c, true);
		return VS_CLOSED;
	}
	v->ibuf_bytes += (uint64_t)len;
	do
		r = recv(c->fd, c->ibuf, (size_t)len, MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	c->ilen = (uint32_t)len;
	c->ioff = 0;
	if (r != len) {
		vs_conn_close(v, c, true);
		return VS_CLOSED;
	}
	return VS_OPEN;
}

/*
 * Seqpacket: the next piece of the host's current message for c into the
 * chain in v->rxc, the last with SEQ_EOM.  A message that fits the buffer
 * and the credit is read straight into it; a longer one is read whole
 * into c->ibuf first (a seqpacket read takes a message or nothing).
 * Returns VS_RX_USED, VS_RX_UNUSED (c may be closed) or -EIO.
 */
static int rx_seq(struct vq_vsock *v, struct vs_conn *c)
{
	uint32_t room = (uint32_t)(v->rxc.in_len - VQ_VSOCK_HDR_SIZE);
	uint32_t credit = vs_peer_credit(c), k;

	if (room > VQ_VSOCK_MAX_PKT)
		room = VQ_VSOCK_MAX_PKT;
	if (!c->ibuf) {
		ssize_t len = rx_seq_peek(v, c), r;

		if (len < 0)
			return VS_RX_UNUSED;
		if ((uint32_t)len <= room && (uint32_t)len <= credit) {
			unsigned n = vs_iov_slice(v->rxc.iov, v->rxc.nin,
						  VQ_VSOCK_HDR_SIZE, (size_t)len,
						  v->slice, VS_IOV_MAX);
			struct msghdr m = { .msg_iov = v->slice,
					    .msg_iovlen = len ? n : 0 };

			do
				r = recvmsg(c->fd, &m, MSG_DONTWAIT);
			while (r < 0 && errno == EINTR);
			if (r != len) {
				vs_conn_close(v, c, true);
				return VS_RX_UNUSED;
			}
			return rx_put_rw(v, c, (uint32_t)len, VQ_VSOCK_SEQ_EOM);
		}
		if (rx_seq_hold(v, c, len) == VS_CLOSED || !c->ibuf)
			return VS_RX_UNUSED;
	}
	k = c->ilen - c->ioff;
	if (k > room)
		k = room;
	if (k > credit)
		k = credit;
	if (!k)
		return VS_RX_UNUSED;
	vq_iov_from_buf(v->rxc.iov, v->rxc.nin, VQ_VSOCK_HDR_SIZE, c->ibuf + c->ioff, k);
	c->ioff += k;
	if (c->ioff < c->ilen)
		return rx_put_rw(v, c, k, 0);
	vs_ibuf_release(v, c);
	return rx_put_rw(v, c, k, VQ_VSOCK_SEQ_EOM);
}

/* Stream: read what the host has, up to the credit, into the chain.
 * VS_RX_USED, VS_RX_UNUSED (nothing now, or c closed) or -EIO. */
static int rx_stream(struct vq_vsock *v, struct vs_conn *c)
{
	uint32_t room = (uint32_t)(v->rxc.in_len - VQ_VSOCK_HDR_SIZE);
	uint32_t credit = vs_peer_credit(c);
	unsigned n;
	ssize_t r;

	if (room > credit)
		room = credit;
	if (room > VQ_VSOCK_MAX_PKT)
		room = VQ_VSOCK_MAX_PKT;
	if (room == 0)
		return VS_RX_UNUSED;
	n = vs_iov_slice(v->rxc.iov, v->rxc.nin, VQ_VSOCK_HDR_SIZE, room,
			 v->slice, VS_IOV_MAX);
	do
		r = readv(c->fd, v->slice, (int)n);
	while (r < 0 && errno == EINTR);
	if (r > 0) {
		/* A short read drained the socket: new data brings a new
		 * edge.  Not so an EOF already signalled: keep reading until
		 * it shows. */
		if ((size_t)r < room && !c->host_rdhup)
			c->host_readable = false;
		return rx_put_rw(v, c, (uint32_t)r, 0);
	}
	if (r < 0 && !vs_is_fatal_sock_err(errno)) {
		c->host_readable = false;
		return VS_RX_UNUSED;
	}
	if (r < 0) {
		vs_conn_close(v, c, true);
		return VS_RX_UNUSED;
	}
	/* EOF: the host will send no more. */
	mark_host_eof(v, c);
	return VS_RX_UNUSED;
}

/* A control packet c owes, if any, into the chain. */
static int rx_ctrl(struct vq_vsock *v, struct vs_conn *c, uint16_t op)
{
	struct vq_vsock_hdr h;

	if (!op && (c->pend & P_CREDIT_UPDATE)) {
		op = VQ_VSOCK_OP_CREDIT_UPDATE;
	} else if (!op && (c->pend & P_SHUTDOWN)) {
		c->pend &= ~P_SHUTDOWN;
		op = VQ_VSOCK_OP_SHUTDOWN;
	}
	if (!op)
		return VS_RX_UNUSED;
	hdr_init(v, &h, c->lport, c->pport, c->type, op);
	hdr_credit(c, &h);
	if (op == VQ_VSOCK_OP_SHUTDOWN)
		h.flags = vq_le32(c->shut_flags);
	if (op == VQ_VSOCK_OP_CREDIT_UPDATE)
		v->st.credit_updates_sent++;
	return rx_put_hdr(v, &h, 0) < 0 ? -EIO : VS_RX_USED;
}

/*
 * One packet for c into the chain in v->rxc: the handshake's, else data,
 * else what else c owes.  VS_RX_USED, VS_RX_UNUSED (chain kept), -errno.
 */
static int rx_conn(struct vq_vsock *v, struct vs_conn *c)
{
	uint16_t op = 0;

	if (c->pend & P_REQUEST) {
		c->pend &= ~P_REQUEST;
		op = VQ_VSOCK_OP_REQUEST;
	} else if (c->pend & P_RESPONSE) {
		c->pend &= ~P_RESPONSE;
		op = VQ_VSOCK_OP_RESPONSE;
	} else if (vs_data_ready(c)) {
		int r = c->type == VQ_VSOCK_TYPE_SEQPACKET ? rx_seq(v, c) :
							     rx_stream(v, c);

		if (r != VS_RX_UNUSED || c->dead)
			return r;
	}
	return rx_ctrl(v, c, op);
}

/* The oldest reply that belongs to no connection (RST) into the chain. */
static int rx_reply(struct vq_vsock *v)
{
	struct vq_vsock_hdr h;
	struct vs_reply *rp = &v->replies[v->reply_head];

	hdr_init(v, &h, rp->lport, rp->pport, rp->type, VQ_VSOCK_OP_RST);
	v->reply_head = (v->reply_head + 1) % v->reply_cap;
	v->reply_len--;
	return rx_put_hdr(v, &h, 0);
}

/* Give back a chain popped and unused, publish what was filled. */
static int rx_end(struct vq_vsock *v, int r)
{
	int f;

	if (v->rx_spare) {
		/* Popped but nothing to put in it: the next pop sees it. */
		int u = vq_dev_unpop(v->rx, &v->rxc, 1);

		v->rx_spare = false;
		if (u < 0 && r >= 0)
			r = u;
	}
	f = rx_flush(v);
	if (f < 0 && r >= 0)
		r = f;
	return r;
}

int vs_process_rx(struct vq_vsock *v, unsigned budget)
{
	unsigned done = 0, idle = 0;
	int r = 0;

	if (!v->rx)
		return -ENODEV;
	while (done < budget) {
		struct vs_conn *c;

		if (!v->reply_len) {
			/* Drop connections with nothing to say before taking
			 * a buffer for them. */
			while ((c = v->rx_head) && !vs_has_rx_work(c))
				vs_rx_del(v, c);
			if (!c)
				break;
		}
		r = rx_get(v);
		if (r <= 0)
			break;
		if (v->reply_len) {
			r = rx_reply(v);
			if (r < 0)
				break;
			done++;
			continue;
		}
		c = v->rx_head;
		r = rx_conn(v, c);
		if (r < 0)
			break;
		if (r > 0) {
			done++;
			idle = 0;
		} else if (++idle > v->nconns + 1) {
			break;          /* every connection passed: no livelock */
		}
		/* Round-robin: the next connection goes first. */
		if (!c->dead) {
			vs_rx_del(v, c);
			if (vs_has_rx_work(c))
				vs_rx_add(v, c);
		}
		r = 0;
	}
	r = rx_end(v, r);
	if (r < 0)
		return vq_dev_error(v->rx) ? vq_dev_error(v->rx) : r;
	return (int)done;
}

/* ---- event queue (5.10.6.7) ---- */

int vq_vsock_reset_event(struct vq_vsock *v)
{
	if (!v->ev)
		return -ENODEV;
	v->reset_pending = true;
	return vq_vsock_process_event(v);
}

bool vq_vsock_event_pending(const struct vq_vsock *v)
{
	return v->ev && v->reset_pending;
}

int vq_vsock_process_event(struct vq_vsock *v)
{
	struct iovec iov[4];
	struct vq_chain c = { .iov = iov, .iov_max = 4 };
	int r;

	if (!v->ev || !v->reset_pending)
		return 0;
	for (;;) {
		struct vq_vsock_event e = {
			.id = vq_le32(VQ_VSOCK_EVENT_TRANSPORT_RESET),
		};

		r = vq_dev_pop(v->ev, &c);
		if (r <= 0)
			return r;
		if (!vs_check_ev_buf(v, &c)) {
			r = vq_dev_push(v->ev, &c, 0);
			if (r < 0)
				return r;
			continue;
		}
		vq_iov_from_buf(c.iov, c.nin, 0, &e, sizeof(e));
		r = vq_dev_push(v->ev, &c, sizeof(e));
		if (r < 0)
			return r;
		v->reset_pending = false;
		v->st.reset_events++;
		if (v->cfg.notify)
			v->cfg.notify(v->cfg.arg, VQ_VSOCK_EVQ);
		return 1;
	}
}
