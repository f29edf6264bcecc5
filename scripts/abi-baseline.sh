#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Write the ABI of libvirtq.so as abidw sees it through the public headers:
# the stored baseline scripts/abi-check.sh compares every build against.
#
#   scripts/abi-baseline.sh                  regenerate abi/libvirtq-MAJOR.MINOR.abi
#                                            from build/ (gcc; configured and
#                                            built if needed)
#   scripts/abi-baseline.sh --out FILE DIR   the same ABI of DIR's library into FILE
#                                            (what abi-check.sh runs)
#
# Regenerating the stored file is a deliberate act, once per release (or
# once a wave's accepted ABI changes are merged): commit it with a body
# saying which changes it accepts.  Only public types count (the headers
# in include/virtq and the generated version.h); the library's private
# structures change freely.
set -euo pipefail
cd "$(dirname "$0")/.."

out= dir=build
if [ "${1:-}" = --out ]; then
	out=$2
	dir=${3:-build}
fi
command -v abidw >/dev/null || { echo "abi-baseline: abidw missing (scripts/deps.sh test installs abigail-tools)" >&2; exit 1; }
if [ ! -f "$dir/build.ninja" ]; then
	CC=gcc meson setup "$dir" -Dwerror=true >/dev/null
fi
# The library alone: the ABI is its, and a test that does not build yet
# should not hide it.
target=$(ninja -C "$dir" -t targets all | sed -n 's/^\(libvirtq\.so\.[0-9]*\.[0-9]*\.[0-9]*\): .*/\1/p' | head -n 1)
if ! ninja -C "$dir" ${target:-} > "$dir/abi-build.log" 2>&1; then
	tail -n 30 "$dir/abi-build.log" >&2
	echo "abi-baseline: the build in $dir failed" >&2
	exit 1
fi
lib=$(find "$dir" -maxdepth 1 -type f -name 'libvirtq.so.*.*.*' | head -n 1)
[ -n "$lib" ] || { echo "abi-baseline: no libvirtq.so.X.Y.Z in $dir" >&2; exit 1; }
if [ -z "$out" ]; then
	v=${lib##*libvirtq.so.}
	out=abi/libvirtq-${v%.*}.abi
fi
abidw --headers-dir include/virtq --headers-dir "$dir/include/virtq" \
	--drop-private-types --drop-undefined-syms \
	--no-corpus-path --no-comp-dir-path --short-locs \
	--out-file "$out" "$lib"
[ "$out" != "${2:-}" ] && echo "abi-baseline: wrote $out from $lib"
exit 0
