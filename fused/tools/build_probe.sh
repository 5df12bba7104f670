#!/usr/bin/env bash
# build_probe.sh BIN PTXAS_LOG [nvcc options...] — build the pre-norm GEMM probe
# (fused/tools/prenorm_probe.cu with the library's src/status.c, src/context.c,
# ref/elementwise.cu (the L2 flush), ref/gemm_cublaslt.c (the bench's cuBLASLt
# plan), ref/fold_weight.cu (the bench inputs' weight) and fused/prenorm_gemm_fwd.cu,
# no CMake)
# into BIN, ptxas's report (-Xptxas -v) into PTXAS_LOG; the options are added
# to nvcc's (e.g. -lineinfo).  Run from the repository root, by run_probe.sh
# and profile_probe.sh.
# NF_PROBE_PATCH=FILE.diff builds from a copy of fused/ with that diff applied
# (patch -p1, paths as git diff writes them: a/fused/...), the tree untouched:
# a timing-only experiment such as skipping the sum of squares, reproducible
# from the diff kept with its report.
set -euo pipefail
if [ $# -lt 2 ]; then sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; fi
bin="$1" log="$2"
shift 2
fused=fused
if [ -n "${NF_PROBE_PATCH:-}" ]; then
  diff_file="$(cd "$(dirname "$NF_PROBE_PATCH")" && pwd)/$(basename "$NF_PROBE_PATCH")"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  cp -R fused "$tmp/fused"
  (cd "$tmp" && patch -p1 -s < "$diff_file") || { echo "build_probe: $NF_PROBE_PATCH does not apply to fused/" >&2; exit 1; }
  fused="$tmp/fused"
fi
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Xptxas -v "$@" \
     -Iinclude -Isrc -I"$fused" -I. \
     "$fused/tools/prenorm_probe.cu" src/status.c src/context.c ref/elementwise.cu ref/gemm_cublaslt.c \
     ref/fold_weight.cu \
     "$fused/prenorm_gemm_fwd.cu" \
     -lcublasLt -lcublas -lcudnn -o "$bin" 2> "$log"
