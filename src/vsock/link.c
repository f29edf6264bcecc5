// SPDX-License-Identifier: MIT
/*
 * Sibling connections: a guest's REQUEST to another guest's CID in the
 * same hub (link.h says how the two halves share a link).  The handshake
 * goes as the guests expect it: the asking device keeps its guest's
 * REQUEST waiting (VS_LINKING) and offers the link to the sibling's
 * device, which sends its guest a REQUEST from the asker's CID and port;
 * the sibling guest's RESPONSE (or RST) goes back the same way.  From
 * there each device runs its half as it runs a host socket's: its own
 * credit with its own guest (fwd_cnt moves as bytes enter the pipe, what
 * the pipe cannot take waits in the connection's buffer, within the
 * window), the guest's credit and packet count on the way out (bytes wait
 * in the pipe), SHUTDOWN as a socket's shutdown, RST as its close.  So a
 * guest that stops reading fills its own pipes and windows and nothing
 * more: its sibling's other connections go on.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "link.h"

void vs_link_ref(struct vs_link *l)
{
	atomic_fetch_add(&l->refs, 1);
}

void vs_link_unref(struct vs_link *l)
{
	if (atomic_fetch_sub(&l->refs, 1) != 1)
		return;
	free(l->pipe[0].buf);
	free(l->pipe[1].buf);
	free(l);
}

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 4096;

	while (p < n && p < (1u << 30))
		p <<= 1;
	return p;
}

/* ---- the pipes ---- */

static uint32_t pipe_used(struct vs_pipe *p)
{
	return atomic_load(&p->tail) - atomic_load(&p->head);
}

/* Copy len bytes between iov and p at byte count pos (the ring wraps):
 * into the pipe when put, else out of it. */
static void pipe_copy(struct vs_pipe *p, uint32_t pos, const struct iovec *iov,
		      unsigned n, size_t len, bool put)
{
	for (unsigned i = 0; i < n && len; i++) {
		uint8_t *u = iov[i].iov_base;
		size_t l = iov[i].iov_len < len ? iov[i].iov_len : len;

		len -= l;
		while (l) {
			uint32_t at = pos & (p->cap - 1), k = p->cap - at;

			if (k > l)
				k = (uint32_t)l;
			if (put)
				memcpy(p->buf + at, u, k);
			else
				memcpy(u, p->buf + at, k);
			pos += k;
			u += k;
			l -= k;
		}
	}
}

static void pipe_put(struct vs_pipe *p, uint32_t pos, const struct iovec *iov,
		     unsigned n, size_t len)
{
	pipe_copy(p, pos, iov, n, len, true);
}

static void pipe_get(struct vs_pipe *p, uint32_t pos, const struct iovec *iov,
		     unsigned n, size_t len)
{
	pipe_copy(p, pos, iov, n, len, false);
}

static size_t iov_total(const struct iovec *iov, unsigned n)
{
	size_t t = 0;

	for (unsigned i = 0; i < n; i++)
		t += iov[i].iov_len;
	return t;
}

/* ---- the two sides ---- */

static struct vs_end *end_of(const struct vs_conn *c)
{
	return &c->link->end[c->side];
}

static struct vs_end *peer_of(const struct vs_conn *c)
{
	return &c->link->end[!c->side];
}

/* Tell the peer (its inbox), if it is still there. */
static void post_peer(struct vs_conn *c)
{
	struct vs_end *p = peer_of(c);

	vs_member_post(p->m, p);
}

/* The peer sends no more: it shut down or went away. */
static bool peer_done(const struct vs_conn *c)
{
	const struct vs_end *p = peer_of(c);

	return atomic_load(&p->shut) || atomic_load(&p->closed);
}

/*
 * c waits for what flag says (data, room): the peer posts us when it
 * makes some.  Checked again after the flag is up, so that what came in
 * between is not lost: then we post ourselves.  (Both sides' flag and
 * index accesses are sequentially consistent: one of them sees the
 * other.)
 */
static void wait_for(struct vs_conn *c, atomic_bool *flag, bool (*ready)(struct vs_conn *))
{
	struct vs_end *e = end_of(c);

	atomic_store(flag, true);
	if (ready(c) && atomic_exchange(flag, false))
		vs_member_post(e->m, e);
}

static bool has_data(struct vs_conn *c)
{
	return peer_done(c) || pipe_used(&c->link->pipe[!c->side]) > 0;
}

static bool has_room(struct vs_conn *c)
{
	struct vs_pipe *p = &c->link->pipe[c->side];

	return atomic_load(&peer_of(c)->closed) || pipe_used(p) < p->cap;
}

/* We put bytes in our pipe: the peer hears if it waited for them. */
static void wrote(struct vs_conn *c)
{
	if (atomic_exchange(&peer_of(c)->rd_wait, false))
		post_peer(c);
}

/* We took bytes from the peer's pipe: it hears if it waited for room. */
static void took(struct vs_conn *c)
{
	if (atomic_exchange(&peer_of(c)->wr_wait, false))
		post_peer(c);
}

/* A write put its bytes (or messages: moved of them) before tail: publish
 * them, wait for room if some did not fit (short), tell the reader.
 * moved, or -1 with EAGAIN if none. */
static ssize_t put_done(struct vs_conn *c, uint32_t tail, uint32_t moved, bool short_)
{
	atomic_store(&c->link->pipe[c->side].tail, tail);
	if (short_)
		wait_for(c, &end_of(c)->wr_wait, has_room);
	if (!moved) {
		errno = EAGAIN;
		return -1;
	}
	wrote(c);
	return moved;
}

ssize_t vs_link_writev(struct vs_conn *c, const struct iovec *iov, unsigned n)
{
	struct vs_pipe *p = &c->link->pipe[c->side];
	size_t len = iov_total(iov, n);
	uint32_t tail = atomic_load(&p->tail);
	uint32_t room = p->cap - (tail - atomic_load(&p->head));
	uint32_t k = len < room ? (uint32_t)len : room;

	if (atomic_load(&peer_of(c)->closed)) {
		errno = EPIPE;
		return -1;
	}
	pipe_put(p, tail, iov, n, k);
	return put_done(c, tail + k, k, k < len);
}

int vs_link_sendmsgs(struct vs_conn *c, struct mmsghdr *m, unsigned n)
{
	struct vs_pipe *p = &c->link->pipe[c->side];
	uint32_t tail = atomic_load(&p->tail), head = atomic_load(&p->head);
	unsigned i;

	if (atomic_load(&peer_of(c)->closed)) {
		errno = EPIPE;
		return -1;
	}
	for (i = 0; i < n; i++) {
		const struct msghdr *h = &m[i].msg_hdr;
		size_t len = iov_total(h->msg_iov, (unsigned)h->msg_iovlen);
		uint8_t fl[VS_FRAME] = { (uint8_t)len, (uint8_t)(len >> 8),
					 (uint8_t)(len >> 16), (uint8_t)(len >> 24) };
		struct iovec fi = { fl, VS_FRAME };

		if (len + VS_FRAME > p->cap) {
			/* the window we gave is smaller than the pipe */
			if (i)
				break;
			errno = EMSGSIZE;
			return -1;
		}
		if (len + VS_FRAME > p->cap - (tail - head))
			break;
		pipe_put(p, tail, &fi, 1, VS_FRAME);
		pipe_put(p, tail + VS_FRAME, h->msg_iov, (unsigned)h->msg_iovlen, len);
		tail += VS_FRAME + (uint32_t)len;
		m[i].msg_len = (unsigned)len;
	}
	return (int)put_done(c, tail, i, i < n);
}

/* Nothing to read now: 0 at the end, else -1 with EAGAIN (and the peer
 * posts us when there is). */
static ssize_t read_nothing(struct vs_conn *c, bool done)
{
	if (done)
		return 0;
	wait_for(c, &end_of(c)->rd_wait, has_data);
	errno = EAGAIN;
	return -1;
}

ssize_t vs_link_readv(struct vs_conn *c, const struct iovec *iov, unsigned n)
{
	struct vs_pipe *p = &c->link->pipe[!c->side];
	/* the end before the bytes: bytes put before the end are seen */
	bool done = peer_done(c);
	uint32_t head = atomic_load(&p->head);
	uint32_t used = atomic_load(&p->tail) - head;
	size_t len = iov_total(iov, n);
	uint32_t k = len < used ? (uint32_t)len : used;

	if (!used)
		return read_nothing(c, done);
	pipe_get(p, head, iov, n, k);
	atomic_store(&p->head, head + k);
	took(c);
	if (k < len && !done)
		wait_for(c, &end_of(c)->rd_wait, has_data);
	return k;
}

ssize_t vs_link_peek_len(struct vs_conn *c)
{
	struct vs_pipe *p = &c->link->pipe[!c->side];
	bool done = peer_done(c);
	uint32_t head = atomic_load(&p->head);
	uint8_t fl[VS_FRAME];
	struct iovec fi = { fl, VS_FRAME };

	if (atomic_load(&p->tail) == head)
		return read_nothing(c, done);
	/* the writer puts a whole message at once */
	pipe_get(p, head, &fi, 1, VS_FRAME);
	return (ssize_t)((uint32_t)fl[0] | (uint32_t)fl[1] << 8 |
			 (uint32_t)fl[2] << 16 | (uint32_t)fl[3] << 24);
}

ssize_t vs_link_recv_msg(struct vs_conn *c, const struct iovec *iov, unsigned n)
{
	struct vs_pipe *p = &c->link->pipe[!c->side];
	ssize_t len = vs_link_peek_len(c);
	uint32_t head = atomic_load(&p->head);

	if (len < 0)
		return len;
	if (atomic_load(&p->tail) == head)
		return 0;       /* the end */
	if ((size_t)len > iov_total(iov, n)) {
		errno = EMSGSIZE;
		return -1;
	}
	pipe_get(p, head + VS_FRAME, iov, n, (size_t)len);
	atomic_store(&p->head, head + VS_FRAME + (uint32_t)len);
	took(c);
	return len;
}

bool vs_link_peer_closed(const struct vs_conn *c)
{
	return atomic_load(&peer_of(c)->closed);
}

bool vs_link_hung_up(const struct vs_conn *c)
{
	struct vs_pipe *p = &c->link->pipe[!c->side];

	return peer_done(c) && atomic_load(&p->tail) == atomic_load(&p->head);
}

void vs_link_shut_wr(struct vs_conn *c)
{
	atomic_store(&end_of(c)->shut, true);
	post_peer(c);
}

void vs_link_release(struct vq_vsock *v, struct vs_conn *c)
{
	struct vs_link *l = c->link;
	struct vs_end *e = end_of(c);

	(void)v;
	e->conn = NULL;
	atomic_store(&e->closed, true);
	post_peer(c);
	c->link = NULL;
	vs_link_unref(l);
}

/* ---- the handshake ---- */

static uint32_t member_window(struct vs_member *m)
{
	return atomic_load_explicit(&m->buf_alloc, memory_order_relaxed);
}

static struct vs_link *link_new(struct vs_member *asker, struct vs_member *asked,
				uint16_t type)
{
	struct vs_link *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->type = type;
	l->pipe[0].cap = pow2_at_least(member_window(asker));
	l->pipe[1].cap = pow2_at_least(member_window(asked));
	l->pipe[0].buf = malloc(l->pipe[0].cap);
	l->pipe[1].buf = malloc(l->pipe[1].cap);
	if (!l->pipe[0].buf || !l->pipe[1].buf) {
		free(l->pipe[0].buf);
		free(l->pipe[1].buf);
		free(l);
		return NULL;
	}
	l->end[0] = (struct vs_end){ .link = l, .m = asker };
	l->end[1] = (struct vs_end){ .link = l, .m = asked };
	/* nothing read yet, as a new socket that epoll tells of its first
	 * byte: the first write posts the reader */
	atomic_init(&l->end[0].rd_wait, true);
	atomic_init(&l->end[1].rd_wait, true);
	atomic_init(&l->refs, 2);       /* the asker's half, the offer */
	return l;
}

/* c is the half of a link on side: a seqpacket half advertises no more
 * than a message its pipe holds. */
static void link_attach(struct vs_conn *c, struct vs_link *l, uint8_t side)
{
	uint32_t max = l->pipe[side].cap - VS_FRAME;

	c->link = l;
	c->side = side;
	c->type = l->type;
	l->end[side].conn = c;
	if (c->type == VQ_VSOCK_TYPE_SEQPACKET && c->buf_alloc > max)
		c->buf_alloc = max;
}

/* A REQUEST to cid refused before anyone was asked: counted, RST. */
static void refuse(struct vq_vsock *v, uint64_t cid, uint32_t lport,
		   uint32_t pport, uint16_t type, uint64_t *counter, const char *why)
{
	(*counter)++;
	snprintf(v->bad_msg, sizeof(v->bad_msg),
		 "vsock hub: REQUEST from port %u to CID %" PRIu64 " port %u: %s",
		 pport, cid, lport, why);
	vs_reply_rst(v, cid, lport, pport, type);
}

struct vs_conn *vs_link_open(struct vq_vsock *v, uint64_t cid, uint32_t lport,
			     uint32_t pport, uint16_t type)
{
	struct vs_member *m = v->hub ? vs_hub_find(v->hub, cid) : NULL;
	struct vs_link *l;
	struct vs_conn *c;

	if (!m || !atomic_load(&m->live)) {
		refuse(v, cid, lport, pport, type, &v->st.cid_unknown,
		       "no guest of this device's hub has that CID");
		return NULL;
	}
	if (!(atomic_load_explicit(&m->groups, memory_order_relaxed) &
	      atomic_load_explicit(&v->me->groups, memory_order_relaxed))) {
		refuse(v, cid, lport, pport, type, &v->st.cid_refused,
		       "that guest shares no group with this one");
		return NULL;
	}
	if (v->nconns >= v->cfg.max_conns) {
		v->st.conn_limit++;
		vs_reply_rst(v, cid, lport, pport, type);
		return NULL;
	}
	l = link_new(v->me, m, type);
	c = l ? vs_conn_new(v, -1, VS_LINKING) : NULL;
	if (!c) {
		if (l) {
			free(l->pipe[0].buf);
			free(l->pipe[1].buf);
			free(l);
		}
		vs_reply_rst(v, cid, lport, pport, type);
		return NULL;
	}
	l->cid[0] = v->cfg.guest_cid;
	l->port[0] = pport;
	l->cid[1] = cid;
	l->port[1] = lport;
	link_attach(c, l, 0);
	c->pcid = cid;
	c->lport = lport;
	c->pport = pport;
	vs_hash_add(v, c);
	vs_member_post(m, &l->end[1]);
	return c;
}

/* A sibling's offer (our side 1 of l): our guest gets the REQUEST, or
 * the sibling hears no. */
static void take_offer(struct vq_vsock *v, struct vs_link *l)
{
	struct vs_end *e = &l->end[1];
	struct vs_conn *c = NULL;
	bool full = v->nconns >= v->cfg.max_conns;

	e->taken = true;
	if (v->rx && !full && (l->type == VQ_VSOCK_TYPE_STREAM || v->seqpacket) &&
	    !vs_conn_find(v, l->cid[0], l->port[0], l->port[1]))
		c = vs_conn_new(v, -1, VS_CONNECTING);
	if (!c) {
		/* no guest now, one without seqpacket, or too many */
		v->st.conn_limit += v->rx && full;
		atomic_store(&e->closed, true);
		vs_member_post(l->end[0].m, &l->end[0]);
		vs_link_unref(l);
		return;
	}
	link_attach(c, l, 1);
	c->pcid = l->cid[0];
	c->lport = l->port[0];
	c->pport = l->port[1];
	c->host_writable = true;
	vs_hash_add(v, c);
	c->pend |= P_REQUEST;
	vs_rx_add(v, c);
}

void vs_link_accept(struct vq_vsock *v, struct vs_conn *c)
{
	c->state = VS_ESTABLISHED;
	c->host_writable = true;
	v->st.conns_opened++;
	v->st.sibling_conns++;
	atomic_store(&c->link->accepted, true);
	post_peer(c);
}

/* The asker's half: the sibling answered, or went away before. */
static enum vs_fate answered(struct vq_vsock *v, struct vs_conn *c)
{
	if (atomic_load(&peer_of(c)->closed)) {
		v->st.no_listener++;
		vs_conn_close(v, c, true);
		return VS_CLOSED;
	}
	if (!atomic_load(&c->link->accepted))
		return VS_OPEN;
	c->state = VS_ESTABLISHED;
	c->host_writable = true;
	c->pend |= P_RESPONSE;
	v->st.conns_opened++;
	v->st.sibling_conns++;
	vs_rx_add(v, c);
	return VS_OPEN;
}

/* News on our end e of a link: what epoll would say of a socket. */
static void end_news(struct vq_vsock *v, struct vs_end *e)
{
	struct vs_conn *c = e->conn;
	uint32_t ev = 0;

	if (!c) {
		if (e == &e->link->end[1] && !e->taken)
			take_offer(v, e->link);
		return;
	}
	if (c->state == VS_LINKING && answered(v, c) == VS_CLOSED)
		return;
	if (atomic_load(&peer_of(c)->closed) &&
	    (c->state == VS_CONNECTING || !pipe_used(&c->link->pipe[!c->side]))) {
		/* the asker gave up before our guest answered, or the sibling
		 * reset (or went away) and every byte it sent was taken: as
		 * its guest's RST, ours */
		vs_conn_close(v, c, true);
		return;
	}
	if (has_data(c))
		ev |= EPOLLIN;
	if (peer_done(c))
		ev |= EPOLLRDHUP;
	if (has_room(c))
		ev |= EPOLLOUT;
	vs_conn_event(v, c, ev);
}

int vs_link_news(struct vq_vsock *v)
{
	struct vs_member *m = v->me;
	unsigned n = 0;
	uint64_t cnt;
	ssize_t r;
	struct vs_end *e;

	if (!m)
		return 0;
	r = read(m->efd, &cnt, sizeof(cnt));
	(void)r;
	while (n < VS_NEWS_BUDGET && (e = vs_member_pop(m))) {
		end_news(v, e);
		vs_link_unref(e->link);
		n++;
	}
	if (n == VS_NEWS_BUDGET) {
		/* more may wait: come back on the next turn */
		uint64_t one = 1;

		r = write(m->efd, &one, sizeof(one));
		(void)r;
	}
	return (int)n;
}
