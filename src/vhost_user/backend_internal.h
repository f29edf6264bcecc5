/* SPDX-License-Identifier: MIT */
/*
 * Private to the vhost-user back-end: its state and what its parts share.
 *
 *   backend.c           the socket, one front-end at a time, dispatch
 *   backend_ring.c      rings: start, stop, suspend, and their messages
 *   backend_mem.c       memory regions and the dirty log
 *   backend_iotlb.c     the IOTLB and the back-end channel
 *   backend_postcopy.c  postcopy (PROTOCOL_F_PAGEFAULT)
 *   backend_fd.c        what the front-end's fds are
 *
 * Every message has passed the codec's table checks before a handler sees
 * it.  A handler returns 0, or -errno, which closes the connection (with
 * vhu_berr saying why).
 */
#ifndef VIRTQ_VHU_BACKEND_INTERNAL_H
#define VIRTQ_VHU_BACKEND_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <virtq/vhost_user_backend.h>

#include "vhu_internal.h"

struct ring {
	uint16_t num;
	bool has_num;
	bool has_addr;
	uint64_t ua[3];                 /* SET_VRING_ADDR's (IOVAs with an IOTLB),
					 * in struct vq_ring_addr's order */
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
	int guard;                      /* its guard (mem/guard.h), or -1 */
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

/* A back-end channel that has taken nothing for this long since it first
 * refused a message has failed (the front-end stopped reading it).  Our
 * own clock: every send is MSG_DONTWAIT, so nothing the front-end sets on
 * the socket it shares with us (O_NONBLOCK, SO_SNDTIMEO) can make one
 * wait. */
#define VQ_VHU_CHAN_TIMEOUT_MS 1000u

/* The back-end channel (SET_BACKEND_REQ_FD): queue threads send IOTLB
 * misses on it, the control thread sets and closes it. */
struct backend_chan {
	pthread_mutex_t lock;
	int fd;
	struct miss misses[VQ_VHU_MISSES];
	unsigned next;          /* slot to reuse */
	/* a message the channel took in part: its rest goes first */
	uint8_t rest[64];
	unsigned rest_off, rest_len;
	uint64_t refused_ns;    /* when it first refused since it last
				 * took a byte; 0: it takes */
	struct vq_vhu_iotlb_stats st;
};

struct vq_vhu_backend {
	struct vq_vhu_device dev;
	uint64_t offered;               /* virtio features we offer */
	uint64_t proto_offered;
	int listen_fd;
	int conn_fd;
	struct vq_unix_listener *listener; /* the socket we created: its path
					   * is removed on free if still ours */
	char *client_path;
	unsigned reconnect_ms;
	uint64_t next_connect_ns;
	unsigned recv_timeout_ms;
	/* connection state */
	bool conn_said;                 /* "a front-end connected" logged: at
					 * its first message, not at accept (a
					 * liveness probe sends none) */
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
	uint64_t log_map_offset;        /* in its file */
	int log_guard;                  /* with log_map: as struct map's guard */
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
	/* The device reads split rings' used indices itself
	 * (vhu_backend_defer_used_idx). */
	bool defer_used_idx;
	/* A failure found off the control thread (vq_vhu_backend_fail): the
	 * connection's socket is shut down so the control thread wakes and
	 * closes it with this message.  lock orders it against conn_fd
	 * changing (accept, close). */
	struct conn_fail {
		pthread_mutex_t lock;
		int err;                /* atomic: 0, or the -errno pending */
		char msg[256];
	} fail;
};

/* How long an invalidation waits for a queue still holding chains it
 * translated before (a device that keeps a chain across turns, or a
 * stuck one): then it is reported done anyway, and counted. */
#define VQ_VHU_QUIESCE_NS 100000000ull

/* Replaced tables kept before a quiesce frees them (each at most
 * VQ_IOTLB_MAX_ENTRIES entries). */
#define VQ_VHU_IOTLB_RETIRED_MAX 32u

/* Copy what the library filled (len bytes) into the caller's struct of
 * size bytes, zeroing the rest of it: a caller built against a newer
 * header sees zero in the fields this library does not know.  Returns how
 * many bytes are the library's. */
static inline size_t vhu_copy_out(void *dst, size_t size, const void *src,
				  size_t len)
{
	size_t n = size < len ? size : len;

	memcpy(dst, src, n);
	memset((char *)dst + n, 0, size - n);
	return n;
}

static inline void vhu_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static inline bool vhu_has_proto(const struct vq_vhu_backend *b, unsigned bit)
{
	return b->protocol & VQ_BIT(bit);
}

/* The feature bits a ring is created with: ring bits and device bits;
 * vhost-user's own bit 30 is not a virtio feature. */
static inline uint64_t vhu_ring_features(uint64_t f)
{
	uint64_t dev_bits = (VQ_BIT(24) - 1) | ~(VQ_BIT(50) - 1);

	return f & (VQ_RING_FEATURES | dev_bits);
}

static inline bool vhu_packed(const struct vq_vhu_backend *b)
{
	return b->features & VQ_BIT(VQ_F_RING_PACKED);
}

/* Migration logging is on: LOG_ALL negotiated and a log to write.  QEMU
 * sends SET_FEATURES with LOG_ALL before SET_LOG_BASE when a device starts
 * during a migration; rings log from the moment the log arrives. */
static inline bool vhu_logging(const struct vq_vhu_backend *b)
{
	return (b->features & VQ_BIT(VQ_VHU_F_LOG_ALL)) && b->log.bits;
}

/* VQ_F_ACCESS_PLATFORM negotiated: QEMU sends it only with a vIOMMU
 * in front of the device (vhost_dev_has_iommu), so addresses are IOVAs. */
static inline bool vhu_iommu(const struct vq_vhu_backend *b)
{
	return b->features & VQ_BIT(VQ_F_ACCESS_PLATFORM);
}

/*
 * What a message handler returns: VHU_DONE, VHU_REFUSED, or -errno.
 * -errno closes the connection, vhu_berr having said why.  A refusal keeps
 * it: the request was not carried out, a REPLY_ACK asked for says so
 * (non-zero), and the log says why.  The spec gives a refusal a meaning
 * the front-end acts on for some requests (SET_CONFIG, SEND_RARP,
 * NET_SET_MTU, IOTLB_MSG, POSTCOPY_ADVISE and _LISTEN); anything else
 * wrong is the front-end's error and closes the connection.
 */
enum vhu_result {
	VHU_DONE = 0,
	VHU_REFUSED = 1,
};

/* backend.c: errors, refusals, replies */
VQ_INTERNAL int vhu_berr(struct vq_vhu_backend *b, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Log why a request is refused (a warning), and return VHU_REFUSED. */
VQ_INTERNAL int vhu_refuse(struct vq_vhu_backend *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
VQ_INTERNAL int vhu_reply_fds(struct vq_vhu_backend *b, const struct vq_vhu_msg *req,
			      struct vq_vhu_msg *rep, const int *fds, unsigned nfds);
VQ_INTERNAL int vhu_reply(struct vq_vhu_backend *b, const struct vq_vhu_msg *req,
			  struct vq_vhu_msg *rep);
VQ_INTERNAL int vhu_reply_u64(struct vq_vhu_backend *b, const struct vq_vhu_msg *req,
			      uint64_t v);

/* backend_ring.c */
/* Queue i's three areas' sizes and alignments (vq_ring_areas), in struct
 * vq_ring_addr's order, and their names in the spec. */
VQ_INTERNAL int vhu_ring_areas(const struct vq_vhu_backend *b, unsigned i,
			       uint64_t size[3], uint64_t align[3]);
VQ_INTERNAL const char *vhu_area_name(const struct vq_vhu_backend *b, unsigned k);
VQ_INTERNAL void vhu_dev_stop(struct vq_vhu_backend *b, unsigned i, bool resumes);
VQ_INTERNAL void vhu_ring_suspend(struct vq_vhu_backend *b, unsigned i, bool resumes);
VQ_INTERNAL int vhu_ring_try_start(struct vq_vhu_backend *b, unsigned i);
VQ_INTERNAL void vhu_ring_reset(struct vq_vhu_backend *b, unsigned i);
VQ_INTERNAL void vhu_suspend_all(struct vq_vhu_backend *b);
VQ_INTERNAL int vhu_start_all(struct vq_vhu_backend *b);
VQ_INTERNAL int vhu_h_vring_num(struct vq_vhu_backend *b, struct vq_vhu_msg *m);
VQ_INTERNAL int vhu_h_vring_addr(struct vq_vhu_backend *b, struct vq_vhu_msg *m);
VQ_INTERNAL int vhu_h_vring_base(struct vq_vhu_backend *b, struct vq_vhu_msg *m);
VQ_INTERNAL int vhu_h_get_vring_base(struct vq_vhu_backend *b, struct vq_vhu_msg *m);
VQ_INTERNAL int vhu_h_vring_fd(struct vq_vhu_backend *b, struct vq_vhu_msg *m);
VQ_INTERNAL int vhu_h_vring_enable(struct vq_vhu_backend *b, struct vq_vhu_msg *m);

/* backend_mem.c */
VQ_INTERNAL void vhu_unmap_all(struct vq_vhu_backend *b);
VQ_INTERNAL void vhu_log_unmap(struct vq_vhu_backend *b);
/* A guarded mapping lost to its file shrinking (mem/guard.h): -EFAULT,
 * with vhu_berr naming the region or the log, or 0. */
VQ_INTERNAL int vhu_mem_lost(struct vq_vhu_backend *b);
VQ_INTERNAL int vhu_ring_log_setup(struct vq_vhu_backend *b, unsigned i,
				   const struct vq_ring_addr *ra);
VQ_INTERNAL int vhu_h_set_mem_table(struct vq_vhu_backend *b, struct vq_vhu_msg *m);
VQ_INTERNAL int vhu_h_add_mem_reg(struct vq_vhu_backend *b, struct vq_vhu_msg *m);
VQ_INTERNAL int vhu_h_rem_mem_reg(struct vq_vhu_backend *b, struct vq_vhu_msg *m);
VQ_INTERNAL int vhu_h_set_log_base(struct vq_vhu_backend *b, struct vq_vhu_msg *m);

/* backend_iotlb.c */
VQ_INTERNAL void vhu_chan_close(struct vq_vhu_backend *b);
VQ_INTERNAL void vhu_iotlb_miss(void *arg, uint64_t iova, unsigned access);
VQ_INTERNAL int vhu_ring_map_iova(struct vq_vhu_backend *b, unsigned i,
				  struct vq_ring_addr *ra, bool *mapped);
VQ_INTERNAL int vhu_h_set_backend_req_fd(struct vq_vhu_backend *b, struct vq_vhu_msg *m);
VQ_INTERNAL int vhu_h_iotlb_msg(struct vq_vhu_backend *b, struct vq_vhu_msg *m);

/* backend_fd.c: the fds a front-end passes are its own too (it keeps the
 * open file descriptions).  0 if fd is an eventfd, else -EINVAL with what
 * it is in kind ("a pipe", "a socket", "a memfd", ...). */
VQ_INTERNAL int vhu_fd_eventfd(int fd, char *kind, size_t len);
/* 0 if fd is an AF_UNIX stream socket, else -ENOTSOCK with what it is. */
VQ_INTERNAL int vhu_fd_unix_stream(int fd, char *kind, size_t len);
/* Set O_NONBLOCK (on the description the front-end shares).  0 or -errno. */
VQ_INTERNAL int vhu_fd_nonblock(int fd);
/* Signal a front-end's eventfd from the control thread: only when the
 * write cannot wait (poll POLLOUT first), since the front-end may have
 * cleared O_NONBLOCK; a counter that takes no more has one pending. */
VQ_INTERNAL void vhu_fe_signal(int fd);

/* backend_postcopy.c */
VQ_INTERNAL bool vhu_uffd_usable(void);
VQ_INTERNAL int vhu_uffd_register(struct vq_vhu_backend *b, const struct map *mp);
VQ_INTERNAL void vhu_postcopy_end(struct vq_vhu_backend *b);
VQ_INTERNAL int vhu_postcopy_mem_changed(struct vq_vhu_backend *b,
					 const struct vq_vhu_msg *m,
					 struct vq_vhu_msg *echo);
VQ_INTERNAL int vhu_h_postcopy_advise(struct vq_vhu_backend *b, struct vq_vhu_msg *m);
VQ_INTERNAL int vhu_h_postcopy_listen(struct vq_vhu_backend *b, struct vq_vhu_msg *m);
VQ_INTERNAL int vhu_h_postcopy_end(struct vq_vhu_backend *b, struct vq_vhu_msg *m);
VQ_INTERNAL int vhu_h_postcopy_ack(struct vq_vhu_backend *b, struct vq_vhu_msg *m);

#endif
