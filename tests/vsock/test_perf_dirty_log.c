// SPDX-License-Identifier: MIT
/*
 * virtq-perf --dirty-log's checks against a log we write by hand
 * (vhost-user "Migration": the back-end marks every page it writes, one bit
 * per 4 KiB page from guest address 0): a changed page without its bit is
 * counted, with it is not; memory that did not change needs no bit; in a
 * packed descriptor ring only slots the device left used count.
 */
#include <virtq/spec.h>

#include "vq_test.h"
#include "dirty_log.h"

#define PG 4096u
#define BASE (16 * PG)          /* guest address of mem[0] */

static uint8_t mem[4 * PG];
static uint8_t bits[8];

static void mark(uint64_t gpa)
{
	bits[gpa / PG / 8] |= (uint8_t)(1u << (gpa / PG % 8));
}

static struct perf_dlog fresh_log(void)
{
	memset(bits, 0, sizeof(bits));
	return (struct perf_dlog){ bits, sizeof(bits) };
}

/* A page the back-end changed must be marked; one it did not change is
 * fine without a bit (a migration has nothing to send again). */
static void migration_changed_page_must_be_marked(void)
{
	struct perf_dlog d = fresh_log();
	struct perf_dlog_watch w = { .n = 0 };
	uint64_t changed = 0;

	memset(mem, 0, sizeof(mem));
	CHECK_EQ(perf_dlog_watch(&w, mem, BASE, 3 * PG, false), 0);
	CHECK_EQ(perf_dlog_unmarked(&w, &d, &changed), 0);
	CHECK_EQ(changed, 0);
	mem[PG + 100] = 1;
	mem[2 * PG + PG - 1] = 1;
	changed = 0;
	CHECK_EQ(perf_dlog_unmarked(&w, &d, &changed), 2);
	CHECK_EQ(changed, 2);
	mark(BASE + PG);
	changed = 0;
	CHECK_EQ(perf_dlog_unmarked(&w, &d, &changed), 1);
	mark(BASE + 2 * PG);
	changed = 0;
	CHECK_EQ(perf_dlog_unmarked(&w, &d, &changed), 0);
	CHECK_EQ(changed, 2);
	/* a bit for another page does not cover this one */
	d = fresh_log();
	mark(BASE);
	mark(BASE + 3 * PG);
	changed = 0;
	CHECK_EQ(perf_dlog_unmarked(&w, &d, &changed), 2);
	perf_dlog_watch_free(&w);
}

/* A range that starts inside a page is counted by the pages it touches. */
static void migration_unaligned_range_pages(void)
{
	struct perf_dlog d = fresh_log();
	struct perf_dlog_watch w = { .n = 0 };
	uint64_t changed = 0;

	memset(mem, 0, sizeof(mem));
	CHECK_EQ(perf_dlog_watch(&w, mem + PG / 2, BASE + PG / 2, PG, false), 0);
	mem[PG + 10] = 7;               /* second page of the range */
	CHECK_EQ(perf_dlog_unmarked(&w, &d, &changed), 1);
	mark(BASE);                     /* the first page: not the one */
	changed = 0;
	CHECK_EQ(perf_dlog_unmarked(&w, &d, &changed), 1);
	mark(BASE + PG);
	changed = 0;
	CHECK_EQ(perf_dlog_unmarked(&w, &d, &changed), 0);
	CHECK_EQ(changed, 1);
	perf_dlog_watch_free(&w);
}

static void put_flags(uint8_t *slot, uint16_t f)
{
	slot[14] = (uint8_t)f;
	slot[15] = (uint8_t)(f >> 8);
}

/* 2.8.1 packed: the driver makes a descriptor available with AVAIL !=
 * USED, the device marks it used with AVAIL == USED: only the latter is
 * the device's write. */
static void migration_packed_ring_used_slots(void)
{
	struct perf_dlog d = fresh_log();
	struct perf_dlog_watch w = { .n = 0 };
	uint64_t changed = 0;

	memset(mem, 0, sizeof(mem));
	CHECK_EQ(perf_dlog_watch(&w, mem, BASE, 2 * PG, true), 0);
	/* the driver posts slots in both pages */
	put_flags(mem + 32, VQ_DESC_F_AVAIL);
	put_flags(mem + PG + 16, VQ_DESC_F_AVAIL);
	mem[PG + 16] = 0x55;
	CHECK_EQ(perf_dlog_unmarked(&w, &d, &changed), 0);
	CHECK_EQ(changed, 0);
	/* the device uses the one in the second page */
	put_flags(mem + PG + 16, VQ_DESC_F_AVAIL | VQ_DESC_F_USED);
	CHECK_EQ(perf_dlog_unmarked(&w, &d, &changed), 1);
	CHECK_EQ(changed, 1);
	mark(BASE + PG);
	changed = 0;
	CHECK_EQ(perf_dlog_unmarked(&w, &d, &changed), 0);
	perf_dlog_watch_free(&w);
}

/* perf_dlog_marked, as net checks each received buffer: every page of the
 * range, none past the log. */
static void migration_marked_ranges(void)
{
	struct perf_dlog d = fresh_log();

	mark(BASE);
	mark(BASE + PG);
	CHECK(perf_dlog_marked(&d, BASE, 2 * PG));
	CHECK(perf_dlog_marked(&d, BASE + 100, PG));
	CHECK(!perf_dlog_marked(&d, BASE + PG, PG + 1));
	CHECK(perf_dlog_marked(&d, BASE + 5 * PG, 0));
	CHECK(!perf_dlog_marked(&d, 64ull * PG * 8, 1));
}

int main(void)
{
	RUN(migration_changed_page_must_be_marked);
	RUN(migration_unaligned_range_pages);
	RUN(migration_packed_ring_used_slots);
	RUN(migration_marked_ranges);
	return 0;
}
