// Host-side launchers of the CUDA backend's mixture-of-experts kernels (moe.cu), and the pieces of their logic
// that the tests check on the host (the top-k order, the chunking of large batches). Plain C++17 for nvcc; each
// launcher enqueues on `s` and returns cudaGetLastError().
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/matmul_kernels.h"

#ifdef __CUDACC__
#define ZINC_MOE_HD __host__ __device__ __forceinline__
#else
#define ZINC_MOE_HD inline
#endif

namespace zinc::backend::cuda {

// ---- routing: moe_route ----

// A top-k candidate: expert e with probability p; e < 0 stands for none.
struct TopCand {
    float p;
    int e;
};

// Probabilities are >= 0, so this value marks an expert that an earlier slot already took.
constexpr float kTakenExpert = -1.0f;

// Whether a ranks before b: the larger probability first, equal probabilities by the lower expert id (the CPU's
// order). Any expert ranks before none, so a row of NaN probabilities still yields valid ids.
ZINC_MOE_HD bool ranks_before(TopCand a, TopCand b) {
    if (a.e < 0) return false;
    if (b.e < 0) return true;
    return a.p > b.p || (a.p == b.p && a.e < b.e);
}

ZINC_MOE_HD TopCand better_of(TopCand a, TopCand b) { return ranks_before(b, a) ? b : a; }

// The best expert not yet taken among e = first, first + stride, ... < n: one lane's share of a row.
ZINC_MOE_HD TopCand best_of_lane(const float* p, int n, int first, int stride) {
    TopCand best{0.0f, -1};
    for (int e = first; e < n; e += stride)
        if (p[e] != kTakenExpert) best = better_of(best, TopCand{p[e], e});
    return best;
}

// Rows of logits handled by one block of moe_route (one warp each); each row's probabilities sit in shared memory.
constexpr int kRouteRowsPerBlock = 4;
constexpr int kMaxRouteExperts = 48 * 1024 / (kRouteRowsPerBlock * int(sizeof(float)));  // 48 KiB of shared memory

// Per row of n_exp logits (n_exp <= kMaxRouteExperts, 1 <= k <= n_exp): softmax (f32 probabilities, double sum),
// then the k most probable experts in ranks_before order into ids[t][0..k) and their probabilities into
// weights[t][0..k), divided by their f32 sum (at least 2^-14) when `renormalize`.
cudaError_t moe_route(const float* logits, int64_t rows, int n_exp, int k, bool renormalize, int32_t* ids,
                      float* weights, cudaStream_t s);

// ---- the expert FFN: moe_ffn ----

enum MoeAct : int { kMoeSwiglu = 0, kMoeGeglu = 1, kMoeSwigluOai = 2 };

// A projection's optional per-expert extras: v = v * scale[e], then v += bias[e * bias_stride + i].
struct MoeAffine {
    const float* scale = nullptr;
    const float* bias = nullptr;
    int64_t bias_stride = 0;
};

// For each pair p < n_pairs (expert ids[p]) and i < n_ff, with h rows of 2*n_ff values [gate | up]:
// a[p][i] = act(gate_affine(h[p][i]), up_affine(h[p][n_ff + i])). Exactly one of a_f32 (rows of n_ff floats) and
// a_q (rows of n_ff / 32 Q8_1 blocks, quantized as quantize_q8_1 does; n_ff % 32 == 0) is non-null.
cudaError_t moe_activate(const float* h, int64_t n_pairs, int64_t n_ff, const int32_t* ids, MoeAffine gate,
                         MoeAffine up, int act, float alpha, float limit, float* a_f32, BlockQ8_1f* a_q,
                         cudaStream_t s);

// out[t][i] = sum over s < k, in slot order, of weights[t][s] * down_affine(y[r][i]) (expert ids[t][s]) for
// t < n_tokens, i < n_out, r = y_rows[t * k + s] (or t * k + s when y_rows is null); y has rows of n_out values.
cudaError_t moe_combine(const float* y, const int32_t* y_rows, int64_t n_tokens, int k, int64_t n_out,
                        const int32_t* ids, const float* weights, MoeAffine down, float* out, cudaStream_t s);

// The down projection and moe_combine in one launch, for k <= kMaxDownSlots: out[t][i] as moe_combine computes it
// from y[t * k + s][i] = W_{ids[t * k + s]}[i] . a[t * k + s] (what matvec_q_ids / matvec_f_ids would write, bit for
// bit), without y going to memory. a_q: Q8_1 rows of cols / 32 blocks (types with a dp4a matvec), a_f32: f32 rows
// (F32/F16/BF16); n_tokens <= 65535.
constexpr int kMaxDownSlots = 16;
cudaError_t moe_down_sum(int type, const void* w, size_t row_bytes, size_t expert_bytes, int64_t n_out, int64_t cols,
                         const BlockQ8_1f* a_q, const float* a_f32, const int32_t* ids, int64_t n_tokens, int k,
                         const float* weights, MoeAffine down, float* out, cudaStream_t s);

// The pairs of a pass sorted by expert into groups of at most group_size pairs (matmul_kernels.h' PairGroups: the dp4a
// matvecs take kPairsPerGroup, moe_mma 32 or 64): pairs (n_pairs ints), groups (max_pair_groups of them) and
// n_groups (one int) in device memory; n_pairs <= 65535, n_exp <= kMaxGroupExperts, every id in [0, n_exp). When not
// null, slot_of (n_pairs ints) gets the place of each pair in `pairs`.
constexpr int kMaxGroupExperts = 4096;
int64_t max_pair_groups(int64_t n_pairs, int n_exp, int group_size);
cudaError_t moe_group_pairs(const int32_t* ids, int64_t n_pairs, int n_exp, int group_size, int32_t* pairs,
                            PairGroup* groups, int32_t* n_groups, int32_t* slot_of, cudaStream_t s);
// For the experts' products on tensor cores: out (f16 rows, matmul_kernels.h' layout, n_pairs of them) row i = row
// pairs[i] / x_div of `rows` (n_rows f16 rows of cols values, cols % 8 == 0) with its scale, and out_ids[i] =
// ids[pairs[i]].
cudaError_t gather_f16_rows(const void* rows, int64_t n_rows, int64_t cols, const int32_t* pairs, const int32_t* ids,
                            int x_div, int64_t n_pairs, void* out, int32_t* out_ids, cudaStream_t s);

// moe_mma.cu: the expert products of sorted pairs on tensor cores, the weights read quantized. For each group g <
// *groups.n_groups (made with group_size 32 or 64) of expert e and each of its pairs i in [first, first + count):
// out[i * out_stride + o] = (W_e[o] . rows[i]) * s_i for o < n_out, rows the n_rows sorted f16 rows made by
// gather_f16_rows and s_i their scales; W_e starts expert_bytes after W_{e-1}. Weight tiles are dequantized (the values
// of dequant8) to f16 in shared memory, once per group, and multiplied with mma.sync (f32 accumulation), so a value is
// within about 2^-10 sum_j |w_j x_j| of the exact one, as for the dense prefill. Every quantized type
// (has_mma_matmul); cols a multiple of kMmaCols; max_groups <= 65535.
constexpr int64_t kMmaCols = 64;
cudaError_t moe_mma(int type, const void* w, size_t row_bytes, size_t expert_bytes, int64_t n_out, int64_t cols,
                    const void* rows, int64_t n_rows, const PairGroups& groups, int group_size, float* out,
                    int64_t out_stride, cudaStream_t s);

// Tokens per pass of moe_ffn: whole tokens (all k slots), at most 65535 (token, slot) pairs (the expert matvecs'
// grid limit) and no more than `budget` bytes of per-pair scratch unless one token alone needs more. 1 <= k <= 65535.
inline int64_t moe_chunk_tokens(int64_t n_tokens, int64_t k, size_t bytes_per_pair, size_t budget) {
    const int64_t by_grid = 65535 / k;
    const int64_t by_budget = int64_t(budget / std::max<size_t>(bytes_per_pair * size_t(k), 1));
    return std::max<int64_t>(1, std::min({n_tokens, by_grid, by_budget}));
}

}  // namespace zinc::backend::cuda
