#!/bin/sh
# SPDX-License-Identifier: MIT
# The daemons' command lines follow tools/common/cli.h (issue 24): bad input
# - an unknown flag, a missing value, a value out of range, a number that is
# not decimal, a conflict, an option without effect in the mode - ends with
# exit 2 and exactly one line on stderr (naming the option), nothing on
# stdout, and no socket created; --help and --version exit 0 on stdout;
# --print-capabilities ignores the other options (vhost-user.rst).
#
# usage: cli-daemons-errors.sh VIRTQ_NET VIRTQ_VSOCK
set -u
net=$1
vsock=$2
dir=$(mktemp -d /tmp/vq-cli-errors.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0
S="--socket-path $dir/vu"
V="$S --guest-cid 3 --uds-path $dir/h"

# bad EXPECT_IN_LINE PROGRAM ARGS...: exit 2, one stderr line containing
# EXPECT_IN_LINE, empty stdout, nothing left in $dir.
bad() {
	want=$1
	shift
	"$@" >"$dir/out" 2>"$dir/err" </dev/null
	rc=$?
	lines=$(wc -l <"$dir/err")
	if [ $rc -ne 2 ] || [ "$lines" -ne 1 ] || [ -s "$dir/out" ] ||
	   ! grep -qF -- "$want" "$dir/err" || [ -n "$(ls "$dir" | grep -v '^out$\|^err$')" ]; then
		echo "FAIL: $* -> rc $rc, $lines stderr lines (want 2, 1 line with '$want'):"
		sed 's/^/    /' "$dir/err" "$dir/out"
		ls "$dir" | grep -v '^out$\|^err$' | sed 's/^/    left: /'
		fail=1
	else
		echo "ok   $(basename "$1") ${*#"$1"}: $(cat "$dir/err")"
	fi
}

# good PROGRAM ARGS...: exit 0, something on stdout, nothing on stderr.
good() {
	"$@" >"$dir/out" 2>"$dir/err" </dev/null
	rc=$?
	if [ $rc -ne 0 ] || [ ! -s "$dir/out" ] || [ -s "$dir/err" ]; then
		echo "FAIL: $* -> rc $rc (want 0, stdout only):"
		sed 's/^/    /' "$dir/err"
		fail=1
	else
		echo "ok   $(basename "$1") ${*#"$1"}: $(head -1 "$dir/out")"
	fi
}

for d in "$net" "$vsock"; do
	good "$d" --help
	good "$d" --version
	grep -q "^$(basename "$d") [0-9]" "$dir/out" || { echo "FAIL: $d --version: $(cat "$dir/out")"; fail=1; }
	good "$d" --print-capabilities --no-such-option 0x10
	bad "unknown option '--no-such-option'" "$d" --no-such-option
	bad "unknown option '-z'" "$d" -z
	bad "--socket-path needs a value" "$d" --socket-path
	bad "--used-batch: '65537'" "$d" $S --used-batch 65537
	bad "--busy-poll: '0x10'" "$d" $S --busy-poll 0x10
	bad "--busy-poll: '-1'" "$d" $S --busy-poll -1
	bad "--busy-poll-yield: no effect without a busy-poll window" "$d" $S --busy-poll 0 --busy-poll-yield 5
	bad "--busy-poll-yield: no effect without a busy-poll window" "$d" $S --busy-poll-max 0 --busy-poll-yield 5
	bad "--busy-poll-yield: must be less than --busy-poll (50 us)" "$d" $S --busy-poll 50 --busy-poll-yield 50
	bad "--busy-poll-yield: must be less than --busy-poll-max (32 us)" "$d" $S --busy-poll-yield 32
	bad "--busy-poll-max: not with --busy-poll" "$d" $S --busy-poll 5 --busy-poll-max 10
	bad "--busy-poll-max: '-1'" "$d" $S --busy-poll-max -1
	bad "--busy-poll-yield: '1e3'" "$d" $S --busy-poll 50 --busy-poll-yield 1e3
	bad "--stats-interval: 'inf'" "$d" $S --stats-interval inf
	bad "--fd: not with --socket-path" "$d" $S --fd 0
	bad "--fd: '3x'" "$d" --fd 3x
	bad "--socket-mode: '0x1ff'" "$d" $S --socket-mode 0x1ff
	bad "--socket-mode: '1777'" "$d" $S --socket-mode 1777
	bad "--socket-mode: 0" "$d" $S --socket-mode 0
	bad "--socket-group: 'no-such-group-here'" "$d" $S --socket-group no-such-group-here
	bad "--client: not with --fd" "$d" --fd 0 --client
	bad "--socket-path or --fd is required" "$d" --quiet
	bad "--socket-path: '/$(printf '%0108d' 0)' is longer than 107" "$d" --socket-path "/$(printf '%0108d' 0)"
done

# virtq-net: the config space's MAC and MTU (5.1.4)
bad "--mac: '52:54:00:12:34' is not a MAC" "$net" $S --mac 52:54:00:12:34
bad "--mac: '52:54:00:12:34:5g' is not a MAC" "$net" $S --mac 52:54:00:12:34:5g
bad "--mac: '52:54:00:12:34:567' is not a MAC" "$net" $S --mac 52:54:00:12:34:567
bad "--mac: '52-54-00-12-34-56' is not a MAC" "$net" $S --mac 52-54-00-12-34-56
bad "--mac: 01:00:5e:00:00:01 is a group address" "$net" $S --mac 01:00:5e:00:00:01
bad "--mac: the zero address" "$net" $S --mac 00:00:00:00:00:00
bad "--mtu: '67'" "$net" $S --mtu 67
bad "--mtu: '65536'" "$net" $S --mtu 65536

# virtq-net: --socket-mode and --socket-group only where it creates a socket
bad "--socket-mode: no socket to create" "$net" $S --client --socket-mode 0660
bad "--socket-group: no socket to create" "$net" --fd 0 --socket-group 0
# its own options: values
bad "--size: '0x40'" "$net" $S --size 0x40 source
bad "--size: '13'" "$net" $S --size 13 source
bad "--size: '1T'" "$net" $S --size 1T source
bad "--queue-pairs: '0'" "$net" $S --queue-pairs 0
bad "--queue-pairs: '65'" "$net" $S --queue-pairs 65
bad "--count: '0'" "$net" $S --count 0 source
bad "--count needs a value" "$net" $S source --count
bad "--tx-evict: 'maybe' is not off, on or auto" "$net" $S --tx-evict maybe loopback
cpus=$(getconf _NPROCESSORS_CONF)
bad "--cpu: '$cpus'" "$net" $S --cpu "$cpus"
bad "--cpu: '0,,1'" "$net" $S --cpu 0,,1
bad "--mode: 'bridge'" "$net" $S --mode bridge
bad "MODE: 'bridge'" "$net" $S bridge
bad "unexpected argument 'extra'" "$net" $S sink extra
bad "tap mode needs an interface name" "$net" $S tap
bad "is not an interface name" "$net" $S tap a234567890123456
# ... and where they have no effect, or conflict
bad "--tap: only in tap mode (the mode is sink)" "$net" $S --tap tap0
bad "--size: only in source mode" "$net" $S --size 128 loopback
bad "--count: only in source mode (the mode is sink)" "$net" $S --count 5
bad "--copy: only in sink mode (the mode is source)" "$net" $S --copy source
bad "--no-offloads: only tap mode" "$net" $S --no-offloads loopback
bad "--tx-evict: no effect in sink mode without --copy" "$net" $S --tx-evict on
bad "--tx-evict: no effect in source mode" "$net" $S --tx-evict off source
bad "--threads: 2 threads for 1 queue pair" "$net" $S --threads 2
bad "--cpu: 2 CPUs for 1 worker thread" "$net" $S --cpu 0,0
bad "MODE: 'loopback' and --mode sink disagree" "$net" $S --mode sink loopback
bad "--tap: 'tap1' and 'tap tap2' disagree" "$net" $S --tap tap1 tap tap2

# virtq-vsock's own
bad "--guest-cid is required" "$vsock" $S --uds-path "$dir/h"
bad "--uds-path is required" "$vsock" $S --guest-cid 3
bad "--guest-cid: '2'" "$vsock" $V --guest-cid 2
bad "--guest-cid: '0x10'" "$vsock" $V --guest-cid 0x10
# the host side and the vhost-user socket are different files
bad "--uds-path: '$dir/vu' is the --socket-path too" "$vsock" $S --guest-cid 3 --uds-path "$dir/vu"
bad "--socket-path: '$dir/h.seqpacket' is the host side's seqpacket socket" "$vsock" --socket-path "$dir/h.seqpacket" --guest-cid 3 --uds-path "$dir/h"
# the host-port policy: ports and ranges, decimal, or none
bad "--host-ports: '' is not a list" "$vsock" $V --host-ports ''
bad "--host-ports: '22,,80' is not a list" "$vsock" $V --host-ports 22,,80
bad "--host-ports: 'x'" "$vsock" $V --host-ports 22,x
bad "--guest-ports: the range 90-80 runs backwards" "$vsock" $V --guest-ports 90-80
bad "--guest-ports: '4294967295'" "$vsock" $V --guest-ports 4294967295
bad "--guest-ports: ''" "$vsock" $V --guest-ports 5-
bad "--guest-cid: '4294967295'" "$vsock" $V --guest-cid 4294967295
bad "--buf-alloc: '4095'" "$vsock" $V --buf-alloc 4095
bad "--buf-alloc: '2G'" "$vsock" $V --buf-alloc 2G
bad "--max-conns: '0'" "$vsock" $V --max-conns 0
bad "--cpu: '$cpus'" "$vsock" $V --cpu "$cpus"
bad "--cpu: '0,,1'" "$vsock" $V --cpu 0,,1
bad "--cpu: 2 CPUs for 1 worker thread" "$vsock" $V --cpu 0,0
bad "--cpu: 2 CPUs for 1 worker thread" "$vsock" $V --threads 1 --cpu 0,0
bad "--uds-path: needs a path" "$vsock" $S --guest-cid 3 --uds-path ''
bad "unexpected argument 'extra'" "$vsock" $V extra
long=$dir/$(printf '%0100d' 0)
bad "HOST_PATH.seqpacket must fit" "$vsock" $S --guest-cid 3 --uds-path "$long"
exit $fail
