#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The library's layers include only downwards.

Usage: layers.py check SOURCE_ROOT [STAMP]
       layers.py selftest

Each layer (docs/DESIGN.md, "Layers") owns a folder of src/ and some
public headers; a file may include its own layer's headers and those of
layers below it, never one above it or beside it (net and vsock are
peers).  The build compiles each layer with only its own and lower
layers' internal folders on the include path, so an upward internal
include does not compile; this script also covers the public headers,
which share include/virtq/, and runs as part of the build (STAMP is
written when the check passes).  selftest plants an upward include in a
copy of a small tree and expects the check to fail.
"""
import os
import re
import shutil
import sys
import tempfile

# Lowest first; layers of one rank may not include each other.
RANK = {"util": 0, "mem": 1, "ring": 2, "runtime": 3, "vhost_user": 4,
        "framework": 5, "net": 6, "vsock": 6, "guest": 7}
PUBLIC = {
    "spec.h": "util", "log.h": "util", "version.h": "util", "unix.h": "util",
    "mem.h": "mem", "ring.h": "ring", "runtime.h": "runtime",
    "vhost_user.h": "vhost_user", "vhost_user_backend.h": "vhost_user",
    "framework.h": "framework", "net.h": "net", "vsock.h": "vsock",
}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def public_layer(name):
    """The layer of <virtq/NAME>, or None for another library's header."""
    if not name.startswith("virtq/"):
        return None
    rest = name[len("virtq/"):]
    if rest.startswith("guest/"):
        return "guest"
    if rest not in PUBLIC:
        raise KeyError(f"<{name}> is in no layer (scripts/layers.py PUBLIC)")
    return PUBLIC[rest]


def internal_layer(root, here, name):
    """The layer of "NAME" included from the file at here, or None."""
    if os.path.exists(os.path.join(os.path.dirname(here), name)):
        return file_layer(root, os.path.join(os.path.dirname(here), name))
    owners = [l for l in RANK
              if os.path.exists(os.path.join(root, "src", l, name))]
    return owners[0] if len(owners) == 1 else None


def file_layer(root, path):
    rel = os.path.relpath(path, root).split(os.sep)
    if rel[0] == "src" and len(rel) > 2 and rel[1] in RANK:
        return rel[1]
    if rel[:2] == ["include", "virtq"]:
        return public_layer("/".join(rel[1:]))
    return None


def check(root):
    bad = []
    files = []
    for top in ("src", "include/virtq"):
        for d, _, names in os.walk(os.path.join(root, top)):
            files += [os.path.join(d, n) for n in names
                      if n.endswith((".c", ".h", ".h.in"))]
    for path in sorted(files):
        mine = file_layer(root, path if not path.endswith(".in")
                          else path[:-3])
        if mine is None:
            continue
        text = open(path, errors="replace").read()
        for m in INCLUDE.finditer(text):
            kind, name = m.group(1), m.group(2)
            try:
                theirs = (public_layer(name) if kind == "<"
                          else internal_layer(root, path, name))
            except KeyError as e:
                bad.append(f"{os.path.relpath(path, root)}: {e}")
                continue
            if theirs is None or theirs == mine:
                continue
            if RANK[theirs] >= RANK[mine]:
                line = text.count("\n", 0, m.start()) + 1
                where = "beside" if RANK[theirs] == RANK[mine] else "above"
                bad.append(f"{os.path.relpath(path, root)}:{line}: includes "
                           f"{kind}{name}{'>' if kind == '<' else kind} of "
                           f"layer {theirs}, {where} {mine}")
    return bad


def selftest():
    tmp = tempfile.mkdtemp()
    try:
        for l in ("ring", "vhost_user"):
            os.makedirs(os.path.join(tmp, "src", l))
        os.makedirs(os.path.join(tmp, "include", "virtq"))
        open(os.path.join(tmp, "src", "vhost_user", "backend_lib.h"), "w").close()
        open(os.path.join(tmp, "src", "ring", "ok.c"), "w").write(
            '#include <virtq/mem.h>\n#include "ring_lib.h"\n')
        if check(tmp):
            print("FAIL: a downward include was refused")
            return 1
        open(os.path.join(tmp, "src", "ring", "up.c"), "w").write(
            '#include "backend_lib.h"\n#include <virtq/framework.h>\n')
        found = check(tmp)
        if len(found) != 2:
            print(f"FAIL: two upward includes, {len(found)} found: {found}")
            return 1
        print("ok: the check refuses upward includes:")
        for b in found:
            print("  " + b)
        return 0
    finally:
        shutil.rmtree(tmp)


def main():
    if sys.argv[1:2] == ["selftest"]:
        return selftest()
    if sys.argv[1:2] != ["check"] or len(sys.argv) < 3:
        print(__doc__)
        return 2
    bad = check(sys.argv[2])
    for b in bad:
        print(b, file=sys.stderr)
    if bad:
        print(f"layers.py: {len(bad)} include(s) against the layers "
              f"(docs/DESIGN.md, \"Layers\")", file=sys.stderr)
        return 1
    if len(sys.argv) > 3:
        open(sys.argv[3], "w").write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
