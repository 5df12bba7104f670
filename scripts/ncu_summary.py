#!/usr/bin/env python3
"""ncu_summary.py PROFILE.csv[.gz] — one line per bench case and kernel of an Nsight Compute raw CSV.

Reads what `ncu --csv --page raw` writes (non-CSV lines such as ==PROF== notes
are skipped) and prints, per run of launches of one kernel and grid (a bench
case's warm-up and timed launches, also where two kernels alternate, as a
backward's row kernel and its reducer do), in launch order: the launches, the
median duration, the median ratio of the busiest SM's active cycles to the
average SM's (1.00 = every SM busy as long; the uneven end of a persistent
grid shows here), and the median DRAM bytes read and written; --extra adds a
column per further metric (its median, e.g. smsp__inst_executed.sum, the
instructions a launch issued), headed by the name's last 14 characters, or,
where two metrics' would be the same (smsp__warp_issue_stalled_*_per_warp_active.pct),
by [1], [2], ... with a legend line per metric above the table.  A metric the
profile did not collect prints as "-".  The `profile` step of
scripts/gpu_suite.sh writes profile.txt with it; reports/h200/profile_bwd/
holds the CSVs the first such summary was made from (ref/NOTES.md, "Where
the backward's time goes").
"""
import argparse
import csv
import gzip
import re
import statistics
import sys


def number(row, col):
    try:
        return float(row[col].replace(",", ""))
    except (KeyError, ValueError):
        return None


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--extra", default="", help="comma list of further metrics to print (medians)")
    ap.add_argument("--gap", type=int, default=1,
                    help="other launches allowed between two of one run (default 1: a row kernel "
                         "and its reducer; kernels timed in turn by the pre-norm probe need more)")
    args = ap.parse_args()
    extra = [m for m in args.extra.split(",") if m]
    opener = gzip.open if args.csv.endswith(".gz") else open
    with opener(args.csv, "rt", newline="") as f:
        rows = list(csv.DictReader(line for line in f if line.startswith('"')))
    if not rows:
        sys.exit("ncu_summary: no CSV rows in %s" % args.csv)
    if "Kernel Name" not in rows[0] or "gpu__time_duration.sum" not in rows[0]:
        sys.exit("ncu_summary: %s is not an ncu raw-page CSV with gpu__time_duration.sum" % args.csv)
    groups = []  # [(key, metrics)] in launch order
    last = {}  # key -> (index in groups of its current run, launch number of its last launch)
    for n, r in enumerate(x for x in rows if number(x, "gpu__time_duration.sum") is not None):
        # the name without its parameter list, "void" and anonymous namespaces
        name = re.sub(r"\(.*|^void |<unnamed>::", "", r["Kernel Name"]).strip()
        key = (name, r.get("Grid Size", "?"))
        # a launch continues its kernel's run when at most --gap other launches
        # came in between (a backward's row kernel and reducer alternate);
        # anything longer is another case
        i, seen = last.get(key, (None, None))
        if i is None or n - seen > args.gap + 1:
            groups.append((key, {"us": [], "imb": [], "rd": [], "wr": [], **{m: [] for m in extra}}))
            i = len(groups) - 1
        last[key] = (i, n)
        g = groups[i][1]
        g["us"].append(number(r, "gpu__time_duration.sum") / 1e3)
        mx, avg = number(r, "sm__cycles_active.max"), number(r, "sm__cycles_active.avg")
        g["imb"].append(mx / avg if mx is not None and avg else None)
        rd, wr = number(r, "dram__bytes_read.sum"), number(r, "dram__bytes_write.sum")
        g["rd"].append(rd / 1e6 if rd is not None else None)
        g["wr"].append(wr / 1e6 if wr is not None else None)
        for m in extra:
            g[m].append(number(r, m))

    def fmt(v, spec):
        return spec % v if v is not None else "-"

    # an extra metric's column is headed by its name's last 14 characters; where
    # two would read the same (the stall reasons share their ends), by [i], with
    # a legend line per metric above the table
    labels = [m[-14:] for m in extra]
    if len(set(labels)) < len(labels):
        labels = ["[%d]" % (i + 1) for i in range(len(extra))]
        for label, m in zip(labels, extra):
            print("# %s %s" % (label, m))
    print("%-58s %-14s %5s %10s %8s %10s %10s" % ("kernel", "grid", "runs", "median us", "max/avg",
                                                 "read MB", "write MB") +
          "".join(" %14s" % label for label in labels))
    for (name, grid), g in groups:
        print("%-58.58s %-14s %5d %10s %8s %10s %10s" % (
            name, grid, len(g["us"]), fmt(median(g["us"]), "%.1f"), fmt(median(g["imb"]), "%.3f"),
            fmt(median(g["rd"]), "%.1f"), fmt(median(g["wr"]), "%.1f")) +
            "".join(" %14s" % fmt(median(g[m]), "%.4g") for m in extra))


if __name__ == "__main__":
    main()
