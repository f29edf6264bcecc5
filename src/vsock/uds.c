// SPDX-License-Identifier: MIT
/*
 * The host side on UNIX sockets, the hybrid-vsock convention of Firecracker
 * and vhost-device-vsock: a guest connecting to CID 2 port P reaches the
 * socket listening at "<base>_P"; host programs connect to <base> and speak
 * the CONNECT line (read by the device, vsock.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <virtq/vsock.h>

#include "util.h"
#include "unix.h"

int vq_vsock_uds_connect(const char *base, uint32_t port, uint16_t type)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 16];
	struct sockaddr_un a;
	int fd, r;

	if ((size_t)snprintf(path, sizeof(path), "%s_%u", base, port) >= sizeof(path))
		return -ENAMETOOLONG;
	r = vq_unix_addr(&a, path);
	if (r < 0)
		return r;
	if (type != VQ_VSOCK_TYPE_STREAM && type != VQ_VSOCK_TYPE_SEQPACKET)
		return -EINVAL;
	fd = socket(AF_UNIX, (type == VQ_VSOCK_TYPE_STREAM ? SOCK_STREAM : SOCK_SEQPACKET) |
		    SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A UNIX connect completes at once or fails (EAGAIN: the
	 * listener's backlog is full, which the guest sees as a refusal). */
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		r = errno == EAGAIN ? -ECONNREFUSED : -errno;
		close(fd);
		return r;
	}
	return fd;
}

int vq_vsock_uds_listen(const char *path, uint16_t type)
{
	struct sockaddr_un a;
	int r;

	r = vq_unix_addr(&a, path);
	if (r < 0)
		return r;
	/* vq_unix_listen replaces a stale socket, nothing else. */
	if (type != VQ_VSOCK_TYPE_STREAM && type != VQ_VSOCK_TYPE_SEQPACKET)
		return -EINVAL;
	return vq_unix_listen(path, 0, 128, type == VQ_VSOCK_TYPE_STREAM ?
					    SOCK_STREAM : SOCK_SEQPACKET);
}
