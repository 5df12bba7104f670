#!/bin/sh
# check_ptx.sh LIST — every kernel's loads and stores name their state space.
#
# LIST: a file naming one .ptx per line (the PTX of the library's .cu files,
# built by the nf_kernel_ptx object library).  A generic `ld`/`st` (no
# .shared/.global/.local/.param/.const) means the compiler lost track of where
# a pointer points: the fused pre-norm GEMM once aligned its shared storage by
# integer arithmetic and its epilogue and sum of squares went through generic
# ST.E/LD.E, a top stall under Nsight Compute and 8-9 % of its time on the
# H200 (fused/NOTES.md v5).  Prints each offending line with its file and
# line number; exit 1 if there is any, 2 on a missing file.
set -u
if [ $# -ne 1 ] || ! [ -r "$1" ]; then echo "check_ptx: usage: check_ptx.sh LIST (a readable file)" >&2; exit 2; fi
bad=0
files=0
while IFS= read -r ptx; do
  [ -n "$ptx" ] || continue
  [ -r "$ptx" ] || { echo "check_ptx: $ptx: not readable" >&2; exit 2; }
  files=$((files + 1))
  # ld/st, optional predicate and .volatile/.relaxed.scope/.weak, then straight to a
  # vector width or type: no state space
  if grep -nE '^[[:space:]]+(@!?%p[0-9]+[[:space:]]+)?(ld|st)(\.volatile|\.relaxed\.[a-z]+|\.weak)?(\.v[248])?\.[bfsu][0-9]+[[:space:]]' "$ptx" \
       | sed "s|^|$ptx:|" | head -20 | grep .; then
    bad=1
  fi
done < "$1"
[ "$files" -gt 0 ] || { echo "check_ptx: $1 names no PTX file" >&2; exit 2; }
if [ "$bad" -ne 0 ]; then
  echo "check_ptx: generic loads/stores above: derive shared-memory pointers from a __shared__ array by pointer arithmetic"
  exit 1
fi
echo "check_ptx: $files PTX files, every load and store names its state space"
