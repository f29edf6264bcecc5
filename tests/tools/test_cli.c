// SPDX-License-Identifier: MIT
/* The command-line convention's parsers (tools/common/cli.h): decimal only,
 * sizes with K/M/G, no hex, octal, sign, inf or nan. */
#include <stdint.h>
#include <stdio.h>

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

int main(void)
{
	RUN(cli_parse_u64_decimal_only);
	RUN(cli_parse_size_suffixes);
	RUN(cli_parse_double_plain);
	printf("cli parsers: ok\n");
	return 0;
}
