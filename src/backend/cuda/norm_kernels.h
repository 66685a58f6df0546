// Host-side launchers of the CUDA backend's normalization kernels (norm.cu).
// Plain C++17 for nvcc; each launcher enqueues on `s` and returns cudaGetLastError().
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/matmul_kernels.h"

namespace zinc::backend::cuda {

// norm.cu: out = x / rms(x) * w over each group of `group` values; w may be null. out may alias x. With q8 (where
// rms_norm_can_quantize), the kernel also writes out's Q8_1 blocks there, exactly as quantize_q8_1 of out would: a
// matvec that reads them next needs no quantization launch of its own.
cudaError_t rms_norm(const float* x, const float* w, float eps, int64_t group, int64_t n_groups, float* out,
                     BlockQ8_1f* q8, cudaStream_t s);
// Whether rms_norm can write the Q8_1 blocks of its output for these arguments: groups of whole 32-value blocks, at
// most 32768 values, in 16-byte aligned rows.
bool rms_norm_can_quantize(const float* x, const float* w, int64_t group, const float* out);
// out = (out + x / rms(x) * w) * scale over each group (scale 1: no product), rounded as rms_norm, add and scale
// round each step (Backend::norm_add); w may be null; out does not overlap x. Where rms_norm_add_fits: groups of a
// whole number of float4s, at most 32768 values, in 16-byte aligned rows.
cudaError_t rms_norm_add(const float* x, const float* w, float eps, int64_t group, int64_t n_groups, float* out,
                         float scale, cudaStream_t s);
bool rms_norm_add_fits(const float* x, const float* w, int64_t group, const float* out);
// Several outputs of one normalization (Backend::rms_norms): out[j] = x / rms(x) * w[j] over each group, then times
// scale[j] where that is not 1, each rounded as rms_norm and scale round it; w[j] may be null. With q8 (where
// rms_norm_can_quantize for output 0), also output 0's Q8_1 blocks, as rms_norm writes them. For 1 <= n_out <=
// kMaxNormOuts outputs where rms_norm_add_fits for each; the outputs overlap neither x nor each other.
constexpr int kMaxNormOuts = 3;
cudaError_t rms_norms(const float* x, const float* const* w, float* const* out, const float* scale, int n_out,
                      float eps, int64_t group, int64_t n_groups, BlockQ8_1f* q8, cudaStream_t s);
// shared_expert_add then rms_norm, group by group (Backend::shared_expert_add_norm), in one launch: x[i] += a[i] + b[i]
// * sigmoid(gate[g]) (one gate per group), each step rounded as shared_expert_add's kernel rounds it, stored back to x,
// then out = x / rms(x) * w, with q8 (where rms_norm_can_quantize) also out's Q8_1 blocks, as rms_norm computes them.
// Where rms_norm_add_fits and a and b are 16-byte aligned.
cudaError_t shared_expert_add_norm(float* x, const float* a, const float* b, const float* gate, const float* w,
                                   float eps, int64_t group, int64_t n_groups, float* out, BlockQ8_1f* q8,
                                   cudaStream_t s);
// The outputs of one launch of the norm kernel, passed by value.
struct NormOuts {
    const float4* w[kMaxNormOuts];
    float4* out[kMaxNormOuts];
    float s[kMaxNormOuts];
};
// What the norm kernel adds to its input first, when `a` is set: x + a + b * sigmoid(gate[group]) is normalized, and
// stored to sum (x itself: the residual stream).
struct NormPreAdd {
    const float4* a = nullptr;
    const float4* b = nullptr;
    const float* gate = nullptr;
    float4* sum = nullptr;
};
// out = x / sqrt(sum(x^2) + eps) over each group; out may alias x.
cudaError_t l2_norm(const float* x, float eps, int64_t group, int64_t n_groups, float* out, cudaStream_t s);
// out = x / rms(x) * w * SiLU(z) over each group; w has `group` values; out may alias x.
cudaError_t gated_rms_norm(const float* x, const float* w, const float* z, float eps, int64_t group, int64_t n_groups,
                           float* out, cudaStream_t s);

}  // namespace zinc::backend::cuda
