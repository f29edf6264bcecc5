#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build and run every test: the README's test command and CI's only step.
#
#   build/        gcc, -Werror: all tests, then the ABI check (abi-check.sh)
#   build-release/ gcc -O3, -Werror: the two-thread tests (the demo's and
#                 the benchmarks' build: -O3 reorders what -O0 does not,
#                 and finds warnings the debug build does not)
#   build-asan-clang/ clang, -Werror, ASan+UBSan: all tests (clang's UBSan
#                 also flags pointer arithmetic on NULL, which gcc's does
#                 not).  Its compile is also the clang -Werror check: the
#                 same -O0 code, and no source line depends on a sanitizer
#                 but tools/perf/vsock_check.c's TSan branch, which
#                 build-tsan compiles
#   build-tsan/   clang, -Werror, TSan: the two-thread tests (suite
#                 'threads'), only what they run compiled
#   build-fuzz/   clang libFuzzer targets, run briefly (suite 'fuzz'),
#                 only they compiled
#   build-s390x/  gcc for s390x (big-endian) under qemu-user: the library's
#                 unit tests that need no x86 and no peer (cross/s390x.ini)
#
# Two lanes share the two CPUs.  The foreground runs what is timed or
# needs the machine: the QEMU guests one at a time, then the tests meson
# runs alone (is_parallel: false; busy-polling peers), then the fuzzers.
# The background, niced, compiles the other builds and runs every test
# meson may run beside another (the guests leave a CPU mostly idle).
# Ends with "N passed, N failed" over every meson test run.  With CI=true
# a test that cannot find its peer fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test

# The guests' images fetch their kernels (network-bound): start now.
# guest-test.sh waits for them (build-guest.sh holds a lock per cache)
# and builds them itself if this failed.
# The same path as guest-test.sh's: the image's stamp hashes the script
# by its path.
( "$PWD/tests/guest/build-guest.sh"; VIRTQ_GUEST_KERNEL=6.12 "$PWD/tests/guest/build-guest.sh" ) \
	>/dev/null 2>&1 &

jobs=$(nproc)
out=$(mktemp -d)
# A foreground that ends early (set -e, a signal) takes the background
# lane down with it, its builds and tests too (its own process group).
stop_lane() {
	[ -z "${background_pid:-}" ] || kill -TERM -- "-$background_pid" 2>/dev/null || true
}
trap 'stop_lane; rm -rf "$out"' EXIT

# setup DIR CC [meson options...]: configure once, reconfigure when options change.
configure() {
	local dir=$1 cc=$2
	shift 2
	if [ -f "$dir/build.ninja" ]; then
		meson configure "$dir" "$@" >/dev/null
	else
		CC=$cc meson setup "$dir" "$@" >/dev/null
	fi
}
setup() {
	configure "$@"
	ninja -C "$1" -j "$jobs" >/dev/null
}

# tests DIR PARALLEL [SUITE...]: the names of DIR's tests with is_parallel
# PARALLEL (true|false) in none of the SUITEs.
tests() {
	meson introspect "$1" --tests | python3 -c '
import json, sys
par, skip = sys.argv[1] == "true", {"virtq:" + s for s in sys.argv[2:]}
for t in json.load(sys.stdin):
    if t["is_parallel"] == par and not skip & set(t["suite"]):
        print(t["name"])' "${@:2}"
}
# targets DIR SUITE: what SUITE's tests run and depend on, for ninja.
targets() {
	meson introspect "$1" --tests --targets | python3 -c '
import json, os, sys
d, suite = json.load(sys.stdin), "virtq:" + sys.argv[2]
root = os.path.realpath(sys.argv[1]) + "/"
files = {t["id"]: t["filename"] for t in d["targets"]}
out = set()
for t in d["tests"]:
    if suite in t["suite"]:
        for i in t["depends"]:
            out.update(f[len(root):] for f in files.get(i, []) if f.startswith(root))
print("\n".join(sorted(out)))' "$1" "$2"
}

# run DIR NAME [meson test args...]: run tests (log meson-logs/NAME.json),
# count their results into $out/NAME.count.
run() {
	local dir=$1 name=$2 rc=0
	shift 2
	# No test named (meson would run them all): every lane has tests, so
	# its list came out empty by mistake, and the lane fails.
	if [ $# -eq 0 ]; then
		echo "== $dir: lane $name has no test to run: FAIL"
		fail "$name" "$dir($name: no tests)"
		return 0
	fi
	if [ $# -gt 8 ]; then echo "== $dir: meson test, $# tests ($name)"; else echo "== $dir: meson test $*"; fi
	meson test -C "$dir" --no-rebuild --logbase "$name" --print-errorlogs --num-processes "$jobs" "$@" || rc=$?
	local log="$dir/meson-logs/$name.json" p=0 f=0 s=0
	if [ -f "$log" ]; then
		p=$(grep -c '"result": "OK"' "$log" || true)
		f=$(grep -cE '"result": "(FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS)"' "$log" || true)
		s=$(grep -c '"result": "SKIP"' "$log" || true)
	fi
	# In CI every test must run: one that skips (exit 77) fails the run.
	if [ "$s" -gt 0 ]; then
		echo "$dir: $s test(s) skipped$([ "${CI:-}" = true ] && echo ': a failure with CI=true')"
		[ "${CI:-}" = true ] && f=$((f + s))
	fi
	# A failure meson could not attribute to a test still fails the run,
	# and so does a run of no test (a suite that matched none: meson says
	# so and exits 0).
	[ $rc -eq 0 ] || [ "$f" -gt 0 ] || f=1
	if [ $((p + f + s)) -eq 0 ]; then
		echo "$dir: lane $name ran no test: FAIL"
		f=1
	fi
	echo "$p $f $dir($name)" > "$out/$name.count"
	[ "$f" -eq 0 ] || failure_digest "$log" >> "$out/$name.digest"
}
# run_listed DIR NAME PARALLEL [SUITE...]: run the tests tests() lists.  A
# list that could not be made fails the lane (a process substitution's
# status would be lost, and with it the lane's tests).
run_listed() {
	local dir=$1 name=$2 list names=()
	if ! list=$(tests "$dir" "${@:3}"); then
		echo "== $dir: cannot list lane $name's tests (meson introspect): FAIL"
		fail "$name" "$dir($name: no test list)"
		return 0
	fi
	[ -z "$list" ] || mapfile -t names <<< "$list"
	run "$dir" "$name" "${names[@]}"
}
# fail NAME WHAT: a step that is no meson test failed.
fail() { echo "0 1 $2" > "$out/$1.count"; }
pass() { echo "1 0 $2" > "$out/$1.count"; }

# The end of each failed test's output, printed again after the totals: a
# CI report that keeps only the tail of the output still says why.
failure_digest() {
	[ -f "$1" ] || return 0
	python3 - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1], errors="replace"):
    try:
        t = json.loads(line)
    except ValueError:
        continue
    if t.get("result") in ("OK", "SKIP", "EXPECTEDFAIL"):
        continue
    out = ((t.get("stdout") or "") + (t.get("stderr") or "")).rstrip().splitlines()[-30:]
    print(f"--- {t.get('name')}: {t.get('result')} (last {len(out)} lines)")
    print("\n".join(out))
PY
}

setup build gcc -Dwerror=true

# The big-endian proof: spec.h's byte swaps run for real.  Left out:
# tests that need a peer or x86, vhu_backend (qemu-user's eventfds),
# vhu_e2e (qemu-user cannot map its hugetlbfs guest), vsock_seqpacket
# (qemu-user drops a sendmsg with no iovec, a zero-length message).
s390x_tests=(mem endian cross threads
	split_basic split_in_order split_notify split_hostile_driver split_hostile_device
	packed_ring packed_in_order packed_hostile
	runtime_loop runtime_ring runtime_wakeup net_device perf_dirty_log
	vhu_codec vsock_stream vsock_hostile abi_version abi_reserved)
fuzz_opt() { grep -q "option('fuzz'" meson_options.txt 2>/dev/null; }
ubsan=halt_on_error=1:print_stacktrace=1 asan=detect_leaks=1

# await DIR: the background lane has compiled DIR (status in $out/DIR.built).
# A lane gone without writing it (killed, or stopped by set -e) fails the
# wait at once: CI would otherwise hang until its time limit.
await() {
	while [ ! -f "$out/$1.built" ]; do
		if ! kill -0 "${background_pid:-}" 2>/dev/null; then
			# It may have written the file just before it ended.
			[ -f "$out/$1.built" ] && break
			echo "$1: the background lane ended before it built $1: FAIL"
			fail "$1-await" "$1(background lane gone)"
			return 1
		fi
		sleep 1
	done
	[ "$(cat "$out/$1.built")" = 0 ]
}
# built DIR STATUS: tell the foreground; a failed compile counts as a failure.
built() {
	echo "$2" > "$out/$1.built"
	[ "$2" = 0 ] || { echo "$1: the compile failed"; fail "$1-compile" "$1(compile)"; }
}
# build_for DIR SUITE CC [meson options...]: configure DIR, compile only
# what SUITE's tests run and depend on, and tell the foreground.  No
# target is a failure: ninja would compile everything instead.
build_for() {
	local dir=$1 suite=$2 rc=0 t=
	shift 2
	configure "$dir" "$@" && t=$(targets "$dir" "$suite") || rc=$?
	if [ $rc = 0 ] && [ -z "$t" ]; then
		echo "$dir: no target for suite $suite"
		rc=1
	fi
	[ $rc != 0 ] || ninja -C "$dir" -j "$jobs" $t >/dev/null || rc=$?
	built "$dir" $rc
}

# ---- background lane: compiles, then the tests that may share the CPUs ----
background() {
	# One job: a second one, niced or not, slowed the guests by a fifth
	# (their wakeups wait behind it).
	local rc jobs=1
	renice -n 10 -p "$BASHPID" >/dev/null 2>&1 || true
	rc=0; setup build-asan-clang clang -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false || rc=$?
	built build-asan-clang $rc
	if fuzz_opt; then build_for build-fuzz fuzz clang -Dfuzz=true -Db_lundef=false; fi
	rc=0; setup build-release gcc -Dwerror=true --buildtype=release || rc=$?
	built build-release $rc
	build_for build-tsan threads clang -Dwerror=true -Db_sanitize=thread -Db_lundef=false
	rc=0
	{ [ -f build-s390x/build.ninja ] ||
		meson setup build-s390x --cross-file cross/s390x.ini -Dwerror=true >/dev/null; } &&
		{ meson configure build-s390x -Dwerror=true >/dev/null && ninja -C build-s390x -j "$jobs" >/dev/null; } || rc=$?
	built build-s390x $rc

	run_listed build build-shared true guest
	if await build-release; then run build-release release-threads --suite threads; fi
	if await build-asan-clang; then
		UBSAN_OPTIONS=$ubsan ASAN_OPTIONS=$asan run_listed build-asan-clang asan-shared true
	fi
	if await build-tsan; then TSAN_OPTIONS=halt_on_error=1 run build-tsan tsan-threads --suite threads; fi
	if await build-s390x; then run build-s390x s390x --timeout-multiplier 4 "${s390x_tests[@]}"; fi
}
set -m                  # this one job in a process group of its own
background < /dev/null > "$out/background.log" 2>&1 &
background_pid=$!
set +m

# ---- foreground: the guests, then what must run alone, then the fuzzers ----
run build guests --suite guest
run_listed build build-alone false guest

# A consumer built against the installed headers, library and pkg-config file.
echo "== install: a consumer of the installed library"
dest=$(mktemp -d)
if DESTDIR=$dest meson install -C build --quiet >/dev/null &&
   pc=$(dirname "$(find "$dest" -name virtq.pc | head -n 1)") &&
   flags=$(PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_PATH=$pc pkg-config --cflags --libs virtq) &&
   cc -std=gnu11 -Wall -Wextra -Werror examples/consumer.c $flags -o "$dest/consumer" &&
   LD_LIBRARY_PATH=$(dirname "$(find "$dest" -name libvirtq.so | head -n 1)") "$dest/consumer"; then
	pass install install
else
	echo "install: FAIL"
	fail install install
fi
rm -rf "$dest"

# The ABI against the stored release baseline (abi/*.abi, gcc's DWARF:
# so after the gcc build).  An intended break regenerates the baseline
# with scripts/abi-baseline.sh, deliberately.
echo "== abi: libvirtq.so against abi/libvirtq-*.abi"
if scripts/abi-check.sh build; then pass abi abi-check; else fail abi abi-check; fi

if await build-asan-clang; then
	UBSAN_OPTIONS=$ubsan ASAN_OPTIONS=$asan run_listed build-asan-clang asan-alone false
fi
if fuzz_opt && await build-fuzz; then run build-fuzz fuzz --suite fuzz; fi

background_rc=0
wait "$background_pid" || background_rc=$?
background_pid=
echo
echo "== the background lane"
cat "$out/background.log"
# A lane that ended early (set -e, a kill) skipped whatever came after.
if [ $background_rc != 0 ]; then
	echo "the background lane failed (exit $background_rc): FAIL"
	fail background "background-lane(exit $background_rc)"
fi

echo
passed=0
failed=0
failed_names=()
for c in "$out"/*.count; do
	read -r p f what < "$c"
	passed=$((passed + p))
	failed=$((failed + f))
	[ "$f" -eq 0 ] || failed_names+=("$what")
done
if ls "$out"/*.digest >/dev/null 2>&1; then
	echo "== the failed tests' last lines"
	cat "$out"/*.digest
fi
[ ${#failed_names[@]} -eq 0 ] || echo "failures in: ${failed_names[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
