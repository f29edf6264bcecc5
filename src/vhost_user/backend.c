// SPDX-License-Identifier: MIT
/*
 * The vhost-user back-end: the socket, one front-end at a time, and the
 * message handlers.  Every message has passed the codec's table checks
 * before a handler sees it; handlers check what needs connection state
 * (order, features, the memory map).  A handler error closes the connection
 * and tears everything down; the backend then serves the next one.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <virtq/runtime.h>
#include <virtq/vhost_user_backend.h>

#include "vhu_internal.h"

#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif

struct ring {
	uint16_t num;
	bool has_num;
	bool has_addr;
	uint64_t desc_ua, avail_ua, used_ua;
	bool has_base;
	uint32_t base;
	bool has_kick;                  /* kick_fd, or -1 for polling */
	int kick_fd, call_fd, err_fd;
	bool enabled;
	struct vq_dev *vq;              /* non-NULL: started */
	bool dev_running;               /* queue_start was called */
	bool dev_paused;                /* queue_stop(resumes) since */
	bool log_used;                  /* VHOST_VRING_F_LOG */
	uint64_t log_gpa;               /* where used-ring writes are logged */
	struct vq_gpa_range log_ring[2]; /* what the started ring logs */
	unsigned log_nring;
};

struct map {
	void *addr;                     /* the mmap */
	size_t len;
	void *hva;                      /* where the region starts in it */
	uint64_t gpa, size, uaddr, mmap_offset;
	dev_t file_dev;                 /* the file mapped, to know it again */
	ino_t file_ino;
	unsigned refs;                  /* ADD_MEM_REGs of this very region */
};

/* An IOTLB miss asked of the front-end and not yet answered: asked again
 * only after VQ_VHU_MISS_RETRY_NS (the queue retries on every kick). */
#define VQ_VHU_MISSES 16u
#define VQ_VHU_MISS_RETRY_NS 1000000000ull

struct miss {
	uint64_t page;          /* iova / 4096, +1 (0: free slot) */
	unsigned access;
	uint64_t asked_ns;
};

/* The back-end channel (SET_BACKEND_REQ_FD): queue threads send IOTLB
 * misses on it, the control thread sets and closes it. */
struct backend_chan {
	pthread_mutex_t lock;
	int fd;
	struct miss misses[VQ_VHU_MISSES];
	unsigned next;          /* slot to reuse */
	struct vq_vhu_iotlb_stats st;
};

struct vq_vhu_backend {
	struct vq_vhu_device dev;
	uint64_t offered;               /* virtio features we offer */
	uint64_t proto_offered;
	int listen_fd;
	int conn_fd;
	char *path;                     /* a socket we created: unlinked on free */
	char *client_path;
	unsigned reconnect_ms;
	uint64_t next_connect_ns;
	unsigned recv_timeout_ms;
	/* connection state */
	uint64_t features;
	bool features_set;
	uint64_t protocol;
	uint8_t status;
	struct vq_mem *mem;
	struct map *maps;
	unsigned nmaps, capmaps;
	struct ring *rings;
	struct vq_dirty_log log;        /* SET_LOG_BASE; bits NULL: none */
	void *log_map;
	size_t log_map_len;
	struct backend_chan chan;
	struct postcopy {
		int ufd;                /* POSTCOPY_ADVISE..END, else -1 */
		bool listening;         /* POSTCOPY_LISTEN..END */
		/* a memory change was answered while listening: no ring may
		 * touch guest memory before the front-end says it can serve
		 * the faults (its VQ_VHU_P_POSTCOPY_ACK) */
		bool ack_pending;
		struct vq_vhu_postcopy_stats st;
	} pc;
	char errmsg[256];
};

static int berr(struct vq_vhu_backend *b, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int berr(struct vq_vhu_backend *b, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(b->errmsg, sizeof(b->errmsg), fmt, ap);
	va_end(ap);
	return err;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static bool has_proto(const struct vq_vhu_backend *b, unsigned bit)
{
	return b->protocol & VIRTQ_BIT(bit);
}

/* ---- rings ---- */

/* The feature bits a ring is created with: ring bits and device bits;
 * vhost-user's own bit 30 is not a virtio feature. */
static uint64_t ring_features(uint64_t f)
{
	uint64_t dev_bits = (VIRTQ_BIT(24) - 1) | ~(VIRTQ_BIT(50) - 1);

	return f & (VQ_RING_FEATURES | dev_bits);
}

static bool packed(const struct vq_vhu_backend *b)
{
	return b->features & VIRTQ_BIT(VIRTIO_F_RING_PACKED);
}

/* Migration logging is on: LOG_ALL negotiated and a log to write.  QEMU
 * sends SET_FEATURES with LOG_ALL before SET_LOG_BASE when a device starts
 * during a migration; rings log from the moment the log arrives. */
static bool logging(const struct vq_vhu_backend *b)
{
	return (b->features & VIRTQ_BIT(VQ_VHU_F_LOG_ALL)) && b->log.bits;
}

/* VIRTIO_F_ACCESS_PLATFORM negotiated: QEMU sends it only with a vIOMMU
 * in front of the device (vhost_dev_has_iommu), so addresses are IOVAs. */
static bool iommu(const struct vq_vhu_backend *b)
{
	return b->features & VIRTQ_BIT(VIRTIO_F_ACCESS_PLATFORM);
}

/* Sizes of a ring's three areas. */
static void ring_sizes(const struct vq_vhu_backend *b, uint16_t num,
		       uint64_t *dsz, uint64_t *asz, uint64_t *usz)
{
	bool ev = b->features & VIRTQ_BIT(VIRTIO_F_EVENT_IDX);

	*dsz = 16ull * num;
	if (packed(b)) {
		*asz = *usz = 4;
	} else {
		*asz = 4 + 2ull * num + (ev ? 2 : 0);
		*usz = 4 + 8ull * num + (ev ? 2 : 0);
	}
}

/* The guest-physical ranges a started ring writes, for the log: the used
 * ring (split) or device area (packed) at the address the front-end gave
 * for logging, and a packed ring's descriptors, which the device rewrites. */
static int ring_log_setup(struct vq_vhu_backend *b, unsigned i,
			  const struct vq_ring_addr *ra)
{
	struct ring *q = &b->rings[i];
	uint64_t dsz, asz, usz, desc_gpa;
	unsigned n = 0;

	q->log_nring = 0;
	if (!logging(b))
		return 0;
	if (!vq_log_covers_mem(&b->log, b->mem))
		return berr(b, -EINVAL,
			    "the dirty log (0x%llx bytes) does not cover guest memory",
			    (unsigned long long)b->log.size);
	ring_sizes(b, q->num, &dsz, &asz, &usz);
	if (iommu(b)) {
		/* The ring addresses (and QEMU's log address) are IOVAs:
		 * log the guest pages under our own mapping of the areas we
		 * write (vhost's log_write_hva). */
		const void *area[2] = { packed(b) ? ra->desc : NULL, ra->device };
		uint64_t len[2] = { dsz, usz };

		for (unsigned k = 0; k < 2; k++) {
			const struct vq_mem_region *r;

			if (!area[k])
				continue;
			r = vq_mem_region_of_hva(b->mem, area[k]);
			if (!r)
				return berr(b, -EFAULT, "queue %u: ring outside the memory map", i);
			q->log_ring[n].gpa = r->gpa + (uint64_t)((const char *)area[k] - (const char *)r->hva);
			q->log_ring[n++].len = len[k];
		}
		q->log_nring = n;
		return 0;
	}
	if (packed(b)) {
		if (vq_mem_uaddr_to_gpa(b->mem, q->desc_ua, &desc_gpa))
			return berr(b, -EFAULT, "queue %u: descriptor ring outside the memory map", i);
		q->log_ring[n].gpa = desc_gpa;
		q->log_ring[n++].len = dsz;
	}
	if (q->log_used) {
		if (!vq_log_covers(&b->log, q->log_gpa, usz))
			return berr(b, -EINVAL,
				    "queue %u: used ring log address 0x%llx + %llu is past the dirty log",
				    i, (unsigned long long)q->log_gpa,
				    (unsigned long long)usz);
		q->log_ring[n].gpa = q->log_gpa;
		q->log_ring[n++].len = usz;
	}
	q->log_nring = n;
	return 0;
}

/* resumes: the ring pauses for a change of the library's own (memory,
 * addresses, IOTLB, fds) and starts again at its place; a paused ring
 * that then stops for good is told so. */
static void dev_stop(struct vq_vhu_backend *b, unsigned i, bool resumes)
{
	struct ring *q = &b->rings[i];

	if (q->dev_running || (q->dev_paused && !resumes)) {
		q->dev_running = false;
		q->dev_paused = resumes;
		if (b->dev.ops->queue_stop)
			b->dev.ops->queue_stop(b->dev.opaque, i, resumes);
	}
}

static int dev_start(struct vq_vhu_backend *b, unsigned i)
{
	struct ring *q = &b->rings[i];
	struct vq_vhu_queue vq;
	int r = 0;

	if (!q->vq || !q->enabled || q->dev_running)
		return 0;
	vq = (struct vq_vhu_queue){ .index = i, .vq = q->vq,
		.kick_fd = q->kick_fd, .call_fd = q->call_fd,
		.err_fd = q->err_fd };
	if (b->dev.ops->queue_start)
		r = b->dev.ops->queue_start(b->dev.opaque, &vq);
	if (r)
		return berr(b, r < 0 ? r : -EIO, "%s: queue %u failed to start (%d)",
			    b->dev.name, i, r);
	q->dev_running = true;
	q->dev_paused = false;
	return 0;
}

/* Stop a started ring and keep its position in base, so a restart (after a
 * memory or address change, or SET_VRING_BASE) resumes where it was. */
static void ring_suspend(struct vq_vhu_backend *b, unsigned i, bool resumes)
{
	struct ring *q = &b->rings[i];
	struct vq_dev_state st;

	dev_stop(b, i, resumes);
	if (!q->vq)
		return;
	/* a fill the device did not flush still wrote the ring */
	if (logging(b))
		for (unsigned k = 0; k < q->log_nring; k++)
			vq_log_mark(&b->log, q->log_ring[k].gpa, q->log_ring[k].len);
	st = vq_dev_get_state(q->vq);
	q->base = packed(b) ? (uint32_t)st.avail_idx | (uint32_t)st.used_idx << 16
			    : st.avail_idx;
	q->has_base = true;
	vq_dev_free(q->vq);
	q->vq = NULL;
}

/*
 * The ring areas at IOVAs (vhost's vq_iotlb_prefetch): 1 when all three
 * are mapped here in one piece each, 0 when a miss was sent and the ring
 * waits for the update, -errno when the front-end's IOTLB refuses them.
 * A packed ring's descriptors are written too (used descriptors).
 */
static int ring_map_iova(struct vq_vhu_backend *b, unsigned i, uint64_t dsz,
			 uint64_t asz, uint64_t usz, struct vq_ring_addr *ra)
{
	struct ring *q = &b->rings[i];
	const struct {
		uint64_t iova, len;
		unsigned access;
		const char *what;
		void **out;
	} area[3] = {
		{ q->desc_ua, dsz, packed(b) ? VQ_ACCESS_RW : VQ_ACCESS_RO,
		  "descriptor ring", &ra->desc },
		{ q->avail_ua, asz, VQ_ACCESS_RO,
		  packed(b) ? "driver area" : "avail ring", &ra->driver },
		{ q->used_ua, usz, packed(b) ? VQ_ACCESS_RW : VQ_ACCESS_WO,
		  packed(b) ? "device area" : "used ring", &ra->device },
	};
	bool wait = false;

	for (unsigned k = 0; k < 3; k++) {
		int r = vq_mem_map_contig(b->mem, area[k].iova, area[k].len,
					  area[k].access, area[k].out);

		if (r == -EAGAIN)
			wait = true;
		else if (r)
			return berr(b, r,
				    "queue %u: %s at IOVA 0x%llx+%llu is not mapped in one piece with access %u by the IOTLB",
				    i, area[k].what, (unsigned long long)area[k].iova,
				    (unsigned long long)area[k].len, area[k].access);
	}
	return wait ? 0 : 1;
}

static int ring_try_start(struct vq_vhu_backend *b, unsigned i)
{
	struct ring *q = &b->rings[i];
	uint64_t f = ring_features(b->features);
	bool pk = packed(b);
	uint64_t dsz, asz, usz, base;
	struct vq_dev_config cfg;
	int r;

	if (b->pc.ack_pending)
		return 0;       /* started by the front-end's postcopy ack */
	if (q->vq) {
		r = dev_start(b, i);
		return r;
	}
	if (!q->has_kick || !q->has_addr || !q->has_num || !b->features_set ||
	    vq_mem_count(b->mem) == 0)
		return 0;
	if (!vq_ring_num_valid(f, q->num))
		return berr(b, -EINVAL, "queue %u: size %u is not valid for a %s ring%s",
			    i, q->num, pk ? "packed" : "split",
			    pk ? "" : " (must be a power of two)");
	ring_sizes(b, q->num, &dsz, &asz, &usz);
	memset(&cfg, 0, sizeof(cfg));
	cfg.features = f;
	cfg.num = q->num;
	cfg.mem = b->mem;
	if (iommu(b)) {
		r = ring_map_iova(b, i, dsz, asz, usz, &cfg.ring);
		if (r <= 0)
			return r;       /* 0: waiting for the front-end's IOTLB */
	} else {
		cfg.ring.desc = vq_mem_uaddr_to_hva(b->mem, q->desc_ua, dsz);
		cfg.ring.driver = vq_mem_uaddr_to_hva(b->mem, q->avail_ua, asz);
		cfg.ring.device = vq_mem_uaddr_to_hva(b->mem, q->used_ua, usz);
	}
	if (!cfg.ring.desc || !cfg.ring.driver || !cfg.ring.device)
		return berr(b, -EFAULT,
			    "queue %u: ring area outside the memory map (desc 0x%llx, %s 0x%llx, %s 0x%llx)",
			    i, (unsigned long long)q->desc_ua,
			    pk ? "driver" : "avail", (unsigned long long)q->avail_ua,
			    pk ? "device" : "used", (unsigned long long)q->used_ua);
	if (q->desc_ua % 16 || q->avail_ua % (pk ? 4 : 2) || q->used_ua % 4)
		return berr(b, -EINVAL, "queue %u: misaligned ring address", i);
	if (pk) {
		base = q->has_base ? q->base : 0x80008000u;
		/* Front-ends that send only the avail half (DPDK 22.11's
		 * virtio-user sends 0x8000 for a fresh ring) mean "used where
		 * avail is", as DPDK's own vhost reads it. */
		if (!(base >> 16))
			base |= base << 16;
		if ((base & 0x7fff) >= q->num || ((base >> 16) & 0x7fff) >= q->num)
			return berr(b, -EINVAL,
				    "queue %u: packed base 0x%llx past the ring size %u",
				    i, (unsigned long long)base, q->num);
		cfg.avail_idx = base & 0xffff;
		cfg.used_idx = base >> 16;
	} else {
		const struct virtq_used *u = cfg.ring.device;

		cfg.avail_idx = q->has_base ? q->base : 0;
		/* split: the used index lives in memory (SET_VRING_BASE) */
		cfg.used_idx = vq_le16(__atomic_load_n(&u->idx, __ATOMIC_ACQUIRE));
	}
	r = ring_log_setup(b, i, &cfg.ring);
	if (r)
		return r;
	r = vq_dev_new(&cfg, &q->vq);
	if (r)
		return berr(b, r, "queue %u: ring refused (%d)", i, r);
	if (logging(b)) {
		r = vq_dev_set_log(q->vq, &b->log, q->log_ring, q->log_nring);
		if (r) {
			vq_dev_free(q->vq);
			q->vq = NULL;
			return berr(b, r, "queue %u: out of memory", i);
		}
	}
	return dev_start(b, i);
}

static void ring_reset(struct vq_vhu_backend *b, unsigned i)
{
	struct ring *q = &b->rings[i];

	dev_stop(b, i, false);
	vq_dev_free(q->vq);
	close_fd(&q->kick_fd);
	close_fd(&q->call_fd);
	close_fd(&q->err_fd);
	memset(q, 0, sizeof(*q));
	q->kick_fd = q->call_fd = q->err_fd = -1;
}

static void suspend_all(struct vq_vhu_backend *b)
{
	for (unsigned i = 0; i < b->dev.nqueues; i++)
		ring_suspend(b, i, true);
}

static int start_all(struct vq_vhu_backend *b)
{
	for (unsigned i = 0; i < b->dev.nqueues; i++) {
		int r = ring_try_start(b, i);

		if (r)
			return r;
	}
	return 0;
}

/* ---- memory ---- */

static void unmap_all(struct vq_vhu_backend *b)
{
	for (unsigned i = 0; i < b->nmaps; i++) {
		vq_mem_remove(b->mem, b->maps[i].gpa, b->maps[i].size, NULL);
		munmap(b->maps[i].addr, b->maps[i].len);
	}
	b->nmaps = 0;
}

/* mmap one region from fd (which is closed here) and add it to the map. */
static int map_region(struct vq_vhu_backend *b, const struct vq_vhu_region *r,
		      int fd)
{
	struct stat st;
	struct statfs sfs;
	uint64_t align, moff, delta, len;
	struct vq_mem_region mr;
	void *p;
	int ret;

	if (fstat(fd, &st) < 0 || fstatfs(fd, &sfs) < 0) {
		ret = berr(b, -errno, "region gpa 0x%llx: cannot stat its fd",
			   (unsigned long long)r->gpa);
		goto out;
	}
	if (r->mmap_offset > (uint64_t)st.st_size ||
	    r->size > (uint64_t)st.st_size - r->mmap_offset) {
		ret = berr(b, -EINVAL,
			   "region gpa 0x%llx: offset 0x%llx + size 0x%llx is beyond the end of its file (0x%llx)",
			   (unsigned long long)r->gpa,
			   (unsigned long long)r->mmap_offset,
			   (unsigned long long)r->size,
			   (unsigned long long)st.st_size);
		goto out;
	}
	/* hugetlbfs mappings must be aligned to the huge page size */
	align = (sfs.f_type == (typeof(sfs.f_type))HUGETLBFS_MAGIC) ?
		(uint64_t)sfs.f_bsize : (uint64_t)sysconf(_SC_PAGESIZE);
	moff = r->mmap_offset & ~(align - 1);
	delta = r->mmap_offset - moff;
	len = (r->size + delta + align - 1) & ~(align - 1);
	if (len < r->size || len > SIZE_MAX) {
		ret = berr(b, -EINVAL, "region gpa 0x%llx: size too large",
			   (unsigned long long)r->gpa);
		goto out;
	}
	if (b->nmaps == b->capmaps) {
		unsigned cap = b->capmaps ? b->capmaps * 2 : 8;
		struct map *nm = realloc(b->maps, cap * sizeof(*nm));

		if (!nm) {
			ret = berr(b, -ENOMEM, "out of memory");
			goto out;
		}
		b->maps = nm;
		b->capmaps = cap;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)moff);
	if (p == MAP_FAILED) {
		ret = berr(b, -errno, "region gpa 0x%llx: mmap failed (%s)",
			   (unsigned long long)r->gpa, strerror(errno));
		goto out;
	}
	mr = (struct vq_mem_region){ .gpa = r->gpa, .size = r->size,
				     .uaddr = r->uaddr, .hva = (char *)p + delta };
	ret = vq_mem_add(b->mem, &mr);
	if (ret) {
		munmap(p, len);
		ret = berr(b, ret == -EXDEV ? -EINVAL : ret,
			   "region gpa 0x%llx size 0x%llx ua 0x%llx: %s",
			   (unsigned long long)r->gpa,
			   (unsigned long long)r->size,
			   (unsigned long long)r->uaddr,
			   ret == -ENOSPC ? "too many regions" :
			   ret == -EXDEV ? "its file offset, guest and user addresses differ modulo 16 (ring areas in it would be misaligned)" :
			   "overlaps another region");
		goto out;
	}
	b->maps[b->nmaps++] = (struct map){ p, len, mr.hva, r->gpa, r->size,
					    r->uaddr, r->mmap_offset, st.st_dev,
					    st.st_ino, 1 };
out:
	close(fd);
	return ret;
}

/* ---- postcopy (PROTOCOL_F_PAGEFAULT) ----
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
static bool uffd_usable(void)
{
	int fd = uffd_open();

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static int uffd_register(struct vq_vhu_backend *b, const struct map *mp)
{
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)mp->addr, .len = mp->len },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};

	if (ioctl(b->pc.ufd, UFFDIO_REGISTER, &reg) < 0)
		return berr(b, -errno,
			    "postcopy: region gpa 0x%llx cannot be registered with the userfaultfd (%s)",
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

static void postcopy_end(struct vq_vhu_backend *b)
{
	if (b->pc.ufd >= 0 && b->pc.listening)
		uffd_unregister_all(b);
	close_fd(&b->pc.ufd);
	b->pc.listening = false;
	b->pc.ack_pending = false;
}

void vq_vhu_backend_postcopy_stats(struct vq_vhu_backend *b,
				   struct vq_vhu_postcopy_stats *s)
{
	s->advises = __atomic_load_n(&b->pc.st.advises, __ATOMIC_RELAXED);
	s->listens = __atomic_load_n(&b->pc.st.listens, __ATOMIC_RELAXED);
	s->regions = __atomic_load_n(&b->pc.st.regions, __ATOMIC_RELAXED);
	s->acks = __atomic_load_n(&b->pc.st.acks, __ATOMIC_RELAXED);
	s->ends = __atomic_load_n(&b->pc.st.ends, __ATOMIC_RELAXED);
}

/* ---- the dirty log ---- */

static void log_unmap(struct vq_vhu_backend *b)
{
	if (b->log_map)
		munmap(b->log_map, b->log_map_len);
	b->log_map = NULL;
	b->log_map_len = 0;
	b->log = (struct vq_dirty_log){ 0 };
}

/* ---- the back-end channel and the IOTLB ---- */

static void chan_close(struct vq_vhu_backend *b)
{
	pthread_mutex_lock(&b->chan.lock);
	close_fd(&b->chan.fd);
	memset(b->chan.misses, 0, sizeof(b->chan.misses));
	pthread_mutex_unlock(&b->chan.lock);
}

/*
 * A queue (on its own thread) or ring start met an IOVA with no entry: ask
 * the front-end with VHOST_USER_BACKEND_IOTLB_MSG, once per page and access
 * until an update answers or VQ_VHU_MISS_RETRY_NS passes.  The answer comes as
 * an IOTLB_MSG update on the front-end channel (h_iotlb_msg), which kicks
 * the queues.  Blocking send, bounded by the socket's send timeout: a
 * front-end that does not read its channel stalls only the queue that
 * needs it.
 */
static void iotlb_miss(void *arg, uint64_t iova, unsigned access)
{
	struct vq_vhu_backend *b = arg;
	struct backend_chan *c = &b->chan;
	struct vq_vhu_msg m = { .request = VQ_VHU_BACKEND_IOTLB_MSG,
				.flags = VQ_VHU_VERSION, .kind = VQ_VHU_P_IOTLB };
	uint8_t buf[VQ_VHU_MSG_MAX];
	uint64_t page = iova / 4096 + 1, now = now_ns();
	ssize_t len, n = 0;
	unsigned k;

	pthread_mutex_lock(&c->lock);
	for (k = 0; k < VQ_VHU_MISSES; k++)
		if (c->misses[k].page == page && c->misses[k].access == access &&
		    now - c->misses[k].asked_ns < VQ_VHU_MISS_RETRY_NS)
			goto out;
	if (c->fd < 0) {
		c->st.misses_unsent++;
		goto out;
	}
	m.u.iotlb.iova = iova;
	m.u.iotlb.perm = (uint8_t)access;
	m.u.iotlb.type = VQ_VHU_IOTLB_MISS;
	len = vq_vhu_encode_backend_request(&m, buf, sizeof(buf));
	while (len > 0 && n < len) {
		ssize_t w = send(c->fd, buf + n, (size_t)(len - n), MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		n += w;
	}
	if (len <= 0 || n < len) {
		c->st.misses_unsent++;
		goto out;
	}
	c->st.misses++;
	c->misses[c->next] = (struct miss){ page, access, now };
	c->next = (c->next + 1) % VQ_VHU_MISSES;
out:
	pthread_mutex_unlock(&c->lock);
}

/* An update answered the misses in [iova, iova+size). */
static void iotlb_count(struct vq_vhu_backend *b, uint64_t *counter)
{
	pthread_mutex_lock(&b->chan.lock);
	(*counter)++;
	pthread_mutex_unlock(&b->chan.lock);
}

void vq_vhu_backend_iotlb_stats(struct vq_vhu_backend *b,
				struct vq_vhu_iotlb_stats *s)
{
	pthread_mutex_lock(&b->chan.lock);
	*s = b->chan.st;
	pthread_mutex_unlock(&b->chan.lock);
}

static void misses_answered(struct vq_vhu_backend *b, uint64_t iova, uint64_t size)
{
	struct backend_chan *c = &b->chan;
	uint64_t first = iova / 4096 + 1, last = (iova + (size - 1)) / 4096 + 1;

	pthread_mutex_lock(&c->lock);
	for (unsigned k = 0; k < VQ_VHU_MISSES; k++)
		if (c->misses[k].page >= first && c->misses[k].page <= last)
			c->misses[k].page = 0;
	pthread_mutex_unlock(&c->lock);
}

/* How long an invalidation waits for a queue still holding chains it
 * translated before (a device that keeps a chain across turns, or a
 * stuck one): then it is reported done anyway, and counted. */
#define VQ_VHU_QUIESCE_NS 100000000ull

/*
 * Wait until every started queue has been seen holding no chain translated
 * before now (vq_dev_iotlb_quiescent), so nothing the front-end just took
 * away is still being read or written; then the replaced tables can go.
 * A queue between bursts holds none, so this is short.  Returns false on a
 * timeout (the tables are kept).
 */
static bool iotlb_quiesce(struct vq_vhu_backend *b)
{
	uint64_t deadline = now_ns() + VQ_VHU_QUIESCE_NS;
	bool seen[VQ_VHU_MAX_QUEUES] = { false };

	for (;;) {
		bool all = true;

		for (unsigned i = 0; i < b->dev.nqueues; i++) {
			if (!seen[i])
				seen[i] = !b->rings[i].vq ||
					  vq_dev_iotlb_quiescent(b->rings[i].vq);
			all &= seen[i];
		}
		if (all) {
			vq_mem_iotlb_reclaim(b->mem);
			return true;
		}
		if (now_ns() > deadline)
			return false;
		sched_yield();
	}
}

/* Wake every started queue: one may be waiting on an IOVA just mapped. */
static void kick_all(struct vq_vhu_backend *b)
{
	for (unsigned i = 0; i < b->dev.nqueues; i++)
		if (b->rings[i].vq && b->rings[i].kick_fd >= 0)
			vq_evt_signal(b->rings[i].kick_fd);
}

/* Replaced tables kept before a quiesce frees them (each at most
 * VQ_IOTLB_MAX_ENTRIES entries). */
#define VQ_VHU_IOTLB_RETIRED_MAX 32u

/* ---- connection ---- */

static void conn_reset_state(struct vq_vhu_backend *b)
{
	/* first: a queue thread blocked on a fault must wake to be joined */
	postcopy_end(b);
	for (unsigned i = 0; i < b->dev.nqueues; i++)
		ring_reset(b, i);
	unmap_all(b);
	log_unmap(b);
	vq_mem_iotlb_disable(b->mem);
	chan_close(b);
	b->features = 0;
	b->features_set = false;
	b->protocol = 0;
	b->status = 0;
}

static void conn_close(struct vq_vhu_backend *b)
{
	conn_reset_state(b);
	if (b->dev.ops->reset)
		b->dev.ops->reset(b->dev.opaque);
	close_fd(&b->conn_fd);
	if (b->client_path && b->reconnect_ms)
		b->next_connect_ns = now_ns() + b->reconnect_ms * 1000000ull;
}

static void set_conn(struct vq_vhu_backend *b, int fd)
{
	struct timeval tv = { .tv_sec = b->recv_timeout_ms / 1000,
			      .tv_usec = (b->recv_timeout_ms % 1000) * 1000 };
	int fl = fcntl(fd, F_GETFL);

	/* blocking reads inside a message, bounded by the timeout */
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	b->conn_fd = fd;
	b->errmsg[0] = '\0';
}

/* ---- handlers ---- */

static int reply_fds(struct vq_vhu_backend *b, const struct vq_vhu_msg *req,
		     struct vq_vhu_msg *rep, const int *fds, unsigned nfds)
{
	int r;

	rep->request = req->request;
	rep->flags = VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY;
	r = vhu_send(b->conn_fd, rep, fds, nfds);
	if (r)
		return berr(b, r, "sending the reply to %s failed",
			    vq_vhu_request_name(req->request));
	return 0;
}

static int reply(struct vq_vhu_backend *b, const struct vq_vhu_msg *req,
		 struct vq_vhu_msg *rep)
{
	return reply_fds(b, req, rep, NULL, 0);
}

static int reply_u64(struct vq_vhu_backend *b, const struct vq_vhu_msg *req,
		     uint64_t v)
{
	struct vq_vhu_msg rep = { .kind = VQ_VHU_P_U64, .u.u64 = v };

	return reply(b, req, &rep);
}

static int need_proto(struct vq_vhu_backend *b, const struct vq_vhu_msg *m,
		      unsigned bit, const char *name)
{
	if (has_proto(b, bit))
		return 0;
	return berr(b, -EPROTO, "%s without VHOST_USER_PROTOCOL_F_%s negotiated",
		    vq_vhu_request_name(m->request), name);
}

/* Suspend every started ring with an area in [iova, iova+size) (size 0 or
 * wrapping: to the end).  A suspended ring's device has let go of it, so
 * what it translated is no longer in use either.  Returns how many. */
static unsigned rings_unmapped(struct vq_vhu_backend *b, uint64_t iova, uint64_t size)
{
	uint64_t last = size && iova + (size - 1) >= iova ? iova + (size - 1) : UINT64_MAX;
	unsigned n = 0;

	for (unsigned i = 0; i < b->dev.nqueues; i++) {
		struct ring *q = &b->rings[i];
		uint64_t len[3], start[3] = { q->desc_ua, q->avail_ua, q->used_ua };
		bool hit = false;

		if (!q->vq)
			continue;
		ring_sizes(b, q->num, &len[0], &len[1], &len[2]);
		for (unsigned k = 0; k < 3; k++)
			hit |= start[k] <= last && iova <= start[k] + (len[k] - 1);
		if (hit) {
			ring_suspend(b, i, true);
			n++;
		}
	}
	return n;
}

static int h_set_backend_req_fd(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	struct timeval tv = { .tv_sec = 1 };
	int fd = m->fds[0];
	int r = need_proto(b, m, VQ_VHU_PROTOCOL_F_BACKEND_REQ, "BACKEND_REQ");

	m->nfds = 0;
	if (r) {
		close(fd);
		return r;
	}
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	pthread_mutex_lock(&b->chan.lock);
	close_fd(&b->chan.fd);
	b->chan.fd = fd;
	pthread_mutex_unlock(&b->chan.lock);
	return 0;
}

/* VHOST_USER_IOTLB_MSG: an update (the answer to a miss, usually) or an
 * invalidation.  A refused one fails the REPLY_ACK; the connection stays. */
static int h_iotlb_msg(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	uint64_t iova = m->u.iotlb.iova, size = m->u.iotlb.size;
	int r;

	if (!iommu(b))
		return berr(b, -EPROTO,
			    "IOTLB_MSG without VIRTIO_F_ACCESS_PLATFORM negotiated");
	if (m->u.iotlb.type == VQ_VHU_IOTLB_INVALIDATE) {
		iotlb_count(b, &b->chan.st.invalidations);
		r = vq_mem_iotlb_invalidate(b->mem, iova, size);
		if (r < 0) {
			iotlb_count(b, &b->chan.st.refused);
			return 1;
		}
		if (r == 0)
			return 0;
		/* A ring reads its areas through the mapping made when it
		 * started: one whose areas lost their entries stops (keeping
		 * its place) and starts again once they are mapped anew, as
		 * DPDK's vring_invalidate. */
		rings_unmapped(b, iova, size);
		if (!iotlb_quiesce(b)) {
			iotlb_count(b, &b->chan.st.quiesce_timeouts);
			fprintf(stderr, "%s: IOTLB invalidation: a queue still holds buffers after %llu ms\n",
				b->dev.name, VQ_VHU_QUIESCE_NS / 1000000ull);
		}
		return start_all(b);    /* a stopped ring asks for its areas again */
	}
	iotlb_count(b, &b->chan.st.updates);
	{
		struct vq_iotlb_entry e = { .iova = iova, .size = size,
					    .uaddr = m->u.iotlb.uaddr,
					    .perm = m->u.iotlb.perm };

		r = vq_mem_iotlb_update(b->mem, &e);
		if (r == -ENOSPC) {
			/* full: start over, as the queues will ask again */
			if (vq_mem_iotlb_invalidate(b->mem, 0, 0) >= 0)
				iotlb_quiesce(b);
			r = vq_mem_iotlb_update(b->mem, &e);
		}
	}
	if (r) {
		iotlb_count(b, &b->chan.st.refused);
		return 1;
	}
	if (vq_mem_iotlb_retired(b->mem) > VQ_VHU_IOTLB_RETIRED_MAX)
		iotlb_quiesce(b);
	misses_answered(b, iova, size);
	kick_all(b);
	/* a ring may have been waiting for its own areas */
	return start_all(b);
}

static int h_set_log_base(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	struct vq_vhu_msg rep = { .kind = VQ_VHU_P_EMPTY };
	uint64_t size = m->u.log.size, off = m->u.log.offset;
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE), delta = off % pg;
	int fd = m->fds[0], r;
	struct stat st;
	void *p;

	m->nfds = 0;
	r = need_proto(b, m, VQ_VHU_PROTOCOL_F_LOG_SHMFD, "LOG_SHMFD");
	if (!r && fstat(fd, &st) < 0)
		r = berr(b, -errno, "SET_LOG_BASE: cannot stat the log fd");
	if (!r && (off > (uint64_t)st.st_size || size > (uint64_t)st.st_size - off))
		r = berr(b, -EINVAL,
			 "SET_LOG_BASE: 0x%llx bytes at offset 0x%llx are beyond the end of the log file (0x%llx)",
			 (unsigned long long)size, (unsigned long long)off,
			 (unsigned long long)st.st_size);
	if (!r && size + delta > SIZE_MAX)
		r = berr(b, -EINVAL, "SET_LOG_BASE: log too large");
	if (r) {
		close(fd);
		return r;
	}
	p = mmap(NULL, size + delta, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 (off_t)(off - delta));
	close(fd);
	if (p == MAP_FAILED)
		return berr(b, -errno, "SET_LOG_BASE: mmap failed (%s)", strerror(errno));
	suspend_all(b);         /* no ring may still be marking the old log */
	log_unmap(b);
	b->log_map = p;
	b->log_map_len = size + delta;
	b->log = (struct vq_dirty_log){ .bits = (uint8_t *)p + delta, .size = size };
	r = start_all(b);
	return r ? r : reply(b, m, &rep);
}

static int h_set_features(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	uint64_t f = m->u.u64;

	if (f & ~b->offered)
		return berr(b, -EINVAL, "SET_FEATURES: bits 0x%llx were not offered",
			    (unsigned long long)(f & ~b->offered));
	if (!(f & VIRTQ_BIT(VIRTIO_F_VERSION_1)))
		return berr(b, -EINVAL,
			    "SET_FEATURES: VIRTIO_F_VERSION_1 is required (no legacy devices)");
	for (unsigned i = 0; i < b->dev.nqueues; i++)
		if (b->rings[i].vq && ring_features(f) != ring_features(b->features))
			return berr(b, -EBUSY,
				    "SET_FEATURES: ring features changed while queue %u runs", i);
	if ((f ^ b->features) & VIRTQ_BIT(VIRTIO_F_ACCESS_PLATFORM)) {
		int r;

		for (unsigned i = 0; i < b->dev.nqueues; i++)
			if (b->rings[i].vq)
				return berr(b, -EBUSY,
					    "SET_FEATURES: VIRTIO_F_ACCESS_PLATFORM changed while queue %u runs", i);
		if (!(f & VIRTQ_BIT(VIRTIO_F_ACCESS_PLATFORM)))
			vq_mem_iotlb_disable(b->mem);
		else if ((r = vq_mem_iotlb_enable(b->mem, iotlb_miss, b)))
			return berr(b, r, "SET_FEATURES: no memory for the IOTLB");
	}
	/* Migration starts or ends while the rings run: restart them with
	 * the log or without it. */
	if ((f ^ b->features) & VIRTQ_BIT(VQ_VHU_F_LOG_ALL))
		suspend_all(b);
	b->features = f;
	b->features_set = true;
	/* spec, "Ring states": without protocol features rings are enabled */
	if (!(f & VIRTQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES)))
		for (unsigned i = 0; i < b->dev.nqueues; i++)
			b->rings[i].enabled = true;
	return start_all(b);
}

/*
 * A memory change while postcopy listens: the new mappings join the
 * userfaultfd, the reply gives the front-end our address of each region
 * (it must translate the faults we raise), and the rings wait for its ack.
 */
static int postcopy_mem_changed(struct vq_vhu_backend *b, const struct vq_vhu_msg *m,
				struct vq_vhu_msg *echo)
{
	b->pc.ack_pending = true;
	if (!echo)
		return 0;
	echo->kind = m->kind;
	echo->u = m->u;
	return reply(b, m, echo);
}

static int h_set_mem_table(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	struct vq_vhu_msg echo;
	int r = 0;

	suspend_all(b);
	unmap_all(b);
	for (unsigned i = 0; i < m->u.mem.nregions; i++) {
		int fd = m->fds[i];

		m->fds[i] = -1;
		if (r)
			close(fd);
		else
			r = map_region(b, &m->u.mem.regions[i], fd);
	}
	m->nfds = 0;
	if (r) {
		unmap_all(b);
		return r;
	}
	if (!b->pc.listening)
		return start_all(b);
	memset(&echo, 0, sizeof(echo));
	for (unsigned i = 0; i < b->nmaps; i++) {
		r = uffd_register(b, &b->maps[i]);
		if (r)
			return r;
		/* the maps are in the table's order */
		m->u.mem.regions[i].uaddr = (uintptr_t)b->maps[i].hva;
	}
	return postcopy_mem_changed(b, m, &echo);
}

/* The map of exactly this region (addresses, file and offset), if any. */
static struct map *same_region(struct vq_vhu_backend *b,
			       const struct vq_vhu_region *r, int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return NULL;
	for (unsigned i = 0; i < b->nmaps; i++) {
		struct map *mp = &b->maps[i];

		if (mp->gpa == r->gpa && mp->size == r->size && mp->uaddr == r->uaddr &&
		    mp->mmap_offset == r->mmap_offset && mp->file_dev == st.st_dev &&
		    mp->file_ino == st.st_ino)
			return mp;
	}
	return NULL;
}

static int h_add_mem_reg(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	int fd = m->fds[0], r;
	struct map *mp;

	m->nfds = 0;
	r = need_proto(b, m, VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS, "CONFIGURE_MEM_SLOTS");
	if (r) {
		close(fd);
		return r;
	}
	/*
	 * QEMU 7.2 sends ADD and REM_MEM_REG from each vhost device
	 * of the connection, i.e. once per queue pair of a multiqueue net
	 * device: the same region again is one more reference to it, and
	 * only the last REM_MEM_REG unmaps it.  Any other overlap is still
	 * the front-end's error.
	 */
	mp = same_region(b, &m->u.region, fd);
	if (mp) {
		mp->refs++;
		close(fd);
	} else {
		suspend_all(b);         /* the map may be reallocated */
		r = map_region(b, &m->u.region, fd);
		if (r)
			return r;
		mp = &b->maps[b->nmaps - 1];
		if (b->pc.listening) {
			r = uffd_register(b, mp);
			if (r)
				return r;
		}
	}
	if (b->pc.listening) {
		struct vq_vhu_msg echo;

		memset(&echo, 0, sizeof(echo));
		m->u.region.uaddr = (uintptr_t)mp->hva;
		return postcopy_mem_changed(b, m, &echo);
	}
	return start_all(b);
}

static int h_rem_mem_reg(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	const struct vq_vhu_region *r = &m->u.region;
	int ret = need_proto(b, m, VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS,
			     "CONFIGURE_MEM_SLOTS");

	if (ret)
		return ret;
	for (unsigned i = 0; i < b->nmaps; i++) {
		struct map *mp = &b->maps[i];

		if (mp->gpa != r->gpa || mp->size != r->size || mp->uaddr != r->uaddr)
			continue;
		if (--mp->refs)
			return b->pc.listening ? postcopy_mem_changed(b, m, NULL) : 0;
		suspend_all(b);
		vq_mem_remove(b->mem, mp->gpa, mp->size, NULL);
		munmap(mp->addr, mp->len);
		b->maps[i] = b->maps[--b->nmaps];
		if (b->pc.listening)
			return postcopy_mem_changed(b, m, NULL);
		return start_all(b);
	}
	return berr(b, -ENOENT, "REM_MEM_REG: no region gpa 0x%llx size 0x%llx ua 0x%llx",
		    (unsigned long long)r->gpa, (unsigned long long)r->size,
		    (unsigned long long)r->uaddr);
}

static int h_postcopy_advise(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	struct vq_vhu_msg rep = { .kind = VQ_VHU_P_EMPTY };
	int r = need_proto(b, m, VQ_VHU_PROTOCOL_F_PAGEFAULT, "PAGEFAULT");

	if (r)
		return r;
	/* QEMU advises once per vhost device of the connection (per queue
	 * pair): a range registers with one userfaultfd only, so each gets
	 * the same one */
	if (b->pc.ufd < 0) {
		int fd = uffd_open();

		if (fd < 0) {
			/* no fd in the reply fails the front-end's advise */
			berr(b, fd, "POSTCOPY_ADVISE: no userfaultfd (%s)",
			     strerror(-fd));
			r = reply(b, m, &rep);
			return r ? r : 1;
		}
		b->pc.ufd = fd;
	}
	r = reply_fds(b, m, &rep, &b->pc.ufd, 1);
	if (!r)
		__atomic_fetch_add(&b->pc.st.advises, 1, __ATOMIC_RELAXED);
	return r;
}

static int h_postcopy_listen(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	int r = need_proto(b, m, VQ_VHU_PROTOCOL_F_PAGEFAULT, "PAGEFAULT");

	if (r)
		return r;
	if (b->pc.ufd < 0)
		return berr(b, -EPROTO, "POSTCOPY_LISTEN before POSTCOPY_ADVISE");
	/* QEMU sends it before the destination's device has memory; a
	 * region mapped already is registered all the same (again, for a
	 * second vhost device: the same userfaultfd may) */
	for (unsigned i = 0; i < b->nmaps; i++) {
		r = uffd_register(b, &b->maps[i]);
		if (r)
			return 1;       /* refused: the front-end fails the migration */
	}
	b->pc.listening = true;
	__atomic_fetch_add(&b->pc.st.listens, 1, __ATOMIC_RELAXED);
	return 0;
}

static int h_postcopy_end(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	bool waited = b->pc.ack_pending;
	int r = need_proto(b, m, VQ_VHU_PROTOCOL_F_PAGEFAULT, "PAGEFAULT");

	if (r)
		return r;
	/* every page is there now: registered or not makes no difference */
	postcopy_end(b);
	__atomic_fetch_add(&b->pc.st.ends, 1, __ATOMIC_RELAXED);
	r = reply_u64(b, m, 0);
	if (!r && waited)
		r = start_all(b);
	return r;
}

static int h_postcopy_ack(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	if (!b->pc.listening)
		return berr(b, -EPROTO,
			    "a postcopy acknowledgment (request %u, 8 bytes) while postcopy does not listen",
			    m->request);
	if (m->u.u64)
		return berr(b, -EPROTO,
			    "the front-end failed to take our postcopy addresses (%llu): it could not serve our faults",
			    (unsigned long long)m->u.u64);
	b->pc.ack_pending = false;
	__atomic_fetch_add(&b->pc.st.acks, 1, __ATOMIC_RELAXED);
	return start_all(b);
}

static int h_vring_num(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	unsigned i = m->u.state.index;
	struct ring *q = &b->rings[i];

	if (q->vq)
		return berr(b, -EBUSY, "SET_VRING_NUM: queue %u is running", i);
	if (!vq_ring_num_valid(ring_features(b->features), m->u.state.num))
		return berr(b, -EINVAL, "SET_VRING_NUM: queue %u size %u is not valid for a %s ring",
			    i, m->u.state.num, packed(b) ? "packed" :
			    "split (power of two)");
	q->num = m->u.state.num;
	q->has_num = true;
	return ring_try_start(b, i);
}

static int h_vring_addr(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	unsigned i = m->u.addr.index;
	struct ring *q = &b->rings[i];

	if (vq_mem_count(b->mem) == 0)
		return berr(b, -EPROTO, "SET_VRING_ADDR for queue %u before SET_MEM_TABLE", i);
	if (!b->features_set)
		return berr(b, -EPROTO, "SET_VRING_ADDR for queue %u before SET_FEATURES", i);
	if (!q->has_num)
		return berr(b, -EPROTO, "SET_VRING_ADDR for queue %u before SET_VRING_NUM", i);
	ring_suspend(b, i, true);
	q->desc_ua = m->u.addr.desc;
	q->avail_ua = m->u.addr.avail;
	q->used_ua = m->u.addr.used;
	q->log_used = m->u.addr.flags & VQ_VHU_VRING_F_LOG;
	q->log_gpa = m->u.addr.log;
	q->has_addr = true;
	/* Validate now, so the error names this message. */
	{
		bool pk = packed(b);
		uint64_t dsz, asz, usz;

		ring_sizes(b, q->num, &dsz, &asz, &usz);
		/* IOVAs are checked when the IOTLB maps them */
		if (!iommu(b) && (!vq_mem_uaddr_to_hva(b->mem, q->desc_ua, dsz) ||
		    !vq_mem_uaddr_to_hva(b->mem, q->avail_ua, asz) ||
		    !vq_mem_uaddr_to_hva(b->mem, q->used_ua, usz)))
			return berr(b, -EFAULT,
				    "SET_VRING_ADDR: queue %u ring area outside the memory map", i);
		if (q->desc_ua % 16 || q->avail_ua % (pk ? 4 : 2) || q->used_ua % 4)
			return berr(b, -EINVAL,
				    "SET_VRING_ADDR: queue %u misaligned (desc 0x%llx avail 0x%llx used 0x%llx)",
				    i, (unsigned long long)q->desc_ua,
				    (unsigned long long)q->avail_ua,
				    (unsigned long long)q->used_ua);
	}
	return ring_try_start(b, i);
}

static int h_vring_base(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	unsigned i = m->u.state.index;
	struct ring *q = &b->rings[i];

	if (q->vq)
		return berr(b, -EBUSY, "SET_VRING_BASE: queue %u is running", i);
	if (!packed(b) && (m->u.state.num >> 16))
		return berr(b, -EINVAL,
			    "SET_VRING_BASE: split queue %u base 0x%x has reserved bits 16-31 set",
			    i, m->u.state.num);
	q->base = m->u.state.num;
	q->has_base = true;
	return ring_try_start(b, i);
}

static int h_get_vring_base(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	unsigned i = m->u.state.index;
	struct ring *q = &b->rings[i];
	struct vq_vhu_msg rep = { .kind = VQ_VHU_P_STATE };

	ring_suspend(b, i, false);
	/* stopped: a restart needs a new kick (spec, "Ring states") */
	close_fd(&q->kick_fd);
	q->has_kick = false;
	rep.u.state.index = i;
	rep.u.state.num = q->has_base ? q->base : packed(b) ? 0x80008000u : 0;
	return reply(b, m, &rep);
}

static int h_vring_fd(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	unsigned i = m->u.vring_fd.index;
	struct ring *q = &b->rings[i];
	int fd = m->u.vring_fd.nofd ? -1 : m->fds[0];
	int *slot = m->request == VQ_VHU_SET_VRING_KICK ? &q->kick_fd :
		    m->request == VQ_VHU_SET_VRING_CALL ? &q->call_fd : &q->err_fd;

	m->nfds = 0;
	/* the device must let go of the old fd before it is closed */
	dev_stop(b, i, true);
	close_fd(slot);
	*slot = fd;
	/* A new call fd gets one signal: a completion whose call went to the
	 * old fd, or was never sent by a back-end that died (reconnect),
	 * still reaches the driver; a spurious one finds nothing used. */
	if (m->request == VQ_VHU_SET_VRING_CALL && fd >= 0)
		vq_evt_signal(fd);
	if (m->request == VQ_VHU_SET_VRING_KICK)
		q->has_kick = true;
	return ring_try_start(b, i);
}

static int h_vring_enable(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	unsigned i = m->u.state.index;
	struct ring *q = &b->rings[i];

	q->enabled = m->u.state.num;
	if (!q->enabled) {
		dev_stop(b, i, false);
		return 0;
	}
	return ring_try_start(b, i);
}

static int h_get_config(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	struct vq_vhu_msg rep = { .kind = VQ_VHU_P_CONFIG };
	uint32_t off = m->u.config.offset, len = m->u.config.size;
	int r = need_proto(b, m, VQ_VHU_PROTOCOL_F_CONFIG, "CONFIG");

	if (r)
		return r;
	if (off > b->dev.config_len || len > b->dev.config_len - off) {
		/* an empty payload reports the error (spec) */
		rep.kind = VQ_VHU_P_NONE;
		return reply(b, m, &rep);
	}
	rep.u.config = m->u.config;
	b->dev.ops->get_config(b->dev.opaque, off, rep.u.config.data, len);
	return reply(b, m, &rep);
}

/* > 0: refused, connection stays (REPLY_ACK reports it). */
static int h_set_config(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	uint32_t off = m->u.config.offset, len = m->u.config.size;
	int r = need_proto(b, m, VQ_VHU_PROTOCOL_F_CONFIG, "CONFIG");

	if (r)
		return r;
	if (off > b->dev.config_len || len > b->dev.config_len - off) {
		berr(b, 0, "SET_CONFIG: %u bytes at %u past the config space (%u)",
		     len, off, b->dev.config_len);
		return 1;
	}
	if (!b->dev.ops->set_config) {
		berr(b, 0, "SET_CONFIG: the config space is read-only");
		return 1;
	}
	r = b->dev.ops->set_config(b->dev.opaque, off, m->u.config.data, len,
				   m->u.config.flags);
	return r ? 1 : 0;
}

static int h_reset_device(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	int r = need_proto(b, m, VQ_VHU_PROTOCOL_F_RESET_DEVICE, "RESET_DEVICE");

	if (r)
		return r;
	for (unsigned i = 0; i < b->dev.nqueues; i++)
		ring_reset(b, i);
	/* features are gone, ACCESS_PLATFORM with them */
	vq_mem_iotlb_disable(b->mem);
	b->features = 0;
	b->features_set = false;
	b->status = 0;
	if (b->dev.ops->reset)
		b->dev.ops->reset(b->dev.opaque);
	return 0;
}

static int h_send_rarp(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	int r = need_proto(b, m, VQ_VHU_PROTOCOL_F_RARP, "RARP");
	uint8_t mac[6];

	if (r)
		return r;
	/* QEMU copies the MAC's bytes into the payload and the codec copied
	 * the payload into the u64 as it was (vhost-user numbers are native):
	 * its first six bytes in memory are the MAC, whatever the byte order */
	memcpy(mac, &m->u.u64, sizeof(mac));
	r = b->dev.ops->send_rarp(b->dev.opaque, mac);
	if (r)
		berr(b, 0, "SEND_RARP: the device could not announce the MAC: %s",
		     strerror(-r));
	return r ? 1 : 0;
}

/* "VHOST_USER_NET_SET_MTU": the MTU the guest is told (5.1.4.1: 68 to
 * 65535); an MTU the device cannot carry fails the REPLY_ACK. */
static int h_net_set_mtu(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	int r = need_proto(b, m, VQ_VHU_PROTOCOL_F_MTU, "NET_MTU");

	if (r)
		return r;
	if (m->u.u64 < 68 || m->u.u64 > 65535) {
		berr(b, 0, "NET_SET_MTU: %llu is not an MTU (68-65535)",
		     (unsigned long long)m->u.u64);
		return 1;
	}
	r = b->dev.ops->set_mtu(b->dev.opaque, (uint16_t)m->u.u64);
	if (r)
		berr(b, 0, "NET_SET_MTU: the device cannot carry an MTU of %llu: %s",
		     (unsigned long long)m->u.u64, strerror(-r));
	return r ? 1 : 0;
}

static int handle(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	int r;

	if (m->kind == VQ_VHU_P_POSTCOPY_ACK)
		return h_postcopy_ack(b, m);
	switch (m->request) {
	case VQ_VHU_GET_FEATURES:
		return reply_u64(b, m, b->offered);
	case VQ_VHU_SET_FEATURES:
		return h_set_features(b, m);
	case VQ_VHU_GET_PROTOCOL_FEATURES:
		return reply_u64(b, m, b->proto_offered);
	case VQ_VHU_SET_PROTOCOL_FEATURES:
		if (m->u.u64 & ~b->proto_offered)
			return berr(b, -EINVAL,
				    "SET_PROTOCOL_FEATURES: bits 0x%llx were not offered",
				    (unsigned long long)(m->u.u64 & ~b->proto_offered));
		b->protocol = m->u.u64;
		return 0;
	case VQ_VHU_SET_OWNER:
		return 0;
	case VQ_VHU_RESET_OWNER:
		/* deprecated; the spec allows "disable all rings" */
		for (unsigned i = 0; i < b->dev.nqueues; i++) {
			b->rings[i].enabled = false;
			dev_stop(b, i, false);
		}
		return 0;
	case VQ_VHU_GET_QUEUE_NUM:
		return reply_u64(b, m, b->dev.nqueues);
	case VQ_VHU_SET_MEM_TABLE:
		return h_set_mem_table(b, m);
	case VQ_VHU_SET_LOG_BASE:
		return h_set_log_base(b, m);
	case VQ_VHU_SET_LOG_FD:
		/* optional (spec): we never signal the log, so it goes unused */
		return 0;
	case VQ_VHU_GET_MAX_MEM_SLOTS:
		r = need_proto(b, m, VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS,
			       "CONFIGURE_MEM_SLOTS");
		return r ? r : reply_u64(b, m, VQ_MEM_MAX_REGIONS);
	case VQ_VHU_ADD_MEM_REG:
		return h_add_mem_reg(b, m);
	case VQ_VHU_REM_MEM_REG:
		return h_rem_mem_reg(b, m);
	case VQ_VHU_SET_VRING_NUM:
		return h_vring_num(b, m);
	case VQ_VHU_SET_VRING_ADDR:
		return h_vring_addr(b, m);
	case VQ_VHU_SET_VRING_BASE:
		return h_vring_base(b, m);
	case VQ_VHU_GET_VRING_BASE:
		return h_get_vring_base(b, m);
	case VQ_VHU_SET_VRING_KICK:
	case VQ_VHU_SET_VRING_CALL:
	case VQ_VHU_SET_VRING_ERR:
		return h_vring_fd(b, m);
	case VQ_VHU_SET_VRING_ENABLE:
		return h_vring_enable(b, m);
	case VQ_VHU_GET_CONFIG:
		return h_get_config(b, m);
	case VQ_VHU_SET_CONFIG:
		return h_set_config(b, m);
	case VQ_VHU_RESET_DEVICE:
		return h_reset_device(b, m);
	case VQ_VHU_SEND_RARP:
		return h_send_rarp(b, m);
	case VQ_VHU_NET_SET_MTU:
		return h_net_set_mtu(b, m);
	case VQ_VHU_SET_BACKEND_REQ_FD:
		return h_set_backend_req_fd(b, m);
	case VQ_VHU_IOTLB_MSG:
		return h_iotlb_msg(b, m);
	case VQ_VHU_POSTCOPY_ADVISE:
		return h_postcopy_advise(b, m);
	case VQ_VHU_POSTCOPY_LISTEN:
		return h_postcopy_listen(b, m);
	case VQ_VHU_POSTCOPY_END:
		return h_postcopy_end(b, m);
	case VQ_VHU_SET_STATUS:
		r = need_proto(b, m, VQ_VHU_PROTOCOL_F_STATUS, "STATUS");
		if (!r)
			b->status = (uint8_t)m->u.u64;
		return r;
	case VQ_VHU_GET_STATUS:
		r = need_proto(b, m, VQ_VHU_PROTOCOL_F_STATUS, "STATUS");
		return r ? r : reply_u64(b, m, b->status);
	}
	return berr(b, -EOPNOTSUPP, "request %u not handled", m->request);
}

static int handle_one(struct vq_vhu_backend *b)
{
	uint8_t buf[VQ_VHU_MSG_MAX];
	int fds[VQ_VHU_MAX_FDS];
	unsigned nfds;
	size_t len;
	struct vq_vhu_msg m;
	char err[160];
	bool ack;
	int r;

	r = vhu_recv(b->conn_fd, true, true, buf, &len, fds, &nfds);
	if (r == -EAGAIN)
		return 0;
	if (r == -ECONNRESET)
		return -ECONNRESET;     /* orderly close: not an error message */
	if (r < 0 && len == VQ_VHU_HDR_SIZE) {
		/* the header was refused: let the codec say why */
		vq_vhu_decode_request(buf, len, NULL, 0, b->dev.nqueues, &m,
				      err, sizeof(err));
		return berr(b, r, "bad message: %s", err);
	}
	if (r < 0)
		return berr(b, r, "receiving a message failed: %s%s",
			    r == -EPIPE ? "the front-end closed mid-message" :
			    r == -ETIMEDOUT ? "the front-end stalled mid-message" :
			    strerror(-r), r == -EBADF ? " (fds)" : "");
	r = vq_vhu_decode_request(buf, len, fds, nfds, b->dev.nqueues, &m, err,
				  sizeof(err));
	if (r)
		return berr(b, r, "bad message: %s", err);
	/* while postcopy listens, a memory change's reply is its echo */
	ack = has_proto(b, VQ_VHU_PROTOCOL_F_REPLY_ACK) &&
	      (m.flags & VQ_VHU_FLAG_NEED_REPLY) &&
	      !vq_vhu_request_has_reply(m.request) &&
	      !(b->pc.listening && vq_vhu_request_postcopy_echo(m.request));
	r = handle(b, &m);
	vq_vhu_msg_close_fds(&m);       /* fds a handler did not take */
	if (ack) {
		int s = reply_u64(b, &m, r ? 1 : 0);

		if (s && r <= 0)
			r = s;
	}
	if (r > 0)
		r = 0;  /* refused, reported, connection stays */
	return r ? r : 1;
}

/* ---- public ---- */

int vq_vhu_backend_new(const struct vq_vhu_device *dev,
		       struct vq_vhu_backend **out)
{
	static const struct vq_vhu_device_ops no_ops;
	struct vq_vhu_backend *b;
	uint64_t dev_mask = (VIRTQ_BIT(24) - 1) | ~(VIRTQ_BIT(50) - 1);

	*out = NULL;
	if (!dev || dev->nqueues == 0 || dev->nqueues > VQ_VHU_MAX_QUEUES ||
	    !(dev->features & VIRTQ_BIT(VIRTIO_F_VERSION_1)) ||
	    (dev->features & ~(dev_mask | VQ_RING_FEATURES)))
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->dev = *dev;
	if (!b->dev.ops)
		b->dev.ops = &no_ops;
	if (!b->dev.name)
		b->dev.name = "vhost-user device";
	/* The ring layer logs every write a device makes through a chain, so
	 * every device can migrate. */
	b->offered = dev->features | VIRTQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES) |
		     VIRTQ_BIT(VQ_VHU_F_LOG_ALL);
	/* The same goes for the IOTLB (every chain is translated by the ring
	 * layer): a guest behind a vIOMMU can use any device. */
	b->offered |= VIRTQ_BIT(VIRTIO_F_ACCESS_PLATFORM);
	b->proto_offered = VQ_VHU_BACKEND_PROTOCOL_FEATURES;
	if (!b->dev.ops->get_config)
		b->proto_offered &= ~VIRTQ_BIT(VQ_VHU_PROTOCOL_F_CONFIG);
	if (!b->dev.ops->send_rarp)
		b->proto_offered &= ~VIRTQ_BIT(VQ_VHU_PROTOCOL_F_RARP);
	if (!b->dev.ops->set_mtu)
		b->proto_offered &= ~VIRTQ_BIT(VQ_VHU_PROTOCOL_F_MTU);
	if (!uffd_usable())
		b->proto_offered &= ~VIRTQ_BIT(VQ_VHU_PROTOCOL_F_PAGEFAULT);
	b->listen_fd = b->conn_fd = -1;
	b->recv_timeout_ms = 5000;
	b->mem = vq_mem_new();
	b->rings = calloc(dev->nqueues, sizeof(*b->rings));
	if (!b->mem || !b->rings) {
		vq_mem_free(b->mem);
		free(b->rings);
		free(b);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < dev->nqueues; i++)
		b->rings[i].kick_fd = b->rings[i].call_fd = b->rings[i].err_fd = -1;
	b->chan.fd = -1;
	b->pc.ufd = -1;
	pthread_mutex_init(&b->chan.lock, NULL);
	*out = b;
	return 0;
}

void vq_vhu_backend_free(struct vq_vhu_backend *b)
{
	if (!b)
		return;
	if (b->conn_fd >= 0)
		conn_close(b);
	close_fd(&b->listen_fd);
	if (b->path) {
		unlink(b->path);
		free(b->path);
	}
	free(b->client_path);
	free(b->maps);
	free(b->rings);
	vq_mem_free(b->mem);
	pthread_mutex_destroy(&b->chan.lock);
	free(b);
}

int vq_vhu_backend_listen(struct vq_vhu_backend *b, const char *path,
			  unsigned mode)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, r;

	if (b->listen_fd >= 0 || b->conn_fd >= 0 || b->client_path)
		return -EBUSY;
	r = vq_unix_addr(&sa, path);
	if (r)
		return r;
	if (!mode)
		mode = 0600;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return berr(b, -EEXIST, "%s exists and is not a socket", path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		close(fd);
		if (r == 0)
			return berr(b, -EADDRINUSE, "%s: a live socket is listening", path);
		unlink(path);   /* stale */
	} else if (errno != ENOENT) {
		return -errno;
	}
	fd = vq_unix_listen(path, mode, 1, SOCK_STREAM);
	if (fd < 0)
		return fd;
	b->path = strdup(path);
	b->listen_fd = fd;
	return 0;
}

int vq_vhu_backend_adopt_fd(struct vq_vhu_backend *b, int fd)
{
	int acc = 0, type = 0, dom = 0;
	socklen_t l = sizeof(int);

	if (b->listen_fd >= 0 || b->conn_fd >= 0 || b->client_path)
		return -EBUSY;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0)
		return -errno;
	l = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) < 0)
		return -errno;
	if (type != SOCK_STREAM || dom != AF_UNIX)
		return -ENOTSOCK;
	l = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) < 0)
		return -errno;
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	if (acc) {
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		b->listen_fd = fd;
	} else {
		set_conn(b, fd);
	}
	return 0;
}

static int try_connect(struct vq_vhu_backend *b)
{
	struct sockaddr_un sa;
	int fd, r;

	r = vq_unix_addr(&sa, b->client_path);
	if (r)
		return r;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		close(fd);
		b->next_connect_ns = b->reconnect_ms ?
			now_ns() + b->reconnect_ms * 1000000ull : UINT64_MAX;
		return r;
	}
	set_conn(b, fd);
	return 0;
}

int vq_vhu_backend_connect(struct vq_vhu_backend *b, const char *path,
			   unsigned reconnect_ms)
{
	if (b->listen_fd >= 0 || b->conn_fd >= 0 || b->client_path)
		return -EBUSY;
	b->client_path = strdup(path);
	if (!b->client_path)
		return -ENOMEM;
	b->reconnect_ms = reconnect_ms;
	return try_connect(b);
}

int vq_vhu_backend_fd(const struct vq_vhu_backend *b)
{
	return b->conn_fd >= 0 ? b->conn_fd : b->listen_fd;
}

int vq_vhu_backend_timeout_ms(const struct vq_vhu_backend *b)
{
	uint64_t now;

	if (b->conn_fd >= 0 || !b->client_path || b->next_connect_ns == UINT64_MAX)
		return -1;
	now = now_ns();
	if (b->next_connect_ns <= now)
		return 0;
	return (int)((b->next_connect_ns - now + 999999) / 1000000);
}

int vq_vhu_backend_process(struct vq_vhu_backend *b)
{
	int r;

	if (b->conn_fd < 0) {
		if (b->listen_fd >= 0) {
			int fd = accept4(b->listen_fd, NULL, NULL, SOCK_CLOEXEC);

			if (fd < 0)
				return (errno == EAGAIN || errno == EWOULDBLOCK ||
					errno == EINTR) ? 0 : -errno;
			set_conn(b, fd);
			return 1;
		}
		if (b->client_path && b->next_connect_ns != UINT64_MAX &&
		    now_ns() >= b->next_connect_ns)
			return try_connect(b) == 0 ? 1 : 0;
		return 0;
	}
	r = handle_one(b);
	if (r < 0)
		conn_close(b);
	return r;
}

int vq_vhu_backend_serve(struct vq_vhu_backend *b,
			 const volatile sig_atomic_t *stop, bool once)
{
	bool had_conn = false;

	while (!(stop && *stop)) {
		struct pollfd p = { .fd = vq_vhu_backend_fd(b), .events = POLLIN };
		int t = vq_vhu_backend_timeout_ms(b), r;

		if (p.fd < 0 && t < 0)
			return -ENOTCONN;
		r = poll(&p, p.fd >= 0, t < 0 || t > 200 ? 200 : t);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0 && t != 0)
			continue;
		r = vq_vhu_backend_process(b);
		if (b->conn_fd >= 0)
			had_conn = true;
		if (r < 0 && r != -ECONNRESET)
			fprintf(stderr, "%s: connection closed: %s\n", b->dev.name,
				b->errmsg);
		if (once && had_conn && b->conn_fd < 0)
			return 0;
	}
	return 0;
}

bool vq_vhu_backend_connected(const struct vq_vhu_backend *b)
{
	return b->conn_fd >= 0;
}

uint64_t vq_vhu_backend_features(const struct vq_vhu_backend *b)
{
	return b->features;
}

uint64_t vq_vhu_backend_protocol_features(const struct vq_vhu_backend *b)
{
	return b->protocol;
}

const char *vq_vhu_backend_error_msg(const struct vq_vhu_backend *b)
{
	return b->errmsg;
}

void vq_vhu_backend_set_recv_timeout(struct vq_vhu_backend *b, unsigned ms)
{
	b->recv_timeout_ms = ms ? ms : 1;
}
