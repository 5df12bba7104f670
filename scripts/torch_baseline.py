#!/usr/bin/env python3
"""torch_baseline.py — time PyTorch's pre-norm GEMM on the SPEC.md seed grid.

The comparison issue 5 asks for: RMSNorm(A; g) @ W in PyTorch eager and under
torch.compile, timed the way `normfuse bench` times (CUDA events around the
op alone, L2 flushed before each run by reading 256 MiB, or with --flush write
by rewriting it, median of --reps),
on random bf16 inputs.  Writes JSON in `normfuse bench`'s case schema
({"op", "impl", "shape", "time_us", "bytes", "flops"}) so reports can join
the two files by (op, shape).

    python3 scripts/torch_baseline.py --json reports/h200/torch.json [--quick]
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


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", required=True)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--quick", action="store_true", help="first M only")
    p.add_argument("--seed", type=int, default=20261129)
    p.add_argument("--flush", choices=("read", "write"), default="read",
                   help="how L2 is flushed before each timed run (as normfuse bench --flush)")
    args = p.parse_args()
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
                    cases.append({"op": "prenorm_fwd", "impl": impl,
                                  "shape": {"M": M, "K": K, "N": N}, "time_us": round(us, 3),
                                  "bytes": nbytes, "flops": flops})
                    print(f"prenorm_fwd {impl:14s} M={M} K={K} N={N} {us:10.1f} us", flush=True)
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "command": " ".join(["python3"] + sys.argv), "seed": args.seed, "reps": args.reps, "flush": args.flush,
           "cases": cases}
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
