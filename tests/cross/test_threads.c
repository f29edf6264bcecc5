// SPDX-License-Identifier: MIT
/*
 * Two threads, one ring, real memory ordering: a driver thread posts
 * buffers carrying sequence numbers and a device thread answers each one, both
 * sleeping on eventfds whenever they run dry, exactly as a guest and a vhost
 * thread do.  Run under TSan in CI.
 *
 * Each configuration runs twice: buffers of one readable and one writable
 * segment added one by one, then one-segment readable buffers added with
 * vq_drv_add_burst (packed: the burst's first flags published last).
 *
 * Checks: every buffer comes back exactly once with the device's bytes; the
 * device sees the sequence numbers in order (2.7.13 / 2.8.21: buffers are
 * made available in order); with IN_ORDER they also come back in order
 * (2.7.9 / 2.8.8); and no wakeup is lost - a side that enabled
 * notifications, re-checked and went to sleep is woken within 10 s, or the
 * test fails with "lost kick" / "lost call" (2.7.10, 2.8.10, RULES D4/V4).
 *
 * Usage: test_threads [BUFFERS]  (default 200000 per configuration)
 */
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "ring_pair.h"

#define BUF_BYTES 64
#define WAIT_MS   10000

struct shared {
	struct ring_pair p;
	bool in_order;
	bool burst;                     /* vq_drv_add_burst, readable only */
	uint64_t total;
	int kickfd, callfd;
	uint64_t buf_gpa;               /* num pairs of (out, in) buffers */
	_Atomic bool device_done;
	uint64_t device_sleeps, driver_sleeps, kicks, calls;
};

static void fill_bytes(uint8_t *p, uint64_t seq, uint8_t salt)
{
	for (int i = 0; i < BUF_BYTES; i++)
		p[i] = (uint8_t)(seq * 31 + i * 7 + salt);
}

static bool bytes_ok(const uint8_t *p, uint64_t seq, uint8_t salt, int from)
{
	for (int i = from; i < BUF_BYTES; i++)
		if (p[i] != (uint8_t)(seq * 31 + i * 7 + salt))
			return false;
	return true;
}

static void wait_fd(int fd, const char *what)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint64_t v;

	if (poll(&pfd, 1, WAIT_MS) != 1) {
		fprintf(stderr, "%s: slept %d ms without a notification\n", what, WAIT_MS);
		exit(1);
	}
	CHECK(read(fd, &v, sizeof(v)) == sizeof(v));
}

static void notify(int fd)
{
	uint64_t one = 1;

	CHECK(write(fd, &one, sizeof(one)) == sizeof(one));
}

static void *device_thread(void *arg)
{
	struct shared *sh = arg;
	struct vq_dev *d = sh->p.dev;
	uint64_t next_seq = 0;
	struct vq_chain c[32];
	struct iovec iov[32][2];

	for (int i = 0; i < 32; i++) {
		c[i].iov = iov[i];
		c[i].iov_max = 2;
	}
	while (next_seq < sh->total) {
		int n = vq_dev_pop_burst(d, c, 32);

		CHECK(n >= 0);
		if (n == 0) {
			int r = vq_dev_enable_notify(d);

			CHECK(r >= 0);
			if (r == 0) {
				sh->device_sleeps++;
				wait_fd(sh->kickfd, "lost kick");
			}
			vq_dev_disable_notify(d);
			continue;
		}
		for (int i = 0; i < n; i++) {
			uint64_t seq;

			CHECK_EQ(c[i].nout, 1);
			CHECK_EQ(c[i].nin, sh->burst ? 0 : 1);
			CHECK_EQ(c[i].iov[0].iov_len, BUF_BYTES);
			memcpy(&seq, c[i].iov[0].iov_base, sizeof(seq));
			CHECK_EQ(seq, next_seq);
			/* The driver's bytes after the sequence number. */
			CHECK(bytes_ok(c[i].iov[0].iov_base, seq, 0, 8));
			if (!sh->burst)
				fill_bytes(c[i].iov[1].iov_base, seq, 0x5a);
			next_seq++;
			CHECK_EQ(vq_dev_fill(d, &c[i], sh->burst ? 0 : BUF_BYTES), 0);
		}
		CHECK_EQ(vq_dev_flush(d), n);
		if (vq_dev_should_signal(d)) {
			sh->calls++;
			notify(sh->callfd);
		}
	}
	sh->device_done = true;
	return NULL;
}

static void driver_loop(struct shared *sh)
{
	struct vq_drv *q = sh->p.drv;
	uint16_t num = sh->p.num;
	uint64_t seq = 0, done = 0, expect_in_order = 0;
	uint64_t *slot_seq = calloc(num, sizeof(*slot_seq));
	bool *slot_busy = calloc(num, sizeof(*slot_busy));
	unsigned next_free = 0;

	CHECK(slot_seq && slot_busy);
	while (done < sh->total) {
		bool progress = false;
		void *tok[32];
		uint32_t len[32];
		int n;

		/* Post while there is room. */
		while (sh->burst && seq < sh->total) {
			struct vq_seg sg[16];
			void *bt[16];
			unsigned k = 0, s = next_free;
			int r;

			/* Free slots come back in order here (one at a time
			 * would search; a burst takes the run from next_free). */
			while (k < 16 && seq + k < sh->total && !slot_busy[s]) {
				uint8_t *out;
				uint64_t q_seq = seq + k;

				sg[k] = (struct vq_seg){ sh->buf_gpa + (uint64_t)s * 2 * BUF_BYTES, BUF_BYTES };
				out = pair_hva(&sh->p, sg[k].addr);
				fill_bytes(out, q_seq, 0);
				memcpy(out, &q_seq, sizeof(q_seq));
				slot_seq[s] = q_seq;
				bt[k++] = &slot_seq[s];
				s = (s + 1) % num;
			}
			if (!k)
				break;
			r = vq_drv_add_burst(q, sg, bt, k, false);
			CHECK(r >= 0 && (unsigned)r <= k);
			for (int i = 0; i < r; i++)
				slot_busy[(next_free + i) % num] = true;
			seq += (unsigned)r;
			next_free = (next_free + (unsigned)r) % num;
			if (r)
				progress = true;
			if ((unsigned)r < k)
				break;
		}
		while (!sh->burst && seq < sh->total) {
			unsigned s;
			struct vq_seg sg[2];
			uint8_t *out;
			int r;

			for (s = 0; s < num && slot_busy[(next_free + s) % num]; s++)
				;
			if (s == num)
				break;
			s = (next_free + s) % num;
			sg[0] = (struct vq_seg){ sh->buf_gpa + (uint64_t)s * 2 * BUF_BYTES, BUF_BYTES };
			sg[1] = (struct vq_seg){ sg[0].addr + BUF_BYTES, BUF_BYTES };
			out = pair_hva(&sh->p, sg[0].addr);
			fill_bytes(out, seq, 0);
			memcpy(out, &seq, sizeof(seq));
			r = vq_drv_add(q, sg, 1, 1, &slot_seq[s]);
			if (r == -ENOSPC)
				break;
			CHECK_EQ(r, 0);
			slot_seq[s] = seq++;
			slot_busy[s] = true;
			next_free = (s + 1) % num;
			progress = true;
		}
		if (progress) {
			int k = vq_drv_kick_prepare(q);

			CHECK(k >= 0);
			if (k) {
				sh->kicks++;
				notify(sh->kickfd);
			}
		}
		n = vq_drv_get_burst(q, tok, len, 32);
		CHECK(n >= 0);
		for (int i = 0; i < n; i++) {
			uint64_t *t = tok[i];
			unsigned s = (unsigned)(t - slot_seq);

			CHECK(s < num && slot_busy[s]);
			CHECK_EQ(len[i], sh->burst ? 0 : BUF_BYTES);
			CHECK(sh->burst || bytes_ok(pair_hva(&sh->p, sh->buf_gpa + (uint64_t)s * 2 * BUF_BYTES + BUF_BYTES),
				       *t, 0x5a, 0));
			if (sh->in_order)
				CHECK_EQ(*t, expect_in_order++);
			slot_busy[s] = false;
			done++;
			progress = true;
		}
		if (!progress) {
			int r = vq_drv_enable_cb(q);

			CHECK(r >= 0);
			if (r == 0) {
				sh->driver_sleeps++;
				wait_fd(sh->callfd, "lost call");
			}
			vq_drv_disable_cb(q);
		}
	}
	free(slot_seq);
	free(slot_busy);
}

static void run(bool packed, bool in_order, bool event_idx, bool indirect,
		bool burst, uint64_t total)
{
	struct shared sh = { .in_order = in_order, .burst = burst, .total = total };
	uint64_t f = pair_features(packed, in_order, event_idx, indirect);
	pthread_t dev;

	pair_init(&sh.p, f, packed ? 200 : 256, 1, 1);
	sh.buf_gpa = pair_alloc(&sh.p, (uint64_t)sh.p.num * 2 * BUF_BYTES);
	sh.kickfd = eventfd(0, EFD_CLOEXEC);
	sh.callfd = eventfd(0, EFD_CLOEXEC);
	CHECK(sh.kickfd >= 0 && sh.callfd >= 0);

	CHECK_EQ(pthread_create(&dev, NULL, device_thread, &sh), 0);
	driver_loop(&sh);
	CHECK_EQ(pthread_join(dev, NULL), 0);
	CHECK(sh.device_done);
	CHECK_EQ(vq_drv_outstanding(sh.p.drv), 0);
	fprintf(stderr, "%s in_order=%d event_idx=%d indirect=%d%s: %llu buffers, "
		"kicks %llu calls %llu, device slept %llu driver slept %llu\n",
		packed ? "packed" : "split ", in_order, event_idx, indirect,
		burst ? " burst" : "",
		(unsigned long long)total, (unsigned long long)sh.kicks,
		(unsigned long long)sh.calls, (unsigned long long)sh.device_sleeps,
		(unsigned long long)sh.driver_sleeps);
	close(sh.kickfd);
	close(sh.callfd);
	pair_fini(&sh.p);
}

int main(int argc, char **argv)
{
	uint64_t total = argc > 1 ? strtoull(argv[1], NULL, 0) : 200000;

	for (int cfg = 0; cfg < 16; cfg++)
		run(cfg & 4, cfg & 2, cfg & 1, cfg & 2, cfg & 8, total);
	return 0;
}
