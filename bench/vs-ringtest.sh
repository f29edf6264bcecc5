#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# virtq-perf ring beside the Linux kernel's tools/virtio/ringtest: the
# ring protocol's floor on this machine (issue "the packed ring at the
# protocol's floor").  ringtest is GPL-2.0: this script builds and runs it
# from where it is, in a scratch copy, and copies nothing from it.
#
# Each round runs every pairing once, ringtest and virtq-perf with the
# same buffer count, both threads pinned to CPUS and polling, each process
# timed whole (ops/s = buffers / elapsed); the order within a pair
# alternates by round and each pair is labelled by the placement probed
# just before it (virtq-perf c2c).  virtq-perf ab --pairs-file gives, per
# pairing, virtq/ringtest as a geometric mean with its 95% interval.
#
#   pairing         ringtest program     virtq-perf ring
#   split           virtio_ring_0_9      --layout split --in-order off
#   split-inorder   virtio_ring_inorder  --layout split --in-order on
#   packed          ring                 --layout packed --in-order off
#   packed-inorder  ring                 --layout packed --in-order on
#
# usage: bench/vs-ringtest.sh [BUILD_DIR]        (default: build-release)
# environment: ROUNDS (6), BUFFERS (10000000), CPUS (0,1: the driver's,
#              the device's), RINGTEST (the ringtest sources; default
#              ../shared/lab/ringtest beside the repository), OUT (a copy
#              of the output), EXTRA (more ab options, e.g.
#              --same-placement), ONLY (the pairings to run, by name, e.g.
#              "packed packed-inorder"; default all four), PAIRS_OUT (a
#              directory to keep the pairs files in, one per pairing named
#              after it: bench/results.sh reads them)
# Without ringtest it says where it looked and exits 2, measuring nothing.
set -euo pipefail

cd "$(dirname "$0")/.."
build=${1:-build-release}
perf=$build/tools/virtq-perf
rounds=${ROUNDS:-6}
buffers=${BUFFERS:-10000000}
cpus=${CPUS:-0,1}
ringtest=${RINGTEST:-../shared/lab/ringtest}
extra=${EXTRA:-}

if [ ! -f "$ringtest/main.c" ] || [ ! -f "$ringtest/ring.c" ]; then
	echo "vs-ringtest.sh: no ringtest sources at $ringtest" >&2
	echo "  set RINGTEST to a copy of the kernel's tools/virtio/ringtest;" >&2
	echo "  nothing was measured" >&2
	exit 2
fi
if [ ! -x "$perf" ]; then
	echo "vs-ringtest.sh: $perf not found; build first:" >&2
	echo "  meson setup $build --buildtype=release -Db_ndebug=true && ninja -C $build" >&2
	exit 1
fi
driver_cpu=${cpus%,*}
device_cpu=${cpus#*,}

tmp=$(mktemp -d /tmp/vs-ringtest.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cp -r "$ringtest"/. "$tmp/src"
# ringtest's ptr_ring.c includes a kernel header by a relative path; a
# copy that carries a shim for it builds with the shim's directory first.
shim=()
[ -d "$tmp/src/shim/a/b/c" ] && shim=(CPPFLAGS="-I$tmp/src/shim/a/b/c" VPATH="$tmp/src/shim/a/b/c")
make -s -C "$tmp/src" "${shim[@]}" ring virtio_ring_0_9 virtio_ring_inorder >"$tmp/make.log" 2>&1 || {
	cat "$tmp/make.log" >&2
	echo "vs-ringtest.sh: ringtest did not build" >&2
	exit 1
}

# rate CMD...: run CMD, print its rate in ops/s (0 when it failed).
rate() {
	local start end
	start=$(date +%s%N)
	if ! "$@" >/dev/null 2>&1; then
		echo "vs-ringtest.sh: failed: $*" >&2
		echo 0
		return
	fi
	end=$(date +%s%N)
	awk -v n="$buffers" -v ns=$((end - start)) 'BEGIN { printf "%.0f", n / (ns / 1e9) }'
}

placement() {
	"$perf" c2c "$cpus" 2>/dev/null | grep -oE '\((near|far)\)' | tr -d '()' || true
}

pairings="split virtio_ring_0_9 --layout split --in-order off
split-inorder virtio_ring_inorder --layout split --in-order on
packed ring --layout packed --in-order off
packed-inorder ring --layout packed --in-order on"
if [ -n "${ONLY:-}" ]; then
	pairings=$(while read -r name rest; do
		case " $ONLY " in *" $name "*) echo "$name $rest" ;; esac
	done <<<"$pairings")
	if [ -z "$pairings" ]; then
		echo "vs-ringtest.sh: ONLY=\"$ONLY\" names no pairing (split split-inorder packed packed-inorder)" >&2
		exit 1
	fi
fi

{
	echo "# bench/vs-ringtest.sh $(date -u +%Y-%m-%dT%H:%MZ) $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
	echo "# $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
	echo "# $rounds rounds of $buffers buffers, CPUs $cpus, A = ringtest, B = virtq-perf ring"
} | tee "$tmp/out"

for round in $(seq "$rounds"); do
	while read -r name program args; do
		rt=("$tmp/src/$program" --guest-affinity "$driver_cpu" --host-affinity "$device_cpu"
		    --run-cycles "$buffers")
		# shellcheck disable=SC2206  # the pairing's options, one word each
		vq=("$perf" ring $args --busy-poll 100000 --ops "$buffers" --cpu "$cpus" --placement off)
		place=$(placement)
		if [ $((round % 2)) = 0 ]; then
			a=$(rate "${rt[@]}")
			b=$(rate "${vq[@]}")
		else
			b=$(rate "${vq[@]}")
			a=$(rate "${rt[@]}")
		fi
		echo "$a $b ${place:-}" >>"$tmp/$name"
		awk -v r="$round" -v n="$name" -v a="$a" -v b="$b" -v p="${place:-placement unknown}" \
			'BEGIN { printf "round %s %s: ringtest %.2f virtq %.2f Mops/s %s\n", r, n, a / 1e6, b / 1e6, p }'
	done <<<"$pairings"
done | tee -a "$tmp/out"

files=()
while read -r name _; do files+=(--pairs-file "$tmp/$name"); done <<<"$pairings"
# shellcheck disable=SC2086  # EXTRA is a list of options
"$perf" ab --ratio "${files[@]}" $extra | tee -a "$tmp/out"
[ -z "${OUT:-}" ] || cp "$tmp/out" "$OUT"
if [ -n "${PAIRS_OUT:-}" ]; then
	mkdir -p "$PAIRS_OUT"
	while read -r name _; do cp "$tmp/$name" "$PAIRS_OUT/$name"; done <<<"$pairings"
fi
