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
 *  - SIGTERM ends it promptly with a summary;
 *  - a host connection whose REQUEST is out survives the event queue
 *    stopping alone, and starting after the other rings (front-ends
 *    start and stop the rings one at a time).
 * And its sockets (issue 24): the host side or vhost-user socket of a
 * running instance is refused (one line, exit 1) and left alone; stale
 * ones are replaced; at exit only the sockets it created are removed;
 * --socket-mode and --socket-group apply to every socket it creates;
 * numbers are decimal (--guest-cid 010 is 10).
 * argv[1]: the virtq-vsock binary.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <virtq/guest/frontend.h>
#include <virtq/guest/vsock.h>
#include <virtq/runtime.h>
#include <virtq/vhost_user.h>
#include <virtq/vsock.h>

#include "vq_tool.h"

static const char *bin;
static char dir[40], sock[64], uds[64], errlog[64];

/* Start virtq-vsock on vhost-user socket vu and host side h with more
 * arguments (NULL-terminated), stdout and stderr into log. */
static pid_t start(const char *vu, const char *h, const char *const *more,
		   const char *log)
{
	const char *argv[24] = { bin, "--socket-path", vu, "--uds-path", h,
				 "--guest-cid", "545" };
	unsigned n = 7;

	for (; more && *more && n < 23; more++)
		argv[n++] = *more;
	argv[n] = NULL;
	return vq_tool_spawn(argv, log);
}

/* The instance the cases talk to, serving once its socket accepts. */
static pid_t spawn_args(const char *const *more)
{
	pid_t pid = start(sock, uds, more, errlog);

	for (int i = 0; i < 500; i++) {
		if (vq_test_unix_accepts(sock, SOCK_STREAM))
			return pid;
		usleep(10000);
	}
	CHECK(!"virtq-vsock did not create its socket");
	return pid;
}

static pid_t spawn(const char *extra)
{
	const char *more[] = { extra, NULL };

	return spawn_args(more);
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

/* The CID in the config space: CONFIG negotiated, then GET_CONFIG. */
static uint64_t get_cid(int fd)
{
	struct vq_vhu_msg m;
	uint64_t cid;

	memset(&m, 0, sizeof(m));
	m.request = VQ_VHU_SET_PROTOCOL_FEATURES;
	m.kind = VQ_VHU_P_U64;
	m.u.u64 = VQ_BIT(VQ_VHU_PROTOCOL_F_CONFIG);
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
	return vq_le64(cid);
}

static void vhost_user_vsock_get_config_returns_cid(void)
{
	pid_t pid = spawn("--quiet");
	int fd = vu_connect();
	uint64_t f, pf;

	f = get_u64(fd, VQ_VHU_GET_FEATURES);
	CHECK(f & VQ_BIT(VQ_F_VERSION_1));
	CHECK(f & VQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES));
	CHECK(f & VQ_BIT(VQ_F_RING_PACKED));
	CHECK(f & VQ_BIT(VQ_F_EVENT_IDX));
	CHECK(f & VQ_BIT(VQ_VSOCK_F_SEQPACKET));
	pf = get_u64(fd, VQ_VHU_GET_PROTOCOL_FEATURES);
	CHECK(pf & VQ_BIT(VQ_VHU_PROTOCOL_F_CONFIG));
	CHECK_EQ(get_cid(fd), 545);
	close(fd);
	stop(pid);
}

/* How often s is in the instance's log (its first 8 KiB). */
static unsigned log_count(const char *s)
{
	char buf[8192];
	int fd = open(errlog, O_RDONLY);
	unsigned k = 0;
	ssize_t n;

	CHECK(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	CHECK(n >= 0);
	buf[n] = '\0';
	for (const char *p = buf; (p = strstr(p, s)); p += strlen(s))
		k++;
	return k;
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
	CHECK(!(f & VQ_BIT(VQ_F_RING_PACKED)));
	memset(&m, 0, sizeof(m));
	m.request = VQ_VHU_SET_FEATURES;
	m.kind = VQ_VHU_P_U64;
	m.u.u64 = VQ_BIT(VQ_F_VERSION_1) | VQ_BIT(VQ_F_EVENT_IDX) |
		  VQ_BIT(VQ_F_RING_PACKED);
	send_msg(fd, &m);
	CHECK_EQ(read(fd, &b, 1), 0);           /* connection closed */
	close(fd);
	/* ... and the next front-end is served */
	fd = vu_connect();
	f = get_u64(fd, VQ_VHU_GET_FEATURES);
	CHECK(f & VQ_BIT(VQ_F_VERSION_1));
	close(fd);
	stop(pid);
	CHECK(log_count("not offered"));
}

/* 5.10.3: --no-seqpacket stops offering VQ_VSOCK_F_SEQPACKET (streams
 * stay implied). */
static void vhost_user_vsock_no_seqpacket_option(void)
{
	pid_t pid = spawn("--no-seqpacket");
	int fd = vu_connect();
	uint64_t f = get_u64(fd, VQ_VHU_GET_FEATURES);

	CHECK(f & VQ_BIT(VQ_F_VERSION_1));
	CHECK(!(f & VQ_BIT(VQ_VSOCK_F_SEQPACKET)));
	close(fd);
	stop(pid);
}

static ino_t inode_of(const char *path)
{
	struct stat st;

	CHECK_EQ(lstat(path, &st), 0);
	CHECK(S_ISSOCK(st.st_mode));
	return st.st_ino;
}

/* A second instance given the running one's socket: refused with one
 * line and exit 1; the running one keeps its socket, reachable. */
static void refused_next_to(const char *vu, const char *h, const char *opt)
{
	char log2[80], buf[4096];
	ino_t vu_ino = inode_of(sock), h_ino = inode_of(uds);
	const char *more[] = { "--quiet", NULL };
	pid_t second;

	snprintf(log2, sizeof(log2), "%s/log2", dir);
	second = start(vu, h, more, log2);
	CHECK_EQ(vq_tool_exit_within(second, 5000), 1);
	CHECK_EQ(vq_tool_file_lines(log2, buf, sizeof(buf)), 1);
	CHECK(strstr(buf, opt));
	CHECK(strstr(buf, "a live socket is there"));
	CHECK_EQ(inode_of(sock), vu_ino);
	CHECK_EQ(inode_of(uds), h_ino);
	CHECK(vq_test_unix_accepts(uds, SOCK_STREAM));
	CHECK(vq_test_unix_accepts(sock, SOCK_STREAM));
	unlink(log2);
}

/* Before: the second instance unlinked the first's host socket, listened
 * there itself, and removed it at exit; every host connect() then got
 * ENOENT while the first kept running. */
static void host_socket_of_running_instance_refused(void)
{
	char vu2[80], seq2[96];
	pid_t pid = spawn("--quiet");

	snprintf(vu2, sizeof(vu2), "%s/vu2.sock", dir);
	refused_next_to(vu2, uds, "--uds-path");
	CHECK(access(vu2, F_OK) < 0);           /* it got no further */
	/* the seqpacket host socket likewise */
	snprintf(seq2, sizeof(seq2), "%s.seqpacket", uds);
	CHECK(access(seq2, F_OK) == 0);
	stop(pid);
}

/* The same for the vhost-user socket; the host sockets the second
 * instance had made are removed again. */
static void vhost_user_socket_of_running_instance_refused(void)
{
	const char *loud[] = { NULL };
	char h2[80], seq2[96];
	pid_t pid = spawn_args(loud);

	snprintf(h2, sizeof(h2), "%s/h2.sock", dir);
	snprintf(seq2, sizeof(seq2), "%s.seqpacket", h2);
	refused_next_to(sock, h2, "--socket-path");
	CHECK(access(h2, F_OK) < 0);
	CHECK(access(seq2, F_OK) < 0);
	stop(pid);
	/* the second instance's look at the socket sent no message: the
	 * running one does not call it a front-end */
	CHECK(!log_count("a front-end connected"));
	CHECK(!log_count("front-end closed"));
}

/* A socket nobody listens on (a crashed instance's) is replaced. */
static void stale_sockets_replaced(void)
{
	const char *const paths[] = { sock, uds };
	pid_t pid;

	for (unsigned i = 0; i < 2; i++) {
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);

		snprintf(a.sun_path, sizeof(a.sun_path), "%s", paths[i]);
		CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
		close(fd);
		CHECK(!vq_test_unix_accepts(paths[i], SOCK_STREAM));
	}
	pid = spawn("--quiet");
	CHECK(vq_test_unix_accepts(uds, SOCK_STREAM));
	stop(pid);
	CHECK(access(sock, F_OK) < 0);
	CHECK(access(uds, F_OK) < 0);
}

/* Before: at exit the daemon unlinked whatever its paths named, here the
 * socket another program had put there since. */
static void exit_removes_only_its_own_sockets(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	pid_t pid = spawn("--quiet");
	int other;
	ino_t ino;

	CHECK_EQ(unlink(uds), 0);
	other = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", uds);
	CHECK_EQ(bind(other, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK_EQ(listen(other, 1), 0);
	ino = inode_of(uds);
	stop(pid);
	CHECK_EQ(inode_of(uds), ino);           /* the other's, left alone */
	CHECK(access(sock, F_OK) < 0);          /* its own, removed */
	close(other);
	unlink(uds);
}

/* libvirt runs QEMU as its own user: the group it is in must reach every
 * socket the daemon creates, with the mode given. */
static void socket_mode_and_group_on_every_socket(void)
{
	char gid[16], seq[96], seq_alias[96];
	const char *more[] = { "--quiet", "--socket-mode", "660", "--socket-group",
			       gid, NULL };
	/* as root any group will do; else our own */
	gid_t g = getuid() == 0 ? 1 : getgid();
	const char *const paths[] = { sock, uds, seq, seq_alias };
	pid_t pid;

	snprintf(gid, sizeof(gid), "%u", (unsigned)g);
	snprintf(seq, sizeof(seq), "%s.seqpacket", uds);
	/* Cloud Hypervisor's name for the seqpacket listener, as well */
	snprintf(seq_alias, sizeof(seq_alias), "%s_seqpacket", uds);
	pid = spawn_args(more);
	for (unsigned i = 0; i < 4; i++) {
		struct stat st;

		CHECK_EQ(lstat(paths[i], &st), 0);
		CHECK(S_ISSOCK(st.st_mode));
		CHECK_EQ(st.st_mode & 07777, 0660);
		CHECK_EQ(st.st_gid, g);
	}
	stop(pid);
	CHECK(access(seq_alias, F_OK) != 0);    /* removed: it was ours */
}

/* Decimal only: 010 is ten (strtoull's base 0 made it eight). */
static uint64_t cid_given(const char *cid)
{
	const char *more[] = { "--quiet", "--guest-cid", cid, NULL };
	pid_t pid = spawn_args(more);
	int fd = vu_connect();
	uint64_t v = get_cid(fd);

	close(fd);
	stop(pid);
	return v;
}

static void guest_cid_is_decimal(void)
{
	CHECK_EQ(cid_given("010"), 10);
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

/* ---- a guest: our front-end and vsock driver ---- */

enum { G_RING = 64, G_PORT = 1234 };

struct guest {
	struct vq_vhu_frontend *f;
	struct vq_vsg *g;
};

static void guest_kick(void *arg, unsigned q)
{
	vq_evt_signal(vq_vhu_frontend_kick_fd(arg, q));
}

static void guest_up(struct guest *x)
{
	static const uint64_t size[3] = { G_RING * 4160u, 0x10000u, 0x1000u };
	struct vq_vhu_frontend_config fc = {
		.features = VQ_BIT(VQ_F_VERSION_1), .nqueues = 3,
		.queue_size = G_RING, .mem_size = 4u << 20, .timeout_ms = 3000,
	};
	struct vq_vsg_area a[3];
	struct vq_vsg_config gc;

	CHECK_EQ(vq_vhu_frontend_connect(sock, &fc, &x->f), 0);
	CHECK_EQ(vq_vhu_frontend_start(x->f), 0);
	for (unsigned i = 0; i < 3; i++) {
		a[i].size = size[i];
		a[i].hva = vq_vhu_frontend_alloc(x->f, size[i], &a[i].gpa);
		CHECK(a[i].hva != NULL);
	}
	gc = (struct vq_vsg_config){
		.rx = vq_vhu_frontend_queue(x->f, VQ_VSOCK_RXQ),
		.tx = vq_vhu_frontend_queue(x->f, VQ_VSOCK_TXQ),
		.ev = vq_vhu_frontend_queue(x->f, VQ_VSOCK_EVQ),
		.rx_area = a[0], .tx_area = a[1], .ev_area = a[2],
		.rx_buf_size = 4096, .tx_pkt_max = 4096,
		.cid = 545, .kick = guest_kick, .arg = x->f,
	};
	CHECK_EQ(vq_vsg_new(&gc, &x->g), 0);
	CHECK_EQ(vq_vsg_start(x->g), 0);
}

/* Sleep up to 1 ms on the rings' calls and fd. */
static void guest_wait(struct guest *x, int fd)
{
	struct pollfd p[4] = { { .fd = fd, .events = POLLIN } };

	for (unsigned i = 0; i < 3; i++)
		p[i + 1] = (struct pollfd){ .fd = vq_vhu_frontend_call_fd(x->f, i),
					    .events = POLLIN };
	poll(p, 4, 1);
	for (unsigned i = 0; i < 3; i++)
		vq_evt_drain(vq_vhu_frontend_call_fd(x->f, i));
}

static int host_connect(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
	char line[32];
	int n = snprintf(line, sizeof(line), "CONNECT %u\n", G_PORT);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", uds);
	CHECK_EQ(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK_EQ(write(fd, line, (size_t)n), n);
	return fd;
}

/*
 * 5.10.6.5: QEMU and crosvm start and stop the rings one at a time.  A
 * host connection whose REQUEST is in the guest's RX ring, the guest's
 * RESPONSE still to come (so its TX ring has not moved), belongs to this
 * driver session: the event queue stopping alone must not drop it, nor
 * its starting after RX and TX (the order of a VMM's start; restart: the
 * queue comes back before the guest answers).
 */
static void handshake_across_event_queue(bool restart)
{
	pid_t pid = spawn(NULL);
	struct guest x;
	struct vq_vsg_conn *c = NULL;
	uint32_t base;
	char got[64] = "";
	size_t have = 0;
	int host, i;

	guest_up(&x);
	CHECK_EQ(vq_vsg_listen(x.g, G_PORT), 0);
	host = host_connect();
	/* the REQUEST arrives; the guest does not read it yet */
	for (i = 0; i < 5000 && !vq_drv_has_used(vq_vhu_frontend_queue(x.f, VQ_VSOCK_RXQ)); i++)
		guest_wait(&x, host);
	CHECK(i < 5000);
	CHECK_EQ(vq_vhu_frontend_stop_queue(x.f, VQ_VSOCK_EVQ, &base), 0);
	if (restart)
		CHECK_EQ(vq_vhu_frontend_restart_queue(x.f, VQ_VSOCK_EVQ, base), 0);
	CHECK_EQ(log_count("queue 2 (event) stopped"), 1);
	for (i = 0; i < 5000 && (!c || !strchr(got, '\n')); i++) {
		ssize_t n;

		CHECK(vq_vsg_poll(x.g) >= 0);
		if (!c)
			c = vq_vsg_accept(x.g, G_PORT);
		n = read(host, got + have, sizeof(got) - 1 - have);
		CHECK(n != 0);          /* EOF: the connection was dropped */
		if (n > 0)
			got[have += (size_t)n] = '\0';
		guest_wait(&x, host);
	}
	CHECK(c != NULL);
	CHECK_EQ(strncmp(got, "OK ", 3), 0);
	CHECK_EQ(vq_vsg_state(c), VQ_VSG_ESTABLISHED);
	/* and it carries bytes */
	CHECK_EQ(write(host, "ping", 4), 4);
	have = 0;
	for (i = 0; i < 5000 && have < 4; i++) {
		long n;

		CHECK(vq_vsg_poll(x.g) >= 0);
		n = vq_vsg_read(c, got + have, (uint32_t)(4 - have));
		have += n > 0 ? (size_t)n : 0;
		guest_wait(&x, host);
	}
	CHECK_EQ(memcmp(got, "ping", 4), 0);
	/* the worker starts the ring after the messages: bounded wait */
	for (i = 0; i < 200 && log_count("queue 2 (event) started") != (restart ? 2u : 1u); i++)
		usleep(10000);
	CHECK_EQ(log_count("queue 2 (event) started"), restart ? 2u : 1u);
	close(host);
	vq_vsg_free(x.g);
	vq_vhu_frontend_free(x.f);
	stop(pid);
}

static void host_handshake_survives_event_queue_stop(void)
{
	handshake_across_event_queue(false);
}

static void host_handshake_survives_event_queue_start(void)
{
	handshake_across_event_queue(true);
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
	RUN(host_socket_of_running_instance_refused);
	RUN(vhost_user_socket_of_running_instance_refused);
	RUN(stale_sockets_replaced);
	RUN(exit_removes_only_its_own_sockets);
	RUN(socket_mode_and_group_on_every_socket);
	RUN(guest_cid_is_decimal);
	RUN(host_handshake_survives_event_queue_stop);
	RUN(host_handshake_survives_event_queue_start);
	unlink(errlog);
	unlink(sock);
	unlink(uds);
	rmdir(dir);
	return 0;
}
