/*
 * gpu_main.c — main() for every GPU test executable.
 *
 * Without a visible CUDA device it prints why and exits 77, which CTest's
 * SKIP_RETURN_CODE reports as "Skipped" (never as a pass).  With one, it
 * hands over to Criterion.
 */
#include <stdio.h>

#include <criterion/criterion.h>
#include <cuda_runtime_api.h>

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
    return result;
}
