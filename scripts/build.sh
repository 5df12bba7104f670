#!/usr/bin/env bash
# build.sh [BUILD_DIR] — configure and build everything (library, kernels,
# CLI, oracles, tests).  Extra CMake arguments come from $NF_CMAKE_ARGS.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
export PATH="$PATH:/usr/local/cuda/bin"
jobs="${NF_JOBS:-$(nproc)}"
# shellcheck disable=SC2086
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release ${NF_CMAKE_ARGS:-}
cmake --build "$build" -j "$jobs"
