// Decode attention (and short prefill chunks) on tensor cores over an f16 cache, as plan_attention chooses: a block
// per (query row, group of G <= 8 query heads sharing a KV head, key split), its keys dealt to the warps 16 at a time. Each warp copies its K and V rows into shared memory in the background (two stages) and
// computes with mma.sync m16n8k16 (f16 inputs, f32 accumulation):
//   S^T = Q K^T   A = the G queries, B = 8 keys' K rows read as they are stored;
//   O^T += V^T P^T  A = 16 values x 16 keys of V through ldmatrix.trans, B = the heads' probabilities.
// f16 inputs alone would round the queries and the probabilities to 11 bits; each is split instead into its f16
// rounding and the f16 rounding of the remainder (hi + lo, about 22 bits): the queries' hi and lo are rows g and
// g + 8 of A, so one product gives both parts of head g's scores in the same lane, and the probabilities' hi and lo
// go through two products into the same accumulators. The K and V values are f16 already, and products of f16
// values are exact in f32, so the results agree with the f32 kernels to f32 rounding.
//
// Fragment layouts (PTX ISA, mma.m16n8k16 with .f16 inputs): lane = 4 g + t holds A rows g and g + 8 at columns
// 2t, 2t + 1 and 2t + 8, 2t + 9; B column g at rows 2t, 2t + 1 and 2t + 8, 2t + 9; C rows g and g + 8 at columns 2t,
// 2t + 1. So in S^T a lane holds head g's scores of keys 2t, 2t + 1 (of 8), and those of two 8-key products are
// exactly the B fragment of its head's probabilities for the 16 keys of O^T's product; in O^T it holds values
// 16 mb + g and + 8 of heads 2t and 2t + 1.
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/attention_split.cuh"
#include "backend/cuda/kv_store.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma.cuh"

namespace zinc::backend::cuda {
namespace {

constexpr int kChunk = 16;  // keys of one warp step: the k of O^T's product
constexpr int kRows = 8;    // heads a block serves at most: the columns of O^T

template <int D>
struct MmaShape {
    static constexpr int kWarps = D <= 128 ? 4 : 2;
    // Bytes per staged row: the values and 16 bytes of padding, so that the eight rows a fragment load or an
    // ldmatrix touches start on distinct banks.
    static constexpr int kStride = 2 * D + 16;
    static constexpr int kStage = 2 * kChunk * kStride;  // a chunk's K rows, then its V rows
    static constexpr int kSmem = kWarps * 2 * kStage;    // two stages per warp
    // The warps' merge reuses the stages: per warp 8 maxima, 8 denominators and 8 heads' outputs.
    static_assert(kWarps * kRows * (2 + D) * 4 <= kSmem, "the merge fits in the staging memory");
};

// Starts copying the K and V rows of keys [j0, j0 + 16) of KV head kvh into a stage; rows at or past `end` are
// zero-filled (their probabilities are 0, and 0 times a stale NaN would not be).
template <int D>
__device__ __forceinline__ void fetch_chunk(const AttentionArgs& a, int kvh, int64_t j0, int64_t end, char* stage,
                                            int lane) {
    using S = MmaShape<D>;
    constexpr int kPieces = 2 * D / 16;  // 16-byte pieces per row
    for (int i = lane; i < kChunk * kPieces; i += 32) {
        const int r = i / kPieces, k = i % kPieces;
        const bool real = j0 + r < end;
        const int64_t row = cache_row(a, real ? j0 + r : j0);
        const int64_t at = (row * a.kv_width + int64_t(kvh) * D) * 2 + 16 * k;
        __pipeline_memcpy_async(stage + r * S::kStride + 16 * k, static_cast<const char*>(a.k.data) + at, 16,
                                real ? 0 : 16);
        __pipeline_memcpy_async(stage + (kChunk + r) * S::kStride + 16 * k, static_cast<const char*>(a.v.data) + at,
                                16, real ? 0 : 16);
    }
    __pipeline_commit();
}

template <int D>
__global__ void __launch_bounds__(MmaShape<D>::kWarps * 32) mma_kernel(AttentionArgs a, int G, int n_split,
                                                                       float* part_out) {
    begin_kernel();
    using S = MmaShape<D>;
    extern __shared__ __align__(16) char sm[];
    const int groups = a.n_head / G;
    const int64_t t = int64_t(blockIdx.x) / groups;
    const int h0 = int(blockIdx.x % groups) * G, split = int(blockIdx.y), kvh = h0 / (a.n_head / a.n_head_kv);
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, tq = lane % 4;
    int64_t pos0, last;
    select_row(a, t, pos0, last);
    const int64_t chunk = split_chunk(visible_keys(last, a.window), n_split);
    const KeyRange keys = split_keys(visible_keys(pos0 + t, a.window), chunk, split);
    const int64_t q_cols = int64_t(a.n_head) * D;

    // A of S^T: row g the f16 query of head h0 + g (zeros past G), row g + 8 its remainder.
    uint32_t qa[D / 16][4];
    {
        const float* qg = a.q + t * q_cols + int64_t(h0 + (g < G ? g : 0)) * D;
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) {
            const int c = 16 * ks + 2 * tq;
            const float2 x01 = g < G ? *reinterpret_cast<const float2*>(qg + c) : make_float2(0.0f, 0.0f);
            const float2 x89 = g < G ? *reinterpret_cast<const float2*>(qg + c + 8) : make_float2(0.0f, 0.0f);
            split_pair(x01.x, x01.y, qa[ks][0], qa[ks][1]);
            split_pair(x89.x, x89.y, qa[ks][2], qa[ks][3]);
        }
    }

    float o[D / 16][4];  // O^T: values 16 mb + g (0, 1) and + 8 (2, 3) of heads 2 tq (0, 2) and 2 tq + 1 (1, 3)
#pragma unroll
    for (int mb = 0; mb < D / 16; ++mb) o[mb][0] = o[mb][1] = o[mb][2] = o[mb][3] = 0.0f;
    float m = -INFINITY;  // head g's running max, the same on its four lanes
    float l = 0.0f;       // this lane's share of head g's denominator

    char* const stages = sm + warp * 2 * S::kStage;
    const int n_chunks = int((keys.end - keys.begin + kChunk - 1) / kChunk);
    if (warp < n_chunks) fetch_chunk<D>(a, kvh, keys.begin + int64_t(warp) * kChunk, keys.end, stages, lane);
    // The rows an ldmatrix lane points at: matrix lane / 8 covers keys + 8 (matrices 2, 3) and values + 8 (1, 3).
    const int v_row = lane % 8 + (lane / 16) * 8, v_col = (lane / 8) % 2 * 16;
    for (int it = 0, c = warp; c < n_chunks; ++it, c += S::kWarps) {
        if (c + S::kWarps < n_chunks) {
            fetch_chunk<D>(a, kvh, keys.begin + int64_t(c + S::kWarps) * kChunk, keys.end,
                           stages + ((it + 1) & 1) * S::kStage, lane);
            __pipeline_wait_prior(1);
        } else {
            __pipeline_wait_prior(0);
        }
        __syncwarp();
        const char* ks_rows = stages + (it & 1) * S::kStage;
        const char* vs_rows = ks_rows + kChunk * S::kStride;
        const int64_t j0 = keys.begin + int64_t(c) * kChunk;
        const int n = keys.end - j0 < kChunk ? int(keys.end - j0) : kChunk;

        // Head g's scores of keys 8 nb + 2 tq + e.
        float s[2][2];
#pragma unroll
        for (int nb = 0; nb < 2; ++nb) {
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            const char* krow = ks_rows + (8 * nb + g) * S::kStride + 4 * tq;
#pragma unroll
            for (int ks = 0; ks < D / 16; ++ks)
                mma_16816(acc, qa[ks], *reinterpret_cast<const uint32_t*>(krow + 32 * ks),
                         *reinterpret_cast<const uint32_t*>(krow + 32 * ks + 16));
            s[nb][0] = acc[0] + acc[2];
            s[nb][1] = acc[1] + acc[3];
        }
        float mx = -INFINITY;
#pragma unroll
        for (int nb = 0; nb < 2; ++nb)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                s[nb][e] = 8 * nb + 2 * tq + e < n ? score(s[nb][e], a.scale, a.softcap) : -INFINITY;
                mx = fmaxf(mx, s[nb][e]);
            }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        // The chunk's first key is real, so m_new is finite; corr is 0 on the first chunk, when there is nothing yet.
        const float m_new = fmaxf(m, mx), corr = expf(m - m_new);
        m = m_new;
        float p[2][2];
        l *= corr;
#pragma unroll
        for (int nb = 0; nb < 2; ++nb)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                p[nb][e] = expf(s[nb][e] - m_new);  // 0 for the keys past n
                l += p[nb][e];
            }
        uint32_t ph[2], pl[2];
        split_pair(p[0][0], p[0][1], ph[0], pl[0]);
        split_pair(p[1][0], p[1][1], ph[1], pl[1]);

        // The factors of heads 2 tq and 2 tq + 1 (kept by lanes 8 tq and 8 tq + 4) rescale what this lane holds.
        const float c_even = __shfl_sync(0xffffffffu, corr, 8 * tq), c_odd = __shfl_sync(0xffffffffu, corr, 8 * tq + 4);
#pragma unroll
        for (int mb = 0; mb < D / 16; ++mb) {
            o[mb][0] *= c_even;
            o[mb][1] *= c_odd;
            o[mb][2] *= c_even;
            o[mb][3] *= c_odd;
            uint32_t va[4];
            ldmatrix_x4_trans(va, vs_rows + v_row * S::kStride + 32 * mb + v_col);
            mma_16816(o[mb], va, ph[0], ph[1]);
            mma_16816(o[mb], va, pl[0], pl[1]);
        }
        __syncwarp();  // the stage is refilled two steps on
    }
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);

    // The warps' results through shared memory (the stages, free once every warp is done with them).
    __syncthreads();
    float* wm = reinterpret_cast<float*>(sm);  // [warp][head]
    float* wl = wm + S::kWarps * kRows;
    float* wo = wl + S::kWarps * kRows;  // [warp][head][value]
    if (tq == 0) {
        wm[warp * kRows + g] = m;
        wl[warp * kRows + g] = l;
    }
#pragma unroll
    for (int mb = 0; mb < D / 16; ++mb) {
        float* even = wo + (warp * kRows + 2 * tq) * D + 16 * mb + g;
        float* odd = even + D;
        even[0] = o[mb][0];
        odd[0] = o[mb][1];
        even[8] = o[mb][2];
        odd[8] = o[mb][3];
    }
    __syncthreads();
    // A warp that saw no key has l = 0 and m = -inf: factor 0. With one split the output, normalized with the sink;
    // with several the partials (an empty split: max -inf, denominator 0, output 0).
    for (int i = int(threadIdx.x); i < G * D; i += int(blockDim.x)) {
        const int hh = i / D, col = i % D;
        float mx = -INFINITY;
        for (int w = 0; w < S::kWarps; ++w)
            if (wl[w * kRows + hh] > 0.0f) mx = fmaxf(mx, wm[w * kRows + hh]);
        float den = 0.0f, num = 0.0f;
        for (int w = 0; w < S::kWarps; ++w) {
            const float f = wl[w * kRows + hh] > 0.0f ? expf(wm[w * kRows + hh] - mx) : 0.0f;
            den += wl[w * kRows + hh] * f;
            num += wo[(w * kRows + hh) * D + col] * f;
        }
        const int h = h0 + hh;
        if (n_split == 1) {
            float f = 1.0f;
            if (a.sinks) {
                const float sink = a.sinks[h], top = fmaxf(mx, sink);
                f = expf(mx - top);
                den = den * f + expf(sink - top);
            }
            a.out[t * q_cols + int64_t(h) * D + col] = num * f / den;
        } else {
            partial_acc(part_out, t * a.n_head + h, n_split, split, D)[col] = num;
            if (col == 0) {
                float* ml = partial_ml(part_out, a, t * a.n_head + h, n_split, split);
                ml[0] = mx;
                ml[1] = den;
            }
        }
    }
}

template <int D>
cudaError_t launch(const AttentionArgs& a, const AttentionPlan& p, float* part, cudaStream_t s) {
    using S = MmaShape<D>;
    if (cudaError_t e = allow_shared_memory<mma_kernel<D>>(S::kSmem); e != cudaSuccess) return e;
    const dim3 grid{unsigned(a.n_q * (a.n_head / p.heads)), unsigned(p.n_split)};
    launch(mma_kernel<D>, grid, S::kWarps * 32, S::kSmem, s, a, p.heads, p.n_split, part);
    return cudaGetLastError();
}

}  // namespace

cudaError_t attention_mma(const AttentionArgs& a, const AttentionPlan& p, float* partials, cudaStream_t s) {
    switch (a.head_dim) {
    case 64: return launch<64>(a, p, partials, s);
    case 128: return launch<128>(a, p, partials, s);
    case 256: return launch<256>(a, p, partials, s);
    default: return cudaErrorInvalidValue;
    }
}

}  // namespace zinc::backend::cuda
