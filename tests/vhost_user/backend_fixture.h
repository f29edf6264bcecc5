/* SPDX-License-Identifier: MIT */
/*
 * The fixture the back-end's tests share: the echo device's back-end
 * listening in a temporary directory, a guest memfd, a hand-driven
 * front-end (raw messages in, replies decoded by the codec), and the leak
 * checks every closed connection must pass (fds, memfd mappings, rings
 * stopped, the next connection served).
 */
#ifndef VQ_BACKEND_FIXTURE_H
#define VQ_BACKEND_FIXTURE_H

#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <virtq/log.h>
#include <virtq/guest/frontend.h>

#include "echo_dev.h"
#include "spec_msg.h"
#include "vhost_user/vhu_internal.h"

#define UA 0x7f0000000000ull            /* front-end address of guest memory */
#define GSIZE (1ull << 20)

struct fx {
	struct echo e;
	char dir[32], path[64];
	int fds0, maps0;
	int gfd;                        /* guest memory memfd */
	uint8_t *g;                     /* the test's view of it */
};

static inline int cli_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CHECK(s >= 0);
	strcpy(sa.sun_path, path);
	CHECK_EQ(connect(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return s;
}

static inline int cli(struct fx *x)
{
	int s = cli_connect(x->path);

	CHECK_EQ(vq_vhu_backend_process(x->e.b), 1);    /* accept */
	CHECK(vq_vhu_backend_connected(x->e.b));
	return s;
}

static inline void snd(int s, uint32_t req, uint32_t flags, enum vq_vhu_payload kind,
		const void *payload, const int *fds, unsigned nfds)
{
	struct vq_vhu_msg m = { .request = req, .flags = VQ_VHU_VERSION | flags,
				.kind = kind };

	if (payload)
		memcpy(&m.u, payload, kind == VQ_VHU_P_MEM ? sizeof(m.u.mem) :
		       kind == VQ_VHU_P_REGION ? sizeof(m.u.region) :
		       kind == VQ_VHU_P_ADDR ? sizeof(m.u.addr) :
		       kind == VQ_VHU_P_STATE ? sizeof(m.u.state) :
		       kind == VQ_VHU_P_VRING_FD ? sizeof(m.u.vring_fd) :
		       kind == VQ_VHU_P_LOG ? sizeof(m.u.log) : sizeof(m.u.u64));
	CHECK_EQ(vhu_send(s, &m, fds, nfds, 5000), 0);
}

static inline void snd_u64(int s, uint32_t req, uint64_t v)
{
	snd(s, req, 0, VQ_VHU_P_U64, &v, NULL, 0);
}

static inline void snd_state(int s, uint32_t req, uint32_t idx, uint32_t num)
{
	uint32_t st[2] = { idx, num };

	snd(s, req, 0, VQ_VHU_P_STATE, st, NULL, 0);
}

static inline void snd_none(int s, uint32_t req)
{
	snd(s, req, 0, VQ_VHU_P_NONE, NULL, NULL, 0);
}

static inline void snd_vring_fd(int s, uint32_t req, uint32_t idx, int fd)
{
	struct { uint32_t index; bool nofd; } v = { idx, fd < 0 };

	snd(s, req, 0, VQ_VHU_P_VRING_FD, &v, &fd, fd < 0 ? 0 : 1);
}

static inline void snd_addr_log(int s, uint32_t idx, uint64_t desc, uint64_t avail,
			 uint64_t used, uint32_t flags, uint64_t log)
{
	struct { uint32_t index, flags; uint64_t desc, used, avail, log; } a =
		{ idx, flags, desc, used, avail, log };

	snd(s, VQ_VHU_SET_VRING_ADDR, 0, VQ_VHU_P_ADDR, &a, NULL, 0);
}

static inline void snd_addr(int s, uint32_t idx, uint64_t desc, uint64_t avail,
		     uint64_t used)
{
	snd_addr_log(s, idx, desc, avail, used, 0, 0);
}

static inline void snd_log_base(int s, int fd, uint64_t size, uint64_t offset)
{
	uint64_t v[2] = { size, offset };

	snd(s, VQ_VHU_SET_LOG_BASE, 0, VQ_VHU_P_LOG, v, &fd, 1);
}

static inline void snd_mem(int s, unsigned n, const struct vq_vhu_region *r,
		    const int *fds)
{
	struct { uint32_t n; struct vq_vhu_region r[VQ_VHU_MEM_TABLE_MAX]; } m;

	memset(&m, 0, sizeof(m));
	m.n = n;
	memcpy(m.r, r, n * sizeof(*r));
	snd(s, VQ_VHU_SET_MEM_TABLE, 0, VQ_VHU_P_MEM, &m, fds, n);
}

static inline void snd_region(int s, uint32_t req, const struct vq_vhu_region *r, int fd)
{
	snd(s, req, 0, VQ_VHU_P_REGION, r, &fd, fd < 0 ? 0 : 1);
}

/* Handle one pending message. */
static inline int pump(struct fx *x)
{
	return vq_vhu_backend_process(x->e.b);
}

static inline void ok(struct fx *x)
{
	CHECK_EQ(pump(x), 1);
}

static inline struct vq_vhu_msg rcv(int s, uint32_t req, bool ack)
{
	uint8_t buf[VQ_VHU_MSG_MAX];
	int fds[VQ_VHU_MAX_FDS];
	unsigned nfds;
	size_t len;
	struct vq_vhu_msg m;

	CHECK(vhu_recv(s, false, false, 5000, buf, &len, fds, &nfds) > 0);
	CHECK_EQ(vq_vhu_decode_reply(buf, len, fds, nfds, req, ack, &m, NULL, 0), 0);
	return m;
}

static inline uint64_t get_u64(struct fx *x, int s, uint32_t req)
{
	snd_none(s, req);
	ok(x);
	return rcv(s, req, false).u.u64;
}

static inline void fx_init(struct fx *x)
{
	int s;

	echo_init(&x->e);
	strcpy(x->dir, "/tmp/vhu-bk-XXXXXX");
	CHECK(mkdtemp(x->dir));
	snprintf(x->path, sizeof(x->path), "%s/sock", x->dir);
	CHECK_EQ(vq_vhu_backend_listen(x->e.b, x->path, 0), 0);
	vq_vhu_backend_set_recv_timeout(x->e.b, 200);
	x->gfd = memfd_create("vhu-test-guest", MFD_CLOEXEC);
	CHECK(x->gfd >= 0);
	CHECK_EQ(ftruncate(x->gfd, GSIZE), 0);
	x->g = mmap(NULL, GSIZE, PROT_READ | PROT_WRITE, MAP_SHARED, x->gfd, 0);
	CHECK(x->g != MAP_FAILED);
	/* warm up (lazy allocations), then take the baseline */
	s = cli(x);
	CHECK(get_u64(x, s, VQ_VHU_GET_FEATURES) & VQ_BIT(VQ_F_VERSION_1));
	close(s);
	CHECK_EQ(pump(x), -ECONNRESET);
	x->fds0 = count_fds();
	x->maps0 = count_maps();
}

static inline void fx_fini(struct fx *x)
{
	vq_vhu_backend_free(x->e.b);
	munmap(x->g, GSIZE);
	close(x->gfd);
	rmdir(x->dir);
}

/* The connection was closed with err: no leaks, and the next one works. */
static inline void closed_with(struct fx *x, int s, int r, int err)
{
	int s2;

	fprintf(stderr, "   -> %d: %s\n", r, vq_vhu_backend_error_msg(x->e.b));
	CHECK_EQ(r, err);
	CHECK(!vq_vhu_backend_connected(x->e.b));
	CHECK(vq_vhu_backend_error_msg(x->e.b)[0]);
	CHECK(spec_section_first(vq_vhu_backend_error_msg(x->e.b)));
	close(s);
	CHECK_EQ(count_fds(), x->fds0);
	CHECK_EQ(count_maps(), x->maps0);
	for (unsigned i = 0; i < ECHO_NQ; i++)
		CHECK(!x->e.q[i].on);
	s2 = cli(x);
	CHECK_EQ(get_u64(x, s2, VQ_VHU_GET_QUEUE_NUM), ECHO_NQ);
	close(s2);
	CHECK_EQ(pump(x), -ECONNRESET);
	CHECK_EQ(count_fds(), x->fds0);
}

static inline void expect_closed(struct fx *x, int s, int err)
{
	closed_with(x, s, pump(x), err);
}

static const uint64_t SPLIT = VQ_BIT(VQ_F_VERSION_1);

static inline struct vq_vhu_region whole(struct fx *x)
{
	(void)x;
	return (struct vq_vhu_region){ .gpa = 0, .size = GSIZE, .uaddr = UA,
				       .mmap_offset = 0 };
}

/* SET_FEATURES + SET_MEM_TABLE(whole guest, from the GSIZE bytes of
 * fd) + SET_VRING_NUM(0, num). */
static inline void setup_to_num_from(struct fx *x, int s, uint64_t features,
				     uint32_t num, int fd)
{
	struct vq_vhu_region r = whole(x);

	snd_u64(s, VQ_VHU_SET_FEATURES, features);
	ok(x);
	snd_mem(s, 1, &r, &fd);
	ok(x);
	snd_state(s, VQ_VHU_SET_VRING_NUM, 0, num);
	ok(x);
}

/* The same from the fixture's guest memory. */
static inline void setup_to_num(struct fx *x, int s, uint64_t features, uint32_t num)
{
	setup_to_num_from(x, s, features, num, x->gfd);
}

/* Queue 0 of 64 at guest offsets 0, 0x1000, 0x2000: its address, then
 * its kick (none if kick < 0). */
static inline void ring_addr_kick(struct fx *x, int s, int kick)
{
	snd_addr(s, 0, UA, UA + 0x1000, UA + 0x2000);
	ok(x);
	if (kick >= 0) {
		snd_vring_fd(s, VQ_VHU_SET_VRING_KICK, 0, kick);
		ok(x);
	}
}

/* Lay out a split ring of 64 at guest offset 0 and set it up up to KICK. */
static inline void split_ring(struct fx *x, int s, uint64_t features, int kick)
{
	setup_to_num(x, s, features, 64);
	ring_addr_kick(x, s, kick);
}

/* ---- live migration's dirty log (vhost-user "Migration") ---- */

#define LOG_SHMFD VQ_BIT(VQ_VHU_PROTOCOL_F_LOG_SHMFD)
#define LOG_ALL VQ_BIT(VQ_VHU_F_LOG_ALL)
/* GSIZE is 256 pages: a log of 32 bytes covers it exactly */
#define LOG_BYTES (GSIZE / VQ_DIRTY_LOG_PAGE / 8)

static inline int log_memfd(uint64_t size)
{
	int fd = memfd_create("vhu-test-log", MFD_CLOEXEC);

	CHECK(fd >= 0);
	CHECK_EQ(ftruncate(fd, (off_t)size), 0);
	return fd;
}

static inline bool page_dirty(const uint8_t *log, uint64_t gpa)
{
	uint64_t page = gpa / VQ_DIRTY_LOG_PAGE;

	return log[page / 8] & (1u << (page % 8));
}

/* One chain through the echo device: in bytes read at rd, written at wr
 * (a buffer of wlen bytes). */
static inline void echo_one(struct fx *x, struct vq_drv *d, uint64_t rd,
			    uint32_t in, uint64_t wr, uint32_t wlen)
{
	struct vq_seg seg[2] = { { rd, in }, { wr, wlen } };
	void *tok;
	uint32_t len;

	CHECK_EQ(vq_drv_add(d, seg, 1, 1, x), 0);
	vq_drv_kick_prepare(d);
	echo_run_queue(&x->e, 0);
	CHECK_EQ(vq_drv_get(d, &tok, &len), 1);
	CHECK_EQ(len, in);
}

/* Up to a started, enabled queue 0 with LOG_SHMFD negotiated; descriptors
 * at guest page 0, driver area at page 1, device area at page 2. */
static inline void log_ring(struct fx *x, int s, uint64_t f, int kick,
			    uint32_t flags, uint64_t log_addr)
{
	struct vq_vhu_region r = whole(x);

	snd_u64(s, VQ_VHU_SET_FEATURES, f);
	ok(x);
	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, LOG_SHMFD);
	ok(x);
	snd_mem(s, 1, &r, &x->gfd);
	ok(x);
	snd_state(s, VQ_VHU_SET_VRING_NUM, 0, 64);
	ok(x);
	snd_addr_log(s, 0, UA, UA + 0x1000, UA + 0x2000, flags, log_addr);
	ok(x);
	snd_vring_fd(s, VQ_VHU_SET_VRING_KICK, 0, kick);
	ok(x);
	snd_state(s, VQ_VHU_SET_VRING_ENABLE, 0, 1);
	ok(x);
	CHECK(x->e.q[0].on);
}

/* ---- the log callback, and fd 2 that must stay empty ---- */

struct logged {
	unsigned n;
	enum vq_log_level level[32];
	char msg[32][512];
};

static inline void log_keep(void *arg, enum vq_log_level level, const char *msg)
{
	struct logged *l = arg;

	if (l->n < 32) {
		l->level[l->n] = level;
		snprintf(l->msg[l->n], sizeof(l->msg[0]), "%s", msg);
	}
	l->n++;
}

/* The first message of this level containing text, or -1. */
static inline int log_find(const struct logged *l, enum vq_log_level level, const char *text)
{
	for (unsigned i = 0; i < l->n && i < 32; i++)
		if (l->level[i] == level && strstr(l->msg[i], text))
			return (int)i;
	return -1;
}

static inline void log_dump(const struct logged *l)
{
	for (unsigned i = 0; i < l->n && i < 32; i++)
		fprintf(stderr, "   [%d] %s\n", l->level[i], l->msg[i]);
}

/* fd 2 goes to a pipe while the library runs; the test's own checks run
 * after it is restored, so a failure is still seen. */
static __attribute__((unused)) int saved_stderr = -1, err_pipe[2];

static inline void stderr_to_pipe(void)
{
	fflush(stderr);
	CHECK_EQ(pipe2(err_pipe, O_CLOEXEC | O_NONBLOCK), 0);
	saved_stderr = dup(2);
	CHECK(saved_stderr >= 0);
	CHECK_EQ(dup2(err_pipe[1], 2), 2);
}

/* Restore fd 2; how many bytes were written to it meanwhile. */
static inline ssize_t stderr_restore(void)
{
	char buf[4096];
	ssize_t n, total = 0;

	fflush(stderr);
	CHECK_EQ(dup2(saved_stderr, 2), 2);
	close(saved_stderr);
	close(err_pipe[1]);
	while ((n = read(err_pipe[0], buf, sizeof(buf))) > 0) {
		fprintf(stderr, "   written to fd 2: %.*s\n", (int)n, buf);
		total += n;
	}
	close(err_pipe[0]);
	return total;
}

/* A step that might block (a regression) is bounded by alarm(n): past it
 * the test fails, saying so, instead of hanging the test run. */
static inline void alarm_failed(int sig)
{
	static const char m[] = "a step blocked past its bound (alarm)\n";

	(void)sig;
	if (write(2, m, sizeof(m) - 1) < 0)
		_exit(1);
	_exit(1);
}

static inline void alarm_fails(void)
{
	signal(SIGALRM, alarm_failed);
}

/* Feature and protocol bits the cases negotiate. */
#define PROTO VQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES)
#define PACKED VQ_BIT(VQ_F_RING_PACKED)
#define P_REPLY_ACK VQ_BIT(VQ_VHU_PROTOCOL_F_REPLY_ACK)
#define P_SLOTS VQ_BIT(VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS)

/* Run one case on the fixture x: its name says which rule it checks. */
#define T(fn) do { fprintf(stderr, "-- %s\n", #fn); fn(&x); } while (0)

#endif
