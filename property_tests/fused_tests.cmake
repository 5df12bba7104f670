# GPU tests of fused/: the Lazy Pre-Norm GEMM forward.
nf_add_test(prenorm_gemm_test SOURCES prenorm_gemm_test.c GPU LABELS gpu TIMEOUT 1800)
# Which variant the pre-norm GEMM launches, for both Hopper parts' bandwidths, on
# the CPU: the pick is host code and reads nothing else of the device.
nf_add_test(prenorm_pick_test SOURCES prenorm_pick_test.c LABELS cpu)
