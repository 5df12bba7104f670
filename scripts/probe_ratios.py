#!/usr/bin/env python3
"""probe_ratios.py NUM DEN PROBE.txt [PROBE.txt ...] — one column of the pre-norm probe's table over another, shape by shape.

The probe (fused/tools/run_probe.sh) ends with a table of times in ms: a row
per shape (MxKxN), a column per variant, then auto (the launcher's pick),
cublasLt and roofline.  fused/NOTES.md reads most of its decisions off such
tables as ratios ("coop_n256_s4_dyn over the best static variant"); this
prints them from the probe's own output, so a reading can be checked.

  NUM   a column of the table: a variant's name, auto, cublasLt or roofline
  DEN   a column, or best:A,B,...: per shape the fastest of those columns

One row per shape with each run's NUM / DEN ('-' where either time is
missing: a variant the probe did not run reads inf), then a line per run:
over the shapes with both times, the median ratio, the range, and on how many
shapes NUM is faster (ratio under 1).  --shapes REGEX keeps the shapes whose
name (MxKxN) it matches.  A file's first table is read.

--den-from BASE.txt [BASE.txt ...] reads DEN from other runs, the i-th file of
BASE over the i-th of PROBE (as many of each): a build against another, e.g.
coop_n256_s4 of runs built with NF_PROBE_PATCH over coop_n256_s4 of runs
without it, timed in mirrored order (base, patched, patched, base).

--by-shape adds a line per shape after the runs' lines: over the runs with both times, the
median ratio, the range, and in how many runs NUM is slower (ratio over 1): for auto over
cublasLt, in how many runs a shape misses the pre-norm goal's t_fused <= t_gemm.

--bench BENCH.json [BENCH.json ...] (with --by-shape, for auto over cublasLt
only) sets the bench's reading of the same ratio beside each shape's line:
the median over those runs of t_fused / t_gemm from the bench's pre-norm
summary case (scripts/prenorm_goals.py's fused/gemm), and the probe's median
minus it; then one line: over the shapes both instruments timed, the median
and largest size of that difference and on how many shapes it is within 1 %.
It says whether the probe can stand in for the bench as a forecast of the goal.

--timed PROBE.txt prints the variant columns of that table with a time on at
least one shape (not auto, cublasLt or roofline), space-separated: the
variants a run timed (fused/tools/ab_patches.sh compares those).

Exit status: 0; 2 on usage errors: a file that holds no probe table, a
column it lacks, --den-from naming a different number of files than PROBE, or
--bench without --by-shape, over columns other than auto and cublasLt, or on
a file that is no bench run or holds no pre-norm summary case (each named on
stderr in one line).
"""

import argparse
import re
import statistics
import sys

HEADER = re.compile(r"^M x K x N\s")
ROW = re.compile(r"^\d+x\d+x\d+\s")
NON_TIMES = {"best", "b/gemm", "TFLOP/s", "%roof"}  # the table's columns after the times


class Refused(Exception):
    """A file or a column this tool cannot read; its message is the one line printed."""


def read_table(path):
    """[(shape, {column: ms or None})] of the first probe table in path."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise Refused("%s: %s" % (path, e.strerror)) from e
    start = next((i for i, line in enumerate(lines) if HEADER.match(line)), None)
    if start is None:
        raise Refused("%s: no probe table (no line starting 'M x K x N')" % path)
    names = [n for n in lines[start].split()[5:] if n not in NON_TIMES]
    rows = []
    for line in lines[start + 1:]:
        if not ROW.match(line):
            break
        fields = line.split()
        times = {}
        for name, text in zip(names, fields[1:1 + len(names)]):
            try:
                t = float(text)
            except ValueError as e:
                raise Refused("%s: shape %s: column %s reads '%s', not a time" % (path, fields[0], name, text)) from e
            times[name] = t if 0 < t < float("inf") else None
        rows.append((fields[0], times))
    if not rows:
        raise Refused("%s: a probe table without rows" % path)
    return names, rows


def column_reader(spec, names, path):
    """A function of a row's times giving the time SPEC names (None where missing)."""
    wanted = spec[len("best:"):].split(",") if spec.startswith("best:") else [spec]
    for w in wanted:
        if w not in names:
            raise Refused("%s: no column '%s' (columns: %s)" % (path, w, ", ".join(names)))
    if len(wanted) == 1 and not spec.startswith("best:"):
        return lambda times: times.get(spec)

    def fastest(times):
        got = [times.get(w) for w in wanted]
        return None if None in got else min(got)
    return fastest


def shape_key(name):
    return tuple(int(d) for d in name.split("x"))


def timed_variants(path):
    """The variant columns of path's table with at least one time."""
    names, rows = read_table(path)
    return [n for n in names if n not in ("auto", "cublasLt", "roofline")
            and any(times.get(n) is not None for _, times in rows)]


def bench_ratios(paths):
    """{MxKxN: [t_fused / t_gemm per bench run]} from the pre-norm summary cases of
    the bench runs at paths; Refused on a file that is no bench run or has no such case."""
    # here, not at the top: only --bench needs them
    from bench_compare import read_runs
    from prenorm_goals import summaries  # the summary cases prenorm_goals.py judges the goal on
    runs = read_runs("probe_ratios", paths)
    if runs is None:
        raise Refused(None)  # read_runs has named the file and what is wrong
    got = {}
    for path, run in zip(paths, runs):
        timed = {shape: c for shape, c in summaries(run).items() if c.get("t_fused_us") and c.get("t_gemm_us")}
        if not timed:
            raise Refused("%s: no pre-norm summary case with t_fused_us and t_gemm_us" % path)
        for (m, k, n), c in timed.items():
            got.setdefault("%dx%dx%d" % (m, k, n), []).append(c["t_fused_us"] / c["t_gemm_us"])
    return got


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--timed":
        if len(sys.argv) != 3:
            print("probe_ratios: --timed takes one PROBE.txt", file=sys.stderr)
            return 2
        try:
            print(" ".join(timed_variants(sys.argv[2])))
        except Refused as e:
            print("probe_ratios: %s" % e, file=sys.stderr)
            return 2
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="or: probe_ratios.py --timed PROBE.txt")
    ap.add_argument("num", metavar="NUM")
    ap.add_argument("den", metavar="DEN")
    ap.add_argument("probes", metavar="PROBE.txt", nargs="+")
    ap.add_argument("--shapes", metavar="REGEX", help="the shapes (MxKxN) to keep")
    ap.add_argument("--by-shape", action="store_true",
                    help="a line per shape over the runs: median, range, runs over 1")
    ap.add_argument("--den-from", metavar="BASE.txt", nargs="+",
                    help="read DEN from these runs, pairwise with the PROBE files")
    ap.add_argument("--bench", metavar="BENCH.json", nargs="+",
                    help="with --by-shape, auto cublasLt: the bench's fused/gemm beside each shape")
    args = ap.parse_args()
    if args.bench and not (args.by_shape and args.num == "auto" and args.den == "cublasLt" and not args.den_from):
        print("probe_ratios: --bench sets the bench's fused/gemm beside auto / cublasLt --by-shape only",
              file=sys.stderr)
        return 2
    keep = re.compile(args.shapes) if args.shapes else None
    if args.den_from and len(args.den_from) != len(args.probes):
        print("probe_ratios: --den-from names %d files for %d PROBE files; give as many of each" %
              (len(args.den_from), len(args.probes)), file=sys.stderr)
        return 2

    runs = []  # {shape: ratio or None} per file
    try:
        for i, path in enumerate(args.probes):
            names, rows = read_table(path)
            num = column_reader(args.num, names, path)
            den_path = args.den_from[i] if args.den_from else path
            den_names, den_rows = (names, rows) if den_path == path else read_table(den_path)
            den = column_reader(args.den, den_names, den_path)
            den_times = dict(den_rows)
            ratios = {}
            for shape, times in rows:
                if keep and not keep.search(shape):
                    continue
                a = num(times)
                b = den(den_times[shape]) if shape in den_times else None
                ratios[shape] = a / b if a is not None and b is not None else None
            runs.append(ratios)
        bench = bench_ratios(args.bench) if args.bench else None
    except Refused as e:
        if e.args[0] is not None:
            print("probe_ratios: %s" % e, file=sys.stderr)
        return 2

    shapes = sorted({s for r in runs for s in r}, key=shape_key)
    over = "%s of the --den-from runs" % args.den if args.den_from else args.den
    print("# %s / %s, per shape and run ('-': a time missing)" % (args.num, over))
    print("%-18s" % "shape" + "".join("%8s" % ("run %d" % (i + 1)) for i in range(len(runs))))
    for s in shapes:
        cells = [r.get(s) for r in runs]
        print("%-18s" % s + "".join("%8s" % ("-" if c is None else "%.3f" % c) for c in cells))
    for i, (path, r) in enumerate(zip(args.probes, runs)):
        got = [v for v in r.values() if v is not None]
        name = "%s over %s" % (path, args.den_from[i]) if args.den_from else path
        if not got:
            print("run %d (%s): no shape with both times" % (i + 1, name))
            continue
        print("run %d (%s): median %.3f over %d shapes, %.3f-%.3f, under 1 on %d" %
              (i + 1, name, statistics.median(got), len(got), min(got), max(got), sum(v < 1 for v in got)))
    if args.by_shape:
        print("# per shape over the runs with both times: median, range, runs with %s / %s over 1" %
              (args.num, over))
        diffs = []
        for s in shapes:
            got = [r[s] for r in runs if r.get(s) is not None]
            if not got:
                print("%-18s no run with both times" % s)
                continue
            line = "%-18s median %.3f, %.3f-%.3f, over 1 in %d of %d" % (
                s, statistics.median(got), min(got), max(got), sum(v > 1 for v in got), len(got))
            if bench is not None:
                b = bench.get(s)
                if b:
                    diffs.append(statistics.median(got) - statistics.median(b))
                    line += "; bench %.3f (%.3f-%.3f, %d runs), probe - bench %+.3f" % (
                        statistics.median(b), min(b), max(b), len(b), diffs[-1])
                else:
                    line += "; no bench reading"
            print(line)
        if bench is not None:
            if diffs:
                size = [abs(d) for d in diffs]
                print("# probe - bench over %d shapes: median size %.3f, largest %.3f, within 0.01 on %d" %
                      (len(diffs), statistics.median(size), max(size), sum(d <= 0.01 for d in size)))
            else:
                print("# probe - bench: no shape that both timed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
