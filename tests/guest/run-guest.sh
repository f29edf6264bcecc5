#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Boot the test guest under QEMU with at most one vhost-user device, run one
# shell command inside (or give a shell on this terminal), power off.
#
#   run-guest.sh [options] -- 'guest shell command'
#   run-guest.sh [options] --interactive
#     --interactive         a shell on the guest's console, here (Ctrl-A X
#                           quits QEMU; exit powers the guest off)
#     --help                this text
#     --dev none|net|vsock  the vhost-user device (default none)
#     --sock PATH           the backend's vhost-user socket (QEMU connects)
#     --packed on|off       packed virtqueues (default off: split)
#     --mrg on|off          net: VIRTIO_NET_F_MRG_RXBUF (default on)
#     --ifup on|off         net: the guest's /init brings eth0 up (default
#                           on); off: the command does (gnet rx -u opens its
#                           socket first, so it sees the first frames)
#     --queues N            net: queue pairs (default 1; more: multiqueue,
#                           the guest uses min(N, vCPUs) of them)
#     --smp N               vCPUs (default 1)
#     --reconnect SEC       net: chardev reconnect=SEC (survive backend restarts)
#     --dev-opts k=v,...    more -device properties
#     --iommu on|off        the device behind a virtual IOMMU (q35 with
#                           intel-iommu, iommu_platform=on, the guest's
#                           intel_iommu=on): every address the backend sees
#                           is an IOVA, translated through vhost-user's IOTLB
#     --qmp-port PORT       QMP monitor on 127.0.0.1:PORT (for hotplug)
#     --incoming URI        wait for a live migration from URI instead of
#                           booting (the same options and command as the
#                           source's, so the machines match); the guest stays
#                           paused after it until QMP "cont"
#     --mem MB              guest RAM, memfd shared with the backend (default 256)
#     --mem-path DIR        the guest RAM in a file under DIR instead (a
#                           hugetlbfs mount: huge pages, as VMs use them)
#     --timeout SEC         bound for the whole run (default 90)
#     --logdir DIR          console.log, output.log, qemu.log, cmdline (default: a temp dir)
#     --trace PATTERN       enable QEMU trace events (repeatable; they go to
#                           qemu.log)
#     --print-cmd           print the QEMU command line, do not run it
#
# VIRTQ_GUEST_MAXCPUS overrides maxcpus (below: 1 brings back the guest
# whose barriers TCG drops).
#
# The command's output is on the guest's second serial port: it is copied to
# our stdout at the end.  Exit status: the guest command's; 124 on timeout;
# 125 when QEMU could not start or the guest gave no status (see the logs).
# KVM is used only if a probe guest really boots with it (probed once per
# cache, result in CACHE/accel); otherwise TCG.  The choice is logged.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${VIRTQ_GUEST_CACHE:-$HERE/../../build-guest}
DEV=none SOCK= PACKED=off MRG=on IFUP=on QUEUES=1 SMP=1 RECONNECT= DEVOPTS= IOMMU=off QMP= INCOMING= MEM=256 MEMPATH= TIMEOUT=90 LOGDIR= PRINT=0
TRACE=() INTERACTIVE=0
usage() { sed -n '3,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) usage; exit 0 ;;
	--interactive) INTERACTIVE=1; shift ;;
	--dev) DEV=$2; shift 2 ;;
	--sock) SOCK=$2; shift 2 ;;
	--packed) PACKED=$2; shift 2 ;;
	--mrg) MRG=$2; shift 2 ;;
	--ifup) IFUP=$2; shift 2 ;;
	--queues) QUEUES=$2; shift 2 ;;
	--smp) SMP=$2; shift 2 ;;
	--reconnect) RECONNECT=$2; shift 2 ;;
	--dev-opts) DEVOPTS=,$2; shift 2 ;;
	--iommu) IOMMU=$2; shift 2 ;;
	--qmp-port) QMP=$2; shift 2 ;;
	--incoming) INCOMING=$2; shift 2 ;;
	--mem) MEM=$2; shift 2 ;;
	--mem-path) MEMPATH=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	--logdir) LOGDIR=$2; shift 2 ;;
	--trace) TRACE+=(-trace "$2"); shift 2 ;;
	--print-cmd) PRINT=1; shift ;;
	--) shift; break ;;
	-*) echo "run-guest.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
	*) break ;;
	esac
done
CMD=${*:-true}
say() { echo "[run-guest] $*" >&2; }
die() { say "ERROR: $*"; exit 125; }
case "$IFUP" in on | off) ;; *) echo "run-guest.sh: --ifup on|off, not '$IFUP'" >&2; exit 2 ;; esac

QEMU=$(command -v qemu-system-x86_64) || die "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"
# (re)built when its inputs changed, else reused at once
"$HERE/build-guest.sh" "$CACHE" >/dev/null || die "guest build failed"
CACHE=$(cd "$CACHE" && pwd)
[ -n "$LOGDIR" ] || LOGDIR=$(mktemp -d /tmp/vq-guest.XXXXXX)
mkdir -p "$LOGDIR"
rm -f "$LOGDIR"/{console.log,output.log,qemu.log}

# ---- accelerator: KVM only if it really boots the guest here ----
probe_accel() {
	local d=$CACHE/accel-probe
	if [ ! -w /dev/kvm ]; then
		echo "tcg (no usable /dev/kvm)"
		return
	fi
	mkdir -p "$d"
	# A guest that boots under KVM is up in a second or two; 12 s is for a
	# loaded machine, and is what a machine whose KVM hangs pays, once.
	if VIRTQ_GUEST_ACCEL=kvm "$0" --timeout 12 --logdir "$d" -- 'echo kvm-ok' 2>/dev/null | grep kvm-ok >/dev/null; then
		echo "kvm (probe guest booted)"
	else
		echo "tcg (/dev/kvm present but the probe guest did not boot with it in 12 s)"
	fi
}
if [ -z "${VIRTQ_GUEST_ACCEL:-}" ]; then
	(
		flock 9
		[ -s "$CACHE/accel" ] || probe_accel > "$CACHE/accel"
	) 9> "$CACHE/.accel.lock"
	ACCEL_WHY=$(cat "$CACHE/accel")
	ACCEL=${ACCEL_WHY%% *}
else
	ACCEL=$VIRTQ_GUEST_ACCEL
	ACCEL_WHY="$ACCEL (VIRTQ_GUEST_ACCEL)"
fi
CPU=max
[ "$ACCEL" = kvm ] && CPU=host

# ---- per-run initramfs: the base image plus /vq/cmd ----
OV=$LOGDIR/overlay
rm -rf "$OV"
mkdir -p "$OV/vq"
printf '%s\n' "$CMD" > "$OV/vq/cmd"
[ $INTERACTIVE = 1 ] && : > "$OV/vq/interactive"
[ "$IFUP" = off ] && : > "$OV/vq/ifdown"
INITRD=$LOGDIR/initrd
cp "$CACHE/initramfs.gz" "$INITRD"
# A second (uncompressed) archive must start on a 4-byte boundary.
truncate -s $((($(stat -c %s "$INITRD") + 3) / 4 * 4)) "$INITRD"
(cd "$OV" && find . -mindepth 1 | LC_ALL=C sort | busybox cpio -o -H newc -R 0:0 2>/dev/null) >> "$INITRD"

MEMOBJ="memory-backend-memfd,id=mem,size=${MEM}M,share=on"
[ -n "$MEMPATH" ] && MEMOBJ="memory-backend-file,id=mem,size=${MEM}M,mem-path=$MEMPATH,share=on"
MACHINE=pc APPEND="console=ttyS0 quiet panic=-1 no_timer_check"
if [ "$IOMMU" = on ]; then
	# The vIOMMU must exist before the devices behind it; interrupt
	# remapping would need a split irqchip (KVM only).
	# QEMU (5.2 to 8.0) tells vhost of invalidations only as device-TLB
	# ones: ATS on the device (behind a PCIe port) and device-iotlb on
	# the IOMMU, or the backend keeps stale translations.
	MACHINE=q35
	APPEND="$APPEND intel_iommu=on"
	DEVOPTS=",bus=rp0,disable-legacy=on,iommu_platform=on,ats=on$DEVOPTS"
fi
# maxcpus >= 2, even for one vCPU: QEMU 7.2's TCG translates a guest whose
# maxcpus is 1 without its memory barriers and with its locked instructions
# as plain ones ("-d op": no mb op), since no other vCPU could tell.  A
# vhost-user back-end is another thread that can: the driver's "publish
# avail idx; mb; read avail_event" then reorders against ours and a kick
# (or, on the used side, an interrupt) is lost for good: the split-ring
# guest cases stalled now and then.  (Later QEMU emits the barriers in
# system mode whatever maxcpus is: "tcg: Always emit barriers in system
# mode".)
MAXCPUS=${VIRTQ_GUEST_MAXCPUS:-$((SMP > 2 ? SMP : 2))}
CONSOLE=file:$LOGDIR/console.log
[ $INTERACTIVE = 1 ] && CONSOLE=mon:stdio
Q=("$QEMU" -M "$MACHINE" -accel "$ACCEL" -cpu "$CPU" -smp "$SMP,maxcpus=$MAXCPUS" -m "${MEM}M"
	-object "$MEMOBJ" -numa node,memdev=mem
	-nodefaults -no-user-config -display none -no-reboot
	-serial "$CONSOLE" -serial "file:$LOGDIR/output.log"
	-kernel "$CACHE/vmlinuz" -initrd "$INITRD"
	-append "$APPEND")
[ "$IOMMU" = on ] && Q+=(-device intel-iommu,intremap=off,device-iotlb=on
	-device pcie-root-port,id=rp0,bus=pcie.0,chassis=1)
[ -n "$QMP" ] && Q+=(-qmp "tcp:127.0.0.1:$QMP,server=on,wait=off")
[ -n "$INCOMING" ] && Q+=(-incoming "$INCOMING" -S)
Q+=("${TRACE[@]}")
CHR="socket,id=chr0,path=$SOCK"
[ -n "$RECONNECT" ] && CHR="$CHR,reconnect=$RECONNECT"
case "$DEV" in
none) ;;
net)
	# QEMU 7.2 without KVM crashes at DRIVER_OK when a vhost-user
	# virtio-net device uses MSI-X (irqfd path): use INTx under TCG.
	VEC= MQ=
	[ "$ACCEL" = tcg ] && VEC=,vectors=0
	[ "$QUEUES" -gt 1 ] && MQ=,mq=on
	Q+=(-chardev "$CHR" -netdev vhost-user,id=net0,chardev=chr0,queues=$QUEUES
		-device "virtio-net-pci,id=nic0,netdev=net0,mac=52:54:00:12:34:56,packed=$PACKED,mrg_rxbuf=$MRG$MQ$VEC$DEVOPTS")
	;;
vsock)
	# No guest-cid property: the CID comes from the backend (GET_CONFIG).
	Q+=(-chardev "$CHR" -device "vhost-user-vsock-pci,id=vsock0,chardev=chr0,packed=$PACKED$DEVOPTS")
	;;
*) die "--dev must be none, net or vsock" ;;
esac
if [ "$DEV" != none ]; then
	[ -n "$SOCK" ] || die "--sock is required with --dev $DEV"
fi
printf '%q ' "${Q[@]}" > "$LOGDIR/cmdline"
echo >> "$LOGDIR/cmdline"
if [ $PRINT = 1 ]; then
	cat "$LOGDIR/cmdline"
	exit 0
fi

say "accel=$ACCEL_WHY dev=$DEV packed=$PACKED mrg=$MRG queues=$QUEUES smp=$SMP iommu=$IOMMU logs=$LOGDIR"
T0=$(date +%s.%N)
if [ $INTERACTIVE = 1 ]; then
	# the terminal is the console: no time bound, QEMU's own lines in its log
	"${Q[@]}" 2> "$LOGDIR/qemu.log"
else
	timeout -k 5 "$TIMEOUT" "${Q[@]}" > "$LOGDIR/qemu.log" 2>&1
fi
QRC=$?
WALL=$(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $T0 }")
grep -av '^VQ_' "$LOGDIR/output.log" 2>/dev/null
RC=$(sed -n 's/^VQ_RC=\([0-9]*\).*/\1/p' "$LOGDIR/output.log" 2>/dev/null | tail -1)
if [ -n "$RC" ]; then
	say "guest status $RC after ${WALL}s"
	exit "$RC"
fi
if [ $QRC = 124 ] || [ $QRC = 137 ]; then
	say "TIMEOUT after ${TIMEOUT}s; logs in $LOGDIR"
	tail -n 20 "$LOGDIR/console.log" >&2 2>/dev/null
	exit 124
fi
say "no status from the guest (qemu exit $QRC); logs in $LOGDIR"
tail -n 5 "$LOGDIR/qemu.log" >&2
tail -n 20 "$LOGDIR/console.log" >&2 2>/dev/null
exit 125
