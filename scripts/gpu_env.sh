# shellcheck shell=bash
# gpu_env.sh — sourced by the GPU-host scripts (gpu_suite.sh, ab_bench.sh, ab_builds.sh):
# the environment of a GPU host run and the header every log starts with.
#
# Sets: root, build, cmake_args (the offline prefix when .gpu-deps is used),
# PATH and LD_LIBRARY_PATH; defines report_header FILE COMMAND.
# On a host without network the dependencies come from .gpu-deps (see
# scripts/prepare_offline_gpu_host.sh); where the system has them, they are used.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC2034  # used by the scripts that source this one
build="$root/build"
export PATH="$PATH:/usr/local/cuda/bin"
cmake_args=()
if [ -d "$root/.gpu-deps/debs" ] && ! [ -f /usr/include/mpfr.h ]; then
  "$root/scripts/prepare_offline_gpu_host.sh" unpack >/dev/null
  cmake_args+=("-DCMAKE_PREFIX_PATH=$root/.gpu-deps/prefix/usr")
  export LD_LIBRARY_PATH="$root/.gpu-deps/prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
report_gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo unknown)"
# The tree's commit.  A tree copied to the GPU host may carry stale git
# metadata (or none): NF_COMMIT then names it exactly, e.g. "26b3454" or
# "26b3454 + ab.diff", and git is not asked.  Otherwise git answers, with
# "+uncommitted" when the working tree differs from HEAD.
if [ -n "${NF_COMMIT:-}" ]; then
  report_commit="$NF_COMMIT"
else
  report_commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  git -C "$root" status --porcelain 2>/dev/null | grep -q . && report_commit="$report_commit+uncommitted"
fi
report_header() { # file command
  printf '# %s\n# date: %s\n# gpu: %s\n# commit: %s\n# command: %s\n\n' "$(basename "$1")" \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$report_gpu" "$report_commit" "$2" > "$1"
}
