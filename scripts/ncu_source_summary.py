#!/usr/bin/env python3
"""ncu_source_summary.py SOURCE.csv[.gz] — where a kernel's warps stall, per SASS instruction.

Reads what `ncu -i REPORT --page source --print-source sass --csv` writes for
a report with the SourceCounters section (one block per profiled kernel, each
headed by a "Kernel Name" line and the column names), and prints per kernel:
the PC samples in all, the stall reasons' shares of them, and the --top
instructions with the most samples, each with its share and its two largest
stall reasons.  A kernel profiled more than once (the same name in several
blocks) is printed once, from its first block.
"""
import argparse
import collections
import csv
import gzip
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"


def blocks(rows):
    """(kernel name, column names, instruction rows) per block, in order."""
    name, header, body = None, None, []
    for r in rows:
        if r and r[0] == "Kernel Name":
            if name is not None and header:
                yield name, header, body
            name, header, body = r[1] if len(r) > 1 else "?", None, []
        elif r and r[0] == "Address":
            header = r
        elif name is not None and header and len(r) == len(header):
            body.append(r)
    if name is not None and header:
        yield name, header, body


def kernel_blocks(path, tool):
    """(kernels, status): each kernel's first block in the source-page CSV at path (.gz or
    plain), in order, as (name, column names, rows), and 0; or, after one line on stderr naming
    tool and path, None and 2 when the file cannot be read, 1 when it holds no kernel block."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", newline="") as f:
            rows = list(csv.reader(f))
    except (OSError, EOFError, UnicodeDecodeError) as e:
        print("%s: cannot read %s: %s" % (tool, path, e), file=sys.stderr)
        return None, 2
    seen, firsts = set(), []
    for name, header, body in blocks(rows):
        if name not in seen:
            seen.add(name)
            firsts.append((name, header, body))
    if not firsts:
        print("%s: no kernel block in %s" % (tool, path), file=sys.stderr)
        return None, 1
    return firsts, 0


def count(text):
    try:
        return int(float(text or 0))
    except ValueError:
        return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=10, help="instructions listed per kernel (default 10)")
    ap.add_argument("--name-width", type=int, default=100, help="characters of the kernel name printed")
    args = ap.parse_args()
    kernels, status = kernel_blocks(args.csv, "ncu_source_summary")
    if status:
        return status
    for name, header, body in kernels:
        col = {h: i for i, h in enumerate(header)}
        if SAMPLES not in col:
            print("%s: no '%s' column (was SourceCounters collected?)" % (name[: args.name_width], SAMPLES))
            continue
        reasons = [h for h in header if h.startswith("stall_") and "(Not Issued)" not in h]
        total = sum(count(r[col[SAMPLES]]) for r in body)
        print("== %s" % name[: args.name_width])
        if total == 0:
            print("   no samples")
            continue
        agg = collections.Counter()
        for r in body:
            for h in reasons:
                agg[h] += count(r[col[h]])
        print("   %d samples; %s" % (total, ", ".join("%s %.1f%%" % (h[len("stall_"):], 100.0 * v / total)
                                                     for h, v in agg.most_common(8) if v)))
        top = sorted(body, key=lambda r: -count(r[col[SAMPLES]]))[: args.top]
        for r in top:
            n = count(r[col[SAMPLES]])
            if n == 0:
                break
            why = sorted(((count(r[col[h]]), h[len("stall_"):]) for h in reasons), reverse=True)[:2]
            print("   %5.1f%%  %-58s %s" % (100.0 * n / total, r[col["Source"]].strip()[:58],
                                           ", ".join("%s %d" % (w, c) for c, w in why if c)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
