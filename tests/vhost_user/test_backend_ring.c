// SPDX-License-Identifier: MIT
/*
 * The back-end's rings: setup refused out of order, outside the memory map,
 * misaligned or with a size the layout does not allow; "Ring states"
 * (enabled without protocol features, disabled until SET_VRING_ENABLE),
 * a new call fd signalled once, GET_VRING_BASE for split and packed.
 */
#include "backend_fixture.h"

static void bad_ring_addr_before_mem_table(struct fx *x)
{
	int s = cli(x);

	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT);
	ok(x);
	snd_state(s, VQ_VHU_SET_VRING_NUM, 0, 64);
	ok(x);
	snd_addr(s, 0, UA, UA + 0x1000, UA + 0x2000);
	expect_closed(x, s, -EPROTO);
}

static void bad_ring_addr_outside_map(struct fx *x)
{
	int s = cli(x);

	setup_to_num(x, s, SPLIT, 64);
	/* the used ring runs past the end of guest memory */
	snd_addr(s, 0, UA, UA + 0x1000, UA + GSIZE - 16);
	expect_closed(x, s, -EFAULT);
}

static void bad_ring_addr_misaligned(struct fx *x)
{
	int s = cli(x);

	setup_to_num(x, s, SPLIT, 64);
	snd_addr(s, 0, UA + 8, UA + 0x1000, UA + 0x2000);
	expect_closed(x, s, -EINVAL);
}

static void bad_split_queue_size_not_power_of_two(struct fx *x)
{
	int s = cli(x);

	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT);
	ok(x);
	snd_state(s, VQ_VHU_SET_VRING_NUM, 0, 100);
	expect_closed(x, s, -EINVAL);
}

static void bad_queue_size_over_32768(struct fx *x)
{
	int s = cli(x);

	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT | VQ_BIT(VQ_F_RING_PACKED));
	ok(x);
	snd_state(s, VQ_VHU_SET_VRING_NUM, 0, 32769);
	expect_closed(x, s, -EINVAL);
}

static void bad_split_base_reserved_bits(struct fx *x)
{
	int s = cli(x);

	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT);
	ok(x);
	snd_state(s, VQ_VHU_SET_VRING_BASE, 0, 0x10005);
	expect_closed(x, s, -EINVAL);
}

static void ring_states_enabled_without_protocol_features(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC);

	split_ring(x, s, SPLIT, k);
	/* "without VHOST_USER_F_PROTOCOL_FEATURES ... enable all rings" */
	CHECK_EQ(x->e.starts, 1);
	CHECK(x->e.q[0].on);
	CHECK_EQ(x->e.q[0].call, -1);
	close(s);
	close(k);
	CHECK_EQ(pump(x), -ECONNRESET);
	CHECK(!x->e.q[0].on);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

static void ring_states_disabled_until_enable(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC);

	split_ring(x, s, SPLIT | VQ_BIT(VQ_VHU_F_PROTOCOL_FEATURES), k);
	CHECK_EQ(x->e.starts, 0);       /* rings start disabled */
	snd_state(s, VQ_VHU_SET_VRING_ENABLE, 0, 1);
	ok(x);
	CHECK_EQ(x->e.starts, 1);
	snd_state(s, VQ_VHU_SET_VRING_ENABLE, 0, 0);
	ok(x);
	CHECK(!x->e.q[0].on);
	CHECK_EQ(x->e.stops, 1);        /* for good, not paused */
	CHECK_EQ(x->e.pauses, 0);
	close(s);
	close(k);
	CHECK_EQ(pump(x), -ECONNRESET);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

/* A new call fd is signalled once: a completion whose call went to the old
 * fd, or that a back-end which died never signalled, still wakes the
 * driver after the front-end replaces the fd (or reconnects). */
static void new_call_fd_signalled_once(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC), c1 = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int c2 = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	uint64_t v;

	split_ring(x, s, SPLIT, k);
	snd_vring_fd(s, VQ_VHU_SET_VRING_CALL, 0, c1);
	ok(x);
	CHECK_EQ(read(c1, &v, 8), 8);
	CHECK_EQ(v, 1);
	snd_vring_fd(s, VQ_VHU_SET_VRING_CALL, 0, c2);
	ok(x);
	CHECK_EQ(read(c2, &v, 8), 8);
	CHECK_EQ(v, 1);
	CHECK_EQ(read(c1, &v, 8), -1);  /* the old one: nothing more */
	CHECK(x->e.q[0].on);
	/* an fd change pauses the ring: the device may keep what serves it */
	CHECK_EQ(x->e.pauses, 2);
	CHECK_EQ(x->e.stops, 0);
	close(s);
	close(k);
	close(c1);
	close(c2);
	CHECK_EQ(pump(x), -ECONNRESET);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

static void get_vring_base_split_stops_ring(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC);
	struct vq_used *u = (void *)(x->g + 0x2000);
	struct vq_vhu_msg rep;

	setup_to_num(x, s, SPLIT, 64);
	snd_state(s, VQ_VHU_SET_VRING_BASE, 0, 9);
	ok(x);
	u->idx = 7;     /* split: the used index comes from memory */
	snd_addr(s, 0, UA, UA + 0x1000, UA + 0x2000);
	ok(x);
	snd_vring_fd(s, VQ_VHU_SET_VRING_KICK, 0, k);
	ok(x);
	CHECK(x->e.q[0].on);
	CHECK_EQ(vq_dev_get_state(x->e.q[0].vq).avail_idx, 9);
	CHECK_EQ(vq_dev_get_state(x->e.q[0].vq).used_idx, 7);
	snd_state(s, VQ_VHU_GET_VRING_BASE, 0, 0);
	ok(x);
	rep = rcv(s, VQ_VHU_GET_VRING_BASE, false);
	CHECK_EQ(rep.u.state.index, 0);
	CHECK_EQ(rep.u.state.num, 9);
	CHECK(!x->e.q[0].on);           /* stopped */
	CHECK_EQ(x->e.stops, 1);
	CHECK_EQ(x->e.pauses, 0);
	/* a stopped ring restarts on a new kick fd */
	snd_vring_fd(s, VQ_VHU_SET_VRING_KICK, 0, k);
	ok(x);
	CHECK(x->e.q[0].on);
	close(s);
	close(k);
	CHECK_EQ(pump(x), -ECONNRESET);
	memset(x->g, 0, 0x4000);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

static void get_vring_base_packed_both_indices(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC);
	struct vq_vhu_msg rep;

	setup_to_num(x, s, SPLIT | VQ_BIT(VQ_F_RING_PACKED), 48);
	/* avail position 5 wrap 0, used position 3 wrap 1 */
	snd_state(s, VQ_VHU_SET_VRING_BASE, 0, 5 | (3u | 0x8000u) << 16);
	ok(x);
	snd_addr(s, 0, UA, UA + 0x1000, UA + 0x1004);
	ok(x);
	snd_vring_fd(s, VQ_VHU_SET_VRING_KICK, 0, k);
	ok(x);
	CHECK(x->e.q[0].on);
	CHECK_EQ(vq_dev_get_state(x->e.q[0].vq).avail_idx, 5);
	CHECK_EQ(vq_dev_get_state(x->e.q[0].vq).used_idx, 0x8003);
	snd_state(s, VQ_VHU_GET_VRING_BASE, 0, 0);
	ok(x);
	rep = rcv(s, VQ_VHU_GET_VRING_BASE, false);
	CHECK_EQ(rep.u.state.num, 5 | (3u | 0x8000u) << 16);
	CHECK(!x->e.q[0].on);
	close(s);
	close(k);
	CHECK_EQ(pump(x), -ECONNRESET);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

int main(void)
{
	struct fx x;

	signal(SIGPIPE, SIG_IGN);
	fx_init(&x);
	T(bad_ring_addr_before_mem_table);
	T(bad_ring_addr_outside_map);
	T(bad_ring_addr_misaligned);
	T(bad_split_queue_size_not_power_of_two);
	T(bad_queue_size_over_32768);
	T(bad_split_base_reserved_bits);
	T(ring_states_enabled_without_protocol_features);
	T(ring_states_disabled_until_enable);
	T(new_call_fd_signalled_once);
	T(get_vring_base_split_stops_ring);
	T(get_vring_base_packed_both_indices);
	fx_fini(&x);
	return 0;
}
