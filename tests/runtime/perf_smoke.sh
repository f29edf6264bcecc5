#!/bin/sh
# SPDX-License-Identifier: MIT
# virtq-perf end to end: every ring variant runs to its --ops count with
# exact counters, and ab expands a list into workloads and reports them.
set -eu
perf=$1
[ "$(nproc)" -ge 2 ] || { echo "needs 2 CPUs"; exit 77; }

fail() { echo "FAIL: $*" >&2; exit 1; }

for layout in split packed; do
	for args in "" "--in-order on" "--used-batch 1" "--used-batch 0" "--event-idx off" \
		    "--busy-poll 20" "--size 300 --direction rx --in-order on" \
		    "--size 1500 --queue-size 64 --used-batch 7"; do
		out=$("$perf" ring --layout $layout $args --ops 20000 --placement off --json) ||
			fail "ring --layout $layout $args"
		# every buffer went through the device and came back
		echo "$out" | grep -q '"ops":20000,' || fail "ops: $layout $args: $out"
		echo "$out" | grep -q '"driver":{"packets":20000,' || fail "driver count: $out"
		echo "$out" | grep -q '"device":{"packets":20000,' || fail "device count: $out"
	done
done

out=$("$perf" ab --quiet --pairs 2 --json --a "--used-batch 1" --b "" -- \
	ring --ops 5000 --placement off --size 0,64) || fail "ab"
echo "$out" | grep -q '"label":"size=0"' || fail "ab label 0: $out"
echo "$out" | grep -q '"label":"size=64"' || fail "ab label 64: $out"
[ "$(echo "$out" | grep -o '"order":"AB"' | wc -l)" -eq 2 ] || fail "ab order: $out"
[ "$(echo "$out" | grep -o '"order":"BA"' | wc -l)" -eq 2 ] || fail "ab order: $out"

# a configuration is split as a shell would: a quoted value is one word
out=$("$perf" ab --quiet --pairs 2 --json --a "--used-batch '1'" --b "--used-batch \"64\"" -- \
	ring --ops 2000 --placement off) || fail "ab quoted: $out"
echo "$out" | grep -q '"pairs":2' || echo "$out" | grep -q '"order":"AB"' || fail "ab quoted: $out"
if "$perf" ab --quiet --pairs 2 --a "--used-batch '1" -- ring --ops 10 >/dev/null 2>&1; then
	fail "ab: an open quote accepted"
fi

# usage errors are errors
if "$perf" ring --layout bogus >/dev/null 2>&1; then fail "bad layout accepted"; fi
if "$perf" ring --size 1,2 >/dev/null 2>&1; then fail "size list accepted by ring"; fi
if "$perf" ring --queue-size 100 >/dev/null 2>&1; then fail "split size 100 accepted"; fi
echo ok
