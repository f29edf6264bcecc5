// SPDX-License-Identifier: MIT
/*
 * The connection table (hashed by port pair), the list of connections
 * with something for the guest (served round-robin by rx.c), the queue of
 * replies that belong to no connection (RST), closing and freeing, and
 * the credit both ways (5.10.6.3).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <virtq/runtime.h>

#include "vsock_internal.h"

/* A connection is its other end's CID and the two ports. */
static uint32_t hash_key(uint64_t cid, uint32_t l, uint32_t p)
{
	uint64_t h = (((uint64_t)l << 32 | p) ^ cid * 0xC2B2AE3D27D4EB4Full) *
		     0x9E3779B97F4A7C15ull;

	return (uint32_t)(h >> 32);
}

struct vs_conn *vs_conn_find(struct vq_vsock *v, uint64_t cid, uint32_t l,
			     uint32_t p)
{
	struct vs_conn *c = v->hash[hash_key(cid, l, p) & v->hmask];

	while (c && (c->lport != l || c->pport != p || c->pcid != cid))
		c = c->hnext;
	return c;
}

static struct vs_conn **bucket_of(struct vq_vsock *v, const struct vs_conn *c)
{
	return &v->hash[hash_key(c->pcid, c->lport, c->pport) & v->hmask];
}

void vs_hash_add(struct vq_vsock *v, struct vs_conn *c)
{
	struct vs_conn **b = bucket_of(v, c);

	c->hnext = *b;
	*b = c;
	v->nconns++;
}

static void hash_del(struct vq_vsock *v, struct vs_conn *c)
{
	struct vs_conn **b = bucket_of(v, c);

	while (*b && *b != c)
		b = &(*b)->hnext;
	if (*b) {
		*b = c->hnext;
		v->nconns--;
	}
}

void vs_rx_add(struct vq_vsock *v, struct vs_conn *c)
{
	if (c->on_rx || c->dead)
		return;
	c->on_rx = true;
	c->rnext = NULL;
	c->rprev = v->rx_tail;
	if (v->rx_tail)
		v->rx_tail->rnext = c;
	else
		v->rx_head = c;
	v->rx_tail = c;
}

void vs_rx_del(struct vq_vsock *v, struct vs_conn *c)
{
	if (!c->on_rx)
		return;
	if (c->rprev)
		c->rprev->rnext = c->rnext;
	else
		v->rx_head = c->rnext;
	if (c->rnext)
		c->rnext->rprev = c->rprev;
	else
		v->rx_tail = c->rprev;
	c->on_rx = false;
	c->rprev = c->rnext = NULL;
}

/* Bytes the guest may still receive on c. */
uint32_t vs_peer_credit(const struct vs_conn *c)
{
	uint32_t inflight = c->tx_cnt - c->peer_fwd_cnt;

	/* A fwd_cnt ahead of what we sent wraps to a huge in-flight count:
	 * that gives no credit rather than unbounded credit. */
	return inflight >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - inflight;
}

uint32_t vs_peer_pkts(const struct vs_conn *c)
{
	uint32_t limit = c->peer_buf_alloc / VS_PKT_TRUESIZE;

	if (limit > VS_PKTS_MAX)
		limit = VS_PKTS_MAX;
	/* a window below one packet's overhead still takes one, as before */
	if (limit == 0)
		limit = 1;
	return limit > c->pt_len ? limit - c->pt_len : 0;
}

/* Data waits for c that only the guest's packet count holds back. */
static bool pkts_hold(const struct vs_conn *c)
{
	return c->state == VS_ESTABLISHED && (c->host_readable || c->ibuf) &&
	       !c->host_eof && !(c->guest_shut & VQ_VSOCK_SHUTDOWN_RCV) &&
	       vs_peer_credit(c) > 0 && vs_peer_pkts(c) == 0;
}

static void pkts_unhold(struct vq_vsock *v, struct vs_conn *c)
{
	if (c->pkt_held) {
		c->pkt_held = false;
		v->npkt_held--;
	}
}

void vs_pkts_read(struct vq_vsock *v, struct vs_conn *c)
{
	/* a tail fwd_cnt has reached or passed: in flight is within
	 * buf_alloc (< 2^31), so the wrapping difference tells */
	while (c->pt_len &&
	       (int32_t)(c->peer_fwd_cnt - c->ptail[c->pt_head]) >= 0) {
		c->pt_head = (uint16_t)((c->pt_head + 1) % c->pt_cap);
		c->pt_len--;
	}
	if (c->pkt_held && vs_peer_pkts(c) > 0)
		pkts_unhold(v, c);
}

/* c holds its next data back for the packet count: ask where the guest
 * is now, and again every VS_CREQ_NS while it waits. */
static void pkts_held(struct vq_vsock *v, struct vs_conn *c)
{
	uint64_t now = vq_rt_now_ns();

	if (!c->pkt_held) {
		c->pkt_held = true;
		v->npkt_held++;
		v->st.pkts_held++;
	}
	if (now - c->creq_ns >= VS_CREQ_NS) {
		c->creq_ns = now;
		c->pend |= P_CREDIT_REQUEST;
	}
	if (!v->creq_due_ns || v->creq_due_ns > c->creq_ns + VS_CREQ_NS)
		v->creq_due_ns = c->creq_ns + VS_CREQ_NS;
}

int vs_pkts_sent(struct vq_vsock *v, struct vs_conn *c)
{
	if (c->pt_len == c->pt_cap) {
		uint16_t cap = c->pt_cap ? (uint16_t)(2 * c->pt_cap) : 16;
		uint32_t *t = malloc(cap * sizeof(*t));

		if (!t)
			return -ENOMEM;
		for (uint16_t i = 0; i < c->pt_len; i++)
			t[i] = c->ptail[(c->pt_head + i) % c->pt_cap];
		free(c->ptail);
		c->ptail = t;
		c->pt_cap = cap;
		c->pt_head = 0;
	}
	c->ptail[(c->pt_head + c->pt_len++) % c->pt_cap] = c->tx_cnt;
	if (pkts_hold(c))
		pkts_held(v, c);
	return 0;
}

void vs_pkts_check(struct vq_vsock *v, struct vs_conn *c)
{
	if (!c->pkt_held && pkts_hold(c))
		pkts_held(v, c);
}

void vs_pkts_ask(struct vq_vsock *v)
{
	uint64_t now = vq_rt_now_ns();

	if (!v->npkt_held || now < v->creq_due_ns)
		return;
	v->creq_due_ns = 0;
	for (struct vs_conn *c = v->all; c; c = c->next) {
		if (!c->pkt_held)
			continue;
		if (!pkts_hold(c)) {
			pkts_unhold(v, c);
			continue;
		}
		pkts_held(v, c);
		if (c->pend)
			vs_rx_add(v, c);
	}
}

bool vs_data_ready(const struct vs_conn *c)
{
	return c->state == VS_ESTABLISHED && (c->host_readable || c->ibuf) &&
	       !c->host_eof && !(c->guest_shut & VQ_VSOCK_SHUTDOWN_RCV) &&
	       vs_peer_credit(c) > 0 && vs_peer_pkts(c) > 0;
}

bool vs_has_rx_work(const struct vs_conn *c)
{
	return c->pend || vs_data_ready(c);
}

void vs_reply_rst(struct vq_vsock *v, uint64_t cid, uint32_t lport,
		  uint32_t pport, uint16_t type)
{
	struct vs_reply *r;

	/* The queue is sized for VS_REPLY_MAX from TX plus one per
	 * connection; anything beyond is impossible, but never overflow. */
	if (v->reply_len >= v->reply_cap)
		return;
	r = &v->replies[(v->reply_head + v->reply_len) % v->reply_cap];
	r->cid = cid;
	r->lport = lport;
	r->pport = pport;
	r->type = type;
	v->reply_len++;
	v->st.rst_sent++;
}

static void conn_free(struct vs_conn *c)
{
	free(c->ptail);
	free(c->obuf);
	free(c->mq);
	free(c->ibuf);
	free(c);
}

/* c's held message is gone: the connections whose messages waited for
 * the budget read again (edge-triggered epoll would not tell them). */
void vs_ibuf_release(struct vq_vsock *v, struct vs_conn *c)
{
	if (c->ibuf) {
		v->ibuf_bytes -= c->ilen;
		free(c->ibuf);
		c->ibuf = NULL;
	}
	if (c->ibuf_wait) {
		c->ibuf_wait = false;
		v->ibuf_waiters--;
	}
	for (struct vs_conn *w = v->all; w && v->ibuf_waiters; w = w->next) {
		if (!w->ibuf_wait)
			continue;
		w->ibuf_wait = false;
		v->ibuf_waiters--;
		w->host_readable = true;
		vs_rx_add(v, w);
	}
}

/* Forget c: close its host socket; the guest gets a RST if rst. */
void vs_conn_close(struct vq_vsock *v, struct vs_conn *c, bool rst)
{
	if (c->dead)
		return;
	/* What the guest sent before reaches the host before the close. */
	vs_gather_flush_conn(v, c);
	if (c->dead)
		return;
	if (c->state != VS_HANDSHAKE) {
		hash_del(v, c);
		if (rst)
			vs_reply_rst(v, c->pcid, c->lport, c->pport, c->type);
		/* Only what conns_opened counted: a refused REQUEST opened nothing. */
		if (c->state == VS_ESTABLISHED || c->state == VS_CLOSING)
			v->st.conns_closed++;
	} else {
		v->nhandshake--;
	}
	vs_rx_del(v, c);
	pkts_unhold(v, c);
	if (c->ibuf || c->ibuf_wait)
		vs_ibuf_release(v, c);
	if (c->fd >= 0)
		close(c->fd);   /* also leaves the epoll set */
	c->fd = -1;
	if (c->link)
		vs_link_release(v, c);
	if (c->prev)
		c->prev->next = c->next;
	else
		v->all = c->next;
	if (c->next)
		c->next->prev = c->prev;
	/* Freed by vs_reap() when the public call returns: callers up the
	 * stack (and later epoll events of this batch) may still look. */
	c->dead = true;
	c->next = v->dead;
	v->dead = c;
}

void vs_close_all(struct vq_vsock *v)
{
	while (v->all)
		vs_conn_close(v, v->all, false);
	v->reply_len = 0;
	v->reply_head = 0;
}

void vs_reap(struct vq_vsock *v)
{
	while (v->dead) {
		struct vs_conn *c = v->dead;

		v->dead = c->next;
		conn_free(c);
	}
}

struct vs_conn *vs_conn_new(struct vq_vsock *v, int fd, enum vs_state st)
{
	struct vs_conn *c = calloc(1, sizeof(*c));
	struct epoll_event ev;

	if (!c)
		return NULL;
	c->kind = VS_EP_CONN;
	c->state = st;
	c->fd = fd;
	c->type = VQ_VSOCK_TYPE_STREAM;
	c->pcid = VQ_VSOCK_CID_HOST;
	c->buf_alloc = v->cfg.buf_alloc;
	ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
	ev.data.ptr = c;
	if (fd >= 0 && epoll_ctl(v->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		free(c);
		return NULL;
	}
	c->next = v->all;
	if (v->all)
		v->all->prev = c;
	v->all = c;
	return c;
}

/* The part [off, off+len) of iov as a new iovec array in dst.  Returns the
 * count (the caller checked the lengths add up). */
unsigned vs_iov_slice(const struct iovec *iov, unsigned n, size_t off,
		      size_t len, struct iovec *dst, unsigned max)
{
	unsigned i, k = 0;

	for (i = 0; i < n && len && k < max; i++) {
		size_t l = iov[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		l -= off;
		if (l > len)
			l = len;
		dst[k].iov_base = (uint8_t *)iov[i].iov_base + off;
		dst[k].iov_len = l;
		k++;
		len -= l;
		off = 0;
	}
	return k;
}

/* After fwd_cnt moved: tell the guest when its view of our window is less
 * than half and the news is worth a packet (or the buffer is empty, so
 * nothing later would trigger it: no stall). */
void vs_maybe_credit_update(struct vq_vsock *v, struct vs_conn *c)
{
	uint32_t unadv = c->fwd_cnt - c->adv_fwd_cnt;
	uint32_t seen_free = c->buf_alloc - (c->rx_cnt - c->adv_fwd_cnt);
	uint32_t step = c->buf_alloc / 4;

	if (!unadv || seen_free >= c->buf_alloc / 2)
		return;
	if (step > 65536)
		step = 65536;
	if (unadv >= step || c->rx_cnt == c->fwd_cnt) {
		c->pend |= P_CREDIT_UPDATE;
		vs_rx_add(v, c);
	}
}

/*
 * Both directions finished?  Guest said SEND and its bytes reached the host:
 * half-close the host socket so the host reads EOF.  When the guest also
 * will not receive, or the host has nothing more to send, the connection is
 * over: RST (what a Linux guest waits for after its SHUTDOWN).
 */
void vs_conn_check_done(struct vq_vsock *v, struct vs_conn *c)
{
	if (c->dead || c->state != VS_ESTABLISHED ||
	    !(c->guest_shut & VQ_VSOCK_SHUTDOWN_SEND))
		return;
	if (c->msg_open && !c->mq_len) {
		/* The guest stopped sending inside a message: its start can
		 * never be a message of its own. */
		vs_bad_seq(v, c, "SHUTDOWN inside a message, its bytes dropped",
			   c->msg_open);
		c->olen -= c->msg_open;
		c->msg_open = 0;
	}
	if (c->olen || c->mq_len)
		return;
	if (!c->host_wr_shut) {
		vs_io_shut_wr(c);
		c->host_wr_shut = true;
	}
	if ((c->guest_shut & VQ_VSOCK_SHUTDOWN_RCV) || c->host_eof) {
		/* Anything still owed (a SHUTDOWN) is moot after RST. */
		vs_conn_close(v, c, true);
	}
}
