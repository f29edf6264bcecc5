#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The race against DPDK: virtio-net over vhost-user, four pairings measured
# in one run on the same machine with the same core layout (frontend's
# forwarding thread on CPU 0, backend's on CPU 1, both busy polling):
#
#   (a) DPDK virtio-user  -> DPDK vhost    (the anchor)
#   (b) virtq-perf net    -> virtq-net
#   (c) DPDK virtio-user  -> virtq-net     (our backend alone)
#   (d) virtq-perf net    -> DPDK vhost    (our frontend alone)
#
# for 64 B and 1518 B frames, split and packed, in_order off and on, guest
# TX (frontend sends) and guest RX (backend sends).  Prints Mpps per pairing
# and the ratios b/a, c/a, d/a; each rate is the median of the per-second
# rates after a warm-up.  Before and after every row the core-to-core
# latency is probed (virtq-perf c2c): rows are labelled near/far/mixed.
# virtq-net's sink runs with --copy: it copies every frame out of guest
# memory, as DPDK's vhost copies it into an mbuf.
#
#   bench/net-race.sh [-B BUILD_DIR] [-s SECONDS] [--sizes "64 1518"]
#                     [--layouts "split packed"] [--inorder "0 1"]
#                     [--dirs "tx rx"] [--pairings "a b c d"] [-r RUNS] [-o OUT]
#                     [--paired X [-n PAIRS] [--pairs-out FILE]]
#
# With -r RUNS every cell is measured RUNS times, the four pairings taking
# turns (a b c d a b c d ...), and the median is shown: one run per cell
# is at the mercy of the placement changes of these shared machines.
#
# --paired X (X = b, c or d) measures X against a in PAIRS pairs per row
# (-n, default 8) instead: each pair runs a and X back to back, alternating
# which goes first, is labelled by the placement probed before and after
# it, and the row ends with the paired summary (geometric means, X/a - 1,
# its 95% interval, "faster in k/N pairs": virtq-perf ab --pairs-file),
# over all pairs and per placement.  This is how a row the table leaves in
# doubt is settled.  --pairs-out FILE appends each pair as "A X PLACE"
# (packets per second) to FILE, for virtq-perf ab --pairs-file --json.
#
# Needs dpdk-testpmd (scripts/deps.sh bench) and a build with tools.
set -u
cd "$(dirname "$0")/.."
BUILD=build
SECS=6
SIZES="64 1518"
LAYOUTS="split packed"
INORDERS="0 1"
DIRS="tx rx"
PAIRINGS="a b c d"
RUNS=1
OUT=
PAIRED=
PAIRS=8
PAIRS_OUT=
while [ $# -gt 0 ]; do
	case $1 in
	-B) BUILD=$2; shift ;;
	-s) SECS=$2; shift ;;
	--sizes) SIZES=$2; shift ;;
	--layouts) LAYOUTS=$2; shift ;;
	--inorder) INORDERS=$2; shift ;;
	--dirs) DIRS=$2; shift ;;
	--pairings) PAIRINGS=$2; shift ;;
	-r) RUNS=$2; shift ;;
	--paired) PAIRED=$2; shift ;;
	-n) PAIRS=$2; shift ;;
	--pairs-out) PAIRS_OUT=$2; shift ;;
	-o) OUT=$2; shift ;;
	-h|--help) sed -n '2,38p' "$0"; exit 0 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
VNET=$BUILD/tools/net/virtq-net
VPERF=$BUILD/tools/virtq-perf
case $PAIRED in ""|b|c|d) ;; *) echo "--paired takes b, c or d" >&2; exit 2 ;; esac
[ -x "$VNET" ] && [ -x "$VPERF" ] || { echo "build first: $VNET, $VPERF" >&2; exit 1; }
command -v dpdk-testpmd >/dev/null || { echo "dpdk-testpmd missing (scripts/deps.sh bench)" >&2; exit 1; }

DIR=$(mktemp -d /tmp/virtq-race.XXXXXX)
SOCK=$DIR/net.sock
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null; done
	sleep 0.3
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$DIR"
}
trap cleanup EXIT
[ -n "$OUT" ] && exec > >(tee "$OUT")

WARM=2          # per-second readings skipped at the start
EAL=(--no-huge -m 512 --no-pci)

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# testpmd NAME MAINCORE VDEV FWD SIZE: background testpmd; its forwarding
# lcore is the other CPU.
testpmd() {
	dpdk-testpmd -l 0,1 --main-lcore "$2" --file-prefix "race-$$-$1" "${EAL[@]}" \
		--single-file-segments --vdev "$3" -- --forward-mode="$4" --nb-cores=1 \
		--txpkts="$5" --total-num-mbufs=16384 --stats-period 1 \
		</dev/null >"$DIR/$1.log" 2>&1 &
	PIDS+=($!)
	echo $!
}
stop() {        # PID
	kill -INT "$1" 2>/dev/null
	for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}
wait_sock() { for _ in $(seq 100); do [ -S "$SOCK" ] && return 0; sleep 0.1; done; return 1; }
# The per-second rate testpmd printed for FIELD (Rx-pps|Tx-pps), median after
# the warm-up.
# Readings before traffic starts are 0: skip them, then the warm-up.
tp_rate() { grep -oE "$1: +[0-9]+" "$2" | grep -oE '[0-9]+$' | awk '$1 > 0' | tail -n +$((WARM + 1)) | median; }
vn_rate() { grep -oE "\"$1\":[0-9.]+" "$2" | cut -d: -f2 | awk '$1 > 0' | tail -n +$((WARM + 1)) | median; }
# A run lasts until its receiver has counted traffic for WARM + SECS
# seconds: testpmd takes one to three seconds to start, differently for
# its two PMDs, and a fixed sleep would leave the slower start fewer
# readings.  FILE REGEX: the receiver's log and its first nonzero reading.
traffic_then_sleep() {
	for _ in $(seq 150); do grep -qE "$2" "$1" 2>/dev/null && break; sleep 0.1; done
	sleep "$((SECS + WARM)).5"
}
TP_SEEN='Rx-pps: +[1-9]'
VN_SEEN='"[rt]x_pps":[1-9]'
onoff() { [ "$1" = 1 ] && echo on || echo off; }

vu_vdev() { echo "net_virtio_user0,path=$SOCK,queues=1,queue_size=256,server=0,packed_vq=$1,in_order=$2,mrg_rxbuf=1"; }
vh_vdev() { echo "net_vhost0,iface=$SOCK,queues=1,client=0"; }
VN_OPTS=(--quiet --busy-poll 1000000 --cpu 1 --json --stats-interval 1)

# pairing DIR SIZE PACKED INORDER WHICH -> packets per second
run_a() {
	local dir=$1 size=$2 pk=$3 io=$4 vh vu
	rm -f "$SOCK"
	if [ "$dir" = tx ]; then
		vh=$(testpmd vh 0 "$(vh_vdev)" rxonly "$size")
		wait_sock || return
		vu=$(testpmd vu 1 "$(vu_vdev "$pk" "$io")" txonly "$size")
		traffic_then_sleep "$DIR/vh.log" "$TP_SEEN"
		tp_rate Rx-pps "$DIR/vh.log" >"$DIR/rate"
	else
		vh=$(testpmd vh 0 "$(vh_vdev)" txonly "$size")
		wait_sock || return
		vu=$(testpmd vu 1 "$(vu_vdev "$pk" "$io")" rxonly "$size")
		traffic_then_sleep "$DIR/vu.log" "$TP_SEEN"
		tp_rate Rx-pps "$DIR/vu.log" >"$DIR/rate"
	fi
	stop "$vu"; stop "$vh"
	cat "$DIR/rate"
}
# A virtq-perf run that failed has no rate: say why, and fail the script
# at its end rather than print a ratio of 0.
perf_failed() {
	echo "net-race.sh: virtq-perf net failed:" >&2
	cat "$DIR/perf.log" >&2
	: >"$DIR/failed"
}
# virtq-perf net's --size is what it sends: on rx the backend picks it.
size_opt() { [ "$1" = tx ] && echo "--size $2"; }
run_b() {
	local dir=$1 size=$2 pk=$3 io=$4 vn mode="--copy sink" d=tx
	[ "$dir" = rx ] && mode="--size $size source" && d=rx
	rm -f "$SOCK"
	"$VNET" --socket-path "$SOCK" "${VN_OPTS[@]}" $mode >"$DIR/vn.out" 2>"$DIR/vn.log" &
	vn=$!
	PIDS+=($vn)
	wait_sock || return
	"$VPERF" net --socket-path "$SOCK" --direction "$d" $(size_opt "$d" "$size") --cpu 0 \
		--packed "$(onoff "$pk")" --in-order "$(onoff "$io")" --seconds "$SECS" --json \
		>"$DIR/perf.out" 2>"$DIR/perf.log" || perf_failed
	stop "$vn"
	grep -oE '"ops_per_sec":[0-9.]+' "$DIR/perf.out" | cut -d: -f2 | awk '{ printf "%d\n", $1 }'
}
run_c() {
	local dir=$1 size=$2 pk=$3 io=$4 vn vu mode="--copy sink" fwd=txonly
	[ "$dir" = rx ] && mode="--size $size source" && fwd=rxonly
	rm -f "$SOCK"
	"$VNET" --socket-path "$SOCK" "${VN_OPTS[@]}" $mode >"$DIR/vn.out" 2>"$DIR/vn.log" &
	vn=$!
	PIDS+=($vn)
	wait_sock || return
	vu=$(testpmd vu 1 "$(vu_vdev "$pk" "$io")" "$fwd" "$size")
	if [ "$dir" = tx ]; then
		traffic_then_sleep "$DIR/vn.out" "$VN_SEEN"
		vn_rate tx_pps "$DIR/vn.out" >"$DIR/rate"
	else
		traffic_then_sleep "$DIR/vu.log" "$TP_SEEN"
		tp_rate Rx-pps "$DIR/vu.log" >"$DIR/rate"
	fi
	stop "$vu"; stop "$vn"
	cat "$DIR/rate"
}
run_d() {
	local dir=$1 size=$2 pk=$3 io=$4 vh fwd=rxonly
	[ "$dir" = rx ] && fwd=txonly
	rm -f "$SOCK"
	vh=$(testpmd vh 0 "$(vh_vdev)" "$fwd" "$size")
	wait_sock || return
	sleep 0.5
	"$VPERF" net --socket-path "$SOCK" --direction "$dir" $(size_opt "$dir" "$size") --cpu 0 \
		--packed "$(onoff "$pk")" --in-order "$(onoff "$io")" --seconds "$SECS" --json \
		>"$DIR/perf.out" 2>"$DIR/perf.log" || perf_failed
	stop "$vh"
	grep -oE '"ops_per_sec":[0-9.]+' "$DIR/perf.out" | cut -d: -f2 | awk '{ printf "%d\n", $1 }'
}

place() { "$VPERF" c2c 0,1 2>/dev/null | grep -oE '\((near|far)\)' | tr -d '()'; }
mpps() { awk -v p="${1:-0}" 'BEGIN { printf "%7.3f", p / 1e6 }'; }
ratio() { awk -v b="${1:-0}" -v a="${2:-0}" 'BEGIN { if (a > 0) printf "%5.2f", b / a; else printf "    -" }'; }

# summary PAIRS_FILE: virtq-perf ab's statistics of lines "A X PLACE", over
# all pairs, then the near and the far ones (a ratio measured across a
# placement change means little on these machines).
summary() {
	local d=$DIR/rows
	mkdir -p "$d"
	cp "$1" "$d/all"
	grep ' near$' "$1" >"$d/near" || true
	grep ' far$' "$1" >"$d/far" || true
	"$VPERF" ab --pairs-file "$d/all" --pairs-file "$d/near" --pairs-file "$d/far" \
		--metric pps 2>&1 | grep -v ': no pairs$'
}

# paired_row DIR SIZE LAYOUT IO PK: PAIRS pairs of a and $PAIRED.
paired_row() {
	local dir=$1 size=$2 layout=$3 io=$4 pk=$5 i a x p1 p2 pl order res=$DIR/pairs
	: >"$res"
	echo "## $dir $size $layout in_order=$io: $PAIRED against a"
	for ((i = 0; i < PAIRS; i++)); do
		p1=$(place)
		if ((i % 2)); then
			x=$("run_$PAIRED" "$dir" "$size" "$pk" "$io"); a=$(run_a "$dir" "$size" "$pk" "$io"); order="$PAIRED,a"
		else
			a=$(run_a "$dir" "$size" "$pk" "$io"); x=$("run_$PAIRED" "$dir" "$size" "$pk" "$io"); order="a,$PAIRED"
		fi
		p2=$(place)
		pl=$p1
		[ "$p1" = "$p2" ] || pl=mixed
		printf "pair %2d %s %-5s a %s  %s %s\n" "$i" "$order" "$pl" "$(mpps "$a")" "$PAIRED" "$(mpps "$x")"
		echo "${a:-0} ${x:-0} $pl" >>"$res"
	done
	[ -n "$PAIRS_OUT" ] && cat "$res" >>"$PAIRS_OUT"
	summary "$res"
}

echo "# virtq net race, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n), $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "# DPDK $(dpkg-query -W -f='${Version}' dpdk 2>/dev/null); virtq $(git rev-parse --short HEAD 2>/dev/null)"
PER_CELL="$RUNS run(s) per cell (pairings taking turns)"
[ -n "$PAIRED" ] && PER_CELL="$PAIRS pairs per row"
echo "# ${SECS}s per run, $PER_CELL, median of per-second rates after ${WARM}s; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# frontend forwarding on CPU 0, backend on CPU 1, both busy polling; testpmd --no-huge"
[ -n "$PAIRED" ] && echo "# paired: $PAIRED against a, $PAIRS pairs per row (A = a, B = $PAIRED)"
[ -z "$PAIRED" ] && printf "%-4s %5s %-6s %-3s %-5s | %7s %7s %7s %7s | %5s %5s %5s\n" dir size layout io place "a" "b" "c" "d" "b/a" "c/a" "d/a"
for size in $SIZES; do
for layout in $LAYOUTS; do
for io in $INORDERS; do
for dir in $DIRS; do
	pk=0
	[ "$layout" = packed ] && pk=1
	if [ -n "$PAIRED" ]; then
		paired_row "$dir" "$size" "$layout" "$io" "$pk"
		continue
	fi
	p1=$(place)
	declare -A got=()
	for ((run = 0; run < RUNS; run++)); do
		for w in $PAIRINGS; do
			got[$w]+="$("run_$w" "$dir" "$size" "$pk" "$io") "
		done
	done
	a= b= c= d=
	for w in $PAIRINGS; do
		printf -v "$w" '%s' "$(tr ' ' '\n' <<<"${got[$w]}" | grep . | median)"
	done
	unset got
	p2=$(place)
	pl=$p1
	[ "$p1" = "$p2" ] || pl=mixed
	printf "%-4s %5s %-6s %-3s %-5s | %s %s %s %s | %s %s %s\n" "$dir" "$size" "$layout" "$io" "$pl" \
		"$(mpps "$a")" "$(mpps "$b")" "$(mpps "$c")" "$(mpps "$d")" \
		"$(ratio "$b" "$a")" "$(ratio "$c" "$a")" "$(ratio "$d" "$a")"
done
done
done
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
[ ! -e "$DIR/failed" ]
