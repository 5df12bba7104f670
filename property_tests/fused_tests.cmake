# GPU tests of fused/: the Lazy Pre-Norm GEMM forward.
nf_add_test(prenorm_gemm_test SOURCES prenorm_gemm_test.c GPU LABELS gpu TIMEOUT 1800)
