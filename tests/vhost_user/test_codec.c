// SPDX-License-Identifier: MIT
/*
 * The vhost-user codec on its own: every header, size, fd-count and field
 * rule of docs/interop/vhost-user.rst that the codec enforces, and that
 * every fd it does not keep is closed on every path.
 */
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <virtq/vhost_user.h>

#include "spec_msg.h"
#include "vq_test.h"

#define NQ 4

static int efd(void)
{
	int fd = eventfd(0, EFD_CLOEXEC);

	CHECK(fd >= 0);
	return fd;
}

static int fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

/* Raw message builder: header then payload words. */
struct raw {
	uint8_t b[VQ_VHU_MSG_MAX + 64];
	size_t len;
};

static void raw_hdr(struct raw *r, uint32_t req, uint32_t flags, uint32_t size)
{
	memcpy(r->b, &req, 4);
	memcpy(r->b + 4, &flags, 4);
	memcpy(r->b + 8, &size, 4);
	r->len = 12;
}

static void raw_u32(struct raw *r, uint32_t v)
{
	memcpy(r->b + r->len, &v, 4);
	r->len += 4;
}

static void raw_u64(struct raw *r, uint64_t v)
{
	memcpy(r->b + r->len, &v, 8);
	r->len += 8;
}

static int dec(struct raw *r, int *fds, unsigned nfds, struct vq_vhu_msg *m)
{
	char err[128];
	int ret = vq_vhu_decode_request(r->b, r->len, fds, nfds, NQ, m, err,
					sizeof(err));

	if (ret) {
		fprintf(stderr, "   decode: %d %s\n", ret, err);
		CHECK(spec_section_first(err));
	}
	return ret;
}

static void hdr_get_features_ok(void)
{
	struct raw r;
	struct vq_vhu_msg m;
	uint32_t sz;

	raw_hdr(&r, VQ_VHU_GET_FEATURES, VQ_VHU_VERSION, 0);
	CHECK_EQ(vq_vhu_check_request_hdr(r.b, &sz), 0);
	CHECK_EQ(sz, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), 0);
	CHECK_EQ(m.request, VQ_VHU_GET_FEATURES);
	CHECK_EQ(m.kind, VQ_VHU_P_NONE);
	CHECK(vq_vhu_request_has_reply(VQ_VHU_GET_FEATURES));
	CHECK(!vq_vhu_request_has_reply(VQ_VHU_SET_FEATURES));
	CHECK(!strcmp(vq_vhu_request_name(VQ_VHU_SET_VRING_KICK), "VHOST_USER_SET_VRING_KICK"));
}

static void hdr_version_must_be_1(void)
{
	struct raw r;
	struct vq_vhu_msg m;
	uint32_t sz;

	raw_hdr(&r, VQ_VHU_GET_FEATURES, 2, 0);
	CHECK_EQ(vq_vhu_check_request_hdr(r.b, &sz), -EINVAL);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
	raw_hdr(&r, VQ_VHU_GET_FEATURES, 0, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
}

static void hdr_reply_flag_in_request_refused(void)
{
	struct raw r;
	struct vq_vhu_msg m;

	raw_hdr(&r, VQ_VHU_GET_FEATURES, VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
	raw_hdr(&r, VQ_VHU_GET_FEATURES, VQ_VHU_VERSION | 0x10, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
	/* need_reply is legal on any request */
	raw_hdr(&r, VQ_VHU_SET_OWNER, VQ_VHU_VERSION | VQ_VHU_FLAG_NEED_REPLY, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), 0);
	CHECK(m.flags & VQ_VHU_FLAG_NEED_REPLY);
}

static void unknown_request_refused_fds_closed(void)
{
	struct raw r;
	struct vq_vhu_msg m;
	int fds[2] = { efd(), efd() };
	uint32_t sz;

	raw_hdr(&r, 23 /* SET_VRING_ENDIAN: not implemented */, VQ_VHU_VERSION, 0);
	CHECK_EQ(vq_vhu_check_request_hdr(r.b, &sz), -EOPNOTSUPP);
	CHECK_EQ(dec(&r, fds, 2, &m), -EOPNOTSUPP);
	CHECK(!fd_open(fds[0]) && !fd_open(fds[1]));
	raw_hdr(&r, 1000, VQ_VHU_VERSION, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EOPNOTSUPP);
	raw_hdr(&r, 0, VQ_VHU_VERSION, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EOPNOTSUPP);
}

static void truncated_header_and_payload(void)
{
	struct raw r;
	struct vq_vhu_msg m;
	int fd = efd();

	raw_hdr(&r, VQ_VHU_SET_FEATURES, VQ_VHU_VERSION, 8);
	r.len = 7;
	CHECK_EQ(dec(&r, &fd, 1, &m), -EMSGSIZE);
	CHECK(!fd_open(fd));
	raw_hdr(&r, VQ_VHU_SET_FEATURES, VQ_VHU_VERSION, 8);
	raw_u32(&r, 1);         /* only 4 of 8 payload bytes */
	CHECK_EQ(dec(&r, NULL, 0, &m), -EMSGSIZE);
}

static void oversized_payload_refused(void)
{
	struct raw r;
	struct vq_vhu_msg m;
	uint32_t sz;

	/* size field larger than the request allows: refused on the header */
	raw_hdr(&r, VQ_VHU_SET_FEATURES, VQ_VHU_VERSION, 16);
	CHECK_EQ(vq_vhu_check_request_hdr(r.b, &sz), -EMSGSIZE);
	raw_u64(&r, 1);
	raw_u64(&r, 2);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EMSGSIZE);
	raw_hdr(&r, VQ_VHU_SET_MEM_TABLE, VQ_VHU_VERSION, 0x10000);
	CHECK_EQ(vq_vhu_check_request_hdr(r.b, &sz), -EMSGSIZE);
	/* trailing bytes past the declared size */
	raw_hdr(&r, VQ_VHU_SET_FEATURES, VQ_VHU_VERSION, 8);
	raw_u64(&r, 1);
	raw_u32(&r, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EMSGSIZE);
	/* a payload on a request that has none */
	raw_hdr(&r, VQ_VHU_GET_FEATURES, VQ_VHU_VERSION, 8);
	raw_u64(&r, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EMSGSIZE);
}

static void vring_kick_fd_counts(void)
{
	struct raw r;
	struct vq_vhu_msg m;
	int fd, fds[2];

	/* fd expected, none given */
	raw_hdr(&r, VQ_VHU_SET_VRING_KICK, VQ_VHU_VERSION, 8);
	raw_u64(&r, 1);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EBADF);
	/* one given: kept */
	fd = efd();
	CHECK_EQ(dec(&r, &fd, 1, &m), 0);
	CHECK_EQ(m.nfds, 1);
	CHECK_EQ(m.fds[0], fd);
	CHECK_EQ(m.u.vring_fd.index, 1);
	CHECK(!m.u.vring_fd.nofd);
	vq_vhu_msg_close_fds(&m);
	CHECK(!fd_open(fd));
	/* two given: both closed */
	fds[0] = efd();
	fds[1] = efd();
	CHECK_EQ(dec(&r, fds, 2, &m), -EBADF);
	CHECK(!fd_open(fds[0]) && !fd_open(fds[1]));
	/* "no fd" flag but an fd came */
	raw_hdr(&r, VQ_VHU_SET_VRING_CALL, VQ_VHU_VERSION, 8);
	raw_u64(&r, 2 | VQ_VHU_VRING_NOFD);
	fd = efd();
	CHECK_EQ(dec(&r, &fd, 1, &m), -EBADF);
	CHECK(!fd_open(fd));
	CHECK_EQ(dec(&r, NULL, 0, &m), 0);
	CHECK(m.u.vring_fd.nofd);
	/* reserved bits */
	raw_hdr(&r, VQ_VHU_SET_VRING_ERR, VQ_VHU_VERSION, 8);
	raw_u64(&r, 1u << 9 | VQ_VHU_VRING_NOFD);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
}

static void fd_on_request_without_fds(void)
{
	struct raw r;
	struct vq_vhu_msg m;
	int fd = efd();

	raw_hdr(&r, VQ_VHU_SET_FEATURES, VQ_VHU_VERSION, 8);
	raw_u64(&r, 0);
	CHECK_EQ(dec(&r, &fd, 1, &m), -EBADF);
	CHECK(!fd_open(fd));
}

static void raw_region(struct raw *r, uint64_t gpa, uint64_t size,
		       uint64_t ua, uint64_t off)
{
	raw_u64(r, gpa);
	raw_u64(r, size);
	raw_u64(r, ua);
	raw_u64(r, off);
}

static void mem_table(struct raw *r, unsigned n, const uint64_t (*reg)[4])
{
	raw_hdr(r, VQ_VHU_SET_MEM_TABLE, VQ_VHU_VERSION, 8 + 32 * n);
	raw_u32(r, n);
	raw_u32(r, 0);
	for (unsigned i = 0; i < n; i++)
		raw_region(r, reg[i][0], reg[i][1], reg[i][2], reg[i][3]);
}

static void mem_table_rules(void)
{
	static const uint64_t good[2][4] = {
		{ 0, 0x10000, 0x7f0000000000, 0 },
		{ 0x100000, 0x10000, 0x7f0000100000, 0x1000 },
	};
	static const uint64_t ovl_gpa[2][4] = {
		{ 0, 0x10000, 0x7f0000000000, 0 },
		{ 0x8000, 0x10000, 0x7f0000100000, 0 },
	};
	static const uint64_t ovl_ua[2][4] = {
		{ 0, 0x10000, 0x7f0000000000, 0 },
		{ 0x100000, 0x10000, 0x7f0000008000, 0 },
	};
	static const uint64_t zero[1][4] = { { 0, 0, 0x1000, 0 } };
	static const uint64_t wrap[1][4] = { { ~0ull - 10, 0x1000, 0x1000, 0 } };
	uint64_t nine[9][4];
	struct raw r;
	struct vq_vhu_msg m;
	int fds[VQ_VHU_MAX_FDS + 1];

	mem_table(&r, 2, good);
	fds[0] = efd();
	fds[1] = efd();
	CHECK_EQ(dec(&r, fds, 2, &m), 0);
	CHECK_EQ(m.u.mem.nregions, 2);
	CHECK_EQ(m.u.mem.regions[1].gpa, 0x100000);
	CHECK_EQ(m.u.mem.regions[1].mmap_offset, 0x1000);
	CHECK_EQ(m.nfds, 2);
	vq_vhu_msg_close_fds(&m);
	/* fewer fds than regions */
	fds[0] = efd();
	CHECK_EQ(dec(&r, fds, 1, &m), -EBADF);
	CHECK(!fd_open(fds[0]));
	/* overlapping guest or user ranges */
	fds[0] = efd();
	fds[1] = efd();
	mem_table(&r, 2, ovl_gpa);
	CHECK_EQ(dec(&r, fds, 2, &m), -EINVAL);
	CHECK(!fd_open(fds[0]) && !fd_open(fds[1]));
	mem_table(&r, 2, ovl_ua);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
	mem_table(&r, 1, zero);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
	mem_table(&r, 1, wrap);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
	/* region count 0 and 9 */
	raw_hdr(&r, VQ_VHU_SET_MEM_TABLE, VQ_VHU_VERSION, 8 + 32);
	raw_u32(&r, 0);
	raw_u32(&r, 0);
	raw_region(&r, 0, 0x1000, 0x1000, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
	for (unsigned i = 0; i < 9; i++) {
		nine[i][0] = i * 0x10000ull;
		nine[i][1] = 0x1000;
		nine[i][2] = 0x7f0000000000ull + i * 0x10000ull;
		nine[i][3] = 0;
	}
	mem_table(&r, 9, nine);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EMSGSIZE);
	/* count says 2, size holds 1 */
	raw_hdr(&r, VQ_VHU_SET_MEM_TABLE, VQ_VHU_VERSION, 8 + 32);
	raw_u32(&r, 2);
	raw_u32(&r, 0);
	raw_region(&r, 0, 0x1000, 0x1000, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EMSGSIZE);
	/* more fds than one message may carry */
	for (unsigned i = 0; i < VQ_VHU_MAX_FDS + 1; i++)
		fds[i] = efd();
	mem_table(&r, 2, good);
	CHECK_EQ(dec(&r, fds, VQ_VHU_MAX_FDS + 1, &m), -EBADF);
	for (unsigned i = 0; i < VQ_VHU_MAX_FDS + 1; i++)
		CHECK(!fd_open(fds[i]));
}

static void rem_mem_reg_fd_closed_unused(void)
{
	struct raw r;
	struct vq_vhu_msg m;
	int fd = efd();

	raw_hdr(&r, VQ_VHU_REM_MEM_REG, VQ_VHU_VERSION, 40);
	raw_u64(&r, 0);
	raw_region(&r, 0x1000, 0x2000, 0x7000, 0);
	CHECK_EQ(dec(&r, &fd, 1, &m), 0);
	CHECK_EQ(m.nfds, 0);
	CHECK(!fd_open(fd));
	CHECK_EQ(m.u.region.size, 0x2000);
	raw_hdr(&r, VQ_VHU_ADD_MEM_REG, VQ_VHU_VERSION, 40);
	raw_u64(&r, 0);
	raw_region(&r, 0x1000, 0x2000, 0x7000, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EBADF);
}

static void vring_index_past_queue_count(void)
{
	struct raw r;
	struct vq_vhu_msg m;
	int fd = efd();

	raw_hdr(&r, VQ_VHU_SET_VRING_NUM, VQ_VHU_VERSION, 8);
	raw_u32(&r, NQ);
	raw_u32(&r, 256);
	CHECK_EQ(dec(&r, NULL, 0, &m), -ERANGE);
	raw_hdr(&r, VQ_VHU_SET_VRING_KICK, VQ_VHU_VERSION, 8);
	raw_u64(&r, NQ);
	CHECK_EQ(dec(&r, &fd, 1, &m), -ERANGE);
	CHECK(!fd_open(fd));
	raw_hdr(&r, VQ_VHU_SET_VRING_ADDR, VQ_VHU_VERSION, 40);
	raw_u32(&r, 0xffffffff);
	raw_u32(&r, 0);
	raw_u64(&r, 0);
	raw_u64(&r, 0);
	raw_u64(&r, 0);
	raw_u64(&r, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), -ERANGE);
}

static void vring_num_range(void)
{
	struct raw r;
	struct vq_vhu_msg m;

	raw_hdr(&r, VQ_VHU_SET_VRING_NUM, VQ_VHU_VERSION, 8);
	raw_u32(&r, 0);
	raw_u32(&r, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
	raw_hdr(&r, VQ_VHU_SET_VRING_NUM, VQ_VHU_VERSION, 8);
	raw_u32(&r, 0);
	raw_u32(&r, 32769);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
	raw_hdr(&r, VQ_VHU_SET_VRING_NUM, VQ_VHU_VERSION, 8);
	raw_u32(&r, 0);
	raw_u32(&r, 32768);
	CHECK_EQ(dec(&r, NULL, 0, &m), 0);
	CHECK_EQ(m.u.state.num, 32768);
}

static void field_rules(void)
{
	struct raw r;
	struct vq_vhu_msg m;

	/* reserved but ignored: DPDK virtio-user puts the ring size there */
	raw_hdr(&r, VQ_VHU_GET_VRING_BASE, VQ_VHU_VERSION, 8);
	raw_u32(&r, 0);
	raw_u32(&r, 256);
	CHECK_EQ(dec(&r, NULL, 0, &m), 0);
	raw_hdr(&r, VQ_VHU_SET_VRING_ENABLE, VQ_VHU_VERSION, 8);
	raw_u32(&r, 0);
	raw_u32(&r, 2);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
	raw_hdr(&r, VQ_VHU_SET_STATUS, VQ_VHU_VERSION, 8);
	raw_u64(&r, 0x100);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
	raw_hdr(&r, VQ_VHU_SET_VRING_ADDR, VQ_VHU_VERSION, 40);
	raw_u32(&r, 0);
	raw_u32(&r, 2);
	raw_u64(&r, 0);
	raw_u64(&r, 0);
	raw_u64(&r, 0);
	raw_u64(&r, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
	/* config: size field must match the payload */
	raw_hdr(&r, VQ_VHU_SET_CONFIG, VQ_VHU_VERSION, 12 + 4);
	raw_u32(&r, 0);
	raw_u32(&r, 8);
	raw_u32(&r, 0);
	raw_u32(&r, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EMSGSIZE);
	raw_hdr(&r, VQ_VHU_SET_CONFIG, VQ_VHU_VERSION, 12 + 4);
	raw_u32(&r, 4);
	raw_u32(&r, 4);
	raw_u32(&r, 0);
	raw_u32(&r, 0xdeadbeef);
	CHECK_EQ(dec(&r, NULL, 0, &m), 0);
	CHECK_EQ(m.u.config.offset, 4);
	/* config bytes pass as they are (the word was written natively) */
	CHECK(memcmp(m.u.config.data, &(uint32_t){ 0xdeadbeef }, 4) == 0);
}

static void roundtrip(struct vq_vhu_msg *in)
{
	uint8_t buf[VQ_VHU_MSG_MAX];
	struct vq_vhu_msg out;
	ssize_t n = vq_vhu_encode(in, buf, sizeof(buf));
	int ret;

	CHECK(n >= 12);
	if (in->flags & VQ_VHU_FLAG_REPLY)
		ret = vq_vhu_decode_reply(buf, n, NULL, 0, in->request,
					  in->kind == VQ_VHU_P_U64 &&
					  !vq_vhu_request_has_reply(in->request),
					  &out, NULL, 0);
	else {
		int fds[VQ_VHU_MAX_FDS];
		unsigned nfds = in->kind == VQ_VHU_P_MEM ? in->u.mem.nregions :
				in->kind == VQ_VHU_P_VRING_FD && !in->u.vring_fd.nofd;

		for (unsigned i = 0; i < nfds; i++)
			fds[i] = efd();
		ret = vq_vhu_decode_request(buf, n, fds, nfds, NQ, &out, NULL, 0);
		CHECK_EQ(out.nfds, nfds);
		vq_vhu_msg_close_fds(&out);
	}
	CHECK_EQ(ret, 0);
	CHECK_EQ(out.request, in->request);
	CHECK_EQ(out.kind, in->kind);
	CHECK_EQ(out.size, (uint32_t)n - 12);
	switch (in->kind) {
	case VQ_VHU_P_U64:
	case VQ_VHU_P_POSTCOPY_ACK:
		CHECK_EQ(out.u.u64, in->u.u64);
		break;
	case VQ_VHU_P_REGION:
		CHECK(!memcmp(&out.u.region, &in->u.region, sizeof(in->u.region)));
		break;
	case VQ_VHU_P_STATE:
		CHECK_EQ(out.u.state.index, in->u.state.index);
		CHECK_EQ(out.u.state.num, in->u.state.num);
		break;
	case VQ_VHU_P_ADDR:
		CHECK(!memcmp(&out.u.addr, &in->u.addr, sizeof(in->u.addr)));
		break;
	case VQ_VHU_P_MEM:
		CHECK_EQ(out.u.mem.nregions, in->u.mem.nregions);
		CHECK(!memcmp(out.u.mem.regions, in->u.mem.regions,
			      in->u.mem.nregions * sizeof(struct vq_vhu_region)));
		break;
	case VQ_VHU_P_CONFIG:
		CHECK_EQ(out.u.config.size, in->u.config.size);
		CHECK(!memcmp(out.u.config.data, in->u.config.data, in->u.config.size));
		break;
	case VQ_VHU_P_VRING_FD:
		CHECK_EQ(out.u.vring_fd.index, in->u.vring_fd.index);
		CHECK_EQ(out.u.vring_fd.nofd, in->u.vring_fd.nofd);
		break;
	default:
		break;
	}
}

static void encode_decode_roundtrip(void)
{
	struct vq_vhu_msg m;

	memset(&m, 0, sizeof(m));
	m.request = VQ_VHU_SET_FEATURES;
	m.flags = VQ_VHU_VERSION;
	m.kind = VQ_VHU_P_U64;
	m.u.u64 = 0x140000000ull;
	roundtrip(&m);
	m.request = VQ_VHU_GET_FEATURES;
	m.flags = VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY;
	roundtrip(&m);
	/* flags would be the high half of the u64 above on a little-endian
	 * host and its low half on a big-endian one: set every field */
	memset(&m.u, 0, sizeof(m.u));
	m.request = VQ_VHU_SET_VRING_ADDR;
	m.flags = VQ_VHU_VERSION;
	m.kind = VQ_VHU_P_ADDR;
	m.u.addr.index = 3;
	m.u.addr.desc = 0x1000;
	m.u.addr.used = 0x3000;
	m.u.addr.avail = 0x2000;
	roundtrip(&m);
	memset(&m.u, 0, sizeof(m.u));
	m.request = VQ_VHU_SET_MEM_TABLE;
	m.kind = VQ_VHU_P_MEM;
	m.u.mem.nregions = 1;
	m.u.mem.regions[0] = (struct vq_vhu_region){ 0, 0x1000, 0x7000, 0 };
	roundtrip(&m);
	m.request = VQ_VHU_GET_VRING_BASE;
	m.flags = VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY;
	m.kind = VQ_VHU_P_STATE;
	m.u.state.index = 1;
	m.u.state.num = 0x80058003;
	roundtrip(&m);
	m.request = VQ_VHU_GET_CONFIG;
	m.kind = VQ_VHU_P_CONFIG;
	m.u.config.size = 6;
	memcpy(m.u.config.data, "abcdef", 6);
	roundtrip(&m);
	m.request = VQ_VHU_SET_VRING_KICK;
	m.flags = VQ_VHU_VERSION;
	m.kind = VQ_VHU_P_VRING_FD;
	m.u.vring_fd.index = 2;
	m.u.vring_fd.nofd = true;
	roundtrip(&m);
	/* REPLY_ACK for a request with no reply of its own */
	m.request = VQ_VHU_SET_VRING_NUM;
	m.flags = VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY;
	m.kind = VQ_VHU_P_U64;
	m.u.u64 = 0;
	roundtrip(&m);
	/* kind inconsistent with the table */
	m.request = VQ_VHU_SET_VRING_NUM;
	m.flags = VQ_VHU_VERSION;
	m.kind = VQ_VHU_P_ADDR;
	CHECK_EQ(vq_vhu_encode(&m, (uint8_t[64]){0}, 64), -EINVAL);
}

static void reply_rules(void)
{
	struct raw r;
	struct vq_vhu_msg m;
	int fd = efd();

	raw_hdr(&r, VQ_VHU_GET_FEATURES, VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY, 8);
	raw_u64(&r, 42);
	CHECK_EQ(vq_vhu_decode_reply(r.b, r.len, NULL, 0, VQ_VHU_GET_PROTOCOL_FEATURES,
				     false, &m, NULL, 0), -EPROTO);
	CHECK_EQ(vq_vhu_decode_reply(r.b, r.len, &fd, 1, VQ_VHU_GET_FEATURES, false,
				     &m, NULL, 0), -EBADF);
	CHECK(!fd_open(fd));
	CHECK_EQ(vq_vhu_decode_reply(r.b, r.len, NULL, 0, VQ_VHU_GET_FEATURES, false,
				     &m, NULL, 0), 0);
	CHECK_EQ(m.u.u64, 42);
	/* no reply flag */
	raw_hdr(&r, VQ_VHU_GET_FEATURES, VQ_VHU_VERSION, 8);
	raw_u64(&r, 42);
	CHECK_EQ(vq_vhu_decode_reply(r.b, r.len, NULL, 0, VQ_VHU_GET_FEATURES, false,
				     &m, NULL, 0), -EINVAL);
	/* an ack nobody asked for */
	raw_hdr(&r, VQ_VHU_SET_OWNER, VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY, 8);
	raw_u64(&r, 0);
	CHECK_EQ(vq_vhu_decode_reply(r.b, r.len, NULL, 0, VQ_VHU_SET_OWNER, false,
				     &m, NULL, 0), -EPROTO);
	CHECK_EQ(vq_vhu_decode_reply(r.b, r.len, NULL, 0, VQ_VHU_SET_OWNER, true,
				     &m, NULL, 0), 0);
	/* truncated reply */
	raw_hdr(&r, VQ_VHU_GET_VRING_BASE, VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY, 8);
	raw_u32(&r, 0);
	CHECK_EQ(vq_vhu_decode_reply(r.b, r.len, NULL, 0, VQ_VHU_GET_VRING_BASE,
				     false, &m, NULL, 0), -EMSGSIZE);
	/* empty GET_CONFIG reply = error from the back-end */
	raw_hdr(&r, VQ_VHU_GET_CONFIG, VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY, 0);
	CHECK_EQ(vq_vhu_decode_reply(r.b, r.len, NULL, 0, VQ_VHU_GET_CONFIG,
				     false, &m, NULL, 0), -EIO);
}

/* SET_LOG_BASE (LOG_SHMFD): a log description and one fd; its reply has no
 * payload. */
static void log_base_rules(void)
{
	struct raw r;
	struct vq_vhu_msg m, rep = { .request = VQ_VHU_SET_LOG_BASE,
				     .flags = VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY,
				     .kind = VQ_VHU_P_EMPTY };
	uint8_t buf[VQ_VHU_MSG_MAX];
	int fd = efd();

	raw_hdr(&r, VQ_VHU_SET_LOG_BASE, VQ_VHU_VERSION, 16);
	raw_u64(&r, 0x1000);
	raw_u64(&r, 0x2000);
	CHECK_EQ(dec(&r, &fd, 1, &m), 0);
	CHECK_EQ(m.kind, VQ_VHU_P_LOG);
	CHECK_EQ(m.u.log.size, 0x1000);
	CHECK_EQ(m.u.log.offset, 0x2000);
	CHECK_EQ(m.nfds, 1);
	vq_vhu_msg_close_fds(&m);
	CHECK(vq_vhu_request_has_reply(VQ_VHU_SET_LOG_BASE));
	/* no fd, an empty log, a log whose end wraps, a u64 payload */
	CHECK_EQ(dec(&r, NULL, 0, &m), -EBADF);
	raw_hdr(&r, VQ_VHU_SET_LOG_BASE, VQ_VHU_VERSION, 16);
	raw_u64(&r, 0);
	raw_u64(&r, 0);
	fd = efd();
	CHECK_EQ(dec(&r, &fd, 1, &m), -EINVAL);
	CHECK(!fd_open(fd));
	raw_hdr(&r, VQ_VHU_SET_LOG_BASE, VQ_VHU_VERSION, 16);
	raw_u64(&r, 0x1000);
	raw_u64(&r, UINT64_MAX - 0x10);
	fd = efd();
	CHECK_EQ(dec(&r, &fd, 1, &m), -EINVAL);
	raw_hdr(&r, VQ_VHU_SET_LOG_BASE, VQ_VHU_VERSION, 8);
	raw_u64(&r, 0x1000);
	fd = efd();
	CHECK_EQ(dec(&r, &fd, 1, &m), -EMSGSIZE);
	/* SET_LOG_FD: one fd, no payload */
	raw_hdr(&r, VQ_VHU_SET_LOG_FD, VQ_VHU_VERSION, 0);
	fd = efd();
	CHECK_EQ(dec(&r, &fd, 1, &m), 0);
	vq_vhu_msg_close_fds(&m);
	/* the reply */
	CHECK_EQ(vq_vhu_encode(&rep, buf, sizeof(buf)), (ssize_t)VQ_VHU_HDR_SIZE);
	CHECK_EQ(vq_vhu_decode_reply(buf, VQ_VHU_HDR_SIZE, NULL, 0, VQ_VHU_SET_LOG_BASE,
				     false, &m, NULL, 0), 0);
	raw_hdr(&r, VQ_VHU_SET_LOG_BASE, VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY, 8);
	raw_u64(&r, 0);
	CHECK_EQ(vq_vhu_decode_reply(r.b, r.len, NULL, 0, VQ_VHU_SET_LOG_BASE,
				     false, &m, NULL, 0), -EMSGSIZE);
}

/* vhost-user "VHOST_USER_SEND_RARP": a u64 whose first six bytes are the
 * MAC, no fd, no reply of its own. */
static void send_rarp_rules(void)
{
	static const uint8_t wire[8] = { 0x52, 0x54, 0x00, 0xab, 0xcd, 0xef, 0, 0 };
	struct raw r;
	struct vq_vhu_msg m;
	int fd;

	raw_hdr(&r, VQ_VHU_SEND_RARP, VQ_VHU_VERSION, 8);
	memcpy(r.b + r.len, wire, 8);
	r.len += 8;
	CHECK_EQ(dec(&r, NULL, 0, &m), 0);
	CHECK_EQ(m.kind, VQ_VHU_P_U64);
	/* the payload as it came, in memory order, on any host */
	CHECK(memcmp(&m.u.u64, wire, 8) == 0);
	CHECK(!vq_vhu_request_has_reply(VQ_VHU_SEND_RARP));
	CHECK(!strcmp(vq_vhu_request_name(VQ_VHU_SEND_RARP), "VHOST_USER_SEND_RARP"));
	fd = efd();
	CHECK_EQ(dec(&r, &fd, 1, &m), -EBADF);
	CHECK(!fd_open(fd));
	/* the six bytes alone are not a u64 */
	raw_hdr(&r, VQ_VHU_SEND_RARP, VQ_VHU_VERSION, 6);
	memcpy(r.b + r.len, wire, 6);
	r.len += 6;
	CHECK_EQ(dec(&r, NULL, 0, &m), -EMSGSIZE);
}

/* vhost-user "VHOST_USER_NET_SET_MTU": a u64, no fd, no reply of its own. */
static void net_set_mtu_rules(void)
{
	struct raw r;
	struct vq_vhu_msg m;
	uint64_t v = 9000;

	raw_hdr(&r, VQ_VHU_NET_SET_MTU, VQ_VHU_VERSION, 8);
	memcpy(r.b + r.len, &v, 8);
	r.len += 8;
	CHECK_EQ(dec(&r, NULL, 0, &m), 0);
	CHECK_EQ(m.kind, VQ_VHU_P_U64);
	CHECK_EQ(m.u.u64, 9000);
	CHECK(!vq_vhu_request_has_reply(VQ_VHU_NET_SET_MTU));
	CHECK(!strcmp(vq_vhu_request_name(VQ_VHU_NET_SET_MTU), "VHOST_USER_NET_SET_MTU"));
	raw_hdr(&r, VQ_VHU_NET_SET_MTU, VQ_VHU_VERSION, 2);
	memcpy(r.b + r.len, &v, 2);
	r.len += 2;
	CHECK_EQ(dec(&r, NULL, 0, &m), -EMSGSIZE);
}

/* ---- IOMMU support: VHOST_USER_IOTLB_MSG and the back-end channel ---- */

static void raw_iotlb(struct raw *r, uint32_t req, uint32_t flags, uint64_t iova,
		      uint64_t size, uint64_t ua, uint8_t perm, uint8_t type)
{
	raw_hdr(r, req, flags, 32);
	raw_u64(r, iova);
	raw_u64(r, size);
	raw_u64(r, ua);
	memset(r->b + r->len, 0, 8);
	r->b[r->len] = perm;
	r->b[r->len + 1] = type;
	r->len += 8;
}

static void fe_iotlb(struct raw *r, uint64_t iova, uint64_t size, uint64_t ua,
		     uint8_t perm, uint8_t type)
{
	raw_iotlb(r, VQ_VHU_IOTLB_MSG, VQ_VHU_VERSION, iova, size, ua, perm, type);
}

static int dec_be(struct raw *r, int *fds, unsigned nfds, struct vq_vhu_msg *m)
{
	char err[128];
	int ret = vq_vhu_decode_backend_request(r->b, r->len, fds, nfds, m, err,
						sizeof(err));

	if (ret) {
		fprintf(stderr, "   decode (back-end channel): %d %s\n", ret, err);
		CHECK(spec_section_first(err));
	}
	return ret;
}

static void be_iotlb(struct raw *r, uint64_t iova, uint8_t perm, uint8_t type)
{
	raw_iotlb(r, VQ_VHU_BACKEND_IOTLB_MSG, VQ_VHU_VERSION, iova, 0, 0, perm, type);
}

/* "VHOST_USER_IOTLB_MSG": a struct vhost_iotlb_msg of 32 bytes (iova, size,
 * uaddr, perm, type, padding), no fd, no reply of its own; the back-end's
 * VHOST_USER_BACKEND_IOTLB_MSG carries the same struct the other way. */
static void iotlb_msg_roundtrip(void)
{
	static const struct { uint8_t perm, type; } fe[] = {
		{ VQ_VHU_IOTLB_PERM_RO, VQ_VHU_IOTLB_UPDATE },
		{ VQ_VHU_IOTLB_PERM_WO, VQ_VHU_IOTLB_UPDATE },
		{ VQ_VHU_IOTLB_PERM_RW, VQ_VHU_IOTLB_UPDATE },
		{ 0, VQ_VHU_IOTLB_INVALIDATE },
	};
	static const struct { uint8_t perm, type; } be[] = {
		{ VQ_VHU_IOTLB_PERM_RO, VQ_VHU_IOTLB_MISS },
		{ VQ_VHU_IOTLB_PERM_WO, VQ_VHU_IOTLB_MISS },
		{ VQ_VHU_IOTLB_PERM_RW, VQ_VHU_IOTLB_ACCESS_FAIL },
	};
	uint8_t buf[VQ_VHU_MSG_MAX];
	struct vq_vhu_msg m, out;
	uint64_t v;
	ssize_t n;

	CHECK(!vq_vhu_request_has_reply(VQ_VHU_IOTLB_MSG));
	CHECK(!vq_vhu_request_has_reply(VQ_VHU_SET_BACKEND_REQ_FD));
	CHECK(!strcmp(vq_vhu_request_name(VQ_VHU_IOTLB_MSG), "VHOST_USER_IOTLB_MSG"));
	CHECK(!strcmp(vq_vhu_request_name(VQ_VHU_SET_BACKEND_REQ_FD),
		      "VHOST_USER_SET_BACKEND_REQ_FD"));
	for (unsigned i = 0; i < sizeof(fe) / sizeof(fe[0]); i++) {
		memset(&m, 0, sizeof(m));
		m.request = VQ_VHU_IOTLB_MSG;
		m.flags = VQ_VHU_VERSION | VQ_VHU_FLAG_NEED_REPLY;
		m.kind = VQ_VHU_P_IOTLB;
		m.u.iotlb.iova = 0x123456789000ull + i;
		m.u.iotlb.size = 0x3000;
		m.u.iotlb.uaddr = 0x7f0000042000ull;
		m.u.iotlb.perm = fe[i].perm;
		m.u.iotlb.type = fe[i].type;
		memset(buf, 0xa5, sizeof(buf));
		n = vq_vhu_encode(&m, buf, sizeof(buf));
		CHECK_EQ(n, VQ_VHU_HDR_SIZE + 32);
		/* the wire layout: three u64, perm, type, six bytes of padding */
		memcpy(&v, buf + 12, 8);
		CHECK_EQ(v, m.u.iotlb.iova);
		memcpy(&v, buf + 20, 8);
		CHECK_EQ(v, 0x3000);
		memcpy(&v, buf + 28, 8);
		CHECK_EQ(v, 0x7f0000042000ull);
		CHECK_EQ(buf[36], fe[i].perm);
		CHECK_EQ(buf[37], fe[i].type);
		for (unsigned k = 38; k < 44; k++)
			CHECK_EQ(buf[k], 0);
		CHECK_EQ(vq_vhu_decode_request(buf, n, NULL, 0, NQ, &out, NULL, 0), 0);
		CHECK_EQ(out.request, VQ_VHU_IOTLB_MSG);
		CHECK_EQ(out.kind, VQ_VHU_P_IOTLB);
		CHECK_EQ(out.size, 32);
		CHECK(out.flags & VQ_VHU_FLAG_NEED_REPLY);
		CHECK_EQ(out.u.iotlb.iova, m.u.iotlb.iova);
		CHECK_EQ(out.u.iotlb.size, m.u.iotlb.size);
		CHECK_EQ(out.u.iotlb.uaddr, m.u.iotlb.uaddr);
		CHECK_EQ(out.u.iotlb.perm, fe[i].perm);
		CHECK_EQ(out.u.iotlb.type, fe[i].type);
		CHECK_EQ(out.nfds, 0);
		/* request 22 is no request on the back-end channel */
		CHECK_EQ(vq_vhu_decode_backend_request(buf, n, NULL, 0, &out, NULL, 0),
			 -EOPNOTSUPP);
	}
	for (unsigned i = 0; i < sizeof(be) / sizeof(be[0]); i++) {
		memset(&m, 0, sizeof(m));
		m.request = VQ_VHU_BACKEND_IOTLB_MSG;
		m.flags = VQ_VHU_VERSION;
		m.kind = VQ_VHU_P_IOTLB;
		m.u.iotlb.iova = 0xfedcba987654ull;
		m.u.iotlb.perm = be[i].perm;
		m.u.iotlb.type = be[i].type;
		n = vq_vhu_encode_backend_request(&m, buf, sizeof(buf));
		CHECK_EQ(n, VQ_VHU_HDR_SIZE + 32);
		memcpy(&v, buf, 8);
		CHECK_EQ(v & 0xffffffff, VQ_VHU_BACKEND_IOTLB_MSG);
		CHECK_EQ(vq_vhu_decode_backend_request(buf, n, NULL, 0, &out, NULL, 0), 0);
		CHECK_EQ(out.request, VQ_VHU_BACKEND_IOTLB_MSG);
		CHECK_EQ(out.kind, VQ_VHU_P_IOTLB);
		CHECK_EQ(out.u.iotlb.iova, m.u.iotlb.iova);
		CHECK_EQ(out.u.iotlb.perm, be[i].perm);
		CHECK_EQ(out.u.iotlb.type, be[i].type);
		/* request 1 on the front-end channel is GET_FEATURES: no payload */
		CHECK_EQ(vq_vhu_decode_request(buf, n, NULL, 0, NQ, &out, NULL, 0),
			 -EMSGSIZE);
	}
	/* the back-end channel's encoder: requests only, its own table */
	m.flags = VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY;
	CHECK_EQ(vq_vhu_encode_backend_request(&m, buf, sizeof(buf)), -EINVAL);
	m.flags = VQ_VHU_VERSION;
	m.request = VQ_VHU_BACKEND_REQUEST_MAX + 1;
	CHECK_EQ(vq_vhu_encode_backend_request(&m, buf, sizeof(buf)), -EINVAL);
	m.request = 0;
	CHECK_EQ(vq_vhu_encode_backend_request(&m, buf, sizeof(buf)), -EINVAL);
	m.request = VQ_VHU_BACKEND_IOTLB_MSG;
	m.kind = VQ_VHU_P_U64;
	CHECK_EQ(vq_vhu_encode_backend_request(&m, buf, sizeof(buf)), -EINVAL);
	m.kind = VQ_VHU_P_IOTLB;
	CHECK_EQ(vq_vhu_encode_backend_request(&m, buf, VQ_VHU_HDR_SIZE + 31), -ENOBUFS);
}

/* "IOMMU support": the front-end sends updates and invalidations, the
 * back-end misses and access failures; anything else on either channel is
 * refused (and an fd that came with it closed). */
static void iotlb_msg_type_per_channel(void)
{
	static const uint8_t fe_bad[] = { 0, VQ_VHU_IOTLB_MISS, VQ_VHU_IOTLB_ACCESS_FAIL, 5, 0xff };
	static const uint8_t be_bad[] = { 0, VQ_VHU_IOTLB_UPDATE, VQ_VHU_IOTLB_INVALIDATE, 5, 0xff };
	struct raw r;
	struct vq_vhu_msg m;
	int fd;

	for (unsigned i = 0; i < sizeof(fe_bad); i++) {
		fe_iotlb(&r, 0x1000, 0x1000, 0x7f0000000000ull, VQ_VHU_IOTLB_PERM_RW, fe_bad[i]);
		fd = efd();
		CHECK_EQ(dec(&r, &fd, 1, &m), -EINVAL);
		CHECK(!fd_open(fd));
		CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
	}
	for (unsigned i = 0; i < sizeof(be_bad); i++) {
		raw_iotlb(&r, VQ_VHU_BACKEND_IOTLB_MSG, VQ_VHU_VERSION, 0x1000, 0x1000,
			  0x7f0000000000ull, VQ_VHU_IOTLB_PERM_RW, be_bad[i]);
		fd = efd();
		CHECK_EQ(dec_be(&r, &fd, 1, &m), -EINVAL);
		CHECK(!fd_open(fd));
	}
	/* an fd on a good message is refused and closed, on either channel */
	fe_iotlb(&r, 0x1000, 0x1000, 0x7f0000000000ull, VQ_VHU_IOTLB_PERM_RW, VQ_VHU_IOTLB_UPDATE);
	fd = efd();
	CHECK_EQ(dec(&r, &fd, 1, &m), -EBADF);
	CHECK(!fd_open(fd));
	be_iotlb(&r, 0x1000, VQ_VHU_IOTLB_PERM_RO, VQ_VHU_IOTLB_MISS);
	fd = efd();
	CHECK_EQ(dec_be(&r, &fd, 1, &m), -EBADF);
	CHECK(!fd_open(fd));
	CHECK_EQ(dec_be(&r, NULL, 0, &m), 0);
	/* the back-end channel's own request numbers */
	raw_iotlb(&r, 2, VQ_VHU_VERSION, 0x1000, 0, 0, VQ_VHU_IOTLB_PERM_RO, VQ_VHU_IOTLB_MISS);
	fd = efd();
	CHECK_EQ(dec_be(&r, &fd, 1, &m), -EOPNOTSUPP);
	CHECK(!fd_open(fd));
	raw_iotlb(&r, 0, VQ_VHU_VERSION, 0x1000, 0, 0, VQ_VHU_IOTLB_PERM_RO, VQ_VHU_IOTLB_MISS);
	CHECK_EQ(dec_be(&r, NULL, 0, &m), -EOPNOTSUPP);
	/* header rules hold there too: version 1, no reply flag on a request */
	raw_iotlb(&r, VQ_VHU_BACKEND_IOTLB_MSG, 2, 0x1000, 0, 0, VQ_VHU_IOTLB_PERM_RO,
		  VQ_VHU_IOTLB_MISS);
	CHECK_EQ(dec_be(&r, NULL, 0, &m), -EINVAL);
	raw_iotlb(&r, VQ_VHU_BACKEND_IOTLB_MSG, VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY, 0x1000,
		  0, 0, VQ_VHU_IOTLB_PERM_RO, VQ_VHU_IOTLB_MISS);
	CHECK_EQ(dec_be(&r, NULL, 0, &m), -EINVAL);
}

/* An update or a miss names an access (RO 1, WO 2, RW 3); an invalidation's
 * permission means nothing and is accepted whatever it is. */
static void iotlb_msg_permission_rules(void)
{
	static const uint8_t bad[] = { 0, 4, 7, 0x80, 0xff };
	struct raw r;
	struct vq_vhu_msg m;

	for (unsigned i = 0; i < sizeof(bad); i++) {
		fe_iotlb(&r, 0x1000, 0x1000, 0x7f0000000000ull, bad[i], VQ_VHU_IOTLB_UPDATE);
		CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
		be_iotlb(&r, 0x1000, bad[i], VQ_VHU_IOTLB_MISS);
		CHECK_EQ(dec_be(&r, NULL, 0, &m), -EINVAL);
		be_iotlb(&r, 0x1000, bad[i], VQ_VHU_IOTLB_ACCESS_FAIL);
		CHECK_EQ(dec_be(&r, NULL, 0, &m), -EINVAL);
		fe_iotlb(&r, 0x1000, 0x1000, 0, bad[i], VQ_VHU_IOTLB_INVALIDATE);
		CHECK_EQ(dec(&r, NULL, 0, &m), 0);
		CHECK_EQ(m.u.iotlb.perm, bad[i]);
	}
	for (uint8_t p = VQ_VHU_IOTLB_PERM_RO; p <= VQ_VHU_IOTLB_PERM_RW; p++) {
		fe_iotlb(&r, 0x1000, 0x1000, 0x7f0000000000ull, p, VQ_VHU_IOTLB_UPDATE);
		CHECK_EQ(dec(&r, NULL, 0, &m), 0);
		CHECK_EQ(m.u.iotlb.perm, p);
		be_iotlb(&r, 0x1000, p, VQ_VHU_IOTLB_MISS);
		CHECK_EQ(dec_be(&r, NULL, 0, &m), 0);
		CHECK_EQ(m.u.iotlb.perm, p);
	}
}

/* An update maps a non-empty range that wraps on neither side; an
 * invalidation may name any range (QEMU's global one is iova 0, size 0:
 * addr_mask + 1 overflowed). */
static void iotlb_update_range_rules(void)
{
	struct raw r;
	struct vq_vhu_msg m;

	fe_iotlb(&r, 0x1000, 0, 0x7f0000000000ull, VQ_VHU_IOTLB_PERM_RW, VQ_VHU_IOTLB_UPDATE);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
	/* iova range wraps */
	fe_iotlb(&r, UINT64_MAX - 0xfff, 0x2000, 0x7f0000000000ull,
		 VQ_VHU_IOTLB_PERM_RW, VQ_VHU_IOTLB_UPDATE);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
	fe_iotlb(&r, 0x1000, UINT64_MAX, 0x1000, VQ_VHU_IOTLB_PERM_RW, VQ_VHU_IOTLB_UPDATE);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
	/* front-end address range wraps */
	fe_iotlb(&r, 0x1000, 0x2000, UINT64_MAX - 0xfff, VQ_VHU_IOTLB_PERM_RO,
		 VQ_VHU_IOTLB_UPDATE);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
	/* a range that ends on the last IOVA is fine (vhost: last = start +
	 * size - 1); one byte more wraps */
	fe_iotlb(&r, UINT64_MAX - 0xfff, 0x1000, 0x7f0000000000ull,
		 VQ_VHU_IOTLB_PERM_RW, VQ_VHU_IOTLB_UPDATE);
	CHECK_EQ(dec(&r, NULL, 0, &m), 0);
	fe_iotlb(&r, UINT64_MAX - 0xfff, 0x1001, 0x7f0000000000ull,
		 VQ_VHU_IOTLB_PERM_RW, VQ_VHU_IOTLB_UPDATE);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EINVAL);
	/* a big range that fits */
	fe_iotlb(&r, 0x100000000ull, 0x40000000ull, 0x7f0000000000ull,
		 VQ_VHU_IOTLB_PERM_WO, VQ_VHU_IOTLB_UPDATE);
	CHECK_EQ(dec(&r, NULL, 0, &m), 0);
	CHECK_EQ(m.u.iotlb.size, 0x40000000ull);
	/* invalidations: empty, wrapping, everything */
	fe_iotlb(&r, 0, 0, 0, 0, VQ_VHU_IOTLB_INVALIDATE);
	CHECK_EQ(dec(&r, NULL, 0, &m), 0);
	CHECK_EQ(m.u.iotlb.type, VQ_VHU_IOTLB_INVALIDATE);
	fe_iotlb(&r, UINT64_MAX - 0xfff, 0x2000, UINT64_MAX, VQ_VHU_IOTLB_PERM_RW,
		 VQ_VHU_IOTLB_INVALIDATE);
	CHECK_EQ(dec(&r, NULL, 0, &m), 0);
	fe_iotlb(&r, 0, UINT64_MAX, 0, 0, VQ_VHU_IOTLB_INVALIDATE);
	CHECK_EQ(dec(&r, NULL, 0, &m), 0);
	/* a miss names an address, not a range: size and uaddr are not read */
	raw_iotlb(&r, VQ_VHU_BACKEND_IOTLB_MSG, VQ_VHU_VERSION, UINT64_MAX, 0,
		  UINT64_MAX, VQ_VHU_IOTLB_PERM_WO, VQ_VHU_IOTLB_MISS);
	CHECK_EQ(dec_be(&r, NULL, 0, &m), 0);
	CHECK_EQ(m.u.iotlb.iova, UINT64_MAX);
}

/* struct vhost_iotlb_msg is 32 bytes: 24 (no perm/type) or 40 are refused
 * on the header, before the payload is read, on both channels. */
static void iotlb_msg_payload_size(void)
{
	static const uint32_t bad[] = { 0, 8, 24, 26, 31, 33, 40 };
	struct raw r;
	struct vq_vhu_msg m;
	uint32_t sz;
	int fd;

	raw_hdr(&r, VQ_VHU_IOTLB_MSG, VQ_VHU_VERSION, 32);
	CHECK_EQ(vq_vhu_check_request_hdr(r.b, &sz), 0);
	CHECK_EQ(sz, 32);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		raw_hdr(&r, VQ_VHU_IOTLB_MSG, VQ_VHU_VERSION, bad[i]);
		CHECK_EQ(vq_vhu_check_request_hdr(r.b, &sz), -EMSGSIZE);
		memset(r.b + r.len, 0, bad[i]);
		if (bad[i] >= 26)
			r.b[r.len + 25] = VQ_VHU_IOTLB_INVALIDATE;
		r.len += bad[i];
		fd = efd();
		CHECK_EQ(dec(&r, &fd, 1, &m), -EMSGSIZE);
		CHECK(!fd_open(fd));
		memcpy(r.b, &(uint32_t){ VQ_VHU_BACKEND_IOTLB_MSG }, 4);
		if (bad[i] >= 26) {
			r.b[12 + 24] = VQ_VHU_IOTLB_PERM_RO;
			r.b[12 + 25] = VQ_VHU_IOTLB_MISS;
		}
		fd = efd();
		CHECK_EQ(dec_be(&r, &fd, 1, &m), -EMSGSIZE);
		CHECK(!fd_open(fd));
	}
	/* the declared size is right but the bytes are not all there */
	fe_iotlb(&r, 0x1000, 0x1000, 0x7f0000000000ull, VQ_VHU_IOTLB_PERM_RO, VQ_VHU_IOTLB_UPDATE);
	r.len -= 8;
	CHECK_EQ(dec(&r, NULL, 0, &m), -EMSGSIZE);
	be_iotlb(&r, 0x1000, VQ_VHU_IOTLB_PERM_RO, VQ_VHU_IOTLB_MISS);
	r.len += 4;
	CHECK_EQ(dec_be(&r, NULL, 0, &m), -EMSGSIZE);
}

/* "VHOST_USER_SET_BACKEND_REQ_FD": no payload, exactly one fd (the
 * back-end channel); a wrong count is refused with every fd closed. */
static void set_backend_req_fd_one_fd(void)
{
	struct raw r;
	struct vq_vhu_msg m;
	int fd, fds[3];
	uint32_t sz;

	raw_hdr(&r, VQ_VHU_SET_BACKEND_REQ_FD, VQ_VHU_VERSION, 0);
	CHECK_EQ(vq_vhu_check_request_hdr(r.b, &sz), 0);
	CHECK_EQ(sz, 0);
	fd = efd();
	CHECK_EQ(dec(&r, &fd, 1, &m), 0);
	CHECK_EQ(m.kind, VQ_VHU_P_NONE);
	CHECK_EQ(m.nfds, 1);
	CHECK_EQ(m.fds[0], fd);
	CHECK(fd_open(fd));
	vq_vhu_msg_close_fds(&m);
	CHECK(!fd_open(fd));
	CHECK_EQ(dec(&r, NULL, 0, &m), -EBADF);
	for (unsigned n = 2; n <= 3; n++) {
		for (unsigned i = 0; i < n; i++)
			fds[i] = efd();
		CHECK_EQ(dec(&r, fds, n, &m), -EBADF);
		for (unsigned i = 0; i < n; i++)
			CHECK(!fd_open(fds[i]));
	}
	fd = -1;
	CHECK_EQ(dec(&r, &fd, 1, &m), -EBADF);
	/* a payload: refused, the fd closed */
	raw_hdr(&r, VQ_VHU_SET_BACKEND_REQ_FD, VQ_VHU_VERSION, 8);
	CHECK_EQ(vq_vhu_check_request_hdr(r.b, &sz), -EMSGSIZE);
	raw_u64(&r, 0);
	fd = efd();
	CHECK_EQ(dec(&r, &fd, 1, &m), -EMSGSIZE);
	CHECK(!fd_open(fd));
}

/*
 * Postcopy (PAGEFAULT): ADVISE's reply is empty and carries the
 * userfaultfd; END's is a u64; while listening, SET_MEM_TABLE's and
 * ADD_MEM_REG's replies echo their payload; QEMU's ack is a u64 under 0 or
 * a memory request, a shape no other request has.
 */
static void postcopy_rules(void)
{
	struct raw r;
	struct vq_vhu_msg m, rep = { .request = VQ_VHU_POSTCOPY_ADVISE,
				     .flags = VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY,
				     .kind = VQ_VHU_P_EMPTY };
	uint32_t reqs[] = { 0, VQ_VHU_SET_MEM_TABLE, VQ_VHU_ADD_MEM_REG, VQ_VHU_REM_MEM_REG };
	uint32_t sz;
	int fd = efd();

	CHECK(vq_vhu_request_has_reply(VQ_VHU_POSTCOPY_ADVISE));
	CHECK(!vq_vhu_request_has_reply(VQ_VHU_POSTCOPY_LISTEN));
	CHECK(vq_vhu_request_has_reply(VQ_VHU_POSTCOPY_END));
	CHECK(vq_vhu_request_postcopy_echo(VQ_VHU_ADD_MEM_REG));
	CHECK(vq_vhu_request_postcopy_echo(VQ_VHU_SET_MEM_TABLE));
	CHECK(!vq_vhu_request_postcopy_echo(VQ_VHU_REM_MEM_REG));
	/* the requests carry nothing */
	raw_hdr(&r, VQ_VHU_POSTCOPY_ADVISE, VQ_VHU_VERSION, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), 0);
	raw_hdr(&r, VQ_VHU_POSTCOPY_LISTEN, VQ_VHU_VERSION | VQ_VHU_FLAG_NEED_REPLY, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), 0);
	raw_hdr(&r, VQ_VHU_POSTCOPY_END, VQ_VHU_VERSION, 8);
	raw_u64(&r, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EMSGSIZE);
	/* ADVISE's reply: exactly one fd */
	r.len = (size_t)vq_vhu_encode(&rep, r.b, sizeof(r.b));
	CHECK_EQ(r.len, VQ_VHU_HDR_SIZE);
	CHECK_EQ(vq_vhu_decode_reply(r.b, r.len, NULL, 0, VQ_VHU_POSTCOPY_ADVISE,
				     false, &m, NULL, 0), -EBADF);
	CHECK_EQ(vq_vhu_decode_reply(r.b, r.len, &fd, 1, VQ_VHU_POSTCOPY_ADVISE,
				     false, &m, NULL, 0), 0);
	CHECK_EQ(m.nfds, 1);
	CHECK_EQ(m.fds[0], fd);
	vq_vhu_msg_close_fds(&m);
	CHECK(!fd_open(fd));
	/* the echo of ADD_MEM_REG: the region back, when no ack is expected */
	raw_hdr(&r, VQ_VHU_ADD_MEM_REG, VQ_VHU_VERSION | VQ_VHU_FLAG_REPLY, 40);
	raw_u64(&r, 0);
	raw_u64(&r, 0x1000);
	raw_u64(&r, 0x2000);
	raw_u64(&r, 0x7f1234560000ull);
	raw_u64(&r, 0);
	CHECK_EQ(vq_vhu_decode_reply(r.b, r.len, NULL, 0, VQ_VHU_ADD_MEM_REG, false,
				     &m, NULL, 0), 0);
	CHECK_EQ(m.kind, VQ_VHU_P_REGION);
	CHECK_EQ(m.u.region.uaddr, 0x7f1234560000ull);
	roundtrip(&m);
	CHECK_EQ(vq_vhu_decode_reply(r.b, r.len, NULL, 0, VQ_VHU_ADD_MEM_REG, true,
				     &m, NULL, 0), -EMSGSIZE);
	/* the ack */
	for (unsigned i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		raw_hdr(&r, reqs[i], VQ_VHU_VERSION, 8);
		raw_u64(&r, 0);
		CHECK_EQ(vq_vhu_check_request_hdr(r.b, &sz), 0);
		CHECK_EQ(sz, 8);
		CHECK_EQ(dec(&r, NULL, 0, &m), 0);
		CHECK_EQ(m.kind, VQ_VHU_P_POSTCOPY_ACK);
		CHECK_EQ(m.request, reqs[i]);
		CHECK_EQ(m.u.u64, 0);
		roundtrip(&m);
		fd = efd();
		CHECK_EQ(dec(&r, &fd, 1, &m), -EBADF);
		CHECK(!fd_open(fd));
		/* not with NEED_REPLY (nobody would read the ack), nor longer */
		raw_hdr(&r, reqs[i], VQ_VHU_VERSION | VQ_VHU_FLAG_NEED_REPLY, 8);
		raw_u64(&r, 0);
		CHECK(dec(&r, NULL, 0, &m) != 0 || m.kind != VQ_VHU_P_POSTCOPY_ACK);
	}
	raw_hdr(&r, VQ_VHU_SET_OWNER, VQ_VHU_VERSION, 8);
	raw_u64(&r, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EMSGSIZE);
	raw_hdr(&r, 0, VQ_VHU_VERSION, 16);
	raw_u64(&r, 0);
	raw_u64(&r, 0);
	CHECK_EQ(dec(&r, NULL, 0, &m), -EOPNOTSUPP);
}

int main(void)
{
	RUN(hdr_get_features_ok);
	RUN(hdr_version_must_be_1);
	RUN(hdr_reply_flag_in_request_refused);
	RUN(unknown_request_refused_fds_closed);
	RUN(truncated_header_and_payload);
	RUN(oversized_payload_refused);
	RUN(vring_kick_fd_counts);
	RUN(fd_on_request_without_fds);
	RUN(mem_table_rules);
	RUN(rem_mem_reg_fd_closed_unused);
	RUN(vring_index_past_queue_count);
	RUN(vring_num_range);
	RUN(field_rules);
	RUN(encode_decode_roundtrip);
	RUN(reply_rules);
	RUN(log_base_rules);
	RUN(send_rarp_rules);
	RUN(net_set_mtu_rules);
	RUN(iotlb_msg_roundtrip);
	RUN(iotlb_msg_type_per_channel);
	RUN(iotlb_msg_permission_rules);
	RUN(iotlb_update_range_rules);
	RUN(iotlb_msg_payload_size);
	RUN(set_backend_req_fd_one_fd);
	RUN(postcopy_rules);
	return 0;
}
