# GPU tests of ref/: the standalone norms.
nf_add_test(ref_norm_test SOURCES ref_norm_test.c GPU LABELS gpu mpfr slow TIMEOUT 1200)
# GPU tests of ref/: the cuBLASLt GEMM, the attention block, the
# unfused pipelines (+ the fused pre-norm forward) and cuDNN's norms.
nf_add_test(ref_gemm_test SOURCES ref_gemm_test.c GPU LABELS gpu)
nf_add_test(ref_attention_test SOURCES ref_attention_test.c GPU LABELS gpu mpfr LIBS nf_harness TIMEOUT 1800)
nf_add_test(ref_cudnn_test SOURCES ref_cudnn_test.c GPU LABELS gpu mpfr LIBS nf_harness TIMEOUT 1800)
# One executable, two CTest entries: the quick suite, and the large shapes
# (suite ref_pipelines_slow) labelled slow.
nf_add_test(ref_pipelines_test SOURCES ref_pipelines_test.c GPU LABELS gpu mpfr LIBS nf_harness TIMEOUT 1800
            ARGS --filter "ref_pipelines/*")
add_test(NAME ref_pipelines_slow_test COMMAND ref_pipelines_test --filter "ref_pipelines_slow/*")
set_tests_properties(ref_pipelines_slow_test PROPERTIES LABELS "gpu;slow" SKIP_RETURN_CODE 77 TIMEOUT 2400)
