#!/usr/bin/env python3
"""fwd_trace.py TRACE.csv [TRACE.csv ...] — where a norm forward launch's time goes, CTA by CTA.

Reads the per-CTA records of a build with the phase trace
(`cmake -DNF_TRACE_PHASES=ON`, ref/norm_fwd_trace.cuh: each CTA's entry,
its row's statistics done, its stores issued, its SM) and prints one block
per trace, times in us from the first CTA's entry:
- span: first entry to last store (the kernel's own duration, free of the
  traced launch's read-back);
- per CTA: entry to statistics, statistics to stores, entry to stores
  (min, median, max over CTAs);
- per SM: CTAs run (min, max), and the time its last CTA ended (min,
  median, max over SMs): how unevenly the SMs finish;
- tail: from the first SM's last store to the kernel's last store, and how
  many CTAs were still running when the first SM ran out of work;
- the first round (the CTAs that entered before any CTA issued its stores):
  when they had their statistics and when they issued their stores (min,
  median, max): whether they end together whatever their loads' pace;
- steady rate: rows stored per us from the first round's last store to the
  first SM's last (the stretch where every SM has work and none is starting);
- with --window W, rows stored per us in each window of W us from the start.
With several traces (separate processes of one case: the LayerNorm forward
at n = 16384 reads one of two levels per process, ref/NOTES.md item 58) a
last table puts their spans, tails, CTA medians, first rounds' ends and
steady rates side by side.  Traces may be gzipped (.gz).

Exit status: 0, or 2 on a file that is not such a trace.
"""
import argparse
import statistics
import sys

from bwd_phases import spread, trace_lines


def read_trace(path):
    """(header fields, records [cta, sm, t0, t1, t2] in ns); CTAs that recorded nothing dropped."""
    head, lines = trace_lines(path, "kernel,cta,sm,t0,t1,t2,", ("grid", "cta_threads", "rows_per_cta", "M", "n"),
                              "norm forward trace")
    recs = []
    for line in lines:
        fields = line.split(",")
        if fields[0] != "fwd" or len(fields) != 6:
            raise ValueError("not a forward record: %s" % line[:60])
        rec = [int(x) for x in fields[1:6]]
        if rec[2] and rec[4]:
            recs.append(rec)
    if not recs:
        raise ValueError("no CTA recorded anything")
    return head, recs


def summary(recs):
    """The numbers of one trace, in us from its first entry."""
    t0 = min(r[2] for r in recs)
    us = [[r[0], r[1], (r[2] - t0) / 1e3, (r[3] - t0) / 1e3 if r[3] else None, (r[4] - t0) / 1e3] for r in recs]
    by_sm = {}
    for r in us:
        by_sm.setdefault(r[1], []).append(r)
    sm_end = {sm: max(r[4] for r in rs) for sm, rs in by_sm.items()}
    first_idle = min(sm_end.values())
    span = max(r[4] for r in us)
    first_store = min(r[4] for r in us)
    first_round = [r for r in us if r[2] < first_store]
    round_end = max(r[4] for r in first_round)
    steady = sum(1 for r in us if round_end < r[4] <= first_idle)
    return {
        "span": span,
        "stats": [r[3] - r[2] for r in us if r[3] is not None],
        "stores": [r[4] - r[3] for r in us if r[3] is not None],
        "cta": [r[4] - r[2] for r in us],
        "ctas_per_sm": [len(rs) for rs in by_sm.values()],
        "sm_end": list(sm_end.values()),
        "tail": span - first_idle,
        "running_at_first_idle": sum(1 for r in us if r[2] <= first_idle < r[4]),
        "sms": len(by_sm),
        "first_round": len(first_round),
        "first_round_stats": [r[3] for r in first_round if r[3] is not None],
        "first_round_stores": [r[4] for r in first_round],
        "steady_span": (round_end, first_idle),
        "steady_ctas": steady,
        "ends": [r[4] for r in us],
    }


def rows_per_us(ctas, seconds_us, rows_per_cta):
    return ctas * rows_per_cta / seconds_us if seconds_us > 0 else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="+", help="CSV files a NF_TRACE_PHASES build wrote (NF_TRACE_FWD)")
    ap.add_argument("--window", type=float, metavar="W", help="also rows stored per us in windows of W us")
    args = ap.parse_args()
    if args.window is not None and not args.window > 0:
        ap.error("--window: %s is not a positive number of us" % args.window)
    done = []
    for path in args.traces:
        try:
            head, recs = read_trace(path)
        except (OSError, ValueError) as e:
            print("fwd_trace: %s: %s" % (path, e), file=sys.stderr)
            return 2
        s = summary(recs)
        rows = int(head["rows_per_cta"])
        done.append((path, s, rows))
        print("# %s: %s M=%s n=%s, %s CTAs of %s threads (%s rows each), %d recorded, on %d SMs"
              % (path, head["op"], head["M"], head["n"], head["grid"], head["cta_threads"], head["rows_per_cta"],
                 len(recs), s["sms"]))
        print("span (first entry to last store)  %8.2f us" % s["span"])
        print("per CTA, entry to statistics      %s" % spread(s["stats"]))
        print("per CTA, statistics to stores     %s" % spread(s["stores"]))
        print("per CTA, entry to stores          %s" % spread(s["cta"]))
        print("CTAs per SM                       min %d  max %d" % (min(s["ctas_per_sm"]), max(s["ctas_per_sm"])))
        print("SM's last store                   %s" % spread(s["sm_end"]))
        print("tail (first SM done to the end)   %8.2f us, %d CTAs still running then"
              % (s["tail"], s["running_at_first_idle"]))
        print("first round: %d CTAs" % s["first_round"])
        print("  their statistics                %s" % spread(s["first_round_stats"]))
        print("  their stores                    %s" % spread(s["first_round_stores"]))
        lo, hi = s["steady_span"]
        print("steady rate (%.2f to %.2f us)    %8.2f rows/us" % (lo, hi, rows_per_us(s["steady_ctas"], hi - lo, rows)))
        if args.window:
            counts = [0] * (int(s["span"] // args.window) + 1)
            for end in s["ends"]:
                counts[int(end // args.window)] += 1
            print("rows stored per us, by %g us window from the start:" % args.window)
            print("  " + " ".join("%.1f" % rows_per_us(c, args.window, rows) for c in counts))
        print()
    if len(done) > 1:
        print("%-40s %8s %8s %9s %9s %9s %9s" % ("trace", "span", "tail", "CTA med", "stats med", "round 1",
                                                 "steady"))
        for path, s, rows in done:
            lo, hi = s["steady_span"]
            print("%-40s %8.2f %8.2f %9.2f %9.2f %9.2f %9.2f"
                  % (path[-40:], s["span"], s["tail"], statistics.median(s["cta"]), statistics.median(s["stats"]),
                     lo, rows_per_us(s["steady_ctas"], hi - lo, rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
