#!/bin/sh
# SPDX-License-Identifier: MIT
# Model-check a ring layout's notification protocol with spin (issue 35):
# the model must verify with no error, and each mutation (a barrier or a
# re-check of docs/RULES.md removed) must fail with a trail.
# Usage: run-models.sh CC MODEL_DIR LAYOUT MODE
#   LAYOUT split|packed; MODE flags|event (VIRTIO_F_EVENT_IDX)
#   or LAYOUT log, MODE plain: the dirty log's V5
# Exit 0 pass, 1 fail, 77 skip (no spin; a failure with CI=true).
set -eu
cc=$1 dir=$2 layout=$3 mode=$4

case $layout in
split)  mutations="D1 D2 D3 D4 D4_RECHECK V1 V2 V3 V4 V4_RECHECK" ;;
packed) mutations="P1 P1_DEV P2 P3 P3_DEV P4_DRV P4_DRV_RECHECK P4_DEV P4_DEV_RECHECK V3" ;;
log)    mutations="V5 V5_MARK" ;;
*) echo "unknown layout $layout"; exit 1 ;;
esac
case $mode in
flags) defs= ;;
event) defs=-DEVENT_IDX ;;
plain) defs= ;;
*) echo "unknown mode $mode"; exit 1 ;;
esac
# The event index's arithmetic across the wrap, without which only
# EVENT_IDX decides wrongly: split's 16-bit comparison, packed's wrap
# counter in the event offset.
[ "$mode" = event ] && mutations="$mutations NOWRAP"
# The spec clauses each model checks, for the report.
case $layout.$mode in
split.flags)  clause="2.7.7 suppression flags" ;;
split.event)  clause="2.7.10 event index" ;;
packed.flags) clause="2.8.10 event suppression, flags" ;;
packed.event) clause="2.8.10 event suppression, event offsets" ;;
log.plain)    clause="vhost-user dirty log, RULES V5" ;;
esac

if ! command -v spin >/dev/null 2>&1; then
	if [ "${CI:-}" = true ]; then
		echo "FAIL (CI=true): spin not installed (scripts/deps.sh test)"
		exit 1
	fi
	echo "SKIP: spin not installed (scripts/deps.sh test)"
	exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$dir/tso.pml" "$dir/$layout.pml" "$tmp/"
cd "$tmp"

# check NAME DEFS...: generate, build and run pan; leaves pan.out.
# With search=cycles, pan looks for any cycle instead of stuck states
# (-DNP -l, no progress labels: the workload is finite, so every cycle
# is a livelock), assertions included: no cycle and no stuck state short
# of every buffer back means every added buffer is used, whatever the
# scheduling.  It costs several times the safety search: the flags
# models always, the event-index ones with VIRTQ_MODELS_CYCLES=1.
# -O0: most runs are short, and pan's build at -O2 would dominate them.
# Exhaustive: the whole state space is searched (safety properties:
# assertions and invalid end states), states stored compressed.
check() {
	name=$1
	shift
	rm -f pan pan.c "$layout.pml.trail"
	spin -a "$@" "$layout.pml" > spin.out 2>&1 || { cat spin.out; return 2; }
	if [ "$search" = cycles ]; then
		"$cc" -O0 -w -DNP -DCOLLAPSE -o pan pan.c || return 2
		./pan -l -m200000 > pan.out 2>&1 || true
	else
		"$cc" -O0 -w -DSAFETY -DCOLLAPSE -o pan pan.c || return 2
		./pan -m200000 > pan.out 2>&1 || true
	fi
	# A search cut short proves nothing.
	grep -q "max search depth too small" pan.out && return 2
	grep -q "errors: 0" pan.out && return 0
	return 1
}

fail=0
start=$(date +%s)
search=safety
what="no stuck state"
if [ "$mode" = flags ] || [ "${VIRTQ_MODELS_CYCLES:-}" = 1 ]; then
	search=cycles
	what="no stuck state, no cycle"
fi
if check model $defs; then
	echo "$layout $mode ($clause): verified ($what), $(grep -E 'states, stored' pan.out | awk '{print $1}') states, depth $(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' pan.out), $(sed -n 's/^pan: elapsed time \([0-9.]*\).*/\1/p' pan.out) s"
else
	echo "FAIL: $layout $mode: the unmutated model has an error"
	cat pan.out
	[ -f "$layout.pml.trail" ] && spin -t -p $defs "$layout.pml" | tail -40
	fail=1
fi

search=safety
for m in $mutations; do
	r=0
	check "$m" $defs "-DM_$m" || r=$?
	if [ $r -eq 1 ] && [ -f "$layout.pml.trail" ]; then
		# The trail's replay names the property that broke.
		why=$(grep -oE "assertion violated .*|invalid end state.*" pan.out | head -n 1)
		echo "$layout $mode: M_$m caught: $why"
	else
		echo "FAIL: $layout $mode: M_$m found no error (or did not build)"
		tail -20 pan.out 2>/dev/null || true
		fail=1
	fi
done
echo "$layout $mode: $(( $(date +%s) - start )) s in all"
exit $fail
