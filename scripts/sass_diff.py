#!/usr/bin/env python3
"""sass_diff.py [--funcs REGEX] [--loops] A B — which kernels two builds compile to the same machine code.

A and B are each the text of `cuobjdump --dump-sass` (the GPU suite's
`sass.full` or `sass_funcs.txt`, also xz-compressed as reports/ keeps it)
or a binary it reads (a cubin, an object file, libnormfuse.so), dumped
with cuobjdump ($CUOBJDUMP, else the one on PATH).  Kernels are matched by
architecture (where both listings name it) and mangled name, with the
per-file hash of an anonymous namespace removed, so a kernel compiled from
a copy of its file under another name still matches its original.  Two
kernels are the same when their instructions are, operands and branch
targets included (the encodings and addresses are not compared: equal
instructions encode equally).

First the two inputs, each with the commit its report header names, if
any; then one line per kernel: `same`, `differs` (instruction counts
A -> B), or `only A` / `only B`; then a count of each.  --loops adds, for
each kernel that differs, its longest loop (the widest backward branch) on
both sides: its length, its global and shared loads and stores and
barriers, whether those come in the same order, and whether the loop is
the same but for register and predicate numbers.  This is what to read
before spending device time on a change meant to leave a kernel's hot
loop alone.  --funcs keeps the kernels whose normalized name matches REGEX.

Exit status: 0 when every kernel kept is the same on both sides, 1 when
one differs or is on one side only, 2 on a usage error or an input that
holds no SASS.
"""
import argparse
import lzma
import os
import re
import shutil
import subprocess
import sys

ANON = re.compile(r"_ZN\d+_GLOBAL__N__[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]{8}")
FUNCTION = re.compile(r"^\s*Function : (\S+)")
ARCH = re.compile(r"^\s*code for (sm_\w+)")
INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s*(.*?)\s*;")
BRANCH = re.compile(r"\bBRA\b.*?(0x[0-9a-f]+)")
MEMORY = re.compile(r"\b(LDG|STG|LDS|STS|LDSM|STSM|LD|ST|BAR|UTMALDG|UTMASTG|SYNCS)\b(\.[\w.]+)?")
REGISTER = re.compile(r"\b(U?R\d+|U?P\d)\b")


def normalize_name(name):
    return ANON.sub("_ZN(anon)", name)


def sass_text(path):
    """The SASS listing of PATH: its text, or cuobjdump's dump of a binary."""
    with open(path, "rb") as f:
        head = f.read(6)
    if head.startswith(b"\xfd7zXZ"):
        with lzma.open(path, "rt", errors="replace") as f:
            return f.read()
    if not head.startswith(b"\x7fELF"):
        with open(path, errors="replace") as f:
            return f.read()
    tool = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    if not tool:
        raise ValueError("%s is a binary and no cuobjdump was found (set CUOBJDUMP)" % path)
    run = subprocess.run([tool, "--dump-sass", path], capture_output=True, text=True)
    if run.returncode != 0:
        raise ValueError("cuobjdump failed on %s: %s" % (path, run.stderr.strip()))
    return run.stdout


def read_kernels(path):
    """{(arch, normalized name): [(address, instruction), ...]} and the header's commit (or None)."""
    kernels, arch, body, commit = {}, "", None, None
    for line in sass_text(path).splitlines():
        if commit is None and line.startswith("# commit: "):
            commit = line[len("# commit: "):].strip()
            continue
        m = ARCH.match(line)
        if m:
            arch = m.group(1)
            continue
        m = FUNCTION.match(line)
        if m:
            body = kernels.setdefault((arch, normalize_name(m.group(1))), [])
            continue
        m = INSTR.match(line)
        if m and body is not None:
            body.append((int(m.group(1), 16), re.sub(r"\s+", " ", m.group(2))))
    kernels = {k: v for k, v in kernels.items() if v}
    if not kernels:
        raise ValueError("%s holds no SASS (no 'Function :' with instructions)" % path)
    return kernels, commit


def longest_loop(body):
    """The instructions from the target of the widest backward branch to the branch, or []."""
    best = None
    for addr, text in body:
        m = BRANCH.search(text)
        if m and int(m.group(1), 16) < addr:
            span = (int(m.group(1), 16), addr)
            if best is None or span[1] - span[0] > best[1] - best[0]:
                best = span
    if best is None:
        return []
    return [text for addr, text in body if best[0] <= addr <= best[1]]


def memory_ops(loop):
    return [m.group(1) + (m.group(2) or "") for text in loop for m in [MEMORY.search(text)] if m]


def loop_line(side, loop):
    ops = memory_ops(loop)
    count = {}
    for op in ops:
        kind = op.split(".")[0]
        count[kind] = count.get(kind, 0) + 1
    kinds = " ".join("%s %d" % (k, count[k]) for k in sorted(count)) or "no memory operations"
    return "    loop %s: %d instructions; %s" % (side, len(loop), kinds)


def compare_loops(a, b):
    la, lb = longest_loop(a), longest_loop(b)
    if not la or not lb:
        return ["    loop: %s" % ("none in A" if not la else "none in B")]
    out = [loop_line("A", la), loop_line("B", lb)]
    same_order = memory_ops(la) == memory_ops(lb)
    renamed = [REGISTER.sub("R", t) for t in la] == [REGISTER.sub("R", t) for t in lb]
    out.append("    loop memory operations in the same order: %s; the same but for registers: %s"
               % ("yes" if same_order else "no", "yes" if renamed else "no"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a", metavar="A")
    ap.add_argument("b", metavar="B")
    ap.add_argument("--funcs", help="a regex over the normalized kernel names to keep")
    ap.add_argument("--loops", action="store_true", help="the longest loop of each kernel that differs")
    args = ap.parse_args()
    try:
        keep = re.compile(args.funcs) if args.funcs else None
    except re.error as e:
        print("sass_diff: --funcs: %s" % e, file=sys.stderr)
        return 2
    try:
        (ka, ca), (kb, cb) = read_kernels(args.a), read_kernels(args.b)
    except (OSError, ValueError, EOFError, lzma.LZMAError) as e:
        print("sass_diff: %s" % e, file=sys.stderr)
        return 2
    if not all(arch for arch, _ in ka) or not all(arch for arch, _ in kb):
        # a listing cut out of a dump (sass_funcs.txt) has no "code for" lines: match by name
        ka, kb = ({("", name): body for (_, name), body in k.items()} for k in (ka, kb))
    names = sorted(k for k in set(ka) | set(kb) if keep is None or keep.search(k[1]))
    if not names:
        print("sass_diff: --funcs %r keeps no kernel" % args.funcs, file=sys.stderr)
        return 2
    for side, path, commit in (("A", args.a, ca), ("B", args.b, cb)):
        print("%s: %s%s" % (side, path, ", commit %s" % commit if commit else ""))
    tally = {"same": 0, "differs": 0, "only A": 0, "only B": 0}
    for key in names:
        arch, name = key
        a, b = ka.get(key), kb.get(key)
        if a is None or b is None:
            verdict, sizes = ("only B", len(b)) if a is None else ("only A", len(a))
            print("%-8s %6d        %s %s" % (verdict, sizes, arch, name))
        elif [t for _, t in a] == [t for _, t in b]:
            verdict = "same"
            print("%-8s %6d        %s %s" % (verdict, len(a), arch, name))
        else:
            verdict = "differs"
            print("%-8s %6d -> %-6d %s %s" % (verdict, len(a), len(b), arch, name))
            if args.loops:
                print("\n".join(compare_loops(a, b)))
        tally[verdict] += 1
    print("%d kernels: %s" % (len(names), ", ".join("%s %d" % (k, v) for k, v in tally.items())))
    return 0 if tally["same"] == len(names) else 1


if __name__ == "__main__":
    sys.exit(main())
