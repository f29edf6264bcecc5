#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# virtq-perf ab --pairs-file: the pairs a script ran without ab (DPDK's
# testpmd in bench/net-race.sh) through ab's own statistics (issue 32):
#   - the pairs of an ab run, read back from a file, give that run's
#     statistics exactly: one implementation, whoever ran the pairs;
#   - a pair with a rate of 0 (a failed run) is left out, said in one line;
#   - the placement words are counted, and --same-placement keeps only near
#     and far pairs; each file is one row; --metric NAME_us makes lower
#     better;
#   - a line that is not "A B [PLACE]", a missing file, no pairs: exit 1,
#     one line; options only a run has, or a workload: exit 2.
#
#   cli-perf-ab-pairs.sh VIRTQ_PERF
set -euo pipefail
perf=$1
[ "$(getconf _NPROCESSORS_ONLN)" -ge 2 ] || { echo "ring needs 2 CPUs"; exit 77; }
command -v python3 >/dev/null || { echo "python3 reads the JSON"; exit 77; }
fail=0
D=$(mktemp -d /tmp/vq-abp.XXXXXX)
trap 'rm -rf "$D"' EXIT
no() { echo "FAIL $*"; fail=1; }
# run CMD...: its exit code in rc, stdout in $D/out, stderr in $D/err
run() { rc=0; "$@" >"$D/out" 2>"$D/err" || rc=$?; }
# field JSON EXPR: a Python expression over the first result r
field() { python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["results"][0]; print(eval(sys.argv[2]))' "$@"; }

# An ab run's own pairs, read back: the same statistics.
run "$perf" ab --quiet --pairs 6 --json -- ring --ops 2000 --placement off
cp "$D/out" "$D/ran.json"
python3 -c 'import json, sys
for p in json.load(open(sys.argv[1]))["results"][0]["runs"]:
    print(repr(p["a"]), repr(p["b"]))' "$D/ran.json" >"$D/pairs"
run "$perf" ab --pairs-file "$D/pairs" --json
stats='(r["n"], r["gmean_a"], r["gmean_b"], r["change"], r["ci95"], r["faster"])'
if [ $rc -eq 0 ] && [ ! -s "$D/err" ] &&
   [ "$(field "$D/out" "$stats")" = "$(field "$D/ran.json" "$stats")" ]; then
	echo "ok   pairs read back: $(field "$D/out" "$stats")"
else
	no "pairs read back: exit $rc: $(cat "$D/err"); ran $(field "$D/ran.json" "$stats")," \
		"read $(field "$D/out" "$stats" 2>&1)"
fi

# Known pairs, from stdin: B is twice A but in the failed pair.
printf '# a comment\n\n10 20 near\n10 20 far\n0 20 far\n10 20 mixed\n 10\t20\n' >"$D/known"
run "$perf" ab --pairs-file - --json <"$D/known"
got=$(field "$D/out" '(r["label"], r["n"], round(r["change"], 12), r["faster"], r["placement"])' 2>&1)
want="('stdin', 4, 1.0, 4, {'near': 1, 'far': 1, 'mixed': 1, 'unknown': 1})"
if [ $rc -eq 0 ] && [ "$got" = "$want" ] && [ "$(wc -l <"$D/err")" -eq 2 ] &&
   grep -q "1 pair with a rate of 0 (a failed run) left out" "$D/err" &&
   grep -q "warning: stdin: 4 pairs" "$D/err"; then
	echo "ok   a failed pair left out, placements counted: $got"
else
	no "known pairs: exit $rc: $got: $(cat "$D/err")"
fi
grep -qF '"pairs_file":["-"]' "$D/out" && grep -q '"order":null' "$D/out" ||
	no "the JSON does not say the pairs were read: $(head -c 300 "$D/out")"

# --same-placement: only the near and the far pair
run "$perf" ab --pairs-file "$D/known" --same-placement --json
got=$(field "$D/out" 'r["n"]' 2>&1)
[ $rc -eq 0 ] && [ "$got" = 2 ] && echo "ok   --same-placement: 2 pairs kept" ||
	no "--same-placement: exit $rc, n $got: $(cat "$D/err")"

# one workload per file: all pairs, then the near ones; a file without
# pairs is a row without statistics
mkdir "$D/rows"
grep -v '^#' "$D/known" | grep . >"$D/rows/all"
grep ' near$' "$D/known" >"$D/rows/near"
: >"$D/rows/none"
run "$perf" ab --pairs-file "$D/rows/all" --pairs-file "$D/rows/near" --pairs-file "$D/rows/none"
if [ $rc -eq 0 ] && grep -q "pairs read from $D/rows/all (4), $D/rows/near (1), $D/rows/none (0)" "$D/out" &&
   grep -qE "^  all .* 4/4 " "$D/out" && grep -qE "^  near .*\[n/a, n/a\] +1/1 " "$D/out" &&
   grep -qE "^  none .*\(no pairs\)" "$D/out" && grep -q "rows/none: no pairs" "$D/err"; then
	echo "ok   three files, three rows (all, near, none)"
else
	no "three files: exit $rc: $(cat "$D/err" "$D/out")"
fi

# a time: lower is better, and the table says so
printf '10 5\n10 6\n10 11\n' >"$D/times"
run "$perf" ab --pairs-file "$D/times" --metric p50_us
if [ $rc -eq 0 ] && grep -q "pairs read from $D/times (3) (not run by ab" "$D/out" &&
   grep -q "metric: p50_us (lower is better)" "$D/out" &&
   grep -qE "^  times .* 2/3 " "$D/out"; then
	echo "ok   --metric p50_us: $(grep '^  times' "$D/out")"
else
	no "--metric p50_us: exit $rc: $(cat "$D/err" "$D/out")"
fi

# what is not a pairs file: exit 1, one line, nothing on stdout
bad() {         # WHAT WANT_IN_STDERR FILE_CONTENT
	printf '%b' "$3" >"$D/bad"
	run "$perf" ab --pairs-file "$D/bad"
	if [ $rc -eq 1 ] && [ "$(wc -l <"$D/err")" -eq 1 ] && grep -q -- "$2" "$D/err" &&
	   [ ! -s "$D/out" ]; then
		echo "ok   $1: $(cat "$D/err")"
	else
		no "$1: exit $rc: $(cat "$D/err" "$D/out")"
	fi
}
bad "one rate" "bad:2: not" '1 2\n3\n'
bad "a word for a rate" "bad:1: not" '1 two\n'
bad "a negative rate" "bad:1: not" '-1 2\n'
bad "an unknown placement" "bad:1: not" '1 2 sideways\n'
bad "a word too many" "bad:1: not" '1 2 far far\n'
bad "no pairs" "no pairs" '# nothing\n'
bad "every pair failed" "no pairs: 2 pairs with a rate of 0" '0 1\n1 0\n'
run "$perf" ab --pairs-file "$D/none"
[ $rc -eq 1 ] && grep -q "$D/none: No such file" "$D/err" &&
	echo "ok   a missing file: $(cat "$D/err")" || no "a missing file: exit $rc: $(cat "$D/err")"

# what only a run has: refused as a command line
for opt in "--pairs 6" "--a x" "--b x" "--seconds 1" "--a-exe $perf" "--b-exe $perf"; do
	# shellcheck disable=SC2086 # the option and its value
	run "$perf" ab --pairs-file "$D/known" $opt
	[ $rc -eq 2 ] && grep -q -- "--pairs-file: ${opt%% *} is for pairs ab runs" "$D/err" ||
		no "--pairs-file with $opt: exit $rc: $(cat "$D/err")"
done
run "$perf" ab --pairs-file "$D/known" -- ring --ops 10
if [ $rc -eq 2 ] && grep -q "no workload ('ring')" "$D/err" && [ ! -s "$D/out" ]; then
	echo "ok   run-only options and a workload refused: $(cat "$D/err")"
else
	no "--pairs-file with a workload: exit $rc: $(cat "$D/err")"
fi
exit $fail
