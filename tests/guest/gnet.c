// SPDX-License-Identifier: MIT
/*
 * gnet - raw Ethernet frames for the guest side of the virtio-net tests.
 * Built static by tests/guest/build-guest.sh and run inside the test guest.
 *
 *   gnet tx    IF -n N [-s size] [-t sec]   send N frames (seq 0..N-1) or for sec
 *   gnet rx    IF [-n N] [-t sec] [-i idle] [-u] [-s size]
 *                                           count frames, verify ours and
 *                                           virtq-net's source frames (of
 *                                           size bytes, if -s); -u: bring IF
 *                                           up once the socket is open
 *   gnet echo  IF -n N [-s size|0=random] [-b burst] [-w ms] [-t sec]
 *                                           send bursts, expect each frame back;
 *                                           with -t, rounds of N for at least sec
 *   gnet probe IF [-t sec]                  echo one small burst until it comes
 *                                           back intact (recovery after restarts)
 *   gnet watch IF [-n N] [-t sec]           print the first N (64) frames that
 *                                           are not gnet's, ARP and RARP decoded
 *                                           (announcements after a migration)
 *   gnet channels IF [N]                    print the queue pairs in use and the
 *                                           most; with N use N (ethtool -L IF
 *                                           combined N, which the guest lacks)
 *
 * Frame layout (ethertype 0x88B5, IEEE "local experimental"):
 *   0..13 Ethernet header, 14 "VQGN", 18 run id (le32), 22 seq (le64),
 *   30 frame length (le16), 32 FNV-1a 32 of bytes 36..len (le32),
 *   36.. pattern that depends on run, seq and offset.
 * The run id is random per invocation, so a frame left over from an earlier
 * run (or an old slot of the receive ring) is told apart from a current one.
 *
 * virtq-net's source mode sends its own frames (tools/net/virtq-net.c,
 * build_frame): broadcast from 52:54:00:00:00:01, ethertype 0x88B5, then
 * byte i is i & 0xff.  rx checks every byte of those too.
 *
 * Output is "KEY k=v ..." lines for the host scripts.  Exit: 0 ok, 1 a check
 * failed, 2 usage or setup error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/ethtool.h>
#include <linux/if_packet.h>
#include <linux/sockios.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif
#ifndef PACKET_QDISC_BYPASS
#define PACKET_QDISC_BYPASS 20
#endif

#define ETYPE 0x88B5
#define HDR 36
#define MINF 60
#define MAXF 1514
#define MAXB 64

static int ifindex;
static uint8_t mymac[6];
static const uint8_t dstmac[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x01 };
static uint32_t run_id;

static const char *ifname;

/* A counter of the interface (since the driver probed), or -1. */
static long long if_stat(const char *name)
{
	char path[128];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/net/%s/statistics/%s", ifname, name);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%lld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint8_t pattern(uint32_t run, uint64_t seq, unsigned int off)
{
	return (uint8_t)(run ^ (seq * 131) ^ (off * 7) ^ (off >> 8));
}

static uint32_t fnv32(const uint8_t *p, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static void build(uint8_t *f, unsigned int len, uint64_t seq)
{
	memcpy(f, dstmac, 6);
	memcpy(f + 6, mymac, 6);
	f[12] = ETYPE >> 8;
	f[13] = ETYPE & 0xff;
	memcpy(f + 14, "VQGN", 4);
	put_le(f + 18, run_id, 4);
	put_le(f + 22, seq, 8);
	put_le(f + 30, len, 2);
	for (unsigned int o = HDR; o < len; o++)
		f[o] = pattern(run_id, seq, o);
	put_le(f + 32, fnv32(f + HDR, len - HDR), 4);
}

enum verdict { V_OK, V_FOREIGN, V_STALE, V_BAD, V_SOURCE };

/* Classify a received frame; *why names the first broken field. */
static enum verdict check(const uint8_t *f, unsigned int len, uint64_t *seq,
			  const char **why)
{
	*why = "";
	if (len < HDR || f[12] != (ETYPE >> 8) ||
	    f[13] != (ETYPE & 0xff) || memcmp(f + 14, "VQGN", 4))
		return V_FOREIGN;
	*seq = get_le(f + 22, 8);
	if (get_le(f + 30, 2) != len) {
		*why = "length";
		return V_BAD;
	}
	if (get_le(f + 32, 4) != fnv32(f + HDR, len - HDR)) {
		*why = "checksum";
		return V_BAD;
	}
	uint32_t run = (uint32_t)get_le(f + 18, 4);
	for (unsigned int o = HDR; o < len; o++)
		if (f[o] != pattern(run, *seq, o)) {
			*why = "payload";
			return V_BAD;
		}
	if (run != run_id) {
		*why = "old-run";
		return V_STALE;
	}
	return V_OK;
}

static const uint8_t source_mac[6] = { 0x52, 0x54, 0x00, 0x00, 0x00, 0x01 };

/* The length virtq-net's source frames must have (rx -s; 0: any). */
static unsigned int source_size;

/* rx's check: virtq-net's source frames (told by their sender and
 * ethertype) are V_SOURCE if intact, else V_BAD; the rest as check(). */
static enum verdict check_rx(const uint8_t *f, unsigned int len, uint64_t *seq,
			     const char **why)
{
	if (len < 18 || memcmp(f + 6, source_mac, 6) || f[12] != (ETYPE >> 8) ||
	    f[13] != (ETYPE & 0xff) || !memcmp(f + 14, "VQGN", 4))
		return check(f, len, seq, why);
	*why = "";
	for (unsigned int o = 0; o < 6; o++)
		if (f[o] != 0xff) {
			*why = "source-destination";
			return V_BAD;
		}
	if (source_size && len != source_size) {
		*why = "source-length";
		return V_BAD;
	}
	for (unsigned int o = 14; o < len; o++)
		if (f[o] != (uint8_t)o) {
			*why = "source-payload";
			return V_BAD;
		}
	return V_SOURCE;
}

/* rx: a receiving socket; any_if: bound to every interface (rx keeps only
 * IF's frames), so that it receives before IF is up. */
static int open_if(int rx, int any_if)
{
	/* Protocol 0 until bound: a socket made with ETH_P_ALL receives from
	 * every interface until bind() narrows it (loopback frames of the
	 * host's QMP and migration streams showed up in watch). */
	int fd = socket(AF_PACKET, SOCK_RAW, 0);
	struct ifreq ifr;
	struct sockaddr_ll sll;
	int one = 1, big = 8 << 20;

	if (fd < 0) {
		perror("socket(AF_PACKET)");
		exit(2);
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(fd, SIOCGIFINDEX, &ifr) < 0) {
		perror("SIOCGIFINDEX");
		exit(2);
	}
	ifindex = ifr.ifr_ifindex;
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0) {
		perror("SIOCGIFHWADDR");
		exit(2);
	}
	memcpy(mymac, ifr.ifr_hwaddr.sa_data, 6);
	memset(&sll, 0, sizeof(sll));
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(rx ? ETH_P_ALL : 0);
	/* A socket bound to a down interface would see nothing until the
	 * interface's up notification, after the driver passed up its first
	 * frames. */
	sll.sll_ifindex = any_if ? 0 : ifindex;
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		perror("bind");
		exit(2);
	}
	/* Our own transmissions must not count as received frames. */
	if (rx && setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one,
			     sizeof(one)) < 0) {
		perror("PACKET_IGNORE_OUTGOING");
		exit(2);
	}
	if (rx)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
	/* Queued frames are charged to the send buffer until the device uses
	 * them: the default (~270 small frames) could not fill a big TX ring. */
	setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
	/* Straight to the driver: ENOBUFS when the ring is full, no qdisc drops. */
	setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
	return fd;
}

/* Send one frame, retrying while the driver's ring is full. */
static int send_frame(int fd, const uint8_t *f, unsigned int len, double deadline)
{
	for (;;) {
		ssize_t r = send(fd, f, len, 0);

		if (r == (ssize_t)len)
			return 0;
		if (r < 0 && (errno == ENOBUFS || errno == EAGAIN ||
			      errno == EBUSY || errno == EINTR)) {
			if (now() > deadline)
				return -ETIMEDOUT;
			sched_yield();
			continue;
		}
		return r < 0 ? -errno : -EIO;
	}
}

struct opts {
	unsigned long long n;
	unsigned int size, burst, wait_ms;
	double secs, idle;
	int up;
};

static uint8_t buf[MAXB][MAXF + 64];

static int cmd_tx(int fd, struct opts *o)
{
	unsigned long long sent = 0;
	double t0 = now();

	for (; sent < o->n; sent++) {
		if (o->secs > 0 && !(sent & 255) && now() - t0 >= o->secs)
			break;
		build(buf[0], o->size, sent);
		int r = send_frame(fd, buf[0], o->size, now() + 10);

		if (r < 0) {
			printf("TX error=%s sent=%llu\n", strerror(-r), sent);
			return 1;
		}
	}
	printf("TX sent=%llu size=%u secs=%.3f\n", sent, o->size, now() - t0);
	return 0;
}

/* Bring the interface up (after rx's socket is open: a sender that starts
 * when the interface does cannot outrun it). */
static int if_up(int fd)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		return -errno;
	ifr.ifr_flags |= IFF_UP;
	return ioctl(fd, SIOCSIFFLAGS, &ifr) < 0 ? -errno : 0;
}

static int cmd_rx(int fd, struct opts *o)
{
	unsigned long long frames = 0, ours = 0, bad = 0, other = 0, source = 0;
	double t0 = now(), tlast = t0;
	struct tpacket_stats st = { 0, 0 };
	socklen_t sl = sizeof(st);

	printf("RX ready\n");
	fflush(stdout);
	if (o->up) {
		int r = if_up(fd);

		if (r < 0) {
			printf("RX error=%s (bringing %s up)\n", strerror(-r), ifname);
			return 2;
		}
	}
	for (;;) {
		double t = now();
		struct pollfd p = { fd, POLLIN, 0 };

		if (o->n && frames >= o->n)
			break;
		if (o->secs > 0 && t - t0 >= o->secs)
			break;
		if (o->idle > 0 && frames && t - tlast >= o->idle)
			break;
		if (poll(&p, 1, 50) <= 0)
			continue;
		struct sockaddr_ll from;
		socklen_t fl = sizeof(from);
		ssize_t r = recvfrom(fd, buf[0], sizeof(buf[0]), MSG_DONTWAIT,
				     (struct sockaddr *)&from, &fl);

		if (r <= 0 || from.sll_ifindex != ifindex)
			continue;
		tlast = now();
		frames++;
		uint64_t seq = 0;
		const char *why;

		switch (check_rx(buf[0], (unsigned int)r, &seq, &why)) {
		case V_OK:
		case V_STALE:
			ours++;
			break;
		case V_SOURCE:
			source++;
			break;
		case V_FOREIGN:
			other++;
			break;
		case V_BAD:
			if (bad++ < 5)
				printf("RX_BAD why=%s len=%zd seq=%llu\n", why, r,
				       (unsigned long long)seq);
			break;
		}
	}
	/* Frames the socket's buffer had no room for (since it opened). */
	if (getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &sl) < 0)
		st.tp_drops = 0;
	printf("RX frames=%llu ours=%llu source=%llu other=%llu bad=%llu socket_drops=%u "
	       "secs=%.3f if_rx_packets=%lld if_rx_dropped=%lld\n",
	       frames, ours, source, other, bad, st.tp_drops, now() - t0,
	       if_stat("rx_packets"), if_stat("rx_dropped"));
	return bad ? 1 : 0;
}

static void put_mac(const char *key, const uint8_t *m)
{
	printf(" %s=%02x:%02x:%02x:%02x:%02x:%02x", key, m[0], m[1], m[2], m[3],
	       m[4], m[5]);
}

static void put_ip(const char *key, const uint8_t *a)
{
	printf(" %s=%u.%u.%u.%u", key, a[0], a[1], a[2], a[3]);
}

static int cmd_watch(int fd, struct opts *o)
{
	unsigned long long shown = 0, seen = 0;
	double t0 = now();

	printf("WATCH ready\n");
	while (now() - t0 < o->secs && shown < o->n) {
		struct pollfd p = { fd, POLLIN, 0 };
		uint64_t seq;
		const char *why;
		const uint8_t *f = buf[0];

		if (poll(&p, 1, 50) <= 0)
			continue;
		ssize_t r = recv(fd, buf[0], sizeof(buf[0]), MSG_DONTWAIT);

		if (r < 14)
			continue;
		seen++;
		if (check(f, (unsigned int)r, &seq, &why) != V_FOREIGN)
			continue;
		shown++;
		printf("FRAME type=%02x%02x len=%zd", f[12], f[13], r);
		put_mac("src", f + 6);
		put_mac("dst", f);
		/* ARP 0x0806 and RARP 0x8035 share RFC 826's Ethernet/IPv4 body */
		if (((f[12] == 0x08 && f[13] == 0x06) || (f[12] == 0x80 && f[13] == 0x35)) &&
		    r >= 42) {
			printf(" op=%u", f[20] << 8 | f[21]);
			put_mac("sha", f + 22);
			put_ip("spa", f + 28);
			put_mac("tha", f + 32);
			put_ip("tpa", f + 38);
		}
		printf("\n");
	}
	printf("WATCH frames=%llu shown=%llu\n", seen, shown);
	return 0;
}

static unsigned int rnd(void)
{
	static uint32_t s = 0x9e3779b9;

	s ^= s << 13;
	s ^= s >> 17;
	s ^= s << 5;
	return s;
}

/*
 * Echo: every frame of a burst must come back exactly once, intact, before
 * the next burst goes.  A frame of an earlier burst or run is "stale": the
 * device handed the guest a buffer it had already filled before.
 */
static int echo_run(int fd, struct opts *o, unsigned long long *okp,
		    unsigned long long *stalep, unsigned long long *badp,
		    unsigned long long *lostp, int quiet)
{
	static uint8_t rbuf[MAXF + 64];
	unsigned int lens[MAXB];
	uint8_t seen[MAXB];
	unsigned long long ok = 0, stale = 0, bad = 0, lost = 0;
	static uint64_t next_seq;

	for (unsigned long long done = 0; done < o->n;) {
		unsigned int nb = o->burst;
		uint64_t base = next_seq;

		if (o->n - done < nb)
			nb = (unsigned int)(o->n - done);
		for (unsigned int i = 0; i < nb; i++) {
			lens[i] = o->size ? o->size : MINF + rnd() % (MAXF - MINF + 1);
			seen[i] = 0;
			build(buf[i], lens[i], base + i);
			if (send_frame(fd, buf[i], lens[i], now() + 5) < 0) {
				printf("ECHO error=send\n");
				return 2;
			}
		}
		next_seq += nb;
		unsigned int got = 0;
		double deadline = now() + o->wait_ms / 1000.0;

		while (got < nb) {
			double left = deadline - now();
			struct pollfd p = { fd, POLLIN, 0 };

			if (left <= 0)
				break;
			if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
				continue;
			ssize_t r = recv(fd, rbuf, sizeof(rbuf), MSG_DONTWAIT);

			if (r <= 0)
				continue;
			uint64_t seq = 0;
			const char *why;
			enum verdict v = check(rbuf, (unsigned int)r, &seq, &why);

			if (v == V_FOREIGN)
				continue;
			if (v == V_OK && (seq < base || seq >= base + nb)) {
				v = V_STALE;
				why = "old-burst";
			}
			if (v == V_OK && lens[seq - base] != (unsigned int)r) {
				v = V_BAD;
				why = "length-changed";
			}
			if (v == V_OK && seen[seq - base]) {
				v = V_STALE;
				why = "duplicate";
			}
			if (v != V_OK) {
				if (!quiet && stale + bad < 5)
					printf("ECHO_%s why=%s len=%zd seq=%llu burst=%llu\n",
					       v == V_BAD ? "BAD" : "STALE", why, r,
					       (unsigned long long)seq,
					       (unsigned long long)base);
				if (v == V_BAD)
					bad++;
				else
					stale++;
				continue;
			}
			seen[seq - base] = 1;
			got++;
			ok++;
		}
		if (got < nb) {
			if (!quiet && lost < 5 * o->burst)
				printf("ECHO_LOST burst=%llu missing=%u\n",
				       (unsigned long long)base, nb - got);
			lost += nb - got;
		}
		done += nb;
	}
	*okp = ok;
	*stalep = stale;
	*badp = bad;
	*lostp = lost;
	return (stale || bad || lost) ? 1 : 0;
}

static int cmd_echo(int fd, struct opts *o)
{
	unsigned long long ok = 0, stale = 0, bad = 0, lost = 0, sent = 0;
	double t0 = now();
	int r;

	/* -t: rounds of n until sec have passed, so a run outlasts whatever
	 * the test does meanwhile (a migration) however fast the guest is */
	do {
		unsigned long long k, s, b, l;

		r = echo_run(fd, o, &k, &s, &b, &l, 0);
		if (r == 2)
			return 2;
		ok += k, stale += s, bad += b, lost += l, sent += o->n;
	} while (r == 0 && now() - t0 < o->secs);
	printf("ECHO sent=%llu ok=%llu stale=%llu bad=%llu lost=%llu size=%u secs=%.3f result=%s\n",
	       sent, ok, stale, bad, lost, o->size, now() - t0, r ? "FAIL" : "PASS");
	return r;
}

static int cmd_probe(int fd, struct opts *o)
{
	struct opts p = { .n = 8, .size = 128, .burst = 8, .wait_ms = 300 };
	double t0 = now();
	unsigned int tries = 0;

	while (now() - t0 < o->secs) {
		unsigned long long ok, stale, bad, lost;

		tries++;
		if (echo_run(fd, &p, &ok, &stale, &bad, &lost, 1) == 0) {
			printf("PROBE result=PASS tries=%u secs=%.3f\n", tries, now() - t0);
			return 0;
		}
		usleep(100000);
	}
	printf("PROBE result=FAIL tries=%u secs=%.3f\n", tries, now() - t0);
	return 1;
}

/* The driver's queue pairs (virtio-net calls them combined channels);
 * setting them makes it send VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET. */
static int cmd_channels(int argc, char **argv)
{
	struct ethtool_channels ch = { .cmd = ETHTOOL_GCHANNELS };
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", ifname);
	ifr.ifr_data = (char *)&ch;
	if (fd < 0 || ioctl(fd, SIOCETHTOOL, &ifr) < 0) {
		perror("gnet: ETHTOOL_GCHANNELS");
		return 2;
	}
	if (argc > 3) {
		ch.cmd = ETHTOOL_SCHANNELS;
		ch.combined_count = (uint32_t)atoi(argv[3]);
		if (ioctl(fd, SIOCETHTOOL, &ifr) < 0) {
			perror("gnet: ETHTOOL_SCHANNELS");
			return 1;
		}
		ch.cmd = ETHTOOL_GCHANNELS;
		if (ioctl(fd, SIOCETHTOOL, &ifr) < 0) {
			perror("gnet: ETHTOOL_GCHANNELS");
			return 2;
		}
	}
	printf("CHANNELS combined=%u max=%u\n", ch.combined_count, ch.max_combined);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = { .n = 1000, .size = 60, .burst = 32, .wait_ms = 1000 };
	int c, rx, have_n = 0, have_s = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: gnet tx|rx|echo|probe|watch|channels IF [opts]\n");
		return 2;
	}
	const char *cmd = argv[1];

	ifname = argv[2];
	if (!strcmp(cmd, "channels"))
		return cmd_channels(argc, argv);

	optind = 3;
	while ((c = getopt(argc, argv, "n:s:b:w:t:i:u")) != -1) {
		switch (c) {
		case 'n': o.n = strtoull(optarg, NULL, 0); have_n = 1; break;
		case 's': o.size = (unsigned int)atoi(optarg); have_s = 1; break;
		case 'b': o.burst = (unsigned int)atoi(optarg); break;
		case 'w': o.wait_ms = (unsigned int)atoi(optarg); break;
		case 't': o.secs = atof(optarg); break;
		case 'i': o.idle = atof(optarg); break;
		case 'u': o.up = 1; break;
		default: return 2;
		}
	}
	if ((o.size && (o.size < MINF || o.size > MAXF)) || !o.burst || o.burst > MAXB) {
		fprintf(stderr, "gnet: size 0 or %d..%d, burst 1..%d\n", MINF, MAXF, MAXB);
		return 2;
	}
	if (!strcmp(cmd, "tx") && !o.size)
		o.size = MINF;
	setvbuf(stdout, NULL, _IOLBF, 0);
	run_id = (uint32_t)(getpid() * 2654435761u ^ (uint32_t)(now() * 1e6));
	rx = strcmp(cmd, "tx") != 0;
	int fd = open_if(rx, o.up && !strcmp(cmd, "rx"));

	if (!strcmp(cmd, "tx"))
		return cmd_tx(fd, &o);
	if (!strcmp(cmd, "rx")) {
		if (!have_n)
			o.n = 0;
		if (!o.n && !o.secs && !o.idle)
			o.secs = 3;
		source_size = have_s ? o.size : 0;
		return cmd_rx(fd, &o);
	}
	if (!strcmp(cmd, "echo"))
		return cmd_echo(fd, &o);
	if (!strcmp(cmd, "watch")) {
		if (!have_n)
			o.n = 64;
		if (o.secs <= 0)
			o.secs = 3;
		return cmd_watch(fd, &o);
	}
	if (!strcmp(cmd, "probe")) {
		if (o.secs <= 0)
			o.secs = 30;
		return cmd_probe(fd, &o);
	}
	fprintf(stderr, "gnet: unknown command %s\n", cmd);
	return 2;
}
