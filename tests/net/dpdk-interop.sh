#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Interop with DPDK testpmd, one case per run:
#
#   dpdk-interop.sh VIRTQ_NET VIRTQ_PERF CASE LAYOUT [MEM]
#
#   CASE   vu-tx   testpmd virtio-user txonly -> virtq-net sink: every frame
#                  testpmd sent is counted by virtq-net, exactly
#          vu-mq   vu-tx with 2 queue pairs served by 2 virtq-net threads
#          vu-rx   virtq-net source --count N -> testpmd virtio-user rxonly:
#                  testpmd receives exactly N
#          vh-tx   virtq-perf net tx --count N -> testpmd vhost rxonly:
#                  testpmd receives exactly N
#          vh-rx   testpmd vhost txonly -> virtq-perf net rx --count N
#                  --verify: N frames of the right length arrive, and
#                  testpmd sent at least N and at most N + a ring
#   LAYOUT split | split-inorder | packed | packed-inorder
#   MEM    anon (default): testpmd without hugepages (--no-huge), as the
#          lab does; hugetlbfs: the guest's memory is on 2 MiB pages, as
#          a VM's usually is: testpmd's in a hugetlbfs file
#          (--single-file-segments: one region, which the backend must map
#          in whole huge pages), virtq-perf's in a MFD_HUGETLB memfd.
#          The test reserves the pages and mounts hugetlbfs itself (root),
#          and gives both back.
#          iommu (vh cases): virtq-perf plays a guest behind a vIOMMU
#          (--iommu: VIRTIO_F_ACCESS_PLATFORM, IOVAs everywhere, all memory
#          in 64 KiB IOTLB entries) and testpmd's vhost translates through
#          its IOTLB (iommu-support=1); no entry may be asked for again
#          iommu-dirty-log: iommu with migration logging on (--dirty-log)
#
# Exit 77 (skip) when dpdk-testpmd or hugepages are missing, unless
# CI=true (then 1).
set -u
VNET=$1 VPERF=$2 CASE=$3 LAYOUT=$4 MEM=${5:-anon}

skip() {
	echo "SKIP: $*"
	if [ "${CI:-}" = true ]; then
		echo "CI=true: a missing peer is a failure"
		exit 1
	fi
	exit 77
}
command -v dpdk-testpmd >/dev/null 2>&1 || skip "dpdk-testpmd not installed (scripts/deps.sh test)"
[ -e /dev/net/tun ] || true

case $LAYOUT in
split)          PACKED=0 INORDER=0 ;;
split-inorder)  PACKED=0 INORDER=1 ;;
packed)         PACKED=1 INORDER=0 ;;
packed-inorder) PACKED=1 INORDER=1 ;;
*) echo "bad layout $LAYOUT"; exit 2 ;;
esac
onoff() { [ "$1" = 1 ] && echo on || echo off; }

DIR=$(mktemp -d /tmp/virtq-interop.XXXXXX)
SOCK=$DIR/net.sock
PIDS=()
NR_HUGE=/proc/sys/vm/nr_hugepages
HUGE_SAVED=
cleanup() {
	local alive=
	for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null && alive=1; done
	[ -n "$alive" ] && sleep 0.2
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	mountpoint -q "$DIR/huge" 2>/dev/null && umount "$DIR/huge"
	[ -n "$HUGE_SAVED" ] && echo "$HUGE_SAVED" >"$NR_HUGE"
	rm -rf "$DIR" /var/run/dpdk/virtq-$$-* 2>/dev/null
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	for f in "$DIR"/*.log; do echo "--- $f"; tail -n 40 "$f"; done
	exit 1
}

N=${N:-200000}
TP_EXTRA=()
EAL_COMMON=(--no-huge -m 256 --no-pci)
PERF_MEM=()
VH_EXTRA=
case $MEM in
anon) ;;
iommu | iommu-dirty-log)
	case $CASE in vh-*) ;; *) echo "iommu: vh cases only (virtio-user has no IOTLB)"; exit 2 ;; esac
	VH_EXTRA=,iommu-support=1
	PERF_MEM=(--iommu 65536)
	# and migration logging on: testpmd marks what it writes by
	# guest-physical page, found through its IOTLB (the used ring's log
	# address is an IOVA, as QEMU gives it); --verify fails the run on
	# a buffer whose pages are not marked
	[ "$MEM" = iommu-dirty-log ] && PERF_MEM+=(--dirty-log)
	;;
hugetlbfs)
	# testpmd's 256 MiB and virtq-perf's guest memory, with room.
	need=200
	[ -w "$NR_HUGE" ] || skip "cannot reserve huge pages (not root)"
	free=$(awk '/^HugePages_Free/ {print $2}' /proc/meminfo)
	if [ "${free:-0}" -lt $need ]; then
		HUGE_SAVED=$(cat "$NR_HUGE")
		echo $((HUGE_SAVED + need - free)) >"$NR_HUGE"
		free=$(awk '/^HugePages_Free/ {print $2}' /proc/meminfo)
		[ "$free" -ge $need ] || skip "only $free free 2 MiB pages"
	fi
	mkdir "$DIR/huge"
	mount -t hugetlbfs -o pagesize=2M nodev "$DIR/huge" ||
		skip "cannot mount hugetlbfs"
	EAL_COMMON=(-m 256 --no-pci --single-file-segments --huge-dir "$DIR/huge")
	PERF_MEM=(--hugetlb)
	;;
*) echo "bad memory $MEM"; exit 2 ;;
esac

# testpmd ROLE PREFIX VDEV FWD: start testpmd in the background.
testpmd() {
	local name=$1 vdev=$2 fwd=$3 main=$4
	# Its stdin must stay open (interactive 'stop' is not used: SIGINT).
	dpdk-testpmd -l 0,1 --main-lcore "$main" --file-prefix "virtq-$$-$name" \
		"${EAL_COMMON[@]}" --vdev "$vdev" -- --forward-mode="$fwd" \
		--nb-cores=1 --txpkts=64 --total-num-mbufs=8192 --stats-period 1 \
		"${TP_EXTRA[@]}" \
		</dev/null >"$DIR/testpmd-$name.log" 2>&1 &
	PIDS+=($!)
	TESTPMD_PID=$!
}

# The largest count testpmd printed: its periodic port statistics count
# from port start, while its final forward statistics leave out the frames
# it flushed from the RX queues when forwarding started.
tp_count() {    # FIELD (RX-packets|TX-packets) LOG
	grep -oE "$1: +[0-9]+" "$2" | grep -oE '[0-9]+$' | sort -n | tail -n 1
}

# stop_testpmd [kill]: SIGINT, for its final forward statistics (it takes
# about a second: its statistics loop sleeps a second at a time); "kill"
# when its periodic statistics already said everything.
stop_testpmd() {
	[ "${1:-}" = kill ] && kill -KILL "$TESTPMD_PID" 2>/dev/null
	kill -INT "$TESTPMD_PID" 2>/dev/null
	for _ in $(seq 100); do
		kill -0 "$TESTPMD_PID" 2>/dev/null || break
		sleep 0.1
	done
	wait "$TESTPMD_PID" 2>/dev/null
}

wait_for() {    # SECONDS COMMAND...: poll until COMMAND succeeds
	local t=$1
	shift
	for _ in $(seq $((t * 10))); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

vnet_json_field() {     # FIELD: last value in virtq-net's JSON lines
	grep -oE "\"$1\":[0-9]+" "$DIR/vnet.out" 2>/dev/null | tail -n 1 | cut -d: -f2
}

case $CASE in
vu-tx | vu-rx | vu-mq)
	mode=sink
	extra=()
	queues=1
	[ "$CASE" = vu-rx ] && mode=source && extra=(--count "$N")
	[ "$CASE" = vu-mq ] && queues=2 && extra=(--queue-pairs 2 --threads 2)
	"$VNET" --socket-path "$SOCK" --once --quiet --json --stats-interval 0.2 \
		"${extra[@]}" "$mode" >"$DIR/vnet.out" 2>"$DIR/vnet.log" &
	VNET_PID=$!
	PIDS+=($VNET_PID)
	wait_for 5 test -S "$SOCK" || fail "virtq-net did not listen"
	fwd=txonly
	[ "$CASE" = vu-rx ] && fwd=rxonly
	TP_EXTRA=(--rxq=$queues --txq=$queues)
	testpmd vu "net_virtio_user0,path=$SOCK,queues=$queues,queue_size=256,server=0,packed_vq=$PACKED,in_order=$INORDER,mrg_rxbuf=1" "$fwd" 1
	if [ "$CASE" != vu-rx ]; then
		# Until testpmd's periodic statistics show a few rings' worth
		# sent, not a fixed time: on a loaded machine it can take
		# seconds to start forwarding.  A stalled ring stops it short.
		tp_sent() { [ "$(tp_count TX-packets "$DIR/testpmd-vu.log")" -gt 10000 ] 2>/dev/null; }
		wait_for 20 tp_sent || echo "testpmd's statistics never passed 10000 sent"
		sleep 0.2
	else
		rx_done() { [ "$(vnet_json_field rx_pkts)" = "$N" ]; }
		wait_for 30 rx_done || fail "virtq-net did not deliver $N frames"
		tp_done() { [ "$(tp_count RX-packets "$DIR/testpmd-vu.log")" = "$N" ]; }
		wait_for 5 tp_done      # its next statistics show the last frames
	fi
	if [ "$CASE" = vu-rx ]; then stop_testpmd kill; else stop_testpmd; fi
	# virtq-net exits (--once) when testpmd's connection goes.
	wait_for 10 bash -c "! kill -0 $VNET_PID 2>/dev/null" || fail "virtq-net did not exit"
	wait "$VNET_PID"
	rc=$?
	[ $rc -eq 0 ] || fail "virtq-net exit status $rc"
	summary=$(grep '"summary"' "$DIR/vnet.out")
	[ -n "$summary" ] || fail "no summary from virtq-net"
	if [ "$CASE" != vu-rx ]; then
		# The accumulated forward statistics (the last line) sum the
		# queues; per-queue lines come before it.
		sent=$(grep -oE "TX-packets: +[0-9]+" "$DIR/testpmd-vu.log" | tail -n 1 | grep -oE '[0-9]+$')
		got=$(echo "$summary" | grep -oE '"tx_pkts":[0-9]+' | cut -d: -f2)
		# More than a few rings' worth: a stalled ring fails here.
		if ! [ -n "$sent" ] || ! [ "$sent" -gt 10000 ]; then
			tail -n 3 "$DIR/vnet.out"
			fail "testpmd sent only ${sent:-0}"
		fi
		echo "testpmd virtio-user sent $sent, virtq-net received $got"
		[ "$sent" = "$got" ] || fail "counts differ"
	else
		got=$(tp_count RX-packets "$DIR/testpmd-vu.log")
		echo "virtq-net sent $N, testpmd virtio-user received $got"
		[ "$got" = "$N" ] || fail "counts differ"
	fi
	drops=$(echo "$summary" | grep -oE '"drops":\{[^}]*\}')
	echo "virtq-net drops: $drops"
	echo "$drops" | grep -qE ':[1-9]' && fail "virtq-net dropped frames"
	;;
vh-tx | vh-rx)
	fwd=rxonly
	[ "$CASE" = vh-rx ] && fwd=txonly
	testpmd vh "net_vhost0,iface=$SOCK,queues=1,client=0$VH_EXTRA" "$fwd" 0
	wait_for 20 test -S "$SOCK" || fail "testpmd vhost did not listen"
	sleep 0.5
	# --verify checks what rx receives, and behind an IOMMU that no
	# IOTLB entry was asked for again
	dir=tx verify=()
	[ "$CASE" = vh-rx ] && dir=rx
	[ $dir = rx ] || [ "${PERF_MEM[0]:-}" = --iommu ] && verify=(--verify)
	"$VPERF" net --socket-path "$SOCK" --direction "$dir" --count "$N" \
		--seconds 30 --packed "$(onoff $PACKED)" --in-order "$(onoff $INORDER)" \
		"${PERF_MEM[@]}" "${verify[@]}" --json >"$DIR/perf.out" 2>"$DIR/perf.log" ||
		fail "virtq-perf net failed"
	got=$(grep -oE '"packets":[0-9]+' "$DIR/perf.out" | cut -d: -f2)
	# until testpmd's periodic statistics (a line a second) show them all
	tp_all() {
		if [ "$CASE" = vh-tx ]; then
			[ "$(tp_count RX-packets "$DIR/testpmd-vh.log")" = "$N" ]
		else
			[ "$(tp_count TX-packets "$DIR/testpmd-vh.log")" -ge "$N" ] 2>/dev/null
		fi
	}
	wait_for 3 tp_all
	stop_testpmd kill
	if [ "$CASE" = vh-tx ]; then
		rx=$(tp_count RX-packets "$DIR/testpmd-vh.log")
		echo "virtq-perf net sent $got (asked $N), testpmd vhost received $rx"
		[ "$got" = "$N" ] && [ "$rx" = "$N" ] || fail "counts differ"
	else
		tx=$(tp_count TX-packets "$DIR/testpmd-vh.log")
		echo "testpmd vhost sent $tx, virtq-perf net received $got (asked $N)"
		[ "$got" = "$N" ] || fail "virtq-perf net received $got"
		[ -n "$tx" ] && [ "$tx" -ge "$N" ] && [ "$tx" -le $((N + 512)) ] ||
			fail "testpmd sent $tx"
	fi
	;;
*)
	echo "unknown case $CASE"
	exit 2
	;;
esac
echo PASS
