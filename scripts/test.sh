#!/usr/bin/env bash
# test.sh — set up, build, and run the whole test suite (README's test command).
# On a machine without a GPU the gpu-labelled tests exit 77 and CTest lists
# them as "Skipped"; everything else must pass.  Pass CTest options through,
# e.g. `scripts/test.sh -L mpfr` or `scripts/test.sh -LE slow`.
#
# A full run (no options) then runs the CPU tests once more with the host C
# and C++ code built under AddressSanitizer and UndefinedBehaviorSanitizer
# (build-sanitize/, CMake's NF_SANITIZE): an out-of-bounds read, a leak or
# undefined behaviour in the oracles, the harness or the CLI fails there even
# where the plain build happens to pass.  NF_SANITIZE=0 skips that pass.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build"
cd "$root/build"
ctest --output-on-failure -j "${NF_JOBS:-$(nproc)}" "$@"
if [ $# -gt 0 ] || [ "${NF_SANITIZE:-1}" = 0 ]; then exit 0; fi

echo "test.sh: the CPU tests again, host code under -fsanitize=address,undefined (build-sanitize/)"
NF_CMAKE_ARGS="${NF_CMAKE_ARGS:-} -DNF_SANITIZE=address,undefined" "$root/scripts/build.sh" "$root/build-sanitize"
cd "$root/build-sanitize"
# protect_shadow_gap=0: the CUDA runtime maps memory where ASan's gap would be.
# Left out: the install consumer (built without the sanitizer runtime, it
# cannot load the instrumented library) and the tests that only run nvcc.
ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
  UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
  ctest --output-on-failure -j "${NF_JOBS:-$(nproc)}" -L 'cpu|mpfr' -LE gpu \
  -E '^(install_consumer_test|kernel_occupancy_test|kernel_ptx_test|[a-z_]+_trace_build_test)$'
