#!/usr/bin/env python3
"""phases.py CSV... [--bench bench.json]: the phases of one traced norm backward
launch (row kernel: entry, first row done, loop end, column write done; reducer:
entry, release from the PDL wait, end), in us from the first row CTA's entry."""
import json, statistics as st, sys

def q(v):
    v = sorted(v)
    return f"min {v[0]:7.2f}  med {st.median(v):7.2f}  max {v[-1]:7.2f}"

args = sys.argv[1:]
bench = {}
if "--bench" in args:
    i = args.index("--bench")
    b = json.load(open(args[i + 1]))
    for c in b["cases"]:
        if c["impl"] == "ref" and "n" in c["shape"]:
            bench[(c["op"], c["shape"]["M"], c["shape"]["n"])] = (c["time_us"], c["bytes"] / c["time_us"] / 1e6 / b["copy_bw_tbs"])
    del args[i:i + 2]
for path in args:
    lines = open(path).read().split("\n")
    head = dict(kv.split("=") for kv in lines[0].split(",") if "=" in kv)
    grid, M, n = int(head["grid"]), int(head["M"]), int(head["n"])
    rows = [l.split(",") for l in lines[1:] if l.startswith("row,")]
    sums = [l.split(",") for l in lines[1:] if l.startswith("sum,")]
    t0 = min(int(r[3]) for r in rows)
    us = lambda x: (int(x) - t0) / 1e3
    op = path.split("/")[-1].split("_")[0] + "_bwd"
    print(f"== {path.split('/')[-1]}: M = {M}, n = {n}, grid {grid}, cluster {head['cluster']}, "
          f"{head['cta_threads']} threads per CTA")
    if (op, M, n) in bench:
        t, f = bench[(op, M, n)]
        print(f"   bench (untraced run of the same build): {t:.1f} us, {f:.3f} of copy bandwidth")
    nrows = [(M - int(r[1]) + grid - 1) // grid for r in rows]
    print(f"   row CTAs' entry          {q([us(r[3]) for r in rows])}")
    print(f"   first row done           {q([us(r[4]) for r in rows])}")
    steady = [(int(r[5]) - int(r[4])) / 1e3 / (k - 1) for r, k in zip(rows, nrows) if k > 1]
    print(f"   per row after the first  {q(steady)}  (rows per CTA {min(nrows)}-{max(nrows)})")
    print(f"   loop end                 {q([us(r[5]) for r in rows])}")
    print(f"   column write (duration)  {q([(int(r[6]) - int(r[5])) / 1e3 for r in rows])}")
    print(f"   row kernel end           {q([us(r[6]) for r in rows])}")
    for k in sorted(set(nrows)):
        ends = [us(r[6]) for r, m in zip(rows, nrows) if m == k]
        print(f"     CTAs with {k} rows ({len(ends):3d}): end {q(ends)}")
    if sums:
        print(f"   reducer CTAs' entry      {q([us(s[3]) for s in sums])}")
        print(f"   reducer past PDL wait    {q([us(s[4]) for s in sums])}")
        print(f"   reducer end              {q([us(s[5]) for s in sums])}")
        end = max(us(s[5]) for s in sums)
    else:
        end = max(us(r[6]) for r in rows)
    print(f"   span, first row CTA's entry to the last end: {end:.2f} us")
