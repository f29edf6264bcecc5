// SPDX-License-Identifier: MIT
/*
 * The back-end's postcopy migration (PROTOCOL_F_PAGEFAULT).
 *
 * On a postcopy migration's destination the guest runs before its RAM has
 * arrived.  We give the front-end a userfaultfd with our mappings
 * registered on it: a queue thread that touches a page not yet there
 * blocks in the kernel, the front-end reads the fault, fetches the page
 * from the source, places it in the shared memory and wakes us.  The
 * front-end serves the faults (QEMU's fault thread), so we need no thread
 * of our own; we only keep our rings off guest memory until it has our
 * addresses (the ack after a memory change).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include "backend_internal.h"
#include "backend_lib.h"

static int uffd_open(void)
{
	struct uffdio_api api = { .api = UFFD_API };
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	int r;

	if (fd < 0)
		return -errno;
	if (ioctl(fd, UFFDIO_API, &api) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* Offered only where this process may open a userfaultfd that also
 * catches the kernel's own accesses (a TAP write from guest memory):
 * a user-mode-only one would make those fail with EFAULT instead. */
bool vhu_uffd_usable(void)
{
	int fd = uffd_open();

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

int vhu_uffd_register(struct vq_vhu_backend *b, const struct map *mp)
{
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)mp->addr, .len = mp->len },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};

	if (ioctl(b->pc.ufd, UFFDIO_REGISTER, &reg) < 0)
		return vhu_berr(b, -errno,
				"vhost-user \"Migration\": postcopy: region at guest 0x%llx cannot be registered with the userfaultfd: %s",
				(unsigned long long)mp->gpa, strerror(errno));
	__atomic_fetch_add(&b->pc.st.regions, 1, __ATOMIC_RELAXED);
	return 0;
}

/* Unregistering wakes every thread blocked on a fault in the range: it
 * then takes the page as it is.  Only at the end of postcopy (every page
 * is there) or when the connection is gone (nobody will serve faults). */
static void uffd_unregister_all(struct vq_vhu_backend *b)
{
	for (unsigned i = 0; i < b->nmaps; i++) {
		struct uffdio_range r = { .start = (uintptr_t)b->maps[i].addr,
					  .len = b->maps[i].len };

		ioctl(b->pc.ufd, UFFDIO_UNREGISTER, &r);
	}
}

void vhu_backend_unstall(struct vq_vhu_backend *b)
{
	if (b->pc.ufd >= 0 && b->pc.listening)
		uffd_unregister_all(b);
}

void vhu_postcopy_end(struct vq_vhu_backend *b)
{
	if (b->pc.ufd >= 0 && b->pc.listening)
		uffd_unregister_all(b);
	vhu_close_fd(&b->pc.ufd);
	b->pc.listening = false;
	b->pc.ack_pending = false;
}

size_t vq_vhu_backend_postcopy_stats(struct vq_vhu_backend *b,
				     struct vq_vhu_postcopy_stats *s, size_t size)
{
	struct vq_vhu_postcopy_stats st = {
		.advises = __atomic_load_n(&b->pc.st.advises, __ATOMIC_RELAXED),
		.listens = __atomic_load_n(&b->pc.st.listens, __ATOMIC_RELAXED),
		.regions = __atomic_load_n(&b->pc.st.regions, __ATOMIC_RELAXED),
		.acks = __atomic_load_n(&b->pc.st.acks, __ATOMIC_RELAXED),
		.ends = __atomic_load_n(&b->pc.st.ends, __ATOMIC_RELAXED),
	};

	return vhu_copy_out(s, size, &st, sizeof(st));
}

/*
 * A memory change while postcopy listens: the new mappings join the
 * userfaultfd, the reply gives the front-end our address of each region
 * (it must translate the faults we raise), and the rings wait for its ack.
 */
int vhu_postcopy_mem_changed(struct vq_vhu_backend *b, const struct vq_vhu_msg *m,
			     struct vq_vhu_msg *echo)
{
	b->pc.ack_pending = true;
	if (!echo)
		return 0;
	echo->kind = m->kind;
	echo->u = m->u;
	return vhu_reply(b, m, echo);
}

int vhu_h_postcopy_advise(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	struct vq_vhu_msg rep = { .kind = VQ_VHU_P_EMPTY };
	int r;

	/* QEMU advises once per vhost device of the connection (per queue
	 * pair): a range registers with one userfaultfd only, so each gets
	 * the same one */
	if (b->pc.ufd < 0) {
		int fd = uffd_open();

		if (fd < 0) {
			/* no fd in the reply fails the front-end's advise */
			r = vhu_reply(b, m, &rep);
			return r ? r : vhu_refuse(b, "VHOST_USER_POSTCOPY_ADVISE: no userfaultfd: %s",
						  strerror(-fd));
		}
		b->pc.ufd = fd;
	}
	r = vhu_reply_fds(b, m, &rep, &b->pc.ufd, 1);
	if (!r)
		__atomic_fetch_add(&b->pc.st.advises, 1, __ATOMIC_RELAXED);
	return r;
}

int vhu_h_postcopy_listen(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	int r;

	if (b->pc.ufd < 0)
		return vhu_berr(b, -EPROTO,
				"VHOST_USER_POSTCOPY_LISTEN: before VHOST_USER_POSTCOPY_ADVISE");
	/* QEMU sends it before the destination's device has memory; a
	 * region mapped already is registered all the same (again, for a
	 * second vhost device: the same userfaultfd may) */
	for (unsigned i = 0; i < b->nmaps; i++) {
		r = vhu_uffd_register(b, &b->maps[i]);
		if (r)  /* the front-end fails the migration */
			return vhu_refuse(b, "%s", b->errmsg);
	}
	b->pc.listening = true;
	__atomic_fetch_add(&b->pc.st.listens, 1, __ATOMIC_RELAXED);
	return VHU_DONE;
}

int vhu_h_postcopy_end(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	bool waited = b->pc.ack_pending;
	int r;

	/* every page is there now: registered or not makes no difference */
	vhu_postcopy_end(b);
	__atomic_fetch_add(&b->pc.st.ends, 1, __ATOMIC_RELAXED);
	r = vhu_reply_u64(b, m, 0);
	if (!r && waited)
		r = vhu_start_all(b);
	return r;
}

int vhu_h_postcopy_ack(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	if (!b->pc.listening)
		return vhu_berr(b, -EPROTO,
				"vhost-user \"Migration\": a postcopy acknowledgment (under request %u) while postcopy does not listen",
				m->request);
	if (m->u.u64)
		return vhu_berr(b, -EPROTO,
				"vhost-user \"Migration\": the front-end failed to take our postcopy addresses (%llu): it could not serve our faults",
				(unsigned long long)m->u.u64);
	b->pc.ack_pending = false;
	__atomic_fetch_add(&b->pc.st.acks, 1, __ATOMIC_RELAXED);
	return vhu_start_all(b);
}
