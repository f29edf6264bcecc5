#!/bin/sh
# SPDX-License-Identifier: MIT
# virtq-net and virtq-vsock driven as crosvm's and Cloud Hypervisor's
# vhost-user front-ends drive them (virtq-perf --profile, the library's
# profiles; docs/vmm-profiles.md says what was read from which project),
# and as our own default, with traffic checked:
#
#   net tx   --count N into the sink: N frames completed
#   net rr   through loopback --verify: no bad frame, none lost
#   vsock    2 MiB each way through virtq-vsock, checksum verified
#
# and what was negotiated and read matches the profile:
#   - no profile negotiates VIRTIO_F_RING_PACKED (neither VMM offers it),
#     crosvm neither INDIRECT_DESC nor IN_ORDER (its base features);
#   - protocol features: exactly the VMM's list as far as the daemon offers
#     it and the library implements it; never STATUS (neither VMM asks),
#     CONFIGURE_MEM_SLOTS only for Cloud Hypervisor, BACKEND_REQ for crosvm
#     and Cloud Hypervisor's generic (vsock) device only;
#   - the config space as the VMM read it (vhost-user.rst "GET_CONFIG"):
#     crosvm field by field, the MAC given to virtq-net --mac, status
#     LINK_UP, the MTU; Cloud Hypervisor 17 bytes at once, up to duplex;
#     vsock the guest CID, 3.
#
#   vmm-profiles.sh VIRTQ_NET VIRTQ_VSOCK VIRTQ_PERF
set -u
VNET=$1 VVSOCK=$2 VPERF=$3
[ "$(nproc)" -ge 2 ] || { echo "needs 2 CPUs"; exit 77; }
fail=0
MAC=52:54:00:5a:17:01
MACHEX=5254005a1701

bad() { echo "FAIL $*"; fail=1; }
field() { echo "$2" | sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p"; }
# From "...: profile P: features 0xF protocol 0xP config HEX"
prof() { echo "$2" | sed -n "s/.*: profile [a-z-]*: features \(0x[0-9a-f]*\) protocol \(0x[0-9a-f]*\) config \([0-9a-f-]*\)$/\\$1/p"; }
has() { [ $(( $1 >> $2 & 1 )) = 1 ]; }

# The negotiated result against the profile's rules ($1 profile, $2 device,
# $3 the run's output).
check_negotiated() {
	p=$1 dev=$2 out=$3
	[ "$p" = default ] && return 0
	feat=$(prof 1 "$out") proto=$(prof 2 "$out") cfg=$(prof 3 "$out")
	if [ -z "$feat" ]; then
		bad "$p $dev: no profile line"
		return
	fi
	has "$feat" 34 && bad "$p $dev: RING_PACKED negotiated ($feat)"
	has "$feat" 32 || bad "$p $dev: no VERSION_1 ($feat)"
	has "$proto" 16 && bad "$p $dev: STATUS negotiated ($proto)"
	case $p/$dev in
	crosvm/*)
		has "$feat" 28 && bad "$p $dev: INDIRECT_DESC negotiated ($feat)"
		has "$feat" 35 && bad "$p $dev: IN_ORDER negotiated ($feat)"
		# vmm_vhost's allowed list: CONFIG MQ BACKEND_REQ REPLY_ACK
		# (DEVICE_STATE, SHMEM not offered by the daemons)
		[ "$proto" = 0x229 ] || bad "$p $dev: protocol $proto, want 0x229" ;;
	cloud-hypervisor/net)
		# MQ LOG_SHMFD REPLY_ACK CONFIG CONFIGURE_MEM_SLOTS
		[ "$proto" = 0x820b ] || bad "$p $dev: protocol $proto, want 0x820b"
		# STATUS only beside CTRL_VQ, which we do not ask for
		has "$feat" 16 && bad "$p $dev: STATUS without CTRL_VQ ($feat)" ;;
	cloud-hypervisor/vsock)
		# the generic device adds BACKEND_REQ, passes no device bit
		[ "$proto" = 0x822b ] || bad "$p $dev: protocol $proto, want 0x822b"
		[ $(( feat & 0xffffff )) = 0 ] || bad "$p $dev: device bits ($feat)" ;;
	esac
	case $p/$dev in
	crosvm/net)
		# MAC, status LINK_UP, max_virtqueue_pairs unread (no MQ), MTU 1500
		[ "$cfg" = "${MACHEX}01000000dc05" ] || bad "$p $dev: config $cfg" ;;
	cloud-hypervisor/net)
		# VirtioNetConfig: ... pairs 1, MTU, speed and duplex unknown
		[ "$cfg" = "${MACHEX}01000100dc05ffffffffff" ] || bad "$p $dev: config $cfg" ;;
	*/vsock)
		[ "$cfg" = 0300000000000000 ] || bad "$p $dev: config $cfg" ;;
	esac
	echo "ok   $p $dev: features $feat protocol $proto config $cfg"
}

N=20000
for p in default crosvm cloud-hypervisor; do
	out=$("$VPERF" net --backend "$VNET --quiet --cpu 1 --mac $MAC --copy sink" \
		--cpu 0 --profile $p --direction tx --count $N --json 2>&1)
	rc=$?
	json=$(echo "$out" | grep '^{')
	if [ $rc -ne 0 ] || [ "$(field packets "$json")" != $N ]; then
		bad "$p net tx (rc $rc): $out"
	else
		echo "ok   $p net tx: $N frames"
		check_negotiated $p net "$out"
	fi

	out=$("$VPERF" net --backend "$VNET --quiet --cpu 1 --mac $MAC loopback" \
		--cpu 0 --profile $p --direction rr --seconds 0.3 --verify --json 2>&1)
	rc=$?
	json=$(echo "$out" | grep '^{')
	if [ $rc -ne 0 ] || echo "$out" | grep -q "no answer" ||
	   [ "$(field bad "$json")" != 0 ] || [ "$(field packets "$json")" -lt 50 ]; then
		bad "$p net rr (rc $rc): $out"
	else
		echo "ok   $p net rr: $(field packets "$json") transactions, none bad"
		check_negotiated $p net "$out"
	fi

	for dir in tx rx; do
		out=$("$VPERF" vsock --backend "$VVSOCK" --profile $p --direction $dir \
			--bytes 2M 2>&1)
		rc=$?
		if [ $rc -ne 0 ] || ! echo "$out" | grep -q "2097152 bytes.*verified"; then
			bad "$p vsock $dir (rc $rc): $out"
		else
			echo "ok   $p vsock $dir: 2 MiB verified"
			check_negotiated $p vsock "$out"
		fi
	done
done
exit $fail
