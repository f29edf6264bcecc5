#!/bin/sh
# SPDX-License-Identifier: MIT
# The vhost-user back-end descriptor a daemon installs (QEMU's "Backend
# program conventions", vhost-user.json's VhostUserBackend) is what QEMU
# and libvirt expect: the JSON parses, it holds exactly a description, a
# known type and an absolute binary path, the binary is the one installed,
# and the daemon's --print-capabilities agrees on the type.
#
# usage: cli-daemons-descriptors.sh JSON INSTALLED_BINARY BUILT_BINARY
set -eu
json=$1 installed=$2 built=$3
command -v python3 >/dev/null || { echo "no python3"; exit 77; }
caps=$("$built" --print-capabilities) || { echo "FAIL: $built --print-capabilities"; exit 1; }
python3 - "$json" "$installed" "$caps" <<'EOF'
import json, os, sys

path, installed, caps = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
with open(path) as f:
    d = json.load(f)
fail = []
if set(d) != {"description", "type", "binary"}:
    fail.append("keys %s, want description, type, binary" % sorted(d))
if not isinstance(d.get("description"), str) or not d["description"]:
    fail.append("no description")
if d.get("type") not in ("net", "vsock"):
    fail.append("type %r is not net or vsock" % d.get("type"))
if d.get("binary") != installed or not os.path.isabs(installed):
    fail.append("binary %r, want the installed %r" % (d.get("binary"), installed))
if caps.get("type") != d.get("type"):
    fail.append("--print-capabilities says type %r, the descriptor %r"
                % (caps.get("type"), d.get("type")))
if set(caps) - {"type", "features"}:
    fail.append("--print-capabilities has keys %s" % sorted(caps))
if fail:
    print("FAIL: %s: %s" % (os.path.basename(path), "; ".join(fail)))
    sys.exit(1)
print("%s: type %s, binary %s, --print-capabilities agrees"
      % (os.path.basename(path), d["type"], d["binary"]))
EOF
