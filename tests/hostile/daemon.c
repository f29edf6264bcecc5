// SPDX-License-Identifier: MIT
/*
 * The daemon under test, judged from outside: is it still running (if
 * not, what its log says killed it), does a new good front-end get a
 * handshake and traffic through it within GOOD_MS (our vhost-user
 * front-end; frames looped back by virtq-net, bytes both ways between
 * our vsock guest driver and a host UNIX socket through virtq-vsock), and
 * are its fds, threads, memfd mappings and RSS back where a good session
 * left them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <virtq/runtime.h>
#include <virtq/guest/frontend.h>
#include <virtq/vsock.h>

#include "hostile.h"
#include "vq_tool.h"

static char reason[512];

static const char *say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	return reason;
}

static uint64_t now_ms(void)
{
	return vq_rt_now_ns() / 1000000;
}

/* ---- counts from /proc ---- */

static int dir_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

void counts_take(pid_t pid, struct counts *c)
{
	char path[64], line[512];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	c->fds = dir_entries(path);
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	c->tasks = dir_entries(path);
	c->memfd_maps = 0;
	c->rss_kb = -1;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if ((f = fopen(path, "r"))) {
		while (fgets(line, sizeof(line), f))
			c->memfd_maps += strstr(line, "/memfd:") != NULL;
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "r"))) {
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "VmRSS:", 6))
				c->rss_kb = strtol(line + 6, NULL, 10);
		fclose(f);
	}
}

static bool counts_same(const struct counts *a, const struct counts *b)
{
	return a->fds == b->fds && a->tasks == b->tasks &&
	       a->memfd_maps == b->memfd_maps;
}

const char *counts_settle(struct daemon *d)
{
	uint64_t end = now_ms() + SETTLE_MS;
	struct counts c;

	for (;;) {
		counts_take(d->pid, &c);
		if (counts_same(&c, &d->base))
			break;
		if (now_ms() > end)
			return say("after %d ms: fds %d (baseline %d), threads %d (%d), "
				   "memfd mappings %d (%d)",
				   SETTLE_MS, c.fds, d->base.fds, c.tasks,
				   d->base.tasks, c.memfd_maps,
				   d->base.memfd_maps);
		usleep(50 * 1000);
	}
	if (c.rss_kb > d->base.rss_kb + RSS_SLACK_KB)
		return say("VmRSS %ld kB, %ld kB over the baseline (at most %d)",
			   c.rss_kb, c.rss_kb - d->base.rss_kb, RSS_SLACK_KB);
	return NULL;
}

/* ---- the process ---- */

/* The line of the daemon's log that says most: a sanitizer's report,
 * else its last line. */
static const char *log_excerpt(const struct daemon *d)
{
	static const char *const keys[] = {
		"ERROR: AddressSanitizer",
		"runtime error:", "ERROR: LeakSanitizer", "SUMMARY:"
	};
	static char best[240];
	char line[240];
	FILE *f = fopen(d->log, "r");
	unsigned rank = sizeof(keys) / sizeof(keys[0]);

	best[0] = '\0';
	if (!f)
		return best;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		for (unsigned k = 0; k < rank; k++)
			if (strstr(line, keys[k])) {
				snprintf(best, sizeof(best), "%s", line);
				rank = k;
				break;
			}
		if (rank == sizeof(keys) / sizeof(keys[0]) && line[0])
			snprintf(best, sizeof(best), "%s", line);
	}
	fclose(f);
	return best;
}

static const char *status_says(const struct daemon *d, int st)
{
	const char *log = log_excerpt(d);
	char what[64];

	if (WIFSIGNALED(st))
		snprintf(what, sizeof(what), "died of signal %d (%s)",
			 WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		snprintf(what, sizeof(what), "exited with status %d",
			 WEXITSTATUS(st));
	if (!log[0])
		return say("%s %s, its log empty", d->name, what);
	return say("%s %s; its log: \"%s\"", d->name, what, log);
}

const char *daemon_gone(struct daemon *d)
{
	int st;

	if (d->pid <= 0)
		return say("%s is not running", d->name);
	if (waitpid(d->pid, &st, WNOHANG) != d->pid)
		return NULL;
	d->pid = 0;
	return status_says(d, st);
}

const char *daemon_gone_within(struct daemon *d, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	const char *r;

	while (!(r = daemon_gone(d)) && now_ms() < end)
		usleep(20 * 1000);
	return r;
}

void daemon_kill(struct daemon *d)
{
	if (d->pid <= 0)
		return;
	kill(d->pid, SIGKILL);
	waitpid(d->pid, NULL, 0);
	d->pid = 0;
}

const char *daemon_term(struct daemon *d, int ms)
{
	int st;
	uint64_t end = now_ms() + (uint64_t)ms;

	if (d->pid <= 0)
		return say("%s is not running", d->name);
	kill(d->pid, SIGTERM);
	while (waitpid(d->pid, &st, WNOHANG) != d->pid) {
		if (now_ms() > end) {
			daemon_kill(d);
			return say("%s did not end within %d ms of SIGTERM",
				   d->name, ms);
		}
		usleep(10 * 1000);
	}
	d->pid = 0;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? NULL
						     : status_says(d, st);
}

static void exec_daemon(const struct daemon *d)
{
	char cid[16];
	const char *argv[12] = { d->bin, "--socket-path", d->sock, "--quiet" };
	int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);

	snprintf(cid, sizeof(cid), "%u", HOSTILE_CID);
	if (d->kind == K_NET) {
		argv[4] = "--mode";
		argv[5] = "loopback";
	} else {
		argv[4] = "--guest-cid";
		argv[5] = cid;
		argv[6] = "--uds-path";
		argv[7] = d->uds;
	}
	dup2(nul, 0);
	dup2(nul, 1);
	dup2(fd, 2);
	/* nothing inherited in its fd table: its counts are its own */
	for (int i = 3; i < 1024; i++)
		close(i);
	execv(d->bin, (char *const *)argv);
	_exit(127);
}

/* The counts once they stop moving after a session. */
static void counts_stable(pid_t pid, struct counts *c)
{
	struct counts prev;
	uint64_t end = now_ms() + SETTLE_MS;

	counts_take(pid, c);
	do {
		prev = *c;
		usleep(100 * 1000);
		counts_take(pid, c);
	} while (!counts_same(&prev, c) && now_ms() < end);
}

const char *daemon_start(struct daemon *d)
{
	const char *r;

	snprintf(d->log, sizeof(d->log), "%s/%s.%u.log", d->dir, d->name,
		 ++d->starts);
	d->pid = fork();
	if (d->pid < 0)
		return say("fork: %s", strerror(errno));
	if (d->pid == 0)
		exec_daemon(d);
	for (int i = 0; !vq_test_unix_accepts(d->sock, SOCK_STREAM); i++) {
		if ((r = daemon_gone(d)))
			return r;
		if (i == 500)
			return say("%s did not listen on %s within 5 s",
				   d->name, d->sock);
		usleep(10 * 1000);
	}
	r = good_session(d);
	if (r)
		return r;
	counts_stable(d->pid, &d->base);
	return NULL;
}

/* ---- good sessions ---- */

static struct vq_vhu_frontend *fe_connect(struct daemon *d, unsigned nq,
					  uint16_t qsize, const char **why)
{
	char err[256] = "";
	struct vq_vhu_frontend_config fc = {
		.features = VQ_BIT(VQ_F_VERSION_1),
		.nqueues = nq,
		.queue_size = qsize,
		.mem_size = 4u << 20,
		.timeout_ms = 3000,
		.err = err,
		.errlen = sizeof(err),
	};
	struct vq_vhu_frontend *f;
	int r = vq_vhu_frontend_connect(d->sock, &fc, &f);

	if (r) {
		*why = say("a new front-end's handshake failed: %s",
			   err[0] ? err : strerror(-r));
		return NULL;
	}
	return f;
}

static const char *fe_start(struct vq_vhu_frontend *f)
{
	if (vq_vhu_frontend_start(f) == 0)
		return NULL;
	return say("a new front-end could not start its rings: %s",
		   vq_vhu_frontend_error_msg(f));
}

static void fe_kick(struct vq_vhu_frontend *f, unsigned i)
{
	if (vq_drv_kick_prepare(vq_vhu_frontend_queue(f, i)) > 0)
		vq_evt_signal(vq_vhu_frontend_kick_fd(f, i));
}

/* Sleep on the rings' call fds (and fd) for up to 1 ms. */
static void fe_wait(struct vq_vhu_frontend *f, unsigned nq, int fd)
{
	struct pollfd p[4];
	unsigned n = 0;

	for (unsigned i = 0; i < nq && n < 3; i++)
		p[n++] = (struct pollfd){ .fd = vq_vhu_frontend_call_fd(f, i),
					  .events = POLLIN };
	if (fd >= 0)
		p[n++] = (struct pollfd){ .fd = fd, .events = POLLIN };
	poll(p, n, 1);
	for (unsigned i = 0; i < nq; i++)
		vq_evt_drain(vq_vhu_frontend_call_fd(f, i));
}

enum { GOOD_FRAMES = 32, RXBUF = 2048, TXSLOT = 128, FRAME = 64 };

/* Frames out on TX, back on RX with the MACs swapped (loopback). */
static const char *net_frames(struct vq_vhu_frontend *f)
{
	struct vq_drv *rx = vq_vhu_frontend_queue(f, 0),
		      *tx = vq_vhu_frontend_queue(f, 1);
	uint64_t rxg, txg, end = now_ms() + GOOD_MS;
	uint8_t *rxb = vq_vhu_frontend_alloc(f, GOOD_FRAMES * RXBUF, &rxg);
	uint8_t *txb = vq_vhu_frontend_alloc(f, GOOD_FRAMES * TXSLOT, &txg);
	uint32_t seen = 0, len;
	unsigned back = 0, bad = 0, sent = 0;
	void *t;

	if (!rxb || !txb)
		return say("the good front-end's memory ran out");
	for (uintptr_t i = 0; i < GOOD_FRAMES; i++)
		vq_drv_add(rx, &(struct vq_seg){ rxg + i * RXBUF, RXBUF }, 0, 1,
			   (void *)(i + 1));
	fe_kick(f, 0);
	for (uintptr_t i = 0; i < GOOD_FRAMES; i++) {
		memset(txb + i * TXSLOT, 0, 12);
		frame_fill(txb + i * TXSLOT + 12, FRAME, (uint32_t)i);
		vq_drv_add(tx, &(struct vq_seg){ txg + i * TXSLOT, 12 + FRAME },
			   1, 0, (void *)(i + 1));
	}
	fe_kick(f, 1);
	while (back < GOOD_FRAMES && now_ms() < end) {
		while (vq_drv_get(rx, &t, &len) == 1) {
			const uint8_t *p =
				rxb + ((uintptr_t)t - 1) * RXBUF + 12;
			uint32_t seq;

			memcpy(&seq, p + 14, 4);
			if (len == 12 + FRAME && seq < GOOD_FRAMES &&
			    !(seen & (1u << seq)) &&
			    frame_looped(p, FRAME, seq))
				seen |= 1u << seq, back++;
			else
				bad++;
		}
		while (vq_drv_get(tx, &t, &len) == 1)
			sent++;
		fe_wait(f, 2, -1);
	}
	if (back == GOOD_FRAMES && !bad)
		return NULL;
	return say("a new front-end got %u of %u frames back looped within %d ms "
		   "(%u wrong, %u sent)",
		   back, GOOD_FRAMES, GOOD_MS, bad, sent);
}

static const char *good_net(struct daemon *d)
{
	const char *why = NULL;
	struct vq_vhu_frontend *f = fe_connect(d, 2, 256, &why);

	if (!f)
		return why;
	why = fe_start(f);
	if (!why)
		why = net_frames(f);
	vq_vhu_frontend_free(f);
	return why;
}

struct vs_session {
	struct vq_vhu_frontend *f;
	struct vq_vsg *g;
	struct vq_vsg_conn *c;
	int host;
	uint64_t end;
};

static void vs_kick(void *arg, unsigned q)
{
	vq_evt_signal(
		vq_vhu_frontend_kick_fd(((struct vs_session *)arg)->f, q));
}

/* One turn of the guest; false once it broke or the time is up. */
static bool vs_turn(struct vs_session *s)
{
	if (vq_vsg_poll(s->g) < 0)
		return false;
	fe_wait(s->f, 3, s->host);
	return now_ms() < s->end;
}

static void pattern(uint8_t *p, size_t n, unsigned salt)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 13 + salt);
}

enum { VS_BYTES = 8192 };

/* The guest's connection to the host listener, then bytes each way. */
static const char *vs_bytes(struct vs_session *s, int listener)
{
	uint8_t out[VS_BYTES], in[VS_BYTES];
	uint32_t sent = 0, got = 0;
	ssize_t n;

	while ((s->host < 0 || vq_vsg_state(s->c) != VQ_VSG_ESTABLISHED) &&
	       vs_turn(s)) {
		if (s->host < 0)
			s->host = accept4(listener, NULL, NULL,
					  SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (vq_vsg_state(s->c) == VQ_VSG_CLOSED)
			return say(
				"a new guest's connection to the host was refused");
	}
	if (s->host < 0 || vq_vsg_state(s->c) != VQ_VSG_ESTABLISHED)
		return say("a new guest could not connect to the host within %d ms",
			   GOOD_MS);
	pattern(out, sizeof(out), 1);
	while (got < VS_BYTES && vs_turn(s)) {
		long w = vq_vsg_write(s->c, out + sent, VS_BYTES - sent);

		sent += w > 0 ? (uint32_t)w : 0;
		n = read(s->host, in + got, VS_BYTES - got);
		got += n > 0 ? (uint32_t)n : 0;
	}
	if (got < VS_BYTES || memcmp(in, out, VS_BYTES))
		return say("guest to host: %u of %u bytes arrived%s", got,
			   VS_BYTES, got == VS_BYTES ? ", wrong" : "");
	pattern(out, sizeof(out), 2);
	sent = got = 0;
	while (got < VS_BYTES && vs_turn(s)) {
		n = sent < VS_BYTES
			    ? write(s->host, out + sent, VS_BYTES - sent)
			    : 0;
		sent += n > 0 ? (uint32_t)n : 0;
		got += vq_vsg_read(s->c, in + got, VS_BYTES - got);
	}
	if (got < VS_BYTES || memcmp(in, out, VS_BYTES))
		return say("host to guest: %u of %u bytes arrived%s", got,
			   VS_BYTES, got == VS_BYTES ? ", wrong" : "");
	return NULL;
}

static const char *vs_guest(struct vs_session *s, int listener)
{
	struct vq_vsock_config_space cs;
	struct vq_drv *q[3];
	struct vq_vsg_area a[3];
	const uint64_t size[3] = { VSG_RX_SIZE, VSG_TX_SIZE, VSG_EV_SIZE };
	const char *why;

	if (vq_vhu_frontend_get_config(s->f, 0, &cs, sizeof(cs)))
		return say("a new front-end's GET_CONFIG failed: %s",
			   vq_vhu_frontend_error_msg(s->f));
	if (vq_le64(cs.guest_cid) != HOSTILE_CID)
		return say("GET_CONFIG says guest CID %llu, not %u",
			   (unsigned long long)vq_le64(cs.guest_cid),
			   HOSTILE_CID);
	if ((why = fe_start(s->f)))
		return why;
	for (unsigned i = 0; i < 3; i++) {
		q[i] = vq_vhu_frontend_queue(s->f, i);
		a[i].size = size[i];
		a[i].hva = vq_vhu_frontend_alloc(s->f, size[i], &a[i].gpa);
		if (!a[i].hva)
			return say("the good front-end's memory ran out");
	}
	if (vsg_make(q, a, vs_kick, s, &s->g) ||
	    vq_vsg_connect(s->g, GOOD_PORT, VQ_VSOCK_TYPE_STREAM, &s->c))
		return say("the guest driver would not start");
	return vs_bytes(s, listener);
}

static const char *good_vsock(struct daemon *d)
{
	const char *why = NULL;
	struct vs_session s = { .host = -1, .end = now_ms() + GOOD_MS };

	s.f = fe_connect(d, 3, VSG_NUM, &why);
	if (!s.f)
		return why;
	why = vs_guest(&s, d->good_listener);
	vq_vsg_free(s.g);
	if (s.host >= 0)
		close(s.host);
	vq_vhu_frontend_free(s.f);
	return why;
}

const char *good_session(struct daemon *d)
{
	return d->kind == K_NET ? good_net(d) : good_vsock(d);
}
