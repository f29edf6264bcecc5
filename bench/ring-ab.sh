#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The A/B tables of the ring benchmark: used batching, in-order and busy
# polling, for the split and the packed ring, as paired runs
# (virtq-perf ab).  Prints them with the date, the machine and the
# commands (to OUT too when set).
#
# usage: bench/ring-ab.sh [BUILD_DIR]        (default: build)
# environment: PAIRS (20), RUN_SECONDS (0.3 per member run), SIZES (0,1500),
#              CPUS (0,1), OUT (a copy of the output), EXTRA (more ab options,
#              e.g. --same-placement)
set -euo pipefail

cd "$(dirname "$0")/.."
build=${1:-build}
perf=$build/tools/virtq-perf
pairs=${PAIRS:-20}
secs=${RUN_SECONDS:-0.3}
sizes=${SIZES:-0,1500}
cpus=${CPUS:-0,1}
extra=${EXTRA:-}

if [ ! -x "$perf" ]; then
	echo "ring-ab.sh: $perf not found; build first:" >&2
	echo "  meson setup $build && ninja -C $build" >&2
	exit 1
fi
tmp=$(mktemp -d /tmp/ring-ab.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
out=${OUT:-$tmp/out}

model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
{
	echo "# virtq ring A/B tables (bench/ring-ab.sh)"
	echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "machine: $(nproc) CPUs, ${model:-unknown CPU}, Linux $(uname -r)"
	echo "commit:  $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
	echo "c2c:     $("$perf" c2c "$cpus" 2>&1)"
	echo "settings: $pairs pairs, $secs s per run, sizes $sizes, CPUs $cpus"
	echo
} > "$out"

# One table: title, A options, B options, workload.
table() {
	title=$1 a=$2 b=$3
	shift 3
	echo "## $title" >> "$out"
	echo "\$ virtq-perf ab --pairs $pairs --seconds $secs $extra --a \"$a\" --b \"$b\" -- $*" >> "$out"
	"$perf" ab --pairs "$pairs" --seconds "$secs" $extra --a "$a" --b "$b" -- "$@" >> "$out"
	echo >> "$out"
}

start=$(date +%s)
for layout in split packed; do
	w="ring --layout $layout --size $sizes --cpu $cpus"
	table "$layout: used batching (busy polling 50 us, so the ring dominates)" \
		"--used-batch 1" "--used-batch 32" $w --busy-poll 50
	table "$layout: used batching (sleeping on eventfds when dry)" \
		"--used-batch 1" "--used-batch 32" $w --busy-poll 0
	table "$layout: in-order (busy polling 50 us)" \
		"--in-order off" "--in-order on" $w --busy-poll 50
	table "$layout: busy polling (0 = sleep on eventfd when dry, vs a 50 us window)" \
		"--busy-poll 0" "--busy-poll 50" $w
done
echo "elapsed: $(( $(date +%s) - start )) s; load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out"

cat "$out"
