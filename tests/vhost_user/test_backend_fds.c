// SPDX-License-Identifier: MIT
/*
 * The fds a hostile front-end hands the back-end are its own: it keeps
 * their open file descriptions and may change their flags whenever it
 * likes.  A ring's kick, call and err fds must be eventfds (anything else
 * is refused at its SET_VRING_*, with the connection closed, nothing
 * leaked and the next front-end served), and no thread blocks on one the
 * front-end made blocking, filled to its maximum count, shared between
 * rings or between kick and call, or whose O_NONBLOCK it cleared after
 * giving it.  Every step that could hang is bounded by alarm(), so a
 * regression fails instead of hanging the test run.
 */
#include <sys/stat.h>
#include <sys/timerfd.h>

#include "backend_fixture.h"

/* The largest count an eventfd holds: a write of 1 more waits (or fails
 * with EAGAIN when non-blocking). */
#define EVT_MAX 0xfffffffffffffffeull

/* What the front-end passes instead of an eventfd, and how the back-end
 * must name it. */
enum kind { K_PIPE, K_PIPE_NO_READER, K_SOCKET, K_MEMFD, K_FIFO, K_FILE,
	    K_TIMERFD, K_N };

static const char *const kind_name[K_N] = {
	"a pipe", "a pipe", "a socket", "a memfd", "a FIFO", "a regular file",
	"anon_inode:[timerfd]",
};

static const char *const kind_label[K_N] = {
	"a pipe", "a pipe whose reader is closed", "a socket", "a memfd",
	"a FIFO", "a regular file", "a timerfd",
};

static int open_kind(struct fx *x, enum kind k)
{
	char path[96];
	int p[2], fd = -1;

	switch (k) {
	case K_PIPE:
		CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
		close(p[1]);
		return p[0];
	case K_PIPE_NO_READER:
		CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
		close(p[0]);
		return p[1];
	case K_SOCKET:
		CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p), 0);
		close(p[1]);
		return p[0];
	case K_MEMFD:
		fd = memfd_create("vhu-test-not-an-eventfd", MFD_CLOEXEC);
		break;
	case K_FIFO:
		snprintf(path, sizeof(path), "%s/fifo", x->dir);
		CHECK_EQ(mkfifo(path, 0600), 0);
		fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
		unlink(path);
		break;
	case K_FILE:
		snprintf(path, sizeof(path), "%s/file", x->dir);
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		unlink(path);
		break;
	case K_TIMERFD:
		fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
		break;
	case K_N:
		break;
	}
	CHECK(fd >= 0);
	return fd;
}

static const char *const req_name[3] = {
	"VHOST_USER_SET_VRING_KICK", "VHOST_USER_SET_VRING_CALL",
	"VHOST_USER_SET_VRING_ERR",
};

/*
 * vhost-user SET_VRING_KICK, _CALL, _ERR pass "the event file descriptor":
 * an fd that is not an eventfd is refused at its message, with an error
 * naming the request, the queue and what the fd is, before any ring uses
 * it (the ring is neither paused nor restarted with it); the connection
 * closes, leaking nothing, and the next one is served.  A kick on a ring
 * set up to its addresses, a call on a running ring, an err on queue 1
 * before it has anything.
 */
static void vring_fds_must_be_eventfds(struct fx *x)
{
	static const uint32_t req[3] = { VQ_VHU_SET_VRING_KICK,
					 VQ_VHU_SET_VRING_CALL,
					 VQ_VHU_SET_VRING_ERR };

	for (unsigned ri = 0; ri < 3; ri++) {
		for (unsigned k = 0; k < K_N; k++) {
			int s = cli(x), good = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
			int bad = open_kind(x, (enum kind)k), r;
			unsigned q = req[ri] == VQ_VHU_SET_VRING_ERR ? 1 : 0;
			unsigned starts, pauses;
			char want[160];

			fprintf(stderr, "   %s with %s\n", req_name[ri], kind_label[k]);
			split_ring(x, s, SPLIT, req[ri] == VQ_VHU_SET_VRING_KICK ? -1 : good);
			starts = x->e.starts;
			pauses = x->e.pauses;
			snd_vring_fd(s, req[ri], q, bad);
			close(bad);
			close(good);
			alarm(10);
			r = pump(x);
			alarm(0);
			snprintf(want, sizeof(want), "%s: queue %u: the fd is %s, not an eventfd",
				 req_name[ri], q, kind_name[k]);
			if (strcmp(vq_vhu_backend_error_msg(x->e.b), want))
				fprintf(stderr, "   expected: %s\n", want);
			CHECK(!strcmp(vq_vhu_backend_error_msg(x->e.b), want));
			CHECK_EQ(x->e.starts, starts);
			CHECK_EQ(x->e.pauses, pauses);
			closed_with(x, s, r, -EINVAL);
			x->e.starts = x->e.stops = x->e.pauses = 0;
		}
	}
}

/* A blocking eventfd already at its maximum count. */
static int evt_at_max(void)
{
	uint64_t v = EVT_MAX;
	int fd = eventfd(0, EFD_CLOEXEC);

	CHECK(fd >= 0);
	CHECK_EQ(write(fd, &v, 8), 8);
	return fd;
}

static struct vq_drv *drv_at(struct fx *x, uint64_t off)
{
	struct vq_drv_config dc = { .features = SPLIT, .num = 64,
		.ring = { x->g + off, x->g + off + 0x1000, x->g + off + 0x2000 } };
	struct vq_drv *d;

	CHECK_EQ(vq_drv_new(&dc, &d), 0);
	return d;
}

/* Queue 1 of 64 at guest offsets 0x4000, 0x5000, 0x6000, with its kick. */
static void ring1(struct fx *x, int s, int kick)
{
	snd_state(s, VQ_VHU_SET_VRING_NUM, 1, 64);
	ok(x);
	snd_addr(s, 1, UA + 0x4000, UA + 0x5000, UA + 0x6000);
	ok(x);
	snd_vring_fd(s, VQ_VHU_SET_VRING_KICK, 1, kick);
	ok(x);
}

/* Post 64 bytes at gpa src (seeded) to be echoed into gpa dst. */
static void post64(struct fx *x, struct vq_drv *d, uint64_t src, uint64_t dst,
		   uint8_t seed)
{
	for (unsigned i = 0; i < 64; i++)
		x->g[src + i] = (uint8_t)(seed + i);
	CHECK_EQ(vq_drv_add(d, (struct vq_seg[2]){ { src, 64 }, { dst, 64 } },
			    1, 1, x), 0);
	vq_drv_kick_prepare(d);
}

/* The chain came back with 64 bytes, the bytes echoed. */
static void echoed64(struct fx *x, struct vq_drv *d, uint64_t src, uint64_t dst)
{
	void *tok;
	uint32_t len;

	CHECK_EQ(vq_drv_get(d, &tok, &len), 1);
	CHECK_EQ(len, 64);
	CHECK(!memcmp(x->g + src, x->g + dst, 64));
}

static bool nonblocking(int fd)
{
	return fcntl(fd, F_GETFL) & O_NONBLOCK;
}

/*
 * Call and err fds that are blocking eventfds at their maximum count: the
 * back-end makes them non-blocking at SET (the description is shared, so
 * the front-end's fd shows it), the one signal of a new call fd does not
 * wait, the ring runs and the echo device moves a buffer (its call finds
 * the counter full: a notification is pending), and a broken queue's
 * signal of the err fd does not wait either.  The counts stay at the
 * maximum: nothing was lost or wrapped.
 */
static void call_and_err_eventfds_at_max_count_never_block(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int c = evt_at_max(), e = evt_at_max();
	struct vq_drv *d;
	uint64_t v;

	split_ring(x, s, SPLIT, k);
	alarm(10);
	snd_vring_fd(s, VQ_VHU_SET_VRING_CALL, 0, c);
	ok(x);
	snd_vring_fd(s, VQ_VHU_SET_VRING_ERR, 0, e);
	ok(x);
	CHECK(nonblocking(c) && nonblocking(e));
	CHECK(x->e.q[0].on);
	d = drv_at(x, 0);
	post64(x, d, 0x10000, 0x20000, 1);
	echo_run_queue(&x->e, 0);
	echoed64(x, d, 0x10000, 0x20000);
	/* a descriptor past guest memory: the queue breaks, err is signalled */
	CHECK_EQ(vq_drv_add(d, (struct vq_seg[1]){ { GSIZE, 64 } }, 1, 0, x), 0);
	vq_drv_kick_prepare(d);
	echo_run_queue(&x->e, 0);
	CHECK(x->e.q[0].dead);
	alarm(0);
	CHECK_EQ(read(c, &v, 8), 8);
	CHECK_EQ(v, EVT_MAX);
	CHECK_EQ(read(e, &v, 8), 8);
	CHECK_EQ(v, EVT_MAX);
	vq_drv_free(d);
	close(s);
	close(k);
	close(c);
	close(e);
	CHECK_EQ(pump(x), -ECONNRESET);
	memset(x->g, 0, 0x30000);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

/*
 * One blocking eventfd (count 0) as the kick of two rings: a kick makes
 * both ready, the device drains it for the first and finds nothing for
 * the second without waiting, and both rings move their buffer.
 */
static void one_blocking_eventfd_kicks_two_rings(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC);
	struct vq_drv *d0, *d1;

	split_ring(x, s, SPLIT, k);
	ring1(x, s, k);
	CHECK(x->e.q[0].on && x->e.q[1].on);
	CHECK(nonblocking(k));
	d0 = drv_at(x, 0);
	d1 = drv_at(x, 0x4000);
	post64(x, d0, 0x10000, 0x20000, 2);
	post64(x, d1, 0x11000, 0x21000, 3);
	CHECK_EQ(vq_evt_signal(k), 0);
	alarm(10);
	CHECK_EQ(echo_poll_once(&x->e, 1000), 0);
	alarm(0);
	echoed64(x, d0, 0x10000, 0x20000);
	echoed64(x, d1, 0x11000, 0x21000);
	vq_drv_free(d0);
	vq_drv_free(d1);
	close(s);
	close(k);
	CHECK_EQ(pump(x), -ECONNRESET);
	memset(x->g, 0, 0x30000);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

/*
 * One blocking eventfd (count 0) as kick and call of one ring: the new
 * call fd's signal is a kick too, the device serves, its call kicks
 * itself, and nothing waits.
 */
static void one_blocking_eventfd_as_kick_and_call(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC);
	struct vq_drv *d;

	split_ring(x, s, SPLIT, k);
	alarm(10);
	snd_vring_fd(s, VQ_VHU_SET_VRING_CALL, 0, k);
	ok(x);
	CHECK(x->e.q[0].on);
	d = drv_at(x, 0);
	post64(x, d, 0x10000, 0x20000, 4);
	CHECK_EQ(echo_poll_once(&x->e, 1000), 0);
	echoed64(x, d, 0x10000, 0x20000);
	CHECK_EQ(echo_poll_once(&x->e, 1000), 0);       /* its own call */
	CHECK_EQ(echo_poll_once(&x->e, 0), 0);
	alarm(0);
	vq_drv_free(d);
	close(s);
	close(k);
	CHECK_EQ(pump(x), -ECONNRESET);
	memset(x->g, 0, 0x30000);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

/*
 * A front-end that clears O_NONBLOCK on its kick eventfd after
 * SET_VRING_KICK (the description is shared, so our fd turns blocking
 * too) and then never kicks: the queue's thread goes on reading it
 * without waiting, still serves a buffer, and stops when the front-end
 * stops the ring (GET_VRING_BASE joins it).
 */
static void kick_made_blocking_after_set_thread_still_stops(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct vq_vhu_msg rep;
	struct vq_drv *d;
	void *tok;
	uint32_t len;
	int got = 0;

	x->e.threaded = true;
	split_ring(x, s, SPLIT, k);
	CHECK(x->e.q[0].on);
	CHECK_EQ(fcntl(k, F_SETFL, fcntl(k, F_GETFL) & ~O_NONBLOCK), 0);
	alarm(10);
	usleep(100 * 1000);             /* a few of its reads, never kicked */
	d = drv_at(x, 0);
	post64(x, d, 0x10000, 0x20000, 5);
	for (int i = 0; i < 500 && !got; i++) {
		got = vq_drv_get(d, &tok, &len);
		if (!got)
			usleep(10 * 1000);
	}
	CHECK_EQ(got, 1);
	CHECK_EQ(len, 64);
	snd_state(s, VQ_VHU_GET_VRING_BASE, 0, 0);
	ok(x);
	rep = rcv(s, VQ_VHU_GET_VRING_BASE, false);
	alarm(0);
	CHECK_EQ(rep.u.state.num, 1);
	CHECK(!x->e.q[0].on);
	x->e.threaded = false;
	vq_drv_free(d);
	close(s);
	close(k);
	CHECK_EQ(pump(x), -ECONNRESET);
	memset(x->g, 0, 0x30000);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

int main(void)
{
	struct fx x;

	signal(SIGPIPE, SIG_IGN);
	alarm_fails();
	fx_init(&x);
	T(vring_fds_must_be_eventfds);
	T(call_and_err_eventfds_at_max_count_never_block);
	T(one_blocking_eventfd_kicks_two_rings);
	T(one_blocking_eventfd_as_kick_and_call);
	T(kick_made_blocking_after_set_thread_still_stops);
	fx_fini(&x);
	return 0;
}
