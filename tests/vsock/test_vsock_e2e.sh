#!/bin/sh
# SPDX-License-Identifier: MIT
#
# End to end through the virtq-vsock daemon: virtq-perf vsock plays the
# guest (our vhost-user front-end and virtio-vsock driver) and the host
# program (CONNECT on the daemon's UNIX socket, or a listener at
# HOST_PATH_<port>).  Small transfers both ways, split and packed, the RX
# batching settings, and a ping-pong (once more from a driver that never
# sends the kicks it owes); each must end "verified" (byte count and
# checksum equal on both ends).
#
# Seqpacket (virtio 1.2 5.10.6.7, --type seqpacket): the same three roles
# in messages, through the host's SOCK_SEQPACKET sockets (HOST_PATH_<port>
# and HOST_PATH.seqpacket).  The receiver checks every message as it comes:
# whole, in order, its exact length and content (message bounds are kept);
# "verified" also needs both ends to count the same messages.  Messages of
# 64K take 16 RX packets, so reassembly from fragments is covered.
#
# --dirty-log (vhost-user "Migration": the back-end marks every page it
# writes): logging on before the transfer; after it, with the rings
# stopped, every page of the receive buffers and used rings that changed
# must be marked: "unlogged" 0, and pages of both kinds did change.
#
# The UNIX socket baseline (--transport unix, issue 26 item 1): the same
# transfers and checks over a socket pair, no backend.  Busy polling on
# our side (--busy-poll, item 3).  Many connections (--conns, item 4):
# every stream checked byte for byte, the per-connection rates and the
# fairness reported, the backend's memory per idle connection; and
# --stall: one receiver reads nothing until the others ended, which must
# not stall them, and what waited at a vsock guest stayed within the
# window it advertised (its credit).  Each party's CPU time (issue 34
# item 3: where a transfer's time goes) is reported and adds up.
#
# usage: test_vsock_e2e.sh VIRTQ_PERF VIRTQ_VSOCK
set -u
perf=$1
daemon=$2
fail=0

# vsock ARGS...: virtq-perf vsock through the daemon, or over the UNIX
# socket pair without one (--transport unix)
vsock() {
	case " $* " in
	*" --transport unix "*) "$perf" vsock "$@" ;;
	*) "$perf" vsock --backend "$daemon" "$@" ;;
	esac
}

run() {
	name=$1
	shift
	out=$(vsock "$@" 2>&1)
	rc=$?
	if [ $rc -eq 0 ] && echo "$out" | grep -q "verified"; then
		echo "ok   $name: $(echo "$out" | grep -E '^(vsock|unix)')"
	else
		echo "FAIL $name (rc=$rc):"
		echo "$out" | sed 's/^/    /'
		fail=1
	fi
}

run rx_split            --direction rx --bytes 4M
run tx_split            --direction tx --bytes 4M
run rx_packed_256       --direction rx --bytes 1M --buf-size 256 --packed on
run tx_packed_odd       --direction tx --bytes 3000001 --buf-size 4093 --packed on
run rx_used_batch_1     --direction rx --bytes 2M --used-batch 1
run rx_small_rcvbuf     --direction rx --bytes 2M --rcvbuf 16K --rcvlowat 4K
run tx_no_event_idx     --direction tx --bytes 2M --event-idx off
run latency             --latency --iters 200 --buf-size 64
# A driver that never sends the kicks it owes (--drop-kicks 1; a guest whose
# barrier failed): each round trip waits until the daemon looks at its
# quiet rings (200 ms); without that look the first one never ends.
run latency_drop_kicks  --latency --iters 10 --buf-size 64 --drop-kicks 1

# seqpacket: as run, and the receiver counted exactly $2 messages
msgs() {
	want=$1
	shift
	run "$@"
	case $out in
	*"seqpacket: $want messages of"*) ;;
	*) echo "FAIL $1: not $want messages"; fail=1 ;;
	esac
}

msgs 512 seq_tx         --type seqpacket --direction tx --bytes 2M --buf-size 4096
msgs 512 seq_rx         --type seqpacket --direction rx --bytes 2M --buf-size 4096
msgs 32 seq_rx_64k_packed --type seqpacket --direction rx --bytes 2M --buf-size 64K --packed on
msgs 245 seq_tx_odd_packed --type seqpacket --direction tx --bytes 1000000 --buf-size 4093 --packed on
msgs 3000 seq_tx_small  --type seqpacket --direction tx --bytes 48000 --buf-size 16
run seq_latency         --type seqpacket --latency --iters 200 --buf-size 64
run seq_latency_20k     --type seqpacket --latency --iters 50 --buf-size 20000

field() { echo "$2" | sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p"; }

# the baseline: the same transfers over a UNIX socket pair
run unix_rx             --transport unix --direction rx --bytes 4M
run unix_tx_odd         --transport unix --direction tx --bytes 3000001 --buf-size 4093
run unix_rx_lowat       --transport unix --direction rx --bytes 2M --rcvlowat 4K --rcvbuf 64K
run unix_latency        --transport unix --latency --iters 200 --buf-size 64
run unix_latency_bp     --transport unix --latency --iters 200 --buf-size 64 --busy-poll 50
msgs 512 unix_seq_tx    --transport unix --type seqpacket --direction tx --bytes 2M --buf-size 4096
msgs 32 unix_seq_rx_64k --transport unix --type seqpacket --direction rx --bytes 2M --buf-size 64K
run unix_seq_latency    --transport unix --type seqpacket --latency --iters 200 --buf-size 64
# busy polling on our side, on the backend's too
run latency_busy_poll   --latency --iters 200 --buf-size 64 --busy-poll 50 --backend-busy-poll 50
run latency_pinned      --latency --iters 200 --buf-size 64 --cpu 0,0
run tx_busy_poll        --direction tx --bytes 4M --busy-poll 20

# conns N NAME ARGS...: N streams, each verified; the JSON has N rates, a
# fairness in [0, 1] and (vsock) the memory per idle connection
conns() {
	want=$1 name=$2
	shift 2
	out=$(vsock --json --conns "$want" "$@" 2>&1)
	rc=$?
	js=$(echo "$out" | grep '^{')
	rates=$(echo "$js" | sed -n 's/.*"conn_gbps":\[\([^]]*\)\].*/\1/p' | tr ',' '\n' | grep -c .)
	fair=$(field fairness "$js")
	if [ $rc -eq 0 ] && [ "$(field verified "$js")" = true ] &&
	   [ "$(field conns "$js")" = "$want" ] && [ "$rates" = "$want" ] &&
	   awk -v f="$fair" 'BEGIN { exit !(f >= 0 && f <= 1) }' &&
	   { case " $* " in *" --transport unix "*) true ;;
	     *) [ -n "$(field idle_kb_per_conn "$js")" ] ;; esac; }; then
		echo "ok   $name: $(field gbps "$js") Gbit/s, fairness $fair, idle kB/conn $(field idle_kb_per_conn "$js")"
	else
		echo "FAIL $name (rc=$rc):"
		echo "$out" | sed 's/^/    /'
		fail=1
	fi
}

conns 16 conns_rx_16          --direction rx --bytes 16M
conns 16 conns_tx_16_packed   --direction tx --bytes 16M --packed on
conns 256 conns_rx_256        --direction rx --bytes 64M
conns 256 conns_tx_256        --direction tx --bytes 64M --buf-size 4K
conns 64 unix_conns_rx_64     --transport unix --direction rx --bytes 16M
conns 64 unix_conns_tx_64     --transport unix --direction tx --bytes 16M
conns 4 conns_tx_seconds      --direction tx --seconds 0.2 --busy-poll 20

# --stall 1: the others end while one receiver reads nothing; then it is
# read to its end.  rx: what waited at the guest is within its window.
stall() {
	name=$1
	shift
	conns 8 "$name" --stall 1 "$@"
	held=$(field stall_held "$js")
	case $name in
	*rx*) [ -n "$held" ] && [ "$held" -gt 0 ] && [ "$held" -le 65536 ] ||
		{ echo "FAIL $name: $held bytes waited, not within the 64K window"; fail=1; } ;;
	*) [ -n "$held" ] && [ "$held" -gt 0 ] ||
		{ echo "FAIL $name: nothing waited at the stalled receiver"; fail=1; } ;;
	esac
}

stall stall_rx                --direction rx --bytes 16M --rcvbuf 64K
stall stall_tx                --direction tx --bytes 16M

dlog() {
	name=$1
	shift
	out=$("$perf" vsock --backend "$daemon" --dirty-log --json "$@" 2>&1)
	rc=$?
	js=$(echo "$out" | grep '^{')
	if [ $rc -eq 0 ] && [ "$(field verified "$js")" = true ] &&
	   [ "$(field unlogged "$js")" = 0 ] && [ "$(field dirty_pages "$js")" -gt 0 ] &&
	   [ "$(field ring_pages "$js")" -gt 0 ]; then
		echo "ok   $name: dirty_pages $(field dirty_pages "$js") ring_pages $(field ring_pages "$js") unlogged 0"
	else
		echo "FAIL $name (rc=$rc):"
		echo "$out" | sed 's/^/    /'
		fail=1
	fi
}

dlog dlog_rx_split      --direction rx --bytes 4M
dlog dlog_tx_packed     --direction tx --bytes 4M --packed on
dlog dlog_seq_rx_packed --type seqpacket --direction rx --bytes 2M --buf-size 4096 --packed on
dlog dlog_latency       --latency --iters 200 --buf-size 64

# cpu UNIT NAME ARGS...: each party's CPU time per UNIT (kib, rt) is
# positive, the backend's only when we started one, and the sum is theirs
cpu() {
	unit=$1 name=$2
	shift 2
	out=$(vsock --json "$@" 2>&1)
	rc=$?
	be=1
	case " $* " in *" --transport unix "*) be= ;; esac
	js=$(echo "$out" | grep '^{')
	g=$(field "cpu_guest_per_${unit}_ns" "$js") h=$(field "cpu_host_per_${unit}_ns" "$js")
	b=$(field "cpu_backend_per_${unit}_ns" "$js") all=$(field "cpu_per_${unit}_ns" "$js")
	if [ $rc -eq 0 ] && [ "$(field verified "$js")" = true ] &&
	   { if [ -n "$be" ]; then [ -n "$b" ]; else [ -z "$b" ]; fi; } &&
	   awk -v g="$g" -v h="$h" -v b="${b:-0}" -v all="$all" -v busy="$(field cpus_busy "$js")" \
	       'BEGIN { d = all - (g + h + b); exit !(g > 0 && h > 0 && b >= 0 &&
		d > -0.2 && d < 0.2 && busy > 0 && busy < 4) }'; then
		echo "ok   $name: guest $g host $h backend ${b:--} ns per $unit, $(field cpus_busy "$js") CPUs busy"
	else
		echo "FAIL $name (rc=$rc): guest '$g' host '$h' backend '$b' all '$all'"
		echo "$out" | sed 's/^/    /'
		fail=1
	fi
}

cpu kib cpu_rx          --direction rx --bytes 4M
cpu kib cpu_tx_packed   --direction tx --bytes 4M --packed on
cpu rt cpu_latency      --latency --iters 200 --buf-size 64
cpu kib cpu_unix_tx     --transport unix --direction tx --bytes 4M
# a backend under a wrapper that forks (as perf record does): the
# daemon's CPU time is counted with the wrapper's, which only waits
wrap="sh -c 'trap \"kill \$c\" TERM; \"\$0\" \"\$@\" & c=\$!; wait \$c; wait \$c' $daemon"
out=$("$perf" vsock --backend "$wrap" --json --direction rx --bytes 8M 2>&1)
b=$(field cpu_backend_per_kib_ns "$(echo "$out" | grep '^{')")
if awk -v b="$b" 'BEGIN { exit !(b > 5) }'; then
	echo "ok   cpu_wrapped_backend: backend $b ns per kib"
else
	echo "FAIL cpu_wrapped_backend: backend '$b' ns per kib (want > 5)"
	echo "$out" | sed 's/^/    /'
	fail=1
fi

# --cpu: worker k runs on the k-th CPU of the list, only there (a transfer
# through the pinned daemon is verified too)
last=$(($(nproc) - 1))
run rx_pinned_worker    --direction rx --bytes 2M --backend-arg=--cpu=$last
pdir=$(mktemp -d /tmp/vq-vsock-cpu.XXXXXX)
"$daemon" --guest-cid 3 --socket-path "$pdir/vu" --uds-path "$pdir/h" --threads 2 \
	--cpu "$last,0" >/dev/null 2>&1 &
pid=$!
i=0
while [ ! -S "$pdir/vu" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
aff() { for t in /proc/$pid/task/*; do
	[ "$(cat "$t/comm")" = "$1" ] && sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$t/status"
	done; }
# each worker pins itself as it starts: give a loaded machine time
i=0
while w0=$(aff virtq-w0) w1=$(aff virtq-w1); [ "$w0,$w1" != "$last,0" ] && [ $i -lt 40 ]; do
	sleep 0.05; i=$((i + 1))
done
kill $pid; wait $pid 2>/dev/null
rm -rf "$pdir"
if [ "$w0" = "$last" ] && [ "$w1" = 0 ]; then
	echo "ok   cpu_list: virtq-w0 on $w0, virtq-w1 on $w1"
else
	echo "FAIL cpu_list: virtq-w0 on '$w0' (want $last), virtq-w1 on '$w1' (want 0)"
	fail=1
fi

# --placement on labels the run by the vCPUs' placement, for virtq-perf ab
if [ "$(nproc)" -ge 2 ]; then
	out=$("$perf" vsock --backend "$daemon" --placement on --json --bytes 1M 2>&1)
	case $(field placement "$(echo "$out" | grep '^{')") in
	'"near"'|'"far"'|'"mixed"') echo "ok   placement: $(field placement "$out")" ;;
	*) echo "FAIL placement: $out"; fail=1 ;;
	esac
fi
exit $fail
