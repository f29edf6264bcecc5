// SPDX-License-Identifier: MIT
/*
 * The hostile fd kinds (hostile_fds.h).  Each is blocking unless its kind
 * says otherwise: a front-end need not set O_NONBLOCK, and a blocking fd
 * is where a back-end that trusts it waits for ever.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hostile_fds.h"

#define HFD_SIZE (1 << 20)

void hfd_init(struct hfd_set *s)
{
	s->nheld = s->nshrink = 0;
	s->shared = -1;
}

static bool room(const struct hfd_set *s)
{
	return s->nheld < HFD_HOLD_MAX;
}

/* Callers checked room() first. */
static void hold(struct hfd_set *s, int fd, bool shrinks)
{
	s->shrinks[s->nheld] = shrinks;
	s->held[s->nheld++] = fd;
	s->nshrink += shrinks;
}

static int eventfd_at_max(int flags)
{
	uint64_t v = 0xfffffffffffffffeull;
	int fd = eventfd(0, EFD_CLOEXEC | flags);

	if (fd >= 0 && write(fd, &v, sizeof(v)) != sizeof(v)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* One end of a pipe (0 read, 1 write); the other end is held, or closed
 * when !keep. */
static int pipe_end(struct hfd_set *s, int end, bool keep, bool fill)
{
	static const char page[4096];
	int p[2];

	if (keep && !room(s))
		return -1;
	if (pipe2(p, O_CLOEXEC | (fill ? O_NONBLOCK : 0)) < 0)
		return -1;
	if (fill) {
		/* one page of room, taken: the next write blocks */
		fcntl(p[1], F_SETPIPE_SZ, (int)sizeof(page));
		while (write(p[1], page, sizeof(page)) > 0)
			;
		fcntl(p[1], F_SETFL, 0);
	}
	if (keep)
		hold(s, p[1 - end], false);
	else
		close(p[1 - end]);
	return p[end];
}

/* A connected stream socket; its peer is held, or closed when !keep. */
static int socket_end(struct hfd_set *s, bool keep, bool fill)
{
	static const char chunk[4096];
	int sv[2], one = 1;

	if (keep && !room(s))
		return -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	if (fill) {
		/* the smallest send buffer the kernel allows, filled */
		setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &one, sizeof(one));
		while (send(sv[0], chunk, sizeof(chunk),
			    MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
			;
	}
	if (keep)
		hold(s, sv[1], false);
	else
		close(sv[1]);
	return sv[0];
}

/* 1 MiB with every page present: a postcopy registration of its mapping
 * then has no fault to wait on, which nobody here would serve. */
static int sized(int fd)
{
	if (fd >= 0 && (ftruncate(fd, HFD_SIZE) < 0 ||
			fallocate(fd, 0, 0, HFD_SIZE) < 0)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Unnamed (O_TMPFILE): a crash leaves nothing behind to remove. */
static int plain_file(void)
{
	const char *t = getenv("TMPDIR");
	const char *dir = t && t[0] ? t : "/tmp";

	return sized(open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
}

static int memfd_shrinks(struct hfd_set *s)
{
	int fd, keep;

	if (!room(s))
		return -1;
	fd = sized(memfd_create("hostile", MFD_CLOEXEC));
	if (fd < 0)
		return -1;
	keep = dup(fd);
	if (keep < 0) {
		close(fd);
		return -1;
	}
	hold(s, keep, true);
	return fd;
}

static int memfd_sealed(void)
{
	int fd = memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	fd = sized(fd);
	if (fd >= 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK |
			     F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int shared(struct hfd_set *s)
{
	if (s->shared < 0) {
		int fd = room(s) ? eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK) : -1;

		if (fd < 0)
			return -1;
		s->shared = (int)s->nheld;
		hold(s, fd, false);
	}
	return fcntl(s->held[s->shared], F_DUPFD_CLOEXEC, 0);
}

int hfd_make(struct hfd_set *s, enum hfd_kind k)
{
	switch (k) {
	case HFD_EVENTFD:
		return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	case HFD_EVENTFD_BLOCKING:
		return eventfd(0, EFD_CLOEXEC);
	case HFD_EVENTFD_MAX:
		return eventfd_at_max(0);
	case HFD_EVENTFD_MAX_NB:
		return eventfd_at_max(EFD_NONBLOCK);
	case HFD_PIPE_READ:
		return pipe_end(s, 0, true, false);
	case HFD_PIPE_WRITE:
		return pipe_end(s, 1, true, false);
	case HFD_PIPE_FULL:
		return pipe_end(s, 1, true, true);
	case HFD_PIPE_NO_READER:
		return pipe_end(s, 1, false, false);
	case HFD_PIPE_NO_WRITER:
		return pipe_end(s, 0, false, false);
	case HFD_SOCKET:
		return socket_end(s, true, false);
	case HFD_SOCKET_FULL:
		return socket_end(s, true, true);
	case HFD_SOCKET_NO_PEER:
		return socket_end(s, false, false);
	case HFD_MEMFD_SHRINKS:
		return memfd_shrinks(s);
	case HFD_FILE:
		return plain_file();
	case HFD_MEMFD_SEALED:
		return memfd_sealed();
	case HFD_SHARED:
		return shared(s);
	case HFD_KINDS:
		break;
	}
	return -1;
}

bool hfd_shrink_pending(const struct hfd_set *s)
{
	return s->nshrink > 0;
}

void hfd_shrink(struct hfd_set *s)
{
	for (unsigned i = 0; i < s->nheld; i++) {
		if (s->shrinks[i])
			(void)!ftruncate(s->held[i], 0);
		s->shrinks[i] = false;
	}
	s->nshrink = 0;
}

void hfd_release(struct hfd_set *s)
{
	for (unsigned i = 0; i < s->nheld; i++)
		close(s->held[i]);
	hfd_init(s);
}
