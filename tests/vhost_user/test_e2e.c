// SPDX-License-Identifier: MIT
/*
 * Our front-end against our back-end with the echo device, over a real UNIX
 * socket between two processes (fork): split and packed, IN_ORDER on and
 * off, EVENT_IDX on and off.  Data must round-trip intact, GET_VRING_BASE
 * must return the exact ring position, a ring started again from it must
 * serve on from there, a front-end that vanishes mid-traffic must leave
 * the back-end serving the next connection, and the back-end must not
 * leak fds or guest mappings across connections.
 */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <virtq/guest/frontend.h>

#include "echo_dev.h"

#define QSIZE 64
#define BUFSZ 2048

struct tcase {
	const char *name;
	bool packed, in_order, event_idx, indirect, no_mem_slots, hugetlb;
};

#define NR_HUGEPAGES "/proc/sys/vm/nr_hugepages"
#define HUGE_NEED 8L     /* 2 MiB pages: two front-ends' 4 MiB guests, with room */

static long read_long(const char *path, const char *key)
{
	FILE *f = fopen(path, "r");
	char line[128];
	long n = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!key) {
			if (sscanf(line, "%ld", &n) != 1)
				n = -1;
			break;
		}
		if (!strncmp(line, key, strlen(key)) &&
		    sscanf(line + strlen(key), "%ld", &n) == 1)
			break;
	}
	fclose(f);
	return n;
}

static bool write_long(const char *path, long v)
{
	FILE *f = fopen(path, "w");
	bool ok;

	if (!f)
		return false;
	ok = fprintf(f, "%ld\n", v) > 0;
	return fclose(f) == 0 && ok;
}

/* Free huge pages for a hugetlbfs-backed guest: when too few are free,
 * reserve the missing ones (root), and note how many there were so that
 * hugetlb_give_back() restores it.  Returns whether enough are free. */
static long hugetlb_saved = -1;

static bool hugetlb_reserve(void)
{
	long free_pages = read_long("/proc/meminfo", "HugePages_Free:"), nr;

	if (free_pages >= HUGE_NEED)
		return true;
	nr = read_long(NR_HUGEPAGES, NULL);
	if (nr < 0 || free_pages < 0 ||
	    !write_long(NR_HUGEPAGES, nr + HUGE_NEED - free_pages))
		return false;
	hugetlb_saved = nr;
	return read_long("/proc/meminfo", "HugePages_Free:") >= HUGE_NEED;
}

static void hugetlb_give_back(void)
{
	if (hugetlb_saved >= 0)
		write_long(NR_HUGEPAGES, hugetlb_saved);
	hugetlb_saved = -1;
}

static void backend_child(const char *path, int nconn)
{
	struct echo e;
	time_t end = time(NULL) + 60;
	int fds0, maps0, ended = 0;

	echo_init(&e);
	if (vq_vhu_backend_listen(e.b, path, 0)) {
		fprintf(stderr, "child: listen failed\n");
		_exit(2);
	}
	fds0 = count_fds();
	maps0 = count_maps();
	while (ended < nconn) {
		int r = echo_poll_once(&e, 1000);

		if (time(NULL) > end) {
			fprintf(stderr, "child: timed out\n");
			_exit(3);
		}
		if (r >= 0)
			continue;
		ended++;
		if (r != -ECONNRESET) {
			fprintf(stderr, "child: connection closed with %d: %s\n", r,
				vq_vhu_backend_error_msg(e.b));
			_exit(4);
		}
		if (count_fds() != fds0 || count_maps() != maps0) {
			fprintf(stderr, "child: leak after disconnect: fds %d -> %d, memfd maps %d -> %d\n",
				fds0, count_fds(), maps0, count_maps());
			_exit(5);
		}
		if (e.resets != (unsigned)ended) {
			fprintf(stderr, "child: reset callback not called\n");
			_exit(6);
		}
	}
	vq_vhu_backend_free(e.b);
	_exit(0);
}

static struct vq_vhu_frontend *fe_connect(const char *path, const struct tcase *t)
{
	char err[256] = "";
	struct vq_vhu_frontend_config c = {
		.features = VQ_BIT(VQ_F_VERSION_1) |
			    (t->packed ? VQ_BIT(VQ_F_RING_PACKED) : 0) |
			    (t->in_order ? VQ_BIT(VQ_F_IN_ORDER) : 0) |
			    (t->event_idx ? VQ_BIT(VQ_F_EVENT_IDX) : 0) |
			    (t->indirect ? VQ_BIT(VQ_F_INDIRECT_DESC) : 0),
		.nqueues = ECHO_NQ, .queue_size = QSIZE, .mem_size = 4u << 20,
		.indirect_max = t->indirect ? 8 : 0,
		.hugetlb = t->hugetlb,
		.protocol_mask_out = t->no_mem_slots ?
			VQ_BIT(VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS) : 0,
		.err = err, .errlen = sizeof(err),
	};
	struct vq_vhu_frontend *f = NULL;
	int r = -1;

	for (int i = 0; i < 300; i++) {
		r = vq_vhu_frontend_connect(path, &c, &f);
		if (r != -ENOENT && r != -ECONNREFUSED)
			break;
		usleep(10000);
	}
	if (r)
		fprintf(stderr, "connect: %d %s\n", r, err);
	CHECK_EQ(r, 0);
	return f;
}

struct slot {
	uint8_t *out, *in;
	uint64_t out_gpa, in_gpa;
	uint32_t len;
};

/* While logging is on: is every page of [gpa, gpa+len) marked? */
static bool logged(struct vq_vhu_frontend *f, uint64_t gpa, uint32_t len)
{
	uint64_t size;
	const uint8_t *log = vq_vhu_frontend_log(f, &size);

	for (uint64_t p = gpa / VQ_DIRTY_LOG_PAGE; len && p <= (gpa + len - 1) / VQ_DIRTY_LOG_PAGE; p++)
		if (p / 8 >= size ||
		    !(__atomic_load_n(&log[p / 8], __ATOMIC_RELAXED) & (1u << (p % 8))))
			return false;
	return true;
}

/* Echo total buffers through queue qi; returns descriptors used.  While
 * logging is on, every byte written must be in a page marked before the
 * buffer came back. */
static uint64_t traffic(struct vq_vhu_frontend *f, unsigned qi, unsigned total,
			uint64_t *seed)
{
	struct vq_drv *d = vq_vhu_frontend_queue(f, qi);
	int kick = vq_vhu_frontend_kick_fd(f, qi), call = vq_vhu_frontend_call_fd(f, qi);
	struct slot s[QSIZE];
	unsigned freel[QSIZE], nfree = 0, sent = 0, done = 0;
	uint64_t ndesc = 0;

	CHECK(d);
	for (unsigned i = 0; i < QSIZE; i++) {
		s[i].out = vq_vhu_frontend_alloc(f, BUFSZ, &s[i].out_gpa);
		s[i].in = vq_vhu_frontend_alloc(f, BUFSZ, &s[i].in_gpa);
		CHECK(s[i].out && s[i].in);
		freel[nfree++] = i;
	}
	while (done < total) {
		bool progress = false;
		void *tok;
		uint32_t len;

		while (sent < total && nfree && vq_drv_free_slots(d) >= 4) {
			unsigned i = freel[--nfree];
			uint32_t n = 1 + vq_test_rand(seed) % BUFSZ;
			uint32_t o1 = 1 + vq_test_rand(seed) % n;
			uint32_t i1 = 1 + vq_test_rand(seed) % BUFSZ;
			struct vq_seg seg[4];
			unsigned nout = 0, nin = 0;

			for (uint32_t k = 0; k < n; k++)
				s[i].out[k] = (uint8_t)(sent * 7 + k * 13 + qi);
			memset(s[i].in, 0, BUFSZ);
			s[i].len = n;
			seg[nout++] = (struct vq_seg){ s[i].out_gpa, o1 };
			if (o1 < n)
				seg[nout++] = (struct vq_seg){ s[i].out_gpa + o1, n - o1 };
			seg[nout + nin++] = (struct vq_seg){ s[i].in_gpa, i1 };
			if (i1 < BUFSZ)
				seg[nout + nin++] = (struct vq_seg){ s[i].in_gpa + i1, BUFSZ - i1 };
			CHECK_EQ(vq_drv_add(d, seg, nout, nin, (void *)(uintptr_t)(i + 1)), 0);
			ndesc += nout + nin;
			sent++;
			progress = true;
		}
		if (vq_drv_kick_prepare(d) == 1)
			CHECK_EQ(vq_evt_signal(kick), 0);
		while (vq_drv_get(d, &tok, &len) == 1) {
			unsigned i = (unsigned)(uintptr_t)tok - 1;

			CHECK(i < QSIZE);
			CHECK_EQ(len, s[i].len);
			CHECK(!memcmp(s[i].in, s[i].out, len));
			if (vq_vhu_frontend_log(f, NULL))
				CHECK(logged(f, s[i].in_gpa, len));
			if (len < BUFSZ)
				CHECK_EQ(s[i].in[len], 0);
			freel[nfree++] = i;
			done++;
			progress = true;
		}
		CHECK_EQ(vq_drv_error(d), 0);
		if (!progress) {
			int r = vq_drv_enable_cb(d);

			CHECK(r >= 0);
			if (r == 0)
				CHECK(vq_evt_wait(call, 5000) > 0);
			vq_drv_disable_cb(d);
		}
	}
	return ndesc;
}

/* GET_VRING_BASE after total buffers of nd descriptors in all. */
static void check_base(const struct tcase *t, uint32_t base, unsigned total,
		       uint64_t nd)
{
	if (!t->packed) {
		/* split: the next avail index, free-running */
		CHECK_EQ(base, total & 0xffff);
	} else if (!t->indirect) {
		/* packed: position | wrap << 15, avail then used */
		uint32_t pos = nd % QSIZE, wrap = !((nd / QSIZE) & 1);
		uint32_t v = pos | wrap << 15;

		CHECK_EQ(base, v | v << 16);
	} else {
		CHECK_EQ(base & 0xffff, base >> 16);
	}
}

static void run_case(const struct tcase *t)
{
	char dir[] = "/tmp/vhu-e2e-XXXXXX", path[64];
	struct vq_vhu_frontend *f;
	uint64_t seed = vq_test_seed(0x5eed), nd;
	int st;
	pid_t pid;

	if (t->hugetlb && !hugetlb_reserve()) {
		hugetlb_give_back();
		/* CI runs as root: there a guest without huge pages fails. */
		CHECK(!getenv("CI") || strcmp(getenv("CI"), "true"));
		fprintf(stderr, "   skipped: no huge pages (vm.nr_hugepages, not root)\n");
		return;
	}
	CHECK(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/sock", dir);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		backend_child(path, 2);

	/* connection 1: the front-end vanishes mid-traffic */
	f = fe_connect(path, t);
	CHECK_EQ(vq_vhu_frontend_start(f), 0);
	for (unsigned i = 0; i < 8; i++) {
		uint64_t gpa;
		void *p = vq_vhu_frontend_alloc(f, 512, &gpa);
		struct vq_seg seg[2] = { { gpa, 256 }, { gpa + 256, 256 } };

		CHECK(p);
		CHECK_EQ(vq_drv_add(vq_vhu_frontend_queue(f, 0), seg, 1, 1, p), 0);
	}
	vq_drv_kick_prepare(vq_vhu_frontend_queue(f, 0));
	vq_evt_signal(vq_vhu_frontend_kick_fd(f, 0));
	vq_vhu_frontend_free(f);

	/* connection 2: the whole exchange */
	f = fe_connect(path, t);
	{
		uint64_t want = VQ_BIT(VQ_F_VERSION_1) |
			(t->packed ? VQ_BIT(VQ_F_RING_PACKED) : 0) |
			(t->in_order ? VQ_BIT(VQ_F_IN_ORDER) : 0) |
			(t->event_idx ? VQ_BIT(VQ_F_EVENT_IDX) : 0) |
			(t->indirect ? VQ_BIT(VQ_F_INDIRECT_DESC) : 0) |
			VQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES);

		CHECK_EQ(vq_vhu_frontend_features(f), want);
		CHECK_EQ(!!(vq_vhu_frontend_protocol_features(f) &
			    VQ_BIT(VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS)), !t->no_mem_slots);
	}
	CHECK_EQ(vq_vhu_frontend_start(f), 0);
	for (unsigned q = 0; q < ECHO_NQ; q++) {
		unsigned total = 3000 + q;
		uint32_t base;

		/* the second queue runs as in a live migration: logging is
		 * switched on while the rings run (vhost-user "Migration") */
		if (q == 1) {
			CHECK_EQ(vq_vhu_frontend_set_logging(f, true), 0);
			CHECK(vq_vhu_frontend_log(f, NULL));
		}
		nd = traffic(f, q, total, &seed);
		if (q == 1) {
			CHECK_EQ(vq_vhu_frontend_set_logging(f, false), 0);
			CHECK(!vq_vhu_frontend_log(f, NULL));
		}
		CHECK_EQ(vq_vhu_frontend_stop_queue(f, q, &base), 0);
		check_base(t, base, total, nd);
		/* started again from there, as QEMU restarts a ring, it
		 * serves on and stops where the new buffers end */
		CHECK_EQ(vq_vhu_frontend_restart_queue(f, q, base), 0);
		nd += traffic(f, q, 200, &seed);
		CHECK_EQ(vq_vhu_frontend_stop_queue(f, q, &base), 0);
		check_base(t, base, total + 200, nd);
	}
	/* config space (PROTOCOL_F_CONFIG), bytes 0-3 read-only */
	{
		uint8_t cfg[8];

		CHECK_EQ(vq_vhu_frontend_get_config(f, 0, cfg, 8), 0);
		CHECK(!memcmp(cfg, "echo\0\0\0\0", 8));
		CHECK_EQ(vq_vhu_frontend_set_config(f, 4, "abcd", 4), 0);
		CHECK_EQ(vq_vhu_frontend_set_config(f, 0, "x", 1), -EIO);
		CHECK_EQ(vq_vhu_frontend_get_config(f, 2, cfg, 6), 0);
		CHECK(!memcmp(cfg, "hoabcd", 6));
		CHECK_EQ(vq_vhu_frontend_get_config(f, 4, cfg, 8), -EIO);
	}
	/* SEND_RARP (PROTOCOL_F_RARP): the MAC's first byte arrives first; the
	 * echo device refuses a group address, and the ack says so */
	{
		static const uint8_t unicast[6] = { 0x52, 0x54, 0, 1, 2, 3 };
		static const uint8_t group[6] = { 0x01, 0x00, 0x5e, 0, 0, 1 };

		CHECK(vq_vhu_frontend_protocol_features(f) & VQ_BIT(VQ_VHU_PROTOCOL_F_RARP));
		CHECK_EQ(vq_vhu_frontend_send_rarp(f, unicast), 0);
		CHECK_EQ(vq_vhu_frontend_send_rarp(f, group), -EIO);
	}
	/* NET_SET_MTU (PROTOCOL_F_MTU): the echo device carries 9000 at most */
	CHECK(vq_vhu_frontend_protocol_features(f) & VQ_BIT(VQ_VHU_PROTOCOL_F_MTU));
	CHECK_EQ(vq_vhu_frontend_net_set_mtu(f, 9000), 0);
	CHECK_EQ(vq_vhu_frontend_net_set_mtu(f, 9001), -EIO);
	CHECK_EQ(vq_vhu_frontend_net_set_mtu(f, 60), -EIO);
	vq_vhu_frontend_free(f);
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fprintf(stderr, "backend child status 0x%x\n", st);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	rmdir(dir);
	hugetlb_give_back();
}

#define CASE(fn, ...) static void fn(void) { \
	static const struct tcase t = { #fn, __VA_ARGS__ }; run_case(&t); }

CASE(e2e_split,                         false, false, false, false, false, false)
CASE(e2e_split_hugetlb_guest_memory,    false, false, true,  false, false, true)
CASE(e2e_split_in_order,                false, true,  false, false, false, false)
CASE(e2e_split_event_idx,               false, false, true,  false, false, false)
CASE(e2e_split_in_order_event_idx,      false, true,  true,  false, false, false)
CASE(e2e_packed,                        true,  false, false, false, false, false)
CASE(e2e_packed_in_order,               true,  true,  false, false, false, false)
CASE(e2e_packed_event_idx,              true,  false, true,  false, false, false)
CASE(e2e_packed_in_order_event_idx,     true,  true,  true,  false, false, false)
CASE(e2e_split_indirect_mem_table,      false, false, true,  true,  true, false)
CASE(e2e_packed_indirect_mem_table,     true,  false, true,  true,  true, false)

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	RUN(e2e_split);
	RUN(e2e_split_in_order);
	RUN(e2e_split_event_idx);
	RUN(e2e_split_in_order_event_idx);
	RUN(e2e_packed);
	RUN(e2e_packed_in_order);
	RUN(e2e_packed_event_idx);
	RUN(e2e_packed_in_order_event_idx);
	RUN(e2e_split_indirect_mem_table);
	RUN(e2e_packed_indirect_mem_table);
	RUN(e2e_split_hugetlb_guest_memory);
	return 0;
}
