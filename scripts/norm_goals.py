#!/usr/bin/env python3
"""norm_goals.py BENCH.json [BENCH.json ...] — `normfuse bench` runs against the norms' speed goal.

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

Several runs (the same kernels in separate processes, whose readings of a
point near the line differ): a row per op and size with, per point, the
lowest fraction over the runs ('*' where it is under the goal, '-' where
every run lacks the point) and in how many runs the point met the goal,
then one line per run: its count and its misses.

--impl names the implementation (default ref; vendor reads cuDNN's rows
against the same goal, for comparison).  Exit status: 0 when every point
meets the goal in every run, 1 when one does not (or is missing), 2 on
usage errors, a file that is no bench run (named on stderr with what is
wrong), or a run without a single norm case of the impl.
"""
import argparse
import sys

from bench_compare import copy_fraction, first_cases, read_runs

ROW_LENGTHS = (1024, 2048, 4096, 8192, 16384)
SIZES = ((26, 1 << 26), (28, 1 << 28))
GOALS = (("rmsnorm_fwd", 0.90), ("layernorm_fwd", 0.90), ("rmsnorm_bwd", 0.85), ("layernorm_bwd", 0.85))


def fractions(run, impl):
    """{(op, M n, n): fraction of copy bandwidth, or None where the case failed}, first case of each."""
    cases = first_cases(run, lambda c: c.get("impl") == impl and {"M", "n"} <= c.get("shape", {}).keys(),
                        lambda c: (c.get("op"), c["shape"]["M"] * c["shape"]["n"], c["shape"]["n"]))
    return {k: copy_fraction(run, c) for k, c in cases.items()}


POINTS = tuple((op, goal, log2, size, n) for op, goal in GOALS for log2, size in SIZES for n in ROW_LENGTHS)


def judge(found):
    """(points met, the misses named) of one run's fractions."""
    met, misses = 0, []
    for op, goal, log2, size, n in POINTS:
        frac = found.get((op, size, n))
        if frac is not None and frac >= goal:
            met += 1
        else:
            misses.append("%s n=%d 2^%d %s" % (op, n, log2, "%.3f" % frac if frac is not None else "missing"))
    return met, misses


def count_line(met, misses):
    return "goal met at %d of %d points%s" % (met, len(POINTS), "; not: " + ", ".join(misses) if misses else "")


def header(cell_width):
    return "%-14s %-5s %-5s " % ("op", "goal", "M n") + " ".join("%*s" % (cell_width, "n=%d" % n)
                                                                 for n in ROW_LENGTHS)


def print_one(name, run, found, impl):
    print("# %s, impl %s: fraction of the run's copy bandwidth (%.2f TB/s); * under the goal, - missing"
          % (name, impl, run["copy_bw_tbs"]))
    print(header(7))
    for op, goal in GOALS:
        for log2, size in SIZES:
            cells = []
            for n in ROW_LENGTHS:
                frac = found.get((op, size, n))
                if frac is None:
                    cells.append("%7s" % "-")
                else:
                    cells.append("%7.3f" % frac if frac >= goal else "%6.3f*" % frac)
            print("%-14s %-5.2f 2^%-3d " % (op, goal, log2) + " ".join(cells))
    print(count_line(*judge(found)))


def print_many(names, founds, impl):
    runs = len(names)
    print("# %d runs, impl %s: per point the lowest fraction of its run's copy bandwidth over the runs "
          "(* under the goal, - missing in every run) and in how many runs it met the goal" % (runs, impl))
    width = 7 + 1 + len("%d/%d" % (runs, runs))
    print(header(width))
    for op, goal in GOALS:
        for log2, size in SIZES:
            cells = []
            for n in ROW_LENGTHS:
                fracs = [f.get((op, size, n)) for f in founds]
                present = [x for x in fracs if x is not None]
                met = sum(x is not None and x >= goal for x in fracs)
                low = min(present) if present else None
                if low is None:
                    shown = "%7s" % "-"
                else:
                    shown = "%7.3f" % low if low >= goal else "%6.3f*" % low
                cells.append("%*s" % (width, "%s %d/%d" % (shown, met, runs)))
            print("%-14s %-5.2f 2^%-3d " % (op, goal, log2) + " ".join(cells))
    for i, (name, found) in enumerate(zip(names, founds)):
        print("run %d (%s): %s" % (i + 1, name, count_line(*judge(found))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bench", nargs="+", help="`normfuse bench --json` files (several: the same kernels, run apart)")
    ap.add_argument("--impl", default="ref", help="the implementation read (default ref)")
    args = ap.parse_args()
    runs = read_runs("norm_goals", args.bench, ("copy_bw_tbs",), ("bytes",))
    if runs is None:
        return 2
    founds = []
    for path, run in zip(args.bench, runs):
        found = fractions(run, args.impl)
        if not any(op in dict(GOALS) for op, _, _ in found):
            print("norm_goals: %s holds no %s norm case (a bench narrowed to other grids?)" % (path, args.impl),
                  file=sys.stderr)
            return 2
        founds.append(found)
    if len(runs) == 1:
        print_one(args.bench[0], runs[0], founds[0], args.impl)
    else:
        print_many(args.bench, founds, args.impl)
    return 0 if all(judge(f)[0] == len(POINTS) for f in founds) else 1


if __name__ == "__main__":
    sys.exit(main())
