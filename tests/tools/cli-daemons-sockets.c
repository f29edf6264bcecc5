// SPDX-License-Identifier: MIT
/*
 * vq_unix_listener (include/virtq/vhost_user_backend.h), the sockets a
 * back-end program creates:
 *  - a live socket at the path is refused (-EADDRINUSE) and left alone, a
 *    stale one replaced, anything else refused (-EEXIST), symlinks too;
 *  - the mode and group asked for are the file's when the path appears;
 *  - freeing it removes the path only while it names the socket created;
 *  - the config's reserved words must be zero (the ABI growth rule).
 */
#include <fcntl.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <virtq/vhost_user_backend.h>

#include "vq_tool.h"

static char dir[40];

static void path_of(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", dir, name);
}

/* A socket bound at path; listening or not (stale once closed). */
static int bound(const char *path, int type, bool listening)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	CHECK(fd >= 0);
	CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	if (listening)
		CHECK_EQ(listen(fd, 1), 0);
	return fd;
}

static ino_t inode_of(const char *path)
{
	struct stat st;

	CHECK_EQ(lstat(path, &st), 0);
	return st.st_ino;
}

static int listener(const char *path, int type, struct vq_unix_listener **l)
{
	struct vq_unix_listen_config c = { .path = path, .type = type };

	return vq_unix_listener_new(&c, l);
}

static void live_socket_refused_and_left_alone(void)
{
	char p[80];
	struct vq_unix_listener *l;
	int other;
	ino_t ino;

	path_of(p, sizeof(p), "live");
	other = bound(p, SOCK_STREAM, true);
	ino = inode_of(p);
	CHECK_EQ(listener(p, SOCK_STREAM, &l), -EADDRINUSE);
	/* a live socket of the other type is alive too */
	CHECK_EQ(listener(p, SOCK_SEQPACKET, &l), -EADDRINUSE);
	CHECK_EQ(inode_of(p), ino);
	CHECK(vq_test_unix_accepts(p, SOCK_STREAM));
	close(other);
	unlink(p);
}

static void stale_socket_replaced(void)
{
	char p[80];
	struct vq_unix_listener *l;

	path_of(p, sizeof(p), "stale");
	close(bound(p, SOCK_SEQPACKET, false));
	CHECK(!vq_test_unix_accepts(p, SOCK_SEQPACKET));
	CHECK_EQ(listener(p, SOCK_SEQPACKET, &l), 0);
	CHECK(vq_test_unix_accepts(p, SOCK_SEQPACKET));
	vq_unix_listener_free(l);
	CHECK(access(p, F_OK) < 0);
}

static void not_a_socket_refused(void)
{
	char p[80], s[80];
	struct vq_unix_listener *l;
	struct stat st;
	int fd;

	path_of(p, sizeof(p), "file");
	fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	close(fd);
	CHECK_EQ(listener(p, 0, &l), -EEXIST);
	CHECK_EQ(lstat(p, &st), 0);
	CHECK(S_ISREG(st.st_mode));
	unlink(p);
	/* a symlink is not followed, even to a stale socket */
	path_of(s, sizeof(s), "target");
	close(bound(s, SOCK_STREAM, false));
	CHECK_EQ(symlink(s, p), 0);
	CHECK_EQ(listener(p, 0, &l), -EEXIST);
	CHECK_EQ(lstat(s, &st), 0);
	unlink(p);
	unlink(s);
}

/* libvirt's QEMU runs as its own user: mode and group are set before the
 * path appears, and by default only the owner may connect. */
static void mode_and_group_applied(void)
{
	char p[80];
	struct vq_unix_listen_config c = { .path = p, .mode = 0660, .set_group = true };
	struct vq_unix_listener *l;
	struct stat st;

	path_of(p, sizeof(p), "perm");
	c.gid = getuid() == 0 ? 1 : (uint32_t)getgid();
	CHECK_EQ(vq_unix_listener_new(&c, &l), 0);
	CHECK_EQ(lstat(p, &st), 0);
	CHECK(S_ISSOCK(st.st_mode));
	CHECK_EQ(st.st_mode & 07777, 0660);
	CHECK_EQ(st.st_gid, c.gid);
	vq_unix_listener_free(l);
	/* the default: 0600, whatever the umask */
	umask(0);
	CHECK_EQ(listener(p, 0, &l), 0);
	CHECK_EQ(lstat(p, &st), 0);
	CHECK_EQ(st.st_mode & 07777, 0600);
	vq_unix_listener_free(l);
	umask(022);
}

/* Freed, it removes its path only while the path names its socket. */
static void free_removes_only_its_own(void)
{
	char p[80];
	struct vq_unix_listener *l;
	int other, fd;

	path_of(p, sizeof(p), "own");
	CHECK_EQ(listener(p, 0, &l), 0);
	fd = vq_unix_listener_fd(l);
	CHECK(fd >= 0);
	CHECK(vq_test_unix_accepts(p, SOCK_STREAM));
	CHECK_EQ(unlink(p), 0);
	other = bound(p, SOCK_STREAM, true);
	vq_unix_listener_free(l);
	CHECK(vq_test_unix_accepts(p, SOCK_STREAM));         /* the other's, still there */
	close(other);
	unlink(p);
	/* a released fd is the taker's: free leaves it open */
	CHECK_EQ(listener(p, 0, &l), 0);
	fd = vq_unix_listener_release_fd(l);
	CHECK_EQ(vq_unix_listener_fd(l), -1);
	vq_unix_listener_free(l);
	CHECK(access(p, F_OK) < 0);
	CHECK(fcntl(fd, F_GETFD) >= 0);
	close(fd);
}

/* The ABI growth rule: a field a newer caller set in the reserved space is
 * refused, not ignored. */
static void config_reserved_must_be_zero(void)
{
	char p[80];
	struct vq_unix_listen_config c = { .path = p };
	struct vq_unix_listener *l;

	path_of(p, sizeof(p), "cfg");
	c.reserved[3] = 1;
	CHECK_EQ(vq_unix_listener_new(&c, &l), -EINVAL);
	c.reserved[3] = 0;
	c.mode = 01777;
	CHECK_EQ(vq_unix_listener_new(&c, &l), -EINVAL);
	c.mode = 0;
	c.type = SOCK_DGRAM;
	CHECK_EQ(vq_unix_listener_new(&c, &l), -EINVAL);
	c.type = 0;
	c.path = NULL;
	CHECK_EQ(vq_unix_listener_new(&c, &l), -EINVAL);
	CHECK(access(p, F_OK) < 0);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/vq-sockets.XXXXXX");
	CHECK(mkdtemp(dir));
	RUN(live_socket_refused_and_left_alone);
	RUN(stale_socket_replaced);
	RUN(not_a_socket_refused);
	RUN(mode_and_group_applied);
	RUN(free_removes_only_its_own);
	RUN(config_reserved_must_be_zero);
	/* nothing left behind, no temporary name either */
	CHECK_EQ(rmdir(dir), 0);
	return 0;
}
