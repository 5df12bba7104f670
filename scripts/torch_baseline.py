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
    python3 scripts/torch_baseline.py --join torch.json --against bench.json

--against names a `normfuse bench` JSON of the same machine (ideally of the same
run): each torch case then carries the fused kernel's time for its shape
("fused_us") and torch's time over it ("fused_speedup"), and a table of the
ratios is printed last.  --join does only that, for a torch JSON written
earlier (printed, not rewritten; no GPU or PyTorch needed).

Exit status: 0; 1 when --against matches no torch case; 2 on usage errors or
a file (--against, --join) that is no bench run, named on stderr with what is
wrong (bench_compare.read_runs).
"""
import argparse
import datetime
import json
import statistics
import sys

from bench_compare import first_cases, read_runs

try:
    import torch
except ImportError:  # --join needs no PyTorch; timing does, and says so
    torch = None

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


def mkn(c):
    """A pre-norm case's shape (M, K, N), or None where its shape lacks one."""
    s = c["shape"]
    return (s["M"], s["K"], s["N"]) if all(d in s for d in "MKN") else None


def fused_times(run):
    """{(M, K, N): t_fused_us} of the pre-norm fused cases of a bench run, and the run's header."""
    cases = first_cases(run, lambda c: c["op"] == "prenorm_fwd" and c["impl"] == "fused" and
                        c.get("time_us") is not None and mkn(c), mkn)
    return {k: c["time_us"] for k, c in cases.items()}, {k: run.get(k) for k in ("gpu", "date", "command")}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--json", help="time PyTorch and write its cases here")
    mode.add_argument("--join", help="a torch JSON written earlier: only join it with --against")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--quick", action="store_true", help="first M only")
    p.add_argument("--seed", type=int, default=20261129)
    p.add_argument("--flush", choices=("read", "write"), default="read",
                   help="how L2 is flushed before each timed run (as normfuse bench --flush)")
    p.add_argument("--against", help="a normfuse bench JSON: join its fused pre-norm times by shape")
    args = p.parse_args()
    if args.join and not args.against:
        p.error("--join needs --against")
    fused, against = {}, None
    if args.against:  # read before timing: a wrong file is refused at once
        bench = read_runs("torch_baseline", [args.against], ())
        if bench is None:
            return 2
        fused, against = fused_times(bench[0])
    if args.join:
        earlier = read_runs("torch_baseline", [args.join], case_fields=("time_us",))
        if earlier is None:
            return 2
        return report_join(join(earlier[0]["cases"], fused), args.against, against)
    if torch is None:
        p.error("timing needs PyTorch (import torch failed)")
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
                    cases.append({"op": "prenorm_fwd", "impl": impl, "shape": {"M": M, "K": K, "N": N},
                                  "time_us": round(us, 3), "bytes": nbytes, "flops": flops})
                    print(f"prenorm_fwd {impl:14s} M={M} K={K} N={N} {us:10.1f} us", flush=True)
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "command": " ".join(["python3"] + sys.argv), "seed": args.seed, "reps": args.reps, "flush": args.flush,
           "cases": cases}
    joined = join(cases, fused)
    if against:
        out["against"] = dict(against, path=args.against)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    return report_join(joined, args.against, against) if args.against else 0


def join(cases, fused):
    """Add fused_us and fused_speedup (torch's time over the fused kernel's) to the
    torch cases whose shape the bench timed; the joined cases."""
    joined = []
    for c in cases:
        key = mkn(c)
        if c["op"] == "prenorm_fwd" and c["impl"].startswith("torch") and key in fused:
            c["fused_us"] = fused[key]
            c["fused_speedup"] = round(c["time_us"] / fused[key], 3)
            joined.append(c)
    return joined


def report_join(joined, against_path, against):
    """Print the ratio table of the joined cases; 0, or 1 when none joined."""
    if not joined:
        print(f"no fused pre-norm case of {against_path} matches a torch case", file=sys.stderr)
        return 1
    nan = float("nan")
    print(f"\ntorch time / fused time (fused from {against_path}, {against['date']}):")
    rows = {}
    for c in joined:
        s = c["shape"]
        rows.setdefault((s["M"], s["K"], s["N"]), {})[c["impl"]] = c
    print(f"{'shape':24s} {'eager us':>9s} {'compile us':>10s} {'fused us':>9s} {'eager/fused':>11s} "
          f"{'compile/fused':>13s}")
    for (M, K, N), r in rows.items():
        e, cp = r.get("torch_eager"), r.get("torch_compile")
        print(f"{f'M={M} K={K} N={N}':24s} {e['time_us'] if e else nan:9.1f} {cp['time_us'] if cp else nan:10.1f} "
              f"{(e or cp)['fused_us']:9.1f} {e['fused_speedup'] if e else nan:11.2f} "
              f"{cp['fused_speedup'] if cp else nan:13.2f}")
    for impl in ("torch_eager", "torch_compile"):
        r = [c["fused_speedup"] for c in joined if c["impl"] == impl]
        if r:
            print(f"{impl}: {min(r):.2f}-{max(r):.2f}x the fused kernel's time over {len(r)} shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
