// SPDX-License-Identifier: MIT
/*
 * The back-end's postcopy migration (PROTOCOL_F_PAGEFAULT): the test plays
 * QEMU's fault thread.  A page not there blocks a thread's write(2) from
 * it until the test reads the fault at our address, places the page and
 * wakes it; rings wait for the ack; the table and region echoes; one
 * userfaultfd for two ADVISEs; nothing registered after END; a front-end
 * gone while a fault waits leaves nothing blocked or leaked; the order.
 */
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "backend_fixture.h"

#define P_PAGEFAULT VQ_BIT(VQ_VHU_PROTOCOL_F_PAGEFAULT)

/* POSTCOPY_ADVISE's reply: empty, carrying a userfaultfd. */
static int pc_advise(struct fx *x, int s)
{
	uint8_t buf[VQ_VHU_MSG_MAX];
	int fds[VQ_VHU_MAX_FDS];
	unsigned nfds;
	size_t len;
	struct vq_vhu_msg m;
	char path[64], link[64];
	ssize_t n;

	snd_none(s, VQ_VHU_POSTCOPY_ADVISE);
	ok(x);
	CHECK(vhu_recv(s, false, false, 5000, buf, &len, fds, &nfds) > 0);
	CHECK_EQ(vq_vhu_decode_reply(buf, len, fds, nfds, VQ_VHU_POSTCOPY_ADVISE,
				     false, &m, NULL, 0), 0);
	CHECK_EQ(m.size, 0);
	CHECK_EQ(m.nfds, 1);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", m.fds[0]);
	n = readlink(path, link, sizeof(link) - 1);
	CHECK(n > 0);
	link[n] = '\0';
	CHECK(strstr(link, "userfaultfd"));
	return m.fds[0];
}

static void pc_listen(struct fx *x, int s)
{
	snd(s, VQ_VHU_POSTCOPY_LISTEN, VQ_VHU_FLAG_NEED_REPLY, VQ_VHU_P_NONE, NULL, NULL, 0);
	ok(x);
	CHECK_EQ(rcv(s, VQ_VHU_POSTCOPY_LISTEN, true).u.u64, 0);
}

/* QEMU's ack that it has our addresses. */
static void pc_ack(int s, uint32_t req, uint64_t v)
{
	snd(s, req, 0, VQ_VHU_P_POSTCOPY_ACK, &v, NULL, 0);
}

/* Guest memory that has not arrived: no page in the memfd. */
static void pc_punch(struct fx *x)
{
	CHECK_EQ(fallocate(x->gfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
			   GSIZE), 0);
}

/* What QEMU's fault thread does for a page: put it in the shared memory
 * (through its own view), then wake whoever waits on it in ours. */
static void pc_place(struct fx *x, int ufd, uint8_t *hva, uint64_t gpa, uint8_t v)
{
	uint8_t page[4096];
	struct uffdio_range r = { .start = (uintptr_t)hva, .len = sizeof(page) };

	memset(page, v, sizeof(page));
	CHECK_EQ(pwrite(x->gfd, page, sizeof(page), (off_t)gpa), (ssize_t)sizeof(page));
	CHECK_EQ(ioctl(ufd, UFFDIO_WAKE, &r), 0);
}

/* A thread copying one byte of guest memory the way a TAP or socket
 * device does: write(2) from it, so the fault is the kernel's own access
 * (a user-mode-only userfaultfd would fail it with EFAULT). */
struct pc_reader {
	pthread_t t;
	const uint8_t *p;
	int pipe[2];
	ssize_t ret;
};

static void *pc_read_thread(void *arg)
{
	struct pc_reader *r = arg;

	r->ret = write(r->pipe[1], r->p, 1);
	return NULL;
}

static void pc_reader_start(struct pc_reader *r, const uint8_t *p)
{
	r->p = p;
	r->ret = -2;
	CHECK_EQ(pipe2(r->pipe, O_CLOEXEC), 0);
	CHECK_EQ(pthread_create(&r->t, NULL, pc_read_thread, r), 0);
}

/* Join within 5 s; returns what write(2) returned, the byte in *v. */
static ssize_t pc_reader_join(struct pc_reader *r, uint8_t *v)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	CHECK_EQ(pthread_timedjoin_np(r->t, NULL, &ts), 0);
	if (r->ret == 1)
		CHECK_EQ(read(r->pipe[0], v, 1), 1);
	close(r->pipe[0]);
	close(r->pipe[1]);
	return r->ret;
}

/* The fault of the reader on hva reaches the userfaultfd, at our address. */
static void pc_expect_fault(int ufd, const uint8_t *hva)
{
	struct pollfd pfd = { .fd = ufd, .events = POLLIN };
	struct uffd_msg msg;

	CHECK_EQ(poll(&pfd, 1, 5000), 1);
	CHECK_EQ(read(ufd, &msg, sizeof(msg)), (ssize_t)sizeof(msg));
	CHECK_EQ(msg.event, UFFD_EVENT_PAGEFAULT);
	CHECK_EQ(msg.arg.pagefault.address & ~4095ull, (uintptr_t)hva & ~4095ull);
}

/*
 * Without memory slots the table's reply is the table with our addresses.
 * A front-end gone while a thread waits on a fault it never serves: the
 * registration is dropped before the rings are stopped, so the thread
 * wakes and the connection ends (nothing hangs, nothing leaks), even if
 * the front-end still holds the userfaultfd.
 */
static void pc_join_on_stop(struct echo *e, unsigned index)
{
	uint8_t v;

	if (index == 0)
		CHECK_EQ(pc_reader_join(e->hook_arg, &v), 1);
}

/*
 * QEMU's postcopy destination with memory slots: ADVISE gives it our
 * userfaultfd, LISTEN registers, each ADD_MEM_REG is answered with our
 * address of the region, and no ring touches guest memory before QEMU's
 * ack.  A page that has not arrived blocks the thread that reads it until
 * the front-end places it and wakes us; after END nothing is registered.
 */
static void postcopy_add_mem_reg_faults_served(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC), ufd;
	struct vq_vhu_region r = whole(x);
	struct vq_vhu_postcopy_stats st0, st;
	struct vq_vhu_msg m;
	struct pc_reader rd;
	uint8_t *hva, v = 0;

	vq_vhu_backend_postcopy_stats(x->e.b, &st0, sizeof(st0));
	CHECK(get_u64(x, s, VQ_VHU_GET_PROTOCOL_FEATURES) & P_PAGEFAULT);
	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, P_PAGEFAULT | P_SLOTS | P_REPLY_ACK);
	ok(x);
	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT);
	ok(x);
	pc_punch(x);
	ufd = pc_advise(x, s);
	pc_listen(x, s);
	/* the echo: the same region, our address (no REPLY_ACK besides) */
	snd(s, VQ_VHU_ADD_MEM_REG, VQ_VHU_FLAG_NEED_REPLY, VQ_VHU_P_REGION, &r, &x->gfd, 1);
	ok(x);
	m = rcv(s, VQ_VHU_ADD_MEM_REG, false);
	CHECK_EQ(m.kind, VQ_VHU_P_REGION);
	CHECK_EQ(m.u.region.gpa, r.gpa);
	CHECK_EQ(m.u.region.size, r.size);
	CHECK_EQ(m.u.region.mmap_offset, r.mmap_offset);
	hva = (uint8_t *)(uintptr_t)m.u.region.uaddr;
	CHECK(hva != x->g && m.u.region.uaddr != UA);
	/* QEMU 7.2 adds the same region again from its second vhost device */
	snd_region(s, VQ_VHU_ADD_MEM_REG, &r, x->gfd);
	ok(x);
	CHECK_EQ((uint8_t *)(uintptr_t)rcv(s, VQ_VHU_ADD_MEM_REG, false).u.region.uaddr, hva);
	/* a ring set up now waits for the ack */
	snd_state(s, VQ_VHU_SET_VRING_NUM, 0, 64);
	ok(x);
	ring_addr_kick(x, s, k);
	CHECK(!x->e.q[0].on);
	/* the ring's pages arrive (starting a split ring reads used->idx) */
	for (uint64_t a = 0; a < 0x3000; a += 4096) {
		uint8_t z[4096] = { 0 };

		CHECK_EQ(pwrite(x->gfd, z, sizeof(z), (off_t)a), (ssize_t)sizeof(z));
	}
	pc_ack(s, VQ_VHU_ADD_MEM_REG, 0);
	ok(x);
	CHECK(x->e.q[0].on);
	/* a buffer page the guest wrote on the source, not here yet */
	pc_reader_start(&rd, hva + 0x10000 + 100);
	pc_expect_fault(ufd, hva + 0x10000);
	pc_place(x, ufd, hva + 0x10000, 0x10000, 0x5a);
	CHECK_EQ(pc_reader_join(&rd, &v), 1);
	CHECK_EQ(v, 0x5a);
	vq_vhu_backend_postcopy_stats(x->e.b, &st, sizeof(st));
	CHECK_EQ(st.advises - st0.advises, 1);
	CHECK_EQ(st.listens - st0.listens, 1);
	CHECK_EQ(st.regions - st0.regions, 1);
	CHECK_EQ(st.acks - st0.acks, 1);
	/* END: a u64 0; nothing is registered any more */
	snd(s, VQ_VHU_POSTCOPY_END, VQ_VHU_FLAG_NEED_REPLY, VQ_VHU_P_NONE, NULL, NULL, 0);
	ok(x);
	CHECK_EQ(rcv(s, VQ_VHU_POSTCOPY_END, false).u.u64, 0);
	pc_reader_start(&rd, hva + 0x20000);
	CHECK_EQ(pc_reader_join(&rd, &v), 1);
	CHECK_EQ(v, 0);
	close(ufd);
	close(k);
	/* an ack when nothing listens is the front-end's error */
	pc_ack(s, 0, 0);
	expect_closed(x, s, -EPROTO);
}

static void postcopy_set_mem_table_then_frontend_gone(struct fx *x)
{
	int s = cli(x), ufd, k = eventfd(0, EFD_CLOEXEC);
	struct vq_vhu_region r[2] = {
		{ 0, GSIZE / 2, UA, 0 },
		{ GSIZE / 2, GSIZE / 2, UA + GSIZE / 2, GSIZE / 2 },
	};
	int fds[2] = { x->gfd, x->gfd };
	struct vq_vhu_msg m;
	struct pc_reader rd;
	uint8_t *hva;

	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, P_PAGEFAULT | P_REPLY_ACK);
	ok(x);
	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT);
	ok(x);
	pc_punch(x);
	ufd = pc_advise(x, s);
	/* a second vhost device advises too: the same userfaultfd */
	{
		int ufd2 = pc_advise(x, s);
		struct stat a, b;

		CHECK_EQ(fstat(ufd, &a), 0);
		CHECK_EQ(fstat(ufd2, &b), 0);
		CHECK_EQ(a.st_ino, b.st_ino);
		close(ufd2);
	}
	pc_listen(x, s);
	snd_mem(s, 2, r, fds);
	ok(x);
	m = rcv(s, VQ_VHU_SET_MEM_TABLE, false);
	CHECK_EQ(m.kind, VQ_VHU_P_MEM);
	CHECK_EQ(m.u.mem.nregions, 2);
	for (unsigned i = 0; i < 2; i++) {
		CHECK_EQ(m.u.mem.regions[i].gpa, r[i].gpa);
		CHECK(m.u.mem.regions[i].uaddr != r[i].uaddr);
	}
	hva = (uint8_t *)(uintptr_t)m.u.mem.regions[1].uaddr;
	pc_ack(s, VQ_VHU_SET_MEM_TABLE, 0);
	ok(x);
	/* a ring whose stop joins the thread (as a device joins its queue's):
	 * its pages have arrived */
	for (uint64_t a = 0; a < 0x3000; a += 4096) {
		uint8_t z[4096] = { 0 };

		CHECK_EQ(pwrite(x->gfd, z, sizeof(z), (off_t)a), (ssize_t)sizeof(z));
	}
	snd_state(s, VQ_VHU_SET_VRING_NUM, 0, 64);
	ok(x);
	ring_addr_kick(x, s, k);
	CHECK(x->e.q[0].on);
	pc_reader_start(&rd, hva + 0x1000);
	pc_expect_fault(ufd, hva + 0x1000);
	x->e.stop_hook = pc_join_on_stop;
	x->e.hook_arg = &rd;
	/* the front-end hangs up but keeps its copy of the userfaultfd (a
	 * hostile one, or one that will never read it again): closing ours
	 * alone would leave the thread waiting, and the stop with it */
	close(s);
	CHECK_EQ(pump(x), -ECONNRESET);
	x->e.stop_hook = NULL;
	/* woken: it read the page as it is */
	CHECK_EQ(rd.ret, 1);
	close(ufd);
	close(k);
	CHECK_EQ(count_fds(), x->fds0);
	CHECK_EQ(count_maps(), x->maps0);
}

/* The protocol's order: LISTEN before ADVISE, an ack refusing our
 * addresses, POSTCOPY_* without PAGEFAULT, an ack outside postcopy. */
static void bad_postcopy_out_of_order(struct fx *x)
{
	int s = cli(x), ufd;

	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, P_PAGEFAULT | P_SLOTS);
	ok(x);
	snd_none(s, VQ_VHU_POSTCOPY_LISTEN);
	expect_closed(x, s, -EPROTO);

	s = cli(x);
	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, P_SLOTS);
	ok(x);
	snd_none(s, VQ_VHU_POSTCOPY_ADVISE);
	expect_closed(x, s, -EPROTO);

	s = cli(x);
	pc_ack(s, VQ_VHU_REM_MEM_REG, 0);
	expect_closed(x, s, -EPROTO);

	s = cli(x);
	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, P_PAGEFAULT | P_SLOTS | P_REPLY_ACK);
	ok(x);
	ufd = pc_advise(x, s);
	close(ufd);
	pc_listen(x, s);
	pc_ack(s, 0, 1);
	expect_closed(x, s, -EPROTO);
}

int main(void)
{
	struct fx x;

	signal(SIGPIPE, SIG_IGN);
	fx_init(&x);
	T(postcopy_add_mem_reg_faults_served);
	T(postcopy_set_mem_table_then_frontend_gone);
	T(bad_postcopy_out_of_order);
	fx_fini(&x);
	return 0;
}
