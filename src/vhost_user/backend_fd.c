// SPDX-License-Identifier: MIT
/*
 * The fds a front-end hands the back-end are its own: it keeps the same
 * open file descriptions and may change their flags at any time.  What
 * each one is, checked before anything uses it (an eventfd for a ring's
 * kick, call and err; an AF_UNIX stream socket for the back-end channel),
 * and the one way the control thread writes to an eventfd of the
 * front-end's without waiting on it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <virtq/runtime.h>

#include "backend_internal.h"

/* How an eventfd of our own looks to fstat (known: we could open one). */
static pthread_once_t own_once = PTHREAD_ONCE_INIT;
static struct stat own_evt;
static bool own_known;

static void own_eventfd(void)
{
	int fd = eventfd(0, EFD_CLOEXEC);

	if (fd >= 0) {
		own_known = fstat(fd, &own_evt) == 0;
		close(fd);
	}
}

/*
 * An anonymous-inode file, as an eventfd is: the filesystem and file type
 * (none: mode 0600 alone) of an eventfd of our own.  Today every eventfd,
 * timerfd, signalfd and epoll fd shares one inode, so st_ino would match
 * too, but that is the kernel's choice to make; st_dev and the type are
 * enough to tell pipes, sockets and files apart.  Without an eventfd of
 * our own (no fd left), the missing type bits alone.
 */
static bool anon_inode(const struct stat *st)
{
	pthread_once(&own_once, own_eventfd);
	if (own_known)
		return st->st_dev == own_evt.st_dev &&
		       (st->st_mode & S_IFMT) == (own_evt.st_mode & S_IFMT);
	return (st->st_mode & S_IFMT) == 0;
}

/* What /proc says fd is ("anon_inode:[eventfd]", "pipe:[123]", a path),
 * or "" without /proc. */
static void fd_link(int fd, char *link, size_t len)
{
	char path[40];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, len - 1);
	link[n > 0 ? n : 0] = '\0';
}

/* fd in words, for a message, into kind: "a pipe", "a socket", "a memfd",
 * ... (link: what /proc says it is, or ""). */
static void fd_kind(const struct stat *st, const char *link, char *kind,
		    size_t len)
{
	const char *k = NULL;

	switch (st->st_mode & S_IFMT) {
	case S_IFIFO:
		k = !strncmp(link, "pipe:", 5) ? "a pipe" :
		    link[0] ? "a FIFO" : "a pipe or FIFO";
		break;
	case S_IFSOCK:
		k = "a socket";
		break;
	case S_IFREG:
		k = !strncmp(link, "/memfd:", 7) ? "a memfd" : "a regular file";
		break;
	case S_IFDIR:
		k = "a directory";
		break;
	case S_IFCHR:
		k = "a character device";
		break;
	case S_IFBLK:
		k = "a block device";
		break;
	case S_IFLNK:
		k = "a symbolic link";
		break;
	}
	if (k)
		snprintf(kind, len, "%s", k);
	else if (!strncmp(link, "anon_inode:", 11))
		snprintf(kind, len, "%s", link);
	else
		snprintf(kind, len, "a file of mode 0%o", (unsigned)st->st_mode);
}

int vhu_fd_eventfd(int fd, char *kind, size_t len)
{
	struct stat st;
	char link[64];
	uint64_t zero = 0;

	if (fstat(fd, &st) < 0)
		return -errno;
	fd_link(fd, link, sizeof(link));
	if (anon_inode(&st)) {
		if (!strcmp(link, "anon_inode:[eventfd]"))
			return 0;
		if (!link[0]) {
			/* Without /proc (a sandbox that does not mount
			 * it): of the anonymous-inode files only an
			 * eventfd takes a write of a zero count, which adds
			 * nothing and never waits, even at the maximum
			 * count; the others refuse it (EINVAL). */
			if (write(fd, &zero, sizeof(zero)) == sizeof(zero))
				return 0;
			snprintf(kind, len, "an anonymous-inode file of another kind");
			return -EINVAL;
		}
	}
	fd_kind(&st, link, kind, len);
	return -EINVAL;
}

int vhu_fd_unix_stream(int fd, char *kind, size_t len)
{
	int dom = 0, type = 0;
	socklen_t l = sizeof(int), l2 = sizeof(int);
	struct stat st;
	char link[64];

	if (!getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) &&
	    !getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l2)) {
		if (dom == AF_UNIX && type == SOCK_STREAM)
			return 0;
		snprintf(kind, len, "a socket of family %d and type %d", dom, type);
		return -ENOTSOCK;
	}
	if (fstat(fd, &st) < 0)
		return -errno;
	fd_link(fd, link, sizeof(link));
	fd_kind(&st, link, kind, len);
	return -ENOTSOCK;
}

int vhu_fd_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0))
		return -errno;
	return 0;
}

void vhu_fe_signal(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };

	/* POLLOUT: the counter takes 1 more now.  Without it a notification
	 * is pending already. */
	if (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT))
		vq_evt_signal(fd);
}
