// SPDX-License-Identifier: MIT
/* The vhost-user daemons' shared start-up and control loop (daemon.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <virtq/runtime.h>
#include <virtq/spec.h>

#include "daemon.h"

volatile sig_atomic_t vqd_stop;

#define MAX_OPTS 48
#define MAX_FDS 16

static const struct option common_opts[] = {
	{ "used-batch", required_argument, NULL, VQD_O_USED_BATCH },
	{ "busy-poll", required_argument, NULL, VQD_O_BUSY_POLL },
	{ "no-packed", no_argument, NULL, VQD_O_NO_PACKED },
	{ "no-event-idx", no_argument, NULL, VQD_O_NO_EVENT_IDX },
	{ "no-indirect", no_argument, NULL, VQD_O_NO_INDIRECT },
	{ "no-in-order", no_argument, NULL, VQD_O_NO_IN_ORDER },
	{ "stats-interval", required_argument, NULL, VQD_O_STATS },
	{ "json", no_argument, NULL, VQD_O_JSON },
	{ "once", no_argument, NULL, VQD_O_ONCE },
	{ "client", no_argument, NULL, VQD_O_CLIENT },
	{ "quiet", no_argument, NULL, VQD_O_QUIET },
	{ "help", no_argument, NULL, VQD_O_HELP },
};

bool vqd_parse_u64(const char *s, uint64_t max, uint64_t *v)
{
	char *end;

	if (!*s || *s == '-')
		return false;
	errno = 0;
	*v = strtoull(s, &end, 0);
	return !errno && *end == '\0' && *v <= max;
}

/* A shared option: 0, or -1 for a bad value. */
static int common_opt(int c, const char *val, struct vqd_opts *o)
{
	uint64_t v;
	char *end;

	switch (c) {
	case VQD_O_USED_BATCH:
		if (!vqd_parse_u64(val, 1u << 16, &v))
			return -1;
		o->used_batch = (unsigned)v;
		break;
	case VQD_O_BUSY_POLL:
		if (!vqd_parse_u64(val, 10000000, &v))
			return -1;
		o->busy_poll_us = v;
		break;
	case VQD_O_NO_PACKED: o->no_packed = true; break;
	case VQD_O_NO_EVENT_IDX: o->no_event_idx = true; break;
	case VQD_O_NO_INDIRECT: o->no_indirect = true; break;
	case VQD_O_NO_IN_ORDER: o->no_in_order = true; break;
	case VQD_O_STATS:
		o->stats_interval = strtod(val, &end);
		if (*end || o->stats_interval < 0)
			return -1;
		break;
	case VQD_O_JSON: o->json = true; break;
	case VQD_O_ONCE: o->once = true; break;
	case VQD_O_CLIENT: o->client = true; break;
	case VQD_O_QUIET: o->quiet = true; break;
	}
	return 0;
}

int vqd_parse(const struct vqd_cli *cli, int *argc, char **argv,
	      struct vq_vhu_opts *vo, struct vqd_opts *o)
{
	struct option all[MAX_OPTS];
	unsigned n = 0, i;
	int c, r;

	if (vq_vhu_parse_opts(argc, argv, vo) < 0)
		return 2;
	if (vo->print_capabilities) {
		static const char *const none[] = { NULL };

		vq_vhu_print_capabilities(stdout, cli->type, none);
		return 0;
	}
	for (i = 0; cli->opts[i].name && n < MAX_OPTS - 1; i++)
		all[n++] = cli->opts[i];
	for (i = 0; i < sizeof(common_opts) / sizeof(common_opts[0]) && n < MAX_OPTS - 1; i++)
		all[n++] = common_opts[i];
	all[n] = (struct option){ NULL, 0, NULL, 0 };
	memset(o, 0, sizeof(*o));
	while ((c = getopt_long(*argc, argv, "h", all, NULL)) != -1) {
		if (c == VQD_O_HELP || c == 'h') {
			cli->usage(stdout);
			exit(0);
		}
		if (c >= VQD_O_TOOL)
			r = cli->opt(cli->arg, c, optarg);
		else if (c >= VQD_O_USED_BATCH)
			r = common_opt(c, optarg, o);
		else
			r = -3;
		if (r == -1)
			fprintf(stderr, "%s: bad value '%s'\n", cli->name, optarg);
		if (r == -3)
			cli->usage(stderr);
		if (r < 0)
			return 2;
	}
	return 1;
}

bool vqd_need_socket(const struct vqd_cli *cli, const struct vq_vhu_opts *vo)
{
	if (vo->socket_path || vo->fd >= 0)
		return true;
	fprintf(stderr, "%s: --socket-path or --fd is required\n", cli->name);
	cli->usage(stderr);
	return false;
}

uint64_t vqd_features(const struct vqd_opts *o, uint64_t f)
{
	if (o->no_packed)
		f &= ~VIRTQ_BIT(VIRTIO_F_RING_PACKED);
	if (o->no_event_idx)
		f &= ~VIRTQ_BIT(VIRTIO_F_EVENT_IDX);
	if (o->no_indirect)
		f &= ~VIRTQ_BIT(VIRTIO_F_INDIRECT_DESC);
	if (o->no_in_order)
		f &= ~VIRTQ_BIT(VIRTIO_F_IN_ORDER);
	return f;
}

double vqd_now(void)
{
	return (double)vq_rt_now_ns() / 1e9;
}

/* ---- statistics lines ---- */

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

void vqd_line_start(bool json, const struct vqd_count *now,
		    const struct vqd_count *prev, double dt, double t, bool final)
{
	struct rates r = rates(now, prev, dt);

	if (json) {
		printf("{\"%s\":true,\"t\":%.3f", final ? "summary" : "stats", t);
		return;
	}
	printf("%s %7.2fs tx %8.3f Mpps %7.3f Gbit/s  rx %8.3f Mpps %7.3f Gbit/s  "
	       "kicks/pkt %.4f calls/pkt %.4f",
	       final ? "summary" : "stats  ", t, r.tx_pps / 1e6, r.tx_gbps,
	       r.rx_pps / 1e6, r.rx_gbps, r.kpp, r.cpp);
}

void vqd_json_backend(struct vq_vhu_backend *b)
{
	struct vq_vhu_iotlb_stats io;
	struct vq_vhu_postcopy_stats pc;

	vq_vhu_backend_iotlb_stats(b, &io, sizeof(io));
	vq_vhu_backend_postcopy_stats(b, &pc, sizeof(pc));
	printf(",\"iotlb\":{\"misses\":%" PRIu64 ",\"misses_unsent\":%" PRIu64
	       ",\"updates\":%" PRIu64 ",\"invalidations\":%" PRIu64
	       ",\"refused\":%" PRIu64 ",\"quiesce_timeouts\":%" PRIu64 "}",
	       io.misses, io.misses_unsent, io.updates, io.invalidations,
	       io.refused, io.quiesce_timeouts);
	printf(",\"postcopy\":{\"advises\":%" PRIu64 ",\"listens\":%" PRIu64
	       ",\"regions\":%" PRIu64 ",\"acks\":%" PRIu64 ",\"ends\":%" PRIu64 "}",
	       pc.advises, pc.listens, pc.regions, pc.acks, pc.ends);
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

int vqd_open(struct vqd_ctl *c, const struct vq_vhu_opts *vo)
{
	int r;

	if (c->o->client && vo->socket_path)
		r = vq_vhu_backend_connect(c->b, vo->socket_path, 1000);
	else
		r = vq_vhu_backend_open(c->b, vo);
	if (r < 0) {
		fprintf(stderr, "%s: cannot open %s: %s\n", c->cli->name,
			vo->socket_path ? vo->socket_path : "the socket", strerror(-r));
		return r;
	}
	vq_vhu_on_sigterm(&vqd_stop);
	signal(SIGPIPE, SIG_IGN);
	c->t0 = c->last = vqd_now();
	c->next_stats = c->o->stats_interval > 0 ? c->t0 + c->o->stats_interval : 0;
	c->was_connected = false;
	return 0;
}

/* The backend's own timer (reconnecting) and the next statistics line. */
static int ctl_timeout(const struct vqd_ctl *c)
{
	int tmo = vq_vhu_backend_timeout_ms(c->b);

	if (c->next_stats) {
		int st = (int)((c->next_stats - vqd_now()) * 1000) + 1;

		if (st < 0)
			st = 0;
		if (tmo < 0 || st < tmo)
			tmo = st;
	}
	return tmo;
}

/* An idle wait: the control timeout, bounded by the hooks' quiet period. */
static int wait_ms(const struct vqd_ctl *c)
{
	int tmo = ctl_timeout(c), q = c->hooks ? c->hooks->quiet_ms : 0;

	return q > 0 && (tmo < 0 || tmo > q) ? q : tmo;
}

/* Serve the vhost-user socket when it is readable, absent (reconnect) or
 * its timer is due.  true: --once says the daemon is done. */
static bool ctl_serve(struct vqd_ctl *c, bool readable)
{
	int r;

	if (!readable && vq_vhu_backend_fd(c->b) >= 0 &&
	    vq_vhu_backend_timeout_ms(c->b) != 0)
		return false;
	do {
		r = vq_vhu_backend_process(c->b);
	} while (r > 0 && !vqd_stop);
	if (r < 0 && r != -ECONNRESET)
		fprintf(stderr, "%s: connection closed: %s\n", c->cli->name,
			vq_vhu_backend_error_msg(c->b));
	if (vq_vhu_backend_connected(c->b))
		c->was_connected = true;
	else if (c->was_connected && c->o->once)
		return true;
	return false;
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

int vqd_run(struct vqd_ctl *c)
{
	const struct vqd_hooks *h = c->hooks;

	while (!vqd_stop) {
		struct pollfd pf[1 + MAX_FDS];
		unsigned n = 1;
		bool idle = true;
		int r;

		if (h && h->before) {
			r = h->before(c->arg, pf + 1, MAX_FDS, &idle);
			if (r < 0)
				continue;
			n += (unsigned)r;
		}
		/* A negative fd (reconnecting) is ignored by poll. */
		pf[0] = (struct pollfd){ .fd = vq_vhu_backend_fd(c->b), .events = POLLIN };
		r = poll(pf, n, idle ? wait_ms(c) : 0);
		if (r < 0 && errno != EINTR)
			return 1;
		if (vqd_stop)
			break;
		if (h && h->after)
			h->after(c->arg, pf + 1, n - 1, r, idle);
		if (ctl_serve(c, r > 0 && pf[0].revents))
			break;
		ctl_tick(c);
	}
	return 0;
}

void vqd_summary(struct vqd_ctl *c)
{
	double t = vqd_now();

	c->stats(c->arg, t - c->t0 > 0 ? t - c->t0 : 1, t - c->t0, true);
}
