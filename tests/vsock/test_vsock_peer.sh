#!/bin/sh
# SPDX-License-Identifier: MIT
#
# virtq-perf vsock --peer guest: two guests of one virtq-vsock, each our
# front-end and driver on its own thread, stream between them ring to ring
# (sibling vsock, issue 33 item 2): a REQUEST to the other guest's CID
# (virtio 1.2 5.10.6.5), the stream or the seqpacket messages (5.10.6.6)
# both ways, credit (5.10.6.3) at both guests with a small window.  Every
# transfer must end "verified" (both guests counted the same bytes with the
# same position-dependent checksum; seqpacket: every message checked whole
# and in order) and the daemon must have carried it as a sibling
# connection, one for each VM, not through a host socket.  A running
# daemon is reached by its two sockets; there, guests that share no group
# are refused at once, and the same command line also runs --peer host
# (what virtq-perf ab pairs).  Bad command lines: exit 2.
#
# usage: test_vsock_peer.sh VIRTQ_PERF VIRTQ_VSOCK
set -u
perf=$1
daemon=$2
fail=0
tmp=$(mktemp -d)
dpid=
trap '[ -n "$dpid" ] && kill "$dpid" 2>/dev/null; rm -rf "$tmp"' EXIT

say_fail() {
	echo "FAIL $1: $2"
	echo "$out" | sed 's/^/    /'
	fail=1
}

# run NAME WANT ARGS...: a started daemon with two VMs; verified, the
# output line starts with WANT, and each VM counted one sibling connection.
run() {
	name=$1 want=$2
	shift 2
	out=$(timeout 60 "$perf" vsock --peer guest --backend "$daemon" "$@" 2>&1)
	rc=$?
	line=$(echo "$out" | grep '^vsock')
	if [ $rc -ne 0 ] || ! echo "$line" | grep -q "verified$"; then
		say_fail "$name" "rc=$rc, not verified"
	elif case $line in "$want"*) false ;; *) true ;; esac; then
		say_fail "$name" "not '$want...'"
	elif ! echo "$out" | grep -q "vm cid 3 .* siblings 1 " ||
	     ! echo "$out" | grep -q "vm cid 4 .* siblings 1 "; then
		say_fail "$name" "the daemon counted no sibling connection per VM"
	else
		echo "ok   $name: $line"
	fi
}

run rx_64k     "vsock rx, guest 4 -> guest 3: 4194304 bytes" --bytes 4M
run tx_4k      "vsock tx, guest 3 -> guest 4: 4194304 bytes" --direction tx --bytes 4M \
	--buf-size 4K
run tx_packed_odd "vsock tx, guest 3 -> guest 4: 3000001 bytes" --direction tx \
	--bytes 3000001 --buf-size 4093 --packed on
# 16K windows at both guests: the sender waits for credit many times
run rx_small_window "vsock rx, guest 4 -> guest 3: 2097152 bytes" --bytes 2M \
	--rcvbuf 16K --rcvlowat 4K
run rx_seconds "vsock rx, guest 4 -> guest 3:" --seconds 0.2 --buf-size 4K
run tx_seconds "vsock tx, guest 3 -> guest 4:" --seconds 0.2 --direction tx
run seq_rx     "vsock rx, guest 4 -> guest 3 seqpacket: 512 messages of 4096 B" \
	--type seqpacket --bytes 2M --buf-size 4K
run seq_tx     "vsock tx, guest 3 -> guest 4 seqpacket: 32 messages of 65536 B" \
	--type seqpacket --direction tx --bytes 2M --buf-size 64K

# The JSON says who the peer was; ab pairs on ops_per_sec.
out=$(timeout 60 "$perf" vsock --peer guest --backend "$daemon" --bytes 1M --json 2>/dev/null)
case $out in
*'"peer":"guest"'*'"bytes":1048576'*'"verified":true'*'"cid":3,"peer_cid":4'*)
	echo "ok   json: peer, cids, verified" ;;
*) say_fail json "fields missing" ;;
esac

# A running daemon, two VMs in a group and one outside it.
"$daemon" --quiet --vm "guest-cid=5,socket=$tmp/a,uds-path=$tmp/ha,groups=x+y" \
	--vm "guest-cid=6,socket=$tmp/b,uds-path=$tmp/hb,groups=x" \
	--vm "guest-cid=7,socket=$tmp/c,uds-path=$tmp/hc,groups=z" >/dev/null 2>&1 &
dpid=$!
for _ in $(seq 50); do [ -S "$tmp/hc" ] && break; sleep 0.1; done
# attach VM ARGS...: guest 5 and the VM at socket $tmp/VM
attach() {
	vm=$1
	shift
	out=$(timeout 30 "$perf" vsock --socket-path "$tmp/a" --uds-path "$tmp/ha" \
		--peer-socket-path "$tmp/$vm" --bytes 1M "$@" 2>&1)
}
for dir in rx tx; do
	attach b --peer guest --direction $dir --cid 5
	if [ $? -eq 0 ] && echo "$out" | grep -q "guest [56] -> guest [56]: 1048576 bytes.*verified"; then
		echo "ok   attach_$dir: $(echo "$out" | grep '^vsock')"
	else
		say_fail attach_$dir "not verified"
	fi
	start=$(date +%s)
	attach c --peer guest --direction $dir
	rc=$? took=$(($(date +%s) - start))
	if [ $rc -eq 1 ] && [ $took -le 5 ] && echo "$out" | grep -q "share a group"; then
		echo "ok   no_group_$dir: refused in ${took}s"
	else
		say_fail no_group_$dir "rc=$rc in ${took}s, want 1 within 5 s and the reason"
	fi
done
# the same words with --peer host: the host program on HOST_PATH
attach b --peer host
if [ $? -eq 0 ] && echo "$out" | grep -q "^vsock rx: 1048576 bytes.*verified"; then
	echo "ok   attach_peer_host: $(echo "$out" | grep '^vsock')"
else
	say_fail attach_peer_host "not verified"
fi

# bad command lines: one line, exit 2
bad() {
	out=$("$perf" vsock --peer guest "$@" 2>&1)
	rc=$?
	if [ $rc -eq 2 ] && [ "$(echo "$out" | wc -l)" -eq 1 ]; then
		echo "ok   usage $*: $out"
	else
		say_fail "usage $*" "rc=$rc, want 2 and one line"
	fi
}
bad --backend "$daemon" --latency
bad --backend "$daemon" --conns 2
bad --transport unix
bad --socket-path "$tmp/a"
bad --socket-path "$tmp/a" --peer-socket-path "$tmp/a"
bad --backend "$daemon" --peer-socket-path "$tmp/b"
exit $fail
