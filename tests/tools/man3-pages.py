#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every exported function has a section-3 page, and each page says what
its header says.

Usage: man3-pages.py [--root DIR] [--installed PAGE...]
       man3-pages.py --synopsis NAME...   (print .BI lines for the pages)

DIR is the source tree (default: the one this script is in).  --installed
names the pages meson installs (docs/man3/x.3 as "man3/x.3"), so a page
written and not added to docs/meson.build is reported.

Checked, and printed name by name when wrong:
 - every symbol src/libvirtq.map and src/guest/libvirtq-guest.map export
   is named in the NAME section of exactly one page of docs/man3/;
 - a page's NAME names only functions the public headers declare, each
   with its prototype in SYNOPSIS and the header that declares it
   #included there; each SYNOPSIS prototype matches the header's (return
   type, name and parameter types, whitespace and parameter names aside);
 - a page has the sections NAME, LIBRARY, SYNOPSIS, DESCRIPTION, RETURN
   VALUE, NOTES and SEE ALSO, is called after the first name in its NAME,
   and its LIBRARY names libvirtq-guest exactly when its functions are
   libvirtq-guest's;
 - every vq_*(N) and virtq*(N) reference in a page (section 3 or 7) names
   a page or a name a page covers;
 - groff -man -ww reads every page without a warning (when groff is here).
"""
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys

SECTIONS = ["NAME", "LIBRARY", "SYNOPSIS", "DESCRIPTION", "RETURN VALUE",
            "NOTES", "SEE ALSO"]
KEYWORDS = {"void", "char", "short", "int", "long", "float", "double",
            "signed", "unsigned", "_Bool", "bool", "const", "volatile",
            "restrict", "struct", "enum", "union"}


# ---- C declarations: the headers' and the pages' ----

def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def strip_directives(text):
    """Drop preprocessor lines, and the extern "C" blocks (C++ only)."""
    out, skip = [], 0
    lines = text.replace("\\\n", " ").split("\n")
    for line in lines:
        s = line.strip()
        if skip:
            if re.match(r"#\s*if", s):
                skip += 1
            elif re.match(r"#\s*endif", s):
                skip -= 1
            continue
        if re.match(r"#\s*ifdef\s+__cplusplus\b", s):
            skip = 1
            continue
        if s.startswith("#"):
            continue
        out.append(line)
    return "\n".join(out)


def tokens(text):
    return re.findall(r"\.\.\.|\w+|[^\s\w]", text)


def drop_attributes(toks):
    out, i = [], 0
    while i < len(toks):
        if toks[i] in ("__attribute__", "__attribute"):
            i += 1
            depth = 0
            while i < len(toks):
                depth += toks[i] == "("
                depth -= toks[i] == ")"
                i += 1
                if depth == 0:
                    break
            continue
        out.append(toks[i])
        i += 1
    return out


def split_top(toks, sep=","):
    parts, cur, depth = [], [], 0
    for t in toks:
        if t in "([":
            depth += 1
        elif t in ")]":
            depth -= 1
        if t == sep and depth == 0:
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    parts.append(cur)
    return parts


def name_index(toks):
    """Where a parameter's name is in its tokens, or None (no name)."""
    if not toks or toks in (["void"], ["..."]):
        return None
    # a function pointer: RET ( * name ) ( PARAMS )
    for i in range(len(toks) - 3):
        if toks[i:i + 2] == ["(", "*"] and toks[i + 3] == ")" and \
                re.match(r"\w+$", toks[i + 2]):
            return i + 2
    # else the last word outside brackets, if what is before it is a type
    # on its own
    depth, last = 0, None
    for i, t in enumerate(toks):
        if t == "[":
            depth += 1
        elif t == "]":
            depth -= 1
        elif depth == 0 and re.match(r"\w+$", t):
            last = i
    words = [t for t in toks[:last] if re.match(r"\w+$", t)] \
        if last is not None else []
    if last is None or toks[last] in KEYWORDS or not words or \
            words[-1] in ("struct", "enum", "union") or \
            all(w in ("const", "volatile", "restrict") for w in words):
        return None
    return last


def param_type(toks):
    """A parameter's type: its declaration without the name (nor the
    names of a function pointer's own parameters)."""
    k = name_index(toks)
    if k is None:
        return toks
    out = toks[:k] + toks[k + 1:]
    if toks[k - 2:k] == ["(", "*"] and out[k:k + 2] == [")", "("] and \
            out[-1] == ")":
        inner = [param_type(p) for p in split_top(out[k + 2:-1])]
        out = out[:k + 2] + [t for j, p in enumerate(inner)
                             for t in ([","] if j else []) + p] + [")"]
    return out


def call_shape(toks):
    """Where the first vq_* name followed by "(" is in toks, and where the
    ")" that closes its parameters is: (i, j), or None."""
    for i, t in enumerate(toks[:-1]):
        if re.match(r"vq_\w+$", t) and toks[i + 1] == "(":
            break
    else:
        return None
    depth = 0
    for j in range(i + 1, len(toks)):
        depth += toks[j] == "("
        depth -= toks[j] == ")"
        if depth == 0:
            break
    return i, j


def prototype(decl):
    """(name, return type, [parameter types]) of a function declaration, or
    None for anything else."""
    toks = drop_attributes(tokens(decl))
    toks = [t for t in toks if t not in ("extern", "static", "inline",
                                         "__inline__")]
    shape = call_shape(toks)
    if not shape or "typedef" in toks[:shape[0]] or "(" in toks[:shape[0]]:
        return None
    i, j = shape
    params = [" ".join(param_type(p)) for p in split_top(toks[i + 2:j])]
    return toks[i], " ".join(toks[:i]), [p for p in params if p]


def declarations(text):
    """Top-level declarations of C text, brace blocks left out, and the
    prototypes of functions defined (static inline) in it."""
    decls, cur, depth, i = [], [], 0, 0
    while i < len(text):
        ch = text[i]
        if ch == "{":
            if depth == 0 and re.search(r"\)\s*$", "".join(cur)):
                decls.append("".join(cur) + ";")   # a function's body
                cur = ["__body__"]
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            if ch == ";":
                decls.append("".join(cur) + ";")
                cur = []
            else:
                cur.append(ch)
        if depth == 0 and ch == "}" and cur == ["__body__"]:
            cur = []
        i += 1
    return [d.strip() for d in decls if d.strip() and "__body__" not in d]


def header_protos(root):
    """{name: (header, proto)} for every vq_* function of the public
    headers (virtq/version.h from its template)."""
    found = {}
    inc = os.path.join(root, "include")
    paths = sorted(glob.glob(os.path.join(inc, "virtq", "*.h")) +
                   glob.glob(os.path.join(inc, "virtq", "*.h.in")) +
                   glob.glob(os.path.join(inc, "virtq", "guest", "*.h")))
    for path in paths:
        rel = os.path.relpath(path, inc)
        if rel.endswith(".in"):
            rel = rel[:-3]
        text = strip_directives(strip_comments(open(path).read()))
        for d in declarations(text):
            p = prototype(d)
            if p and p[0] not in found:
                found[p[0]] = (rel, p)
    return found


def mapped(root, path):
    """The names a version script exports, read as test abi_symbols reads
    them."""
    spec = importlib.util.spec_from_file_location(
        "abi_symbols", os.path.join(root, "scripts", "abi-symbols.py"))
    abi = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(abi)
    return abi.mapped(path)


# ---- roff ----

def macro_args(s):
    return [a[1:-1] if a.startswith('"') else a
            for a in re.findall(r'"[^"]*"|\S+', s)]


def unescape(s):
    s = re.sub(r"\\f(\[[^]]*\]|\(..|.)", "", s)
    s = s.replace("\\(dq", '"').replace("\\(aq", "'").replace("\\&", "")
    s = s.replace("\\-", "-").replace("\\ ", " ").replace("\\e", "\\")
    s = re.sub(r"\\\((em|en)", "-", s)
    return s.replace("\\c", "")


def roff_text(lines):
    """The text of man(7) source lines, fonts and requests dropped."""
    out = []
    for line in lines:
        if line.startswith(".\\\"") or line.startswith("'\\\""):
            continue
        m = re.match(r"\.(\w+)\s*(.*)", line)
        if not m:
            out.append(unescape(line))
            continue
        mac, rest = m.groups()
        if mac in ("B", "I", "SM", "SB"):
            out.append(unescape(" ".join(macro_args(rest))))
        elif mac in ("BI", "IB", "BR", "RB", "IR", "RI"):
            out.append(unescape("".join(macro_args(rest))))
        elif mac in ("TP", "IP") and rest:
            continue
        # any other request or macro (.PP, .nf, .EX, ...) carries no text
    return out


def sections(path):
    secs, cur = {}, None
    for line in open(path).read().split("\n"):
        m = re.match(r"\.SH\s+(.*)", line)
        if m:
            cur = m.group(1).strip().strip('"')
            secs.setdefault(cur, [])
        elif cur:
            secs[cur].append(line)
    return secs


def page_names(secs):
    text = " ".join(roff_text(secs.get("NAME", [])))
    left = text.split(" - ")[0]
    return [n.strip() for n in left.split(",") if n.strip()]


# ---- the checks ----

def fmt(p):
    params = ", ".join(join_c(tokens(t)) for t in p[2])
    return f"{join_c(tokens(p[1]))} {p[0]}({params or 'void'})"


def check_page(path, secs, hdr, guest_syms, problems):
    base = os.path.basename(path)
    names = page_names(secs)
    for s in SECTIONS:
        if s not in secs:
            problems.append(f"{base}: no {s} section")
    if not names:
        problems.append(f"{base}: its NAME section names nothing")
        return names
    if base != names[0] + ".3":
        problems.append(f"{base}: named after {names[0]}, the first name in "
                        f"its NAME, it would be {names[0]}.3")
    th = re.search(r"^\.TH\s+(\S+)\s+(\S+)", open(path).read(), re.M)
    if not th or th.group(1) != names[0].upper() or th.group(2) != "3":
        problems.append(f"{base}: .TH must start '.TH {names[0].upper()} 3'")
    syn = strip_comments("\n".join(roff_text(secs.get("SYNOPSIS", []))))
    includes = set(re.findall(r"#\s*include\s*<([^>]+)>", syn))
    protos = {}
    for d in declarations(strip_directives(syn)):
        p = prototype(d)
        if p:
            protos[p[0]] = p
    for name in names:
        if name not in hdr:
            problems.append(f"{base}: {name} is declared by no public header")
            continue
        header, want = hdr[name]
        got = protos.get(name)
        if not got:
            problems.append(f"{base}: {name} has no prototype in SYNOPSIS "
                            f"(the header: {fmt(want)})")
        elif got != want:
            problems.append(f"{base}: {name}: SYNOPSIS has\n      {fmt(got)}"
                            f"\n    {header} declares\n      {fmt(want)}")
        if header not in includes:
            problems.append(f"{base}: {name} is declared in <{header}>, "
                            f"which SYNOPSIS does not #include")
    for name in protos:
        if name not in names:
            problems.append(f"{base}: SYNOPSIS declares {name}, which NAME "
                            f"does not list")
    lib = " ".join(roff_text(secs.get("LIBRARY", [])))
    guest = [n for n in names if n in guest_syms]
    if guest and "libvirtq-guest" not in lib:
        problems.append(f"{base}: {guest[0]} is libvirtq-guest's, and "
                        f"LIBRARY does not say so")
    if not guest and ("libvirtq-guest" in lib or "-lvirtq" not in lib):
        problems.append(f"{base}: LIBRARY must name libvirtq, -lvirtq")
    return names


def check_refs(path, known, problems):
    text = " ".join(roff_text(open(path).read().split("\n")))
    refs = re.findall(r"\b((?:vq_|virtq)[\w-]*)\s?\((\d)\)", text)
    for name, sec in sorted(set(refs)):
        if (name, sec) not in known:
            problems.append(f"{os.path.basename(path)}: refers to "
                            f"{name}({sec}), which no page covers")


def check_roff(paths, problems):
    groff = shutil.which("groff")
    if not groff:
        print("groff is not installed: the pages' roff was not checked")
        return
    for path in paths:
        r = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-z", path],
                           capture_output=True, text=True)
        for line in (r.stderr.strip().splitlines() or
                     ([f"groff exited {r.returncode}"] if r.returncode
                      else [])):
            problems.append(f"{os.path.basename(path)}: groff: {line}")


def synopsis(root, names):
    """.BI lines for the prototypes of names, for writing a page."""
    hdr = header_protos(root)
    for name in names:
        header, _ = hdr[name]
        print(f"{name} <{header}>")
    inc = os.path.join(root, "include")
    for name in names:
        header = hdr[name][0]
        path = os.path.join(inc, header)
        if not os.path.exists(path):
            path += ".in"
        text = strip_directives(strip_comments(open(path).read()))
        for d in declarations(text):
            p = prototype(d)
            if p and p[0] == name:
                print(bi_lines(drop_attributes(tokens(d))))


def bi_lines(toks):
    """A declaration as .BI lines: types bold, parameter names italic."""
    toks = [t for t in toks if t != "extern"]
    i, j = call_shape(toks)
    head = join_c(toks[:i + 1]) + "("
    params = split_top(toks[i + 2:j])
    pieces = []
    for k, p in enumerate(params):
        pieces.append((p, name_index(p), k == len(params) - 1))
    lines, cur, width, n = [], [head], len(head), 0
    indent = " " * len(head)
    for p, name, last in pieces:
        text = join_c(p) + (");" if last else ",")
        if n and width + len(text) + 1 > 72:
            lines.append(cur)
            cur, width, n = [indent], len(indent), 0
        elif n:
            cur.append(" ")
            width += 1
        cur.append((p, name, last))
        width += len(text)
        n += 1
    lines.append(cur)
    out = []
    for line in lines:
        args, bold = [], ""
        for piece in line:
            if isinstance(piece, str):
                bold += piece
                continue
            p, name, last = piece
            if name is None:
                bold += join_c(p) + (");" if last else ",")
                continue
            k = name
            bold += join_c(p[:k])
            if p[:k] and re.match(r"\w", p[k - 1]):
                bold += " "
            args += [bold, p[k]]
            bold = join_c(p[k + 1:]) + (");" if last else ",")
        args.append(bold)
        out.append(".BI " + " ".join(q(a) for a in args) if len(args) > 1
                   else ".B " + q(args[0]))
    return "\n".join(out)


def q(a):
    a = a.replace("\\", "\\e").replace("-", "\\-")
    return f'"{a}"' if (" " in a or not a) else a


def join_c(toks):
    s = ""
    for t in toks:
        if s and re.match(r"\w", t) and re.match(r".*\w$", s):
            s += " "
        elif s and t == "*" and re.match(r".*\w$", s):
            s += " "
        elif s and t == "(" and re.match(r".*\w$", s) and \
                not re.match(r".*vq_\w+$", s):
            s += " "
        s += t
    return s


def main():
    args = sys.argv[1:]
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    if args[:1] == ["--root"] and len(args) > 1:
        root, args = args[1], args[2:]
    if args[:1] == ["--synopsis"]:
        synopsis(root, args[1:])
        return 0
    installed = None
    if args[:1] == ["--installed"]:
        installed, args = set(args[1:]), []
    if args:
        print(__doc__)
        return 2
    docs = os.path.join(root, "docs")
    lib_syms = mapped(root, os.path.join(root, "src", "libvirtq.map"))
    guest_syms = mapped(root, os.path.join(root, "src", "guest",
                                           "libvirtq-guest.map"))
    hdr = header_protos(root)
    pages3 = sorted(glob.glob(os.path.join(docs, "man3", "*.3")))
    pages7 = sorted(glob.glob(os.path.join(docs, "man7", "*.7")))
    problems, owner = [], {}
    known = {(os.path.basename(p)[:-2], p[-1]) for p in
             pages3 + pages7 + glob.glob(os.path.join(docs, "*.[18]"))}
    for path in pages3:
        for name in check_page(path, sections(path), hdr, guest_syms,
                               problems):
            if name in owner:
                problems.append(f"{os.path.basename(path)}: {name} is "
                                f"already named by {owner[name]}")
            owner.setdefault(name, os.path.basename(path))
            known.add((name, "3"))
    for path in pages7:
        if "NAME" not in sections(path):
            problems.append(f"{os.path.basename(path)}: no NAME section")
    for path in pages3 + pages7:
        check_refs(path, known, problems)
    if installed is not None:
        for path in pages3 + pages7:
            rel = os.path.relpath(path, docs)
            if rel not in installed:
                problems.append(f"{rel}: not installed (add it to "
                                f"docs/meson.build)")
    missing = sorted((lib_syms | guest_syms) - set(owner))
    for name in missing:
        lib = "libvirtq-guest" if name in guest_syms else "libvirtq"
        where = hdr[name][0] if name in hdr else "no public header"
        problems.append(f"{name} ({lib}, <{where}>): no page names it")
    check_roff(pages3 + pages7, problems)
    print(f"{len(pages3)} section-3 pages name {len(owner)} functions; "
          f"the maps export {len(lib_syms)} + {len(guest_syms)}; "
          f"{len(pages7)} section-7 pages")
    for p in problems:
        print("  " + p)
    if problems:
        print(f"FAIL: {len(problems)} problem(s)")
        return 1
    print("ok: every exported function has its page, as its header "
          "declares it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
