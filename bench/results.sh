#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The current results table, bench/RESULTS.md, measured again (the method:
# bench/METHOD.md).  Each cell is one command below: a virtq-perf ab run,
# or a bench script whose pairs go through virtq-perf ab --pairs-file; its
# rows get the commit and the date they were measured at.  The cells not
# named, and those that cannot run here (no dpdk-testpmd), keep their rows.
#
#   bench/results.sh [-B BUILD_DIR] [-o FILE] [--quick] [--list|--rewrite]
#                    [CELL...]
#
# -B      a release build of this tree (build-release); ninja brings it up
#         to date first
# -o      where the table goes (bench/RESULTS.md; with --quick, stdout)
# --quick 2 pairs of short runs per cell, for a smoke check of the cells and
#         of this script: figures to throw away; the race cells only when
#         named
# --list  the cells and their commands
# --rewrite  measure nothing: write the table again from its rows (after a
#         change to this script's titles or cells)
# CELL    only these (default: every cell); a whole section by its name
#         (ring, net, rr, race, migration, vsock)
#
# All of it takes about three hours on the 2-CPU machines (the race cells
# most of it): run it on a quiet machine, and commit RESULTS.md with the
# figures in the commit message.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build-release OUT='' QUICK=0 LIST=0 REWRITE=0
while [ $# -gt 0 ]; do
	case $1 in
	-B) BUILD=$2; shift ;;
	-o) OUT=$2; shift ;;
	--quick) QUICK=1 ;;
	--list) LIST=1 ;;
	--rewrite) REWRITE=1 ;;
	-h|--help) sed -n '2,26p' "$0"; exit 0 ;;
	-*) echo "results.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
	shift
done
TABLE=bench/RESULTS.md
[ -n "$OUT" ] || { ((QUICK)) && OUT=/dev/stdout || OUT=$TABLE; }
command -v python3 >/dev/null || { echo "results.sh: python3 reads ab's JSON" >&2; exit 1; }

# The full cell's value, or the quick one.
n() { ((QUICK)) && echo 2 || echo "$1"; }           # pairs
s() { ((QUICK)) && echo 0.2 || echo "$1"; }         # seconds per run
si() { ((QUICK)) && echo 1 || echo "$1"; }          # whole seconds (net-race.sh)
by() { ((QUICK)) && echo 64M || echo "$1"; }        # bytes per run
it() { ((QUICK)) && echo 200 || echo "$1"; }        # round trips

SECTIONS=(ring net rr race migration vsock)
declare -A TITLE=(
	[ring]="Rings: \`virtq-perf ring\`, a driver and a device thread on CPUs 0 and 1"
	[net]="virtio-net, our two ends: \`virtq-perf net\` on CPU 0, \`virtq-net\` on CPU 1, 64 B unless said"
	[rr]="Round trips: \`virtq-perf net --direction rr\` on CPU 0, \`virtq-net loopback\` on CPU 1, 64 B, both sides polling 50 us; each row the median over the runs of that layout and placement, the runs alternating layouts"
	[race]="virtio-net against DPDK 22.11: a = DPDK virtio-user -> DPDK vhost, b = \`virtq-perf net\` -> \`virtq-net\`, c = DPDK virtio-user -> \`virtq-net\`, d = \`virtq-perf net\` -> DPDK vhost; the paired cells at 64 B, X against a"
	[migration]="Live migration: \`virtq-perf net\` RX from \`virtq-net source\`, 64 B"
	[vsock]="vsock: \`virtq-perf vsock\` through \`virtq-vsock\`; B/A against the UNIX socket pair it feeds (\`--transport unix\`) where it says x"
)
IDS=()
declare -A SEC=() KIND=() WHAT=() CMD=()
# cell ID SECTION KIND WHAT COMMAND: KIND ab (a change), ratio (B/A),
# pairs (net-race.sh --paired, against a), race (net-race.sh's table),
# rr (latency percentiles: COMMAND run RR_RUNS times per layout, --packed
# off and on alternating, with --json) or ringtest (vs-ringtest.sh's pairs
# files, B/A)
cell() { IDS+=("$1"); SEC[$1]=$2 KIND[$1]=$3 WHAT[$1]=$4 CMD[$1]=$5; }

P=virtq-perf VNET=$BUILD/tools/net/virtq-net VSOCK=$BUILD/tools/vsock/virtq-vsock
for L in split packed; do
	w="ring --layout $L --size 0,1500 --cpu 0,1"
	ab="$P ab --pairs $(n 20) --seconds $(s 0.3)"
	cell ring-$L-batch-poll ring ab "$L: used batch 1 -> 32, busy poll 50 us" \
		"$ab --a '--used-batch 1' --b '--used-batch 32' -- $w --busy-poll 50"
	cell ring-$L-batch-sleep ring ab "$L: used batch 1 -> 32, sleeping when dry" \
		"$ab --a '--used-batch 1' --b '--used-batch 32' -- $w --busy-poll 0"
	cell ring-$L-inorder ring ab "$L: in-order off -> on, busy poll 50 us" \
		"$ab --a '--in-order off' --b '--in-order on' -- $w --busy-poll 50"
	cell ring-$L-busypoll ring ab "$L: busy poll 0 -> 50 us" \
		"$ab --a '--busy-poll 0' --b '--busy-poll 50' -- $w"
done

cell ring-vs-ringtest ring ringtest "the kernel's ringtest -> \`virtq-perf ring\`, both polling (bench/vs-ringtest.sh: the pairings; packed against \`ring\`, the bare flag ring)" \
	"ROUNDS=$(n 6) BUFFERS=$( ((QUICK)) && echo 1000000 || echo 10000000) bench/vs-ringtest.sh $BUILD"

sink="--backend '$VNET --quiet --cpu 1 --busy-poll 1000000 sink' --cpu 0 --direction tx"
ab="$P ab --pairs $(n 6) --seconds $(s 2)"
cell net-batch net ab "used batch 1 -> once per burst, TX into sink" \
	"$ab --a '--used-batch 1' --b '--used-batch 0' -- net $sink --size 64,1518 --packed off,on"
cell net-inorder net ab "in-order off -> on, TX into sink" \
	"$ab --a '--in-order off' --b '--in-order on' -- net $sink --size 64 --packed off,on"
cell net-busypoll net ab "busy poll 0 -> 50 us both sides, loopback round trips" \
	"$ab --a '--busy-poll 0 --backend-busy-poll 0' --b '--busy-poll 50 --backend-busy-poll 50' -- net --backend '$VNET --quiet --cpu 1 loopback' --cpu 0 --direction rr --packed off,on"
# The back-end's idle policy: A sleeps as soon as a queue runs dry, B as
# the cell says ('': the back-end's default); 64 B, virtq-net on CPU 1.
idle() { echo "--a '--backend-busy-poll 0' --b '$1' -- net --backend '$VNET --quiet --cpu 1 $2' --cpu 0"; }
cell net-sink-window net ab "TX into sink: its busy poll 0 -> 5 us (sleeping when dry against a short window; our side polls)" \
	"$P ab --pairs $(n 12) --seconds $(s 1) $(idle '--backend-busy-poll 5' sink) --direction tx --size 64 --packed off,on"
cell net-sink-adaptive net ab "TX into sink: sleeping when dry -> its default, the adaptive window (our side polls)" \
	"$P ab --pairs $(n 12) --seconds $(s 1) $(idle '' sink) --direction tx --size 64 --packed off,on"
cell net-rate-cpu net ab "the back-end's CPU per frame at a fixed offered load, TX into sink: sleeping when dry -> its default, the adaptive window (lower is better)" \
	"$P ab --pairs $(n 6) --seconds $(s 1) --metric cpu_backend_per_pkt_ns $(idle '' sink) --direction tx --size 64 --rate 20000,100000,1000000"
cell net-rr-adaptive net ab "round trips, both sides sleeping when dry -> the back-end's default, the adaptive window" \
	"$P ab --pairs $(n 12) --seconds $(s 1) $(idle '' loopback) --direction rr --busy-poll 0 --size 64 --packed off,on"

RR_RUNS=$(n 12)
cell net-rr rr rr "64 B, both sides polling 50 us ($RR_RUNS runs of $(s 2) s per layout)" \
	"$P net --backend '$VNET --quiet --cpu 1 loopback' --backend-busy-poll 50 --direction rr --busy-poll 50 --size 64 --cpu 0 --seconds $(s 2) --rr-clock tsc"

race="bench/net-race.sh -B $BUILD"
cell race-64 race race "the four pairings, 64 B: b/a, c/a, d/a (median of 3 unpaired runs, a screen: the race-X cells pair the low ones)" \
	"$race --sizes 64 -r $(n 3) -s $(si 3)"
cell race-1518 race race "the four pairings, 1518 B: b/a, c/a, d/a (median of 2 runs)" \
	"$race --sizes 1518 -r $(n 2) -s $(si 6)"
# pair X N SECONDS DIR LAYOUT INORDER
pair() { echo "$race --paired $1 -n $(n "$2") -s $(si "$3") --sizes 64 --dirs $4 --layouts $5 --inorder $6"; }
cell race-c-tx-packed race pairs "c against a: TX packed" "$(pair c 40 3 tx packed 0)"
cell race-d-tx-packed race pairs "d against a: TX packed" "$(pair d 20 3 tx packed 0)"
cell race-b-tx-packed race pairs "b against a: TX packed" "$(pair b 10 6 tx packed 0)"
cell race-c-tx-packed-inorder race pairs "c against a: TX packed in-order" "$(pair c 12 6 tx packed 1)"
cell race-c-rx-split race pairs "c against a: RX split" "$(pair c 8 3 rx split 0)"
cell race-d-rx-split race pairs "d against a: RX split" "$(pair d 6 6 rx split 0)"
cell race-c-rx-packed race pairs "c against a: RX packed" "$(pair c 30 3 rx packed 0)"
cell race-b-rx-split race pairs "b against a: RX split" "$(pair b 10 3 rx split 0)"
cell race-c-tx-split-inorder race pairs "c against a: TX split in-order" "$(pair c 10 3 tx split 1)"
cell race-d-tx-split-inorder race pairs "d against a: TX split in-order" "$(pair d 10 3 tx split 1)"
cell race-d-rx-packed race pairs "d against a: RX packed" "$(pair d 10 3 rx packed 0)"
cell race-d-rx-packed-inorder race pairs "d against a: RX packed in-order" "$(pair d 10 3 rx packed 1)"

cell migration-dirty-log migration ab "dirty logging off -> on (what logging costs)" \
	"$P ab --pairs $(n 12) --seconds $(s 2) --a '' --b '--dirty-log' -- net --backend '$VNET --quiet --cpu 1 source --size 64' --cpu 0 --direction rx --packed on,off"

b="--backend $VSOCK"
ab="$P ab --ratio --pairs $(n 20) --a '--transport unix' --b"
pp="--latency --buf-size 64 --iters $(it 20000)"
cell vsock-socket vsock ratio "socket -> vsock, throughput" \
	"$ab '$b' -- vsock --bytes $(by 256M) --buf-size 4K,64K --direction rx,tx --placement on"
cell vsock-socket-cpu vsock ratio "socket -> vsock, CPU time per KiB moved, all parties together (lower is better)" \
	"$ab '$b' --metric cpu_per_kib_ns -- vsock --bytes $(by 256M) --buf-size 64K --direction rx,tx --placement on"
cell vsock-socket-pinned vsock ratio "socket -> vsock, 64 KiB, both pinned: the guest's thread on CPU 0 with the backend's worker (--cpu 0), the host program on CPU 1" \
	"$ab \"$b --backend-arg=--cpu=0\" -- vsock --bytes $(by 256M) --buf-size 64K --direction rx,tx --cpu 0,1 --placement on"
cell vsock-buf-alloc vsock ab "guest -> host, 64 KiB: the backend's window --buf-alloc 256K -> 1M" \
	"$P ab --pairs $(n 20) --a '' --b '--backend-arg=--buf-alloc=1M' -- vsock $b --bytes $(by 1G) --buf-size 64K --direction tx --placement on"
cell vsock-cpus vsock ratio "floating -> the guest's thread and the backend on CPU 0, the host program on CPU 1" \
	"$P ab --ratio --pairs $(n 12) --a '$b' --b \"--cpu 0,1 --backend 'taskset -c 0 $VSOCK'\" -- vsock --bytes $(by 128M) --buf-size 64K --direction rx,tx --placement on"
cell vsock-socket-pingpong vsock ratio "socket -> vsock, 64 B ping-pong p50 (lower is better), both sides polling 50 us" \
	"$P ab --ratio --pairs $(n 20) --metric p50_us --a '--transport unix' --b '$b --backend-busy-poll 50' -- vsock $pp --busy-poll 50 --placement on"
cell vsock-socket-pingpong-cpus vsock ratio "the same, our two threads on CPU 0, the backend on CPU 1" \
	"$P ab --ratio --pairs $(n 20) --metric p50_us --a '--transport unix' --b \"--backend 'taskset -c 1 $VSOCK' --backend-busy-poll 50\" -- vsock $pp --busy-poll 50 --cpu 0,0"
cell vsock-conns vsock ratio "1 -> 256 connections, aggregate rate" \
	"$P ab --ratio --pairs $(n 20) --a '--conns 1' --b '--conns 256' -- vsock $b --bytes $(by 1G) --direction rx,tx --placement on"
cell vsock-fairness vsock ratio "socket -> vsock, 256 connections: the slowest over the fair share" \
	"$P ab --ratio --pairs $(n 20) --metric fairness --a '--transport unix' --b '$b' -- vsock --conns 256 --bytes $(by 1G) --direction rx,tx --placement on"
cell vsock-stall vsock ratio "16 connections, none -> one receiver stalled: the others' rate" \
	"$P ab --ratio --pairs $(n 20) --metric window_gbps --a '--conns 16' --b '--conns 16 --stall 1' -- vsock $b --bytes $(by 1G) --direction rx,tx --placement on"
cell vsock-rx-batch vsock ab "host -> guest, used batch 1 -> once per burst, by write size" \
	"$P ab --pairs $(n 20) --a '--used-batch 1' --b '--used-batch 0' -- vsock $b --direction rx --bytes $(by 1G) --buf-size 256,512,4K,64K"
cell vsock-yield vsock ab "backend busy poll: hold the CPU -> yield after 10 us (--busy-poll-yield), 64 B ping-pong p50, quiet machine" \
	"$P ab --pairs $(n 10) --metric p50_us --a '' --b '--backend-arg=--busy-poll-yield=10' -- vsock $b --backend-busy-poll 50 $pp --busy-poll 50 --placement on"
cell vsock-sibling vsock ratio "host socket -> sibling guest (VM to VM, ring to ring), throughput" \
	"$P ab --ratio --pairs $(n 20) --a '--peer host' --b '--peer guest' -- vsock $b --bytes $(by 256M) --buf-size 4K,64K --direction rx,tx --placement on"

if ((LIST)); then
	for id in "${IDS[@]}"; do printf '%-28s %s\n' "$id" "${CMD[$id]}"; done
	exit 0
fi

# The cells to measure: the names given, a section standing for its cells.
declare -A WANT=()
for a in "$@"; do
	found=0
	for id in "${IDS[@]}"; do
		[ "$id" = "$a" ] || [ "${SEC[$id]}" = "$a" ] || continue
		WANT[$id]=1 found=1
	done
	((found)) || { echo "results.sh: no cell or section '$a' (see --list)" >&2; exit 2; }
done
if [ $# -eq 0 ] && ! ((REWRITE)); then
	for id in "${IDS[@]}"; do
		((QUICK)) && [ "${SEC[$id]}" = race ] && continue
		WANT[$id]=1
	done
fi

if ((${#WANT[@]})); then
	[ -x "$BUILD/tools/virtq-perf" ] || {
		echo "results.sh: build first: meson setup $BUILD --buildtype=release && ninja -C $BUILD" >&2
		exit 1
	}
	ninja -C "$BUILD" >/dev/null
fi
virtq-perf() { "$BUILD/tools/virtq-perf" "$@"; }
commit=$(git rev-parse --short HEAD)
# "+": the code measured is not the commit's; the table itself may differ
# (the rows of an earlier run, not committed yet)
[ -z "$(git status --porcelain --untracked-files=no -- . ":(exclude)$TABLE")" ] || commit+="+"
today=$(date -u +%F)
tmp=$(mktemp -d /tmp/virtq-results.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/rows" "$tmp/cmds"
for id in "${IDS[@]}"; do : >"$tmp/rows/$id"; : >"$tmp/cmds/$id"; done

# The rows and commands of the table as it is, by cell (kept unless
# measured; a quick run shows only its own).
if [ -f "$TABLE" ] && ! ((QUICK)); then
	for id in "${IDS[@]}"; do
		grep -F "| \`$id\` |" "$TABLE" >"$tmp/rows/$id" || true
		grep -F -- "- \`$id\`: " "$TABLE" >"$tmp/cmds/$id" || true
	done
fi

# rows KIND ID WHAT FILE: the table's rows from ab's JSON (race: the
# script's table) in FILE
rows() {
	python3 - "$@" "$commit" "$today" <<'PYEOF'
import json, sys
kind, cid, what, path, commit, date = sys.argv[1:7]
def pct(v):
    v *= 100
    return "%+.0f" % v if abs(v) >= 99.95 else "%+.1f" % v
def row(work, fig, won, place):
    print("| `%s` | %s | %s | %s | %s | %s | %s %s |" % (cid, what, work, fig, won, place, commit, date))
if kind == "rr":
    # one JSON a line, its layout first: medians per layout and placement
    import statistics
    runs = {}
    for line in open(path):
        layout, js = line.split(" ", 1)
        j = json.loads(js)
        runs.setdefault((layout, j["placement"]), []).append(j)
    if not runs:
        sys.exit("no rr run")
    for (layout, place), js in sorted(runs.items()):
        med = lambda k: statistics.median(j[k] for j in js if j[k] is not None)
        fig = "%.2f %.2f %.2f %.2f" % (med("p50_us"), med("p90_us"), med("p99_us"), med("p999_us"))
        c2c = [j["c2c_ns"] for j in js if j["c2c_ns"] is not None]
        line = "%.1f ns" % statistics.median(c2c) if c2c else "-"
        print("| `%s` | %s | packed=%s | %s | %s | %d %s | %s %s |" % (cid, what, layout, fig, line, len(js), place, commit, date))
    sys.exit(0)
if kind == "race":
    ratios, below, places = 0, [], {"near": 0, "far": 0, "mixed": 0}
    for line in open(path):
        f = line.split()
        if len(f) != 14 or f[5] != "|" or f[10] != "|" or f[0] == "dir":
            continue
        places[f[4]] = places.get(f[4], 0) + 1
        for name, r in zip(("b/a", "c/a", "d/a"), f[11:14]):
            if r == "-":
                continue
            ratios += 1
            if float(r) < 1.0:
                below.append("%s %s%s %s %s" % (f[0].upper(), f[2], " in-order" if f[3] == "1" else "", name, r))
    if not ratios:
        sys.exit("no race table in the output")
    fig = "%d of %d >= 1.0" % (ratios - len(below), ratios)
    if below:
        fig += " (below: %s)" % ", ".join(below)
    row("-", fig, "-", "%d/%d/%d rows" % (places["near"], places["far"], places["mixed"]))
    sys.exit(0)
r = json.load(open(path))
for w in r["results"]:
    if w["n"] == 0:
        continue
    lo, hi = w["ci95"]
    if kind == "ratio":
        fig = "%.3fx" % (1 + w["change"])
        fig += " [n/a]" if lo is None else " [%.3f, %.3f]" % (1 + lo, 1 + hi)
    else:
        fig = pct(w["change"]) + "%"
        fig += " [n/a]" if lo is None else " [%s, %s]" % (pct(lo), pct(hi))
    p = w["placement"]
    place = "-" if p["near"] + p["far"] + p["mixed"] == 0 else "%d/%d/%d" % (p["near"], p["far"], p["mixed"])
    won = "%d/%d%s" % (w["faster"], w["n"], " lower" if r["lower_is_better"] else "")
    row("-" if w["label"] in (cid, r["workload"] and r["workload"].split()[0]) else w["label"], fig, won, place)
PYEOF
}

# keep_unseen OLD NEW: rr's rows are by layout and placement; a run that
# drew no near pair (the vCPUs move under us) must not drop the near rows
# of an earlier one.  NEW gets OLD's rows of the pairs it has none of.
keep_unseen() {
	python3 - "$1" "$2" <<'PYEOF'
import sys
def key(row):
    f = [c.strip() for c in row.split("|")]
    return f[3], f[6].split()[-1]
old = [l for l in open(sys.argv[1]) if l.startswith("|")]
new = [l for l in open(sys.argv[2]) if l.startswith("|")]
seen = {key(l) for l in new}
rows = new + [l for l in old if key(l) not in seen]
open(sys.argv[2], "w").writelines(sorted(rows, key=key))
PYEOF
}

# measure ID: run the cell, its rows and command into tmp (0), or 1
measure() {
	local id=$1 cmd=${CMD[$1]} out=$tmp/$1
	case ${KIND[$id]} in
	ab|ratio) eval "${cmd/virtq-perf ab /virtq-perf ab --json --quiet }" >"$out.json" 2>"$out.err" ;;
	pairs) eval "$cmd --pairs-out $tmp/$id" >"$out.log" 2>&1 &&
	       virtq-perf ab --pairs-file "$tmp/$id" --metric pps --json >"$out.json" 2>"$out.err" ;;
	race) eval "$cmd" >"$out.json" 2>"$out.err" ;;
	rr) : >"$out.json"
	    for ((i = 0; i < RR_RUNS; i++)); do
		for l in off on; do
			js=$(eval "$cmd --packed $l --json" 2>>"$out.err") || break 2
			echo "$l $js" >>"$out.json"
		done
	    done ;;
	ringtest) eval "PAIRS_OUT=$tmp/$id $cmd" >"$out.log" 2>&1 &&
		  virtq-perf ab --ratio $(for f in "$tmp/$id"/*; do echo --pairs-file "$f"; done) \
			--json >"$out.json" 2>"$out.err" ;;
	esac || { cat "$out.err" "$out.log" 2>/dev/null | tail -n 3 >&2; return 1; }
	rows "${KIND[$id]/ringtest/ratio}" "$id" "${WHAT[$id]}" "$out.json" >"$tmp/rows/$id.new" || return 1
	[ "${KIND[$id]}" != rr ] || keep_unseen "$tmp/rows/$id" "$tmp/rows/$id.new"
	mv "$tmp/rows/$id.new" "$tmp/rows/$id"
	if [ "${KIND[$id]}" = rr ]; then
		echo "- \`$id\`: \`$cmd --packed off|on --json\`, $RR_RUNS runs each, alternating (bench/results.sh $id)" >"$tmp/cmds/$id"
	else
		echo "- \`$id\`: \`$cmd\` (bench/results.sh $id)" >"$tmp/cmds/$id"
	fi
}

failed=0
for id in "${IDS[@]}"; do
	[ -n "${WANT[$id]:-}" ] || continue
	if [ "${SEC[$id]}" = race ] && ! command -v dpdk-testpmd >/dev/null; then
		echo "results.sh: $id: no dpdk-testpmd (scripts/deps.sh bench): kept" >&2
		continue
	fi
	echo "results.sh: $id: ${CMD[$id]}" >&2
	measure "$id" || { echo "results.sh: $id failed: its rows kept" >&2; failed=1; }
done

{
	cat <<EOF
# virtq: current results

Written by \`bench/results.sh\`; how and why it measures so:
[METHOD.md](METHOD.md).  Every figure is from paired runs, A and B
alternating, on the project's 2-vCPU AMD EPYC machines, shared with other
work: the change of the geometric mean with its 95% Student t interval
(\`virtq-perf ab\`), or B/A where the figure ends in x; "B won" is the
pairs B was faster in (lower, for a time); near/far/mixed the pairs'
placements (- where not probed).  Each row gives the commit and the day it
was measured at; the commands that measure each cell are at the end, and
\`bench/results.sh CELL\` measures a cell again.
EOF
	for sec in "${SECTIONS[@]}"; do
		printf '\n## %s\n\n' "${TITLE[$sec]}"
		if [ "$sec" = rr ]; then
			echo "| cell | what | workload | p50 p90 p99 p99.9 us | cache line one-way | runs, placement | measured at |"
		else
			echo "| cell | A -> B | workload | change [95% CI] | B won | near/far/mixed | measured at |"
		fi
		echo "|---|---|---|---|---|---|---|"
		for id in "${IDS[@]}"; do
			[ "${SEC[$id]}" = "$sec" ] && cat "$tmp/rows/$id"
		done
	done
	printf '\n## The commands\n\n'
	echo "Each cell as measured (paths as on that machine; \`build-release\` is a"
	echo "release build of the commit).  Rows seeded from the result files that"
	echo "left the tree name their file: \`git show e38d42c:bench/results/FILE\`."
	echo
	for id in "${IDS[@]}"; do cat "$tmp/cmds/$id"; done
} >"$tmp/table"
if [ "$OUT" = /dev/stdout ]; then cat "$tmp/table"; else cp "$tmp/table" "$OUT"; fi
exit $failed
