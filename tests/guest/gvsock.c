// SPDX-License-Identifier: MIT
/*
 * gvsock - stream checks for the virtio-vsock tests.  The same source is
 * built static for the guest (AF_VSOCK) and for the host (unix sockets, the
 * way virtq-vsock bridges them: a guest connection to CID 2 port P arrives
 * at "<uds>_P"; a host connection to "<uds>" that writes "CONNECT P\n" gets
 * "OK ...\n" and is joined to the guest's listener on port P).
 *
 *   gvsock send (-c CID -p PORT | -u PATH [-P PORT]) -n BYTES [-j CONNS] [-w BYTES -d USEC] [-W sec]
 *        CONNS connections at once, each sends a header and BYTES of a
 *        seeded stream, then waits for the receiver's trailer (byte count
 *        and 64-bit checksum) and compares it with its own.  -w writes at
 *        most BYTES at a time, -d sleeps USEC after each: a trickle that
 *        the backend forwards as many small packets.
 *   gvsock recv (-p PORT | -u PATH) [-j CONNS] [-r BYTES -d USEC] [-H sec]
 *        accept CONNS connections, check every byte and the checksum of
 *        each, answer with the trailer.  -r reads at most BYTES at a time,
 *        -d sleeps USEC after each read: a slow reader.  -H: connection 0
 *        stops reading for that long once it has an eighth of its stream.
 *   gvsock echo (-p PORT | -u PATH) [-j CONNS]
 *        accept CONNS connections; each announces a length, gets that many
 *        bytes echoed back.
 *   gvsock call (-c CID -p PORT | -u PATH [-P PORT]) -n BYTES [-j CONNS] [-W sec]
 *        the client of "echo": sends while reading back, checks every byte.
 *   gvsock msgecho (-p PORT | -u PATH) [-j CONNS]
 *        SOCK_SEQPACKET: accept CONNS connections, send every message back
 *        as one message, until the peer shuts down.
 *   gvsock msgcall (-c CID -p PORT | -u PATH [-P PORT]) -n MSGS [-j CONNS] [-W sec]
 *        SOCK_SEQPACKET client of msgecho: MSGS messages of 1 byte to 96 KiB,
 *        each must come back whole in one read, no more, no less, intact.
 *   gvsock duplex (-c CID -p PORT | -u PATH -P PORT) -L PORT|PATH -n BYTES [-j CONNS]
 *                 [-r BYTES -d USEC] [-H sec] [-S sec] [-E STALLS] [-W sec]
 *        both ways at once: CONNS "send" connections as above, while the
 *        listener at -L (a vsock port; with -u a UNIX path) takes CONNS
 *        "recv" connections (-r/-d/-H as for recv).  A monitor watches
 *        every connection's byte count: one that stands still for -S
 *        seconds (5) while another moved is a stall (STALL); the run
 *        passes with exactly -E of them (0), so a connection held on
 *        purpose (-H) can be told to stand still alone.  Nothing moving at
 *        all for max(-W, 4 * -S) seconds is a hang.  Prints each
 *        connection's duration, longest pause and (receivers) the most
 *        bytes once waiting in its socket (CONN), and a DUPLEX summary.
 *   gvsock cid   print this side's local CID.
 *
 * Lines "KEY k=v ..." for the scripts; exit 0 ok, 1 a check failed, 2 setup.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BUFSZ 65536

struct hdr {
	char magic[4];
	uint32_t zero;
	uint64_t len, seed;
};

struct trailer {
	char magic[4];
	uint32_t status;
	uint64_t bytes, csum;
};

static unsigned int cid = 2, port;
static int stype = SOCK_STREAM;         /* SOCK_SEQPACKET for msg* */
static const char *upath;
static int uport = -1;
static double wait_secs = 10;
static size_t read_max;                 /* -r: bytes per read, 0: BUFSZ */
static size_t write_max;                /* -w: bytes per write, 0: BUFSZ */
static unsigned int pause_us;           /* -d: sleep after each read or send */
static const char *listen_addr;         /* -L: where duplex listens */
static double stall_secs = 5;           /* -S */
static double hold_secs;                /* -H: receiver 0 stops reading */
static int expect_stalls;               /* -E */

/* duplex: a connection's progress, written by its child, read by the
 * monitor (the parent) through shared memory. */
enum { CONN_IDLE, CONN_RUN, CONN_DRAIN, CONN_DONE };

struct conn_prog {
	_Atomic uint64_t bytes;
	_Atomic int state;      /* CONN_*; RUN once connected, DRAIN: a sender
				 * waits for the trailer (its receiver moves) */
	double t_start, t_end;  /* written before the state that shows them */
	int queued_max;         /* recv: most bytes seen waiting in the socket */
};

static struct conn_prog *me;    /* this child's slot; NULL outside duplex */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_secs(double secs)
{
	struct timespec ts = { (time_t)secs, (long)((secs - (time_t)secs) * 1e9) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void progress(int state, uint64_t bytes)
{
	if (!me)
		return;
	if (atomic_load(&me->state) == CONN_IDLE)
		me->t_start = now();
	if (state == CONN_DONE)
		me->t_end = now();
	atomic_store(&me->bytes, bytes);
	atomic_store(&me->state, state);
}

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Byte "off" of the stream named by seed: any chunking gives the same bytes. */
static void fill(uint8_t *p, uint64_t off, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t o = off + i;

		p[i] = (uint8_t)(mix(seed + (o >> 3)) >> (8 * (o & 7)));
	}
}

static uint64_t fnv64(uint64_t h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

#define FNV64_INIT 0xcbf29ce484222325ull

static int read_all(int fd, void *b, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)b + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EPIPE;
		got += (size_t)r;
	}
	return 0;
}

static int write_all(int fd, const void *b, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = write(fd, (const char *)b + done, n - done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		done += (size_t)r;
	}
	return 0;
}

static int try_connect(void)
{
	int fd, r;

	if (upath) {
		struct sockaddr_un a = { .sun_family = AF_UNIX };

		snprintf(a.sun_path, sizeof(a.sun_path), "%s", upath);
		fd = socket(AF_UNIX, stype, 0);
		r = connect(fd, (struct sockaddr *)&a, sizeof(a));
		if (!r && uport >= 0) {
			char line[64];
			size_t i = 0;
			int n = snprintf(line, sizeof(line), "CONNECT %d\n", uport);

			r = write_all(fd, line, (size_t)n);
			if (stype == SOCK_SEQPACKET) {
				/* the reply is one message */
				ssize_t k = r ? -1 : recv(fd, line, sizeof(line) - 1, 0);

				i = k > 0 ? (size_t)k : 0;
			} else {
				while (!r && i < sizeof(line) - 1 && read(fd, line + i, 1) == 1 &&
				       line[i] != '\n')
					i++;
			}
			line[i] = 0;
			if (!r && strncmp(line, "OK", 2)) {
				errno = ECONNREFUSED;
				r = -1;
			}
		}
	} else {
		struct sockaddr_vm a = { .svm_family = AF_VSOCK, .svm_cid = cid,
					 .svm_port = port };

		fd = socket(AF_VSOCK, stype, 0);
		if (fd < 0) {
			perror("socket(AF_VSOCK)");
			exit(2);
		}
		r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	}
	if (r) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

static int connect_retry(void)
{
	double end = now() + wait_secs;

	for (;;) {
		int fd = try_connect();

		if (fd >= 0)
			return fd;
		if (now() > end) {
			printf("CONNECT error=%s\n", strerror(-fd));
			return fd;
		}
		usleep(100000);
	}
}

/* Listen at path (a UNIX socket) or, without one, at vsock port vport. */
static int listen_on(const char *path, unsigned int vport)
{
	int fd;

	if (path) {
		struct sockaddr_un a = { .sun_family = AF_UNIX };

		snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
		unlink(path);
		fd = socket(AF_UNIX, stype, 0);
		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
			perror("bind(unix)");
			exit(2);
		}
	} else {
		struct sockaddr_vm a = { .svm_family = AF_VSOCK,
					 .svm_cid = VMADDR_CID_ANY, .svm_port = vport };

		fd = socket(AF_VSOCK, stype, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
			perror("bind(vsock)");
			exit(2);
		}
	}
	if (listen(fd, 64) < 0) {
		perror("listen");
		exit(2);
	}
	return fd;
}

static uint64_t conn_seed(int i)
{
	return mix((uint64_t)getpid() << 16 ^ (uint64_t)(now() * 1e6) ^ (uint64_t)i << 48);
}

/* One sending connection; returns 0 when the receiver confirmed everything. */
static int one_send(int i, uint64_t len)
{
	static uint8_t b[BUFSZ];
	struct hdr h = { .magic = "VQVS", .len = len, .seed = conn_seed(i) };
	struct trailer t;
	uint64_t off = 0, csum = FNV64_INIT;
	double t0 = now();
	int fd = connect_retry(), r;

	if (fd < 0)
		return 2;
	r = write_all(fd, &h, sizeof(h));
	progress(CONN_RUN, 0);
	while (!r && off < len) {
		size_t n = len - off < BUFSZ ? (size_t)(len - off) : BUFSZ;

		if (write_max && n > write_max)
			n = write_max;
		fill(b, off, n, h.seed);
		csum = fnv64(csum, b, n);
		r = write_all(fd, b, n);
		off += n;
		progress(CONN_RUN, off);
		if (pause_us)
			usleep(pause_us);
	}
	if (r) {
		printf("SEND conn=%d error=%s at=%llu result=FAIL\n", i, strerror(-r),
		       (unsigned long long)off);
		return 1;
	}
	progress(CONN_DRAIN, off);
	r = read_all(fd, &t, sizeof(t));
	close(fd);
	if (r || memcmp(t.magic, "VQVT", 4)) {
		printf("SEND conn=%d error=%s result=FAIL\n", i, r ? strerror(-r) : "bad-trailer");
		return 1;
	}
	int ok = !t.status && t.bytes == len && t.csum == csum;

	progress(CONN_DONE, off);
	printf("SEND conn=%d bytes=%llu csum=%016llx peer_bytes=%llu peer_csum=%016llx secs=%.3f result=%s\n",
	       i, (unsigned long long)len, (unsigned long long)csum,
	       (unsigned long long)t.bytes, (unsigned long long)t.csum, now() - t0,
	       ok ? "PASS" : "FAIL");
	return !ok;
}

static int one_recv(int fd, int i)
{
	static uint8_t b[BUFSZ], want[BUFSZ];
	struct hdr h;
	struct trailer t = { .magic = "VQVT" };
	uint64_t off = 0, csum = FNV64_INIT;
	long long bad = -1;

	progress(CONN_RUN, 0);
	if (read_all(fd, &h, sizeof(h)) || memcmp(h.magic, "VQVS", 4)) {
		printf("RECV conn=%d error=bad-header result=FAIL\n", i);
		return 1;
	}
	while (off < h.len) {
		size_t n = h.len - off < BUFSZ ? (size_t)(h.len - off) : BUFSZ;

		if (read_max && n > read_max)
			n = read_max;
		int queued;

		if (me && !ioctl(fd, FIONREAD, &queued) && queued > me->queued_max)
			me->queued_max = queued;    /* how far the sender got ahead */
		ssize_t r = read(fd, b, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		fill(want, off, (size_t)r, h.seed);
		if (bad < 0 && memcmp(b, want, (size_t)r))
			for (ssize_t k = 0; k < r; k++)
				if (b[k] != want[k]) {
					bad = (long long)(off + (uint64_t)k);
					break;
				}
		csum = fnv64(csum, b, (size_t)r);
		off += (uint64_t)r;
		progress(CONN_RUN, off);
		if (pause_us)
			usleep(pause_us);
		if (hold_secs > 0 && i == 0 && off >= h.len / 8) {
			sleep_secs(hold_secs);
			hold_secs = 0;
		}
	}
	t.status = bad >= 0 || off != h.len;
	t.bytes = off;
	t.csum = csum;
	write_all(fd, &t, sizeof(t));
	progress(CONN_DONE, off);
	printf("RECV conn=%d bytes=%llu expected=%llu first_bad=%lld csum=%016llx result=%s\n",
	       i, (unsigned long long)off, (unsigned long long)h.len, bad,
	       (unsigned long long)csum, t.status ? "FAIL" : "PASS");
	return (int)t.status;
}

static int one_echo(int fd, int i)
{
	static uint8_t b[BUFSZ];
	struct hdr h;
	uint64_t off = 0;

	if (read_all(fd, &h, sizeof(h)) || memcmp(h.magic, "VQVE", 4)) {
		printf("ECHO conn=%d error=bad-header result=FAIL\n", i);
		return 1;
	}
	while (off < h.len) {
		size_t n = h.len - off < BUFSZ ? (size_t)(h.len - off) : BUFSZ;
		ssize_t r = read(fd, b, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || write_all(fd, b, (size_t)r))
			break;
		off += (uint64_t)r;
	}
	printf("ECHO conn=%d bytes=%llu expected=%llu result=%s\n", i,
	       (unsigned long long)off, (unsigned long long)h.len,
	       off == h.len ? "PASS" : "FAIL");
	return off != h.len;
}

/* The echo client writes and reads at once so neither side's buffer fills. */
static int one_call(int i, uint64_t len)
{
	static uint8_t b[BUFSZ], want[BUFSZ];
	struct hdr h = { .magic = "VQVE", .len = len, .seed = conn_seed(i) };
	uint64_t sent = 0, got = 0, csum_tx = FNV64_INIT, csum_rx = FNV64_INIT;
	long long bad = -1;
	double t0 = now();
	int fd = connect_retry();

	if (fd < 0)
		return 2;
	if (write_all(fd, &h, sizeof(h))) {
		printf("CALL conn=%d error=header result=FAIL\n", i);
		return 1;
	}
	fcntl(fd, F_SETFL, O_NONBLOCK);
	while (got < len) {
		struct pollfd p = { fd, POLLIN | (sent < len ? POLLOUT : 0), 0 };

		if (poll(&p, 1, 30000) <= 0) {
			printf("CALL conn=%d error=stalled sent=%llu got=%llu result=FAIL\n", i,
			       (unsigned long long)sent, (unsigned long long)got);
			return 1;
		}
		if ((p.revents & POLLOUT) && sent < len) {
			size_t n = len - sent < BUFSZ ? (size_t)(len - sent) : BUFSZ;

			fill(b, sent, n, h.seed);
			ssize_t r = write(fd, b, n);

			if (r > 0) {
				csum_tx = fnv64(csum_tx, b, (size_t)r);
				sent += (uint64_t)r;
			} else if (r < 0 && errno != EAGAIN && errno != EINTR) {
				break;
			}
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t r = read(fd, b, BUFSZ);

			if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
				break;
			if (r > 0) {
				if (got + (uint64_t)r > len)
					r = (ssize_t)(len - got);
				fill(want, got, (size_t)r, h.seed);
				if (bad < 0 && memcmp(b, want, (size_t)r))
					bad = (long long)got;
				csum_rx = fnv64(csum_rx, b, (size_t)r);
				got += (uint64_t)r;
			}
		}
	}
	close(fd);
	int ok = got == len && bad < 0 && csum_rx == csum_tx;

	printf("CALL conn=%d bytes=%llu got=%llu first_bad=%lld csum=%016llx echo_csum=%016llx secs=%.3f result=%s\n",
	       i, (unsigned long long)len, (unsigned long long)got, bad,
	       (unsigned long long)csum_tx, (unsigned long long)csum_rx, now() - t0,
	       ok ? "PASS" : "FAIL");
	return !ok;
}

#define MSG_MAX (96u << 10)

/* Message k of a msgcall connection: mostly small, some over one packet. */
static uint32_t msg_len(uint64_t seed, uint64_t k)
{
	uint64_t x = mix(seed ^ k);

	return 1 + (uint32_t)(x % 4 == 0 ? (x >> 8) % MSG_MAX : (x >> 8) % 300);
}

static int one_msgecho(int fd, int i)
{
	static uint8_t b[MSG_MAX + 1];
	uint64_t msgs = 0, bytes = 0;
	int ok = 1;

	for (;;) {
		ssize_t r = recv(fd, b, sizeof(b), 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;  /* the caller shut down (it sends no empty message) */
		if (send(fd, b, (size_t)r, 0) != r) {
			ok = 0;
			break;
		}
		msgs++;
		bytes += (uint64_t)r;
	}
	printf("MSGECHO conn=%d msgs=%llu bytes=%llu result=%s\n", i,
	       (unsigned long long)msgs, (unsigned long long)bytes, ok ? "PASS" : "FAIL");
	return !ok;
}

static int one_msgcall(int i, uint64_t n)
{
	static uint8_t b[MSG_MAX + 1], want[MSG_MAX];
	uint64_t seed = conn_seed(i), k, bytes = 0;
	double t0 = now();
	const char *why = "";
	int fd = connect_retry();

	if (fd < 0)
		return 2;
	for (k = 0; k < n && !*why; k++) {
		uint32_t len = msg_len(seed, k);
		ssize_t r;

		fill(want, k << 32, len, seed);
		if (send(fd, want, len, 0) != (ssize_t)len) {
			why = "send";
			break;
		}
		/* one read must be exactly the message: bigger buffer, and
		 * MSG_TRUNC would say a longer one was cut */
		do
			r = recv(fd, b, sizeof(b), 0);
		while (r < 0 && errno == EINTR);
		if (r != (ssize_t)len)
			why = r < 0 ? "recv" : "length";
		else if (memcmp(b, want, len))
			why = "bytes";
		bytes += len;
	}
	shutdown(fd, SHUT_WR);
	close(fd);
	printf("MSGCALL conn=%d msgs=%llu bytes=%llu secs=%.3f%s%s result=%s\n", i,
	       (unsigned long long)k, (unsigned long long)bytes, now() - t0,
	       *why ? " error=" : "", why, *why ? "FAIL" : "PASS");
	return *why != 0;
}

/* Run fn in CONNS children; the exit status is the worst of theirs. */
static int fan_out(int conns, int (*client)(int, uint64_t), uint64_t len,
		   int (*server)(int, int))
{
	int lfd = server ? listen_on(upath, port) : -1, worst = 0, st;

	if (server) {
		printf("LISTEN %s%s port=%u conns=%d\n", upath ? "unix=" : "vsock",
		       upath ? upath : "", port, conns);
		fflush(stdout);
	}
	for (int i = 0; i < conns; i++) {
		int cfd = -1;

		if (server) {
			cfd = accept(lfd, NULL, NULL);
			if (cfd < 0) {
				perror("accept");
				return 2;
			}
		}
		fflush(stdout);
		pid_t pid = fork();

		if (pid == 0)
			_exit(server ? server(cfd, i) : client(i, len));
		if (pid < 0) {
			perror("fork");
			return 2;
		}
		if (cfd >= 0)
			close(cfd);
	}
	while (wait(&st) > 0) {
		int r = WIFEXITED(st) ? WEXITSTATUS(st) : 2;

		if (r > worst)
			worst = r;
	}
	return worst;
}

/* duplex: the monitor's view of one connection (slots 0..CONNS-1 send,
 * CONNS..2*CONNS-1 receive). */
struct conn_watch {
	pid_t pid;              /* 0 once it has exited */
	int rc;                 /* its exit status then */
	uint64_t seen;          /* byte count and state at the last change */
	int seen_state;
	double last;            /* when they last changed */
	double longest;         /* the longest they stood still while running */
	int stalled;
};

static pid_t spawn(struct conn_prog *slot, int i, int cfd, uint64_t len)
{
	fflush(stdout);
	pid_t pid = fork();

	if (pid == 0) {
		me = slot;
		_exit(cfd < 0 ? one_send(i, len) : one_recv(cfd, i));
	}
	return pid;
}

/* Did any connection but i move after i last did? */
static int others_moved(const struct conn_watch *w, int n, int i)
{
	for (int j = 0; j < n; j++)
		if (j != i && w[j].seen_state != CONN_IDLE && w[j].last > w[i].last)
			return 1;
	return 0;
}

/* One look at every connection at time t: note what moved, report the
 * stalls (a running connection still for stall_secs while another moved).
 * Returns the time of the latest change seen, or 0. */
static double watch(const struct conn_prog *tab, struct conn_watch *w, int n,
		    int conns, double t)
{
	double moved = 0;

	for (int i = 0; i < n; i++) {
		uint64_t b = atomic_load(&tab[i].bytes);
		int st = atomic_load(&tab[i].state);

		if (st == CONN_IDLE || (b == w[i].seen && st == w[i].seen_state))
			continue;
		if (w[i].seen_state == CONN_RUN && t - w[i].last > w[i].longest)
			w[i].longest = t - w[i].last;
		w[i].seen = b;
		w[i].seen_state = st;
		w[i].last = moved = t;
	}
	for (int i = 0; i < n; i++) {
		double still = t - w[i].last;

		if (!w[i].pid || w[i].seen_state != CONN_RUN || w[i].stalled)
			continue;
		if (still > stall_secs && others_moved(w, n, i)) {
			w[i].stalled = 1;
			printf("STALL dir=%s conn=%d bytes=%llu still=%.1f\n",
			       i < conns ? "send" : "recv", i % conns,
			       (unsigned long long)w[i].seen, still);
		}
	}
	return moved;
}

/* Collect the children that exited; returns how many. */
static int reap(struct conn_watch *w, int n)
{
	int st, done = 0;
	pid_t pid;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
		for (int i = 0; i < n; i++)
			if (w[i].pid == pid) {
				w[i].pid = 0;
				w[i].rc = WIFEXITED(st) ? WEXITSTATUS(st) : 2;
				done++;
			}
	return done;
}

/* The CONN line of each connection and the DUPLEX summary; the status. */
static int duplex_report(const struct conn_prog *tab, const struct conn_watch *w,
			 int conns, int hung)
{
	int pass[2] = { 0, 0 }, stalls = 0, worst = 0;
	double lo[2] = { 1e9, 1e9 }, hi[2] = { 0, 0 }, longest = 0;

	for (int i = 0; i < 2 * conns; i++) {
		int d = i >= conns, st = atomic_load(&tab[i].state);
		double secs = st == CONN_DONE ? tab[i].t_end - tab[i].t_start : -1;
		int ok = !w[i].rc && st == CONN_DONE;

		printf("CONN dir=%s conn=%d bytes=%llu secs=%.3f longest_pause=%.3f stalled=%d queued_max=%d result=%s\n",
		       d ? "recv" : "send", i % conns,
		       (unsigned long long)atomic_load(&tab[i].bytes), secs,
		       w[i].longest, w[i].stalled, tab[i].queued_max, ok ? "PASS" : "FAIL");
		pass[d] += ok;
		stalls += w[i].stalled;
		if (w[i].rc > worst)
			worst = w[i].rc;
		if (secs >= 0 && secs < lo[d])
			lo[d] = secs;
		if (secs > hi[d])
			hi[d] = secs;
		if (w[i].longest > longest)
			longest = w[i].longest;
	}
	for (int d = 0; d < 2; d++)
		if (lo[d] > hi[d])
			lo[d] = hi[d];  /* none finished */
	int ok = pass[0] == conns && pass[1] == conns && !hung && stalls == expect_stalls;

	printf("DUPLEX conns=%d send_pass=%d recv_pass=%d stalls=%d expected_stalls=%d hung=%d send_secs=%.3f..%.3f recv_secs=%.3f..%.3f longest_pause=%.3f result=%s\n",
	       conns, pass[0], pass[1], stalls, expect_stalls, hung, lo[0], hi[0], lo[1], hi[1], longest,
	       ok ? "PASS" : "FAIL");
	return ok ? 0 : worst ? worst : 1;
}

/*
 * CONNS senders and CONNS receivers at once, watched for stalls.  Nothing
 * moving at all for hang_secs (no byte, no accept, no exit) is a hang:
 * every child is killed so the run ends with a report.
 */
static int duplex(int conns, uint64_t len)
{
	int n = 2 * conns, accepted = 0, running = 0, hung = 0;
	double hang_secs = wait_secs > 4 * stall_secs ? wait_secs : 4 * stall_secs;
	struct conn_prog *tab = mmap(NULL, (size_t)n * sizeof(*tab), PROT_READ | PROT_WRITE,
				     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct conn_watch *w = calloc((size_t)n, sizeof(*w));

	if (tab == MAP_FAILED || !w || !listen_addr) {
		fprintf(stderr, "gvsock duplex: %s\n", listen_addr ? "out of memory" : "needs -L");
		return 2;
	}
	int lfd = upath ? listen_on(listen_addr, 0) :
		  listen_on(NULL, (unsigned int)strtoul(listen_addr, NULL, 0));

	printf("LISTEN %s%s conns=%d\n", upath ? "unix=" : "vsock port=", listen_addr, conns);
	for (int i = 0; i < conns; i++, running++)
		if ((w[i].pid = spawn(&tab[i], i, -1, len)) < 0) {
			perror("fork");
			return 2;
		}
	double event = now();

	while (running || accepted < conns) {
		struct pollfd p = { lfd, POLLIN, 0 };

		if (accepted < conns && poll(&p, 1, 100) > 0) {
			int cfd = accept(lfd, NULL, NULL);

			if (cfd >= 0) {
				struct conn_watch *c = &w[conns + accepted];

				c->pid = spawn(&tab[conns + accepted], accepted, cfd, 0);
				close(cfd);
				if (c->pid < 0) {
					perror("fork");
					return 2;
				}
				accepted++;
				running++;
				event = now();
			}
		} else if (accepted == conns) {
			usleep(100000);
		}
		double t = now(), moved = watch(tab, w, n, conns, t);
		int gone = reap(w, n);

		running -= gone;
		if (moved || gone)
			event = t;
		if (t - event > hang_secs) {
			printf("HANG nothing moved for %.1f s: %d of %d connections accepted, %d running\n",
			       t - event, accepted, conns, running);
			hung = 1;
			for (int i = 0; i < n; i++)
				if (w[i].pid > 0)
					kill(w[i].pid, SIGKILL);
			while (running)
				running -= reap(w, n);
			break;
		}
	}
	int rc = duplex_report(tab, w, conns, hung);

	free(w);
	munmap(tab, (size_t)n * sizeof(*tab));
	close(lfd);
	return rc;
}

static uint64_t parse_size(const char *s)
{
	char *e;
	uint64_t v = strtoull(s, &e, 0);

	if (*e == 'K' || *e == 'k')
		v <<= 10;
	else if (*e == 'M' || *e == 'm')
		v <<= 20;
	return v;
}

int main(int argc, char **argv)
{
	uint64_t len = 1 << 20;
	int conns = 1, c;

	if (argc < 2) {
		fprintf(stderr, "usage: gvsock send|recv|echo|call|msgecho|msgcall|duplex|cid [opts]\n");
		return 2;
	}
	const char *cmd = argv[1];

	optind = 2;
	while ((c = getopt(argc, argv, "c:p:u:P:n:j:W:r:w:d:L:S:H:E:")) != -1) {
		switch (c) {
		case 'c': cid = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'p': port = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'u': upath = optarg; break;
		case 'P': uport = atoi(optarg); break;
		case 'n': len = parse_size(optarg); break;
		case 'j': conns = atoi(optarg); break;
		case 'W': wait_secs = atof(optarg); break;
		case 'r': read_max = (size_t)parse_size(optarg); break;
		case 'w': write_max = (size_t)parse_size(optarg); break;
		case 'd': pause_us = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'L': listen_addr = optarg; break;
		case 'S': stall_secs = atof(optarg); break;
		case 'H': hold_secs = atof(optarg); break;
		case 'E': expect_stalls = atoi(optarg); break;
		default: return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(cmd, "cid")) {
		unsigned int local = 0;
		int fd = open("/dev/vsock", O_RDONLY);

		if (fd < 0 || ioctl(fd, IOCTL_VM_SOCKETS_GET_LOCAL_CID, &local) < 0) {
			perror("IOCTL_VM_SOCKETS_GET_LOCAL_CID");
			return 2;
		}
		printf("CID local=%u\n", local);
		return 0;
	}
	if (!strncmp(cmd, "msg", 3))
		stype = SOCK_SEQPACKET;
	if (!strcmp(cmd, "msgcall"))
		return fan_out(conns, one_msgcall, len, NULL);
	if (!strcmp(cmd, "msgecho"))
		return fan_out(conns, NULL, 0, one_msgecho);
	if (!strcmp(cmd, "send"))
		return fan_out(conns, one_send, len, NULL);
	if (!strcmp(cmd, "call"))
		return fan_out(conns, one_call, len, NULL);
	if (!strcmp(cmd, "recv"))
		return fan_out(conns, NULL, 0, one_recv);
	if (!strcmp(cmd, "echo"))
		return fan_out(conns, NULL, 0, one_echo);
	if (!strcmp(cmd, "duplex"))
		return duplex(conns, len);
	fprintf(stderr, "gvsock: unknown command %s\n", cmd);
	return 2;
}
