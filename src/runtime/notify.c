// SPDX-License-Identifier: MIT
/*
 * Notifications over eventfd.  A kick (driver -> device) and a call
 * (device -> driver) are each one write of 1; a reader drains the counter in
 * one read, which also tells how many notifications were coalesced.
 * Reads never wait, whatever the fd's O_NONBLOCK (RWF_NOWAIT); a write
 * relies on O_NONBLOCK (eventfds refuse RWF_NOWAIT for writes), which the
 * vhost-user back-end sets on every eventfd a front-end gives it.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "runtime_internal.h"

int vq_evt_new(void)
{
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int vq_evt_signal(int fd)
{
	uint64_t one = 1;

	for (;;) {
		ssize_t r = write(fd, &one, sizeof(one));

		if (r == sizeof(one))
			return 0;
		if (r < 0 && errno == EINTR)
			continue;
		/* EAGAIN: the counter is at its maximum, so the reader has a
		 * notification pending anyway. */
		if (r < 0 && errno == EAGAIN)
			return 0;
		return r < 0 ? -errno : -EIO;
	}
}

/* 1 once preadv2(RWF_NOWAIT) was refused for an eventfd (a kernel before
 * eventfd supported it, or an emulator that does not pass the flag on). */
static int nowait_refused;

/* Without RWF_NOWAIT: read only what poll says is there.  A second reader
 * could still drain it between the two; the device framework's monitor
 * releases a worker that waits so. */
static ssize_t read_if_ready(int fd, uint64_t *v)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, 0) == 0) {
		errno = EAGAIN;
		return -1;
	}
	return read(fd, v, sizeof(*v));
}

/* One read of the counter that never waits, whatever the fd's O_NONBLOCK
 * says: a front-end's eventfd shares its open file description with the
 * front-end, which may clear O_NONBLOCK after we set it. */
static ssize_t evt_read(int fd, uint64_t *v)
{
	struct iovec iov = { v, sizeof(*v) };
	ssize_t r;

	if (__atomic_load_n(&nowait_refused, __ATOMIC_RELAXED))
		return read_if_ready(fd, v);
	r = preadv2(fd, &iov, 1, -1, RWF_NOWAIT);
	if (r >= 0 || (errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL))
		return r;
	/* Refused.  Remember it only if read() works on this fd: EINVAL may
	 * be the fd's own answer (not an eventfd), not the flag's. */
	r = read_if_ready(fd, v);
	if (r == sizeof(*v) || (r < 0 && errno == EAGAIN))
		__atomic_store_n(&nowait_refused, 1, __ATOMIC_RELAXED);
	return r;
}

int64_t vq_evt_drain(int fd)
{
	uint64_t v;

	for (;;) {
		ssize_t r = evt_read(fd, &v);

		if (r == sizeof(v))
			return (int64_t)(v > INT64_MAX ? INT64_MAX : v);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return 0;
		return r < 0 ? -errno : -EIO;
	}
}

int64_t vq_evt_wait(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	for (;;) {
		int r = poll(&p, 1, timeout_ms);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return 0;
		/* Readable; another reader may have drained it first, then
		 * this is a spurious wakeup the caller re-checks. */
		return vq_evt_drain(fd);
	}
}
