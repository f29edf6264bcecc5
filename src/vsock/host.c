// SPDX-License-Identifier: MIT
/*
 * Host sockets: the listeners, the hybrid-vsock CONNECT handshake of a
 * host-initiated connection, epoll events, and the host-bound buffer
 * (obuf: what the guest sent that the host socket has not taken yet).
 *
 * Host sockets are in one epoll set, edge-triggered: the device remembers
 * "readable"/"writable" until a syscall says EAGAIN, so a connection whose
 * guest has no credit does not make the caller spin.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vsock_internal.h"

static uint32_t obuf_cap(const struct vs_conn *c)
{
	return c->buf_alloc + VS_OK_MAX;
}

/* Append to the host-bound buffer (the caller checked the room). */
int vs_obuf_put_iov(struct vs_conn *c, const struct iovec *iov, unsigned n,
		    size_t len)
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
void vs_host_wrote(struct vs_conn *c, uint32_t n)
{
	uint32_t extra = n < c->oextra ? n : c->oextra;

	c->oextra -= extra;
	c->fwd_cnt += n - extra;
}

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

static void obuf_consumed(struct vs_conn *c, uint32_t n)
{
	c->ohead = (c->ohead + n) % obuf_cap(c);
	c->olen -= n;
	vs_host_wrote(c, n);
}

/* Seqpacket: send the whole messages at the head of obuf, one sendmsg
 * each (all or nothing on a SOCK_SEQPACKET socket). */
static enum vs_fate obuf_drain_msgs(struct vq_vsock *v, struct vs_conn *c)
{
	while (c->mq_len && c->host_writable) {
		uint32_t m = c->mq[c->mq_head];
		struct iovec io[2];
		unsigned n = obuf_head_iov(c, m, io);
		ssize_t r = vs_io_writev(c, io, m ? n : 0);

		v->st.host_write_calls++;
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && !vs_is_fatal_sock_err(errno)) {
			c->host_writable = false;
			v->st.host_stalls++;
			break;
		}
		if (r != (ssize_t)m) {
			vs_conn_close(v, c, true);
			return VS_CLOSED;
		}
		obuf_consumed(c, m);
		c->mq_head = (c->mq_head + 1) % c->mq_cap;
		c->mq_len--;
	}
	return VS_OPEN;
}

/* Stream: write buffered bytes while the socket takes them. */
static enum vs_fate obuf_drain_stream(struct vq_vsock *v, struct vs_conn *c)
{
	while (c->olen && c->host_writable) {
		struct iovec io[2];
		unsigned n = obuf_head_iov(c, c->olen, io);
		ssize_t r = vs_io_writev(c, io, n);

		v->st.host_write_calls++;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (!vs_is_fatal_sock_err(errno)) {
				c->host_writable = false;
				v->st.host_stalls++;
				break;
			}
			vs_conn_close(v, c, true);
			return VS_CLOSED;
		}
		obuf_consumed(c, (uint32_t)r);
	}
	return VS_OPEN;
}

/* Write buffered bytes to the host socket, then see whether the guest
 * should hear of the credit and whether the connection is done. */
enum vs_fate vs_obuf_drain(struct vq_vsock *v, struct vs_conn *c)
{
	enum vs_fate f = c->type == VQ_VSOCK_TYPE_SEQPACKET ?
			 obuf_drain_msgs(v, c) : obuf_drain_stream(v, c);

	if (f == VS_CLOSED)
		return VS_CLOSED;
	if (c->olen == 0 && c->obuf) {
		free(c->obuf);
		c->obuf = NULL;
		c->ohead = 0;
	}
	vs_maybe_credit_update(v, c);
	vs_conn_check_done(v, c);
	return c->dead ? VS_CLOSED : VS_OPEN;
}

/*
 * A seqpacket host socket takes a message only if it fits its send buffer
 * (AF_UNIX: sk_sndbuf - 32, else EMSGSIZE), and a Linux guest sends no
 * message larger than the buf_alloc we advertise: ask for room for a whole
 * window and advertise no more than we got.
 */
void vs_seq_fit_window(struct vs_conn *c)
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
	for (l = v->lst; l < v->lst + VS_LISTENERS && l->fd >= 0; l++)
		;
	if (l == v->lst + VS_LISTENERS)
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
	c = vs_conn_new(v, fd, VS_HANDSHAKE);
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->type = type;
	if (type == VQ_VSOCK_TYPE_SEQPACKET)
		vs_seq_fit_window(c);
	v->nhandshake++;
	return 0;
}

static bool line_space(char ch)
{
	return ch == ' ' || (ch >= '\t' && ch <= '\r');
}

/* As Firecracker's, Cloud Hypervisor's and vhost-device-vsock's muxers read
 * it, so a host program written for them works unchanged: words split on
 * white space, the first "connect" in any case, the second the port as a
 * u32 (an optional '+', decimal), any further words ignored. */
int vq_vsock_parse_connect(const char *line, uint32_t *port)
{
	uint64_t p = 0;
	const char *s = line;

	while (line_space(*s))
		s++;
	if (strncasecmp(s, "connect", 7) || !line_space(s[7]))
		return -EINVAL;
	for (s += 7; line_space(*s); s++)
		;
	if (*s == '+')
		s++;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		p = p * 10 + (uint64_t)(*s - '0');
		if (p > 0xffffffffull)
			return -EINVAL;
	}
	if (*s && !line_space(*s))
		return -EINVAL;
	*port = (uint32_t)p;
	return 0;
}

static uint32_t alloc_port(struct vq_vsock *v, uint32_t pport)
{
	uint32_t tries;

	for (tries = 0; tries < 1u << 16; tries++) {
		uint32_t p = v->next_port++;

		if (v->next_port > VS_PORT_LAST)
			v->next_port = VS_PORT_FIRST;
		if (!vs_conn_find(v, VQ_VSOCK_CID_HOST, p, pport))
			return p;
	}
	return 0;
}

/* The CONNECT line is in c->line (c->linelen bytes, no LF): REQUEST the
 * guest's port. */
static enum vs_fate handshake_done(struct vq_vsock *v, struct vs_conn *c)
{
	uint32_t port, lport;

	c->line[c->linelen] = '\0';
	if (vq_vsock_parse_connect(c->line, &port) < 0) {
		v->st.bad_connect_line++;
		vs_conn_close(v, c, false);
		return VS_CLOSED;
	}
	if (v->cfg.host_request && v->cfg.host_request(v->cfg.arg, port, c->type) < 0) {
		v->st.policy_refused++;
		vs_conn_close(v, c, false);
		return VS_CLOSED;
	}
	if (!v->rx || v->nconns >= v->cfg.max_conns ||
	    (c->type == VQ_VSOCK_TYPE_SEQPACKET && !v->seqpacket) ||
	    !(lport = alloc_port(v, port))) {
		/* No guest to talk to, one without seqpacket, or too many
		 * connections. */
		v->st.conn_limit += v->rx && v->nconns >= v->cfg.max_conns;
		vs_conn_close(v, c, false);
		return VS_CLOSED;
	}
	v->nhandshake--;
	c->state = VS_CONNECTING;
	c->lport = lport;
	c->pport = port;
	vs_hash_add(v, c);
	/* Bytes behind the line are the connection's: read them once the
	 * guest accepted. */
	c->host_readable = true;
	c->pend |= P_REQUEST;
	vs_rx_add(v, c);
	return VS_OPEN;
}

/* The CONNECT line, one byte per read so the payload behind it stays in the
 * socket. */
static enum vs_fate handshake_read(struct vq_vsock *v, struct vs_conn *c)
{
	for (;;) {
		char ch;
		ssize_t r = read(c->fd, &ch, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && !vs_is_fatal_sock_err(errno))
			return VS_OPEN;
		if (r <= 0) {
			/* EOF or error before a whole line: the host gave up. */
			if (c->linelen)
				v->st.bad_connect_line++;
			vs_conn_close(v, c, false);
			return VS_CLOSED;
		}
		if (ch == '\n')
			return handshake_done(v, c);
		if (c->linelen >= VS_LINE_MAX) {
			v->st.bad_connect_line++;
			vs_conn_close(v, c, false);
			return VS_CLOSED;
		}
		c->line[c->linelen++] = ch;
	}
}

/* Seqpacket: the CONNECT line is the first message (its LF optional). */
static enum vs_fate handshake_read_msg(struct vq_vsock *v, struct vs_conn *c)
{
	ssize_t r;

	do
		r = recv(c->fd, c->line, VS_LINE_MAX + 1, MSG_TRUNC | MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	if (r < 0 && !vs_is_fatal_sock_err(errno))
		return VS_OPEN;
	if (r > 0 && c->line[r <= VS_LINE_MAX ? r - 1 : VS_LINE_MAX] == '\n')
		r--;
	if (r <= 0 || r > VS_LINE_MAX || memchr(c->line, '\n', (size_t)r)) {
		/* EOF, an error, no line fits (MSG_TRUNC gave the length), or
		 * the message holds more than one line */
		if (r != 0)
			v->st.bad_connect_line++;
		vs_conn_close(v, c, false);
		return VS_CLOSED;
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

void vs_conn_event(struct vq_vsock *v, struct vs_conn *c, uint32_t events)
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
	if (c->olen && c->host_writable && vs_obuf_drain(v, c) == VS_CLOSED)
		return;
	vs_pkts_check(v, c);
	if (vs_has_rx_work(c))
		vs_rx_add(v, c);
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
		if (*k == VS_EP_INBOX) {
			vs_link_news(v);
			continue;
		}
		if (((struct vs_conn *)k)->dead)
			continue;
		vs_conn_event(v, (struct vs_conn *)k, ev[i].events);
	}
	vs_reap(v);
	return n;
}
