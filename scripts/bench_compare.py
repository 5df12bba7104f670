#!/usr/bin/env python3
"""bench_compare.py RUN.json [RUN.json ...] — compare `normfuse bench` runs.

One row per (op, impl, shape) present in every run; one column per run with
the case's fraction of that run's measured copy bandwidth (memory-bound ops)
or its time in microseconds (--time); a case that failed in a run (no time)
prints "failed" there.  Used for the A/B runs under reports/h200/ab_*/.
"""
import argparse
import json
import os


def load(path):
    with open(path) as f:
        run = json.load(f)
    cases = {}
    for c in run["cases"]:
        key = (c["op"], c["impl"], tuple(sorted(c["shape"].items())))
        cases[key] = c
    return run, cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--time", action="store_true", help="print microseconds, not the bandwidth fraction")
    ap.add_argument("--impl", default=None, help="only this impl (ref, vendor, fused)")
    args = ap.parse_args()
    runs = [load(p) for p in args.runs]
    keys = [k for k in runs[0][1] if all(k in r[1] for r in runs[1:])]
    if args.impl:
        keys = [k for k in keys if k[1] == args.impl]
    names = [os.path.splitext(os.path.basename(p))[0] for p in args.runs]
    width = max(10, *(len(n) for n in names))
    print("%-14s %-7s %-26s " % ("op", "impl", "shape") + " ".join("%*s" % (width, n) for n in names))
    for k in sorted(keys, key=lambda k: (k[0], k[1], k[2])):
        shape = " ".join("%s=%s" % kv for kv in k[2])
        cols = []
        for run, cases in runs:
            c = cases[k]
            if c.get("time_us") is None:
                cols.append("%*s" % (width, "failed"))
            elif args.time:
                cols.append("%*.1f" % (width, c["time_us"]))
            else:
                cols.append("%*.3f" % (width, c["bytes"] / (c["time_us"] * 1e-6) / 1e12 / run["copy_bw_tbs"]))
        print("%-14s %-7s %-26s " % (k[0], k[1], shape) + " ".join(cols))


if __name__ == "__main__":
    main()
