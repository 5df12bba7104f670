/*
 * gpu_main.c — main() for every GPU test executable.
 *
 * Without a visible CUDA device it prints why and exits 77, which CTest's
 * SKIP_RETURN_CODE reports as "Skipped" (never as a pass).  With one, it
 * hands over to Criterion; when every test it ran skipped itself (cr_skip:
 * a property with nothing to check, say), it exits 77 too, where Criterion
 * would exit 0 and CTest would report a pass.
 */
#include <stdio.h>

#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <cuda_runtime_api.h>

static size_t tests_run, tests_skipped;

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    tests_run = stats->nb_tests;
    tests_skipped = stats->tests_skipped;
}

int main(int argc, char *argv[])
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        printf("SKIP %s: no CUDA device visible (%s); GPU tests need one\n", argv[0],
               e == cudaSuccess ? "device count 0" : cudaGetErrorString(e));
        return 77;
    }
    struct criterion_test_set *tests = criterion_initialize();
    int result = 0;
    if (criterion_handle_args(argc, argv, true))
        result = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    if (result == 0 && tests_run > 0 && tests_skipped == tests_run) {
        printf("SKIP %s: every test skipped itself (%zu of %zu)\n", argv[0], tests_skipped, tests_run);
        return 77;
    }
    return result;
}
