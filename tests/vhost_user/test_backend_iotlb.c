// SPDX-License-Identifier: MIT
/*
 * The back-end's IOTLB (vhost-user "IOMMU support"): with
 * VQ_F_ACCESS_PLATFORM rings and buffers are at IOVAs, each miss is
 * asked once on the back-end channel and waits, unpopped, for the update;
 * permissions refused, updates refused with the connection kept,
 * invalidations (of buffers and of a ring's own areas), and the feature
 * switched only while no ring runs.
 */
#include <poll.h>
#include <time.h>

#include "backend_fixture.h"

#define AP VQ_BIT(VQ_F_ACCESS_PLATFORM)
#define P_BACKEND_REQ VQ_BIT(VQ_VHU_PROTOCOL_F_BACKEND_REQ)
/* The rings' IOVAs: their guest address + RING_IOVA.  Buffers live at
 * DATA_IOVA + x, mapped page by page to scattered guest pages. */
#define RING_IOVA 0x100000000ull
#define DATA_IOVA 0x200000000ull
#define PG 0x1000ull

static void snd_iotlb(int s, uint32_t flags, uint64_t iova, uint64_t size,
		      uint64_t ua, uint8_t perm, uint8_t type)
{
	struct vq_vhu_msg m = { .request = VQ_VHU_IOTLB_MSG,
				.flags = VQ_VHU_VERSION | flags, .kind = VQ_VHU_P_IOTLB };

	m.u.iotlb.iova = iova;
	m.u.iotlb.size = size;
	m.u.iotlb.uaddr = ua;
	m.u.iotlb.perm = perm;
	m.u.iotlb.type = type;
	CHECK_EQ(vhu_send(s, &m, NULL, 0, 5000), 0);
}

/* An IOTLB update of [iova, iova+size) -> the guest address gpa (front-end
 * address UA + gpa), with NEED_REPLY: the REPLY_ACK's value. */
static uint64_t iotlb_update(struct fx *x, int s, uint64_t iova, uint64_t size,
			     uint64_t gpa, uint8_t perm)
{
	snd_iotlb(s, VQ_VHU_FLAG_NEED_REPLY, iova, size, UA + gpa, perm,
		  VQ_VHU_IOTLB_UPDATE);
	ok(x);
	return rcv(s, VQ_VHU_IOTLB_MSG, true).u.u64;
}

static void map_page(struct fx *x, int s, uint64_t iova, uint64_t gpa,
		     uint8_t perm)
{
	CHECK_EQ(iotlb_update(x, s, iova, PG, gpa, perm), 0);
}

static uint64_t iotlb_invalidate(struct fx *x, int s, uint64_t iova,
				 uint64_t size)
{
	snd_iotlb(s, VQ_VHU_FLAG_NEED_REPLY, iova, size, 0, 0, VQ_VHU_IOTLB_INVALIDATE);
	ok(x);
	return rcv(s, VQ_VHU_IOTLB_MSG, true).u.u64;
}

/* The next message on the back-end channel, which must be an IOTLB miss:
 * 1 with its address and access, or 0 when nothing is pending. */
static int next_miss(int ch, uint64_t *iova, unsigned *perm)
{
	uint8_t buf[VQ_VHU_MSG_MAX];
	int fds[VQ_VHU_MAX_FDS];
	unsigned nfds;
	size_t len;
	struct vq_vhu_msg m;
	int r = vhu_recv(ch, false, true, 5000, buf, &len, fds, &nfds);

	if (r == -EAGAIN)
		return 0;
	CHECK(r > 0);
	CHECK_EQ(vq_vhu_decode_backend_request(buf, len, fds, nfds, &m, NULL, 0), 0);
	CHECK_EQ(m.request, VQ_VHU_BACKEND_IOTLB_MSG);
	CHECK_EQ(m.u.iotlb.type, VQ_VHU_IOTLB_MISS);
	*iova = m.u.iotlb.iova;
	*perm = m.u.iotlb.perm;
	fprintf(stderr, "   miss 0x%llx access %u\n", (unsigned long long)*iova, *perm);
	return 1;
}

static void expect_miss(int ch, uint64_t iova, unsigned perm)
{
	uint64_t a = 0;
	unsigned p = 0;

	CHECK_EQ(next_miss(ch, &a, &p), 1);
	CHECK_EQ(a, iova);
	CHECK_EQ(p, perm);
}

static void expect_no_miss(int ch)
{
	uint64_t a;
	unsigned p;

	CHECK_EQ(next_miss(ch, &a, &p), 0);
}

/* The kick eventfd was signalled (the back-end kicks after an update). */
static bool kicked(int k)
{
	uint64_t v = 0;

	return read(k, &v, 8) == 8 && v > 0;
}

struct iox {
	int s;          /* front-end channel */
	int ch;         /* our end of the back-end channel */
	int bk;         /* a dup of the end we gave the back-end, or -1 */
	int k;          /* queue 0's kick (non-blocking) */
	bool pk;
	struct vq_drv *d;
};

/* VERSION_1 | ACCESS_PLATFORM (| RING_PACKED) | PROTOCOL_FEATURES,
 * REPLY_ACK | BACKEND_REQ, the back-end channel, the whole guest, queue 0
 * of 64 at IOVAs.  keep: the test keeps a dup of the channel's end it
 * gave (a front-end can, and change that socket's flags under us). */
static void iotlb_setup_keep(struct fx *x, struct iox *io, bool pk, bool keep)
{
	struct vq_vhu_region r = whole(x);
	int sv[2];

	memset(io, 0, sizeof(*io));
	io->pk = pk;
	io->bk = -1;
	io->s = cli(x);
	CHECK(get_u64(x, io->s, VQ_VHU_GET_FEATURES) & AP);
	CHECK(get_u64(x, io->s, VQ_VHU_GET_PROTOCOL_FEATURES) & P_BACKEND_REQ);
	snd_u64(io->s, VQ_VHU_SET_FEATURES, SPLIT | AP | PROTO | (pk ? PACKED : 0));
	ok(x);
	snd_u64(io->s, VQ_VHU_SET_PROTOCOL_FEATURES, P_REPLY_ACK | P_BACKEND_REQ);
	ok(x);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	snd(io->s, VQ_VHU_SET_BACKEND_REQ_FD, 0, VQ_VHU_P_NONE, NULL, &sv[1], 1);
	ok(x);
	if (keep)
		io->bk = sv[1];
	else
		close(sv[1]);
	io->ch = sv[0];
	snd_mem(io->s, 1, &r, &x->gfd);
	ok(x);
	snd_state(io->s, VQ_VHU_SET_VRING_NUM, 0, 64);
	ok(x);
}

static void iotlb_setup(struct fx *x, struct iox *io, bool pk)
{
	iotlb_setup_keep(x, io, pk, false);
}

/* The ring asked for its three areas: answer them; it runs after the
 * last one (and asks for none twice). */
static void iotlb_ring_areas_answered(struct fx *x, struct iox *io)
{
	static const uint64_t gpa[3] = { 0, 0x1000, 0x2000 };
	unsigned perm[3] = {
		io->pk ? VQ_ACCESS_RW : VQ_ACCESS_RO, VQ_ACCESS_RO,
		io->pk ? VQ_ACCESS_RW : VQ_ACCESS_WO,
	};

	for (unsigned i = 0; i < 3; i++)
		expect_miss(io->ch, RING_IOVA + gpa[i], perm[i]);
	expect_no_miss(io->ch);         /* asked once each, not again */
	CHECK(!x->e.q[0].on);
	for (unsigned i = 0; i < 3; i++) {
		map_page(x, io->s, RING_IOVA + gpa[i], gpa[i], (uint8_t)perm[i]);
		CHECK_EQ(x->e.q[0].on, i == 2);
		expect_no_miss(io->ch);
	}
}

/* The ring at RING_IOVA + (0, 0x1000, 0x2000): it starts only once the
 * IOTLB maps all three areas, and asks for each with the access it needs
 * (vhost's vq_iotlb_prefetch: split descriptors and avail read, used
 * written; packed descriptors and device area read and written). */
static void iotlb_ring_start(struct fx *x, struct iox *io)
{
	struct vq_drv_config dc = { .features = SPLIT | (io->pk ? PACKED : 0),
		.num = 64, .ring = { x->g, x->g + 0x1000, x->g + 0x2000 } };
	unsigned starts = x->e.starts;

	io->k = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	CHECK(io->k >= 0);
	snd_addr(io->s, 0, RING_IOVA, RING_IOVA + 0x1000, RING_IOVA + 0x2000);
	ok(x);
	expect_no_miss(io->ch);         /* no kick yet: nothing to start */
	snd_vring_fd(io->s, VQ_VHU_SET_VRING_KICK, 0, io->k);
	ok(x);
	snd_state(io->s, VQ_VHU_SET_VRING_ENABLE, 0, 1);
	ok(x);
	iotlb_ring_areas_answered(x, io);
	CHECK_EQ(x->e.starts, starts + 1);
	CHECK(!kicked(io->k));
	CHECK_EQ(vq_drv_new(&dc, &io->d), 0);
}

static void iotlb_teardown(struct fx *x, struct iox *io)
{
	vq_drv_free(io->d);
	close(io->s);
	close(io->k);
	close(io->ch);
	if (io->bk >= 0)
		close(io->bk);
	CHECK_EQ(pump(x), -ECONNRESET);
	CHECK(!x->e.q[0].on);
	CHECK_EQ(count_fds(), x->fds0);
	CHECK_EQ(count_maps(), x->maps0);
	memset(x->g, 0, 0x50000);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

/* Post one chain (out bytes at IOVA rd, a writable buffer at IOVA wr) and
 * let the echo device serve queue 0. */
static void post(struct fx *x, struct iox *io, uint64_t rd, uint32_t in,
		 uint64_t wr, uint32_t wlen)
{
	struct vq_seg seg[2] = { { rd, in }, { wr, wlen } };

	CHECK_EQ(vq_drv_add(io->d, seg, 1, 1, x), 0);
	vq_drv_kick_prepare(io->d);
	echo_run_queue(&x->e, 0);
}

/* The chain met a miss: it waits in the ring, unpopped, the queue is not
 * broken and looks empty until the IOTLB changes. */
static void waiting(struct fx *x, struct iox *io)
{
	struct vq_dev *vq = x->e.q[0].vq;
	void *tok;
	uint32_t len;

	CHECK(x->e.q[0].on && !x->e.q[0].dead);
	CHECK_EQ(vq_dev_error(vq), 0);
	CHECK(!vq_dev_has_avail(vq));
	CHECK(vq_dev_iotlb_quiescent(vq));
	CHECK_EQ(vq_drv_get(io->d, &tok, &len), 0);
	/* served again without an update: not asked again (once per page
	 * until answered), still waiting */
	echo_run_queue(&x->e, 0);
	expect_no_miss(io->ch);
	CHECK_EQ(vq_drv_get(io->d, &tok, &len), 0);
	CHECK_EQ(vq_dev_error(vq), 0);
}

/* An update answered the miss: the queue was kicked and has work again. */
static void answered(struct fx *x, struct iox *io)
{
	CHECK(kicked(io->k));
	CHECK(vq_dev_has_avail(x->e.q[0].vq));
	echo_run_queue(&x->e, 0);
}

static void done(struct iox *io, uint32_t want)
{
	void *tok = NULL;
	uint32_t len = 0;

	CHECK_EQ(vq_drv_get(io->d, &tok, &len), 1);
	CHECK_EQ(len, want);
	CHECK(tok != NULL);
}

/* A miss for iova with this access: the chain waits, unpopped, until the
 * page holding iova is mapped to gpa with perm; then the queue has work. */
static void miss_answered(struct fx *x, struct iox *io, uint64_t iova,
			  unsigned access, uint64_t gpa, uint8_t perm)
{
	expect_miss(io->ch, iova, access);
	waiting(x, io);
	map_page(x, io->s, iova & ~(PG - 1), gpa, perm);
	answered(x, io);
}

/* The pattern the buffers carry: byte i of the 4 KiB source. */
static void fill_src(struct fx *x, uint64_t gpa, uint32_t len, uint8_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		x->g[gpa + i] = (uint8_t)(seed + i * 7 + (i >> 8));
}

/*
 * "IOMMU support": with VQ_F_ACCESS_PLATFORM every address the back-end
 * is given is an IOVA; an IOVA it has no entry for is asked of the
 * front-end with VHOST_USER_BACKEND_IOTLB_MSG (type MISS, the access), and
 * the access waits for the IOTLB_MSG update.  Ring areas first, then each
 * page a buffer needs; nothing is lost or broken while it waits.  The out
 * buffer spans two IOVA pages that are contiguous in guest memory, the in
 * buffer two that are not (and in reverse order).
 */
static void iotlb_ring_and_buffers_through_iova(struct fx *x, bool pk)
{
	struct iox io;
	struct vq_dev *vq;
	struct vq_chain c;
	struct iovec iov[8];
	uint64_t chains;
	void *tok;
	uint32_t len;

	iotlb_setup(x, &io, pk);
	iotlb_ring_start(x, &io);
	vq = x->e.q[0].vq;
	chains = x->e.q[0].chains;
	fill_src(x, 0x10800, 0x1000, 1);

	post(x, &io, DATA_IOVA + 0x800, 0x1000, DATA_IOVA + 0x10800, 0x1000);
	miss_answered(x, &io, DATA_IOVA + 0x800, VQ_ACCESS_RO, 0x10000,
		      VQ_VHU_IOTLB_PERM_RO);
	miss_answered(x, &io, DATA_IOVA + 0x1000, VQ_ACCESS_RO, 0x11000,
		      VQ_VHU_IOTLB_PERM_RO);
	miss_answered(x, &io, DATA_IOVA + 0x10800, VQ_ACCESS_WO, 0x31000,
		      VQ_VHU_IOTLB_PERM_WO);
	miss_answered(x, &io, DATA_IOVA + 0x11000, VQ_ACCESS_WO, 0x20000,
		      VQ_VHU_IOTLB_PERM_WO);
	expect_no_miss(io.ch);
	done(&io, 0x1000);
	CHECK(!memcmp(x->g + 0x31800, x->g + 0x10800, 0x800));
	CHECK(!memcmp(x->g + 0x20000, x->g + 0x11000, 0x800));
	CHECK(x->g[0x317ff] == 0 && x->g[0x20800] == 0);
	CHECK_EQ(x->e.q[0].chains, chains + 1);

	/* the same IOVAs again: no miss; popped by hand to see the iovecs
	 * (the contiguous pages are one, the scattered ones two) */
	fill_src(x, 0x10800, 0x1000, 99);
	CHECK_EQ(vq_drv_add(io.d, (struct vq_seg[2]){ { DATA_IOVA + 0x800, 0x1000 },
		 { DATA_IOVA + 0x10800, 0x1000 } }, 1, 1, &io), 0);
	vq_drv_kick_prepare(io.d);
	c.iov = iov;
	c.iov_max = 8;
	CHECK_EQ(vq_dev_pop(vq, &c), 1);
	CHECK(!vq_dev_iotlb_quiescent(vq));     /* a chain is in our hands */
	CHECK_EQ(c.nout, 1);
	CHECK(iov[0].iov_len == 0x1000);
	CHECK_EQ(c.nin, 2);
	CHECK(iov[1].iov_len == 0x800 && iov[2].iov_len == 0x800);
	CHECK_EQ(vq_dev_fill(vq, &c, echo_copy(&c)), 0);
	CHECK(vq_dev_iotlb_quiescent(vq));
	CHECK_EQ(vq_dev_flush(vq), 1);
	expect_no_miss(io.ch);
	CHECK_EQ(vq_drv_get(io.d, &tok, &len), 1);
	CHECK(tok == &io);
	CHECK_EQ(len, 0x1000);
	CHECK(!memcmp(x->g + 0x31800, x->g + 0x10800, 0x800));
	CHECK(!memcmp(x->g + 0x20000, x->g + 0x11000, 0x800));
	CHECK(vq_vhu_backend_connected(x->e.b));
	iotlb_teardown(x, &io);
}

static void iotlb_ring_and_buffers_through_iova_split(struct fx *x)
{
	iotlb_ring_and_buffers_through_iova(x, false);
}

static void iotlb_ring_and_buffers_through_iova_packed(struct fx *x)
{
	iotlb_ring_and_buffers_through_iova(x, true);
}

/* An IOTLB entry that does not allow the access (a device-writable buffer
 * mapped read-only) is the driver's error: the queue breaks (-EFAULT, the
 * device's error path signals the error fd), nothing is written, nothing
 * is asked, and the connection stays.  A ring area mapped without the
 * access it needs is refused: the connection closes, nothing crashes. */
static void iotlb_permission_refused_breaks_queue(struct fx *x)
{
	struct iox io;
	int e = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	void *tok;
	uint32_t len;
	int r;

	iotlb_setup(x, &io, false);
	snd_vring_fd(io.s, VQ_VHU_SET_VRING_ERR, 0, e);
	ok(x);
	iotlb_ring_start(x, &io);
	fill_src(x, 0x10000, 64, 3);
	map_page(x, io.s, DATA_IOVA, 0x10000, VQ_VHU_IOTLB_PERM_RW);
	map_page(x, io.s, DATA_IOVA + 0x10000, 0x20000, VQ_VHU_IOTLB_PERM_RO);
	CHECK(kicked(io.k));
	post(x, &io, DATA_IOVA, 64, DATA_IOVA + 0x10000, 64);
	CHECK(x->e.q[0].dead);
	CHECK_EQ(vq_dev_error(x->e.q[0].vq), -EFAULT);
	fprintf(stderr, "   %s\n", vq_dev_error_msg(x->e.q[0].vq));
	CHECK(kicked(e));               /* the error fd */
	expect_no_miss(io.ch);
	CHECK_EQ(vq_drv_get(io.d, &tok, &len), 0);
	CHECK_EQ(x->g[0x20000], 0);
	CHECK(vq_vhu_backend_connected(x->e.b));
	CHECK_EQ(get_u64(x, io.s, VQ_VHU_GET_QUEUE_NUM), ECHO_NQ);
	close(e);
	iotlb_teardown(x, &io);

	/* split used ring mapped read-only: refused when the ring starts */
	iotlb_setup(x, &io, false);
	io.k = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	snd_addr(io.s, 0, RING_IOVA, RING_IOVA + 0x1000, RING_IOVA + 0x2000);
	ok(x);
	map_page(x, io.s, RING_IOVA, 0, VQ_VHU_IOTLB_PERM_RO);
	map_page(x, io.s, RING_IOVA + 0x1000, 0x1000, VQ_VHU_IOTLB_PERM_RO);
	map_page(x, io.s, RING_IOVA + 0x2000, 0x2000, VQ_VHU_IOTLB_PERM_RO);
	snd_vring_fd(io.s, VQ_VHU_SET_VRING_KICK, 0, io.k);
	r = pump(x);
	close(io.k);
	close(io.ch);
	closed_with(x, io.s, r, -EFAULT);
}

/* "the back-end ... REPLY_ACK": an update the back-end cannot take (its
 * front-end range is not in the memory table) fails the ack; the
 * connection stays and the next update is taken. */
static void iotlb_update_refused_connection_stays(struct fx *x)
{
	struct iox io;

	iotlb_setup(x, &io, false);
	/* past the end, straddling the end, below the start */
	CHECK(iotlb_update(x, io.s, DATA_IOVA, PG, GSIZE, VQ_VHU_IOTLB_PERM_RW) != 0);
	CHECK(iotlb_update(x, io.s, DATA_IOVA, 2 * PG, GSIZE - PG,
			   VQ_VHU_IOTLB_PERM_RW) != 0);
	snd_iotlb(io.s, VQ_VHU_FLAG_NEED_REPLY, DATA_IOVA, PG, UA - PG,
		  VQ_VHU_IOTLB_PERM_RW, VQ_VHU_IOTLB_UPDATE);
	ok(x);
	CHECK(rcv(io.s, VQ_VHU_IOTLB_MSG, true).u.u64 != 0);
	/* without NEED_REPLY: refused quietly, still connected */
	snd_iotlb(io.s, 0, DATA_IOVA, PG, UA + GSIZE, VQ_VHU_IOTLB_PERM_RW,
		  VQ_VHU_IOTLB_UPDATE);
	ok(x);
	CHECK(vq_vhu_backend_connected(x->e.b));
	CHECK_EQ(get_u64(x, io.s, VQ_VHU_GET_QUEUE_NUM), ECHO_NQ);
	/* the same IOVA with a good address is taken, and serves a buffer */
	iotlb_ring_start(x, &io);
	map_page(x, io.s, DATA_IOVA, 0x10000, VQ_VHU_IOTLB_PERM_RW);
	fill_src(x, 0x10000, 128, 5);
	post(x, &io, DATA_IOVA, 128, DATA_IOVA + 0x800, 128);
	expect_no_miss(io.ch);
	done(&io, 128);
	CHECK(!memcmp(x->g + 0x10800, x->g + 0x10000, 128));
	iotlb_teardown(x, &io);
}

/* IOTLB_MSG belongs to VQ_F_ACCESS_PLATFORM, SET_BACKEND_REQ_FD to
 * PROTOCOL_F_BACKEND_REQ: either without its feature closes the
 * connection. */
static void iotlb_msg_without_access_platform_closes(struct fx *x)
{
	int s = cli(x), sv[2], r;
	struct vq_vhu_region reg = whole(x);

	/* before any SET_FEATURES */
	snd_iotlb(s, 0, 0, PG, UA, VQ_VHU_IOTLB_PERM_RW, VQ_VHU_IOTLB_UPDATE);
	expect_closed(x, s, -EPROTO);
	/* negotiated without it: an update, an invalidation (with REPLY_ACK:
	 * the ack fails, then the connection closes) */
	s = cli(x);
	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT);
	ok(x);
	snd_mem(s, 1, &reg, &x->gfd);
	ok(x);
	snd_iotlb(s, 0, 0, PG, UA, VQ_VHU_IOTLB_PERM_RW, VQ_VHU_IOTLB_UPDATE);
	expect_closed(x, s, -EPROTO);
	s = cli(x);
	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT | PROTO);
	ok(x);
	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, P_REPLY_ACK | P_BACKEND_REQ);
	ok(x);
	snd_iotlb(s, VQ_VHU_FLAG_NEED_REPLY, 0, 0, 0, 0, VQ_VHU_IOTLB_INVALIDATE);
	r = pump(x);
	CHECK(rcv(s, VQ_VHU_IOTLB_MSG, true).u.u64 != 0);
	closed_with(x, s, r, -EPROTO);

	/* SET_BACKEND_REQ_FD without PROTOCOL_F_BACKEND_REQ: the fd is closed */
	s = cli(x);
	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT | AP | PROTO);
	ok(x);
	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, P_REPLY_ACK);
	ok(x);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	snd(s, VQ_VHU_SET_BACKEND_REQ_FD, 0, VQ_VHU_P_NONE, NULL, &sv[1], 1);
	close(sv[1]);
	r = pump(x);
	close(sv[0]);
	closed_with(x, s, r, -EPROTO);
	/* nor without protocol features at all */
	s = cli(x);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	snd(s, VQ_VHU_SET_BACKEND_REQ_FD, 0, VQ_VHU_P_NONE, NULL, &sv[1], 1);
	close(sv[1]);
	r = pump(x);
	close(sv[0]);
	closed_with(x, s, r, -EPROTO);
}

/* "VHOST_IOTLB_INVALIDATE": the entry is gone once acked, so the next
 * buffer on that IOVA is asked for again (and waits for the answer); a
 * global invalidation (iova 0, size 0, QEMU's) drops every entry. */
static void iotlb_invalidate_then_miss_again(struct fx *x)
{
	struct iox io;

	iotlb_setup(x, &io, false);
	iotlb_ring_start(x, &io);
	/* updates ahead of any miss are taken too: nothing is asked */
	map_page(x, io.s, DATA_IOVA, 0x10000, VQ_VHU_IOTLB_PERM_RO);
	map_page(x, io.s, DATA_IOVA + 0x10000, 0x20000, VQ_VHU_IOTLB_PERM_WO);
	fill_src(x, 0x10000, 256, 9);
	post(x, &io, DATA_IOVA, 256, DATA_IOVA + 0x10000, 256);
	expect_no_miss(io.ch);
	done(&io, 256);
	CHECK(!memcmp(x->g + 0x20000, x->g + 0x10000, 256));

	/* the writable page goes; the readable one stays */
	CHECK_EQ(iotlb_invalidate(x, io.s, DATA_IOVA + 0x10000, PG), 0);
	CHECK(vq_dev_iotlb_quiescent(x->e.q[0].vq));
	memset(x->g + 0x20000, 0, 256);
	fill_src(x, 0x10000, 256, 77);
	post(x, &io, DATA_IOVA, 256, DATA_IOVA + 0x10000, 256);
	expect_miss(io.ch, DATA_IOVA + 0x10000, VQ_ACCESS_WO);
	waiting(x, &io);
	CHECK_EQ(x->g[0x20000], 0);
	/* now at another page */
	map_page(x, io.s, DATA_IOVA + 0x10000, 0x30000, VQ_VHU_IOTLB_PERM_WO);
	answered(x, &io);
	expect_no_miss(io.ch);
	done(&io, 256);
	CHECK(!memcmp(x->g + 0x30000, x->g + 0x10000, 256));
	CHECK_EQ(x->g[0x20000], 0);

	/* the invalidation of a range nothing maps is acked as well */
	CHECK_EQ(iotlb_invalidate(x, io.s, DATA_IOVA + 0x80000, PG), 0);

	/* everything, the ring's own areas too: the ring stops, keeping
	 * its place, and runs again once they are mapped anew (DPDK's
	 * vring_invalidate); the next buffer asks for its first page again */
	CHECK_EQ(iotlb_invalidate(x, io.s, 0, 0), 0);
	iotlb_ring_areas_answered(x, &io);
	post(x, &io, DATA_IOVA, 256, DATA_IOVA + 0x10000, 256);
	miss_answered(x, &io, DATA_IOVA, VQ_ACCESS_RO, 0x10000, VQ_VHU_IOTLB_PERM_RO);
	miss_answered(x, &io, DATA_IOVA + 0x10000, VQ_ACCESS_WO, 0x30000,
		      VQ_VHU_IOTLB_PERM_WO);
	done(&io, 256);
	CHECK(vq_vhu_backend_connected(x->e.b));
	iotlb_teardown(x, &io);
}

/* VQ_F_ACCESS_PLATFORM says what the ring addresses are: it cannot
 * change under a running ring, either way. */
static void iotlb_access_platform_changed_while_running_closes(struct fx *x)
{
	struct iox io;
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC);

	split_ring(x, s, SPLIT, k);
	CHECK(x->e.q[0].on);
	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT | AP);
	close(k);
	expect_closed(x, s, -EBUSY);
	x->e.starts = x->e.stops = x->e.pauses = 0;

	iotlb_setup(x, &io, false);
	iotlb_ring_start(x, &io);
	snd_u64(io.s, VQ_VHU_SET_FEATURES, SPLIT | PROTO);
	vq_drv_free(io.d);
	close(io.k);
	close(io.ch);
	expect_closed(x, io.s, -EBUSY);
	memset(x->g, 0, 0x50000);
	x->e.starts = x->e.stops = x->e.pauses = 0;

	/* while no ring runs it may change (and the IOTLB goes with it) */
	s = cli(x);
	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT | AP);
	ok(x);
	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT);
	ok(x);
	snd_iotlb(s, 0, 0, PG, UA, VQ_VHU_IOTLB_PERM_RW, VQ_VHU_IOTLB_UPDATE);
	expect_closed(x, s, -EPROTO);
}

/* "VHOST_USER_RESET_DEVICE" forgets the negotiated features, and with them
 * VQ_F_ACCESS_PLATFORM: renegotiated without it, descriptor addresses
 * are guest-physical again and a buffer is served without any IOTLB. */
static void iotlb_reset_device_forgets_access_platform(struct fx *x)
{
	struct iox io;
	struct vq_drv_config dc = { .features = SPLIT, .num = 64,
		.ring = { x->g, x->g + 0x1000, x->g + 0x2000 } };
	struct vq_drv *d;
	void *tok;
	uint32_t len;
	int k = eventfd(0, EFD_CLOEXEC);

	iotlb_setup(x, &io, false);
	snd_u64(io.s, VQ_VHU_SET_PROTOCOL_FEATURES,
		P_REPLY_ACK | P_BACKEND_REQ | VQ_BIT(VQ_VHU_PROTOCOL_F_RESET_DEVICE));
	ok(x);
	iotlb_ring_start(x, &io);
	map_page(x, io.s, DATA_IOVA, 0x10000, VQ_VHU_IOTLB_PERM_RW);
	post(x, &io, DATA_IOVA, 64, DATA_IOVA + 0x800, 64);
	done(&io, 64);
	vq_drv_free(io.d);
	io.d = NULL;
	snd_none(io.s, VQ_VHU_RESET_DEVICE);
	ok(x);
	CHECK(!x->e.q[0].on);
	memset(x->g, 0, 0x50000);
	split_ring(x, io.s, SPLIT, k);  /* no ACCESS_PLATFORM now */
	CHECK(x->e.q[0].on);
	CHECK_EQ(vq_drv_new(&dc, &d), 0);
	fill_src(x, 0x10000, 64, 11);
	CHECK_EQ(vq_drv_add(d, (struct vq_seg[2]){ { 0x10000, 64 }, { 0x20000, 64 } },
			    1, 1, x), 0);
	vq_drv_kick_prepare(d);
	echo_run_queue(&x->e, 0);
	expect_no_miss(io.ch);
	CHECK_EQ(vq_drv_get(d, &tok, &len), 1);
	CHECK_EQ(len, 64);
	CHECK(!memcmp(x->g + 0x20000, x->g + 0x10000, 64));
	vq_drv_free(d);
	close(k);
	iotlb_teardown(x, &io);
}

/* A ring's own areas invalidated while it runs: the back-end may no longer
 * touch them (vhost's vhost_vq_meta_reset / DPDK's vring_invalidate), so
 * a buffer posted now is not completed through the old mapping; the used
 * ring is asked for again and the buffer completes after the update. */
static void iotlb_invalidate_ring_area_stops_ring(struct fx *x)
{
	struct iox io;
	const volatile uint16_t *used_idx = (const void *)(x->g + 0x2002);
	uint16_t before;
	uint64_t a;
	unsigned p;
	int n = 0;

	iotlb_setup(x, &io, false);
	iotlb_ring_start(x, &io);
	map_page(x, io.s, DATA_IOVA, 0x10000, VQ_VHU_IOTLB_PERM_RW);
	post(x, &io, DATA_IOVA, 64, DATA_IOVA + 0x800, 64);
	done(&io, 64);
	before = *used_idx;
	CHECK_EQ(iotlb_invalidate(x, io.s, RING_IOVA + 0x2000, PG), 0);
	post(x, &io, DATA_IOVA, 64, DATA_IOVA + 0x800, 64);
	CHECK_EQ(*used_idx, before);    /* not written through the old entry */
	while (next_miss(io.ch, &a, &p)) {
		n++;
		CHECK_EQ(a, RING_IOVA + 0x2000);
		CHECK_EQ(p, VQ_ACCESS_WO);
	}
	CHECK_EQ(n, 1);
	map_page(x, io.s, RING_IOVA + 0x2000, 0x2000, VQ_VHU_IOTLB_PERM_WO);
	echo_run_queue(&x->e, 0);
	done(&io, 64);
	/* the front-end did not stop it: a pause */
	CHECK_EQ(x->e.pauses, 1);
	CHECK_EQ(x->e.stops, 0);
	iotlb_teardown(x, &io);
}

/* A ring the library paused (its areas invalidated, no update yet) and the
 * front-end then stops (GET_VRING_BASE, "Ring states"): the device hears it
 * is gone for good, once, and the base keeps the place the pause saved. */
static void iotlb_paused_ring_then_stopped(struct fx *x)
{
	struct iox io;
	struct vq_vhu_msg rep;
	uint64_t a;
	unsigned p;

	iotlb_setup(x, &io, false);
	iotlb_ring_start(x, &io);
	map_page(x, io.s, DATA_IOVA, 0x10000, VQ_VHU_IOTLB_PERM_RW);
	post(x, &io, DATA_IOVA, 64, DATA_IOVA + 0x800, 64);
	done(&io, 64);
	CHECK_EQ(iotlb_invalidate(x, io.s, RING_IOVA, PG), 0);
	CHECK(!x->e.q[0].on);
	CHECK_EQ(x->e.pauses, 1);
	CHECK_EQ(x->e.stops, 0);
	while (next_miss(io.ch, &a, &p))
		;
	snd_state(io.s, VQ_VHU_GET_VRING_BASE, 0, 0);
	ok(x);
	rep = rcv(io.s, VQ_VHU_GET_VRING_BASE, false);
	CHECK_EQ(rep.u.state.num, 1);   /* one chain taken before the pause */
	CHECK_EQ(x->e.stops, 1);
	snd_state(io.s, VQ_VHU_SET_VRING_ENABLE, 0, 0);
	ok(x);
	CHECK_EQ(x->e.stops, 1);        /* told once */
	CHECK_EQ(x->e.pauses, 1);
	iotlb_teardown(x, &io);
}

/* An invalidation a queue holds up (a chain it translated before, still
 * in the device's hands) is waited for VQ_VHU_QUIESCE_NS (100 ms), then
 * acked all the same: counted in quiesce_timeouts, and a warning naming
 * the queue goes to the log callback, not to fd 2. */
static void iotlb_invalidation_held_up_counted_and_logged(struct fx *x)
{
	struct vq_vhu_iotlb_stats st0, st;
	struct logged l = { 0 };
	struct iovec iov[4];
	struct vq_chain c = { .iov = iov, .iov_max = 4 };
	struct vq_dev *vq;
	struct iox io;
	uint64_t ack;
	ssize_t err_bytes;

	iotlb_setup(x, &io, false);
	iotlb_ring_start(x, &io);
	vq = x->e.q[0].vq;
	map_page(x, io.s, DATA_IOVA, 0x10000, VQ_VHU_IOTLB_PERM_RW);
	CHECK_EQ(vq_drv_add(io.d, (struct vq_seg[2]){ { DATA_IOVA, 64 },
		 { DATA_IOVA + 0x800, 64 } }, 1, 1, &io), 0);
	vq_drv_kick_prepare(io.d);
	CHECK_EQ(vq_dev_pop(vq, &c), 1);        /* held by the device */
	CHECK(!vq_dev_iotlb_quiescent(vq));
	vq_vhu_backend_iotlb_stats(x->e.b, &st0, sizeof(st0));
	CHECK_EQ(vq_log_set(log_keep, &l, VQ_LOG_WARNING), 0);
	stderr_to_pipe();
	ack = iotlb_invalidate(x, io.s, DATA_IOVA, PG);
	err_bytes = stderr_restore();
	CHECK_EQ(vq_log_set(NULL, NULL, VQ_LOG_ERR), 0);
	log_dump(&l);
	CHECK_EQ(ack, 0);
	CHECK_EQ(err_bytes, 0);
	vq_vhu_backend_iotlb_stats(x->e.b, &st, sizeof(st));
	CHECK_EQ(st.quiesce_timeouts - st0.quiesce_timeouts, 1);
	CHECK_EQ(st.invalidations - st0.invalidations, 1);
	CHECK_EQ(l.n, 1);
	CHECK(log_find(&l, VQ_LOG_WARNING, "echo: ") == 0);
	CHECK(strstr(l.msg[0], "queue 0 still holds buffers after 100 ms"));
	/* the chain held is still the device's to complete */
	CHECK_EQ(vq_dev_fill(vq, &c, 0), 0);
	CHECK_EQ(vq_dev_flush(vq), 1);
	done(&io, 0);
	CHECK(vq_vhu_backend_connected(x->e.b));
	iotlb_teardown(x, &io);
}

/* A ring stalled on a miss looks empty until the IOTLB changes, or for
 * 250 ms: then it has work again (a runtime loop's quiet look, every
 * 200 ms at most, finds it), so a question that never reached the
 * front-end is asked again; one that did is not asked twice within 1 s
 * (VQ_VHU_MISS_RETRY_NS), and the ring stalls anew. */
static void iotlb_stalled_ring_looks_again_after_250_ms(struct fx *x)
{
	struct iox io;

	iotlb_setup(x, &io, false);
	iotlb_ring_start(x, &io);
	post(x, &io, DATA_IOVA, 64, DATA_IOVA + 0x800, 64);
	expect_miss(io.ch, DATA_IOVA, VQ_ACCESS_RO);
	CHECK(!vq_dev_has_avail(x->e.q[0].vq));
	usleep(300 * 1000);
	CHECK(vq_dev_has_avail(x->e.q[0].vq));
	echo_run_queue(&x->e, 0);
	expect_no_miss(io.ch);
	CHECK(!vq_dev_has_avail(x->e.q[0].vq));
	map_page(x, io.s, DATA_IOVA, 0x10000, VQ_VHU_IOTLB_PERM_RW);
	answered(x, &io);
	done(&io, 64);
	iotlb_teardown(x, &io);
}

/* After an update the back-end kicks every started queue, from the
 * control thread.  A front-end that made its kick eventfd blocking after
 * SET_VRING_KICK (it shares the description) and filled it to the
 * maximum count cannot stall that thread: the kick is skipped, as one is
 * pending anyway, and the update is acked. */
static void iotlb_update_kick_never_waits_on_a_full_blocking_kick(struct fx *x)
{
	uint64_t v = 0xfffffffffffffffeull;
	struct iox io;

	iotlb_setup(x, &io, false);
	iotlb_ring_start(x, &io);
	CHECK_EQ(fcntl(io.k, F_SETFL, fcntl(io.k, F_GETFL) & ~O_NONBLOCK), 0);
	CHECK_EQ(write(io.k, &v, 8), 8);
	alarm(10);
	map_page(x, io.s, DATA_IOVA, 0x10000, VQ_VHU_IOTLB_PERM_RW);
	alarm(0);
	v = 0;
	CHECK_EQ(read(io.k, &v, 8), 8);
	CHECK_EQ(v, 0xfffffffffffffffeull);
	CHECK(vq_vhu_backend_connected(x->e.b));
	iotlb_teardown(x, &io);
}

/* "The back-end channel is a UNIX stream socket" (SET_BACKEND_REQ_FD):
 * a pipe, a datagram socket or a memfd is refused at the message, the
 * connection closes, nothing leaks, the next one is served. */
static void iotlb_backend_channel_must_be_a_unix_stream_socket(struct fx *x)
{
	static const char *const want[3] = {
		"a pipe", "a socket of family 1 and type 2", "a memfd",
	};

	for (unsigned k = 0; k < 3; k++) {
		int s = cli(x), p[2], fd, r;
		char msg[160];

		if (k == 0) {
			CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
			close(p[0]);
			fd = p[1];
		} else if (k == 1) {
			CHECK_EQ(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, p), 0);
			close(p[0]);
			fd = p[1];
		} else {
			fd = memfd_create("vhu-test-channel", MFD_CLOEXEC);
		}
		snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT | AP | PROTO);
		ok(x);
		snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, P_REPLY_ACK | P_BACKEND_REQ);
		ok(x);
		snd(s, VQ_VHU_SET_BACKEND_REQ_FD, 0, VQ_VHU_P_NONE, NULL, &fd, 1);
		close(fd);
		r = pump(x);
		snprintf(msg, sizeof(msg),
			 "VHOST_USER_SET_BACKEND_REQ_FD: the fd is %s, not an AF_UNIX stream socket",
			 want[k]);
		CHECK(!strcmp(vq_vhu_backend_error_msg(x->e.b), msg));
		closed_with(x, s, r, -ENOTSOCK);
	}
}

/* The front-end's hold on the channel's socket: it clears SO_SNDTIMEO and
 * O_NONBLOCK on the description it shares with us, so a send of ours
 * that waits would wait forever. */
static void channel_made_blocking(struct iox *io)
{
	struct timeval tv = { 0 };

	CHECK_EQ(setsockopt(io->bk, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)), 0);
	CHECK_EQ(fcntl(io->bk, F_SETFL, fcntl(io->bk, F_GETFL) & ~O_NONBLOCK), 0);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The head chain's readable buffer moved to another page (the ring reads
 * descriptors afresh on every pop), for a miss on a page not yet asked. */
static void move_head_buffer(struct fx *x, uint64_t iova)
{
	struct vq_desc *d = (struct vq_desc *)x->g;

	d->addr = vq_le64(iova);
}

static struct vq_vhu_iotlb_stats iotlb_stats(struct fx *x)
{
	struct vq_vhu_iotlb_stats st;

	vq_vhu_backend_iotlb_stats(x->e.b, &st, sizeof(st));
	return st;
}

/* The connection closes once the channel has failed, the ring looking
 * again meanwhile (serve: on this thread, else the device's own does):
 * process()'s result, with the time it took from t0 in *ms. */
static int wait_closed(struct fx *x, bool serve, uint64_t t0, uint64_t *ms)
{
	int r = 0;

	while (vq_vhu_backend_connected(x->e.b) && now_ms() - t0 < 5000) {
		struct pollfd p = { .fd = vq_vhu_backend_fd(x->e.b), .events = POLLIN };

		if (serve)
			echo_run_queue(&x->e, 0);
		if (poll(&p, 1, 20) == 1)
			r = pump(x);
	}
	*ms = now_ms() - t0;
	fprintf(stderr, "   closed after %llu ms\n", (unsigned long long)*ms);
	return r;
}

/*
 * "The back-end channel cannot stall the back-end": the front-end keeps a
 * dup of the channel's end it gave, makes it blocking (SO_SNDTIMEO and
 * O_NONBLOCK cleared) and never reads the other end, while the ring
 * misses page after page.  Each miss is sent without waiting until the
 * channel is full; then a miss is not sent (counted, asked again on the
 * ring's next look), nothing blocks, and once the channel has taken
 * nothing for VQ_VHU_CHAN_TIMEOUT_MS (1000 ms) it is closed, counted, and
 * the connection fails with the channel's error; the next one is served.
 */
static void iotlb_channel_not_read_fails_connection_after_1000_ms(struct fx *x)
{
	struct vq_vhu_iotlb_stats st0 = iotlb_stats(x), st;
	struct iox io;
	uint64_t t0, ms;
	unsigned n;
	int r;

	iotlb_setup_keep(x, &io, false, true);
	channel_made_blocking(&io);
	iotlb_ring_start(x, &io);
	alarm(20);
	post(x, &io, DATA_IOVA, 64, DATA_IOVA + 0x800, 64);
	for (n = 1; n < 100000 && iotlb_stats(x).misses_unsent == st0.misses_unsent; n++) {
		move_head_buffer(x, DATA_IOVA + n * PG);
		echo_run_queue(&x->e, 0);
	}
	t0 = now_ms();
	st = iotlb_stats(x);
	fprintf(stderr, "   the channel took %llu misses\n",
		(unsigned long long)(st.misses - st0.misses - 3));
	CHECK_EQ(st.misses_unsent - st0.misses_unsent, 1);
	CHECK(vq_vhu_backend_connected(x->e.b));
	r = wait_closed(x, true, t0, &ms);
	alarm(0);
	CHECK(ms >= 900 && ms < 2500);
	CHECK(!strcmp(vq_vhu_backend_error_msg(x->e.b),
		      "vhost-user \"IOMMU support\": the back-end channel took nothing for 1000 ms: the front-end stopped reading it"));
	st = iotlb_stats(x);
	CHECK_EQ(st.channel_failures - st0.channel_failures, 1);
	CHECK(st.misses_unsent - st0.misses_unsent > 1);
	vq_drv_free(io.d);
	close(io.k);
	close(io.ch);
	close(io.bk);
	closed_with(x, io.s, r, -ETIMEDOUT);
	memset(x->g, 0, 0x50000);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

/*
 * The same on the device's own thread (the echo device looks at its ring
 * as a runtime loop does: when it shows work), the front-end filling the
 * channel itself through its dup: the queue thread's miss is refused, its
 * ring stalls and looks again, the connection fails after about 1000 ms,
 * and the queue thread, never blocked, is joined.
 */
static void iotlb_channel_full_queue_thread_never_blocks(struct fx *x)
{
	struct vq_vhu_iotlb_stats st0 = iotlb_stats(x), st;
	char junk[4096] = { 0 };
	struct iox io;
	uint64_t t0, ms;
	int r;

	x->e.threaded = true;
	iotlb_setup_keep(x, &io, false, true);
	iotlb_ring_start(x, &io);
	while (send(io.bk, junk, sizeof(junk), MSG_DONTWAIT) > 0)
		;
	channel_made_blocking(&io);
	alarm(20);
	t0 = now_ms();
	CHECK_EQ(vq_drv_add(io.d, (struct vq_seg[2]){ { DATA_IOVA, 64 },
		 { DATA_IOVA + 0x800, 64 } }, 1, 1, x), 0);
	vq_drv_kick_prepare(io.d);
	CHECK_EQ(vq_evt_signal(io.k), 0);
	r = wait_closed(x, false, t0, &ms);
	alarm(0);
	CHECK(ms >= 900 && ms < 2500);
	CHECK(strstr(vq_vhu_backend_error_msg(x->e.b), "took nothing for 1000 ms"));
	st = iotlb_stats(x);
	CHECK_EQ(st.channel_failures - st0.channel_failures, 1);
	CHECK(st.misses_unsent - st0.misses_unsent >= 2);      /* asked again */
	x->e.threaded = false;
	vq_drv_free(io.d);
	close(io.k);
	close(io.ch);
	close(io.bk);
	closed_with(x, io.s, r, -ETIMEDOUT);
	memset(x->g, 0, 0x50000);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

/* A front-end that closed its end of the channel can answer no miss: the
 * first miss finds the channel broken (EPIPE), which closes it and fails
 * the connection, saying why. */
static void iotlb_channel_closed_by_frontend_fails_connection(struct fx *x)
{
	struct vq_vhu_iotlb_stats st0 = iotlb_stats(x);
	struct iox io;
	int r;

	iotlb_setup(x, &io, false);
	iotlb_ring_start(x, &io);
	close(io.ch);
	post(x, &io, DATA_IOVA, 64, DATA_IOVA + 0x800, 64);
	r = pump(x);
	CHECK(!strcmp(vq_vhu_backend_error_msg(x->e.b),
		      "vhost-user \"IOMMU support\": the back-end channel failed: Broken pipe"));
	CHECK_EQ(iotlb_stats(x).channel_failures - st0.channel_failures, 1);
	vq_drv_free(io.d);
	close(io.k);
	closed_with(x, io.s, r, -EPIPE);
	memset(x->g, 0, 0x50000);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

/* This program's send() takes the place of libc's for the statically
 * linked library (only the channel's sends use it): the next one of more
 * than short_send bytes takes that many, as a nearly full channel does. */
static size_t short_send;

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	if (short_send && len > short_send) {
		len = short_send;
		short_send = 0;
	}
	return sendto(fd, buf, len, flags, NULL, 0);
}

/* A miss the channel took in part keeps its rest, which goes before the
 * next message: the front-end reads whole messages, in order. */
static void iotlb_channel_message_taken_in_part_keeps_its_rest(struct fx *x)
{
	struct vq_vhu_iotlb_stats st0 = iotlb_stats(x), st;
	uint8_t b[64];
	struct iox io;

	iotlb_setup(x, &io, false);
	iotlb_ring_start(x, &io);
	short_send = 10;
	post(x, &io, DATA_IOVA, 64, DATA_IOVA + 0x800, 64);
	CHECK_EQ(recv(io.ch, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT), 10);
	move_head_buffer(x, DATA_IOVA + 0x3000);
	echo_run_queue(&x->e, 0);
	expect_miss(io.ch, DATA_IOVA, VQ_ACCESS_RO);
	expect_miss(io.ch, DATA_IOVA + 0x3000, VQ_ACCESS_RO);
	expect_no_miss(io.ch);
	st = iotlb_stats(x);
	CHECK_EQ(st.misses - st0.misses, 3 + 2);        /* the ring's 3, then 2 */
	CHECK_EQ(st.misses_unsent, st0.misses_unsent);
	map_page(x, io.s, DATA_IOVA, 0x10000, VQ_VHU_IOTLB_PERM_RW);
	map_page(x, io.s, DATA_IOVA + 0x3000, 0x13000, VQ_VHU_IOTLB_PERM_RO);
	answered(x, &io);
	done(&io, 64);
	iotlb_teardown(x, &io);
}

int main(void)
{
	struct fx x;

	signal(SIGPIPE, SIG_IGN);
	alarm_fails();
	fx_init(&x);
	T(iotlb_ring_and_buffers_through_iova_split);
	T(iotlb_ring_and_buffers_through_iova_packed);
	T(iotlb_permission_refused_breaks_queue);
	T(iotlb_update_refused_connection_stays);
	T(iotlb_msg_without_access_platform_closes);
	T(iotlb_invalidate_then_miss_again);
	T(iotlb_access_platform_changed_while_running_closes);
	T(iotlb_reset_device_forgets_access_platform);
	T(iotlb_invalidate_ring_area_stops_ring);
	T(iotlb_paused_ring_then_stopped);
	T(iotlb_invalidation_held_up_counted_and_logged);
	T(iotlb_update_kick_never_waits_on_a_full_blocking_kick);
	T(iotlb_stalled_ring_looks_again_after_250_ms);
	T(iotlb_backend_channel_must_be_a_unix_stream_socket);
	T(iotlb_channel_message_taken_in_part_keeps_its_rest);
	T(iotlb_channel_not_read_fails_connection_after_1000_ms);
	T(iotlb_channel_full_queue_thread_never_blocks);
	T(iotlb_channel_closed_by_frontend_fails_connection);
	fx_fini(&x);
	return 0;
}
