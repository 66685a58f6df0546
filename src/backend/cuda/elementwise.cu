// Element-wise ops: residual add, SwiGLU and GeGLU, row-broadcast bias, scaling and soft-capping. Grid-stride
// loops of 256 threads over the flat values, at most 65535 blocks.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/elementwise_kernels.h"
#include "backend/cuda/grid_stride.cuh"
#include "backend/cuda/launch.cuh"

namespace zinc::backend::cuda {
namespace {

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
    begin_kernel();
    for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = a[i] + b[i];
}

__global__ void swiglu_kernel(const float* gate, const float* up, float* out, int64_t n) {
    begin_kernel();
    for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = silu_times(gate[i], up[i]);
}

__global__ void geglu_kernel(const float* gate, const float* up, float* out, int64_t n) {
    begin_kernel();
    for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = gelu_tanh_times(gate[i], up[i]);
}

__global__ void add_bias_kernel(float* x, const float* b, int64_t n, int64_t cols) {
    begin_kernel();
    for (int64_t i = first_index(); i < n; i += grid_stride()) x[i] += b[i % cols];
}

__global__ void scale_kernel(const float* x, float v, float* out, int64_t n) {
    begin_kernel();
    for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = x[i] * v;
}

__global__ void softcap_kernel(float* x, float cap, int64_t n) {
    begin_kernel();
    for (int64_t i = first_index(); i < n; i += grid_stride()) x[i] = cap * tanhf(x[i] / cap);
}

}  // namespace

cudaError_t add(const float* a, const float* b, float* out, int64_t n, cudaStream_t s) {
    if (n > 0) launch(add_kernel, grid_for(n), kGridStrideBlock, 0, s, a, b, out, n);
    return cudaGetLastError();
}

cudaError_t swiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t s) {
    if (n > 0) launch(swiglu_kernel, grid_for(n), kGridStrideBlock, 0, s, gate, up, out, n);
    return cudaGetLastError();
}

cudaError_t geglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t s) {
    if (n > 0) launch(geglu_kernel, grid_for(n), kGridStrideBlock, 0, s, gate, up, out, n);
    return cudaGetLastError();
}

cudaError_t add_bias(float* x, const float* b, int64_t rows, int64_t cols, cudaStream_t s) {
    const int64_t n = rows * cols;
    if (n > 0) launch(add_bias_kernel, grid_for(n), kGridStrideBlock, 0, s, x, b, n, cols);
    return cudaGetLastError();
}

cudaError_t scale(const float* x, float v, float* out, int64_t n, cudaStream_t s) {
    if (n > 0) launch(scale_kernel, grid_for(n), kGridStrideBlock, 0, s, x, v, out, n);
    return cudaGetLastError();
}

cudaError_t softcap(float* x, float cap, int64_t n, cudaStream_t s) {
    if (n > 0) launch(softcap_kernel, grid_for(n), kGridStrideBlock, 0, s, x, cap, n);
    return cudaGetLastError();
}

}  // namespace zinc::backend::cuda
