// SPDX-License-Identifier: MIT
/*
 * The back-end's IOTLB and back-end channel (vhost-user "IOMMU support"):
 * with VQ_F_ACCESS_PLATFORM every address is an IOVA, a miss is asked
 * of the front-end on the channel SET_BACKEND_REQ_FD gave, and IOTLB_MSG
 * updates and invalidates the table the rings translate through.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>

#include "backend_internal.h"
#include "log_internal.h"

/* Forget the channel and what was asked on it.  Under the lock. */
static void chan_reset(struct backend_chan *c, int fd)
{
	vhu_close_fd(&c->fd);
	c->fd = fd;
	memset(c->misses, 0, sizeof(c->misses));
	c->rest_len = 0;
	c->refused_ns = 0;
}

void vhu_chan_close(struct vq_vhu_backend *b)
{
	pthread_mutex_lock(&b->chan.lock);
	chan_reset(&b->chan, -1);
	pthread_mutex_unlock(&b->chan.lock);
}

/* What the channel takes of [p, p+len) now, without waiting: bytes, or
 * -errno (-EAGAIN: none, it is full). */
static ssize_t chan_send(int fd, const uint8_t *p, size_t len)
{
	for (;;) {
		ssize_t w = send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w >= 0)
			return w;
		if (errno != EINTR)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
}

/*
 * Send msg (len bytes) after the rest of one the channel took in part,
 * without waiting: 1 when msg went (all of it, or a part with its rest
 * kept for next time), 0 when the channel is full, -ETIMEDOUT once it has
 * taken nothing for VQ_VHU_CHAN_TIMEOUT_MS since it first refused, or
 * another -errno when it failed.  Under the lock.
 */
static int chan_push(struct backend_chan *c, const uint8_t *msg, size_t len,
		     uint64_t now)
{
	ssize_t w = 0;

	if (c->rest_len) {
		w = chan_send(c->fd, c->rest + c->rest_off, c->rest_len);
		if (w > 0) {
			c->refused_ns = 0;
			c->rest_off += (unsigned)w;
			c->rest_len -= (unsigned)w;
		}
	}
	if (!c->rest_len) {
		w = chan_send(c->fd, msg, len);
		if (w > 0) {
			c->refused_ns = 0;
			memcpy(c->rest, msg + w, len - (size_t)w);
			c->rest_off = 0;
			c->rest_len = (unsigned)(len - (size_t)w);
			return 1;
		}
	}
	if (w < 0 && w != -EAGAIN)
		return (int)w;
	/* full (it may have taken part of a rest first) */
	if (!c->refused_ns)
		c->refused_ns = now;
	return now - c->refused_ns >= VQ_VHU_CHAN_TIMEOUT_MS * 1000000ull ?
	       -ETIMEDOUT : 0;
}

/*
 * A queue (on its own thread) or ring start met an IOVA with no entry: ask
 * the front-end with VHOST_USER_BACKEND_IOTLB_MSG, once per page and access
 * until an update answers or VQ_VHU_MISS_RETRY_NS passes.  The answer comes as
 * an IOTLB_MSG update on the front-end channel (h_iotlb_msg), which kicks
 * the queues.  Nothing here waits: a miss the full channel does not take
 * is not sent now, and asked again when the ring retries (its stall ends
 * after a while); a channel that takes nothing for VQ_VHU_CHAN_TIMEOUT_MS
 * has failed, and so has the connection, which cannot serve its misses.
 */
void vhu_iotlb_miss(void *arg, uint64_t iova, unsigned access)
{
	struct vq_vhu_backend *b = arg;
	struct backend_chan *c = &b->chan;
	struct vq_vhu_msg m = { .request = VQ_VHU_BACKEND_IOTLB_MSG,
				.flags = VQ_VHU_VERSION, .kind = VQ_VHU_P_IOTLB };
	uint8_t buf[VQ_VHU_MSG_MAX];
	uint64_t page = iova / 4096 + 1, now = vhu_now_ns();
	ssize_t len;
	unsigned k;
	int r = 0;

	pthread_mutex_lock(&c->lock);
	for (k = 0; k < VQ_VHU_MISSES; k++)
		if (c->misses[k].page == page && c->misses[k].access == access &&
		    now - c->misses[k].asked_ns < VQ_VHU_MISS_RETRY_NS)
			goto out;
	m.u.iotlb.iova = iova;
	m.u.iotlb.perm = (uint8_t)access;
	m.u.iotlb.type = VQ_VHU_IOTLB_MISS;
	len = vq_vhu_encode_backend_request(&m, buf, sizeof(buf));
	if (c->fd >= 0 && len > 0 && (size_t)len <= sizeof(c->rest))
		r = chan_push(c, buf, (size_t)len, now);
	if (r != 1) {
		c->st.misses_unsent++;
		if (r < 0) {
			c->st.channel_failures++;
			chan_reset(c, -1);
		}
		goto out;
	}
	c->st.misses++;
	c->misses[c->next] = (struct miss){ page, access, now };
	c->next = (c->next + 1) % VQ_VHU_MISSES;
out:
	pthread_mutex_unlock(&c->lock);
	if (r == -ETIMEDOUT)
		vq_vhu_backend_fail(b, r,
				    "vhost-user \"IOMMU support\": the back-end channel took nothing for %u ms: the front-end stopped reading it",
				    VQ_VHU_CHAN_TIMEOUT_MS);
	else if (r < 0)
		vq_vhu_backend_fail(b, r,
				    "vhost-user \"IOMMU support\": the back-end channel failed: %s",
				    strerror(-r));
}

/* An update answered the misses in [iova, iova+size). */
static void iotlb_count(struct vq_vhu_backend *b, uint64_t *counter)
{
	pthread_mutex_lock(&b->chan.lock);
	(*counter)++;
	pthread_mutex_unlock(&b->chan.lock);
}

size_t vq_vhu_backend_iotlb_stats(struct vq_vhu_backend *b,
				  struct vq_vhu_iotlb_stats *s, size_t size)
{
	struct vq_vhu_iotlb_stats st;

	pthread_mutex_lock(&b->chan.lock);
	st = b->chan.st;
	pthread_mutex_unlock(&b->chan.lock);
	return vhu_copy_out(s, size, &st, sizeof(st));
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

/*
 * Wait until every started queue has been seen holding no chain translated
 * before now (vq_dev_iotlb_quiescent), so nothing the front-end just took
 * away is still being read or written; then the replaced tables can go.
 * A queue between bursts holds none, so this is short.  Returns false on a
 * timeout (the tables are kept).
 */
static bool iotlb_quiesce(struct vq_vhu_backend *b)
{
	uint64_t deadline = vhu_now_ns() + VQ_VHU_QUIESCE_NS;
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
		if (vhu_now_ns() > deadline)
			break;
		sched_yield();
	}
	for (unsigned i = 0; i < b->dev.nqueues; i++)
		if (!seen[i])
			vq_log(VQ_LOG_WARNING,
			       "%s: IOTLB invalidation: queue %u still holds buffers after %llu ms; the replaced entries are kept",
			       b->dev.name, i, VQ_VHU_QUIESCE_NS / 1000000ull);
	return false;
}

/* Wake every started queue: one may be waiting on an IOVA just mapped. */
static void kick_all(struct vq_vhu_backend *b)
{
	for (unsigned i = 0; i < b->dev.nqueues; i++)
		if (b->rings[i].vq && b->rings[i].kick_fd >= 0)
			vhu_fe_signal(b->rings[i].kick_fd);
}

/* Suspend every started ring with an area in [iova, iova+size) (size 0 or
 * wrapping: to the end).  A suspended ring's device has let go of it, so
 * what it translated is no longer in use either.  Returns how many. */
static unsigned rings_unmapped(struct vq_vhu_backend *b, uint64_t iova, uint64_t size)
{
	uint64_t last = size && iova + (size - 1) >= iova ? iova + (size - 1) : UINT64_MAX;
	unsigned n = 0;

	for (unsigned i = 0; i < b->dev.nqueues; i++) {
		const struct ring *q = &b->rings[i];
		uint64_t len[3], align[3];
		bool hit = false;

		if (!q->vq || vhu_ring_areas(b, i, len, align))
			continue;
		for (unsigned k = 0; k < 3; k++)
			hit |= q->ua[k] <= last && iova <= q->ua[k] + (len[k] - 1);
		if (hit) {
			vhu_ring_suspend(b, i, true);
			n++;
		}
	}
	return n;
}

/*
 * The ring areas at IOVAs (vhost's vq_iotlb_prefetch): *mapped when all
 * three are mapped here in one piece each, not when a miss was sent and
 * the ring waits for the update; -errno when the front-end's IOTLB refuses
 * them.  A packed ring's descriptors are written too (used descriptors).
 */
int vhu_ring_map_iova(struct vq_vhu_backend *b, unsigned i,
		      struct vq_ring_addr *ra, bool *mapped)
{
	const struct ring *q = &b->rings[i];
	bool pk = vhu_packed(b);
	const unsigned access[3] = {
		pk ? VQ_ACCESS_RW : VQ_ACCESS_RO, VQ_ACCESS_RO,
		pk ? VQ_ACCESS_RW : VQ_ACCESS_WO,
	};
	void **out[3] = { &ra->desc, &ra->driver, &ra->device };
	uint64_t size[3], align[3];
	int r = vhu_ring_areas(b, i, size, align);

	*mapped = r == 0;
	for (unsigned k = 0; !r && k < 3; k++) {
		r = vq_mem_map_contig(b->mem, q->ua[k], size[k], access[k], out[k]);
		if (r == -EAGAIN) {
			*mapped = false;
			r = 0;
		} else if (r) {
			return vhu_berr(b, r,
					"vhost-user \"IOMMU support\": queue %u: %s at IOVA 0x%llx (%llu bytes) is not mapped in one piece with access %u",
					i, vhu_area_name(b, k),
					(unsigned long long)q->ua[k],
					(unsigned long long)size[k], access[k]);
		}
	}
	return r;
}

/* The back-end channel is a UNIX stream socket like the front-end's own
 * ("Back-end communication"); anything else is refused.  Its sends never
 * wait (vhu_iotlb_miss), whatever the front-end sets on it. */
int vhu_h_set_backend_req_fd(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	char kind[80];
	int fd = m->fds[0];
	int r = vhu_fd_unix_stream(fd, kind, sizeof(kind));

	if (r == -ENOTSOCK)
		return vhu_berr(b, r,
				"VHOST_USER_SET_BACKEND_REQ_FD: the fd is %s, not an AF_UNIX stream socket",
				kind);
	if (r)
		return vhu_berr(b, r, "VHOST_USER_SET_BACKEND_REQ_FD: the fd cannot be used: %s",
				strerror(-r));
	m->nfds = 0;
	pthread_mutex_lock(&b->chan.lock);
	chan_reset(&b->chan, fd);
	pthread_mutex_unlock(&b->chan.lock);
	return VHU_DONE;
}

/* VHOST_USER_IOTLB_MSG: an update (the answer to a miss, usually) or an
 * invalidation.  A refused one fails the REPLY_ACK; the connection stays. */
int vhu_h_iotlb_msg(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	uint64_t iova = m->u.iotlb.iova, size = m->u.iotlb.size;
	int r;

	if (!vhu_iommu(b))
		return vhu_berr(b, -EPROTO,
				"vhost-user \"IOMMU support\": VHOST_USER_IOTLB_MSG without VIRTIO_F_ACCESS_PLATFORM negotiated (features 0x%llx)",
				(unsigned long long)b->features);
	if (m->u.iotlb.type == VQ_VHU_IOTLB_INVALIDATE) {
		iotlb_count(b, &b->chan.st.invalidations);
		r = vq_mem_iotlb_invalidate(b->mem, iova, size);
		if (r < 0) {
			iotlb_count(b, &b->chan.st.refused);
			return vhu_refuse(b, "vhost-user \"IOMMU support\": invalidation of 0x%llx bytes at IOVA 0x%llx: %s",
					  (unsigned long long)size,
					  (unsigned long long)iova, strerror(-r));
		}
		if (r == 0)
			return VHU_DONE;
		/* A ring reads its areas through the mapping made when it
		 * started: one whose areas lost their entries stops (keeping
		 * its place) and starts again once they are mapped anew, as
		 * DPDK's vring_invalidate. */
		rings_unmapped(b, iova, size);
		if (!iotlb_quiesce(b))
			iotlb_count(b, &b->chan.st.quiesce_timeouts);
		return vhu_start_all(b);    /* a stopped ring asks for its areas again */
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
		return vhu_refuse(b, "vhost-user \"IOMMU support\": update of 0x%llx bytes at IOVA 0x%llx to user 0x%llx: %s",
				  (unsigned long long)size, (unsigned long long)iova,
				  (unsigned long long)m->u.iotlb.uaddr,
				  r == -EINVAL ? "its user range is not inside one memory region" :
				  strerror(-r));
	}
	if (vq_mem_iotlb_retired(b->mem) > VQ_VHU_IOTLB_RETIRED_MAX)
		iotlb_quiesce(b);
	misses_answered(b, iova, size);
	kick_all(b);
	/* a ring may have been waiting for its own areas */
	return vhu_start_all(b);
}
