#!/bin/sh
# check_gate_log.sh NORMFUSE: a gate run leaves only its own cases in
# OUT/fuzz.jsonl, however many earlier gates wrote to the same folder (the
# fuzz log itself appends, so that a campaign can resume).
set -eu
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
echo '{"case":0,"seed":1,"verdict":"pass","from":"an earlier gate"}' > "$out/fuzz.jsonl"
# one property, the cheapest: on a GPU host the whole suite ran here, minutes
# under ctest -j beside the other GPU tests (past the 300 s limit on the H200)
"$1" gate --out "$out" --seconds 0 --property rstd_commute > "$out/gate.out" 2>&1 || { cat "$out/gate.out"; exit 1; }
if [ -s "$out/fuzz.jsonl" ]; then
  echo "FAIL: $out/fuzz.jsonl still holds an earlier run's lines:"
  cat "$out/fuzz.jsonl"
  exit 1
fi
echo "PASS: the gate started an empty fuzz log"
