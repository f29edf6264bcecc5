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
 * closed must name the spec's place first.
 *
 * Record: u8 fdspec (bits 0-1 count, bit 2 first fd is the memfd), u16 len,
 * len bytes of message.  A SET_BACKEND_REQ_FD's first fd is instead one
 * end of a socketpair, as the back-end requires; the other end stays open,
 * unread, until the input ends.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <virtq/log.h>
#include <virtq/vhost_user_backend.h>

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
 * and every queue stopped for good when the backend goes. */
enum { Q_IDLE, Q_RUNNING, Q_PAUSED };
static unsigned qstate[2];

static int qstart(void *o, const struct vq_vhu_queue *q)
{
	struct iovec iov[8];
	struct vq_chain c = { .iov = iov, .iov_max = 8 };

	(void)o;
	if (q->index >= 2 || qstate[q->index] == Q_RUNNING)
		die("queue_start on a running queue");
	qstate[q->index] = Q_RUNNING;
	/* touch the ring the way a device would */
	if (vq_dev_pop(q->vq, &c) == 1)
		vq_dev_push(q->vq, &c, 0);
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

static void check_log(void *arg, enum vq_log_level level, const char *msg)
{
	(void)arg;
	if (level < VQ_LOG_ERR || level > VQ_LOG_DEBUG || !msg[0] ||
	    strchr(msg, '\n'))
		die("a log message that is not one line");
}

static int guest_fd = -1;

/* The channels' other ends, closed when the input ends. */
static int chan_peer[8];
static unsigned nchan_peer;

/* The first fd of a SET_BACKEND_REQ_FD: a back-end channel, or -1. */
static int channel_fd(const uint8_t *p, size_t len)
{
	uint32_t req;
	int sv[2];

	if (len < 4 || nchan_peer == 8)
		return -1;
	memcpy(&req, p, 4);
	if (req != 21 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -1;
	chan_peer[nchan_peer++] = sv[1];
	return sv[0];
}

static void send_rec(int s, const uint8_t *p, size_t len, unsigned nfds,
		     bool memfd)
{
	union { char b[CMSG_SPACE(3 * sizeof(int))]; struct cmsghdr a; } c;
	struct iovec iov = { (void *)p, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int fds[3];

	for (unsigned i = 0; i < nfds; i++) {
		fds[i] = i == 0 && !memfd ? channel_fd(p, len) : -1;
		if (fds[i] < 0)
			fds[i] = (i == 0 && memfd) ? dup(guest_fd) : eventfd(0, EFD_CLOEXEC);
	}
	if (nfds) {
		struct cmsghdr *cm;

		mh.msg_control = c.b;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	}
	if (len && sendmsg(s, &mh, MSG_NOSIGNAL) < 0 && errno != EPIPE)
		die("sendmsg");
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vq_vhu_device dev = {
		.name = "fuzz", .nqueues = 2, .config_len = 8, .ops = &ops,
		.features = VIRTQ_BIT(VIRTIO_F_VERSION_1) | VQ_RING_FEATURES,
	};
	struct vq_vhu_backend *b;
	int sv[2], fds0, r;
	size_t pos = 0;

	if (guest_fd < 0) {
		if (vq_set_log(check_log, NULL, VQ_LOG_DEBUG))
			die("vq_set_log");
		guest_fd = memfd_create("fuzz-guest", MFD_CLOEXEC);
		/* every page present: a postcopy the input sets up (ADVISE,
		 * LISTEN) then has no fault to wait on, which nobody here
		 * would serve */
		if (guest_fd < 0 || ftruncate(guest_fd, 1 << 20) < 0 ||
		    fallocate(guest_fd, 0, 0, 1 << 20) < 0)
			die("memfd");
	}
	fds0 = count_fds();
	if (vq_vhu_backend_new(&dev, &b))
		die("backend_new");
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		die("socketpair");
	if (vq_vhu_backend_adopt_fd(b, sv[0]))
		die("adopt");
	while (pos + 3 <= size) {
		unsigned spec = data[pos], len = data[pos + 1] | data[pos + 2] << 8;

		pos += 3;
		if (len > size - pos)
			len = size - pos;
		send_rec(sv[1], data + pos, len, spec & 3, spec & 4);
		pos += len;
	}
	shutdown(sv[1], SHUT_WR);
	do {
		char sink[4096];

		r = vq_vhu_backend_process(b);
		while (recv(sv[1], sink, sizeof(sink), MSG_DONTWAIT) > 0)
			;
	} while (r > 0);
	if (r == 0 || vq_vhu_backend_connected(b))
		die("connection still open after EOF");
	if (vq_vhu_backend_error_msg(b)[0] &&
	    !spec_section_first(vq_vhu_backend_error_msg(b)))
		die("a close reason that does not name the spec's place first");
	vq_vhu_backend_free(b);
	if (qstate[0] != Q_IDLE || qstate[1] != Q_IDLE)
		die("a queue not stopped for good at the end");
	close(sv[1]);
	while (nchan_peer)
		close(chan_peer[--nchan_peer]);
	if (count_fds() != fds0)
		die("fd leak");
	return 0;
}
