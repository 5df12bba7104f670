#!/usr/bin/env python3
"""prenorm_goals.py BENCH.json [BENCH.json ...] — the fused pre-norm GEMM forward against its goal.

The goal (issue 5; SPEC.md section 6): on each of the 27 shapes of the
pre-norm seed grid (M in 65536, 131072, 524288; K, N in 256, 512, 1024),
hidden% >= 95 and t_fused <= t_gemm.  Both are read from the bench's
`summary` case of the shape (t_fused_us, t_gemm_us, hidden_pct: the fused
kernel, cuBLASLt's GEMM and the reference RMSNorm timed in turn within each
repetition), never recomputed from other cases.

One run: a row per shape (variant, t_fused, t_gemm, fused/gemm, hidden%,
"met" or the part missed), then one line: on how many of the 27 shapes the
goal is met, and each part on how many.  Several runs (the same kernels in
separate processes, whose readings of a shape near either line differ): a
row per shape with each run's fused/gemm and hidden% (a part missed marked
'*') and in how many runs the shape met the goal, then one line per run, then
the shapes met in every run (counted), missed in every run and met in some
runs only (each named).  A shape a run lacks, or whose fused case failed, is
a miss ('-').

Exit status: 0 when every shape meets the goal in every run, 1 when one does
not, 2 on usage errors, a file that is no bench run (named on stderr with
what is wrong), or a run without a single pre-norm summary case.
"""
import argparse
import sys

from bench_compare import first_cases, read_runs

MS = (65536, 131072, 524288)
KNS = (256, 512, 1024)
SHAPES = tuple((m, k, n) for m in MS for k in KNS for n in KNS)
HIDDEN_GOAL = 95.0


def summaries(run):
    """{(M, K, N): the summary case} of a run, first case of each shape."""
    return first_cases(run, lambda c: c.get("op") == "prenorm_fwd" and c.get("impl") == "summary" and
                       all(d in c.get("shape", {}) for d in "MKN"),
                       lambda c: (c["shape"]["M"], c["shape"]["K"], c["shape"]["N"]))


def judge(c):
    """(fused/gemm, hidden%, gemm part met, hidden part met) of a summary case, or None where it has no times."""
    if c is None or not c.get("t_fused_us") or not c.get("t_gemm_us") or c.get("hidden_pct") is None:
        return None
    ratio = c["t_fused_us"] / c["t_gemm_us"]
    return ratio, c["hidden_pct"], c["t_fused_us"] <= c["t_gemm_us"], c["hidden_pct"] >= HIDDEN_GOAL


def shape_name(shape):
    return "M=%d K=%d N=%d" % shape


def counts(judged):
    """(goal met, hidden part met, gemm part met) over the 27 shapes of one run."""
    ok = [j for j in judged.values() if j is not None]
    return sum(j[2] and j[3] for j in ok), sum(j[3] for j in ok), sum(j[2] for j in ok)


def count_line(judged):
    met, hidden, gemm = counts(judged)
    return "goal met on %d of %d shapes (hidden%% >= %g on %d, t_fused <= t_gemm on %d)" % (
        met, len(SHAPES), HIDDEN_GOAL, hidden, gemm)


def print_one(name, run, judged):
    found = summaries(run)
    print("# %s: the pre-norm seed grid against issue 5's goal (hidden%% >= %g and t_fused <= t_gemm)"
          % (name, HIDDEN_GOAL))
    print("%-22s %-14s %9s %9s %10s %8s  %s" % ("shape", "variant", "t_fused", "t_gemm", "fused/gemm", "hidden%",
                                                "goal"))
    for shape in SHAPES:
        j, c = judged[shape], found.get(shape)
        if j is None:
            print("%-22s %-14s %9s %9s %10s %8s  %s" % (shape_name(shape), "-", "-", "-", "-", "-", "missing"))
            continue
        ratio, hidden, gemm_ok, hidden_ok = j
        missed = [part for part, ok in (("t_fused > t_gemm", gemm_ok), ("hidden% < 95", hidden_ok)) if not ok]
        print("%-22s %-14s %9.1f %9.1f %10.3f %8.1f  %s" % (shape_name(shape), c.get("variant", "-"), c["t_fused_us"],
                                                          c["t_gemm_us"], ratio, hidden,
                                                          "met" if not missed else "not met: " + ", ".join(missed)))
    print(count_line(judged))


def print_many(names, judged_runs):
    print("# %d runs: fused/gemm and hidden%% per run (* a part of the goal missed, - missing); "
          "goal: hidden%% >= %g and t_fused <= t_gemm" % (len(names), HIDDEN_GOAL))
    print("%-22s " % "shape" + " ".join("%14s" % ("run %d" % (i + 1)) for i in range(len(names))) + "  met in")
    met_in = {}
    for shape in SHAPES:
        cells, met = [], 0
        for judged in judged_runs:
            j = judged[shape]
            if j is None:
                cells.append("%14s" % "-")
                continue
            ratio, hidden, gemm_ok, hidden_ok = j
            met += gemm_ok and hidden_ok
            cells.append("%6.3f%s %5.1f%s" % (ratio, " " if gemm_ok else "*", hidden, " " if hidden_ok else "*"))
        print("%-22s " % shape_name(shape) + " ".join(cells) + "  %d of %d" % (met, len(names)))
        met_in[shape] = met
    for i, (name, judged) in enumerate(zip(names, judged_runs)):
        print("run %d (%s): %s" % (i + 1, name, count_line(judged)))
    every = [s for s in SHAPES if met_in[s] == len(names)]
    never = [s for s in SHAPES if met_in[s] == 0]
    some = [s for s in SHAPES if 0 < met_in[s] < len(names)]

    def listed(shapes, label):
        return ": " + ", ".join(map(label, shapes)) if shapes else ""
    print("met in every run: %d of %d shapes" % (len(every), len(SHAPES)))
    print("missed in every run: %d of %d shapes%s" % (len(never), len(SHAPES), listed(never, shape_name)))
    print("met in some runs only: %d of %d shapes%s" % (len(some), len(SHAPES), listed(
        some, lambda s: "%s (%d of %d)" % (shape_name(s), met_in[s], len(names)))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bench", nargs="+", help="`normfuse bench --json` files (several: the same kernels, run apart)")
    args = ap.parse_args()
    runs = read_runs("prenorm_goals", args.bench)
    if runs is None:
        return 2
    judged_runs = []
    for path, run in zip(args.bench, runs):
        found = summaries(run)
        if not found:
            print("prenorm_goals: %s holds no pre-norm summary case (a bench narrowed to other grids, or to "
                  "--op prenorm_fwd alone?)" % path, file=sys.stderr)
            return 2
        judged_runs.append({shape: judge(found.get(shape)) for shape in SHAPES})
    if len(runs) == 1:
        print_one(args.bench[0], runs[0], judged_runs[0])
    else:
        print_many(args.bench, judged_runs)
    everywhere = all(counts(j)[0] == len(SHAPES) for j in judged_runs)
    return 0 if everywhere else 1


if __name__ == "__main__":
    sys.exit(main())
