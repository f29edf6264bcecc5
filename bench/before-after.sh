#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A change's data-path before and after: the set every wave checks for
# regressions (issue 31's), each cell a `virtq-perf ab` run of the build
# before (A) against the build after (B), pairs alternating.
#
#   ring   split and packed, both threads pinned and polling
#   net    64 B TX into virtq-net sink, 64 B RX from virtq-net source,
#          split and packed; TX three ways: the sink sleeping as soon as
#          it runs dry, polling a fixed 5 us first, and with each build's
#          default (adaptive since a75f9e7, sleeping before), so that a
#          change to the ring's speed and a change to how often a drained
#          back-end sleeps and is kicked are told apart (a faster pop
#          alone can make a sleeping sink slower); RX and vsock run
#          each build's default
#   vsock  64 KiB host->guest (rx) and guest->host (tx), pinned alike:
#          the back-end (taskset, so any build) and the guest's thread on
#          CPU 0, the host program on CPU 1; floating, three threads on
#          two CPUs move a run by more than a change does
#
#   bench/before-after.sh BUILD_BEFORE BUILD_AFTER [PAIRS]
#
# Both are build directories of release builds (meson --buildtype=release).
# The net back-ends are pinned to CPU 1, as in RESULTS.md's net cells: an
# unpinned one moved from run to run by more than one run's interval.
# virtq-perf of BUILD_AFTER drives the net and vsock runs, so only the
# back-ends differ there; the ring runs use each build's own virtq-perf.
set -euo pipefail
a=$(cd "$1" && pwd) b=$(cd "$2" && pwd) pairs=${3:-12}
perf=$b/tools/virtq-perf

echo "== ring"
"$perf" ab --pairs "$pairs" --a-exe "$a/tools/virtq-perf" --a "" --b "" -- \
	ring --layout split,packed --busy-poll 50 --cpu 0,1
for poll in "--busy-poll 0" "--busy-poll 5" ""; do
	echo "== net TX into the sink, ${poll:-the default idle policy}"
	"$perf" ab --pairs "$pairs" \
		--a "--backend '$a/tools/net/virtq-net --quiet --cpu 1 $poll sink'" \
		--b "--backend '$b/tools/net/virtq-net --quiet --cpu 1 $poll sink'" -- \
		net --direction tx --size 64 --packed off,on --cpu 0
done
echo "== net RX from the source"
"$perf" ab --pairs "$pairs" \
	--a "--backend '$a/tools/net/virtq-net --quiet --cpu 1 source --size 64'" \
	--b "--backend '$b/tools/net/virtq-net --quiet --cpu 1 source --size 64'" -- \
	net --direction rx --packed off,on --cpu 0
echo "== vsock, pinned alike"
"$perf" ab --pairs "$pairs" \
	--a "--backend 'taskset -c 0 $a/tools/vsock/virtq-vsock'" \
	--b "--backend 'taskset -c 0 $b/tools/vsock/virtq-vsock'" -- \
	vsock --direction rx,tx --buf-size 64K --bytes 256M --cpu 0,1 --placement on
