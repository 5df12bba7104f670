/*
 * launch.h — the one place a launch configuration with a cluster attribute
 * is built, for the API layer's occupancy questions (src/context.c) and the
 * kernels' launchers (ref/, fused/).  Not installed.  C and CUDA C++.
 */
#ifndef NF_LAUNCH_H
#define NF_LAUNCH_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A launch of `grid` CTAs of `cta` threads with `smem` bytes of dynamic
 * shared memory on `stream`, in clusters of `cluster` CTAs along x.  With
 * cluster 1 the configuration carries no cluster attribute (a plain launch);
 * *attr holds the attribute either way, and the configuration points to it,
 * so it must live as long as the configuration is used. */
static inline cudaLaunchConfig_t nf_launch_config(int64_t grid, int cta, size_t smem, cudaStream_t stream,
                                                  int cluster, cudaLaunchAttribute *attr)
{
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg); /* fields later runtimes add: their defaults */
    cfg.gridDim.x = (unsigned)grid;
    cfg.gridDim.y = cfg.gridDim.z = 1;
    cfg.blockDim.x = (unsigned)cta;
    cfg.blockDim.y = cfg.blockDim.z = 1;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = (unsigned)cluster;
    attr->val.clusterDim.y = attr->val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = cluster > 1 ? 1 : 0;
    return cfg;
}

#endif
