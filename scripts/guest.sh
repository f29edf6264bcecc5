#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A small Linux guest on a virtq-net or virtq-vsock socket, for trying a
# back-end by hand: a Debian cloud kernel and a busybox initramfs with the
# test tools (gnet, gvsock; ip, ping), built once into build-guest/ and
# reused.  KVM where it boots the guest, TCG otherwise.
#
#   scripts/guest.sh --dev net --sock /tmp/vnet.sock --interactive
#   scripts/guest.sh --dev net --sock /tmp/vnet.sock -- gnet echo eth0 -n 1000
#   scripts/guest.sh --help          (every option: tests/guest/run-guest.sh)
#
# Installs QEMU and what builds the image (scripts/deps.sh guest) first.
set -euo pipefail
cd "$(dirname "$0")/.."
# --help needs no QEMU (only our options count: not the guest command's)
for a in "$@"; do
	case $a in
	--) break ;;
	-h | --help) exec tests/guest/run-guest.sh --help ;;
	esac
done
scripts/deps.sh guest
exec tests/guest/run-guest.sh "$@"
