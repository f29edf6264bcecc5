// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the back-end's message handling: the input is a
 * sequence of messages, each with 0-3 fds (a 1 MiB guest memfd or eventfds),
 * fed to a back-end over a socketpair in any order.  Beyond "no crash": the
 * back-end must close every fd and unmap every region when the connection
 * ends, whatever came before.
 *
 * Every message the back-end logs (all levels, so every format runs on
 * hostile values) must be one non-empty line, and the reason a connection
 * closed must name the spec's place first.  The device holds the library
 * to its queue contract (a start, then a stop, a pause first maybe; a
 * failed start closes the connection) and uses each ring and its fds as a
 * device does.
 *
 * Record: u8 fdspec, u16 len, len bytes of message.  fdspec bits 0-1: how
 * many fds; bit 2: the first is the guest memfd; bit 3: the device fails
 * its next queue_start, once the back-end has read what came before; bits
 * 4-7: the kind of the other fds (enum hfd_kind; 0, the plain one, is a
 * non-blocking eventfd, or a socket for SET_BACKEND_REQ_FD), unless the
 * environment has VQ_FUZZ_HOSTILE_FDS=0 (then always the plain one).
 * Built with FUZZ_FW (fuzz_fw_backend), the device is on the device
 * framework: its rings start, pause and stop on a worker thread.
 *
 * The records are written as the back-end reads them: without blocking,
 * and when the socket is full the back-end handles every message that has
 * arrived whole (never one that has not, which it would wait for).  The
 * input ends early, cleanly, when the back-end closes the connection or
 * when a message cut into many small records cannot fit in the socket.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <virtq/framework.h>
#include <virtq/log.h>
#include <virtq/runtime.h>
#include <virtq/vhost_user_backend.h>

#include "hostile_fds.h"
#include "spec_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *why)
{
	fprintf(stderr, "fuzz_backend: %s\n", why);
	abort();
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	if (!d)
		die("opendir");
	while ((de = readdir(d)))
		n++;
	closedir(d);
	return n;
}

/* What the library told the device of each queue: its contract is a
 * start, then a stop (a pause first, maybe), never two starts in a row,
 * and every queue stopped for good when the backend goes.  A start the
 * device fails leaves the queue as it was and closes the connection. */
enum { Q_IDLE, Q_RUNNING, Q_PAUSED };
static unsigned qstate[2];
/* atomic: with the framework, starts run on its worker */
static bool fail_next_start, start_failed;

static bool open_or_none(int fd)
{
	return fd == -1 || fcntl(fd, F_GETFD) >= 0;
}

static int qstart(void *o, const struct vq_vhu_queue *q)
{
	struct iovec iov[8];
	struct vq_chain c = { .iov = iov, .iov_max = 8 };

	(void)o;
	if (q->index >= 2 || qstate[q->index] == Q_RUNNING)
		die("queue_start on a running queue");
	if (!q->vq || !open_or_none(q->kick_fd) || !open_or_none(q->call_fd) ||
	    !open_or_none(q->err_fd))
		die("queue_start without a ring or with a closed fd");
	if (fail_next_start) {
		fail_next_start = false;
		start_failed = true;
		return -EIO;
	}
	qstate[q->index] = Q_RUNNING;
	/* the ring and its fds, as a device uses them: take the kicks, pop,
	 * push, call; signal the err fd if the ring broke */
	if (q->kick_fd >= 0)
		vq_evt_drain(q->kick_fd);
	if (vq_dev_pop(q->vq, &c) == 1 && vq_dev_push(q->vq, &c, 0) == 0 &&
	    q->call_fd >= 0 && vq_dev_should_signal(q->vq))
		vq_evt_signal(q->call_fd);
	if (vq_dev_error(q->vq) && q->err_fd >= 0)
		vq_evt_signal(q->err_fd);
	return 0;
}

static void qstop(void *o, unsigned i, bool resumes)
{
	(void)o;
	if (i >= 2 || !(qstate[i] == Q_RUNNING || (qstate[i] == Q_PAUSED && !resumes)))
		die("queue_stop out of turn");
	qstate[i] = resumes ? Q_PAUSED : Q_IDLE;
}

static void get_config(void *o, uint32_t off, void *buf, uint32_t len)
{
	(void)o;
	(void)off;
	memset(buf, 0xa5, len);
}

static int set_config(void *o, uint32_t off, const void *buf, uint32_t len,
		      uint32_t flags)
{
	(void)o;
	(void)buf;
	return off < 4 && !(flags & 1) ? -EPERM : (int)(len & 0);
}

/* Refuses every other MAC, so both REPLY_ACK answers are reachable. */
static int send_rarp(void *o, const uint8_t mac[6])
{
	(void)o;
	return mac[5] & 1 ? -ENETDOWN : 0;
}

/* Refuses MTUs above 9000, so both REPLY_ACK answers are reachable. */
static int set_mtu(void *o, uint16_t mtu)
{
	(void)o;
	return mtu > 9000 ? -EMSGSIZE : 0;
}

static const struct vq_vhu_device_ops ops = {
	.queue_start = qstart, .queue_stop = qstop,
	.get_config = get_config, .set_config = set_config,
	.send_rarp = send_rarp, .set_mtu = set_mtu,
};

#ifdef FUZZ_FW
/* The same device on the framework: its rings start, pause and stop as
 * calls on a worker, and turn on its loop. */
static int fw_turn(struct vq_rt_queue *q, void *arg, const struct vq_rt_budget *b,
		   uint64_t *bytes)
{
	struct vq_dev *vq = vq_fw_ring_vq(arg);
	struct iovec iov[8];
	struct vq_chain c = { .iov = iov, .iov_max = 8 };
	unsigned n = 0;
	int k = 0;

	while (n < b->pkts && (k = vq_dev_pop(vq, &c)) == 1 && vq_dev_push(vq, &c, 0) == 0)
		n++;
	return k < 0 ? k : (int)n;
}

static int fw_start(void *o, struct vq_fw_ring *r, bool resumed, struct vq_fw_turn *t)
{
	unsigned i = vq_fw_ring_index(r);

	(void)o;
	if (i >= 2 || qstate[i] == Q_RUNNING)
		die("ring_start on a running ring");
	if (resumed != (qstate[i] == Q_PAUSED))
		die("ring_start's resumed is not what the ring was");
	if (!vq_fw_ring_vq(r))
		die("ring_start without a ring");
	if (__atomic_exchange_n(&fail_next_start, false, __ATOMIC_ACQ_REL)) {
		__atomic_store_n(&start_failed, true, __ATOMIC_RELEASE);
		return -EIO;
	}
	qstate[i] = Q_RUNNING;
	t->process = fw_turn;
	t->arg = r;
	return 0;
}

static void fw_stop(void *o, struct vq_fw_ring *r, bool paused)
{
	unsigned i = vq_fw_ring_index(r);

	(void)o;
	if (i >= 2 || !(qstate[i] == Q_RUNNING || (qstate[i] == Q_PAUSED && !paused)))
		die("ring_stop out of turn");
	qstate[i] = paused ? Q_PAUSED : Q_IDLE;
}

static const struct vq_fw_device_ops fw_ops = {
	.ring_start = fw_start, .ring_stop = fw_stop,
	.get_config = get_config, .set_config = set_config,
	.send_rarp = send_rarp, .set_mtu = set_mtu,
};
static struct vq_fw *fw;
#endif


static void check_log(void *arg, enum vq_log_level level, const char *msg)
{
	(void)arg;
	if (level < VQ_LOG_ERR || level > VQ_LOG_DEBUG || !msg[0] ||
	    strchr(msg, '\n'))
		die("a log message that is not one line");
}

static int guest_fd = -1;
static bool hostile;            /* not VQ_FUZZ_HOSTILE_FDS=0 */
/* Fds one input may pass: those in flight count against RLIMIT_NOFILE
 * (sendmsg fails with ETOOMANYREFS past it). */
static unsigned fd_budget;

/* Our end of the connection and everything sent on it, so we know where
 * the back-end's next message starts. */
struct feed {
	struct vq_vhu_backend *b;
	int s;
	uint8_t *stream;
	size_t sent;
	unsigned fds_left;
	bool ended;                     /* nothing more will be sent */
	struct hfd_set hfd;
};

/* Bytes sent that the back-end has not read; 0 once it closed. */
static size_t unread(const struct feed *f)
{
	int n = 0;

	if (!vq_vhu_backend_connected(f->b) ||
	    ioctl(vq_vhu_backend_fd(f->b), FIONREAD, &n) < 0 || n < 0)
		return 0;
	return (size_t)n < f->sent ? (size_t)n : f->sent;
}

/* Whether the n unread bytes begin with a whole message, or a header the
 * back-end refuses: either way it handles them without waiting. */
static bool whole_message(const struct feed *f, size_t n)
{
	const uint8_t *hdr = f->stream + f->sent - n;
	uint32_t payload;

	if (n < VQ_VHU_HDR_SIZE)
		return false;
	return vq_vhu_check_request_hdr(hdr, &payload) != 0 ||
	       n - VQ_VHU_HDR_SIZE >= payload;
}

/* One message handled; its replies (and any fds in them) discarded. */
static int process(struct feed *f)
{
	char sink[4096];
	int r = vq_vhu_backend_process(f->b);

	while (recv(f->s, sink, sizeof(sink), MSG_DONTWAIT) > 0)
		;
#ifndef FUZZ_FW
	/* (on the framework the worker fails the connection later) */
	if (start_failed && vq_vhu_backend_connected(f->b))
		die("a failed queue_start left the connection open");
#endif
	return r;
}

/* The back-end handles every message that has arrived whole.  Whether it
 * read anything (or closed the connection). */
static bool pump(struct feed *f)
{
	size_t before = unread(f), n;

	while ((n = unread(f)) && whole_message(f, n))
		if (process(f) <= 0)
			break;
	return !vq_vhu_backend_connected(f->b) || unread(f) < before;
}

/* The device's failure and a memfd's shrinking come once the back-end
 * has read everything sent before them. */
static void settle(struct feed *f, bool fail_start)
{
	if (!fail_start && !hfd_shrink_pending(&f->hfd))
		return;
	pump(f);
	hfd_shrink(&f->hfd);
	if (fail_start)
		__atomic_store_n(&fail_next_start, true, __ATOMIC_RELEASE);
}

static void send_all(struct feed *f, const uint8_t *p, size_t len,
		     const int *fds, unsigned nfds)
{
	union { char b[CMSG_SPACE(3 * sizeof(int))]; struct cmsghdr a; } c;
	size_t done = 0;

	while (!f->ended && done < len) {
		struct iovec iov = { (void *)(p + done), len - done };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t n;
		bool full;

		if (nfds && !done) {
			struct cmsghdr *cm;

			mh.msg_control = c.b;
			mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
			cm = CMSG_FIRSTHDR(&mh);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
			memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
		}
		n = sendmsg(f->s, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		/* fds in flight count as well as bytes */
		full = n < 0 && (errno == EAGAIN || errno == ETOOMANYREFS);
		if (n > 0) {
			memcpy(f->stream + f->sent, p + done, (size_t)n);
			f->sent += (size_t)n;
			done += (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (!full || !pump(f)) {
			/* the back-end closed the connection, or cannot read
			 * what we cannot send */
			f->ended = true;
		}
	}
}

static void send_rec(struct feed *f, unsigned spec, const uint8_t *p,
		     size_t len)
{
	enum hfd_kind kind = hostile ? (enum hfd_kind)(spec >> 4) : HFD_EVENTFD;
	unsigned want = spec & 3, nfds = 0;
	uint32_t req = 0;

	/* SET_BACKEND_REQ_FD takes a socket (the back-end refuses anything
	 * else): the plain kind gives it one, so the session goes on and its
	 * IOTLB misses are sent */
	if (len >= 4)
		memcpy(&req, p, 4);
	if (kind == HFD_EVENTFD && req == VQ_VHU_SET_BACKEND_REQ_FD)
		kind = HFD_SOCKET;
	int fds[3];

	settle(f, spec & 8);
	if (!len || f->ended)
		return;
	if (want > f->fds_left)
		want = f->fds_left;
	while (nfds < want) {
		int fd = nfds == 0 && (spec & 4) ? dup(guest_fd) :
			 hfd_make(&f->hfd, kind);

		if (fd < 0)
			break;
		fds[nfds++] = fd;
	}
	f->fds_left -= nfds;
	send_all(f, p, len, fds, nfds);
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
}

/* The library writes to fds a front-end passed: a write it lets raise
 * SIGPIPE would end the process with no crash report and no input saved. */
static void on_sigpipe(int sig)
{
	static const char m[] =
		"fuzz_backend: SIGPIPE: a write to a pipe or socket nobody reads\n";

	(void)sig;
	(void)!write(2, m, sizeof(m) - 1);
	abort();
}

static void setup_once(void)
{
	struct rlimit rl;
	const char *h = getenv("VQ_FUZZ_HOSTILE_FDS");

	signal(SIGPIPE, on_sigpipe);
	if (vq_log_set(check_log, NULL, VQ_LOG_DEBUG))
		die("vq_set_log");
	guest_fd = memfd_create("fuzz-guest", MFD_CLOEXEC);
	/* every page present: a postcopy the input sets up (ADVISE,
	 * LISTEN) then has no fault to wait on, which nobody here
	 * would serve */
	if (guest_fd < 0 || ftruncate(guest_fd, 1 << 20) < 0 ||
	    fallocate(guest_fd, 0, 0, 1 << 20) < 0)
		die("memfd");
	/* on unless VQ_FUZZ_HOSTILE_FDS=0 */
	hostile = !h || strcmp(h, "0");
#ifdef FUZZ_FW
	if (vq_fw_new(&(struct vq_fw_config){ .threads = 1 }, &fw))
		die("vq_fw_new");
#endif
	/* room for the fds in flight and ours, at a quarter of the limit */
	fd_budget = 256;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur / 4 < fd_budget)
		fd_budget = (unsigned)(rl.rlim_cur / 4);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vq_vhu_device dev = {
		.name = "fuzz", .nqueues = 2, .config_len = 8, .ops = &ops,
		.features = VQ_BIT(VQ_F_VERSION_1) | VQ_RING_FEATURES,
	};
	struct feed f = { .s = -1 };
	int sv[2], fds0, r;
	size_t pos = 0;

	if (guest_fd < 0)
		setup_once();
	fds0 = count_fds();
	f.stream = malloc(size ? size : 1);
	if (!f.stream)
		return 0;
#ifdef FUZZ_FW
	struct vq_fw_device fdev = {
		.name = "fuzz", .nqueues = 2, .config_len = 8, .ops = &fw_ops,
		.features = dev.features,
	};
	struct vq_fw_dev *fd = NULL;

	if (vq_fw_dev_new(fw, &fdev, &fd))
		die("vq_fw_dev_new");
	f.b = vq_fw_dev_backend(fd);
#else
	if (vq_vhu_backend_new(&dev, &f.b))
		die("backend_new");
#endif
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		die("socketpair");
	if (vq_vhu_backend_adopt_fd(f.b, sv[0]))
		die("adopt");
	f.s = sv[1];
	f.fds_left = fd_budget;
	hfd_init(&f.hfd);
	__atomic_store_n(&fail_next_start, false, __ATOMIC_RELAXED);
	__atomic_store_n(&start_failed, false, __ATOMIC_RELAXED);
	while (pos + 3 <= size && !f.ended) {
		unsigned spec = data[pos], len = data[pos + 1] | data[pos + 2] << 8;

		pos += 3;
		if (len > size - pos)
			len = size - pos;
		send_rec(&f, spec, data + pos, len);
		pos += len;
	}
	settle(&f, false);
	shutdown(f.s, SHUT_WR);
	do
		r = process(&f);
	while (r > 0);
	if (vq_vhu_backend_connected(f.b))
		die("connection still open after EOF");
	if (vq_vhu_backend_error_msg(f.b)[0] &&
	    !spec_section_first(vq_vhu_backend_error_msg(f.b)))
		die("a close reason that does not name the spec's place first");
#ifdef FUZZ_FW
	vq_fw_dev_free(fd);
#else
	vq_vhu_backend_free(f.b);
#endif
	if (qstate[0] != Q_IDLE || qstate[1] != Q_IDLE)
		die("a queue not stopped for good at the end");
	close(f.s);
	hfd_release(&f.hfd);
	free(f.stream);
	if (count_fds() != fds0)
		die("fd leak");
	return 0;
}
