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

#include "codec_internal.h"

/* The ABI fixes the message's size: a new payload fits the union. */
_Static_assert(sizeof(((struct vq_vhu_msg *)0)->u) == VQ_VHU_MSG_UNION_SIZE,
	       "vq_vhu_msg's union changed size");

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

static const struct vhu_payload_size payload_sizes[] = {
	[VQ_VHU_P_NONE] = { 0, 0, 0 },
	[VQ_VHU_P_U64] = { 8, 8, 0 },
	[VQ_VHU_P_STATE] = { 8, 8, 0 },
	[VQ_VHU_P_ADDR] = { 40, 40, 0 },
	[VQ_VHU_P_MEM] = { MEM_HDR_WIRE + REGION_WIRE,
			   MEM_HDR_WIRE + REGION_WIRE * VQ_VHU_MEM_TABLE_MAX,
			   REGION_WIRE },
	[VQ_VHU_P_REGION] = { 8 + REGION_WIRE, 8 + REGION_WIRE, 0 },
	[VQ_VHU_P_CONFIG] = { VQ_VHU_CONFIG_HDR_SIZE, VQ_VHU_PAYLOAD_MAX, 1 },
	[VQ_VHU_P_VRING_FD] = { 8, 8, 0 },
	[VQ_VHU_P_LOG] = { 16, 16, 0 },
	/* as DPDK's vhost sends it; QEMU reads any payload (libvhost-user
	 * sends a u64), but we never ask for a log, and a decoded message
	 * re-encodes to the same bytes */
	[VQ_VHU_P_EMPTY] = { 0, 0, 0 },
	[VQ_VHU_P_IOTLB] = { IOTLB_WIRE, IOTLB_WIRE, 0 },
	[VQ_VHU_P_POSTCOPY_ACK] = { 8, 8, 0 },
};

const struct vhu_payload_size *vhu_payload_size(enum vq_vhu_payload kind)
{
	return (unsigned)kind < VQ_ARRAY_SIZE(payload_sizes) ? &payload_sizes[kind] : NULL;
}

const struct req_desc *vhu_lookup_in(bool backend, uint32_t request)
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
	return vhu_lookup_in(false, request);
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
	const struct vhu_payload_size *ps = vhu_payload_size(kind);

	return ps && size >= ps->min && size <= ps->max &&
	       (ps->step == 0 || (size - ps->min) % ps->step == 0);
}

/* What size_ok takes, for messages. */
static const char *size_rule(enum vq_vhu_payload kind, char *buf, size_t len)
{
	const struct vhu_payload_size *ps = vhu_payload_size(kind);

	if (ps && ps->min == ps->max)
		snprintf(buf, len, "%u bytes", ps->min);
	else if (ps && ps->step == 1)
		snprintf(buf, len, "%u to %u bytes", ps->min, ps->max);
	else if (ps)
		snprintf(buf, len, "%u to %u bytes in steps of %u", ps->min,
			 ps->max, ps->step);
	else
		snprintf(buf, len, "a payload we know");
	return buf;
}

static void get_hdr(const void *buf, struct vhu_hdr *h)
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
bool vhu_postcopy_ack_shape(const struct vhu_hdr *h)
{
	return h->flags == VQ_VHU_VERSION && h->size == 8 &&
	       (h->request == 0 || h->request == VQ_VHU_SET_MEM_TABLE ||
		h->request == VQ_VHU_ADD_MEM_REG || h->request == VQ_VHU_REM_MEM_REG);
}

static int check_hdr(const struct vhu_hdr *h, bool reply, bool backend,
		     const struct req_desc **dp, char *err, size_t errlen)
{
	const struct req_desc *d = vhu_lookup_in(backend, h->request);

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
	struct vhu_hdr h;
	int r;

	get_hdr(hdr, &h);
	if (vhu_postcopy_ack_shape(&h)) {
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
		if (m->u.state.num == 0 || m->u.state.num > VQ_MAX_QUEUE_SIZE)
			return fail(err, errlen, -EINVAL,
				    "VHOST_USER_SET_VRING_NUM: queue size %u is not 1 to %u",
				    m->u.state.num, VQ_MAX_QUEUE_SIZE);
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

/* QEMU's postcopy acknowledgment: a u64, no fd. */
static int decode_postcopy_ack(const uint8_t *buf, size_t len, unsigned nfds,
			       const struct vhu_hdr *h, struct vq_vhu_msg *m,
			       char *err, size_t errlen)
{
	m->request = h->request;
	m->flags = h->flags;
	m->size = h->size;
	m->kind = VQ_VHU_P_POSTCOPY_ACK;
	if (len != VQ_VHU_HDR_SIZE + 8)
		return fail(err, errlen, -EMSGSIZE,
			    "vhost-user \"Migration\": a postcopy acknowledgment of %zu bytes, not 8",
			    len - VQ_VHU_HDR_SIZE);
	if (nfds)
		return fail(err, errlen, -EBADF,
			    "vhost-user \"Migration\": a postcopy acknowledgment with %u fds, not 0",
			    nfds);
	return parse_payload(m, buf + VQ_VHU_HDR_SIZE, NULL, 0);
}

/* The payload m carries as d's request or reply (a REPLY_ACK's u64, a
 * postcopy echo's request payload), checked against its size; the
 * header's flags and request already were. */
static int decode_kind(const struct req_desc *d, bool reply, bool ack,
		       size_t len, struct vq_vhu_msg *m, char *err, size_t errlen)
{
	char rule[48];

	if (reply && d->postcopy_echo && !ack)
		m->kind = d->req;
	else if (reply)
		m->kind = d->reply != VQ_VHU_P_NONE ? d->reply :
			  ack ? VQ_VHU_P_U64 : VQ_VHU_P_NONE;
	else
		m->kind = d->req;
	if (reply && m->kind == VQ_VHU_P_NONE)
		return fail(err, errlen, -EPROTO, "%s: a reply, but it has none", d->name);
	/* An empty GET_CONFIG reply is the back-end's error report (spec). */
	if (reply && m->kind == VQ_VHU_P_CONFIG && m->size == 0)
		return fail(err, errlen, -EIO,
			    "VHOST_USER_GET_CONFIG: the back-end refused it (an empty reply)");
	if (!size_ok(m->kind, m->size))
		return fail(err, errlen, -EMSGSIZE, "%s: a %u-byte payload, not %s",
			    d->name, m->size, size_rule(m->kind, rule, sizeof(rule)));
	if (len != VQ_VHU_HDR_SIZE + (size_t)m->size)
		return fail(err, errlen, -EMSGSIZE,
			    "%s: %zu bytes after a header that announces %u", d->name,
			    len - VQ_VHU_HDR_SIZE, m->size);
	return 0;
}

/* m takes the want fds it must carry (-1: "0 or 1, closed unused"). */
static int take_fds(struct vq_vhu_msg *m, const struct req_desc *d, int want,
		    const int *fds, unsigned nfds, char *err, size_t errlen)
{
	if (want < 0) {
		close_all(fds, nfds);   /* spec: close it without using it */
		return 0;
	}
	if ((unsigned)want != nfds)
		return fail(err, errlen, -EBADF, "%s: %u fds, expected %d", d->name,
			    nfds, want);
	for (unsigned i = 0; i < nfds; i++) {
		if (fds[i] < 0)
			return fail(err, errlen, -EBADF, "%s: fd %d is not valid",
				    d->name, fds[i]);
		m->fds[i] = fds[i];
	}
	m->nfds = nfds;
	return 0;
}

/* A message's header and payload, then its fds; on any error every fd is
 * closed. */
static int decode_msg(const uint8_t *buf, size_t len, const int *fds,
		      unsigned nfds, unsigned nqueues, bool reply, bool backend,
		      uint32_t expect, bool ack, struct vq_vhu_msg *m, char *err,
		      size_t errlen)
{
	const struct req_desc *d = NULL;
	struct vhu_hdr h;
	int r;

	if (nfds > VQ_VHU_MAX_FDS)
		return fail(err, errlen, -EBADF,
			    "vhost-user \"Communication\": %u fds, at most %u in one message",
			    nfds, VQ_VHU_MAX_FDS);
	if (len < VQ_VHU_HDR_SIZE)
		return fail(err, errlen, -EMSGSIZE,
			    "vhost-user \"Header\": %zu bytes, less than the %u-byte header",
			    len, VQ_VHU_HDR_SIZE);
	get_hdr(buf, &h);
	if (!reply && !backend && vhu_postcopy_ack_shape(&h))
		return decode_postcopy_ack(buf, len, nfds, &h, m, err, errlen);
	r = check_hdr(&h, reply, backend, &d, err, errlen);
	if (r)
		return r;
	if (reply && h.request != expect)
		return fail(err, errlen, -EPROTO,
			    "vhost-user \"Communication\": a reply to request %u, expected %u",
			    h.request, expect);
	m->request = h.request;
	m->flags = h.flags;
	m->size = h.size;
	r = decode_kind(d, reply, ack, len, m, err, errlen);
	if (!r)
		r = parse_payload(m, buf + VQ_VHU_HDR_SIZE, err, errlen);
	if (r)
		return r;
	if (backend)
		r = iotlb_ok(m, VQ_VHU_IOTLB_MISS, VQ_VHU_IOTLB_ACCESS_FAIL, err, errlen);
	else if (!reply)
		r = check_fields(m, nqueues, d, err, errlen);
	if (r)
		return r;
	return take_fds(m, d, reply ? (m->kind == d->reply && d->reply_fds == FD_ONE) :
			fds_expected(m, d->fds), fds, nfds, err, errlen);
}

static int decode(const void *buf, size_t len, const int *fds, unsigned nfds,
		  unsigned nqueues, bool reply, bool backend, uint32_t expect,
		  bool ack, struct vq_vhu_msg *m, char *err, size_t errlen)
{
	int r;

	memset(m, 0, sizeof(*m));
	if (err && errlen)
		err[0] = '\0';
	r = decode_msg(buf, len, fds, nfds, nqueues, reply, backend, expect, ack,
		       m, err, errlen);
	if (r) {
		close_all(fds, nfds);
		m->nfds = 0;
	}
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
