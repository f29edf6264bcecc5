// SPDX-License-Identifier: MIT
/*
 * Listening UNIX sockets, created whole: the public vq_unix_listener and
 * the library's own vq_unix_listen.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <virtq/unix.h>

#include "unix.h"

int vq_unix_addr(struct sockaddr_un *sa, const char *path)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

/*
 * What is at path, before we listen there: nothing (0), a stale socket
 * that nobody listens on any more (removed: 0), a live one (-EADDRINUSE),
 * or something that is not a socket (-EEXIST; a symlink is not followed).
 * The probe is non-blocking: a listener whose backlog is full (EAGAIN) is
 * alive, and so is one of the other socket type (EPROTOTYPE).
 */
static int clear_path(const char *path, int type)
{
	struct sockaddr_un sa;
	struct stat st, again;
	int fd, e;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	vq_unix_addr(&sa, path);
	fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	e = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? errno : 0;
	close(fd);
	if (e == ENOENT)
		return 0;               /* gone meanwhile */
	if (e != ECONNREFUSED)
		return e == 0 || e == EAGAIN || e == EPROTOTYPE ? -EADDRINUSE : -e;
	/* Stale.  Remove that file only, not one put there since. */
	if (lstat(path, &again) == 0 && again.st_dev == st.st_dev &&
	    again.st_ino == st.st_ino && unlink(path) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/* The socket file's identity, to unlink it at the end only if it is still
 * ours (same device and inode). */
struct unix_spot {
	dev_t dev;
	ino_t ino;
};

static void unlink_if_ours(const char *path, const struct unix_spot *s)
{
	struct stat st;

	if (lstat(path, &st) == 0 && st.st_dev == s->dev && st.st_ino == s->ino)
		unlink(path);
}

/*
 * Bind and listen under a temporary name, set the file's mode and group,
 * then link it into place: bound at its final name, the socket would refuse
 * connections between bind() and listen() (a client that waits for the
 * file to appear, as QEMU, a test or a script does, could land there), and
 * show its umask's mode and our group until chmod and chown.  link(), not
 * rename(), so that a socket another process put at path after we looked
 * (two instances starting at once) is never replaced: -EADDRINUSE.
 * gid < 0 keeps the group.
 */
static int listen_staged(const char *path, unsigned mode, int64_t gid,
			 int backlog, int type, struct unix_spot *spot)
{
	struct sockaddr_un sa;
	char tmp[sizeof(sa.sun_path)];
	struct stat st;
	int fd, n, r;
	bool staged;

	r = vq_unix_addr(&sa, path);
	if (r)
		return r;
	r = clear_path(path, type);
	if (r)
		return r;
	n = snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	staged = n > 0 && (size_t)n < sizeof(tmp);
	if (staged) {
		unlink(tmp);    /* ours from an earlier, crashed attempt */
		vq_unix_addr(&sa, tmp);
	}
	fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* The socket inode's mode is what bind() gives the file (minus the
	 * umask); chmod afterwards covers the umask and kernels that ignore
	 * it. */
	if (mode)
		fchmod(fd, mode);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = errno == EADDRINUSE && !staged ? -EADDRINUSE : -errno;
		close(fd);
		return r;
	}
	if ((mode && chmod(sa.sun_path, mode) < 0) ||
	    (gid >= 0 && lchown(sa.sun_path, (uid_t)-1, (gid_t)gid) < 0) ||
	    listen(fd, backlog) < 0 || lstat(sa.sun_path, &st) < 0)
		goto fail;
	if (staged) {
		if (link(tmp, path) < 0) {
			if (errno == EEXIST)
				errno = EADDRINUSE;
			goto fail;
		}
		unlink(tmp);
	}
	if (spot)
		*spot = (struct unix_spot){ st.st_dev, st.st_ino };
	return fd;
fail:
	r = -errno;
	unlink(sa.sun_path);
	close(fd);
	return r;
}

int vq_unix_listen(const char *path, unsigned mode, int backlog, int type)
{
	return listen_staged(path, mode, -1, backlog, type, NULL);
}

struct vq_unix_listener {
	int fd;                 /* -1 once handed over */
	char *path;
	struct unix_spot spot;
};

int vq_unix_listener_new(const struct vq_unix_listen_config *c,
			 struct vq_unix_listener **out)
{
	struct vq_unix_listener *l;
	int type = c->type ? c->type : SOCK_STREAM;
	int fd;

	for (unsigned i = 0; i < sizeof(c->reserved) / sizeof(c->reserved[0]); i++)
		if (c->reserved[i])
			return -EINVAL;
	if (!c->path || (type != SOCK_STREAM && type != SOCK_SEQPACKET) ||
	    c->mode > 0777 || c->backlog < 0)
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l || !(l->path = strdup(c->path))) {
		free(l);
		return -ENOMEM;
	}
	fd = listen_staged(c->path, c->mode ? c->mode : 0600,
			   c->set_group ? (int64_t)c->gid : -1,
			   c->backlog ? c->backlog : 128, type, &l->spot);
	if (fd < 0) {
		free(l->path);
		free(l);
		return fd;
	}
	l->fd = fd;
	*out = l;
	return 0;
}

int vq_unix_listener_fd(const struct vq_unix_listener *l)
{
	return l->fd;
}

int vq_unix_listener_release_fd(struct vq_unix_listener *l)
{
	int fd = l->fd;

	l->fd = -1;
	return fd;
}

void vq_unix_listener_free(struct vq_unix_listener *l)
{
	if (!l)
		return;
	if (l->fd >= 0)
		close(l->fd);
	unlink_if_ours(l->path, &l->spot);
	free(l->path);
	free(l);
}

/* Our own deadline, timeout_ms from now (CLOCK_MONOTONIC ns). */
