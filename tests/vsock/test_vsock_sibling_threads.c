// SPDX-License-Identifier: MIT
/*
 * Sibling guests on two threads, as the framework runs two VMs' devices
 * on two workers: each thread runs one guest and its device, and the two
 * devices meet only through the hub (the pipes' atomics, the inboxes).
 * Streams both ways and seqpacket messages, every byte checked; nothing
 * waits for the other thread (a thread that waited would hang the run).
 * Under TSan in the threads suite.
 */
#include <poll.h>
#include <pthread.h>

#include <virtq/runtime.h>

#include "sibling_fixture.h"

#define BYTES   (6u << 20)
#define MSGS    300u

static struct sx x;
static int failed;                      /* atomic: a side failed, both stop */
static int finished;                    /* atomic: sides that got everything */

struct side {
	unsigned i;                     /* the guest */
	struct vq_vsg_conn *s, *q;      /* stream, seqpacket */
	uint64_t sent, got;
	unsigned msent, mgot;
	int err;
};

static void fail(struct side *s, int line)
{
	if (!s->err)
		s->err = line;
	__atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
}

/* Message m of side i: its length and bytes. */
static uint32_t msg_len(unsigned i, unsigned m)
{
	return (m * 7919u + i * 131u) % 70000u;
}

static void *run(void *arg)
{
	static _Thread_local uint8_t buf[1u << 17];
	struct side *s = arg;
	struct sx_vm *m = &x.vm[s->i];
	unsigned peer = !s->i;
	uint64_t deadline = vq_rt_now_ns() + 120ull * 1000000000;
	bool mine = false;

	/* a side that has all it wants still runs its device: the other's
	 * bytes may wait in it */
	while (!__atomic_load_n(&failed, __ATOMIC_RELAXED) &&
	       __atomic_load_n(&finished, __ATOMIC_ACQUIRE) < 2) {
		uint32_t k = BYTES - s->sent < 65536 ? (uint32_t)(BYTES - s->sent) : 65536, r;
		long w;
		int moved = sx_vm_round(m);

		for (uint32_t j = 0; j < k; j++)
			buf[j] = fx_byte(20 + s->i, s->sent + j);
		w = k ? vq_vsg_write(s->s, buf, k) : 0;
		if (w < 0)
			fail(s, __LINE__);
		s->sent += w > 0 ? (uint64_t)w : 0;
		moved += w > 0;
		while ((r = vq_vsg_read(s->s, buf, sizeof(buf)))) {
			for (uint32_t j = 0; j < r; j++)
				if (buf[j] != fx_byte(20 + peer, s->got + j))
					fail(s, __LINE__);
			s->got += r;
			moved = 1;
		}
		if (s->msent < MSGS) {
			uint32_t len = msg_len(s->i, s->msent);

			for (uint32_t j = 0; j < len; j++)
				buf[j] = (uint8_t)(s->msent + j);
			w = vq_vsg_write_msg(s->q, buf, len);
			if (w < 0 || (w && w != (long)len)) {
				fail(s, __LINE__);
			}
			s->msent += w == (long)len;
			moved += w == (long)len;
		}
		while ((w = vq_vsg_read_msg(s->q, buf, sizeof(buf))) >= 0) {
			if ((uint32_t)w != msg_len(peer, s->mgot))
				fail(s, __LINE__);
			for (uint32_t j = 0; j < (uint32_t)w; j++)
				if (buf[j] != (uint8_t)(s->mgot + j))
					fail(s, __LINE__);
			s->mgot++;
			moved = 1;
		}
		if (w != -EAGAIN)
			fail(s, __LINE__);
		if (!moved) {
			/* the sibling's news comes through our device's fd */
			struct pollfd p = { vq_vsock_fd(m->dev), POLLIN, 0 };

			poll(&p, 1, 1);
		}
		if (!mine && s->got == BYTES && s->sent == BYTES && s->mgot == MSGS &&
		    s->msent == MSGS) {
			mine = true;
			__atomic_add_fetch(&finished, 1, __ATOMIC_RELEASE);
		}
		if (vq_rt_now_ns() > deadline) {
			fprintf(stderr, "side %u: stuck: sent %" PRIu64 " got %" PRIu64
				" msgs sent %u got %u\n", s->i, s->sent, s->got, s->msent,
				s->mgot);
			fail(s, __LINE__);
		}
	}
	return NULL;
}

static void sibling_two_threads_stream_and_seqpacket(void)
{
	struct side s[2] = { { .i = 0 }, { .i = 1 } };
	struct vq_vsg_conn *b, *bq;
	pthread_t t[2];

	sx_init(&x, 2, &(struct sx_opts){ 0 });
	sx_connect(&x, 0, 1, 100, VQ_VSOCK_TYPE_STREAM, &s[0].s, &b);
	sx_connect(&x, 1, 0, 101, VQ_VSOCK_TYPE_SEQPACKET, &s[1].q, &bq);
	s[1].s = b;
	s[0].q = bq;
	for (unsigned i = 0; i < 2; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, run, &s[i]), 0);
	for (unsigned i = 0; i < 2; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
	for (unsigned i = 0; i < 2; i++) {
		if (s[i].err)
			fprintf(stderr, "side %u failed at line %d\n", i, s[i].err);
		CHECK_EQ(s[i].err, 0);
		CHECK_EQ(s[i].got, BYTES);
		CHECK_EQ(s[i].mgot, MSGS);
	}
	sx_fini(&x);
}

int main(void)
{
	RUN(sibling_two_threads_stream_and_seqpacket);
	return 0;
}
