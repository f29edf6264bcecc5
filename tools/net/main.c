// SPDX-License-Identifier: MIT
/*
 * virtq-net: a vhost-user-net backend.
 *
 *   virtq-net --socket-path PATH [options] [sink|source|loopback|tap IFNAME]
 *
 * The device (virtq-net.c) runs on the library's framework; this is the
 * control plane on the main thread: the vhost-user socket, signals, and
 * the statistics lines.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "virtq-net.h"

struct daemon {
	struct net_opts o;
	struct vqd_opts com;            /* the options every daemon takes */
	struct net_dev *dev;
	struct net_stats now, prev;     /* the statistics line's ends */
};

static uint64_t drops_total(const struct net_stats *s)
{
	uint64_t t = 0;

	for (unsigned i = 0; i < VQ_NET_DROP_MAX; i++)
		t += s->drops[i];
	return t;
}

/* --per-queue: a line (JSON: an object of "queues") per ring. */
static void queue_lines(const struct daemon *d, const struct net_stats *now,
			const struct net_stats *prev, double dt)
{
	char name[16];

	if (d->com.json)
		printf(",\"queues\":[");
	for (unsigned i = 0; i < 2 * d->o.pairs; i++) {
		snprintf(name, sizeof(name), "%s%u", vq_net_is_tx_queue(i) ? "tx" : "rx", i / 2);
		vqd_queue_line(d->com.json, i == 0, i, name, &now->queue[i], &prev->queue[i], dt);
	}
	if (d->com.json)
		printf("]");
}

/* One statistics line (vqd_ctl's stats callback). */
static void stats_line(void *arg, double dt, double t, bool final)
{
	struct daemon *d = arg;
	struct net_stats *now = &d->now, *prev = &d->prev;
	unsigned i;

	net_dev_stats(d->dev, now);
	if (final)
		memset(prev, 0, sizeof(*prev));
	vqd_line_start(d->com.json, &now->c, &prev->c, dt, t, final);
	if (d->com.json) {
		printf(",\"mode\":\"%s\"", net_mode_names[d->o.mode]);
		vqd_json_rates(&now->c, &prev->c, dt, true, true);
		printf(",\"drops\":{");
		for (i = 0; i < VQ_NET_DROP_MAX; i++)
			printf("%s\"%s\":%" PRIu64, i ? "," : "",
			       vq_net_drop_name((enum vq_net_drop)i), now->drops[i]);
		printf("},\"tx_evicted\":%" PRIu64 ",\"rarp_sent\":%" PRIu64
		       ",\"tx_gso\":%" PRIu64 ",\"rx_gso\":%" PRIu64 ",\"mtu\":%u"
		       ",\"kicks_missed\":%" PRIu64 ",\"calls_late\":%" PRIu64,
		       now->evicted, now->rarp_sent,
		       now->tx_gso, now->rx_gso, now->mtu, now->kicks_missed,
		       now->calls_late);
		if (final) {
			vqd_json_backend(net_dev_backend(d->dev));
			/* by ring index: receiveq0, transmitq0, receiveq1, ... */
			printf(",\"queue_packets\":[");
			for (i = 0; i < 2 * d->o.pairs; i++)
				printf("%s%" PRIu64, i ? "," : "", now->queue_packets[i]);
			printf("]");
		}
		if (d->com.per_queue)
			queue_lines(d, now, prev, dt);
		printf("}\n");
	} else {
		printf("  drops %" PRIu64, drops_total(now));
		if (drops_total(now)) {
			printf(" (");
			for (i = 0; i < VQ_NET_DROP_MAX; i++)
				if (now->drops[i])
					printf(" %s=%" PRIu64, vq_net_drop_name((enum vq_net_drop)i),
					       now->drops[i]);
			printf(" )");
		}
		if (final)
			printf("\nsummary tx %" PRIu64 " packets %" PRIu64 " bytes, rx %" PRIu64
			       " packets %" PRIu64 " bytes, tx evicted %" PRIu64
			       ", rarp sent %" PRIu64,
			       now->c.tx_pkts, now->c.tx_bytes, now->c.rx_pkts,
			       now->c.rx_bytes, now->evicted,
			       now->rarp_sent);
		if (final && (now->tx_gso || now->rx_gso))
			printf("\nsegmentation offload frames: tx %" PRIu64 " rx %" PRIu64,
			       now->tx_gso, now->rx_gso);
		if (final && d->o.pairs > 1)
			for (i = 0; i < d->o.pairs; i++)
				printf("\npair %u: tx %" PRIu64 " rx %" PRIu64 " packets", i,
				       now->queue_packets[2 * i + 1], now->queue_packets[2 * i]);
		printf("\n");
		if (d->com.per_queue)
			queue_lines(d, now, prev, dt);
	}
	fflush(stdout);
	*prev = *now;
}


int main(int argc, char **argv)
{
	static struct daemon d;
	struct vqd_ctl ctl = { .o = &d.com, .stats = stats_line, .arg = &d };
	int rc = 1;

	ctl.cli = net_parse(argc, argv, &d.o, &d.com);
	vqd_log_to_stderr(d.com.quiet);
	if (net_dev_new(&d.o, &d.com, &d.dev) < 0)
		goto out;
	ctl.b = net_dev_backend(d.dev);
	if (vqd_open(&ctl) < 0)
		goto out;
	rc = vqd_run(&ctl);
	vqd_summary(&ctl);
out:
	/* the device owns the back-end */
	ctl.b = NULL;
	net_dev_free(d.dev);
	vqd_close(&ctl);
	return rc;
}
