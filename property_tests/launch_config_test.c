/*
 * launch_config_test.c — nf_launch_config (src/launch.h), the one builder of
 * the launch configurations that carry a cluster attribute: what a launch of
 * clusters of 1 and of 2 is given.  No device needed: it only fills structs.
 */
#include <criterion/criterion.h>

#include "launch.h"

static const cudaStream_t kStream = (cudaStream_t)(uintptr_t)0x5150;

static void expect_shape(const cudaLaunchConfig_t *cfg, unsigned grid, unsigned cta, size_t smem)
{
    cr_assert_eq(cfg->gridDim.x, grid);
    cr_assert_eq(cfg->gridDim.y, 1u);
    cr_assert_eq(cfg->gridDim.z, 1u);
    cr_assert_eq(cfg->blockDim.x, cta);
    cr_assert_eq(cfg->blockDim.y, 1u);
    cr_assert_eq(cfg->blockDim.z, 1u);
    cr_assert_eq(cfg->dynamicSmemBytes, smem);
    cr_assert_eq(cfg->stream, kStream);
}

Test(launch_config, clusters_of_one_launch_plainly)
{
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = nf_launch_config(528, 128, 40960, kStream, 1, &attr);
    expect_shape(&cfg, 528, 128, 40960);
    cr_assert_eq(cfg.numAttrs, 0u, "a cluster of 1 must carry no attribute");
}

Test(launch_config, clusters_of_two_carry_their_dimension)
{
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = nf_launch_config(132, 512, 163840 + 16, kStream, 2, &attr);
    expect_shape(&cfg, 132, 512, 163840 + 16);
    cr_assert_eq(cfg.numAttrs, 1u);
    cr_assert_eq(cfg.attrs, &attr, "the configuration points to the caller's attribute");
    cr_assert_eq(attr.id, cudaLaunchAttributeClusterDimension);
    cr_assert_eq(attr.val.clusterDim.x, 2u);
    cr_assert_eq(attr.val.clusterDim.y, 1u);
    cr_assert_eq(attr.val.clusterDim.z, 1u);
}
