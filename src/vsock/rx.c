// SPDX-License-Identifier: MIT
/*
 * RX: packets to the guest.  Connections with something to say sit on a
 * list, served round-robin.  Data is read from the host socket straight
 * into the guests' buffers, never more than the guest's credit: one readv
 * over the payload areas of as many posted buffers as the connection's
 * last reads suggest (doubling while reads fill all they are offered, up
 * to VS_RX_BATCH buffers and IOV_MAX iovecs), the headers written after,
 * each buffer's len what landed in it.  Used entries are published every
 * used_batch buffers.  Replies that belong to no connection (RST) go
 * first; while their queue is full TX stops, as vhost-vsock does, so a
 * REQUEST flood cannot grow memory.  Seqpacket: a host message's length
 * is peeked; one the credit and the posted buffers take whole is read
 * into them with one recvmsg (SEQ_EOM on its last packet), a longer one
 * is held whole and goes out in packets as the credit allows.  Also the
 * event queue (5.10.6.7).
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "vsock_internal.h"
#include "mem_lib.h"

/* A header from the other end cid (the host's 2, or a sibling's). */
static void hdr_init(struct vq_vsock *v, struct vq_vsock_hdr *h, uint64_t cid,
		     uint32_t lport, uint32_t pport, uint16_t type, uint16_t op)
{
	memset(h, 0, sizeof(*h));
	h->src_cid = vq_le64(cid);
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

/* Stage the used entry of rxb[i], len bytes written; publish every
 * used_batch entries. */
static int rx_complete(struct vq_vsock *v, unsigned i, uint32_t len)
{
	int r = vq_dev_fill(v->rx, &v->rxb[i], len);

	if (r < 0)
		return r;
	if (++v->rx_staged >= v->cfg.used_batch)
		return rx_flush(v);
	return 0;
}

/* Give back the chains rxb[from, rx_n) (popped, never filled): the next
 * pop sees them again. */
static int rx_give_back(struct vq_vsock *v, unsigned from)
{
	int r = 0;

	if (v->rx_n > from)
		r = vq_dev_unpop(v->rx, &v->rxb[from], v->rx_n - from);
	if (v->rx_n > from)
		v->rx_n = from;
	return r;
}

/* A usable RX chain in rxb[0]: 1, 0 if none, -errno. */
static int rx_get(struct vq_vsock *v)
{
	for (;;) {
		int r;

		if (v->rx_n)
			return 1;
		v->rxb[0].iov = v->rx_iov;
		v->rxb[0].iov_max = VS_IOV_MAX;
		r = vq_dev_pop(v->rx, &v->rxb[0]);
		if (r <= 0)
			return r;
		if (vs_check_rx_buf(v, &v->rxb[0])) {
			v->rx_n = 1;
			return 1;
		}
		/* Readable parts, or no room past a header: give it back
		 * empty (vhost: "Buffer len too small") and try the next. */
		r = rx_complete(v, 0, 0);
		if (r < 0)
			return r;
	}
}

/* Payload room of an RX chain: what a packet may carry into it. */
static uint32_t chain_room(const struct vq_chain *ch)
{
	uint64_t room = ch->in_len - VQ_VSOCK_HDR_SIZE;

	return room > VQ_VSOCK_MAX_PKT ? VQ_VSOCK_MAX_PKT : (uint32_t)room;
}

/* Beside rxb[0], pop chains until their rooms add up to want bytes, max
 * chains are held, or their iovecs would not fit one read.  A chain the
 * RX path cannot use ends the batch (given back: rx_get answers it in
 * pop order later). */
static void rx_take(struct vq_vsock *v, uint64_t want, unsigned max)
{
	uint64_t have = chain_room(&v->rxb[0]);
	unsigned at = VS_IOV_MAX;

	if (max > VS_RX_BATCH)
		max = VS_RX_BATCH;
	while (v->rx_n < max && have < want && at + VS_IOV_MAX <= VS_RX_IOV) {
		struct vq_chain *ch = &v->rxb[v->rx_n];

		ch->iov = v->rx_iov + at;
		ch->iov_max = VS_IOV_MAX;
		if (vq_dev_pop(v->rx, ch) <= 0)
			return;
		if (!vs_rx_buf_usable(ch)) {
			vq_dev_unpop(v->rx, ch, 1);
			return;
		}
		at += ch->nin;
		have += chain_room(ch);
		v->rx_n++;
	}
}

/* The payload areas of rxb[0, n) as one iovec array in rx_slice, for up
 * to len bytes: each chain's share in share[].  Returns how many chains
 * it covers (fewer when their iovecs would pass one read's bound);
 * *total and *nslice say how much and in how many iovecs. */
static unsigned rx_slice_chains(struct vq_vsock *v, uint64_t len, uint32_t *share,
				uint64_t *total, unsigned *nslice)
{
	unsigned i, ns = 0;
	uint64_t sum = 0;

	for (i = 0; i < v->rx_n && (sum < len || i == 0); i++) {
		const struct vq_chain *ch = &v->rxb[i];
		uint32_t k = chain_room(ch);

		if (k > len - sum)
			k = (uint32_t)(len - sum);
		if (ns + ch->nin > VS_SYSCALL_IOV)
			break;
		ns += vs_iov_slice(ch->iov, ch->nin, VQ_VSOCK_HDR_SIZE, k,
				   v->rx_slice + ns, VS_SYSCALL_IOV - ns);
		share[i] = k;
		sum += k;
	}
	*total = sum;
	*nslice = ns;
	return i;
}

static void rx_put_hdr(struct vq_vsock *v, unsigned i, const struct vq_vsock_hdr *h,
		       uint32_t payload)
{
	vq_iov_from_buf(v->rxb[i].iov, v->rxb[i].nin, 0, h, sizeof(*h));
	v->st.rx_pkts++;
	v->st.rx_bytes += payload;
}

/* A packet of nothing but a header into rxb[0], which it uses up. */
static int rx_send_ctrl(struct vq_vsock *v, const struct vq_vsock_hdr *h)
{
	rx_put_hdr(v, 0, h, 0);
	v->rx_n = 0;
	return rx_complete(v, 0, VQ_VSOCK_HDR_SIZE) < 0 ? -EIO : VS_RX_USED;
}

/* The packets of one read: rxb[i] carries share[i] bytes of got, the
 * seqpacket flags on the last; the chains past the last filled go back.
 * Returns the number filled, or -EIO. */
static int rx_deliver(struct vq_vsock *v, struct vs_conn *c, const uint32_t *share,
		      unsigned n, uint32_t got, uint32_t last_flags)
{
	unsigned i;
	int r = 0;

	for (i = 0; i < n && (got || i == 0) && r >= 0; i++) {
		struct vq_vsock_hdr h;
		uint32_t k = got < share[i] ? got : share[i];

		got -= k;
		hdr_init(v, &h, c->pcid, c->lport, c->pport, c->type, VQ_VSOCK_OP_RW);
		hdr_credit(c, &h);
		h.len = vq_le32(k);
		h.flags = vq_le32(got ? 0 : last_flags);
		c->tx_cnt += k;
		/* (a tail not kept for want of memory under-counts, as
		 * before the count) */
		vs_pkts_sent(v, c);
		rx_put_hdr(v, i, &h, k);
		r = rx_complete(v, i, VQ_VSOCK_HDR_SIZE + k);
	}
	if (r >= 0)
		r = rx_give_back(v, i);
	v->rx_n = 0;
	return r < 0 ? -EIO : (int)i;
}

/* The host sends no more: tell the guest once its data is out.  A
 * sibling that reset is a RST once its bytes are read. */
static void mark_host_eof(struct vq_vsock *v, struct vs_conn *c)
{
	if (c->link && vs_link_peer_closed(c)) {
		vs_conn_close(v, c, true);
		return;
	}
	c->host_eof = true;
	c->shut_flags |= VQ_VSOCK_SHUTDOWN_SEND;
	c->pend |= P_SHUTDOWN;
	vs_conn_check_done(v, c);
}

/* Seqpacket: the length of the host's next message, or -1 when the
 * connection closed or there is none now. */
static ssize_t rx_seq_peek(struct vq_vsock *v, struct vs_conn *c)
{
	ssize_t len;

	do
		len = vs_io_peek_len(c);
	while (len < 0 && errno == EINTR);
	if (len < 0) {
		if (vs_is_fatal_sock_err(errno))
			vs_conn_close(v, c, true);
		else
			c->host_readable = false;
		return -1;
	}
	/* the end, or an empty message: a seqpacket read says 0 for both */
	if (len == 0 && vs_io_hung_up(c)) {
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
		r = vs_io_recv_msg(c, &(struct iovec){ c->ibuf, (size_t)len }, 1);
	while (r < 0 && errno == EINTR);
	v->st.host_read_calls++;
	c->ilen = (uint32_t)len;
	c->ioff = 0;
	if (r != len) {
		vs_conn_close(v, c, true);
		return VS_CLOSED;
	}
	return VS_OPEN;
}

/* Seqpacket: the host's next message of len bytes straight into as many
 * guest buffers as it takes (one recvmsg), each its share, the last with
 * SEQ_EOM, if the credit and the buffers posted take it whole.
 * VS_RX_UNUSED when they do not (or c closed). */
static int rx_seq_direct(struct vq_vsock *v, struct vs_conn *c, uint32_t len,
			 unsigned max)
{
	uint32_t share[VS_RX_BATCH];
	unsigned n, ns;
	uint64_t total;
	ssize_t r;

	if (len > vs_peer_credit(c))
		return VS_RX_UNUSED;
	rx_take(v, len, max);
	n = rx_slice_chains(v, len, share, &total, &ns);
	/* more packets than the guest's count takes: held, a packet at a time */
	if (total < len || n > vs_peer_pkts(c)) {
		rx_give_back(v, 1);
		return VS_RX_UNUSED;
	}
	do
		r = vs_io_recv_msg(c, v->rx_slice, len ? ns : 0);
	while (r < 0 && errno == EINTR);
	v->st.host_read_calls++;
	if (r != (ssize_t)len) {
		rx_give_back(v, 1);
		vs_conn_close(v, c, true);
		return VS_RX_UNUSED;
	}
	return rx_deliver(v, c, share, n, len, VQ_VSOCK_SEQ_EOM);
}

/*
 * Seqpacket: the host's current message for c, the last packet with
 * SEQ_EOM.  A message the credit and the guest's buffers take whole is
 * read straight into them; a longer one is read whole into c->ibuf first
 * (a seqpacket read takes a message or nothing) and goes out a buffer at
 * a time.  Returns the buffers filled, VS_RX_UNUSED (c may be closed), or
 * -EIO.
 */
static int rx_seq(struct vq_vsock *v, struct vs_conn *c, unsigned max)
{
	uint32_t room = chain_room(&v->rxb[0]);
	uint32_t credit = vs_peer_credit(c), k;
	uint32_t share;

	if (!c->ibuf) {
		ssize_t len = rx_seq_peek(v, c);
		int r;

		if (len < 0)
			return VS_RX_UNUSED;
		r = rx_seq_direct(v, c, (uint32_t)len, max);
		if (r != VS_RX_UNUSED || c->dead)
			return r;
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
	vq_iov_from_buf(v->rxb[0].iov, v->rxb[0].nin, VQ_VSOCK_HDR_SIZE,
			c->ibuf + c->ioff, k);
	c->ioff += k;
	share = k;
	if (c->ioff < c->ilen)
		return rx_deliver(v, c, &share, 1, k, 0);
	vs_ibuf_release(v, c);
	return rx_deliver(v, c, &share, 1, k, VQ_VSOCK_SEQ_EOM);
}

/* How many guest buffers the next read of c should offer: double after a
 * read that filled all it had (more is likely waiting), else what the
 * last one filled.  A trickle keeps to one buffer and pops no more. */
static void rx_hint(struct vs_conn *c, unsigned offered, unsigned filled, bool all)
{
	unsigned h = all ? 2 * offered : filled;

	c->rx_hint = (uint8_t)(h < 1 ? 1 : h > VS_RX_BATCH ? VS_RX_BATCH : h);
}

/* Stream: read what the host has, up to the credit, into as many guest
 * buffers as the last reads suggest (one readv); when several streams
 * share the burst, into the whole batch, so a turn drains the socket
 * whatever its history (sized by the hint, a stream that had been slow
 * kept half its share of 256).  Returns the buffers filled, VS_RX_UNUSED
 * (nothing now, or c closed), or -EIO. */
static int rx_stream(struct vq_vsock *v, struct vs_conn *c, unsigned max)
{
	uint32_t credit = vs_peer_credit(c), share[VS_RX_BATCH];
	unsigned want = v->rx_crowded ? VS_RX_BATCH : c->rx_hint ? c->rx_hint : 1;
	unsigned n, ns, pkts = vs_peer_pkts(c);
	uint64_t total;
	ssize_t r;

	if (credit == 0 || pkts == 0)
		return VS_RX_UNUSED;
	if (want > pkts)
		want = pkts;
	rx_take(v, credit, want < max ? want : max);
	n = rx_slice_chains(v, credit, share, &total, &ns);
	do
		r = vs_io_readv(c, v->rx_slice, ns);
	while (r < 0 && errno == EINTR);
	v->st.host_read_calls++;
	if (r > 0) {
		int f = rx_deliver(v, c, share, n, (uint32_t)r, 0);

		rx_hint(c, n, f > 0 ? (unsigned)f : 1, (uint64_t)r == total);
		/* A short read drained the socket: new data brings a new
		 * edge.  Not so an EOF already signalled: keep reading until
		 * it shows. */
		if ((uint64_t)r < total && !c->host_rdhup)
			c->host_readable = false;
		return f;
	}
	rx_give_back(v, 1);
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

/* A control packet c owes, if any, into rxb[0]. */
static int rx_ctrl(struct vq_vsock *v, struct vs_conn *c, uint16_t op)
{
	struct vq_vsock_hdr h;

	if (!op && (c->pend & P_CREDIT_REQUEST)) {
		c->pend &= ~P_CREDIT_REQUEST;
		op = VQ_VSOCK_OP_CREDIT_REQUEST;
		v->st.credit_requests_sent++;
	} else if (!op && (c->pend & P_CREDIT_UPDATE)) {
		op = VQ_VSOCK_OP_CREDIT_UPDATE;
	} else if (!op && (c->pend & P_SHUTDOWN)) {
		c->pend &= ~P_SHUTDOWN;
		op = VQ_VSOCK_OP_SHUTDOWN;
	}
	if (!op)
		return VS_RX_UNUSED;
	hdr_init(v, &h, c->pcid, c->lport, c->pport, c->type, op);
	hdr_credit(c, &h);
	if (op == VQ_VSOCK_OP_SHUTDOWN)
		h.flags = vq_le32(c->shut_flags);
	if (op == VQ_VSOCK_OP_CREDIT_UPDATE)
		v->st.credit_updates_sent++;
	return rx_send_ctrl(v, &h);
}

/*
 * Packets for c, starting in rxb[0] (up to max buffers): the handshake's,
 * else data, else what else c owes.  Returns the buffers filled,
 * VS_RX_UNUSED (rxb[0] kept), or -errno.
 */
static int rx_conn(struct vq_vsock *v, struct vs_conn *c, unsigned max)
{
	uint16_t op = 0;

	if (c->pend & P_REQUEST) {
		c->pend &= ~P_REQUEST;
		op = VQ_VSOCK_OP_REQUEST;
	} else if (c->pend & P_RESPONSE) {
		c->pend &= ~P_RESPONSE;
		op = VQ_VSOCK_OP_RESPONSE;
	} else if (vs_data_ready(c)) {
		int r = c->type == VQ_VSOCK_TYPE_SEQPACKET ? rx_seq(v, c, max) :
							     rx_stream(v, c, max);

		if (r != VS_RX_UNUSED || c->dead)
			return r;
	}
	return rx_ctrl(v, c, op);
}

/* The oldest reply that belongs to no connection (RST) into rxb[0]. */
static int rx_reply(struct vq_vsock *v)
{
	struct vq_vsock_hdr h;
	struct vs_reply *rp = &v->replies[v->reply_head];

	hdr_init(v, &h, rp->cid, rp->lport, rp->pport, rp->type, VQ_VSOCK_OP_RST);
	v->reply_head = (v->reply_head + 1) % v->reply_cap;
	v->reply_len--;
	return rx_send_ctrl(v, &h);
}

/* Give back a chain popped and unused, publish what was filled. */
static int rx_end(struct vq_vsock *v, int r)
{
	int u = rx_give_back(v, 0), f = rx_flush(v);

	if (u < 0 && r >= 0)
		r = u;
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
	vs_pkts_ask(v);
	v->rx_crowded = v->rx_head && v->rx_head != v->rx_tail;
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
		r = rx_conn(v, c, budget - done);
		if (r < 0)
			break;
		if (r > 0) {
			done += (unsigned)r;
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
