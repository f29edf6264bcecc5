// SPDX-License-Identifier: MIT
/* The vhost-user daemons' shared start-up and control loop (daemon.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <virtq/log.h>
#include <virtq/runtime.h>
#include <virtq/spec.h>
#include <virtq/vhost_user.h>

#include "daemon.h"

static void log_stderr(void *arg, enum vq_log_level level, const char *msg)
{
	(void)arg;
	(void)level;
	fprintf(stderr, "%s\n", msg);
}

void vqd_log_to_stderr(bool quiet)
{
	vq_log_set(log_stderr, NULL, quiet ? VQ_LOG_WARNING : VQ_LOG_INFO);
}

/* The transport's bits (virtio 1.2, 6) and vhost-user's own one. */
static const struct vqd_feature transport_features[] = {
	{ 24, "NOTIFY_ON_EMPTY" }, { 27, "ANY_LAYOUT" },
	{ VQ_F_INDIRECT_DESC, "INDIRECT_DESC" }, { VQ_F_EVENT_IDX, "EVENT_IDX" },
	{ VQ_VHU_F_PROTOCOL_FEATURES, "PROTOCOL_FEATURES" },
	{ VQ_F_VERSION_1, "VERSION_1" }, { VQ_F_ACCESS_PLATFORM, "ACCESS_PLATFORM" },
	{ VQ_F_RING_PACKED, "RING_PACKED" }, { VQ_F_IN_ORDER, "IN_ORDER" },
	{ 36, "ORDER_PLATFORM" }, { 37, "SR_IOV" }, { 38, "NOTIFICATION_DATA" },
	{ 39, "NOTIF_CONFIG_DATA" }, { 40, "RING_RESET" },
	{ 0, NULL },
};

static const char *feature_name(const struct vqd_feature *t, unsigned bit)
{
	for (; t && t->name; t++)
		if (t->bit == bit)
			return t->name;
	return NULL;
}

const char *vqd_features_str(char *buf, size_t n, uint64_t f,
			     const struct vqd_feature *dev)
{
	size_t len = 0;
	int w;

	if (!n)
		return buf;
	buf[0] = 0;
	for (unsigned bit = 0; bit < 64; bit++) {
		const char *name;

		if (!(f & (UINT64_C(1) << bit)))
			continue;
		/* 24 to 40 are the transport's, the others the device type's */
		name = feature_name(bit < 24 || bit > 40 ? dev : transport_features, bit);
		w = name ? snprintf(buf + len, n - len, "%s%s", len ? " " : "", name) :
		    snprintf(buf + len, n - len, "%sbit%u", len ? " " : "", bit);
		if (w < 0 || (size_t)w >= n - len)
			return buf;
		len += (size_t)w;
	}
	snprintf(buf + len, n - len, "%s(0x%" PRIx64 ")", len ? " " : "", f);
	return buf;
}

double vqd_now(void)
{
	return (double)vq_rt_now_ns() / 1e9;
}

/* ---- statistics lines ---- */

/* The line being printed answers SIGUSR1 (ctl_snapshot). */
static bool line_snapshot;

struct rates {
	double tx_pps, rx_pps, tx_gbps, rx_gbps, kpp, cpp;
};

static struct rates rates(const struct vqd_count *now, const struct vqd_count *prev,
			  double dt)
{
	uint64_t pk = (now->tx_pkts - prev->tx_pkts) + (now->rx_pkts - prev->rx_pkts);
	struct rates r = {
		.tx_pps = (double)(now->tx_pkts - prev->tx_pkts) / dt,
		.rx_pps = (double)(now->rx_pkts - prev->rx_pkts) / dt,
		.tx_gbps = (double)(now->tx_bytes - prev->tx_bytes) * 8 / dt / 1e9,
		.rx_gbps = (double)(now->rx_bytes - prev->rx_bytes) * 8 / dt / 1e9,
		.kpp = pk ? (double)(now->kicks - prev->kicks) / (double)pk : 0,
		.cpp = pk ? (double)(now->calls - prev->calls) / (double)pk : 0,
	};

	return r;
}

static const char *const pps_units[] = { "pps", "kpps", "Mpps", "Gpps" };
static const char *const bps_units[] = { "bit/s", "kbit/s", "Mbit/s", "Gbit/s" };

/* v in the unit of units[] that keeps it under 1000, with three
 * significant digits: a ping's one packet a second reads "1.0 pps", not
 * "0.000 Mpps". */
static const char *human_rate(char *buf, size_t n, double v, const char *const units[4])
{
	unsigned k = 0;
	int prec;

	while (v >= 999.5 && k < 3) {
		v /= 1000;
		k++;
	}
	if (v == 0)
		prec = 0;
	else if (k == 0)
		prec = v < 10 ? 1 : 0;
	else
		prec = v < 9.995 ? 2 : v < 99.95 ? 1 : 0;
	snprintf(buf, n, "%.*f %s", prec, v, units[k]);
	return buf;
}

void vqd_line_start(bool json, const struct vqd_count *now,
		    const struct vqd_count *prev, double dt, double t, bool final)
{
	struct rates r = rates(now, prev, dt);
	char tp[24], tb[24], rp[24], rb[24];

	if (json) {
		printf("{\"%s\":true,\"t\":%.3f%s", final ? "summary" : "stats", t,
		       line_snapshot ? ",\"snapshot\":true" : "");
		return;
	}
	/* the rates over the line's interval, then the running totals, so
	 * that a line shows a trickle of traffic and what it added up to */
	printf("%-8s %7.2fs tx %9s %11s  rx %9s %11s  kicks/pkt %.4f calls/pkt %.4f"
	       "  total tx %" PRIu64 " pkts %" PRIu64 " B rx %" PRIu64 " pkts %" PRIu64
	       " B kicks %" PRIu64 " calls %" PRIu64,
	       final ? "summary" : line_snapshot ? "snapshot" : "stats", t,
	       human_rate(tp, sizeof(tp), r.tx_pps, pps_units),
	       human_rate(tb, sizeof(tb), r.tx_gbps * 1e9, bps_units),
	       human_rate(rp, sizeof(rp), r.rx_pps, pps_units),
	       human_rate(rb, sizeof(rb), r.rx_gbps * 1e9, bps_units),
	       r.kpp, r.cpp, now->tx_pkts, now->tx_bytes, now->rx_pkts, now->rx_bytes,
	       now->kicks, now->calls);
}

void vqd_queue_line(bool json, bool first, unsigned index, const char *name,
		    const struct vqd_queue_count *now,
		    const struct vqd_queue_count *prev, double dt)
{
	char pr[24], br[24], nm[24];

	if (json) {
		printf("%s{\"index\":%u,\"name\":\"%s\",\"pkts\":%" PRIu64
		       ",\"bytes\":%" PRIu64 ",\"kicks\":%" PRIu64 ",\"calls\":%" PRIu64
		       ",\"wakeups\":%" PRIu64 ",\"poll_hits\":%" PRIu64
		       ",\"poll_misses\":%" PRIu64
		       ",\"pps\":%.0f,\"gbps\":%.4f}", first ? "" : ",", index, name,
		       now->pkts, now->bytes, now->kicks, now->calls, now->wakeups,
		       now->poll_hits, now->poll_misses,
		       (double)(now->pkts - prev->pkts) / dt,
		       (double)(now->bytes - prev->bytes) * 8 / dt / 1e9);
		return;
	}
	snprintf(nm, sizeof(nm), "(%s)", name);
	printf("  queue %u %-7s %9s %11s  total %" PRIu64 " pkts %" PRIu64
	       " B kicks %" PRIu64 " calls %" PRIu64 " wakeups %" PRIu64
	       " polls hit %" PRIu64 " missed %" PRIu64 "\n", index, nm,
	       human_rate(pr, sizeof(pr), (double)(now->pkts - prev->pkts) / dt, pps_units),
	       human_rate(br, sizeof(br), (double)(now->bytes - prev->bytes) * 8 / dt,
			  bps_units),
	       now->pkts, now->bytes, now->kicks, now->calls, now->wakeups,
	       now->poll_hits, now->poll_misses);
}

/* ,"process":{...}: how often the daemon's threads blocked (sleeps, in
 * the main: the loops' epoll_waits) and the CPU they used, so a run can
 * say what busy polling saved and what it cost. */
static void json_process(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return;
	printf(",\"process\":{\"voluntary_switches\":%ld,\"involuntary_switches\":%ld"
	       ",\"cpu_s\":%.3f}", ru.ru_nvcsw, ru.ru_nivcsw,
	       (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
}

void vqd_json_backend(struct vq_vhu_backend *b)
{
	struct vq_vhu_iotlb_stats io;
	struct vq_vhu_postcopy_stats pc;

	vq_vhu_backend_iotlb_stats(b, &io, sizeof(io));
	vq_vhu_backend_postcopy_stats(b, &pc, sizeof(pc));
	printf(",\"iotlb\":{\"misses\":%" PRIu64 ",\"misses_unsent\":%" PRIu64
	       ",\"updates\":%" PRIu64 ",\"invalidations\":%" PRIu64
	       ",\"refused\":%" PRIu64 ",\"quiesce_timeouts\":%" PRIu64
	       ",\"channel_failures\":%" PRIu64 "}",
	       io.misses, io.misses_unsent, io.updates, io.invalidations,
	       io.refused, io.quiesce_timeouts, io.channel_failures);
	printf(",\"postcopy\":{\"advises\":%" PRIu64 ",\"listens\":%" PRIu64
	       ",\"regions\":%" PRIu64 ",\"acks\":%" PRIu64 ",\"ends\":%" PRIu64 "}",
	       pc.advises, pc.listens, pc.regions, pc.acks, pc.ends);
	json_process();
}

void vqd_json_rates(const struct vqd_count *now, const struct vqd_count *prev,
		    double dt, bool counts, bool per_pkt)
{
	struct rates r = rates(now, prev, dt);

	if (counts)
		printf(",\"tx_pkts\":%" PRIu64 ",\"rx_pkts\":%" PRIu64
		       ",\"tx_bytes\":%" PRIu64 ",\"rx_bytes\":%" PRIu64
		       ",\"tx_pps\":%.0f,\"rx_pps\":%.0f,\"tx_gbps\":%.4f,\"rx_gbps\":%.4f"
		       ",\"kicks\":%" PRIu64 ",\"calls\":%" PRIu64,
		       now->tx_pkts, now->rx_pkts, now->tx_bytes, now->rx_bytes,
		       r.tx_pps, r.rx_pps, r.tx_gbps, r.rx_gbps, now->kicks, now->calls);
	if (per_pkt)
		printf(",\"kicks_per_pkt\":%.6f,\"calls_per_pkt\":%.6f", r.kpp, r.cpp);
}

/* ---- the control loop ---- */

/*
 * Signals, as a daemon's users expect them (virtq-net(8), SIGNALS):
 * SIGTERM, SIGINT and SIGQUIT end the run (a summary, our sockets
 * removed, exit 0); SIGUSR1 asks for a statistics line now; SIGHUP and
 * SIGUSR2 are ignored (there is no log file to reopen), so that no signal
 * sent by habit kills the daemon with its sockets left behind.
 *
 * The handlers may run on any thread (the framework's workers start
 * before vqd_open and do not block signals), so they only set a flag and
 * write a byte to a pipe the control loop polls: the loop wakes whichever
 * thread took the signal, and a signal that comes just before its poll
 * is not lost.
 */
volatile sig_atomic_t vqd_stop;
static volatile sig_atomic_t snapshot_due;
static int sig_pipe[2] = { -1, -1 };

static void on_signal(int sig)
{
	int e = errno;
	char b = 0;
	ssize_t n;

	if (sig == SIGUSR1)
		snapshot_due = 1;
	else
		vqd_stop = 1;
	n = write(sig_pipe[1], &b, 1);  /* full: a wake-up is pending anyway */
	(void)n;
	errno = e;
}

static int take_signals(void)
{
	static const int handled[] = { SIGTERM, SIGINT, SIGQUIT, SIGUSR1 };
	static const int ignored[] = { SIGHUP, SIGUSR2, SIGPIPE };
	struct sigaction sa;
	unsigned i;

	if (sig_pipe[0] < 0 && pipe2(sig_pipe, O_NONBLOCK | O_CLOEXEC) < 0)
		return -errno;
	memset(&sa, 0, sizeof(sa));
	/* no SA_RESTART: a blocking call returns EINTR and the daemon ends
	 * promptly (vhost-user.rst) */
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(handled) / sizeof(handled[0]); i++)
		sigaddset(&sa.sa_mask, handled[i]);
	for (i = 0; i < sizeof(handled) / sizeof(handled[0]); i++)
		if (sigaction(handled[i], &sa, NULL) < 0)
			return -errno;
	for (i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		signal(ignored[i], SIG_IGN);
	return 0;
}

/* Empty the pipe the handlers wake the loop through. */
static void signals_drain(void)
{
	char buf[64];

	while (read(sig_pipe[0], buf, sizeof(buf)) > 0)
		;
}

int vqd_listen(struct vqd_ctl *c, const char *opt, const char *path, int type,
	       struct vq_unix_listener **out)
{
	struct vq_unix_listen_config lc = {
		.path = path, .type = type, .mode = c->o->socket_mode,
		.set_group = c->o->socket_group_set, .gid = c->o->socket_gid,
	};
	const char *why;
	int r;

	if (c->nlst == VQD_MAX_LISTENERS)
		return -ENOSPC;
	/* before a socket of ours exists (virtq-vsock's host side comes
	 * before vqd_open): a SIGTERM from then on ends the run cleanly */
	r = take_signals();
	if (r < 0) {
		fprintf(stderr, "%s: signals: %s\n", c->cli->name, strerror(-r));
		return r;
	}
	r = vq_unix_listener_new(&lc, out);
	if (r == 0) {
		c->lst[c->nlst++] = *out;
		return vq_unix_listener_fd(*out);
	}
	why = r == -EADDRINUSE ? " (a live socket is there: another instance?)" :
	      r == -EEXIST ? " (something that is not a socket is there)" :
	      r == -EPERM && c->o->socket_group_set ?
	      " (giving it the --socket-group: not a member of it?)" : "";
	fprintf(stderr, "%s: %s: cannot listen on %s: %s%s\n", c->cli->name, opt,
		path, strerror(-r), why);
	return r;
}

/* --client: connect now, or wait for the front-end's socket to appear
 * (the backend tries again every second). */
static int open_client(struct vqd_ctl *c, struct vqd_sock *s)
{
	int r = vq_vhu_backend_connect(s->b, s->path, 1000);

	if (r == -ENOENT || r == -ECONNREFUSED) {
		fprintf(stderr, "%s: waiting for a front-end to listen on %s "
			"(trying every second)\n", c->cli->name, s->path);
		return 0;
	}
	if (r < 0)
		fprintf(stderr, "%s: --client: cannot connect to %s: %s\n",
			c->cli->name, s->path, strerror(-r));
	else if (!c->o->quiet)
		fprintf(stderr, "%s: connected to %s\n", c->cli->name, s->path);
	return r;
}

static int open_socket(struct vqd_ctl *c, struct vqd_sock *s)
{
	struct vq_unix_listener *l;
	int r, fd;

	if (c->o->client)
		return open_client(c, s);
	if (s->fd >= 0) {
		r = vq_vhu_backend_adopt_fd(s->b, s->fd);
		if (r < 0)
			fprintf(stderr, "%s: --fd %d: %s\n", c->cli->name, s->fd,
				r == -ENOTSOCK ? "not a UNIX stream socket" : strerror(-r));
		else if (!c->o->quiet)
			fprintf(stderr, "%s: vhost-user socket inherited on --fd %d\n",
				c->cli->name, s->fd);
		return r;
	}
	fd = vqd_listen(c, s->opt, s->path, SOCK_STREAM, &l);
	if (fd < 0)
		return fd;
	r = vq_vhu_backend_adopt_fd(s->b, fd);
	if (r < 0) {
		fprintf(stderr, "%s: %s %s: %s\n", c->cli->name, s->opt, s->path,
			strerror(-r));
		return r;
	}
	vq_unix_listener_release_fd(l);        /* the backend's now */
	if (!c->o->quiet)
		fprintf(stderr, "%s: listening on %s\n", c->cli->name, s->path);
	return 0;
}

int vqd_open(struct vqd_ctl *c)
{
	int r;

	if (!c->nsocks) {
		c->one = (struct vqd_sock){ .b = c->b, .path = c->o->socket_path,
					    .fd = c->o->fd, .opt = "--socket-path" };
		c->socks = &c->one;
		c->nsocks = 1;
	}
	if (c->nsocks > VQD_MAX_SOCKS)
		return -EINVAL;
	/* Before the socket appears: whoever sees it may send SIGTERM. */
	r = take_signals();
	if (r < 0) {
		fprintf(stderr, "%s: signals: %s\n", c->cli->name, strerror(-r));
		return r;
	}
	for (unsigned i = 0; i < c->nsocks; i++) {
		c->socks[i].was_connected = c->socks[i].done = false;
		r = open_socket(c, &c->socks[i]);
		if (r < 0)
			return r;
	}
	c->t0 = c->last = vqd_now();
	c->next_stats = c->o->stats_interval > 0 ? c->t0 + c->o->stats_interval : 0;
	return 0;
}

void vqd_close(struct vqd_ctl *c)
{
	/* b speaks for the one socket of --socket-path or --fd */
	if (c->socks == &c->one)
		c->one.b = NULL;
	for (unsigned i = 0; i < c->nsocks; i++) {
		vq_vhu_backend_free(c->socks[i].b);
		c->socks[i].b = NULL;
	}
	vq_vhu_backend_free(c->b);
	c->b = NULL;
	while (c->nlst)
		vq_unix_listener_free(c->lst[--c->nlst]);
}

/* The backends' own timers (reconnecting) and the next statistics line. */
static int ctl_timeout(const struct vqd_ctl *c)
{
	int tmo = -1;

	for (unsigned i = 0; i < c->nsocks; i++) {
		int t = c->socks[i].done ? -1 : vq_vhu_backend_timeout_ms(c->socks[i].b);

		if (t >= 0 && (tmo < 0 || t < tmo))
			tmo = t;
	}
	if (c->next_stats) {
		int st = (int)((c->next_stats - vqd_now()) * 1000) + 1;

		if (st < 0)
			st = 0;
		if (tmo < 0 || st < tmo)
			tmo = st;
	}
	return tmo;
}

/* Wait for a vhost-user socket or a signal: readable[i] says which
 * sockets are readable.  0, or -errno. */
static int ctl_wait(const struct vqd_ctl *c, int timeout_ms, bool *readable)
{
	struct pollfd pf[VQD_MAX_SOCKS + 1];
	unsigned n = c->nsocks, i;
	int r;

	for (i = 0; i < n; i++) {
		/* A negative fd (reconnecting, done) is ignored by poll. */
		pf[i] = (struct pollfd){ .fd = c->socks[i].done ? -1 :
					 vq_vhu_backend_fd(c->socks[i].b), .events = POLLIN };
		readable[i] = false;
	}
	pf[n] = (struct pollfd){ .fd = sig_pipe[0], .events = POLLIN };
	r = poll(pf, n + 1, timeout_ms);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	if (pf[n].revents)
		signals_drain();
	for (i = 0; i < n && r > 0; i++)
		readable[i] = pf[i].revents != 0;
	return 0;
}

/* What serving a vhost-user socket leaves the loop to do. */
enum ctl_next {
	CTL_GO_ON,
	CTL_ONCE_DONE,          /* --once: the first front-end is gone */
	CTL_HUNG_UP,            /* the inherited connection is gone */
};

/* Serve socket s when it is readable, absent (reconnect) or its timer is
 * due. */
static enum ctl_next ctl_serve(struct vqd_ctl *c, struct vqd_sock *s, bool readable)
{
	int r;

	if (s->done || (!readable && vq_vhu_backend_fd(s->b) >= 0 &&
			vq_vhu_backend_timeout_ms(s->b) != 0))
		return CTL_GO_ON;
	do {
		/* Looked at around every message: a connection whose last
		 * message and hang-up come in one drain still counts. */
		if (vq_vhu_backend_connected(s->b))
			s->was_connected = true;
		r = vq_vhu_backend_process(s->b);
		if (vq_vhu_backend_connected(s->b))
			s->was_connected = true;
	} while (r > 0 && !vqd_stop);
	if (vq_vhu_backend_connected(s->b))
		return CTL_GO_ON;
	/* Nothing to accept on and no reconnecting: that was an inherited
	 * connection (--fd), and nothing can come after it. */
	if (vq_vhu_backend_fd(s->b) < 0 && vq_vhu_backend_timeout_ms(s->b) < 0)
		return CTL_HUNG_UP;
	return s->was_connected && c->o->once ? CTL_ONCE_DONE : CTL_GO_ON;
}

/* The end of an inherited connection: the exit status. */
static int hung_up(const struct vqd_ctl *c, const struct vqd_sock *s)
{
	if (c->o->once) {
		fprintf(stderr, "%s: the front-end on --fd %d hung up\n",
			c->cli->name, s->fd);
		return 0;
	}
	fprintf(stderr, "%s: the front-end on --fd %d hung up, and an inherited "
		"connection cannot be listened on again: exiting\n",
		c->cli->name, s->fd);
	return 1;
}

static void ctl_tick(struct vqd_ctl *c)
{
	double t = vqd_now();

	if (!c->next_stats || t < c->next_stats)
		return;
	c->stats(c->arg, t - c->last, t - c->t0, false);
	c->last = t;
	c->next_stats += c->o->stats_interval;
	if (c->next_stats < t)
		c->next_stats = t + c->o->stats_interval;
}

/* SIGUSR1: a statistics line now, over the time since the last one; the
 * periodic lines keep their schedule. */
static void ctl_snapshot(struct vqd_ctl *c)
{
	double t = vqd_now();

	snapshot_due = 0;
	line_snapshot = true;
	c->stats(c->arg, t - c->last > 0 ? t - c->last : 1e-9, t - c->t0, false);
	line_snapshot = false;
	c->last = t;
}

int vqd_run(struct vqd_ctl *c)
{
	bool readable[VQD_MAX_SOCKS];

	while (!vqd_stop) {
		unsigned live = 0;
		int r = ctl_wait(c, ctl_timeout(c), readable);

		if (r < 0)
			return 1;
		if (vqd_stop)
			break;
		if (snapshot_due)
			ctl_snapshot(c);
		for (unsigned i = 0; i < c->nsocks; i++) {
			struct vqd_sock *s = &c->socks[i];
			enum ctl_next next = ctl_serve(c, s, readable[i]);

			if (next == CTL_ONCE_DONE)
				return 0;
			if (next == CTL_HUNG_UP && c->nsocks == 1)
				return hung_up(c, s);
			if (next == CTL_HUNG_UP) {
				fprintf(stderr, "%s: the front-end on %s hung up; the "
					"others are served on\n", c->cli->name, s->opt);
				s->done = true;
			}
			live += !s->done;
		}
		if (!live)
			return c->o->once ? 0 : 1;
		ctl_tick(c);
	}
	return 0;
}

void vqd_summary(struct vqd_ctl *c)
{
	double t = vqd_now();

	c->stats(c->arg, t - c->t0 > 0 ? t - c->t0 : 1, t - c->t0, true);
}
