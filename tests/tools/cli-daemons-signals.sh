#!/bin/sh
# SPDX-License-Identifier: MIT
# The signals a user sends a daemon by habit (issue 36 item 2), to
# virtq-net and virtq-vsock with a front-end (virtq-perf) attached:
#   - SIGHUP and SIGUSR2 are ignored: the daemon goes on;
#   - SIGUSR1 prints a statistics snapshot (text and --json, with
#     --per-queue's ring lines) and the daemon goes on;
#   - SIGINT, SIGTERM and SIGQUIT end it: exit 0, the summary printed,
#     every socket it created removed (virtq-vsock: the vhost-user socket,
#     HOST_PATH, HOST_PATH.seqpacket and HOST_PATH_seqpacket);
#   - (item 3) the start-up banner names the socket and the features, the
#     rates come in the unit that fits them.
#
#   cli-daemons-signals.sh VIRTQ_PERF VIRTQ_NET VIRTQ_VSOCK
set -u
# SIGQUIT's default (before issue 36) dumps core: not into the build tree
ulimit -c 0
perf=$1 vnet=$2 vvsock=$3
fail=0
D=$(mktemp -d /tmp/vq-sig.XXXXXX)
dpid='' fpid=''
trap 'for p in $dpid $fpid; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$D"' EXIT

no() { echo "FAIL $*"; fail=1; }
ok() { echo "ok   $*"; }

# waitfor FILE PATTERN: up to 30 s (a loaded machine) for a line matching
# PATTERN in FILE
waitfor() {
	i=0
	while ! grep -q "$2" "$1" 2>/dev/null && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	grep -q "$2" "$1" 2>/dev/null
}

# stop_frontend: the front-end of the last start is gone
stop_frontend() {
	[ -n "$fpid" ] || return 0
	kill -KILL "$fpid" 2>/dev/null
	wait "$fpid" 2>/dev/null
	fpid=''
}

# start net|vsock [DAEMON OPTIONS]: the daemon, then a front-end on it;
# returns when the front-end has started the daemon's queues.
start() {
	kind=$1
	shift
	stop_frontend
	rm -rf "${D:?}"/s
	mkdir "$D/s"
	# emptied here, not only by the redirections: those happen in the
	# children, and waitfor must not find the last run's lines
	: >"$D/out"
	: >"$D/err"
	if [ "$kind" = net ]; then
		socks="$D/s/n.sock"
		"$vnet" --socket-path "$D/s/n.sock" "$@" sink >"$D/out" 2>"$D/err" &
		dpid=$!
		# the banner comes before the socket: wait for both
		waitfor "$D/err" "sink mode" && sockets_up ||
			no "net: never came up: $(cat "$D/err")"
		# rx against a sink: the front-end posts buffers and waits, so
		# it is attached without loading the machine
		"$perf" net --socket-path "$D/s/n.sock" --direction rx --seconds 60 \
			>"$D/fout" 2>"$D/ferr" &
		fpid=$!
		waitfor "$D/err" "queue 1 started" ||
			no "net: no front-end attached: $(cat "$D/err" "$D/ferr")"
	else
		socks="$D/s/v.sock $D/s/h.sock $D/s/h.sock.seqpacket $D/s/h.sock_seqpacket"
		"$vvsock" --socket-path "$D/s/v.sock" --uds-path "$D/s/h.sock" \
			--guest-cid 3 "$@" >"$D/out" 2>"$D/err" &
		dpid=$!
		waitfor "$D/err" "guest CID 3" && sockets_up ||
			no "vsock: never came up: $(cat "$D/err")"
		"$perf" vsock --socket-path "$D/s/v.sock" --uds-path "$D/s/h.sock" \
			--direction rx --seconds 60 >"$D/fout" 2>"$D/ferr" &
		fpid=$!
		waitfor "$D/err" "queue 2 (event) started" ||
			no "vsock: no front-end attached: $(cat "$D/err" "$D/ferr")"
	fi
}

# sockets_up: every socket of $socks is there
sockets_up() {
	for s in $socks; do
		[ -S "$s" ] || return 1
	done
}

# leftover: the daemon's sockets still there
leftover() {
	for s in $socks; do
		[ -e "$s" ] && printf ' %s' "$s"
	done
}

# goes_on WHAT SIG: the daemon is still running after SIG
goes_on() {
	[ -n "$dpid" ] || { no "$1: SIG$2: no daemon to send it to"; return; }
	kill -"$2" "$dpid"
	sleep 0.5
	if kill -0 "$dpid" 2>/dev/null; then
		ok "$1: SIG$2: still running"
	else
		wait "$dpid"
		no "$1: SIG$2 ended it (exit $?), leaving$(leftover): $(cat "$D/err")"
		dpid=''
	fi
}

# ends WHAT SIG: SIG ends the daemon within 5 s with exit 0 and the
# summary, its sockets removed
ends() {
	[ -n "$dpid" ] || { no "$1: SIG$2: no daemon to send it to"; return; }
	kill -"$2" "$dpid"
	i=0
	while kill -0 "$dpid" 2>/dev/null && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$dpid" 2>/dev/null; then
		no "$1: SIG$2: still running after 5 s"
		kill -KILL "$dpid"
	fi
	wait "$dpid"
	rc=$?
	dpid=''
	[ $rc -eq 0 ] && ok "$1: SIG$2: exit 0" || no "$1: SIG$2: exit $rc, not 0: $(cat "$D/err")"
	grep -q '^summary\|"summary":true' "$D/out" && ok "$1: SIG$2: summary printed" ||
		no "$1: SIG$2: no summary: $(cat "$D/out")"
	left=$(leftover)
	[ -z "$left" ] && ok "$1: SIG$2: no socket left" || no "$1: SIG$2: left$left"
	stop_frontend
}

for kind in net vsock; do
	# stats-interval 0: a statistics line can only come from SIGUSR1
	start $kind --stats-interval 0 --per-queue
	# item 3: the banner names the socket, the idle policy (the default:
	# adaptive) and the features offered
	vu=$D/s/n.sock
	[ $kind = vsock ] && vu=$D/s/v.sock
	if grep -q "listening on $vu" "$D/err" && grep -q "features offered .*VERSION_1.*(0x" "$D/err" &&
	   grep -q ", adaptive busy poll up to 32 us, " "$D/err"; then
		ok "$kind: banner: $(grep -o 'features offered [A-Z_0-9 ]*' "$D/err" | head -n 1 | cut -c1-60)..."
	else
		no "$kind: banner without the socket or the features by name: $(cat "$D/err")"
	fi
	goes_on $kind HUP
	goes_on $kind USR1
	if grep -q '^snapshot .* tx .* rx .* total tx [0-9]* pkts' "$D/out"; then
		ok "$kind: SIGUSR1: $(grep '^snapshot' "$D/out")"
	else
		no "$kind: SIGUSR1: no snapshot line: $(cat "$D/out")"
	fi
	# rates in the unit that fits them, not Mpps with three decimals
	grep -qE '^snapshot .* tx +[0-9.]+ (pps|kpps|Mpps) +[0-9.]+ (bit/s|kbit/s|Mbit/s|Gbit/s) ' "$D/out" ||
		no "$kind: SIGUSR1: rates not in fitting units: $(grep '^snapshot' "$D/out")"
	# --per-queue: the snapshot, like any line, is followed by its rings'
	if sed -n '/^snapshot/{n;p;}' "$D/out" | grep -q '^  queue 0 (rx'; then
		ok "$kind: SIGUSR1 --per-queue: $(grep -c '^  queue' "$D/out") ring lines"
	else
		no "$kind: SIGUSR1 --per-queue: no ring lines: $(cat "$D/out")"
	fi
	goes_on $kind USR2
	ends $kind INT

	start $kind --stats-interval 0 --json --per-queue
	goes_on $kind USR1
	if grep -q '^{"stats":true,.*"snapshot":true,.*"tx_pkts":.*"queues":\[{"index":0,' "$D/out"; then
		ok "$kind: SIGUSR1 --json: a snapshot line"
	else
		no "$kind: SIGUSR1 --json: no snapshot line: $(cat "$D/out")"
	fi
	ends $kind TERM

	start $kind
	ends $kind QUIT
done
exit $fail
