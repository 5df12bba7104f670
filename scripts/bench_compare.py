#!/usr/bin/env python3
"""bench_compare.py RUN.json [RUN.json ...] — compare `normfuse bench` runs.

One row per (op, impl, shape) present in every run; one column per run with
the case's fraction of that run's measured copy bandwidth (memory-bound ops)
or its time in microseconds (--time); a case that failed in a run (no time)
prints "failed" there; a case timed twice in one run counts as its first
timing (first_cases).  Used for the A/B runs under reports/h200/ab_*/.

--rounds: the runs are rounds of the same variants (names ending in _r<N>,
as scripts/ab_bench.sh writes them with NF_AB_ROUNDS): one column per
variant instead, its mean over the rounds with the lowest and highest
("0.885 0.875-0.896"), and the variant with the best mean last (highest
fraction, or lowest time), in parentheses where its range overlaps
another's, with the rounds it won outright (its N-th run ahead of every
other variant's N-th: "4/4"); a case that failed in any round of a variant
prints "failed" for it.  Separate processes of one case read a few % apart
on the H200 (ref/NOTES.md item 27): a difference is one when the ranges
do not overlap.  After the table, one summary line per (op, impl): each
variant's time over the first variant's (from the means; for fractions of
copy bandwidth, the inverse ratio, which is the time's for the same bytes),
lowest-highest and median over the cases where both ran, and how many cases
each variant won outright (its range apart from every other's).

--spread (the plain table only): each cell also gives the run's p10-p90
over its repetitions (the `normfuse bench` JSON's time_p10_us and
time_p90_us; as fractions, the p90 time's fraction first), "-" where the
run has none (written before 2d40f84): whether a case that reads apart in
two runs moved as a whole or mixes two levels within each.

Exit status: 0, or 2 on usage errors or a file that is no bench run (named
on stderr with what is wrong: read_runs).
"""
import argparse
import json
import os
import re
import statistics
import sys


def first_cases(run, keep, key):
    """{key(c): c} over the cases c of a bench run for which keep(c) holds, the
    first case of each key: a run's cases of one kind, by shape.  The one rule
    every tool here reads a run by: a case timed twice in one run (a grid of
    all ops re-times RMSNorm 65536 x 1024 in the pre-norm grid) counts as its
    first timing, the one its own grid made."""
    found = {}
    for c in run.get("cases", []):
        if keep(c):
            found.setdefault(key(c), c)
    return found


def keyed_cases(run):
    """{(op, impl, shape): case} of a bench run, by first_cases' rule."""
    def key(c):
        return c["op"], c["impl"], tuple(sorted(c["shape"].items()))
    return first_cases(run, lambda c: True, key)


# The numbers a case of `normfuse bench --json` (or of torch_baseline.py) may
# carry: each a number, or null (a case that failed has no time).
CASE_NUMBERS = ("time_us", "time_p10_us", "time_p90_us", "bytes", "flops",
                "t_fused_us", "t_gemm_us", "t_norm_us", "hidden_pct")


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def run_problem(run, required, case_fields):
    """What makes a parsed JSON file no bench run the tools can read, or None.
    A run is an object with each of `required` present and not empty, its
    copy_bw_tbs (where given) a positive number, and its cases a list of
    objects, each with a string op and impl, a shape of integers, each of
    `case_fields` a number and its other numbers (CASE_NUMBERS) numbers or
    null: what the tools index without asking."""
    if not isinstance(run, dict):
        return "not a JSON object (not a normfuse bench run?)"
    for field in required:
        if not run.get(field):
            return "no %s (not a normfuse bench run?)" % field
    bw = run.get("copy_bw_tbs")
    if bw is not None and not (is_number(bw) and bw > 0):
        return "copy_bw_tbs is %s, not a positive number" % json.dumps(bw)
    cases = run.get("cases", [])
    if not isinstance(cases, list):
        return "cases is not a list"
    for i, c in enumerate(cases, 1):
        if not isinstance(c, dict):
            return "case %d is not an object" % i
        where = "case %d" % i + (" (%s)" % c["op"] if isinstance(c.get("op"), str) else "")
        for field, kind, what in (("op", str, "a string"), ("impl", str, "a string"), ("shape", dict, "an object")):
            if field not in c:
                return "%s: no %s" % (where, field)
            if not isinstance(c[field], kind):
                return "%s: %s is not %s" % (where, field, what)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in c["shape"].values()):
            return "%s: shape holds a value that is not an integer" % where
        for field in case_fields:
            if not is_number(c.get(field)):
                return "%s: %s is %s, not a number" % (where, field,
                                                       json.dumps(c[field]) if field in c else "missing")
        for field in CASE_NUMBERS:
            if c.get(field) is not None and not is_number(c[field]):
                return "%s: %s is %s, not a number" % (where, field, json.dumps(c[field]))
    return None


def read_runs(tool, paths, required=("cases",), case_fields=()):
    """The bench JSON of each of paths, each a run by run_problem's rule (each of
    `required` present and not empty, each case with `case_fields`); None, after
    naming the first file that is not and why (`tool: path: why`, one line on
    stderr), where one is unreadable, not JSON or not such a run.  The one way
    every tool here reads a bench run."""
    runs = []
    for path in paths:
        try:
            with open(path) as f:
                run = json.load(f)
            why = run_problem(run, required, case_fields)
        except OSError as e:
            why = e.strerror or str(e)
        except ValueError as e:  # json's decoding error, or bytes that are not UTF-8
            why = "not JSON (%s)" % e
        if why:
            print("%s: %s: %s" % (tool, path, why), file=sys.stderr)
            return None
        runs.append(run)
    return runs


def copy_fraction(run, c):
    """Case c's bytes moved per second as a fraction of its run's measured copy
    bandwidth, or None where it failed (no time): the measure of the norms' goal."""
    if not c.get("time_us"):
        return None
    return c["bytes"] / (c["time_us"] * 1e-6) / 1e12 / run["copy_bw_tbs"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--time", action="store_true", help="print microseconds, not the bandwidth fraction")
    ap.add_argument("--impl", default=None, help="only this impl (ref, vendor, fused)")
    ap.add_argument("--rounds", action="store_true",
                    help="group runs named <variant>_r<N>: mean and range per variant over its rounds")
    ap.add_argument("--spread", action="store_true",
                    help="plain table: each run's p10-p90 over its repetitions beside the median")
    args = ap.parse_args()
    if args.spread and args.rounds:
        ap.error("--spread reads each run alone; it does not combine with --rounds")
    # a fraction of copy bandwidth needs the run's copy_bw_tbs and each case's bytes
    read = read_runs("bench_compare", args.runs, ("cases",) if args.time else ("cases", "copy_bw_tbs"),
                     () if args.time else ("bytes",))
    if read is None:
        return 2
    runs = [(run, keyed_cases(run)) for run in read]
    keys = [k for k in runs[0][1] if all(k in r[1] for r in runs[1:])]
    if args.impl:
        keys = [k for k in keys if k[1] == args.impl]
    names = [os.path.splitext(os.path.basename(p))[0] for p in args.runs]
    if len(set(names)) < len(names):  # r1/bench.json, r2/bench.json: name them by folder too
        names = [os.path.join(os.path.basename(os.path.dirname(os.path.abspath(p))), n)
                 for p, n in zip(args.runs, names)]

    def value(run, c, field="time_us"):
        """The case's number in this run (its median, or the repetitions' `field`), or None
        where it failed or the run lacks the field."""
        if args.time:
            return c.get(field)
        return copy_fraction(run, dict(c, time_us=c.get(field)))

    fmt = "%.1f" if args.time else "%.3f"
    rows = sorted(keys, key=lambda k: (k[0], k[1], k[2]))
    if args.rounds:
        groups = {}  # variant -> indices of its runs, in the order first seen
        for i, n in enumerate(names):
            groups.setdefault(re.sub(r"_r\d+$", "", n), []).append(i)
        width = max(19, *(len(g) for g in groups))
        print("%-14s %-7s %-26s " % ("op", "impl", "shape") + " ".join("%*s" % (width, g) for g in groups)
              + "  best (rounds: %s)" % ", ".join("%s %d" % (g, len(ix)) for g, ix in groups.items()))
        per_op = {}  # (op, impl) -> {"ratios": {variant: [..]}, "wins": {variant: n}}
        for k in rows:
            def at(i):
                """The case's number in run i."""
                return value(runs[i][0], runs[i][1][k])

            cols, means, spans = [], {}, {}
            for g, ix in groups.items():
                vals = [at(i) for i in ix]
                if any(v is None for v in vals):
                    cols.append("%*s" % (width, "failed"))
                    continue
                means[g], spans[g] = statistics.mean(vals), (min(vals), max(vals))
                cell = (fmt + " " + fmt + "-" + fmt) % (means[g], min(vals), max(vals))
                cols.append("%*s" % (width, cell))
            pick = min if args.time else max
            if not means:
                print("%-14s %-7s %-26s " % (k[0], k[1], " ".join("%s=%s" % kv for kv in k[2]))
                      + " ".join(cols) + "  -")
                continue
            best = pick(means, key=means.get)
            lo, hi = spans[best]
            # rounds the best won outright: its j-th run ahead of every other variant's j-th
            nr = min(len(ix) for ix in groups.values())
            better = (lambda x, y: x < y) if args.time else (lambda x, y: x > y)
            won = sum(all(better(at(groups[best][j]), at(ix[j]))
                          for g, ix in groups.items() if g != best and g in means)
                      for j in range(nr))
            op = per_op.setdefault((k[0], k[1]), {"ratios": {g: [] for g in groups}, "wins": dict.fromkeys(groups, 0)})
            first = next(iter(groups))
            if first in means:
                for g in means:
                    op["ratios"][g].append(means[g] / means[first] if args.time else means[first] / means[g])
            if any(g != best and spans[g][0] <= hi and lo <= spans[g][1] for g in spans):
                best = "(%s)" % best  # its range overlaps another's: within the spread
            else:
                op["wins"][best] += 1
            best += " %d/%d" % (won, nr)
            print("%-14s %-7s %-26s " % (k[0], k[1], " ".join("%s=%s" % kv for kv in k[2]))
                  + " ".join(cols) + "  " + best)
        first = next(iter(groups))
        for (op, impl), d in per_op.items():
            wins = ", ".join("%s %d" % (g, n) for g, n in d["wins"].items())
            for g in list(groups)[1:]:
                r = d["ratios"][g]
                if not r:
                    print("summary %s %s: %s / %s: no case where both ran; clear wins: %s" % (op, impl, g, first, wins))
                    continue
                print("summary %s %s: %s / %s time %.3f-%.3f, median %.3f over %d case(s); clear wins: %s"
                      % (op, impl, g, first, min(r), max(r), statistics.median(r), len(r), wins))
        return
    def cell(run, c):
        v = value(run, c)
        if v is None:
            return "failed"
        if not args.spread:
            return fmt % v
        lo, hi = value(run, c, "time_p10_us"), value(run, c, "time_p90_us")
        if lo is None or hi is None:
            return (fmt + " [-]") % v
        lo, hi = min(lo, hi), max(lo, hi)  # as fractions the p90 time is the lower end
        return (fmt + " [" + fmt + "-" + fmt + "]") % (v, lo, hi)

    width = max(25 if args.spread else 10, *(len(n) for n in names))
    print("%-14s %-7s %-26s " % ("op", "impl", "shape") + " ".join("%*s" % (width, n) for n in names))
    for k in rows:
        shape = " ".join("%s=%s" % kv for kv in k[2])
        cols = ["%*s" % (width, cell(run, cases[k])) for run, cases in runs]
        print("%-14s %-7s %-26s " % (k[0], k[1], shape) + " ".join(cols))


if __name__ == "__main__":
    sys.exit(main())
