#!/bin/bash
# check_offline_unpack.sh PREPARE_SCRIPT: scripts/prepare_offline_gpu_host.sh unpack, which every
# GPU-host script runs through gpu_env.sh, the tests among them, several at once.  Concurrent
# callers all succeed quietly with the whole prefix in place; a second call leaves an
# up-to-date prefix alone (tests load their libraries from it meanwhile); a changed set of .deb
# files is unpacked afresh; none at all is refused by name.  Two tiny packages built here with
# dpkg-deb stand in for the real ones, in a scratch copy of the tree's layout.
set -u
prepare="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/scripts" "$dir/.gpu-deps/debs"
cp "$prepare" "$dir/scripts/"
script="$dir/scripts/$(basename "$prepare")"
status=0
fail() { echo "FAIL: $*"; status=1; }
deb() { # $1: package name; it installs usr/lib/x86_64-linux-gnu/$1.txt
  local pkg="$dir/pkg-$1"
  mkdir -p "$pkg/DEBIAN" "$pkg/usr/lib/x86_64-linux-gnu"
  printf 'Package: %s\nVersion: 1.0\nArchitecture: all\nMaintainer: normfuse tests <t@example.invalid>\nDescription: stand-in\n' \
    "$1" > "$pkg/DEBIAN/control"
  echo "$1" > "$pkg/usr/lib/x86_64-linux-gnu/$1.txt"
  dpkg-deb -Zgzip --build "$pkg" "$dir/.gpu-deps/debs/$1_1.0_all.deb" > /dev/null
}
lib="$dir/.gpu-deps/prefix/usr/lib/x86_64-linux-gnu"

deb alpha
deb beta
# eight at once, as ctest -j 8 starts the scripts that source gpu_env.sh
for i in 1 2 3 4 5 6 7 8; do
  "$script" unpack > "$dir/out$i" 2> "$dir/err$i" &
  echo $! > "$dir/pid$i"
done
for i in 1 2 3 4 5 6 7 8; do
  wait "$(cat "$dir/pid$i")" || fail "concurrent unpack $i exited $?: $(cat "$dir/err$i")"
  [ -s "$dir/err$i" ] && fail "concurrent unpack $i wrote to stderr: $(head -3 "$dir/err$i")"
done
[ "$(cat "$dir"/out* | grep -c '^unpacked into ')" = 1 ] ||
  fail "eight concurrent calls unpacked $(cat "$dir"/out* | grep -c '^unpacked into ') times, not once"
for p in alpha beta; do
  [ "$(cat "$lib/$p.txt" 2> /dev/null)" = "$p" ] || fail "after the concurrent calls, $p's file is missing"
done

# an up-to-date prefix is left alone
touch "$lib/marker"
out="$("$script" unpack 2>&1)" || fail "a second unpack exited $?: $out"
case "$out" in "already unpacked into "*) ;; *) fail "a second unpack said '$(echo "$out" | head -1)'" ;; esac
[ -f "$lib/marker" ] || fail "a second unpack with the same .deb files removed the prefix"

# a new package: the prefix is unpacked afresh
deb gamma
out="$("$script" unpack 2>&1)" || fail "unpack after a new .deb exited $?: $out"
[ -f "$lib/marker" ] && fail "unpack after a new .deb kept the old prefix"
[ "$(cat "$lib/gamma.txt" 2> /dev/null)" = "gamma" ] || fail "unpack after a new .deb did not unpack it"

# none at all: refused, naming the folder and the way to fill it
rm -f "$dir"/.gpu-deps/debs/*.deb
out="$("$script" unpack 2>&1)" && fail "unpack with no .deb files exited 0"
case "$out" in *"no .deb files in $dir/.gpu-deps/debs"*fetch*) ;; *) fail "unpack with no .deb files said '$out'" ;; esac

[ "$status" = 0 ] && echo "offline unpack: concurrent, kept when current, redone when changed, refused when empty"
exit $status
