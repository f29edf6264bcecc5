// SPDX-License-Identifier: MIT
/*
 * The vhost-user back-end: the socket, one front-end at a time, and the
 * dispatch of its messages to the handlers (backend_ring.c, backend_mem.c,
 * backend_iotlb.c, backend_postcopy.c; backend_internal.h says what they
 * share).  Every message has passed the codec's table checks, and the
 * protocol feature it needs has been checked here, before a handler sees
 * it; handlers check what needs connection state (order, features, the
 * memory map).  A handler error closes the connection and tears
 * everything down; the backend then serves the next one.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "backend_internal.h"
#include "log_internal.h"
#include "unix.h"

int vhu_berr(struct vq_vhu_backend *b, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(b->errmsg, sizeof(b->errmsg), fmt, ap);
	va_end(ap);
	return err;
}

int vhu_refuse(struct vq_vhu_backend *b, const char *fmt, ...)
{
	char msg[sizeof(b->errmsg)];
	va_list ap;

	if (vq_log_on(VQ_LOG_WARNING)) {
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		vq_log(VQ_LOG_WARNING, "%s: refused: %s", b->dev.name, msg);
	}
	return VHU_REFUSED;
}

int vhu_reply_fds(struct vq_vhu_backend *b, const struct vq_vhu_msg *req,
		  struct vq_vhu_msg *rep, const int *fds, unsigned nfds)
{
	int r;

	rep->request = req->request;
	rep->flags = VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY;
	/* bounded like a request's rest: a front-end that reads no reply
	 * cannot hold the control thread longer */
	r = vhu_send(b->conn_fd, rep, fds, nfds, b->recv_timeout_ms);
	if (r)
		return vhu_berr(b, r,
				"vhost-user \"Communication\": sending the reply to %s failed: %s",
				vq_vhu_request_name(req->request), strerror(-r));
	return VHU_DONE;
}

int vhu_reply(struct vq_vhu_backend *b, const struct vq_vhu_msg *req,
	      struct vq_vhu_msg *rep)
{
	return vhu_reply_fds(b, req, rep, NULL, 0);
}

int vhu_reply_u64(struct vq_vhu_backend *b, const struct vq_vhu_msg *req,
		  uint64_t v)
{
	struct vq_vhu_msg rep = { .kind = VQ_VHU_P_U64, .u.u64 = v };

	return vhu_reply(b, req, &rep);
}

static void conn_reset_state(struct vq_vhu_backend *b)
{
	/* first: a queue thread blocked on a fault must wake to be joined */
	vhu_postcopy_end(b);
	for (unsigned i = 0; i < b->dev.nqueues; i++)
		vhu_ring_reset(b, i);
	vhu_unmap_all(b);
	vhu_log_unmap(b);
	vq_mem_iotlb_disable(b->mem);
	vhu_chan_close(b);
	b->features = 0;
	b->features_set = false;
	b->protocol = 0;
	b->status = 0;
}

/* r: why, for the log: -errno (vhu_berr said why), -ECONNRESET (the
 * front-end hung up) or 0 (the back-end is freed). */
static void conn_close(struct vq_vhu_backend *b, int r)
{
	if (r == 0)
		vq_log(VQ_LOG_INFO, "%s: closing the connection: the back-end is freed",
		       b->dev.name);
	else if (r == -ECONNRESET && b->conn_said)
		vq_log(VQ_LOG_INFO, "%s: the front-end closed the connection",
		       b->dev.name);
	else if (r == -ECONNRESET)
		/* another instance asking whether we are alive, most likely */
		vq_log(VQ_LOG_DEBUG, "%s: a connection closed before its first message",
		       b->dev.name);
	else
		vq_log(VQ_LOG_ERR, "%s: connection closed: %s", b->dev.name,
		       b->errmsg);
	if (r == 0 || r == -ECONNRESET)
		b->errmsg[0] = '\0';   /* not closed for an error */
	conn_reset_state(b);
	if (b->dev.ops->reset)
		b->dev.ops->reset(b->dev.opaque);
	pthread_mutex_lock(&b->fail.lock);
	vhu_close_fd(&b->conn_fd);
	__atomic_store_n(&b->fail.err, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&b->fail.lock);
	if (b->client_path && b->reconnect_ms)
		b->next_connect_ns = vhu_now_ns() + b->reconnect_ms * 1000000ull;
}

/* The socket's own flags and timeouts are left as they are: its I/O
 * never waits but in poll(), up to our timeout (vhu_send, vhu_recv), and
 * a front-end sharing the socket (an adopted --fd) could change them. */
static void set_conn(struct vq_vhu_backend *b, int fd)
{
	pthread_mutex_lock(&b->fail.lock);
	b->conn_fd = fd;
	pthread_mutex_unlock(&b->fail.lock);
	b->errmsg[0] = '\0';
	b->conn_said = false;
}

static int h_get_features(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	return vhu_reply_u64(b, m, b->offered);
}

static int h_set_features(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	uint64_t f = m->u.u64;

	if (f & ~b->offered)
		return vhu_berr(b, -EINVAL,
				"VHOST_USER_SET_FEATURES: bits 0x%llx of 0x%llx were not offered (0x%llx)",
				(unsigned long long)(f & ~b->offered),
				(unsigned long long)f, (unsigned long long)b->offered);
	if (!(f & VQ_BIT(VQ_F_VERSION_1)))
		return vhu_berr(b, -EINVAL,
				"VHOST_USER_SET_FEATURES: 0x%llx lacks VIRTIO_F_VERSION_1 (bit 32): no legacy devices",
				(unsigned long long)f);
	for (unsigned i = 0; i < b->dev.nqueues; i++)
		if (b->rings[i].vq && vhu_ring_features(f) != vhu_ring_features(b->features))
			return vhu_berr(b, -EBUSY,
					"vhost-user \"Ring states\": VHOST_USER_SET_FEATURES changes the ring features from 0x%llx to 0x%llx while queue %u runs",
					(unsigned long long)vhu_ring_features(b->features),
					(unsigned long long)vhu_ring_features(f), i);
	if ((f ^ b->features) & VQ_BIT(VQ_F_ACCESS_PLATFORM)) {
		int r;

		for (unsigned i = 0; i < b->dev.nqueues; i++)
			if (b->rings[i].vq)
				return vhu_berr(b, -EBUSY,
						"vhost-user \"IOMMU support\": VHOST_USER_SET_FEATURES turns VIRTIO_F_ACCESS_PLATFORM %s while queue %u runs",
						f & VQ_BIT(VQ_F_ACCESS_PLATFORM) ? "on" : "off", i);
		if (!(f & VQ_BIT(VQ_F_ACCESS_PLATFORM)))
			vq_mem_iotlb_disable(b->mem);
		else if ((r = vq_mem_iotlb_enable(b->mem, vhu_iotlb_miss, b)))
			return vhu_berr(b, r, "vhost-user \"IOMMU support\": no memory for the IOTLB");
	}
	/* Migration starts or ends while the rings run: restart them with
	 * the log or without it. */
	if ((f ^ b->features) & VQ_BIT(VQ_VHU_F_LOG_ALL))
		vhu_suspend_all(b);
	b->features = f;
	b->features_set = true;
	/* spec, "Ring states": without protocol features rings are enabled */
	if (!(f & VQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES)))
		for (unsigned i = 0; i < b->dev.nqueues; i++)
			b->rings[i].enabled = true;
	return vhu_start_all(b);
}

static int h_get_protocol_features(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	return vhu_reply_u64(b, m, b->proto_offered);
}

static int h_set_protocol_features(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	if (m->u.u64 & ~b->proto_offered)
		return vhu_berr(b, -EINVAL,
				"VHOST_USER_SET_PROTOCOL_FEATURES: bits 0x%llx of 0x%llx were not offered (0x%llx)",
				(unsigned long long)(m->u.u64 & ~b->proto_offered),
				(unsigned long long)m->u.u64,
				(unsigned long long)b->proto_offered);
	b->protocol = m->u.u64;
	return VHU_DONE;
}

/* SET_OWNER (we serve one front-end at a time anyway) and SET_LOG_FD
 * (optional, spec: we never signal the log, so it goes unused). */
static int h_nothing_to_do(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	return VHU_DONE;
}

/* Deprecated; the spec allows "disable all rings". */
static int h_reset_owner(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	for (unsigned i = 0; i < b->dev.nqueues; i++) {
		b->rings[i].enabled = false;
		vhu_dev_stop(b, i, false);
	}
	return VHU_DONE;
}

static int h_get_queue_num(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	return vhu_reply_u64(b, m, b->dev.nqueues);
}

static int h_get_max_mem_slots(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	return vhu_reply_u64(b, m, VQ_MEM_MAX_REGIONS);
}

static int h_get_config(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	struct vq_vhu_msg rep = { .kind = VQ_VHU_P_CONFIG };
	uint32_t off = m->u.config.offset, len = m->u.config.size;

	if (off > b->dev.config_len || len > b->dev.config_len - off) {
		/* an empty payload reports the error (spec) */
		rep.kind = VQ_VHU_P_NONE;
		return vhu_reply(b, m, &rep);
	}
	rep.u.config = m->u.config;
	b->dev.ops->get_config(b->dev.opaque, off, rep.u.config.data, len);
	return vhu_reply(b, m, &rep);
}

static int h_set_config(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	uint32_t off = m->u.config.offset, len = m->u.config.size;
	int r;

	if (off > b->dev.config_len || len > b->dev.config_len - off)
		return vhu_refuse(b, "VHOST_USER_SET_CONFIG: %u bytes at offset %u run past the config space of %u bytes",
				  len, off, b->dev.config_len);
	if (!b->dev.ops->set_config)
		return vhu_refuse(b, "VHOST_USER_SET_CONFIG: the config space is read-only");
	r = b->dev.ops->set_config(b->dev.opaque, off, m->u.config.data, len,
				   m->u.config.flags);
	if (r)
		return vhu_refuse(b, "VHOST_USER_SET_CONFIG: the device refused %u bytes at offset %u: %s",
				  len, off, strerror(-r));
	return VHU_DONE;
}

static int h_reset_device(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	for (unsigned i = 0; i < b->dev.nqueues; i++)
		vhu_ring_reset(b, i);
	/* features are gone, ACCESS_PLATFORM with them */
	vq_mem_iotlb_disable(b->mem);
	b->features = 0;
	b->features_set = false;
	b->status = 0;
	if (b->dev.ops->reset)
		b->dev.ops->reset(b->dev.opaque);
	return VHU_DONE;
}

static int h_send_rarp(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	uint8_t mac[6];
	int r;

	/* QEMU copies the MAC's bytes into the payload and the codec copied
	 * the payload into the u64 as it was (vhost-user numbers are native):
	 * its first six bytes in memory are the MAC, whatever the byte order */
	memcpy(mac, &m->u.u64, sizeof(mac));
	r = b->dev.ops->send_rarp(b->dev.opaque, mac);
	if (r)
		return vhu_refuse(b, "VHOST_USER_SEND_RARP: the device could not announce %02x:%02x:%02x:%02x:%02x:%02x: %s",
				  mac[0], mac[1], mac[2], mac[3], mac[4], mac[5],
				  strerror(-r));
	return VHU_DONE;
}

/* "VHOST_USER_NET_SET_MTU": the MTU the guest is told (5.1.4.1: 68 to
 * 65535); an MTU the device cannot carry fails the REPLY_ACK. */
static int h_net_set_mtu(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	int r;

	if (m->u.u64 < 68 || m->u.u64 > 65535)
		return vhu_refuse(b, "5.1.4.1: VHOST_USER_NET_SET_MTU: %llu is not an MTU (68 to 65535)",
				  (unsigned long long)m->u.u64);
	r = b->dev.ops->set_mtu(b->dev.opaque, (uint16_t)m->u.u64);
	if (r)
		return vhu_refuse(b, "VHOST_USER_NET_SET_MTU: the device cannot carry an MTU of %llu: %s",
				  (unsigned long long)m->u.u64, strerror(-r));
	return VHU_DONE;
}

static int h_set_status(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	b->status = (uint8_t)m->u.u64;
	return VHU_DONE;
}

static int h_get_status(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	return vhu_reply_u64(b, m, b->status);
}

typedef int (*vhu_handler)(struct vq_vhu_backend *b, struct vq_vhu_msg *m);

/* No protocol feature gates the request. */
#define UNGATED (-1)

/* Each request's handler and the protocol feature it needs (vhost-user.rst
 * "Front-end message types": "Only legal if ... negotiated"), checked in
 * dispatch() before the handler runs. */
static const struct {
	vhu_handler fn;
	int8_t needs;
	const char *needs_name;
} handlers[VQ_VHU_REQUEST_MAX + 1] = {
#define H(req, fn) [VQ_VHU_##req] = { fn, UNGATED, NULL }
#define G(req, fn, bit) [VQ_VHU_##req] = { fn, VQ_VHU_PROTOCOL_F_##bit, #bit }
	H(GET_FEATURES, h_get_features),
	H(SET_FEATURES, h_set_features),
	H(SET_OWNER, h_nothing_to_do),
	H(RESET_OWNER, h_reset_owner),
	H(SET_MEM_TABLE, vhu_h_set_mem_table),
	G(SET_LOG_BASE, vhu_h_set_log_base, LOG_SHMFD),
	H(SET_LOG_FD, h_nothing_to_do),
	H(SET_VRING_NUM, vhu_h_vring_num),
	H(SET_VRING_ADDR, vhu_h_vring_addr),
	H(SET_VRING_BASE, vhu_h_vring_base),
	H(GET_VRING_BASE, vhu_h_get_vring_base),
	H(SET_VRING_KICK, vhu_h_vring_fd),
	H(SET_VRING_CALL, vhu_h_vring_fd),
	H(SET_VRING_ERR, vhu_h_vring_fd),
	H(GET_PROTOCOL_FEATURES, h_get_protocol_features),
	H(SET_PROTOCOL_FEATURES, h_set_protocol_features),
	H(GET_QUEUE_NUM, h_get_queue_num),
	H(SET_VRING_ENABLE, vhu_h_vring_enable),
	G(SEND_RARP, h_send_rarp, RARP),
	G(NET_SET_MTU, h_net_set_mtu, MTU),
	G(SET_BACKEND_REQ_FD, vhu_h_set_backend_req_fd, BACKEND_REQ),
	H(IOTLB_MSG, vhu_h_iotlb_msg),
	G(GET_CONFIG, h_get_config, CONFIG),
	G(SET_CONFIG, h_set_config, CONFIG),
	G(POSTCOPY_ADVISE, vhu_h_postcopy_advise, PAGEFAULT),
	G(POSTCOPY_LISTEN, vhu_h_postcopy_listen, PAGEFAULT),
	G(POSTCOPY_END, vhu_h_postcopy_end, PAGEFAULT),
	G(RESET_DEVICE, h_reset_device, RESET_DEVICE),
	G(GET_MAX_MEM_SLOTS, h_get_max_mem_slots, CONFIGURE_MEM_SLOTS),
	G(ADD_MEM_REG, vhu_h_add_mem_reg, CONFIGURE_MEM_SLOTS),
	G(REM_MEM_REG, vhu_h_rem_mem_reg, CONFIGURE_MEM_SLOTS),
	G(SET_STATUS, h_set_status, STATUS),
	G(GET_STATUS, h_get_status, STATUS),
#undef H
#undef G
};

static int dispatch(struct vq_vhu_backend *b, struct vq_vhu_msg *m)
{
	if (m->kind == VQ_VHU_P_POSTCOPY_ACK)
		return vhu_h_postcopy_ack(b, m);
	if (m->request > VQ_VHU_REQUEST_MAX || !handlers[m->request].fn)
		return vhu_berr(b, -EOPNOTSUPP,
				"vhost-user \"Front-end message types\": request %u is not handled",
				m->request);
	if (handlers[m->request].needs != UNGATED &&
	    !vhu_has_proto(b, (unsigned)handlers[m->request].needs))
		return vhu_berr(b, -EPROTO,
				"%s: only legal with VHOST_USER_PROTOCOL_F_%s (bit %d), not negotiated (protocol features 0x%llx)",
				vq_vhu_request_name(m->request),
				handlers[m->request].needs_name,
				handlers[m->request].needs,
				(unsigned long long)b->protocol);
	return handlers[m->request].fn(b, m);
}

void vq_vhu_backend_fail(struct vq_vhu_backend *b, int err, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&b->fail.lock);
	if (b->conn_fd >= 0 && !__atomic_load_n(&b->fail.err, __ATOMIC_RELAXED)) {
		va_start(ap, fmt);
		vsnprintf(b->fail.msg, sizeof(b->fail.msg), fmt, ap);
		va_end(ap);
		__atomic_store_n(&b->fail.err, err < 0 ? err : -EIO, __ATOMIC_RELEASE);
		/* wakes the control thread, whatever it polls the socket with */
		shutdown(b->conn_fd, SHUT_RDWR);
	}
	pthread_mutex_unlock(&b->fail.lock);
}

/* A failure another thread found (vq_vhu_backend_fail): its -errno, with
 * vhu_berr saying why, or 0. */
static int fail_pending(struct vq_vhu_backend *b)
{
	int err = __atomic_load_n(&b->fail.err, __ATOMIC_ACQUIRE);

	if (!err)
		return 0;
	pthread_mutex_lock(&b->fail.lock);
	vhu_berr(b, err, "%s", b->fail.msg);
	pthread_mutex_unlock(&b->fail.lock);
	return err;
}

/* A failure found off the control thread: another thread's, or guest
 * memory lost to its file shrinking (its handler shut the socket down).
 * Its -errno, with vhu_berr saying why, or 0. */
static int failed_elsewhere(struct vq_vhu_backend *b)
{
	int r = fail_pending(b);

	return r ? r : vhu_mem_lost(b);
}

/* Read, decode and handle one message.  1: one was handled, 0: none was
 * waiting, -errno: the connection must close. */
static int handle_one(struct vq_vhu_backend *b)
{
	uint8_t buf[VQ_VHU_MSG_MAX];
	int fds[VQ_VHU_MAX_FDS];
	unsigned nfds;
	size_t len;
	struct vq_vhu_msg m;
	char err[160];
	bool ack;
	int r, e;

	r = failed_elsewhere(b);
	if (r)
		return r;
	r = vhu_recv(b->conn_fd, true, true, b->recv_timeout_ms, buf, &len, fds,
		     &nfds);
	if (r == -EAGAIN)
		return 0;
	/* the socket was shut down for a failure found meanwhile */
	if (r < 0 && (e = failed_elsewhere(b)))
		return e;
	if (r == -ECONNRESET)
		return -ECONNRESET;     /* orderly close: not an error message */
	if (r < 0 && len == VQ_VHU_HDR_SIZE) {
		/* the header was refused: let the codec say why */
		vq_vhu_decode_request(buf, len, NULL, 0, b->dev.nqueues, &m,
				      err, sizeof(err));
		return vhu_berr(b, r, "%s", err);
	}
	if (r == -EPIPE || r == -ETIMEDOUT)
		return vhu_berr(b, r,
				"vhost-user \"Communication\": the front-end %s in the middle of a message",
				r == -EPIPE ? "closed the connection" : "stalled past the receive timeout");
	if (r < 0)
		return vhu_berr(b, r,
				"vhost-user \"Communication\": receiving a message failed: %s%s",
				strerror(-r), r == -EBADF ? " (its fds were cut short)" : "");
	if (!b->conn_said) {
		b->conn_said = true;
		vq_log(VQ_LOG_INFO, "%s: a front-end connected", b->dev.name);
	}
	r = vq_vhu_decode_request(buf, len, fds, nfds, b->dev.nqueues, &m, err,
				  sizeof(err));
	if (r)
		return vhu_berr(b, r, "%s", err);
	vq_log(VQ_LOG_DEBUG, "%s: %s, %u payload bytes, %u fds", b->dev.name,
	       m.kind == VQ_VHU_P_POSTCOPY_ACK ? "postcopy ack" :
	       vq_vhu_request_name(m.request), m.size, m.nfds);
	/* while postcopy listens, a memory change's reply is its echo */
	ack = vhu_has_proto(b, VQ_VHU_PROTOCOL_F_REPLY_ACK) &&
	      (m.flags & VQ_VHU_FLAG_NEED_REPLY) &&
	      !vq_vhu_request_has_reply(m.request) &&
	      !(b->pc.listening && vq_vhu_request_postcopy_echo(m.request));
	r = dispatch(b, &m);
	vq_vhu_msg_close_fds(&m);       /* fds a handler did not take */
	if (ack) {
		/* "VHOST_USER_PROTOCOL_F_REPLY_ACK": zero for success,
		 * non-zero for a failure (a refusal, or an error) */
		int s = vhu_reply_u64(b, &m, r != VHU_DONE);

		if (s && r >= 0)
			r = s;
	}
	/* a failure found meanwhile (the handler touched lost memory, its
	 * socket shut down) is why the handler or its reply failed */
	if (r < 0 && (e = failed_elsewhere(b)))
		return e;
	return r < 0 ? r : 1;   /* a refusal keeps the connection */
}

/* Reserved words a caller set: fields of a later version we would ignore. */
static bool device_reserved_set(const struct vq_vhu_device *dev)
{
	for (unsigned i = 0; i < VQ_ARRAY_SIZE(dev->reserved); i++)
		if (dev->reserved[i])
			return true;
	for (unsigned i = 0; dev->ops && i < VQ_ARRAY_SIZE(dev->ops->reserved); i++)
		if (dev->ops->reserved[i])
			return true;
	return false;
}

int vq_vhu_backend_new(const struct vq_vhu_device *dev,
		       struct vq_vhu_backend **out)
{
	static const struct vq_vhu_device_ops no_ops;
	struct vq_vhu_backend *b;
	uint64_t dev_mask = (VQ_BIT(24) - 1) | ~(VQ_BIT(50) - 1);

	*out = NULL;
	if (!dev || dev->nqueues == 0 || dev->nqueues > VQ_VHU_MAX_QUEUES ||
	    !(dev->features & VQ_BIT(VQ_F_VERSION_1)) ||
	    (dev->features & ~(dev_mask | VQ_RING_FEATURES)) ||
	    device_reserved_set(dev))
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
	b->offered = dev->features | VQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES) |
		     VQ_BIT(VQ_VHU_F_LOG_ALL);
	/* The same goes for the IOTLB (every chain is translated by the ring
	 * layer): a guest behind a vIOMMU can use any device. */
	b->offered |= VQ_BIT(VQ_F_ACCESS_PLATFORM);
	b->proto_offered = VQ_VHU_BACKEND_PROTOCOL_FEATURES;
	if (!b->dev.ops->get_config)
		b->proto_offered &= ~VQ_BIT(VQ_VHU_PROTOCOL_F_CONFIG);
	if (!b->dev.ops->send_rarp)
		b->proto_offered &= ~VQ_BIT(VQ_VHU_PROTOCOL_F_RARP);
	if (!b->dev.ops->set_mtu)
		b->proto_offered &= ~VQ_BIT(VQ_VHU_PROTOCOL_F_MTU);
	if (!vhu_uffd_usable())
		b->proto_offered &= ~VQ_BIT(VQ_VHU_PROTOCOL_F_PAGEFAULT);
	b->listen_fd = b->conn_fd = -1;
	b->recv_timeout_ms = 5000;
	vq_mem_new(&b->mem);
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
	pthread_mutex_init(&b->fail.lock, NULL);
	*out = b;
	return 0;
}

void vq_vhu_backend_free(struct vq_vhu_backend *b)
{
	if (!b)
		return;
	if (b->conn_fd >= 0)
		conn_close(b, 0);
	vhu_close_fd(&b->listen_fd);
	vq_unix_listener_free(b->listener);
	free(b->client_path);
	free(b->maps);
	free(b->rings);
	vq_mem_free(b->mem);
	pthread_mutex_destroy(&b->chan.lock);
	pthread_mutex_destroy(&b->fail.lock);
	free(b);
}

int vq_vhu_backend_listen(struct vq_vhu_backend *b, const char *path,
			  unsigned mode)
{
	struct vq_unix_listen_config c = { .path = path, .mode = mode, .backlog = 1 };
	int r;

	if (b->listen_fd >= 0 || b->conn_fd >= 0 || b->client_path)
		return -EBUSY;
	/* The one listener every back-end program uses: a live socket is
	 * refused, a stale one replaced, and only ours removed at the end. */
	r = vq_unix_listener_new(&c, &b->listener);
	if (r == -EADDRINUSE)
		return vhu_berr(b, r, "vhost-user \"Communication\": %s: a live socket is listening there",
				path);
	if (r == -EEXIST)
		return vhu_berr(b, r, "vhost-user \"Communication\": %s exists and is not a socket",
				path);
	if (r < 0)
		return r;
	b->listen_fd = vq_unix_listener_release_fd(b->listener);
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
			vhu_now_ns() + b->reconnect_ms * 1000000ull : UINT64_MAX;
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
	now = vhu_now_ns();
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
		    vhu_now_ns() >= b->next_connect_ns)
			return try_connect(b) == 0 ? 1 : 0;
		return 0;
	}
	r = handle_one(b);
	if (r < 0)
		conn_close(b, r);
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
		/* before too: an adopted connection may end in this call */
		had_conn |= b->conn_fd >= 0;
		vq_vhu_backend_process(b);
		had_conn |= b->conn_fd >= 0;
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
