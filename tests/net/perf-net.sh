#!/bin/sh
# SPDX-License-Identifier: MIT
# virtq-perf net against virtq-net, no DPDK: the generator's three
# directions end to end, on both ring layouts, with exact counts.
#
#   perf-net.sh VIRTQ_NET VIRTQ_PERF
#
#   tx  --count N into the copying sink: N frames completed
#   rx  the source into --count N --verify: N frames of the right length
#   rr  through loopback --verify: every transaction came back with its own
#       sequence number (5.1.6 a frame is delivered as the driver wrote it)
#   rx and rr again with --dirty-log, as during a live migration: every byte
#       virtq-net wrote into a receive buffer lies in a page it marked in the
#       log before it returned the buffer (vhost-user "Migration"), and
#       once the rings stop (GET_VRING_BASE, before a migration's last
#       sync) every page of the used rings it changed is marked
#   rx and rr again behind a vIOMMU (--iommu): rings and buffers at I/O
#       virtual addresses through virtq-net's IOTLB, nothing lost or damaged,
#       and once more with --dirty-log: the log is by guest-physical page
#   tx from a driver that never sends the kicks it owes (--drop-kicks)
# Each run probes the core placement around itself and reports it, and the
# CPU time its driver and the backend spent per frame.
set -eu
VNET=$1 VPERF=$2
[ "$(nproc)" -ge 2 ] || { echo "needs 2 CPUs"; exit 77; }

fail() { echo "FAIL: $*" >&2; exit 1; }
field() { echo "$2" | sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p"; }
# The CPU each side spent per frame: both positive, the sum theirs (to
# the rounding of one decimal each), and CPUs busy in (0, 4).
cpu_adds_up() {
	awk -v d="$(field cpu_driver_per_pkt_ns "$1")" -v b="$(field cpu_backend_per_pkt_ns "$1")" \
	    -v all="$(field cpu_per_pkt_ns "$1")" -v busy="$(field cpus_busy "$1")" \
	    'BEGIN { s = all - d - b; exit !(d > 0 && b > 0 && s > -0.2 && s < 0.2 &&
						busy > 0 && busy < 4) }'
}

N=200000
for layout in "--packed off" "--packed on" "--packed off --in-order on" \
	      "--packed on --in-order on"; do
	out=$("$VPERF" net --backend "$VNET --quiet --cpu 1 --copy sink" --cpu 0 \
		$layout --direction tx --count $N --json) || fail "tx $layout"
	[ "$(field packets "$out")" = $N ] || fail "tx $layout: $out"
	cpu_adds_up "$out" || fail "tx $layout: CPU per frame: $out"
	case $(field placement "$out") in
	'"near"'|'"far"'|'"mixed"') ;;
	*) fail "tx $layout: no placement: $out" ;;
	esac

	out=$("$VPERF" net --backend "$VNET --quiet --cpu 1 source" --cpu 0 \
		$layout --direction rx --count $N --verify --json) || fail "rx $layout"
	[ "$(field packets "$out")" = $N ] || fail "rx $layout: $out"
	[ "$(field bad "$out")" = 0 ] || fail "rx $layout: $out"

	out=$("$VPERF" net --backend "$VNET --quiet --cpu 1 loopback" --cpu 0 \
		$layout --direction rr --seconds 0.2 --verify --json 2>&1) ||
		fail "rr $layout: $out"
	echo "$out" | grep -q "no answer" && fail "rr $layout: lost: $out"
	out=$(echo "$out" | grep '^{')
	[ "$(field packets "$out")" -gt 100 ] || fail "rr $layout: $out"
	[ "$(field bad "$out")" = 0 ] || fail "rr $layout: $out"
	cpu_adds_up "$out" || fail "rr $layout: CPU per transaction: $out"

	for mrg in on off; do
		out=$("$VPERF" net --backend "$VNET --quiet --cpu 1 source" --cpu 0 \
			$layout --mrg-rxbuf $mrg --direction rx --count $N --verify \
			--dirty-log --json) || fail "rx dirty-log $layout mrg $mrg: $out"
		# every buffer and the used rings' changed pages marked; some
		# ring pages did change, so the check watched something
		[ "$(field dirty_log "$out")" = true ] && [ "$(field unlogged "$out")" = 0 ] &&
			[ "$(field ring_pages "$out")" -ge 1 ] &&
			[ "$(field packets "$out")" = $N ] || fail "rx dirty-log $layout mrg $mrg: $out"
	done
	out=$("$VPERF" net --backend "$VNET --quiet --cpu 1 loopback" --cpu 0 \
		$layout --direction rr --seconds 0.1 --verify --dirty-log --json 2>&1) ||
		fail "rr dirty-log $layout: $out"
	out=$(echo "$out" | grep '^{')
	[ "$(field unlogged "$out")" = 0 ] && [ "$(field ring_pages "$out")" -ge 2 ] &&
		[ "$(field packets "$out")" -gt 100 ] || fail "rr dirty-log $layout: $out"

	# behind a vIOMMU (VIRTIO_F_ACCESS_PLATFORM): every address an IOVA,
	# all memory mapped in 8 KiB IOTLB entries; nothing asked again.  With
	# the log on as well, what virtq-net writes through the IOTLB must be
	# marked by guest-physical page (vhost's log_write_hva), not by IOVA.
	for dir in rx rr; do
		mode=source
		[ $dir = rr ] && mode=loopback
		for dlog in "" --dirty-log; do
			out=$("$VPERF" net --backend "$VNET --quiet --cpu 1 $mode" --cpu 0 \
				$layout --direction $dir --seconds 0.1 --verify --iommu 8192 \
				$dlog --json 2>&1) || fail "$dir iommu $dlog $layout: $out"
			out=$(echo "$out" | grep '^{')
			[ "$(field iommu_page "$out")" = 8192 ] && [ "$(field iotlb_misses "$out")" = 0 ] &&
				[ "$(field bad "$out")" = 0 ] &&
				[ "$(field packets "$out")" -gt 100 ] || fail "$dir iommu $dlog $layout: $out"
			[ -z "$dlog" ] || { [ "$(field unlogged "$out")" = 0 ] &&
				[ "$(field ring_pages "$out")" -ge 1 ]; } ||
				fail "$dir iommu $dlog $layout: $out"
		done
	done
done

# A driver that owes kicks and does not send them (--drop-kicks 1: not one
# of those the ring asks for; a guest whose barrier failed): virtq-net finds
# the buffers once its rings have been quiet for 200 ms (runtime V4, the
# quiet-period look); without that look the run never ends.  tx sends one
# burst at a time and waits 2 ms once it is back: the sink has drained the
# ring and gone to sleep, so each burst owes a kick (4 here).  Every frame arrives, and virtq-net
# counts the kicks it missed (about one per kick dropped; one whose buffers
# its own re-check found in time is not missed).
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# sink_start [OPTIONS]: virtq-net --json OPTIONS sink on CPU 1, serving
# $dir/s (its output into $dir/net), once the socket is there;
# sink_stop: SIGTERM, so that it prints its summary, and wait for it.
sink_start() {
	"$VNET" --socket-path "$dir/s" --json --cpu 1 "$@" sink > "$dir/net" 2>&1 &
	pid=$!
	i=0
	while [ ! -S "$dir/s" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
}
sink_stop() {
	kill -TERM $pid
	wait $pid || true
	rm -f "$dir/s"
}
for layout in "--packed off" "--packed on"; do
	sink_start
	out=$("$VPERF" net --socket-path "$dir/s" --cpu 0 $layout --direction tx \
		--count 1000 --burst 250 --drop-kicks 1 --json) || { kill $pid; fail "drop-kicks $layout"; }
	sink_stop
	sum=$(grep '"summary":true' "$dir/net")
	[ "$(field packets "$out")" = 1000 ] && [ "$(field kicks_dropped "$out")" -ge 1 ] &&
		[ "$(field kicks_missed "$sum")" -ge 1 ] ||
		fail "drop-kicks $layout: $out; virtq-net: $sum"
	echo "drop-kicks $layout: dropped $(field kicks_dropped "$out"), virtq-net missed $(field kicks_missed "$sum"), $(field seconds "$out") s"
done

# --rate offers a load: never more than its frames a second (one burst
# of slack), and on a machine not wholly taken by others most of them.
out=$("$VPERF" net --backend "$VNET --quiet --cpu 1 sink" --cpu 0 --direction tx \
	--rate 20000 --seconds 0.5 --json) || fail "tx --rate"
awk -v p="$(field packets "$out")" -v s="$(field seconds "$out")" \
    -v r="$(field rate_pps "$out")" \
    'BEGIN { exit !(r == 20000 && p <= r * s + 32 && p >= r * s / 2) }' ||
	fail "tx --rate 20000: $out"
echo "tx --rate 20000: $(field packets "$out") frames in $(field seconds "$out") s"

# How the sink's thread waited for the TX ring, in its --per-queue summary:
# sleeping at once (--busy-poll 0), no window ever opens and every wake-up
# came with a kick; polling longer than the run (1 s), it never slept and
# its windows found the frames; the default (an adaptive window) does
# either.  The driver sleeps on its calls, so the ring drains between
# bursts.
for poll in "--busy-poll 0" "--busy-poll 1000000" ""; do
	sink_start --per-queue --stats-interval 0 $poll
	out=$("$VPERF" net --socket-path "$dir/s" --cpu 0 --direction tx --count $N \
		--busy-poll 0 --json) || { kill $pid; fail "tx wait $poll"; }
	sink_stop
	tx0=$(grep '"summary":true' "$dir/net" | sed -n 's/.*"name":"tx0",\([^}]*\)}.*/\1/p')
	kicks=$(field kicks "$tx0") wakeups=$(field wakeups "$tx0")
	hits=$(field poll_hits "$tx0") misses=$(field poll_misses "$tx0")
	[ "$(field pkts "$tx0")" = $N ] && [ "$wakeups" -le "$kicks" ] ||
		fail "tx wait $poll: $tx0"
	case $poll in
	*" 0") [ "$hits" = 0 ] && [ "$misses" = 0 ] && [ "$wakeups" -ge 1 ] ;;
	*000) [ "$wakeups" = 0 ] && [ "$hits" -ge 1 ] ;;
	*) [ $((wakeups + hits)) -ge 1 ] ;;
	esac || fail "tx wait $poll: $tx0"
	echo "tx wait ${poll:-adaptive}: kicks $kicks, wakeups $wakeups, poll hits $hits, misses $misses"
done

# without --cpu there is no placement to probe, and it says so
out=$("$VPERF" net --backend "$VNET --quiet sink" --direction tx --count 1000 --json) ||
	fail "tx unpinned"
[ "$(field placement "$out")" = '"unknown"' ] || fail "unpinned placement: $out"
if "$VPERF" net --backend "$VNET" --peer-cpu 1 >/dev/null 2>&1; then
	fail "--peer-cpu without --cpu accepted"
fi
echo ok
