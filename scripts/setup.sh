#!/usr/bin/env bash
# setup.sh — install what normfuse builds and tests with, on Debian/Ubuntu
# with the CUDA toolkit already present (nvcc, cuBLAS, cuDNN).  Idempotent:
# installs only what is missing.  Needs root (or sudo) for apt-get.
set -euo pipefail
packages=(cmake make gcc g++ pkg-config libmpfr-dev libgmp-dev libcriterion-dev gnuplot-nox python3)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! command -v nvcc >/dev/null; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    echo "setup: nvcc is at /usr/local/cuda/bin (add it to PATH; the build scripts do)"
  else
    echo "setup: nvcc not found: install the CUDA toolkit (13.x) first" >&2
    exit 1
  fi
fi
echo "setup: ok"
