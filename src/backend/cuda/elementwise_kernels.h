// Host-side launchers of the CUDA backend's element-wise kernels (elementwise.cu).
// Plain C++17 for nvcc; each launcher enqueues on `s` and returns cudaGetLastError().
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace zinc::backend::cuda {

// elementwise.cu
cudaError_t add(const float* a, const float* b, float* out, int64_t n, cudaStream_t s);
cudaError_t swiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t s);

}  // namespace zinc::backend::cuda
