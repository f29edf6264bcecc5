// SPDX-License-Identifier: MIT
/*
 * The hostile front-end: raw vhost-user messages encoded and decoded by
 * our codec, guest memory it can take away, rings it drives itself (our
 * ring layer's driver side), and notification fds of any kind.  Every
 * read is bounded (SO_RCVTIMEO): a daemon that stops answering is a
 * finding (stalled), never a hung test.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <virtq/vsock.h>

#include "hostile.h"
#include "vhost_user/vhu_internal.h"

#define P(x) VQ_BIT(VQ_VHU_PROTOCOL_F_##x)

/* Guest memory (guest-physical 0, at our own address as the front-end's
 * user address): three rings of NUM entries, then the buffers. */
#define NUM	    64u
#define RING_OFF(i) ((uint64_t)(i)*0x2000)
#define NET_RXB	    0x10000u /* NUM buffers of 2048 */
#define NET_TXB	    0x30000u /* NUM frames of 128 */
#define NET_N	    8u	     /* frames per traffic round */
#define VS_RX	    0x40000u
#define VS_TX	    0x90000u
#define VS_EV	    0xa0000u

static const uint64_t RING_F = VQ_BIT(VQ_F_VERSION_1);

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* The first failure is the one that says what happened. */
static void hfe_lost(struct hfe *h, bool stalled, const char *fmt, ...)
{
	va_list ap;

	if (hfe_ok(h)) {
		va_start(ap, fmt);
		vsnprintf(h->why, sizeof(h->why), fmt, ap);
		va_end(ap);
	}
	if (stalled)
		h->stalled = true;
	else
		h->closed = true;
}

bool hfe_ok(const struct hfe *h)
{
	return !h->closed && !h->stalled;
}

int hfe_own(struct hfe *h, int fd)
{
	if (fd >= 0 && h->nown < sizeof(h->own) / sizeof(h->own[0]))
		h->own[h->nown++] = fd;
	return fd;
}

void hfe_drop(struct hfe *h, int fd)
{
	for (unsigned i = 0; i < h->nown; i++)
		if (h->own[i] == fd) {
			close(fd);
			h->own[i] = h->own[--h->nown];
			return;
		}
}

void hfe_init(struct hfe *h, const struct daemon *d)
{
	memset(h, 0, sizeof(*h));
	h->d = d;
	h->nq = d->kind == K_NET ? 2 : 3;
	h->s = -1;
	for (unsigned i = 0; i < HQ_MAX; i++)
		h->q[i] = (struct hq){ .kick = -1,
				       .call = -1,
				       .err = -1,
				       .kick_wr = -1,
				       .err_rd = -1 };
	h->memfd = memfd_create("hostile-guest", MFD_CLOEXEC);
	if (h->memfd < 0 || ftruncate(h->memfd, GUEST_SIZE) < 0)
		hfe_lost(h, false, "the test's memfd: %s", strerror(errno));
	h->mem = mmap(NULL, GUEST_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
		      h->memfd, 0);
	if (h->mem == MAP_FAILED) {
		h->mem = NULL;
		hfe_lost(h, false, "the test's mmap: %s", strerror(errno));
	}
}

void hfe_close(struct hfe *h)
{
	vq_vsg_free(h->g);
	for (unsigned i = 0; i < HQ_MAX; i++)
		vq_drv_free(h->q[i].drv);
	if (h->s >= 0)
		close(h->s);
	for (unsigned i = 0; i < h->nown; i++)
		close(h->own[i]);
	if (h->mem)
		munmap(h->mem, GUEST_SIZE);
	if (h->memfd >= 0)
		close(h->memfd);
	h->s = h->memfd = -1;
	h->mem = NULL;
	h->g = NULL;
	h->nown = 0;
}

static void set_timeout(struct hfe *h, int ms)
{
	struct timeval tv = { .tv_sec = ms / 1000,
			      .tv_usec = (ms % 1000) * 1000 };

	h->tmo_ms = ms;
	setsockopt(h->s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(h->s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static const char *req_name(uint32_t req)
{
	const char *n = vq_vhu_request_name(req);

	return n ? n : "a request";
}

/* A reply to req (a REPLY_ACK if ack) into rep, within the timeout. */
static void read_reply(struct hfe *h, uint32_t req, bool ack,
		       struct vq_vhu_msg *rep)
{
	struct {
		uint8_t buf[VQ_VHU_MSG_MAX];
		int fds[VQ_VHU_MAX_FDS];
		unsigned nfds;
		size_t len;
	} in;
	char err[160];
	int r;

	memset(rep, 0, sizeof(*rep));
	r = vhu_recv(h->s, false, false, (unsigned)h->tmo_ms, in.buf, &in.len,
		     in.fds, &in.nfds);

	if (r == -EAGAIN || r == -ETIMEDOUT) {
		hfe_lost(h, true,
			 "no reply to %s within %d ms: the daemon hangs",
			 req_name(req), h->tmo_ms);
		return;
	}
	if (r < 0) {
		hfe_lost(h, false,
			 "the daemon closed the connection at %s (%s)",
			 req_name(req), strerror(-r));
		return;
	}
	r = vq_vhu_decode_reply(in.buf, in.len, in.fds, in.nfds, req, ack, rep,
				err, sizeof(err));
	if (r)
		hfe_lost(h, false, "a bad reply to %s: %s", req_name(req), err);
}

void hfe_req(struct hfe *h, struct vq_vhu_msg *m, const int *fds, unsigned nfds,
	     struct vq_vhu_msg *rep)
{
	struct vq_vhu_msg tmp = { .nfds = 0 };
	bool reply = rep || vq_vhu_request_has_reply(m->request);
	/* QEMU's postcopy ack has no reply of any kind */
	bool ack = !reply && (h->protocol & P(REPLY_ACK)) &&
		   m->kind != VQ_VHU_P_POSTCOPY_ACK;
	int r;

	if (rep)
		memset(rep, 0, sizeof(*rep));
	if (!hfe_ok(h))
		return;
	m->flags = VQ_VHU_VERSION | (ack ? VQ_VHU_FLAG_NEED_REPLY : 0);
	r = vhu_send(h->s, m, fds, nfds, (unsigned)h->tmo_ms);
	if (r) {
		hfe_lost(h, r == -EAGAIN || r == -ETIMEDOUT, "sending %s: %s%s",
			 req_name(m->request), strerror(-r),
			 r == -EAGAIN || r == -ETIMEDOUT ? " (the daemon reads nothing)" : "");
		return;
	}
	if (!reply && !ack)
		return;
	read_reply(h, m->request, ack, rep ? rep : &tmp);
	if (!rep)
		vq_vhu_msg_close_fds(&tmp);
	if (ack && hfe_ok(h) && tmp.u.u64) {
		h->refused = true;
		snprintf(h->note, sizeof(h->note),
			 "the daemon refused %s (REPLY_ACK %llu)",
			 req_name(m->request), (unsigned long long)tmp.u.u64);
	}
}

struct vq_vhu_msg hfe_msg(uint32_t req, enum vq_vhu_payload kind)
{
	struct vq_vhu_msg m;

	memset(&m, 0, sizeof(m));
	m.request = req;
	m.kind = kind;
	return m;
}

void hfe_u64(struct hfe *h, uint32_t req, uint64_t v)
{
	struct vq_vhu_msg m = hfe_msg(req, VQ_VHU_P_U64);

	m.u.u64 = v;
	hfe_req(h, &m, NULL, 0, NULL);
}

static uint64_t get_u64(struct hfe *h, uint32_t req)
{
	struct vq_vhu_msg m = hfe_msg(req, VQ_VHU_P_NONE), rep;

	hfe_req(h, &m, NULL, 0, &rep);
	return hfe_ok(h) ? rep.u.u64 : 0;
}

void hfe_open(struct hfe *h, uint64_t proto_want, uint64_t extra)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct vq_vhu_msg m;

	if (!hfe_ok(h))
		return;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", h->d->sock);
	h->s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (h->s < 0 || connect(h->s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		hfe_lost(h, false, "cannot connect: %s", strerror(errno));
		return;
	}
	set_timeout(h, REPLY_MS);
	m = hfe_msg(VQ_VHU_SET_OWNER, VQ_VHU_P_NONE);
	hfe_req(h, &m, NULL, 0, NULL);
	h->offered = get_u64(h, VQ_VHU_GET_FEATURES);
	h->proto_offered = get_u64(h, VQ_VHU_GET_PROTOCOL_FEATURES);
	hfe_u64(h, VQ_VHU_SET_PROTOCOL_FEATURES, proto_want & h->proto_offered);
	h->protocol = proto_want & h->proto_offered;
	h->features = (VQ_BIT(VQ_F_VERSION_1) |
		       VQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES) | extra) &
		      h->offered;
	hfe_u64(h, VQ_VHU_SET_FEATURES, h->features);
}

static struct vq_vhu_region region(const struct hfe *h)
{
	return (struct vq_vhu_region){ .gpa = 0,
				       .size = GUEST_SIZE,
				       .uaddr = (uintptr_t)h->mem };
}

void hfe_mem_table(struct hfe *h, struct vq_vhu_msg *rep)
{
	struct vq_vhu_msg m = hfe_msg(VQ_VHU_SET_MEM_TABLE, VQ_VHU_P_MEM);

	m.u.mem.nregions = 1;
	m.u.mem.regions[0] = region(h);
	hfe_req(h, &m, &h->memfd, 1, rep);
}

void hfe_add_mem_reg(struct hfe *h)
{
	struct vq_vhu_msg m = hfe_msg(VQ_VHU_ADD_MEM_REG, VQ_VHU_P_REGION);

	m.u.region = region(h);
	hfe_req(h, &m, &h->memfd, 1, NULL);
}

void hfe_truncate_mem(struct hfe *h)
{
	/* our own mapping goes bad too: nothing here touches it again */
	h->mem_gone = true;
	if (ftruncate(h->memfd, 0) < 0)
		snprintf(h->note, sizeof(h->note), "ftruncate: %s",
			 strerror(errno));
}

static void vring_fd(struct hfe *h, uint32_t req, unsigned i, int fd)
{
	struct vq_vhu_msg m = hfe_msg(req, VQ_VHU_P_VRING_FD);

	m.u.vring_fd.index = i;
	hfe_req(h, &m, &fd, 1, NULL);
}

static void state(struct hfe *h, uint32_t req, unsigned i, uint32_t num)
{
	struct vq_vhu_msg m = hfe_msg(req, VQ_VHU_P_STATE);

	m.u.state.index = i;
	m.u.state.num = num;
	hfe_req(h, &m, NULL, 0, NULL);
}

/* SET_VRING_ADDR for ring i at its place, with the used ring logged at
 * its guest-physical address if log. */
static void vring_addr(struct hfe *h, unsigned i, bool log)
{
	struct vq_vhu_msg m = hfe_msg(VQ_VHU_SET_VRING_ADDR, VQ_VHU_P_ADDR);
	uint64_t off[3], base = h->iova ? h->iova : (uintptr_t)h->mem;

	vq_ring_layout(RING_F, NUM, off);
	m.u.addr.index = i;
	m.u.addr.desc = base + RING_OFF(i) + off[0];
	m.u.addr.avail = base + RING_OFF(i) + off[1];
	m.u.addr.used = base + RING_OFF(i) + off[2];
	m.u.addr.flags = log ? VQ_VHU_VRING_F_LOG : 0;
	m.u.addr.log = RING_OFF(i) + off[2];
	hfe_req(h, &m, NULL, 0, NULL);
}

static int new_eventfd(struct hfe *h)
{
	return hfe_own(h, eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
}

static void driver_new(struct hfe *h, unsigned i)
{
	uint64_t off[3];
	uint8_t *r = h->mem + RING_OFF(i);
	struct vq_drv_config c = { .features = RING_F, .num = NUM };

	vq_ring_layout(RING_F, NUM, off);
	c.ring = (struct vq_ring_addr){ r + off[0], r + off[1], r + off[2] };
	if (vq_drv_new(&c, &h->q[i].drv))
		snprintf(h->note, sizeof(h->note),
			 "ring %u: our driver side failed", i);
}

void hfe_rings(struct hfe *h, bool drivers)
{
	for (unsigned i = 0; i < h->nq; i++) {
		struct hq *q = &h->q[i];

		if (drivers && !h->mem_gone && !q->drv)
			driver_new(h, i);
		if (q->call < 0)
			q->call = new_eventfd(h);
		if (q->kick < 0)
			q->kick = q->kick_wr = new_eventfd(h);
		if (q->err < 0)
			q->err = q->err_rd = new_eventfd(h);
		vring_fd(h, VQ_VHU_SET_VRING_CALL, i, q->call);
		vring_fd(h, VQ_VHU_SET_VRING_ERR, i, q->err);
		state(h, VQ_VHU_SET_VRING_NUM, i, NUM);
		state(h, VQ_VHU_SET_VRING_BASE, i, 0);
		vring_addr(h, i, false);
		vring_fd(h, VQ_VHU_SET_VRING_KICK, i, q->kick);
		state(h, VQ_VHU_SET_VRING_ENABLE, i, 1);
	}
}

void hfe_logging_on(struct hfe *h, int *logfd)
{
	struct vq_vhu_msg m = hfe_msg(VQ_VHU_SET_LOG_BASE, VQ_VHU_P_LOG), rep;
	int fd = hfe_own(h, memfd_create("hostile-log", MFD_CLOEXEC));

	*logfd = fd;
	/* one bit per 4 KiB page: a page of log covers 128 MiB */
	if (fd < 0 || ftruncate(fd, 4096) < 0) {
		hfe_lost(h, false, "the test's log memfd: %s", strerror(errno));
		return;
	}
	m.u.log.size = 4096;
	hfe_req(h, &m, &fd, 1, &rep);
	h->features |= VQ_BIT(VQ_VHU_F_LOG_ALL);
	hfe_u64(h, VQ_VHU_SET_FEATURES, h->features);
	for (unsigned i = 0; i < h->nq; i++)
		vring_addr(h, i, true);
}

static void kick(struct hfe *h, unsigned i)
{
	uint64_t one = 1;

	/* every writer here is non-blocking (or a counter far from full) */
	if (h->q[i].kick_wr >= 0 &&
	    write(h->q[i].kick_wr, &one, sizeof(one)) < 0)
		snprintf(h->note, sizeof(h->note), "kicking ring %u: %s", i,
			 strerror(errno));
}

void hfe_kick_all(struct hfe *h)
{
	for (unsigned i = 0; i < h->nq; i++)
		kick(h, i);
}

static void publish_kick(struct hfe *h, unsigned i)
{
	vq_drv_kick_prepare(h->q[i].drv);
	kick(h, i);
}

static void *tok(unsigned i)
{
	return (void *)(uintptr_t)(i + 1);
}

static int net_traffic(struct hfe *h)
{
	struct vq_drv *rx = h->q[0].drv, *tx = h->q[1].drv;
	unsigned nrx = 0, ntx = 0;
	uint64_t end = now_ms() + REPLY_MS;
	void *t;
	uint32_t len;

	for (unsigned i = 0; i < NET_N; i++)
		if (vq_drv_add(rx, &(struct vq_seg){ NET_RXB + i * 2048, 2048 },
			       0, 1, tok(i)))
			return -ENOSPC;
	publish_kick(h, 0);
	for (unsigned i = 0; i < NET_N; i++) {
		uint8_t *p = h->mem + NET_TXB + i * 128;

		memset(p, 0, 12);
		frame_fill(p + 12, 64, i);
		if (vq_drv_add(tx, &(struct vq_seg){ NET_TXB + i * 128, 76 }, 1,
			       0, tok(i)))
			return -ENOSPC;
	}
	publish_kick(h, 1);
	while ((nrx < NET_N || ntx < NET_N) && now_ms() < end) {
		while (vq_drv_get(rx, &t, &len) == 1)
			nrx++;
		while (vq_drv_get(tx, &t, &len) == 1)
			ntx++;
		usleep(1000);
	}
	return nrx == NET_N && ntx == NET_N ? 0 : -ETIMEDOUT;
}

static void vsg_kick(void *arg, unsigned q)
{
	kick(arg, q);
}

static int vsock_traffic(struct hfe *h)
{
	struct vq_vsg_conn *c;
	uint64_t end = now_ms() + REPLY_MS;
	int r;

	if (!h->g) {
		struct vq_drv *const q[3] = { h->q[0].drv, h->q[1].drv,
					      h->q[2].drv };
		const struct vq_vsg_area a[3] = {
			{ h->mem + VS_RX, VS_RX, VSG_RX_SIZE },
			{ h->mem + VS_TX, VS_TX, VSG_TX_SIZE },
			{ h->mem + VS_EV, VS_EV, VSG_EV_SIZE },
		};

		r = vsg_make(q, a, vsg_kick, h, &h->g);
		if (r)
			return r;
	}
	r = vq_vsg_connect(h->g, NO_LISTENER_PORT, VQ_VSOCK_TYPE_STREAM, &c);
	if (r)
		return r;
	while (vq_vsg_state(c) != VQ_VSG_CLOSED && now_ms() < end) {
		if (vq_vsg_poll(h->g) < 0)
			return -EIO;
		usleep(1000);
	}
	if (vq_vsg_state(c) != VQ_VSG_CLOSED)
		return -ETIMEDOUT;
	vq_vsg_release(c);
	return 0;
}

int hfe_traffic(struct hfe *h)
{
	int r;

	if (!hfe_ok(h) || h->mem_gone || !h->q[0].drv)
		return -EPIPE;
	r = h->d->kind == K_NET ? net_traffic(h) : vsock_traffic(h);
	if (r && !h->note[0])
		snprintf(h->note, sizeof(h->note),
			 "traffic on the case's rings: %s", strerror(-r));
	return r;
}

void hfe_expect_served(struct hfe *h)
{
	uint64_t v;

	if (!hfe_ok(h) || h->mem_gone || !h->q[0].drv || hfe_traffic(h) == 0)
		return;
	for (unsigned i = 0; i < h->nq; i++)
		if (h->q[i].err_rd >= 0 &&
		    read(h->q[i].err_rd, &v, sizeof(v)) == sizeof(v))
			return;
	snprintf(h->failed, sizeof(h->failed),
		 "the daemon kept the connection, but its "
		 "rings moved no traffic within %d ms and signalled no error fd",
		 REPLY_MS);
}

void hfe_break_ring(struct hfe *h, unsigned i)
{
	uint64_t off[3];
	uint16_t *idx;

	if (h->mem_gone || !h->q[i].drv)
		return;
	vq_ring_layout(RING_F, NUM, off);
	idx = (uint16_t *)(h->mem + RING_OFF(i) + off[1] + 2);
	__atomic_store_n(idx, vq_le16((uint16_t)(vq_le16(*idx) + NUM + 7)),
			 __ATOMIC_RELEASE);
	kick(h, i);
}

void hfe_wait_closed(struct hfe *h, int ms)
{
	struct pollfd p = { .fd = h->s, .events = POLLRDHUP };

	if (!hfe_ok(h))
		return;
	if (poll(&p, 1, ms) > 0 &&
	    (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
		hfe_lost(h, false, "the daemon closed the connection");
}

const char *hfe_probe(struct hfe *h)
{
	if (h->stalled)
		return h->why;
	if (h->closed)
		return NULL;
	set_timeout(h, PROBE_MS);
	get_u64(h, VQ_VHU_GET_FEATURES);
	return h->stalled ? h->why : NULL;
}

int eventfd_at_max(void)
{
	int fd = eventfd(0, EFD_CLOEXEC);
	uint64_t max = UINT64_MAX - 1;

	if (fd >= 0 && write(fd, &max, sizeof(max)) != sizeof(max)) {
		close(fd);
		return -1;
	}
	return fd;
}

int pipe_full(int *read_end)
{
	static const char fill[4096];
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	fcntl(p[1], F_SETPIPE_SZ, 4096);
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	while (write(p[1], fill, sizeof(fill)) > 0)
		;
	while (write(p[1], fill, 1) > 0)
		;
	/* the description the daemon gets blocks again */
	fcntl(p[1], F_SETFL, 0);
	*read_end = p[0];
	return p[1];
}

/* ---- shared with the good sessions ---- */

static const uint8_t MAC_A[6] = { 0x02, 0, 0, 0, 0, 0x0a };
static const uint8_t MAC_B[6] = { 0x02, 0, 0, 0, 0, 0x0b };

void frame_fill(uint8_t *p, unsigned size, uint32_t seq)
{
	memcpy(p, MAC_A, 6);
	memcpy(p + 6, MAC_B, 6);
	p[12] = 0x88; /* a local experimental ethertype */
	p[13] = 0xb5;
	memcpy(p + 14, &seq, 4);
	for (unsigned i = 18; i < size; i++)
		p[i] = (uint8_t)(i * 7 + seq);
}

bool frame_looped(const uint8_t *p, unsigned size, uint32_t seq)
{
	uint8_t want[2048];

	if (size > sizeof(want))
		return false;
	frame_fill(want, size, seq);
	memcpy(want, MAC_B, 6);
	memcpy(want + 6, MAC_A, 6);
	return memcmp(p, want, size) == 0;
}

int vsg_make(struct vq_drv *const q[3], const struct vq_vsg_area a[3],
	     void (*kick_fn)(void *, unsigned), void *arg, struct vq_vsg **out)
{
	struct vq_vsg_config gc = {
		.rx = q[0],
		.tx = q[1],
		.ev = q[2],
		.cid = HOSTILE_CID,
		.rx_area = a[0],
		.tx_area = a[1],
		.ev_area = a[2],
		.rx_buf_size = 4096,
		.tx_pkt_max = 4096,
		.kick = kick_fn,
		.arg = arg,
	};
	int r = vq_vsg_new(&gc, out);

	return r ? r : vq_vsg_start(*out);
}
