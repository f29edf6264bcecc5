#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Paired A/B of two virtq-net builds against DPDK's virtio-user PMD (the
# race's pairing c): how a backend patch is measured against a frontend we
# did not write.  Either build may be "dpdk", testpmd's vhost PMD: then the
# result is the race's c/a with a confidence interval, which one run per
# cell cannot give on a machine whose core placement keeps changing.  Each
# pair runs A and B back to back, alternating which goes first, and is
# labelled by the core-to-core placement probed before and after it.
# Prints per-run rates, then the geometric means, B/A - 1, the 95% interval
# of the mean paired log ratio and "B faster in k/N pairs" (virtq-perf ab
# --pairs-file: the project's one implementation of them).  --pairs-out
# FILE keeps the pairs as "A B PLACE" lines (packets per second).
#
#   bench/net-backend-ab.sh [-n PAIRS] [-s SECONDS] [--dir rx|tx]
#                           [--packed 0|1] [--inorder 0|1] [--size BYTES]
#                           [--frontend] [--pairs-out FILE]
#                           BUILD_A|dpdk BUILD_B|dpdk
#
# A build may carry virtq-net options after it, in one word:
# "build-release --tx-evict off" against "build-release" measures an option.
#
# --frontend turns it around (the race's pairing d): A and B are frontends,
# a build's `virtq-perf net` (options after it, as above) or "dpdk"
# (testpmd's virtio-user), against testpmd's vhost PMD, whose per-second
# counts are then the meter for both.
#
# rx: the backend sources frames (virtq-net source, testpmd txonly) into
# testpmd rxonly; tx: testpmd txonly into the backend's sink (virtq-net
# --copy sink, testpmd rxonly).  --stats-period keeps testpmd running with
# stdin closed.  The rate is the frontend's per-second count (median of
# SECONDS readings after the first).  Needs dpdk-testpmd (scripts/deps.sh
# bench).
set -u
cd "$(dirname "$0")/.."
PAIRS=10 SECS=4 DIR=rx PK=0 IO=0 SIZE=64 FRONTEND=0 PAIRS_OUT=
while [ $# -gt 2 ]; do
	case $1 in
	--frontend) FRONTEND=1; shift; continue ;;
	-n) PAIRS=$2 ;;
	-s) SECS=$2 ;;
	--dir) DIR=$2 ;;
	--packed) PK=$2 ;;
	--inorder) IO=$2 ;;
	--size) SIZE=$2 ;;
	--pairs-out) PAIRS_OUT=$2 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
	shift 2
done
[ $# = 2 ] || { sed -n "2,33p" "$0"; exit 2; }
A=$1 B=$2
for b in "$A" "$B"; do
	b=${b%% *}
	[ "$b" = dpdk ] || [ -x "$b/tools/net/virtq-net" ] || [ -x "$b/tools/virtq-perf" ] ||
		{ echo "no virtq-net or virtq-perf in $b" >&2; exit 1; }
done
command -v dpdk-testpmd >/dev/null || { echo "dpdk-testpmd missing (scripts/deps.sh bench)" >&2; exit 1; }
# The statistics need ab --pairs-file, which a build of an older commit
# may lack: found before the pairs are run, not after.
VPERF=
for b in "${A%% *}" "${B%% *}" build-release build; do
	"$b/tools/virtq-perf" ab --help 2>&1 | grep -q -- --pairs-file &&
		{ VPERF=$b/tools/virtq-perf; break; }
done
[ -n "$VPERF" ] ||
	{ echo "no virtq-perf with ab --pairs-file in $A, $B, build-release or build" >&2; exit 1; }

TMP=$(mktemp -d /tmp/virtq-nbab.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
trap cleanup EXIT

# one_run BACKEND -> packets per second the DPDK frontend moved.  BACKEND is
# a build directory (virtq-net, with any options after it) or "dpdk" (testpmd's vhost PMD, the race's
# pairing a); either way the backend's forwarding runs on CPU 1 and the
# rate is read from the frontend's own per-second counts, one meter for both.
one_run() {
	local sock=$TMP/net.sock mode="--size $SIZE source" vfwd=txonly fwd=rxonly field=Rx-pps be i
	[ "$DIR" = tx ] && mode="--copy sink" vfwd=rxonly fwd=txonly field=Tx-pps
	rm -f "$sock"
	if [ "$1" = dpdk ]; then
		dpdk-testpmd -l 0,1 --main-lcore 0 --file-prefix "nbab-vh-$$" --no-huge -m 512 \
			--no-pci --single-file-segments --vdev "net_vhost0,iface=$sock,queues=1,client=0" \
			-- --forward-mode=$vfwd --nb-cores=1 --txpkts="$SIZE" --total-num-mbufs=16384 \
			--stats-period 1 </dev/null >"$TMP/be.log" 2>&1 &
	else
		local opts=${1#"${1%% *}"}
		# shellcheck disable=SC2086 # the options are words
		"${1%% *}/tools/net/virtq-net" --socket-path "$sock" --quiet --busy-poll 1000000 --cpu 1 \
			$opts $mode >"$TMP/be.log" 2>&1 &
	fi
	be=$!
	PIDS+=("$be")
	for ((i = 0; i < 100; i++)); do [ -S "$sock" ] && break; sleep 0.1; done
	sleep 0.3
	dpdk-testpmd -l 0,1 --main-lcore 1 --file-prefix "nbab-$$" --no-huge -m 512 --no-pci \
		--single-file-segments \
		--vdev "net_virtio_user0,path=$sock,queues=1,queue_size=256,server=0,packed_vq=$PK,in_order=$IO,mrg_rxbuf=1" \
		-- --forward-mode=$fwd --nb-cores=1 --txpkts="$SIZE" --total-num-mbufs=16384 --stats-period 1 \
		</dev/null >"$TMP/vu.log" 2>&1 &
	local vu=$!
	PIDS+=("$vu")
	# Count from the first second with traffic (testpmd takes a while).
	for ((i = 0; i < 150; i++)); do
		grep -qE "$field: +[1-9]" "$TMP/vu.log" && break
		sleep 0.1
	done
	sleep $((SECS + 1))
	kill -INT "$vu" 2>/dev/null
	wait "$vu" 2>/dev/null
	kill -INT "$be" 2>/dev/null
	wait "$be" 2>/dev/null
	grep -oE "$field: +[0-9]+" "$TMP/vu.log" | grep -oE '[0-9]+$' | awk '$1 > 0' |
		tail -n +2 | head -n "$SECS" | sort -n |
		awk '{ v[NR] = $1 } END { printf "%d\n", NR ? v[int((NR + 1) / 2)] : 0 }'
}
# one_run_fe FRONTEND -> packets per second testpmd's vhost PMD moved with
# FRONTEND: a build directory (virtq-perf net, with any options after it)
# or "dpdk" (testpmd's virtio-user, as one_run starts it).
one_run_fe() {
	local sock=$TMP/net.sock vfwd=txonly fwd=rxonly field=Tx-pps dir=rx be fe i
	[ "$DIR" = tx ] && vfwd=rxonly fwd=txonly field=Rx-pps dir=tx
	rm -f "$sock"
	dpdk-testpmd -l 0,1 --main-lcore 0 --file-prefix "nbab-vh-$$" --no-huge -m 512 \
		--no-pci --single-file-segments --vdev "net_vhost0,iface=$sock,queues=1,client=0" \
		-- --forward-mode=$vfwd --nb-cores=1 --txpkts="$SIZE" --total-num-mbufs=16384 \
		--stats-period 1 </dev/null >"$TMP/be.log" 2>&1 &
	be=$!
	PIDS+=("$be")
	for ((i = 0; i < 100; i++)); do [ -S "$sock" ] && break; sleep 0.1; done
	sleep 0.3
	if [ "$1" = dpdk ]; then
		dpdk-testpmd -l 0,1 --main-lcore 1 --file-prefix "nbab-$$" --no-huge -m 512 --no-pci \
			--single-file-segments \
			--vdev "net_virtio_user0,path=$sock,queues=1,queue_size=256,server=0,packed_vq=$PK,in_order=$IO,mrg_rxbuf=1" \
			-- --forward-mode=$fwd --nb-cores=1 --txpkts="$SIZE" --total-num-mbufs=16384 --stats-period 1 \
			</dev/null >"$TMP/vu.log" 2>&1 &
	else
		local opts=${1#"${1%% *}"} onoff=(off on)
		# shellcheck disable=SC2086 # the options are words
		"${1%% *}/tools/virtq-perf" net --socket-path "$sock" --cpu 0 --direction $dir \
			--size "$SIZE" --packed ${onoff[$PK]} --in-order ${onoff[$IO]} \
			--seconds $((SECS + 30)) $opts >"$TMP/vu.log" 2>&1 &
	fi
	fe=$!
	PIDS+=("$fe")
	for ((i = 0; i < 150; i++)); do
		grep -qE "$field: +[1-9]" "$TMP/be.log" && break
		sleep 0.1
	done
	sleep $((SECS + 1))
	kill -INT "$fe" 2>/dev/null
	wait "$fe" 2>/dev/null
	kill -INT "$be" 2>/dev/null
	wait "$be" 2>/dev/null
	grep -oE "$field: +[0-9]+" "$TMP/be.log" | grep -oE '[0-9]+$' | awk '$1 > 0' |
		tail -n +2 | head -n "$SECS" | sort -n |
		awk '{ v[NR] = $1 } END { printf "%d\n", NR ? v[int((NR + 1) / 2)] : 0 }'
}
((FRONTEND)) && one_run() { one_run_fe "$@"; }
# place -> "far 231": the placement and the one-way latency behind it ("far"
# spans 160-300 ns on these machines, and rates follow it).
place() { "$VPERF" c2c 0,1 2>/dev/null | sed -nE 's/.*: ([0-9]+)(\.[0-9]+)? ns one-way \((near|far)\).*/\3 \1/p'; }

WHAT="virtq-net A/B against DPDK virtio-user"
((FRONTEND)) && WHAT="frontend A/B against DPDK vhost"
echo "# $WHAT, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "# A=$A ($(git -C "${A%% *}" rev-parse --short HEAD 2>/dev/null || echo ?)) B=$B; dir=$DIR packed=$PK in_order=$IO size=$SIZE; $PAIRS pairs of ${SECS}s; load average $(cut -d' ' -f1-3 /proc/loadavg)"
RES=$TMP/pairs
: >"$RES"
for ((i = 0; i < PAIRS; i++)); do
	p1=$(place)
	if ((i % 2)); then
		b=$(one_run "$B"); a=$(one_run "$A"); order="B,A"
	else
		a=$(one_run "$A"); b=$(one_run "$B"); order="A,B"
	fi
	p2=$(place)
	pl=${p1% *}
	[ "$pl" = "${p2% *}" ] || pl=mixed
	printf "pair %2d %s %-5s A %10d  B %10d  c2c %s/%s ns\n" "$i" "$order" "$pl" "$a" "$b" \
		"${p1#* }" "${p2#* }"
	echo "$a $b $pl" >>"$RES"
done
# One summary over every pair, then one per placement (on these machines a
# ratio measured across a placement change means little): virtq-perf ab's
# statistics of the pairs it did not run.
mkdir "$TMP/rows"
cp "$RES" "$TMP/rows/all"
grep ' near$' "$RES" >"$TMP/rows/near"
grep ' far$' "$RES" >"$TMP/rows/far"
[ -n "$PAIRS_OUT" ] && cp "$RES" "$PAIRS_OUT"
"$VPERF" ab --pairs-file "$TMP/rows/all" --pairs-file "$TMP/rows/near" \
	--pairs-file "$TMP/rows/far" --metric pps 2>&1 | grep -v ': no pairs$'
