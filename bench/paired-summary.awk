# SPDX-License-Identifier: MIT
# The paired summary every bench script prints: stdin lines "A B ..." (two
# rates of one pair); -v label=NAME.  Geometric means, the change B/A - 1
# from the mean paired log ratio, its 95% normal-approximation interval, and
# in how many pairs B was faster.  Pairs with a zero rate (a run that
# failed) are left out.
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
	h = n > 1 ? 1.96 * sqrt(v / (n - 1)) / sqrt(n) : 0
	printf "%-6s A %7.3f Mpps  B %7.3f Mpps  change %+6.1f%% [%+.1f, %+.1f]  B faster in %d/%d pairs\n",
		label, exp(la / n) / 1e6, exp(lb / n) / 1e6, (exp(m) - 1) * 100,
		(exp(m - h) - 1) * 100, (exp(m + h) - 1) * 100, k + 0, n
}
