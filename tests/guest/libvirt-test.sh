#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# guest-net-libvirt: the domain XML of docs/attach-vm.md, defined and started
# through a real libvirt (qemu:///system, which runs QEMU as its own user),
# on virtq-net in loopback mode; the guest's echo check must pass.
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
URI=qemu:///system
NAME=virtq-test-$$
QEMU_GROUP=libvirt-qemu
export VIRTQ_GUEST_CACHE=${VIRTQ_GUEST_CACHE:-$REPO/build-guest}

note() { echo "[net-libvirt] $*"; }
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
NET_PID=
cleanup() {
	virsh -c "$URI" destroy "$NAME" >/dev/null 2>&1
	virsh -c "$URI" undefine "$NAME" >/dev/null 2>&1
	[ -n "$NET_PID" ] && kill "$NET_PID" 2>/dev/null && wait "$NET_PID" 2>/dev/null
	if [ "${KEEP:-0}" = 1 ]; then note "logs kept in $DIR"; else rm -rf "$DIR"; fi
}
trap cleanup EXIT

# The guest: the test image with the echo check as its command.
"$HERE/run-guest.sh" --print-cmd --logdir "$DIR/boot" --dev net --sock "$DIR/net.sock" \
	-- 'gnet echo eth0 -n 2000 -s 0 && gnet echo eth0 -n 500 -s 1514' >/dev/null ||
	cannot_run "run-guest.sh could not prepare the initramfs"
cp "$VIRTQ_GUEST_CACHE/vmlinuz" "$DIR/vmlinuz"
cp "$DIR/boot/initrd" "$DIR/initrd"

"$VIRTQ_NET" --socket-path "$DIR/net.sock" --socket-mode 0660 --socket-group "$QEMU_GROUP" \
	--mode loopback --json > "$DIR/net.log" 2>&1 &
NET_PID=$!
for _ in $(seq 100); do [ -S "$DIR/net.sock" ] && break; sleep 0.1; done
[ -S "$DIR/net.sock" ] || { note "FAIL: virtq-net did not start"; cat "$DIR/net.log"; exit 1; }
perm=$(stat -c '%a %G' "$DIR/net.sock")
[ "$perm" = "660 $QEMU_GROUP" ] || { note "FAIL: socket is '$perm', want '660 $QEMU_GROUP'"; exit 1; }

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
python3 - "$DIR" "$NAME" "$DOMTYPE" "$override" <<'PY'
import sys
d, name, domtype, override = sys.argv[1:]
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
    ("/run/virtq/net0.sock", d + "/net.sock"),
    ("/var/log/libvirt/qemu/vm0-console.log", d + "/console.log"),
    ("    <memballoon model='none'/>\n",
     "    <serial type='file'>\n      <source path='%s/output.log'/>\n"
     "      <target port='1'/>\n    </serial>\n    <memballoon model='none'/>\n" % d),
    ("</devices>\n", "</devices>\n" + override + "\n"),
]
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
grep -a '^ECHO' "$DIR/output.log" 2>/dev/null
fails=0
if [ "$rc" != 0 ]; then
	note "FAIL: guest status '${rc:-none}' (console, then libvirt's QEMU log):"
	tail -n 20 "$DIR/console.log" 2>/dev/null
	tail -n 10 "/var/log/libvirt/qemu/$NAME.log" 2>/dev/null
	fails=1
fi
[ "$(grep -ac '^ECHO .*result=PASS' "$DIR/output.log" 2>/dev/null)" = 2 ] ||
	{ note "FAIL: the two echo checks did not both pass"; fails=1; }
[ $fails = 0 ] || KEEP=1
[ $fails = 0 ] && note "PASS: echo through virtq-net from a libvirt domain"
exit $fails
