#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job: build an optimized virtq and run the whole stack end to end,
# no VM needed.
#
#  1. the rings alone: virtq-perf ring, split and packed, two threads;
#  2. virtio-net over vhost-user between two processes: virtq-net as the
#     backend, virtq-perf net as the guest (our virtio-user frontend):
#     loopback round trips with every byte checked, TX into a sink, RX from
#     a source;
#  3. virtio-vsock over vhost-user: virtq-vsock plus virtq-perf vsock as
#     guest and host program, every byte checked;
#  4. a short A/B table of the techniques (paired runs, alternating order).
#
# Exits non-zero if any step fails.  Takes about two minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build

build=build-release
if [ ! -f $build/build.ninja ]; then
	meson setup $build --buildtype=release -Db_ndebug=true >/dev/null
fi
ninja -C $build >/dev/null
perf=$build/tools/virtq-perf
net=$build/tools/net/virtq-net
vsock=$build/tools/vsock/virtq-vsock
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }

step "1. rings: two threads, one queue, 1 s each (placement = core-to-core latency)"
for layout in split packed; do
	for inorder in off on; do
		"$perf" ring --layout $layout --in-order $inorder --busy-poll 50 --seconds 1
	done
done

step "2. virtio-net over vhost-user: virtq-net <-> virtq-perf net"
"$net" --socket-path "$tmp/net.sock" --quiet loopback > "$tmp/net.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$tmp/net.sock" ] && break; sleep 0.1; done
for layout in off on; do
	echo "-- loopback, packed=$layout: request/response with every frame verified"
	"$perf" net --socket-path "$tmp/net.sock" --direction rr --packed $layout \
		--size 64 --seconds 2 --verify
done
echo "-- TX into a sink, RX from a source (64 B frames, split and packed)"
for dir in tx rx; do
	mode=sink; [ $dir = rx ] && mode=source
	for layout in off on; do
		"$perf" net --backend "$net --quiet $mode" --direction $dir --packed $layout \
			--size 64 --seconds 2 $([ $dir = rx ] && echo --verify)
	done
done

step "3. virtio-vsock over vhost-user: virtq-vsock <-> virtq-perf vsock"
for dir in rx tx; do
	"$perf" vsock --backend "$vsock" --direction $dir --bytes 64M --buf-size 64K
done

step "4. A/B tables of the techniques on the ring benchmark (6 pairs each, alternating order)"
echo "-- used-ring batching: A = publish each used entry, B = one publish per burst"
"$perf" ab --quiet --pairs 6 --seconds 0.3 --a "--used-batch 1" --b "--used-batch 32" \
	-- ring --layout split,packed --busy-poll 50
echo "-- VIRTIO_F_IN_ORDER: A = off, B = on"
"$perf" ab --quiet --pairs 6 --seconds 0.3 --a "--in-order off" --b "--in-order on" \
	-- ring --layout split,packed --busy-poll 50
echo "-- busy polling: A = sleep on the eventfd when dry, B = poll 50 us first"
"$perf" ab --quiet --pairs 6 --seconds 0.3 --a "--busy-poll 0" --b "--busy-poll 50" \
	-- ring --layout split,packed

printf '\ndemo: every step passed\n'
