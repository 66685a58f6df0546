// Host-side launchers of the CUDA backend's normalization kernels (norm.cu).
// Plain C++17 for nvcc; each launcher enqueues on `s` and returns cudaGetLastError().
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace zinc::backend::cuda {

// norm.cu: out = x / rms(x) * w over each group of `group` values; w may be null. out may alias x.
cudaError_t rms_norm(const float* x, const float* w, float eps, int64_t group, int64_t n_groups, float* out,
                     cudaStream_t s);
// out = x / sqrt(sum(x^2) + eps) over each group; out may alias x.
cudaError_t l2_norm(const float* x, float eps, int64_t group, int64_t n_groups, float* out, cudaStream_t s);
// out = x / rms(x) * w * SiLU(z) over each group; w has `group` values; out may alias x.
cudaError_t gated_rms_norm(const float* x, const float* w, const float* z, float eps, int64_t group, int64_t n_groups,
                           float* out, cudaStream_t s);

}  // namespace zinc::backend::cuda
