// SPDX-License-Identifier: MIT
/*
 * virtq-net's config space (virtio 1.2 5.1.4) as a front-end that does not
 * keep one reads it: crosvm and Cloud Hypervisor negotiate
 * PROTOCOL_F_CONFIG and read every field through GET_CONFIG.
 *  - the features say which fields exist: STATUS always, MAC with --mac,
 *    MQ with more than one pair, MTU always (QEMU's host_mtu needs it);
 *  - GET_CONFIG returns mac, status (link up), max_virtqueue_pairs and mtu,
 *    whole or one field at a time, little-endian;
 *  - all 17 bytes up to duplex are served in one read (Cloud Hypervisor
 *    reads that many), speed and duplex "unknown";
 *  - a read past the config space is refused, and the daemon serves the
 *    next front-end.
 * argv[1]: the virtq-net binary.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#include <virtq/guest/frontend.h>
#include <virtq/net.h>

#include "vq_tool.h"

static const char *bin;
static char dir[40], sock[64], errlog[64];

/* virtq-net on sock with more arguments (NULL-terminated), serving once
 * its socket accepts. */
static pid_t spawn(const char *const *more)
{
	const char *argv[24] = { bin, "--socket-path", sock, "--quiet" };
	unsigned n = 4;
	pid_t pid;

	for (; *more && n < 23; more++)
		argv[n++] = *more;
	argv[n] = NULL;
	pid = vq_tool_spawn(argv, errlog);
	for (int i = 0; i < 500; i++) {
		if (vq_test_unix_accepts(sock, SOCK_STREAM))
			return pid;
		usleep(10000);
	}
	CHECK(!"virtq-net did not create its socket");
	return pid;
}

static void stop(pid_t pid)
{
	CHECK_EQ(kill(pid, SIGTERM), 0);
	CHECK_EQ(vq_tool_exit_within(pid, 5000), 0);
}

static struct vq_vhu_frontend *connect_fe(unsigned nqueues)
{
	struct vq_vhu_frontend_config fc = {
		.features = VQ_BIT(VQ_NET_F_MAC) | VQ_BIT(VQ_NET_F_STATUS) |
			    VQ_BIT(VQ_NET_F_MQ) | VQ_BIT(VQ_NET_F_MTU),
		.nqueues = nqueues, .queue_size = 256,
	};
	struct vq_vhu_frontend *f = NULL;

	CHECK_EQ(vq_vhu_frontend_connect(sock, &fc, &f), 0);
	CHECK(vq_vhu_frontend_protocol_features(f) & VQ_BIT(VQ_VHU_PROTOCOL_F_CONFIG));
	return f;
}

static struct vq_net_config_space read_config(struct vq_vhu_frontend *f)
{
	struct vq_net_config_space c;

	memset(&c, 0xa5, sizeof(c));
	CHECK_EQ(vq_vhu_frontend_get_config(f, 0, &c, sizeof(c)), 0);
	return c;
}

/* 5.1.4: every field the features name, as --mac, --mtu and
 * --queue-pairs set them; one field read alone reads the same. */
static void config_space_5_1_4_fields(void)
{
	const char *more[] = { "--mac", "52:54:00:AB:cd:01", "--mtu", "9000",
			       "--queue-pairs", "2", "loopback", NULL };
	static const uint8_t mac[6] = { 0x52, 0x54, 0x00, 0xab, 0xcd, 0x01 };
	pid_t pid = spawn(more);
	struct vq_vhu_frontend *f = connect_fe(4);
	uint64_t feat = vq_vhu_frontend_features(f);
	struct vq_net_config_space c = read_config(f);
	uint16_t v;

	CHECK(feat & VQ_BIT(VQ_NET_F_MAC));
	CHECK(feat & VQ_BIT(VQ_NET_F_STATUS));
	CHECK(feat & VQ_BIT(VQ_NET_F_MQ));
	CHECK(feat & VQ_BIT(VQ_NET_F_MTU));
	CHECK_EQ(memcmp(c.mac, mac, 6), 0);
	CHECK_EQ(vq_le16(c.status), VQ_NET_S_LINK_UP);
	CHECK_EQ(vq_le16(c.max_virtqueue_pairs), 2);
	CHECK_EQ(vq_le16(c.mtu), 9000);
	/* the pairs field alone, as a driver reads it before using MQ */
	CHECK_EQ(vq_vhu_frontend_get_config(f, 8, &v, 2), 0);
	CHECK_EQ(vq_le16(v), 2);
	/* 17 bytes at once, as Cloud Hypervisor reads them (net_util
	 * VirtioNetConfig): the same fields, then speed and duplex unknown */
	{
		uint8_t all[17];
		uint32_t speed;

		CHECK_EQ(vq_vhu_frontend_get_config(f, 0, all, sizeof(all)), 0);
		CHECK_EQ(memcmp(all, mac, 6), 0);
		CHECK_EQ(all[8], 2);
		memcpy(&speed, all + 12, 4);
		CHECK_EQ(vq_le32(speed), 0xffffffffu);
		CHECK_EQ(all[16], 0xff);
	}
	vq_vhu_frontend_free(f);
	stop(pid);
}

/* Without --mac the guest picks its own (MAC not offered, the field
 * zero); the MTU defaults to Ethernet's. */
static void config_space_5_1_4_defaults(void)
{
	const char *more[] = { "sink", NULL };
	pid_t pid = spawn(more);
	struct vq_vhu_frontend *f = connect_fe(2);
	struct vq_net_config_space c = read_config(f);
	static const uint8_t zero[6];

	CHECK(!(vq_vhu_frontend_features(f) & VQ_BIT(VQ_NET_F_MAC)));
	CHECK(!(vq_vhu_frontend_features(f) & VQ_BIT(VQ_NET_F_MQ)));
	CHECK_EQ(memcmp(c.mac, zero, 6), 0);
	CHECK_EQ(vq_le16(c.status), VQ_NET_S_LINK_UP);
	CHECK_EQ(vq_le16(c.max_virtqueue_pairs), 1);
	CHECK_EQ(vq_le16(c.mtu), 1500);
	vq_vhu_frontend_free(f);
	stop(pid);
}

/* vhost-user.rst GET_CONFIG: a read beyond the config space gets an
 * error reply, never bytes from past it; the next front-end is served. */
static void get_config_past_the_end_refused(void)
{
	const char *more[] = { "sink", NULL };
	pid_t pid = spawn(more);
	struct vq_vhu_frontend *f = connect_fe(2);
	uint8_t b[8];

	CHECK(vq_vhu_frontend_get_config(f, 14, b, 4) < 0);
	vq_vhu_frontend_free(f);
	f = connect_fe(2);
	CHECK_EQ(vq_le16(read_config(f).mtu), 1500);
	vq_vhu_frontend_free(f);
	stop(pid);
}

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	bin = argv[1];
	snprintf(dir, sizeof(dir), "/tmp/vq-netd.XXXXXX");
	CHECK(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/vu", dir);
	snprintf(errlog, sizeof(errlog), "%s/log", dir);
	signal(SIGPIPE, SIG_IGN);
	RUN(config_space_5_1_4_fields);
	RUN(config_space_5_1_4_defaults);
	RUN(get_config_past_the_end_refused);
	unlink(errlog);
	rmdir(dir);
	return 0;
}
