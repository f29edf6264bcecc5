#!/bin/sh
# SPDX-License-Identifier: MIT
#
# virtq-vsock's host-port policy (issue 33 item 3), through the daemon
# with virtq-perf vsock playing the guest and the host program on port
# 5201 (VS_PORT):
#  - --host-ports: a guest REQUEST (5.10.6.3) to a host port outside the
#    list is answered RST at once (the guest sees the connection refused),
#    counted (policy_refused) and logged; one inside it carries traffic;
#  - --guest-ports: a host program's CONNECT to a guest port outside the
#    list is closed at once without a reply, counted and logged, and the
#    guest is never asked; one inside it carries traffic;
#  - none refuses every port; a refusal never hangs either side.
#
# usage: test_vsock_policy.sh VIRTQ_PERF VIRTQ_VSOCK
set -u
perf=$1
daemon=$2
fail=0

# run NAME WANT DIRECTION OPTION LIST: WANT is ok (verified, nothing
# refused) or refused (fails within seconds, counted and logged).
run() {
	name=$1 want=$2 dir=$3 opt=$4 list=$5
	start=$(date +%s)
	out=$(timeout 30 "$perf" vsock --backend "$daemon" --direction "$dir" --bytes 1M \
		--backend-arg "$opt" --backend-arg "$list" 2>&1)
	rc=$?
	took=$(($(date +%s) - start))
	case $want in
	ok)
		if [ $rc -eq 0 ] && echo "$out" | grep -q verified &&
		   ! echo "$out" | grep -q "refused by policy"; then
			echo "ok   $name: $(echo "$out" | grep '^vsock')"
			return
		fi ;;
	refused)
		if [ $rc -ne 0 ] && [ $took -le 5 ] &&
		   echo "$out" | grep -q "refused by policy 1" &&
		   echo "$out" | grep -q "port 5201 refused: not in $opt"; then
			echo "ok   $name: refused in ${took}s: $(echo "$out" | grep 'port 5201 refused')"
			return
		fi ;;
	esac
	echo "FAIL $name (rc=$rc, ${took}s, want $want):"
	echo "$out" | sed 's/^/    /'
	fail=1
}

run guest_to_host_allowed   ok      tx --host-ports 22,5000-5300
run guest_to_host_refused   refused tx --host-ports 22,8000-8099
run guest_to_host_none      refused tx --host-ports none
run host_to_guest_allowed   ok      rx --guest-ports 5201
run host_to_guest_refused   refused rx --guest-ports 1-100,5202
run host_to_guest_none      refused rx --guest-ports none
exit $fail
