// Host-side launchers of the CUDA backend's RoPE and attention kernels (rope.cu, attention.cu).
// Plain C++17 for nvcc; each launcher enqueues on `s` and returns cudaGetLastError().
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace zinc::backend::cuda {

// rope.cu: rotates the first n_rot values of each head in place with theta = (pos * freq_scale) * inv_freq[i];
// inv_freq: n_rot/2 values (device); pos: `rows` positions (device).
cudaError_t rope(float* x, int64_t rows, int64_t cols, int head_dim, const int32_t* pos, const float* inv_freq,
                 float freq_scale, int n_rot, bool neox, cudaStream_t s);

// attention.cu: causal GQA attention; q rows at positions pos0.., cache rows of kv_width; head_dim <= 256 and a
// multiple of 32.
cudaError_t attention(const float* q, int64_t n_q, const float* k, const float* v, int64_t kv_width, int64_t pos0,
                      int n_head, int n_head_kv, int head_dim, float scale, float* out, cudaStream_t s);

}  // namespace zinc::backend::cuda
