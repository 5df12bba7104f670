#!/usr/bin/env bash
# test_install.sh BUILD_DIR — install the build into a temporary prefix, then
# build and run a consumer through find_package(normfuse) and through
# pkg-config.  CTest runs it (install_consumer_test, label cpu).
set -euo pipefail
build="$1"
src="$(cd "$(dirname "$0")" && pwd)/consumer"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
cmake -S "$src" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$tmp/prefix" > "$tmp/configure.log"
cmake --build "$tmp/cmake-build" > "$tmp/build.log"
"$tmp/cmake-build/consumer"
pcdir="$(dirname "$(find "$tmp/prefix" -name normfuse.pc | head -1)")"
libdir="$(PKG_CONFIG_PATH="$pcdir" pkg-config --variable=libdir normfuse)"
# shellcheck disable=SC2046
cc "$src/main.c" $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs normfuse) -Wl,-rpath,"$libdir" \
  -o "$tmp/pc-consumer"
"$tmp/pc-consumer"
echo "install_consumer_test: find_package and pkg-config consumers built and ran"
