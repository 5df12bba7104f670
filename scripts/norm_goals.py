#!/usr/bin/env python3
"""norm_goals.py BENCH.json — a `normfuse bench` run against the norms' speed goal.

The goal (issue 3; SPEC.md section 6): the reference RMSNorm and LayerNorm
move their bytes at >= 0.90 of the run's measured copy bandwidth forward and
>= 0.85 backward, for every n in 1024, 2048, 4096, 8192, 16384 at M n = 2^26
and 2^28: 40 points.  Prints one row per op and size with each point's
fraction (a miss marked '*', a point the run lacks or failed '-'), then one
line: how many of the 40 points meet the goal and which do not.  The
fraction is scripts/bench_compare.py's copy_fraction (bytes / time /
copy_bw).  Other grids time some of the same shapes (the pre-norm grid's
RMSNorm at M = 65536, n = 1024); the first case of an (op, impl, shape) is
the one read, the norm grid's, since the bench runs that grid first.

--impl names the implementation (default ref; vendor reads cuDNN's rows
against the same goal, for comparison).  Exit status: 0 when every point
meets the goal, 1 when one does not (or is missing), 2 on usage errors
or a run without a single norm case of the impl.
"""
import argparse
import json
import sys

from bench_compare import copy_fraction, first_cases

ROW_LENGTHS = (1024, 2048, 4096, 8192, 16384)
SIZES = ((26, 1 << 26), (28, 1 << 28))
GOALS = (("rmsnorm_fwd", 0.90), ("layernorm_fwd", 0.90), ("rmsnorm_bwd", 0.85), ("layernorm_bwd", 0.85))


def fractions(run, impl):
    """{(op, M n, n): fraction of copy bandwidth, or None where the case failed}, first case of each."""
    cases = first_cases(run, lambda c: c.get("impl") == impl and {"M", "n"} <= c.get("shape", {}).keys(),
                        lambda c: (c.get("op"), c["shape"]["M"] * c["shape"]["n"], c["shape"]["n"]))
    return {k: copy_fraction(run, c) for k, c in cases.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bench", help="a `normfuse bench --json` file")
    ap.add_argument("--impl", default="ref", help="the implementation read (default ref)")
    args = ap.parse_args()
    try:
        with open(args.bench) as f:
            run = json.load(f)
        if not run.get("copy_bw_tbs"):
            raise ValueError("no copy_bw_tbs (not a normfuse bench run?)")
    except (OSError, ValueError) as e:
        print("norm_goals: %s: %s" % (args.bench, e), file=sys.stderr)
        return 2
    found = fractions(run, args.impl)
    if not any(op in dict(GOALS) for op, _, _ in found):
        print("norm_goals: %s holds no %s norm case (a bench narrowed to other grids?)" % (args.bench, args.impl),
              file=sys.stderr)
        return 2
    print("# %s, impl %s: fraction of the run's copy bandwidth (%.2f TB/s); * under the goal, - missing"
          % (args.bench, args.impl, run["copy_bw_tbs"]))
    print("%-14s %-5s %-5s " % ("op", "goal", "M n") + " ".join("%7s" % ("n=%d" % n) for n in ROW_LENGTHS))
    met, misses = 0, []
    for op, goal in GOALS:
        for log2, size in SIZES:
            cells = []
            for n in ROW_LENGTHS:
                frac = found.get((op, size, n))
                if frac is not None and frac >= goal:
                    met += 1
                    cells.append("%7.3f" % frac)
                else:
                    misses.append("%s n=%d 2^%d %s" % (op, n, log2, "%.3f" % frac if frac is not None else "missing"))
                    cells.append("%6.3f*" % frac if frac is not None else "%7s" % "-")
            print("%-14s %-5.2f 2^%-3d " % (op, goal, log2) + " ".join(cells))
    total = len(GOALS) * len(SIZES) * len(ROW_LENGTHS)
    print("goal met at %d of %d points%s" % (met, total, "; not: " + ", ".join(misses) if misses else ""))
    return 0 if met == total else 1


if __name__ == "__main__":
    sys.exit(main())
