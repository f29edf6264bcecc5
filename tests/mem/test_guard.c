// SPDX-License-Identifier: MIT
/*
 * The SIGBUS guard (src/mem/guard.h, issue 31): "a front-end that
 * truncates a mapped file costs its own connection only".  A guarded
 * mapping whose file shrinks is replaced by zero pages on the first touch,
 * from any thread, the loss recorded with its offset and the registered
 * socket shut down; every other SIGBUS reaches the handler installed
 * before ours, or kills as it did; a memfd sealed against shrinking needs
 * no guard; slots are reused without leaking; the kernel's own copies
 * fail with EFAULT instead of faulting.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <virtq/mem.h>

#include "guard.h"

#include "vq_test.h"

#define LEN 0x10000ul   /* each test file: 16 pages */
#define KEPT 0x2000ul   /* what a truncation leaves of it */

/* A memfd of LEN bytes mapped shared, every byte 0x5a. */
struct file {
	int fd;
	uint8_t *p;
};

static struct file file_new(unsigned flags)
{
	struct file f;

	f.fd = memfd_create("guard-test", MFD_CLOEXEC | flags);
	CHECK(f.fd >= 0);
	CHECK_EQ(ftruncate(f.fd, LEN), 0);
	f.p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, f.fd, 0);
	CHECK(f.p != MAP_FAILED);
	memset(f.p, 0x5a, LEN);
	return f;
}

/* The /proc/self/maps line of the mapping holding p: 1 and the line, or 0
 * when nothing is mapped there. */
static int maps_line(const void *p, char *line, size_t size)
{
	FILE *m = fopen("/proc/self/maps", "r");
	unsigned long lo, hi;
	int found = 0;

	CHECK(m);
	while (!found && fgets(line, (int)size, m))
		found = sscanf(line, "%lx-%lx", &lo, &hi) == 2 &&
			(uintptr_t)p >= lo && (uintptr_t)p < hi;
	fclose(m);
	return found;
}

static bool mapped_from_memfd(const void *p)
{
	char line[512];

	return maps_line(p, line, sizeof(line)) &&
	       strstr(line, "memfd:guard-test");
}

static bool mapped(const void *p)
{
	char line[512];

	return maps_line(p, line, sizeof(line));
}

/* ---- the previous handler a test program installed before ours ---- */

static volatile sig_atomic_t prev_calls;
static void *volatile prev_addr;

/* It owns one kind of fault: it maps zero pages over the faulting page
 * (of a mapping that is not guarded) and counts it. */
static void prev_handler(int sig, siginfo_t *si, void *uc)
{
	uintptr_t page = (uintptr_t)si->si_addr & ~4095ul;

	(void)sig, (void)uc;
	prev_calls++;
	prev_addr = si->si_addr;
	mmap((void *)page, 4096, PROT_READ | PROT_WRITE,
	     MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

static void install_prev_handler(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = prev_handler;
	sa.sa_flags = SA_SIGINFO;
	CHECK_EQ(sigaction(SIGBUS, &sa, NULL), 0);
}

/* ---- a thread that touches guest memory, as a queue thread does ---- */

struct toucher {
	pthread_t t;
	volatile uint8_t *p;
	size_t read_at, write_at;
	uint8_t read, readback;
};

static void *touch(void *arg)
{
	struct toucher *t = arg;

	t->read = t->p[t->read_at];
	t->p[t->write_at] = 7;
	t->readback = t->p[t->write_at];
	return NULL;
}

static void touch_from_thread(struct toucher *t)
{
	CHECK_EQ(pthread_create(&t->t, NULL, touch, t), 0);
	CHECK_EQ(pthread_join(t->t, NULL), 0);
}

/*
 * The rule: a fault in a guarded mapping whose file shrank costs the
 * connection, not the process.  Touched from another thread: the read
 * sees zeros, the write lands in private memory (the file keeps its
 * bytes), the whole mapping is anonymous now (the pages the file still
 * has too: nothing of it is shared any more), the loss is recorded with
 * the first fault's offset, and the socket registered is shut down both
 * ways, so its reader wakes.
 */
static void truncated_guarded_mapping_costs_the_socket_only(void)
{
	struct file f = file_new(0);
	struct toucher t = { .read_at = 0x5000, .write_at = 0x6000 };
	struct pollfd pfd;
	uint64_t off = 0;
	uint8_t byte = 0;
	int sv[2], slot;
	char c;

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	CHECK(vq_guard_needed(f.fd));
	slot = vq_guard_add(f.p, LEN, sv[0]);
	CHECK(slot >= 0);
	CHECK(!vq_guard_lost(slot, &off));
	CHECK_EQ(ftruncate(f.fd, KEPT), 0);
	t.p = f.p;
	touch_from_thread(&t);
	CHECK_EQ(t.read, 0);
	CHECK_EQ(t.readback, 7);
	CHECK(vq_guard_lost(slot, &off));
	CHECK_EQ(off, 0x5000);
	CHECK(mapped(f.p) && !mapped_from_memfd(f.p));
	CHECK_EQ(t.p[0], 0);    /* kept by the file, not by us */
	t.p[0] = 9;
	CHECK_EQ(pread(f.fd, &byte, 1, 0), 1);
	CHECK_EQ(byte, 0x5a);
	/* shut down: our end reads EOF and cannot send; the peer sees EOF */
	pfd = (struct pollfd){ .fd = sv[0], .events = POLLIN };
	CHECK_EQ(poll(&pfd, 1, 0), 1);
	CHECK(pfd.revents & POLLHUP);
	CHECK_EQ(recv(sv[0], &c, 1, MSG_DONTWAIT), 0);
	CHECK_EQ(send(sv[0], "x", 1, MSG_NOSIGNAL), -1);
	CHECK_EQ(errno, EPIPE);
	CHECK_EQ(recv(sv[1], &c, 1, MSG_DONTWAIT), 0);
	/* no second fault: all of it is memory now */
	CHECK_EQ(t.p[LEN - 1], 0);
	CHECK_EQ(vq_guard_count(), 1);
	vq_guard_unmap(slot, f.p, LEN);
	CHECK(!mapped(f.p));
	CHECK_EQ(vq_guard_count(), 0);
	close(f.fd);
	close(sv[0]);
	close(sv[1]);
}

/* The same rule with threads faulting in one mapping together: each one
 * goes on, the mapping is replaced once, the socket (none here) and the
 * offset are the first fault's. */
static void truncated_guarded_mapping_many_threads(void)
{
	enum { N = 4 };
	struct file f = file_new(0);
	struct toucher t[N];
	uint64_t off;
	int slot = vq_guard_add(f.p, LEN, -1);

	CHECK(slot >= 0);
	CHECK_EQ(ftruncate(f.fd, 0), 0);
	for (unsigned i = 0; i < N; i++) {
		t[i] = (struct toucher){ .p = f.p, .read_at = 0x1000 * (i + 1),
					 .write_at = 0x1000 * (i + 8) };
		CHECK_EQ(pthread_create(&t[i].t, NULL, touch, &t[i]), 0);
	}
	for (unsigned i = 0; i < N; i++) {
		CHECK_EQ(pthread_join(t[i].t, NULL), 0);
		CHECK_EQ(t[i].read, 0);
		CHECK_EQ(t[i].readback, 7);
	}
	CHECK(vq_guard_lost(slot, &off));
	CHECK(off >= 0x1000 && off <= 0x1000 * N && off % 0x1000 == 0);
	vq_guard_unmap(slot, f.p, LEN);
	close(f.fd);
}

/* "Memfds sealed against shrinking can be trusted at map time": only a
 * memfd with F_SEAL_SHRINK goes unguarded (it cannot shrink: that is the
 * seal); one that allows sealing but has no such seal, one sealed only
 * against growing, a plain file (F_GET_SEALS: EINVAL) and a hugetlbfs
 * memfd, sealed or not, are guarded. */
static void sealed_memfd_needs_no_guard(void)
{
	struct file f = file_new(MFD_ALLOW_SEALING), g = file_new(0);
	char path[] = "/tmp/guard-test-XXXXXX";
	int plain = mkstemp(path), h;

	CHECK(vq_guard_needed(f.fd));
	CHECK(vq_guard_needed(g.fd));           /* sealing not allowed */
	CHECK_EQ(fcntl(f.fd, F_ADD_SEALS, F_SEAL_GROW), 0);
	CHECK(vq_guard_needed(f.fd));
	CHECK_EQ(fcntl(f.fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	CHECK(!vq_guard_needed(f.fd));
	CHECK_EQ(ftruncate(f.fd, KEPT), -1);
	CHECK_EQ(errno, EPERM);
	CHECK(plain >= 0);
	unlink(path);
	CHECK_EQ(ftruncate(plain, LEN), 0);
	CHECK_EQ(fcntl(plain, F_GET_SEALS), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK(vq_guard_needed(plain));
	h = memfd_create("guard-test-huge",
			 MFD_CLOEXEC | MFD_HUGETLB | MFD_ALLOW_SEALING);
	if (h >= 0) {
		CHECK_EQ(fcntl(h, F_ADD_SEALS, F_SEAL_SHRINK), 0);
		CHECK(vq_guard_needed(h));
		close(h);
	} else {
		fprintf(stderr, "   (no hugetlbfs memfd here: %s)\n",
			strerror(errno));
	}
	CHECK_EQ(vq_guard_count(), 0);
	close(plain);
	munmap(f.p, LEN);
	munmap(g.p, LEN);
	close(f.fd);
	close(g.fd);
}

/* A fault outside every guarded mapping is not ours: it reaches the
 * handler the program installed before ours (with its siginfo), which
 * deals with it, and the guarded mapping beside it stays as it was. */
static void unguarded_fault_reaches_previous_handler(void)
{
	struct file f = file_new(0), g = file_new(0);
	uint64_t off;
	int slot = vq_guard_add(g.p, LEN, -1);

	CHECK(slot >= 0);
	CHECK_EQ(ftruncate(f.fd, KEPT), 0);
	prev_calls = 0;
	CHECK_EQ(((volatile uint8_t *)f.p)[0x3000], 0);
	CHECK_EQ(prev_calls, 1);
	CHECK(prev_addr == f.p + 0x3000);
	CHECK(!vq_guard_lost(slot, &off));
	CHECK(mapped_from_memfd(g.p));
	CHECK_EQ(g.p[0x3000], 0x5a);
	vq_guard_unmap(slot, g.p, LEN);
	munmap(f.p, LEN);
	close(f.fd);
	close(g.fd);
}

/* "A public function so that an application that installs its own SIGBUS
 * handler later can chain to ours": true for a fault in a guarded mapping
 * (handled), false for anything else. */
static volatile sig_atomic_t app_calls, app_ours;

static void app_handler(int sig, siginfo_t *si, void *uc)
{
	app_calls++;
	if (vq_mem_handle_sigbus(si)) {
		app_ours++;
		return;
	}
	prev_handler(sig, si, uc);
}

static void application_handler_chains_to_ours(void)
{
	struct file f = file_new(0), g = file_new(0);
	struct sigaction sa, ours;
	siginfo_t si;
	uint64_t off;
	int slot = vq_guard_add(g.p, LEN, -1);

	CHECK(slot >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = app_handler;
	sa.sa_flags = SA_SIGINFO;
	CHECK_EQ(sigaction(SIGBUS, &sa, &ours), 0);
	CHECK_EQ(ftruncate(g.fd, KEPT), 0);
	CHECK_EQ(ftruncate(f.fd, KEPT), 0);
	CHECK_EQ(((volatile uint8_t *)g.p)[0x4000], 0);
	CHECK_EQ(app_calls, 1);
	CHECK_EQ(app_ours, 1);
	CHECK(vq_guard_lost(slot, &off));
	CHECK_EQ(off, 0x4000);
	prev_calls = 0;
	CHECK_EQ(((volatile uint8_t *)f.p)[0x4000], 0);
	CHECK_EQ(app_calls, 2);
	CHECK_EQ(app_ours, 1);
	CHECK_EQ(prev_calls, 1);
	CHECK_EQ(sigaction(SIGBUS, &ours, NULL), 0);
	/* not a fault of ours: another signal, a sent SIGBUS, nothing */
	memset(&si, 0, sizeof(si));
	si.si_signo = SIGSEGV;
	si.si_code = BUS_ADRERR;
	si.si_addr = g.p;
	CHECK(!vq_mem_handle_sigbus(&si));
	si.si_signo = SIGBUS;
	si.si_code = SI_USER;
	CHECK(!vq_mem_handle_sigbus(&si));
	CHECK(!vq_mem_handle_sigbus(NULL));
	vq_guard_unmap(slot, g.p, LEN);
	si.si_code = BUS_ADRERR;
	CHECK(!vq_mem_handle_sigbus(&si));      /* no longer guarded */
	munmap(f.p, LEN);
	close(f.fd);
	close(g.fd);
}

/* The kernel's own copies into or out of a lost page (a device's
 * write(2) from a guest buffer, a read(2) into one) do not fault: they
 * fail with EFAULT, and the guard is not tripped; the next touch of the
 * memory from user space is what trips it. */
static void kernel_copies_fail_with_efault(void)
{
	struct file f = file_new(0);
	uint8_t buf[16] = { 0 };
	uint64_t off;
	ssize_t w;
	int pipefd[2], slot = vq_guard_add(f.p, LEN, -1);

	CHECK(slot >= 0);
	CHECK_EQ(pipe2(pipefd, O_CLOEXEC | O_NONBLOCK), 0);
	CHECK_EQ(ftruncate(f.fd, KEPT), 0);
	CHECK_EQ(write(pipefd[1], f.p + 0x8000, 16), -1);
	CHECK_EQ(errno, EFAULT);
	CHECK_EQ(write(pipefd[1], buf, sizeof(buf)), (ssize_t)sizeof(buf));
	CHECK_EQ(read(pipefd[0], f.p + 0x8000, 16), -1);
	CHECK_EQ(errno, EFAULT);
	/* from the last page the file has on into a lost one: a short count
	 * (or EFAULT: the kernel may give up on the whole copy) */
	w = write(pipefd[1], f.p + KEPT - 4096, 8192);
	CHECK(w == -1 ? errno == EFAULT : w >= 0 && w < 8192);
	fprintf(stderr, "   a write across the end of the file: %zd\n", w);
	CHECK(!vq_guard_lost(slot, &off));
	CHECK(mapped_from_memfd(f.p));
	CHECK_EQ(((volatile uint8_t *)f.p)[0x8000], 0);
	CHECK(vq_guard_lost(slot, &off));
	CHECK_EQ(off, 0x8000);
	vq_guard_unmap(slot, f.p, LEN);
	close(pipefd[0]);
	close(pipefd[1]);
	close(f.fd);
}

/* "Remove then re-add slots many times (no leak of slots)": a daemon
 * serving guest after guest reuses its slots; all of them can be taken
 * (-ENOSPC after), one freed is taken again, and a reused slot guards
 * its new mapping, not the old one. */
static void slots_reused_without_leak(void)
{
	static void *maps[VQ_GUARD_SLOTS];
	static int slot[VQ_GUARD_SLOTS];
	struct file f;
	uint64_t off;
	void *extra;

	for (unsigned i = 0; i < 4 * VQ_GUARD_SLOTS; i++) {
		void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		int s;

		CHECK(p != MAP_FAILED);
		s = vq_guard_add(p, 4096, -1);
		CHECK(s >= 0);
		vq_guard_unmap(s, p, 4096);
	}
	CHECK_EQ(vq_guard_count(), 0);
	for (unsigned i = 0; i < VQ_GUARD_SLOTS; i++) {
		maps[i] = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CHECK(maps[i] != MAP_FAILED);
		slot[i] = vq_guard_add(maps[i], 4096, -1);
		CHECK(slot[i] >= 0);
	}
	CHECK_EQ(vq_guard_count(), VQ_GUARD_SLOTS);
	extra = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(extra != MAP_FAILED);
	CHECK_EQ(vq_guard_add(extra, 4096, -1), -ENOSPC);
	munmap(extra, 4096);
	/* one freed in the middle: the truncated file's mapping takes it */
	vq_guard_unmap(slot[500], maps[500], 4096);
	f = file_new(0);
	CHECK_EQ(vq_guard_add(f.p, LEN, -1), slot[500]);
	CHECK_EQ(ftruncate(f.fd, 0), 0);
	CHECK_EQ(((volatile uint8_t *)f.p)[0x2000], 0);
	CHECK(vq_guard_lost(slot[500], &off));
	CHECK_EQ(off, 0x2000);
	vq_guard_unmap(slot[500], f.p, LEN);
	close(f.fd);
	for (unsigned i = 0; i < VQ_GUARD_SLOTS; i++)
		if (i != 500)
			vq_guard_unmap(slot[i], maps[i], 4096);
	CHECK_EQ(vq_guard_count(), 0);
}

/* ---- the process dies as before: in a child, a fresh process ---- */

/* The child: SIGBUS's action before ours is the default (or ignored);
 * guard one mapping (which installs our handler), then fault outside it
 * or have SIGBUS sent. */
static int child(const char *mode)
{
	struct rlimit no_core = { 0, 0 };
	struct file f = file_new(0), g = file_new(0);
	bool ignored = strstr(mode, "ignored") != NULL;

	setrlimit(RLIMIT_CORE, &no_core);
	signal(SIGBUS, ignored ? SIG_IGN : SIG_DFL);
	CHECK(vq_guard_add(g.p, LEN, -1) >= 0);
	CHECK_EQ(ftruncate(f.fd, 0), 0);
	if (strstr(mode, "fault"))
		return ((volatile uint8_t *)f.p)[0x1000] + 42;
	raise(SIGBUS);
	return 42;
}

/* What the child ended with: the signal that killed it (> 0) or its
 * exit status (<= 0, negated). */
static int run_child(const char *mode)
{
	pid_t pid = fork();
	int st;

	CHECK(pid >= 0);
	if (pid == 0) {
		execl("/proc/self/exe", "test_guard", "--child", mode,
		      (char *)NULL);
		_exit(99);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	return WIFSIGNALED(st) ? WTERMSIG(st) : -WEXITSTATUS(st);
}

/* "For SIG_DFL/SIG_IGN restores the default disposition ... the process
 * dies exactly as before": a fault outside the guarded mappings kills by
 * SIGBUS, default or ignored; a SIGBUS sent kills by default and is
 * ignored when it was. */
static void unguarded_fault_kills_as_before(void)
{
	CHECK_EQ(run_child("default-fault"), SIGBUS);
	CHECK_EQ(run_child("ignored-fault"), SIGBUS);
	CHECK_EQ(run_child("default-raise"), SIGBUS);
	CHECK_EQ(run_child("ignored-raise"), -42);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--child"))
		return child(argv[2]);
	/* the program's own handler comes first, before the library's */
	install_prev_handler();
	RUN(truncated_guarded_mapping_costs_the_socket_only);
	RUN(truncated_guarded_mapping_many_threads);
	RUN(sealed_memfd_needs_no_guard);
	RUN(unguarded_fault_reaches_previous_handler);
	RUN(application_handler_chains_to_ours);
	RUN(kernel_copies_fail_with_efault);
	RUN(slots_reused_without_leak);
	RUN(unguarded_fault_kills_as_before);
	return 0;
}
