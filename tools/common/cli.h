/* SPDX-License-Identifier: MIT */
/*
 * One convention for every virtq command line (virtq-net, virtq-vsock and
 * every virtq-perf workload):
 *
 *  - an error is one line on stderr, "PROG: --option: what is allowed",
 *    and the tool exits 2 for a bad command line, 1 for a runtime failure;
 *  - numbers are decimal (no 0x, no leading-zero octal, no sign), and a
 *    size may end in K, M or G (KiB, MiB, GiB);
 *  - an option that has no effect in the chosen mode, or conflicts with
 *    another, is refused, not ignored;
 *  - --help prints the usage on stdout and exits 0; --version prints
 *    "PROG VERSION" and exits 0.
 *
 * The parsers below exit(CLI_EXIT_USAGE) with that one line on a bad
 * value, so a tool's option switch stays one line per option.  Compiled
 * into each tool; not part of libvirtq.
 */
#ifndef VIRTQ_TOOLS_CLI_H
#define VIRTQ_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>

#define CLI_EXIT_RUNTIME 1
#define CLI_EXIT_USAGE 2

/* The name every message starts with ("virtq-net", "virtq-perf net").
 * The string must outlive the program's use of it. */
void cli_set_prog(const char *prog);
const char *cli_prog(void);

/* "PROG: <fmt>" as one line on stderr, then exit(CLI_EXIT_USAGE). */
_Noreturn void cli_usage_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* getopt_long's '?' or ':' (use an optstring starting with ':' so that a
 * missing value is told apart): one line naming the option, exit 2. */
_Noreturn void cli_getopt_error(int c, char **argv);

/* Print "PROG VERSION" on stdout. */
void cli_print_version(void);

/* A decimal integer in [min, max]. */
uint64_t cli_u64(const char *opt, const char *val, uint64_t min, uint64_t max);

/* A size in bytes in [min, max]: decimal, optionally followed by K, M or G
 * (powers of 1024; "KiB", "MiB", "GiB" are accepted too). */
uint64_t cli_size(const char *opt, const char *val, uint64_t min, uint64_t max);

/* A decimal fraction in [min, max] ("0.5", "2", "1e-3"; no hex, inf, nan). */
double cli_double(const char *opt, const char *val, double min, double max);

/* on|off (also yes|no, 1|0). */
bool cli_onoff(const char *opt, const char *val);

/* One of the NULL-terminated words: its index. */
unsigned cli_choice(const char *opt, const char *val, const char *const *words);

/* A CPU number this machine has (0 .. CPUs configured - 1). */
int cli_cpu(const char *opt, const char *val);

/* A comma-separated list of such CPUs ("0,2,5"), at most max: how many. */
unsigned cli_cpu_list(const char *opt, const char *val, unsigned *cpus, unsigned max);

/* Permission bits in octal, as chmod(1) takes them ("660", "0660"), at
 * most 0777: the one exception to "decimal only", since modes are written
 * in octal everywhere else. */
unsigned cli_mode(const char *opt, const char *val);

/* A group by name, or by decimal GID when no group has that name (as
 * chown(1) takes it). */
uint32_t cli_group(const char *opt, const char *val);

/* The pure parsers under the ones above, for callers that must not exit
 * (and for tests): true with *v set, or false. */
bool cli_parse_u64(const char *s, uint64_t *v);
bool cli_parse_size(const char *s, uint64_t *v);
bool cli_parse_double(const char *s, double *v);
bool cli_parse_mode(const char *s, unsigned *v);

#endif
