#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Does the library built in DIR (default build/, gcc) still run every
# program built against a released ABI?  Compares it with each stored
# baseline abi/libvirtq-*.abi (scripts/abi-baseline.sh) using abidiff and
# fails on any change that is not growth the ABI rule allows
# (docs/DESIGN.md, "ABI"):
#
#   - a function or variable added;
#   - a struct with reserved words: fields taken from its reserve, its
#     size and every other field's offset and type unchanged;
#   - a struct listed in abi/appendable.txt (the library fills it and
#     hands it out through a const pointer or a size): fields appended
#     past its old end;
#   - an enum: enumerators added, and a *_MAX / *_SLOTS count moving.
#
# Anything else (a field removed, moved or retyped, a struct grown that
# callers allocate, a function removed or its signature changed) fails
# with abidiff's report of it.
#
# Usage: scripts/abi-check.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}

command -v abidiff >/dev/null || { echo "abi-check: abidiff missing (scripts/deps.sh test installs abigail-tools)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
scripts/abi-baseline.sh --out "$tmp/now.abi" "$dir"

fail=0
for base in abi/libvirtq-*.abi; do
	rc=0
	# --harmless: a field retyped within its old padding is "harmless"
	# to abidiff, not to a caller whose padding bytes are garbage.
	abidiff --harmless --leaf-changes-only "$base" "$tmp/now.abi" \
		> "$tmp/report" 2>&1 || rc=$?
	# Bits 1 and 2: abidiff itself failed; 8: an incompatible change.
	if [ $((rc & 11)) -ne 0 ]; then
		cat "$tmp/report"
		echo "abi-check: $base: abidiff exit $rc (incompatible change or error)"
		fail=1
		continue
	fi
	if ! python3 - "$base" "$tmp/report" abi/appendable.txt <<'PY'; then
import re
import sys
import xml.etree.ElementTree as ET

base, report_path, appendable_path = sys.argv[1:4]
appendable = {l.split("#")[0].strip() for l in open(appendable_path)} - {""}
# Offset (bits) of each struct's reserved words, and each struct's size,
# in the baseline.
reserved_at, size_of = {}, {}
for c in ET.parse(base).iter("class-decl"):
    name = c.get("name")
    if c.get("size-in-bits"):
        size_of[name] = int(c.get("size-in-bits"))
    for dm in c.findall("data-member"):
        v = dm.find("var-decl")
        if v is not None and v.get("name") == "reserved":
            reserved_at[name] = int(dm.get("layout-offset-in-bits"))

text = open(report_path).read()
# Leaf report: summary lines, then blocks that start at column 0.
blocks = re.split(r"\n(?=\S)", text)
bad = []


def struct_ok(name, body):
    lines = [l.strip() for l in body.splitlines()[1:] if l.strip()]
    grew = re.search(r"^  type size changed from (\d+) to (\d+)", body, re.M)
    inserted = [int(o) for o in re.findall(r"at offset (\d+) \(in bits\)", body)]
    changed = [l for l in lines if not re.match(
        r"(type size|\d+ data member insertions?:|'.*', at offset \d+ \(in bits\))", l)]
    if name in reserved_at:
        if grew:
            return "a struct callers fill changed size"
        at = reserved_at[name]
        if any(o < at for o in inserted):
            return "a field inserted before the reserved words"
        # Only the reserve may change: its array length and its offset.
        for l in changed:
            if l.startswith("there are data member changes") or \
               re.match(r"type '.*' of '.*::reserved' changed:", l) or \
               re.match(r"(type name changed|array type size changed|"
                        r"array type subrange \d+ changed length|"
                        r"and offset changed)", l):
                continue
            return "changed beyond its reserved words: " + l
        return None
    if name in appendable:
        if changed:
            return "changed beyond appended fields: " + changed[0]
        old = size_of.get(name, 0)
        if not grew or any(o < old for o in inserted):
            return "a field inserted before the old end"
        return None
    return "a struct that may not change (not in abi/appendable.txt, no reserved words)"


def enum_ok(body):
    for l in (l.strip() for l in body.splitlines()[1:] if l.strip()):
        if re.match(r"(type size hasn't changed|\d+ enumerator (insertion|change)s?:|"
                     r"'[\w:]+' value '-?\d+'.*)$", l):
            continue
        m = re.match(r"'(?:\w+::)?(\w+)' from value '-?\d+' to '-?\d+'", l)
        if m and re.search(r"_(MAX|SLOTS)$", m.group(1)):
            continue
        return "enum changed beyond additions: " + l
    return None


for b in blocks:
    head = b.splitlines()[0] if b.strip() else ""
    m = re.match(r"'(struct|union) (\w+) at [^']*' changed:", head)
    e = re.match(r"'enum (\w+) at [^']*' changed:", head)
    if m:
        why = struct_ok(m.group(2), b)
    elif e:
        why = enum_ok(b)
    elif re.match(r"\d+ (Removed|Changed) (function|variable)", head) or \
         re.match(r"'(function|method) .*' (changed|has some)", head):
        why = "functions removed or changed"
    elif re.match(r"\d+ Added (function|variable)", head) or \
         re.match(r"(Leaf changes summary|Changed leaf types summary|"
                  r"Removed/Changed/Added)", head) or not head:
        why = None
    else:
        why = "a change abi-check does not know: " + head
    if why:
        bad.append((head, why, b))

for head, why, b in bad:
    print(b.rstrip())
    print(f"  => not allowed: {why}\n")
sys.exit(1 if bad else 0)
PY
		echo "abi-check: $base: FAIL (docs/DESIGN.md, \"ABI\"; a deliberate break needs a new major version)"
		fail=1
	elif [ "$rc" -ne 0 ]; then
		grep -E "^[0-9]+ Added|summary" "$tmp/report" | sed 's/^/  /'
		echo "abi-check: $base: ok (growth the rule allows)"
	else
		echo "abi-check: $base: ok (unchanged)"
	fi
done
exit $fail
