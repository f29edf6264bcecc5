#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The seeds' techniques as paired A/B runs of virtq-perf net against
# virtq-net (no VM, no DPDK): each table is `virtq-perf ab` output.
#
#   used-batch  TX: --used-batch 1 (publish each used entry) vs once per
#               burst - the vhost_net "TX datacopy batching" result (+15%)
#   in-order    TX: VIRTIO_F_IN_ORDER off vs on (+19% TX in its patch)
#   busy-poll   RR: no busy polling vs 50 us on both sides - latency and
#               notifications per transaction
#
#   bench/net-ab.sh [-B BUILD_DIR] [-p PAIRS] [-s SECONDS] [-o OUT]
set -u
cd "$(dirname "$0")/.."
BUILD=build PAIRS=8 SECS=2 OUT=
while [ $# -gt 0 ]; do
	case $1 in
	-B) BUILD=$2; shift ;;
	-p) PAIRS=$2; shift ;;
	-s) SECS=$2; shift ;;
	-o) OUT=$2; shift ;;
	-h|--help) sed -n '2,14p' "$0"; exit 0 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
VNET=$(realpath "$BUILD/tools/net/virtq-net")
VPERF=$BUILD/tools/virtq-perf
[ -x "$VNET" ] && [ -x "$VPERF" ] || { echo "build first: $BUILD" >&2; exit 1; }
[ -n "$OUT" ] && exec > >(tee "$OUT")

echo "# virtq net A/B, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); virtq $(git rev-parse --short HEAD 2>/dev/null)"
echo "# frontend (virtq-perf net) on CPU 0, virtq-net worker on CPU 1; $PAIRS pairs of ${SECS}s runs"
ab() { "$VPERF" ab --pairs "$PAIRS" --seconds "$SECS" "$@" 2>/dev/null; echo; }

echo "## used-batch: A = --used-batch 1, B = once per burst (64 B TX, sink)"
ab --a "--used-batch 1" --b "--used-batch 0" -- \
	net --backend "$VNET --quiet --cpu 1 --busy-poll 1000000 sink" --cpu 0 \
	--direction tx --size 64,1518 --packed off,on

echo "## in-order: A = off, B = on (64 B TX, sink)"
ab --a "--in-order off" --b "--in-order on" -- \
	net --backend "$VNET --quiet --cpu 1 --busy-poll 1000000 sink" --cpu 0 \
	--direction tx --size 64 --packed off,on

echo "## busy-poll: A = sleep on eventfds, B = 50 us busy polling on both sides (64 B RR, loopback)"
echo "## (transactions/s; the JSON of each run also has p50/p99 latency and kicks per transaction)"
ab --a "--busy-poll 0 --backend-busy-poll 0" --b "--busy-poll 50 --backend-busy-poll 50" -- \
	net --backend "$VNET --quiet --cpu 1 loopback" --cpu 0 --direction rr --packed off,on
