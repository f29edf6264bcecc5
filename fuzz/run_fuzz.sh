#!/bin/sh
# SPDX-License-Identifier: MIT
# Run a libFuzzer target briefly over its seed corpus.  New inputs go to a
# scratch corpus in the build directory, never into the source tree.
#   run_fuzz.sh <fuzzer> <seed-dir> <scratch-dir> [libFuzzer options...]
set -e
fuzzer=$1; seeds=$2; scratch=$3; shift 3
mkdir -p "$scratch"
exec "$fuzzer" "$@" "$scratch" "$seeds"
