// Element-wise ops: residual add and SwiGLU.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/elementwise_kernels.h"

namespace zinc::backend::cuda {
namespace {

unsigned grid_for(int64_t n) {
    const int64_t b = (n + 255) / 256;
    return unsigned(b < 65535 ? b : 65535);
}

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        out[i] = a[i] + b[i];
}

__global__ void swiglu_kernel(const float* gate, const float* up, float* out, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

}  // namespace

cudaError_t add(const float* a, const float* b, float* out, int64_t n, cudaStream_t s) {
    if (n > 0) add_kernel<<<grid_for(n), 256, 0, s>>>(a, b, out, n);
    return cudaGetLastError();
}

cudaError_t swiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t s) {
    if (n > 0) swiglu_kernel<<<grid_for(n), 256, 0, s>>>(gate, up, out, n);
    return cudaGetLastError();
}

}  // namespace zinc::backend::cuda
