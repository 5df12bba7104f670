#!/usr/bin/env python3
"""prenorm_trace.py TRACE.csv [TRACE.csv ...] — where a pre-norm GEMM launch's time goes, CTA by CTA.

Reads the records of a build with the trace (NF_TRACE_PHASES, fused/prenorm_trace.cuh:
each CTA's entry, SM, exit after its last stores, and each of its tiles' start,
stores issued and, in traces since it was recorded, mainloop end) and prints one
block per trace, times in us from the first CTA's entry:
- span: first entry to last exit (the kernel's own duration, free of the traced
  launch's read-back);
- per tile, start to stores issued: a CTA's first tile (the ring filling) and the
  rest, apart (min, median, max over tiles), how much longer the first is (medians),
  and each CTA's median tile;
- where the mainloop's end is recorded, each tile's mainloop (start to its last wgmma
  done) and epilogue (that to its stores issued, the tensor cores idle in that
  warpgroup), and the epilogues' share of the tiles' time;
- tiles per CTA, and each count's CTAs with the median of their exits;
- the CTAs' exits (min, median, max) and the tail: from the first exit to the last,
  with how many CTAs were still running at the first;
- idle: the SM time after each CTA's exit until the last one's, as a share of
  grid x span: what a perfectly even division of the same tiles could win at most;
- the last CTA out: its tiles and its median tile against the median CTA's.
With several traces a last table puts their spans, tails, idle shares and tile
medians side by side.  Traces may be gzipped (.gz).

Exit status: 0, or 2 on a file that is not such a trace.
"""
import argparse
import statistics
import sys

from bwd_phases import spread, trace_lines


def read_trace(path):
    """(header fields, CTAs {cta: [sm, entry, exit, tiles]}, tiles {cta: [[start, end(, loop_end)], ...]})
    in ns; CTAs that recorded nothing dropped."""
    head, lines = trace_lines(path, "kind,cta,sm,t0,t1,n,", ("grid", "M", "K", "N", "BN"), "pre-norm GEMM trace")
    ctas, tiles = {}, {}
    for line in lines:
        fields = line.split(",")
        if fields[0] not in ("cta", "tile") or len(fields) not in {"cta": (6,), "tile": (5, 6)}[fields[0]]:
            raise ValueError("neither a cta nor a tile record: %s" % line[:60])
        rec = [int(x) for x in fields[1:]]
        if fields[0] == "cta":
            if rec[2] and rec[3]:
                ctas[rec[0]] = rec[1:]
        elif rec[2] and rec[3]:
            tiles.setdefault(rec[0], []).append(rec[2:])
    if not ctas:
        raise ValueError("no CTA recorded anything")
    for cta in tiles:
        if cta not in ctas:
            raise ValueError("tiles of CTA %d, which has no cta record" % cta)
    return head, ctas, tiles


def summary(ctas, tiles):
    """The numbers of one trace, in us from its first entry."""
    t0 = min(c[1] for c in ctas.values())
    us = lambda t: (t - t0) / 1e3
    exits = {cta: us(c[2]) for cta, c in ctas.items()}
    span = max(exits.values())
    first_exit = min(exits.values())
    per = {cta: [us(t[1]) - us(t[0]) for t in ts] for cta, ts in tiles.items()}
    by_count = {}
    for cta, c in ctas.items():
        by_count.setdefault(c[3], []).append(exits[cta])
    cta_med = {cta: statistics.median(v) for cta, v in per.items() if v}
    timed = [t for ts in tiles.values() for t in ts if len(t) == 3 and t[2]]
    mainloops = [(t[2] - t[0]) / 1e3 for t in timed]
    epilogues = [(t[1] - t[2]) / 1e3 for t in timed]
    last = max(exits, key=exits.get)
    return {
        "span": span,
        "first_tiles": [v[0] for v in per.values() if v],
        "later_tiles": [x for v in per.values() for x in v[1:]],
        "cta_tile_med": list(cta_med.values()),
        "by_count": sorted(by_count.items()),
        "exits": list(exits.values()),
        "tail": span - first_exit,
        "running_at_first_exit": sum(1 for c in ctas.values() if us(c[1]) <= first_exit < us(c[2])),
        "idle": sum(span - e for e in exits.values()) / (len(exits) * span) if span > 0 else 0.0,
        "sms": len({c[0] for c in ctas.values()}),
        "last": (last, ctas[last][0], ctas[last][3], cta_med.get(last)),
        "median_cta_tile": statistics.median(cta_med.values()) if cta_med else float("nan"),
        "mainloops": mainloops,
        "epilogues": epilogues,
        "epilogue_share": sum(epilogues) / (sum(t[1] - t[0] for t in timed) / 1e3) if timed else None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="+", help="CSV files a NF_TRACE_PHASES build wrote (NF_TRACE_PRENORM)")
    args = ap.parse_args()
    done = []
    for path in args.traces:
        try:
            head, ctas, tiles = read_trace(path)
        except (OSError, ValueError) as e:
            print("prenorm_trace: %s: %s" % (path, e), file=sys.stderr)
            return 2
        s = summary(ctas, tiles)
        done.append((path, s))
        print("# %s: %s %s M=%s K=%s N=%s (BN %s), %s CTAs, %d recorded, on %d SMs"
              % (path, head["op"], head.get("variant", "?"), head["M"], head["K"], head["N"], head["BN"],
                 head["grid"], len(ctas), s["sms"]))
        print("span (first entry to last exit)    %8.2f us" % s["span"])
        if s["first_tiles"]:
            print("first tile of a CTA, to its stores  %s" % spread(s["first_tiles"]))
        if s["later_tiles"]:
            print("later tiles, start to stores        %s" % spread(s["later_tiles"]))
        if s["first_tiles"] and s["later_tiles"]:
            print("first tile over a later one         %8.2f us (medians; %d k-tiles of 64 a tile)"
                  % (statistics.median(s["first_tiles"]) - statistics.median(s["later_tiles"]),
                     (int(head["K"]) + 63) // 64))
        if s["cta_tile_med"]:
            print("each CTA's median tile              %s" % spread(s["cta_tile_med"]))
        if s["epilogues"]:
            print("mainloop, start to last wgmma       %s" % spread(s["mainloops"]))
            print("epilogue, last wgmma to stores      %s" % spread(s["epilogues"]))
            print("epilogues' share of the tiles' time %8.1f %%" % (100.0 * s["epilogue_share"]))
        for count, ends in s["by_count"]:
            print("CTAs with %4d tiles: %4d, their exits' median %8.2f us" % (count, len(ends), statistics.median(ends)))
        print("exits                               %s" % spread(s["exits"]))
        print("tail (first exit to the last)       %8.2f us, %d CTAs still running then"
              % (s["tail"], s["running_at_first_exit"]))
        print("idle after exits                    %8.1f %% of grid x span" % (100.0 * s["idle"]))
        cta, sm, n, med = s["last"]
        print("last out: CTA %d on SM %d, %d tiles, median tile %s us (the median CTA's %.2f)"
              % (cta, sm, n, "%.2f" % med if med is not None else "-", s["median_cta_tile"]))
        print()
    if len(done) > 1:
        print("%-44s %8s %8s %7s %9s %6s" % ("trace", "span", "tail", "idle%", "tile med", "epi%"))
        for path, s in done:
            tiles = s["later_tiles"] or s["first_tiles"]
            epi = "%6.1f" % (100.0 * s["epilogue_share"]) if s["epilogue_share"] is not None else "%6s" % "-"
            print("%-44s %8.2f %8.2f %7.1f %9.2f %s" % (path[-44:], s["span"], s["tail"], 100.0 * s["idle"],
                                                        statistics.median(tiles) if tiles else float("nan"), epi))
    return 0


if __name__ == "__main__":
    sys.exit(main())
