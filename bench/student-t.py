#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Recompute the 95% intervals of paired results with Student's t.

Until 2026-12-02 virtq-perf ab and bench/paired-summary.awk gave the 95%
interval of the mean paired log ratio as m +- 1.96 s/sqrt(n), the normal
approximation, too narrow for the 6 to 40 pairs we run (by 31% at 6
pairs). The right half-width is t(0.975, n-1) s/sqrt(n). This script
recomputes the intervals of results recorded before the change.

Per-pair lines come in two formats, both read:
  pair K ORDER PLACE a A X R      bench/net-race.sh --paired (Mpps)
  pair K ORDER PLACE A A B B ...  bench/net-backend-ab.sh (pps, c2c)
A row is a block of consecutive pair lines; a file may hold several
(e.g. split then packed), numbered from 1 in file order. Pairs with a zero
rate (a failed run) are left out, as the scripts leave them out.

  student-t.py pairs [--place P] FILE[:ROW[,ROW...]]...
      the summary of the pairs of the given rows (all rows if none are
      named), pooled, only those labelled P (near, far, mixed) with
      --place; with the z = 1.96 interval the scripts printed, to compare.
  student-t.py rows FILE...
      each row: its pairs per placement, and every summary printed after
      it recomputed from its pairs (a row shorter than its summary's n is
      reported: the file lost pairs).
  student-t.py printed FILE...
      every interval printed with its "k/n" (virtq-perf ab tables, summary
      lines), recomputed from the printed interval with t(0.975, n-1): for
      files that kept no pairs, printed with z (before 2026-12-02).
  student-t.py summary N CHANGE LO HI
      an interval printed with z = 1.96 for N pairs (percent, e.g.
      +43.3 +23.5 +66.3): the same interval with t(0.975, N-1).
  student-t.py check [DIR]
      self-test: the t quantiles against a table, and every row of every
      file in DIR (default: bench/results) reproduces the intervals
      printed after it (with z before 2026-12-02, with t after). Exit 1
      on a mismatch.
"""
import math
import os
import re
import sys

Z95 = 1.96
# t(0.975, df) from printed tables, for the self-test.
KNOWN_T = {1: 12.706, 2: 4.303, 5: 2.571, 7: 2.365, 9: 2.262, 11: 2.201,
           15: 2.131, 19: 2.093, 29: 2.045, 39: 2.023, 77: 1.991}

PAIR = re.compile(r"^pair\s+\d+\s+\S+\s+(\w+)\s+a\s+([\d.]+)\s+\w+\s+([\d.]+)",
                  re.I)
# A summary the scripts print after a row: "far  A ... change +1.2% [lo, hi]
# B faster in k/n pairs" (the interval is missing when n = 1).
ROW_SUMMARY = re.compile(r"^(all|near|far|mixed)\s+A\s.*change\s+([+-][\d.]+)%"
                         r"(?:\s+\[([+-][\d.]+), ([+-][\d.]+)\])?"
                         r"\s+B faster in (\d+)/(\d+)")
# Any printed interval followed by its k/n: ab tables and summary lines.
PRINTED = re.compile(r"([+-][\d.]+)%\s+\[([+-][\d.]+)%?,\s*([+-][\d.]+)%?\]"
                     r"\s+(?:B faster in\s+)?(\d+)/(\d+)")


def betacf(a, b, x):
    """Continued fraction of the regularized incomplete beta (Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def ibeta(a, b, x):
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + \
        a * math.log(x) + b * math.log(1.0 - x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * betacf(b, a, 1.0 - x) / b


def t_cdf(t, df):
    p = 0.5 * ibeta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - p if t > 0 else p


def t_quantile(p, df):
    lo, hi = 0.0, 1000.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def pct(x):
    return (math.exp(x) - 1) * 100


def rows_of(path):
    """The file's rows: lists of (line number, place, log(X/A)); a pair
    with a zero rate keeps its place with ratio None."""
    rows, row = [], None
    with open(path) as f:
        for no, line in enumerate(f, 1):
            m = PAIR.match(line)
            if not m:
                row = None
                continue
            if row is None:
                row = []
                rows.append(row)
            a, x = float(m.group(2)), float(m.group(3))
            row.append((no, m.group(1), math.log(x / a) if a > 0 and x > 0 else None))
    return rows


def summarize(d):
    """Mean log ratio, t and z half-widths, pairs X won, n."""
    n = len(d)
    mean = sum(d) / n
    s = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    return (mean, t_quantile(0.975, n - 1) * s / math.sqrt(n),
            Z95 * s / math.sqrt(n), sum(1 for x in d if x > 0), n)


def describe(d):
    if len(d) < 2:
        return "%d pair(s): no interval" % len(d)
    m, ht, hz, k, n = summarize(d)
    return ("%+.1f%% [%+.1f, %+.1f], faster in %d/%d pairs (Student t, %d df; "
            "z = 1.96 gave [%+.1f, %+.1f])"
            % (pct(m), pct(m - ht), pct(m + ht), k, n, n - 1, pct(m - hz), pct(m + hz)))


def select(spec):
    """FILE or FILE:ROW[,ROW...] -> the chosen rows' pairs."""
    path, rows = spec, None
    if re.search(r":[\d,]+$", spec):
        path, sel = spec.rsplit(":", 1)
        rows = [int(r) for r in sel.split(",") if r]
    all_rows = rows_of(path)
    if not all_rows:
        sys.exit("%s: no per-pair lines" % path)
    picked = []
    for r in rows or range(1, len(all_rows) + 1):
        if not 1 <= r <= len(all_rows):
            sys.exit("%s: row %d, but the file has rows 1-%d" % (path, r, len(all_rows)))
        picked += all_rows[r - 1]
    return picked


def cmd_pairs(args):
    place = None
    if args[:1] == ["--place"] and len(args) > 2:
        place, args = args[1], args[2:]
        if place not in ("near", "far", "mixed"):
            sys.exit("--place takes near, far or mixed, not '%s'" % place)
    if not args:
        sys.exit(__doc__)
    pairs = [p for spec in args for p in select(spec)]
    d = [r for _, pl, r in pairs if r is not None and place in (None, pl)]
    print(describe(d))


def summaries_after(path, row):
    """The summary lines printed right after a row."""
    with open(path) as f:
        lines = f.readlines()
    out = []
    for line in lines[row[-1][0]:]:
        m = ROW_SUMMARY.match(line)
        if not m:
            break
        out.append(m)
    return out


def printed_after(path, row):
    """Each summary printed after a row, with the row's pairs it covers."""
    for m in summaries_after(path, row):
        label = m.group(1)
        yield m, [r for _, pl, r in row if r is not None and label in ("all", pl)]


def cmd_rows(args):
    for path in args:
        for i, row in enumerate(rows_of(path), 1):
            places = {}
            for _, pl, _ in row:
                places[pl] = places.get(pl, 0) + 1
            print("%s row %d (lines %d-%d): %d pairs (%s)" % (
                path, i, row[0][0], row[-1][0], len(row),
                ", ".join("%s %d" % kv for kv in sorted(places.items()))))
            printed = list(printed_after(path, row))
            if not printed:
                print("  all: %s" % describe([r for _, _, r in row if r is not None]))
            for m, d in printed:
                lost = len(d) != int(m.group(6))
                print("  %s: printed %s%% [%s, %s] %s/%s -> %s%s" % (
                    m.group(1), m.group(2), m.group(3), m.group(4), m.group(5),
                    m.group(6), describe(d),
                    " (the file lost pairs)" if lost else ""))


def from_summary(n, change, lo, hi):
    """The t interval from one printed with z = 1.96 for n pairs."""
    m = math.log1p(change / 100)
    h = (math.log1p(hi / 100) - math.log1p(lo / 100)) / 2
    h *= t_quantile(0.975, n - 1) / Z95
    return pct(m - h), pct(m + h)


def cmd_printed(args):
    for path in args:
        with open(path) as f:
            for no, line in enumerate(f, 1):
                for m in PRINTED.finditer(line):
                    change, lo, hi = (float(m.group(g)) for g in (1, 2, 3))
                    n = int(m.group(5))
                    if n < 2:
                        continue
                    tlo, thi = from_summary(n, change, lo, hi)
                    print("%s:%d: %+.1f%% [%+.1f, %+.1f] %s/%d -> [%+.1f, %+.1f] "
                          "(Student t, %d df)" % (path, no, change, lo, hi,
                                                  m.group(4), n, tlo, thi, n - 1))


def cmd_summary(args):
    n = int(args[0])
    change, lo, hi = map(float, args[1:4])
    if n < 2:
        sys.exit("summary: N must be at least 2")
    tlo, thi = from_summary(n, change, lo, hi)
    print("%+.1f%% [%+.1f, %+.1f] (Student t, %d df; was [%+.1f, %+.1f])"
          % (change, tlo, thi, n - 1, lo, hi))


def check_quantiles():
    bad = 0
    for df, want in sorted(KNOWN_T.items()):
        got = t_quantile(0.975, df)
        if abs(got - want) > 0.0015:
            print("t(0.975, %d) = %.4f, the table says %.3f" % (df, got, want))
            bad += 1
    return bad


def reproduces(m, d):
    """Whether a printed summary is what its pairs give, with z = 1.96 (the
    files before 2026-12-02) or with t (after)."""
    if len(d) < 2 or m.group(3) is None:
        return True
    mean, ht, hz, k, _ = summarize(d)
    want = [float(m.group(g)) for g in (2, 3, 4)] + [int(m.group(5))]
    # The pair lines round each rate (3 decimals of Mpps), the summary was
    # computed before: allow one printed digit.
    return any(all(abs(g - w) <= 0.1 for g, w in
                   zip([pct(mean), pct(mean - h), pct(mean + h), k], want))
               for h in (hz, ht))


def cmd_check(args):
    """The quantiles against the table; every row's printed summaries
    reproduced from its pairs (rows that lost pairs are only counted)."""
    bad = check_quantiles()
    top = args[0] if args else os.path.join(os.path.dirname(__file__), "results")
    rows = checked = short = 0
    for name in sorted(os.listdir(top)):
        path = os.path.join(top, name)
        for i, row in enumerate(rows_of(path) if os.path.isfile(path) else [], 1):
            rows += 1
            for m, d in printed_after(path, row):
                if len(d) != int(m.group(6)):
                    short += 1
                elif reproduces(m, d):
                    checked += 1
                else:
                    print("%s row %d: printed '%s', the pairs give %s" % (
                        path, i, m.group(0), describe(d)))
                    bad += 1
    print("t quantiles: %d checked; %d rows of pairs, %d printed summaries "
          "reproduced, %d printed for more pairs than the file kept; %d wrong"
          % (len(KNOWN_T), rows, checked, short, bad))
    return 1 if bad or not checked else 0


if __name__ == "__main__":
    cmds = {"pairs": cmd_pairs, "rows": cmd_rows, "printed": cmd_printed,
            "check": cmd_check}
    argv = sys.argv[1:]
    if argv[:1] == ["summary"] and len(argv) == 5:
        cmd_summary(argv[1:])
    elif argv[:1] == ["check"]:
        sys.exit(cmd_check(argv[1:]))
    elif argv[:1] and argv[0] in cmds and len(argv) > 1:
        cmds[argv[0]](argv[1:])
    else:
        sys.exit(__doc__)
