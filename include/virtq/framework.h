/* SPDX-License-Identifier: MIT */
/*
 * virtq/framework.h - the device framework: the worker threads that run a
 * vhost-user device's rings, and the rings' lifecycle.
 *
 * A device describes itself (features, rings, config space) and supplies
 * callbacks; the framework owns the rest.  struct vq_fw is a set of
 * persistent worker threads, each running one runtime loop
 * (virtq/runtime.h), optionally pinned.  A device made on it
 * (vq_fw_dev_new) gets a vhost-user back-end of its own, and its rings go
 * in groups (a queue pair) to the workers: group g of a device on worker
 * (first + g) % threads, first chosen per device so that several devices
 * spread.  When the front-end starts, stops or pauses a ring (a memory
 * table, address, IOTLB or fd change), the control thread sends the ring's
 * worker a message and waits for its answer: the device's callbacks for a
 * ring, its turns and its fds all run on that worker, so a device needs
 * no locks of its own, and no thread is ever torn down.  Per-ring
 * counters live in the framework and outlast the rings.
 *
 * No thread waits forever for the front-end: a worker that makes no
 * progress for stall_ms (a page the front-end never serves, an fd it made
 * blocking) fails that front-end's connection, and the control thread
 * then releases the worker (postcopy faults, the ring's call fds) before
 * it stops the rings.
 *
 * Growth (docs/DESIGN.md, "ABI"): every struct the caller fills ends in
 * reserved words that must be zero.
 */
#ifndef VIRTQ_FRAMEWORK_H
#define VIRTQ_FRAMEWORK_H

#include <stdbool.h>
#include <stdint.h>

#include <virtq/runtime.h>
#include <virtq/vhost_user_backend.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most worker threads a framework runs. */
#define VQ_FW_MAX_THREADS 64u
/* How long a worker may make no progress before its front-end's
 * connection fails (vq_fw_config.stall_ms 0). */
#define VQ_FW_STALL_MS 10000u

struct vq_fw_config {
	unsigned threads;               /* 1..VQ_FW_MAX_THREADS; 0: 1 */
	/* Worker k runs on CPU cpus[k % ncpus] from its start (unpinned,
	 * with a warning, if the process may not use it); ncpus 0: not
	 * pinned. */
	const unsigned *cpus;
	unsigned ncpus;
	uint64_t busy_poll_ns;          /* vq_rt_loop_config's */
	uint64_t busy_poll_yield_ns;
	unsigned stall_ms;              /* 0: VQ_FW_STALL_MS */
	uint64_t busy_poll_max_ns;      /* vq_rt_loop_config's */
	/* Must be zero: fields a later version adds. */
	uint64_t reserved[3];
};

struct vq_fw;
struct vq_fw_dev;
struct vq_fw_ring;

/* -EINVAL (a bad config), -ENOMEM, or -errno from starting a thread. */
int vq_fw_new(const struct vq_fw_config *c, struct vq_fw **out);
/* Stop the workers; every device must be freed first. */
void vq_fw_free(struct vq_fw *fw);

/* How the worker's loop serves a ring that starts: ring_start fills it. */
struct vq_fw_turn {
	/* The ring's turn (vq_rt_process_fn; its q is the ring's queue on
	 * the loop).  It returns -errno when its ring broke: the framework
	 * then takes it off the loop (vq_fw_ring_broken).  NULL: the ring is
	 * not put on the loop at all (nothing ever serves it). */
	vq_rt_process_fn process;
	void *arg;
	/* Ring calls for the loop (vq_rt_queue_config's ops and ring);
	 * NULL: the ring's own. */
	const struct vq_rt_ring_ops *ops;
	void *ring;
	/* Must stay zero. */
	uint64_t reserved[2];
};

struct vq_fw_device_ops {
	/* On the ring's worker: the ring is ready and enabled.  resumed: it
	 * paused (the front-end's memory, addresses, IOTLB or fds changed)
	 * and comes back at its place, so what the device kept beside it is
	 * still good.  Fill t.  0, or -errno: the ring stays stopped, and
	 * a ring that fails a fresh start leaves nothing behind (the
	 * connection then closes, as the back-end does for any failed
	 * start). */
	int (*ring_start)(void *opaque, struct vq_fw_ring *r, bool resumed,
			  struct vq_fw_turn *t);
	/* On the ring's worker: the ring stops.  Flush what was filled (the
	 * ring is still on the loop: vq_fw_ring_signal works), then stop
	 * touching it.  paused: it resumes later (ring_start with resumed).
	 * A paused ring that then stops for good gets ring_stop(paused
	 * false) again, with vq_fw_ring_vq() NULL: let go of the rest. */
	void (*ring_stop)(void *opaque, struct vq_fw_ring *r, bool paused);
	/* On each group's worker: the front-end went away or reset the
	 * device (every ring stopped before). */
	void (*reset)(void *opaque, unsigned group);
	/* On the control thread, as struct vq_vhu_device_ops has them
	 * (NULL: the protocol feature is not offered). */
	void (*get_config)(void *opaque, uint32_t off, void *buf, uint32_t len);
	int (*set_config)(void *opaque, uint32_t off, const void *buf,
			  uint32_t len, uint32_t flags);
	int (*send_rarp)(void *opaque, const uint8_t mac[6]);
	int (*set_mtu)(void *opaque, uint16_t mtu);
	/* Must be NULL: callbacks a later version adds. */
	void *reserved[4];
};

struct vq_fw_device {
	const char *name;               /* for messages */
	uint64_t features;              /* as struct vq_vhu_device */
	unsigned nqueues;
	uint32_t config_len;
	/* Rings per group (0: 2, a queue pair); the group's rings share a
	 * worker.  A device whose rings all work together (vsock) makes
	 * them one group. */
	unsigned group_size;
	const struct vq_fw_device_ops *ops;
	void *opaque;
	/* Must be zero: fields a later version adds. */
	uint64_t reserved[4];
};

/*
 * A device on fw's workers, with a vhost-user back-end of its own (listen,
 * connect or adopt through vq_fw_dev_backend(), serve it on the control
 * thread with vq_vhu_backend_process).  -EINVAL, -ENOMEM.
 */
int vq_fw_dev_new(struct vq_fw *fw, const struct vq_fw_device *dev,
		  struct vq_fw_dev **out);
/* Free the back-end (its connection closes: every ring stops, the device
 * is reset), then the device's rings. */
void vq_fw_dev_free(struct vq_fw_dev *d);
struct vq_vhu_backend *vq_fw_dev_backend(const struct vq_fw_dev *d);
unsigned vq_fw_dev_groups(const struct vq_fw_dev *d);

/*
 * Run fn(arg) on group's worker, between two rounds of its loop, and wait
 * for it: the device's way to reach what lives there (counters, fds of its
 * own on the loop) from the control thread.  From the group's worker it
 * runs at once.  0, -EINVAL (no such group, or fn NULL), -EDEADLK (from
 * another worker: workers never wait for each other).
 */
int vq_fw_dev_call(struct vq_fw_dev *d, unsigned group, void (*fn)(void *arg),
		   void *arg);

/* ---- For the ring's worker (the device's callbacks and turns) ---- */

/* The group's worker loop: a device's fds of its own (vq_rt_loop_add_fd);
 * NULL for no such group. */
struct vq_rt_loop *vq_fw_dev_loop(const struct vq_fw_dev *d, unsigned group);
/* Ring index of the device (lives as long as the device), or NULL. */
struct vq_fw_ring *vq_fw_dev_ring(const struct vq_fw_dev *d, unsigned index);
unsigned vq_fw_ring_index(const struct vq_fw_ring *r);
/* The ring while it runs (NULL when stopped or paused). */
struct vq_dev *vq_fw_ring_vq(const struct vq_fw_ring *r);
bool vq_fw_ring_running(const struct vq_fw_ring *r);
/* After a flush outside the ring's own turn (another ring's, an fd's, or
 * the ring's own ring_start): call the driver if the ring says so
 * (vq_rt_queue_signal).  1, 0, or -errno. */
int vq_fw_ring_signal(struct vq_fw_ring *r);
/* Work for the ring its ring does not show (vq_rt_queue_wake). */
void vq_fw_ring_wake(struct vq_fw_ring *r);
/* Is the ring on the loop and active (vq_rt_queue_active)? */
bool vq_fw_ring_active(const struct vq_fw_ring *r);
/*
 * The ring broke (a ring rule, vq_dev_error saying which, or the device's
 * own, vq_dev_fail): said once through the log, its err fd signalled, and
 * taken off the loop until the front-end starts it again.  The device's
 * ring_stop still comes.
 */
void vq_fw_ring_broken(struct vq_fw_ring *r);
bool vq_fw_ring_is_broken(const struct vq_fw_ring *r);
/* The ring's loop counters over every start since the device was made
 * (framework memory, valid until the next call for this ring). */
const struct vq_rt_counters *vq_fw_ring_counters(struct vq_fw_ring *r);

#ifdef __cplusplus
}
#endif
#endif
