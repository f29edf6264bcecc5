#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A ring pause's cost, back-end A against back-end B: bench/ring-pause.c
# against virtq-net (sink mode) from two build directories, in pairs
# whose order alternates, one fresh daemon per run.  Pair lines (cycles
# per second), then virtq-perf ab's statistics of them (--pairs-file).
#
#   bench/ring-pause.sh BUILD_A BUILD_B [PAIRS] [CYCLES]
set -euo pipefail
cd "$(dirname "$0")/.."
a=$1 b=$2 pairs=${3:-10} cycles=${4:-500}
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
cc -O2 -D_GNU_SOURCE -I include -I "$b/include" bench/ring-pause.c \
	"$b/libvirtq-guest.a" "$b/libvirtq.a" -lpthread -o "$tmp/ring-pause"

# one run: the cycles per second of back-end build $1
run() {
	local sock="$tmp/s.sock" rate
	"$1/tools/net/virtq-net" --socket-path "$sock" --quiet sink >/dev/null 2>"$tmp/daemon.log" &
	local pid=$!
	rate=$("$tmp/ring-pause" "$sock" "$cycles" | sed 's/.*"cycles_per_sec": \([0-9.]*\).*/\1/')
	kill "$pid"; wait "$pid" 2>/dev/null || true
	echo "${rate:-0}"
}

out="$tmp/pairs"
for i in $(seq 1 "$pairs"); do
	if [ $((i % 2)) -eq 1 ]; then ra=$(run "$a"); rb=$(run "$b"); order=AB
	else rb=$(run "$b"); ra=$(run "$a"); order=BA; fi
	printf "pair %2d %s A %10.0f  B %10.0f\n" "$i" "$order" "$ra" "$rb"
	echo "$ra $rb" >>"$out"
done
"$b/tools/virtq-perf" ab --pairs-file "$out" --metric cycles_per_sec
