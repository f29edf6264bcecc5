// SPDX-License-Identifier: MIT
/*
 * The back-end against a hand-driven front-end in one process: every item of
 * the "Bad input" list gets its error, a closed connection, a
 * back-end that serves the next connection, and no fd or guest-mapping leak
 * (/proc/self/fd, memfd lines of /proc/self/maps).  Then the protocol rules
 * the back-end implements: ring states, GET_VRING_BASE, REPLY_ACK, STATUS,
 * RESET_DEVICE, memory slots, the socket rules and the program conventions.
 */
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <virtq/vhost_user_frontend.h>

#include "echo_dev.h"
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

static int cli_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CHECK(s >= 0);
	strcpy(sa.sun_path, path);
	CHECK_EQ(connect(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return s;
}

static int cli(struct fx *x)
{
	int s = cli_connect(x->path);

	CHECK_EQ(vq_vhu_backend_process(x->e.b), 1);    /* accept */
	CHECK(vq_vhu_backend_connected(x->e.b));
	return s;
}

static void snd(int s, uint32_t req, uint32_t flags, enum vq_vhu_payload kind,
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
	CHECK_EQ(vhu_send(s, &m, fds, nfds), 0);
}

static void snd_u64(int s, uint32_t req, uint64_t v)
{
	snd(s, req, 0, VQ_VHU_P_U64, &v, NULL, 0);
}

static void snd_state(int s, uint32_t req, uint32_t idx, uint32_t num)
{
	uint32_t st[2] = { idx, num };

	snd(s, req, 0, VQ_VHU_P_STATE, st, NULL, 0);
}

static void snd_none(int s, uint32_t req)
{
	snd(s, req, 0, VQ_VHU_P_NONE, NULL, NULL, 0);
}

static void snd_vring_fd(int s, uint32_t req, uint32_t idx, int fd)
{
	struct { uint32_t index; bool nofd; } v = { idx, fd < 0 };

	snd(s, req, 0, VQ_VHU_P_VRING_FD, &v, &fd, fd < 0 ? 0 : 1);
}

static void snd_addr_log(int s, uint32_t idx, uint64_t desc, uint64_t avail,
			 uint64_t used, uint32_t flags, uint64_t log)
{
	struct { uint32_t index, flags; uint64_t desc, used, avail, log; } a =
		{ idx, flags, desc, used, avail, log };

	snd(s, VQ_VHU_SET_VRING_ADDR, 0, VQ_VHU_P_ADDR, &a, NULL, 0);
}

static void snd_addr(int s, uint32_t idx, uint64_t desc, uint64_t avail,
		     uint64_t used)
{
	snd_addr_log(s, idx, desc, avail, used, 0, 0);
}

static void snd_log_base(int s, int fd, uint64_t size, uint64_t offset)
{
	uint64_t v[2] = { size, offset };

	snd(s, VQ_VHU_SET_LOG_BASE, 0, VQ_VHU_P_LOG, v, &fd, 1);
}

static void snd_mem(int s, unsigned n, const struct vq_vhu_region *r,
		    const int *fds)
{
	struct { uint32_t n; struct vq_vhu_region r[VQ_VHU_MEM_TABLE_MAX]; } m;

	memset(&m, 0, sizeof(m));
	m.n = n;
	memcpy(m.r, r, n * sizeof(*r));
	snd(s, VQ_VHU_SET_MEM_TABLE, 0, VQ_VHU_P_MEM, &m, fds, n);
}

static void snd_region(int s, uint32_t req, const struct vq_vhu_region *r, int fd)
{
	snd(s, req, 0, VQ_VHU_P_REGION, r, &fd, fd < 0 ? 0 : 1);
}

/* Handle one pending message. */
static int pump(struct fx *x)
{
	return vq_vhu_backend_process(x->e.b);
}

static void ok(struct fx *x)
{
	CHECK_EQ(pump(x), 1);
}

static struct vq_vhu_msg rcv(int s, uint32_t req, bool ack)
{
	uint8_t buf[VQ_VHU_MSG_MAX];
	int fds[VQ_VHU_MAX_FDS];
	unsigned nfds;
	size_t len;
	struct vq_vhu_msg m;

	CHECK(vhu_recv(s, false, false, buf, &len, fds, &nfds) > 0);
	CHECK_EQ(vq_vhu_decode_reply(buf, len, fds, nfds, req, ack, &m, NULL, 0), 0);
	return m;
}

static uint64_t get_u64(struct fx *x, int s, uint32_t req)
{
	snd_none(s, req);
	ok(x);
	return rcv(s, req, false).u.u64;
}

static void fx_init(struct fx *x)
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
	CHECK(get_u64(x, s, VQ_VHU_GET_FEATURES) & VIRTQ_BIT(VIRTIO_F_VERSION_1));
	close(s);
	CHECK_EQ(pump(x), -ECONNRESET);
	x->fds0 = count_fds();
	x->maps0 = count_maps();
}

static void fx_fini(struct fx *x)
{
	vq_vhu_backend_free(x->e.b);
	munmap(x->g, GSIZE);
	close(x->gfd);
	rmdir(x->dir);
}

/* The connection was closed with err: no leaks, and the next one works. */
static void closed_with(struct fx *x, int s, int r, int err)
{
	int s2;

	fprintf(stderr, "   -> %d: %s\n", r, vq_vhu_backend_error_msg(x->e.b));
	CHECK_EQ(r, err);
	CHECK(!vq_vhu_backend_connected(x->e.b));
	CHECK(vq_vhu_backend_error_msg(x->e.b)[0]);
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

static void expect_closed(struct fx *x, int s, int err)
{
	closed_with(x, s, pump(x), err);
}

static const uint64_t SPLIT = VIRTQ_BIT(VIRTIO_F_VERSION_1);

static struct vq_vhu_region whole(struct fx *x)
{
	(void)x;
	return (struct vq_vhu_region){ .gpa = 0, .size = GSIZE, .uaddr = UA,
				       .mmap_offset = 0 };
}

/* SET_FEATURES + SET_MEM_TABLE(whole guest) + SET_VRING_NUM(0, num). */
static void setup_to_num(struct fx *x, int s, uint64_t features, uint32_t num)
{
	struct vq_vhu_region r = whole(x);

	snd_u64(s, VQ_VHU_SET_FEATURES, features);
	ok(x);
	snd_mem(s, 1, &r, &x->gfd);
	ok(x);
	snd_state(s, VQ_VHU_SET_VRING_NUM, 0, num);
	ok(x);
}

/* ---- bad input, one case per item ---- */

static void bad_truncated_header_frontend_gone(struct fx *x)
{
	int s = cli(x);

	CHECK_EQ(write(s, "\x01\0\0\0\x01\0\0", 7), 7);
	shutdown(s, SHUT_WR);
	expect_closed(x, s, -EPIPE);
}

static void bad_truncated_payload_frontend_stalls(struct fx *x)
{
	int s = cli(x);
	uint32_t h[4] = { VQ_VHU_SET_FEATURES, VQ_VHU_VERSION, 8, 1 };

	CHECK_EQ(write(s, h, 16), 16);  /* 4 of 8 payload bytes, then silence */
	expect_closed(x, s, -ETIMEDOUT);
}

static void bad_oversized_message(struct fx *x)
{
	int s = cli(x);
	uint32_t h[3] = { VQ_VHU_SET_FEATURES, VQ_VHU_VERSION, 4096 };

	CHECK_EQ(write(s, h, 12), 12);
	expect_closed(x, s, -EMSGSIZE);
}

static void bad_wrong_fd_count_kick_without_fd(struct fx *x)
{
	int s = cli(x);
	/* vring 0, "no fd" flag clear, and no fd sent */
	uint32_t m[5] = { VQ_VHU_SET_VRING_KICK, VQ_VHU_VERSION, 8, 0, 0 };

	CHECK_EQ(write(s, m, 20), 20);
	expect_closed(x, s, -EBADF);
}

static void bad_wrong_fd_count_fd_on_set_owner(struct fx *x)
{
	int s = cli(x), fd = eventfd(0, EFD_CLOEXEC);

	snd(s, VQ_VHU_SET_OWNER, 0, VQ_VHU_P_NONE, NULL, &fd, 1);
	close(fd);
	expect_closed(x, s, -EBADF);
}

static void bad_wrong_fd_count_mem_table(struct fx *x)
{
	int s = cli(x);
	struct vq_vhu_region r[2] = { whole(x), { GSIZE, 4096, UA + GSIZE, 0 } };
	uint32_t h[3] = { VQ_VHU_SET_MEM_TABLE, VQ_VHU_VERSION, 8 + 64 };
	uint8_t p[8 + 64] = { 2 };

	memcpy(p + 8, r, sizeof(r));
	/* two regions, one fd */
	{
		struct msghdr mh = { 0 };
		struct iovec iov[2] = { { h, 12 }, { p, sizeof(p) } };
		union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr a; } c;
		struct cmsghdr *cm;

		mh.msg_iov = iov;
		mh.msg_iovlen = 2;
		mh.msg_control = c.b;
		mh.msg_controllen = sizeof(c.b);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &x->gfd, sizeof(int));
		CHECK(sendmsg(s, &mh, 0) > 0);
	}
	expect_closed(x, s, -EBADF);
}

static void bad_unknown_request(struct fx *x)
{
	int s = cli(x);
	uint32_t h[3] = { 23 /* SET_VRING_ENDIAN: not implemented */, VQ_VHU_VERSION, 0 };

	CHECK_EQ(write(s, h, 12), 12);
	expect_closed(x, s, -EOPNOTSUPP);
}

static void bad_ring_addr_before_mem_table(struct fx *x)
{
	int s = cli(x);

	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT);
	ok(x);
	snd_state(s, VQ_VHU_SET_VRING_NUM, 0, 64);
	ok(x);
	snd_addr(s, 0, UA, UA + 0x1000, UA + 0x2000);
	expect_closed(x, s, -EPROTO);
}

static void bad_vring_index_past_queue_count(struct fx *x)
{
	int s = cli(x);

	snd_state(s, VQ_VHU_SET_VRING_NUM, ECHO_NQ, 64);
	expect_closed(x, s, -ERANGE);
}

static void bad_overlapping_regions(struct fx *x)
{
	int s = cli(x), fds[2] = { x->gfd, x->gfd };
	struct vq_vhu_region r[2] = {
		{ 0, 0x10000, UA, 0 }, { 0x8000, 0x10000, UA + 0x100000, 0 },
	};

	snd_mem(s, 2, r, fds);
	expect_closed(x, s, -EINVAL);
}

static void bad_add_mem_reg_overlaps_existing(struct fx *x)
{
	int s = cli(x);
	struct vq_vhu_region a = { 0, 0x10000, UA, 0 };
	struct vq_vhu_region b = { 0x20000, 0x10000, UA + 0x8000, 0x20000 };

	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES,
		VIRTQ_BIT(VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS));
	ok(x);
	snd_region(s, VQ_VHU_ADD_MEM_REG, &a, x->gfd);
	ok(x);
	CHECK_EQ(count_maps(), x->maps0 + 1);
	snd_region(s, VQ_VHU_ADD_MEM_REG, &b, x->gfd);   /* user range overlaps */
	expect_closed(x, s, -EINVAL);
}

static void bad_region_past_end_of_file(struct fx *x)
{
	int s = cli(x);
	struct vq_vhu_region r = { 0, GSIZE * 2, UA, 0 };

	snd_mem(s, 1, &r, &x->gfd);
	expect_closed(x, s, -EINVAL);
}

/* A region whose user address is not aligned like its file offset (or its
 * guest address): a ring the front-end aligned would be misaligned in our
 * mapping, and read in place (found by fuzz_vhu_backend, UBSan). */
static void bad_region_misaligned_mapping(struct fx *x)
{
	int s = cli(x);
	struct vq_vhu_region r = { 0, 0x10000, UA + 4, 0 };

	snd_mem(s, 1, &r, &x->gfd);
	expect_closed(x, s, -EINVAL);
	s = cli(x);
	r = (struct vq_vhu_region){ 8, 0x10000, UA, 0 };
	snd_mem(s, 1, &r, &x->gfd);
	expect_closed(x, s, -EINVAL);
}

static void bad_region_offset_past_end_of_file(struct fx *x)
{
	int s = cli(x);
	struct vq_vhu_region r = { 0, 0x1000, UA, GSIZE };

	snd_mem(s, 1, &r, &x->gfd);
	expect_closed(x, s, -EINVAL);
}

static void bad_ring_addr_outside_map(struct fx *x)
{
	int s = cli(x);

	setup_to_num(x, s, SPLIT, 64);
	/* the used ring runs past the end of guest memory */
	snd_addr(s, 0, UA, UA + 0x1000, UA + GSIZE - 16);
	expect_closed(x, s, -EFAULT);
}

static void bad_ring_addr_misaligned(struct fx *x)
{
	int s = cli(x);

	setup_to_num(x, s, SPLIT, 64);
	snd_addr(s, 0, UA + 8, UA + 0x1000, UA + 0x2000);
	expect_closed(x, s, -EINVAL);
}

static void bad_split_queue_size_not_power_of_two(struct fx *x)
{
	int s = cli(x);

	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT);
	ok(x);
	snd_state(s, VQ_VHU_SET_VRING_NUM, 0, 100);
	expect_closed(x, s, -EINVAL);
}

static void bad_queue_size_over_32768(struct fx *x)
{
	int s = cli(x);

	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT | VIRTQ_BIT(VIRTIO_F_RING_PACKED));
	ok(x);
	snd_state(s, VQ_VHU_SET_VRING_NUM, 0, 32769);
	expect_closed(x, s, -EINVAL);
}

static void bad_frontend_gone_mid_message(struct fx *x)
{
	int s = cli(x);
	uint32_t h[3] = { VQ_VHU_SET_MEM_TABLE, VQ_VHU_VERSION, 8 + 32 };
	uint8_t p[10] = { 1 };
	struct msghdr mh = { 0 };
	struct iovec iov[2] = { { h, 12 }, { p, sizeof(p) } };
	union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr a; } c;
	struct cmsghdr *cm;

	/* header, an fd and 10 of 40 payload bytes; then the front-end dies */
	mh.msg_iov = iov;
	mh.msg_iovlen = 2;
	mh.msg_control = c.b;
	mh.msg_controllen = sizeof(c.b);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &x->gfd, sizeof(int));
	CHECK(sendmsg(s, &mh, 0) > 0);
	shutdown(s, SHUT_WR);
	expect_closed(x, s, -EPIPE);
}

static void bad_features_not_offered(struct fx *x)
{
	int s = cli(x);

	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT | VIRTQ_BIT(38) /* NOTIFICATION_DATA */);
	expect_closed(x, s, -EINVAL);
}

static void bad_features_without_version_1(struct fx *x)
{
	int s = cli(x);

	snd_u64(s, VQ_VHU_SET_FEATURES, VIRTQ_BIT(VIRTIO_F_EVENT_IDX));
	expect_closed(x, s, -EINVAL);
}

static void bad_split_base_reserved_bits(struct fx *x)
{
	int s = cli(x);

	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT);
	ok(x);
	snd_state(s, VQ_VHU_SET_VRING_BASE, 0, 0x10005);
	expect_closed(x, s, -EINVAL);
}

static void bad_request_needs_protocol_feature(struct fx *x)
{
	int s = cli(x);

	snd_none(s, VQ_VHU_GET_MAX_MEM_SLOTS);
	expect_closed(x, s, -EPROTO);
}

/* ---- protocol rules ---- */

/* Lay out a split ring of 64 at guest offset 0 and set it up up to KICK. */
static void split_ring(struct fx *x, int s, uint64_t features, int kick)
{
	setup_to_num(x, s, features, 64);
	snd_addr(s, 0, UA, UA + 0x1000, UA + 0x2000);
	ok(x);
	if (kick >= 0) {
		snd_vring_fd(s, VQ_VHU_SET_VRING_KICK, 0, kick);
		ok(x);
	}
}

static void ring_states_enabled_without_protocol_features(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC);

	split_ring(x, s, SPLIT, k);
	/* "without VHOST_USER_F_PROTOCOL_FEATURES ... enable all rings" */
	CHECK_EQ(x->e.starts, 1);
	CHECK(x->e.q[0].on);
	CHECK_EQ(x->e.q[0].call, -1);
	close(s);
	close(k);
	CHECK_EQ(pump(x), -ECONNRESET);
	CHECK(!x->e.q[0].on);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

static void ring_states_disabled_until_enable(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC);

	split_ring(x, s, SPLIT | VIRTQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES), k);
	CHECK_EQ(x->e.starts, 0);       /* rings start disabled */
	snd_state(s, VQ_VHU_SET_VRING_ENABLE, 0, 1);
	ok(x);
	CHECK_EQ(x->e.starts, 1);
	snd_state(s, VQ_VHU_SET_VRING_ENABLE, 0, 0);
	ok(x);
	CHECK(!x->e.q[0].on);
	CHECK_EQ(x->e.stops, 1);        /* for good, not paused */
	CHECK_EQ(x->e.pauses, 0);
	close(s);
	close(k);
	CHECK_EQ(pump(x), -ECONNRESET);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

/* A new call fd is signalled once: a completion whose call went to the old
 * fd, or that a back-end which died never signalled, still wakes the
 * driver after the front-end replaces the fd (or reconnects). */
static void new_call_fd_signalled_once(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC), c1 = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int c2 = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	uint64_t v;

	split_ring(x, s, SPLIT, k);
	snd_vring_fd(s, VQ_VHU_SET_VRING_CALL, 0, c1);
	ok(x);
	CHECK_EQ(read(c1, &v, 8), 8);
	CHECK_EQ(v, 1);
	snd_vring_fd(s, VQ_VHU_SET_VRING_CALL, 0, c2);
	ok(x);
	CHECK_EQ(read(c2, &v, 8), 8);
	CHECK_EQ(v, 1);
	CHECK_EQ(read(c1, &v, 8), -1);  /* the old one: nothing more */
	CHECK(x->e.q[0].on);
	/* an fd change pauses the ring: the device may keep what serves it */
	CHECK_EQ(x->e.pauses, 2);
	CHECK_EQ(x->e.stops, 0);
	close(s);
	close(k);
	close(c1);
	close(c2);
	CHECK_EQ(pump(x), -ECONNRESET);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

static void get_vring_base_split_stops_ring(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC);
	struct virtq_used *u = (void *)(x->g + 0x2000);
	struct vq_vhu_msg rep;

	setup_to_num(x, s, SPLIT, 64);
	snd_state(s, VQ_VHU_SET_VRING_BASE, 0, 9);
	ok(x);
	u->idx = 7;     /* split: the used index comes from memory */
	snd_addr(s, 0, UA, UA + 0x1000, UA + 0x2000);
	ok(x);
	snd_vring_fd(s, VQ_VHU_SET_VRING_KICK, 0, k);
	ok(x);
	CHECK(x->e.q[0].on);
	CHECK_EQ(vq_dev_get_state(x->e.q[0].vq).avail_idx, 9);
	CHECK_EQ(vq_dev_get_state(x->e.q[0].vq).used_idx, 7);
	snd_state(s, VQ_VHU_GET_VRING_BASE, 0, 0);
	ok(x);
	rep = rcv(s, VQ_VHU_GET_VRING_BASE, false);
	CHECK_EQ(rep.u.state.index, 0);
	CHECK_EQ(rep.u.state.num, 9);
	CHECK(!x->e.q[0].on);           /* stopped */
	CHECK_EQ(x->e.stops, 1);
	CHECK_EQ(x->e.pauses, 0);
	/* a stopped ring restarts on a new kick fd */
	snd_vring_fd(s, VQ_VHU_SET_VRING_KICK, 0, k);
	ok(x);
	CHECK(x->e.q[0].on);
	close(s);
	close(k);
	CHECK_EQ(pump(x), -ECONNRESET);
	memset(x->g, 0, 0x4000);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

static void get_vring_base_packed_both_indices(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC);
	struct vq_vhu_msg rep;

	setup_to_num(x, s, SPLIT | VIRTQ_BIT(VIRTIO_F_RING_PACKED), 48);
	/* avail position 5 wrap 0, used position 3 wrap 1 */
	snd_state(s, VQ_VHU_SET_VRING_BASE, 0, 5 | (3u | 0x8000u) << 16);
	ok(x);
	snd_addr(s, 0, UA, UA + 0x1000, UA + 0x1004);
	ok(x);
	snd_vring_fd(s, VQ_VHU_SET_VRING_KICK, 0, k);
	ok(x);
	CHECK(x->e.q[0].on);
	CHECK_EQ(vq_dev_get_state(x->e.q[0].vq).avail_idx, 5);
	CHECK_EQ(vq_dev_get_state(x->e.q[0].vq).used_idx, 0x8003);
	snd_state(s, VQ_VHU_GET_VRING_BASE, 0, 0);
	ok(x);
	rep = rcv(s, VQ_VHU_GET_VRING_BASE, false);
	CHECK_EQ(rep.u.state.num, 5 | (3u | 0x8000u) << 16);
	CHECK(!x->e.q[0].on);
	close(s);
	close(k);
	CHECK_EQ(pump(x), -ECONNRESET);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

static void reply_ack_success_and_failure(struct fx *x)
{
	int s = cli(x);
	struct { uint32_t index, flags; uint64_t desc, used, avail, log; } a =
		{ 0, 0, UA, UA + 0x2000, UA + 0x1000, 0 };
	int r;

	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, VIRTQ_BIT(VQ_VHU_PROTOCOL_F_REPLY_ACK));
	ok(x);
	snd(s, VQ_VHU_SET_OWNER, VQ_VHU_FLAG_NEED_REPLY, VQ_VHU_P_NONE, NULL, NULL, 0);
	ok(x);
	CHECK_EQ(rcv(s, VQ_VHU_SET_OWNER, true).u.u64, 0);
	/* a refused request is acked non-zero, then the connection closes */
	snd(s, VQ_VHU_SET_VRING_ADDR, VQ_VHU_FLAG_NEED_REPLY, VQ_VHU_P_ADDR, &a, NULL, 0);
	r = pump(x);
	CHECK(rcv(s, VQ_VHU_SET_VRING_ADDR, true).u.u64 != 0);
	closed_with(x, s, r, -EPROTO);
}

/* vhost-user "VHOST_USER_SEND_RARP": legal only with PROTOCOL_F_RARP, which
 * is offered when the device can announce; the guest's MAC is the payload's
 * first six bytes.  A device that could not send it fails the REPLY_ACK and
 * the connection stays. */
static void send_rarp_mac_and_ack(struct fx *x)
{
	static const uint8_t mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };
	static const struct vq_vhu_device_ops no_rarp_ops = {
		.queue_start = echo_start, .queue_stop = echo_stop,
	};
	struct vq_vhu_device d = { .name = "no-rarp", .features = ECHO_FEATURES,
				   .nqueues = 1, .ops = &no_rarp_ops };
	struct vq_vhu_backend *b;
	char path[80];
	uint64_t v = 0;
	int s, r;

	for (unsigned i = 0; i < 6; i++)
		v |= (uint64_t)mac[i] << (8 * i);
	s = cli(x);
	CHECK(get_u64(x, s, VQ_VHU_GET_PROTOCOL_FEATURES) & VIRTQ_BIT(VQ_VHU_PROTOCOL_F_RARP));
	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, VIRTQ_BIT(VQ_VHU_PROTOCOL_F_RARP) |
		VIRTQ_BIT(VQ_VHU_PROTOCOL_F_REPLY_ACK));
	ok(x);
	snd(s, VQ_VHU_SEND_RARP, VQ_VHU_FLAG_NEED_REPLY, VQ_VHU_P_U64, &v, NULL, 0);
	ok(x);
	CHECK_EQ(rcv(s, VQ_VHU_SEND_RARP, true).u.u64, 0);
	CHECK_EQ(x->e.rarps, 1);
	CHECK(!memcmp(x->e.rarp_mac, mac, 6));
	x->e.rarp_err = -ENETDOWN;
	snd(s, VQ_VHU_SEND_RARP, VQ_VHU_FLAG_NEED_REPLY, VQ_VHU_P_U64, &v, NULL, 0);
	ok(x);
	CHECK(rcv(s, VQ_VHU_SEND_RARP, true).u.u64 != 0);
	x->e.rarp_err = 0;
	CHECK(vq_vhu_backend_connected(x->e.b));
	CHECK_EQ(get_u64(x, s, VQ_VHU_GET_QUEUE_NUM), ECHO_NQ);
	close(s);
	CHECK_EQ(pump(x), -ECONNRESET);

	/* not negotiated: a protocol violation */
	s = cli(x);
	snd_u64(s, VQ_VHU_SEND_RARP, v);
	r = pump(x);
	CHECK_EQ(x->e.rarps, 2);
	closed_with(x, s, r, -EPROTO);

	/* a device without send_rarp does not offer it */
	CHECK_EQ(vq_vhu_backend_new(&d, &b), 0);
	snprintf(path, sizeof(path), "%s/norarp", x->dir);
	CHECK_EQ(vq_vhu_backend_listen(b, path, 0), 0);
	s = cli_connect(path);
	CHECK_EQ(vq_vhu_backend_process(b), 1);
	snd_none(s, VQ_VHU_GET_PROTOCOL_FEATURES);
	CHECK_EQ(vq_vhu_backend_process(b), 1);
	CHECK(!(rcv(s, VQ_VHU_GET_PROTOCOL_FEATURES, false).u.u64 &
		VIRTQ_BIT(VQ_VHU_PROTOCOL_F_RARP)));
	close(s);
	vq_vhu_backend_free(b);
	CHECK_EQ(count_fds(), x->fds0);
}

/* vhost-user "VHOST_USER_NET_SET_MTU": legal only with PROTOCOL_F_NET_MTU,
 * offered when the device takes an MTU; 68-65535 (virtio 5.1.4.1), and
 * one the device cannot carry fails the REPLY_ACK with the connection kept. */
static void net_set_mtu_range_and_ack(struct fx *x)
{
	static const struct vq_vhu_device_ops no_mtu_ops = {
		.queue_start = echo_start, .queue_stop = echo_stop,
	};
	static const struct { uint64_t mtu; bool ok; } c[] = {
		{ 1500, true }, { 68, true }, { 9000, true },
		{ 67, false }, { 9001, false }, { 65536, false }, { 1ull << 40, false },
	};
	struct vq_vhu_device d = { .name = "no-mtu", .features = ECHO_FEATURES,
				   .nqueues = 1, .ops = &no_mtu_ops };
	struct vq_vhu_backend *b;
	char path[80];
	int s, r;

	s = cli(x);
	CHECK(get_u64(x, s, VQ_VHU_GET_PROTOCOL_FEATURES) & VIRTQ_BIT(VQ_VHU_PROTOCOL_F_MTU));
	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, VIRTQ_BIT(VQ_VHU_PROTOCOL_F_MTU) |
		VIRTQ_BIT(VQ_VHU_PROTOCOL_F_REPLY_ACK));
	ok(x);
	for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		x->e.mtu = 0;
		snd(s, VQ_VHU_NET_SET_MTU, VQ_VHU_FLAG_NEED_REPLY, VQ_VHU_P_U64, &c[i].mtu, NULL, 0);
		ok(x);
		CHECK_EQ(rcv(s, VQ_VHU_NET_SET_MTU, true).u.u64 == 0, c[i].ok);
		CHECK_EQ(x->e.mtu, c[i].ok ? c[i].mtu : 0);
	}
	CHECK(vq_vhu_backend_connected(x->e.b));
	close(s);
	CHECK_EQ(pump(x), -ECONNRESET);

	/* not negotiated: a protocol violation */
	s = cli(x);
	snd_u64(s, VQ_VHU_NET_SET_MTU, 1500);
	r = pump(x);
	closed_with(x, s, r, -EPROTO);

	/* a device without set_mtu does not offer it */
	CHECK_EQ(vq_vhu_backend_new(&d, &b), 0);
	snprintf(path, sizeof(path), "%s/nomtu", x->dir);
	CHECK_EQ(vq_vhu_backend_listen(b, path, 0), 0);
	s = cli_connect(path);
	CHECK_EQ(vq_vhu_backend_process(b), 1);
	snd_none(s, VQ_VHU_GET_PROTOCOL_FEATURES);
	CHECK_EQ(vq_vhu_backend_process(b), 1);
	CHECK(!(rcv(s, VQ_VHU_GET_PROTOCOL_FEATURES, false).u.u64 &
		VIRTQ_BIT(VQ_VHU_PROTOCOL_F_MTU)));
	close(s);
	vq_vhu_backend_free(b);
	CHECK_EQ(count_fds(), x->fds0);
}

static void status_set_get(struct fx *x)
{
	int s = cli(x);

	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, VIRTQ_BIT(VQ_VHU_PROTOCOL_F_STATUS));
	ok(x);
	snd_u64(s, VQ_VHU_SET_STATUS, 0xb);
	ok(x);
	CHECK_EQ(get_u64(x, s, VQ_VHU_GET_STATUS), 0xb);
	close(s);
	CHECK_EQ(pump(x), -ECONNRESET);
}

static void reset_device_forgets_state(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC);
	unsigned resets = x->e.resets;

	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, VIRTQ_BIT(VQ_VHU_PROTOCOL_F_RESET_DEVICE));
	ok(x);
	split_ring(x, s, SPLIT, k);
	CHECK(x->e.q[0].on);
	snd_none(s, VQ_VHU_RESET_DEVICE);
	ok(x);
	CHECK(!x->e.q[0].on);
	CHECK_EQ(vq_vhu_backend_features(x->e.b), 0);
	CHECK_EQ(x->e.resets, resets + 1);
	CHECK(vq_vhu_backend_connected(x->e.b));        /* ownership retained */
	close(s);
	close(k);
	CHECK_EQ(pump(x), -ECONNRESET);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

static void mem_slots_add_remove(struct fx *x)
{
	int s = cli(x);
	struct vq_vhu_region a = { 0, 0x10000, UA, 0 };
	struct vq_vhu_region b = { 0x100000, 0x10000, UA + 0x100000, 0x10000 };

	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES,
		VIRTQ_BIT(VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS));
	ok(x);
	CHECK_EQ(get_u64(x, s, VQ_VHU_GET_MAX_MEM_SLOTS), VQ_MEM_MAX_REGIONS);
	snd_region(s, VQ_VHU_ADD_MEM_REG, &a, x->gfd);
	ok(x);
	snd_region(s, VQ_VHU_ADD_MEM_REG, &b, x->gfd);
	ok(x);
	CHECK_EQ(count_maps(), x->maps0 + 2);
	/* REM_MEM_REG: an fd is tolerated and closed unused (spec) */
	snd_region(s, VQ_VHU_REM_MEM_REG, &a, x->gfd);
	ok(x);
	CHECK_EQ(count_maps(), x->maps0 + 1);
	CHECK_EQ(count_fds(), x->fds0 + 2);     /* only the connection, both ends */
	snd_region(s, VQ_VHU_REM_MEM_REG, &a, -1);
	expect_closed(x, s, -ENOENT);
}

/*
 * QEMU 7.2 sends ADD_MEM_REG and REM_MEM_REG from each vhost device of the
 * connection (one per queue pair of a multiqueue net device): the same
 * region twice is one mapping with two references, the first REM keeps it,
 * the second unmaps it.  The same addresses at another file offset are an
 * overlap, as before.
 */
static void mem_slots_same_region_twice(struct fx *x)
{
	int s = cli(x);
	struct vq_vhu_region a = { 0, 0x10000, UA, 0 };
	struct vq_vhu_region moved = { 0, 0x10000, UA, 0x10000 };

	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES,
		VIRTQ_BIT(VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS));
	ok(x);
	snd_region(s, VQ_VHU_ADD_MEM_REG, &a, x->gfd);
	ok(x);
	snd_region(s, VQ_VHU_ADD_MEM_REG, &a, x->gfd);
	ok(x);
	CHECK_EQ(count_maps(), x->maps0 + 1);
	CHECK_EQ(count_fds(), x->fds0 + 2);     /* the second fd was closed */
	snd_region(s, VQ_VHU_REM_MEM_REG, &a, -1);
	ok(x);
	CHECK_EQ(count_maps(), x->maps0 + 1);   /* one reference left */
	snd_region(s, VQ_VHU_REM_MEM_REG, &a, -1);
	ok(x);
	CHECK_EQ(count_maps(), x->maps0);
	snd_region(s, VQ_VHU_ADD_MEM_REG, &a, x->gfd);
	ok(x);
	snd_region(s, VQ_VHU_ADD_MEM_REG, &moved, x->gfd);
	expect_closed(x, s, -EINVAL);
}

static void listen_refuses_non_sockets(struct fx *x)
{
	struct vq_vhu_backend *b;
	struct vq_vhu_device d = { .features = ECHO_FEATURES, .nqueues = 1 };
	char p[96], l[96];
	struct stat st;
	int fd;

	CHECK_EQ(vq_vhu_backend_new(&d, &b), 0);
	snprintf(p, sizeof(p), "%s/file", x->dir);
	fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	close(fd);
	CHECK_EQ(vq_vhu_backend_listen(b, p, 0), -EEXIST);
	CHECK_EQ(stat(p, &st), 0);
	CHECK(S_ISREG(st.st_mode));             /* not clobbered */
	unlink(p);
	/* a symlink, even to a socket, is not followed */
	snprintf(l, sizeof(l), "%s/link", x->dir);
	CHECK_EQ(symlink(x->path, l), 0);
	CHECK_EQ(vq_vhu_backend_listen(b, l, 0), -EEXIST);
	unlink(l);
	/* a live socket is not stolen */
	CHECK_EQ(vq_vhu_backend_listen(b, x->path, 0), -EADDRINUSE);
	/* a stale one is replaced, with mode 0600 */
	snprintf(p, sizeof(p), "%s/stale", x->dir);
	{
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		int s = socket(AF_UNIX, SOCK_STREAM, 0);

		strcpy(sa.sun_path, p);
		CHECK_EQ(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
		close(s);
	}
	CHECK_EQ(vq_vhu_backend_listen(b, p, 0), 0);
	CHECK_EQ(lstat(p, &st), 0);
	CHECK(S_ISSOCK(st.st_mode));
	CHECK_EQ(st.st_mode & 0777, 0600);
	vq_vhu_backend_free(b);
	CHECK(lstat(p, &st) < 0);               /* our socket is removed */
}

static void client_mode_reconnects(struct fx *x)
{
	struct vq_vhu_backend *b;
	struct vq_vhu_device d = { .features = ECHO_FEATURES, .nqueues = 1 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int ls, s;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/fe", x->dir);
	ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK_EQ(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
	CHECK_EQ(listen(ls, 2), 0);
	CHECK_EQ(vq_vhu_backend_new(&d, &b), 0);
	CHECK_EQ(vq_vhu_backend_connect(b, sa.sun_path, 50), 0);
	s = accept(ls, NULL, NULL);
	CHECK(s >= 0);
	CHECK(vq_vhu_backend_connected(b));
	close(s);
	CHECK_EQ(vq_vhu_backend_process(b), -ECONNRESET);
	CHECK(!vq_vhu_backend_connected(b));
	CHECK(vq_vhu_backend_timeout_ms(b) > 0);
	CHECK_EQ(vq_vhu_backend_fd(b), -1);
	usleep(60000);
	CHECK_EQ(vq_vhu_backend_timeout_ms(b), 0);
	CHECK_EQ(vq_vhu_backend_process(b), 1);
	CHECK(vq_vhu_backend_connected(b));
	s = accept(ls, NULL, NULL);
	CHECK(s >= 0);
	close(s);
	vq_vhu_backend_free(b);
	close(ls);
	unlink(sa.sun_path);
}

/* ---- the front-end against a back-end that answers badly ---- */

static int fe_bad(const void *reply, size_t len, int fd, bool half_close,
		  char *err, size_t errlen)
{
	struct vq_vhu_frontend_config c = {
		.features = ECHO_FEATURES, .nqueues = 1, .queue_size = 64,
		.mem_size = 1 << 20, .timeout_ms = 200, .err = err, .errlen = errlen,
	};
	struct vq_vhu_frontend *f = (void *)1;
	int sv[2], r;

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	if (len) {
		struct msghdr mh = { 0 };
		struct iovec iov = { (void *)reply, len };
		union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr a; } cb;

		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		if (fd >= 0) {
			struct cmsghdr *cm;

			mh.msg_control = cb.b;
			mh.msg_controllen = sizeof(cb.b);
			cm = CMSG_FIRSTHDR(&mh);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(cm), &fd, sizeof(int));
		}
		CHECK(sendmsg(sv[1], &mh, 0) == (ssize_t)len);
	}
	if (half_close)
		shutdown(sv[1], SHUT_WR);
	r = vq_vhu_frontend_adopt_fd(sv[0], &c, &f);
	CHECK(f == NULL);
	close(sv[1]);
	fprintf(stderr, "   -> %d: %s\n", r, err);
	return r;
}

static void frontend_bad_replies(struct fx *x)
{
	char err[256];
	int fds0 = count_fds(), maps0 = count_maps(), efd;
	uint32_t rep[5] = { VQ_VHU_GET_FEATURES, VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY, 8, 0, 1 };

	(void)x;
	/* GET_FEATURES reply without the reply flag */
	rep[1] = VQ_VHU_VERSION;
	CHECK_EQ(fe_bad(rep, 20, -1, false, err, sizeof(err)), -EINVAL);
	/* a reply to another request */
	rep[0] = VQ_VHU_GET_PROTOCOL_FEATURES;
	rep[1] = VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY;
	CHECK_EQ(fe_bad(rep, 20, -1, false, err, sizeof(err)), -EPROTO);
	/* truncated, then the back-end is gone */
	rep[0] = VQ_VHU_GET_FEATURES;
	CHECK_EQ(fe_bad(rep, 14, -1, true, err, sizeof(err)), -EPIPE);
	/* oversized */
	rep[2] = 4096;
	CHECK_EQ(fe_bad(rep, 20, -1, false, err, sizeof(err)), -EMSGSIZE);
	/* an fd where none belongs: refused and closed */
	rep[2] = 8;
	efd = eventfd(0, EFD_CLOEXEC);
	CHECK_EQ(fe_bad(rep, 20, efd, false, err, sizeof(err)), -EBADF);
	close(efd);
	/* no answer at all */
	CHECK_EQ(fe_bad(NULL, 0, -1, false, err, sizeof(err)), -ETIMEDOUT);
	/* VERSION_1 not offered */
	rep[3] = 0;
	rep[4] = 0;
	CHECK_EQ(fe_bad(rep, 20, -1, false, err, sizeof(err)), -ENOTSUP);
	CHECK_EQ(count_fds(), fds0);
	CHECK_EQ(count_maps(), maps0);
}

/* The program's SIGTERM handler: no SA_RESTART, so serve's poll returns. */
static volatile sig_atomic_t serve_stop;

static void serve_on_term(int sig)
{
	(void)sig;
	serve_stop = 1;
}

/* The blocking serve helper ends promptly on SIGTERM (conventions). */
static void serve_ends_on_sigterm(struct fx *x)
{
	char path[96], err[256] = "";
	struct vq_vhu_frontend_config c = {
		.features = ECHO_FEATURES, .nqueues = 1, .queue_size = 64,
		.mem_size = 1 << 20, .err = err, .errlen = sizeof(err),
	};
	struct vq_vhu_frontend *f = NULL;
	struct stat st;
	int status = 0, r = -1;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/serve", x->dir);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct sigaction sa = { .sa_handler = serve_on_term };
		struct echo e;

		echo_init(&e);
		if (sigaction(SIGTERM, &sa, NULL) || vq_vhu_backend_listen(e.b, path, 0))
			_exit(2);
		r = vq_vhu_backend_serve(e.b, &serve_stop, false);
		vq_vhu_backend_free(e.b);
		_exit(r ? 3 : 0);
	}
	for (int i = 0; i < 300; i++) {
		r = vq_vhu_frontend_connect(path, &c, &f);
		if (r != -ENOENT && r != -ECONNREFUSED)
			break;
		usleep(10000);
	}
	CHECK_EQ(r, 0);
	CHECK_EQ(vq_vhu_frontend_start(f), 0);
	vq_vhu_frontend_free(f);
	CHECK_EQ(kill(pid, SIGTERM), 0);
	for (int i = 0; i < 200 && waitpid(pid, &status, WNOHANG) == 0; i++)
		usleep(10000);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(lstat(path, &st) < 0);    /* the socket was removed */
}

#define T(fn) do { fprintf(stderr, "-- %s\n", #fn); fn(&x); } while (0)


/* ---- migration: the dirty log (vhost-user "Migration") ---- */

#define LOG_SHMFD VIRTQ_BIT(VQ_VHU_PROTOCOL_F_LOG_SHMFD)
#define LOG_ALL VIRTQ_BIT(VQ_VHU_F_LOG_ALL)
#define PROTO VIRTQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES)
/* GSIZE is 256 pages: a log of 32 bytes covers it exactly */
#define LOG_BYTES (GSIZE / VQ_LOG_PAGE / 8)

static int log_memfd(uint64_t size)
{
	int fd = memfd_create("vhu-test-log", MFD_CLOEXEC);

	CHECK(fd >= 0);
	CHECK_EQ(ftruncate(fd, (off_t)size), 0);
	return fd;
}

static bool page_dirty(const uint8_t *log, uint64_t gpa)
{
	uint64_t page = gpa / VQ_LOG_PAGE;

	return log[page / 8] & (1u << (page % 8));
}

static unsigned dirty_pages(const uint8_t *log)
{
	unsigned n = 0;

	for (unsigned i = 0; i < LOG_BYTES; i++)
		n += (unsigned)__builtin_popcount(log[i]);
	return n;
}

/* One chain through the echo device: in bytes read at rd, written at wr
 * (a buffer of wlen bytes). */
static void echo_one(struct fx *x, struct vq_drv *d, uint64_t rd, uint32_t in,
		     uint64_t wr, uint32_t wlen)
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
static void log_ring(struct fx *x, int s, uint64_t f, int kick, uint32_t flags,
		     uint64_t log_addr)
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

/* "All the modifications to memory pointed by vring 'descriptor' should be
 * marked.  Modifications to 'used' vring should be marked if
 * VHOST_VRING_F_LOG is part of ring's flags."  QEMU's order: SET_LOG_BASE,
 * then SET_FEATURES with LOG_ALL, while the rings run. */
static void migration_log(struct fx *x, bool pk)
{
	uint64_t rf = SPLIT | (pk ? VIRTQ_BIT(VIRTIO_F_RING_PACKED) : 0);
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC), lfd = log_memfd(4096);
	uint8_t *log = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, lfd, 0);
	struct vq_drv_config dc = { .features = rf, .num = 64,
		.ring = { x->g, x->g + 0x1000, x->g + 0x2000 } };
	struct vq_drv *d;

	CHECK(log != MAP_FAILED);
	CHECK(get_u64(x, s, VQ_VHU_GET_FEATURES) & LOG_ALL);
	log_ring(x, s, rf | PROTO, k, VQ_VHU_VRING_F_LOG, 0x2000);
	CHECK_EQ(vq_drv_new(&dc, &d), 0);
	echo_one(x, d, 0x10000, 64, 0x20800, 64);
	CHECK(!memcmp(x->g + 0x20800, x->g + 0x10000, 64));

	snd_log_base(s, lfd, LOG_BYTES, 0);
	ok(x);
	CHECK_EQ(rcv(s, VQ_VHU_SET_LOG_BASE, false).size, 0);
	echo_one(x, d, 0x10000, 64, 0x20800, 64);
	CHECK_EQ(dirty_pages(log), 0);  /* a log, but LOG_ALL not yet set */

	snd_u64(s, VQ_VHU_SET_FEATURES, rf | PROTO | LOG_ALL);
	ok(x);
	CHECK(x->e.q[0].on);
	echo_one(x, d, 0x10000, 64, 0x20800, 64);
	CHECK(page_dirty(log, 0x20800));        /* the buffer written */
	CHECK(!page_dirty(log, 0x10000));       /* the buffer read */
	CHECK(page_dirty(log, 0x2000));         /* used ring / device area */
	CHECK(!page_dirty(log, 0x1000));        /* the driver's area */
	CHECK_EQ(page_dirty(log, 0), pk);       /* packed descriptors are written */
	CHECK_EQ(dirty_pages(log), pk ? 3u : 2u);

	/* only the bytes written: 64 of an 8 KiB buffer; and a write that
	 * crosses a page marks both pages */
	memset(log, 0, LOG_BYTES);
	echo_one(x, d, 0x10000, 64, 0x30000, 8192);
	CHECK(page_dirty(log, 0x30000) && !page_dirty(log, 0x31000));
	echo_one(x, d, 0x10000, 64, 0x41fe0, 64);
	CHECK(page_dirty(log, 0x41000) && page_dirty(log, 0x42000));

	if (!pk) {
		/* split, used-ring logging off for this ring: the used ring is
		 * not marked, the data still is (the address change restarts
		 * the ring where it was) */
		snd_addr_log(s, 0, UA, UA + 0x1000, UA + 0x2000, 0, 0);
		ok(x);
		memset(log, 0, LOG_BYTES);
		echo_one(x, d, 0x10000, 64, 0x20800, 64);
		CHECK(page_dirty(log, 0x20800) && !page_dirty(log, 0x2000));
		CHECK_EQ(dirty_pages(log), 1);
	}

	{
		/* QEMU replaces the log (memory hotplug grows it) while the
		 * rings run: marks go to the new one, the old is unmapped */
		int lfd2 = log_memfd(4096), maps = count_maps();
		uint8_t *log2 = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				     MAP_SHARED, lfd2, 0);

		CHECK(log2 != MAP_FAILED);
		snd_log_base(s, lfd2, 2 * LOG_BYTES, 0);
		ok(x);
		CHECK_EQ(rcv(s, VQ_VHU_SET_LOG_BASE, false).size, 0);
		CHECK_EQ(count_maps(), maps + 1);       /* ours, not the old one */
		memset(log, 0, LOG_BYTES);
		echo_one(x, d, 0x10000, 64, 0x20800, 64);
		CHECK_EQ(dirty_pages(log), 0);
		CHECK(page_dirty(log2, 0x20800));
		/* (split: used-ring logging was turned off above) */
		CHECK_EQ(page_dirty(log2, 0x2000), pk);
		munmap(log2, 4096);
		close(lfd2);
	}

	/* migration over: LOG_ALL cleared, nothing more is logged */
	snd_u64(s, VQ_VHU_SET_FEATURES, rf | PROTO);
	ok(x);
	memset(log, 0, LOG_BYTES);
	echo_one(x, d, 0x10000, 64, 0x20800, 64);
	CHECK_EQ(dirty_pages(log), 0);
	CHECK(x->e.q[0].on);

	vq_drv_free(d);
	munmap(log, 4096);
	close(lfd);
	close(s);
	close(k);
	CHECK_EQ(pump(x), -ECONNRESET);
	CHECK_EQ(count_maps(), x->maps0);       /* the log was unmapped */
	CHECK_EQ(count_fds(), x->fds0);
	memset(x->g, 0, 0x50000);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

static void migration_log_split(struct fx *x) { migration_log(x, false); }
static void migration_log_packed(struct fx *x) { migration_log(x, true); }

static void bad_log_base_without_log_shmfd(struct fx *x)
{
	int s = cli(x), lfd = log_memfd(4096);

	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT | PROTO);
	ok(x);
	snd_log_base(s, lfd, LOG_BYTES, 0);
	close(lfd);
	expect_closed(x, s, -EPROTO);
}

static void bad_log_base_past_end_of_file(struct fx *x)
{
	int s = cli(x), lfd = log_memfd(4096);

	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT | PROTO);
	ok(x);
	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, LOG_SHMFD);
	ok(x);
	snd_log_base(s, lfd, 4096, 8);
	close(lfd);
	expect_closed(x, s, -EINVAL);
}

static void bad_log_base_without_fd(struct fx *x)
{
	int s = cli(x);
	uint64_t v[2] = { LOG_BYTES, 0 };

	snd(s, VQ_VHU_SET_LOG_BASE, 0, VQ_VHU_P_LOG, v, NULL, 0);
	expect_closed(x, s, -EBADF);
}

/* The log must have a bit for every page we could write. */
static void bad_log_smaller_than_guest_memory(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC), lfd = log_memfd(4096);

	log_ring(x, s, SPLIT | PROTO, k, VQ_VHU_VRING_F_LOG, 0x2000);
	snd_log_base(s, lfd, LOG_BYTES / 2, 0);
	ok(x);
	rcv(s, VQ_VHU_SET_LOG_BASE, false);
	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT | PROTO | LOG_ALL);
	close(lfd);
	close(k);
	expect_closed(x, s, -EINVAL);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

/* "the bit offset of the last byte of the ring must fall within the size
 * supplied by VhostUserLog" */
static void bad_used_log_address_past_log(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC), lfd = log_memfd(4096);

	log_ring(x, s, SPLIT | PROTO | LOG_ALL, k, VQ_VHU_VRING_F_LOG, 0x2000);
	snd_log_base(s, lfd, LOG_BYTES, 0);
	ok(x);
	rcv(s, VQ_VHU_SET_LOG_BASE, false);
	snd_addr_log(s, 0, UA, UA + 0x1000, UA + 0x2000, VQ_VHU_VRING_F_LOG,
		     GSIZE - 0x100);
	close(lfd);
	close(k);
	expect_closed(x, s, -EINVAL);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

/* ---- IOMMU support: the IOTLB (vhost-user "IOMMU support") ---- */

#define AP VIRTQ_BIT(VIRTIO_F_ACCESS_PLATFORM)
#define PACKED VIRTQ_BIT(VIRTIO_F_RING_PACKED)
#define P_BACKEND_REQ VIRTQ_BIT(VQ_VHU_PROTOCOL_F_BACKEND_REQ)
#define P_REPLY_ACK VIRTQ_BIT(VQ_VHU_PROTOCOL_F_REPLY_ACK)
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
	CHECK_EQ(vhu_send(s, &m, NULL, 0), 0);
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
	int r = vhu_recv(ch, false, true, buf, &len, fds, &nfds);

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
	int k;          /* queue 0's kick (non-blocking) */
	bool pk;
	struct vq_drv *d;
};

/* VERSION_1 | ACCESS_PLATFORM (| RING_PACKED) | PROTOCOL_FEATURES,
 * REPLY_ACK | BACKEND_REQ, the back-end channel, the whole guest, queue 0
 * of 64 at IOVAs. */
static void iotlb_setup(struct fx *x, struct iox *io, bool pk)
{
	struct vq_vhu_region r = whole(x);
	int sv[2];

	memset(io, 0, sizeof(*io));
	io->pk = pk;
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
	close(sv[1]);
	io->ch = sv[0];
	snd_mem(io->s, 1, &r, &x->gfd);
	ok(x);
	snd_state(io->s, VQ_VHU_SET_VRING_NUM, 0, 64);
	ok(x);
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

/* The pattern the buffers carry: byte i of the 4 KiB source. */
static void fill_src(struct fx *x, uint64_t gpa, uint32_t len, uint8_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		x->g[gpa + i] = (uint8_t)(seed + i * 7 + (i >> 8));
}

/*
 * "IOMMU support": with VIRTIO_F_ACCESS_PLATFORM every address the back-end
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
	expect_miss(io.ch, DATA_IOVA + 0x800, VQ_ACCESS_RO);
	waiting(x, &io);
	map_page(x, io.s, DATA_IOVA, 0x10000, VQ_VHU_IOTLB_PERM_RO);
	answered(x, &io);
	expect_miss(io.ch, DATA_IOVA + 0x1000, VQ_ACCESS_RO);
	waiting(x, &io);
	map_page(x, io.s, DATA_IOVA + 0x1000, 0x11000, VQ_VHU_IOTLB_PERM_RO);
	answered(x, &io);
	expect_miss(io.ch, DATA_IOVA + 0x10800, VQ_ACCESS_WO);
	waiting(x, &io);
	map_page(x, io.s, DATA_IOVA + 0x10000, 0x31000, VQ_VHU_IOTLB_PERM_WO);
	answered(x, &io);
	expect_miss(io.ch, DATA_IOVA + 0x11000, VQ_ACCESS_WO);
	waiting(x, &io);
	map_page(x, io.s, DATA_IOVA + 0x11000, 0x20000, VQ_VHU_IOTLB_PERM_WO);
	answered(x, &io);
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

/* IOTLB_MSG belongs to VIRTIO_F_ACCESS_PLATFORM, SET_BACKEND_REQ_FD to
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
	expect_miss(io.ch, DATA_IOVA, VQ_ACCESS_RO);
	waiting(x, &io);
	map_page(x, io.s, DATA_IOVA, 0x10000, VQ_VHU_IOTLB_PERM_RO);
	answered(x, &io);
	expect_miss(io.ch, DATA_IOVA + 0x10000, VQ_ACCESS_WO);
	waiting(x, &io);
	map_page(x, io.s, DATA_IOVA + 0x10000, 0x30000, VQ_VHU_IOTLB_PERM_WO);
	answered(x, &io);
	done(&io, 256);
	CHECK(vq_vhu_backend_connected(x->e.b));
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

/* VIRTIO_F_ACCESS_PLATFORM says what the ring addresses are: it cannot
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
 * VIRTIO_F_ACCESS_PLATFORM: renegotiated without it, descriptor addresses
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
		P_REPLY_ACK | P_BACKEND_REQ | VIRTQ_BIT(VQ_VHU_PROTOCOL_F_RESET_DEVICE));
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

/* ---- postcopy (vhost-user.rst: PAGEFAULT, POSTCOPY_ADVISE/LISTEN/END) ---- */

#define P_PAGEFAULT VIRTQ_BIT(VQ_VHU_PROTOCOL_F_PAGEFAULT)
#define P_SLOTS VIRTQ_BIT(VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS)

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
	CHECK(vhu_recv(s, false, false, buf, &len, fds, &nfds) > 0);
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

	vq_vhu_backend_postcopy_stats(x->e.b, &st0);
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
	snd_addr(s, 0, UA, UA + 0x1000, UA + 0x2000);
	ok(x);
	snd_vring_fd(s, VQ_VHU_SET_VRING_KICK, 0, k);
	ok(x);
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
	vq_vhu_backend_postcopy_stats(x->e.b, &st);
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
	snd_addr(s, 0, UA, UA + 0x1000, UA + 0x2000);
	ok(x);
	snd_vring_fd(s, VQ_VHU_SET_VRING_KICK, 0, k);
	ok(x);
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
	T(bad_truncated_header_frontend_gone);
	T(bad_truncated_payload_frontend_stalls);
	T(bad_oversized_message);
	T(bad_wrong_fd_count_kick_without_fd);
	T(bad_wrong_fd_count_fd_on_set_owner);
	T(bad_wrong_fd_count_mem_table);
	T(bad_unknown_request);
	T(bad_ring_addr_before_mem_table);
	T(bad_vring_index_past_queue_count);
	T(bad_overlapping_regions);
	T(bad_add_mem_reg_overlaps_existing);
	T(bad_region_misaligned_mapping);
	T(mem_slots_same_region_twice);
	T(bad_region_past_end_of_file);
	T(bad_region_offset_past_end_of_file);
	T(bad_ring_addr_outside_map);
	T(bad_ring_addr_misaligned);
	T(bad_split_queue_size_not_power_of_two);
	T(bad_queue_size_over_32768);
	T(bad_frontend_gone_mid_message);
	T(bad_features_not_offered);
	T(bad_features_without_version_1);
	T(bad_split_base_reserved_bits);
	T(bad_request_needs_protocol_feature);
	T(ring_states_enabled_without_protocol_features);
	T(ring_states_disabled_until_enable);
	T(new_call_fd_signalled_once);
	T(get_vring_base_split_stops_ring);
	T(get_vring_base_packed_both_indices);
	T(reply_ack_success_and_failure);
	T(send_rarp_mac_and_ack);
	T(net_set_mtu_range_and_ack);
	T(status_set_get);
	T(reset_device_forgets_state);
	T(mem_slots_add_remove);
	T(migration_log_split);
	T(migration_log_packed);
	T(bad_log_base_without_log_shmfd);
	T(bad_log_base_past_end_of_file);
	T(bad_log_base_without_fd);
	T(bad_log_smaller_than_guest_memory);
	T(bad_used_log_address_past_log);
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
	T(postcopy_add_mem_reg_faults_served);
	T(postcopy_set_mem_table_then_frontend_gone);
	T(bad_postcopy_out_of_order);
	T(listen_refuses_non_sockets);
	T(client_mode_reconnects);
	T(frontend_bad_replies);
	T(serve_ends_on_sigterm);
	fx_fini(&x);
	return 0;
}
