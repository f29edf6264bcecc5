#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build and run every test: the README's test command and CI's only step.
#
#   build/        gcc, -Werror: all tests, then the ABI check (abi-check.sh)
#   build-clang/  clang, -Werror: compiled only (clang's warnings; its
#                 tests run in build-asan-clang, the same -O0 code plus
#                 the sanitizers)
#   build-release/ gcc -O3, -Werror: the two-thread tests (the demo's and
#                 the benchmarks' build: -O3 reorders what -O0 does not,
#                 and finds warnings the debug build does not)
#   build-asan-clang/ clang, ASan+UBSan: all tests (clang's UBSan also
#                 flags pointer arithmetic on NULL, which gcc's does not)
#   build-tsan/   clang, TSan: the two-thread tests (suite 'threads')
#   build-fuzz/   clang libFuzzer targets, run briefly (suite 'fuzz')
#   build-s390x/  gcc for s390x (big-endian) under qemu-user: the library's
#                 unit tests that need no x86 and no peer (cross/s390x.ini)
#
# While build/'s tests run, the other builds compile in the background
# (one job, niced).  Ends with "N passed, N failed" over every meson test run.  With CI=true a
# test that cannot find its peer fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test

jobs=$(nproc)
passed=0
failed=0
failed_names=()

# setup DIR CC [meson options...]: configure once, reconfigure when options change.
setup() {
	local dir=$1 cc=$2
	shift 2
	if [ -f "$dir/build.ninja" ]; then
		meson configure "$dir" "$@" >/dev/null
	else
		CC=$cc meson setup "$dir" "$@" >/dev/null
	fi
	ninja -C "$dir" -j "$jobs" >/dev/null
}

# run DIR [meson test args...]: run tests, count results from meson's JSON log.
run() {
	local dir=$1 rc=0
	shift
	echo "== $dir: meson test $*"
	meson test -C "$dir" --print-errorlogs --num-processes "$jobs" "$@" || rc=$?
	local log="$dir/meson-logs/testlog.json" p=0 f=0 s=0
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
	# A failure meson could not attribute to a test still fails the run.
	[ $rc -eq 0 ] || [ "$f" -gt 0 ] || f=1
	passed=$((passed + p))
	failed=$((failed + f))
	[ "$f" -eq 0 ] || failed_names+=("$dir")
	[ "$f" -eq 0 ] || failure_digest "$log" >> "$digest"
}

# The end of each failed test's output, printed again after the totals: a
# CI report that keeps only the tail of the output still says why.
digest=$(mktemp)
trap 'rm -f "$digest"' EXIT
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

# The other configurations compile while build/'s tests run, one job at a
# lower priority: those tests are mostly QEMU guests one at a time, which
# leave a CPU idle.  Their own setup below then finds them built (or
# fails there, visibly, if this did).
fuzz_opt() { grep -q "option('fuzz'" meson_options.txt 2>/dev/null; }
prebuild() {
	jobs=1
	setup build-clang clang -Dwerror=true
	setup build-release gcc -Dwerror=true --buildtype=release
	setup build-asan-clang clang -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false
	setup build-tsan clang -Dwerror=true -Db_sanitize=thread -Db_lundef=false
	if fuzz_opt; then setup build-fuzz clang -Dfuzz=true -Db_lundef=false; fi
	[ -f build-s390x/build.ninja ] ||
		meson setup build-s390x --cross-file cross/s390x.ini -Dwerror=true >/dev/null
	ninja -C build-s390x -j 1 >/dev/null
}
( renice -n 10 -p "$BASHPID" >/dev/null 2>&1 || true; prebuild ) >/dev/null 2>&1 &
prebuild_pid=$!

run build
wait "$prebuild_pid" || echo "(the background builds stopped early: each is built again below)"

# A consumer built against the installed headers, library and pkg-config file.
echo "== install: a consumer of the installed library"
dest=$(mktemp -d)
if DESTDIR=$dest meson install -C build --quiet >/dev/null &&
   pc=$(dirname "$(find "$dest" -name virtq.pc | head -n 1)") &&
   flags=$(PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_PATH=$pc pkg-config --cflags --libs virtq) &&
   cc -std=gnu11 -Wall -Wextra -Werror examples/consumer.c $flags -o "$dest/consumer" &&
   LD_LIBRARY_PATH=$(dirname "$(find "$dest" -name libvirtq.so | head -n 1)") "$dest/consumer"; then
	passed=$((passed + 1))
else
	echo "install: FAIL"
	failed=$((failed + 1))
	failed_names+=(install)
fi
rm -rf "$dest"

# The ABI against the stored release baseline (abi/*.abi, gcc's DWARF:
# so after the gcc build).  An intended break regenerates the baseline
# with scripts/abi-baseline.sh, deliberately.
echo "== abi: libvirtq.so against abi/libvirtq-*.abi"
if scripts/abi-check.sh build; then
	passed=$((passed + 1))
else
	failed=$((failed + 1))
	failed_names+=(abi-check)
fi

setup build-clang clang -Dwerror=true

setup build-release gcc -Dwerror=true --buildtype=release
run build-release --suite threads

setup build-asan-clang clang -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 run build-asan-clang

setup build-tsan clang -Dwerror=true -Db_sanitize=thread -Db_lundef=false
TSAN_OPTIONS=halt_on_error=1 run build-tsan --suite threads

if fuzz_opt; then
	setup build-fuzz clang -Dfuzz=true -Db_lundef=false
	run build-fuzz --suite fuzz
fi

# The big-endian proof: spec.h's byte swaps run for real.  Left out:
# tests that need a peer or x86, vhu_backend (qemu-user's eventfds),
# vhu_e2e (qemu-user cannot map its hugetlbfs guest), vsock_seqpacket
# (qemu-user drops a sendmsg with no iovec, a zero-length message).
s390x_tests=(mem endian cross threads
	split_basic split_in_order split_notify split_hostile_driver split_hostile_device
	packed_ring packed_in_order packed_hostile
	runtime_loop runtime_ring runtime_wakeup net_device perf_dirty_log
	vhu_codec vsock_stream vsock_hostile abi_version abi_reserved)
[ -f build-s390x/build.ninja ] ||
	meson setup build-s390x --cross-file cross/s390x.ini -Dwerror=true >/dev/null
meson configure build-s390x -Dwerror=true >/dev/null
ninja -C build-s390x -j "$jobs" >/dev/null
run build-s390x --timeout-multiplier 4 "${s390x_tests[@]}"

echo
if [ -s "$digest" ]; then
	echo "== the failed tests' last lines"
	cat "$digest"
fi
[ ${#failed_names[@]} -eq 0 ] || echo "failures in: ${failed_names[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
