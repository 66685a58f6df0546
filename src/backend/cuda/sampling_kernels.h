// Host-side launchers of the CUDA backend's sampling kernels (sampling.cu).
// Plain C++17 for nvcc; each launcher enqueues on `s` and returns cudaGetLastError().
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace zinc::backend::cuda {

// out[t] = index of the largest of the `cols` values of row t of x (the first on ties); out in device memory.
cudaError_t argmax_rows(const float* x, int64_t rows, int64_t cols, int32_t* out, cudaStream_t s);

// The k largest of the n values x (k <= 128), ordered by value descending and then index ascending, into ids/values
// (device). scratch: at least topk_scratch_bytes(n, k) bytes of device memory.
size_t topk_scratch_bytes(int64_t n, int k);
cudaError_t top_k(const float* x, int64_t n, int k, void* scratch, int32_t* ids, float* values, cudaStream_t s);

}  // namespace zinc::backend::cuda
