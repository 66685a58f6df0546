// Prefill attention on tensor cores over an f16 cache (attention_kernels.h' attention_flash), in the manner of
// FlashAttention-2: a block of four warps computes 64 query rows, which are the (position, head) pairs of R = 64 / G
// consecutive positions and G query heads sharing a KV head, so each K and V row the block copies into shared memory
// serves all of them. The block goes through the keys its rows see in tiles (copied in the background, two stages),
// and each warp, for its 16 rows, computes
//   S = Q K^T          A = the rows' queries (16 x 16 values), B = 8 keys' K rows as they are stored;
//   O += P V           A = the rows' probabilities (16 x 16 keys), B = 16 keys x 8 values of V through ldmatrix.trans;
// with an online softmax between the two: the running maximum and denominator of each row, the output rescaled when
// the maximum grows. f16 inputs alone would round the queries and the probabilities to 11 bits; as in the decode
// kernel (attention_mma.cu), each is split into its f16 rounding and the f16 rounding of what that leaves (hi + lo,
// about 22 bits), both halves go through the products, and since the tensor cores truncate what they add to an
// accumulator, a tile's products start from zero and are added to the running sums in f32: the results agree with
// the f32 kernels to f32 rounding. A block computes one slice of DV output values (for heads of more than 128 values, each
// slice computes the scores again, which costs less than the registers a whole head's outputs would need).
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

constexpr int kWarps = 4;
constexpr int kRowsPerBlock = 16 * kWarps;

// D: values of a head, DV: output values of a block, BKV: keys of a tile. Rows in shared memory are padded by 8 halves
// (16 bytes), so that the 8 rows an ldmatrix reads start on distinct banks.
template <int D>
struct FlashShape {
    static constexpr int DV = D < 128 ? D : 128;
    static constexpr int BKV = 32;
    static constexpr int kQStride = D + 8, kKStride = D + 8, kVStride = DV + 8;
    static constexpr int kQHalves = kRowsPerBlock * kQStride;  // hi, then lo
    static constexpr int kStageHalves = BKV * (kKStride + kVStride);
    static constexpr size_t kSmem = size_t(2 * kQHalves + 2 * kStageHalves) * 2;
    static_assert(kSmem <= 227 * 1024, "fits in an SM's shared memory");
};

// Starts copying the K rows and the V slice [v0, v0 + DV) of keys [j0, j0 + BKV) of KV head kvh into a stage; keys at
// or past `end` are zero-filled (their probabilities are 0, and 0 times a stale NaN would not be).
template <int D>
__device__ __forceinline__ void fetch_tile(const AttentionArgs& a, int kvh, int v0, int64_t j0, int64_t end,
                                           __half* stage) {
    using S = FlashShape<D>;
    constexpr int kKPieces = D / 8, kVPieces = S::DV / 8;  // 16-byte pieces per row
    __half* vs = stage + S::BKV * S::kKStride;
    for (int i = int(threadIdx.x); i < S::BKV * (kKPieces + kVPieces); i += kWarps * 32) {
        const bool is_k = i < S::BKV * kKPieces;
        const int i2 = is_k ? i : i - S::BKV * kKPieces;
        const int pieces = is_k ? kKPieces : kVPieces;
        const int r = i2 / pieces, c = i2 % pieces;
        const bool real = j0 + r < end;
        const int64_t row = cache_row(a, real ? j0 + r : j0);
        const int64_t col = int64_t(kvh) * D + (is_k ? 0 : v0) + 8 * c;
        const __half* src = static_cast<const __half*>(is_k ? a.k.data : a.v.data) + row * a.kv_width + col;
        __half* dst = is_k ? stage + r * S::kKStride + 8 * c : vs + r * S::kVStride + 8 * c;
        __pipeline_memcpy_async(dst, src, 16, real ? 0 : 16);
    }
    __pipeline_commit();
}

// grid: x = (group of G heads, value slice), y = the tiles of R positions, the last (most keys) first.
template <int D>
__global__ void __launch_bounds__(kWarps * 32) flash_kernel(AttentionArgs a, int G) {
    using S = FlashShape<D>;
    constexpr int DV = S::DV, BKV = S::BKV;
    extern __shared__ __align__(16) __half sm[];
    __half* qh = sm;
    __half* ql = sm + S::kQHalves;
    __half* stages = sm + 2 * S::kQHalves;

    begin_kernel();
    const int slices = D / DV, R = kRowsPerBlock / G;
    const int h0 = int(blockIdx.x) / slices * G, v0 = int(blockIdx.x) % slices * DV;
    const int kvh = h0 / (a.n_head / a.n_head_kv);
    const int64_t n_tiles = (a.n_q + R - 1) / R;
    const int64_t t0 = (n_tiles - 1 - int64_t(blockIdx.y)) * R;
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, tq = lane % 4;
    const int64_t pos0 = *a.pos;
    const int64_t q_cols = int64_t(a.n_head) * D;

    // The block's keys: from the first row's first visible key to its last row's position.
    const int64_t t_last = (t0 + R < a.n_q ? t0 + R : a.n_q) - 1;
    const int64_t k_begin = visible_keys(pos0 + t0, a.window).begin, k_end = pos0 + t_last + 1;
    const int n_kv_tiles = int((k_end - k_begin + BKV - 1) / BKV);
    fetch_tile<D>(a, kvh, v0, k_begin, k_end, stages);

    // The queries, split into hi and lo halves; row r is position t0 + r / G, head h0 + r % G (zeros past n_q).
    for (int i = int(threadIdx.x); i < kRowsPerBlock * D / 4; i += kWarps * 32) {
        const int r = i / (D / 4), c = 4 * (i % (D / 4));
        const int64_t t = t0 + r / G;
        float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (t < a.n_q) x = *reinterpret_cast<const float4*>(a.q + t * q_cols + int64_t(h0 + r % G) * D + c);
        uint32_t h[2], l[2];
        split_pair(x.x, x.y, h[0], l[0]);
        split_pair(x.z, x.w, h[1], l[1]);
        *reinterpret_cast<uint2*>(qh + r * S::kQStride + c) = make_uint2(h[0], h[1]);
        *reinterpret_cast<uint2*>(ql + r * S::kQStride + c) = make_uint2(l[0], l[1]);
    }

    // This lane's rows (g and g + 8 of the warp's 16), their positions and first visible keys.
    const int row0 = 16 * warp + g, row1 = row0 + 8;
    const int64_t pq0 = pos0 + t0 + row0 / G, pq1 = pos0 + t0 + row1 / G;
    const int64_t lo0 = visible_keys(pq0, a.window).begin, lo1 = visible_keys(pq1, a.window).begin;

    float o[DV / 8][4];  // rows g (0, 1) and g + 8 (2, 3), values 8 n + 2 tq (0, 2) and + 1 (1, 3)
#pragma unroll
    for (int n = 0; n < DV / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY;  // the rows' running maxima, the same on their four lanes
    float l0 = 0.0f, l1 = 0.0f;            // this lane's shares of the rows' denominators

    for (int it = 0; it < n_kv_tiles; ++it) {
        const int64_t kb = k_begin + int64_t(it) * BKV;
        if (it + 1 < n_kv_tiles) {
            fetch_tile<D>(a, kvh, v0, kb + BKV, k_end, stages + ((it + 1) & 1) * S::kStageHalves);
            __pipeline_wait_prior(1);
        } else {
            __pipeline_wait_prior(0);
        }
        __syncthreads();
        const __half* ks = stages + (it & 1) * S::kStageHalves;
        const __half* vs = ks + BKV * S::kKStride;

        // S: s[nt] holds rows g, g + 8 at keys kb + 8 nt + 2 tq, + 1. The tensor cores truncate what they add to an
        // accumulator, so each product starts from zero for at most 128 values of the head, with the hi and lo
        // halves apart, and the pieces are added in f32.
        float s[BKV / 8][4] = {};
#pragma unroll
        for (int k0 = 0; k0 < D; k0 += 128) {
            float sh[BKV / 8][4] = {}, sl[BKV / 8][4] = {};
#pragma unroll
            for (int kk = k0 / 16; kk < (k0 + 128 < D ? k0 + 128 : D) / 16; ++kk) {
                uint32_t ah[4], al[4];  // rows 16 warp + lane % 16, values 16 kk + 8 (lane / 16)
                const int qo = (16 * warp + lane % 16) * S::kQStride + 16 * kk + 8 * (lane / 16);
                ldmatrix_x4(ah, qh + qo);
                ldmatrix_x4(al, ql + qo);
#pragma unroll
                for (int np = 0; np < BKV / 16; ++np) {
                    // Two 8-key tiles: keys 16 np + lane % 8 + 8 (lane / 16), values 16 kk + 8 (lane / 8 % 2).
                    uint32_t b[4];
                    ldmatrix_x4(b, ks + (16 * np + lane % 8 + 8 * (lane / 16)) * S::kKStride + 16 * kk +
                                       8 * ((lane / 8) % 2));
                    mma_16816(sh[2 * np], ah, b[0], b[1]);
                    mma_16816(sl[2 * np], al, b[0], b[1]);
                    mma_16816(sh[2 * np + 1], ah, b[2], b[3]);
                    mma_16816(sl[2 * np + 1], al, b[2], b[3]);
                }
            }
#pragma unroll
            for (int nt = 0; nt < BKV / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[nt][e] += sh[nt][e] + sl[nt][e];
        }

        // Scores, the keys a row does not see at -inf; a tile that every row of the block sees whole skips the test.
        const bool whole = kb + BKV - 1 <= pos0 + t0 && (a.window <= 0 || kb >= pos0 + t_last - a.window + 1);
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < BKV / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int64_t j = kb + 8 * nt + 2 * tq + e;
                s[nt][e] = whole || (j >= lo0 && j <= pq0) ? score(s[nt][e], a.scale, a.softcap) : -INFINITY;
                s[nt][2 + e] = whole || (j >= lo1 && j <= pq1) ? score(s[nt][2 + e], a.scale, a.softcap) : -INFINITY;
                mx0 = fmaxf(mx0, s[nt][e]);
                mx1 = fmaxf(mx1, s[nt][2 + e]);
            }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        // A row that has seen no key yet keeps m = -inf and takes no probability (base 0, exp(-inf) = 0); once it has,
        // m is finite and corr = exp(m - m_new) rescales what it holds.
        const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
        const float c0 = n0 == -INFINITY ? 1.0f : expf(m0 - n0), c1 = n1 == -INFINITY ? 1.0f : expf(m1 - n1);
        const float b0 = n0 == -INFINITY ? 0.0f : n0, b1 = n1 == -INFINITY ? 0.0f : n1;
        m0 = n0;
        m1 = n1;
        l0 *= c0;
        l1 *= c1;
#pragma unroll
        for (int nt = 0; nt < BKV / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                s[nt][e] = expf(s[nt][e] - b0);
                s[nt][2 + e] = expf(s[nt][2 + e] - b1);
                l0 += s[nt][e];
                l1 += s[nt][2 + e];
            }

        // O = O c + P V, P V 16 keys at a time from zero for the tile (the truncation again), the scores of two 8-key
        // tiles being the A fragment of their 16 keys.
        float pv[DV / 8][4] = {};
#pragma unroll
        for (int kk = 0; kk < BKV / 16; ++kk) {
            uint32_t ph[4], pl[4];
            split_pair(s[2 * kk][0], s[2 * kk][1], ph[0], pl[0]);
            split_pair(s[2 * kk][2], s[2 * kk][3], ph[1], pl[1]);
            split_pair(s[2 * kk + 1][0], s[2 * kk + 1][1], ph[2], pl[2]);
            split_pair(s[2 * kk + 1][2], s[2 * kk + 1][3], ph[3], pl[3]);
#pragma unroll
            for (int nb = 0; nb < DV / 16; ++nb) {
                // Keys 16 kk + lane % 8 + 8 (lane / 8 % 2), values 16 nb + 8 (lane / 16), transposed: r[0], r[1] the
                // B fragment of values 16 nb .. + 7, r[2], r[3] that of the next 8.
                uint32_t r[4];
                ldmatrix_x4_trans(r, vs + (16 * kk + lane % 8 + 8 * ((lane / 8) % 2)) * S::kVStride + 16 * nb +
                                         8 * (lane / 16));
                mma_16816(pv[2 * nb], ph, r[0], r[1]);
                mma_16816(pv[2 * nb], pl, r[0], r[1]);
                mma_16816(pv[2 * nb + 1], ph, r[2], r[3]);
                mma_16816(pv[2 * nb + 1], pl, r[2], r[3]);
            }
        }
#pragma unroll
        for (int n = 0; n < DV / 8; ++n) {
            o[n][0] = o[n][0] * c0 + pv[n][0];
            o[n][1] = o[n][1] * c0 + pv[n][1];
            o[n][2] = o[n][2] * c1 + pv[n][2];
            o[n][3] = o[n][3] * c1 + pv[n][3];
        }
        __syncthreads();  // the stage is refilled on the next step
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);

    // Every real row sees at least its own position, so its denominator is positive; the sink joins it here.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int row = half ? row1 : row0;
        const int64_t t = t0 + row / G;
        if (t >= a.n_q) continue;
        const int h = h0 + row % G;
        const float m = half ? m1 : m0;
        float den = half ? l1 : l0, f = 1.0f;
        if (a.sinks) {
            const float sink = a.sinks[h], top = fmaxf(m, sink);
            f = expf(m - top);
            den = den * f + expf(sink - top);
        }
        float* out = a.out + t * q_cols + int64_t(h) * D + v0 + 2 * tq;
#pragma unroll
        for (int n = 0; n < DV / 8; ++n)
            *reinterpret_cast<float2*>(out + 8 * n) =
                make_float2(o[n][2 * half] * f / den, o[n][2 * half + 1] * f / den);
    }
}

template <int D>
cudaError_t launch_flash(const AttentionArgs& a, int G, cudaStream_t s) {
    using S = FlashShape<D>;
    if (cudaError_t e = allow_shared_memory<flash_kernel<D>>(S::kSmem); e != cudaSuccess) return e;
    const int64_t R = kRowsPerBlock / G, n_tiles = (a.n_q + R - 1) / R;
    if (n_tiles > 65535) return cudaErrorInvalidValue;
    const dim3 grid{unsigned(a.n_head / G * (D / S::DV)), unsigned(n_tiles)};
    launch(flash_kernel<D>, grid, kWarps * 32, S::kSmem, s, a, G);
    return cudaGetLastError();
}

}  // namespace

cudaError_t attention_flash(const AttentionArgs& a, const AttentionPlan& p, cudaStream_t s) {
    if (p.heads <= 0 || kRowsPerBlock % p.heads != 0 || a.n_head % p.heads != 0 ||
        (a.n_head / a.n_head_kv) % p.heads != 0)
        return cudaErrorInvalidValue;
    switch (a.head_dim) {
    case 64: return launch_flash<64>(a, p.heads, s);
    case 128: return launch_flash<128>(a, p.heads, s);
    case 256: return launch_flash<256>(a, p.heads, s);
    case 512: return launch_flash<512>(a, p.heads, s);
    default: return cudaErrorInvalidValue;
    }
}

}  // namespace zinc::backend::cuda
