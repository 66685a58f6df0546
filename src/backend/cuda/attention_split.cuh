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

// Makes `a` query row t's: with row caches, its q and out rows, cache planes and capacity become those of its
// sequence. pos0 is then such that pos0 + t is the row's position, and `last` the position by which the keys are split
// (the last row's, or the largest of the row caches').
__device__ inline void select_row(AttentionArgs& a, int64_t t, int64_t& pos0, int64_t& last) {
    if (!a.row_caches) {
        pos0 = *a.pos;
        last = pos0 + a.n_q - 1;
        return;
    }
    const RowCache r = a.row_caches[t];
    const int64_t shift = (int64_t(r.row) - t) * a.n_head * a.head_dim;
    a.q += shift;
    a.out += shift;
    a.k.data = r.k;
    a.v.data = r.v;
    a.capacity = r.capacity;
    a.pages = r.pages;
    a.page_rows = r.page_rows;
    pos0 = int64_t(a.pos[r.row]) - t;
    last = a.last_pos;
}

// The row of out that query row t's results go to.
__device__ inline int64_t out_row(const AttentionArgs& a, int64_t t) { return a.row_caches ? a.row_caches[t].row : t; }

// Partials of split s of block bt (= t * n_head + h): head_dim output values, then (max, denominator) after all of
// them.
__device__ inline float* partial_acc(float* part, int64_t bt, int n_split, int split, int head_dim) {
    return part + (bt * n_split + split) * head_dim;
}
__device__ inline float* partial_ml(float* part, const AttentionArgs& a, int64_t bt, int n_split, int split) {
    return part + a.n_q * a.n_head * n_split * int64_t(a.head_dim) + (bt * n_split + split) * 2;
}

}  // namespace zinc::backend::cuda
