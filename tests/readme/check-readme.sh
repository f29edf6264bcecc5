#!/bin/sh
# SPDX-License-Identifier: MIT
# The README's code runs as written: its C block compiles with -Werror
# against the library and runs; every flag its shell lines give virtq-net,
# virtq-vsock or virtq-perf is one the tool's --help names; the scripts it
# names exist; every figure of its Results is a row of bench/RESULTS.md.
# And it stays a page a newcomer reads: at most 175 lines, the first QEMU
# line within 60.
# Usage: check-readme.sh README CC LIBVIRTQ_A INCLUDE_DIR BUILD_DIR
# (EXAMPLE_CFLAGS: more flags for the example, e.g. the build's -fsanitize)
set -eu
readme=$1 cc=$2 lib=$3 inc=$4 build=$5
root=$(dirname "$readme")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

lines=$(wc -l < "$readme")
[ "$lines" -le 175 ] || bad "README has $lines lines (at most 175)"
qemu=$(grep -n 'qemu-system-' "$readme" | head -n 1 | cut -d: -f1)
[ -n "$qemu" ] && [ "$qemu" -le 60 ] || bad "the first QEMU line is at line ${qemu:-none} (want <= 60)"

# The C example.
awk '/^```c$/ { x = 1; next } /^```/ { x = 0 } x' "$readme" > "$tmp/example.c"
if [ ! -s "$tmp/example.c" ]; then
	bad "no \`\`\`c block"
elif ! "$cc" -std=gnu11 -Wall -Wextra -Werror ${EXAMPLE_CFLAGS:-} -I"$inc" \
		"$tmp/example.c" "$lib" -lpthread -lm -o "$tmp/example"; then
	bad "the C example does not compile"
elif ! "$tmp/example"; then
	bad "the C example exits non-zero"
else
	echo "C example: compiles and runs"
fi

# Shell lines: indented blocks, continuation lines joined.
awk '/^    / { sub(/^    /, ""); print }' "$readme" |
	sed -e ':a' -e '/\\$/N; s/\\\n//; ta' > "$tmp/shell"
tool_path() {
	case "$1" in
	*virtq-net) echo "$build/tools/net/virtq-net" ;;
	*virtq-vsock) echo "$build/tools/vsock/virtq-vsock" ;;
	*virtq-perf) echo "$build/tools/virtq-perf" ;;
	esac
}
checked=0
while IFS= read -r line; do
	set -f
	# shellcheck disable=SC2086
	set -- ${line%%#*}
	set +f
	while [ $# -gt 0 ]; do
		case "$1" in
		*virtq-net|*virtq-vsock|*virtq-perf) break ;;
		scripts/*|./scripts/*)
			[ -x "$root/${1#./}" ] || bad "README names $1, which is not an executable script"
			;;
		esac
		shift
	done
	[ $# -gt 0 ] || continue
	bin=$(tool_path "$1")
	shift
	sub=
	case "$bin" in *virtq-perf) sub=$1; shift ;; esac
	help=$("$bin" $sub --help 2>&1) || { bad "'$bin $sub --help' fails"; continue; }
	for w in "$@"; do
		case "$w" in
		--*) flag=${w%%=*}
		     printf '%s\n' "$help" | grep -qE -- "$flag([^a-z0-9-]|\$)" ||
			bad "README: '$flag' is not an option of $(basename "$bin") $sub"
		     checked=$((checked + 1)) ;;
		esac
	done
done < "$tmp/shell"
echo "shell lines: $checked flags checked against the tools' --help"

# Every figure of the Results section is a row of bench/RESULTS.md, whose
# commit the section names too (issue 32: one table, the README a summary).
sed -n '/^## Results/,/^## /p' "$readme" > "$tmp/results"
grep -oE '[+-][0-9.]+% \[[^]]*\]|[0-9.]+x \[[^]]*\]' "$tmp/results" > "$tmp/figures" || true
[ -s "$tmp/figures" ] || bad "no figure in the README's Results section"
figures=0
while IFS= read -r f; do
	row=$(grep -F "| $f |" "$root/bench/RESULTS.md" | head -n 1)
	commit=$(printf '%s\n' "$row" | awk -F'|' '{ print $(NF - 1) }' | awk '{ print $1 }')
	if [ -z "$row" ]; then
		bad "README: '$f' is no figure of bench/RESULTS.md"
	elif ! grep -qw "$commit" "$tmp/results"; then
		bad "README: '$f' is RESULTS.md's at $commit, which the Results section does not name"
	fi
	figures=$((figures + 1))
done < "$tmp/figures"
echo "results: $figures figures, each a row of bench/RESULTS.md"
exit $fail
