#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's quick start, as a user types it (issue 36 item 1): its first
# code block is read from the README and run line by line - the back-end
# in the background, then scripts/guest.sh echoing frames through it - with
# one change: the build under test stands in for build-release/, so the
# lines that make that build (deps.sh, meson, ninja) are checked to be
# there, not run.  Passes when the guest's gnet echo says every frame came
# back (ECHO ... ok=N ... result=PASS) and virtq-net counted them.
#
# Environment: VIRTQ_BUILD_DIR (the meson build dir), CI=true (a missing
# QEMU fails instead of skipping).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${VIRTQ_BUILD_DIR:-$REPO/build}
cd "$REPO"
fail() { echo "FAIL: $*"; exit 1; }
if ! command -v qemu-system-x86_64 >/dev/null; then
	[ "${CI:-}" = true ] && fail "qemu-system-x86_64 not installed"
	echo "SKIP: qemu-system-x86_64 not installed"
	exit 77
fi

# The block: indented lines after "## Quick start", up to the first
# unindented line that follows them.
mapfile -t block < <(awk '/^## Quick start/ { q = 1; next }
	q && /^    / { print substr($0, 5); seen = 1; next }
	q && seen { exit }' README.md)
[ ${#block[@]} -ge 4 ] || fail "no quick start block in README.md (${#block[@]} lines)"
printf '    %s\n' "${block[@]}"
case ${block[0]} in "scripts/deps.sh build"*) ;; *) fail "line 1 is not deps.sh build: ${block[0]}" ;; esac
case ${block[1]} in "meson setup build-release "*"ninja -C build-release"*) ;; *) fail "line 2 does not build build-release: ${block[1]}" ;; esac

PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null' EXIT
out=$(mktemp -d /tmp/vq-quickstart.XXXXXX)
for ((i = 2; i < ${#block[@]}; i++)); do
	line=${block[$i]//build-release\//$BUILD/}
	case $line in
	*"&")
		bash -c "exec ${line%&}" > "$out/bg$i.out" 2>&1 &
		PIDS+=($!)
		sock=$(echo "$line" | grep -oE -- '--socket-path [^ ]+' | cut -d' ' -f2)
		for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
		[ -S "$sock" ] || fail "line $((i + 1)) made no socket: $(cat "$out/bg$i.out")"
		;;
	*)
		bash -c "$line" > "$out/fg$i.out" 2>&1
		rc=$?
		cat "$out/fg$i.out"
		[ $rc = 0 ] || fail "line $((i + 1)) exited $rc"
		;;
	esac
done
last=$(grep -a '^ECHO ' "$out/fg$((${#block[@]} - 1)).out" | tail -n 1)
n=$(echo "${block[-1]}" | grep -oE -- '-n [0-9]+' | cut -d' ' -f2)
echo "$last" | grep -q "ok=$n .*result=PASS" || fail "the guest's echo: ${last:-none}"
for p in "${PIDS[@]}"; do kill -TERM "$p"; wait "$p"; done
PIDS=()
grep -q "summary" "$out"/bg*.out || fail "virtq-net printed no summary"
echo "PASS: $last; virtq-net: $(grep -h '^summary' "$out"/bg*.out | tail -n 1)"
rm -rf "$out"
