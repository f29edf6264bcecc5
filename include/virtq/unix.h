/* SPDX-License-Identifier: MIT */
/*
 * virtq/unix.h - the listening UNIX sockets a back-end program creates
 * (vhost-user.rst, "Backend program conventions"; its command line is the
 * program's own): the vhost-user socket, virtq-vsock's host side.
 *
 * Growth (docs/DESIGN.md, "ABI"): struct vq_unix_listen_config ends in
 * reserved words that must be zero.
 */
#ifndef VIRTQ_UNIX_H
#define VIRTQ_UNIX_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vq_unix_listen_config {
	const char *path;
	int type;                       /* SOCK_STREAM (0 too) or SOCK_SEQPACKET */
	int backlog;                    /* 0: 128 */
	unsigned mode;                  /* permission bits, at most 0777; 0: 0600 */
	bool set_group;                 /* give the socket file the group gid */
	uint32_t gid;
	uint64_t reserved[4];           /* must be zero */
};

struct vq_unix_listener;

/*
 * Listen on a UNIX socket at c->path (non-blocking, close-on-exec).  The
 * socket is bound under a temporary name, given its mode and group, and
 * linked into place once it listens: whoever sees the path can connect,
 * with the permissions asked for (QEMU run by libvirt as its own user,
 * given the group).  A stale socket at path (connect() is refused) is
 * replaced; a live one (connect() succeeds, or its backlog is full) is
 * refused with -EADDRINUSE, anything that is not a socket (a file, a
 * directory, a symlink) with -EEXIST.  -EINVAL for a bad config (a
 * reserved word not zero), -EPERM when the group cannot be given, or
 * another -errno.
 */
int vq_unix_listener_new(const struct vq_unix_listen_config *c,
			 struct vq_unix_listener **out);
/* The listening socket, or -1 once released. */
int vq_unix_listener_fd(const struct vq_unix_listener *l);
/* Hand the socket to whoever takes it over (vq_vhu_backend_adopt_fd,
 * vq_vsock_set_listener): the listener no longer closes it.  The fd, or
 * -1 if it was released before. */
int vq_unix_listener_release_fd(struct vq_unix_listener *l);
/* Close the socket unless released, and remove the path if it still names
 * the socket this listener created (same device and inode): a socket
 * another process created there since is left alone. */
void vq_unix_listener_free(struct vq_unix_listener *l);

#ifdef __cplusplus
}
#endif
#endif
