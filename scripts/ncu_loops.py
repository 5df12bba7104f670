#!/usr/bin/env python3
"""ncu_loops.py SOURCE.csv[.gz] — a kernel's loops per pass, from its Nsight Compute source page.

Reads what `ncu -i REPORT --page source --print-source sass --csv` writes
(the SourceCounters section; the same file ncu_source_summary.py reads) and
prints, per kernel, each loop: a conditional backward branch spanning at
least --min-len instructions.  For each loop: where it lies (byte offsets
from the kernel's first instruction), its length in instructions, its
passes (the warp-level executions of its closing branch, summed over the
grid), the warp-level instructions executed per pass, its share of the
kernel's PC samples and its three largest stall reasons, and per pass the
instructions of each class (CLASSES: wgmma, barriers and fences and
warpgroup syncs, TMA, shared memory, global memory, floating point, the
uniform datapath's other instructions, the rest).  Then the spins: a wait on an mbarrier that
fails its first try branches to a retry loop placed after the kernel's
body, which branches back when the phase flips; each such retry loop is
listed with its retries and the loop its wait sits in.

This is the table to set two kernels' main loops side by side a pass at a
time (a pass is one k-tile in a GEMM mainloop, per warp): what each issues
per k-tile, and where its warps wait.  A kernel profiled more than once is
read from its first block.
"""
import argparse
import collections
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ncu_source_summary import SAMPLES, count, kernel_blocks  # noqa: E402

EXECUTED = "Instructions Executed"
# a branch: its guard (@P0), its opcode's modifiers, a predicate operand (BRA !P2, ... : the
# condition as nvcc's and cuBLASLt's kernels write it), its target
BRANCH = re.compile(r"^(@!?U?P\w+\s+)?BRA(\.[\w.]+)?\s+(!?U?P\w+,\s*)?(?:`\(\S+\)\s*)?(0x[0-9a-fA-F]+)")
# instruction classes, each a pattern on the opcode (modifiers included); the first match wins
CLASSES = [
    ("wgmma", r"HGMMA"),
    ("barrier", r"SYNCS|BAR\b|BAR\.|UCGABAR|MEMBAR|FENCE|DEPBAR|ERRBAR|CCTL|WARPGROUP|WARPSYNC"),
    ("tma", r"UTMA|UBLKCP|UBLKRED"),
    ("shared", r"LDS|STS|ATOMS"),
    ("global", r"LDG|STG|REDG|RED\.|ATOMG|ATOM\.|LD\.|ST\."),
    ("fp", r"FFMA|FMUL|FADD|FMNMX|FSETP|FSEL|FCHK|MUFU|HFMA2|HMUL2|HADD2|F2F"),
    ("uniform", r"U"),
]
PATTERNS = [(name, re.compile(pattern)) for name, pattern in CLASSES]
NAMES = [name for name, _ in CLASSES] + ["other"]


def opcode(source):
    """The instruction's opcode with its modifiers, predicate removed."""
    s = source.strip()
    if s.startswith("@"):
        s = s.split(None, 1)[1] if " " in s else ""
    return s.split(None, 1)[0] if s else ""


def klass(source):
    op = opcode(source)
    for name, pattern in PATTERNS:
        if pattern.match(op):
            return name
    return "other"


def kernel_loops(header, body, min_len):
    col = {h: i for i, h in enumerate(header)}
    for need in ("Address", "Source", EXECUTED, SAMPLES):
        if need not in col:
            return None, "no '%s' column (was SourceCounters collected?)" % need
    reasons = [h for h in header if h.startswith("stall_") and "(Not Issued)" not in h]
    try:
        addr = [int(r[col["Address"]], 16) for r in body]
    except ValueError as e:
        return None, "an address that is not hex (%s)" % e
    src = [r[col["Source"]].strip() for r in body]
    ex = [count(r[col[EXECUTED]]) for r in body]
    smp = [count(r[col[SAMPLES]]) for r in body]
    index = {a: i for i, a in enumerate(addr)}
    total = sum(smp)
    loops, spins = [], []
    for i, s in enumerate(src):
        m = BRANCH.match(s)
        if not m:
            continue
        t = int(m.group(4), 16)
        conditional = bool(m.group(1) or m.group(3))
        if t > addr[i] or t not in index:
            continue
        j = index[t]
        if conditional and i - j + 1 >= min_len:
            loops.append((j, i))
        elif conditional and i - j <= 1 and i + 1 < len(src):
            back = BRANCH.match(src[i + 1])  # the retry's way back into the body
            if back and not (back.group(1) or back.group(3)) and int(back.group(4), 16) in index:
                spins.append((j, i, index[int(back.group(4), 16)]))
    out = []
    for j, i in loops:
        passes = ex[i]
        per = collections.Counter()
        for k in range(j, i + 1):
            per[klass(src[k])] += ex[k]
        why = collections.Counter()
        for k in range(j, i + 1):
            for h in reasons:
                why[h[len("stall_"):]] += count(body[k][col[h]])
        out.append({
            "first": addr[j] - addr[0], "last": addr[i] - addr[0], "length": i - j + 1, "passes": passes,
            "per_pass": {c: (per[c] / passes if passes else 0.0) for c in NAMES},
            "executed": sum(ex[j:i + 1]), "samples": sum(smp[j:i + 1]),
            "share": 100.0 * sum(smp[j:i + 1]) / total if total else 0.0,
            "why": [(w, n) for w, n in why.most_common(3) if n],
        })
    spin_rows = []
    for j, i, back in spins:
        inside = [L for L in loops if L[0] <= back <= L[1]]
        home = min(inside, key=lambda L: L[1] - L[0]) if inside else None
        spin_rows.append({
            "at": addr[j] - addr[0], "retries": ex[i], "wait": src[j],
            "loop": addr[home[0]] - addr[0] if home else None,
        })
    return {"loops": out, "spins": spin_rows, "samples": total}, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--min-len", type=int, default=16,
                    help="instructions a loop spans at least (default 16; shorter ones are spin loops)")
    ap.add_argument("--name-width", type=int, default=100, help="characters of the kernel name printed")
    args = ap.parse_args()
    if args.min_len < 3:
        print("ncu_loops: --min-len is %d, must be at least 3" % args.min_len, file=sys.stderr)
        return 2
    kernels, status = kernel_blocks(args.csv, "ncu_loops")
    if status:
        return status
    for name, header, body in kernels:
        print("== %s" % name[: args.name_width])
        r, err = kernel_loops(header, body, args.min_len)
        if err:
            print("   " + err)
            continue
        print("   %d samples; %d loops of %d+ instructions, %d spin loops" %
              (r["samples"], len(r["loops"]), args.min_len, len(r["spins"])))
        print("   %-15s %5s %9s %8s %6s  %s  %s" % ("loop (offsets)", "instr", "passes", "ex/pass", "smp%",
                                                   " ".join("%7s" % c for c in NAMES), "stalls"))
        for L in r["loops"]:
            print("   %-15s %5d %9d %8.1f %6.1f  %s  %s" % (
                "%#x-%#x" % (L["first"], L["last"]), L["length"], L["passes"],
                L["executed"] / L["passes"] if L["passes"] else 0.0, L["share"],
                " ".join("%7.2f" % L["per_pass"][c] for c in NAMES),
                ", ".join("%s %d" % w for w in L["why"])))
        busy = [S for S in r["spins"] if S["retries"]]
        if busy:
            print("   spins with retries (retry loop, retries, its wait, the loop it returns into):")
            for S in sorted(busy, key=lambda S: -S["retries"]):
                print("   %-8s %9d  %-52s %s" % ("%#x" % S["at"], S["retries"], S["wait"][:52],
                                                "%#x" % S["loop"] if S["loop"] is not None else "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
