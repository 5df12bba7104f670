#!/usr/bin/env python3
"""torch_baseline.py — time PyTorch's pre-norm GEMM on the SPEC.md seed grid.

The comparison issue 5 asks for: RMSNorm(A; g) @ W in PyTorch eager and under
torch.compile, timed the way `normfuse bench` times (CUDA events around the
op alone, L2 flushed before each run by reading 256 MiB, or with --flush write
by rewriting it, median of --reps),
on random bf16 inputs.  Writes JSON in `normfuse bench`'s case schema
({"op", "impl", "shape", "time_us", "bytes", "flops"}) so reports can join
the two files by (op, shape).

    python3 scripts/torch_baseline.py --json reports/h200/torch.json [--quick] [--against bench.json]

--against names a `normfuse bench` JSON of the same machine (ideally of the same
run): each torch case then carries the fused kernel's time for its shape
("fused_us") and torch's time over it ("fused_speedup"), and a table of the
ratios is printed last.
"""
import argparse
import datetime
import json
import statistics
import sys

import torch

FLUSH_BYTES = 256 << 20


def rmsnorm_linear(a, g, w, eps: float):
    a32 = a.float()
    rstd = torch.rsqrt(a32.pow(2).mean(dim=-1, keepdim=True) + eps)
    return ((a32 * rstd) * g.float()).to(torch.bfloat16) @ w


def time_us(fn, reps, flush, flush_read):
    for _ in range(3):
        fn()
    times = []
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for i in range(reps):
        if flush_read:
            flush.view(torch.int32).max()  # reads every line, writes one scalar
        else:
            flush.fill_(i & 0xFF)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(times)


def fused_times(path):
    """{(M, K, N): t_fused_us} of the pre-norm fused cases of a bench JSON, and the run's header."""
    with open(path) as f:
        run = json.load(f)
    times = {}
    for c in run["cases"]:
        if c["op"] == "prenorm_fwd" and c["impl"] == "fused" and c.get("time_us") is not None:
            s = c["shape"]
            times[(s["M"], s["K"], s["N"])] = c["time_us"]
    return times, {k: run.get(k) for k in ("gpu", "date", "command")}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", required=True)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--quick", action="store_true", help="first M only")
    p.add_argument("--seed", type=int, default=20261129)
    p.add_argument("--flush", choices=("read", "write"), default="read",
                   help="how L2 is flushed before each timed run (as normfuse bench --flush)")
    p.add_argument("--against", help="a normfuse bench JSON: join its fused pre-norm times by shape")
    args = p.parse_args()
    fused, against = fused_times(args.against) if args.against else ({}, None)
    torch.manual_seed(args.seed)
    dev = torch.device("cuda")
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=dev)
    compiled = torch.compile(rmsnorm_linear)
    cases = []
    for M in ([65536] if args.quick else [65536, 131072, 524288]):
        for K in (256, 512, 1024):
            a = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
            g = (1 + 0.1 * torch.randn(K, device=dev)).to(torch.bfloat16)
            for N in (256, 512, 1024):
                w = torch.randn(K, N, device=dev, dtype=torch.bfloat16) / K**0.5
                flops = 2.0 * M * K * N
                nbytes = 2.0 * (M * K + K * N + M * N)
                for impl, fn in (("torch_eager", rmsnorm_linear), ("torch_compile", compiled)):
                    us = time_us(lambda: fn(a, g, w, 1e-6), args.reps, flush, args.flush == "read")
                    case = {"op": "prenorm_fwd", "impl": impl, "shape": {"M": M, "K": K, "N": N},
                            "time_us": round(us, 3), "bytes": nbytes, "flops": flops}
                    if (M, K, N) in fused:
                        case["fused_us"] = fused[(M, K, N)]
                        case["fused_speedup"] = round(us / fused[(M, K, N)], 3)
                    cases.append(case)
                    print(f"prenorm_fwd {impl:14s} M={M} K={K} N={N} {us:10.1f} us", flush=True)
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "command": " ".join(["python3"] + sys.argv), "seed": args.seed, "reps": args.reps, "flush": args.flush,
           "cases": cases}
    if against:
        out["against"] = dict(against, path=args.against)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    joined = [c for c in cases if "fused_us" in c]
    if joined:
        print(f"\ntorch time / fused time (fused from {args.against}, {against['date']}):")
        rows = {}
        for c in joined:
            s = c["shape"]
            rows.setdefault((s["M"], s["K"], s["N"]), {})[c["impl"]] = c
        print(f"{'shape':24s} {'eager us':>9s} {'compile us':>10s} {'fused us':>9s} {'eager/fused':>11s} {'compile/fused':>13s}")
        for (M, K, N), r in rows.items():
            e, cmp_ = r.get("torch_eager"), r.get("torch_compile")
            f_us = (e or cmp_)["fused_us"]
            print(f"{f'M={M} K={K} N={N}':24s} {e['time_us'] if e else float('nan'):9.1f} "
                  f"{cmp_['time_us'] if cmp_ else float('nan'):10.1f} {f_us:9.1f} "
                  f"{e['fused_speedup'] if e else float('nan'):11.2f} {cmp_['fused_speedup'] if cmp_ else float('nan'):13.2f}")
        for impl in ("torch_eager", "torch_compile"):
            r = [c["fused_speedup"] for c in joined if c["impl"] == impl]
            if r:
                print(f"{impl}: {min(r):.2f}-{max(r):.2f}x the fused kernel's time over {len(r)} shapes")
    elif args.against:
        print(f"no fused pre-norm case of {args.against} matches a timed shape", file=sys.stderr)


if __name__ == "__main__":
    main()
