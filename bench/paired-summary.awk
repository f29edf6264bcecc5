# SPDX-License-Identifier: MIT
# The paired summary every bench script prints: stdin lines "A B ..." (two
# rates of one pair); -v label=NAME.  Geometric means, the change B/A - 1
# from the mean paired log ratio, its 95% Student t interval (n - 1 degrees
# of freedom, as virtq-perf ab: tools/perf/stats.c), and in how many pairs
# B was faster.  Pairs with a zero rate (a run that failed) are left out;
# below 6 pairs the line says the interval rests on few runs.

# t(0.975, df): the table for df <= 30, then the Cornish-Fisher expansion
# around z (Abramowitz & Stegun 26.7.5).
function t975(df,    z, z2, t) {
	if (df <= 30)
		return T[df]
	z = 1.959963984540054
	z2 = z * z
	t = z + (z2 + 1) * z / 4 / df
	t += ((5 * z2 + 16) * z2 + 3) * z / 96 / df ^ 2
	t += (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384 / df ^ 3
	t += ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160 / df ^ 4
	return t
}
BEGIN {
	split("12.7062047 4.30265273 3.18244631 2.77644511 2.57058184 " \
	      "2.44691185 2.36462425 2.30600414 2.26215716 2.22813885 " \
	      "2.20098516 2.17881283 2.16036866 2.14478669 2.13144955 " \
	      "2.11990530 2.10981558 2.10092204 2.09302405 2.08596345 " \
	      "2.07961384 2.07387307 2.06865761 2.06389856 2.05953855 " \
	      "2.05552944 2.05183052 2.04840714 2.04522964 2.04227246", T, " ")
}
$1 > 0 && $2 > 0 {
	n++
	la += log($1)
	lb += log($2)
	d[n] = log($2 / $1)
	s += d[n]
	if (d[n] > 0)
		k++
}
END {
	if (n == 0)
		exit
	m = s / n
	for (i = 1; i <= n; i++)
		v += (d[i] - m) ^ 2
	h = n > 1 ? t975(n - 1) * sqrt(v / (n - 1)) / sqrt(n) : 0
	printf "%-6s A %7.3f Mpps  B %7.3f Mpps  change %+6.1f%% [%+.1f, %+.1f]  B faster in %d/%d pairs%s\n",
		label, exp(la / n) / 1e6, exp(lb / n) / 1e6, (exp(m) - 1) * 100,
		(exp(m - h) - 1) * 100, (exp(m + h) - 1) * 100, k + 0, n,
		n < 2 ? " (one pair: no interval)" : n < 6 ? " (fewer than 6 pairs: a wide interval)" : ""
}
