#!/bin/bash
# check_report_header.sh GPU_ENV: the header that scripts/gpu_env.sh's report_header
# writes on every GPU-host log names the GPU that nvidia-smi reports, and says
# "none visible" where nvidia-smi answers nothing (a CPU host, or no driver), never
# an empty field.  A stand-in nvidia-smi first on PATH plays both hosts.  It is
# sourced under set -euo pipefail, as the GPU-host scripts source it: a failing
# nvidia-smi must not end them there.
set -u
env_sh="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
status=0
header() { # $1: what the stand-in prints; the gpu line of the header written under it
  printf '#!/bin/sh\n%s\n' "$1" > "$dir/nvidia-smi"
  chmod +x "$dir/nvidia-smi"
  # one statement a line, as in those scripts (set -e is ignored inside an && list)
  PATH="$dir:$PATH" NF_COMMIT=test bash -c 'set -euo pipefail
    . "$1"
    report_header "$2" "a command"' sh "$env_sh" "$dir/log" &&
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
