#!/bin/sh
# SPDX-License-Identifier: MIT
# virtq-perf ab's statistics and chart at the command line (issue 24
# items 2 and 5):
#   - below 6 pairs one warning line on stderr and "few_pairs":true in the
#     JSON; at 6 neither;
#   - --plot FILE that cannot be written stops ab before any run, exit 1,
#     one line, nothing on stdout (gnuplot once wrote the PNG there);
#   - --plot writes the chart to FILE and nothing else to stdout: --json
#     stays one JSON line;
#   - a run that sets its own length gets no --seconds from ab (vsock
#     --latency, which refuses one).
#
#   cli-perf-ab.sh VIRTQ_PERF VIRTQ_VSOCK
set -u
perf=$1 vvsock=$2
[ "$(getconf _NPROCESSORS_ONLN)" -ge 2 ] || { echo "ring needs 2 CPUs"; exit 77; }
fail=0
D=$(mktemp -d /tmp/vq-ab.XXXXXX)
trap 'rm -rf "$D"' EXIT
no() { echo "FAIL $*"; fail=1; }
ring="ring --ops 2000 --placement off"

# 2 pairs: warned, marked
"$perf" ab --quiet --pairs 2 --json -- $ring >"$D/out" 2>"$D/err"
rc=$?
if [ $rc -eq 0 ] && [ "$(wc -l <"$D/err")" -eq 1 ] && grep -q "warning: 2 pairs" "$D/err" &&
   grep -q '"few_pairs":true' "$D/out"; then
	echo "ok   2 pairs: $(cat "$D/err")"
else
	no "2 pairs: exit $rc: $(cat "$D/err" "$D/out")"
fi

# 6 pairs: neither
"$perf" ab --quiet --pairs 6 --json -- $ring >"$D/out" 2>"$D/err"
rc=$?
if [ $rc -eq 0 ] && [ ! -s "$D/err" ] && grep -q '"few_pairs":false' "$D/out"; then
	echo "ok   6 pairs: no warning"
else
	no "6 pairs: exit $rc: $(cat "$D/err" "$D/out")"
fi

# vsock --latency runs its round trips; ab adds no --seconds it would refuse
"$perf" ab --quiet --pairs 6 --json -- vsock --backend "$vvsock" --latency --iters 20 \
	>"$D/out" 2>"$D/err"
rc=$?
if [ $rc -eq 0 ] && grep -q '"run_bound":"20 round trips"' "$D/out"; then
	echo "ok   vsock --latency: 20 round trips per run"
else
	no "vsock --latency: exit $rc: $(grep -v '^summary' "$D/err")"
fi

# an unwritable chart: refused before the runs (they would take 20 s)
t0=$(date +%s%N)
"$perf" ab --quiet --plot "$D/no/such/dir/chart.png" -- ring --placement off >"$D/out" 2>"$D/err"
rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
if [ $rc -eq 1 ] && [ "$(wc -l <"$D/err")" -eq 1 ] && [ ! -s "$D/out" ] && [ $ms -lt 2000 ]; then
	echo "ok   unwritable --plot: $(cat "$D/err")"
else
	no "unwritable --plot: exit $rc after $ms ms: $(cat "$D/err"; head -c 200 "$D/out")"
fi

if ! command -v gnuplot >/dev/null 2>&1; then
	"$perf" ab --quiet --plot "$D/chart.png" -- $ring >"$D/out" 2>"$D/err"
	[ $? -eq 1 ] && grep -q "gnuplot is not installed" "$D/err" && [ ! -s "$D/out" ] ||
		no "--plot without gnuplot: $(cat "$D/err")"
	echo "gnuplot is not installed: the charts themselves are not drawn"
	exit $fail
fi
for ext in png svg txt; do
	"$perf" ab --quiet --pairs 6 --json --plot "$D/chart.$ext" -- $ring >"$D/out" 2>"$D/err"
	rc=$?
	if [ $rc -ne 0 ] || [ -s "$D/err" ] || [ "$(wc -l <"$D/out")" -ne 1 ] ||
	   [ "$(head -c 1 "$D/out")" != "{" ] || [ ! -s "$D/chart.$ext" ]; then
		no "--plot chart.$ext: exit $rc: $(cat "$D/err"; head -c 200 "$D/out")"
		continue
	fi
	case $ext in
	png) head -c 4 "$D/chart.png" | grep -q PNG || no "chart.png is not a PNG" ;;
	svg) grep -q "<svg" "$D/chart.svg" || no "chart.svg is not SVG" ;;
	esac
	echo "ok   --plot chart.$ext: $(wc -c <"$D/chart.$ext") bytes, stdout one JSON line"
done
exit $fail
