#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# virtq-vsock against the UNIX socket it feeds (issue 26): every figure a
# ratio from one interleaved run of virtq-perf ab (A and B alternate, half
# the pairs each order), with its 95% Student t interval.
#
#   1. throughput: A = the UNIX socket pair (--transport unix), B = vsock
#      through virtq-vsock, the same transfer between the same two threads;
#      rx (host -> guest) and tx (guest -> host), 4 KiB and 64 KiB writes.
#      Targets: B/A >= 0.6 at 64 KiB, >= 0.5 at 4 KiB.
#   2. ping-pong p50 of 64 B, busy polling on both sides (ours with
#      --busy-poll, the backend's with --backend-busy-poll): B/A <= 2.
#      Where the threads run decides it (waking an idle vCPU costs tens of
#      microseconds): first as the scheduler places them, then on the same
#      CPUs for both transports: our two threads on CPU 0 (--cpu 0,0), the
#      backend on CPU 1 (taskset in its command).  Then without polling.
#   3. 256 connections: A = one connection, B = 256 (both --conns, the same
#      code), aggregate B/A >= 0.8; and the fairness (the slowest
#      connection's rate over the fair share, in the window all streamed)
#      of 256 vsock connections against 256 socket pairs: vsock's >= 0.5.
#   4. backpressure: 16 connections, one whose receiver reads nothing
#      until the others ended (--stall 1) against none stalled: the
#      others' total rate in the window, B/A ~ 1 if they went on at speed.
#   5. memory per idle connection: the backend's RssAnon, 256 idle
#      connections against none (one run per direction; deterministic).
#
# Prints the date, the machine, the commit, every command and its table
# (to OUT too when set).  The seed experiment's rerun is
# bench/vsock-rx-batching.sh.
#
# usage: bench/vsock-vs-socket.sh [BUILD_DIR]          (default: build-release)
# environment: PAIRS (20), BYTES (256M per run), CONN_BYTES (1G per run),
#              ITERS (20000 round trips), BP (50 us), OUT (a copy of the output)
set -euo pipefail

cd "$(dirname "$0")/.."
build=${1:-build-release}
perf=$build/tools/virtq-perf
daemon=$build/tools/vsock/virtq-vsock
pairs=${PAIRS:-20}
bytes=${BYTES:-256M}
cbytes=${CONN_BYTES:-1G}
iters=${ITERS:-20000}
bp=${BP:-50}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)


for f in "$perf" "$daemon"; do
	if [ ! -x "$f" ]; then
		echo "vsock-vs-socket.sh: $f not found; build first:" >&2
		echo "  meson setup $build --buildtype=release -Db_ndebug=true && ninja -C $build" >&2
		exit 1
	fi
done
tmp=$(mktemp -d /tmp/vsock-vs-socket.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
out=${OUT:-$tmp/out}

# ab ARGS...: run, record the command and ab's table of B/A (--ratio); a
# failed run (e.g. a fairness of 0: a starved connection, which a geometric
# mean cannot take) is recorded with its message, and the next set runs
ab() {
	echo "\$ virtq-perf ab --ratio --pairs $pairs $*" >> "$out"
	"$perf" ab --quiet --ratio --pairs "$pairs" "$@" >> "$out" 2> "$tmp/ab.err" ||
		sed 's/^/FAILED: /' "$tmp/ab.err" >> "$out"
	echo >> "$out"
}

model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
{
	echo "# virtq-vsock against the UNIX socket it feeds (bench/vsock-vs-socket.sh)"
	echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "machine: $(nproc) CPUs, ${model:-unknown CPU}, Linux $(uname -r)"
	echo "commit:  $commit"
	echo "build:   $build"
	echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
	echo "settings: $pairs pairs; $bytes per throughput run, $cbytes per --conns run,"
	echo "          $iters round trips per ping-pong, busy polling $bp us"
	echo "A = --transport unix (a UNIX socket pair between the same two threads),"
	echo "B = vsock through $daemon, unless said"
	echo
} > "$out"

b="--backend $daemon"
echo "## 1. throughput, B/A = vsock / socket (targets: >= 0.6 at 64K, >= 0.5 at 4K)" >> "$out"
ab --a "--transport unix" --b "$b" -- vsock --bytes "$bytes" --buf-size 4K,64K \
	--direction rx,tx --placement on

echo "## 2. ping-pong 64 B, p50, busy polling on both sides (target: B/A <= 2)" >> "$out"
echo "##    threads where the scheduler puts them" >> "$out"
ab --metric p50_us --a "--transport unix" --b "$b --backend-busy-poll $bp" -- \
	vsock --latency --buf-size 64 --iters "$iters" --busy-poll "$bp" --placement on
echo "## 2b. the same on the same CPUs: our two threads on CPU 0, the backend on CPU 1" >> "$out"
ab --metric p50_us --a "--transport unix" \
	--b "--backend 'taskset -c 1 $daemon' --backend-busy-poll $bp" -- \
	vsock --latency --buf-size 64 --iters "$iters" --busy-poll "$bp" --cpu 0,0
echo "## 2c. without busy polling, as the scheduler places them, then as in 2b" >> "$out"
ab --metric p50_us --a "--transport unix" --b "$b" -- \
	vsock --latency --buf-size 64 --iters "$iters" --placement on
ab --metric p50_us --a "--transport unix" --b "--backend 'taskset -c 1 $daemon'" -- \
	vsock --latency --buf-size 64 --iters "$iters" --cpu 0,0

echo "## 3. 256 connections against one, vsock (target: aggregate B/A >= 0.8)" >> "$out"
ab --a "--conns 1" --b "--conns 256" -- vsock $b --bytes "$cbytes" --direction rx,tx \
	--placement on
echo "## 3b. fairness of 256 connections: slowest / fair share (target: vsock >= 0.5)" >> "$out"
ab --metric fairness --a "--transport unix" --b "$b" -- vsock --conns 256 \
	--bytes "$cbytes" --direction rx,tx --placement on

echo "## 4. backpressure: 16 connections, 1 stalled against none; the others' total" >> "$out"
echo "##    rate in the window (window_gbps): B/A ~ 1 when the stall does not slow them" >> "$out"
ab --metric window_gbps --a "--conns 16" --b "--conns 16 --stall 1" -- vsock $b \
	--bytes "$cbytes" --direction rx,tx --placement on

echo "## 5. memory per idle connection: the backend's RssAnon, 256 idle against none" >> "$out"
for d in rx tx; do
	echo "\$ virtq-perf vsock $b --conns 256 --bytes 64M --direction $d --stall 1" >> "$out"
	"$perf" vsock $b --conns 256 --bytes 64M --direction $d --stall 1 2>/dev/null |
		{ grep -v '^    ' || true; } >> "$out"
done
echo >> "$out"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at the end" >> "$out"
cat "$out"
