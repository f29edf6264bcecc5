// SPDX-License-Identifier: MIT
/*
 * The ABI growth rule (docs/DESIGN.md, "ABI"): every struct a caller fills
 * and passes in ends with at least four reserved words, and the call that
 * takes it refuses a non-zero one with -EINVAL, creating nothing.  A program
 * built against newer headers that sets a field this library does not know
 * then fails at once instead of being silently ignored.  Each word is tried
 * on its own, so a check that looks at only the first would fail here.
 */
#include <stddef.h>
#include <unistd.h>

#include <virtq/net.h>
#include <virtq/runtime.h>

#include "ring_pair.h"

#define NRESERVED(s) (sizeof((s).reserved) / sizeof((s).reserved[0]))

/* Reserved words last: a new field takes words from the reserve and every
 * older field keeps its offset.  (A struct starts with four or more; the
 * reserve shrinks as later versions use it.) */
#define RESERVED_LAST(type)                                                  \
	_Static_assert(sizeof(((type *)0)->reserved) >= 8 &&                \
		       offsetof(type, reserved) +                            \
		       sizeof(((type *)0)->reserved) == sizeof(type),        \
		       #type ": reserved words missing or not last")
RESERVED_LAST(struct vq_dev_config);
RESERVED_LAST(struct vq_drv_config);
RESERVED_LAST(struct vq_mem_region);
RESERVED_LAST(struct vq_iotlb_entry);
RESERVED_LAST(struct vq_dirty_log);
RESERVED_LAST(struct vq_bp_probe);
RESERVED_LAST(struct vq_rt_ring_ops);
RESERVED_LAST(struct vq_rt_queue_config);
RESERVED_LAST(struct vq_rt_loop_config);
RESERVED_LAST(struct vq_rt_drv_wait);
RESERVED_LAST(struct vq_net_queue_config);

/* Make word i of a reserved array non-zero, the others zero. */
#define SET_WORD(s, i) do {                                                  \
	memset((s).reserved, 0, sizeof((s).reserved));                      \
	memset((char *)(s).reserved + (i) * sizeof((s).reserved[0]) +       \
	       sizeof((s).reserved[0]) - 1, 0x5a, 1);                       \
} while (0)
#define CLEAR(s) memset((s).reserved, 0, sizeof((s).reserved))

static void ring_configs_refuse_reserved(void)
{
	struct ring_pair p;

	for (int packed = 0; packed < 2; packed++) {
		pair_init(&p, pair_features(packed, 0, 1, 1), 16, 0, 0);
		struct vq_dev_config vc = {
			.features = p.features, .num = p.num, .ring = p.ring,
			.mem = p.mem, .avail_idx = packed ? 0x8000 : 0,
			.used_idx = packed ? 0x8000 : 0,
		};
		struct vq_drv_config dc = {
			.features = p.features, .num = p.num, .ring = p.ring,
		};
		struct vq_dev *d = (struct vq_dev *)&p;
		struct vq_drv *q = (struct vq_drv *)&p;

		for (unsigned i = 0; i < NRESERVED(vc); i++) {
			SET_WORD(vc, i);
			CHECK_EQ(vq_dev_new(&vc, &d), -EINVAL);
			CHECK(d == NULL);
		}
		for (unsigned i = 0; i < NRESERVED(dc); i++) {
			SET_WORD(dc, i);
			CHECK_EQ(vq_drv_new(&dc, &q), -EINVAL);
			CHECK(q == NULL);
		}
		CLEAR(vc);
		CLEAR(dc);
		CHECK_EQ(vq_dev_new(&vc, &p.dev), 0);
		CHECK_EQ(vq_drv_new(&dc, &p.drv), 0);
		pair_fini(&p);
	}
}

static void mem_region_and_iotlb_entry_refuse_reserved(void)
{
	static uint8_t a[4096] __attribute__((aligned(64)));
	struct vq_mem *m;
	struct vq_mem_region r = { .gpa = 0x10000, .size = sizeof(a),
				   .uaddr = 0x7000000, .hva = a };
	struct vq_iotlb_entry e = { .iova = 0x1000, .size = 0x100,
				    .uaddr = 0x7000000, .perm = VQ_ACCESS_RW };

	CHECK_EQ(vq_mem_new(&m), 0);
	for (unsigned i = 0; i < NRESERVED(r); i++) {
		SET_WORD(r, i);
		CHECK_EQ(vq_mem_add(m, &r), -EINVAL);
		CHECK_EQ(vq_mem_count(m), 0);
	}
	CLEAR(r);
	CHECK_EQ(vq_mem_add(m, &r), 0);
	CHECK_EQ(vq_mem_count(m), 1);

	CHECK_EQ(vq_mem_iotlb_enable(m, NULL, NULL), 0);
	for (unsigned i = 0; i < NRESERVED(e); i++) {
		SET_WORD(e, i);
		CHECK_EQ(vq_mem_iotlb_update(m, &e), -EINVAL);
		CHECK_EQ(vq_mem_iotlb_count(m), 0);
	}
	CLEAR(e);
	CHECK_EQ(vq_mem_iotlb_update(m, &e), 0);
	CHECK_EQ(vq_mem_iotlb_count(m), 1);
	vq_mem_free(m);
}

static void dirty_log_refuses_reserved(void)
{
	static uint8_t bits[64];
	struct ring_pair p;
	struct vq_dirty_log log = { .bits = bits, .size = sizeof(bits) };
	struct vq_gpa_range ring = { GUEST_BASE, 4096 };

	pair_init(&p, pair_features(0, 0, 0, 0), 16, 0, 1);
	for (unsigned i = 0; i < NRESERVED(log); i++) {
		SET_WORD(log, i);
		CHECK_EQ(vq_dev_set_log(p.dev, &log, &ring, 1), -EINVAL);
	}
	CLEAR(log);
	CHECK_EQ(vq_dev_set_log(p.dev, &log, &ring, 1), 0);
	CHECK_EQ(vq_dev_set_log(p.dev, NULL, NULL, 0), 0);
	pair_fini(&p);
}

static int process_none(struct vq_rt_queue *q, void *arg,
			const struct vq_rt_budget *b, uint64_t *bytes)
{
	return 0;
}

static bool never(void *arg)
{
	return false;
}

static bool always(void *arg)
{
	return true;
}

static void nothing(void *arg)
{
}

static int enable_none(void *arg)
{
	return 0;
}

static void runtime_configs_refuse_reserved(void)
{
	struct ring_pair p;
	struct vq_rt_loop_config lc = { 0 };
	struct vq_rt_loop *l = (struct vq_rt_loop *)&lc;
	struct vq_rt_ring_ops ops = {
		.has_avail = never, .disable_notify = nothing,
		.enable_notify = enable_none, .should_signal = never,
	};
	struct vq_rt_queue_config qc;
	struct vq_rt_queue *rq = (struct vq_rt_queue *)&lc;

	for (unsigned i = 0; i < NRESERVED(lc); i++) {
		SET_WORD(lc, i);
		CHECK_EQ(vq_rt_loop_new(&lc, &l), -EINVAL);
		CHECK(l == NULL);
	}
	CLEAR(lc);
	CHECK_EQ(vq_rt_loop_new(&lc, &l), 0);

	pair_init(&p, pair_features(0, 0, 0, 0), 16, 0, 1);
	qc = (struct vq_rt_queue_config){ .dev = p.dev, .kick_fd = -1,
					  .call_fd = -1, .process = process_none };
	for (unsigned i = 0; i < NRESERVED(qc); i++) {
		SET_WORD(qc, i);
		CHECK_EQ(vq_rt_loop_add(l, &qc, &rq), -EINVAL);
		CHECK(rq == NULL);
	}
	CLEAR(qc);
	/* The ops table the config points to follows the rule too. */
	qc.dev = NULL;
	qc.ops = &ops;
	qc.ring = &p;
	for (unsigned i = 0; i < NRESERVED(ops); i++) {
		SET_WORD(ops, i);
		CHECK_EQ(vq_rt_loop_add(l, &qc, &rq), -EINVAL);
		CHECK(rq == NULL);
	}
	CLEAR(ops);
	CHECK_EQ(vq_rt_loop_add(l, &qc, &rq), 0);
	CHECK(rq != NULL);
	vq_rt_loop_free(l);
	pair_fini(&p);
}

static void busy_poll_and_driver_wait_refuse_reserved(void)
{
	struct ring_pair p;
	struct vq_bp_probe bp = { .ready = always };
	struct vq_rt_counters c = { 0 };
	struct vq_rt_drv_wait w = { .call_fd = -1 };

	for (unsigned i = 0; i < NRESERVED(bp); i++) {
		SET_WORD(bp, i);
		CHECK_EQ(vq_rt_busy_poll(&bp, 1000), -EINVAL);
	}
	CLEAR(bp);
	CHECK_EQ(vq_rt_busy_poll(&bp, 1000), VQ_BP_HIT);

	pair_init(&p, pair_features(0, 0, 0, 0), 16, 1, 0);
	/* Refused before anything else, even before the look for used
	 * buffers that would return at once. */
	for (unsigned i = 0; i < NRESERVED(w); i++) {
		SET_WORD(w, i);
		CHECK_EQ(vq_rt_drv_wait_used(p.drv, &w, 0, &c), -EINVAL);
	}
	CLEAR(w);
	/* No call fd and nothing used: the wait itself says -EINVAL only
	 * after enabling callbacks; with the fd it times out. */
	w.call_fd = vq_evt_new();
	CHECK(w.call_fd >= 0);
	CHECK_EQ(vq_rt_drv_wait_used(p.drv, &w, 0, &c), 0);
	close(w.call_fd);
	pair_fini(&p);
}

static void net_config_refuses_reserved(void)
{
	struct ring_pair p;
	struct vq_net_queue_config nc;
	struct vq_net_queue *q = (struct vq_net_queue *)&p;

	pair_init(&p, pair_features(0, 0, 0, 0), 16, 0, 1);
	nc = (struct vq_net_queue_config){ .dev = p.dev, .role = VQ_NET_TX };
	for (unsigned i = 0; i < NRESERVED(nc); i++) {
		SET_WORD(nc, i);
		CHECK_EQ(vq_net_queue_new(&nc, &q), -EINVAL);
		CHECK(q == NULL);
	}
	CLEAR(nc);
	CHECK_EQ(vq_net_queue_new(&nc, &q), 0);
	vq_net_queue_free(q);
	pair_fini(&p);
}

int main(void)
{
	RUN(ring_configs_refuse_reserved);
	RUN(mem_region_and_iotlb_entry_refuse_reserved);
	RUN(dirty_log_refuses_reserved);
	RUN(runtime_configs_refuse_reserved);
	RUN(busy_poll_and_driver_wait_refuse_reserved);
	RUN(net_config_refuses_reserved);
	return 0;
}
