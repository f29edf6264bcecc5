// SPDX-License-Identifier: MIT
/*
 * The back-end's memory and dirty log: regions overlapping, past their
 * file or misaligned are refused; memory slots (ADD/REM_MEM_REG, the same
 * region twice); live migration's log (vhost-user "Migration"): exactly
 * the written pages and the device-written ring areas are marked, and a
 * log that is missing, too small or past its file closes the connection.
 */
#include "backend_fixture.h"

static unsigned dirty_pages(const uint8_t *log)
{
	unsigned n = 0;

	for (unsigned i = 0; i < LOG_BYTES; i++)
		n += (unsigned)__builtin_popcount(log[i]);
	return n;
}

/* "All the modifications to memory pointed by vring 'descriptor' should be
 * marked.  Modifications to 'used' vring should be marked if
 * VHOST_VRING_F_LOG is part of ring's flags."  QEMU's order: SET_LOG_BASE,
 * then SET_FEATURES with LOG_ALL, while the rings run. */
static void migration_log(struct fx *x, bool pk)
{
	uint64_t rf = SPLIT | (pk ? VQ_BIT(VQ_F_RING_PACKED) : 0);
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC), lfd = log_memfd(4096);
	uint8_t *log = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, lfd, 0);
	struct vq_drv_config dc = { .features = rf, .num = 64,
		.ring = { x->g, x->g + 0x1000, x->g + 0x2000 } };
	struct vq_drv *d;

	CHECK(log != MAP_FAILED);
	CHECK(get_u64(x, s, VQ_VHU_GET_FEATURES) & LOG_ALL);
	log_ring(x, s, rf | PROTO, k, VQ_VHU_VRING_F_LOG, 0x2000);
	CHECK_EQ(vq_drv_new(&dc, &d), 0);
	echo_one(x, d, 0x10000, 64, 0x20800, 64);
	CHECK(!memcmp(x->g + 0x20800, x->g + 0x10000, 64));

	snd_log_base(s, lfd, LOG_BYTES, 0);
	ok(x);
	CHECK_EQ(rcv(s, VQ_VHU_SET_LOG_BASE, false).size, 0);
	echo_one(x, d, 0x10000, 64, 0x20800, 64);
	CHECK_EQ(dirty_pages(log), 0);  /* a log, but LOG_ALL not yet set */

	snd_u64(s, VQ_VHU_SET_FEATURES, rf | PROTO | LOG_ALL);
	ok(x);
	CHECK(x->e.q[0].on);
	echo_one(x, d, 0x10000, 64, 0x20800, 64);
	CHECK(page_dirty(log, 0x20800));        /* the buffer written */
	CHECK(!page_dirty(log, 0x10000));       /* the buffer read */
	CHECK(page_dirty(log, 0x2000));         /* used ring / device area */
	CHECK(!page_dirty(log, 0x1000));        /* the driver's area */
	CHECK_EQ(page_dirty(log, 0), pk);       /* packed descriptors are written */
	CHECK_EQ(dirty_pages(log), pk ? 3u : 2u);

	/* only the bytes written: 64 of an 8 KiB buffer; and a write that
	 * crosses a page marks both pages */
	memset(log, 0, LOG_BYTES);
	echo_one(x, d, 0x10000, 64, 0x30000, 8192);
	CHECK(page_dirty(log, 0x30000) && !page_dirty(log, 0x31000));
	echo_one(x, d, 0x10000, 64, 0x41fe0, 64);
	CHECK(page_dirty(log, 0x41000) && page_dirty(log, 0x42000));

	if (!pk) {
		/* split, used-ring logging off for this ring: the used ring is
		 * not marked, the data still is (the address change restarts
		 * the ring where it was) */
		snd_addr_log(s, 0, UA, UA + 0x1000, UA + 0x2000, 0, 0);
		ok(x);
		memset(log, 0, LOG_BYTES);
		echo_one(x, d, 0x10000, 64, 0x20800, 64);
		CHECK(page_dirty(log, 0x20800) && !page_dirty(log, 0x2000));
		CHECK_EQ(dirty_pages(log), 1);
	}

	{
		/* QEMU replaces the log (memory hotplug grows it) while the
		 * rings run: marks go to the new one, the old is unmapped */
		int lfd2 = log_memfd(4096), maps = count_maps();
		uint8_t *log2 = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				     MAP_SHARED, lfd2, 0);

		CHECK(log2 != MAP_FAILED);
		snd_log_base(s, lfd2, 2 * LOG_BYTES, 0);
		ok(x);
		CHECK_EQ(rcv(s, VQ_VHU_SET_LOG_BASE, false).size, 0);
		CHECK_EQ(count_maps(), maps + 1);       /* ours, not the old one */
		memset(log, 0, LOG_BYTES);
		echo_one(x, d, 0x10000, 64, 0x20800, 64);
		CHECK_EQ(dirty_pages(log), 0);
		CHECK(page_dirty(log2, 0x20800));
		/* (split: used-ring logging was turned off above) */
		CHECK_EQ(page_dirty(log2, 0x2000), pk);
		munmap(log2, 4096);
		close(lfd2);
	}

	/* migration over: LOG_ALL cleared, nothing more is logged */
	snd_u64(s, VQ_VHU_SET_FEATURES, rf | PROTO);
	ok(x);
	memset(log, 0, LOG_BYTES);
	echo_one(x, d, 0x10000, 64, 0x20800, 64);
	CHECK_EQ(dirty_pages(log), 0);
	CHECK(x->e.q[0].on);

	vq_drv_free(d);
	munmap(log, 4096);
	close(lfd);
	close(s);
	close(k);
	CHECK_EQ(pump(x), -ECONNRESET);
	CHECK_EQ(count_maps(), x->maps0);       /* the log was unmapped */
	CHECK_EQ(count_fds(), x->fds0);
	memset(x->g, 0, 0x50000);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

static void bad_overlapping_regions(struct fx *x)
{
	int s = cli(x), fds[2] = { x->gfd, x->gfd };
	struct vq_vhu_region r[2] = {
		{ 0, 0x10000, UA, 0 }, { 0x8000, 0x10000, UA + 0x100000, 0 },
	};

	snd_mem(s, 2, r, fds);
	expect_closed(x, s, -EINVAL);
}

static void bad_add_mem_reg_overlaps_existing(struct fx *x)
{
	int s = cli(x);
	struct vq_vhu_region a = { 0, 0x10000, UA, 0 };
	struct vq_vhu_region b = { 0x20000, 0x10000, UA + 0x8000, 0x20000 };

	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES,
		VQ_BIT(VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS));
	ok(x);
	snd_region(s, VQ_VHU_ADD_MEM_REG, &a, x->gfd);
	ok(x);
	CHECK_EQ(count_maps(), x->maps0 + 1);
	snd_region(s, VQ_VHU_ADD_MEM_REG, &b, x->gfd);   /* user range overlaps */
	expect_closed(x, s, -EINVAL);
}

/* A region whose user address is not aligned like its file offset (or its
 * guest address): a ring the front-end aligned would be misaligned in our
 * mapping, and read in place (found by fuzz_vhu_backend, UBSan). */
static void bad_region_misaligned_mapping(struct fx *x)
{
	int s = cli(x);
	struct vq_vhu_region r = { 0, 0x10000, UA + 4, 0 };

	snd_mem(s, 1, &r, &x->gfd);
	expect_closed(x, s, -EINVAL);
	s = cli(x);
	r = (struct vq_vhu_region){ 8, 0x10000, UA, 0 };
	snd_mem(s, 1, &r, &x->gfd);
	expect_closed(x, s, -EINVAL);
}

/*
 * QEMU 7.2 sends ADD_MEM_REG and REM_MEM_REG from each vhost device of the
 * connection (one per queue pair of a multiqueue net device): the same
 * region twice is one mapping with two references, the first REM keeps it,
 * the second unmaps it.  The same addresses at another file offset are an
 * overlap, as before.
 */
static void mem_slots_same_region_twice(struct fx *x)
{
	int s = cli(x);
	struct vq_vhu_region a = { 0, 0x10000, UA, 0 };
	struct vq_vhu_region moved = { 0, 0x10000, UA, 0x10000 };

	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES,
		VQ_BIT(VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS));
	ok(x);
	snd_region(s, VQ_VHU_ADD_MEM_REG, &a, x->gfd);
	ok(x);
	snd_region(s, VQ_VHU_ADD_MEM_REG, &a, x->gfd);
	ok(x);
	CHECK_EQ(count_maps(), x->maps0 + 1);
	CHECK_EQ(count_fds(), x->fds0 + 2);     /* the second fd was closed */
	snd_region(s, VQ_VHU_REM_MEM_REG, &a, -1);
	ok(x);
	CHECK_EQ(count_maps(), x->maps0 + 1);   /* one reference left */
	snd_region(s, VQ_VHU_REM_MEM_REG, &a, -1);
	ok(x);
	CHECK_EQ(count_maps(), x->maps0);
	snd_region(s, VQ_VHU_ADD_MEM_REG, &a, x->gfd);
	ok(x);
	snd_region(s, VQ_VHU_ADD_MEM_REG, &moved, x->gfd);
	expect_closed(x, s, -EINVAL);
}

static void bad_region_past_end_of_file(struct fx *x)
{
	int s = cli(x);
	struct vq_vhu_region r = { 0, GSIZE * 2, UA, 0 };

	snd_mem(s, 1, &r, &x->gfd);
	expect_closed(x, s, -EINVAL);
}

static void bad_region_offset_past_end_of_file(struct fx *x)
{
	int s = cli(x);
	struct vq_vhu_region r = { 0, 0x1000, UA, GSIZE };

	snd_mem(s, 1, &r, &x->gfd);
	expect_closed(x, s, -EINVAL);
}

static void mem_slots_add_remove(struct fx *x)
{
	int s = cli(x);
	struct vq_vhu_region a = { 0, 0x10000, UA, 0 };
	struct vq_vhu_region b = { 0x100000, 0x10000, UA + 0x100000, 0x10000 };

	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES,
		VQ_BIT(VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS));
	ok(x);
	CHECK_EQ(get_u64(x, s, VQ_VHU_GET_MAX_MEM_SLOTS), VQ_MEM_MAX_REGIONS);
	snd_region(s, VQ_VHU_ADD_MEM_REG, &a, x->gfd);
	ok(x);
	snd_region(s, VQ_VHU_ADD_MEM_REG, &b, x->gfd);
	ok(x);
	CHECK_EQ(count_maps(), x->maps0 + 2);
	/* REM_MEM_REG: an fd is tolerated and closed unused (spec) */
	snd_region(s, VQ_VHU_REM_MEM_REG, &a, x->gfd);
	ok(x);
	CHECK_EQ(count_maps(), x->maps0 + 1);
	CHECK_EQ(count_fds(), x->fds0 + 2);     /* only the connection, both ends */
	snd_region(s, VQ_VHU_REM_MEM_REG, &a, -1);
	expect_closed(x, s, -ENOENT);
}

static void migration_log_split(struct fx *x) { migration_log(x, false); }

static void migration_log_packed(struct fx *x) { migration_log(x, true); }

static void bad_log_base_without_log_shmfd(struct fx *x)
{
	int s = cli(x), lfd = log_memfd(4096);

	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT | PROTO);
	ok(x);
	snd_log_base(s, lfd, LOG_BYTES, 0);
	close(lfd);
	expect_closed(x, s, -EPROTO);
}

static void bad_log_base_past_end_of_file(struct fx *x)
{
	int s = cli(x), lfd = log_memfd(4096);

	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT | PROTO);
	ok(x);
	snd_u64(s, VQ_VHU_SET_PROTOCOL_FEATURES, LOG_SHMFD);
	ok(x);
	snd_log_base(s, lfd, 4096, 8);
	close(lfd);
	expect_closed(x, s, -EINVAL);
}

static void bad_log_base_without_fd(struct fx *x)
{
	int s = cli(x);
	uint64_t v[2] = { LOG_BYTES, 0 };

	snd(s, VQ_VHU_SET_LOG_BASE, 0, VQ_VHU_P_LOG, v, NULL, 0);
	expect_closed(x, s, -EBADF);
}

/* The log must have a bit for every page we could write. */
static void bad_log_smaller_than_guest_memory(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC), lfd = log_memfd(4096);

	log_ring(x, s, SPLIT | PROTO, k, VQ_VHU_VRING_F_LOG, 0x2000);
	snd_log_base(s, lfd, LOG_BYTES / 2, 0);
	ok(x);
	rcv(s, VQ_VHU_SET_LOG_BASE, false);
	snd_u64(s, VQ_VHU_SET_FEATURES, SPLIT | PROTO | LOG_ALL);
	close(lfd);
	close(k);
	expect_closed(x, s, -EINVAL);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

/* "the bit offset of the last byte of the ring must fall within the size
 * supplied by VhostUserLog" */
static void bad_used_log_address_past_log(struct fx *x)
{
	int s = cli(x), k = eventfd(0, EFD_CLOEXEC), lfd = log_memfd(4096);

	log_ring(x, s, SPLIT | PROTO | LOG_ALL, k, VQ_VHU_VRING_F_LOG, 0x2000);
	snd_log_base(s, lfd, LOG_BYTES, 0);
	ok(x);
	rcv(s, VQ_VHU_SET_LOG_BASE, false);
	snd_addr_log(s, 0, UA, UA + 0x1000, UA + 0x2000, VQ_VHU_VRING_F_LOG,
		     GSIZE - 0x100);
	close(lfd);
	close(k);
	expect_closed(x, s, -EINVAL);
	x->e.starts = x->e.stops = x->e.pauses = 0;
}

int main(void)
{
	struct fx x;

	signal(SIGPIPE, SIG_IGN);
	fx_init(&x);
	T(bad_overlapping_regions);
	T(bad_add_mem_reg_overlaps_existing);
	T(bad_region_misaligned_mapping);
	T(mem_slots_same_region_twice);
	T(bad_region_past_end_of_file);
	T(bad_region_offset_past_end_of_file);
	T(mem_slots_add_remove);
	T(migration_log_split);
	T(migration_log_packed);
	T(bad_log_base_without_log_shmfd);
	T(bad_log_base_past_end_of_file);
	T(bad_log_base_without_fd);
	T(bad_log_smaller_than_guest_memory);
	T(bad_used_log_address_past_log);
	fx_fini(&x);
	return 0;
}
