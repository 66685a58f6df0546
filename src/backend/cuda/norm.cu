// RMSNorm over groups: one block per group; the sum of squares in double as the CPU reference does.
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

}  // namespace

cudaError_t rms_norm(const float* x, const float* w, float eps, int64_t group, int64_t n_groups, float* out,
                     cudaStream_t s) {
    if (n_groups > 0) {
        const int threads = group >= kThreads ? kThreads : int((group + 31) / 32 * 32);
        rms_norm_kernel<<<unsigned(n_groups), threads, 0, s>>>(x, w, eps, group, out);
    }
    return cudaGetLastError();
}

}  // namespace zinc::backend::cuda
