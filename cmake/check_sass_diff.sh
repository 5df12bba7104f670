#!/bin/sh
# check_sass_diff.sh SCRIPT: scripts/sass_diff.py on two listings whose answer
# is known.  Kernel k1 is the same on both sides, compiled from files of
# different names (another anonymous-namespace hash); k2 differs only in its
# loop's registers; k3 has its loop's loads in another order and one more
# instruction; k4 is in A only.  A has a report header naming its commit;
# b.sass.xz is B compressed, as reports/ keeps listings.
set -eu
# shellcheck source=cmake/check_lib.sh
. "$(dirname "$0")/check_lib.sh" # $py, status, expect, script_and_scratch
script_and_scratch check_sass_diff "$@"
"$py" - "$dir/a.sass" "$dir/b.sass" <<'PY'
import lzma, sys

def kernel(anon, name, body):
    lines = ["\t\tFunction : _ZN39_GLOBAL__N__%s_7_%s_cu_d1e1b51b%s" % (anon, "nb_x" if anon == "aa" else "norm_bwd", name),
             "\t.headerflags\t@\"EF_CUDA_SM90\""]
    for i, ins in enumerate(body):
        lines.append("        /*%04x*/                   %s ;   /* 0x000000000000 */" % (16 * i, ins))
        lines.append("                                                     /* 0x000fc40000000800 */")
    return lines

loop = ["MOV R1, c[0x0][0x28]", "LDG.E.128 R4, desc[UR4][R2.64]", "LDS.128 R8, [R0]",
        "FADD R4, R4, R8", "STS.128 [R0], R4", "BAR.SYNC.DEFER_BLOCKING 0x0", "@P0 BRA 0x10", "EXIT"]
renamed = [l.replace("R4", "R12") for l in loop]
swapped = loop[:1] + [loop[2], loop[1]] + ["IADD3 R0, R0, 0x10, RZ"] + loop[3:-2] + ["@P0 BRA 0x10", "EXIT"]
for path, anon, k2, k3, k4 in ((sys.argv[1], "aa", loop, loop, True), (sys.argv[2], "bb", renamed, swapped, False)):
    out = ["# sass_funcs.txt", "# commit: abc1234"] if k4 else []
    out += ["", "Fatbin elf code:", "================", "arch = sm_90a", "", "\tcode for sm_90a"]
    out += kernel(anon, "2k1Ev", loop) + kernel(anon, "2k2Ev", k2) + kernel(anon, "2k3Ev", k3)
    if k4:
        out += kernel(anon, "2k4Ev", loop)
    open(path, "w").write("\n".join(out) + "\n")
    if not k4:
        with lzma.open(path + ".xz", "wt") as f:
            f.write("\n".join(out) + "\n")
PY
run_script "$dir/a.sass" "$dir/a.sass"
expect_rc 0 "a listing against itself"
expect "$out" '^4 kernels: same 4, differs 0, only A 0, only B 0$' "every kernel the same"
run_script "$dir/a.sass" "$dir/b.sass" --loops
expect_rc 1 "listings that differ"
expect "$out" '^same +8 +sm_90a _ZN\(anon\)2k1Ev$' "the same kernel from another file name"
expect "$out" '^differs +8 -> 8 +sm_90a _ZN\(anon\)2k2Ev$' "registers renamed"
expect "$out" '^differs +8 -> 9 +sm_90a _ZN\(anon\)2k3Ev$' "a changed loop"
expect "$out" '^only A +8 +sm_90a _ZN\(anon\)2k4Ev$' "a kernel on one side"
expect "$out" '^4 kernels: same 1, differs 2, only A 1, only B 0$' "the count"
expect "$out" "^A: $dir/a.sass, commit abc1234\$" "A and the commit its header names"
expect "$out" "^B: $dir/b.sass\$" "B, which names none"
expect "$out" '^    loop A: 6 instructions; BAR 1 LDG 1 LDS 1 STS 1$' "the loop's operations"
expect "$out" '^    loop B: 7 instructions; BAR 1 LDG 1 LDS 1 STS 1$' "the longer loop"
k2="$(printf '%s\n' "$out" | sed -n '/2k2Ev$/,/same but/p')"
expect "$k2" 'same order: yes; the same but for registers: yes$' "k2's loop renamed only"
k3="$(printf '%s\n' "$out" | sed -n '/2k3Ev$/,/same but/p')"
expect "$k3" 'same order: no; the same but for registers: no$' "k3's loads reordered"
grep -v "code for" "$dir/a.sass" > "$dir/cut.sass"
run_script "$dir/cut.sass" "$dir/a.sass"
expect_rc 0 "a listing cut out of a dump, without its architecture line"
expect "$out" '^same +8 +_ZN\(anon\)2k4Ev$' "kernels matched by name alone"
run_script "$dir/b.sass" "$dir/b.sass.xz"
expect_rc 0 "a listing against its xz copy"
expect "$out" '^3 kernels: same 3, differs 0, only A 0, only B 0$' "the xz copy read"
printf '\3757zXZ\000 broken' > "$dir/broken.xz"
expect_exit 2 "a broken xz file" "$dir/a.sass" "$dir/broken.xz"
run_script "$dir/a.sass" "$dir/b.sass" --funcs 'k1'
expect_rc 0 "only the kernel that is the same"
expect "$out" '^1 kernels: same 1, differs 0, only A 0, only B 0$' "--funcs keeps one"
expect_exit 2 "--funcs that keeps nothing" "$dir/a.sass" "$dir/b.sass" --funcs 'nothing'
expect_exit 2 "a bad regex" "$dir/a.sass" "$dir/b.sass" --funcs '('
printf 'no sass here\n' > "$dir/empty.sass"
expect_exit 2 "a file with no SASS" "$dir/a.sass" "$dir/empty.sass"
printf '\177ELF not really\n' > "$dir/fake.o"
export CUOBJDUMP="$dir/no-such-cuobjdump"
expect_exit 2 "a binary without a cuobjdump to read it" "$dir/a.sass" "$dir/fake.o"
unset CUOBJDUMP
expect_exit 2 "a missing file" "$dir/a.sass" "$dir/missing.sass"
exit "$status"
