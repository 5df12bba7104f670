#!/usr/bin/env python3
"""bwd_phases.py TRACE.csv [TRACE.csv ...] [--bench BENCH.json] — where a norm backward launch's time goes.

Reads the per-CTA records of a build with the phase trace
(`cmake -DNF_TRACE_PHASES=ON`, ref/norm_bwd_trace.cuh) and prints, in us
from the first row CTA's entry, the spread over CTAs (min, median, max) of:
each row CTA's entry, its first row done, its time per row group after the
first, its row loop done, its column write (a duration: the cluster's
barriers and the partial rows' stores), its end (also by how many row
groups it ran), and each reducer CTA's entry, release from its PDL wait and
end; then the span from the first entry to the last end.  CTAs that
recorded nothing (in traces from before the reducer launched CTAs only for
the sums asked for: RMSNorm's db CTAs) are left out.  --bench: a
`normfuse bench --json` run of the same build without the trace, whose
time for the case is printed beside it (a traced launch's own time
includes reading the records back).

Exit status: 0, or 2 on a file that is not such a trace, or a --bench file
that is no bench run (read_runs).
"""
import argparse
import gzip
import statistics
import sys

from bench_compare import copy_fraction, first_cases, read_runs


def spread(values):
    v = sorted(values)
    return "min %8.2f  med %8.2f  max %8.2f" % (v[0], statistics.median(v), v[-1])


def trace_lines(path, columns, keys, what):
    """(header fields, record lines) of a trace CSV (gzipped where its name ends in .gz)
    whose header line starts with `columns` and names the op and each of `keys`
    as an integer (key=value); ValueError naming `what` or the field else."""
    try:
        with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
            lines = [line.rstrip("\n") for line in f if line.strip()]
    except EOFError:
        raise ValueError("a gzip file cut short") from None
    if not lines or not lines[0].startswith(columns):
        raise ValueError("not a %s (no header line)" % what)
    head = dict(kv.split("=", 1) for kv in lines[0].split(",") if "=" in kv)
    for key in ("op",) + keys:
        if key not in head:
            raise ValueError("the header names no %s" % key)
        if key != "op" and not head[key].isdigit():
            raise ValueError("the header's %s, %s, is not an integer" % (key, head[key]))
    return head, lines[1:]


def read_trace(path):
    """(header fields, row records, reducer records); records as lists of ints, unrecorded ones dropped."""
    head, lines = trace_lines(path, "kernel,cta,sm,", ("grid", "cluster", "cta_threads", "M", "n"),
                              "norm backward trace")
    rows, sums = [], []
    for line in lines:
        fields = line.split(",")
        if len(fields) < {"row": 8, "sum": 6}.get(fields[0], 0):
            raise ValueError("a %s line short of fields: %s" % (fields[0], line[:60]))
        if fields[0] == "row":  # row,cta,sm,t0,t1,t2,t3,groups
            rec = [int(x) for x in fields[1:8]]
            if rec[2] and rec[5]:
                rows.append(rec)
        elif fields[0] == "sum":  # sum,cta,sm,t0,t1,t2,,
            rec = [int(x) for x in fields[1:6]]
            if rec[2] and rec[4]:
                sums.append(rec)
        else:
            raise ValueError("a line neither row nor sum: %s" % line[:60])
    return head, rows, sums


def bench_times(run):
    """{(op, M, n): (time, fraction of copy bandwidth or None)} of a bench run's timed ref cases."""
    cases = first_cases(run, lambda c: c["impl"] == "ref" and {"M", "n"} <= c["shape"].keys() and c.get("time_us"),
                        lambda c: (c["op"], c["shape"]["M"], c["shape"]["n"]))
    return {k: (c["time_us"], copy_fraction(run, c) if run.get("copy_bw_tbs") else None) for k, c in cases.items()}


def report(path, head, rows, sums, times):
    M, n = int(head["M"]), int(head["n"])
    print("== %s: %s M = %d, n = %d, grid %s, cluster %s, %s threads per CTA"
          % (path, head["op"], M, n, head["grid"], head["cluster"], head["cta_threads"]))
    case = times.get((head["op"], M, n))
    if case:
        t, frac = case
        print("   bench (untraced): %.1f us%s" % (t, ", %.3f of copy bandwidth" % frac if frac is not None else ""))
    if not rows:
        print("   no row CTA recorded: only the pipelined row kernel (norm_bwd_pipe) is traced")
        return
    t0 = min(r[2] for r in rows)
    us = lambda t: (t - t0) / 1e3
    print("   row CTAs' entry           %s" % spread([us(r[2]) for r in rows]))
    print("   first row group done      %s" % spread([us(r[3]) for r in rows]))
    steady = [(r[4] - r[3]) / 1e3 / (r[6] - 1) for r in rows if r[6] > 1]
    if steady:
        print("   per row group after it    %s  (row groups per CTA %d-%d)"
              % (spread(steady), min(r[6] for r in rows), max(r[6] for r in rows)))
    print("   row loop done             %s" % spread([us(r[4]) for r in rows]))
    print("   column write (duration)   %s" % spread([(r[5] - r[4]) / 1e3 for r in rows]))
    print("   row CTA done              %s" % spread([us(r[5]) for r in rows]))
    for g in sorted(set(r[6] for r in rows)):
        ends = [us(r[5]) for r in rows if r[6] == g]
        print("     with %4d row groups (%4d CTAs): done %s" % (g, len(ends), spread(ends)))
    end = max(us(r[5]) for r in rows)
    if sums:
        print("   reducer CTAs' entry       %s" % spread([us(s[2]) for s in sums]))
        print("   reducer past PDL wait     %s" % spread([us(s[3]) for s in sums]))
        print("   reducer CTA done          %s" % spread([us(s[4]) for s in sums]))
        end = max(end, max(us(s[4]) for s in sums))
    print("   span, first row CTA's entry to the last end: %.2f us" % end)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="+", help="CSV files a NF_TRACE_PHASES build wrote (NF_TRACE)")
    ap.add_argument("--bench", help="a `normfuse bench --json` run of the same build, untraced")
    args = ap.parse_args()
    times = {}
    if args.bench:
        bench = read_runs("bwd_phases", [args.bench], case_fields=("bytes",))
        if bench is None:
            return 2
        times = bench_times(bench[0])
    for path in args.traces:
        try:
            head, rows, sums = read_trace(path)
        except (OSError, ValueError) as e:
            print("bwd_phases: %s: %s" % (path, e), file=sys.stderr)
            return 2
        report(path, head, rows, sums, times)
    return 0


if __name__ == "__main__":
    sys.exit(main())
