#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# guest-net-libvirt, guest-vsock-libvirt: the domain XML of
# docs/attach-vm.md, defined and started through a real libvirt
# (qemu:///system, which runs QEMU as its own user).
#
#   libvirt-test.sh [net]   the virtio-net domain on virtq-net in loopback
#                           mode; the guest's echo check must pass
#   libvirt-test.sh vsock   the same domain without its interface, with the
#                           vsock section's <qemu:commandline> device on
#                           virtq-vsock; guest streams to a host listener
#                           must arrive whole
#
# What it proves: the XML users copy boots, QEMU run by libvirt as
# libvirt-qemu reaches a socket made with --socket-mode/--socket-group, and
# the memoryBacking libvirt builds is one the backend can map.
#
# Needs root (libvirtd, the socket's group). Starts virtlogd and libvirtd
# itself when they are not running (no systemd on CI machines). With CI=true
# a missing peer fails instead of skipping.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${VIRTQ_BUILD_DIR:-$REPO/build}
VIRTQ_NET=$BUILD/tools/net/virtq-net
VIRTQ_VSOCK=$BUILD/tools/vsock/virtq-vsock
DEV=${1:-net}
case $DEV in net|vsock) ;; *) echo "usage: libvirt-test.sh [net|vsock]" >&2; exit 2;; esac
URI=qemu:///system
NAME=virtq-test-$$
QEMU_GROUP=libvirt-qemu
export VIRTQ_GUEST_CACHE=${VIRTQ_GUEST_CACHE:-$REPO/build-guest}

note() { echo "[$DEV-libvirt] $*"; }
cannot_run() {
	if [ "${CI:-}" = true ]; then
		note "FAIL (CI=true): $*"
		exit 1
	fi
	note "SKIP: $*"
	exit 77
}

[ "$(id -u)" = 0 ] || cannot_run "needs root (libvirtd, the socket's group)"
command -v virsh >/dev/null || cannot_run "virsh not installed (scripts/deps.sh test)"
[ -x /usr/sbin/libvirtd ] || cannot_run "libvirtd not installed (scripts/deps.sh test)"
getent group "$QEMU_GROUP" >/dev/null || cannot_run "no group $QEMU_GROUP (libvirt-daemon-system)"
"$HERE/build-guest.sh" >/dev/null || cannot_run "the guest image could not be built"

if ! virsh -c "$URI" uri >/dev/null 2>&1; then
	pgrep -x virtlogd >/dev/null || virtlogd -d
	pgrep -x libvirtd >/dev/null || libvirtd -d
	for _ in $(seq 100); do
		virsh -c "$URI" uri >/dev/null 2>&1 && break
		sleep 0.1
	done
	virsh -c "$URI" uri >/dev/null 2>&1 || cannot_run "libvirtd did not start"
fi

# Everything QEMU opens lives in a directory its user can traverse.
DIR=$(mktemp -d /tmp/virtq-libvirt.XXXXXX)
chmod 0755 "$DIR"
NET_PID= HOST_PID=
cleanup() {
	virsh -c "$URI" destroy "$NAME" >/dev/null 2>&1
	virsh -c "$URI" undefine "$NAME" >/dev/null 2>&1
	[ -n "$NET_PID" ] && kill "$NET_PID" 2>/dev/null && wait "$NET_PID" 2>/dev/null
	[ -n "$HOST_PID" ] && kill "$HOST_PID" 2>/dev/null && wait "$HOST_PID" 2>/dev/null
	if [ "${KEEP:-0}" = 1 ]; then note "logs kept in $DIR"; else rm -rf "$DIR"; fi
}
trap cleanup EXIT

# The guest: the test image with the check as its command, and its
# back-end with the socket in QEMU's group.
VSOCK_PORT=5001 VSOCK_STREAMS=2
if [ "$DEV" = net ]; then
	GUEST_CMD='gnet echo eth0 -n 2000 -s 0 && gnet echo eth0 -n 500 -s 1514'
else
	GUEST_CMD="gvsock send -c 2 -p $VSOCK_PORT -n 1M -j $VSOCK_STREAMS"
fi
"$HERE/run-guest.sh" --print-cmd --logdir "$DIR/boot" --dev "$DEV" --sock "$DIR/$DEV.sock" \
	-- "$GUEST_CMD" >/dev/null ||
	cannot_run "run-guest.sh could not prepare the initramfs"
cp "$VIRTQ_GUEST_CACHE/vmlinuz" "$DIR/vmlinuz"
cp "$DIR/boot/initrd" "$DIR/initrd"

if [ "$DEV" = net ]; then
	"$VIRTQ_NET" --socket-path "$DIR/net.sock" --socket-mode 0660 --socket-group "$QEMU_GROUP" \
		--mode loopback --json > "$DIR/net.log" 2>&1 &
else
	"$VIRTQ_VSOCK" --socket-path "$DIR/vsock.sock" --socket-mode 0660 --socket-group "$QEMU_GROUP" \
		--guest-cid 3 --uds-path "$DIR/vm3.vsock" > "$DIR/vsock.log" 2>&1 &
fi
NET_PID=$!
for _ in $(seq 100); do [ -S "$DIR/$DEV.sock" ] && break; sleep 0.1; done
[ -S "$DIR/$DEV.sock" ] || { note "FAIL: the back-end did not start"; cat "$DIR/$DEV.log"; exit 1; }
perm=$(stat -c '%a %G' "$DIR/$DEV.sock")
[ "$perm" = "660 $QEMU_GROUP" ] || { note "FAIL: socket is '$perm', want '660 $QEMU_GROUP'"; exit 1; }
if [ "$DEV" = vsock ]; then
	"$VIRTQ_GUEST_CACHE/host/gvsock" recv -u "$DIR/vm3.vsock_$VSOCK_PORT" -j $VSOCK_STREAMS \
		> "$DIR/host-recv.out" 2>&1 &
	HOST_PID=$!
fi

# The documented XML (the first ```xml block under "with libvirt"), with
# this run's paths and what TCG needs.
awk '/^## virtio-net with libvirt/ { s = 1 } s && /^```xml/ { x = 1; next }
     x && /^```/ { exit } x { print }' "$REPO/docs/attach-vm.md" > "$DIR/doc.xml"
grep -q "<interface type='vhostuser'>" "$DIR/doc.xml" ||
	{ note "FAIL: no domain XML found in docs/attach-vm.md"; exit 1; }
override=$(awk '/^## virtio-net with libvirt/ { s = 1 } s && /^```xml/ { n++; if (n == 2) { x = 1; next } }
	x && /^```/ { exit } x { print }' "$REPO/docs/attach-vm.md")
[ -n "$override" ] || { note "FAIL: no TCG override block in docs/attach-vm.md"; exit 1; }
ACCEL=$(cut -d' ' -f1 "$VIRTQ_GUEST_CACHE/accel" 2>/dev/null)
DOMTYPE=qemu
[ "$ACCEL" = kvm ] && DOMTYPE=kvm
vsock_args=
if [ "$DEV" = vsock ]; then
	vsock_args=$(awk '/^### virtio-vsock with libvirt/ { s = 1 } s && /^```xml/ { x = 1; next }
		x && /^```/ { exit } x && /<qemu:commandline>/ { c = 1 } x && c { print }
		x && /<\/qemu:commandline>/ { c = 0 }' "$REPO/docs/attach-vm.md")
	grep -q "vhost-user-vsock-pci" <<< "$vsock_args" ||
		{ note "FAIL: no vsock <qemu:commandline> in docs/attach-vm.md"; exit 1; }
fi
python3 - "$DIR" "$NAME" "$DOMTYPE" "$override" "$DEV" "$vsock_args" <<'PY'
import re, sys
d, name, domtype, override, dev, vsock_args = sys.argv[1:]
x = open(d + "/doc.xml").read()
subst = [
    ("<domain type='kvm'>",
     "<domain type='%s' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>" % domtype),
    ("<name>vm0</name>", "<name>%s</name>" % name),
    ("<memory unit='MiB'>1024</memory>", "<memory unit='MiB'>256</memory>"),
    ("memory='1024' unit='MiB'", "memory='256' unit='MiB'"),
    ("/var/lib/libvirt/boot/vmlinuz", d + "/vmlinuz"),
    ("/var/lib/libvirt/boot/initrd", d + "/initrd"),
    ("console=ttyS0 panic=-1", "console=ttyS0 quiet panic=-1 no_timer_check"),
    ("/var/log/libvirt/qemu/vm0-console.log", d + "/console.log"),
    ("    <memballoon model='none'/>\n",
     "    <serial type='file'>\n      <source path='%s/output.log'/>\n"
     "      <target port='1'/>\n    </serial>\n    <memballoon model='none'/>\n" % d),
]
if dev == "net":
    subst.append(("/run/virtq/net0.sock", d + "/net.sock"))
    subst.append(("</devices>\n", "</devices>\n" + override + "\n"))
else:
    # The same domain with the vsock device instead of the interface.
    x, n = re.subn(r"    <interface type='vhostuser'>.*?</interface>\n", "", x, flags=re.S)
    if n != 1:
        sys.exit("docs/attach-vm.md's XML lacks its <interface>")
    if "/run/vq-vsock.sock" not in vsock_args:
        sys.exit("docs/attach-vm.md's vsock XML lacks /run/vq-vsock.sock")
    subst.append(("</devices>\n", "</devices>\n" +
                  vsock_args.replace("/run/vq-vsock.sock", d + "/vsock.sock") + "\n"))
if domtype == "qemu":
    # TCG has no host CPU model to copy.
    subst.append(("<cpu mode='host-model'>", "<cpu mode='custom' match='exact'>\n    <model fallback='allow'>qemu64</model>"))
for old, new in subst:
    if old not in x:
        sys.exit("docs/attach-vm.md's XML lacks: " + old.strip())
    x = x.replace(old, new, 1)
open(d + "/domain.xml", "w").write(x)
PY
[ $? = 0 ] || { note "FAIL: the documented XML changed shape"; exit 1; }

virsh -c "$URI" define "$DIR/domain.xml" > "$DIR/virsh.log" 2>&1 &&
	virsh -c "$URI" start "$NAME" >> "$DIR/virsh.log" 2>&1 ||
	{ note "FAIL: libvirt refused the domain:"; cat "$DIR/virsh.log"; KEEP=1; exit 1; }
note "domain $NAME started ($DOMTYPE); QEMU runs as $(ps -o user= -p "$(pgrep -f "guest=$NAME" | head -1)" 2>/dev/null)"

rc=
for _ in $(seq 900); do
	rc=$(sed -n 's/^VQ_RC=\([0-9]*\).*/\1/p' "$DIR/output.log" 2>/dev/null | tail -1)
	[ -n "$rc" ] && break
	sleep 0.1
done
grep -aE '^(ECHO|SEND)' "$DIR/output.log" 2>/dev/null
fails=0
if [ "$rc" != 0 ]; then
	note "FAIL: guest status '${rc:-none}' (console, then libvirt's QEMU log):"
	tail -n 20 "$DIR/console.log" 2>/dev/null
	tail -n 10 "/var/log/libvirt/qemu/$NAME.log" 2>/dev/null
	fails=1
fi
if [ "$DEV" = net ]; then
	[ "$(grep -ac '^ECHO .*result=PASS' "$DIR/output.log" 2>/dev/null)" = 2 ] ||
		{ note "FAIL: the two echo checks did not both pass"; fails=1; }
else
	# The host listener ends when its streams did, each checked whole.
	for _ in $(seq 100); do kill -0 "$HOST_PID" 2>/dev/null || break; sleep 0.1; done
	kill "$HOST_PID" 2>/dev/null
	wait "$HOST_PID"
	hrc=$?
	HOST_PID=
	cat "$DIR/host-recv.out"
	[ "$(grep -ac '^SEND .*result=PASS' "$DIR/output.log" 2>/dev/null)" = $VSOCK_STREAMS ] &&
		[ $hrc = 0 ] &&
		[ "$(grep -c '^RECV .*result=PASS' "$DIR/host-recv.out")" = $VSOCK_STREAMS ] ||
		{ note "FAIL: $VSOCK_STREAMS streams guest to host (host rc $hrc)"; fails=1; }
fi
[ $fails = 0 ] || KEEP=1
[ $fails = 0 ] && note "PASS: $([ "$DEV" = net ] && echo "echo through virtq-net" ||
	echo "streams through virtq-vsock") from a libvirt domain"
exit $fails
