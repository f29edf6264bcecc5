#!/bin/sh
# SPDX-License-Identifier: MIT
# Run a libFuzzer target briefly over its seed corpus.  New inputs go to a
# scratch corpus in the build directory, never into the source tree.
#   run_fuzz.sh <fuzzer> <seed-dir> <scratch-dir> [libFuzzer options...]
set -e
fuzzer=$1; seeds=$2; scratch=$3; shift 3
mkdir -p "$scratch"
# libFuzzer's default exit status for a finding is 77, which meson reads as
# "skipped": a crash must fail the test.
exec "$fuzzer" -error_exitcode=1 "$@" "$scratch" "$seeds"
