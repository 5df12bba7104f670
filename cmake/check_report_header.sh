#!/bin/bash
# check_report_header.sh GPU_ENV: the header that scripts/gpu_env.sh's report_header
# writes on every GPU-host log names the GPU that nvidia-smi reports, and says
# "none visible" where nvidia-smi answers nothing (a CPU host, or no driver), never
# an empty field.  A stand-in nvidia-smi first on PATH plays both hosts.
set -u
env_sh="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
status=0
header() { # $1: what the stand-in prints; the gpu line of the header written under it
  printf '#!/bin/sh\n%s\n' "$1" > "$dir/nvidia-smi"
  chmod +x "$dir/nvidia-smi"
  (PATH="$dir:$PATH" NF_COMMIT=test && . "$env_sh" && report_header "$dir/log" "a command") &&
    sed -n 's/^# gpu: //p' "$dir/log"
}
expect() { # $1 what the stand-in prints, $2 the gpu field expected
  got="$(header "$1")"
  [ "$got" = "$2" ] || { echo "FAIL: nvidia-smi doing '$1': gpu field '$got', not '$2'"; status=1; }
}
expect 'echo "NVIDIA H200, 580.159.04"' "NVIDIA H200, 580.159.04"
expect 'exit 9' "none visible (nvidia-smi answered nothing)"
expect 'exit 0' "none visible (nvidia-smi answered nothing)"
exit $status
