// Host-side launchers of the CUDA backend's kernels (the .cu files in this folder). Plain C++17 with no
// backend.h, so nvcc never sees C++20 headers. Each launcher enqueues on `s` and returns
// cudaGetLastError(); the caller (cuda_backend.cpp) turns a failure into an exception naming the op and tensor.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace zinc::backend::cuda {

// ggml type ids (gguf::TensorType) that the kernels understand.
enum QType : int { kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kBF16 = 30 };

// True for the types get_rows and the tiled matmul can dequantize.
bool can_dequantize(int type);
// True for the types with an integer (dp4a) matvec against Q8_1 activations.
bool has_dp4a_matvec(int type);

// The GPU's Q8_1 activation block: 32 int8 values with f32 d and f32 s (sum of the unquantized inputs);
// f32 rather than ggml's half2 so no extra rounding enters through the scale.
struct BlockQ8_1f {
    float d, s;
    int8_t qs[32];
};
static_assert(sizeof(BlockQ8_1f) == 40, "BlockQ8_1f layout");

// get_rows.cu: out[t] = dequantized row ids[t] of table (ids in device memory).
cudaError_t get_rows(int type, const void* table, size_t row_bytes, int64_t cols, const int32_t* ids, int64_t n,
                     float* out, cudaStream_t s);

// norm.cu: out = x / rms(x) * w over each group of `group` values; w may be null. out may alias x.
cudaError_t rms_norm(const float* x, const float* w, float eps, int64_t group, int64_t n_groups, float* out,
                     cudaStream_t s);

// rope.cu: rotates the first n_rot values of each head in place with theta = (pos * freq_scale) * inv_freq[i];
// inv_freq: n_rot/2 values (device); pos: `rows` positions (device).
cudaError_t rope(float* x, int64_t rows, int64_t cols, int head_dim, const int32_t* pos, const float* inv_freq,
                 float freq_scale, int n_rot, bool neox, cudaStream_t s);

// elementwise.cu
cudaError_t add(const float* a, const float* b, float* out, int64_t n, cudaStream_t s);
cudaError_t swiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t s);

// attention.cu: causal GQA attention; q rows at positions pos0.., cache rows of kv_width; head_dim <= 256 and a
// multiple of 32.
cudaError_t attention(const float* q, int64_t n_q, const float* k, const float* v, int64_t kv_width, int64_t pos0,
                      int n_head, int n_head_kv, int head_dim, float scale, float* out, cudaStream_t s);

// matvec_q.cu: quantizes `rows` rows of `cols` values (cols % 32 == 0) to BlockQ8_1f (cols/32 blocks per row).
cudaError_t quantize_q8_1(const float* x, int64_t rows, int64_t cols, BlockQ8_1f* dst, cudaStream_t s);
// out[t][o] = W[o] . x[t] for t < n_act with dp4a dot products against the Q8_1 activation rows xq.
cudaError_t matvec_q(int type, const void* w, size_t row_bytes, int64_t n_out, int64_t cols, const BlockQ8_1f* xq,
                     int64_t n_act, float* out, int64_t out_stride, cudaStream_t s);
// The same for F32/F16/BF16 weights against f32 activations, in float.
cudaError_t matvec_f(int type, const void* w, size_t row_bytes, int64_t n_out, int64_t cols, const float* x,
                     int64_t n_act, float* out, int64_t out_stride, cudaStream_t s);

// matmul.cu: out[t][o] = W[o] . x[t], weight tiles dequantized to f32 in shared memory (prefill).
cudaError_t matmul_tiled(int type, const void* w, size_t row_bytes, int64_t n_out, int64_t cols, const float* x,
                         int64_t n_act, float* out, int64_t out_stride, cudaStream_t s);

}  // namespace zinc::backend::cuda
