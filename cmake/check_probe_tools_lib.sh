#!/bin/bash
# check_probe_tools_lib.sh — sourced by the tests of the tools that build and run the pre-norm
# probe (check_ab_patches.sh, check_trace_shapes.sh, check_probe_then_suite.sh), with $src the
# repository's root:
#   scratch_tree TOOL SCRIPT...  a scratch folder $dir (removed on exit) holding $t, a tree with
#                  fused/tools/TOOL, run_probe.sh and scripts/gpu_env.sh and scripts/SCRIPT...,
#                  and $dir/bin, for the tool's PATH, with a stand-in cuobjdump whose SASS of
#                  every build has two HGMMA and one UTMALDG; status=0;
#   gpu TEXT       a stand-in nvidia-smi in $dir/bin whose -L prints TEXT ('' for a host without
#                  a GPU) and whose name query an H200's;
#   expect_rc CODE WHAT           status=1 unless $rc is CODE (the output, $dir/out, shown);
#   expect_out PATTERN FILE WHAT  status=1 unless a line of FILE matches PATTERN (ERE).
scratch_tree() {
  local tool="$1" script
  shift
  dir="$(mktemp -d)"
  trap 'rm -rf "$dir"' EXIT
  status=0
  t="$dir/tree"
  mkdir -p "$t/fused/tools" "$t/scripts" "$dir/bin"
  cp "$src/fused/tools/$tool" "$src/fused/tools/run_probe.sh" "$t/fused/tools/"
  cp "$src/scripts/gpu_env.sh" "$t/scripts/"
  for script in "$@"; do cp "$src/scripts/$script" "$t/scripts/"; done
  printf '#!/bin/sh\nprintf "HGMMA.64x256x16\\nHGMMA.64x256x16\\nUTMALDG.2D\\n"\n' > "$dir/bin/cuobjdump"
  chmod +x "$dir/bin/cuobjdump"
}
gpu() {
  printf '#!/bin/sh\ncase "$*" in *-L*) [ -n "%s" ] && echo "%s" ;; *query-gpu=name,driver*) [ -n "%s" ] && echo "NVIDIA H200, 580";; esac\nexit 0\n' \
    "$1" "$1" "$1" > "$dir/bin/nvidia-smi"
  chmod +x "$dir/bin/nvidia-smi"
}
expect_rc() { [ "$rc" = "$1" ] || { echo "FAIL: $2: exit $rc, not $1"; cat "$dir/out"; status=1; }; }
expect_out() { grep -qE "$1" "$2" || { echo "FAIL: $3: no line matches '$1' in $2:"; cat "$2"; status=1; }; }
