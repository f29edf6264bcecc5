#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build the test guest: a Debian cloud kernel, the virtio/vsock modules it
# needs, busybox-static and our guest programs, packed as kernel + initramfs.
#
#   tests/guest/build-guest.sh [CACHE_DIR]     (default: <repo>/build-guest,
#                                  or build-guest-K with VIRTQ_GUEST_KERNEL=K)
#
# Writes CACHE/vmlinuz, CACHE/initramfs.gz and CACHE/host/gvsock (the host
# build of the vsock tool).  The kernel .deb is downloaded once with
# apt-get download and unpacked with dpkg-deb; later runs only rebuild what
# changed.  Needs apt-get, dpkg-deb, busybox (static) and gcc with a static
# libc (libc6-dev): scripts/deps.sh test installs them.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${1:-${VIRTQ_GUEST_CACHE:-$HERE/../../build-guest${VIRTQ_GUEST_KERNEL:+-$VIRTQ_GUEST_KERNEL}}}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
say() { echo "[build-guest] $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# One builder at a time per cache (tests may start in parallel).
exec 9> "$CACHE/.lock"
flock 9

BUSYBOX=$(command -v busybox) || die "busybox not found (apt-get install busybox-static)"
case " $("$BUSYBOX" --list | tr '\n' ' ') " in
*" cpio "*) ;;
*) die "$BUSYBOX has no cpio applet" ;;
esac
if ldd "$BUSYBOX" >/dev/null 2>&1; then
	die "$BUSYBOX is dynamically linked (install busybox-static)"
fi

# ---- kernel package: whatever linux-image-cloud-amd64 points at today ----
# (VIRTQ_GUEST_KERNEL=6.12: what that series' linux-image-6.12-cloud-amd64
# points at, for a cache of its own)
META=linux-image-${VIRTQ_GUEST_KERNEL:+$VIRTQ_GUEST_KERNEL-}cloud-amd64
KPKG=${VIRTQ_GUEST_KERNEL_PKG:-}
if [ -z "$KPKG" ] && [ -f "$CACHE/kernel-pkg" ]; then
	KPKG=$(cat "$CACHE/kernel-pkg")
fi
resolve() {
	apt-cache depends "$META" 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/ { print $2; exit }'
}
if [ -z "$KPKG" ]; then
	KPKG=$(resolve)
	if [ -z "$KPKG" ]; then
		say "no apt lists; apt-get update"
		apt-get update -qq || true
		KPKG=$(resolve)
	fi
	[ -n "$KPKG" ] || die "cannot resolve $META"
	echo "$KPKG" > "$CACHE/kernel-pkg"
fi
KVER=${KPKG#linux-image-}
KDIR=$CACHE/kernel-$KVER
if [ ! -f "$KDIR/.done" ]; then
	rm -rf "$KDIR" "$CACHE"/dl
	mkdir -p "$CACHE/dl" "$KDIR"
	say "downloading $KPKG"
	(cd "$CACHE/dl" && apt-get download "$KPKG" >/dev/null 2>&1) ||
		die "apt-get download $KPKG failed"
	dpkg-deb -x "$CACHE"/dl/"$KPKG"_*.deb "$KDIR"
	rm -rf "$CACHE/dl"
	touch "$KDIR/.done"
fi
MODDIR=$KDIR/lib/modules/$KVER
[ -f "$KDIR/boot/vmlinuz-$KVER" ] || die "no kernel image in $KPKG"

# Nothing to do when no input changed since the last build.
STAMP=$( (echo "$KVER"; sha256sum "$0" "$HERE"/init.sh "$HERE"/gnet.c "$HERE"/gvsock.c "$BUSYBOX") |
	sha256sum | cut -c1-16)
if [ "$(cat "$CACHE/stamp" 2>/dev/null)" = "$STAMP" ] && [ -f "$CACHE/initramfs.gz" ] &&
	[ -f "$CACHE/vmlinuz" ] && [ -x "$CACHE/host/gvsock" ]; then
	echo "$CACHE"
	exit 0
fi

# ---- modules, dependencies first (from each .ko's modinfo depends=) ----
# 6.1's modules are plain .ko; later Debian kernels compress them (.ko.xz,
# which busybox insmod cannot read: they go in decompressed) and build
# some of ours in (modules.builtin: nothing to load).
declare -A KO=() DONE=()
while IFS= read -r f; do
	b=$(basename "$f")
	b=${b%.xz}
	b=${b%.zst}
	b=${b%.ko}
	KO[${b//-/_}]=$f
done < <(find "$MODDIR/kernel/drivers" "$MODDIR/kernel/net" \( -name '*.ko' -o -name '*.ko.xz' -o -name '*.ko.zst' \))
ko_cat() {      # FILE: the module, decompressed
	case $1 in
	*.xz) xz -dc "$1" ;;
	*.zst) zstd -dcq "$1" ;;
	*) cat "$1" ;;
	esac
}
builtin() {     # MODULE: built into the kernel
	[ -f "$MODDIR/modules.builtin" ] &&
		sed 's|.*/||; s|\.ko$||; s|-|_|g' "$MODDIR/modules.builtin" | grep -qx "$1"
}
ORDER=()
add_mod() {
	local m=${1//-/_} d
	[ -n "${DONE[$m]:-}" ] && return
	DONE[$m]=1
	if [ -z "${KO[$m]:-}" ]; then
		builtin "$m" && return
		die "module $m not in $KPKG"
	fi
	for d in $(ko_cat "${KO[$m]}" | tr '\0' '\n' | sed -n 's/^depends=//p' | head -1 | tr ',' ' '); do
		add_mod "$d"
	done
	ORDER+=("$m")
}
for m in virtio_pci virtio_net vmw_vsock_virtio_transport; do add_mod "$m"; done

# ---- the root filesystem ----
ROOT=$CACHE/root
rm -rf "$ROOT"
mkdir -p "$ROOT"/{bin,dev,proc,sys,tmp,lib/modules,vq}
cp "$BUSYBOX" "$ROOT/bin/busybox"
ln -s busybox "$ROOT/bin/sh"
install -m 0755 "$HERE/init.sh" "$ROOT/init"
: > "$ROOT/lib/modules/order"
for m in "${ORDER[@]}"; do
	ko_cat "${KO[$m]}" > "$ROOT/lib/modules/$m.ko"
	echo "$m" >> "$ROOT/lib/modules/order"
done
CFLAGS=(-O2 -Wall -Wextra -Werror)
for p in gnet gvsock; do
	gcc "${CFLAGS[@]}" -static -s -o "$ROOT/bin/$p" "$HERE/$p.c" ||
		die "cannot build $p static (apt-get install libc6-dev)"
done
mkdir -p "$CACHE/host"
gcc "${CFLAGS[@]}" -o "$CACHE/host/gvsock.new" "$HERE/gvsock.c"
mv "$CACHE/host/gvsock.new" "$CACHE/host/gvsock"

# Repack only when the content changed (cpio stores inode numbers and times).
SUM=$( (cd "$ROOT" && find . -printf '%p %m %y %l\n' | LC_ALL=C sort &&
	find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-16)
if [ "$(cat "$CACHE/initramfs.sum" 2>/dev/null)" != "$SUM $KVER" ] || [ ! -f "$CACHE/initramfs.gz" ]; then
	(cd "$ROOT" && find . -mindepth 1 | LC_ALL=C sort |
		busybox cpio -o -H newc -R 0:0 2>/dev/null | gzip -n -6) > "$CACHE/initramfs.gz.new"
	mv "$CACHE/initramfs.gz.new" "$CACHE/initramfs.gz"
	cp "$KDIR/boot/vmlinuz-$KVER" "$CACHE/vmlinuz"
	echo "$SUM $KVER" > "$CACHE/initramfs.sum"
	say "guest built: kernel $KVER, modules: ${ORDER[*]}"
fi
echo "$STAMP" > "$CACHE/stamp"
echo "$CACHE"
