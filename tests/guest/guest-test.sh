#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One guest test: a real Linux guest under QEMU drives a vhost-user backend.
#
#   tests/guest/guest-test.sh CASE        (meson test --suite guest runs them all)
#
# Cases: net-split-mrg net-split-nomrg net-packed-mrg net-packed-nomrg
#        net-packed-hugetlbfs (net-packed-mrg with the guest's RAM on 2 MiB
#        pages; needs root to reserve them and mount hugetlbfs)
#        net-split-4g (net-split-mrg with 4.5 GiB of RAM: QEMU gives the
#        backend two regions of one memfd, the second at offset 3 GiB)
#        net-packed-nomrg-overflow net-restart net-reset
#        net-migrate net-migrate-packed (live migration to a second QEMU
#        and a second virtq-net)
#        net-migrate-idle-rx net-migrate-idle-rx-packed (the same, with the
#        backend writing receive buffers the idle guest never reads again:
#        catches a backend that does not log its writes; needs root)
#        net-tap (virtq-net tap mode: ping and TCP between guest and host;
#        needs root for the TAP device)
#        net-migrate-mq (2 queue pairs in use: two vhost devices)
#        net-migrate-postcopy (the same move in postcopy: the destination
#        runs before its RAM has arrived)
#        net-migrate-postcopy-idle-rx (packed, tap mode: the destination
#        backend's first accesses fault and QEMU serves them; needs root)
#        migrate-control (not in the suite: QEMU alone, no vhost-user
#        device, migrates a guest that churns its page cache and compares
#        the RAM; says whether this QEMU loses the guest's own writes, as
#        7.2's TCG does under host load)
#        net-restart-mq (the same across a backend restart)
#        net-tap-restart (a persistent multi-queue TAP made beforehand outlives
#        a virtq-net restart under a running guest; needs root)
#        net-tap-mtu (QEMU host_mtu=9000: the TAP follows, 9014-byte frames
#        both ways unfragmented; needs root)
#        net-tap-offload net-tap-no-offload (tap mode with and without the
#        checksum and TSO offloads: 16 MB of TCP each way, MD5-checked,
#        the segmentation frames counted; needs root)
#        net-tap-mq (tap mode, 2 queue pairs, a 2-vCPU guest that drops to
#        one pair and back: traffic on both pairs, no flow stuck on a
#        queue the guest stopped; needs root)
#        net-announce-guest net-announce-rarp (QMP announce-self: the guest
#        announces itself with GUEST_ANNOUNCE, virtq-net sends a RARP on its
#        TAP without it; needs root)
#        vsock-g2h vsock-h2g vsock-packed vsock-restart vsock-reset
#        vsock-seqpacket vsock-seqpacket-packed (SOCK_SEQPACKET, guest -> host)
#        vsock-bidir-slow (16 connections each way at once, the host
#        reading slowly: no connection stalls behind another's backpressure)
#        vsock-siblings (two guests on one virtq-vsock of three VMs: each
#        reaches the other's CID, stream and seqpacket, both ways, and the
#        host; a VM outside their group and an unknown CID are a RST at once)
#        vsock-small-writes (1-byte host writes to a guest that stopped
#        reading: within the guest's packet count, no reset, all delivered)
#
# Environment:
#   VIRTQ_BUILD_DIR      meson build dir holding tools/net/virtq-net and
#                        tools/vsock/virtq-vsock (default <repo>/build)
#   VIRTQ_GUEST_BACKEND  net backend: virtq (default) or testpmd (DPDK's
#                        vhost PMD, the known-good peer the harness was
#                        proven with)
#   VIRTQ_GUEST_LOGS     where logs go (default BUILD/meson-logs/guest);
#                        a passing case deletes its logs, a failing one keeps them
#   VIRTQ_GUEST_CACHE    guest image cache (default <repo>/build-guest)
#   VIRTQ_GUEST_KERNEL   a kernel series, e.g. 6.12: the guest runs Debian's
#                        linux-image-6.12-cloud-amd64 (cache build-guest-6.12,
#                        logs CASE-k6.12), and the case checks it did
#   CI=true              a case that cannot run (no QEMU, no backend) fails
#                        instead of skipping (exit 77)
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CASE=${1:?usage: guest-test.sh CASE}
BUILD=${VIRTQ_BUILD_DIR:-$REPO/build}
BACKEND=${VIRTQ_GUEST_BACKEND:-virtq}
KERNEL=${VIRTQ_GUEST_KERNEL:-}
export VIRTQ_GUEST_CACHE=${VIRTQ_GUEST_CACHE:-$REPO/build-guest${KERNEL:+-$KERNEL}}
LOG=${VIRTQ_GUEST_LOGS:-$BUILD/meson-logs/guest}/$CASE${KERNEL:+-k$KERNEL}
rm -rf "$LOG"
[ "${VIRTQ_GUEST_ATTEMPT:-1}" = 1 ] && rm -rf "$LOG".attempt*
mkdir -p "$LOG"
LOG=$(cd "$LOG" && pwd)
NSOCK=$LOG/net.sock
VSOCK=$LOG/vsock.sock
UDS=$LOG/vsock.uds
CID=3
FAILS=0
PIDS=()
QEMU_LOST=
ATTEMPT=${VIRTQ_GUEST_ATTEMPT:-1}

note() { echo "[$CASE] $*"; }
check() { # check NAME CONDITION-STATUS DETAILS
	if [ "$2" = 0 ]; then
		note "PASS $1 $3"
	else
		note "FAIL $1 $3"
		FAILS=$((FAILS + 1))
	fi
}
cannot_run() {
	if [ "${CI:-}" = true ]; then
		note "FAIL (CI=true): $*"
		exit 1
	fi
	note "SKIP: $*"
	exit 77
}
HUGE_SAVED=
huge_give_back() {
	mountpoint -q "$LOG/huge" 2>/dev/null && umount "$LOG/huge"
	[ -n "$HUGE_SAVED" ] && echo "$HUGE_SAVED" > /proc/sys/vm/nr_hugepages
	HUGE_SAVED=
}
finish() {
	local p
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	huge_give_back
	# QEMU lost the guest's own writes (migrate_compare): nothing of
	# this attempt counts; its logs stay beside the next attempt's
	if [ -n "$QEMU_LOST" ]; then
		rm -rf "$LOG.attempt$ATTEMPT"
		mv "$LOG" "$LOG.attempt$ATTEMPT"
		if [ "$ATTEMPT" -lt 3 ]; then
			note "attempt $ATTEMPT void (QEMU lost guest writes; logs in $LOG.attempt$ATTEMPT): running the case again"
			VIRTQ_GUEST_ATTEMPT=$((ATTEMPT + 1)) exec "$BASH" "$0" "$CASE"
		fi
		mkdir -p "$LOG"
		check qemu-kept-guest-writes 1 "QEMU lost the guest's own writes in all $ATTEMPT attempts: nothing was verified (logs in $LOG.attempt*)"
	fi
	[ -n "$KERNEL" ] && kernel_was "$KERNEL"
	if [ $FAILS = 0 ] && [ -z "${KEEP_LOGS:-}" ]; then
		rm -rf "$LOG"
		note "all checks passed"
		exit 0
	fi
	[ $FAILS = 0 ] && { note "passed; logs kept in $LOG"; exit 0; }
	note "$FAILS check(s) failed; logs kept in $LOG"
	exit 1
}
# Every guest this case booted ran series K (VIRTQ_GUEST_KERNEL): else
# the case proved nothing about it.
kernel_was() {
	local k seen
	seen=$(grep -ah '^VQ_BEGIN ' "$LOG"/*/output.log 2>/dev/null | sed -n 's/.*kernel=\([^ ]*\).*/\1/p' | sort -u | tr '\n' ' ')
	k=$(echo "$seen" | tr ' ' '\n' | grep -c . || true)
	check guest-kernel-$1 $([ "$k" -gt 0 ] && ! echo "$seen" | tr ' ' '\n' | grep . | grep -qv "^$1[.]" && echo 0 || echo 1) \
		"guest kernels booted: ${seen:-none}"
}
# kv PREFIX KEY FILE: value of KEY on the last line starting with PREFIX
kv() { grep -a "^$1 " "$3" 2>/dev/null | tail -1 | sed -n "s/.* $2=\([^ ]*\).*/\1/p"; }
# count_lines PREFIX PATTERN FILE
count() { grep -a "^$1 " "$3" 2>/dev/null | grep -c -- "$2"; }

command -v qemu-system-x86_64 >/dev/null || cannot_run "qemu-system-x86_64 not installed (scripts/deps.sh test)"
"$HERE/build-guest.sh" >/dev/null || cannot_run "the guest image could not be built"
GVSOCK=$VIRTQ_GUEST_CACHE/host/gvsock

# ---- the boot: run-guest.sh with our log dir, in the foreground or not ----
# guest NAME [run-guest options] -- 'cmd'     (output in $LOG/NAME/output.log)
guest() {
	local name=$1
	shift
	"$HERE/run-guest.sh" --logdir "$LOG/$name" "$@" > "$LOG/$name.out" 2> "$LOG/$name.err"
	local rc=$?
	cat "$LOG/$name.err"
	return $rc
}
guest_bg() {
	local name=$1
	shift
	"$HERE/run-guest.sh" --logdir "$LOG/$name" "$@" > "$LOG/$name.out" 2> "$LOG/$name.err" &
	GPID=$!
	PIDS+=("$GPID")
}
# guest_wait NAME: the background guest's status
guest_wait() {
	wait "$GPID"
	local rc=$?
	cat "$LOG/$1.err"
	return $rc
}
# wait_mark NAME MARK SECONDS: the guest printed MARK on its output port
wait_mark() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		grep -aq "^$2" "$LOG/$1/output.log" 2>/dev/null && return 0
		kill -0 "$GPID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
wait_sock() {
	local i
	for ((i = 0; i < 100; i++)); do
		[ -S "$1" ] && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# ---- net backends: start MODE (sink|loopback|source), stop, kill ----
# After net_stop: NET_RX / NET_TX are the frames the backend took from the
# guest / gave to the guest; NET_DROP the frames it could not deliver;
# NET_MISSED / NET_LATE (virtq) the kicks the guest owed and never sent,
# the calls it was owed and got late.
NET_PID=
NET_N=0
NET_OPTS=()     # more virtq-net options for the next net_start
SOURCE_COUNT=5000 SOURCE_SIZE=64
net_start() {
	NET_N=$((NET_N + 1))
	NET_OUT=$LOG/net-$NET_N.log
	rm -f "$NSOCK"
	case "$BACKEND" in
	testpmd)
		local fwd
		case "$1" in sink) fwd=rxonly ;; loopback) fwd=macswap ;; source) fwd=txonly ;; esac
		NET_PREFIX=vqguest_$$_$NET_N
		dpdk-testpmd -l 0-1 --no-huge -m 256 --no-pci --file-prefix "$NET_PREFIX" \
			--log-level=lib.eal:notice --vdev "net_vhost0,iface=$NSOCK,queues=1" -- \
			--forward-mode=$fwd --nb-cores=1 --total-num-mbufs=16384 \
			--stats-period=5 --txpkts=64 > "$NET_OUT" 2>&1 < /dev/null &
		;;
	virtq)
		local extra=()
		[ "$1" = source ] && extra=(--count "$SOURCE_COUNT" --size "$SOURCE_SIZE")
		[ "$1" = tap ] && extra=(--tap "$NET_TAP")
		"$VIRTQ_NET" --socket-path "$NSOCK" --mode "$1" --json "${extra[@]}" "${NET_OPTS[@]}" \
			> "$NET_OUT" 2>&1 < /dev/null &
		;;
	esac
	NET_PID=$!
	PIDS+=("$NET_PID")
	wait_sock "$NSOCK" "$NET_PID" || { note "net backend did not start:"; tail -5 "$NET_OUT"; return 1; }
}
net_stop() {
	[ -n "$NET_PID" ] || return 0
	case "$BACKEND" in
	testpmd) kill -INT "$NET_PID" 2>/dev/null ;;
	virtq) kill -TERM "$NET_PID" 2>/dev/null ;;
	esac
	local i
	for ((i = 0; i < 100; i++)); do kill -0 "$NET_PID" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$NET_PID" 2>/dev/null
	wait "$NET_PID" 2>/dev/null
	NET_PID= NET_MISSED= NET_LATE=
	case "$BACKEND" in
	testpmd)
		rm -rf "/var/run/dpdk/$NET_PREFIX"
		# testpmd's final "Forward statistics for port 0" block
		read -r NET_RX NET_TX NET_DROP < <(awk '
			/Forward statistics for port 0/ { f = 1 }
			f && /RX-packets:/ { rx = $2 }
			f && /TX-packets:/ { tx = $2; drop = $4; f = 0 }
			END { print rx + 0, tx + 0, drop + 0 }' "$NET_OUT")
		;;
	virtq)
		read -r NET_RX NET_TX NET_DROP NET_MISSED NET_LATE < <(virtq_net_counters "$NET_OUT")
		;;
	esac
}
net_kill() {
	kill -9 "$NET_PID" 2>/dev/null
	wait "$NET_PID" 2>/dev/null
	NET_PID=
	[ "$BACKEND" = testpmd ] && rm -rf "/var/run/dpdk/$NET_PREFIX"
}
# virtq-net's JSON summary -> "rx tx drop": its tx_pkts are the guest's
# transmissions (frames we took), rx_pkts the frames delivered to the guest,
# no_rx_buf the frames dropped because the guest had no receive buffer.
virtq_net_counters() {
	local l
	l=$(grep -a '"summary":true' "$1" | tail -1)
	jnum() { echo "$l" | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }
	echo "$(jnum tx_pkts) $(jnum rx_pkts) $(jnum no_rx_buf) $(jnum kicks_missed) $(jnum calls_late)"
}

need_net_backend() {
	case "$BACKEND" in
	testpmd)
		command -v dpdk-testpmd >/dev/null || cannot_run "dpdk-testpmd not installed (apt-get install dpdk-dev)"
		;;
	virtq)
		VIRTQ_NET=$BUILD/tools/net/virtq-net
		[ -x "$VIRTQ_NET" ] || cannot_run "$VIRTQ_NET not built"
		;;
	*) cannot_run "unknown VIRTQ_GUEST_BACKEND=$BACKEND" ;;
	esac
	note "net backend: $BACKEND"
}

# The negotiated virtio feature bits, as the guest driver sees them.
FEATS='echo "FEATURES bits=$(cat /sys/bus/virtio/devices/virtio0/features)"'
feature() { # feature BIT OUTFILE -> 0/1
	local b
	b=$(kv FEATURES bits "$2")
	echo "${b:$1:1}"
}

# ---- net: split/packed x mrg_rxbuf: sink, loopback, source ----
# huge_mount PAGES: at least PAGES free 2 MiB pages and a hugetlbfs mount at
# $LOG/huge, both given back by finish.
huge_mount() {
	local need=$1 free nr=/proc/sys/vm/nr_hugepages
	[ -w $nr ] || cannot_run "cannot reserve huge pages (not root)"
	free=$(awk '/^HugePages_Free/ {print $2}' /proc/meminfo)
	if [ "${free:-0}" -lt "$need" ]; then
		HUGE_SAVED=$(cat $nr)
		echo $((HUGE_SAVED + need - free)) > $nr
		free=$(awk '/^HugePages_Free/ {print $2}' /proc/meminfo)
		[ "$free" -ge "$need" ] || cannot_run "only $free free 2 MiB pages"
	fi
	mkdir -p "$LOG/huge"
	mount -t hugetlbfs -o pagesize=2M nodev "$LOG/huge" || cannot_run "cannot mount hugetlbfs"
}

# net_matrix PACKED MRG [MEM_PATH [MEM_MB]]: sink, loopback and source.
# The three are independent (each its own backend, socket and guest), so
# they run at once; each one's notes are printed after, in this order.
net_matrix() {
	local packed=$1 mrg=$2 mode n st pids=()
	local opts=(--dev net --packed "$packed" --mrg "$mrg" --mem "${4:-128}" "${MATRIX_OPTS[@]}")
	[ -n "${3:-}" ] && opts+=(--mem-path "$3")
	need_net_backend
	n=0
	for mode in sink loopback source; do
		# NET_N: the backend's log is net-1.log, net-2.log, net-3.log as before
		( NET_N=$n NSOCK=$LOG/net-$mode.sock FAILS=0 PIDS=()
		  matrix_$mode "$packed" "$mrg" "${opts[@]}" --sock "$NSOCK"
		  net_kill
		  exit $((FAILS > 0)) ) > "$LOG/$mode.notes" 2>&1 &
		pids+=($!)
		PIDS+=($!)
		n=$((n + 1))
	done
	n=0
	for mode in sink loopback source; do
		wait "${pids[$n]}"
		st=$?
		cat "$LOG/$mode.notes"
		[ $st = 0 ] || FAILS=$((FAILS + 1))
		n=$((n + 1))
	done
}
# sink: the backend must count exactly the frames the guest sent.
matrix_sink() {
	local packed=$1 mrg=$2 n=20000 rc
	shift 2
	net_start sink || { check sink-start 1 ""; return; }
	guest sink "$@" -- "$FEATS; gnet tx eth0 -n $n"
	rc=$?
	net_stop
	local o=$LOG/sink.out want_p=0 want_m=0
	[ "$packed" = on ] && want_p=1
	[ "$mrg" = on ] && want_m=1
	check features $([ "$(feature 34 "$o")" = $want_p ] && [ "$(feature 15 "$o")" = $want_m ] && echo 0 || echo 1) \
		"RING_PACKED=$(feature 34 "$o") MRG_RXBUF=$(feature 15 "$o") (want $want_p $want_m)"
	check sink-count $([ $rc = 0 ] && [ "$(kv TX sent "$o")" = $n ] && [ "$NET_RX" = $n ] && echo 0 || echo 1) \
		"guest_rc=$rc guest_sent=$(kv TX sent "$o") backend_rx=$NET_RX want=$n"
}
# loopback: every frame comes back once, intact, in its burst.
matrix_loopback() {
	local rc
	shift 2
	net_start loopback || { check loopback-start 1 ""; return; }
	guest loopback "$@" -- \
		'gnet echo eth0 -n 2000 -s 0 && gnet echo eth0 -n 500 -s 60 && gnet echo eth0 -n 500 -s 1514'
	rc=$?
	net_stop
	local o=$LOG/loopback.out
	check loopback-echo $([ $rc = 0 ] && [ "$(count ECHO result=PASS "$o")" = 3 ] && echo 0 || echo 1) \
		"guest_rc=$rc kicks_missed=${NET_MISSED:-?} calls_late=${NET_LATE:-?} $(grep -a '^ECHO ' "$o" | sed 's/.*sent=\([0-9]*\) ok=\([0-9]*\).*size=\([0-9]*\).*result=\(.*\)/[\3: \2\/\1 \4]/' | tr '\n' ' ')"
}
# source: the guest receives the backend's frames, none of them damaged;
# virtq-net sends SOURCE_COUNT frames: each one is delivered and received
# by the guest, or counted as dropped for want of a receive buffer.
# The backend sends as soon as the guest posts buffers, when eth0 comes
# up: the guest's socket opens first (--ifup off, gnet rx -u), or it
# would see none of them.  It reads until it has them all (IOMMU cases
# under CI load sent ~300 frames a second: a 3 s window cut them short).
matrix_source() {
	local rc
	shift 2
	net_start source || { check source-start 1 ""; return; }
	guest source "$@" --ifup off -- "gnet rx eth0 -u -s $SOURCE_SIZE -n $SOURCE_COUNT -t 30 -i 2"
	rc=$?
	net_stop
	local o=$LOG/source.out
	local got src sdrop ifrx ok=1
	got=$(kv RX frames "$o")
	src=$(kv RX source "$o")
	sdrop=$(kv RX socket_drops "$o")
	ifrx=$(kv RX if_rx_packets "$o")
	if [ "$BACKEND" = virtq ]; then
		# Open before eth0 came up, the socket sees every frame the
		# interface counts: each one of virtq-net's and intact
		# (source=, checked byte by byte; bad=), or dropped for want
		# of room in the socket.
		[ $rc = 0 ] && [ "$(kv RX bad "$o")" = 0 ] && [ "${src:-0}" -gt 0 ] &&
			[ "$src" = "$got" ] && [ $((src + ${sdrop:-0})) = "$ifrx" ] &&
			[ "$ifrx" = "$NET_TX" ] && [ $((NET_TX + NET_DROP)) = "$SOURCE_COUNT" ] && ok=0
	else
		[ $rc = 0 ] && [ "${got:-0}" -gt 0 ] && [ "$(kv RX bad "$o")" = 0 ] && ok=0
	fi
	check source-rx $ok "guest_rc=$rc guest_socket_rx=$got source_frames_ok=$src bad=$(kv RX bad "$o") socket_drops=$sdrop guest_if_rx=$ifrx backend_delivered=$NET_TX backend_no_rx_buf=$NET_DROP$([ "$BACKEND" = virtq ] && echo " sent=$SOURCE_COUNT")"
}

# ---- a guest behind a vIOMMU (vhost-user "IOMMU support") ----
# The same traffic as net_matrix, but every address the backend gets is an
# IOVA: rings and buffers are reached through the IOTLB the backend fills by
# asking QEMU (misses on the back-end channel) and empties when the guest
# unmaps (invalidations).  A stale entry shows as frames damaged or lost, or
# as a guest that crashes (a write into memory it has given to something
# else).
MATRIX_OPTS=()
net_iommu() {
	local packed=$1
	MATRIX_OPTS=(--iommu on)
	net_matrix "$packed" on
	local o=$LOG/sink.out
	check access-platform $([ "$(feature 33 "$o")" = 1 ] && echo 0 || echo 1) \
		"VIRTIO_F_ACCESS_PLATFORM=$(feature 33 "$o")"
	[ "$BACKEND" = virtq ] && iotlb_used "$LOG"/net-*.log
	guest_kernel_clean
}
# iotlb_used LOG...: each backend run's JSON summary shows IOTLB traffic
# (misses asked and answered), none refused, unsent or held up.
iotlb_used() {
	local l f ok=0 what=""
	for f in "$@"; do
		l=$(grep -a '"summary":true' "$f" | tail -1)
		jv() { echo "$l" | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }
		what="$what [$(basename "$f" .log): misses=$(jv misses) updates=$(jv updates) invalidations=$(jv invalidations) refused=$(jv refused) unsent=$(jv misses_unsent) quiesce_timeouts=$(jv quiesce_timeouts)]"
		[ "$(jv misses)" -gt 0 ] && [ "$(jv updates)" -gt 0 ] && [ "$(jv refused)" = 0 ] &&
			[ "$(jv misses_unsent)" = 0 ] && [ "$(jv quiesce_timeouts)" = 0 ] || ok=1
	done
	check iotlb-used $ok "$what"
}
# No oops in any guest's console (a backend writing through a stale IOTLB
# entry corrupts the guest's memory).
guest_kernel_clean() {
	local panic
	panic=$(grep -al "Kernel panic\|general protection\|BUG:" "$LOG"/*/console.log 2>/dev/null | tr '\n' ' ')
	check guest-kernel-clean $([ -z "$panic" ] && echo 0 || echo 1) "${panic:-no oops in any console log}"
}

# ---- packed ring, mrg_rxbuf off, after the guest's RX ring overflowed ----
# The big-buffer receive path (64 KiB chains per buffer) with packed rings:
# after an overflow a backend that mixes up descriptor ids or lengths hands
# the guest stale copies of old frames.  DPDK 22.11 does, intermittently.
# The overflow is forced, not hoped for: the backend is stopped (SIGSTOP)
# while the guest fills a 1024-slot TX ring, then resumed; it loops all of
# it back at once into an RX ring that holds at most 256 buffers.
net_overflow() {
	need_net_backend
	net_start loopback || { check start 1 ""; return; }
	guest_bg overflow --dev net --sock "$NSOCK" --packed on --mrg off --mem 128 --timeout 110 \
		--dev-opts tx_queue_size=1024,rx_queue_size=256 -- "$FEATS"'
		gnet echo eth0 -n 500 -s 0 || exit 1
		for r in 1 2; do
			echo "STALL_$r"
			sleep 1
			gnet tx eth0 -n 1000 -s 60 &
			sleep 2
			echo "RESUME_$r"
			wait $! || exit 1
			sleep 0.5
			echo "ROUND $r"
			gnet echo eth0 -n 1000 -s 60 -w 2000
			gnet echo eth0 -n 1000 -s 0 -w 2000
		done; true'
	local r stalled=0
	for r in 1 2; do
		wait_mark overflow "STALL_$r" 80 || break
		kill -STOP "$NET_PID"
		wait_mark overflow "RESUME_$r" 20
		kill -CONT "$NET_PID"
		stalled=$((stalled + 1))
	done
	guest_wait overflow
	local rc=$?
	net_stop
	local o=$LOG/overflow.out pass stale
	pass=$(count ECHO result=PASS "$o")
	stale=$(grep -a '^ECHO ' "$o" | sed -n 's/.* stale=\([0-9]*\).*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
	local ok=1
	[ $rc = 0 ] && [ "$pass" = 5 ] && [ $stalled = 2 ] && ok=0
	local info="guest_rc=$rc echo_pass=$pass/5 stalls=$stalled/2 stale_frames=${stale:-?} backend_rx=$NET_RX backend_tx=$NET_TX backend_dropped=$NET_DROP"
	if [ $ok = 1 ] && [ "$BACKEND" = testpmd ]; then
		note "XFAIL after-overflow $info (known DPDK 22.11 packed non-mergeable issue)"
		KEEP_LOGS=1
	else
		check after-overflow $ok "$info"
	fi
	# The rounds only test something if the ring really overflowed.
	check ring-overflowed $([ "${NET_DROP:-0}" -gt 0 ] && echo 0 || echo 1) \
		"frames the backend could not deliver for want of RX buffers: ${NET_DROP:-0}"
}

# ---- kill the backend mid-traffic; QEMU reconnects; the guest works again ----
net_restart() {
	local mq=${2:-} gopts=() pre=
	need_net_backend
	# mq: both of 2 queue pairs in use; after the reconnect QEMU's two
	# vhost devices set the new backend up again, each its own pair
	if [ "$mq" = mq ]; then
		NET_OPTS=(--queue-pairs 2 --threads 2)
		gopts=(--queues 2)
		pre='gnet channels eth0 2 | sed "s/^/PAIRS /"'
	fi
	net_start loopback || { check start 1 ""; return; }
	guest_bg restart --dev net --sock "$NSOCK" --packed "$1" --reconnect 1 --mem 128 --timeout 110 "${gopts[@]}" -- '
		'"$pre"'
		gnet echo eth0 -n 500 -s 0 || exit 1
		echo KILL_NOW
		gnet tx eth0 -n 100000000 -t 5 > /dev/null 2>&1
		echo TX_DONE
		gnet probe eth0 -t 60 && gnet echo eth0 -n 1000 -s 0'
	if ! wait_mark restart KILL_NOW 80; then
		wait "$GPID"
		check before-restart 1 "the guest never reached the kill point: $(grep -a ECHO "$LOG/restart/output.log")"
		net_stop
		return
	fi
	sleep 1
	net_kill
	note "backend killed mid-traffic"
	sleep 1
	net_start loopback || { check restart 1 "second backend did not start"; return; }
	NET_OPTS=()
	guest_wait restart
	local rc=$?
	net_stop
	local o=$LOG/restart.out
	if [ "$mq" = mq ]; then
		check two-pairs-after-restart $(grep -aq '^PAIRS CHANNELS combined=2 max=2' "$o" &&
			grep -q 'queue 2 started' "$NET_OUT" && grep -q 'queue 3 started' "$NET_OUT" &&
			echo 0 || echo 1) \
			"$(grep -a '^PAIRS' "$o"); the new backend: $(grep -c 'started' "$NET_OUT") ring starts, packets by ring $(grep -a '"summary":true' "$NET_OUT" | sed -n 's/.*"queue_packets":\(\[[0-9,]*\]\).*/\1/p')"
	fi
	check served-after-restart $([ $rc = 0 ] && [ "$(count PROBE result=PASS "$o")" = 1 ] &&
		[ "$(count ECHO result=PASS "$o")" = 2 ] && [ "${NET_RX:-0}" -ge 1000 ] && echo 0 || echo 1) \
		"guest_rc=$rc $(grep -a '^PROBE' "$o") $(grep -a '^ECHO' "$o" | tail -1 | cut -d' ' -f2-6) new_backend_rx=$NET_RX"
}

# ---- the guest resets its device: link down/up, then driver unbind/bind ----
net_reset() {
	need_net_backend
	net_start loopback || { check start 1 ""; return; }
	guest reset --dev net --sock "$NSOCK" --mem 128 --timeout 110 -- '
		D=/sys/bus/virtio/drivers/virtio_net
		gnet echo eth0 -n 500 -s 0 || exit 1
		ip link set eth0 down; ip link set eth0 up
		echo LINK_CYCLED
		gnet probe eth0 -t 20 && gnet echo eth0 -n 500 -s 0 || exit 1
		echo virtio0 > $D/unbind || exit 2
		[ -e /sys/class/net/eth0 ] && { echo "eth0 still there"; exit 2; }
		echo virtio0 > $D/bind || exit 2
		i=0; while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
		ip link set eth0 promisc on; ip link set eth0 up
		echo REBOUND
		gnet probe eth0 -t 20 && gnet echo eth0 -n 1000 -s 0'
	local rc=$?
	net_stop
	local o=$LOG/reset.out
	check link-down-up $(sed -n '/^LINK_CYCLED/,/^REBOUND/p' "$o" | grep 'ECHO.*result=PASS' >/dev/null && echo 0 || echo 1) \
		"$(sed -n '/^LINK_CYCLED/,/^REBOUND/p' "$o" | grep -a '^ECHO' | cut -d' ' -f2-6)"
	check unbind-bind $([ $rc = 0 ] && sed -n '/^REBOUND/,$p' "$o" | grep 'ECHO.*result=PASS' >/dev/null && echo 0 || echo 1) \
		"guest_rc=$rc $(sed -n '/^REBOUND/,$p' "$o" | grep -a -E '^(PROBE|ECHO)' | cut -d' ' -f1-6 | tr '\n' ' ')"
}

# ---- vsock ----
VS_PID=
VS_N=0
need_vsock_backend() {
	[ "$BACKEND" = testpmd ] && note "testpmd has no vsock; using virtq-vsock"
	VIRTQ_VSOCK=$BUILD/tools/vsock/virtq-vsock
	[ -x "$VIRTQ_VSOCK" ] || cannot_run "$VIRTQ_VSOCK not built"
}
vsock_start() {
	VS_N=$((VS_N + 1))
	rm -f "$VSOCK"
	"$VIRTQ_VSOCK" --socket-path "$VSOCK" --guest-cid $CID --uds-path "$UDS" "${VSOCK_OPTS[@]}" \
		> "$LOG/vsock-$VS_N.log" 2>&1 < /dev/null &
	VS_PID=$!
	PIDS+=("$VS_PID")
	wait_sock "$VSOCK" "$VS_PID" || { note "virtq-vsock did not start:"; tail -5 "$LOG/vsock-$VS_N.log"; return 1; }
}
vsock_stop() {
	[ -n "$VS_PID" ] || return 0
	kill -TERM "$VS_PID" 2>/dev/null
	local i
	for ((i = 0; i < 50; i++)); do kill -0 "$VS_PID" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$VS_PID" 2>/dev/null
	wait "$VS_PID" 2>/dev/null
	VS_PID=
}

# guest -> host: several guest connections to CID 2, host listener behind --uds-path
vsock_g2h() {
	local port=5001 j=4 n=2M packed=${1:-off}
	need_vsock_backend
	vsock_start || { check start 1 ""; return; }
	"$GVSOCK" recv -u "${UDS}_$port" -j $j > "$LOG/host-recv.out" 2>&1 &
	local hp=$!
	PIDS+=("$hp")
	guest g2h --dev vsock --sock "$VSOCK" --packed "$packed" --timeout 110 -- \
		"$FEATS; gvsock cid; gvsock send -c 2 -p $port -n $n -j $j -W 20"
	local rc=$?
	wait "$hp"
	local hrc=$?
	vsock_stop
	local o=$LOG/g2h.out
	local want_p=0
	[ "$packed" = on ] && want_p=1
	check ring-layout $([ "$(feature 34 "$o")" = $want_p ] && echo 0 || echo 1) "RING_PACKED=$(feature 34 "$o") want=$want_p"
	check cid-from-backend $([ "$(kv CID local "$o")" = $CID ] && echo 0 || echo 1) "guest_cid=$(kv CID local "$o") want=$CID"
	check guest-to-host $([ $rc = 0 ] && [ $hrc = 0 ] && [ "$(count SEND result=PASS "$o")" = $j ] &&
		[ "$(count RECV result=PASS "$LOG/host-recv.out")" = $j ] && echo 0 || echo 1) \
		"guest_rc=$rc host_rc=$hrc guest_pass=$(count SEND result=PASS "$o")/$j host_pass=$(count RECV result=PASS "$LOG/host-recv.out")/$j bytes_each=$n"
}

# vsock behind a vIOMMU: seqpacket both ways (messages over several
# buffers, both directions at once) with every address an IOVA.
VSOCK_GUEST_OPTS=()
VSOCK_OPTS=()           # more virtq-vsock options for vsock_start
vsock_iommu() {
	VSOCK_GUEST_OPTS=(--iommu on)
	VSOCK_OPTS=(--json)
	vsock_seqpacket off
	local o=$LOG/seq.out
	check access-platform $([ "$(feature 33 "$o")" = 1 ] && echo 0 || echo 1) \
		"VIRTIO_F_ACCESS_PLATFORM=$(feature 33 "$o")"
	iotlb_used "$LOG"/vsock-*.log
	guest_kernel_clean
}

# SOCK_SEQPACKET (VIRTIO_VSOCK_F_SEQPACKET), both ways at once: guest
# connections to CID 2 reach a host SOCK_SEQPACKET listener at UDS_P, and
# host connections to UDS.seqpacket CONNECT to a guest seqpacket listener;
# each side echoes every message, which must come back whole in one read
# (1 byte to 96 KiB, so some span several packets and RX buffers).
vsock_seqpacket() {
	local port=5003 gport=6003 j=2 n=300 packed=${1:-off}
	need_vsock_backend
	vsock_start || { check start 1 ""; return; }
	"$GVSOCK" msgecho -u "${UDS}_$port" -j $j > "$LOG/host-msgecho.out" 2>&1 &
	local hp=$!
	PIDS+=("$hp")
	guest_bg seq --dev vsock --sock "$VSOCK" --packed "$packed" --timeout 110 "${VSOCK_GUEST_OPTS[@]}" -- \
		"$FEATS; gvsock msgecho -p $gport -j $j & gvsock msgcall -c 2 -p $port -n $n -j $j -W 20; wait"
	local hcrc=1
	if wait_mark seq LISTEN 80; then
		"$GVSOCK" msgcall -u "$UDS.seqpacket" -P $gport -n $n -j $j -W 20 > "$LOG/host-msgcall.out" 2>&1
		hcrc=$?
	fi
	guest_wait seq
	local rc=$?
	wait "$hp"
	local hrc=$?
	vsock_stop
	local o=$LOG/seq/output.log
	check seqpacket-negotiated $([ "$(feature 1 "$o")" = 1 ] && echo 0 || echo 1) "VIRTIO_VSOCK_F_SEQPACKET=$(feature 1 "$o")"
	check guest-to-host $([ $rc = 0 ] && [ $hrc = 0 ] && [ "$(count MSGCALL result=PASS "$o")" = $j ] &&
		[ "$(count MSGECHO result=PASS "$LOG/host-msgecho.out")" = $j ] && echo 0 || echo 1) \
		"guest_rc=$rc host_rc=$hrc $(grep -a '^MSGCALL' "$o" | cut -d' ' -f2-6 | tr '\n' ' ')host_echo_pass=$(count MSGECHO result=PASS "$LOG/host-msgecho.out")/$j"
	check host-to-guest $([ $hcrc = 0 ] && [ "$(count MSGCALL result=PASS "$LOG/host-msgcall.out")" = $j ] &&
		[ "$(count MSGECHO result=PASS "$o")" = $j ] && echo 0 || echo 1) \
		"host_rc=$hcrc $(grep -a '^MSGCALL' "$LOG/host-msgcall.out" | cut -d' ' -f2-6 | tr '\n' ' ')guest_echo_pass=$(count MSGECHO result=PASS "$o")/$j"
}

# host -> guest: CONNECT through the backend to a guest listener that echoes
vsock_h2g() {
	local port=6001 j=4 n=2M packed=${1:-off}
	need_vsock_backend
	vsock_start || { check start 1 ""; return; }
	guest_bg h2g --dev vsock --sock "$VSOCK" --packed "$packed" --timeout 110 -- \
		"gvsock echo -p $port -j $j"
	if wait_mark h2g LISTEN 80; then
		"$GVSOCK" call -u "$UDS" -P $port -n $n -j $j -W 20 > "$LOG/host-call.out" 2>&1
	fi
	local hrc=$?
	guest_wait h2g
	local rc=$?
	vsock_stop
	local o=$LOG/h2g.out
	check host-to-guest $([ $rc = 0 ] && [ $hrc = 0 ] && [ "$(count CALL result=PASS "$LOG/host-call.out")" = $j ] &&
		[ "$(count ECHO result=PASS "$o")" = $j ] && echo 0 || echo 1) \
		"guest_rc=$rc host_rc=$hrc host_pass=$(count CALL result=PASS "$LOG/host-call.out")/$j guest_echo_pass=$(count ECHO result=PASS "$o")/$j bytes_each=$n"
}

# ---- both ways on 16 connections each, the host reading slowly ----
# 16 guest connections to CID 2 stream into host receivers that read 16 KiB
# and then sleep 40 ms (so the guest's senders run out of credit and
# virtq-vsock's per-connection buffers fill), while 16 host connections
# CONNECT and stream into guest receivers as fast as they can.  Each
# connection carries its own seeded stream, 16 credit windows long, checked
# byte for byte at the receiver.  gvsock duplex on each side watches its 32
# connections: one that stands still for $stall seconds while another moves
# is a stall.  One is made on purpose: host receiver 0 stops reading for
# $hold seconds, so its connection is backpressured completely; it, and its
# guest sender, must be the only stalls on either side (none would mean
# everything stood still with it: a backend that stops all connections
# behind one full host socket).
vsock_bidir_slow() {
	local gport=6011 hport=5011 j=16 n=4M stall=4 hold=6 hrc=1
	need_vsock_backend
	VSOCK_OPTS=(--json)
	vsock_start || { check start 1 ""; return; }
	guest_bg bidir --dev vsock --sock "$VSOCK" --timeout 110 -- \
		"gvsock duplex -c 2 -p $hport -L $gport -n $n -j $j -S $stall -E 1 -W 30"
	if wait_mark bidir LISTEN 80; then
		timeout 100 "$GVSOCK" duplex -u "$UDS" -P $gport -L "${UDS}_$hport" -n $n -j $j \
			-r 16K -d 40000 -H $hold -S $stall -E 1 -W 30 > "$LOG/host-duplex.out" 2>&1
		hrc=$?
	fi
	guest_wait bidir
	local rc=$?
	vsock_stop
	local o=$LOG/bidir/output.log h=$LOG/host-duplex.out l
	l=$(grep -a '"summary":true' "$LOG/vsock-$VS_N.log" | tail -1)
	# each connection's duration, one list per direction (host side)
	secs() { grep -a "^CONN dir=$1 " "$2" | sed -n 's/.* secs=\([0-9.-]*\).*/\1/p' | tr '\n' ' '; }
	check guest-to-host $([ "$(count SEND result=PASS "$o")" = $j ] &&
		[ "$(count RECV result=PASS "$h")" = $j ] && echo 0 || echo 1) \
		"guest_send_pass=$(count SEND result=PASS "$o")/$j host_recv_pass=$(count RECV result=PASS "$h")/$j bytes_each=$n; host receiver secs: $(secs recv "$h")"
	check host-to-guest $([ "$(count SEND result=PASS "$h")" = $j ] &&
		[ "$(count RECV result=PASS "$o")" = $j ] && echo 0 || echo 1) \
		"host_send_pass=$(count SEND result=PASS "$h")/$j guest_recv_pass=$(count RECV result=PASS "$o")/$j bytes_each=$n; host sender secs: $(secs send "$h")"
	# the longest pause of the connections that did not stall
	others() { grep -a '^CONN .* stalled=0 ' "$1" | sed -n 's/.* longest_pause=\([0-9.]*\).*/\1/p' |
		awk '$1 > m { m = $1 } END { print m + 0 }'; }
	check held-stalls-alone $([ $rc = 0 ] && [ $hrc = 0 ] && [ "$(count DUPLEX result=PASS "$o")" = 1 ] &&
		[ "$(count DUPLEX result=PASS "$h")" = 1 ] && [ "$(count STALL . "$h")" = 1 ] &&
		[ "$(count STALL 'dir=recv conn=0 ' "$h")" = 1 ] && [ "$(count STALL dir=send "$o")" = 1 ] &&
		echo 0 || echo 1) \
		"host receiver 0 held ${hold}s; stall bound ${stall}s; stalls: host [$(grep -a '^STALL' "$h" | cut -d' ' -f2- | tr '\n' ' ')] guest [$(grep -a '^STALL' "$o" | cut -d' ' -f2- | tr '\n' ' ')]; longest pause of the others: host $(others "$h") s, guest $(others "$o") s; guest_rc=$rc host_rc=$hrc $(grep -a -h '^HANG' "$o" "$h" | tr '\n' ' ')guest: $(grep -a '^DUPLEX' "$o" | cut -d' ' -f2-) host: $(grep -a '^DUPLEX' "$h" | cut -d' ' -f2-)"
	jv() { echo "$l" | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }
	# Backpressure, per connection: each host receiver once found 64 KiB
	# or more waiting in its socket (the guest got that far ahead of it;
	# the socket holds about 230 KiB), and virtq-vsock saw its host
	# sockets full.  No bad input either; no_listener is expected: the
	# guest's senders may try before the host's listener is up, and retry.
	local errs backed
	errs=$(echo "$l" | grep -o '"errors":{[^}]*}')
	backed=$(grep -a '^CONN dir=recv ' "$h" | sed -n 's/.* queued_max=\([0-9]*\).*/\1/p' |
		awk '$1 >= 65536 { n++ } END { print n + 0 }')
	check backpressure $([ "$backed" = $j ] && [ "$(jv host_stalls)" -gt 0 ] 2>/dev/null &&
		[ -n "$errs" ] && ! echo "$errs" | sed 's/"no_listener":[0-9]*//' | grep -q ':[1-9]' &&
		echo 0 || echo 1) \
		"host receivers that found >= 64 KiB waiting: $backed/$j; virtq-vsock host_stalls=$(jv host_stalls) credit_updates_sent=$(jv credit_updates_sent) conns_opened=$(jv conns_opened) ${errs:-no summary}"
}

# ---- a host trickling small writes to a guest that does not read ----
# Linux >= 6.12.92 guests are reported to reset a connection once (queued
# packets + 1) * SKB_TRUESIZE(0) passes their buf_alloc, whatever the byte
# credit says (libkrun #795): about 455 packets of 256 KiB.  The host
# sends 240 KiB in 400-byte writes 200 us apart (packets above the 128
# bytes a Linux guest copies into the last queued one) into one CONNECT,
# while the guest's receiver stops reading for $hold seconds after its
# first eighth; every byte must arrive, in order, with no reset, and
# virtq-vsock must have held packets back for the count (pkts_held) -
# else the case proved nothing.
vsock_small_writes() {
	local port=6021 n=240K w=400 pause=200 hold=3 hrc=1
	need_vsock_backend
	VSOCK_OPTS=(--json)
	vsock_start || { check start 1 ""; return; }
	guest_bg small --dev vsock --sock "$VSOCK" --timeout 110 -- \
		"gvsock recv -p $port -H $hold"
	if wait_mark small LISTEN 80; then
		timeout 100 "$GVSOCK" send -u "$UDS" -P $port -n $n -w $w -d $pause -W 30 > "$LOG/host-send.out" 2>&1
		hrc=$?
	fi
	guest_wait small
	local rc=$?
	vsock_stop
	local o=$LOG/small/output.log h=$LOG/host-send.out l held
	l=$(grep -a '"summary":true' "$LOG/vsock-$VS_N.log" | tail -1)
	held=$(echo "$l" | sed -n 's/.*"pkts_held":\([0-9]*\).*/\1/p')
	check tiny-writes-all-delivered $([ $rc = 0 ] && [ $hrc = 0 ] &&
		[ "$(count SEND result=PASS "$h")" = 1 ] && [ "$(count RECV result=PASS "$o")" = 1 ] &&
		echo 0 || echo 1) \
		"guest_rc=$rc host_rc=$hrc host: $(grep -a '^SEND' "$h" | cut -d' ' -f2-) guest: $(grep -a '^RECV' "$o" | cut -d' ' -f2-)"
	check packet-count-held $([ "${held:-0}" -gt 0 ] && echo 0 || echo 1) \
		"virtq-vsock pkts_held=${held:-none} (the guest's packet count was reached and kept)"
}

# ---- sibling guests: two guests of one virtq-vsock talk to each other ----
# One virtq-vsock of three VMs: A (CID 3, group web), B (CID 4, web+db)
# and C (CID 5, batch; no guest booted).  A and B boot at once.  A
# listens: a stream echo and a seqpacket echo.  B streams to A's echo on
# $j connections (every byte checked on its way to A and back: the
# sibling path both ways), runs the seqpacket echo (messages of 1 byte to
# 96 KiB back whole), and streams to a host listener; the host CONNECTs
# to A's echo too.  Then B connects to C, which shares no group with it,
# and to CID 9, which no VM has: each must fail at once with ECONNRESET
# (a RST, not a timeout), counted by the daemon as cid_refused and
# cid_unknown.  The host-port policy, per VM: B may reach host port
# $hport only (a guest connect to another is RST at once), and host
# programs may CONNECT to A's port $aport only (another closes the host
# socket at once); both counted as policy_refused.
vsock_siblings() {
	local n=256K j=2 m=40 hport=5031 aport=7031 mport=7032 xport=7033 hcrc=1 hxrc=0 i
	local s3=$LOG/vs3.sock s4=$LOG/vs4.sock s5=$LOG/vs5.sock
	local u3=$LOG/vs3.uds u4=$LOG/vs4.uds u5=$LOG/vs5.uds
	need_vsock_backend
	VS_N=$((VS_N + 1))
	"$VIRTQ_VSOCK" --json --threads 2 \
		--vm "guest-cid=3,socket=$s3,uds-path=$u3,groups=web,guest-ports=$aport" \
		--vm "guest-cid=4,socket=$s4,uds-path=$u4,groups=web+db,host-ports=$hport" \
		--vm "guest-cid=5,socket=$s5,uds-path=$u5,groups=batch" \
		> "$LOG/vsock-$VS_N.log" 2>&1 < /dev/null &
	VS_PID=$!
	PIDS+=("$VS_PID")
	wait_sock "$s5" "$VS_PID" || { check start 1 "$(tail -3 "$LOG/vsock-$VS_N.log")"; return; }
	"$GVSOCK" recv -u "${u4}_$hport" -j 1 > "$LOG/host-recv.out" 2>&1 &
	local hp=$!
	PIDS+=("$hp")
	"$HERE/run-guest.sh" --logdir "$LOG/a" --dev vsock --sock "$s3" --timeout 110 -- \
		"gvsock cid; gvsock msgecho -p $mport -j 1 & gvsock echo -p $aport -j $((j + 1)); wait" \
		> "$LOG/a.out" 2> "$LOG/a.err" &
	local apid=$!
	PIDS+=("$apid")
	"$HERE/run-guest.sh" --logdir "$LOG/b" --dev vsock --sock "$s4" --timeout 110 -- \
		"gvsock cid; gvsock call -c 3 -p $aport -n $n -j $j -W 60; gvsock msgcall -c 3 -p $mport -n $m -W 20;
		 gvsock send -c 2 -p $hport -n $n -W 20; gvsock send -c 5 -p $xport -n 1 -W 0; gvsock send -c 9 -p $xport -n 1 -W 0;
		 gvsock send -c 2 -p $((hport + 1)) -n 1 -W 0; true" \
		> "$LOG/b.out" 2> "$LOG/b.err" &
	local bpid=$!
	PIDS+=("$bpid")
	for ((i = 0; i < 900; i++)); do
		[ "$(grep -ac '^LISTEN' "$LOG/a/output.log" 2>/dev/null)" = 2 ] && break
		kill -0 "$apid" 2>/dev/null || break
		sleep 0.1
	done
	if [ "$(grep -ac '^LISTEN' "$LOG/a/output.log" 2>/dev/null)" = 2 ]; then
		timeout 60 "$GVSOCK" call -u "$u3" -P $aport -n $n -W 20 > "$LOG/host-call.out" 2>&1
		hcrc=$?
		# A's msgecho port is not in guest-ports: refused without asking A
		timeout 10 "$GVSOCK" call -u "$u3" -P $mport -n 1 -W 0 > "$LOG/host-refused.out" 2>&1
		hxrc=$?
	fi
	wait "$bpid"
	local brc=$?
	wait "$apid"
	local arc=$?
	wait "$hp"
	local hrc=$?
	vsock_stop
	local a=$LOG/a/output.log b=$LOG/b/output.log l
	l=$(grep -a '"summary":true' "$LOG/vsock-$VS_N.log" | tail -1)
	l=${l%%,\"vms\":*}     # the sums, not the per-VM lines after them
	jv() { echo "$l" | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }
	check cids-from-backend $([ "$(kv CID local "$a")" = 3 ] && [ "$(kv CID local "$b")" = 4 ] && echo 0 || echo 1) \
		"A=$(kv CID local "$a") B=$(kv CID local "$b")"
	check sibling-stream-both-ways $([ $brc = 0 ] && [ "$(count CALL result=PASS "$b")" = $j ] &&
		[ "$(count ECHO result=PASS "$a")" = $((j + 1)) ] && echo 0 || echo 1) \
		"B->A->B: $(grep -a '^CALL' "$b" | cut -d' ' -f2-4,9 | tr '\n' ' ')A echoed $(count ECHO result=PASS "$a")/$((j + 1))"
	check sibling-seqpacket-both-ways $([ "$(count MSGCALL result=PASS "$b")" = 1 ] &&
		[ "$(count MSGECHO result=PASS "$a")" = 1 ] && echo 0 || echo 1) \
		"$(grep -a '^MSGCALL' "$b" | cut -d' ' -f2-4) A: $(grep -a '^MSGECHO' "$a" | cut -d' ' -f2-4)"
	check guest-to-host $([ $hrc = 0 ] && [ "$(count SEND result=PASS "$b")" = 1 ] &&
		[ "$(count RECV result=PASS "$LOG/host-recv.out")" = 1 ] && echo 0 || echo 1) \
		"host_rc=$hrc B sent $(count SEND result=PASS "$b")/1, host got $(count RECV result=PASS "$LOG/host-recv.out")/1"
	check host-to-guest $([ $hcrc = 0 ] && [ "$(count CALL result=PASS "$LOG/host-call.out")" = 1 ] && echo 0 || echo 1) \
		"host_rc=$hcrc $(grep -a '^CALL' "$LOG/host-call.out" | cut -d' ' -f2-4)"
	check outside-group-reset-at-once $([ "$(grep -ac 'CONNECT error=Connection reset by peer' "$b")" = 3 ] &&
		[ "$(jv cid_refused)" = 1 ] && [ "$(jv cid_unknown)" = 1 ] && echo 0 || echo 1) \
		"B's refused connects: $(grep -a '^CONNECT' "$b" | tr '\n' ' ')cid_refused=$(jv cid_refused) cid_unknown=$(jv cid_unknown)"
	check host-port-policy-both-ways $([ "$(jv policy_refused)" = 2 ] && [ $hxrc != 0 ] && [ $hxrc != 124 ] &&
		echo 0 || echo 1) \
		"policy_refused=$(jv policy_refused) (B to host port $((hport + 1)), host to A's port $mport: rc $hxrc)"
	check sibling-conns-counted $([ "$(jv sibling_conns)" = $((2 * (j + 1))) ] && echo 0 || echo 1) \
		"sibling_conns=$(jv sibling_conns) (each of $((j + 1)) counted by both devices) guest_rc A=$arc B=$brc"
}

# ---- QMP over bash's /dev/tcp (no extra tools); every line goes to qmp.log ----
qmp_open() {
	local i line
	QFD=
	for ((i = 0; i < 100; i++)); do
		{ exec {QFD}<> "/dev/tcp/127.0.0.1/$1"; } 2>/dev/null && break
		QFD=
		sleep 0.1
	done
	[ -n "${QFD:-}" ] || return 1
	read -r -t 10 -u "$QFD" line && echo "$line" >> "$LOG/qmp.log" || return 1
	qmp '{"execute":"qmp_capabilities"}'
}
# qmp JSON: send a command, wait for its return (or error); events are logged
qmp() {
	local line
	echo "> $1" >> "$LOG/qmp.log"
	echo "$1" >&"$QFD"
	while read -r -t 30 -u "$QFD" line; do
		echo "$line" >> "$LOG/qmp.log"
		case "$line" in
		*'"return"'*) return 0 ;;
		*'"error"'*) return 1 ;;
		esac
	done
	return 1
}
# qmp_event NAME SECONDS: wait for an event (it may have come already)
qmp_event() {
	local line end=$((SECONDS + $2))
	grep -q "\"event\": *\"$1\"" "$LOG/qmp.log" && return 0
	while [ $SECONDS -lt $end ] && read -r -t "$2" -u "$QFD" line; do
		echo "$line" >> "$LOG/qmp.log"
		case "$line" in *"\"$1\""*) return 0 ;; esac
	done
	return 1
}
qmp_port() {
	local p
	for ((;;)); do
		p=$((20000 + RANDOM % 40000))
		(exec 3<> "/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo $p; return; }
	done
}

# ---- restart virtq-vsock ----
# QEMU 7.2's vhost-user-vsock has no reconnect (the chardev has no event
# handler; it keeps the event queue itself and only sends TRANSPORT_RESET
# after migration), so a restarted backend is attached the way an operator
# would: hot-unplug the device, start the backend, hot-plug a new device.
# The guest's driver goes away and comes back: its connections end with
# ECONNRESET, which is what the transport reset event does, and new
# connections must work.
vsock_restart() {
	local qp
	need_vsock_backend
	vsock_start || { check start 1 ""; return; }
	qp=$(qmp_port)
	"$GVSOCK" recv -u "${UDS}_5101" -j 1 > "$LOG/host-before.out" 2>&1 &
	PIDS+=($!)
	"$GVSOCK" recv -u "${UDS}_5102" -j 1 > "$LOG/host-old.out" 2>&1 &
	PIDS+=($!)
	"$GVSOCK" recv -u "${UDS}_5103" -j 3 > "$LOG/host-after.out" 2>&1 &
	local after=$!
	PIDS+=("$after")
	guest_bg restart --dev vsock --sock "$VSOCK" --qmp-port "$qp" --timeout 110 -- '
		gvsock send -c 2 -p 5101 -n 1M -W 20 || exit 1
		( gvsock send -c 2 -p 5102 -n 4000M -W 20; echo "OLD_DONE rc=$?" ) > /tmp/old.out 2>&1 &
		sleep 2
		echo KILL_NOW
		i=0; while ! grep -q OLD_DONE /tmp/old.out && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
		cat /tmp/old.out
		echo NEW_CONNECTIONS
		gvsock send -c 2 -p 5103 -n 2M -j 3 -W 60 && gvsock cid'
	qmp_open "$qp" || { check qmp 1 "no QMP on port $qp"; return; }
	if ! wait_mark restart KILL_NOW 80; then
		wait "$GPID"
		check before-restart 1 "the guest never reached the kill point"
		return
	fi
	kill -9 "$VS_PID"
	wait "$VS_PID" 2>/dev/null
	note "virtq-vsock killed mid-transfer"
	vsock_start || { check restart 1 "second virtq-vsock did not start"; return; }
	qmp '{"execute":"device_del","arguments":{"id":"vsock0"}}'
	qmp_event DEVICE_DELETED 40 || note "no DEVICE_DELETED within 40 s"
	qmp '{"execute":"chardev-remove","arguments":{"id":"chr0"}}'
	qmp '{"execute":"chardev-add","arguments":{"id":"chr1","backend":{"type":"socket","data":{"addr":{"type":"unix","data":{"path":"'"$VSOCK"'"}},"server":false}}}}'
	qmp '{"execute":"device_add","arguments":{"driver":"vhost-user-vsock-pci","id":"vsock1","chardev":"chr1"}}' ||
		note "device_add failed: $(tail -1 "$LOG/qmp.log")"
	guest_wait restart
	local rc=$?
	wait "$after"
	local hrc=$?
	vsock_stop
	local o=$LOG/restart.out
	check old-connection-ends $(grep -q '^OLD_DONE rc=[1-9]' "$o" && grep -q '^SEND conn=0 error=' "$o" && echo 0 || echo 1) \
		"$(grep -a -E '^(SEND|OLD_DONE)' "$o" | sed -n '2,3p' | cut -c1-80 | tr '\n' ' ')"
	check new-connections $([ $rc = 0 ] && [ $hrc = 0 ] &&
		[ "$(sed -n '/^NEW_CONNECTIONS/,$p' "$o" | grep -c 'SEND.*result=PASS')" = 3 ] &&
		[ "$(count RECV result=PASS "$LOG/host-after.out")" = 3 ] && echo 0 || echo 1) \
		"guest_rc=$rc host_rc=$hrc guest_pass=$(sed -n '/^NEW_CONNECTIONS/,$p' "$o" | grep -c 'SEND.*result=PASS')/3 host_pass=$(count RECV result=PASS "$LOG/host-after.out")/3 cid_after=$(kv CID local "$o")"
}

# ---- the guest resets its vsock device: unbind/bind the driver ----
vsock_reset() {
	need_vsock_backend
	vsock_start || { check start 1 ""; return; }
	"$GVSOCK" recv -u "${UDS}_5201" -j 1 > "$LOG/host-before.out" 2>&1 &
	PIDS+=($!)
	"$GVSOCK" recv -u "${UDS}_5202" -j 1 > "$LOG/host-old.out" 2>&1 &
	PIDS+=($!)
	"$GVSOCK" recv -u "${UDS}_5203" -j 3 > "$LOG/host-after.out" 2>&1 &
	local after=$!
	PIDS+=("$after")
	guest reset --dev vsock --sock "$VSOCK" --timeout 110 -- '
		D=/sys/bus/virtio/drivers/vmw_vsock_virtio_transport
		gvsock send -c 2 -p 5201 -n 1M -W 20 || exit 1
		( gvsock send -c 2 -p 5202 -n 4000M -W 20; echo "OLD_DONE rc=$?" ) > /tmp/old.out 2>&1 &
		sleep 2
		echo virtio0 > $D/unbind || exit 2
		echo virtio0 > $D/bind || exit 2
		i=0; while ! grep -q OLD_DONE /tmp/old.out && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
		cat /tmp/old.out
		echo NEW_CONNECTIONS
		gvsock send -c 2 -p 5203 -n 2M -j 3 -W 30'
	local rc=$?
	wait "$after"
	local hrc=$?
	vsock_stop
	local o=$LOG/reset.out
	check old-connection-ends $(grep -q '^OLD_DONE rc=[1-9]' "$o" && echo 0 || echo 1) \
		"$(grep -a -E '^(SEND|OLD_DONE)' "$o" | sed -n '2,3p' | cut -c1-80 | tr '\n' ' ')"
	check new-connections $([ $rc = 0 ] && [ $hrc = 0 ] &&
		[ "$(count RECV result=PASS "$LOG/host-after.out")" = 3 ] && echo 0 || echo 1) \
		"guest_rc=$rc host_rc=$hrc host_pass=$(count RECV result=PASS "$LOG/host-after.out")/3"
}

# ---- live migration: the guest moves to a second QEMU and a second virtq-net ----
# QEMU migrates a vhost-user device only if the backend offers dirty-page
# logging (VHOST_F_LOG_ALL with LOG_SHMFD); otherwise the migration is
# blocked.  While RAM is copied the source backend keeps echoing frames into
# the guest's receive buffers and must mark every page it writes: a page it
# fails to mark is not sent again and reaches the destination stale.  The
# direct check: when the migration is done, with both machines paused, the
# destination's guest RAM must equal the source's byte for byte.  Then the
# guest runs on: its echoes (random sizes, each frame checked) before, across
# and after the migration must all come back intact, the last ones through
# the destination's backend.
# QEMU 7.2's TCG itself loses some of the guest CPU's own writes in a
# migration when the host is loaded, with no vhost-user device at all
# (migrate-control shows it: kernel pages differ, the destination's guest
# crashes).  ram-diff.py tells those pages from any the backend could have
# written (its rings, the test frames): a migration in which only the
# guest's own pages differ proves nothing about us and leaves a damaged
# guest, so the case stops there and runs again, three times at most.
# guest_ram LOGDIR: /proc path of the guest-RAM memfd of the QEMU logging there
guest_ram() {
	local pid f
	for pid in $(pgrep -f -- "file:$1/console.log"); do
		[ "$(cat /proc/"$pid"/comm 2>/dev/null)" = qemu-system-x86 ] || continue
		for f in /proc/"$pid"/fd/*; do
			case "$(readlink "$f")" in
			/memfd:mem*) echo "$f"; return 0 ;;
			esac
		done
	done
	return 1
}
# qmp_status: the "status" field of the last QMP reply
qmp_status() { tail -1 "$LOG/qmp.log" | sed -n 's/.*"status": *"\([a-z-]*\)".*/\1/p'; }
# qmp_num KEY: the number KEY has in the last QMP reply
qmp_num() { tail -1 "$LOG/qmp.log" | sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p"; }
# migration_guests SRC_SOCK DST_SOCK CMD RUN-GUEST-OPTS...: the destination
# guest paused on -incoming, then the source guest, both running CMD (a
# socket argument may be empty: no device); returns 0 once the source
# printed MIGRATE_NOW.  Sets MIG_SRC_QMP, MIG_DST_QMP, MIG_PORT, MIG_DST.
migration_guests() {
	local src=() dst=() cmd=$3
	[ -n "$1" ] && src=(--sock "$1")
	[ -n "$2" ] && dst=(--sock "$2")
	shift 3
	MIG_SRC_QMP=$(qmp_port)
	MIG_DST_QMP=$(qmp_port)
	MIG_PORT=$(qmp_port)
	"$HERE/run-guest.sh" --logdir "$LOG/dst" "$@" "${dst[@]}" --qmp-port "$MIG_DST_QMP" \
		--incoming "tcp:127.0.0.1:$MIG_PORT" -- "$cmd" > "$LOG/dst.out" 2> "$LOG/dst.err" &
	MIG_DST=$!
	PIDS+=("$MIG_DST")
	guest_bg src "$@" "${src[@]}" --qmp-port "$MIG_SRC_QMP" -- "$cmd"
	wait_mark src MIGRATE_NOW 60 && return 0
	check before-migration 1 "the guest never reached the migration point"
	return 1
}
# migration_end: both guests gone; MIG_RC is the destination guest's status
migration_end() {
	wait "$GPID" 2>/dev/null
	wait "$MIG_DST"
	MIG_RC=$?
	cat "$LOG/dst.err"
}
# migrate_compare SRC_QMP DST_QMP PORT: migrate the source to the paused
# destination (-incoming) at 32 MB/s, so RAM is copied over a few seconds of
# iterations while the backend writes; check it completed and that, with both
# paused, the destination's guest RAM equals the source's; then quit the
# source and let the destination run.
migrate_compare() {
	local qfd_src qfd_dst status= t0=$SECONDS ram_src= ram_dst= diff= rings
	qmp_open "$1" || { check qmp 1 "no QMP on port $1"; return 1; }
	qfd_src=$QFD
	rings=$(vhost_rings)
	qmp '{"execute":"migrate-set-parameters","arguments":{"max-bandwidth":33554432,"downtime-limit":300}}'
	qmp '{"execute":"migrate","arguments":{"uri":"tcp:127.0.0.1:'"$3"'"}}' ||
		note "migrate refused: $(tail -1 "$LOG/qmp.log")"
	while [ $((SECONDS - t0)) -lt 60 ]; do
		qmp '{"execute":"query-migrate"}' || break
		status=$(qmp_status)
		case "$status" in completed|failed|cancelled) break ;; esac
		sleep 0.2
	done
	check migrated $([ "$status" = completed ] && echo 0 || echo 1) \
		"status=${status:-none} after $((SECONDS - t0)) s $(grep -o '"error": *{[^}]*}' "$LOG/qmp.log" | tail -1)"
	# the destination has loaded everything when it is paused (not inmigrate)
	qmp_open "$2" || { check qmp 1 "no QMP on port $2"; return 1; }
	qfd_dst=$QFD
	for ((t0 = SECONDS; SECONDS - t0 < 30;)); do
		qmp '{"execute":"query-status"}' || break
		status=$(qmp_status)
		[ "$status" = paused ] && break
		sleep 0.2
	done
	ram_src=$(guest_ram "$LOG/src") && ram_dst=$(guest_ram "$LOG/dst") &&
		diff=$(python3 "$HERE/ram-diff.py" "$ram_src" "$ram_dst" $rings)
	local pages backend
	pages=$(echo "$diff" | sed -n 's/^pages=\([0-9]*\) .*/\1/p')
	backend=$(echo "$diff" | sed -n 's/.* backend=\([0-9]*\) .*/\1/p')
	if [ -n "$rings" ] && [ "${pages:-x}" != 0 ] && [ "${backend:-x}" = 0 ]; then
		QEMU_LOST=$diff
		note "QEMU lost the guest's own writes in this migration, no page of the backend's differs: $diff"
	else
		check guest-ram-identical $([ "${pages:-x}" = 0 ] && echo 0 || echo 1) \
			"destination status=$status pages differing from the source: ${diff:-no memfds found (src=$ram_src dst=$ram_dst)} (rings given: $(echo $rings | wc -w))"
	fi
	# for the post-mortem: the first differing pages of both sides, and
	# which bytes differ
	if [ "${pages:-0}" != 0 ]; then
		local pg
		for pg in $(echo "$diff" | grep -o '0x[0-9a-f]*' | head -4); do
			dd if="$ram_src" of="$LOG/page-$pg-src.bin" bs=4096 skip=$((pg / 4096)) count=1 2>/dev/null
			dd if="$ram_dst" of="$LOG/page-$pg-dst.bin" bs=4096 skip=$((pg / 4096)) count=1 2>/dev/null
		done
		cmp -l "$ram_src" "$ram_dst" | head -2000 > "$LOG/ram-diff.txt"
	fi
	QFD=$qfd_src
	qmp '{"execute":"quit"}'
	QFD=$qfd_dst
	if [ -n "$QEMU_LOST" ]; then
		qmp '{"execute":"quit"}'
		return 1
	fi
	qmp '{"execute":"cont"}'
}
# vhost_rings: GPA:LEN of every ring of the source's virtio device (QMP
# x-query-virtio-queue-status), for ram-diff.py; each area is given its
# split-ring size, which covers the packed layout's too
vhost_rings() {
	local path q nvqs num
	qmp '{"execute":"x-query-virtio"}' || return 0
	path=$(tail -1 "$LOG/qmp.log" | grep -o '"path": *"[^"]*"' | head -1 | sed 's/.*"\([^"]*\)"$/\1/')
	[ -n "$path" ] || return 0
	qmp '{"execute":"x-query-virtio-status","arguments":{"path":"'"$path"'"}}' || return 0
	nvqs=$(qmp_num num-vqs)
	for ((q = 0; q < ${nvqs:-0}; q++)); do
		qmp '{"execute":"x-query-virtio-queue-status","arguments":{"path":"'"$path"'","queue":'$q'}}' || return 0
		num=$(qmp_num vring-num)
		printf ' %s:%s %s:%s %s:%s' "$(qmp_num vring-desc)" $((16 * num)) \
			"$(qmp_num vring-avail)" $((6 + 2 * num)) "$(qmp_num vring-used)" $((6 + 8 * num))
	done
}
# migrate_postcopy SRC_QMP DST_QMP PORT: the same move in postcopy: both
# QEMUs get postcopy-ram, the destination will run as soon as it can
# (cont while incoming), and the source switches to postcopy at once, its
# background copy held to 16 MB/s, so the destination's guest and backend
# run for seconds while most of the RAM is still on the source.  Checks it
# completed through postcopy-active with pages requested on faults; then
# quits the source and reports how long the guest's vCPU waited for pages.
migrate_postcopy() {
	local qfd_src qfd_dst status= seen= t0=$SECONDS req=
	qmp_open "$2" || { check qmp 1 "no QMP on port $2"; return 1; }
	qfd_dst=$QFD
	qmp '{"execute":"migrate-set-capabilities","arguments":{"capabilities":[{"capability":"postcopy-ram","state":true},{"capability":"postcopy-blocktime","state":true}]}}' ||
		note "the destination refused postcopy-ram: $(tail -1 "$LOG/qmp.log")"
	qmp '{"execute":"cont"}'
	qmp_open "$1" || { check qmp 1 "no QMP on port $1"; return 1; }
	qfd_src=$QFD
	qmp '{"execute":"migrate-set-capabilities","arguments":{"capabilities":[{"capability":"postcopy-ram","state":true}]}}' ||
		note "the source refused postcopy-ram: $(tail -1 "$LOG/qmp.log")"
	qmp '{"execute":"migrate-set-parameters","arguments":{"max-bandwidth":33554432,"max-postcopy-bandwidth":16777216}}'
	qmp '{"execute":"migrate","arguments":{"uri":"tcp:127.0.0.1:'"$3"'"}}' ||
		note "migrate refused: $(tail -1 "$LOG/qmp.log")"
	qmp '{"execute":"migrate-start-postcopy"}' ||
		note "migrate-start-postcopy refused: $(tail -1 "$LOG/qmp.log")"
	while [ $((SECONDS - t0)) -lt 60 ]; do
		qmp '{"execute":"query-migrate"}' || break
		status=$(qmp_status)
		[ "$status" = postcopy-active ] && seen=yes
		case "$status" in completed|failed|cancelled) break ;; esac
		sleep 0.1
	done
	req=$(tail -1 "$LOG/qmp.log" | sed -n 's/.*"postcopy-requests": *\([0-9]*\).*/\1/p')
	check migrated-postcopy $([ "$status" = completed ] && [ -n "$seen" ] && echo 0 || echo 1) \
		"status=${status:-none} postcopy-active seen=${seen:-no} after $((SECONDS - t0)) s $(grep -o '"error": *{[^}]*}' "$LOG/qmp.log" | tail -1)"
	check pages-requested-on-faults $([ "${req:-0}" -gt 0 ] && echo 0 || echo 1) \
		"postcopy-requests=${req:-none}"
	qmp '{"execute":"quit"}'
	# how long the guest's vCPU waited for pages (QEMU's own faults)
	QFD=$qfd_dst
	qmp '{"execute":"query-migrate"}' &&
		note "destination: $(tail -1 "$LOG/qmp.log" | grep -o '"postcopy-[a-z-]*blocktime": *[^]},]*[]]*' | tr '\n' ' ')"
}
net_migrate() {
	local packed=$1 mq=${2:-} pre= across= after=
	local opts=(--dev net --packed "$packed" --mrg on --mem 128 --timeout 100)
	# mq: 2 queue pairs, both in use (ethtool -L combined 2), so QEMU runs
	# two vhost devices on the connection and both pairs' rings move with
	# the guest.  One vCPU: with two, QEMU 7.2 under TCG loses far more of
	# the guest's own writes in the migration (struct pages, seen with the
	# backend idle too; see migrate_compare).  One vCPU sends on one
	# transmit queue (XPS), and loopback answers on the same pair: the
	# guest moves its XPS map so that pair 0 carries the echo before,
	# pair 1 the one across, and pair 0 again the one after the move,
	# through the ring state the destination took over.
	if [ "$mq" = mq ]; then
		opts+=(--queues 2)
		NET_OPTS=(--queue-pairs 2 --threads 2)
		pre='gnet channels eth0 2 | sed "s/^/PAIRS /"
		xps() { echo 0 > /sys/class/net/eth0/queues/tx-$((1 - $1))/xps_cpus &&
			echo 1 > /sys/class/net/eth0/queues/tx-$1/xps_cpus &&
			echo "XPS tx-$1 $(cat /sys/class/net/eth0/queues/tx-*/xps_cpus | tr "\n" " ")"; }
		xps 0'
		across='xps 1'
		after='xps 0'
	fi
	local cmd=$FEATS'
		'"$pre"'
		gnet echo eth0 -n 500 -s 0 || exit 1
		'"$across"'
		echo MIGRATE_NOW
		gnet echo eth0 -n 10000 -s 0 -w 15000 -t 12
		echo "DURING_RC=$?"
		'"$after"'
		gnet probe eth0 -t 20 && gnet echo eth0 -n 2000 -s 0'
	# The echo across runs for at least 12 s (rounds of 10 000), longer
	# than the copy (about 4 s at 32 MB/s, 6 s in postcopy) however fast
	# the guest echoes: a source guest that finished its command first
	# would power off under the migration (seen once, the echo done in
	# under 3 s).  The burst in flight at the switch-over waits for the
	# last copy, the RAM comparison and the destination's start: on a
	# loaded host over 5 s (its frames came back intact just after the
	# burst was given up), so it waits 15.  postcopy: the guest's own
	# faults stall its vCPU for seconds at a time (QEMU reports the
	# blocktime): it waits 30.
	[ "$mq" = postcopy ] && cmd=${cmd/-w 15000/-w 30000}
	[ "$BACKEND" = virtq ] || cannot_run "the migration case runs virtq-net on both sides"
	need_net_backend
	# the destination's backend first: its QEMU connects at startup
	local sock_src=$NSOCK sock_dst=$LOG/net-dst.sock
	NSOCK=$sock_dst
	net_start loopback || { check start 1 "destination backend"; return; }
	local dst_pid=$NET_PID dst_out=$NET_OUT
	NSOCK=$sock_src
	net_start loopback || { check start 1 "source backend"; return; }
	local src_pid=$NET_PID src_out=$NET_OUT
	NET_OPTS=()
	# postcopy: QEMU traces each fault it reads from the backend's
	# userfaultfd (a note: here the backend mostly finds the pages it
	# touches already there; net-migrate-postcopy-idle-rx checks them)
	[ "$mq" = postcopy ] && opts+=(--trace vhost_user_postcopy_fault_handler)
	migration_guests "$sock_src" "$sock_dst" "$cmd" "${opts[@]}" || return
	sleep 0.5       # the echo runs
	# virtq-net lets QEMU offer the guest announcement (bit 21)
	check guest-announce $([ "$(feature 21 "$LOG/src/output.log")" = 1 ] && echo 0 || echo 1) \
		"GUEST_ANNOUNCE=$(feature 21 "$LOG/src/output.log")"
	if [ "$mq" = postcopy ]; then
		migrate_postcopy "$MIG_SRC_QMP" "$MIG_DST_QMP" "$MIG_PORT"
	else
		migrate_compare "$MIG_SRC_QMP" "$MIG_DST_QMP" "$MIG_PORT"
		[ -n "$QEMU_LOST" ] && return
	fi
	migration_end
	local rc=$MIG_RC
	NET_PID=$src_pid NET_OUT=$src_out
	net_stop
	local src_rx=$NET_RX src_drop=$NET_DROP
	NET_PID=$dst_pid NET_OUT=$dst_out
	net_stop
	local dst_rx=$NET_RX o=$LOG/dst.out during
	cat "$LOG/src/output.log" "$LOG/dst/output.log" > "$LOG/both.out" 2>/dev/null
	# No frame may be lost or damaged.  QEMU stops RX before TX: a frame
	# the guest sends in between stays in its TX ring (virtq-net holds a
	# loopback TX ring while its RX ring is stopped), and the destination
	# echoes it.  Before that hold, 0 or 1 frame per run was dropped there.
	during=$(grep -a '^ECHO ' "$LOG/both.out" | sed -n 2p)
	local lost
	lost=$(echo "$during" | sed -n 's/.* lost=\([0-9]*\).*/\1/p')
	check echo-across-migration $(echo "$during" | grep -q ' ok=[1-9][0-9]* stale=0 bad=0 ' &&
		[ "${lost:-x}" = 0 ] && [ $((src_drop + NET_DROP)) = 0 ] && echo 0 || echo 1) \
		"$(echo "$during" | cut -d' ' -f2-6) dropped_and_counted_by_backends=$((src_drop + NET_DROP))"
	if [ "$mq" = mq ]; then
		# which pair carries gnet's frames is the guest's hash; both
		# must run on both sides
		local qsrc qdst
		qsrc=$(grep -a '"summary":true' "$src_out" | tail -1 | sed -n 's/.*"queue_packets":\[\([0-9,]*\)\].*/\1/p')
		qdst=$(grep -a '"summary":true' "$dst_out" | tail -1 | sed -n 's/.*"queue_packets":\[\([0-9,]*\)\].*/\1/p')
		local s_rx0 s_tx0 s_rx1 s_tx1 d_rx0 d_tx0 d_rx1 d_tx1
		IFS=, read -r s_rx0 s_tx0 s_rx1 s_tx1 <<< "$qsrc"
		IFS=, read -r d_rx0 d_tx0 d_rx1 d_tx1 <<< "$qdst"
		check two-pairs $(grep -aq '^PAIRS CHANNELS combined=2 max=2' "$LOG/src/output.log" &&
			[ "$(grep -ac '^XPS tx-' "$LOG/both.out")" = 3 ] &&
			[ "${s_tx0:-0}" -ge 500 ] && [ "${s_tx1:-0}" -gt 0 ] &&
			[ "${d_tx1:-0}" -gt 0 ] && [ "${d_tx0:-0}" -ge 2000 ] &&
			[ "$s_rx0" = "$s_tx0" ] && [ "$s_rx1" = "$s_tx1" ] &&
			[ "$d_rx0" = "$d_tx0" ] && [ "$d_rx1" = "$d_tx1" ] && echo 0 || echo 1) \
			"$(grep -a '^PAIRS' "$LOG/src/output.log"); $(grep -a '^XPS' "$LOG/both.out" | tr '\n' ' ')packets by ring (rx0,tx0,rx1,tx1): source $qsrc, destination $qdst; want pair 0 before (>= 500) and after (>= 2000), pair 1 across"
	fi
	if [ "$mq" = postcopy ]; then
		# the destination's backend gave QEMU its userfaultfd, had its
		# memory registered and answered, and saw postcopy end
		local pc
		pc=$(grep -a '"summary":true' "$dst_out" | tail -1 | grep -o '"postcopy":{[^}]*}')
		check backend-postcopy $(echo "$pc" | grep -q '"advises":[1-9].*"listens":[1-9].*"regions":[1-9].*"acks":[1-9].*"ends":[1-9]' &&
			echo 0 || echo 1) "destination backend ${pc:-(no summary)}"
		note "faults QEMU read from the backend's userfaultfd: $(grep -ac 'vhost_user_postcopy_fault_handler ' "$LOG/dst/qemu.log")"
	fi
	check served-after-migration $([ $rc = 0 ] && [ "$(count PROBE result=PASS "$o")" = 1 ] &&
		[ "$(count ECHO result=PASS "$o")" -ge 1 ] && [ "${src_rx:-0}" -ge 500 ] && [ "${dst_rx:-0}" -ge 2000 ] && echo 0 || echo 1) \
		"guest_rc=$rc $(grep -a '^PROBE' "$o") $(grep -a '^ECHO' "$o" | tail -1 | cut -d' ' -f2-6) source_backend_rx=$src_rx destination_backend_rx=$dst_rx"
}

# ---- live migration, receive buffers written while the guest is idle ----
# net-migrate cannot catch a backend that logs nothing: a Linux guest soon
# frees and zeroes again the pages of the receive buffers it consumed, which
# dirties them, and QEMU resends them anyway.  Here the guest takes eth0 down
# (its receive buffers stay posted and nobody reads them) and the host sends
# frames into the source backend's TAP device while RAM is copied: the
# backend writes pages the guest will not touch again, so a page it fails to
# mark reaches the destination stale, and the RAM check fails.
net_migrate_idle_rx() {
	local i rc gnet=$VIRTQ_GUEST_CACHE/root/bin/gnet
	local opts=(--dev net --packed "$1" --mrg on --mem 128 --timeout 100)
	local cmd='ip link set eth0 down; echo MIGRATE_NOW; sleep 12; ip link set eth0 up; echo UP'
	# "postcopy": the move in postcopy, and the frames go into the
	# destination's TAP once its receive ring runs.  Nobody but the
	# backend touches that ring's pages (QEMU reads a split ring's indexes
	# when it loads the device, not a packed ring's) nor the idle buffers,
	# so its first reads and writes find pages still on the source: they
	# fault, and QEMU must fetch each page through the userfaultfd before
	# the access lands.  Without it the access would make the page, QEMU
	# could not place it, and the migration would fail (seen: paused, the
	# guest gone).  The guest outlives the copy.
	local mode=${2:-} inj_tap
	[ "$mode" = postcopy ] && cmd=${cmd/sleep 12/sleep 20} &&
		opts+=(--trace vhost_user_postcopy_fault_handler)
	[ "$BACKEND" = virtq ] || cannot_run "the migration case runs virtq-net on both sides"
	need_net_backend
	[ "$(id -u)" = 0 ] && [ -c /dev/net/tun ] || cannot_run "a TAP device needs root and /dev/net/tun"
	[ -x "$gnet" ] || cannot_run "no $gnet to send frames with"
	local sock_src=$NSOCK sock_dst=$LOG/net-dst.sock tap_src=vqtS$$ tap_dst=vqtD$$
	# "rarp": a guest without GUEST_ANNOUNCE, which QEMU announces after
	# the migration through the destination's backend (SEND_RARP)
	local rarp= watch
	[ "$mode" = rarp ] && rarp=rarp
	[ -n "$rarp" ] && NET_OPTS=(--no-guest-announce)
	NSOCK=$sock_dst NET_TAP=$tap_dst
	net_start tap || { check start 1 "destination backend"; return; }
	local dst_pid=$NET_PID dst_out=$NET_OUT
	NSOCK=$sock_src NET_TAP=$tap_src
	net_start tap || { check start 1 "source backend"; return; }
	NET_OPTS=()
	local src_pid=$NET_PID src_out=$NET_OUT
	for ((i = 0; i < 50; i++)); do
		ip link show "$tap_src" >/dev/null 2>&1 && ip link show "$tap_dst" >/dev/null 2>&1 && break
		sleep 0.1
	done
	ip link set "$tap_src" up && ip link set "$tap_dst" up || { check tap-up 1 ""; return; }
	migration_guests "$sock_src" "$sock_dst" "$cmd" "${opts[@]}" || return
	# 200 frames, one every 20 ms, into receive buffers nobody will read
	inj_tap=$tap_src
	[ "$mode" = postcopy ] && inj_tap=$tap_dst
	( if [ "$mode" = postcopy ]; then
		for ((i = 0; i < 600; i++)); do
			grep -q 'queue 0 started' "$dst_out" && break
			sleep 0.1
		done
	fi
	for ((i = 0; i < 200; i++)); do
		"$gnet" tx "$inj_tap" -n 1 -s 60 >/dev/null 2>&1
		sleep 0.02
	done ) &
	local inj=$!
	PIDS+=("$inj")
	if [ -n "$rarp" ]; then
		"$gnet" watch "$tap_dst" -t 60 -n 8 > "$LOG/watch.out" 2>&1 &
		watch=$!
		PIDS+=("$watch")
	fi
	if [ "$mode" = postcopy ]; then
		migrate_postcopy "$MIG_SRC_QMP" "$MIG_DST_QMP" "$MIG_PORT"
	else
		migrate_compare "$MIG_SRC_QMP" "$MIG_DST_QMP" "$MIG_PORT"
		[ -n "$QEMU_LOST" ] && return
	fi
	wait "$inj"
	if [ -n "$rarp" ]; then
		for ((i = 0; i < 50; i++)); do
			grep -q "^FRAME type=8035 .*src=$GUEST_MAC" "$LOG/watch.out" && break
			sleep 0.1
		done
		kill "$watch" 2>/dev/null
		wait "$watch" 2>/dev/null
		cat "$LOG/watch.out"
		i=$(grep -c "^FRAME type=8035 len=60 src=$GUEST_MAC dst=ff:ff:ff:ff:ff:ff op=3 sha=$GUEST_MAC" "$LOG/watch.out")
		check rarp-after-migration $([ "$i" -ge 1 ] && echo 0 || echo 1) \
			"RARPs from the guest's MAC on the destination's TAP: $i"
	fi
	migration_end
	rc=$MIG_RC
	NET_PID=$src_pid NET_OUT=$src_out
	net_stop
	local src_tx=$NET_TX
	NET_PID=$dst_pid NET_OUT=$dst_out
	net_stop
	if [ "$mode" = postcopy ]; then
		local faults
		faults=$(grep -ac 'vhost_user_postcopy_fault_handler ' "$LOG/dst/qemu.log")
		check idle-buffers-written $([ "${NET_TX:-0}" -gt 0 ] && echo 0 || echo 1) \
			"frames the destination backend put in the idle guest's receive buffers: ${NET_TX:-0}"
		check backend-faults-served $([ "$faults" -gt 0 ] && echo 0 || echo 1) \
			"faults QEMU read from the backend's userfaultfd and served: $faults"
	else
		# the source backend must really have written the guest's buffers
		check idle-buffers-written $([ "${src_tx:-0}" -gt 0 ] && echo 0 || echo 1) \
			"frames the source backend put in the idle guest's receive buffers: ${src_tx:-0}"
	fi
	check guest-runs-on $([ $rc = 0 ] && grep -q '^UP' "$LOG/dst.out" && echo 0 || echo 1) "guest_rc=$rc"
}

# ---- announcements (QMP announce-self: what QEMU does after a migration) ----
# With VIRTIO_NET_F_GUEST_ANNOUNCE QEMU asks the guest's driver, which sends
# gratuitous ARPs through its TX ring; without it QEMU asks the back-end
# (VHOST_USER_SEND_RARP) and virtq-net broadcasts a RARP from the guest's
# MAC on its TAP.  Either way the host's TAP must see the announcements,
# and only the kind the features call for.
GUEST_MAC=52:54:00:12:34:56
net_announce() {
	local kind=$1 qp rarps garps sent i gnet=$VIRTQ_GUEST_CACHE/root/bin/gnet
	[ "$BACKEND" = virtq ] || cannot_run "SEND_RARP is virtq-net's"
	need_net_backend
	[ "$(id -u)" = 0 ] && [ -c /dev/net/tun ] || cannot_run "a TAP device needs root and /dev/net/tun"
	NET_TAP=vqan$$
	[ "$kind" = rarp ] && NET_OPTS=(--no-guest-announce)
	net_start tap || { check start 1 "virtq-net tap $NET_TAP"; return; }
	NET_OPTS=()
	for ((i = 0; i < 50; i++)); do
		ip link show "$NET_TAP" >/dev/null 2>&1 && break
		sleep 0.1
	done
	ip link set "$NET_TAP" up || { check tap-up 1 "cannot bring $NET_TAP up"; return; }
	qp=$(qmp_port)
	guest_bg ann --dev net --sock "$NSOCK" --mem 128 --qmp-port "$qp" --timeout 60 -- '
		ip addr add 10.77.1.2/24 dev eth0
		sed "s/^/FEATURES /" /sys/class/net/eth0/device/features
		echo READY; sleep 6; echo DONE'
	if ! wait_mark ann READY 60; then
		check guest-up 1 "the guest never got ready"
		return
	fi
	[ -x "$gnet" ] || { check gnet 1 "no $gnet"; return; }
	"$gnet" watch "$NET_TAP" -t 3 > "$LOG/watch.out" 2>&1 &
	local w=$!
	PIDS+=("$w")
	for ((i = 0; i < 50; i++)); do grep -q '^WATCH ready' "$LOG/watch.out" && break; sleep 0.1; done
	qmp_open "$qp" &&
		qmp '{"execute":"announce-self","arguments":{"initial":50,"max":550,"rounds":3,"step":50}}'
	check announce-self $? "QMP announce-self, 3 rounds"
	wait "$w"
	guest_wait ann
	net_stop
	cat "$LOG/watch.out"
	# the driver's feature string, bit 21 = VIRTIO_NET_F_GUEST_ANNOUNCE
	local ga
	ga=$(grep -a '^FEATURES ' "$LOG/ann/output.log" | head -1 | cut -c31)
	check guest-announce-bit $([ "$ga" = "$([ "$kind" = rarp ] && echo 0 || echo 1)" ] && echo 0 || echo 1) \
		"the driver's GUEST_ANNOUNCE bit: ${ga:-?}"
	sent=$(grep -a '"summary":true' "$NET_OUT" | tail -1 | sed -n 's/.*"rarp_sent":\([0-9]*\).*/\1/p')
	rarps=$(grep -c "^FRAME type=8035 len=60 src=$GUEST_MAC dst=ff:ff:ff:ff:ff:ff op=3 sha=$GUEST_MAC spa=0.0.0.0 tha=$GUEST_MAC tpa=0.0.0.0\$" "$LOG/watch.out")
	garps=$(grep -c "^FRAME type=0806 .*src=$GUEST_MAC .*spa=10.77.1.2 .*tpa=10.77.1.2\$" "$LOG/watch.out")
	if [ "$kind" = rarp ]; then
		check rarp-on-tap $([ "$rarps" -ge 3 ] && [ "${sent:-0}" -ge 3 ] && echo 0 || echo 1) \
			"RARPs from the guest's MAC on the TAP: $rarps, virtq-net rarp_sent: ${sent:-?} (3 rounds)"
		check no-guest-announce $([ "$garps" = 0 ] && echo 0 || echo 1) "gratuitous ARPs: $garps"
	else
		check guest-announces $([ "$garps" -ge 1 ] && echo 0 || echo 1) \
			"gratuitous ARPs from the guest: $garps"
		check no-rarp $([ "$rarps" = 0 ] && [ "${sent:-x}" = 0 ] && echo 0 || echo 1) \
			"RARPs: $rarps, virtq-net rarp_sent: ${sent:-?}"
	fi
}

# ---- tap mode: the guest on a real Linux network (a host TAP device) ----
# virtq-net creates the TAP device and bridges it to the guest.  The guest
# pings the host (small and full-size frames, ARP first), then the host
# sends it 4 MB over TCP, checked end to end by MD5: IP, ARP and TCP
# through virtq-net both ways, as a VM uses it.
NET_TAP=
net_tap() {
	local i sum out
	[ "$BACKEND" = virtq ] || cannot_run "tap mode is virtq-net's"
	need_net_backend
	[ "$(id -u)" = 0 ] && [ -c /dev/net/tun ] || cannot_run "a TAP device needs root and /dev/net/tun"
	NET_TAP=vqtap$$
	net_start tap || { check start 1 "virtq-net tap $NET_TAP"; return; }
	for ((i = 0; i < 50; i++)); do
		ip link show "$NET_TAP" >/dev/null 2>&1 && break
		sleep 0.1
	done
	ip addr add 10.77.0.1/24 dev "$NET_TAP" && ip link set "$NET_TAP" up ||
		{ check tap-up 1 "cannot configure $NET_TAP"; return; }
	head -c 4000000 /dev/urandom > "$LOG/blob"
	sum=$(md5sum < "$LOG/blob" | cut -d' ' -f1)
	guest_bg tap --dev net --sock "$NSOCK" --mem 128 --timeout 100 -- '
		ip addr add 10.77.0.2/24 dev eth0
		ping -c 20 -A -W 5 10.77.0.1 | grep "packet loss" | sed "s/^/PING_SMALL /"
		ping -c 20 -A -W 5 -s 1472 10.77.0.1 | grep "packet loss" | sed "s/^/PING_FULL /"
		echo LISTEN
		nc -l -p 5000 | md5sum | sed "s/^/MD5 /"'
	if wait_mark tap LISTEN 60; then
		for ((i = 0; i < 50; i++)); do
			bash -c "cat '$LOG/blob' > /dev/tcp/10.77.0.2/5000" 2>/dev/null && break
			sleep 0.2
		done
	fi
	guest_wait tap
	local rc=$?
	net_stop
	out=$LOG/tap.out
	check ping $(grep -q '^PING_SMALL.* 0% packet loss' "$out" && grep -q '^PING_FULL.* 0% packet loss' "$out" &&
		echo 0 || echo 1) "$(grep -a '^PING' "$out" | tr '\n' ' ')"
	check tcp-host-to-guest $([ $rc = 0 ] && grep -q "^MD5 $sum" "$out" && echo 0 || echo 1) \
		"guest_rc=$rc want=$sum got=$(sed -n 's/^MD5 \([0-9a-f]*\).*/\1/p' "$out") backend_from_guest=$NET_RX backend_to_guest=$NET_TX dropped=$NET_DROP"
}

# ---- tap mode offloads: checksum and TSO through the TAP ----
# virtq-net offers CSUM, GUEST_CSUM and HOST_/GUEST_TSO4/6/ECN in tap mode
# (off with --no-offloads) and passes headers between the guest and a TAP
# opened with IFF_VNET_HDR.  16 MB each way over TCP: the guest serves a
# file with busybox httpd (the host fetches it over bash /dev/tcp: guest TSO
# frames, segmented by the kernel on the host side) and receives one with
# nc (host GSO frames, given to the guest whole).  Checks: the features the
# driver negotiated, the MD5s, the frames with a segmentation header that
# virtq-net counted each way (none without offloads), no drop.  The
# transfer rates are printed (TCG: the guest's CPU is the limit, which is
# what the offloads relieve).
net_tap_offload() {
	local mode=$1 sum_out sum_in rc t0 t1 t2 feats out l
	[ "$BACKEND" = virtq ] || cannot_run "tap mode is virtq-net's"
	need_net_backend
	[ "$(id -u)" = 0 ] && [ -c /dev/net/tun ] || cannot_run "a TAP device needs root and /dev/net/tun"
	NET_TAP=vqof$$
	[ "$mode" = off ] && NET_OPTS=(--no-offloads)
	net_start tap || { check start 1 "virtq-net tap $NET_TAP"; return; }
	NET_OPTS=()
	for ((i = 0; i < 50; i++)); do
		ip link show "$NET_TAP" >/dev/null 2>&1 && break
		sleep 0.1
	done
	ip addr add 10.77.3.1/24 dev "$NET_TAP" && ip link set "$NET_TAP" up ||
		{ check tap-up 1 "cannot configure $NET_TAP"; return; }
	head -c 16000000 /dev/urandom > "$LOG/blob"
	sum_in=$(md5sum < "$LOG/blob" | cut -d' ' -f1)
	guest_bg of --dev net --sock "$NSOCK" --mem 256 --timeout 100 -- '
		'"$FEATS"'
		ip addr add 10.77.3.2/24 dev eth0
		mkdir -p /tmp/www
		dd if=/dev/urandom of=/tmp/www/blob bs=1000000 count=16 2>/dev/null
		echo "OUT_MD5 $(md5sum < /tmp/www/blob)"
		httpd -p 8080 -h /tmp/www
		echo LISTEN
		nc -l -p 5000 | md5sum | sed "s/^/IN_MD5 /"
		echo DONE_IN
		sleep 1'
	if wait_mark of LISTEN 60; then
		t0=$(date +%s.%N)
		# HTTP/1.0 by hand (bash /dev/tcp); the body is the last 16 MB
		timeout 60 bash -c 'exec 3<>/dev/tcp/10.77.3.2/8080 &&
			printf "GET /blob HTTP/1.0\r\n\r\n" >&3 && cat <&3' > "$LOG/resp" 2>/dev/null
		tail -c 16000000 "$LOG/resp" > "$LOG/got"
		t1=$(date +%s.%N)
		for ((i = 0; i < 50; i++)); do
			timeout 60 bash -c "cat '$LOG/blob' > /dev/tcp/10.77.3.2/5000" 2>/dev/null && break
			sleep 0.2
		done
		wait_mark of DONE_IN 60
		t2=$(date +%s.%N)
	fi
	guest_wait of
	rc=$?
	net_stop
	out=$LOG/of.out
	sum_out=$(sed -n 's/^OUT_MD5 \([0-9a-f]*\).*/\1/p' "$out")
	# CSUM 0, GUEST_CSUM 1, GUEST_TSO4/6 7 8, HOST_TSO4/6 11 12
	feats=$(for b in 0 1 7 8 11 12; do feature $b "$out"; done | tr -d '\n')
	check features $([ "$feats" = "$([ "$mode" = on ] && echo 111111 || echo 000000)" ] && echo 0 || echo 1) \
		"CSUM GUEST_CSUM GUEST_TSO4 GUEST_TSO6 HOST_TSO4 HOST_TSO6 negotiated: $feats (offloads $mode)"
	check guest-to-host $([ -n "$sum_out" ] && [ "$(md5sum < "$LOG/got" 2>/dev/null | cut -d' ' -f1)" = "$sum_out" ] &&
		echo 0 || echo 1) "16 MB by HTTP from the guest, MD5 ${sum_out:-none}, $(awk "BEGIN { printf \"%.1f\", 128 / ($t1 - $t0) }" 2>/dev/null) Mbit/s"
	check host-to-guest $(grep -q "^IN_MD5 $sum_in" "$out" && echo 0 || echo 1) \
		"16 MB by nc into the guest, MD5 $sum_in, $(awk "BEGIN { printf \"%.1f\", 128 / ($t2 - $t1) }" 2>/dev/null) Mbit/s"
	l=$(grep -a '"summary":true' "$NET_OUT" | tail -1)
	local txg rxg
	txg=$(echo "$l" | sed -n 's/.*"tx_gso":\([0-9]*\).*/\1/p')
	rxg=$(echo "$l" | sed -n 's/.*"rx_gso":\([0-9]*\).*/\1/p')
	if [ "$mode" = on ]; then
		check segmentation $([ "${txg:-0}" -gt 0 ] && [ "${rxg:-0}" -gt 0 ] && echo 0 || echo 1) \
			"frames with a TSO header: from the guest ${txg:-?}, to the guest ${rxg:-?}; packets tx $NET_RX rx $NET_TX"
	else
		check no-segmentation $([ "${txg:-x}" = 0 ] && [ "${rxg:-x}" = 0 ] && echo 0 || echo 1) \
			"frames with a TSO header: ${txg:-?} / ${rxg:-?}; packets tx $NET_RX rx $NET_TX"
	fi
	check no-drop $([ "${NET_DROP:-1}" = 0 ] && [ "$(echo "$l" | sed -n 's/.*"bad_hdr":\([0-9]*\).*/\1/p')" = 0 ] &&
		echo 0 || echo 1) "no_rx_buf ${NET_DROP:-?}, $(echo "$l" | grep -o '"drops":{[^}]*}')"
	check guest-rc $([ $rc = 0 ] && echo 0 || echo 1) "guest status $rc"
}

# ---- tap mode with QEMU's host_mtu: jumbo frames end to end ----
# QEMU gives the guest an MTU of 9000 (host_mtu, VIRTIO_NET_F_MTU, which
# virtq-net offers) and tells virtq-net (VHOST_USER_NET_SET_MTU), which sets
# the TAP's MTU to match.  The guest pings the host with 8972-byte payloads:
# 9014-byte frames both ways, unfragmented, which the frame counts show (a
# TAP left at 1500 would split each reply into 7 frames).
net_tap_mtu() {
	local out l rx tx tapmtu rc
	[ "$BACKEND" = virtq ] || cannot_run "tap mode is virtq-net's"
	need_net_backend
	[ "$(id -u)" = 0 ] && [ -c /dev/net/tun ] || cannot_run "a TAP device needs root and /dev/net/tun"
	NET_TAP=vqmt$$
	net_start tap || { check start 1 "virtq-net tap $NET_TAP"; return; }
	for ((i = 0; i < 50; i++)); do
		ip link show "$NET_TAP" >/dev/null 2>&1 && break
		sleep 0.1
	done
	ip addr add 10.77.4.1/24 dev "$NET_TAP" && ip link set "$NET_TAP" up ||
		{ check tap-up 1 "cannot configure $NET_TAP"; return; }
	guest_bg mtu --dev net --sock "$NSOCK" --mem 128 --timeout 60 --dev-opts host_mtu=9000 -- '
		'"$FEATS"'
		echo "GUEST_MTU $(cat /sys/class/net/eth0/mtu)"
		ip addr add 10.77.4.2/24 dev eth0
		echo UP
		ping -c 10 -A -W 5 -s 8972 10.77.4.1 | grep "packet loss" | sed "s/^/PING /"'
	wait_mark mtu UP 60 && tapmtu=$(cat "/sys/class/net/$NET_TAP/mtu" 2>/dev/null)
	guest_wait mtu
	rc=$?
	net_stop
	out=$LOG/mtu.out
	l=$(grep -a '"summary":true' "$NET_OUT" | tail -1)
	check mtu-negotiated $([ "$(feature 3 "$out")" = 1 ] && grep -q '^GUEST_MTU 9000$' "$out" &&
		grep -q 'MTU 9000, also on' "$NET_OUT" && [ "$tapmtu" = 9000 ] && echo 0 || echo 1) \
		"VIRTIO_NET_F_MTU=$(feature 3 "$out") $(grep -a '^GUEST_MTU' "$out"), TAP MTU ${tapmtu:-?}, virtq-net mtu $(echo "$l" | sed -n 's/.*"mtu":\([0-9]*\).*/\1/p')"
	check jumbo-ping $(grep -q '^PING .* 0% packet loss' "$out" && echo 0 || echo 1) \
		"$(grep -a '^PING' "$out")"
	# 10 echo requests and replies, an ARP exchange, maybe a few more
	# (IPv6): fragments of 1500 would be 70 frames each way
	check unfragmented $([ "${NET_RX:-999}" -lt 30 ] && [ "${NET_TX:-999}" -lt 30 ] && echo 0 || echo 1) \
		"frames from the guest $NET_RX, to the guest $NET_TX, bytes $(echo "$l" | grep -o '"tx_bytes":[0-9]*,"rx_bytes":[0-9]*')"
	check guest-rc $([ $rc = 0 ] && echo 0 || echo 1) "guest status $rc"
}

# ---- tap mode across a backend restart, on a TAP made beforehand ----
# As an operator runs it: a persistent multi-queue TAP made with ip tuntap
# and given its address (or bridge) once; virtq-net attaches to it, with 2
# queue pairs.  virtq-net is killed while the guest pings and a new one
# started: QEMU reconnects (reconnect=1), the TAP and its address outlive
# the backend, and the guest reaches the host again with nothing done in
# the guest or on the TAP.  The guest waits 4 s after its mark: the host
# kills at once and starts the new backend a second later, and QEMU
# reconnects within another.
net_tap_restart() {
	local out rc i
	[ "$BACKEND" = virtq ] || cannot_run "tap mode is virtq-net's"
	need_net_backend
	[ "$(id -u)" = 0 ] && [ -c /dev/net/tun ] || cannot_run "a TAP device needs root and /dev/net/tun"
	NET_TAP=vqrs$$
	ip tuntap add dev "$NET_TAP" mode tap multi_queue vnet_hdr &&
		ip addr add 10.77.5.1/24 dev "$NET_TAP" && ip link set "$NET_TAP" up ||
		{ check tuntap 1 "cannot make a persistent TAP $NET_TAP"; return; }
	NET_OPTS=(--queue-pairs 2 --threads 2)
	net_start tap || { check start 1 "virtq-net on $NET_TAP"; ip link del "$NET_TAP"; return; }
	guest_bg rs --dev net --sock "$NSOCK" --queues 2 --reconnect 1 --mem 128 --timeout 100 -- '
		gnet channels eth0 2 | sed "s/^/PAIRS /"
		ip addr add 10.77.5.2/24 dev eth0
		ping -c 10 -A -W 5 10.77.5.1 | grep "packet loss" | sed "s/^/PING_BEFORE /"
		echo KILL_NOW
		sleep 4
		i=0; while [ $i -lt 60 ] && ! ping -c 1 -W 1 10.77.5.1 >/dev/null 2>&1; do i=$((i+1)); done
		echo "BACK_AFTER $i"
		ping -c 20 -A -W 5 -s 1400 10.77.5.1 | grep "packet loss" | sed "s/^/PING_AFTER /"
		echo LISTEN
		nc -l -p 5000 | md5sum | sed "s/^/MD5 /"'
	if wait_mark rs KILL_NOW 60; then
		net_kill
		ip link show "$NET_TAP" > "$LOG/tap-between.txt" 2>&1
		ip -4 addr show dev "$NET_TAP" >> "$LOG/tap-between.txt" 2>&1
		sleep 1
		net_start tap || check restart 1 "the second virtq-net did not start"
		head -c 2000000 /dev/urandom > "$LOG/blob"
		if wait_mark rs LISTEN 60; then
			for ((i = 0; i < 50; i++)); do
				timeout 20 bash -c "cat '$LOG/blob' > /dev/tcp/10.77.5.2/5000" 2>/dev/null && break
				sleep 0.2
			done
		fi
	fi
	NET_OPTS=()
	guest_wait rs
	rc=$?
	net_stop
	out=$LOG/rs.out
	check tap-outlived-backend $(grep -q "$NET_TAP" "$LOG/tap-between.txt" &&
		grep -q '10.77.5.1/24' "$LOG/tap-between.txt" && echo 0 || echo 1) \
		"while no backend ran: $(tr '\n' ' ' < "$LOG/tap-between.txt" | cut -c1-160)"
	check ping-before $(grep -q '^PING_BEFORE.* 0% packet loss' "$out" && echo 0 || echo 1) \
		"$(grep -a -e '^PAIRS' -e '^PING_BEFORE' "$out" | tr '\n' ' ')"
	check back-after-restart $(grep -q '^PING_AFTER.* 0% packet loss' "$out" &&
		grep -q "^MD5 $(md5sum < "$LOG/blob" | cut -d' ' -f1)" "$out" && echo 0 || echo 1) \
		"$(grep -a -e '^BACK_AFTER' -e '^PING_AFTER' -e '^MD5' "$out" | tr '\n' ' ') new backend: $(grep -c 'started' "$NET_OUT") ring starts"
	check guest-rc $([ $rc = 0 ] && echo 0 || echo 1) "guest status $rc"
	ip link del "$NET_TAP" 2>/dev/null
}

# ---- tap mode with two queue pairs (a multi-queue TAP) ----
# The guest has 2 vCPUs, so Linux uses both pairs and maps vCPU k to
# transmit queue k (XPS).  Phase 1: each vCPU sends raw frames (they land
# on transmitq0 and transmitq1), the host sprays UDP over 64 flows (the TAP
# hashes them over both queues, so both receive rings carry frames), then
# 4 MB of TCP, MD5-checked.  Phase 2: the guest drops to one pair
# (ethtool -L combined 1): QEMU disables rings 2 and 3, virtq-net must
# detach TAP queue 1, or the flows the kernel hashes to it would wait there
# unread; four new host->guest TCP connections (each one hashed anew) must
# all arrive whole.  Phase 3: back to two pairs, vCPU 1 sends on
# transmitq1 again.  virtq-net's per-queue counts check where frames went.
# With "iommu" the device sits behind a vIOMMU: two worker threads then take
# IOTLB misses and see invalidations at once, and phase 2 stops rings while
# the guest unmaps their buffers.
net_tap_mq() {
	local i p sum out rc n=2000 q iommu=()
	[ "${1:-}" = iommu ] && iommu=(--iommu on)
	[ "$BACKEND" = virtq ] || cannot_run "tap mode is virtq-net's"
	need_net_backend
	[ "$(id -u)" = 0 ] && [ -c /dev/net/tun ] || cannot_run "a TAP device needs root and /dev/net/tun"
	NET_TAP=vqmq$$
	NET_OPTS=(--queue-pairs 2 --threads 2)
	net_start tap || { check start 1 "virtq-net tap $NET_TAP, 2 pairs"; return; }
	NET_OPTS=()
	for ((i = 0; i < 50; i++)); do
		ip link show "$NET_TAP" >/dev/null 2>&1 && break
		sleep 0.1
	done
	ip addr add 10.77.2.1/24 dev "$NET_TAP" && ip link set "$NET_TAP" up ||
		{ check tap-up 1 "cannot configure $NET_TAP"; return; }
	head -c 4000000 /dev/urandom > "$LOG/blob"
	head -c 1000000 /dev/urandom > "$LOG/blob2"
	sum=$(md5sum < "$LOG/blob" | cut -d' ' -f1)
	local sum2
	sum2=$(md5sum < "$LOG/blob2" | cut -d' ' -f1)
	guest_bg mq --dev net --sock "$NSOCK" --queues 2 --smp 2 --mem 256 --timeout 100 "${iommu[@]}" -- '
		'"$FEATS"'
		ip addr add 10.77.2.2/24 dev eth0
		echo "QUEUES $(ls /sys/class/net/eth0/queues | tr "\n" " ")"
		gnet channels eth0 | sed "s/^/PHASE1 /"
		taskset 1 gnet tx eth0 -n '$n' | sed "s/^/TX0 /"
		taskset 2 gnet tx eth0 -n '$n' | sed "s/^/TX1 /"
		taskset 1 ping -c 10 -A -W 5 10.77.2.1 | grep "packet loss" | sed "s/^/PING0 /"
		taskset 2 ping -c 10 -A -W 5 -s 1472 10.77.2.1 | grep "packet loss" | sed "s/^/PING1 /"
		echo LISTEN1
		nc -l -p 5000 | md5sum | sed "s/^/MD5_1 /"
		gnet channels eth0 1 | sed "s/^/PHASE2 /"
		for i in 1 2 3 4; do
			echo LISTEN2_$i
			nc -l -p 500$i | md5sum | sed "s/^/MD5_2 /"
		done
		ping -c 10 -A -W 5 10.77.2.1 | grep "packet loss" | sed "s/^/PING2 /"
		gnet channels eth0 2 | sed "s/^/PHASE3 /"
		taskset 2 gnet tx eth0 -n '$n' | sed "s/^/TX3 /"
		taskset 2 ping -c 10 -A -W 5 10.77.2.1 | grep "packet loss" | sed "s/^/PING3 /"'
	# send FILE to the guest's PORT once it listens (bash /dev/tcp): a
	# refused connection is tried again, a stuck one (its SYN waiting on a
	# queue nobody reads) is not: that is what phase 2 looks for
	send_to_guest() {
		local k rc
		for ((k = 0; k < 50; k++)); do
			timeout 15 bash -c "cat '$1' > /dev/tcp/10.77.2.2/$2" 2>/dev/null
			rc=$?
			[ $rc = 0 ] && return 0
			[ $rc = 124 ] && { note "connection to port $2 stuck for 15 s"; return 1; }
			sleep 0.2
		done
		return 1
	}
	if wait_mark mq LISTEN1 100; then
		# 64 UDP flows to closed ports: the TAP spreads them by hash
		for ((p = 6000; p < 6064; p++)); do
			echo x > "/dev/udp/10.77.2.2/$p"
		done 2>/dev/null
		send_to_guest "$LOG/blob" 5000
		for i in 1 2 3 4; do
			wait_mark mq "LISTEN2_$i" 60 && send_to_guest "$LOG/blob2" "500$i" || break
		done
	fi
	guest_wait mq
	rc=$?
	net_stop
	out=$LOG/mq.out
	cat "$out"
	check guest-uses-2-pairs $(grep -q '^QUEUES rx-0 rx-1 tx-0 tx-1' "$out" &&
		grep -q '^PHASE1 CHANNELS combined=2 max=2' "$out" && echo 0 || echo 1) \
		"$(grep -a -e '^QUEUES' -e '^PHASE1' "$out" | tr '\n' ' ')"
	check ping $([ "$(grep -c '^PING[0-3].* 0% packet loss' "$out")" = 4 ] && echo 0 || echo 1) \
		"$(grep -a '^PING' "$out" | tr '\n' ' ')"
	check tcp-2-pairs $(grep -q "^MD5_1 $sum" "$out" && echo 0 || echo 1) \
		"4 MB host -> guest on 2 pairs: want $sum got $(sed -n 's/^MD5_1 \([0-9a-f]*\).*/\1/p' "$out")"
	check one-pair $(grep -q '^PHASE2 CHANNELS combined=1 max=2' "$out" &&
		grep -q 'queue 2 stopped' "$NET_OUT" && grep -q 'TAP queue 1 detached' "$NET_OUT" &&
		echo 0 || echo 1) "$(grep -a '^PHASE2' "$out"); virtq-net: $(grep -c 'TAP queue 1 detached' "$NET_OUT") detaches of queue 1"
	check tcp-1-pair $([ "$(grep -c "^MD5_2 $sum2" "$out")" = 4 ] && echo 0 || echo 1) \
		"4 new connections on 1 pair, whole: $(grep -c "^MD5_2 $sum2" "$out") of 4"
	# A TAP queue leaves only when its receive ring stops for good: once
	# at open, once when the guest drops to one pair, once at the end.  A
	# pause (an IOTLB flush, an fd change) keeps it and the frames
	# waiting in it: the kernel drops those on a detach.
	local detached
	detached=$(grep -c 'TAP queue 1 detached' "$NET_OUT")
	check tap-queue-kept-on-pause $([ "$detached" -le 3 ] && echo 0 || echo 1) \
		"queue 1 detached $detached times (at most 3); ring 2 stopped $(grep -c 'queue 2 stopped' "$NET_OUT") times, paused $(grep -c 'queue 2 paused' "$NET_OUT")"
	check back-to-2-pairs $(grep -q '^PHASE3 CHANNELS combined=2 max=2' "$out" &&
		[ "$(grep -c 'TAP queue 1 attached' "$NET_OUT")" -ge 2 ] && echo 0 || echo 1) \
		"$(grep -a '^PHASE3' "$out"); virtq-net: $(grep -c 'TAP queue 1 attached' "$NET_OUT") attaches of queue 1"
	# receiveq0, transmitq0, receiveq1, transmitq1
	q=$(grep -a '"summary":true' "$NET_OUT" | tail -1 | sed -n 's/.*"queue_packets":\[\([0-9,]*\)\].*/\1/p')
	local rx0 tx0 rx1 tx1
	IFS=, read -r rx0 tx0 rx1 tx1 <<< "$q"
	check per-queue $([ "${tx0:-0}" -ge $n ] && [ "${tx1:-0}" -ge $((2 * n)) ] &&
		[ "${rx0:-0}" -gt 0 ] && [ "${rx1:-0}" -gt 0 ] && echo 0 || echo 1) \
		"packets by ring (rx0,tx0,rx1,tx1): ${q:-none}; want tx0 >= $n, tx1 >= $((2 * n)) (phases 1 and 3), rx0 and rx1 > 0"
	check guest-rc $([ $rc = 0 ] && echo 0 || echo 1) "guest status $rc; drops $NET_DROP"
	if [ ${#iommu[@]} -gt 0 ]; then
		check access-platform $([ "$(feature 33 "$out")" = 1 ] && echo 0 || echo 1) \
			"VIRTIO_F_ACCESS_PLATFORM=$(feature 33 "$out")"
		iotlb_used "$NET_OUT"
		guest_kernel_clean
	fi
}

# migrate-control: migrate_compare with QEMU alone (see the header); the
# guest's loop outlasts the copy, as net-migrate's echo does
migrate_control() {
	local opts=(--dev none --mem 128 --timeout 40)
	local cmd='echo MIGRATE_NOW; t=$(($(date +%s) + 14)); while [ $(date +%s) -lt $t ]; do dd if=/dev/zero of=/tmp/churn bs=64k count=256 2>/dev/null; rm -f /tmp/churn; done; echo CHURN_DONE'
	migration_guests "" "" "$cmd" "${opts[@]}" || return
	sleep 0.5
	migrate_compare "$MIG_SRC_QMP" "$MIG_DST_QMP" "$MIG_PORT"
	migration_end
	local rc=$MIG_RC
	check guest-ran-on $([ $rc = 0 ] && grep -aq '^CHURN_DONE' "$LOG/dst/output.log" && echo 0 || echo 1) \
		"destination guest_rc=$rc"
}
case "$CASE" in
migrate-control) migrate_control ;;
net-split-mrg) net_matrix off on ;;
net-split-nomrg) net_matrix off off ;;
net-packed-mrg) net_matrix on on ;;
net-packed-nomrg) net_matrix on off ;;
net-packed-hugetlbfs) huge_mount 200 && net_matrix on on "$LOG/huge" ;;
net-split-4g) net_matrix off on "" 4608 ;;
net-iommu) net_iommu off ;;
net-iommu-packed) net_iommu on ;;
net-packed-nomrg-overflow) net_overflow ;;
net-restart) net_restart off ;;
net-restart-packed) net_restart on ;;
net-restart-mq) net_restart off mq ;;
net-reset) net_reset ;;
net-tap) net_tap ;;
net-tap-mq) net_tap_mq ;;
net-iommu-mq) net_tap_mq iommu ;;
net-tap-mtu) net_tap_mtu ;;
net-tap-restart) net_tap_restart ;;
net-tap-offload) net_tap_offload on ;;
net-tap-no-offload) net_tap_offload off ;;
net-migrate) net_migrate off ;;
net-migrate-packed) net_migrate on ;;
net-migrate-mq) net_migrate off mq ;;
net-migrate-postcopy) net_migrate off postcopy ;;
net-announce-guest) net_announce guest ;;
net-announce-rarp) net_announce rarp ;;
net-migrate-idle-rx) net_migrate_idle_rx off ;;
net-migrate-idle-rx-packed) net_migrate_idle_rx on rarp ;;
net-migrate-postcopy-idle-rx) net_migrate_idle_rx on postcopy ;;
vsock-g2h) vsock_g2h off ;;
vsock-h2g) vsock_h2g off ;;
vsock-packed) vsock_g2h on ;;
vsock-seqpacket) vsock_seqpacket off ;;
vsock-seqpacket-packed) vsock_seqpacket on ;;
vsock-iommu) vsock_iommu ;;
vsock-restart) vsock_restart ;;
vsock-reset) vsock_reset ;;
vsock-bidir-slow) vsock_bidir_slow ;;
vsock-small-writes) vsock_small_writes ;;
vsock-siblings) vsock_siblings ;;
*) echo "unknown case $CASE" >&2; exit 2 ;;
esac
finish
