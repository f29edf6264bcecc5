#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The seed experiment: batching the RX used-ring updates of a vsock device
# (the vhost-vsock patch measured +4.5% (20/20) at 256 B and no material
# change at 4 KiB and 64 KiB).  Host -> guest transfers through virtq-vsock,
# A = --used-batch 1 (each used entry published on its own, the behaviour
# before the patch), B = --used-batch 0 (one publication per burst), paired
# runs with virtq-perf ab (alternating order), per sender buffer size.
# Then the 64 KiB Gbit/s against memcpy bandwidth on the same machine (the
# limit of a data path that copies: the device copies each byte once, from
# the host socket into guest memory, and the guest copies it out once more).
# Prints it (to OUT too when set).
#
# usage: bench/vsock-rx-batching.sh [BUILD_DIR]        (default: build)
# environment: PAIRS (20), BYTES (1G per run), SIZES (256,512,4K,64K),
#              EXTRA (more ab options), OUT (a copy of the output)
set -euo pipefail

cd "$(dirname "$0")/.."
build=${1:-build}
perf=$build/tools/virtq-perf
daemon=$build/tools/vsock/virtq-vsock
pairs=${PAIRS:-20}
bytes=${BYTES:-1G}
sizes=${SIZES:-256,512,4K,64K}
extra=${EXTRA:-}

for f in "$perf" "$daemon"; do
	if [ ! -x "$f" ]; then
		echo "vsock-rx-batching.sh: $f not found; build first:" >&2
		echo "  meson setup $build && ninja -C $build" >&2
		exit 1
	fi
done
tmp=$(mktemp -d /tmp/vsock-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
out=${OUT:-$tmp/out}

# memcpy bandwidth: 64 KiB copies streaming through 256 MiB (out of cache),
# and the same copies inside a 512 KiB working set (in cache).
cat > "$tmp/memcpy.c" <<'CEOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}
static double bw(size_t span, size_t chunk)
{
	char *s = malloc(span), *d = malloc(span);
	double t0, t;
	size_t off = 0, n = 0;

	memset(s, 1, span);
	memset(d, 2, span);
	t0 = now();
	do {
		for (int i = 0; i < 64; i++) {
			memcpy(d + off, s + off, chunk);
			off = (off + chunk) % span;
			n += chunk;
		}
		t = now();
	} while (t - t0 < 1.0);
	if (d[span / 2] != 1)
		abort();
	free(s);
	free(d);
	return n / (t - t0);
}
int main(void)
{
	double a = bw(256u << 20, 65536), b = bw(512u << 10, 65536);
	printf("memcpy 64 KiB chunks: %.2f GB/s = %.1f Gbit/s streaming (256 MiB), "
	       "%.2f GB/s = %.1f Gbit/s in cache (512 KiB)\n",
	       a / 1e9, a * 8 / 1e9, b / 1e9, b * 8 / 1e9);
	return 0;
}
CEOF
${CC:-cc} -O2 -o "$tmp/memcpy" "$tmp/memcpy.c"

model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
{
	echo "# virtq-vsock RX used batching (bench/vsock-rx-batching.sh)"
	echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "machine: $(nproc) CPUs, ${model:-unknown CPU}, Linux $(uname -r)"
	echo "commit:  $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
	echo "settings: $pairs pairs, $bytes per run, sender buffer sizes $sizes"
	echo "metric:  ops/s = bytes per second received by the guest (end to end)"
	echo
	echo "## memcpy bandwidth on this machine (one thread)"
	"$tmp/memcpy"
	echo
} > "$out"

echo "## A = --used-batch 1, B = --used-batch 0 (batched); host -> guest" >> "$out"
cmd="vsock --backend $daemon --direction rx --bytes $bytes --buf-size $sizes"
echo "\$ virtq-perf ab --pairs $pairs $extra --a \"--used-batch 1\" --b \"--used-batch 0\" -- $cmd" >> "$out"
# shellcheck disable=SC2086
"$perf" ab --pairs "$pairs" $extra --a "--used-batch 1" --b "--used-batch 0" -- $cmd >> "$out"
echo >> "$out"

# One more pair of runs at 64 KiB, for Gbit/s next to memcpy.
echo "## 64 KiB, one run each, in Gbit/s" >> "$out"
for ub in 1 0; do
	"$perf" vsock --backend "$daemon" --direction rx --bytes "$bytes" \
		--buf-size 64K --used-batch $ub 2>/dev/null | sed "s/^/used-batch $ub: /" >> "$out"
done
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at the end" >> "$out"
cat "$out"
