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

/* Run one member; its ops/s and placement from its JSON. */
static int run_member(const struct argl *args, double *ops, enum perf_place *pl)
{
	char out[8192];
	size_t len = 0;
	int fd[2], st;
	pid_t pid;
	char *p, *q;
	ssize_t r;

	if (pipe2(fd, O_CLOEXEC) < 0)
		return -errno;
	pid = perf_spawn("virtq-perf ab", "/proc/self/exe", args->v, fd[1]);
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
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -ECHILD;
	p = strstr(out, "\"ops_per_sec\":");
	if (!p)
		return -EPROTO;
	*ops = strtod(p + 14, NULL);
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
"usage: virtq-perf ab [options] -- WORKLOAD [workload options]\n"
"  --a \"ARGS\"          options of configuration A (appended to the workload)\n"
"  --b \"ARGS\"          options of configuration B\n"
"  --pairs N           pairs per workload (20); order alternates A-B, B-A\n"
"  --seconds S         length of each run unless the workload sets\n"
"                      --seconds or --ops (0.5)\n"
"  --same-placement    keep only pairs whose two runs saw the same\n"
"                      placement (near-near or far-far)\n"
"  --json              one JSON object on stdout instead of the table\n"
"  --plot FILE         chart of the change with its interval (gnuplot;\n"
"                      .png, .svg or .txt)\n"
"  --quiet             no progress line\n"
"An option value with commas (except --cpu) makes one workload per value:\n"
"  virtq-perf ab --a \"--used-batch 1\" --b \"--used-batch 64\" -- \\\n"
"      ring --layout split --size 256,512,4096,65536\n");
}

int perf_ab_main(int argc, char **argv)
{
	enum { O_A = 256, O_B, O_PAIRS, O_SEC, O_SAME, O_JSON, O_PLOT, O_QUIET,
	       O_HELP };
	static const struct option lo[] = {
		{ "a", required_argument, 0, O_A },
		{ "b", required_argument, 0, O_B },
		{ "pairs", required_argument, 0, O_PAIRS },
		{ "seconds", required_argument, 0, O_SEC },
		{ "same-placement", no_argument, 0, O_SAME },
		{ "json", no_argument, 0, O_JSON },
		{ "plot", required_argument, 0, O_PLOT },
		{ "quiet", no_argument, 0, O_QUIET },
		{ "help", no_argument, 0, O_HELP },
		{ 0, 0, 0, 0 },
	};
	struct ab_run run = { .a = "", .b = "", .pairs = 20, .seconds = 0.5 };
	const char *plot = NULL;
	bool json = false, quiet = false, progress;
	struct argl work = { 0 }, aa = { 0 }, bb = { 0 };
	struct expansion e = { .n = 0 };
	char cmd[1024], secs[32], bound[96];
	unsigned nw = 1, wi, k, i;
	uint64_t v;
	int c, r, ret = 1;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+", lo, NULL)) != -1) {
		switch (c) {
		case O_A:
			run.a = optarg;
			break;
		case O_B:
			run.b = optarg;
			break;
		case O_PAIRS:
			if (!perf_parse_u64(optarg, &v) || v == 0 || v > 100000)
				goto bad;
			run.pairs = (unsigned)v;
			break;
		case O_SEC:
			if (!perf_parse_double(optarg, &run.seconds) ||
			    !(run.seconds > 0))
				goto bad;
			break;
		case O_SAME:
			run.same_placement = true;
			break;
		case O_JSON:
			json = true;
			break;
		case O_PLOT:
			plot = optarg;
			break;
		case O_QUIET:
			quiet = true;
			break;
		case O_HELP:
			ab_usage(stdout);
			return 0;
		default:
			ab_usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		ab_usage(stderr);
		return 2;
	}
	if (strcmp(argv[optind], "ring") != 0 && strcmp(argv[optind], "net") != 0 &&
	    strcmp(argv[optind], "vsock") != 0) {
		fprintf(stderr, "virtq-perf ab: unknown workload '%s' (known: ring, net, vsock)\n",
			argv[optind]);
		return 2;
	}
	for (i = (unsigned)optind; i < (unsigned)argc; i++)
		if (argl_push(&work, argv[i]) < 0)
			goto out;
	if (argl_split(&aa, run.a) < 0 || argl_split(&bb, run.b) < 0) {
		fprintf(stderr, "virtq-perf ab: --a or --b: a quote left open, or too many words\n");
		goto out;
	}
	argl_join(&work, 0, cmd, sizeof(cmd));
	run.cmd = cmd;
	r = expand_prepare(&work, &e);
	if (r < 0) {
		fprintf(stderr, "virtq-perf ab: too many lists or values\n");
		goto out;
	}
	for (i = 0; i < e.n; i++)
		nw *= e.cnt[i];
	run.nw = nw;
	run.w = calloc(nw, sizeof(*run.w));
	if (!run.w)
		goto out;
	snprintf(secs, sizeof(secs), "%g", run.seconds);
	progress = !quiet && isatty(2);

	for (wi = 0; wi < nw; wi++) {
		struct ab_workload *w = &run.w[wi];
		struct argl m[2];
		double *va, *vb;
		unsigned rem = wi, kept = 0, side;
		size_t ll = 0;

		memset(m, 0, sizeof(m));
		/* this workload's arguments: each list at its value */
		for (side = 0; side < 2; side++) {
			argl_push(&m[side], "virtq-perf");
			for (i = 0; i < work.n; i++)
				argl_push(&m[side], work.v[i]);
		}
		w->label[0] = '\0';
		for (k = e.n; k-- > 0;) {
			unsigned sel = rem % e.cnt[k];

			rem /= e.cnt[k];
			for (side = 0; side < 2; side++) {
				free(m[side].v[e.idx[k] + 1]);
				m[side].v[e.idx[k] + 1] = strdup(e.vals[k][sel]);
			}
		}
		for (k = 0; k < e.n; k++) {
			char name[64];
			const char *val = m[0].v[e.idx[k] + 1];
			const char *eq = strchr(val, '=');

			option_name(&work, e.idx[k], name, sizeof(name));
			ll += (size_t)snprintf(w->label + ll, sizeof(w->label) - ll,
					       "%s%s=%s", k ? " " : "", name,
					       strncmp(val, "--", 2) == 0 && eq ? eq + 1 : val);
			if (ll >= sizeof(w->label))
				break;
		}
		if (!e.n)
			snprintf(w->label, sizeof(w->label), "%s", work.v[0]);
		argl_join(&m[0], 2, w->args, sizeof(w->args));
		for (i = 0; i < aa.n; i++)
			argl_push(&m[0], aa.v[i]);
		for (i = 0; i < bb.n; i++)
			argl_push(&m[1], bb.v[i]);
		for (side = 0; side < 2; side++) {
			if (!has_opt(&m[side], "--seconds") && !has_opt(&m[side], "--ops") &&
			    !has_opt(&m[side], "--bytes") && !has_opt(&m[side], "--iters")) {
				argl_push(&m[side], "--seconds");
				argl_push(&m[side], secs);
			}
			argl_push(&m[side], "--json");
			run_bound(&m[side], bound, sizeof(bound));
			bound_note(&run, bound);
		}

		w->pairs = calloc(run.pairs, sizeof(*w->pairs));
		va = calloc(run.pairs, sizeof(double));
		vb = calloc(run.pairs, sizeof(double));
		if (!w->pairs || !va || !vb)
			goto out;
		for (k = 0; k < run.pairs; k++) {
			struct ab_pair *p = &w->pairs[k];
			enum perf_place pp;

			p->a_first = (k % 2) == 0;
			for (side = 0; side < 2; side++) {
				bool is_a = (side == 0) == p->a_first;

				r = run_member(&m[is_a ? 0 : 1], is_a ? &p->a : &p->b,
					       is_a ? &p->pa : &p->pb);
				if (r < 0) {
					char buf[1024];

					argl_join(&m[is_a ? 0 : 1], 1, buf, sizeof(buf));
					fprintf(stderr, "%svirtq-perf ab: run failed (%s): "
						"virtq-perf %s\n", progress ? "\n" : "",
						strerror(-r), buf);
					goto out;
				}
			}
			w->npairs++;
			pp = perf_place_pair(p->pa, p->pb);
			w->place[pp]++;
			if (run.same_placement && pp != PLACE_NEAR && pp != PLACE_FAR)
				continue;
			va[kept] = p->a;
			vb[kept] = p->b;
			kept++;
			if (progress) {
				char sa[32], sb[32];

				perf_si(sa, sizeof(sa), p->a);
				perf_si(sb, sizeof(sb), p->b);
				fprintf(stderr, "\r\033[Kab: workload %u/%u [%s] pair %u/%u "
					"%s  A %s  B %s  (%+.1f%%)", wi + 1, nw, w->label,
					k + 1, run.pairs, perf_place_name(pp), sa, sb,
					(p->b / p->a - 1) * 100);
			}
		}
		w->kept = kept;
		w->err = perf_ab_compute(va, vb, kept, true, &w->st);
		free(va);
		free(vb);
		if (!quiet) {
			char ch[32];

			snprintf(ch, sizeof(ch), "%+.2f%%", w->st.change * 100);
			fprintf(stderr, "%sab: workload %u/%u [%s] done: change %s, "
				"near/far/mixed %u/%u/%u\n", progress ? "\r\033[K" : "",
				wi + 1, nw, w->label, w->err ? "n/a" : ch,
				w->place[PLACE_NEAR], w->place[PLACE_FAR],
				w->place[PLACE_MIXED]);
		}
		argl_free(&m[0]);
		argl_free(&m[1]);
	}
	if (json)
		perf_ab_json(stdout, &run);
	else
		perf_ab_table(stdout, &run);
	ret = 0;
	if (plot && perf_ab_plot(plot, &run) < 0)
		ret = 1;
out:
	if (run.w)
		for (wi = 0; wi < run.nw; wi++)
			free(run.w[wi].pairs);
	free(run.w);
	expand_free(&e);
	argl_free(&work);
	argl_free(&aa);
	argl_free(&bb);
	return ret;
bad:
	fprintf(stderr, "virtq-perf ab: bad value '%s'\n", optarg);
	return 2;
}
