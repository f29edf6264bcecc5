#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Recompute the 95% intervals of paired results with Student's t.

Until 2026-12-02 virtq-perf ab and bench/paired-summary.awk gave the 95%
interval of the mean paired log ratio as m +- 1.96 s/sqrt(n), the normal
approximation, too narrow for the 6 to 40 pairs we run (by 31% at 6
pairs). The right half-width is t(0.975, n-1) s/sqrt(n). This script
recomputes the intervals of results recorded before the change:

  student-t.py pairs FILE [FILE...]
      files with per-pair lines "pair K ORDER PLACE a A x X" (bench/
      net-race.sh --paired): the summary of all pairs, from the data.
  student-t.py summary N CHANGE LO HI
      an interval printed with z = 1.96 for N pairs (percent, e.g.
      +43.3 +23.5 +66.3): the same interval with t(0.975, N-1).
"""
import math
import re
import sys


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


def from_pairs(files):
    d = []
    for f in files:
        for line in open(f):
            m = re.match(r"pair\s+\d+\s+\S+\s+\S+\s+a\s+([\d.]+)\s+\w+\s+([\d.]+)", line)
            if m and float(m.group(1)) > 0 and float(m.group(2)) > 0:
                d.append(math.log(float(m.group(2)) / float(m.group(1))))
    n = len(d)
    if n < 2:
        sys.exit("fewer than 2 pairs")
    mean = sum(d) / n
    s = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    h = t_quantile(0.975, n - 1) * s / math.sqrt(n)
    faster = sum(1 for x in d if x > 0)
    print("%+.1f%% [%+.1f, %+.1f], faster in %d/%d pairs (Student t, %d df)"
          % (pct(mean), pct(mean - h), pct(mean + h), faster, n, n - 1))


def from_summary(n, change, lo, hi):
    m = math.log1p(change / 100)
    h = (math.log1p(hi / 100) - math.log1p(lo / 100)) / 2
    h *= t_quantile(0.975, n - 1) / 1.96
    print("%+.1f%% [%+.1f, %+.1f] (Student t, %d df; was [%+.1f, %+.1f])"
          % (change, pct(m - h), pct(m + h), n - 1, lo, hi))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "pairs":
        from_pairs(sys.argv[2:])
    elif len(sys.argv) == 6 and sys.argv[1] == "summary":
        from_summary(int(sys.argv[2]), *map(float, sys.argv[3:]))
    else:
        sys.exit(__doc__)
