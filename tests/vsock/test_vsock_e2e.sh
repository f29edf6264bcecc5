#!/bin/sh
# SPDX-License-Identifier: MIT
#
# End to end through the virtq-vsock daemon: virtq-perf vsock plays the
# guest (our vhost-user front-end and virtio-vsock driver) and the host
# program (CONNECT on the daemon's UNIX socket, or a listener at
# HOST_PATH_<port>).  Small transfers both ways, split and packed, the RX
# batching settings, and a ping-pong; each must end "verified" (byte count
# and checksum equal on both ends).
#
# usage: test_vsock_e2e.sh VIRTQ_PERF VIRTQ_VSOCK
set -u
perf=$1
daemon=$2
fail=0

run() {
	name=$1
	shift
	out=$("$perf" vsock --backend "$daemon" "$@" 2>&1)
	rc=$?
	if [ $rc -eq 0 ] && echo "$out" | grep -q "verified"; then
		echo "ok   $name: $(echo "$out" | grep '^vsock')"
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
exit $fail
