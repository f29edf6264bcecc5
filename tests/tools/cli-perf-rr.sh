#!/bin/sh
# SPDX-License-Identifier: MIT
# virtq-perf net rr says how to read its latencies (issue 34 item 2): the
# placement of the run, the cache-line latency probed in it, and p50,
# p90, p99 and p99.9 of the round trip, in its human output and in
# --json; "unknown" when it could not probe; the stopwatch (--rr-clock);
# --rr-breakdown's steps; --rx-refill's batches.
#
#   cli-perf-rr.sh VIRTQ_PERF VIRTQ_NET
set -u
perf=$1 vnet=$2
fail=0
D=$(mktemp -d /tmp/vq-rr.XXXXXX)
trap 'rm -rf "$D"' EXIT
# the probe needs two CPUs to pin its threads to
[ "$(getconf _NPROCESSORS_ONLN)" -ge 2 ] || { echo "SKIP: one CPU"; exit 77; }

no() { echo "FAIL $*"; fail=1; }
ok() { echo "ok   $*"; }
# field NAME JSON: the value of "NAME" (a number, null, or a quoted word)
field() { echo "$2" | sed -nE "s/.*\"$1\":(\"[a-z]+\"|-?[0-9.]+|null).*/\1/p"; }
num='^[0-9]+(\.[0-9]+)?$'
pct='[0-9]+\.[0-9]+'

rr() { "$perf" net --backend "$vnet loopback" --backend-busy-poll 50 --direction rr \
	--busy-poll 50 --size 64 --seconds 0.4 "$@" 2>"$D/err"; }

# pinned: probed before, during (every 0.1 s) and after
out=$(rr --cpu 0 --probe-every 0.1) || no "human run: $(cat "$D/err")"
echo "$out" | grep -qE "^rr latency us: p50 $pct p90 $pct p99 $pct p99\.9 $pct \(timed by (tsc|monotonic);" &&
	ok "human: four percentiles and the stopwatch" || no "human percentiles: $out"
echo "$out" | grep -qE '^placement: (near|far|mixed) \(c2c [0-9.]+ ns before, [0-9.]+ ns after' &&
	ok "human: placement" || no "human placement: $out"
if echo "$out" | grep -qE '^cache line: [0-9.]+ ns one-way, [0-9.]+ ns round trip \(median of ([3-9]|[1-9][0-9]+) probes'; then
	ok "human: cache-line latency of the run, probed inside it too"
else
	no "human cache line: $out"
fi

js=$(rr --cpu 0 --probe-every 0.1 --json) || no "json run: $(cat "$D/err")"
case $(field placement "$js") in
'"near"'|'"far"'|'"mixed"') ok "json: placement $(field placement "$js")" ;;
*) no "json placement: $js" ;;
esac
for k in c2c_ns c2c_rtt_ns c2c_ns_min c2c_ns_max c2c_ns_before c2c_ns_after \
	 p50_us p90_us p99_us p999_us; do
	echo "$(field $k "$js")" | grep -qE "$num" || no "json $k: $js"
done
# every answered transaction but those after a probe's pause is timed,
# and the percentiles are of all of them up to the room for a million
seen=$(field latencies_seen "$js") kept=$(field latencies "$js")
want=$(( $(field packets "$js") - $(field unrecorded "$js") ))
if [ "${seen:-x}" = "$want" ] && [ "$kept" = "$(( seen < 1048576 ? seen : 1048576 ))" ]; then
	ok "json: $seen transactions timed, $kept kept"
else
	no "json latencies: $js"
fi
probes=$(field c2c_probes "$js")
[ "${probes:-0}" -ge 3 ] && ok "json: $probes probes, c2c_ns $(field c2c_ns "$js")" ||
	no "json c2c_probes: $js"
# the round trip of one line is twice its one-way latency
awk -v a="$(field c2c_ns "$js")" -v b="$(field c2c_rtt_ns "$js")" \
	'BEGIN { d = 2 * a - b; exit !(d < 0.2 && d > -0.2) }' ||
	no "json c2c_rtt_ns is not 2 c2c_ns: $js"

# --rr-clock: either stopwatch gives latencies in us.  The transactions
# follow one another, so their mean latency is at most the time per
# transaction, and half of them take at least p50: p50 <= 2 / rate.  A
# count of ticks left unconverted (TSC cycles as ns) breaks the bound.
for c in tsc monotonic; do
	if [ $c = tsc ] && ! grep -qw constant_tsc /proc/cpuinfo; then
		continue
	fi
	js=$(rr --cpu 0 --rr-clock $c --json) || { no "--rr-clock $c: $(cat "$D/err")"; continue; }
	p50=$(field p50_us "$js") rate=$(field ops_per_sec "$js")
	if [ "$(field rr_clock "$js")" = "\"$c\"" ] &&
	   awk -v p="$p50" -v r="$rate" 'BEGIN { exit !(p > 0 && r > 0 && p <= 2e6 / r) }'; then
		ok "--rr-clock $c: p50 $p50 us at $rate transactions/s"
	else
		no "--rr-clock $c: $js"
	fi
done
rc=0
rr --rr-clock hpet >/dev/null || rc=$?
[ $rc -eq 2 ] && grep -q "not tsc or monotonic" "$D/err" && ok "--rr-clock hpet refused" ||
	no "--rr-clock hpet: exit $rc: $(cat "$D/err")"

# unpinned: nothing to probe between, and it says so
out=$(rr) || no "unpinned run: $(cat "$D/err")"
echo "$out" | grep -q '^placement: unknown (not probed' && ok "human: unknown unpinned" ||
	no "unpinned human: $out"
js=$(rr --json) || no "unpinned json run: $(cat "$D/err")"
# unpinned, the thread may read two CPUs' counters: the TSC times it only
# where the kernel keeps the TSC as its clocksource (the CPUs' agree)
want=monotonic
if grep -qw constant_tsc /proc/cpuinfo && grep -qw nonstop_tsc /proc/cpuinfo &&
   [ "$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)" = tsc ]; then
	want=tsc
fi
[ "$(field rr_clock "$js")" = "\"$want\"" ] && ok "json: unpinned, timed by $want" ||
	no "unpinned rr_clock, $want expected: $js"
if [ $want = monotonic ] && grep -qw constant_tsc /proc/cpuinfo; then
	rc=0
	rr --rr-clock tsc >/dev/null || rc=$?
	[ $rc -eq 2 ] && grep -q "pin with --cpu" "$D/err" && ok "unpinned --rr-clock tsc refused" ||
		no "unpinned --rr-clock tsc: exit $rc: $(cat "$D/err")"
	rc=0
	rr --rr-breakdown >/dev/null || rc=$?
	[ $rc -eq 2 ] && grep -q "pin with --cpu" "$D/err" && ok "unpinned --rr-breakdown refused" ||
		no "unpinned --rr-breakdown: exit $rc: $(cat "$D/err")"
fi
[ "$(field placement "$js")" = '"unknown"' ] && [ "$(field c2c_ns "$js")" = null ] &&
	[ "$(field c2c_probes "$js")" = 0 ] && ok "json: unknown unpinned" ||
	no "unpinned json: $js"

# --rr-breakdown: every step timed, the poll's pieces costed
js=$(rr --cpu 0 --rr-breakdown --json) || no "breakdown run: $(cat "$D/err")"
bd=$(echo "$js" | sed -nE 's/.*"breakdown":(\{.*\})\}$/\1/p')
n=$(echo "$bd" | sed -nE 's/.*"total":\{"n":([0-9]+).*/\1/p')
[ "${n:-0}" -gt 0 ] && echo "$bd" | grep -q '"wait":{"n":[1-9]' &&
	echo "$bd" | grep -qE '"clock_read":[0-9.]+' && ok "json breakdown: $n transactions" ||
	no "json breakdown: $js"
out=$(rr --cpu 0 --rr-breakdown) || no "breakdown human run: $(cat "$D/err")"
for s in fill post book wait rx total spins; do
	echo "$out" | grep -qE "^  $s +.* [0-9]+ +[0-9]+ +[0-9.]+$" || no "breakdown step $s: $out"
done
# the answer's bytes are seen only by a spin: a run whose every wait
# slept (a loaded machine) has none, and says so
for s in data used; do
	echo "$out" | grep -qE "^  $s +.* ([0-9]+ +[0-9]+ +[0-9.]+|- +- +-)$" ||
		no "breakdown step $s: $out"
done
echo "$out" | grep -q "^rr breakdown: [1-9]" && ok "human breakdown" || no "human breakdown: $out"

# --rx-refill: buffers go back in batches; the largest batch a ring of 16
# allows still leaves the device a buffer for each answer, so none is lost
# over many refills, and every answer is the frame sent
js=$(rr --cpu 0 --queue-size 16 --rx-refill 15 --verify --json) ||
	no "refill run: $(cat "$D/err")"
n=$(field packets "$js")
[ "${n:-0}" -gt 160 ] && [ "$(field bad "$js")" = 0 ] &&
	! grep -q "no answer" "$D/err" && ok "--rx-refill 15 of 16: $n transactions, none lost" ||
	no "refill: $js $(cat "$D/err")"
rc=0
rr --queue-size 16 --rx-refill 16 >/dev/null || rc=$?
[ $rc -eq 2 ] && grep -q "below --queue-size" "$D/err" &&
	ok "--rx-refill of the whole ring refused: $(cat "$D/err")" ||
	no "--rx-refill 16 of 16: exit $rc: $(cat "$D/err")"

# only rr has them
for a in "--rr-breakdown" "--probe-every 1" "--rx-refill 4" "--rr-clock monotonic"; do
	rc=0
	"$perf" net --backend "$vnet loopback" --direction tx $a >/dev/null 2>"$D/err" || rc=$?
	[ $rc -eq 2 ] && [ "$(wc -l <"$D/err")" -eq 1 ] && ok "tx $a refused: $(cat "$D/err")" ||
		no "tx $a: exit $rc: $(cat "$D/err")"
done
exit $fail
