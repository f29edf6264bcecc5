#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compare a migrated guest's RAM on the source and the destination.

    ram-diff.py SRC DST [GPA:LEN ...]
    ram-diff.py selftest

SRC and DST are the two QEMUs' guest-RAM files (their offsets are guest
physical addresses: a pc machine below 3 GiB), GPA:LEN the rings the
back-end writes.  Each page that differs is put in one of two classes:

  backend  the back-end could have written the differing bytes: they lie in
           a ring, or inside an echoed test frame (gnet's "VQGN" frames and
           the virtio-net header before them) on either side.  A stale one
           is a page the back-end wrote without marking it in the dirty log.
  guest    only the guest's CPU writes there (kernel data such as struct
           pages): QEMU's own dirty tracking lost the write.  QEMU 7.2's
           TCG does, under host load, with no vhost-user device at all
           (guest-test.sh migrate-control reproduces it).

The rule errs towards "backend": frames the guest itself copies (gnet's own
buffers, its socket buffers) count as the back-end's.

Prints one line: "pages=N backend=B guest=G backend_pages=... guest_pages=..."
(at most 8 addresses each).  Exit status 0 when both files could be read.
"""
import mmap
import sys

PAGE = 4096
MAGIC = b"VQGN"
MAGIC_AT = 14           # frame offset of the magic (after the Ethernet header)
LEN_AT = 30             # frame offset of gnet's 2-byte length field
VNET_HDR = 12           # virtio_net_hdr_mrg_rxbuf before each frame
MAX_FRAME = 1514


def frame_spans(mem, lo, hi):
    """[start, end) of every test frame (with its virtio-net header) that
    has its magic in mem[lo:hi]."""
    spans = []
    at = mem.find(MAGIC, lo, hi)
    while at >= 0:
        start = at - MAGIC_AT
        n = int.from_bytes(mem[start + LEN_AT:start + LEN_AT + 2], "little") \
            if start + LEN_AT + 2 <= len(mem) else 0
        if not MAGIC_AT + len(MAGIC) <= n <= MAX_FRAME:
            n = MAX_FRAME
        spans.append((start - VNET_HDR, start + n))
        at = mem.find(MAGIC, at + 1, hi)
    return spans


def selftest():
    """Three pages the back-end could have written and one it could not."""
    import os
    import subprocess
    import tempfile
    src, dst = bytearray(8 * PAGE), bytearray(8 * PAGE)
    # 1.2.3 a test frame the destination missed, straddling pages 1 and 2
    frame = PAGE + 3000
    src[frame + MAGIC_AT:frame + MAGIC_AT + 4] = MAGIC
    src[frame + LEN_AT:frame + LEN_AT + 2] = (1400).to_bytes(2, "little")
    src[frame + 40:frame + 1400] = b"\x55" * 1360
    # a used-ring write the destination missed (page 4)
    src[4 * PAGE + 8] = 1
    # a kernel pointer only the guest's CPU wrote (page 6)
    src[6 * PAGE + 100:6 * PAGE + 108] = (0xffff888000001000).to_bytes(8, "little")
    with tempfile.TemporaryDirectory() as d:
        paths = [os.path.join(d, n) for n in ("src", "dst")]
        for path, mem in zip(paths, (src, dst)):
            with open(path, "wb") as f:
                f.write(mem)
        out = subprocess.run([sys.executable, __file__] + paths + ["0x4000:1030"],
                             capture_output=True, text=True, check=True).stdout
    want = "pages=4 backend=3 guest=1 backend_pages=0x1000,0x2000,0x4000 guest_pages=0x6000\n"
    if out != want:
        sys.stderr.write("ram-diff selftest: got %r, want %r\n" % (out, want))
        return 1
    print("ram-diff selftest: ok")
    return 0


def main(argv):
    if argv[1:] == ["selftest"]:
        return selftest()
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    rings = []
    for arg in argv[3:]:
        gpa, length = arg.split(":")
        rings.append((int(gpa, 0), int(gpa, 0) + int(length, 0)))
    with open(argv[1], "rb") as f_src, open(argv[2], "rb") as f_dst:
        src = mmap.mmap(f_src.fileno(), 0, access=mmap.ACCESS_READ)
        dst = mmap.mmap(f_dst.fileno(), 0, access=mmap.ACCESS_READ)
        size = min(len(src), len(dst))
        backend, guest = [], []
        for base in range(0, size, PAGE):
            a, b = src[base:base + PAGE], dst[base:base + PAGE]
            if a == b:
                continue
            diff = [base + i for i in range(len(a)) if a[i] != b[i]]
            # a frame may start on the page before
            lo = max(0, base - PAGE)
            spans = frame_spans(src, lo, base + PAGE) + \
                frame_spans(dst, lo, base + PAGE) + rings
            hit = any(s <= d < e for d in diff for s, e in spans)
            (backend if hit else guest).append(base)
        if len(src) != len(dst):
            backend.append(size)    # a size change is nobody's guest write
    fmt = lambda pages: ",".join("0x%x" % p for p in pages[:8]) or "-"
    print("pages=%d backend=%d guest=%d backend_pages=%s guest_pages=%s" %
          (len(backend) + len(guest), len(backend), len(guest),
           fmt(backend), fmt(guest)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
