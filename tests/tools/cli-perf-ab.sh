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
#     --latency, which refuses one);
#   - --metric compares another number of the runs (a time: lower is
#     better), --ratio prints B/A (issue 26's targets are ratios);
#   - off a terminal the header comes first and a line per pair follows;
#     --backend-log takes the backends' output.
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

# --metric p50_us is a time: lower is better, the column says so, and
# --ratio prints B/A and its interval as ratios (A and B both the UNIX
# socket baseline, which needs no backend)
"$perf" ab --quiet --pairs 2 --ratio --metric p50_us -- vsock --transport unix \
	--latency --iters 50 >"$D/out" 2>"$D/err"
rc=$?
if [ $rc -eq 0 ] && grep -q "metric: p50_us (lower is better); ratio = B/A" "$D/out" &&
   grep -q "A p50_us.*B/A.*B lower" "$D/out" && grep -qE "^  vsock .*[0-9]x +\[" "$D/out"; then
	echo "ok   --metric p50_us --ratio: $(grep '^  vsock' "$D/out")"
else
	no "--metric p50_us --ratio: exit $rc: $(cat "$D/err" "$D/out")"
fi
"$perf" ab --quiet --pairs 2 --json --metric p50_us -- vsock --transport unix \
	--latency --iters 50 >"$D/out" 2>"$D/err"
grep -q '"metric":"p50_us","lower_is_better":true' "$D/out" ||
	no "--metric in the JSON: $(cat "$D/err" "$D/out")"
# a metric the runs do not print: the run fails, said
"$perf" ab --quiet --pairs 2 --metric no_such_key -- vsock --transport unix \
	--latency --iters 5 >"$D/out" 2>"$D/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "run failed" "$D/err"; then
	echo "ok   --metric no_such_key: $(grep 'run failed' "$D/err")"
else
	no "--metric no_such_key: exit $rc: $(cat "$D/err")"
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

# --a-exe / --b-exe: a program that cannot run is refused before any run;
# one that can runs that side, and the table names it.
"$perf" ab --quiet --a-exe "$D/none" -- $ring >"$D/out" 2>"$D/err"
rc=$?
if [ $rc -eq 2 ] && grep -q -- "--a-exe" "$D/err" && [ ! -s "$D/out" ]; then
	echo "ok   --a-exe not a program: $(cat "$D/err")"
else
	no "--a-exe not a program: exit $rc: $(cat "$D/err")"
fi
"$perf" ab --quiet --pairs 2 --b-exe "$perf" -- $ring >"$D/out" 2>"$D/err"
rc=$?
if [ $rc -eq 0 ] && grep -q "(run by $perf)" "$D/out"; then
	echo "ok   --b-exe runs B with the program named"
else
	no "--b-exe: exit $rc: $(cat "$D/err"; head -c 300 "$D/out")"
fi

# Off a terminal (issue 36 item 4): the header first, with the runs and
# the least time they take, then a line per pair; the backends' output
# goes to --backend-log, not into those lines.
"$perf" ab --pairs 6 --backend-log "$D/backend.log" -- \
	vsock --backend "$vvsock" --bytes 256K >"$D/out" 2>"$D/err"
rc=$?
first=$(head -n 1 "$D/err")
if [ $rc -eq 0 ] &&
   echo "$first" | grep -q "^virtq-perf ab: 1 workload x 6 pairs = 12 runs, each until 256K bytes" &&
   grep -q "^virtq-perf ab: the backends' output: $D/backend.log" "$D/err" &&
   [ "$(grep -c '^ab: workload 1/1 \[vsock\] pair [1-6]/6 ' "$D/err")" = 6 ] &&
   ! grep -q "^summary" "$D/err" && [ "$(grep -c "^summary tx" "$D/backend.log")" = 12 ]; then
	echo "ok   progress off a terminal: $first; 6 pair lines; backends in the log ($(wc -l <"$D/backend.log") lines)"
else
	no "progress off a terminal: exit $rc: $(cat "$D/err"; head -5 "$D/backend.log" 2>/dev/null)"
fi

# One workload: the chart's x range is that one bar's slot (it once ran
# from the middle of the chart to its right edge), the data one row; and
# pairs nobody probed are "unknown" in the table, not 0/0/0.
"$perf" ab --quiet --pairs 3 --plot "$D/chart.gp" -- $ring >"$D/out" 2>"$D/err"
rc=$?
if [ $rc -eq 0 ] && grep -qxF 'set xrange [-0.6:0.4]' "$D/chart.gp" &&
   [ "$(sed -n '/^\$d << EOD/,/^EOD/p' "$D/chart.gp" | grep -c '^0 ')" = 1 ] &&
   [ "$(sed -n '/^\$d << EOD/,/^EOD/p' "$D/chart.gp" | wc -l)" = 3 ] &&
   grep -E '^  ring .* unknown$' "$D/out" >/dev/null; then
	echo "ok   --plot chart.gp of one workload: $(grep xrange "$D/chart.gp"); placement $(awk '/^  ring/ { print $NF }' "$D/out")"
else
	no "--plot chart.gp: exit $rc: $(cat "$D/err"; cat "$D/chart.gp" 2>/dev/null | head -20; cat "$D/out")"
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
