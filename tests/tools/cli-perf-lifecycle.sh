#!/bin/sh
# SPDX-License-Identifier: MIT
# virtq-perf's lifecycle (issue 24 item 3):
#   - killed with SIGTERM or SIGINT, `virtq-perf net|vsock --backend` stops
#     its backend and removes its temporary directory, and ends by that
#     signal (exit status 128 + N);
#   - killed with SIGKILL, its backend still goes (PR_SET_PDEATHSIG);
#   - `virtq-perf ab` killed with SIGTERM takes its run and the run's
#     backend with it;
#   - `net --direction rr` against a backend that answers nothing (a sink)
#     honours --seconds and fails with a hint;
#   - a backend that exits before it serves is reported with its status.
#
#   cli-perf-lifecycle.sh VIRTQ_PERF VIRTQ_NET VIRTQ_VSOCK
set -u
perf=$1 vnet=$2 vvsock=$3
fail=0
D=$(mktemp -d /tmp/vq-life.XXXXXX)
trap 'for p in $(cat "$D"/*.pid 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done; rm -rf "$D"' EXIT
mkdir "$D/tmp"
# A backend that says its pid: the one virtq-perf starts execs into it.
for d in net vsock; do
	bin=$vnet
	[ $d = vsock ] && bin=$vvsock
	printf '#!/bin/sh\necho $$ > "%s/%s.pid"\nexec "%s" "$@"\n' "$D" $d "$bin" >"$D/$d-backend"
	chmod +x "$D/$d-backend"
done

no() { echo "FAIL $*"; fail=1; }

# start NAME ARGS...: virtq-perf ARGS in the background, TMPDIR=$D/tmp;
# waits until NAME's backend is up and its socket is there.
start() {
	name=$1
	shift
	rm -f "$D/$name.pid"
	TMPDIR=$D/tmp "$perf" "$@" >"$D/out" 2>"$D/err" &
	pid=$!
	i=0
	while [ $i -lt 100 ]; do
		[ -s "$D/$name.pid" ] && ls "$D"/tmp/*/*.sock >/dev/null 2>&1 && break
		sleep 0.1
		i=$((i + 1))
	done
	sleep 0.5
	be=$(cat "$D/$name.pid" 2>/dev/null)
	[ -n "$be" ] || no "$name: the backend never started: $(cat "$D/err")"
}

# gone PID WHAT: the process ends within 5 s
gone() {
	i=0
	while kill -0 "$1" 2>/dev/null && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$1" 2>/dev/null; then no "$2: backend $1 still running"; else echo "ok   $2: backend gone"; fi
}

# killed SIG CODE WHAT: virtq-perf $pid ended by SIG; its backend and its
# directory are gone
killed() {
	kill -"$1" "$pid"
	wait "$pid"
	rc=$?
	[ $rc -eq "$2" ] && echo "ok   $3: exit $rc" || no "$3: exit $rc, not $2: $(cat "$D/err")"
	gone "$be" "$3"
	if [ -n "$(ls -A "$D/tmp")" ]; then
		no "$3: left $(ls -A "$D/tmp")"
		rm -rf "${D:?}"/tmp/*
	else
		echo "ok   $3: directory removed"
	fi
}

start net net --backend "$D/net-backend --quiet sink" --direction tx --seconds 60 --busy-poll 1000
killed TERM 143 "net SIGTERM"

start vsock vsock --backend "$D/vsock-backend" --direction rx --seconds 60
killed INT 130 "vsock SIGINT"

start net net --backend "$D/net-backend --quiet sink" --direction tx --seconds 60 --busy-poll 1000
kill -KILL "$pid"
wait "$pid"
gone "$be" "net SIGKILL (PR_SET_PDEATHSIG)"
rm -rf "${D:?}"/tmp/*

# ab's run is a virtq-perf net of its own: SIGTERM to ab reaches it
# through PR_SET_PDEATHSIG, and it cleans up as above
start net ab --quiet --pairs 2 -- net --backend "$D/net-backend --quiet sink" \
	--seconds 60 --busy-poll 1000
killed TERM 143 "ab SIGTERM"

# rr against a sink: nothing answers; --seconds 0.5 ends it in about that
t0=$(date +%s%N)
TMPDIR=$D/tmp "$perf" net --backend "$vnet --quiet sink" --direction rr --seconds 0.5 \
	>"$D/out" 2>"$D/err"
rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
hint=$(grep -c "nothing answered.*loopback" "$D/err")
if [ $rc -eq 1 ] && [ "$ms" -lt 3000 ] && [ "$hint" -eq 1 ] && [ ! -s "$D/out" ]; then
	echo "ok   rr against a sink: exit 1 after $ms ms: $(grep 'nothing answered' "$D/err")"
else
	no "rr against a sink: exit $rc after $ms ms: $(cat "$D/err")"
fi

# A backend whose command line is refused: its own line, then ours with
# its exit status (it once said "did not come up: No child processes").
TMPDIR=$D/tmp "$perf" net --backend "$vnet --nonsense" --seconds 0.2 >"$D/out" 2>"$D/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "unknown option '--nonsense'" "$D/err" &&
   grep -q "exited with status 2 before it served" "$D/err"; then
	echo "ok   a backend refusing its options: $(tail -n 1 "$D/err")"
else
	no "a backend refusing its options: exit $rc: $(cat "$D/err")"
fi
exit $fail
