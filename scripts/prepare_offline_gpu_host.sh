#!/usr/bin/env bash
# prepare_offline_gpu_host.sh — bring the build dependencies a GPU host lacks.
#
# A GPU host with no network (SPEC.md section 7: CUDA, cuBLAS, cuDNN and the
# MPFR/GMP runtime libraries present, but no MPFR/GMP headers and no
# Criterion) builds normfuse from Debian 12 packages unpacked into a prefix.
#
#   1. On a Debian 12 machine with network, in the repository root:
#        scripts/prepare_offline_gpu_host.sh fetch
#      downloads the .deb files into .gpu-deps/debs (git-ignored).
#   2. Copy the tree, .gpu-deps included, to the GPU host; there:
#        scripts/prepare_offline_gpu_host.sh unpack
#      unpacks them with `dpkg -x` into .gpu-deps/prefix (again only when the
#      .deb files change) and prints the CMake arguments and LD_LIBRARY_PATH to
#      use.  scripts/gpu_suite.sh does this for you and then builds and runs the
#      GPU suite.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
deps="$root/.gpu-deps"
packages=(libmpfr-dev libmpfr6 libgmp-dev libgmp10 libgmpxx4ldbl
          libcriterion-dev libcriterion3 libboxfort-dev libnanomsg5 libgit2-1.5
          libhttp-parser2.9 libssh2-1 libmbedtls14 libmbedx509-1 libmbedcrypto7)

case "${1:-}" in
fetch)
  mkdir -p "$deps/debs"
  cd "$deps/debs"
  rm -f ./*.deb
  apt-get download "${packages[@]}"
  echo "fetched $(find . -maxdepth 1 -name '*.deb' | wc -l) packages into $deps/debs ($(du -sh . | cut -f1))"
  ;;
unpack)
  ls "$deps"/debs/*.deb >/dev/null 2>&1 || { echo "no .deb files in $deps/debs: run '$0 fetch' on a networked Debian 12 machine first" >&2; exit 1; }
  # Every script that sources gpu_env.sh asks for this, the tests among them, several at
  # once: one unpacks while the others wait, and once the prefix holds these very .deb
  # files (the stamp: their names, sizes and times) it is left alone.  Unpacking afresh
  # each time, concurrent callers once removed the prefix under each other and under
  # the test binaries loading their libraries from it.
  exec 9> "$deps/.unpack.lock"
  flock 9
  stamp="$deps/prefix/.unpacked-from"
  want="$(cd "$deps/debs" && stat -c '%n %s %Y' ./*.deb)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "already unpacked into $deps/prefix"
  else
    rm -rf "$deps/prefix"
    mkdir -p "$deps/prefix"
    for f in "$deps"/debs/*.deb; do dpkg -x "$f" "$deps/prefix"; done
    printf '%s\n' "$want" > "$stamp"
    echo "unpacked into $deps/prefix"
  fi
  lib="$deps/prefix/usr/lib/x86_64-linux-gnu"
  echo "cmake: -DCMAKE_PREFIX_PATH=$deps/prefix/usr"
  echo "run:   export LD_LIBRARY_PATH=$lib:\${LD_LIBRARY_PATH:-}"
  ;;
*)
  echo "usage: $0 fetch|unpack" >&2
  exit 2
  ;;
esac
