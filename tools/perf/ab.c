// SPDX-License-Identifier: MIT
/*
 * virtq-perf ab: two configurations of a workload as paired runs.  For each
 * workload (a comma list in an option value expands into one workload per
 * value), N pairs of back-to-back runs of A and B, alternating which runs
 * first.  Each member is this same binary (/proc/self/exe) run with --json;
 * keeping members short and back to back means both see the same vCPU
 * placement, which the members' own probes confirm.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "perf.h"

#define MAX_ARGS 128

struct argl {
	char *v[MAX_ARGS];
	unsigned n;
};

static int argl_push(struct argl *l, const char *s)
{
	if (l->n + 1 >= MAX_ARGS)
		return -E2BIG;
	l->v[l->n++] = strdup(s);
	l->v[l->n] = NULL;
	return l->v[l->n - 1] ? 0 : -ENOMEM;
}

static void argl_free(struct argl *l)
{
	unsigned i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	l->n = 0;
}

/* Split the --a / --b strings on blanks, as a shell would with quotes:
 * '...' and "..." keep their blanks ("--backend 'virtq-net --quiet sink'"
 * is two words), with no escapes.  -EINVAL for a quote left open. */
static int argl_split(struct argl *l, const char *s)
{
	char *w = malloc(strlen(s) + 1);
	size_t k = 0;
	bool in_word = false;
	char quote = 0;
	int r = 0;

	if (!w)
		return -ENOMEM;
	for (; *s && !r; s++) {
		if (quote) {
			if (*s == quote)
				quote = 0;
			else
				w[k++] = *s;
		} else if (*s == '\'' || *s == '"') {
			quote = *s;
			in_word = true;
		} else if (*s == ' ' || *s == '\t' || *s == '\n') {
			if (in_word) {
				w[k] = '\0';
				r = argl_push(l, w);
				k = 0;
				in_word = false;
			}
		} else {
			w[k++] = *s;
			in_word = true;
		}
	}
	if (!r && quote)
		r = -EINVAL;
	if (!r && in_word) {
		w[k] = '\0';
		r = argl_push(l, w);
	}
	free(w);
	return r;
}

static void argl_join(const struct argl *l, unsigned from, char *buf, size_t n)
{
	unsigned i;
	size_t k = 0;

	buf[0] = '\0';
	for (i = from; i < l->n && k < n; i++)
		k += (size_t)snprintf(buf + k, n - k, "%s%s", i > from ? " " : "",
				      l->v[i]);
}

static bool has_opt(const struct argl *l, const char *opt)
{
	size_t n = strlen(opt);
	unsigned i;

	for (i = 0; i < l->n; i++)
		if (strncmp(l->v[i], opt, n) == 0 &&
		    (l->v[i][n] == '\0' || l->v[i][n] == '='))
			return true;
	return false;
}

/* The value of the last --opt V / --opt=V in l (getopt keeps the last),
 * or NULL. */
static const char *opt_value(const struct argl *l, const char *opt)
{
	size_t n = strlen(opt);
	const char *v = NULL;
	unsigned i;

	for (i = 0; i < l->n; i++) {
		if (strncmp(l->v[i], opt, n) != 0)
			continue;
		if (l->v[i][n] == '=')
			v = l->v[i] + n + 1;
		else if (l->v[i][n] == '\0' && i + 1 < l->n)
			v = l->v[i + 1];
	}
	return v;
}

/*
 * What ends a member's run, as each workload reads its options: ring
 * stops at --ops if given, else at --seconds; net at --seconds or --count,
 * whichever comes first; vsock --latency after --iters round trips (it
 * ignores --seconds), other vsock runs at --seconds if given, else after
 * --bytes.  ab's own --seconds is among the arguments when it added it.
 */
static void run_bound(const struct argl *m, char *buf, size_t n)
{
	const char *wl = m->v[1], *v;

	if (!strcmp(wl, "vsock") && has_opt(m, "--latency")) {
		v = opt_value(m, "--iters");
		snprintf(buf, n, "%s round trips", v ? v : "10000");
	} else if (!strcmp(wl, "ring") && (v = opt_value(m, "--ops"))) {
		snprintf(buf, n, "%s ops", v);
	} else if ((v = opt_value(m, "--seconds"))) {
		const char *cnt = strcmp(wl, "net") ? NULL : opt_value(m, "--count");

		if (cnt)
			snprintf(buf, n, "%s s or --count %s", v, cnt);
		else
			snprintf(buf, n, "%s s", v);
	} else if (!strcmp(wl, "vsock")) {
		v = opt_value(m, "--bytes");
		snprintf(buf, n, "%s bytes", v ? v : "64M");
	} else {
		snprintf(buf, n, "the workload's default length");
	}
}

/* The header's "... per run": one bound for every run, or each kind. */
static void bound_note(struct ab_run *run, const char *b)
{
	size_t k = strlen(run->bound), bl = strlen(b);
	const char *p;

	if (!k) {
		snprintf(run->bound, sizeof(run->bound), "%s", b);
		run->bound_same = true;
		return;
	}
	/* already listed? (the list is "x; y; z") */
	for (p = run->bound; p; p = strstr(p, "; ") ? strstr(p, "; ") + 2 : NULL)
		if (!strncmp(p, b, bl) && (p[bl] == '\0' || p[bl] == ';'))
			return;
	run->bound_same = false;
	snprintf(run->bound + k, sizeof(run->bound) - k, "; %s", b);
}

/* Run one member; its metric and placement from its JSON. */
static int run_member(const struct argl *args, const char *exe, const char *metric,
		      double *ops, enum perf_place *pl)
{
	char out[8192], key[80];
	size_t len = 0;
	int fd[2], st;
	pid_t pid;
	char *p, *q;
	ssize_t r;

	if (pipe2(fd, O_CLOEXEC) < 0)
		return -errno;
	pid = perf_spawn("virtq-perf ab", exe ? exe : "/proc/self/exe", args->v, fd[1]);
	close(fd[1]);
	if (pid < 0) {
		close(fd[0]);
		return (int)pid;
	}
	while (len < sizeof(out) - 1 &&
	       (r = read(fd[0], out + len, sizeof(out) - 1 - len)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		len += (size_t)r;
	}
	out[len] = '\0';
	close(fd[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	/* its command line was refused: it said why */
	if (WIFEXITED(st) && WEXITSTATUS(st) == CLI_EXIT_USAGE)
		return -EINVAL;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -ECHILD;
	snprintf(key, sizeof(key), "\"%s\":", metric);
	p = strstr(out, key);
	if (!p)
		return -EPROTO;
	*ops = strtod(p + strlen(key), NULL);
	*pl = PLACE_UNKNOWN;
	p = strstr(out, "\"placement\":\"");
	if (p) {
		p += 13;
		q = strchr(p, '"');
		if (q) {
			*q = '\0';
			*pl = perf_place_parse(p);
		}
	}
	return *ops > 0 ? 0 : -EPROTO;
}

/* The workloads: each value of each comma list (except --cpu, whose
 * value is a pair), all combinations. */
struct expansion {
	unsigned idx[16];       /* which arg holds a list (its value) */
	unsigned cnt[16];
	char *vals[16][32];
	unsigned n;
};

static int expand_prepare(struct argl *w, struct expansion *e)
{
	unsigned i;

	memset(e, 0, sizeof(*e));
	for (i = 1; i < w->n; i++) {
		char *v = w->v[i], *eq = NULL, *save = NULL, *t, *d;
		const char *opt = w->v[i - 1];

		if (strncmp(v, "--", 2) == 0) {
			/* --opt=a,b form */
			eq = strchr(v, '=');
			if (!eq || strncmp(v, "--cpu=", 6) == 0)
				continue;
			v = eq + 1;
		} else if (strncmp(opt, "--", 2) != 0 || strchr(opt, '=') ||
			   strcmp(opt, "--cpu") == 0) {
			continue;
		}
		if (!strchr(v, ','))
			continue;
		if (e->n == 16)
			return -E2BIG;
		e->idx[e->n] = i;
		d = strdup(v);
		if (!d)
			return -ENOMEM;
		for (t = strtok_r(d, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			char buf[256];

			if (e->cnt[e->n] == 32) {
				free(d);
				return -E2BIG;
			}
			if (eq)
				snprintf(buf, sizeof(buf), "%.*s%s",
					 (int)(eq + 1 - w->v[i]), w->v[i], t);
			else
				snprintf(buf, sizeof(buf), "%s", t);
			e->vals[e->n][e->cnt[e->n]++] = strdup(buf);
		}
		free(d);
		e->n++;
	}
	return 0;
}

static void expand_free(struct expansion *e)
{
	unsigned i, k;

	for (i = 0; i < e->n; i++)
		for (k = 0; k < e->cnt[i]; k++)
			free(e->vals[i][k]);
	e->n = 0;
}

static void option_name(const struct argl *w, unsigned i, char *buf, size_t n)
{
	const char *s = w->v[i];
	const char *eq;

	if (strncmp(s, "--", 2) == 0 && (eq = strchr(s, '=')))
		snprintf(buf, n, "%.*s", (int)(eq - s - 2), s + 2);
	else
		snprintf(buf, n, "%s", w->v[i - 1] + 2);
}

static void ab_usage(FILE *f)
{
	fprintf(f,
"usage: virtq-perf ab [options] -- ring|net|vsock [workload options]\n"
"       virtq-perf ab --pairs-file FILE [--metric NAME] [--ratio] [--json] ...\n"
"  --a \"ARGS\"          options of configuration A (appended to the workload)\n"
"  --b \"ARGS\"          options of configuration B\n"
"  --pairs N           pairs per workload, at least 2 (20); order alternates\n"
"                      A-B, B-A; below 6 the interval is wide (a warning)\n"
"  --seconds S         length of each run that sets none of --seconds,\n"
"                      --ops, --bytes or --iters (0.5)\n"
"  --metric NAME       the number of the runs' JSON to compare (ops_per_sec);\n"
"                      one ending in _us or _ns is a time: lower is better\n"
"  --ratio             show B/A and its interval as ratios (0.62x), not\n"
"                      as the change B/A - 1\n"
"  --same-placement    keep only pairs whose two runs saw the same\n"
"                      placement (near-near or far-far)\n"
"  --json              one JSON object on stdout instead of the table\n"
"  --plot FILE         chart of the change with its interval (gnuplot;\n"
"                      .png, .svg or .txt)\n"
"  --a-exe PATH        run A with this virtq-perf (another build: a change's\n"
"                      before and after; default: this one), --b-exe for B\n"
"  --backend-log FILE  the output of the backends the runs start (--backend)\n"
"                      goes to FILE, appended, not into the progress lines\n"
"  --pairs-file FILE   run nothing: the statistics of the pairs in FILE\n"
"                      ('-': stdin), one a line, \"A B [near|far|mixed]\"; a\n"
"                      pair with a rate of 0 (a failed run) is left out;\n"
"                      repeatable: one workload per file\n"
"  --quiet             no header and no progress lines (one per pair, on a\n"
"                      terminal rewritten in place)\n"
"  --help, --version\n"
"An option value with commas (except --cpu) makes one workload per value:\n"
"  virtq-perf ab --a \"--used-batch 1\" --b \"--used-batch 64\" -- \\\n"
"      ring --layout split --size 256,512,4096,65536\n");
}

struct ab_cfg {
	struct ab_run run;
	const char *plot;
	const char *backend_log;        /* --backend-log */
	bool json, quiet;
	bool seconds_given;
	bool seconds_used;      /* a member took ab's --seconds */
	char **work;            /* the workload's words */
	unsigned nwork;
	char cmd[1024];         /* the workload, as one line */
	const char *files[16];  /* --pairs-file: one workload each */
	unsigned nfiles;
};

enum { O_A, O_B, O_PAIRS, O_SEC, O_SAME, O_JSON, O_PLOT, O_QUIET, O_METRIC, O_RATIO,
       O_A_EXE, O_B_EXE, O_BACKEND_LOG, O_PAIRS_FILE };

/* A JSON key the runs print: lower case, digits, '_'. */
static const char *metric_name(const char *name, const char *v)
{
	size_t i, len = strlen(v);

	for (i = 0; i < len; i++)
		if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') || v[i] == '_'))
			break;
	if (!len || i < len || len > 64)
		cli_usage_error("%s: '%s' is not a JSON key of a run (e.g. ops_per_sec, p50_us)",
				name, v);
	return v;
}

static bool metric_is_time(const char *m)
{
	size_t len = strlen(m);

	return len > 3 && (!strcmp(m + len - 3, "_us") || !strcmp(m + len - 3, "_ns"));
}

static void ab_option(void *opts, int c, const char *name, const char *v)
{
	struct ab_cfg *cfg = opts;

	switch (c) {
	case O_A: cfg->run.a = v; break;
	case O_B: cfg->run.b = v; break;
	/* one pair has no spread: no interval */
	case O_PAIRS:
		cfg->run.pairs = (unsigned)cli_u64(name, v, PERF_AB_MIN_PAIRS, 100000);
		break;
	case O_SEC:
		cfg->run.seconds = cli_double(name, v, 1e-3, 3600);
		cfg->seconds_given = true;
		break;
	case O_SAME: cfg->run.same_placement = true; break;
	case O_JSON: cfg->json = true; break;
	case O_PLOT:
		if (!perf_ab_plot_term(v))
			cli_usage_error("%s: '%s' does not end in .png, .svg, .txt or .gp", name, v);
		cfg->plot = v;
		break;
	case O_QUIET: cfg->quiet = true; break;
	case O_METRIC:
		cfg->run.metric = metric_name(name, v);
		cfg->run.lower_better = metric_is_time(v);
		break;
	case O_RATIO: cfg->run.ratio = true; break;
	case O_A_EXE:
	case O_B_EXE:
		if (access(v, X_OK) < 0)
			cli_usage_error("%s: '%s' is not a program we can run: %s", name, v,
					strerror(errno));
		cfg->run.exe[c == O_B_EXE] = v;
		break;
	case O_BACKEND_LOG:
		if (!*v)
			cli_usage_error("%s: needs a file name", name);
		cfg->backend_log = v;
		break;
	case O_PAIRS_FILE:
		if (cfg->nfiles == sizeof(cfg->files) / sizeof(cfg->files[0]))
			cli_usage_error("%s: at most %zu files", name,
					sizeof(cfg->files) / sizeof(cfg->files[0]));
		cfg->files[cfg->nfiles++] = v;
		cfg->run.pairs_read = true;
		break;
	}
}

static void ab_parse(int argc, char **argv, struct ab_cfg *c)
{
	static const struct option lo[] = {
		{ "a", required_argument, 0, O_A },
		{ "b", required_argument, 0, O_B },
		{ "pairs", required_argument, 0, O_PAIRS },
		{ "seconds", required_argument, 0, O_SEC },
		{ "same-placement", no_argument, 0, O_SAME },
		{ "json", no_argument, 0, O_JSON },
		{ "plot", required_argument, 0, O_PLOT },
		{ "quiet", no_argument, 0, O_QUIET },
		{ "metric", required_argument, 0, O_METRIC },
		{ "ratio", no_argument, 0, O_RATIO },
		{ "a-exe", required_argument, 0, O_A_EXE },
		{ "b-exe", required_argument, 0, O_B_EXE },
		{ "backend-log", required_argument, 0, O_BACKEND_LOG },
		{ "pairs-file", required_argument, 0, O_PAIRS_FILE },
		PERF_OPT_HELP, PERF_OPT_VERSION,
		{ 0, 0, 0, 0 },
	};
	static const char *const workloads[] = { "ring", "net", "vsock", NULL };
	/* what only a run has: no use for pairs read from a file */
	static const int run_only[] = { O_A, O_B, O_PAIRS, O_SEC, O_A_EXE, O_B_EXE,
					O_BACKEND_LOG };
	uint64_t given;
	unsigned i;

	/* "+": the workload's options are its own, not ours */
	given = perf_opts_parse(argc, argv, "ab", "+:", lo, O_PAIRS_FILE + 1, ab_usage,
				ab_option, c);
	if (c->nfiles) {
		for (i = 0; i < sizeof(run_only) / sizeof(run_only[0]); i++)
			if (given & (1ull << run_only[i]))
				cli_usage_error("--pairs-file: --%s is for pairs ab runs, "
						"not pairs it reads", lo[run_only[i]].name);
		if (optind < argc)
			cli_usage_error("--pairs-file: the pairs are read, not run: no "
					"workload ('%s')", argv[optind]);
		return;
	}
	if (optind >= argc)
		cli_usage_error("a workload is needed after the options: ring, net "
				"or vsock (see --help)");
	cli_choice("workload", argv[optind], workloads);
	c->work = argv + optind;
	c->nwork = (unsigned)(argc - optind);
}

/* Does a member's command line set its own length?  (vsock --latency
 * runs --iters round trips, 10000 unless given, and takes no --seconds.) */
static bool run_sets_length(const struct argl *m)
{
	return has_opt(m, "--seconds") || has_opt(m, "--ops") || has_opt(m, "--bytes") ||
	       has_opt(m, "--iters") || (!strcmp(m->v[1], "vsock") && has_opt(m, "--latency"));
}

/* Workload wi's two members: the workload's words with each list at its
 * value, then A's or B's options, a run length unless one is set, and
 * --json.  Its label and arguments go into w. */
static int ab_members(struct ab_cfg *c, const struct argl *work,
		      const struct expansion *e, const struct argl ab[2],
		      unsigned wi, struct argl m[2])
{
	struct ab_workload *w = &c->run.w[wi];
	unsigned rem = wi, k, i, side;
	char secs[32], bound[96];
	size_t ll = 0;
	int r = 0;

	snprintf(secs, sizeof(secs), "%g", c->run.seconds);
	for (side = 0; side < 2; side++) {
		r |= argl_push(&m[side], "virtq-perf");
		for (i = 0; i < work->n; i++)
			r |= argl_push(&m[side], work->v[i]);
	}
	for (k = e->n; k-- > 0;) {
		unsigned sel = rem % e->cnt[k];

		rem /= e->cnt[k];
		for (side = 0; side < 2; side++) {
			free(m[side].v[e->idx[k] + 1]);
			m[side].v[e->idx[k] + 1] = strdup(e->vals[k][sel]);
			if (!m[side].v[e->idx[k] + 1])
				r = -ENOMEM;
		}
	}
	if (r < 0)
		return r;
	for (k = 0; k < e->n && ll < sizeof(w->label); k++) {
		char name[64];
		const char *val = m[0].v[e->idx[k] + 1];
		const char *eq = strchr(val, '=');

		option_name(work, e->idx[k], name, sizeof(name));
		ll += (size_t)snprintf(w->label + ll, sizeof(w->label) - ll,
				       "%s%s=%s", k ? " " : "", name,
				       strncmp(val, "--", 2) == 0 && eq ? eq + 1 : val);
	}
	if (!e->n)
		snprintf(w->label, sizeof(w->label), "%s", work->v[0]);
	argl_join(&m[0], 2, w->args, sizeof(w->args));
	for (side = 0; side < 2; side++) {
		for (i = 0; i < ab[side].n; i++)
			r |= argl_push(&m[side], ab[side].v[i]);
		if (!run_sets_length(&m[side])) {
			r |= argl_push(&m[side], "--seconds");
			r |= argl_push(&m[side], secs);
			c->seconds_used = true;
		}
		r |= argl_push(&m[side], "--json");
		run_bound(&m[side], bound, sizeof(bound));
		bound_note(&c->run, bound);
	}
	return r < 0 ? -E2BIG : 0;
}

/* Every workload's members, before anything runs: a bad --a, --b or list
 * is found at once, not after an hour of runs. */
static struct argl (*ab_plan(struct ab_cfg *c))[2]
{
	struct argl work = { .n = 0 }, ab[2] = { { .n = 0 }, { .n = 0 } };
	struct argl (*m)[2] = NULL;
	struct expansion e = { .n = 0 };
	unsigned i, nw = 1;
	int r = 0;

	for (i = 0; i < c->nwork; i++)
		r |= argl_push(&work, c->work[i]);
	if (r < 0)
		cli_usage_error("the workload has more than %u words", MAX_ARGS - 8);
	if (argl_split(&ab[0], c->run.a) < 0)
		cli_usage_error("--a: a quote left open, or too many words");
	if (argl_split(&ab[1], c->run.b) < 0)
		cli_usage_error("--b: a quote left open, or too many words");
	argl_join(&work, 0, c->cmd, sizeof(c->cmd));
	c->run.cmd = c->cmd;
	if (expand_prepare(&work, &e) < 0)
		cli_usage_error("the workload has more than 16 lists or 32 values in one");
	for (i = 0; i < e.n; i++)
		nw *= e.cnt[i];
	c->run.nw = nw;
	c->run.w = calloc(nw, sizeof(*c->run.w));
	m = calloc(nw, sizeof(*m));
	for (i = 0; c->run.w && m && i < nw && r == 0; i++)
		r = ab_members(c, &work, &e, ab, i, m[i]);
	if (!c->run.w || !m || r < 0) {
		fprintf(stderr, "virtq-perf ab: %s\n", strerror(r < 0 ? -r : ENOMEM));
		exit(CLI_EXIT_RUNTIME);
	}
	if (c->seconds_given && !c->seconds_used)
		cli_usage_error("--seconds: every run sets its own length (%s)", c->run.bound);
	expand_free(&e);
	argl_free(&work);
	argl_free(&ab[0]);
	argl_free(&ab[1]);
	return m;
}

/* Progress on stderr: none (--quiet), a line per pair, or on a terminal
 * one line rewritten in place. */
enum ab_progress { AB_QUIET, AB_LINES, AB_TTY };

static void ab_progress(const struct ab_run *run, unsigned wi, unsigned k,
			const struct ab_pair *p, enum perf_place pp, enum ab_progress how)
{
	char sa[32], sb[32];

	perf_si(sa, sizeof(sa), p->a);
	perf_si(sb, sizeof(sb), p->b);
	fprintf(stderr, "%sab: workload %u/%u [%s] pair %u/%u %s  A %s  B %s  (%+.1f%%)%s",
		how == AB_TTY ? "\r\033[K" : "", wi + 1, run->nw, run->w[wi].label,
		k + 1, run->pairs, perf_place_name(pp), sa, sb, (p->b / p->a - 1) * 100,
		how == AB_TTY ? "" : "\n");
}

/* Run workload wi's pairs, alternating which member goes first, and its
 * statistics over the pairs kept.  0, or the failing run's -errno
 * (-EINVAL: its command line was refused, and it said why). */
static int ab_measure(struct ab_run *run, unsigned wi, struct argl m[2],
		      enum ab_progress progress)
{
	struct ab_workload *w = &run->w[wi];
	double *va = calloc(run->pairs, sizeof(double));
	double *vb = calloc(run->pairs, sizeof(double));
	unsigned k, side;
	int r = 0;

	w->pairs = calloc(run->pairs, sizeof(*w->pairs));
	if (!w->pairs || !va || !vb)
		r = -ENOMEM;
	for (k = 0; k < run->pairs && r == 0; k++) {
		struct ab_pair *p = &w->pairs[k];
		enum perf_place pp;

		p->a_first = (k % 2) == 0;
		for (side = 0; side < 2 && r == 0; side++) {
			bool is_a = (side == 0) == p->a_first;

			r = run_member(&m[is_a ? 0 : 1], run->exe[is_a ? 0 : 1], run->metric,
				       is_a ? &p->a : &p->b, is_a ? &p->pa : &p->pb);
			if (r < 0 && r != -EINVAL) {
				char buf[1024];

				argl_join(&m[is_a ? 0 : 1], 1, buf, sizeof(buf));
				fprintf(stderr, "%svirtq-perf ab: run failed (%s): virtq-perf %s\n",
					progress == AB_TTY ? "\n" : "", strerror(-r), buf);
			}
		}
		if (r < 0)
			break;
		w->npairs++;
		pp = perf_place_pair(p->pa, p->pb);
		w->place[pp]++;
		if (run->same_placement && pp != PLACE_NEAR && pp != PLACE_FAR)
			continue;
		va[w->kept] = p->a;
		vb[w->kept] = p->b;
		w->kept++;
		if (progress != AB_QUIET)
			ab_progress(run, wi, k, p, pp, progress);
	}
	if (r == 0)
		w->err = perf_ab_compute(va, vb, w->kept, !run->lower_better, &w->st);
	free(va);
	free(vb);
	return r;
}

static void ab_done_line(const struct ab_run *run, unsigned wi, enum ab_progress progress)
{
	const struct ab_workload *w = &run->w[wi];
	char ch[32], pl[48];

	snprintf(ch, sizeof(ch), "%+.2f%%", w->st.change * 100);
	fprintf(stderr, "%sab: workload %u/%u [%s] done: change %s, near/far/mixed %s\n",
		progress == AB_TTY ? "\r\033[K" : "", wi + 1, run->nw, w->label,
		w->err ? "n/a" : ch, perf_place_counts(pl, sizeof(pl), w->place));
}

/* One line when --same-placement left a workload fewer pairs than the
 * statistics want (too few --pairs were warned about before the runs). */
static void ab_warn_kept(const struct ab_run *run)
{
	unsigned i, few = 0, least = run->pairs;

	for (i = 0; i < run->nw; i++) {
		if (run->w[i].kept < PERF_AB_FEW_PAIRS)
			few++;
		if (run->w[i].kept < least)
			least = run->w[i].kept;
	}
	if (few && run->pairs >= PERF_AB_FEW_PAIRS)
		fprintf(stderr, "virtq-perf ab: warning: --same-placement kept fewer "
			"than %u pairs in %u of %u workloads (fewest %u): their "
			"intervals are wide or missing\n", PERF_AB_FEW_PAIRS, few,
			run->nw, least);
}

/* One line of a pairs file: "A B [PLACE]".  0, or -1 if it is not one. */
static int pair_parse(char *line, struct ab_pair *p)
{
	char *end, *w;

	p->a = strtod(line, &end);
	if (end == line)
		return -1;
	line = end;
	p->b = strtod(line, &end);
	if (end == line || !isfinite(p->a) || !isfinite(p->b) || p->a < 0 || p->b < 0)
		return -1;
	p->pa = PLACE_UNKNOWN;
	w = strtok(end, " \t\r\n");
	if (w) {
		p->pa = perf_place_parse(w);
		if (p->pa == PLACE_UNKNOWN && strcmp(w, "unknown"))
			return -1;
		if (strtok(NULL, " \t\r\n"))
			return -1;
	}
	p->pb = p->pa;          /* the pair's label: both members' */
	return 0;
}

/*
 * One --pairs-file: the pairs of one workload that something else ran (a
 * script driving DPDK's testpmd), into w.  Blank lines and '#' lines are
 * skipped; a pair with a rate of 0, a failed run, is left out and counted.
 * 0 (w->npairs may be 0: said), or -1 said in one line.
 */
static int ab_read_pairs(const char *path, struct ab_workload *w)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
	unsigned cap = 0, lineno = 0, zero = 0;
	char line[512];
	int r = 0;

	if (!f) {
		fprintf(stderr, "virtq-perf ab: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (r == 0 && fgets(line, sizeof(line), f)) {
		struct ab_pair p = { .a_first = false };
		char *s = line + strspn(line, " \t");

		lineno++;
		if (*s == '#' || *s == '\n' || *s == '\0')
			continue;
		if (pair_parse(s, &p) < 0) {
			fprintf(stderr, "virtq-perf ab: %s:%u: not \"A B [near|far|mixed]\" "
				"(two rates, not negative)\n", path, lineno);
			r = -1;
		} else if (!(p.a > 0) || !(p.b > 0)) {
			zero++;
		} else if (w->npairs == cap) {
			void *n = realloc(w->pairs, (cap = cap ? 2 * cap : 64) * sizeof(p));

			if (!n) {
				fprintf(stderr, "virtq-perf ab: %s\n", strerror(ENOMEM));
				r = -1;
			}
			w->pairs = n ? n : w->pairs;
		}
		if (r == 0 && p.a > 0 && p.b > 0)
			w->pairs[w->npairs++] = p;
	}
	if (r == 0 && ferror(f)) {
		fprintf(stderr, "virtq-perf ab: %s: %s\n", path, strerror(errno));
		r = -1;
	}
	if (f != stdin)
		fclose(f);
	if (r == 0 && zero)
		fprintf(stderr, "virtq-perf ab: %s: %s%u pair%s with a rate of 0 (a failed "
			"run) left out\n", path, w->npairs ? "" : "no pairs: ", zero,
			zero == 1 ? "" : "s");
	else if (r == 0 && !w->npairs)
		fprintf(stderr, "virtq-perf ab: %s: no pairs\n", path);
	return r;
}

/* The statistics of --pairs-file's pairs, one workload per file, printed
 * as ab prints its own.  Exit 1 if a file cannot be read or none has a
 * pair. */
static int ab_pairs_files(struct ab_cfg *c)
{
	struct ab_run *run = &c->run;
	unsigned i, k, with_pairs = 0;
	char msg[160];
	int ret = 0;

	run->nw = c->nfiles;
	run->w = calloc(c->nfiles, sizeof(*run->w));
	run->cmd = "pairs read (--pairs-file)";
	run->a = "the first column";
	run->b = "the second column";
	if (!run->w) {
		fprintf(stderr, "virtq-perf ab: %s\n", strerror(ENOMEM));
		return CLI_EXIT_RUNTIME;
	}
	if (c->plot && perf_ab_plot_ready(c->plot) < 0)
		ret = CLI_EXIT_RUNTIME;
	for (i = 0; i < c->nfiles && ret == 0; i++) {
		struct ab_workload *w = &run->w[i];
		const char *path = c->files[i], *base = strrchr(path, '/');
		double *va, *vb;

		snprintf(w->label, sizeof(w->label), "%s",
			 strcmp(path, "-") ? base ? base + 1 : path : "stdin");
		snprintf(w->args, sizeof(w->args), "%s", path);
		if (ab_read_pairs(path, w) < 0) {
			ret = CLI_EXIT_RUNTIME;
			break;
		}
		va = calloc(w->npairs + 1, sizeof(double));
		vb = calloc(w->npairs + 1, sizeof(double));
		for (k = 0; va && vb && k < w->npairs; k++) {
			enum perf_place pp = perf_place_pair(w->pairs[k].pa, w->pairs[k].pb);

			w->place[pp]++;
			if (run->same_placement && pp != PLACE_NEAR && pp != PLACE_FAR)
				continue;
			va[w->kept] = w->pairs[k].a;
			vb[w->kept] = w->pairs[k].b;
			w->kept++;
		}
		if (!va || !vb) {
			fprintf(stderr, "virtq-perf ab: %s\n", strerror(ENOMEM));
			ret = CLI_EXIT_RUNTIME;
		}
		w->err = ret ? -1 : perf_ab_compute(va, vb, w->kept, !run->lower_better, &w->st);
		if (ret == 0 && w->npairs &&
		    perf_ab_pairs_check(w->kept, msg, sizeof(msg)))
			fprintf(stderr, "virtq-perf ab: warning: %s: %s\n", w->label, msg);
		with_pairs += w->npairs > 0;
		free(va);
		free(vb);
	}
	if (ret == 0 && !with_pairs)
		ret = CLI_EXIT_RUNTIME;
	if (ret == 0) {
		if (c->json)
			perf_ab_json(stdout, run);
		else
			perf_ab_table(stdout, run);
		fflush(stdout);
		if (c->plot && perf_ab_plot(c->plot, run) < 0)
			ret = CLI_EXIT_RUNTIME;
	}
	for (i = 0; i < c->nfiles; i++)
		free(run->w[i].pairs);
	free(run->w);
	return ret;
}

/* Before the first run: what will run, for how long, and where the
 * backends' output goes. */
static void ab_header(const struct ab_cfg *c)
{
	const struct ab_run *r = &c->run;
	unsigned runs = 2 * r->nw * r->pairs;
	char *end;
	double secs = strtod(r->bound, &end);

	fprintf(stderr, "virtq-perf ab: %u workload%s x %u pairs = %u runs, each until %s",
		r->nw, r->nw == 1 ? "" : "s", r->pairs, runs, r->bound);
	/* a time per run: the whole takes that much and each run's start */
	if (r->bound_same && end != r->bound && !strcmp(end, " s"))
		fprintf(stderr, "; at least %.3g s in all", runs * secs);
	fprintf(stderr, "\n");
	if (c->backend_log)
		fprintf(stderr, "virtq-perf ab: the backends' output: %s\n", c->backend_log);
}

int perf_ab_main(int argc, char **argv)
{
	struct ab_cfg c = { .run = { .a = "", .b = "", .pairs = 20, .seconds = 0.5,
				     .metric = "ops_per_sec" } };
	struct argl (*m)[2];
	char msg[160];
	unsigned wi;
	enum ab_progress progress;
	int r = 0, ret;

	ab_parse(argc, argv, &c);
	if (c.nfiles)
		return ab_pairs_files(&c);
	/* before an hour of runs, not after */
	if (c.plot && perf_ab_plot_ready(c.plot) < 0)
		return CLI_EXIT_RUNTIME;
	m = ab_plan(&c);
	if (perf_ab_pairs_check(c.run.pairs, msg, sizeof(msg)) > 0)
		fprintf(stderr, "virtq-perf ab: warning: %s\n", msg);
	progress = c.quiet ? AB_QUIET : isatty(2) ? AB_TTY : AB_LINES;
	if (c.backend_log && setenv(PERF_BACKEND_LOG_ENV, c.backend_log, 1) < 0) {
		fprintf(stderr, "virtq-perf ab: --backend-log: %s\n", strerror(errno));
		return CLI_EXIT_RUNTIME;
	}
	if (!c.quiet)
		ab_header(&c);
	for (wi = 0; wi < c.run.nw && r == 0; wi++) {
		r = ab_measure(&c.run, wi, m[wi], progress);
		if (r == 0 && !c.quiet)
			ab_done_line(&c.run, wi, progress);
	}
	ret = r == -EINVAL ? CLI_EXIT_USAGE : r < 0 ? CLI_EXIT_RUNTIME : 0;
	if (r == 0) {
		ab_warn_kept(&c.run);
		if (c.json)
			perf_ab_json(stdout, &c.run);
		else
			perf_ab_table(stdout, &c.run);
		fflush(stdout);
		if (c.plot && perf_ab_plot(c.plot, &c.run) < 0)
			ret = CLI_EXIT_RUNTIME;
	}
	for (wi = 0; wi < c.run.nw; wi++) {
		free(c.run.w[wi].pairs);
		argl_free(&m[wi][0]);
		argl_free(&m[wi][1]);
	}
	free(c.run.w);
	free(m);
	return ret;
}
