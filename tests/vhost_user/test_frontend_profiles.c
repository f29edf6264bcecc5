// SPDX-License-Identifier: MIT
/*
 * The front-end's profiles (docs/vmm-profiles.md) against the echo
 * back-end, whose library logs every request it receives: the set-up
 * messages arrive in the order crosvm's and Cloud Hypervisor's front-ends
 * send them, and what they negotiate is narrowed as those VMMs narrow it.
 *  - crosvm: channel (SET_BACKEND_REQ_FD) right after the protocol
 *    features, GET_CONFIG before SET_FEATURES, SET_MEM_TABLE (never
 *    ADD_MEM_REG), per ring NUM ADDR BASE CALL KICK ENABLE; no packed ring,
 *    indirect or in-order even when wanted and offered;
 *  - Cloud Hypervisor's generic device: every NUM, then ADDR BASE CALL
 *    KICK ring by ring, every ENABLE, then the channel; CONFIGURE_MEM_SLOTS
 *    acked yet SET_MEM_TABLE sent; no packed ring;
 *  - Cloud Hypervisor's net device reads 17 config bytes and gives up when
 *    refused (the echo device has 8);
 *  - neither sends SET_STATUS (neither asks for PROTOCOL_F_STATUS), while
 *    the default profile's sequence is unchanged;
 *  - a profile that is not one, or one with iommu_page, is -EINVAL.
 * vhost-user.rst "Ring states" (ENABLE only with PROTOCOL_FEATURES) and
 * "Memory access" (SET_MEM_TABLE; ADD_MEM_REG with CONFIGURE_MEM_SLOTS).
 */
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <virtq/log.h>
#include <virtq/guest/frontend.h>

#include "echo_dev.h"

#define MAXREQ 64
static char seen[MAXREQ][40];
static unsigned nseen;

/* "echo: VHOST_USER_X, ..." -> "X"; calls are serialized by the library */
static void record(void *arg, enum vq_log_level level, const char *msg)
{
	const char *p = strstr(msg, "echo: VHOST_USER_");
	size_t n;

	(void)arg;
	if (level != VQ_LOG_DEBUG || !p || nseen == MAXREQ)
		return;
	p += strlen("echo: VHOST_USER_");
	n = strcspn(p, ",");
	if (n >= sizeof(seen[0]))
		n = sizeof(seen[0]) - 1;
	memcpy(seen[nseen], p, n);
	seen[nseen][n] = 0;
	nseen++;
}

/* The requests the echo back-end saw are want (NULL-terminated). */
static void check_sequence(const char *const *want)
{
	unsigned i;
	bool same = true;

	for (i = 0; want[i]; i++)
		if (i >= nseen || strcmp(seen[i], want[i]))
			same = false;
	if (i != nseen)
		same = false;
	if (!same) {
		fprintf(stderr, "   saw:");
		for (unsigned k = 0; k < nseen; k++)
			fprintf(stderr, " %s", seen[k]);
		fprintf(stderr, "\n   want:");
		for (unsigned k = 0; want[k]; k++)
			fprintf(stderr, " %s", want[k]);
		fprintf(stderr, "\n");
	}
	CHECK(same);
}

/* Connect (and start, when connect works) a front-end with cfg to a fresh
 * echo back-end, recording its requests; the front-end is freed. */
static int run(struct vq_vhu_frontend_config *c, uint64_t *feat,
	       uint64_t *proto, uint8_t cfgspace[8], uint32_t *cfglen)
{
	struct vq_vhu_frontend *f;
	struct echo e;
	pthread_t th;
	int sv[2], r;

	nseen = 0;
	echo_init(&e);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	CHECK_EQ(vq_vhu_backend_adopt_fd(e.b, sv[1]), 0);
	CHECK_EQ(vq_log_set(record, NULL, VQ_LOG_DEBUG), 0);
	CHECK_EQ(pthread_create(&th, NULL, echo_serve_thread, &e), 0);
	r = vq_vhu_frontend_adopt_fd(sv[0], c, &f);
	if (r == 0) {
		*feat = vq_vhu_frontend_features(f);
		*proto = vq_vhu_frontend_protocol_features(f);
		*cfglen = vq_vhu_frontend_profile_config(f, cfgspace, 8);
		CHECK_EQ(vq_vhu_frontend_start(f), 0);
		vq_vhu_frontend_free(f);
	}
	CHECK_EQ(pthread_join(th, NULL), 0);
	/* crosvm sets no NEED_REPLY: start may return before the back-end
	 * read the rings' messages, so count once it has read them all */
	CHECK_EQ(e.starts, r == 0 ? ECHO_NQ : 0);
	CHECK_EQ(vq_log_set(NULL, NULL, VQ_LOG_ERR), 0);
	vq_vhu_backend_free(e.b);
	return r;
}

#define WANT_RINGS (VQ_BIT(VQ_F_RING_PACKED) | VQ_BIT(VQ_F_INDIRECT_DESC) | \
		    VQ_BIT(VQ_F_IN_ORDER) | VQ_BIT(VQ_F_EVENT_IDX))
#define P(b) VQ_BIT(VQ_VHU_PROTOCOL_F_##b)

static struct vq_vhu_frontend_config cfg_for(unsigned profile, unsigned dev)
{
	return (struct vq_vhu_frontend_config){
		.features = WANT_RINGS, .nqueues = ECHO_NQ, .queue_size = 64,
		.mem_size = 1 << 20, .timeout_ms = 2000,
		.profile = profile, .device_id = dev,
	};
}

/* Today's sequence: what the profiles are measured against. */
static void default_sequence_unchanged(void)
{
	static const char *const want[] = {
		"SET_OWNER", "GET_FEATURES", "GET_PROTOCOL_FEATURES",
		"SET_PROTOCOL_FEATURES", "GET_QUEUE_NUM", "SET_FEATURES",
		"SET_STATUS", "GET_MAX_MEM_SLOTS", "ADD_MEM_REG",
		"SET_VRING_CALL", "SET_VRING_NUM", "SET_VRING_BASE", "SET_VRING_ADDR",
		"SET_VRING_KICK", "SET_VRING_ENABLE",
		"SET_VRING_CALL", "SET_VRING_NUM", "SET_VRING_BASE", "SET_VRING_ADDR",
		"SET_VRING_KICK", "SET_VRING_ENABLE", "SET_STATUS", NULL,
	};
	struct vq_vhu_frontend_config c = cfg_for(VQ_VHU_PROFILE_DEFAULT, 0);
	uint64_t feat, proto;
	uint8_t cs[8];
	uint32_t n;

	c.features &= ~VQ_BIT(VQ_F_RING_PACKED);
	CHECK_EQ(run(&c, &feat, &proto, cs, &n), 0);
	check_sequence(want);
	CHECK_EQ(n, 0);
	CHECK(feat & VQ_BIT(VQ_F_INDIRECT_DESC));
}

/* vhost_user_frontend/mod.rs: new() then activate() and activate_vring(). */
static void crosvm_order_and_narrowing(void)
{
	static const char *const want[] = {
		"SET_OWNER", "GET_FEATURES", "GET_PROTOCOL_FEATURES",
		"SET_PROTOCOL_FEATURES", "SET_BACKEND_REQ_FD", "GET_QUEUE_NUM",
		"GET_CONFIG", "SET_FEATURES", "SET_MEM_TABLE",
		"SET_VRING_NUM", "SET_VRING_ADDR", "SET_VRING_BASE", "SET_VRING_CALL",
		"SET_VRING_KICK", "SET_VRING_ENABLE",
		"SET_VRING_NUM", "SET_VRING_ADDR", "SET_VRING_BASE", "SET_VRING_CALL",
		"SET_VRING_KICK", "SET_VRING_ENABLE", NULL,
	};
	struct vq_vhu_frontend_config c = cfg_for(VQ_VHU_PROFILE_CROSVM, 19);
	uint64_t feat, proto;
	uint8_t cs[8];
	uint32_t n;

	CHECK_EQ(run(&c, &feat, &proto, cs, &n), 0);
	check_sequence(want);
	CHECK(!(feat & VQ_BIT(VQ_F_RING_PACKED)));
	CHECK(!(feat & VQ_BIT(VQ_F_INDIRECT_DESC)));
	CHECK(!(feat & VQ_BIT(VQ_F_IN_ORDER)));
	CHECK(feat & VQ_BIT(VQ_F_EVENT_IDX));
	CHECK(feat & VQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES));
	CHECK_EQ(proto, P(MQ) | P(REPLY_ACK) | P(BACKEND_REQ) | P(CONFIG));
	/* the guest CID field, read whole */
	CHECK_EQ(n, 8);
	CHECK_EQ(memcmp(cs, "echo\0\0\0\0", 8), 0);
}

/* vu_common_ctrl.rs setup_vhost_user, generic_vhost_user.rs. */
static void cloud_hypervisor_generic_order_and_narrowing(void)
{
	static const char *const want[] = {
		"SET_OWNER", "GET_FEATURES", "GET_PROTOCOL_FEATURES",
		"SET_PROTOCOL_FEATURES", "GET_QUEUE_NUM", "GET_CONFIG",
		"SET_FEATURES", "SET_MEM_TABLE", "SET_VRING_NUM", "SET_VRING_NUM",
		"SET_VRING_ADDR", "SET_VRING_BASE", "SET_VRING_CALL", "SET_VRING_KICK",
		"SET_VRING_ADDR", "SET_VRING_BASE", "SET_VRING_CALL", "SET_VRING_KICK",
		"SET_VRING_ENABLE", "SET_VRING_ENABLE", "SET_BACKEND_REQ_FD", NULL,
	};
	struct vq_vhu_frontend_config c = cfg_for(VQ_VHU_PROFILE_CLOUD_HYPERVISOR, 19);
	uint64_t feat, proto;
	uint8_t cs[8];
	uint32_t n;

	CHECK_EQ(run(&c, &feat, &proto, cs, &n), 0);
	check_sequence(want);
	CHECK(!(feat & VQ_BIT(VQ_F_RING_PACKED)));
	CHECK(feat & VQ_BIT(VQ_F_INDIRECT_DESC));
	CHECK(feat & VQ_BIT(VQ_F_IN_ORDER));
	CHECK_EQ(proto, P(MQ) | P(LOG_SHMFD) | P(REPLY_ACK) | P(BACKEND_REQ) |
			P(CONFIG) | P(CONFIGURE_MEM_SLOTS));
	CHECK_EQ(n, 8);
	CHECK_EQ(memcmp(cs, "echo", 4), 0);
}

/* net.rs: GET_CONFIG of the whole VirtioNetConfig (17 bytes), and Net::new
 * fails when the back-end refuses it. */
static void cloud_hypervisor_net_needs_17_config_bytes(void)
{
	static const char *const want[] = {
		"SET_OWNER", "GET_FEATURES", "GET_PROTOCOL_FEATURES",
		"SET_PROTOCOL_FEATURES", "GET_QUEUE_NUM", "GET_CONFIG", NULL,
	};
	struct vq_vhu_frontend_config c = cfg_for(VQ_VHU_PROFILE_CLOUD_HYPERVISOR, 1);
	uint64_t feat, proto;
	uint8_t cs[8];
	uint32_t n;

	CHECK(run(&c, &feat, &proto, cs, &n) < 0);
	check_sequence(want);
}

static void profile_values_checked(void)
{
	struct vq_vhu_frontend_config c = cfg_for(3, 1);
	struct vq_vhu_frontend *f;
	int sv[2];

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	CHECK_EQ(vq_vhu_frontend_adopt_fd(sv[0], &c, &f), -EINVAL);
	close(sv[1]);
	c = cfg_for(VQ_VHU_PROFILE_CROSVM, 1);
	c.iommu_page = 4096;
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	CHECK_EQ(vq_vhu_frontend_adopt_fd(sv[0], &c, &f), -EINVAL);
	close(sv[1]);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	RUN(default_sequence_unchanged);
	RUN(crosvm_order_and_narrowing);
	RUN(cloud_hypervisor_generic_order_and_narrowing);
	RUN(cloud_hypervisor_net_needs_17_config_bytes);
	RUN(profile_values_checked);
	return 0;
}
