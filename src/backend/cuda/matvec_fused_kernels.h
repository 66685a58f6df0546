// Host-side launchers of the fused decode matvecs (matvec_fused.cu), which the fused ops of fused_ops.cpp run for one
// activation row. Plain C++17 for nvcc; each launcher enqueues on `s` and returns cudaGetLastError(). Weight types are
// the ggml ids of matmul_kernels.h: those with a dp4a matvec read xq, the Q8_1 blocks of the activation row
// (quantize_q8_1), and F32/F16/BF16 read the f32 row x.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/matmul_kernels.h"

namespace zinc::backend::cuda {

// One weight of a multi-weight matvec: out[o] = W[o] . x + bias[o] (or out[o] += W[o] . x + bias[o]) for o < n_out;
// without a bias (null), no bias term. bias: n_out f32 values in device memory.
struct MatvecJob {
    int type = 0;  // the weight's type
    const void* w = nullptr;
    size_t row_bytes = 0;
    int64_t n_out = 0;
    float* out = nullptr;
    const float* bias = nullptr;
};

// The most weights one launch of matvec_multi takes (they travel as kernel parameters).
constexpr int kMaxMatvecJobs = 8;

// Whether one launch of matvec_multi takes weights of the two types a and b (a != b): Q6_K beside Q4_K or Q5_K, as
// the K-quant mixes put a Q6_K V projection beside Q and K.
bool matvec_multi_pair(int a, int b);

// Whether matvec_multi can quantize the activation row x itself for these weights: one type, Q4_K or Q5_K, rows read
// in place of at most 4096 values, whose blocks copy their activations into shared memory anyway (matvec_row.cuh,
// ActShared), x 16-byte aligned. It then takes xq null, and saves the launch of quantize_q8_1 before it.
bool matvec_multi_quantizes(const MatvecJob* jobs, int n_jobs, int64_t cols, const float* x);

// The matvecs of n_jobs (1..kMaxMatvecJobs) weights of one type, or of a pair's two types, all with `cols` columns,
// against the same activation row in one launch. With `accumulate`, out[o] += v (the residual add of matmul_add);
// else out[o] = v, where v = W[o] . x + bias[o] with a bias, else W[o] . x. Each row's value equals matvec_q's /
// matvec_f's bit for bit, followed by add_bias and add (each one f32 add, in that order). Quantized types read xq,
// the Q8_1 blocks of x, or with xq null x itself where matvec_multi_quantizes.
cudaError_t matvec_multi(const MatvecJob* jobs, int n_jobs, int64_t cols, const BlockQ8_1f* xq, const float* x,
                         bool accumulate, cudaStream_t s);

// out[o] = act(G[o] . x) * (U[o] . x) for o < n_out, gate G and up U of one type and shape; act 0 = SiLU (swiglu),
// 1 = GELU_tanh (geglu), each evaluated as the element-wise kernels do, so that out equals matvec, matvec, swiglu
// (or geglu) bit for bit.
cudaError_t matvec_gated(int type, const void* gate, const void* up, size_t row_bytes, int64_t n_out, int64_t cols,
                         const BlockQ8_1f* xq, const float* x, int act, float* out, cudaStream_t s);

}  // namespace zinc::backend::cuda
