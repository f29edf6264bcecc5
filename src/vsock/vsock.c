// SPDX-License-Identifier: MIT
/*
 * The virtio-vsock device: stream and seqpacket connections between the
 * guest and host sockets, credit flow control both ways (5.10.6.3), and the
 * hybrid-vsock CONNECT handshake for host-initiated connections.
 *
 * Shape of the data path:
 *  - TX (guest -> host): pop a burst, handle each packet, fill every chain
 *    with length 0, flush once.  RW payload goes from guest memory straight
 *    to the host socket with writev; what the socket does not take is copied
 *    into the connection's buffer, which is never larger than the credit we
 *    advertised, and fwd_cnt advances only as bytes reach the socket.
 *  - RX (host -> guest): connections with something to say sit on a list,
 *    served round-robin.  Data is read from the host socket straight into
 *    the guest's buffer (readv), never more than the guest's credit.  Used
 *    entries are published every used_batch buffers.
 *  - Replies that belong to no connection (RST) wait in a bounded queue;
 *    while it is full TX stops, as vhost-vsock does, so a REQUEST flood
 *    cannot grow memory.
 *  - Seqpacket: a guest message goes to the host socket in one sendmsg,
 *    straight from guest memory when it came in one packet and the socket
 *    takes it, else from the connection's buffer once its last packet
 *    (SEQ_EOM) arrived; the lengths of the buffered messages wait in a
 *    small queue.  A host message is read whole (its length peeked first)
 *    and goes out in packets as the guest's credit allows.
 * Host sockets are in one epoll set, edge-triggered: the device remembers
 * "readable"/"writable" until a syscall says EAGAIN, so a connection whose
 * guest has no credit does not make the caller spin.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <virtq/vsock.h>

#include "internal.h"

#define VS_IOV_MAX      256u    /* iovecs per chain */
#define VS_TX_BURST     32u
#define VS_REPLY_MAX    256u    /* TX stops while this many RSTs wait */
#define VS_LINE_MAX     32u     /* "CONNECT 4294967295" fits */
#define VS_OK_MAX       24u     /* "OK 4294967295\n" */
#define VS_SEQ_BACKLOG  4096u  /* guest messages waiting for a host socket */
#define VS_SEQ_MSG_MAX  (1u << 20)      /* host message read for the guest */
#define VS_PORT_FIRST   1024u
#define VS_PORT_LAST    0x7fffffffu

enum vs_state {
	VS_HANDSHAKE,           /* host socket, reading its CONNECT line */
	VS_CONNECTING,          /* REQUEST sent to the guest, no RESPONSE yet */
	VS_ESTABLISHED,
	VS_CLOSING,             /* sent SHUTDOWN both ways, waiting for RST */
};

/* Control packets a connection owes the guest. */
#define P_REQUEST       (1u << 0)
#define P_RESPONSE      (1u << 1)
#define P_CREDIT_UPDATE (1u << 2)
#define P_SHUTDOWN      (1u << 3)

/* What an epoll event points at. */
enum vs_kind { VS_EP_LISTENER = 1, VS_EP_CONN = 2 };

struct vs_conn {
	enum vs_kind kind;              /* first: epoll data points here */
	enum vs_state state;
	int fd;
	uint16_t type;                  /* VQ_VSOCK_TYPE_* */
	uint32_t lport, pport;          /* host side, guest side */
	struct vs_conn *hnext;          /* hash chain */
	struct vs_conn *prev, *next;    /* every connection */
	struct vs_conn *rprev, *rnext;  /* RX list */
	bool on_rx;
	bool dead;                      /* freed at the end of process_host */
	unsigned pend;                  /* P_* */
	uint32_t shut_flags;            /* for P_SHUTDOWN */
	/* host -> guest: the guest's credit */
	uint32_t peer_buf_alloc, peer_fwd_cnt, tx_cnt;
	/* guest -> host: our credit */
	uint32_t buf_alloc;             /* what we advertise on this one */
	uint32_t rx_cnt, fwd_cnt, adv_fwd_cnt;
	uint8_t *obuf;                  /* bytes for the host socket */
	uint32_t ohead, olen, oextra;   /* oextra: the OK line, not credit */
	/* seqpacket, guest -> host: lengths of the whole messages in obuf,
	 * and the bytes of the unfinished one at its tail */
	uint32_t *mq;
	uint32_t mq_cap, mq_head, mq_len, msg_open;
	/* seqpacket, host -> guest: the message being sent */
	uint8_t *ibuf;
	uint32_t ilen, ioff;
	bool ibuf_wait;                 /* a message waits for msg_budget */
	bool host_readable, host_writable, host_eof, host_wr_shut;
	bool host_rdhup;                /* the host shut down its side */
	uint32_t guest_shut;            /* SHUTDOWN flags the guest sent */
	char line[VS_LINE_MAX + 1];
	uint32_t linelen;
};

/* A listening host socket, one per type; epoll data points at kind. */
struct vs_listener {
	enum vs_kind kind;
	int fd;
};

struct vs_reply {
	uint32_t lport, pport;
	uint16_t type;
};

struct vq_vsock {
	struct vs_listener lst[2];      /* [0] stream, [1] seqpacket */
	struct vq_vsock_config cfg;
	struct vq_dev *rx, *tx, *ev;
	int epfd;
	int lfd;
	struct vs_conn **hash;
	uint32_t hmask;
	struct vs_conn *all;
	unsigned nconns;                /* in the hash */
	unsigned nhandshake;
	struct vs_conn *rx_head, *rx_tail;
	struct vs_reply *replies;       /* ring of reply_cap */
	uint32_t reply_cap, reply_head, reply_len;
	uint32_t next_port;
	struct vs_conn *dead;           /* closed, freed by reap() */
	bool reset_pending;
	bool seqpacket;                 /* VQ_VSOCK_F_SEQPACKET negotiated */
	uint64_t ibuf_bytes;            /* held in every ibuf, <= msg_budget */
	unsigned ibuf_waiters;          /* connections with ibuf_wait */
	/* chain storage */
	struct vq_chain txc[VS_TX_BURST];
	struct vq_chain rxc;
	bool rx_spare;                  /* rxc popped and unused */
	unsigned rx_staged;             /* filled since the last flush */
	struct iovec *iov;              /* (VS_TX_BURST + 1) * VS_IOV_MAX */
	struct iovec slice[VS_IOV_MAX];
	struct vq_vsock_stats st;
};

/* ---- small helpers ---- */

static uint32_t hash_ports(uint32_t l, uint32_t p)
{
	uint64_t h = ((uint64_t)l << 32 | p) * 0x9E3779B97F4A7C15ull;

	return (uint32_t)(h >> 32);
}

static struct vs_conn *conn_find(struct vq_vsock *v, uint32_t l, uint32_t p)
{
	struct vs_conn *c = v->hash[hash_ports(l, p) & v->hmask];

	while (c && (c->lport != l || c->pport != p))
		c = c->hnext;
	return c;
}

static void hash_add(struct vq_vsock *v, struct vs_conn *c)
{
	struct vs_conn **b = &v->hash[hash_ports(c->lport, c->pport) & v->hmask];

	c->hnext = *b;
	*b = c;
	v->nconns++;
}

static void hash_del(struct vq_vsock *v, struct vs_conn *c)
{
	struct vs_conn **b = &v->hash[hash_ports(c->lport, c->pport) & v->hmask];

	while (*b && *b != c)
		b = &(*b)->hnext;
	if (*b) {
		*b = c->hnext;
		v->nconns--;
	}
}

static void rx_add(struct vq_vsock *v, struct vs_conn *c)
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

static void rx_del(struct vq_vsock *v, struct vs_conn *c)
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
static uint32_t peer_credit(const struct vs_conn *c)
{
	uint32_t inflight = c->tx_cnt - c->peer_fwd_cnt;

	/* A fwd_cnt ahead of what we sent wraps to a huge in-flight count:
	 * that gives no credit rather than unbounded credit. */
	return inflight >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - inflight;
}

static bool data_ready(const struct vs_conn *c)
{
	return c->state == VS_ESTABLISHED && (c->host_readable || c->ibuf) &&
	       !c->host_eof && !(c->guest_shut & VQ_VSOCK_SHUTDOWN_RCV) &&
	       peer_credit(c) > 0;
}

static bool has_rx_work(const struct vs_conn *c)
{
	return c->pend || data_ready(c);
}

static void reply_rst(struct vq_vsock *v, uint32_t lport, uint32_t pport,
		      uint16_t type)
{
	struct vs_reply *r;

	/* The queue is sized for VS_REPLY_MAX from TX plus one per
	 * connection; anything beyond is impossible, but never overflow. */
	if (v->reply_len >= v->reply_cap)
		return;
	r = &v->replies[(v->reply_head + v->reply_len) % v->reply_cap];
	r->lport = lport;
	r->pport = pport;
	r->type = type;
	v->reply_len++;
}

static void conn_free(struct vs_conn *c)
{
	free(c->obuf);
	free(c->mq);
	free(c->ibuf);
	free(c);
}

/* c's held message is gone: the connections whose messages waited for
 * the budget read again (edge-triggered epoll would not tell them). */
static void ibuf_release(struct vq_vsock *v, struct vs_conn *c)
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
		rx_add(v, w);
	}
}

/* Forget c: close its host socket; the guest gets a RST if rst. */
static void conn_close(struct vq_vsock *v, struct vs_conn *c, bool rst)
{
	if (c->dead)
		return;
	if (c->state != VS_HANDSHAKE) {
		hash_del(v, c);
		if (rst) {
			reply_rst(v, c->lport, c->pport, c->type);
			v->st.rst_sent++;
		}
		v->st.conns_closed++;
	} else {
		v->nhandshake--;
	}
	rx_del(v, c);
	if (c->ibuf || c->ibuf_wait)
		ibuf_release(v, c);
	if (c->fd >= 0)
		close(c->fd);   /* also leaves the epoll set */
	c->fd = -1;
	if (c->prev)
		c->prev->next = c->next;
	else
		v->all = c->next;
	if (c->next)
		c->next->prev = c->prev;
	/* Freed by reap() when the public call returns: callers up the
	 * stack (and later epoll events of this batch) may still look. */
	c->dead = true;
	c->next = v->dead;
	v->dead = c;
}

static void reap(struct vq_vsock *v)
{
	while (v->dead) {
		struct vs_conn *c = v->dead;

		v->dead = c->next;
		conn_free(c);
	}
}

static struct vs_conn *conn_new(struct vq_vsock *v, int fd, enum vs_state st)
{
	struct vs_conn *c = calloc(1, sizeof(*c));
	struct epoll_event ev;

	if (!c)
		return NULL;
	c->kind = VS_EP_CONN;
	c->state = st;
	c->fd = fd;
	c->type = VQ_VSOCK_TYPE_STREAM;
	c->buf_alloc = v->cfg.buf_alloc;
	ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
	ev.data.ptr = c;
	if (epoll_ctl(v->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
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
static unsigned iov_slice(const struct iovec *iov, unsigned n, size_t off,
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

static uint32_t obuf_cap(const struct vs_conn *c)
{
	return c->buf_alloc + VS_OK_MAX;
}

/* Append to the host-bound buffer (the caller checked the room). */
static int obuf_put_iov(struct vs_conn *c, const struct iovec *iov,
			unsigned n, size_t len)
{
	uint32_t cap = obuf_cap(c), tail;
	unsigned i;

	if (!c->obuf) {
		c->obuf = malloc(cap);
		if (!c->obuf)
			return -ENOMEM;
		c->ohead = 0;
	}
	tail = (c->ohead + c->olen) % cap;
	for (i = 0; i < n; i++) {
		const uint8_t *s = iov[i].iov_base;
		size_t l = iov[i].iov_len;

		while (l) {
			size_t k = cap - tail;

			if (k > l)
				k = l;
			memcpy(c->obuf + tail, s, k);
			tail = (tail + k) % cap;
			s += k;
			l -= k;
		}
	}
	c->olen += (uint32_t)len;
	return 0;
}

/* Bytes went to the host socket: the OK line first, then credit. */
static void host_wrote(struct vs_conn *c, uint32_t n)
{
	uint32_t extra = n < c->oextra ? n : c->oextra;

	c->oextra -= extra;
	c->fwd_cnt += n - extra;
}

static bool is_fatal_sock_err(int e)
{
	return e != EAGAIN && e != EWOULDBLOCK && e != EINTR;
}

/* writev without SIGPIPE: a host that closed its socket is an error to
 * handle (RST), not a signal that kills the daemon. */
static ssize_t sock_writev(int fd, struct iovec *iov, unsigned n)
{
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = n };

	return sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* After fwd_cnt moved: tell the guest when its view of our window is less
 * than half and the news is worth a packet (or the buffer is empty, so
 * nothing later would trigger it: no stall). */
static void maybe_credit_update(struct vq_vsock *v, struct vs_conn *c)
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
		rx_add(v, c);
	}
}

static void conn_check_done(struct vq_vsock *v, struct vs_conn *c);
static void seq_fit_window(struct vs_conn *c);

/* The n bytes at the head of obuf as one or two iovecs. */
static unsigned obuf_head_iov(const struct vs_conn *c, uint32_t n, struct iovec io[2])
{
	uint32_t cap = obuf_cap(c), first = cap - c->ohead;

	if (first > n)
		first = n;
	io[0].iov_base = c->obuf + c->ohead;
	io[0].iov_len = first;
	if (first == n)
		return 1;
	io[1].iov_base = c->obuf;
	io[1].iov_len = n - first;
	return 2;
}

/* Seqpacket: send the whole messages at the head of obuf, one sendmsg
 * each (all or nothing on a SOCK_SEQPACKET socket).  0, or -1 after
 * closing c. */
static int obuf_drain_msgs(struct vq_vsock *v, struct vs_conn *c)
{
	while (c->mq_len && c->host_writable) {
		uint32_t m = c->mq[c->mq_head];
		struct iovec io[2];
		unsigned n = obuf_head_iov(c, m, io);
		ssize_t r = sock_writev(c->fd, io, m ? n : 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && !is_fatal_sock_err(errno)) {
			c->host_writable = false;
			v->st.host_stalls++;
			break;
		}
		if (r != (ssize_t)m) {
			conn_close(v, c, true);
			return -1;
		}
		c->ohead = (c->ohead + m) % obuf_cap(c);
		c->olen -= m;
		host_wrote(c, m);
		c->mq_head = (c->mq_head + 1) % c->mq_cap;
		c->mq_len--;
	}
	return 0;
}

/* Write buffered bytes to the host socket.  0, or -1 after closing c. */
static int obuf_drain(struct vq_vsock *v, struct vs_conn *c)
{
	uint32_t cap = obuf_cap(c);

	if (c->type == VQ_VSOCK_TYPE_SEQPACKET) {
		if (obuf_drain_msgs(v, c) < 0)
			return -1;
	}
	while (c->type == VQ_VSOCK_TYPE_STREAM && c->olen && c->host_writable) {
		struct iovec io[2];
		unsigned n = obuf_head_iov(c, c->olen, io);
		ssize_t r = sock_writev(c->fd, io, n);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (!is_fatal_sock_err(errno)) {
				c->host_writable = false;
				v->st.host_stalls++;
				break;
			}
			conn_close(v, c, true);
			return -1;
		}
		c->ohead = (c->ohead + (uint32_t)r) % cap;
		c->olen -= (uint32_t)r;
		host_wrote(c, (uint32_t)r);
	}
	if (c->olen == 0 && c->obuf) {
		free(c->obuf);
		c->obuf = NULL;
		c->ohead = 0;
	}
	maybe_credit_update(v, c);
	conn_check_done(v, c);
	return c->dead ? -1 : 0;
}

/*
 * Both directions finished?  Guest said SEND and its bytes reached the host:
 * half-close the host socket so the host reads EOF.  When the guest also
 * will not receive, or the host has nothing more to send, the connection is
 * over: RST (what a Linux guest waits for after its SHUTDOWN).
 */
static void conn_check_done(struct vq_vsock *v, struct vs_conn *c)
{
	if (c->dead || c->state != VS_ESTABLISHED ||
	    !(c->guest_shut & VQ_VSOCK_SHUTDOWN_SEND))
		return;
	if (c->msg_open && !c->mq_len) {
		/* The guest stopped sending inside a message: its start can
		 * never be a message of its own. */
		v->st.bad_seq++;
		c->olen -= c->msg_open;
		c->msg_open = 0;
	}
	if (c->olen || c->mq_len)
		return;
	if (!c->host_wr_shut) {
		shutdown(c->fd, SHUT_WR);
		c->host_wr_shut = true;
	}
	if ((c->guest_shut & VQ_VSOCK_SHUTDOWN_RCV) || c->host_eof) {
		/* Anything still owed (a SHUTDOWN) is moot after RST. */
		conn_close(v, c, true);
	}
}

/* ---- lifecycle ---- */

int vq_vsock_new(const struct vq_vsock_config *cfg, struct vq_vsock **out)
{
	struct vq_vsock *v;
	uint32_t nb = 1;

	*out = NULL;
	if (!cfg || cfg->guest_cid < 3 || cfg->guest_cid > 0xffffffffull ||
	    !cfg->host_connect)
		return -EINVAL;
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	v->lst[0] = v->lst[1] = (struct vs_listener){ VS_EP_LISTENER, -1 };
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
	v->iov = calloc((VS_TX_BURST + 1) * VS_IOV_MAX, sizeof(*v->iov));
	v->epfd = epoll_create1(EPOLL_CLOEXEC);
	v->next_port = VS_PORT_FIRST;
	if (!v->hash || !v->replies || !v->iov || v->epfd < 0) {
		int err = v->epfd < 0 ? -errno : -ENOMEM;

		if (v->epfd >= 0)
			close(v->epfd);
		free(v->hash);
		free(v->replies);
		free(v->iov);
		free(v);
		return err;
	}
	*out = v;
	return 0;
}

static void close_all(struct vq_vsock *v)
{
	while (v->all)
		conn_close(v, v->all, false);
	v->reply_len = 0;
	v->reply_head = 0;
}

void vq_vsock_free(struct vq_vsock *v)
{
	if (!v)
		return;
	close_all(v);
	reap(v);
	for (unsigned i = 0; i < 2; i++)
		if (v->lst[i].fd >= 0)
			close(v->lst[i].fd);
	close(v->epfd);
	free(v->hash);
	free(v->replies);
	free(v->iov);
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
	v->seqpacket = vq_dev_features(rx) & VIRTQ_BIT(VQ_VSOCK_F_SEQPACKET);
	v->rx_spare = false;
	v->rx_staged = 0;
	return 0;
}

void vq_vsock_detach(struct vq_vsock *v)
{
	/* process_rx never keeps a popped chain between calls, so there is
	 * nothing to give back. */
	v->rx = v->tx = v->ev = NULL;
	v->rx_spare = false;
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
			conn_close(v, c, false);
	}
	reap(v);
	v->reply_len = 0;
	v->reply_head = 0;
	v->rx = v->tx = v->ev = NULL;
	v->rx_spare = false;
	v->rx_staged = 0;
	v->reset_pending = false;
}

int vq_vsock_fd(const struct vq_vsock *v)
{
	return v->epfd;
}

/* The vsock type of a host socket (SOCK_STREAM or SOCK_SEQPACKET), or 0. */
static uint16_t sock_vsock_type(int fd)
{
	int t = 0;
	socklen_t l = sizeof(t);

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &t, &l) < 0)
		return 0;
	return t == SOCK_STREAM ? VQ_VSOCK_TYPE_STREAM :
	       t == SOCK_SEQPACKET ? VQ_VSOCK_TYPE_SEQPACKET : 0;
}

int vq_vsock_set_listener(struct vq_vsock *v, int fd)
{
	uint16_t type = sock_vsock_type(fd);
	struct vs_listener *l;
	struct epoll_event ev = { .events = EPOLLIN };

	if (!type)
		return -EINVAL;
	l = &v->lst[type == VQ_VSOCK_TYPE_SEQPACKET];
	if (l->fd >= 0)
		return -EBUSY;
	ev.data.ptr = l;
	if (epoll_ctl(v->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	l->fd = fd;
	return 0;
}

int vq_vsock_host_attach(struct vq_vsock *v, int fd)
{
	uint16_t type = sock_vsock_type(fd);
	struct vs_conn *c;

	if (!type) {
		close(fd);
		return -EINVAL;
	}
	if (v->nhandshake >= v->cfg.max_conns) {
		v->st.conn_limit++;
		close(fd);
		return -EAGAIN;
	}
	c = conn_new(v, fd, VS_HANDSHAKE);
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->type = type;
	if (type == VQ_VSOCK_TYPE_SEQPACKET)
		seq_fit_window(c);
	v->nhandshake++;
	return 0;
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

bool vq_vsock_rx_pending(const struct vq_vsock *v)
{
	return v->reply_len || v->rx_head;
}

bool vq_vsock_tx_blocked(const struct vq_vsock *v)
{
	return v->reply_len >= VS_REPLY_MAX;
}

int vq_vsock_parse_connect(const char *line, uint32_t *port)
{
	uint64_t p = 0;
	const char *s;

	if (strncmp(line, "CONNECT ", 8))
		return -EINVAL;
	s = line + 8;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		p = p * 10 + (uint64_t)(*s - '0');
		if (p > 0xffffffffull)
			return -EINVAL;
	}
	/* Tolerate a CR from a "\r\n" line ending, nothing else. */
	if (*s == '\r')
		s++;
	if (*s)
		return -EINVAL;
	*port = (uint32_t)p;
	return 0;
}

/* ---- host side ---- */

static uint32_t alloc_port(struct vq_vsock *v, uint32_t pport)
{
	uint32_t tries;

	for (tries = 0; tries < 1u << 16; tries++) {
		uint32_t p = v->next_port++;

		if (v->next_port > VS_PORT_LAST)
			v->next_port = VS_PORT_FIRST;
		if (!conn_find(v, p, pport))
			return p;
	}
	return 0;
}

/* The CONNECT line is in c->line (c->linelen bytes, no LF): REQUEST the
 * guest's port.  Returns -1 if c was closed. */
static int handshake_done(struct vq_vsock *v, struct vs_conn *c)
{
	uint32_t port, lport;

	c->line[c->linelen] = '\0';
	if (vq_vsock_parse_connect(c->line, &port) < 0) {
		v->st.bad_connect_line++;
		conn_close(v, c, false);
		return -1;
	}
	if (!v->rx || v->nconns >= v->cfg.max_conns ||
	    (c->type == VQ_VSOCK_TYPE_SEQPACKET && !v->seqpacket) ||
	    !(lport = alloc_port(v, port))) {
		/* No guest to talk to, one without seqpacket, or too many
		 * connections. */
		v->st.conn_limit += v->rx && v->nconns >= v->cfg.max_conns;
		conn_close(v, c, false);
		return -1;
	}
	v->nhandshake--;
	c->state = VS_CONNECTING;
	c->lport = lport;
	c->pport = port;
	hash_add(v, c);
	/* Bytes behind the line are the connection's: read them once the
	 * guest accepted. */
	c->host_readable = true;
	c->pend |= P_REQUEST;
	rx_add(v, c);
	return 0;
}

/* The CONNECT line, one byte per read so the payload behind it stays in the
 * socket.  Returns -1 if c was closed. */
static int handshake_read(struct vq_vsock *v, struct vs_conn *c)
{
	for (;;) {
		char ch;
		ssize_t r = read(c->fd, &ch, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && !is_fatal_sock_err(errno))
			return 0;
		if (r <= 0) {
			/* EOF or error before a whole line: the host gave up. */
			if (c->linelen)
				v->st.bad_connect_line++;
			conn_close(v, c, false);
			return -1;
		}
		if (ch == '\n')
			return handshake_done(v, c);
		if (c->linelen >= VS_LINE_MAX) {
			v->st.bad_connect_line++;
			conn_close(v, c, false);
			return -1;
		}
		c->line[c->linelen++] = ch;
	}
}

/* Seqpacket: the CONNECT line is the first message (its LF optional).
 * Returns -1 if c was closed. */
static int handshake_read_msg(struct vq_vsock *v, struct vs_conn *c)
{
	ssize_t r;

	do
		r = recv(c->fd, c->line, VS_LINE_MAX + 1, MSG_TRUNC | MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	if (r < 0 && !is_fatal_sock_err(errno))
		return 0;
	if (r > 0 && c->line[r <= VS_LINE_MAX ? r - 1 : VS_LINE_MAX] == '\n')
		r--;
	if (r <= 0 || r > VS_LINE_MAX) {
		/* EOF, an error, or no line fits (MSG_TRUNC gave the length) */
		if (r != 0)
			v->st.bad_connect_line++;
		conn_close(v, c, false);
		return -1;
	}
	c->linelen = (uint32_t)r;
	return handshake_done(v, c);
}

static void host_accept(struct vq_vsock *v, const struct vs_listener *l)
{
	for (;;) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;         /* EAGAIN, or EMFILE: try on the next event */
		}
		vq_vsock_host_attach(v, fd);
	}
}

static void conn_event(struct vq_vsock *v, struct vs_conn *c, uint32_t events)
{
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		c->host_readable = true;
	if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		c->host_rdhup = true;
	if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR))
		c->host_writable = true;
	if (c->state == VS_HANDSHAKE) {
		if (c->host_readable)
			(c->type == VQ_VSOCK_TYPE_SEQPACKET ?
			 handshake_read_msg : handshake_read)(v, c);
		return;
	}
	if (c->olen && c->host_writable && obuf_drain(v, c) < 0)
		return;
	if (has_rx_work(c))
		rx_add(v, c);
}

int vq_vsock_process_host(struct vq_vsock *v)
{
	struct epoll_event ev[64];
	int n, i;

	n = epoll_wait(v->epfd, ev, (int)VQ_ARRAY_SIZE(ev), 0);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (i = 0; i < n; i++) {
		enum vs_kind *k = ev[i].data.ptr;

		if (*k == VS_EP_LISTENER) {
			host_accept(v, (const struct vs_listener *)k);
			continue;
		}
		if (((struct vs_conn *)k)->dead)
			continue;
		conn_event(v, (struct vs_conn *)k, ev[i].events);
	}
	reap(v);
	return n;
}

/* ---- TX: packets from the guest ---- */

static void update_peer_credit(struct vq_vsock *v, struct vs_conn *c,
			       const struct vq_vsock_hdr *h)
{
	c->peer_buf_alloc = vq_le32(h->buf_alloc);
	c->peer_fwd_cnt = vq_le32(h->fwd_cnt);
	if (has_rx_work(c))
		rx_add(v, c);
}

/* An RW the connection may take: established, the guest still sending,
 * within the window we advertised (buffering more would be unbounded,
 * dropping it would corrupt the stream).  false after closing c. */
static bool rw_allowed(struct vq_vsock *v, struct vs_conn *c, uint32_t len)
{
	if (c->state != VS_ESTABLISHED ||
	    (c->guest_shut & VQ_VSOCK_SHUTDOWN_SEND)) {
		v->st.bad_op++;
		conn_close(v, c, true);
		return false;
	}
	if (len > c->buf_alloc - (c->rx_cnt - c->fwd_cnt)) {
		v->st.bad_credit++;
		conn_close(v, c, true);
		return false;
	}
	return true;
}

/* Seqpacket: append len bytes of the message being built to obuf; eom
 * ends it, and its length joins the queue of whole messages.  0, or -1
 * after closing c. */
static int seq_queue(struct vq_vsock *v, struct vs_conn *c,
		     const struct iovec *iov, unsigned n, uint32_t len, bool eom)
{
	if (eom && c->mq_len == c->mq_cap) {
		uint32_t cap = c->mq_cap ? 2 * c->mq_cap : 16, i;
		uint32_t *q;

		if (cap > VS_SEQ_BACKLOG) {
			/* Messages without end into a host that reads none:
			 * each costs us a slot and the guest no credit. */
			v->st.bad_seq++;
			conn_close(v, c, true);
			return -1;
		}
		q = malloc(cap * sizeof(*q));
		if (!q) {
			conn_close(v, c, true);
			return -1;
		}
		for (i = 0; i < c->mq_len; i++)
			q[i] = c->mq[(c->mq_head + i) % c->mq_cap];
		free(c->mq);
		c->mq = q;
		c->mq_cap = cap;
		c->mq_head = 0;
	}
	if (len && obuf_put_iov(c, iov, n, len) < 0) {
		conn_close(v, c, true);
		return -1;
	}
	c->msg_open += len;
	if (eom) {
		c->mq[(c->mq_head + c->mq_len) % c->mq_cap] = c->msg_open;
		c->mq_len++;
		c->msg_open = 0;
	}
	return 0;
}

/* Seqpacket: one RW of a guest message; SEQ_EOM ends the message, which
 * then goes to the host socket whole.  (SEQ_EOR has no AF_UNIX form.) */
static void tx_seq_rw(struct vq_vsock *v, struct vs_conn *c,
		      const struct vq_chain *ch, uint32_t len, uint32_t flags)
{
	bool eom = flags & VQ_VSOCK_SEQ_EOM;
	unsigned n;

	if (!rw_allowed(v, c, len))
		return;
	c->rx_cnt += len;
	v->st.tx_bytes += len;
	n = iov_slice(ch->iov, ch->nout, VQ_VSOCK_HDR_SIZE, len, v->slice,
		      VS_IOV_MAX);
	if (eom && !c->msg_open && !c->mq_len && c->host_writable) {
		/* A whole message in one packet, nothing ahead of it. */
		ssize_t r;

		do
			r = sock_writev(c->fd, v->slice, len ? n : 0);
		while (r < 0 && errno == EINTR);
		if (r == (ssize_t)len) {
			host_wrote(c, len);
			maybe_credit_update(v, c);
			return;
		}
		if (r >= 0 || is_fatal_sock_err(errno)) {
			conn_close(v, c, true);
			return;
		}
		c->host_writable = false;
		v->st.host_stalls++;
	}
	if (seq_queue(v, c, v->slice, n, len, eom) < 0)
		return;
	if (eom && c->host_writable && obuf_drain(v, c) < 0)
		return;
	maybe_credit_update(v, c);
}

static void tx_rw(struct vq_vsock *v, struct vs_conn *c,
		  const struct vq_chain *ch, uint32_t len, uint32_t flags)
{
	unsigned n;
	size_t done = 0;

	if (c->type == VQ_VSOCK_TYPE_SEQPACKET) {
		tx_seq_rw(v, c, ch, len, flags);
		return;
	}
	if (!rw_allowed(v, c, len) || !len)
		return;
	c->rx_cnt += len;
	v->st.tx_bytes += len;
	n = iov_slice(ch->iov, ch->nout, VQ_VSOCK_HDR_SIZE, len, v->slice,
		      VS_IOV_MAX);
	if (!c->olen && c->host_writable) {
		for (;;) {
			ssize_t r = sock_writev(c->fd, v->slice, n);

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && is_fatal_sock_err(errno)) {
				conn_close(v, c, true);
				return;
			}
			if (r < 0) {
				c->host_writable = false;
				v->st.host_stalls++;
			} else {
				done = (size_t)r;
				host_wrote(c, (uint32_t)r);
			}
			break;
		}
		if (done < len) {
			c->host_writable = false;
			if (done)
				v->st.host_stalls++;
		}
	}
	if (done < len) {
		n = iov_slice(ch->iov, ch->nout, VQ_VSOCK_HDR_SIZE + done,
			      len - done, v->slice, VS_IOV_MAX);
		if (obuf_put_iov(c, v->slice, n, len - done) < 0) {
			conn_close(v, c, true);
			return;
		}
		/* Writable but behind buffered bytes: keep the order, drain. */
		if (c->host_writable && obuf_drain(v, c) < 0)
			return;
	}
	maybe_credit_update(v, c);
}

/*
 * A seqpacket host socket takes a message only if it fits its send buffer
 * (AF_UNIX: sk_sndbuf - 32, else EMSGSIZE), and a Linux guest sends no
 * message larger than the buf_alloc we advertise: ask for room for a whole
 * window and advertise no more than we got.
 */
static void seq_fit_window(struct vs_conn *c)
{
	int want = (int)(c->buf_alloc + 4096), got = 0;
	socklen_t l = sizeof(got);

	if (setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want)) < 0 ||
	    getsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &got, &l) < 0)
		return;
	/* got is what the kernel keeps: twice the ask, capped by wmem_max */
	if (got > 4096 && (uint32_t)got - 4096 < c->buf_alloc)
		c->buf_alloc = (uint32_t)got - 4096;
}

static void tx_request(struct vq_vsock *v, const struct vq_vsock_hdr *h,
		       uint32_t lport, uint32_t pport, uint16_t type)
{
	struct vs_conn *c;
	int fd;

	if (v->nconns >= v->cfg.max_conns) {
		v->st.conn_limit++;
		reply_rst(v, lport, pport, type);
		v->st.rst_sent++;
		return;
	}
	fd = v->cfg.host_connect(v->cfg.arg, lport, type);
	if (fd < 0) {
		v->st.no_listener++;
		reply_rst(v, lport, pport, type);
		v->st.rst_sent++;
		return;
	}
	c = conn_new(v, fd, VS_ESTABLISHED);
	if (!c) {
		close(fd);
		reply_rst(v, lport, pport, type);
		v->st.rst_sent++;
		return;
	}
	c->type = type;
	if (type == VQ_VSOCK_TYPE_SEQPACKET)
		seq_fit_window(c);
	c->lport = lport;
	c->pport = pport;
	/* Optimistic: the first write says EAGAIN if it must. */
	c->host_writable = true;
	hash_add(v, c);
	v->st.conns_opened++;
	c->pend |= P_RESPONSE;
	update_peer_credit(v, c, h);
	rx_add(v, c);
}

static void tx_packet(struct vq_vsock *v, const struct vq_chain *ch)
{
	struct vq_vsock_hdr h;
	struct vs_conn *c;
	uint32_t len, lport, pport, flags;
	uint16_t type, op;

	if (ch->out_len < VQ_VSOCK_HDR_SIZE) {
		v->st.bad_short_buf++;
		return;
	}
	vq_iov_to_buf(ch->iov, ch->nout, 0, &h, sizeof(h));
	len = vq_le32(h.len);
	type = vq_le16(h.type);
	op = vq_le16(h.op);
	lport = vq_le32(h.dst_port);
	pport = vq_le32(h.src_port);
	flags = vq_le32(h.flags);
	if (vq_le64(h.src_cid) != v->cfg.guest_cid ||
	    vq_le64(h.dst_cid) != VQ_VSOCK_CID_HOST) {
		/* Not for us, or spoofed: no reply (Linux drops these too). */
		v->st.bad_addr++;
		return;
	}
	v->st.tx_pkts++;
	c = conn_find(v, lport, pport);
	if (len > VQ_VSOCK_MAX_PKT || len > ch->out_len - VQ_VSOCK_HDR_SIZE) {
		/* The header lies about the payload: the stream cannot go on. */
		v->st.bad_len++;
		if (c)
			conn_close(v, c, true);
		return;
	}
	if ((type != VQ_VSOCK_TYPE_STREAM &&
	     !(type == VQ_VSOCK_TYPE_SEQPACKET && v->seqpacket)) ||
	    (c && c->type != type)) {
		/* 5.10.6: an unknown type gets RST; so does a packet whose
		 * type is not its connection's (which goes on). */
		v->st.bad_type++;
		if (op != VQ_VSOCK_OP_RST) {
			reply_rst(v, lport, pport, type);
			v->st.rst_sent++;
		}
		return;
	}
	if (op == VQ_VSOCK_OP_RST) {
		v->st.rst_recv++;
		if (c)
			conn_close(v, c, false);
		return;
	}
	if (op == VQ_VSOCK_OP_REQUEST) {
		if (c) {
			/* A second REQUEST for a live pair: reset both. */
			v->st.bad_op++;
			conn_close(v, c, true);
			return;
		}
		tx_request(v, &h, lport, pport, type);
		return;
	}
	if (!c) {
		/* Nothing open on these ports (5.10.6.6: reply with RST). */
		if (op < VQ_VSOCK_OP_REQUEST || op > VQ_VSOCK_OP_CREDIT_REQUEST)
			v->st.bad_op++;
		reply_rst(v, lport, pport, type);
		v->st.rst_sent++;
		return;
	}
	update_peer_credit(v, c, &h);
	switch (op) {
	case VQ_VSOCK_OP_RESPONSE:
		if (c->state != VS_CONNECTING) {
			v->st.bad_op++;
			conn_close(v, c, true);
			return;
		}
		c->state = VS_ESTABLISHED;
		c->host_writable = true;
		v->st.conns_opened++;
		{
			char ok[VS_OK_MAX];
			int k = snprintf(ok, sizeof(ok), "OK %u\n", c->lport);
			struct iovec io = { ok, (size_t)k };

			/* seqpacket: the line is a message of its own */
			if (c->type == VQ_VSOCK_TYPE_SEQPACKET) {
				if (seq_queue(v, c, &io, 1, (uint32_t)k, true) < 0)
					return;
			} else if (obuf_put_iov(c, &io, 1, (size_t)k) < 0) {
				conn_close(v, c, true);
				return;
			}
			c->oextra = (uint32_t)k;
		}
		if (obuf_drain(v, c) < 0)
			return;
		if (has_rx_work(c))
			rx_add(v, c);
		return;
	case VQ_VSOCK_OP_SHUTDOWN:
		c->guest_shut |= flags & (VQ_VSOCK_SHUTDOWN_RCV |
					  VQ_VSOCK_SHUTDOWN_SEND);
		if (c->state == VS_ESTABLISHED)
			conn_check_done(v, c);
		return;
	case VQ_VSOCK_OP_RW:
		tx_rw(v, c, ch, len, flags);
		return;
	case VQ_VSOCK_OP_CREDIT_UPDATE:
		return;                 /* the credit was taken above */
	case VQ_VSOCK_OP_CREDIT_REQUEST:
		v->st.credit_requests_recv++;
		c->pend |= P_CREDIT_UPDATE;
		rx_add(v, c);
		return;
	default:
		v->st.bad_op++;
		conn_close(v, c, true);
		return;
	}
}

static int process_tx(struct vq_vsock *v, unsigned budget)
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
		for (i = 0; i < (unsigned)n; i++) {
			tx_packet(v, &v->txc[i]);
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

/* ---- RX: packets to the guest ---- */

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
		if (v->rxc.nout == 0 && v->rxc.in_len > VQ_VSOCK_HDR_SIZE)
			return 1;
		/* Readable parts, or no room past a header: give it back
		 * empty (vhost: "Buffer len too small") and try the next. */
		v->st.bad_rx_buf++;
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
	conn_check_done(v, c);
}

/* A seqpacket RW of k bytes already in the chain, the message's last with
 * eom.  1, or -EIO. */
static int rx_seq_put(struct vq_vsock *v, struct vs_conn *c, uint32_t k, bool eom)
{
	struct vq_vsock_hdr h;

	hdr_init(v, &h, c->lport, c->pport, c->type, VQ_VSOCK_OP_RW);
	hdr_credit(c, &h);
	h.len = vq_le32(k);
	h.flags = vq_le32(eom ? VQ_VSOCK_SEQ_EOM : 0);
	c->tx_cnt += k;
	return rx_put_hdr(v, &h, k) < 0 ? -EIO : 1;
}

/*
 * Seqpacket: the next piece of the host's current message for c into the
 * chain in v->rxc, the last with SEQ_EOM.  A message that fits the buffer
 * and the credit is read straight into it; a longer one is read whole
 * into c->ibuf first (a seqpacket read takes a message or nothing).
 * Returns 1 if the chain was used, 0 if not (c may be closed), -EIO.
 */
static int rx_seq(struct vq_vsock *v, struct vs_conn *c)
{
	uint32_t room = (uint32_t)(v->rxc.in_len - VQ_VSOCK_HDR_SIZE);
	uint32_t credit = peer_credit(c), k;
	ssize_t r;

	if (room > VQ_VSOCK_MAX_PKT)
		room = VQ_VSOCK_MAX_PKT;
	if (!c->ibuf) {
		ssize_t len;

		do
			len = recv(c->fd, NULL, 0, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
		while (len < 0 && errno == EINTR);
		if (len < 0) {
			if (is_fatal_sock_err(errno))
				conn_close(v, c, true);
			else
				c->host_readable = false;
			return 0;
		}
		if (len == 0 && host_hung_up(c->fd)) {
			mark_host_eof(v, c);
			return 0;
		}
		if ((uint64_t)len > c->peer_buf_alloc || len > VS_SEQ_MSG_MAX) {
			/* The guest takes a message only whole, within its
			 * buffer: this one could never arrive. */
			v->st.host_msg_too_big++;
			conn_close(v, c, true);
			return 0;
		}
		if ((uint32_t)len <= room && (uint32_t)len <= credit) {
			unsigned n = iov_slice(v->rxc.iov, v->rxc.nin, VQ_VSOCK_HDR_SIZE,
					       (size_t)len, v->slice, VS_IOV_MAX);
			struct msghdr m = { .msg_iov = v->slice, .msg_iovlen = len ? n : 0 };

			do
				r = recvmsg(c->fd, &m, MSG_DONTWAIT);
			while (r < 0 && errno == EINTR);
			if (r != len) {
				conn_close(v, c, true);
				return 0;
			}
			return rx_seq_put(v, c, (uint32_t)len, true);
		}
		if (v->ibuf_bytes && v->ibuf_bytes + (uint64_t)len > v->cfg.msg_budget) {
			/* it waits in its socket (its sender feels that)
			 * until a held message is delivered; alone, any
			 * message may be held */
			c->host_readable = false;
			if (!c->ibuf_wait) {
				c->ibuf_wait = true;
				v->ibuf_waiters++;
				v->st.host_msg_deferred++;
			}
			return 0;
		}
		c->ibuf = malloc(len ? (size_t)len : 1);
		if (!c->ibuf) {
			conn_close(v, c, true);
			return 0;
		}
		v->ibuf_bytes += (uint64_t)len;
		do
			r = recv(c->fd, c->ibuf, (size_t)len, MSG_DONTWAIT);
		while (r < 0 && errno == EINTR);
		c->ilen = (uint32_t)len;
		c->ioff = 0;
		if (r != len) {
			conn_close(v, c, true);
			return 0;
		}
	}
	k = c->ilen - c->ioff;
	if (k > room)
		k = room;
	if (k > credit)
		k = credit;
	if (!k)
		return 0;
	vq_iov_from_buf(v->rxc.iov, v->rxc.nin, VQ_VSOCK_HDR_SIZE, c->ibuf + c->ioff, k);
	c->ioff += k;
	if (c->ioff < c->ilen)
		return rx_seq_put(v, c, k, false);
	ibuf_release(v, c);
	return rx_seq_put(v, c, k, true);
}

/*
 * One packet for c into the chain in v->rxc.  Returns 1 if the chain was
 * used, 0 if c had nothing after all (chain kept), -errno.
 */
static int rx_conn(struct vq_vsock *v, struct vs_conn *c)
{
	struct vq_vsock_hdr h;
	uint16_t op = 0;

	if (c->pend & P_REQUEST) {
		c->pend &= ~P_REQUEST;
		op = VQ_VSOCK_OP_REQUEST;
	} else if (c->pend & P_RESPONSE) {
		c->pend &= ~P_RESPONSE;
		op = VQ_VSOCK_OP_RESPONSE;
	} else if (data_ready(c) && c->type == VQ_VSOCK_TYPE_SEQPACKET) {
		int r = rx_seq(v, c);

		if (r)
			return r;
		if (c->dead)
			return 0;
	} else if (data_ready(c)) {
		uint32_t room = (uint32_t)(v->rxc.in_len - VQ_VSOCK_HDR_SIZE);
		uint32_t credit = peer_credit(c);
		unsigned n;
		ssize_t r;

		if (room > credit)
			room = credit;
		if (room > VQ_VSOCK_MAX_PKT)
			room = VQ_VSOCK_MAX_PKT;
		if (room == 0) {
			/* A buffer with room for a header only: use it for
			 * control, else return it empty. */
			goto ctrl;
		}
		n = iov_slice(v->rxc.iov, v->rxc.nin, VQ_VSOCK_HDR_SIZE, room,
			      v->slice, VS_IOV_MAX);
		do
			r = readv(c->fd, v->slice, (int)n);
		while (r < 0 && errno == EINTR);
		if (r > 0) {
			hdr_init(v, &h, c->lport, c->pport, c->type, VQ_VSOCK_OP_RW);
			hdr_credit(c, &h);
			h.len = vq_le32((uint32_t)r);
			c->tx_cnt += (uint32_t)r;
			/* A short read drained the socket: new data brings a
			 * new edge.  Not so an EOF already signalled: keep
			 * reading until it shows. */
			if ((size_t)r < room && !c->host_rdhup)
				c->host_readable = false;
			return rx_put_hdr(v, &h, (uint32_t)r) < 0 ? -EIO : 1;
		}
		if (r < 0 && !is_fatal_sock_err(errno)) {
			c->host_readable = false;
			goto ctrl;
		}
		if (r < 0) {
			conn_close(v, c, true);
			return 0;
		}
		/* EOF: the host will send no more. */
		mark_host_eof(v, c);
		if (c->dead)
			return 0;
	}
ctrl:
	if (!op && (c->pend & P_CREDIT_UPDATE))
		op = VQ_VSOCK_OP_CREDIT_UPDATE;
	else if (!op && (c->pend & P_SHUTDOWN)) {
		c->pend &= ~P_SHUTDOWN;
		op = VQ_VSOCK_OP_SHUTDOWN;
	}
	if (!op)
		return 0;
	hdr_init(v, &h, c->lport, c->pport, c->type, op);
	hdr_credit(c, &h);
	if (op == VQ_VSOCK_OP_SHUTDOWN)
		h.flags = vq_le32(c->shut_flags);
	if (op == VQ_VSOCK_OP_CREDIT_UPDATE)
		v->st.credit_updates_sent++;
	return rx_put_hdr(v, &h, 0) < 0 ? -EIO : 1;
}

static int process_rx(struct vq_vsock *v, unsigned budget)
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
			while ((c = v->rx_head) && !has_rx_work(c))
				rx_del(v, c);
			if (!c)
				break;
		}
		r = rx_get(v);
		if (r <= 0)
			break;
		if (v->reply_len) {
			struct vq_vsock_hdr h;
			struct vs_reply *rp = &v->replies[v->reply_head];

			hdr_init(v, &h, rp->lport, rp->pport, rp->type,
				 VQ_VSOCK_OP_RST);
			v->reply_head = (v->reply_head + 1) % v->reply_cap;
			v->reply_len--;
			r = rx_put_hdr(v, &h, 0);
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
			rx_del(v, c);
			if (has_rx_work(c))
				rx_add(v, c);
		}
		r = 0;
	}
	if (v->rx_spare) {
		/* Popped but nothing to put in it: the next pop sees it. */
		int u = vq_dev_unpop(v->rx, &v->rxc, 1);

		v->rx_spare = false;
		if (u < 0 && r >= 0)
			r = u;
	}
	{
		int f = rx_flush(v);

		if (f < 0 && r >= 0)
			r = f;
	}
	if (r < 0)
		return vq_dev_error(v->rx) ? vq_dev_error(v->rx) : r;
	return (int)done;
}

int vq_vsock_process_tx(struct vq_vsock *v, unsigned budget)
{
	int r = process_tx(v, budget);

	reap(v);
	return r;
}

int vq_vsock_process_rx(struct vq_vsock *v, unsigned budget)
{
	int r = process_rx(v, budget);

	reap(v);
	return r;
}

/* ---- event queue ---- */

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
		if (c.nout || c.in_len < sizeof(e)) {
			v->st.bad_rx_buf++;
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
