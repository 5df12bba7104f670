#!/usr/bin/env bash
# build_probe.sh BIN PTXAS_LOG [nvcc options...] — build the pre-norm GEMM probe
# (fused/tools/prenorm_probe.cu with the library's src/status.c, src/context.c
# and fused/prenorm_gemm_fwd.cu, no CMake) into BIN, ptxas's report (-Xptxas -v)
# into PTXAS_LOG; the options are added to nvcc's (e.g. -lineinfo).  Run from
# the repository root, by run_probe.sh and profile_probe.sh.
set -euo pipefail
if [ $# -lt 2 ]; then sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; fi
bin="$1" log="$2"
shift 2
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Xptxas -v "$@" \
     -Iinclude -Isrc -Ifused \
     fused/tools/prenorm_probe.cu src/status.c src/context.c fused/prenorm_gemm_fwd.cu \
     -lcublasLt -lcudnn -o "$bin" 2> "$log"
