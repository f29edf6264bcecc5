// SPDX-License-Identifier: MIT
/*
 * The vhost-user message codec: a table of request descriptors drives every
 * check (payload kind and size, fds allowed, vring index, reply) before any
 * handler sees a message.  Pure: no I/O except closing the fds it is told to
 * drop, no global state.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <virtq/spec.h>
#include <virtq/vhost_user.h>

#include "internal.h"

/* The ABI fixes the message's size: a new payload fits the union. */
_Static_assert(sizeof(((struct vq_vhu_msg *)0)->u) == VQ_VHU_MSG_UNION_SIZE,
	       "vq_vhu_msg's union changed size");

enum fd_rule {
	FD_NONE,        /* no fd */
	FD_REGIONS,     /* one per memory region */
	FD_ONE,         /* exactly one */
	FD_VRING,       /* one, unless the payload says "no fd" */
	FD_DISCARD,     /* zero or one, closed unused (REM_MEM_REG, spec) */
};

struct req_desc {
	const char *name;
	enum vq_vhu_payload req;        /* request payload */
	enum vq_vhu_payload reply;      /* explicit reply payload, or NONE */
	enum fd_rule fds;
	bool vring;                     /* carries a vring index */
	enum fd_rule reply_fds;         /* FD_NONE or FD_ONE */
	bool postcopy_echo;             /* listening: the reply echoes req */
};

#define DX(id, rq, rp, f, v, rf, pe) \
	[VQ_VHU_##id] = { "VHOST_USER_" #id, rq, rp, f, v, rf, pe }
#define D(id, rq, rp, f, v) DX(id, rq, rp, f, v, FD_NONE, false)
static const struct req_desc reqs[VQ_VHU_REQUEST_MAX + 1] = {
	D(GET_FEATURES,          VQ_VHU_P_NONE,     VQ_VHU_P_U64,    FD_NONE,    false),
	D(SET_FEATURES,          VQ_VHU_P_U64,      VQ_VHU_P_NONE,   FD_NONE,    false),
	D(SET_OWNER,             VQ_VHU_P_NONE,     VQ_VHU_P_NONE,   FD_NONE,    false),
	D(RESET_OWNER,           VQ_VHU_P_NONE,     VQ_VHU_P_NONE,   FD_NONE,    false),
	DX(SET_MEM_TABLE,        VQ_VHU_P_MEM,      VQ_VHU_P_NONE,   FD_REGIONS, false, FD_NONE, true),
	/* with LOG_SHMFD, the only way we accept it; QEMU waits for a reply */
	D(SET_LOG_BASE,          VQ_VHU_P_LOG,      VQ_VHU_P_EMPTY,  FD_ONE,     false),
	D(SET_LOG_FD,            VQ_VHU_P_NONE,     VQ_VHU_P_NONE,   FD_ONE,     false),
	D(SET_VRING_NUM,         VQ_VHU_P_STATE,    VQ_VHU_P_NONE,   FD_NONE,    true),
	D(SET_VRING_ADDR,        VQ_VHU_P_ADDR,     VQ_VHU_P_NONE,   FD_NONE,    true),
	D(SET_VRING_BASE,        VQ_VHU_P_STATE,    VQ_VHU_P_NONE,   FD_NONE,    true),
	D(GET_VRING_BASE,        VQ_VHU_P_STATE,    VQ_VHU_P_STATE,  FD_NONE,    true),
	D(SET_VRING_KICK,        VQ_VHU_P_VRING_FD, VQ_VHU_P_NONE,   FD_VRING,   true),
	D(SET_VRING_CALL,        VQ_VHU_P_VRING_FD, VQ_VHU_P_NONE,   FD_VRING,   true),
	D(SET_VRING_ERR,         VQ_VHU_P_VRING_FD, VQ_VHU_P_NONE,   FD_VRING,   true),
	D(GET_PROTOCOL_FEATURES, VQ_VHU_P_NONE,     VQ_VHU_P_U64,    FD_NONE,    false),
	D(SET_PROTOCOL_FEATURES, VQ_VHU_P_U64,      VQ_VHU_P_NONE,   FD_NONE,    false),
	D(GET_QUEUE_NUM,         VQ_VHU_P_NONE,     VQ_VHU_P_U64,    FD_NONE,    false),
	D(SET_VRING_ENABLE,      VQ_VHU_P_STATE,    VQ_VHU_P_NONE,   FD_NONE,    true),
	/* the guest's MAC in the u64's first six bytes */
	D(SEND_RARP,             VQ_VHU_P_U64,      VQ_VHU_P_NONE,   FD_NONE,    false),
	/* the MTU QEMU's host_mtu gives the guest, as a u64 */
	D(NET_SET_MTU,           VQ_VHU_P_U64,      VQ_VHU_P_NONE,   FD_NONE,    false),
	/* the back-end channel: a socket the back-end writes its requests to */
	D(SET_BACKEND_REQ_FD,    VQ_VHU_P_NONE,     VQ_VHU_P_NONE,   FD_ONE,     false),
	D(IOTLB_MSG,             VQ_VHU_P_IOTLB,    VQ_VHU_P_NONE,   FD_NONE,    false),
	D(GET_CONFIG,            VQ_VHU_P_CONFIG,   VQ_VHU_P_CONFIG, FD_NONE,    false),
	D(SET_CONFIG,            VQ_VHU_P_CONFIG,   VQ_VHU_P_NONE,   FD_NONE,    false),
	/* the reply is empty and carries the back-end's userfaultfd */
	DX(POSTCOPY_ADVISE,      VQ_VHU_P_NONE,     VQ_VHU_P_EMPTY,  FD_NONE,    false, FD_ONE, false),
	D(POSTCOPY_LISTEN,       VQ_VHU_P_NONE,     VQ_VHU_P_NONE,   FD_NONE,    false),
	D(POSTCOPY_END,          VQ_VHU_P_NONE,     VQ_VHU_P_U64,    FD_NONE,    false),
	D(RESET_DEVICE,          VQ_VHU_P_NONE,     VQ_VHU_P_NONE,   FD_NONE,    false),
	D(GET_MAX_MEM_SLOTS,     VQ_VHU_P_NONE,     VQ_VHU_P_U64,    FD_NONE,    false),
	DX(ADD_MEM_REG,          VQ_VHU_P_REGION,   VQ_VHU_P_NONE,   FD_ONE,     false, FD_NONE, true),
	D(REM_MEM_REG,           VQ_VHU_P_REGION,   VQ_VHU_P_NONE,   FD_DISCARD, false),
	D(SET_STATUS,            VQ_VHU_P_U64,      VQ_VHU_P_NONE,   FD_NONE,    false),
	D(GET_STATUS,            VQ_VHU_P_NONE,     VQ_VHU_P_U64,    FD_NONE,    false),
};

static const struct req_desc backend_reqs[VQ_VHU_BACKEND_REQUEST_MAX + 1] = {
	[VQ_VHU_BACKEND_IOTLB_MSG] = { "VHOST_USER_BACKEND_IOTLB_MSG", VQ_VHU_P_IOTLB,
				    VQ_VHU_P_NONE, FD_NONE, false, FD_NONE, false },
};
#undef D
#undef DX

#define REGION_WIRE 32u
#define IOTLB_WIRE 32u
#define MEM_HDR_WIRE 8u

static const struct req_desc *lookup_in(bool backend, uint32_t request)
{
	if (backend)
		return request <= VQ_VHU_BACKEND_REQUEST_MAX &&
		       backend_reqs[request].name ? &backend_reqs[request] : NULL;
	if (request > VQ_VHU_REQUEST_MAX || !reqs[request].name)
		return NULL;
	return &reqs[request];
}

static const struct req_desc *lookup(uint32_t request)
{
	return lookup_in(false, request);
}

const char *vq_vhu_request_name(uint32_t request)
{
	const struct req_desc *d = lookup(request);

	return d ? d->name : NULL;
}

bool vq_vhu_request_has_reply(uint32_t request)
{
	const struct req_desc *d = lookup(request);

	return d && d->reply != VQ_VHU_P_NONE;
}

bool vq_vhu_request_postcopy_echo(uint32_t request)
{
	const struct req_desc *d = lookup(request);

	return d && d->postcopy_echo;
}

static int fail(char *err, size_t errlen, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return ret;
}

/* Is size a valid payload size for kind (before looking inside)? */
static bool size_ok(enum vq_vhu_payload kind, uint32_t size)
{
	switch (kind) {
	case VQ_VHU_P_NONE:
		return size == 0;
	case VQ_VHU_P_U64:
	case VQ_VHU_P_STATE:
	case VQ_VHU_P_VRING_FD:
		return size == 8;
	case VQ_VHU_P_ADDR:
		return size == 40;
	case VQ_VHU_P_IOTLB:
		return size == IOTLB_WIRE;
	case VQ_VHU_P_LOG:
		return size == 16;
	case VQ_VHU_P_EMPTY:
		/* as DPDK's vhost sends it; QEMU reads any payload (libvhost-user
		 * sends a u64), but we never ask for a log, and a decoded
		 * message re-encodes to the same bytes */
		return size == 0;
	case VQ_VHU_P_REGION:
		return size == 8 + REGION_WIRE;
	case VQ_VHU_P_MEM:
		return size >= MEM_HDR_WIRE + REGION_WIRE &&
		       size <= MEM_HDR_WIRE + REGION_WIRE * VQ_VHU_MEM_TABLE_MAX &&
		       (size - MEM_HDR_WIRE) % REGION_WIRE == 0;
	case VQ_VHU_P_CONFIG:
		return size >= VQ_VHU_CONFIG_HDR_SIZE && size <= VQ_VHU_PAYLOAD_MAX;
	case VQ_VHU_P_POSTCOPY_ACK:
		return size == 8;
	}
	return false;
}

/* What size_ok takes, for messages. */
_Static_assert(VQ_VHU_PAYLOAD_MAX == 268 && VQ_VHU_MEM_TABLE_MAX == 8,
	       "size_rule's numbers");
static const char *size_rule(enum vq_vhu_payload kind)
{
	switch (kind) {
	case VQ_VHU_P_NONE:
	case VQ_VHU_P_EMPTY:
		return "0 bytes";
	case VQ_VHU_P_U64:
	case VQ_VHU_P_STATE:
	case VQ_VHU_P_VRING_FD:
	case VQ_VHU_P_POSTCOPY_ACK:
		return "8 bytes";
	case VQ_VHU_P_ADDR:
	case VQ_VHU_P_REGION:
		return "40 bytes";
	case VQ_VHU_P_IOTLB:
		return "32 bytes";
	case VQ_VHU_P_LOG:
		return "16 bytes";
	case VQ_VHU_P_MEM:
		return "8 + 32 per region for 1 to 8 regions";
	case VQ_VHU_P_CONFIG:
		return "12 to 268 bytes";
	}
	return "known";
}

struct hdr {
	uint32_t request, flags, size;
};

static void get_hdr(const void *buf, struct hdr *h)
{
	memcpy(&h->request, buf, 4);
	memcpy(&h->flags, (const char *)buf + 4, 4);
	memcpy(&h->size, (const char *)buf + 8, 4);
}

/*
 * QEMU's postcopy acknowledgment (VQ_VHU_P_POSTCOPY_ACK): a u64 request with
 * no flag but the version, under 0 or a memory-table request.  Every one
 * of those requests is longer (a table holds at least one region), so the
 * shape names it; whether it is expected is the back-end's business.
 */
static bool postcopy_ack_shape(const struct hdr *h)
{
	return h->flags == VQ_VHU_VERSION && h->size == 8 &&
	       (h->request == 0 || h->request == VQ_VHU_SET_MEM_TABLE ||
		h->request == VQ_VHU_ADD_MEM_REG || h->request == VQ_VHU_REM_MEM_REG);
}

static int check_hdr(const struct hdr *h, bool reply, bool backend,
		     const struct req_desc **dp, char *err, size_t errlen)
{
	const struct req_desc *d = lookup_in(backend, h->request);

	if ((h->flags & VQ_VHU_FLAG_VERSION_MASK) != VQ_VHU_VERSION)
		return fail(err, errlen, -EINVAL,
			    "vhost-user \"Header\": version %u in flags 0x%x, not 1",
			    h->flags & VQ_VHU_FLAG_VERSION_MASK, h->flags);
	if (h->flags & ~(VQ_VHU_FLAG_VERSION_MASK | VQ_VHU_FLAG_REPLY | VQ_VHU_FLAG_NEED_REPLY))
		return fail(err, errlen, -EINVAL,
			    "vhost-user \"Header\": unknown bits 0x%x in flags 0x%x",
			    h->flags & ~(VQ_VHU_FLAG_VERSION_MASK | VQ_VHU_FLAG_REPLY |
					 VQ_VHU_FLAG_NEED_REPLY), h->flags);
	if (!!(h->flags & VQ_VHU_FLAG_REPLY) != reply)
		return fail(err, errlen, -EINVAL, reply ?
			    "vhost-user \"Header\": a reply without the reply flag (flags 0x%x)" :
			    "vhost-user \"Header\": a request with the reply flag (flags 0x%x)",
			    h->flags);
	if (!d)
		return fail(err, errlen, -EOPNOTSUPP,
			    "vhost-user \"%s message types\": request %u is not one we implement",
			    backend ? "Back-end" : "Front-end", h->request);
	*dp = d;
	return 0;
}

int vq_vhu_check_request_hdr(const void *hdr, uint32_t *payload_size)
{
	const struct req_desc *d = NULL;        /* set when check_hdr is 0 */
	struct hdr h;
	int r;

	get_hdr(hdr, &h);
	if (postcopy_ack_shape(&h)) {
		*payload_size = h.size;
		return 0;
	}
	r = check_hdr(&h, false, false, &d, NULL, 0);
	if (r)
		return r;
	if (!size_ok(d->req, h.size))
		return -EMSGSIZE;
	*payload_size = h.size;
	return 0;
}

static void close_all(const int *fds, unsigned nfds)
{
	for (unsigned i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

void vq_vhu_msg_close_fds(struct vq_vhu_msg *msg)
{
	close_all(msg->fds, msg->nfds);
	msg->nfds = 0;
}

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static void get_region(const uint8_t *p, struct vq_vhu_region *r)
{
	r->gpa = rd64(p);
	r->size = rd64(p + 8);
	r->uaddr = rd64(p + 16);
	r->mmap_offset = rd64(p + 24);
}

static bool wraps(uint64_t start, uint64_t size)
{
	return start + size < start;
}

static int region_ok(const struct vq_vhu_region *r, unsigned i, char *err,
		     size_t errlen)
{
	if (r->size == 0)
		return fail(err, errlen, -EINVAL,
			    "vhost-user \"Memory regions description\": region %u has size 0", i);
	if (wraps(r->gpa, r->size) || wraps(r->uaddr, r->size) ||
	    wraps(r->mmap_offset, r->size))
		return fail(err, errlen, -EINVAL,
			    "vhost-user \"Memory regions description\": region %u: 0x%llx bytes at guest 0x%llx, user 0x%llx or offset 0x%llx wrap around",
			    i, (unsigned long long)r->size, (unsigned long long)r->gpa,
			    (unsigned long long)r->uaddr,
			    (unsigned long long)r->mmap_offset);
	return 0;
}

static bool overlap(uint64_t a, uint64_t as, uint64_t b, uint64_t bs)
{
	return a < b + bs && b < a + as;
}

/* Parse the payload of kind (size already checked by size_ok). */
static int parse_payload(struct vq_vhu_msg *m, const uint8_t *p, char *err,
			 size_t errlen)
{
	uint32_t n;

	switch (m->kind) {
	case VQ_VHU_P_NONE:
	case VQ_VHU_P_EMPTY:
		return 0;
	case VQ_VHU_P_U64:
	case VQ_VHU_P_POSTCOPY_ACK:
		m->u.u64 = rd64(p);
		return 0;
	case VQ_VHU_P_LOG:
		m->u.log.size = rd64(p);
		m->u.log.offset = rd64(p + 8);
		if (m->u.log.size == 0 || wraps(m->u.log.offset, m->u.log.size))
			return fail(err, errlen, -EINVAL,
				    "vhost-user \"Log description\": a log of 0x%llx bytes at offset 0x%llx is empty or wraps around",
				    (unsigned long long)m->u.log.size,
				    (unsigned long long)m->u.log.offset);
		return 0;
	case VQ_VHU_P_VRING_FD: {
		uint64_t v = rd64(p);

		if (v & ~(uint64_t)(VQ_VHU_VRING_IDX_MASK | VQ_VHU_VRING_NOFD))
			return fail(err, errlen, -EINVAL,
				    "%s: payload 0x%llx sets bits other than the index (0-7) and no-fd (8)",
				    vq_vhu_request_name(m->request), (unsigned long long)v);
		m->u.vring_fd.index = v & VQ_VHU_VRING_IDX_MASK;
		m->u.vring_fd.nofd = v & VQ_VHU_VRING_NOFD;
		return 0;
	}
	case VQ_VHU_P_STATE:
		m->u.state.index = rd32(p);
		m->u.state.num = rd32(p + 4);
		return 0;
	case VQ_VHU_P_IOTLB:
		m->u.iotlb.iova = rd64(p);
		m->u.iotlb.size = rd64(p + 8);
		m->u.iotlb.uaddr = rd64(p + 16);
		m->u.iotlb.perm = p[24];
		m->u.iotlb.type = p[25];
		return 0;
	case VQ_VHU_P_ADDR:
		m->u.addr.index = rd32(p);
		m->u.addr.flags = rd32(p + 4);
		m->u.addr.desc = rd64(p + 8);
		m->u.addr.used = rd64(p + 16);
		m->u.addr.avail = rd64(p + 24);
		m->u.addr.log = rd64(p + 32);
		return 0;
	case VQ_VHU_P_REGION:
		/* 64-bit padding first */
		get_region(p + 8, &m->u.region);
		return region_ok(&m->u.region, 0, err, errlen);
	case VQ_VHU_P_MEM:
		n = rd32(p);
		if (n == 0 || n > VQ_VHU_MEM_TABLE_MAX)
			return fail(err, errlen, -EINVAL,
				    "VHOST_USER_SET_MEM_TABLE: %u regions, not 1 to %u", n,
				    VQ_VHU_MEM_TABLE_MAX);
		if (m->size != MEM_HDR_WIRE + n * REGION_WIRE)
			return fail(err, errlen, -EMSGSIZE,
				    "VHOST_USER_SET_MEM_TABLE: %u regions in a %u-byte payload, not %u",
				    n, m->size, MEM_HDR_WIRE + n * REGION_WIRE);
		m->u.mem.nregions = n;
		for (uint32_t i = 0; i < n; i++) {
			struct vq_vhu_region *r = &m->u.mem.regions[i];
			int ret;

			get_region(p + MEM_HDR_WIRE + i * REGION_WIRE, r);
			ret = region_ok(r, i, err, errlen);
			if (ret)
				return ret;
			for (uint32_t j = 0; j < i; j++) {
				const struct vq_vhu_region *o = &m->u.mem.regions[j];

				if (overlap(r->gpa, r->size, o->gpa, o->size) ||
				    overlap(r->uaddr, r->size, o->uaddr, o->size))
					return fail(err, errlen, -EINVAL,
						    "vhost-user \"Memory regions description\": regions %u and %u overlap (guest 0x%llx and 0x%llx, user 0x%llx and 0x%llx)",
						    j, i, (unsigned long long)o->gpa,
						    (unsigned long long)r->gpa,
						    (unsigned long long)o->uaddr,
						    (unsigned long long)r->uaddr);
			}
		}
		return 0;
	case VQ_VHU_P_CONFIG:
		m->u.config.offset = rd32(p);
		m->u.config.size = rd32(p + 4);
		m->u.config.flags = rd32(p + 8);
		if (m->u.config.size > VQ_VHU_CONFIG_MAX ||
		    m->size != VQ_VHU_CONFIG_HDR_SIZE + m->u.config.size)
			return fail(err, errlen, -EMSGSIZE,
				    "vhost-user \"Virtio device config space\": %u bytes of config in a %u-byte payload (at most %u)",
				    m->u.config.size, m->size, VQ_VHU_CONFIG_MAX);
		if (m->u.config.offset + m->u.config.size < m->u.config.offset)
			return fail(err, errlen, -EINVAL,
				    "vhost-user \"Virtio device config space\": %u bytes at offset %u wrap around",
				    m->u.config.size, m->u.config.offset);
		memcpy(m->u.config.data, p + VQ_VHU_CONFIG_HDR_SIZE, m->u.config.size);
		return 0;
	}
	return -EINVAL;
}

/* An IOTLB message of type a or b: an update names a range that does not
 * wrap (either side) with a permission; a miss or failure a permission. */
static int iotlb_ok(const struct vq_vhu_msg *m, unsigned a, unsigned b,
		    char *err, size_t errlen)
{
	unsigned t = m->u.iotlb.type, perm = m->u.iotlb.perm;

	if (t != a && t != b)
		return fail(err, errlen, -EINVAL,
			    "vhost-user \"IOMMU support\": IOTLB message type %u, not %u or %u on this channel",
			    t, a, b);
	if (t == VQ_VHU_IOTLB_INVALIDATE)
		return 0;
	if (perm == 0 || perm > VQ_VHU_IOTLB_PERM_RW)
		return fail(err, errlen, -EINVAL,
			    "vhost-user \"An IOTLB message\": permission %u, not 1 to 3", perm);
	/* a range may end on the last address (vhost's last = start + size - 1) */
	if (t == VQ_VHU_IOTLB_UPDATE &&
	    (m->u.iotlb.size == 0 ||
	     m->u.iotlb.iova + (m->u.iotlb.size - 1) < m->u.iotlb.iova ||
	     m->u.iotlb.uaddr + (m->u.iotlb.size - 1) < m->u.iotlb.uaddr))
		return fail(err, errlen, -EINVAL,
			    "vhost-user \"An IOTLB message\": an update of 0x%llx bytes at IOVA 0x%llx to 0x%llx is empty or wraps around",
			    (unsigned long long)m->u.iotlb.size,
			    (unsigned long long)m->u.iotlb.iova,
			    (unsigned long long)m->u.iotlb.uaddr);
	return 0;
}

/* Field rules that depend on the request, not only on the payload kind. */
static int check_fields(const struct vq_vhu_msg *m, unsigned nqueues,
			const struct req_desc *d, char *err, size_t errlen)
{
	uint32_t idx = 0;

	if (d->vring) {
		if (m->kind == VQ_VHU_P_VRING_FD)
			idx = m->u.vring_fd.index;
		else if (m->kind == VQ_VHU_P_ADDR)
			idx = m->u.addr.index;
		else
			idx = m->u.state.index;
		if (idx >= nqueues)
			return fail(err, errlen, -ERANGE,
				    "%s: vring index %u past the queue count %u",
				    d->name, idx, nqueues);
	}
	switch (m->request) {
	case VQ_VHU_SET_VRING_NUM:
		if (m->u.state.num == 0 || m->u.state.num > VIRTQ_MAX_QUEUE_SIZE)
			return fail(err, errlen, -EINVAL,
				    "VHOST_USER_SET_VRING_NUM: queue size %u is not 1 to %u",
				    m->u.state.num, VIRTQ_MAX_QUEUE_SIZE);
		break;
	/* GET_VRING_BASE num is reserved ("must be set to 0"), but DPDK's
	 * virtio-user sends the ring size there: it carries nothing, so it is
	 * ignored rather than refused. */
	case VQ_VHU_SET_VRING_ENABLE:
		if (m->u.state.num > 1)
			return fail(err, errlen, -EINVAL,
				    "VHOST_USER_SET_VRING_ENABLE: num %u is not 0 or 1",
				    m->u.state.num);
		break;
	case VQ_VHU_SET_VRING_ADDR:
		if (m->u.addr.flags & ~VQ_VHU_VRING_F_LOG)
			return fail(err, errlen, -EINVAL,
				    "VHOST_USER_SET_VRING_ADDR: unknown flags 0x%x (only VHOST_VRING_F_LOG, 0x1)",
				    m->u.addr.flags);
		break;
	case VQ_VHU_SET_STATUS:
		if (m->u.u64 > 0xff)
			return fail(err, errlen, -EINVAL,
				    "VHOST_USER_SET_STATUS: status 0x%llx does not fit 8 bits",
				    (unsigned long long)m->u.u64);
		break;
	case VQ_VHU_GET_CONFIG:
	case VQ_VHU_SET_CONFIG:
		if (m->u.config.flags > 1)
			return fail(err, errlen, -EINVAL,
				    "%s: config flags 0x%x, not 0 or 1", d->name,
				    m->u.config.flags);
		break;
	case VQ_VHU_IOTLB_MSG:
		return iotlb_ok(m, VQ_VHU_IOTLB_UPDATE, VQ_VHU_IOTLB_INVALIDATE, err, errlen);
	}
	return 0;
}

/* How many fds the message must carry; -1 for "0 or 1, dropped". */
static int fds_expected(const struct vq_vhu_msg *m, enum fd_rule rule)
{
	switch (rule) {
	case FD_NONE:
		return 0;
	case FD_REGIONS:
		return (int)m->u.mem.nregions;
	case FD_ONE:
		return 1;
	case FD_VRING:
		return m->u.vring_fd.nofd ? 0 : 1;
	case FD_DISCARD:
		return -1;
	}
	return 0;
}

static int decode(const void *buf, size_t len, const int *fds, unsigned nfds,
		  unsigned nqueues, bool reply, bool backend, uint32_t expect,
		  bool ack, struct vq_vhu_msg *m, char *err, size_t errlen)
{
	const struct req_desc *d = NULL;
	struct hdr h;
	int want, r;

	memset(m, 0, sizeof(*m));
	if (err && errlen)
		err[0] = '\0';
	if (nfds > VQ_VHU_MAX_FDS) {
		r = fail(err, errlen, -EBADF,
			 "vhost-user \"Communication\": %u fds, at most %u in one message",
			 nfds, VQ_VHU_MAX_FDS);
		goto out_close;
	}
	if (len < VQ_VHU_HDR_SIZE) {
		r = fail(err, errlen, -EMSGSIZE,
			 "vhost-user \"Header\": %zu bytes, less than the %u-byte header",
			 len, VQ_VHU_HDR_SIZE);
		goto out_close;
	}
	get_hdr(buf, &h);
	if (!reply && !backend && postcopy_ack_shape(&h)) {
		m->request = h.request;
		m->flags = h.flags;
		m->size = h.size;
		m->kind = VQ_VHU_P_POSTCOPY_ACK;
		if (len != VQ_VHU_HDR_SIZE + 8) {
			r = fail(err, errlen, -EMSGSIZE,
				 "vhost-user \"Migration\": a postcopy acknowledgment of %zu bytes, not 8",
				 len - VQ_VHU_HDR_SIZE);
			goto out_close;
		}
		if (nfds) {
			r = fail(err, errlen, -EBADF,
				 "vhost-user \"Migration\": a postcopy acknowledgment with %u fds, not 0",
				 nfds);
			goto out_close;
		}
		parse_payload(m, (const uint8_t *)buf + VQ_VHU_HDR_SIZE, NULL, 0);
		return 0;
	}
	r = check_hdr(&h, reply, backend, &d, err, errlen);
	if (r)
		goto out_close;
	if (reply && h.request != expect) {
		r = fail(err, errlen, -EPROTO,
			 "vhost-user \"Communication\": a reply to request %u, expected %u",
			 h.request, expect);
		goto out_close;
	}
	m->request = h.request;
	m->flags = h.flags;
	m->size = h.size;
	if (reply && d->postcopy_echo && !ack)
		m->kind = d->req;
	else if (reply)
		m->kind = d->reply != VQ_VHU_P_NONE ? d->reply :
			  ack ? VQ_VHU_P_U64 : VQ_VHU_P_NONE;
	else
		m->kind = d->req;
	if (reply && m->kind == VQ_VHU_P_NONE) {
		r = fail(err, errlen, -EPROTO, "%s: a reply, but it has none", d->name);
		goto out_close;
	}
	/* An empty GET_CONFIG reply is the back-end's error report (spec). */
	if (reply && m->kind == VQ_VHU_P_CONFIG && h.size == 0) {
		r = fail(err, errlen, -EIO,
			 "VHOST_USER_GET_CONFIG: the back-end refused it (an empty reply)");
		goto out_close;
	}
	if (!size_ok(m->kind, h.size)) {
		r = fail(err, errlen, -EMSGSIZE, "%s: a %u-byte payload, not %s",
			 d->name, h.size, size_rule(m->kind));
		goto out_close;
	}
	if (len != VQ_VHU_HDR_SIZE + (size_t)h.size) {
		r = fail(err, errlen, -EMSGSIZE,
			 "%s: %zu bytes after a header that announces %u", d->name,
			 len - VQ_VHU_HDR_SIZE, h.size);
		goto out_close;
	}
	r = parse_payload(m, (const uint8_t *)buf + VQ_VHU_HDR_SIZE, err, errlen);
	if (r)
		goto out_close;
	if (backend) {
		r = iotlb_ok(m, VQ_VHU_IOTLB_MISS, VQ_VHU_IOTLB_ACCESS_FAIL, err, errlen);
		if (r)
			goto out_close;
		want = fds_expected(m, d->fds);
	} else if (!reply) {
		r = check_fields(m, nqueues, d, err, errlen);
		if (r)
			goto out_close;
		want = fds_expected(m, d->fds);
	} else {
		want = m->kind == d->reply && d->reply_fds == FD_ONE ? 1 : 0;
	}
	if (want < 0) {
		close_all(fds, nfds);   /* spec: close it without using it */
		return 0;
	}
	if ((unsigned)want != nfds) {
		r = fail(err, errlen, -EBADF, "%s: %u fds, expected %d", d->name,
			 nfds, want);
		goto out_close;
	}
	for (unsigned i = 0; i < nfds; i++) {
		if (fds[i] < 0) {
			r = fail(err, errlen, -EBADF, "%s: fd %d is not valid", d->name,
				 fds[i]);
			goto out_close;
		}
		m->fds[i] = fds[i];
	}
	m->nfds = nfds;
	return 0;

out_close:
	close_all(fds, nfds);
	m->nfds = 0;
	return r;
}

int vq_vhu_decode_request(const void *buf, size_t len, const int *fds,
			  unsigned nfds, unsigned nqueues,
			  struct vq_vhu_msg *msg, char *err, size_t errlen)
{
	return decode(buf, len, fds, nfds, nqueues, false, false, 0, false, msg,
		      err, errlen);
}

int vq_vhu_decode_backend_request(const void *buf, size_t len, const int *fds,
				  unsigned nfds, struct vq_vhu_msg *msg,
				  char *err, size_t errlen)
{
	return decode(buf, len, fds, nfds, 0, false, true, 0, false, msg, err,
		      errlen);
}

int vq_vhu_decode_reply(const void *buf, size_t len, const int *fds,
			unsigned nfds, uint32_t expect, bool ack,
			struct vq_vhu_msg *msg, char *err, size_t errlen)
{
	return decode(buf, len, fds, nfds, 0, true, false, expect, ack, msg, err,
		      errlen);
}

static void wr32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void wr64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static void put_region(uint8_t *p, const struct vq_vhu_region *r)
{
	wr64(p, r->gpa);
	wr64(p + 8, r->size);
	wr64(p + 16, r->uaddr);
	wr64(p + 24, r->mmap_offset);
}

static ssize_t encode(const struct req_desc *d, const struct vq_vhu_msg *m,
		      void *buf, size_t cap)
{
	bool reply = m->flags & VQ_VHU_FLAG_REPLY;
	enum vq_vhu_payload kind;
	uint8_t *p = buf, *q;
	uint32_t size;

	if (m->kind == VQ_VHU_P_POSTCOPY_ACK) {
		struct hdr h = { m->request, m->flags, 8 };

		if (!postcopy_ack_shape(&h))
			return -EINVAL;
		kind = VQ_VHU_P_POSTCOPY_ACK;
	} else if (!d) {
		return -EINVAL;
	} else {
		kind = reply ? (d->reply != VQ_VHU_P_NONE ? d->reply : VQ_VHU_P_U64) : d->req;
		if (reply && d->postcopy_echo && m->kind == d->req)
			kind = d->req;
	}
	if (m->kind != kind && !(reply && kind == VQ_VHU_P_CONFIG && m->kind == VQ_VHU_P_NONE))
		return -EINVAL;
	switch (m->kind) {
	case VQ_VHU_P_NONE:
	case VQ_VHU_P_EMPTY:
		size = 0;
		break;
	case VQ_VHU_P_LOG:
		size = 16;
		break;
	case VQ_VHU_P_U64:
	case VQ_VHU_P_STATE:
	case VQ_VHU_P_VRING_FD:
	case VQ_VHU_P_POSTCOPY_ACK:
		size = 8;
		break;
	case VQ_VHU_P_ADDR:
		size = 40;
		break;
	case VQ_VHU_P_IOTLB:
		size = IOTLB_WIRE;
		break;
	case VQ_VHU_P_REGION:
		size = 8 + REGION_WIRE;
		break;
	case VQ_VHU_P_MEM:
		if (m->u.mem.nregions == 0 || m->u.mem.nregions > VQ_VHU_MEM_TABLE_MAX)
			return -EINVAL;
		size = MEM_HDR_WIRE + REGION_WIRE * m->u.mem.nregions;
		break;
	case VQ_VHU_P_CONFIG:
		if (m->u.config.size > VQ_VHU_CONFIG_MAX)
			return -EINVAL;
		size = VQ_VHU_CONFIG_HDR_SIZE + m->u.config.size;
		break;
	default:
		return -EINVAL;
	}
	if (cap < VQ_VHU_HDR_SIZE + (size_t)size)
		return -ENOBUFS;
	memset(p, 0, VQ_VHU_HDR_SIZE + size);
	wr32(p, m->request);
	wr32(p + 4, m->flags);
	wr32(p + 8, size);
	q = p + VQ_VHU_HDR_SIZE;
	switch (m->kind) {
	case VQ_VHU_P_NONE:
	case VQ_VHU_P_EMPTY:
		break;
	case VQ_VHU_P_U64:
	case VQ_VHU_P_POSTCOPY_ACK:
		wr64(q, m->u.u64);
		break;
	case VQ_VHU_P_LOG:
		wr64(q, m->u.log.size);
		wr64(q + 8, m->u.log.offset);
		break;
	case VQ_VHU_P_VRING_FD:
		wr64(q, (m->u.vring_fd.index & VQ_VHU_VRING_IDX_MASK) |
			(m->u.vring_fd.nofd ? VQ_VHU_VRING_NOFD : 0));
		break;
	case VQ_VHU_P_STATE:
		wr32(q, m->u.state.index);
		wr32(q + 4, m->u.state.num);
		break;
	case VQ_VHU_P_ADDR:
		wr32(q, m->u.addr.index);
		wr32(q + 4, m->u.addr.flags);
		wr64(q + 8, m->u.addr.desc);
		wr64(q + 16, m->u.addr.used);
		wr64(q + 24, m->u.addr.avail);
		wr64(q + 32, m->u.addr.log);
		break;
	case VQ_VHU_P_IOTLB:
		wr64(q, m->u.iotlb.iova);
		wr64(q + 8, m->u.iotlb.size);
		wr64(q + 16, m->u.iotlb.uaddr);
		q[24] = m->u.iotlb.perm;
		q[25] = m->u.iotlb.type;
		break;
	case VQ_VHU_P_REGION:
		put_region(q + 8, &m->u.region);
		break;
	case VQ_VHU_P_MEM:
		wr32(q, m->u.mem.nregions);
		for (uint32_t i = 0; i < m->u.mem.nregions; i++)
			put_region(q + MEM_HDR_WIRE + i * REGION_WIRE,
				   &m->u.mem.regions[i]);
		break;
	case VQ_VHU_P_CONFIG:
		wr32(q, m->u.config.offset);
		wr32(q + 4, m->u.config.size);
		wr32(q + 8, m->u.config.flags);
		memcpy(q + VQ_VHU_CONFIG_HDR_SIZE, m->u.config.data, m->u.config.size);
		break;
	}
	return VQ_VHU_HDR_SIZE + size;
}

ssize_t vq_vhu_encode(const struct vq_vhu_msg *m, void *buf, size_t cap)
{
	return encode(lookup(m->request), m, buf, cap);
}

ssize_t vq_vhu_encode_backend_request(const struct vq_vhu_msg *m, void *buf,
				      size_t cap)
{
	if (m->flags & VQ_VHU_FLAG_REPLY)
		return -EINVAL;
	return encode(lookup_in(true, m->request), m, buf, cap);
}
