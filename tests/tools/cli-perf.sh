#!/bin/sh
# SPDX-License-Identifier: MIT
# virtq-perf's command lines follow the tools' convention (issue 24 item 2,
# tools/common/cli.h): every workload refuses an unknown flag, a missing
# value, a value out of range, a number that is not decimal, a conflict and
# an option without effect in the mode chosen, with exit 2 and exactly one
# line on stderr (nothing on stdout); --help and --version exit 0.
#
#   cli-perf.sh VIRTQ_PERF
set -u
perf=$1
fail=0
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
# A CPU this machine does not have.
nocpu=$(getconf _NPROCESSORS_CONF)

# bad WHAT ARGS...: exit 2, one line on stderr, nothing on stdout
bad() {
	what=$1
	shift
	"$perf" "$@" >"$out" 2>"$err" </dev/null
	rc=$?
	lines=$(wc -l <"$err")
	if [ $rc -eq 2 ] && [ "$lines" -eq 1 ] && [ ! -s "$out" ]; then
		echo "ok   $what: $(cat "$err")"
	else
		echo "FAIL $what: virtq-perf $* exited $rc with $lines lines on stderr:"
		sed 's/^/    /' "$err" "$out"
		fail=1
	fi
}

# good WHAT ARGS...: exit 0, something on stdout, nothing on stderr
good() {
	what=$1
	shift
	"$perf" "$@" >"$out" 2>"$err" </dev/null
	rc=$?
	if [ $rc -eq 0 ] && [ -s "$out" ] && [ ! -s "$err" ]; then
		echo "ok   $what"
	else
		echo "FAIL $what: virtq-perf $* exited $rc"
		sed 's/^/    /' "$err"
		fail=1
	fi
}

bad "no command"                        
bad "unknown command"                   bogus
good "--help"                           --help
good "--version"                        --version
for w in ring net vsock ab c2c; do
	good "$w --help"                $w --help
	good "$w --version"             $w --version
	bad "$w: unknown flag"          $w --bogus
done
"$perf" ring --version | grep -q "^virtq-perf ring [0-9]" ||
	{ echo "FAIL ring --version: $("$perf" ring --version)"; fail=1; }

# ring
bad "ring: missing value"               ring --size
bad "ring: out of range"                ring --burst 0
bad "ring: above the queue size"        ring --burst 64 --queue-size 32
bad "ring: split size not a power of 2" ring --queue-size 100
bad "ring: hex"                         ring --ops 0x10
bad "ring: sign"                        ring --used-batch -1
bad "ring: not a size"                  ring --size 1T
bad "ring: conflict"                    ring --seconds 1 --ops 100
bad "ring: --direction without --size"  ring --direction rx
bad "ring: a CPU not present"           ring --cpu "0,$nocpu"
bad "ring: one CPU twice"               ring --cpu 1,1
bad "ring: not on|off"                  ring --in-order maybe
bad "ring: stray word"                  ring split

# net (the options are refused before any backend is started)
s="--socket-path /nonexistent/net.sock"
bad "net: neither socket nor backend"   net
bad "net: socket and backend"           net $s --backend true
bad "net: missing value"                net $s --size
bad "net: out of range"                 net $s --size 5
bad "net: hex"                          net $s --count 0x10
bad "net: no such profile"              net $s --profile qemu
bad "net: crosvm never packed"          net $s --profile crosvm --packed on
bad "net: crosvm never indirect"        net $s --profile crosvm --indirect on
bad "net: cloud-hypervisor never packed" net $s --profile cloud-hypervisor --packed on
bad "net: a profile sends no IOTLB"     net $s --profile crosvm --iommu 4K
bad "vsock: crosvm never packed"        vsock --backend true --profile crosvm --packed on
bad "vsock: cloud-hypervisor generic, no seqpacket" vsock --backend true --profile cloud-hypervisor --type seqpacket
bad "net: not a number"                 net $s --seconds 1e
bad "net: --verify in tx"               net $s --verify
bad "net: --size in rx without --verify" net $s --direction rx --size 100
bad "net: --burst in rr"                net $s --direction rr --burst 4
bad "net: --used-batch without --backend" net $s --used-batch 1
bad "net: --backend-arg without --backend" net $s --backend-arg=--copy
bad "net: --peer-cpu without --cpu"     net $s --peer-cpu 1
bad "net: a CPU not present"            net $s --cpu "$nocpu"
bad "net: --iommu not a power of two"   net $s --iommu 5000
bad "net: direction"                    net $s --direction up
bad "net: --rate in rx"                 net $s --direction rx --rate 1000
bad "net: --rate with --drop-kicks"     net $s --rate 1000 --drop-kicks 2
bad "net: --rate 0"                     net $s --rate 0

# vsock
s="--socket-path /nonexistent/vu.sock --uds-path /nonexistent/h.sock"
bad "vsock: no backend"                 vsock
bad "vsock: backend and sockets"        vsock --backend true --uds-path /x
bad "vsock: --socket-path alone"        vsock --socket-path /x
bad "vsock: missing value"              vsock $s --bytes
bad "vsock: out of range"               vsock $s --rcvbuf 1K
bad "vsock: sign"                       vsock $s --iters -5
bad "vsock: not a size"                 vsock $s --bytes 1T
bad "vsock: conflict"                   vsock $s --seconds 1 --bytes 1M
bad "vsock: --latency with --direction" vsock $s --latency --direction tx
bad "vsock: --iters without --latency"  vsock $s --iters 10
bad "vsock: --cid with --backend"       vsock --backend true --cid 4
bad "vsock: --rcvlowat with seqpacket"  vsock $s --type seqpacket --rcvlowat 4K
bad "vsock: --used-batch without --backend" vsock $s --used-batch 0
bad "vsock: --quiet did nothing"        vsock $s --quiet
bad "vsock: transport"                  vsock --transport tcp
bad "vsock: unix with --backend"        vsock --transport unix --backend true
bad "vsock: unix with --socket-path"    vsock --transport unix $s
bad "vsock: unix with --packed"         vsock --transport unix --packed on
bad "vsock: unix with --dirty-log"      vsock --transport unix --dirty-log
bad "vsock: unix --rcvlowat, busy poll" vsock --transport unix --rcvlowat 4K --busy-poll 10
bad "vsock: unix --rcvlowat, --conns"   vsock --transport unix --rcvlowat 4K --conns 2
bad "vsock: --busy-poll sign"           vsock $s --busy-poll -1
bad "vsock: --conns 0"                  vsock $s --conns 0
bad "vsock: --conns too many"           vsock $s --conns 1025
bad "vsock: --conns with --latency"     vsock $s --conns 4 --latency
bad "vsock: --conns with seqpacket"     vsock $s --conns 4 --type seqpacket
bad "vsock: --stall without --conns"    vsock $s --stall 1
bad "vsock: --stall every connection"   vsock $s --conns 4 --stall 4
bad "vsock: --cpu not present"          vsock $s --cpu "0,$nocpu"
bad "vsock: --cpu not a pair"           vsock $s --cpu 0
good "vsock: unix, both threads on CPU 0" vsock --transport unix --latency --iters 50 --cpu 0,0
good "vsock: the unix baseline"         vsock --transport unix --bytes 1M
good "vsock: unix, 8 connections, 1 stalled" vsock --transport unix --bytes 1M --conns 8 --stall 1

# ab (its own options; a run's are its workload's)
bad "ab: no workload"                   ab
bad "ab: unknown workload"              ab -- bogus
bad "ab: missing value"                 ab --pairs
bad "ab: fewer than 2 pairs"            ab --pairs 1 -- ring
bad "ab: hex"                           ab --pairs 0x10 -- ring
bad "ab: --plot extension"              ab --plot chart.jpg -- ring
bad "ab: --seconds without effect"      ab --seconds 1 -- ring --ops 100
bad "ab: an open quote"                 ab --a "--used-batch '1" -- ring
bad "ab: a run's options refused"       ab --quiet --pairs 6 -- ring --bogus
bad "ab: --metric not a JSON key"       ab --metric p50-us -- ring
bad "ab: --metric empty"                ab --metric "" -- ring

# c2c
bad "c2c: not a pair"                   c2c 0
bad "c2c: a CPU not present"            c2c "0,$nocpu"
bad "c2c: stray word"                   c2c 0,1 2,3
bad "c2c: --gaps too short"             c2c --gaps 0
bad "c2c: --gaps not a number"          c2c --gaps 1s
# --gaps: a line per CPU with the gaps' rate, mean, longest and share
good "c2c --gaps"                       c2c 0,1 --gaps 0.05
n=$(grep -cE '^gaps CPU [01]: [0-9]+/s over 5 us, mean [0-9.]+ us, max [0-9.]+ us, [0-9.]+% of the time$' "$out")
[ "$n" = 2 ] && echo "ok   c2c --gaps: a line per CPU" ||
	{ echo "FAIL c2c --gaps printed:"; sed 's/^/    /' "$out"; fail=1; }

exit $fail
