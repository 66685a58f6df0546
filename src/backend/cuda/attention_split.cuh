// What the decode attention kernels share (attention.cu, attention_mma.cu): the score of a dot product, and where
// a key split's partial results go for the merge (combine_kernel).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/attention_kernels.h"

namespace zinc::backend::cuda {

__device__ inline float score(float dot, float scale, float softcap) {
    const float s = dot * scale;
    return softcap > 0.0f ? softcap * tanhf(s / softcap) : s;
}

// Partials of split s of block bt (= t * n_head + h): head_dim output values, then (max, denominator) after all of
// them.
__device__ inline float* partial_acc(float* part, int64_t bt, int n_split, int split, int head_dim) {
    return part + (bt * n_split + split) * head_dim;
}
__device__ inline float* partial_ml(float* part, const AttentionArgs& a, int64_t bt, int n_split, int split) {
    return part + a.n_q * a.n_head * n_split * int64_t(a.head_dim) + (bt * n_split + split) * 2;
}

}  // namespace zinc::backend::cuda
