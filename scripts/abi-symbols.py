#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The shared library exports exactly what the public headers declare.

Usage: abi-symbols.py [--headers SUBDIR] CC LIBRARY MAP INCLUDE_DIR...

(--headers: the headers of include/virtq/SUBDIR/, libvirtq-guest's "guest",
instead of include/virtq/'s own.)

Three lists must agree: the vq_* functions include/virtq/*.h declare (not
static inline ones: those compile into the caller), the names the version
script (src/libvirtq.map) lists, and the symbols `nm -D --defined-only`
finds in the library.  Any difference is printed name by name, saying
which list has it and which lacks it, so a merge that adds public
functions knows exactly what to add where.
"""
import glob
import os
import re
import subprocess
import sys


def declared(cc, include_dirs, sub):
    """vq_* functions declared by the public headers, without bodies."""
    headers = sorted({os.path.relpath(h, d)
                      for d in include_dirs
                      for h in glob.glob(os.path.join(d, "virtq", sub, "*.h"))})
    src = "".join(f"#include <{h}>\n" for h in headers)
    cmd = [cc, "-E", "-std=gnu11", "-D_GNU_SOURCE", "-x", "c", "-"]
    cmd += [f"-I{d}" for d in include_dirs]
    out = subprocess.run(cmd, input=src, capture_output=True, text=True,
                         check=True).stdout
    # Keep only the text that came from our headers (the line markers say
    # which file each line is from).
    ours, keep = [], False
    for line in out.splitlines():
        m = re.match(r'#\s*\d+\s+"([^"]*)"', line)
        if m:
            keep = f"/virtq/{sub + '/' if sub else ''}" in m.group(1) and \
                (sub or "/virtq/guest/" not in m.group(1))
            continue
        if keep:
            ours.append(line)
    text = " ".join(ours)
    # Split into top-level declarations; a chunk holding a brace is a
    # definition (a struct, an enum, a static inline function).
    names, depth, chunk = set(), 0, []
    for ch in text:
        chunk.append(ch)
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                chunk = []
        elif ch == ";" and depth == 0:
            decl = "".join(chunk).strip()
            chunk = []
            if "{" in decl or re.match(r"(typedef|static)\b", decl):
                continue
            m = re.search(r"\b(vq_\w+)\s*\(", decl)
            if m:
                names.add(m.group(1))
    return names, headers


def mapped(map_path):
    """Names the version script lists under global:."""
    text = re.sub(r"#.*", "", open(map_path).read())
    names = set()
    for node in re.finditer(r"global:(.*?)(?:local:|\})", text, re.S):
        names.update(n.strip() for n in node.group(1).split(";")
                     if n.strip())
    return names


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib],
                         capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        kind, name = parts[1], parts[2].split("@")[0]
        if kind == "A" and re.match(r"VIRTQ_(GUEST_)?\d", name):
            continue        # the version nodes themselves
        names.add(name)
    return names


def report(what, names):
    for n in sorted(names):
        print(f"  {n}: {what}")
    return len(names)


def main():
    args, sub = sys.argv[1:], ""
    if args[:1] == ["--headers"] and len(args) > 1:
        sub, args = args[1], args[2:]
    if len(args) < 4:
        print(__doc__)
        return 2
    cc, lib, map_path, include_dirs = args[0], args[1], args[2], args[3:]
    decl, headers = declared(cc, include_dirs, sub)
    listed = mapped(map_path)
    exp = exported(lib)
    bad = 0
    print(f"{len(decl)} functions declared in {len(headers)} headers, "
          f"{len(listed)} in {os.path.basename(map_path)}, "
          f"{len(exp)} exported by {os.path.basename(lib)}")
    if any("*" in n or "?" in n for n in listed):
        print(f"{map_path}: a wildcard in a global: list; name every "
              f"function")
        bad += 1
    bad += report(f"declared in the headers, missing from {map_path}",
                  decl - listed)
    bad += report(f"in {map_path}, declared by no public header",
                  listed - decl)
    bad += report("declared, not exported by the library (not defined, "
                  "or hidden)", decl - exp)
    bad += report("exported by the library, declared by no public "
                  "header", exp - decl)
    if bad:
        print(f"FAIL: {bad} difference(s)")
        return 1
    print("ok: the library exports exactly the public functions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
