#!/usr/bin/env bash
# run_cudnn_probe.sh — on a GPU host: build the normfuse library in
# build-cudnn/ and ref/tools/cudnn_probe.c against it, then run the probe.
# Output goes to stdout and, when OUT is set, to $OUT/cudnn_probe.log.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
export PATH="$PATH:/usr/local/cuda/bin"
cmake_args=(-DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release)
if [ -d .gpu-deps/debs ] && ! [ -f /usr/include/mpfr.h ]; then
  scripts/prepare_offline_gpu_host.sh unpack >/dev/null
  cmake_args+=("-DCMAKE_PREFIX_PATH=$root/.gpu-deps/prefix/usr")
  export LD_LIBRARY_PATH="$root/.gpu-deps/prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
log="${OUT:-/tmp}/cudnn_probe.log"
{
  cmake -S . -B build-cudnn "${cmake_args[@]}" > /tmp/build-cudnn.cfg.log 2>&1 || { tail -30 /tmp/build-cudnn.cfg.log; exit 1; }
  cmake --build build-cudnn --target normfuse -j "$(nproc)" 2>&1 | grep -E "error|warning|cudnn_norm" || true
  # link against exactly the cudart / cuDNN that CMake found for the library
  cache() { sed -n "s/^$1:[A-Z]*=//p" build-cudnn/CMakeCache.txt; }
  cudart="$(cache CUDA_cudart_LIBRARY)"; cudnn_lib="$(cache NF_CUDNN_LIBRARY)"
  cudnn_inc="$(cache NF_CUDNN_INCLUDE_DIR)"; cuda_inc="$(cache CUDAToolkit_CUPTI_INCLUDE_DIR)"
  [ -n "$cuda_inc" ] || cuda_inc="$(dirname "$(readlink -f "$(command -v nvcc)")")/../include"
  echo "probe links: $cudart $cudnn_lib (headers $cudnn_inc $cuda_inc)"
  gcc -std=c11 -O2 -Wall -Wextra -I include -I src -I "$cudnn_inc" -I "$cuda_inc" ref/tools/cudnn_probe.c \
    -o build-cudnn/cudnn_probe build-cudnn/libnormfuse.so "$cudart" "$cudnn_lib" -lm \
    -Wl,-rpath,"$root/build-cudnn:$(dirname "$cudart"):$(dirname "$cudnn_lib")"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
  ./build-cudnn/cudnn_probe
} 2>&1 | tee "$log"
exit "${PIPESTATUS[0]}"
