// SPDX-License-Identifier: MIT
/*
 * Files truncated under the back-end's mappings (issue 31): "A front-end
 * that truncates or replaces a mapped file at any moment costs its own
 * connection only: the device breaks with a clear error naming the
 * region, the daemon survives and serves the next front-end."  Guest
 * memory of SET_MEM_TABLE cut before its ring runs and while it runs, a
 * region of ADD_MEM_REG cut under a buffer the device writes, the dirty
 * log of SET_LOG_BASE cut before and while the rings mark it.  Each
 * connection closes with the region (or the log) named, the rule and the
 * file offset of the missing page; nothing leaks (the fixture's checks,
 * the guard slots, and the back-end's mapping gone, not left behind as
 * zero pages); the next connection is served.  A memfd sealed against
 * shrinking is mapped without a guard.
 */
#include <pthread.h>

#include "backend_fixture.h"
#include "guard.h"

/* The messages' parts: the rule, the region whole() maps, the loss. */
#define REGION_RULE "vhost-user \"Memory regions description\": "
#define REGION0 REGION_RULE "region at guest 0x0 (0x100000 bytes)"
#define LOST_RULE \
	": its file was truncated under the mapping (no page at file offset 0x"

/* A memfd of the front-end's, with its view of it. */
struct gfile {
	const char *name;
	size_t size;
	int fd;
	uint8_t *g;
};

static struct gfile gfile_new(const char *name, size_t size, unsigned flags)
{
	struct gfile f = { .name = name, .size = size };

	f.fd = memfd_create(name, MFD_CLOEXEC | flags);
	CHECK(f.fd >= 0);
	CHECK_EQ(ftruncate(f.fd, (off_t)size), 0);
	f.g = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, f.fd, 0);
	CHECK(f.g != MAP_FAILED);
	return f;
}

/* Shrink the file to keep bytes; the front-end then lets go of it (the
 * fixture counts its fds and memfd mappings). */
static void gfile_truncate_drop(struct gfile *f, size_t keep)
{
	CHECK_EQ(ftruncate(f->fd, (off_t)keep), 0);
	munmap(f->g, f->size);
	close(f->fd);
}

/* A mapping, as /proc/self/maps shows it. */
struct range {
	unsigned long lo, hi;
};

/* The back-end's mapping of the memfd called name: the one that is not
 * the test's view at mine.  { 0, 0 } if none. */
static struct range backend_mapping(const char *name, const void *mine)
{
	FILE *m = fopen("/proc/self/maps", "r");
	char line[512], tag[96];
	struct range r = { 0, 0 }, l;

	CHECK(m);
	snprintf(tag, sizeof(tag), "/memfd:%s ", name);
	while (!r.lo && fgets(line, sizeof(line), m))
		if (strstr(line, tag) &&
		    sscanf(line, "%lx-%lx", &l.lo, &l.hi) == 2 &&
		    l.lo != (uintptr_t)mine)
			r = l;
	fclose(m);
	return r;
}

/* Is any of r mapped (whatever from)?  Once the back-end lost a mapping
 * it is zero pages, no memfd: what count_maps() cannot see.  Asked right
 * after the close, before anything else could be mapped there. */
static bool still_mapped(struct range r)
{
	FILE *m = fopen("/proc/self/maps", "r");
	char line[512];
	struct range l;
	bool found = false;

	CHECK(m);
	while (!found && fgets(line, sizeof(line), m))
		found = sscanf(line, "%lx-%lx", &l.lo, &l.hi) == 2 &&
			l.lo < r.hi && r.lo < l.hi;
	fclose(m);
	return found;
}

static void *queue_thread(void *arg)
{
	struct fx *x = arg;

	echo_run_queue(&x->e, 0);
	return NULL;
}

/* The device serves queue 0 on a thread of its own, as virtq-net's and
 * virtq-vsock's queue threads do; whatever it met there, it went on, and
 * the control socket became readable (the control thread wakes however
 * it waits). */
static void queue_runs_on_its_thread(struct fx *x)
{
	struct pollfd p = { .fd = vq_vhu_backend_fd(x->e.b), .events = POLLIN };
	pthread_t t;

	CHECK_EQ(pthread_create(&t, NULL, queue_thread, x), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(poll(&p, 1, 2000), 1);
}

/* The next process() closes the connection for the lost mapping: the
 * message names it (what: the rule, then which region or log), says its
 * file was truncated, with the missing page's file offset in [lo, hi);
 * the back-end's mapping bm is gone, and so are the guards; then the
 * fixture's checks (no leak, the next connection served). */
static void closed_for_lost(struct fx *x, int s, const char *what, uint64_t lo,
			    uint64_t hi, struct range bm)
{
	int r = pump(x);
	bool left = still_mapped(bm);
	char msg[256];
	const char *o;
	uint64_t off;

	CHECK(!left);
	snprintf(msg, sizeof(msg), "%s", vq_vhu_backend_error_msg(x->e.b));
	fprintf(stderr, "   %s\n", msg);
	CHECK(!strncmp(msg, what, strlen(what)));
	o = strstr(msg, LOST_RULE);
	CHECK(o);
	off = strtoull(o + strlen(LOST_RULE), NULL, 16);
	CHECK(off >= lo && off < hi);
	CHECK_EQ(vq_guard_count(), 0);
	closed_with(x, s, r, -EFAULT);
}

/* Queue 0's driver on the ring at the start of ring (the front-end's
 * view): one chain served, its 64 bytes at guest rd (seen at src) copied
 * to guest wr (seen at dst); then the same chain posted again, for the
 * device's next turn, and the driver let go of (it touches no ring). */
static void served_then_posted(struct fx *x, uint8_t *ring, uint64_t rd,
			       uint8_t *src, uint64_t wr, const uint8_t *dst)
{
	struct vq_drv_config dc = { .features = SPLIT, .num = 64,
		.ring = { ring, ring + 0x1000, ring + 0x2000 } };
	struct vq_seg seg[2] = { { rd, 64 }, { wr, 64 } };
	struct vq_drv *d;

	CHECK_EQ(vq_drv_new(&dc, &d), 0);
	memset(src, 0xab, 64);
	echo_one(x, d, rd, 64, wr, 64);
	CHECK(!memcmp(dst, src, 64));
	CHECK_EQ(vq_drv_add(d, seg, 1, 1, x), 0);
	vq_drv_kick_prepare(d);
	vq_drv_free(d);
}

/* Cut after SET_MEM_TABLE, before the ring starts: the start (on the
 * control thread) reads the used index, at file offset 0x2002, and the
 * connection closes for it. */
static void mem_table_file_truncated_before_the_ring_runs(struct fx *x)
{
	struct gfile f = gfile_new("vhu-trunc-table", GSIZE, 0);
	struct vq_vhu_region r = whole(x);
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC);
	struct range bm;

	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT);
	ok(x);
	snd_mem(s, 1, &r, &f.fd);
	ok(x);
	bm = backend_mapping(f.name, f.g);
	CHECK(bm.lo);
	CHECK_EQ(vq_guard_count(), 1);
	gfile_truncate_drop(&f, 0);
	snd_state(s, VQ_VHU_SET_VRING_NUM, 0, 64);
	ok(x);
	ring_addr_kick(x, s, k);
	close(k);
	closed_for_lost(x, s, REGION0, 0x2000, 0x2004, bm);
}

/* Cut while the ring runs, a chain already served, to the descriptors'
 * page: the queue thread's next touch of the ring (turning notifications
 * off writes the used ring's flags, at file offset 0x2000) goes to zero
 * pages instead of dying, the ring breaks on the avail index it then
 * reads, and the connection closes for the region. */
static void mem_table_file_truncated_under_the_running_ring(struct fx *x)
{
	struct gfile f = gfile_new("vhu-trunc-running", GSIZE, 0);
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC);
	struct range bm;

	setup_to_num_from(x, s, SPLIT, 64, f.fd);
	ring_addr_kick(x, s, k);
	CHECK(x->e.q[0].on);
	bm = backend_mapping(f.name, f.g);
	CHECK(bm.lo);
	served_then_posted(x, f.g, 0x10000, f.g + 0x10000, 0x20000,
			   f.g + 0x20000);
	/* all but the descriptors' page cut */
	gfile_truncate_drop(&f, 0x1000);
	close(k);
	queue_runs_on_its_thread(x);
	closed_for_lost(x, s, REGION0, 0x2000, 0x2002, bm);
}

/* Memory slots: the ring in one file, buffers in a second one mapped from
 * file offset 0x10000; the second cut under the buffer the device writes
 * (at 0x800 into the region): the message names that region, at the file
 * offset the buffer has in it. */
static void mem_slot_file_truncated_under_a_buffer(struct fx *x)
{
	struct gfile a = gfile_new("vhu-trunc-slot-ring", 0x10000, 0);
	struct gfile b = gfile_new("vhu-trunc-slot-data", 0x20000, 0);
	struct vq_vhu_region ra = { 0, 0x10000, UA, 0 };
	struct vq_vhu_region rb = { 0x100000, 0x10000, UA + 0x100000, 0x10000 };
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC);
	struct range bma, bmb;

	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT | PROTO);
	ok(x);
	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, P_SLOTS);
	ok(x);
	snd_region(s, VQ_VHU_ADD_MEM_REG, &ra, a.fd);
	ok(x);
	snd_region(s, VQ_VHU_ADD_MEM_REG, &rb, b.fd);
	ok(x);
	snd_state(s, VQ_VHU_SET_VRING_NUM, 0, 64);
	ok(x);
	ring_addr_kick(x, s, k);
	snd_state(s, VQ_VHU_SET_VRING_ENABLE, 0, 1);
	ok(x);
	CHECK(x->e.q[0].on);
	bma = backend_mapping(a.name, a.g);
	bmb = backend_mapping(b.name, b.g);
	CHECK(bma.lo && bmb.lo);
	CHECK_EQ(vq_guard_count(), 2);
	served_then_posted(x, a.g, 0x8000, a.g + 0x8000, 0x100800,
			   b.g + 0x10800);
	munmap(a.g, a.size);
	close(a.fd);
	gfile_truncate_drop(&b, 0x10000);       /* the region's part is gone */
	close(k);
	queue_runs_on_its_thread(x);
	closed_for_lost(x, s,
			REGION_RULE "region at guest 0x100000 (0x10000 bytes)",
			0x10800, 0x10840, bmb);
}

/* Logging on: SET_LOG_BASE, then LOG_ALL, which restarts the ring. */
static void log_on(struct fx *x, int s, int lfd)
{
	snd_log_base(s, lfd, LOG_BYTES, 0);
	ok(x);
	CHECK_EQ(rcv(s, VQ_VHU_SET_LOG_BASE, false).size, 0);
	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT | PROTO | LOG_ALL);
	ok(x);
	CHECK(x->e.q[0].on);
}

/* "The same holds for the dirty-log file": cut once logging is on,
 * before anything was marked; GET_VRING_BASE stops the ring, and the stop
 * marks the used ring (a fill not flushed still wrote it) on the control
 * thread.  Its reply cannot go out on the socket shut down: the close
 * names the log, the cause, not the reply. */
static void log_file_truncated_before_the_ring_marks_it(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC), lfd = log_memfd(4096);
	struct range bm;

	log_ring(x, s, SPLIT | PROTO, k, VQ_VHU_VRING_F_LOG, 0x2000);
	log_on(x, s, lfd);
	bm = backend_mapping("vhu-test-log", NULL);
	CHECK(bm.lo);
	CHECK_EQ(ftruncate(lfd, 0), 0);
	close(lfd);
	close(k);
	snd_state(s, VQ_VHU_GET_VRING_BASE, 0, 0);
	closed_for_lost(x, s, "vhost-user \"Migration\": the log of 0x20 bytes",
			0, 0x20, bm);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

/* Cut while a chain is being logged: the pages it wrote were marked
 * before; the next chain's marks find no log and the connection closes
 * naming it. */
static void log_file_truncated_while_logging(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC), lfd = log_memfd(4096);
	uint8_t *log = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED,
			    lfd, 0);
	struct range bm;

	CHECK(log != MAP_FAILED);
	log_ring(x, s, SPLIT | PROTO, k, VQ_VHU_VRING_F_LOG, 0x2000);
	log_on(x, s, lfd);
	bm = backend_mapping("vhu-test-log", log);
	CHECK(bm.lo);
	served_then_posted(x, x->g, 0x10000, x->g + 0x10000, 0x20800,
			   x->g + 0x20800);
	CHECK(page_dirty(log, 0x20800) && page_dirty(log, 0x2000));
	munmap(log, 4096);
	CHECK_EQ(ftruncate(lfd, 0), 0);
	close(lfd);
	close(k);
	queue_runs_on_its_thread(x);
	closed_for_lost(x, s, "vhost-user \"Migration\": the log of 0x20 bytes",
			0, 0x20, bm);
	memset(x->g, 0, 0x30000);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

/* "Memfds sealed against shrinking can be trusted at map time": guest
 * memory and a log from memfds sealed with F_SEAL_SHRINK are mapped
 * without a guard (the same files unsealed take one each), and serve. */
static void sealed_memfds_mapped_without_a_guard(struct fx *x)
{
	unsigned seal = MFD_ALLOW_SEALING;
	struct gfile f = gfile_new("vhu-trunc-sealed", GSIZE, seal);
	struct gfile l = gfile_new("vhu-trunc-sealed-log", 4096, seal);
	struct vq_vhu_region r = whole(x);
	int s = cli(x);

	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT | PROTO);
	ok(x);
	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, LOG_SHMFD);
	ok(x);
	snd_mem(s, 1, &r, &f.fd);
	ok(x);
	snd_log_base(s, l.fd, LOG_BYTES, 0);
	ok(x);
	rcv(s, VQ_VHU_SET_LOG_BASE, false);
	CHECK_EQ(vq_guard_count(), 2);          /* not sealed yet */
	CHECK_EQ(fcntl(f.fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	CHECK_EQ(fcntl(l.fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	snd_mem(s, 1, &r, &f.fd);
	ok(x);
	snd_log_base(s, l.fd, LOG_BYTES, 0);
	ok(x);
	rcv(s, VQ_VHU_SET_LOG_BASE, false);
	CHECK_EQ(vq_guard_count(), 0);
	CHECK(backend_mapping(f.name, f.g).lo);
	CHECK(backend_mapping(l.name, l.g).lo);
	munmap(f.g, f.size);
	munmap(l.g, l.size);
	close(f.fd);
	close(l.fd);
	close(s);
	CHECK_EQ(pump(x), -ECONNRESET);
	CHECK_EQ(count_maps(), x->maps0);
	CHECK_EQ(count_fds(), x->fds0);
}

int main(void)
{
	struct fx x;

	signal(SIGPIPE, SIG_IGN);
	fx_init(&x);
	T(mem_table_file_truncated_before_the_ring_runs);
	T(mem_table_file_truncated_under_the_running_ring);
	T(mem_slot_file_truncated_under_a_buffer);
	T(log_file_truncated_before_the_ring_marks_it);
	T(log_file_truncated_while_logging);
	T(sealed_memfds_mapped_without_a_guard);
	fx_fini(&x);
	return 0;
}
