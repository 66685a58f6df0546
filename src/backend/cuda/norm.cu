// RMSNorm over groups: one block per group; the sum of squares in double as the CPU reference does.
// L2 norm and gated RMSNorm (delta-net layers): one warp per group, as their groups are head-sized (128); squares
// rounded in float and summed in double, as the CPU reference does.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/norm_kernels.h"

namespace zinc::backend::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void rms_norm_kernel(const float* x, const float* w, float eps, int64_t group, float* out) {
    const int64_t g = blockIdx.x;
    const float* xi = x + g * group;
    float* yo = out + g * group;
    double sum = 0;
    for (int64_t i = threadIdx.x; i < group; i += blockDim.x) sum += double(xi[i]) * xi[i];
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    __shared__ double part[kThreads / 32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) part[warp] = sum;
    __syncthreads();
    double total = 0;
    for (int i = 0; i < int(blockDim.x / 32); ++i) total += part[i];  // the same order in every thread
    const float scale = 1.0f / sqrtf(float(total / double(group)) + eps);
    for (int64_t i = threadIdx.x; i < group; i += blockDim.x) yo[i] = xi[i] * scale * (w ? w[i] : 1.0f);
}

constexpr int kGroupsPerBlock = kThreads / 32;

// The sum of squares of the group at x, the same in every lane of the warp (a butterfly of commutative adds).
__device__ double warp_sum_squares(const float* x, int64_t group, int lane) {
    double sum = 0;
    for (int64_t i = lane; i < group; i += 32) {
        const float v = x[i];
        sum += double(v * v);
    }
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    return sum;
}

__global__ void l2_norm_kernel(const float* x, float eps, int64_t group, int64_t n_groups, float* out) {
    const int64_t g = blockIdx.x * int64_t(kGroupsPerBlock) + threadIdx.x / 32;
    if (g >= n_groups) return;  // whole warps
    const int lane = int(threadIdx.x % 32);
    const float* xi = x + g * group;
    float* yo = out + g * group;
    const float scale = 1.0f / sqrtf(float(warp_sum_squares(xi, group, lane)) + eps);
    for (int64_t i = lane; i < group; i += 32) yo[i] = xi[i] * scale;
}

__global__ void gated_rms_norm_kernel(const float* x, const float* w, const float* z, float eps, int64_t group,
                                      int64_t n_groups, float* out) {
    const int64_t g = blockIdx.x * int64_t(kGroupsPerBlock) + threadIdx.x / 32;
    if (g >= n_groups) return;  // whole warps
    const int lane = int(threadIdx.x % 32);
    const float* xi = x + g * group;
    const float* zi = z + g * group;
    float* yo = out + g * group;
    const double sum = warp_sum_squares(xi, group, lane);
    const float scale = 1.0f / sqrtf(float(sum / double(group)) + eps);
    for (int64_t i = lane; i < group; i += 32) {
        const float zv = zi[i];
        yo[i] = xi[i] * scale * w[i] * (zv / (1.0f + expf(-zv)));
    }
}

unsigned warp_groups_grid(int64_t n_groups) { return unsigned((n_groups + kGroupsPerBlock - 1) / kGroupsPerBlock); }

}  // namespace

cudaError_t rms_norm(const float* x, const float* w, float eps, int64_t group, int64_t n_groups, float* out,
                     cudaStream_t s) {
    if (n_groups > 0) {
        const int threads = group >= kThreads ? kThreads : int((group + 31) / 32 * 32);
        rms_norm_kernel<<<unsigned(n_groups), threads, 0, s>>>(x, w, eps, group, out);
    }
    return cudaGetLastError();
}

cudaError_t l2_norm(const float* x, float eps, int64_t group, int64_t n_groups, float* out, cudaStream_t s) {
    if (n_groups > 0) l2_norm_kernel<<<warp_groups_grid(n_groups), kThreads, 0, s>>>(x, eps, group, n_groups, out);
    return cudaGetLastError();
}

cudaError_t gated_rms_norm(const float* x, const float* w, const float* z, float eps, int64_t group, int64_t n_groups,
                           float* out, cudaStream_t s) {
    if (n_groups > 0)
        gated_rms_norm_kernel<<<warp_groups_grid(n_groups), kThreads, 0, s>>>(x, w, z, eps, group, n_groups, out);
    return cudaGetLastError();
}

}  // namespace zinc::backend::cuda
