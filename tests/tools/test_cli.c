// SPDX-License-Identifier: MIT
/* The command-line convention's parsers (tools/common/cli.h): decimal only,
 * sizes with K/M/G, no hex, octal, sign, inf or nan; CPU lists. */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "cli.h"
#include "vq_test.h"

static void cli_parse_u64_decimal_only(void)
{
	uint64_t v;

	CHECK(cli_parse_u64("0", &v) && v == 0);
	CHECK(cli_parse_u64("010", &v) && v == 10);     /* not octal 8 */
	CHECK(cli_parse_u64("18446744073709551615", &v) && v == UINT64_MAX);
	CHECK(!cli_parse_u64("18446744073709551616", &v));
	CHECK(!cli_parse_u64("0x10", &v));
	CHECK(!cli_parse_u64("-1", &v));
	CHECK(!cli_parse_u64("+1", &v));
	CHECK(!cli_parse_u64(" 1", &v));
	CHECK(!cli_parse_u64("1 ", &v));
	CHECK(!cli_parse_u64("", &v));
	CHECK(!cli_parse_u64("1k", &v));
}

static void cli_parse_size_suffixes(void)
{
	uint64_t v;

	CHECK(cli_parse_size("4096", &v) && v == 4096);
	CHECK(cli_parse_size("64K", &v) && v == 65536);
	CHECK(cli_parse_size("64KiB", &v) && v == 65536);
	CHECK(cli_parse_size("2M", &v) && v == 2u << 20);
	CHECK(cli_parse_size("1G", &v) && v == 1u << 30);
	CHECK(!cli_parse_size("1k", &v));
	CHECK(!cli_parse_size("1T", &v));
	CHECK(!cli_parse_size("K", &v));
	CHECK(!cli_parse_size("0x1K", &v));
	CHECK(!cli_parse_size("17179869184G", &v));    /* 2^64: wraps */
}

static void cli_parse_double_plain(void)
{
	double v;

	CHECK(cli_parse_double("0.5", &v) && v == 0.5);
	CHECK(cli_parse_double(".5", &v) && v == 0.5);
	CHECK(cli_parse_double("1e-3", &v) && v == 1e-3);
	CHECK(!cli_parse_double("0x1p3", &v));
	CHECK(!cli_parse_double("inf", &v));
	CHECK(!cli_parse_double("nan", &v));
	CHECK(!cli_parse_double("-1", &v));
	CHECK(!cli_parse_double("1s", &v));
	CHECK(!cli_parse_double("", &v));
}

/* Its bad input ends the program (exit 2, tests/tools/cli-daemons-errors.sh);
 * here what it keeps of good input. */
static void cli_cpu_list_in_order(void)
{
	long last = sysconf(_SC_NPROCESSORS_CONF) - 1;
	unsigned cpus[4] = { 9, 9, 9, 9 };
	char list[64];

	CHECK_EQ(cli_cpu_list("--cpu", "0", cpus, 4), 1);
	CHECK_EQ(cpus[0], 0);
	snprintf(list, sizeof(list), "%ld,0,%ld", last, last);
	CHECK_EQ(cli_cpu_list("--cpu", list, cpus, 4), 3);
	CHECK(cpus[0] == (unsigned)last && cpus[1] == 0 && cpus[2] == (unsigned)last);
	CHECK_EQ(cpus[3], 9);                           /* nothing past the list */
	snprintf(list, sizeof(list), "0,0,0,%ld", last);
	CHECK_EQ(cli_cpu_list("--cpu", list, cpus, 4), 4);   /* exactly max */
}

int main(void)
{
	RUN(cli_parse_u64_decimal_only);
	RUN(cli_parse_size_suffixes);
	RUN(cli_parse_double_plain);
	RUN(cli_cpu_list_in_order);
	printf("cli parsers: ok\n");
	return 0;
}
