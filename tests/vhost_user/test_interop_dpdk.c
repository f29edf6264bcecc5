// SPDX-License-Identifier: MIT
/*
 * vhost-user against a real peer, DPDK's dpdk-testpmd (skipped, 77, when it
 * is not installed or cannot start):
 *  - our front-end against DPDK's vhost PMD (io forwarding, port looped to
 *    itself): frames sent on TX come back on RX intact, split and packed,
 *    IN_ORDER on and off;
 *  - our back-end (echo device) under DPDK's virtio-user PMD: negotiation,
 *    memory table and ring setup succeed, the TX burst reaches the device,
 *    and testpmd's teardown (GET_VRING_BASE, close) is handled cleanly.
 * The frames carry a 12-byte virtio-net header (VERSION_1).
 */
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <virtq/guest/frontend.h>

#include "echo_dev.h"

#define NET_HDR 12

static const char *testpmd(void)
{
	static const char *const cand[] = { "/usr/bin/dpdk-testpmd",
					    "/usr/local/bin/dpdk-testpmd", NULL };

	for (unsigned i = 0; cand[i]; i++)
		if (access(cand[i], X_OK) == 0)
			return cand[i];
	return NULL;
}

/* Start testpmd with vdev and extra args; its stdin is a pipe we hold (it
 * exits when the pipe closes), its output goes to log. */
static pid_t spawn(const char *vdev, const char *const *extra, int *in_wr,
		   const char *log)
{
	const char *argv[32];
	char prefix[64];
	unsigned n = 0;
	int p[2];
	pid_t pid;

	/* a private runtime directory, removed by stop() */
	snprintf(prefix, sizeof(prefix), "--file-prefix=vqtest%d", (int)getpid());
	argv[n++] = testpmd();
	argv[n++] = "--no-huge";
	argv[n++] = "-m";
	argv[n++] = "512";
	argv[n++] = "--no-pci";
	argv[n++] = prefix;
	argv[n++] = vdev;
	argv[n++] = "--";
	argv[n++] = "--total-num-mbufs=2048";
	argv[n++] = "--nb-cores=1";
	for (unsigned i = 0; extra[i]; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	CHECK_EQ(pipe(p), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		FILE *f = freopen(log, "w", stdout);

		(void)f;
		dup2(1, 2);
		dup2(p[0], 0);
		close(p[0]);
		close(p[1]);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(p[0]);
	*in_wr = p[1];
	return pid;
}

static void rm_rf(const char *path)
{
	char cmd[192];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	if (system(cmd)) {
	}
}

static void stop(pid_t pid, int in_wr)
{
	char run[96];
	int st;

	if (in_wr >= 0)
		close(in_wr);   /* "Press enter to exit": EOF ends it */
	for (int i = 0; i < 500; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			goto out;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
out:
	snprintf(run, sizeof(run), "/var/run/dpdk/vqtest%d", (int)getpid());
	rm_rf(run);
}

static void dump(const char *log)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "tail -n 15 %s >&2", log);
	if (system(cmd)) {
	}
}

/* Our front-end, DPDK's vhost PMD as the back-end. */
static void frontend_vs_dpdk_vhost(bool packed, bool in_order)
{
	char dir[] = "/tmp/vhu-dpdk-XXXXXX", sock[64], vdev[128], log[96];
	static const char *const extra[] = { "--port-topology=loop",
		"--forward-mode=io", "--auto-start", NULL };
	char err[256] = "";
	struct vq_vhu_frontend_config c = {
		.features = VQ_BIT(VQ_F_VERSION_1) |
			    (packed ? VQ_BIT(VQ_F_RING_PACKED) : 0) |
			    (in_order ? VQ_BIT(VQ_F_IN_ORDER) : 0),
		.nqueues = 2, .queue_size = 256, .mem_size = 8 << 20,
		.err = err, .errlen = sizeof(err),
	};
	struct vq_vhu_frontend *f = NULL;
	struct vq_drv *rx, *tx;
	struct stat st;
	int in_wr, r = -1, got = 0;
	uint8_t *sent[32];
	pid_t pid;

	CHECK(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/vhost.sock", dir);
	snprintf(log, sizeof(log), "%s/testpmd.log", dir);
	snprintf(vdev, sizeof(vdev), "--vdev=net_vhost0,iface=%s,queues=1", sock);
	pid = spawn(vdev, extra, &in_wr, log);
	for (int i = 0; i < 1000 && stat(sock, &st) < 0; i++)
		usleep(10000);
	if (stat(sock, &st) < 0) {
		dump(log);
		stop(pid, in_wr);
		rm_rf(dir);
		fprintf(stderr, "   skipped: testpmd did not start\n");
		exit(VQ_TEST_SKIP);
	}
	usleep(300000);         /* the port starts after the socket exists */
	r = vq_vhu_frontend_connect(sock, &c, &f);
	if (r) {
		fprintf(stderr, "connect: %d %s\n", r, err);
		dump(log);
	}
	CHECK_EQ(r, 0);
	CHECK(vq_vhu_frontend_features(f) & VQ_BIT(VQ_F_VERSION_1));
	CHECK_EQ(!!(vq_vhu_frontend_features(f) & VQ_BIT(VQ_F_RING_PACKED)), packed);
	r = vq_vhu_frontend_start(f);
	if (r)
		fprintf(stderr, "start: %s\n", vq_vhu_frontend_error_msg(f));
	CHECK_EQ(r, 0);
	rx = vq_vhu_frontend_queue(f, 0);
	tx = vq_vhu_frontend_queue(f, 1);
	for (int i = 0; i < 64; i++) {
		uint64_t g;
		uint8_t *p = vq_vhu_frontend_alloc(f, 2048, &g);
		struct vq_seg s = { g, 2048 };

		CHECK(p);
		CHECK_EQ(vq_drv_add(rx, &s, 0, 1, p), 0);
	}
	if (vq_drv_kick_prepare(rx) == 1)
		vq_evt_signal(vq_vhu_frontend_kick_fd(f, 0));
	for (int i = 0; i < 32; i++) {
		uint64_t g;
		uint8_t *p = vq_vhu_frontend_alloc(f, NET_HDR + 64, &g);
		struct vq_seg s = { g, NET_HDR + 64 };

		CHECK(p);
		memset(p, 0, NET_HDR);
		memset(p + NET_HDR, 0xff, 6);                   /* broadcast */
		memcpy(p + NET_HDR + 6, "\x02\0\0\0\0\x01", 6);
		p[NET_HDR + 12] = 0x88;                         /* local exp. */
		p[NET_HDR + 13] = 0xb5;
		for (int k = 14; k < 64; k++)
			p[NET_HDR + k] = (uint8_t)(i * 3 + k);
		sent[i] = p;
		CHECK_EQ(vq_drv_add(tx, &s, 1, 0, p), 0);
	}
	if (vq_drv_kick_prepare(tx) == 1)
		vq_evt_signal(vq_vhu_frontend_kick_fd(f, 1));
	for (int t = 0; t < 500 && got < 32; t++) {
		void *tok;
		uint32_t len;

		while (vq_drv_get(rx, &tok, &len) == 1) {
			uint8_t *p = tok;
			int i = p[NET_HDR + 14] - 14;

			CHECK_EQ(len, NET_HDR + 64);
			CHECK(i >= 0 && i < 96 && i % 3 == 0);
			CHECK(!memcmp(p + NET_HDR, sent[i / 3] + NET_HDR, 64));
			got++;
		}
		while (vq_drv_get(tx, &tok, &len) == 1)
			;
		CHECK_EQ(vq_drv_error(rx), 0);
		CHECK_EQ(vq_drv_error(tx), 0);
		if (got < 32)
			usleep(10000);
	}
	CHECK_EQ(got, 32);
	for (unsigned q = 0; q < 2; q++) {
		uint32_t base;

		CHECK_EQ(vq_vhu_frontend_stop_queue(f, q, &base), 0);
	}
	vq_vhu_frontend_free(f);
	stop(pid, in_wr);
	unlink(log);
	rmdir(dir);
}

static void frontend_split_vs_dpdk_vhost(void) { frontend_vs_dpdk_vhost(false, false); }
static void frontend_split_in_order_vs_dpdk_vhost(void) { frontend_vs_dpdk_vhost(false, true); }
static void frontend_packed_vs_dpdk_vhost(void) { frontend_vs_dpdk_vhost(true, false); }
static void frontend_packed_in_order_vs_dpdk_vhost(void) { frontend_vs_dpdk_vhost(true, true); }

/* Our back-end, DPDK's virtio-user PMD as the front-end. */
static void backend_under_dpdk_virtio_user(bool packed)
{
	char dir[] = "/tmp/vhu-dpdk-XXXXXX", sock[64], vdev[160], log[96];
	static const char *const extra[] = { "--forward-mode=txonly",
		"--tx-first", "--auto-start", NULL };
	struct echo e;
	time_t end;
	int in_wr, r = 0, fds0, maps0;
	pid_t pid;

	CHECK(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/ours.sock", dir);
	snprintf(log, sizeof(log), "%s/testpmd.log", dir);
	snprintf(vdev, sizeof(vdev),
		 "--vdev=net_virtio_user0,path=%s,queues=1,queue_size=256%s", sock,
		 packed ? ",packed_vq=1" : "");
	echo_init(&e);
	CHECK_EQ(vq_vhu_backend_listen(e.b, sock, 0), 0);
	fds0 = count_fds();
	maps0 = count_maps();
	pid = spawn(vdev, extra, &in_wr, log);
	/* serve until the TX burst arrived, then let testpmd go */
	end = time(NULL) + 20;
	while (e.q[1].chains < 32 && time(NULL) < end) {
		r = echo_poll_once(&e, 10);
		if (r < 0)
			break;
	}
	if (e.q[1].chains < 32) {
		fprintf(stderr, "chains %llu, r %d: %s\n",
			(unsigned long long)e.q[1].chains, r,
			vq_vhu_backend_error_msg(e.b));
		dump(log);
	}
	CHECK(e.q[1].chains >= 32);
	CHECK(vq_vhu_backend_features(e.b) & VQ_BIT(VQ_F_VERSION_1));
	CHECK_EQ(!!(vq_vhu_backend_features(e.b) & VQ_BIT(VQ_F_RING_PACKED)),
		 packed);
	close(in_wr);
	/* testpmd's teardown: GET_VRING_BASE for each ring, then close */
	end = time(NULL) + 10;
	while (vq_vhu_backend_connected(e.b) && time(NULL) < end) {
		r = echo_poll_once(&e, 10);
		if (r < 0)
			break;
	}
	if (r != -ECONNRESET)
		fprintf(stderr, "teardown: %d %s\n", r, vq_vhu_backend_error_msg(e.b));
	CHECK_EQ(r, -ECONNRESET);
	stop(pid, -1);
	CHECK_EQ(count_fds(), fds0);
	CHECK_EQ(count_maps(), maps0);
	vq_vhu_backend_free(e.b);
	unlink(log);
	rmdir(dir);
}

static void backend_split_under_dpdk_virtio_user(void) { backend_under_dpdk_virtio_user(false); }
static void backend_packed_under_dpdk_virtio_user(void) { backend_under_dpdk_virtio_user(true); }

int main(void)
{
	if (!testpmd()) {
		fprintf(stderr, "skipped: dpdk-testpmd not installed\n");
		return VQ_TEST_SKIP;
	}
	signal(SIGPIPE, SIG_IGN);
	RUN(frontend_split_vs_dpdk_vhost);
	RUN(frontend_split_in_order_vs_dpdk_vhost);
	RUN(frontend_packed_vs_dpdk_vhost);
	RUN(frontend_packed_in_order_vs_dpdk_vhost);
	RUN(backend_split_under_dpdk_virtio_user);
	RUN(backend_packed_under_dpdk_virtio_user);
	return 0;
}
