# The oracle suite: bf16 conversions, the MPFR oracle by hand and
# by finite differences, the fast oracle against MPFR, budgets and compare.
# Included from property_tests/CMakeLists.txt.  All run without a GPU.
#   bf16_test          bf16 rounding, specials, ulps          (cpu)
#   oracle_hand_test   hand-computable cases, every op        (cpu, mpfr)
#   oracle_fd_test     MPFR backward vs finite differences    (cpu, mpfr)
#   fast_oracle_test   fast oracle vs MPFR on random shapes   (cpu, mpfr)
#   budget_test        budgets and compare                    (cpu, mpfr)
nf_add_test(bf16_test SOURCES bf16_test.c LABELS cpu)
foreach(_t oracle_hand_test oracle_fd_test fast_oracle_test budget_test)
  nf_add_test(${_t} SOURCES ${_t}.c LABELS cpu mpfr)
endforeach()
