/* SPDX-License-Identifier: MIT */
/* The library's own UNIX socket helpers (unix.c), for the vhost-user
 * back-end and vsock's host side. */
#ifndef VIRTQ_UNIX_INTERNAL_H
#define VIRTQ_UNIX_INTERNAL_H

#include "util.h"

/* A UNIX socket address for path; -ENAMETOOLONG if it does not fit. */
struct sockaddr_un;
VQ_INTERNAL int vq_unix_addr(struct sockaddr_un *sa, const char *path);

/* Listen on path (non-blocking, close-on-exec; mode 0 leaves the mode to
 * the umask).  The path appears only once the socket listens, so a client
 * that sees it is never refused.  A stale socket at path is replaced; a
 * live one is refused (-EADDRINUSE), and so is anything that is not a
 * socket (-EEXIST).  Returns the fd or -errno. */
VQ_INTERNAL int vq_unix_listen(const char *path, unsigned mode, int backlog,
				 int type);

#endif
