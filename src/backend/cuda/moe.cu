// Mixture-of-experts kernels. moe_route: one warp per row of router logits (softmax, then k rounds of a warp-wide
// arg-max over the probabilities, kept in registers, or in shared memory for rows of more than 256 experts).
// moe_activate: one warp per 32 activated values of a (token, slot) pair, optionally quantizing them to a Q8_1 block
// for the down projection's dp4a matvec.
// moe_combine: one thread per output value, the weighted sum over the token's slots in slot order. The expert
// matvecs themselves are matvec_q_ids / matvec_f_ids (matvec_q.cu). moe_down_sum: the down matvec and moe_combine in
// one launch, a block of four warps per (output value, token) computing the slots' row dot products (matvec_row.cuh,
// as the expert matvecs do) and one thread adding them in slot order.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "backend/cuda/elementwise_kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matvec_row.cuh"
#include "backend/cuda/moe_kernels.h"

namespace zinc::backend::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;

// ---- routing ----

__global__ void __launch_bounds__(kRouteRowsPerBlock * 32)
    moe_route_kernel(const float* logits, int64_t rows, int n_exp, int k, bool renormalize, int32_t* ids,
                     float* weights) {
    begin_kernel();
    extern __shared__ float route_probs[];  // kRouteRowsPerBlock rows of n_exp
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t t = blockIdx.x * int64_t(kRouteRowsPerBlock) + warp;
    if (t >= rows) return;  // whole warps leave; the kernel has no block-wide barrier
    const float* l = logits + t * n_exp;
    float* p = route_probs + warp * n_exp;

    float mx = -INFINITY;
    for (int e = lane; e < n_exp; e += 32) mx = fmaxf(mx, l[e]);
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, off));
    // The CPU takes std::exp in f32 (glibc: within 0.502 ulp); exp in double rounded to f32 agrees with it far
    // more often than expf's 2 ulp would, which keeps near-equal experts in the CPU's order.
    double sum = 0.0;
    for (int e = lane; e < n_exp; e += 32) {
        const float v = float(exp(double(l[e] - mx)));
        p[e] = v;
        sum += v;
    }
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(kFullMask, sum, off);
    sum = __shfl_sync(kFullMask, sum, 0);  // one value in every lane, whatever order each lane added in
    const float inv = float(1.0 / sum);
    for (int e = lane; e < n_exp; e += 32) p[e] *= inv;
    __syncwarp();

    int32_t* id = ids + t * k;
    float* w = weights + t * k;
    float wsum = 0.0f;
    for (int s = 0; s < k; ++s) {
        TopCand c = best_of_lane(p, n_exp, lane, 32);
        for (int off = 16; off > 0; off >>= 1)
            c = better_of(c, TopCand{__shfl_xor_sync(kFullMask, c.p, off), __shfl_xor_sync(kFullMask, c.e, off)});
        // Lane 0 holds the warp's best; it alone writes, and marks the expert taken before the next round.
        if (lane == 0) {
            id[s] = c.e;
            w[s] = c.p;
            wsum += c.p;
            if (c.e >= 0) p[c.e] = kTakenExpert;
        }
        __syncwarp();
    }
    if (renormalize && lane == 0) {
        wsum = fmaxf(wsum, 6.103515625e-5f);  // as the CPU (and llama.cpp)
        for (int s = 0; s < k; ++s) w[s] = w[s] / wsum;
    }
}

// moe_route_kernel for rows of at most 32 R experts and k <= 32, the models' shapes: lane l holds the probabilities
// of experts l, l + 32, ... in registers, so a round reads no shared memory, and the weights are renormalized before
// they are stored rather than read back. Both kernels choose the same experts: a row without NaN by two reductions
// per round that find the expert the order ranks_before defines, a row with NaN by every comparison in the order
// moe_route_kernel makes it (each lane its experts in ascending order, then the same butterfly, lane 0's result
// taking the slot), where NaN probabilities make the outcome depend on that order.
template <int R>
__global__ void __launch_bounds__(kRouteRowsPerBlock * 32)
    moe_route_regs_kernel(const float* logits, int64_t rows, int n_exp, int k, bool renormalize, int32_t* ids,
                          float* weights) {
    begin_kernel();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t t = blockIdx.x * int64_t(kRouteRowsPerBlock) + warp;
    if (t >= rows) return;  // whole warps leave; the kernel has no block-wide barrier
    const float* l = logits + t * n_exp;

    float v[R];
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < R; ++j) {
        const int e = lane + 32 * j;
        v[j] = e < n_exp ? l[e] : 0.0f;
        if (e < n_exp) mx = fmaxf(mx, v[j]);
    }
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, off));
    double sum = 0.0;  // exp in double rounded to f32: see moe_route_kernel
#pragma unroll
    for (int j = 0; j < R; ++j) {
        if (lane + 32 * j < n_exp) {
            v[j] = float(exp(double(v[j] - mx)));
            sum += v[j];
        }
    }
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(kFullMask, sum, off);
    sum = __shfl_sync(kFullMask, sum, 0);
    const float inv = float(1.0 / sum);
#pragma unroll
    for (int j = 0; j < R; ++j) v[j] = lane + 32 * j < n_exp ? v[j] * inv : kTakenExpert;  // past the row: never chosen

    TopCand mine{0.0f, -1};  // lane s keeps slot s
    float wsum = 0.0f;       // the slots' probabilities summed in slot order, the same in every lane
    bool nan = false;
#pragma unroll
    for (int j = 0; j < R; ++j) nan = nan || isnan(v[j]);
    if (!__any_sync(kFullMask, nan)) {
        // No NaN in the row (a working model's every row): the probabilities are >= +0, so their bit patterns order
        // as they do, and a round is two warp-wide reductions, the largest probability and then the lowest expert
        // holding it: the expert that the butterfly of ranks_before below picks, with two reductions in place of its
        // five rounds of shuffles and comparisons. key -1: taken, or past the row.
        int key[R];
#pragma unroll
        for (int j = 0; j < R; ++j) key[j] = v[j] == kTakenExpert ? -1 : __float_as_int(v[j]);
        for (int s = 0; s < k; ++s) {
            int m = key[0];
#pragma unroll
            for (int j = 1; j < R; ++j) m = max(m, key[j]);
            m = __reduce_max_sync(kFullMask, m);
            int e = INT_MAX;
#pragma unroll
            for (int j = R - 1; j >= 0; --j)
                if (key[j] == m) e = lane + 32 * j;
            e = __reduce_min_sync(kFullMask, e);
            const TopCand c = m < 0 ? TopCand{0.0f, -1} : TopCand{__int_as_float(m), e};
            wsum += c.p;
            if (lane == s) mine = c;
#pragma unroll
            for (int j = 0; j < R; ++j)
                if (lane + 32 * j == c.e) key[j] = -1;
        }
    } else {
        for (int s = 0; s < k; ++s) {
            TopCand c{0.0f, -1};
#pragma unroll
            for (int j = 0; j < R; ++j)
                if (v[j] != kTakenExpert) c = better_of(c, TopCand{v[j], lane + 32 * j});
            for (int off = 16; off > 0; off >>= 1)
                c = better_of(c,
                              TopCand{__shfl_xor_sync(kFullMask, c.p, off), __shfl_xor_sync(kFullMask, c.e, off)});
            c = TopCand{__shfl_sync(kFullMask, c.p, 0), __shfl_sync(kFullMask, c.e, 0)};  // lane 0's, in every lane
            wsum += c.p;
            if (lane == s) mine = c;
#pragma unroll
            for (int j = 0; j < R; ++j)
                if (lane + 32 * j == c.e) v[j] = kTakenExpert;
        }
    }
    if (lane < k) {
        float w = mine.p;
        if (renormalize) w = w / fmaxf(wsum, 6.103515625e-5f);  // as the CPU
        ids[t * k + lane] = mine.e;
        weights[t * k + lane] = w;
    }
}

// ---- expert FFN ----

// The CPU's scale_bias: a product, then a sum, each rounded (no fused multiply-add).
__device__ __forceinline__ float apply_affine(float v, const MoeAffine& a, int e, int64_t i) {
    if (a.scale) v = __fmul_rn(v, a.scale[e]);
    if (a.bias) v = __fadd_rn(v, a.bias[int64_t(e) * a.bias_stride + i]);
    return v;
}

template <int ACT>
__device__ __forceinline__ float activate(float g, float u, float alpha, float limit) {
    if constexpr (ACT == kMoeSwiglu)
        return silu_times(g, u);
    else if constexpr (ACT == kMoeGeglu)
        return gelu_tanh_times(g, u);
    else
        return swiglu_oai_times(g, u, alpha, limit);
}

// Warp w handles values [32 c, 32 c + 32) of pair p = w / row_chunks (c = w % row_chunks). With QUANT the chunk
// becomes Q8_1 block w of a_q exactly as quantize_q8_1 would quantize the f32 values.
template <int ACT, bool QUANT>
__global__ void moe_act_kernel(const float* h, int64_t n_warps, int64_t n_ff, int64_t row_chunks, const int32_t* ids,
                               MoeAffine ga, MoeAffine ua, float alpha, float limit, float* a_f32, BlockQ8_1f* a_q) {
    begin_kernel();
    const int64_t wi = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (wi >= n_warps) return;  // whole warps leave together
    const int64_t p = wi / row_chunks, i = (wi % row_chunks) * 32 + lane;
    float v = 0.0f;
    if (i < n_ff) {  // always true with QUANT (n_ff % 32 == 0)
        const float* hp = h + p * 2 * n_ff;
        float g = hp[i], u = hp[n_ff + i];
        if (ga.scale || ga.bias || ua.scale || ua.bias) {
            const int e = ids[p];
            g = apply_affine(g, ga, e, i);
            u = apply_affine(u, ua, e, i);
        }
        v = activate<ACT>(g, u, alpha, limit);
    }
    if constexpr (!QUANT) {
        if (i < n_ff) a_f32[p * n_ff + i] = v;
    } else {
        quantize_q8_1_warp(v, a_q[wi], lane);  // row_chunks = n_ff / 32 blocks per pair, so block p * row_chunks + c
    }
}

__global__ void moe_combine_kernel(const float* y, const int32_t* y_rows, int64_t n, int k, int64_t n_out,
                                   const int32_t* ids, const float* weights, MoeAffine da, float* out) {
    begin_kernel();
    const bool affine = da.scale || da.bias;
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < n; idx += stride) {
        const int64_t t = idx / n_out, i = idx - t * n_out;
        float acc = 0.0f;
        for (int s = 0; s < k; ++s) {
            const int64_t p = t * k + s;
            float v = y[(y_rows ? int64_t(y_rows[p]) : p) * n_out + i];
            if (affine) v = apply_affine(v, da, ids[p], i);
            const float wv = __fmul_rn(v, weights[p]);
            acc = s == 0 ? wv : __fadd_rn(acc, wv);  // the CPU's o = y w, then o += y w per slot
        }
        out[idx] = acc;
    }
}

// Block (i, t): kStageWarps warps (the block size matvec_row.cuh's staging is laid out for), warp w computing the
// value i of slots w, w + kStageWarps, ...; thread 0 then adds the slots as moe_combine does.
//
// Q4_K rows of at most 32 chunks (Qwen3.6's 512-value expert rows: 16 chunks, so half the lanes have one and the rest
// none) are read in place, each lane its chunk of two slots' rows at once: the warp then waits for memory once for
// both of its slots, where the staged dot product copies one slot's row into shared memory and computes it before it
// asks for the next. Each lane adds the same chunk to the same zero, so the values are the staged path's bit for bit.
// (tg128 on the H100: Qwen3.6-35B-A3B 349.9 against 365.5 tok/s. Gemma 4's Q8_0 rows of 704 values, whose 34-byte
// blocks are read in place a word at a time, measured slower that way: 360.0 against 354.8.)
//
// kGroups: whether rows of this width may be read by groups (groups_width). Rows that may not take the kernel without
// the group path, which holds fewer registers, so that more blocks fit a multiprocessor: gpt-oss's 2880-value MXFP4
// rows 56 registers against 80 (9 blocks against 6), Qwen3.6's 512-value Q4_K rows 70 against 96 (7 against 5).
template <int T, bool kGroups>
__global__ void __launch_bounds__(kStageWarps * 32)
    moe_down_sum_kernel(const uint8_t* w, size_t row_bytes, size_t expert_bytes, int64_t n_out, int64_t cols,
                        const BlockQ8_1f* a_q, const float* a_f32, const int32_t* ids, int k, const float* weights,
                        MoeAffine da, float* out) {
    begin_kernel();
    __shared__ float slot[kMaxDownSlots];
    const int64_t i = blockIdx.x, t = blockIdx.y;
    const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
    const auto row = [&](int s) { return w + size_t(ids[t * k + s]) * expert_bytes + i * row_bytes; };
    // Slot s's value, scaled, biased and weighted, into slot[s].
    const auto finish = [&](int s, float v) {
        const int64_t p = t * k + s;
        if (lane == 0) {
            if (da.scale || da.bias) v = apply_affine(v, da, ids[p], i);
            slot[s] = __fmul_rn(v, weights[p]);
        }
    };
    // The slots added in slot order by thread 0, once every warp has stored its slots.
    const auto add_slots = [&] {
        __syncthreads();
        if (threadIdx.x == 0) {
            float acc = slot[0];
            for (int j = 1; j < k; ++j) acc = __fadd_rn(acc, slot[j]);  // the CPU's o = y w, then o += y w per slot
            out[t * n_out + i] = acc;
        }
    };
    if constexpr (T == kQ4_K) {
        if (cols <= 32 * 32) {
            const int n = int(cols / 32);
            for (int s0 = warp; s0 < k; s0 += 2 * kStageWarps) {
                const int s1 = s0 + kStageWarps < k ? s0 + kStageWarps : s0;  // s0 again where there is no second
                float v0 = 0.0f, v1 = 0.0f;
                if (lane < n) {
                    const float d0 = chunk_dot<T>(row(s0), lane, a_q[(t * k + s0) * n + lane]);
                    const float d1 = chunk_dot<T>(row(s1), lane, a_q[(t * k + s1) * n + lane]);
                    v0 = __fadd_rn(v0, d0);
                    v1 = __fadd_rn(v1, d1);
                }
                v0 = warp_sum(v0);
                v1 = warp_sum(v1);
                finish(s0, v0);
                if (s1 != s0) finish(s1, v1);
            }
            add_slots();
            return;
        }
    }
    for (int s = warp; s < k; s += kStageWarps) {
        const int64_t p = t * k + s;
        if constexpr (is_float_weight(T))
            finish(s, warp_row_dot<T>(row(s), nullptr, a_f32 + p * cols, cols, lane, false));
        else
            finish(s, warp_row_dot<T, true, kGroups>(row(s), a_q + p * (cols / 32), nullptr, cols, lane, false));
    }
    add_slots();
}

template <int ACT>
void launch_act(unsigned grid, const float* h, int64_t n_warps, int64_t n_ff, int64_t row_chunks, const int32_t* ids,
                MoeAffine ga, MoeAffine ua, float alpha, float limit, float* a_f32, BlockQ8_1f* a_q, cudaStream_t s) {
    if (a_q)
        launch(moe_act_kernel<ACT, true>, grid, 256, 0, s, h, n_warps, n_ff, row_chunks, ids, ga, ua, alpha, limit,
               a_f32, a_q);
    else
        launch(moe_act_kernel<ACT, false>, grid, 256, 0, s, h, n_warps, n_ff, row_chunks, ids, ga, ua, alpha, limit,
               a_f32, a_q);
}

// One block: counts per expert in shared memory, the groups by thread 0 (experts in order, group_size pairs at a
// time), then each pair into its expert's range. The order of the pairs within an expert's range depends on the
// atomics, but no pair's output depends on it.
__global__ void __launch_bounds__(1024) group_pairs_kernel(const int32_t* ids, int n_pairs, int n_exp, int group_size,
                                                           int32_t* pairs, PairGroup* groups, int32_t* n_groups,
                                                           int32_t* slot_of) {
    extern __shared__ int32_t counts[];  // n_exp counts, then n_exp fill positions
    int32_t* fill = counts + n_exp;
    begin_kernel();
    for (int e = threadIdx.x; e < n_exp; e += blockDim.x) counts[e] = 0;
    __syncthreads();
    for (int p = threadIdx.x; p < n_pairs; p += blockDim.x) atomicAdd(&counts[ids[p]], 1);
    __syncthreads();
    if (threadIdx.x == 0) {
        int32_t first = 0, n = 0;
        for (int e = 0; e < n_exp; ++e) {
            fill[e] = first;
            for (int32_t c = 0; c < counts[e]; c += group_size)
                groups[n++] = {e, first + c, counts[e] - c < group_size ? counts[e] - c : group_size};
            first += counts[e];
        }
        *n_groups = n;
    }
    __syncthreads();
    for (int p = threadIdx.x; p < n_pairs; p += blockDim.x) {
        const int32_t slot = atomicAdd(&fill[ids[p]], 1);
        pairs[slot] = p;
        if (slot_of) slot_of[p] = slot;
    }
}

// Block i: sorted row i = the f16 row of pair pairs[i]'s token (pairs[i] / x_div) and its scale, and that pair's
// expert id.
__global__ void __launch_bounds__(256) gather_f16_rows_kernel(const uint4* rows16, const float* scale,
                                                              const int32_t* pairs, const int32_t* ids, int x_div,
                                                              int64_t chunks, uint4* out16, float* out_scale,
                                                              int32_t* out_ids) {
    begin_kernel();
    const int32_t p = pairs[blockIdx.x];
    const int64_t a = p / x_div;
    for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) out16[blockIdx.x * chunks + c] = rows16[a * chunks + c];
    if (threadIdx.x == 0) {
        out_scale[blockIdx.x] = scale[a];
        out_ids[blockIdx.x] = ids[p];
    }
}

}  // namespace

cudaError_t moe_route(const float* logits, int64_t rows, int n_exp, int k, bool renormalize, int32_t* ids,
                      float* weights, cudaStream_t s) {
    if (n_exp <= 0 || n_exp > kMaxRouteExperts || k <= 0 || k > n_exp) return cudaErrorInvalidValue;
    if (rows > 0) {
        const unsigned grid = unsigned((rows + kRouteRowsPerBlock - 1) / kRouteRowsPerBlock);
        const size_t smem = size_t(kRouteRowsPerBlock) * size_t(n_exp) * sizeof(float);
        const unsigned block = kRouteRowsPerBlock * 32;
        if (k <= 32 && n_exp <= 32)
            launch(moe_route_regs_kernel<1>, grid, block, 0, s, logits, rows, n_exp, k, renormalize, ids, weights);
        else if (k <= 32 && n_exp <= 128)
            launch(moe_route_regs_kernel<4>, grid, block, 0, s, logits, rows, n_exp, k, renormalize, ids, weights);
        else if (k <= 32 && n_exp <= 256)
            launch(moe_route_regs_kernel<8>, grid, block, 0, s, logits, rows, n_exp, k, renormalize, ids, weights);
        else
            launch(moe_route_kernel, grid, block, smem, s, logits, rows, n_exp, k, renormalize, ids, weights);
    }
    return cudaGetLastError();
}

cudaError_t moe_activate(const float* h, int64_t n_pairs, int64_t n_ff, const int32_t* ids, MoeAffine gate,
                         MoeAffine up, int act, float alpha, float limit, float* a_f32, BlockQ8_1f* a_q,
                         cudaStream_t s) {
    if ((a_f32 == nullptr) == (a_q == nullptr) || (a_q && n_ff % 32 != 0)) return cudaErrorInvalidValue;
    if (n_pairs <= 0 || n_ff <= 0) return cudaGetLastError();
    const int64_t row_chunks = (n_ff + 31) / 32, n_warps = n_pairs * row_chunks;
    const unsigned grid = unsigned((n_warps + 7) / 8);  // 8 warps per 256-thread block
#define ZINC_ACT_CASE(A)                                                                                 \
    case A: launch_act<A>(grid, h, n_warps, n_ff, row_chunks, ids, gate, up, alpha, limit, a_f32, a_q, s); break;
    switch (act) {
        ZINC_ACT_CASE(kMoeSwiglu)
        ZINC_ACT_CASE(kMoeGeglu)
        ZINC_ACT_CASE(kMoeSwigluOai)
    default: return cudaErrorInvalidValue;
    }
#undef ZINC_ACT_CASE
    return cudaGetLastError();
}

cudaError_t moe_combine(const float* y, const int32_t* y_rows, int64_t n_tokens, int k, int64_t n_out,
                        const int32_t* ids, const float* weights, MoeAffine down, float* out, cudaStream_t s) {
    if (k <= 0) return cudaErrorInvalidValue;
    const int64_t n = n_tokens * n_out;
    if (n > 0) {
        const int64_t blocks = (n + 255) / 256;
        launch(moe_combine_kernel, unsigned(blocks < 65535 ? blocks : 65535), 256, 0, s, y, y_rows, n, k, n_out, ids,
               weights, down, out);
    }
    return cudaGetLastError();
}

cudaError_t moe_down_sum(int type, const void* w, size_t row_bytes, size_t expert_bytes, int64_t n_out, int64_t cols,
                         const BlockQ8_1f* a_q, const float* a_f32, const int32_t* ids, int64_t n_tokens, int k,
                         const float* weights, MoeAffine down, float* out, cudaStream_t s) {
    if (k <= 0 || k > kMaxDownSlots || n_tokens > 65535 || n_out > INT32_MAX) return cudaErrorInvalidValue;
    if (n_out <= 0 || n_tokens <= 0) return cudaGetLastError();
    const dim3 grid{unsigned(n_out), unsigned(n_tokens)};
    const auto* wb = static_cast<const uint8_t*>(w);
    return for_weight_type<kAllTypes>(type, [&](auto tag) {
        constexpr int T = decltype(tag)::value;
        if (is_float_weight(T) ? a_f32 == nullptr : a_q == nullptr) return cudaErrorInvalidValue;
        const auto run = [&](auto kernel) {
            return launch(kernel, grid, kStageWarps * 32, 0, s, wb, row_bytes, expert_bytes, n_out, cols, a_q, a_f32,
                          ids, k, weights, down, out);
        };
        if constexpr (kGroupsInPlace<T>)
            if (groups_width(T, cols)) return run(moe_down_sum_kernel<T, true>);
        return run(moe_down_sum_kernel<T, false>);
    });
}

int64_t max_pair_groups(int64_t n_pairs, int n_exp, int group_size) { return n_pairs / group_size + n_exp; }

cudaError_t moe_group_pairs(const int32_t* ids, int64_t n_pairs, int n_exp, int group_size, int32_t* pairs,
                            PairGroup* groups, int32_t* n_groups, int32_t* slot_of, cudaStream_t s) {
    if (n_pairs > 65535 || n_exp <= 0 || n_exp > kMaxGroupExperts || group_size <= 0) return cudaErrorInvalidValue;
    return launch(group_pairs_kernel, 1, 1024, size_t(2 * n_exp) * sizeof(int32_t), s, ids, int(n_pairs), n_exp,
                  group_size, pairs, groups, n_groups, slot_of);
}

cudaError_t gather_f16_rows(const void* rows, int64_t n_rows, int64_t cols, const int32_t* pairs, const int32_t* ids,
                            int x_div, int64_t n_pairs, void* out, int32_t* out_ids, cudaStream_t s) {
    if (cols % 8 != 0 || n_pairs > INT32_MAX || x_div <= 0) return cudaErrorInvalidValue;
    if (n_pairs == 0) return cudaGetLastError();
    const auto* src = static_cast<const uint8_t*>(rows);
    auto* dst = static_cast<uint8_t*>(out);
    const auto* scale = reinterpret_cast<const float*>(src + f16_rows_scale_offset(n_rows, cols));
    auto* out_scale = reinterpret_cast<float*>(dst + f16_rows_scale_offset(n_pairs, cols));
    return launch(gather_f16_rows_kernel, unsigned(n_pairs), 256, 0, s, reinterpret_cast<const uint4*>(src), scale,
                  pairs, ids, x_div, cols / 8, reinterpret_cast<uint4*>(dst), out_scale, out_ids);
}

}  // namespace zinc::backend::cuda
