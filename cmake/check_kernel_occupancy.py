#!/usr/bin/env python3
"""check_kernel_occupancy.py — the kernels' register-limited occupancy and spills.

    check_kernel_occupancy.py --golden FILE [--update] --nvcc NVCC [--flag F ...] SRC...

Compiles each SRC with `NVCC FLAGS -Xptxas -v` and reads every kernel's register
count.  A memory-bound norm kernel's speed follows how many of its CTAs fit on an
SM, and that moves with the register count in steps (256 registers per warp):
ref/NOTES.md item 28 is a kernel that went from 48 to 56 registers, five CTAs per
SM to four, and 3.5 % slower, unnoticed by every test.  FILE records, per kernel,
the threads per CTA, the register count and the bytes of spill stores it was
measured with; the check fails when a kernel now fits fewer CTAs per SM than that
count allowed, spills more, or is new or gone.  A count that moves within the
same step is printed and passes.  After measuring a kernel change on the GPU, `--update` (or
NF_UPDATE_GOLDEN=1 in the environment: `NF_UPDATE_GOLDEN=1 ctest -R
kernel_occupancy_test` from the build folder) rewrites FILE (threads of a new
kernel from its template's first argument, the threads per row, as nf_cta_threads
does; two untemplated kernels are named below).

Exit: 0 pass, 1 a kernel lost occupancy / is new / is gone, 2 usage or compile error.
"""
import argparse
import math
import os
import re
import subprocess
import sys
import tempfile

REGS_PER_SM, MAX_THREADS_PER_SM, MAX_CTAS_PER_SM = 65536, 2048, 32
MIN_CTA = 128  # nf_cta_threads: a CTA has at least 128 threads
# kernels whose first template argument is not their threads per row:
# kSumCols * kSumWarps, kColThreads, and the pre-norm GEMM's three warpgroups
FIXED_THREADS = {"norm_bwd_sum_parts": 512, "norm_bwd_columns": 256, "prenorm_gemm_fwd_kernel": 384}


def ctas_per_sm(regs, threads):
    """CTAs of `threads` threads at `regs` registers that fit on an sm_90 SM (registers
    are allocated per warp in units of 256; shared memory not counted)."""
    per_warp = math.ceil(regs * 32 / 256) * 256
    warps = math.ceil(threads / 32)
    return min(MAX_CTAS_PER_SM, MAX_THREADS_PER_SM // threads, REGS_PER_SM // (per_warp * warps))


def key_of(src, mangled):
    """A kernel's name without the per-file anonymous-namespace hash (it changes with
    the file's contents), prefixed by its file."""
    return os.path.basename(src) + ":" + re.sub(r"^_ZN\d+_GLOBAL__N__[0-9a-f]+_\d+_.*?_cu_[0-9a-f]{8}", "", mangled)


def threads_of(key):
    for name, threads in FIXED_THREADS.items():
        if name in key:
            return threads
    m = re.search(r"I(?:Li(\d+)E)", key)
    return max(int(m.group(1)), MIN_CTA) if m else None


def compile_regs(nvcc, flags, src):
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [nvcc, *flags, "-Xptxas", "-v", "-c", src, "-o", os.path.join(tmp, "k.o")]
        run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.stderr.write(" ".join(cmd) + "\n" + run.stdout + run.stderr)
        sys.exit(2)
    found, entry, spill = {}, None, 0
    for line in run.stderr.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            entry, spill = m.group(1), 0
            continue
        m = re.search(r"(\d+) bytes spill stores", line)
        if m:
            spill = int(m.group(1))
        m = re.search(r"Used (\d+) registers", line)
        if m and entry:
            found[key_of(src, entry)] = (int(m.group(1)), spill)
            entry = None
    return found


def read_golden(path):
    golden = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    key, threads, regs, spill = line.split()
                    golden[key] = (int(threads), int(regs), int(spill))
    return golden


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--golden", required=True)
    ap.add_argument("--update", action="store_true")
    ap.add_argument("--nvcc", required=True)
    ap.add_argument("--flag", action="append", default=[], help="an nvcc flag (repeat)")
    ap.add_argument("sources", nargs="+")
    args = ap.parse_args()

    now = {}
    for src in args.sources:
        now.update(compile_regs(args.nvcc, args.flag, src))
    golden = read_golden(args.golden)

    if args.update or os.environ.get("NF_UPDATE_GOLDEN") == "1":
        lines = []
        for key in sorted(now):
            threads = golden[key][0] if key in golden else threads_of(key)
            if threads is None:
                sys.exit("check_kernel_occupancy: %s: threads per CTA unknown; add it to FIXED_THREADS" % key)
            lines.append("%s %d %d %d\n" % (key, threads, *now[key]))
        with open(args.golden, "w") as f:
            f.write("# kernel threads-per-CTA registers spill-store-bytes: cmake/check_kernel_occupancy.py\n"
                    "# --update wrote it; kernel_occupancy_test fails when a kernel fits fewer CTAs per SM\n"
                    "# than these registers allow, or spills more.\n")
            f.writelines(lines)
        print("check_kernel_occupancy: %d kernels written to %s" % (len(lines), args.golden))
        return 0

    status = 0
    for key in sorted(set(golden) | set(now)):
        if key not in now:
            print("FAIL %s: gone (run --update once the change is measured)" % key)
            status = 1
        elif key not in golden:
            print("FAIL %s: new, %d registers (measure it, then --update)" % (key, now[key][0]))
            status = 1
        else:
            threads, regs, spill = golden[key]
            (regs_now, spill_now) = now[key]
            was, is_ = ctas_per_sm(regs, threads), ctas_per_sm(regs_now, threads)
            if is_ < was:
                print("FAIL %s: %d -> %d registers, %d -> %d CTAs of %d threads per SM"
                      % (key, regs, regs_now, was, is_, threads))
                status = 1
            elif regs_now != regs:
                print("note %s: %d -> %d registers, %d CTAs per SM either way" % (key, regs, regs_now, is_))
            if spill_now > spill:
                print("FAIL %s: spills %d bytes, %d recorded" % (key, spill_now, spill))
                status = 1
    if status == 0:
        print("PASS: %d kernels, none fits fewer CTAs per SM or spills more than recorded" % len(now))
    return status


if __name__ == "__main__":
    sys.exit(main())
