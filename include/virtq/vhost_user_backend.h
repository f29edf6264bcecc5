/* SPDX-License-Identifier: MIT */
/*
 * virtq/vhost_user_backend.h - the device side of vhost-user.
 *
 * A device type describes itself (features, queue count, config space) and
 * supplies queue callbacks; the library does the protocol: the socket (server
 * or client with reconnect), one front-end at a time, the memory table
 * (mmap'ed from the passed fds, checked against the fd's size, hugetlbfs
 * aligned), ring setup and state, and a clean teardown on disconnect after
 * which the next connection is served.
 *
 * No event loop of its own: poll vq_vhu_backend_fd() for readability and
 * call vq_vhu_backend_process().  vq_vhu_backend_serve() is a small blocking
 * loop for tools whose queues run on their own threads.
 *
 * One thread uses a backend handle; the device callbacks are called on it.
 * queue_stop must not return while the device still touches the queue: the
 * library frees the ring and may unmap memory right after.
 *
 * The library says what has no caller to return to through the log
 * callback (virtq/log.h); it never prints.
 *
 * Growth (docs/DESIGN.md, "ABI"): struct vq_vhu_device and its ops table end
 * in reserved words that must be zero (vq_vhu_backend_new refuses others
 * with -EINVAL), so a field added later takes a reserved word and its zero
 * means the old behaviour.  The library's own structs grow at their end:
 * struct vq_vhu_queue is handed to the device as a pointer to library
 * memory, and the stats are copied through calls that take the caller's
 * size.
 */
#ifndef VIRTQ_VHOST_USER_BACKEND_H
#define VIRTQ_VHOST_USER_BACKEND_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <virtq/ring.h>
#include <virtq/unix.h>
#include <virtq/vhost_user.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A ring handed to the device when it starts (library memory, valid during
 * the call; new fields go at the end). */
struct vq_vhu_queue {
	unsigned index;
	struct vq_dev *vq;      /* valid until queue_stop(index) */
	int kick_fd;            /* -1: the front-end asked for polling */
	int call_fd;            /* -1: do not signal */
	int err_fd;             /* -1: none; signal it when the queue breaks */
};

struct vq_vhu_device_ops {
	/* A ring is ready (memory, size, addresses, kick, features) and
	 * enabled.  Called again, after queue_stop, when its kick, call or
	 * err fd changes.  Non-zero closes the connection. */
	int (*queue_start)(void *opaque, const struct vq_vhu_queue *q);
	/* The ring stops: flush what was filled, stop touching it.  With
	 * resumes, the front-end did not stop it (a memory table, ring
	 * address, IOTLB or fd change): it starts again at its place when
	 * the change is done, so the device may keep what serves it beside
	 * the ring (a TAP queue, connections).  Without (GET_VRING_BASE,
	 * disable, reset, disconnect) it is gone; a ring paused before gets
	 * this call too, with resumes false, to let go of the rest. */
	void (*queue_stop)(void *opaque, unsigned index, bool resumes);
	/* Config space (VHOST_USER_PROTOCOL_F_CONFIG is offered only when
	 * get_config is set): read len bytes at off (bounds checked). */
	void (*get_config)(void *opaque, uint32_t off, void *buf, uint32_t len);
	/* Write config; flags 1 = live migration.  Returns 0 or -errno (the
	 * front-end sees a failed REPLY_ACK; the connection stays).  NULL:
	 * the config space is read-only. */
	int (*set_config)(void *opaque, uint32_t off, const void *buf,
			  uint32_t len, uint32_t flags);
	/* The front-end went away or sent RESET_DEVICE: forget device state. */
	void (*reset)(void *opaque);
	/* A net device after a live migration of a guest that cannot announce
	 * itself (no VQ_NET_F_GUEST_ANNOUNCE): tell the network that mac
	 * moved here, as QEMU would with a RARP broadcast.  PROTOCOL_F_RARP
	 * is offered only when this is set.  0, or -errno (a failed
	 * REPLY_ACK; the connection stays). */
	int (*send_rarp)(void *opaque, const uint8_t mac[6]);
	/* A net device's MTU, as the front-end tells the guest (QEMU's
	 * host_mtu, with VQ_NET_F_MTU): 68-65535, checked before.
	 * PROTOCOL_F_MTU is offered only when this is set.  0, or -errno
	 * when the device cannot carry it (a failed REPLY_ACK; QEMU then
	 * does not start the device). */
	int (*set_mtu)(void *opaque, uint16_t mtu);
	/* Must be NULL: callbacks a later version adds. */
	void *reserved[4];
};

struct vq_vhu_device {
	const char *name;               /* for messages */
	/* Virtio features offered: device bits (0-23, 50-63) and the ring
	 * bits of VQ_RING_FEATURES the device supports.  VERSION_1 is
	 * required. */
	uint64_t features;
	unsigned nqueues;               /* 1..VQ_VHU_MAX_QUEUES */
	uint32_t config_len;            /* bytes of config space */
	const struct vq_vhu_device_ops *ops;
	void *opaque;
	/* Must be zero: fields a later version adds. */
	uint64_t reserved[4];
};

/* Protocol features the backend library implements. */
#define VQ_VHU_BACKEND_PROTOCOL_FEATURES                                \
	(VQ_BIT(VQ_VHU_PROTOCOL_F_MQ) | VQ_BIT(VQ_VHU_PROTOCOL_F_REPLY_ACK) | \
	 VQ_BIT(VQ_VHU_PROTOCOL_F_LOG_SHMFD) |                            \
	 VQ_BIT(VQ_VHU_PROTOCOL_F_RARP) |                                 \
	 VQ_BIT(VQ_VHU_PROTOCOL_F_MTU) |                                  \
	 VQ_BIT(VQ_VHU_PROTOCOL_F_CONFIG) |                               \
	 VQ_BIT(VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS) |                  \
	 VQ_BIT(VQ_VHU_PROTOCOL_F_RESET_DEVICE) |                         \
	 VQ_BIT(VQ_VHU_PROTOCOL_F_STATUS) |                               \
	 VQ_BIT(VQ_VHU_PROTOCOL_F_BACKEND_REQ) |                          \
	 VQ_BIT(VQ_VHU_PROTOCOL_F_PAGEFAULT))

struct vq_vhu_backend;

/* -EINVAL for a bad device description (a reserved word of it or of its ops
 * not zero included), -ENOMEM. */
int vq_vhu_backend_new(const struct vq_vhu_device *dev,
		       struct vq_vhu_backend **out);
/* Tear down any connection, close sockets, and remove the socket we
 * created if it is still ours (same device and inode). */
void vq_vhu_backend_free(struct vq_vhu_backend *b);

/*
 * Listen on a UNIX socket at path, created with mode (0: 0600).  A stale
 * socket at path is replaced; anything that is not a socket (a file, a
 * directory, a symlink) is refused with -EEXIST, a live socket with
 * -EADDRINUSE.  0, those, -EBUSY (the backend has its socket already:
 * listening, adopted or connecting), or vq_unix_listener_new's -errno.
 */
int vq_vhu_backend_listen(struct vq_vhu_backend *b, const char *path,
			  unsigned mode);
/* Use an inherited socket (--fd): a listening one is accepted on, a
 * connected one is the connection.  The backend owns fd afterwards.  0,
 * -EBUSY (as listen), -ENOTSOCK (not a UNIX stream socket) or getsockopt's
 * -errno; on an error fd stays the caller's. */
int vq_vhu_backend_adopt_fd(struct vq_vhu_backend *b, int fd);
/* Client mode: connect to path now and, after each disconnect or failed
 * attempt, again every reconnect_ms (0: never reconnect).  0, -EBUSY (as
 * listen), -ENOMEM, or the first attempt's -errno (-ENOENT,
 * -ECONNREFUSED, ...), after which it still tries again. */
int vq_vhu_backend_connect(struct vq_vhu_backend *b, const char *path,
			   unsigned reconnect_ms);

/* The fd to poll for readability (the connection, or the listening
 * socket), or -1 (client mode, waiting to reconnect). */
int vq_vhu_backend_fd(const struct vq_vhu_backend *b);
/* Milliseconds until process() should be called even without an event
 * (client-mode reconnect), or -1. */
int vq_vhu_backend_timeout_ms(const struct vq_vhu_backend *b);

/*
 * Do what is pending without blocking on an idle socket: accept a
 * connection, (re)connect, or read and handle one message (a message whose
 * header has arrived is read whole, waiting at most the receive timeout).
 * Returns 1 if something was done, 0 if nothing was pending, or -errno when
 * the connection was closed (the front-end left: -ECONNRESET; a bad message
 * or a failed request: its error, with vq_vhu_backend_error_msg() saying
 * why).  After an error the backend is ready for the next connection.
 */
int vq_vhu_backend_process(struct vq_vhu_backend *b);

/*
 * Close the current connection for an error found off the control thread
 * (a queue thread, a watchdog; not a signal handler): the connection's
 * socket is shut down, so whatever the control thread polls it with wakes,
 * and its next vq_vhu_backend_process() closes the connection, returning
 * err (< 0; anything else means -EIO) with vq_vhu_backend_error_msg()
 * saying fmt.  The first failure of a connection wins; without a
 * connection it does nothing.  Safe from any thread.
 */
void vq_vhu_backend_fail(struct vq_vhu_backend *b, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Block serving the control socket until *stop is set (by a signal) or, if
 * once is true, until the first connection ends.  Returns 0 or -errno:
 * poll's, or -ENOTCONN when nothing is left to serve (no socket, no
 * reconnect due).  A connection closed for an error does not end it. */
int vq_vhu_backend_serve(struct vq_vhu_backend *b,
			 const volatile sig_atomic_t *stop, bool once);

bool vq_vhu_backend_connected(const struct vq_vhu_backend *b);
/* The negotiated virtio and protocol features of the current connection. */
uint64_t vq_vhu_backend_features(const struct vq_vhu_backend *b);
uint64_t vq_vhu_backend_protocol_features(const struct vq_vhu_backend *b);
/* Why the last connection was closed ("" if it was not for an error). */
const char *vq_vhu_backend_error_msg(const struct vq_vhu_backend *b);
/* IOTLB traffic (a guest behind a vIOMMU), over all connections so far.
 * New counters go at the end. */
struct vq_vhu_iotlb_stats {
	uint64_t misses;                /* asked of the front-end */
	uint64_t misses_unsent;         /* no back-end channel, it was full
					 * (asked again), or it failed */
	uint64_t updates;               /* entries the front-end gave */
	uint64_t invalidations;         /* invalidation messages */
	uint64_t refused;               /* updates or invalidations refused */
	uint64_t quiesce_timeouts;      /* invalidations a queue held up */
	uint64_t channel_failures;      /* back-end channels closed: they took
					 * nothing for 1 s, or failed; each
					 * closes its connection */
};
/* Copy the counters into s, of size bytes (sizeof *s as the caller was
 * built): a smaller struct gets its fields, a larger one zeroes past the
 * library's.  Returns how many bytes the library filled.  Safe from any
 * thread. */
size_t vq_vhu_backend_iotlb_stats(struct vq_vhu_backend *b,
				  struct vq_vhu_iotlb_stats *s, size_t size);

/* Postcopy migrations (PROTOCOL_F_PAGEFAULT, offered where the process
 * may open a userfaultfd), over all connections so far.  New counters go
 * at the end. */
struct vq_vhu_postcopy_stats {
	uint64_t advises;               /* userfaultfds handed to the front-end */
	uint64_t listens;               /* POSTCOPY_LISTENs */
	uint64_t regions;               /* mappings registered with it */
	uint64_t acks;                  /* "our addresses are known" acks */
	uint64_t ends;                  /* POSTCOPY_ENDs */
};
/* As vq_vhu_backend_iotlb_stats. */
size_t vq_vhu_backend_postcopy_stats(struct vq_vhu_backend *b,
				     struct vq_vhu_postcopy_stats *s, size_t size);

/* Milliseconds a half-received message may stall before the connection
 * is dropped (default 5000; 0 is taken as 1); applies from the next
 * connection. */
void vq_vhu_backend_set_recv_timeout(struct vq_vhu_backend *b, unsigned ms);

#ifdef __cplusplus
}
#endif
#endif
