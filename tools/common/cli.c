// SPDX-License-Identifier: MIT
/* The command-line convention every virtq tool follows (cli.h). */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifndef VIRTQ_VERSION
#error "VIRTQ_VERSION must be defined by the build"
#endif

static const char *prog_name = "virtq";

void cli_set_prog(const char *prog)
{
	prog_name = prog;
}

const char *cli_prog(void)
{
	return prog_name;
}

void cli_usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(CLI_EXIT_USAGE);
}

void cli_getopt_error(int c, char **argv)
{
	/* getopt_long leaves the offending word at argv[optind - 1]. */
	const char *word = optind > 0 ? argv[optind - 1] : "?";

	if (c == ':')
		cli_usage_error("%s needs a value", word);
	if (optopt && optopt < 256 && word[0] == '-' && word[1] != '-')
		cli_usage_error("unknown option '-%c' (see --help)", optopt);
	cli_usage_error("unknown option '%s' (see --help)", word);
}

void cli_print_version(void)
{
	printf("%s %s\n", prog_name, VIRTQ_VERSION);
}

bool cli_parse_u64(const char *s, uint64_t *v)
{
	uint64_t n = 0;

	if (!isdigit((unsigned char)*s))
		return false;
	/* Decimal only: "010" is ten, not eight, and "0x10" is refused. */
	for (; isdigit((unsigned char)*s); s++) {
		unsigned d = (unsigned)(*s - '0');

		if (n > (UINT64_MAX - d) / 10)
			return false;
		n = n * 10 + d;
	}
	if (*s)
		return false;
	*v = n;
	return true;
}

bool cli_parse_size(const char *s, uint64_t *v)
{
	static const struct { const char *suffix; unsigned shift; } units[] = {
		{ "", 0 }, { "K", 10 }, { "KiB", 10 }, { "M", 20 },
		{ "MiB", 20 }, { "G", 30 }, { "GiB", 30 },
	};
	char digits[32];
	size_t n = strspn(s, "0123456789");
	uint64_t base;

	if (n == 0 || n >= sizeof(digits))
		return false;
	memcpy(digits, s, n);
	digits[n] = '\0';
	if (!cli_parse_u64(digits, &base))
		return false;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(s + n, units[i].suffix))
			continue;
		if (base > (UINT64_MAX >> units[i].shift))
			return false;
		*v = base << units[i].shift;
		return true;
	}
	return false;
}

bool cli_parse_double(const char *s, double *v)
{
	char *end;

	/* strtod also takes hex floats, "inf" and "nan": not numbers here. */
	if (!isdigit((unsigned char)*s) && *s != '.')
		return false;
	if (strpbrk(s, "xXnN"))
		return false;
	errno = 0;
	*v = strtod(s, &end);
	return !errno && *end == '\0' && isfinite(*v);
}

bool cli_parse_mode(const char *s, unsigned *v)
{
	size_t n = strspn(s, "01234567");

	/* 1 to 4 octal digits ("0660"), nothing else, at most 0777. */
	if (n == 0 || n > 4 || s[n])
		return false;
	*v = (unsigned)strtoul(s, NULL, 8);
	return *v <= 0777;
}

uint64_t cli_u64(const char *opt, const char *val, uint64_t min, uint64_t max)
{
	uint64_t v;

	if (!cli_parse_u64(val, &v) || v < min || v > max)
		cli_usage_error("%s: '%s' is not a decimal number in [%llu, %llu]",
				opt, val, (unsigned long long)min,
				(unsigned long long)max);
	return v;
}

uint64_t cli_size(const char *opt, const char *val, uint64_t min, uint64_t max)
{
	uint64_t v;

	if (!cli_parse_size(val, &v) || v < min || v > max)
		cli_usage_error("%s: '%s' is not a size in [%llu, %llu] bytes "
				"(decimal, with K, M or G)", opt, val,
				(unsigned long long)min,
				(unsigned long long)max);
	return v;
}

double cli_double(const char *opt, const char *val, double min, double max)
{
	double v;

	if (!cli_parse_double(val, &v) || v < min || v > max)
		cli_usage_error("%s: '%s' is not a number in [%g, %g]", opt, val,
				min, max);
	return v;
}

bool cli_onoff(const char *opt, const char *val)
{
	static const char *const words[] = { "off", "on", "no", "yes", "0", "1",
					     NULL };
	unsigned i;

	for (i = 0; words[i]; i++)
		if (!strcmp(val, words[i]))
			return i & 1;
	cli_usage_error("%s: '%s' is not on or off", opt, val);
}

unsigned cli_choice(const char *opt, const char *val, const char *const *words)
{
	char allowed[256] = "";
	unsigned i;

	for (i = 0; words[i]; i++)
		if (!strcmp(val, words[i]))
			return i;
	for (i = 0; words[i]; i++) {
		size_t n = strlen(allowed);

		snprintf(allowed + n, sizeof(allowed) - n, "%s%s",
			 i ? (words[i + 1] ? ", " : " or ") : "", words[i]);
	}
	cli_usage_error("%s: '%s' is not %s", opt, val, allowed);
}

int cli_cpu(const char *opt, const char *val)
{
	long n = sysconf(_SC_NPROCESSORS_CONF);

	if (n < 1)
		n = 1;
	return (int)cli_u64(opt, val, 0, (uint64_t)n - 1);
}

unsigned cli_cpu_list(const char *opt, const char *val, unsigned *cpus, unsigned max)
{
	const char *s = val;
	unsigned n = 0;
	char cpu[16];

	for (;;) {
		size_t len = strcspn(s, ",");

		if (len == 0 || len >= sizeof(cpu))
			cli_usage_error("%s: '%s' is not a comma-separated list "
					"of CPUs (e.g. 0,2)", opt, val);
		if (n == max)
			cli_usage_error("%s: more than %u CPUs", opt, max);
		memcpy(cpu, s, len);
		cpu[len] = '\0';
		cpus[n++] = (unsigned)cli_cpu(opt, cpu);
		if (!s[len])
			return n;
		s += len + 1;
	}
}

unsigned cli_mode(const char *opt, const char *val)
{
	unsigned v;

	if (!cli_parse_mode(val, &v))
		cli_usage_error("%s: '%s' is not a mode in octal from 0 to 0777 "
				"(as chmod takes it, e.g. 0660)", opt, val);
	return v;
}

uint32_t cli_group(const char *opt, const char *val)
{
	const struct group *g = *val ? getgrnam(val) : NULL;
	uint64_t gid;

	if (g)
		return (uint32_t)g->gr_gid;
	/* (gid_t)-1 means "no change" to chown: not a group. */
	if (!cli_parse_u64(val, &gid) || gid >= UINT32_MAX)
		cli_usage_error("%s: '%s' is neither a group name nor a decimal GID "
				"below 4294967295", opt, val);
	return (uint32_t)gid;
}
