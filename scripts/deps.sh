#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install what a build or test needs, from Debian's archive, only when it is
# missing.  Usage: scripts/deps.sh [build|guest|test|bench]
set -euo pipefail

# Debian 12 ships dpdk-testpmd (with the vhost and virtio-user PMDs it loads)
# in dpdk-dev, not in dpdk.
want=(meson ninja-build pkg-config gcc clang libclang-rt-14-dev)
case "${1:-build}" in
test)  want+=(gnuplot-nox qemu-system-x86 busybox-static dpkg libc6-dev dpdk dpdk-dev
	       libvirt-daemon-system libvirt-clients libvirt-daemon-driver-qemu
	       abigail-tools gcc-s390x-linux-gnu libc6-dev-s390x-cross qemu-user-static
	       groff-base xz-utils spin) ;;
# the test guest of scripts/guest.sh: QEMU, and what builds its image
guest) want+=(qemu-system-x86 busybox-static dpkg libc6-dev xz-utils) ;;
bench) want+=(gnuplot-nox dpdk dpdk-dev linux-perf) ;;
esac

missing=()
for p in "${want[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
# Update the package lists once per machine; if an install still fails (stale
# lists on a machine that was kept), update again and retry once.
if [ ! -f /var/lib/apt/lists/.virtq-updated ]; then
	$SUDO apt-get update -qq || true
	$SUDO touch /var/lib/apt/lists/.virtq-updated || true
fi
if ! $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
