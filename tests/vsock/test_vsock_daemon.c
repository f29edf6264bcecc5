// SPDX-License-Identifier: MIT
/*
 * virtq-vsock's control plane as QEMU's vhost-user-vsock-pci sees it
 * (lab traces: GET_FEATURES, GET/SET_PROTOCOL_FEATURES, GET_CONFIG for the
 * CID), spoken raw with our codec:
 *  - the CONFIG protocol feature is offered and GET_CONFIG returns the CID;
 *  - with --no-packed, a SET_FEATURES carrying RING_PACKED (QEMU 7.2 sends
 *    it when packed=on even if not offered) is refused: the connection is
 *    closed with a message naming the bits, and the daemon serves the next;
 *  - --print-capabilities prints the vhost-user JSON with type "vsock";
 *  - SIGTERM ends it promptly with a summary.
 * argv[1]: the virtq-vsock binary.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <virtq/vhost_user.h>
#include <virtq/vsock.h>

#include "vq_test.h"

static const char *bin;
static char dir[40], sock[64], uds[64], errlog[64];

static pid_t spawn(const char *extra)
{
	pid_t pid;

	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int fd = open(errlog, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, 2);
		dup2(fd, 1);
		execl(bin, bin, "--socket-path", sock, "--uds-path", uds,
		      "--guest-cid", "545", extra, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		struct stat sb;

		if (stat(sock, &sb) == 0)
			return pid;
		usleep(10000);
	}
	CHECK(!"virtq-vsock did not create its socket");
	return pid;
}

static void stop(pid_t pid)
{
	int st;

	CHECK_EQ(kill(pid, SIGTERM), 0);
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
}

static int vu_connect(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock);
	CHECK_EQ(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static void send_msg(int fd, struct vq_vhu_msg *m)
{
	uint8_t buf[VQ_VHU_MSG_MAX];
	ssize_t n;

	m->flags = VQ_VHU_VERSION;
	n = vq_vhu_encode(m, buf, sizeof(buf));
	CHECK(n > 0);
	CHECK_EQ(write(fd, buf, (size_t)n), n);
}

static void recv_reply(int fd, uint32_t req, struct vq_vhu_msg *m)
{
	uint8_t buf[VQ_VHU_MSG_MAX];
	uint32_t size;
	char err[128];

	CHECK_EQ(read(fd, buf, VQ_VHU_HDR_SIZE), VQ_VHU_HDR_SIZE);
	memcpy(&size, buf + 8, 4);
	CHECK(size <= VQ_VHU_PAYLOAD_MAX);
	if (size)
		CHECK_EQ(read(fd, buf + VQ_VHU_HDR_SIZE, size), (ssize_t)size);
	CHECK_EQ(vq_vhu_decode_reply(buf, VQ_VHU_HDR_SIZE + size, NULL, 0, req, false,
				     m, err, sizeof(err)), 0);
}

static uint64_t get_u64(int fd, uint32_t req)
{
	struct vq_vhu_msg m = { .request = req, .kind = VQ_VHU_P_NONE };

	send_msg(fd, &m);
	recv_reply(fd, req, &m);
	return m.u.u64;
}

static void vhost_user_vsock_get_config_returns_cid(void)
{
	pid_t pid = spawn("--quiet");
	int fd = vu_connect();
	uint64_t f, pf, cid;
	struct vq_vhu_msg m;

	f = get_u64(fd, VQ_VHU_GET_FEATURES);
	CHECK(f & VIRTQ_BIT(VIRTIO_F_VERSION_1));
	CHECK(f & VIRTQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES));
	CHECK(f & VIRTQ_BIT(VIRTIO_F_RING_PACKED));
	CHECK(f & VIRTQ_BIT(VIRTIO_F_EVENT_IDX));
	CHECK(f & VIRTQ_BIT(VQ_VSOCK_F_SEQPACKET));
	pf = get_u64(fd, VQ_VHU_GET_PROTOCOL_FEATURES);
	CHECK(pf & VIRTQ_BIT(VQ_VHU_PROTOCOL_F_CONFIG));
	memset(&m, 0, sizeof(m));
	m.request = VQ_VHU_SET_PROTOCOL_FEATURES;
	m.kind = VQ_VHU_P_U64;
	m.u.u64 = VIRTQ_BIT(VQ_VHU_PROTOCOL_F_CONFIG);
	send_msg(fd, &m);
	memset(&m, 0, sizeof(m));
	m.request = VQ_VHU_GET_CONFIG;
	m.kind = VQ_VHU_P_CONFIG;
	m.u.config.offset = 0;
	m.u.config.size = 8;
	send_msg(fd, &m);
	recv_reply(fd, VQ_VHU_GET_CONFIG, &m);
	CHECK_EQ(m.u.config.size, 8);
	memcpy(&cid, m.u.config.data, 8);
	CHECK_EQ(vq_le64(cid), 545);
	close(fd);
	stop(pid);
}

static bool log_has(const char *s)
{
	char buf[8192];
	int fd = open(errlog, O_RDONLY);
	ssize_t n;

	CHECK(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	CHECK(n >= 0);
	buf[n] = '\0';
	return strstr(buf, s) != NULL;
}

/* QEMU 7.2 vhost-user-vsock-pci,packed=on against a backend that did not
 * offer RING_PACKED: refuse, do not run a ring layout we did not agree to. */
static void vhost_user_vsock_refuses_unoffered_packed(void)
{
	pid_t pid = spawn("--no-packed");
	int fd = vu_connect();
	uint64_t f;
	struct vq_vhu_msg m;
	char b;

	f = get_u64(fd, VQ_VHU_GET_FEATURES);
	CHECK(!(f & VIRTQ_BIT(VIRTIO_F_RING_PACKED)));
	memset(&m, 0, sizeof(m));
	m.request = VQ_VHU_SET_FEATURES;
	m.kind = VQ_VHU_P_U64;
	m.u.u64 = VIRTQ_BIT(VIRTIO_F_VERSION_1) | VIRTQ_BIT(VIRTIO_F_EVENT_IDX) |
		  VIRTQ_BIT(VIRTIO_F_RING_PACKED);
	send_msg(fd, &m);
	CHECK_EQ(read(fd, &b, 1), 0);           /* connection closed */
	close(fd);
	/* ... and the next front-end is served */
	fd = vu_connect();
	f = get_u64(fd, VQ_VHU_GET_FEATURES);
	CHECK(f & VIRTQ_BIT(VIRTIO_F_VERSION_1));
	close(fd);
	stop(pid);
	CHECK(log_has("not offered"));
}

/* 5.10.3: --no-seqpacket stops offering VQ_VSOCK_F_SEQPACKET (streams
 * stay implied). */
static void vhost_user_vsock_no_seqpacket_option(void)
{
	pid_t pid = spawn("--no-seqpacket");
	int fd = vu_connect();
	uint64_t f = get_u64(fd, VQ_VHU_GET_FEATURES);

	CHECK(f & VIRTQ_BIT(VIRTIO_F_VERSION_1));
	CHECK(!(f & VIRTQ_BIT(VQ_VSOCK_F_SEQPACKET)));
	close(fd);
	stop(pid);
}

static void backend_conventions_print_capabilities(void)
{
	char cmd[256], out[512] = "";
	FILE *p;
	size_t n;

	snprintf(cmd, sizeof(cmd), "%s --print-capabilities", bin);
	p = popen(cmd, "r");
	CHECK(p);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	CHECK_EQ(pclose(p), 0);
	CHECK(strstr(out, "\"type\""));
	CHECK(strstr(out, "\"vsock\""));
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return VQ_TEST_SKIP;
	bin = argv[1];
	snprintf(dir, sizeof(dir), "/tmp/vq-vsock-test.XXXXXX");
	CHECK(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/vu.sock", dir);
	snprintf(uds, sizeof(uds), "%s/h.sock", dir);
	snprintf(errlog, sizeof(errlog), "%s/log", dir);
	RUN(backend_conventions_print_capabilities);
	RUN(vhost_user_vsock_get_config_returns_cid);
	RUN(vhost_user_vsock_refuses_unoffered_packed);
	RUN(vhost_user_vsock_no_seqpacket_option);
	unlink(errlog);
	unlink(sock);
	unlink(uds);
	rmdir(dir);
	return 0;
}
