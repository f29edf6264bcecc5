// SPDX-License-Identifier: MIT
/*
 * Issue 31: a hostile front-end against one running daemon, virtq-net
 * (loopback) or virtq-vsock.  Each case does one thing no front-end
 * should (takes memory away under the back-end, hands it notification
 * fds that block or are not eventfds, fills the back-end channel and
 * makes it block, never serves a postcopy fault), then closes; the same
 * process must still be running, answer a new good front-end with a
 * handshake and traffic, and be back to its baseline fds, threads and
 * memfd mappings, with its RSS in bounds.  A daemon that dies or hangs
 * fails the case, and is restarted for the next one (the line says so).
 *
 *   test_daemon_hostile net|vsock BINARY
 *
 * One line per case, PASS, FAIL (and why) or SKIP; exit 1 if any failed.
 * With CI=true a case that cannot run here (no userfaultfd) fails.
 * HOSTILE_CASE=TEXT runs only the cases whose name contains TEXT.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hostile.h"

#define P(x) VQ_BIT(VQ_VHU_PROTOCOL_F_##x)
/* Rings at I/O virtual addresses no IOTLB entry will ever map. */
#define IOVA_NOWHERE 0x10000000000ull
/* A case, its checks and a restart, at most. */
#define CASE_ALARM_S 60

static struct daemon D;
static bool ci;

/* ---- the cases: the hostile part; the runner judges what follows ---- */

/* The memory table's file shrinks to nothing, before the rings start or
 * after they moved traffic; with SET_MEM_TABLE or ADD_MEM_REG. */
static const char *truncated(struct hfe *h, bool slots, bool running)
{
	hfe_open(h, P(REPLY_ACK) | (slots ? P(CONFIGURE_MEM_SLOTS) : 0), 0);
	if (slots)
		hfe_add_mem_reg(h);
	else
		hfe_mem_table(h, NULL);
	if (running) {
		hfe_rings(h, true);
		hfe_traffic(h);
	}
	hfe_truncate_mem(h);
	if (!running)
		hfe_rings(h, false);
	hfe_kick_all(h);
	hfe_wait_closed(h, 500);
	return NULL;
}

static const char *mem_table_truncated_before_start(struct hfe *h)
{
	return truncated(h, false, false);
}

static const char *mem_table_truncated_while_running(struct hfe *h)
{
	return truncated(h, false, true);
}

static const char *add_mem_reg_truncated_before_start(struct hfe *h)
{
	return truncated(h, true, false);
}

static const char *add_mem_reg_truncated_while_running(struct hfe *h)
{
	return truncated(h, true, true);
}

/* QEMU's migration order while the rings run, then the log's file
 * shrinks to nothing and the rings go on writing. */
static const char *log_truncated_while_logging(struct hfe *h)
{
	int logfd = -1;

	hfe_open(h, P(REPLY_ACK) | P(LOG_SHMFD), 0);
	hfe_mem_table(h, NULL);
	hfe_rings(h, true);
	hfe_traffic(h);
	hfe_logging_on(h, &logfd);
	hfe_traffic(h);
	if (hfe_ok(h) && ftruncate(logfd, 0) < 0)
		snprintf(h->failed, sizeof(h->failed), "ftruncate: %s",
			 strerror(errno));
	hfe_traffic(h);
	hfe_wait_closed(h, 500);
	return NULL;
}

/* Set up with the fds the case chose, then traffic (and kick again). */
static void rings_then_traffic(struct hfe *h, bool kick_again)
{
	hfe_open(h, P(REPLY_ACK), 0);
	hfe_mem_table(h, NULL);
	hfe_rings(h, true);
	hfe_traffic(h);
	if (kick_again)
		hfe_kick_all(h);
	hfe_wait_closed(h, 300);
}

/* ... and the rings must still be served. */
static const char *rings_served(struct hfe *h, bool kick_again)
{
	rings_then_traffic(h, kick_again);
	hfe_expect_served(h);
	return NULL;
}

static const char *call_eventfd_at_max(struct hfe *h)
{
	h->q[1].call = hfe_own(h, eventfd_at_max());
	return rings_served(h, true);
}

static const char *call_pipe_full(struct hfe *h)
{
	int rd = -1;

	h->q[1].call = hfe_own(h, pipe_full(&rd));
	hfe_own(h, rd); /* kept: the pipe has a reader who never reads */
	return rings_served(h, true);
}

/* The error fd is signalled when a ring breaks: break one. */
static const char *err_eventfd_at_max(struct hfe *h)
{
	h->q[1].err = hfe_own(h, eventfd_at_max());
	rings_then_traffic(h, false);
	hfe_break_ring(h, 1);
	hfe_wait_closed(h, 500);
	return NULL;
}

/* One kick for both rings, landing while the daemon is off its CPUs: it
 * then finds both rings' entries of its epoll set ready at once (a kick
 * that wakes it from its sleep may show it one only); SIGSTOP makes that
 * moment certain.  After the first read drains the counter, a second read
 * of the same blocking eventfd never returns.  That one kick is the only
 * write: another would let the blocked read return. */
static const char *kick_one_eventfd_two_rings(struct hfe *h)
{
	int fd = hfe_own(h, eventfd(0, EFD_CLOEXEC)), st;
	uint64_t one = 1;

	h->q[0].kick = h->q[1].kick = fd;
	hfe_open(h, P(REPLY_ACK), 0);
	hfe_mem_table(h, NULL);
	hfe_rings(h, true);
	if (hfe_ok(h) && kill(D.pid, SIGSTOP) == 0) {
		waitpid(D.pid, &st, WUNTRACED);
		if (write(fd, &one, sizeof(one)) < 0)
			snprintf(h->failed, sizeof(h->failed), "the kick: %s",
				 strerror(errno));
		kill(D.pid, SIGCONT);
	}
	hfe_wait_closed(h, 300);
	return NULL;
}

/* Ring 1's kick is fd (kicked by writing 8 bytes to writer, if any):
 * the last ring of a net pair, so ring 0 already runs when its start
 * fails.  With hang_up, the writer then goes away: the kick fd reads
 * end-of-file from then on. */
static const char *odd_kick(struct hfe *h, int fd, int writer, bool hang_up)
{
	if (writer >= 0)
		fcntl(writer, F_SETFL, O_NONBLOCK);
	h->q[1].kick = fd;
	h->q[1].kick_wr = writer;
	rings_then_traffic(h, true);
	if (hang_up) {
		h->q[1].kick_wr = -1;
		hfe_drop(h, writer);
		hfe_wait_closed(h, 300);
	}
	hfe_expect_served(h);
	return NULL;
}

static const char *kick_pipe(struct hfe *h)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		return "pipe2 failed";
	return odd_kick(h, hfe_own(h, p[0]), hfe_own(h, p[1]), true);
}

static const char *kick_socket(struct hfe *h)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return "socketpair failed";
	return odd_kick(h, hfe_own(h, sv[1]), hfe_own(h, sv[0]), true);
}

static const char *kick_memfd(struct hfe *h)
{
	return odd_kick(h,
			hfe_own(h, memfd_create("hostile-kick", MFD_CLOEXEC)),
			-1, false);
}

static const char *kick_pipe_without_reader(struct hfe *h)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		return "pipe2 failed";
	close(p[0]);
	return odd_kick(h, hfe_own(h, p[1]), -1, false);
}

/* Fill a socket's send buffer through fd (without waiting). */
static void socket_fill(int fd)
{
	static const char junk[4096];
	int small = 4096;

	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	while (send(fd, junk, sizeof(junk), MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
		;
	while (send(fd, junk, 1, MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
		;
}

/* The back-end channel: we keep a duplicate of the end we pass, take away
 * the send timeout the back-end gives it and make it block, fill it and
 * never read it; then rings at IOVAs nobody maps make the back-end send
 * IOTLB misses. */
static const char *backend_channel_full(struct hfe *h)
{
	struct vq_vhu_msg m = hfe_msg(VQ_VHU_SET_BACKEND_REQ_FD, VQ_VHU_P_NONE);
	struct timeval none = { 0 };
	int sv[2];

	hfe_open(h, P(REPLY_ACK) | P(BACKEND_REQ),
		 VQ_BIT(VQ_F_ACCESS_PLATFORM));
	if (hfe_ok(h) && (!(h->protocol & P(BACKEND_REQ)) ||
			  !(h->features & VQ_BIT(VQ_F_ACCESS_PLATFORM))))
		return "the daemon does not offer BACKEND_REQ with ACCESS_PLATFORM";
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return "socketpair failed";
	hfe_own(h, sv[0]);
	hfe_own(h, sv[1]);
	hfe_req(h, &m, &sv[1], 1, NULL);
	setsockopt(sv[1], SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none));
	fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) & ~O_NONBLOCK);
	socket_fill(sv[1]);
	h->iova = IOVA_NOWHERE;
	hfe_mem_table(h, NULL);
	hfe_rings(h, false);
	hfe_wait_closed(h, 300);
	return NULL;
}

/* Can this process open a userfaultfd that also takes the kernel's own
 * faults (what the daemons need to offer PAGEFAULT)? */
static bool uffd_here(void)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* ADVISE (we get its userfaultfd and never read it), LISTEN, then memory
 * nobody ever populates and rings on it. */
static const char *postcopy_never_served(struct hfe *h)
{
	struct vq_vhu_msg m, rep;

	hfe_open(h, P(REPLY_ACK) | P(PAGEFAULT), 0);
	if (hfe_ok(h) && !(h->protocol & P(PAGEFAULT))) {
		if (!uffd_here())
			return "no userfaultfd can be opened here (root, or "
			       "vm.unprivileged_userfaultfd=1)";
		snprintf(h->failed, sizeof(h->failed),
			 "PROTOCOL_F_PAGEFAULT not offered, "
			 "though a userfaultfd can be opened here");
		return NULL;
	}
	m = hfe_msg(VQ_VHU_POSTCOPY_ADVISE, VQ_VHU_P_NONE);
	hfe_req(h, &m, NULL, 0, &rep);
	if (hfe_ok(h) && rep.nfds != 1)
		snprintf(h->failed, sizeof(h->failed),
			 "POSTCOPY_ADVISE's reply carried %u fds", rep.nfds);
	for (unsigned i = 0; hfe_ok(h) && i < rep.nfds; i++)
		hfe_own(h, rep.fds[i]);
	m = hfe_msg(VQ_VHU_POSTCOPY_LISTEN, VQ_VHU_P_NONE);
	hfe_req(h, &m, NULL, 0, NULL);
	if (h->refused)
		snprintf(h->failed, sizeof(h->failed),
			 "POSTCOPY_LISTEN was refused");
	if (h->refused)
		return NULL;
	hfe_mem_table(h, &rep); /* the echo, with the daemon's addresses */
	m = hfe_msg(VQ_VHU_SET_MEM_TABLE, VQ_VHU_P_POSTCOPY_ACK);
	hfe_req(h, &m, NULL, 0, NULL);
	hfe_rings(h, false);
	hfe_wait_closed(h, 300);
	return NULL;
}

/* ---- the runner ---- */

struct hcase {
	const char *cls;  /* issue 31's class */
	const char *name; /* the rule it checks */
	const char *rule;
	/* The hostile part: NULL, or why it cannot run here. */
	const char *(*run)(struct hfe *h);
};

#define MEMRD  "vhost-user \"Memory regions description\""
#define RINGST "vhost-user \"Ring states\""

static const struct hcase cases[] = {
	{ "memory files",
	  "vhost_user_set_mem_table_file_truncated_before_start",
	  MEMRD ", VHOST_USER_SET_MEM_TABLE",
	  mem_table_truncated_before_start },
	{ "memory files",
	  "vhost_user_set_mem_table_file_truncated_while_running",
	  MEMRD ", VHOST_USER_SET_MEM_TABLE",
	  mem_table_truncated_while_running },
	{ "memory files", "vhost_user_add_mem_reg_file_truncated_before_start",
	  MEMRD ", VHOST_USER_ADD_MEM_REG",
	  add_mem_reg_truncated_before_start },
	{ "memory files", "vhost_user_add_mem_reg_file_truncated_while_running",
	  MEMRD ", VHOST_USER_ADD_MEM_REG",
	  add_mem_reg_truncated_while_running },
	{ "memory files",
	  "vhost_user_migration_log_file_truncated_while_logging",
	  "vhost-user \"Migration\", VHOST_USER_SET_LOG_BASE",
	  log_truncated_while_logging },
	{ "notification fds", "vhost_user_set_vring_call_eventfd_at_max_count",
	  "VHOST_USER_SET_VRING_CALL", call_eventfd_at_max },
	{ "notification fds", "vhost_user_set_vring_err_eventfd_at_max_count",
	  "VHOST_USER_SET_VRING_ERR", err_eventfd_at_max },
	{ "notification fds", "vhost_user_set_vring_call_full_blocking_pipe",
	  "VHOST_USER_SET_VRING_CALL", call_pipe_full },
	{ "notification fds", "vhost_user_set_vring_kick_one_eventfd_two_rings",
	  "VHOST_USER_SET_VRING_KICK", kick_one_eventfd_two_rings },
	{ "fd kinds", "vhost_user_set_vring_kick_pipe",
	  RINGST ", VHOST_USER_SET_VRING_KICK", kick_pipe },
	{ "fd kinds", "vhost_user_set_vring_kick_socket",
	  RINGST ", VHOST_USER_SET_VRING_KICK", kick_socket },
	{ "fd kinds", "vhost_user_set_vring_kick_memfd",
	  RINGST ", VHOST_USER_SET_VRING_KICK", kick_memfd },
	{ "fd kinds", "vhost_user_set_vring_kick_pipe_without_reader",
	  RINGST ", VHOST_USER_SET_VRING_KICK", kick_pipe_without_reader },
	{ "back-end channel",
	  "vhost_user_iommu_backend_channel_full_and_blocking",
	  "vhost-user \"IOMMU support\", VHOST_USER_SET_BACKEND_REQ_FD",
	  backend_channel_full },
	{ "postcopy", "vhost_user_postcopy_faults_never_served",
	  "vhost-user \"Migration\" (postcopy), VHOST_USER_POSTCOPY_LISTEN",
	  postcopy_never_served },
};

enum verdict { PASS, FAIL, SKIP };

static void add(char *why, size_t n, const char *what, const char *r)
{
	size_t l = strlen(why);

	if (r && l < n)
		snprintf(why + l, n - l, "%s%s%s", l ? "; " : "", what, r);
}

/* After the hostile part: the daemon alive, a good session, its counts.
 * A daemon that was dying when the session started (a sanitizer's report
 * takes a while) is found dead afterwards: that is the finding. */
static void judge(char *why, size_t n)
{
	const char *r = daemon_gone(&D);
	char good[512];

	add(why, n, "", r);
	if (r)
		return;
	r = good_session(&D);
	if (r) {
		snprintf(good, sizeof(good), "%s", r);
		r = daemon_gone_within(&D, SETTLE_MS);
		add(why, n, "", r);
		if (r)
			return;
		add(why, n, "then ", good);
	}
	add(why, n, "then ", counts_settle(&D));
}

static enum verdict run_case(const struct hcase *c, char *why, size_t n,
			     char *conn, size_t cn)
{
	struct hfe h;
	const char *skip;

	why[0] = conn[0] = '\0';
	if (D.pid <= 0) {
		snprintf(why, n, "no daemon to run on");
		return FAIL;
	}
	hfe_init(&h, &D);
	skip = c->run(&h);
	if (skip) {
		hfe_close(&h);
		snprintf(why, n, "%s%s",
			 ci ? "cannot run here, and CI=true: " : "", skip);
		return ci ? FAIL : SKIP;
	}
	add(why, n, "", h.failed[0] ? h.failed : NULL);
	add(why, n, "while its connection was open: ", hfe_probe(&h));
	snprintf(conn, cn, "%s%s%s",
		 h.why[0] ? h.why : "open until the case closed it",
		 h.note[0] ? "; " : "", h.note);
	hfe_close(&h);
	judge(why, n);
	return why[0] ? FAIL : PASS;
}

static char alarm_msg[256];
static volatile pid_t alarm_pid;

/* A failed case may leave the daemon dead, hung or leaking: the next case
 * gets a fresh one. */
static void restart(char *why, size_t n)
{
	const char *r;
	char pid[64];

	daemon_kill(&D);
	r = daemon_start(&D);
	if (r) {
		add(why, n, "and a new daemon failed: ", r);
		daemon_kill(&D);
		return;
	}
	alarm_pid = D.pid;
	snprintf(pid, sizeof(pid), "%d", (int)D.pid);
	add(why, n, "restarted: pid ", pid);
}

static void on_alarm(int sig)
{
	(void)sig;
	if (write(1, alarm_msg, strlen(alarm_msg)) < 0)
		_exit(1);
	if (alarm_pid > 0)
		kill(alarm_pid, SIGKILL);
	_exit(1);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void setup(const char *kind, const char *bin)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	D.kind = strcmp(kind, "net") ? K_VSOCK : K_NET;
	D.bin = bin;
	D.name = D.kind == K_NET ? "virtq-net" : "virtq-vsock";
	D.good_listener = -1;
	snprintf(D.dir, sizeof(D.dir), "/tmp/vq-hostile-%s.XXXXXX", kind);
	if (!mkdtemp(D.dir))
		exit(1);
	snprintf(D.sock, sizeof(D.sock), "%s/vu.sock", D.dir);
	snprintf(D.uds, sizeof(D.uds), "%s/h.sock", D.dir);
	if (D.kind == K_NET)
		return;
	/* the host program the good guest connects to (HOST_PATH_PORT) */
	snprintf(a.sun_path, sizeof(a.sun_path), "%s_%u", D.uds, GOOD_PORT);
	D.good_listener =
		socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (D.good_listener < 0 ||
	    bind(D.good_listener, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(D.good_listener, 8)) {
		perror("the host listener");
		exit(1);
	}
}

static void cleanup(bool keep_logs)
{
	char path[128];

	if (D.good_listener >= 0) {
		close(D.good_listener);
		snprintf(path, sizeof(path), "%s_%u", D.uds, GOOD_PORT);
		unlink(path);
	}
	if (keep_logs) {
		printf("the daemon's logs: %s\n", D.dir);
		return;
	}
	for (unsigned i = 1; i <= D.starts; i++) {
		snprintf(path, sizeof(path), "%s/%s.%u.log", D.dir, D.name, i);
		unlink(path);
	}
	rmdir(D.dir);
}

int main(int argc, char **argv)
{
	unsigned pass = 0, fail = 0, skip = 0;
	double t0 = now_s();
	const char *r, *only;
	char why[1024], conn[512];

	if (argc < 3 || (strcmp(argv[1], "net") && strcmp(argv[1], "vsock"))) {
		fprintf(stderr, "usage: %s net|vsock BINARY\n", argv[0]);
		return 2;
	}
	ci = getenv("CI") && !strcmp(getenv("CI"), "true");
	only = getenv("HOSTILE_CASE");
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, on_alarm);
	setvbuf(stdout, NULL, _IOLBF, 0);
	setup(argv[1], argv[2]);
	snprintf(alarm_msg, sizeof(alarm_msg),
		 "FAIL  baseline: the test hung\n");
	alarm(CASE_ALARM_S);
	if ((r = daemon_start(&D))) {
		printf("FAIL  baseline: %s\n", r);
		daemon_kill(&D);
		cleanup(true);
		return 1;
	}
	printf("baseline: %s pid %d after a good session: %d fds, %d threads, "
	       "%d memfd mappings, VmRSS %ld kB\n",
	       D.name, (int)D.pid, D.base.fds, D.base.tasks, D.base.memfd_maps,
	       D.base.rss_kb);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct hcase *c = &cases[i];
		enum verdict v;

		if (only && !strstr(c->name, only))
			continue;
		snprintf(alarm_msg, sizeof(alarm_msg),
			 "FAIL  %s: the test itself hung "
			 "(%d s)\n",
			 c->name, CASE_ALARM_S);
		alarm_pid = D.pid;
		alarm(CASE_ALARM_S);
		v = run_case(c, why, sizeof(why), conn, sizeof(conn));
		if (v == FAIL)
			restart(why, sizeof(why));
		alarm(0);
		pass += v == PASS;
		fail += v == FAIL;
		skip += v == SKIP;
		printf("%s  %s: %s [%s]%s%s\n",
		       v == PASS   ? "PASS"
		       : v == FAIL ? "FAIL"
				   : "SKIP",
		       c->cls, c->name, c->rule, why[0] ? ": " : "", why);
		if (conn[0])
			printf("        hostile connection: %s\n", conn);
	}
	/* vhost-user.rst "Backend program conventions": exit promptly on
	 * SIGTERM (and, under ASan, with no leak) */
	if (D.pid > 0) {
		struct counts c;

		counts_take(D.pid, &c);
		printf("end: %s pid %d: VmRSS %ld kB (baseline %ld kB)\n",
		       D.name, (int)D.pid, c.rss_kb, D.base.rss_kb);
	}
	r = daemon_term(&D, 5000);
	printf("%s  conventions: backend_conventions_sigterm_ends_cleanly%s%s\n",
	       r ? "FAIL" : "PASS", r ? ": " : "", r ? r : "");
	r ? fail++ : pass++;
	printf("%s hostile: %u passed, %u failed, %u skipped, in %.1f s\n",
	       D.name, pass, fail, skip, now_s() - t0);
	cleanup(fail > 0);
	return fail ? 1 : 0;
}
