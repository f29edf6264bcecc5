// SPDX-License-Identifier: MIT
/*
 * TX: packets from the guest.  Pop a burst, handle each packet, fill every
 * chain with length 0, flush once.  RW payload goes from guest memory
 * straight to the host socket: the payloads of consecutive RW packets of
 * one connection in a burst are gathered and written with one writev
 * (stream) or one sendmmsg of whole messages (seqpacket).  What the socket
 * does not take is copied into the connection's buffer, which is never
 * larger than the credit we advertised, and fwd_cnt advances only as bytes
 * reach the socket.  Seqpacket: a message whose packets did not all come
 * in one burst, or that waits behind others, waits whole in the
 * connection's buffer and goes out in one sendmsg once its last packet
 * (SEQ_EOM) arrived; the lengths of the buffered messages wait in a small
 * queue.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vsock_internal.h"
#include "mem_lib.h"

/* The payloads gathered for one write, all of one connection, pointing
 * into the burst's chains (valid until they are filled).  Seqpacket: whole
 * messages (msg[], their lengths in mlen[]), then the start of one not
 * ended yet at iov[open_iov, niov). */
struct vs_gather {
	struct vs_conn *c;
	unsigned niov;
	uint64_t len;                   /* bytes in iov[0, niov) */
	unsigned nmsg;
	bool open;                      /* seqpacket: a message not ended */
	unsigned open_iov;
	uint32_t open_len;
	struct iovec iov[VS_SYSCALL_IOV];
	struct mmsghdr msg[VS_TX_BURST];
	uint32_t mlen[VS_TX_BURST];
};

struct vs_gather *vs_gather_new(void)
{
	return calloc(1, sizeof(struct vs_gather));
}

/* What tx_packet read from a header, in host order. */
struct tx_hdr {
	uint64_t cid;                   /* the destination: 2, or a sibling */
	uint32_t len, lport, pport, flags;
	uint16_t type, op;
};

static void update_peer_credit(struct vq_vsock *v, struct vs_conn *c,
			       const struct vq_vsock_hdr *h)
{
	c->peer_buf_alloc = vq_le32(h->buf_alloc);
	c->peer_fwd_cnt = vq_le32(h->fwd_cnt);
	vs_pkts_read(v, c);
	if (vs_has_rx_work(c))
		vs_rx_add(v, c);
}

/* An RW the connection may take: established, the guest still sending,
 * within the window we advertised (buffering more would be unbounded,
 * dropping it would corrupt the stream).  false after closing c. */
static bool rw_allowed(struct vq_vsock *v, struct vs_conn *c, uint32_t len)
{
	if (c->state != VS_ESTABLISHED ||
	    (c->guest_shut & VQ_VSOCK_SHUTDOWN_SEND)) {
		vs_bad_op(v, c, VQ_VSOCK_OP_RW, c->state != VS_ESTABLISHED ?
			  "the connection is not established" :
			  "after the guest's SHUTDOWN SEND");
		vs_conn_close(v, c, true);
		return false;
	}
	if (!vs_check_credit(v, c, len)) {
		vs_conn_close(v, c, true);
		return false;
	}
	return true;
}

/* Seqpacket: room for one more whole message in the queue of lengths. */
static enum vs_fate seq_grow(struct vq_vsock *v, struct vs_conn *c)
{
	uint32_t cap = c->mq_cap ? 2 * c->mq_cap : 16, i;
	uint32_t *q;

	if (cap > VS_SEQ_BACKLOG) {
		/* Messages without end into a host that reads none:
		 * each costs us a slot and the guest no credit. */
		vs_bad_seq(v, c, "more whole messages waiting for the host than",
			   VS_SEQ_BACKLOG);
		vs_conn_close(v, c, true);
		return VS_CLOSED;
	}
	q = malloc(cap * sizeof(*q));
	if (!q) {
		vs_conn_close(v, c, true);
		return VS_CLOSED;
	}
	for (i = 0; i < c->mq_len; i++)
		q[i] = c->mq[(c->mq_head + i) % c->mq_cap];
	free(c->mq);
	c->mq = q;
	c->mq_cap = cap;
	c->mq_head = 0;
	return VS_OPEN;
}

/* Seqpacket: append len bytes of the message being built to obuf; eom
 * ends it, and its length joins the queue of whole messages. */
static enum vs_fate seq_queue(struct vq_vsock *v, struct vs_conn *c,
			      const struct iovec *iov, unsigned n, uint32_t len,
			      bool eom)
{
	if (eom && c->mq_len == c->mq_cap && seq_grow(v, c) == VS_CLOSED)
		return VS_CLOSED;
	if (len && vs_obuf_put_iov(c, iov, n, len) < 0) {
		vs_conn_close(v, c, true);
		return VS_CLOSED;
	}
	c->msg_open += len;
	if (eom) {
		c->mq[(c->mq_head + c->mq_len) % c->mq_cap] = c->msg_open;
		c->mq_len++;
		c->msg_open = 0;
	}
	return VS_OPEN;
}

/* Skip the first n bytes of iov[0, cnt) in place: the index of the first
 * iovec left. */
static unsigned iov_skip(struct iovec *iov, unsigned cnt, size_t n)
{
	unsigned i;

	for (i = 0; i < cnt && n >= iov[i].iov_len; i++)
		n -= iov[i].iov_len;
	if (i < cnt) {
		iov[i].iov_base = (uint8_t *)iov[i].iov_base + n;
		iov[i].iov_len -= n;
	}
	return i;
}

/* Stream: one writev of everything gathered; what the socket does not
 * take goes to obuf (and the socket is full: it says so by EPOLLOUT). */
static void gather_write_stream(struct vq_vsock *v, struct vs_gather *g,
				struct vs_conn *c)
{
	size_t done = 0;
	unsigned k;
	ssize_t r;

	do
		r = vs_io_writev(c, g->iov, g->niov);
	while (r < 0 && errno == EINTR);
	v->st.host_write_calls++;
	if (r < 0 && vs_is_fatal_sock_err(errno)) {
		vs_conn_close(v, c, true);
		return;
	}
	if (r > 0) {
		done = (size_t)r;
		vs_host_wrote(c, (uint32_t)r);
	}
	if (done < g->len) {
		c->host_writable = false;
		v->st.host_stalls++;
		k = iov_skip(g->iov, g->niov, done);
		if (vs_obuf_put_iov(c, g->iov + k, g->niov - k, g->len - done) < 0) {
			vs_conn_close(v, c, true);
			return;
		}
	}
	vs_maybe_credit_update(v, c);
}

/* Seqpacket: the whole messages gathered in one sendmmsg; those the
 * socket does not take, and the start of a message not ended, wait in
 * obuf as before. */
static void gather_write_seq(struct vq_vsock *v, struct vs_gather *g,
			     struct vs_conn *c)
{
	unsigned i, sent = 0;
	int r = 0;

	if (g->nmsg) {
		do
			r = vs_io_sendmsgs(c, g->msg, g->nmsg);
		while (r < 0 && errno == EINTR);
		v->st.host_write_calls++;
		if (r < 0 && vs_is_fatal_sock_err(errno)) {
			vs_conn_close(v, c, true);
			return;
		}
		sent = r < 0 ? 0 : (unsigned)r;
	}
	for (i = 0; i < sent; i++) {
		if (g->msg[i].msg_len != g->mlen[i]) {
			/* all or nothing on a SOCK_SEQPACKET socket */
			vs_conn_close(v, c, true);
			return;
		}
		vs_host_wrote(c, g->mlen[i]);
	}
	if (sent < g->nmsg) {
		c->host_writable = false;
		v->st.host_stalls++;
	}
	for (i = sent; i < g->nmsg; i++)
		if (seq_queue(v, c, g->msg[i].msg_hdr.msg_iov,
			      (unsigned)g->msg[i].msg_hdr.msg_iovlen, g->mlen[i],
			      true) == VS_CLOSED)
			return;
	if (g->open && seq_queue(v, c, g->iov + g->open_iov, g->niov - g->open_iov,
				 g->open_len, false) == VS_CLOSED)
		return;
	vs_maybe_credit_update(v, c);
}

/* Write what was gathered and start afresh. */
static void gather_flush(struct vq_vsock *v)
{
	struct vs_gather *g = v->gat;
	struct vs_conn *c = g->c;

	if (!c)
		return;
	g->c = NULL;            /* closing c below must not come back here */
	if (c->type == VQ_VSOCK_TYPE_SEQPACKET)
		gather_write_seq(v, g, c);
	else
		gather_write_stream(v, g, c);
	g->niov = 0;
	g->len = 0;
	g->nmsg = 0;
	g->open = false;
	g->open_len = 0;
}

void vs_gather_flush_conn(struct vq_vsock *v, struct vs_conn *c)
{
	if (v->gat->c == c)
		gather_flush(v);
}

/* May the next RW of c join the gather, ahead of nothing of c's?  Room
 * for a chain's iovecs (and a message) is made by writing what is
 * gathered; that may change the answer. */
static bool gather_room(struct vq_vsock *v, struct vs_conn *c,
			const struct vq_chain *ch)
{
	struct vs_gather *g = v->gat;

	if (g->c && (g->c != c || g->niov + ch->nout > VS_SYSCALL_IOV ||
		     g->nmsg == VS_TX_BURST))
		gather_flush(v);
	if (c->dead || !c->host_writable)
		return false;
	return c->type == VQ_VSOCK_TYPE_SEQPACKET ? !c->mq_len && !c->msg_open :
						    !c->olen;
}

/* Gather the len payload bytes of ch for c; eom ends a seqpacket
 * message. */
static void gather_add(struct vq_vsock *v, struct vs_conn *c,
		       const struct vq_chain *ch, uint32_t len, bool eom)
{
	struct vs_gather *g = v->gat;
	unsigned n;

	if (!g->open) {
		g->open = true;
		g->open_iov = g->niov;
		g->open_len = 0;
	}
	g->c = c;
	n = vs_iov_slice(ch->iov, ch->nout, VQ_VSOCK_HDR_SIZE, len, g->iov + g->niov,
			 VS_SYSCALL_IOV - g->niov);
	g->niov += n;
	g->len += len;
	g->open_len += len;
	if (c->type == VQ_VSOCK_TYPE_STREAM) {
		g->open = false;
		return;
	}
	if (eom) {
		struct msghdr *m = &g->msg[g->nmsg].msg_hdr;

		*m = (struct msghdr){ .msg_iov = g->iov + g->open_iov,
				      .msg_iovlen = g->niov - g->open_iov };
		g->mlen[g->nmsg++] = g->open_len;
		g->open = false;
	}
}

/* Take an RW of len payload bytes in ch for c: gathered for one write,
 * or c closed (true); else (false) its payload is in v->slice, *n iovecs,
 * for the caller to buffer behind what waits. */
static bool rw_take(struct vq_vsock *v, struct vs_conn *c, const struct vq_chain *ch,
		    uint32_t len, bool eom, unsigned *n)
{
	if (!rw_allowed(v, c, len))
		return true;
	c->rx_cnt += len;
	v->st.tx_bytes += len;
	if (!len && c->type == VQ_VSOCK_TYPE_STREAM)
		return true;
	if (gather_room(v, c, ch)) {
		gather_add(v, c, ch, len, eom);
		return true;
	}
	if (c->dead)
		return true;
	*n = vs_iov_slice(ch->iov, ch->nout, VQ_VSOCK_HDR_SIZE, len, v->slice,
			  VS_IOV_MAX);
	return false;
}

/* Seqpacket: one RW of a guest message; SEQ_EOM ends the message, which
 * then goes to the host socket whole.  (SEQ_EOR has no AF_UNIX form.)
 * Behind messages that wait, or with the socket full, it waits too. */
static void tx_seq_rw(struct vq_vsock *v, struct vs_conn *c,
		      const struct vq_chain *ch, uint32_t len, uint32_t flags)
{
	bool eom = flags & VQ_VSOCK_SEQ_EOM;
	unsigned n;

	if (rw_take(v, c, ch, len, eom, &n) ||
	    seq_queue(v, c, v->slice, n, len, eom) == VS_CLOSED)
		return;
	if (eom && c->host_writable && vs_obuf_drain(v, c) == VS_CLOSED)
		return;
	vs_maybe_credit_update(v, c);
}

/* Stream: one RW; behind buffered bytes, or with the socket full, it is
 * buffered to keep the order. */
static void tx_rw(struct vq_vsock *v, struct vs_conn *c,
		  const struct vq_chain *ch, uint32_t len, uint32_t flags)
{
	unsigned n;

	if (c->type == VQ_VSOCK_TYPE_SEQPACKET) {
		tx_seq_rw(v, c, ch, len, flags);
		return;
	}
	if (rw_take(v, c, ch, len, false, &n))
		return;
	if (vs_obuf_put_iov(c, v->slice, n, len) < 0) {
		vs_conn_close(v, c, true);
		return;
	}
	if (c->host_writable && vs_obuf_drain(v, c) == VS_CLOSED)
		return;
	vs_maybe_credit_update(v, c);
}

/* A REQUEST to a sibling's port (link.c): RESPONSE when it answers. */
static void tx_request_sibling(struct vq_vsock *v, const struct vq_vsock_hdr *h,
			       const struct tx_hdr *t)
{
	struct vs_conn *c = vs_link_open(v, t->cid, t->lport, t->pport, t->type);

	if (c)
		update_peer_credit(v, c, h);
}

/* A REQUEST to the host's port lport: connect, answer RESPONSE or RST. */
static void tx_request(struct vq_vsock *v, const struct vq_vsock_hdr *h,
		       const struct tx_hdr *t)
{
	struct vs_conn *c;
	int fd;

	if (t->cid != VQ_VSOCK_CID_HOST) {
		tx_request_sibling(v, h, t);
		return;
	}
	if (v->nconns >= v->cfg.max_conns) {
		v->st.conn_limit++;
		vs_reply_rst(v, t->cid, t->lport, t->pport, t->type);
		return;
	}
	fd = v->cfg.host_connect(v->cfg.arg, t->lport, t->type);
	if (fd < 0) {
		if (fd == -EACCES)
			v->st.policy_refused++;
		else
			v->st.no_listener++;
		vs_reply_rst(v, t->cid, t->lport, t->pport, t->type);
		return;
	}
	c = vs_conn_new(v, fd, VS_ESTABLISHED);
	if (!c) {
		close(fd);
		vs_reply_rst(v, t->cid, t->lport, t->pport, t->type);
		return;
	}
	c->type = t->type;
	if (t->type == VQ_VSOCK_TYPE_SEQPACKET)
		vs_seq_fit_window(c);
	c->lport = t->lport;
	c->pport = t->pport;
	/* Optimistic: the first write says EAGAIN if it must. */
	c->host_writable = true;
	vs_hash_add(v, c);
	v->st.conns_opened++;
	c->pend |= P_RESPONSE;
	update_peer_credit(v, c, h);
	vs_rx_add(v, c);
}

/* The guest accepted a host-initiated connection: the host socket gets
 * "OK <host_port>\n" (seqpacket: a message of its own) ahead of any data. */
static void tx_response(struct vq_vsock *v, struct vs_conn *c)
{
	char ok[VS_OK_MAX];
	int k;
	struct iovec io;

	if (c->state != VS_CONNECTING) {
		vs_bad_op(v, c, VQ_VSOCK_OP_RESPONSE, "no REQUEST of ours waits for it");
		vs_conn_close(v, c, true);
		return;
	}
	if (c->link) {
		/* the sibling's guest hears RESPONSE */
		vs_link_accept(v, c);
		if (vs_has_rx_work(c))
			vs_rx_add(v, c);
		return;
	}
	c->state = VS_ESTABLISHED;
	c->host_writable = true;
	v->st.conns_opened++;
	k = snprintf(ok, sizeof(ok), "OK %u\n", c->lport);
	io = (struct iovec){ ok, (size_t)k };
	if (c->type == VQ_VSOCK_TYPE_SEQPACKET) {
		if (seq_queue(v, c, &io, 1, (uint32_t)k, true) == VS_CLOSED)
			return;
	} else if (vs_obuf_put_iov(c, &io, 1, (size_t)k) < 0) {
		vs_conn_close(v, c, true);
		return;
	}
	c->oextra = (uint32_t)k;
	if (vs_obuf_drain(v, c) == VS_CLOSED)
		return;
	if (vs_has_rx_work(c))
		vs_rx_add(v, c);
}

/* A packet on the live connection c. */
static void tx_on_conn(struct vq_vsock *v, struct vs_conn *c,
		       const struct vq_vsock_hdr *h, const struct tx_hdr *t,
		       const struct vq_chain *ch)
{
	/* What c sent before this packet reaches its socket first. */
	if (t->op != VQ_VSOCK_OP_RW)
		vs_gather_flush_conn(v, c);
	update_peer_credit(v, c, h);
	switch (t->op) {
	case VQ_VSOCK_OP_RESPONSE:
		tx_response(v, c);
		return;
	case VQ_VSOCK_OP_SHUTDOWN:
		c->guest_shut |= t->flags & (VQ_VSOCK_SHUTDOWN_RCV |
					     VQ_VSOCK_SHUTDOWN_SEND);
		if (c->state == VS_ESTABLISHED)
			vs_conn_check_done(v, c);
		return;
	case VQ_VSOCK_OP_RW:
		tx_rw(v, c, ch, t->len, t->flags);
		return;
	case VQ_VSOCK_OP_CREDIT_UPDATE:
		return;                 /* the credit was taken above */
	case VQ_VSOCK_OP_CREDIT_REQUEST:
		v->st.credit_requests_recv++;
		c->pend |= P_CREDIT_UPDATE;
		vs_rx_add(v, c);
		return;
	default:
		vs_bad_op(v, c, t->op, "not an op of the spec");
		vs_conn_close(v, c, true);
		return;
	}
}

static void tx_packet(struct vq_vsock *v, const struct vq_chain *ch)
{
	struct vq_vsock_hdr h;
	struct tx_hdr t;
	struct vs_conn *c;

	if (!vs_check_chain(v, ch))
		return;
	vq_iov_to_buf(ch->iov, ch->nout, 0, &h, sizeof(h));
	t = (struct tx_hdr){
		.cid = vq_le64(h.dst_cid), .len = vq_le32(h.len), .lport = vq_le32(h.dst_port),
		.pport = vq_le32(h.src_port), .flags = vq_le32(h.flags),
		.type = vq_le16(h.type), .op = vq_le16(h.op),
	};
	/* Spoofed, or to nobody a device can reach: no reply (Linux drops
	 * these too). */
	if (!vs_check_addr(v, vq_le64(h.src_cid), vq_le64(h.dst_cid)))
		return;
	v->st.tx_pkts++;
	c = vs_conn_find(v, t.cid, t.lport, t.pport);
	if (!vs_check_len(v, t.len, ch)) {
		/* The header lies about the payload: the stream cannot go on. */
		if (c)
			vs_conn_close(v, c, true);
		return;
	}
	if (!vs_check_type(v, t.type, c)) {
		/* 5.10.6.4: an unknown type gets RST; so does a packet whose
		 * type is not its connection's (which goes on). */
		if (t.op != VQ_VSOCK_OP_RST)
			vs_reply_rst(v, t.cid, t.lport, t.pport, t.type);
		return;
	}
	if (t.op == VQ_VSOCK_OP_RST) {
		v->st.rst_recv++;
		if (c)
			vs_conn_close(v, c, false);
		return;
	}
	if (t.op == VQ_VSOCK_OP_REQUEST) {
		if (!c) {
			tx_request(v, &h, &t);
			return;
		}
		/* A second REQUEST for a live pair: reset both. */
		vs_bad_op(v, c, t.op, "the connection exists");
		vs_conn_close(v, c, true);
		return;
	}
	if (!c) {
		/* Nothing open on these ports (5.10.6.5: reply with RST). */
		if (t.op < VQ_VSOCK_OP_REQUEST || t.op > VQ_VSOCK_OP_CREDIT_REQUEST)
			vs_bad_op(v, NULL, t.op, "not an op of the spec");
		vs_reply_rst(v, t.cid, t.lport, t.pport, t.type);
		return;
	}
	tx_on_conn(v, c, &h, &t, ch);
}

int vs_process_tx(struct vq_vsock *v, unsigned budget)
{
	unsigned done = 0;

	if (!v->tx)
		return -ENODEV;
	while (done < budget && !vq_vsock_tx_blocked(v)) {
		unsigned want = budget - done, i;
		int n, r;

		/* Each packet adds at most one reply: never pop more than
		 * the reply queue can take. */
		if (want > VS_TX_BURST)
			want = VS_TX_BURST;
		if (want > VS_REPLY_MAX - v->reply_len)
			want = VS_REPLY_MAX - v->reply_len;
		for (i = 0; i < want; i++) {
			v->txc[i].iov = v->iov + i * VS_IOV_MAX;
			v->txc[i].iov_max = VS_IOV_MAX;
		}
		n = vq_dev_pop_burst(v->tx, v->txc, want);
		if (n < 0)
			return done ? (int)done : n;
		if (n == 0)
			break;
		for (i = 0; i < (unsigned)n; i++)
			tx_packet(v, &v->txc[i]);
		/* before the chains go back: the gather points into them */
		gather_flush(v);
		for (i = 0; i < (unsigned)n; i++) {
			r = vq_dev_fill(v->tx, &v->txc[i], 0);
			if (r < 0)
				return r;
		}
		r = vq_dev_flush(v->tx);
		if (r < 0)
			return r;
		if (v->cfg.notify)
			v->cfg.notify(v->cfg.arg, VQ_VSOCK_TXQ);
		done += (unsigned)n;
		if ((unsigned)n < want)
			break;
	}
	return (int)done;
}
