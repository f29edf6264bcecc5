// SPDX-License-Identifier: MIT
/* virtq-perf output: the ring report, its JSON, the A/B table, the A/B
 * JSON, and the A/B chart through gnuplot. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf.h"

static double per_op(uint64_t v, uint64_t ops)
{
	return ops ? (double)v / (double)ops : 0;
}

void perf_ring_report(FILE *f, const struct ring_opts *o,
		      const struct ring_result *r)
{
	char ops[32];

	perf_si(ops, sizeof(ops), r->ops_per_sec);
	fprintf(f, "ring layout=%s in_order=%s event_idx=%s used_batch=%u "
		"burst=%u busy_poll=%lluus queue_size=%u size=%u dir=%s cpu=%d,%d\n",
		o->packed ? "packed" : "split", o->in_order ? "on" : "off",
		o->event_idx ? "on" : "off", o->used_batch, o->burst,
		(unsigned long long)o->busy_poll_us, o->queue_size, o->size,
		o->rx ? "rx" : "tx", o->cpu[0], o->cpu[1]);
	fprintf(f, "  %s ops/s  (%llu ops in %.3f s)\n", ops,
		(unsigned long long)r->ops, r->elapsed);
	fprintf(f, "  per op: kicks %.4f  calls %.4f  wakeups drv %.4f dev %.4f\n",
		per_op(r->drv.kicks_sent, r->ops), per_op(r->dev.calls_sent, r->ops),
		per_op(r->drv.wakeups, r->ops), per_op(r->dev.wakeups, r->ops));
	fprintf(f, "  busy poll: drv hits %llu misses %llu, dev hits %llu misses %llu\n",
		(unsigned long long)r->drv.bp_hits, (unsigned long long)r->drv.bp_misses,
		(unsigned long long)r->dev.bp_hits, (unsigned long long)r->dev.bp_misses);
	if (isnan(r->c2c_before) || isnan(r->c2c_after))
		fprintf(f, "  placement: not probed\n");
	else
		fprintf(f, "  placement: %s (c2c %.1f ns before, %.1f ns after; "
			"near < %.0f ns)\n", perf_place_name(r->place),
			r->c2c_before, r->c2c_after, PERF_NEAR_NS);
}

static void json_counters(FILE *f, const struct vq_rt_counters *c)
{
	fprintf(f, "{\"packets\":%llu,\"bytes\":%llu,\"kicks_sent\":%llu,"
		"\"kicks_recv\":%llu,\"calls_sent\":%llu,\"calls_recv\":%llu,"
		"\"wakeups\":%llu,\"bp_hits\":%llu,\"bp_misses\":%llu}",
		(unsigned long long)c->packets, (unsigned long long)c->bytes,
		(unsigned long long)c->kicks_sent, (unsigned long long)c->kicks_recv,
		(unsigned long long)c->calls_sent, (unsigned long long)c->calls_recv,
		(unsigned long long)c->wakeups, (unsigned long long)c->bp_hits,
		(unsigned long long)c->bp_misses);
}

static void json_num(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, "%.17g", v);
	else
		fputs("null", f);
}

void perf_ring_json(FILE *f, const struct ring_opts *o,
		    const struct ring_result *r)
{
	fprintf(f, "{\"workload\":\"ring\",\"layout\":\"%s\",\"in_order\":%s,"
		"\"event_idx\":%s,\"used_batch\":%u,\"burst\":%u,"
		"\"busy_poll_us\":%llu,\"queue_size\":%u,\"size\":%u,"
		"\"dir\":\"%s\",\"cpu\":[%d,%d],",
		o->packed ? "packed" : "split", o->in_order ? "true" : "false",
		o->event_idx ? "true" : "false", o->used_batch, o->burst,
		(unsigned long long)o->busy_poll_us, o->queue_size, o->size,
		o->rx ? "rx" : "tx", o->cpu[0], o->cpu[1]);
	fprintf(f, "\"ops\":%llu,\"elapsed\":", (unsigned long long)r->ops);
	json_num(f, r->elapsed);
	fputs(",\"ops_per_sec\":", f);
	json_num(f, r->ops_per_sec);
	fprintf(f, ",\"per_op\":{\"kicks\":%.6g,\"calls\":%.6g,"
		"\"drv_wakeups\":%.6g,\"dev_wakeups\":%.6g},",
		per_op(r->drv.kicks_sent, r->ops), per_op(r->dev.calls_sent, r->ops),
		per_op(r->drv.wakeups, r->ops), per_op(r->dev.wakeups, r->ops));
	fputs("\"driver\":", f);
	json_counters(f, &r->drv);
	fputs(",\"device\":", f);
	json_counters(f, &r->dev);
	fputs(",\"c2c_ns_before\":", f);
	json_num(f, r->c2c_before);
	fputs(",\"c2c_ns_after\":", f);
	json_num(f, r->c2c_after);
	fprintf(f, ",\"placement\":\"%s\"}\n", perf_place_name(r->place));
}

static void pct(char *buf, size_t n, double v)
{
	if (isnan(v))
		snprintf(buf, n, "n/a");
	else
		snprintf(buf, n, "%+.2f%%", v * 100);
}

/* The change as a percentage, or with --ratio as B/A ("0.620x"). */
static void change_str(char *buf, size_t n, double v, bool ratio)
{
	if (isnan(v))
		snprintf(buf, n, "n/a");
	else if (ratio)
		snprintf(buf, n, "%.3fx", 1 + v);
	else
		pct(buf, n, v);
}

void perf_ab_table(FILE *f, const struct ab_run *r)
{
	unsigned i, first_a = (r->pairs + 1) / 2;
	bool ops = !strcmp(r->metric, "ops_per_sec");
	char ha[80], hb[80];

	if (r->pairs_read) {
		fprintf(f, "virtq-perf ab: pairs read from");
		for (i = 0; i < r->nw; i++)
			fprintf(f, "%s %s (%u)", i ? "," : "", r->w[i].args, r->w[i].npairs);
		fprintf(f, " (not run by ab: their order and placement are the file's)\n");
	} else {
		/* Say what really ends a run: ab's --seconds only bounds
		 * members that set no length of their own. */
		fprintf(f, "virtq-perf ab: %u pairs per workload, alternating order "
			"(%u A-first, %u B-first), %s%s%s\n  workload: %s\n",
			r->pairs, first_a, r->pairs - first_a,
			r->bound_same ? "" : "runs end at ", r->bound,
			r->bound_same ? " per run" : "", r->cmd);
	}
	for (unsigned s = 0; s < 2; s++)
		fprintf(f, "  %c: %s%s%s%s\n", "AB"[s], s ? r->b : r->a,
			r->exe[s] ? "  (run by " : "", r->exe[s] ? r->exe[s] : "",
			r->exe[s] ? ")" : "");
	if (ops)
		fprintf(f, "  metric: operations/s (higher is better); ");
	else
		fprintf(f, "  metric: %s (%s is better); ", r->metric,
			r->lower_better ? "lower" : "higher");
	fprintf(f, "%s of the geometric means;\n  95%% CI: Student t (n - 1 degrees of "
		"freedom) of the mean paired log(B/A)%s\n\n",
		r->ratio ? "ratio = B/A" : "change = B/A - 1",
		r->same_placement ? ";\n  only pairs whose members saw the same "
		"placement (near-near or far-far)" : "");
	snprintf(ha, sizeof(ha), "A %s", ops ? "ops/s" : r->metric);
	snprintf(hb, sizeof(hb), "B %s", ops ? "ops/s" : r->metric);
	fprintf(f, "  %-22s %10s %10s %10s %26s %7s  %s\n", "workload", ha, hb,
		r->ratio ? "B/A" : "change", "95% CI", r->lower_better ? "B lower" : "faster",
		"near/far/mixed");
	for (i = 0; i < r->nw; i++) {
		const struct ab_workload *w = &r->w[i];
		char a[32], b[32], ch[32], lo[32], hi[32], ci[80], fa[32], pl[48];

		if (w->err) {
			fprintf(f, "  %-22s %10s %10s %10s %26s %4u/%-3u %s\n",
				w->label, "-", "-", "-", "(no pairs)", 0, 0,
				perf_place_counts(pl, sizeof(pl), w->place));
			continue;
		}
		perf_si(a, sizeof(a), w->st.gmean_a);
		perf_si(b, sizeof(b), w->st.gmean_b);
		change_str(ch, sizeof(ch), w->st.change, r->ratio);
		change_str(lo, sizeof(lo), w->st.ci_lo, r->ratio);
		change_str(hi, sizeof(hi), w->st.ci_hi, r->ratio);
		snprintf(ci, sizeof(ci), "[%s, %s]", lo, hi);
		snprintf(fa, sizeof(fa), "%u/%u", w->st.faster, w->st.n);
		fprintf(f, "  %-22s %10s %10s %10s %26s %7s  %s\n", w->label,
			a, b, ch, ci, fa, perf_place_counts(pl, sizeof(pl), w->place));
	}
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

void perf_ab_json(FILE *f, const struct ab_run *r)
{
	unsigned i, k;

	fputs("{\"tool\":\"virtq-perf ab\",\"workload\":", f);
	if (r->pairs_read)
		fputs("null", f);
	else
		json_str(f, r->cmd);
	fputs(",\"a\":", f);
	json_str(f, r->a);
	fputs(",\"b\":", f);
	json_str(f, r->b);
	fputs(",\"pairs_file\":", f);
	for (i = 0; r->pairs_read && i < r->nw; i++) {
		fputs(i ? "," : "[", f);
		json_str(f, r->w[i].args);
	}
	fputs(r->pairs_read ? "]" : "null", f);
	if (r->pairs_read) {
		fputs(",\"pairs\":null,\"seconds\":null,\"run_bound\":null", f);
	} else {
		fprintf(f, ",\"pairs\":%u,\"seconds\":%g,\"run_bound\":", r->pairs,
			r->seconds);
		json_str(f, r->bound);
	}
	fprintf(f, ",\"same_placement\":%s,\"metric\":", r->same_placement ? "true" : "false");
	json_str(f, r->metric);
	fprintf(f, ",\"lower_is_better\":%s,\"results\":[", r->lower_better ? "true" : "false");
	for (i = 0; i < r->nw; i++) {
		const struct ab_workload *w = &r->w[i];

		fputs(i ? ",{\"label\":" : "{\"label\":", f);
		json_str(f, w->label);
		fputs(",\"args\":", f);
		json_str(f, w->args);
		fprintf(f, ",\"n\":%u,\"gmean_a\":", w->err ? 0 : w->st.n);
		json_num(f, w->err ? NAN : w->st.gmean_a);
		fputs(",\"gmean_b\":", f);
		json_num(f, w->err ? NAN : w->st.gmean_b);
		fputs(",\"change\":", f);
		json_num(f, w->err ? NAN : w->st.change);
		fputs(",\"ci95\":[", f);
		json_num(f, w->err ? NAN : w->st.ci_lo);
		fputc(',', f);
		json_num(f, w->err ? NAN : w->st.ci_hi);
		fprintf(f, "],\"few_pairs\":%s,\"faster\":%u,\"placement\":{\"near\":%u,\"far\":%u,"
			"\"mixed\":%u,\"unknown\":%u},\"runs\":[",
			w->err || w->st.few_pairs ? "true" : "false",
			w->err ? 0 : w->st.faster, w->place[PLACE_NEAR],
			w->place[PLACE_FAR], w->place[PLACE_MIXED],
			w->place[PLACE_UNKNOWN]);
		for (k = 0; k < w->npairs; k++) {
			const struct ab_pair *p = &w->pairs[k];

			fprintf(f, "%s{\"order\":%s,\"a\":", k ? "," : "",
				r->pairs_read ? "null" : p->a_first ? "\"AB\"" : "\"BA\"");
			json_num(f, p->a);
			fputs(",\"b\":", f);
			json_num(f, p->b);
			fprintf(f, ",\"place_a\":\"%s\",\"place_b\":\"%s\"}",
				perf_place_name(p->pa), perf_place_name(p->pb));
		}
		fputs("]}", f);
	}
	fputs("]}\n", f);
}

const char *perf_ab_plot_term(const char *file)
{
	static const struct { const char *ext, *term; } terms[] = {
		{ ".png", "pngcairo size 900,500" },
		{ ".svg", "svg size 900,500" },
		{ ".txt", "dumb size 100,30" },
		/* the gnuplot script itself, to render another way */
		{ ".gp", "" },
	};
	const char *ext = strrchr(file, '.');
	unsigned i;

	for (i = 0; ext && i < sizeof(terms) / sizeof(terms[0]); i++)
		if (!strcmp(ext, terms[i].ext))
			return terms[i].term;
	return NULL;
}

int perf_ab_plot_ready(const char *file)
{
	bool script = !*perf_ab_plot_term(file);
	int fd;

	if (!script && system("command -v gnuplot >/dev/null 2>&1") != 0) {
		fprintf(stderr, "virtq-perf ab: --plot: gnuplot is not installed\n");
		return -1;
	}
	/* Open it as gnuplot will; a file we made only to try goes again. */
	fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd >= 0) {
		close(fd);
		unlink(file);
		return 0;
	}
	if (errno == EEXIST)
		fd = open(file, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "virtq-perf ab: --plot: %s: %s\n", file, strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

/* file in a gnuplot string: '...' with each ' doubled */
static void gp_quoted(FILE *g, const char *s)
{
	fputc('\'', g);
	for (; *s; s++)
		fputs(*s == '\'' ? "''" : (char[2]){ *s, 0 }, g);
	fputc('\'', g);
}

int perf_ab_plot(const char *file, const struct ab_run *r)
{
	double lo = 0, hi = 0;
	struct stat sb;
	unsigned i;
	FILE *g;
	int st;

	const char *term = perf_ab_plot_term(file);
	bool script = !*term;

	/* Should it fail to open the file, gnuplot writes the chart to its
	 * stdout: never ours (it may be the JSON). */
	g = script ? fopen(file, "we") : popen("exec gnuplot >/dev/null", "w");
	if (!g) {
		fprintf(stderr, "virtq-perf ab: --plot: %s: %s\n", script ? file : "gnuplot",
			strerror(errno));
		return -1;
	}
	if (!script) {
		fprintf(g, "set terminal %s\nset output ", term);
		gp_quoted(g, file);
		fputc('\n', g);
	}
	fputs("$d << EOD\n", g);
	for (i = 0; i < r->nw; i++) {
		const struct ab_workload *w = &r->w[i];

		if (w->err)
			continue;
		lo = fmin(lo, isnan(w->st.ci_lo) ? w->st.change : w->st.ci_lo);
		hi = fmax(hi, isnan(w->st.ci_hi) ? w->st.change : w->st.ci_hi);
		fprintf(g, "%u %.6f %.6f %.6f \"%s\"\n", i, w->st.change * 100,
			isnan(w->st.ci_lo) ? w->st.change * 100 : w->st.ci_lo * 100,
			isnan(w->st.ci_hi) ? w->st.change * 100 : w->st.ci_hi * 100,
			w->label);
	}
	fputs("EOD\n", g);
	/* zero is always on the chart: the bars are read against it */
	fprintf(g, "set yrange [%.6f:%.6f]\n", lo * 100 - (hi - lo) * 10 - 0.5,
		hi * 100 + (hi - lo) * 10 + 0.5);
	/* every bar's slot, whatever the count: with [-0.6:*] one workload's
	 * bar ran from the middle to the right edge */
	fprintf(g, "set xrange [-0.6:%u.4]\n", r->nw ? r->nw - 1 : 0);
	fprintf(g, "set title \"B vs A: %s\\nA: %s   B: %s\" noenhanced\n",
		r->cmd, r->a, r->b);
	fputs("set ylabel 'change B/A - 1 (%), 95% CI'\n"
	      "set style fill solid 0.5 border -1\nset boxwidth 0.6\n"
	      "set xzeroaxis lt -1\nset grid ytics\nset key off\n"
	      "set xtics noenhanced rotate by -20\n"
	      "plot $d using 1:2:xtic(5) with boxes lc rgb '#4a7ebb', "
	      "$d using 1:2:3:4 with yerrorbars lc rgb 'black' pt 0\n", g);
	st = script ? fclose(g) : pclose(g);
	if (st != 0 || stat(file, &sb) < 0 || sb.st_size == 0) {
		fprintf(stderr, "virtq-perf ab: --plot: gnuplot did not write %s\n", file);
		return -1;
	}
	return 0;
}
