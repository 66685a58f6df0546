// MoE prefill on tensor cores (moe_kernels.h' moe_mma): the products of the experts' quantized weights with the
// batch's (token, expert) pairs, sorted by expert into groups of up to 32 or 64 pairs of one expert.
//
// A block computes 64 weight rows of one expert for one group: each 64-value step of the reduction, its 128 threads
// dequantize the rows' values (two threads a row, 32 values each, read in whole words; the values of dequant8, which
// get_rows and the CPU produce) to f16 in shared memory and copy the group's f16 activation rows beside them; each
// warp then multiplies 16 of the rows with the group's pairs through mma.sync m16n8k16 (f32 accumulation), skipping
// the 8-pair tiles past the group's count. The next step's tiles are
// loaded into registers while the tensor cores work on this one. A weight is read from memory and dequantized once per
// group, so a batch with few pairs per expert costs about one read of the experts it routes to, and no dequantized
// copy of any expert is ever written.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matvec_row.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/moe_kernels.h"

namespace zinc::backend::cuda {
namespace {

constexpr int BM = 64;             // weight rows per block, 16 per warp
constexpr int BK = int(kMmaCols);  // values of the reduction per step
constexpr int kThreads = 128;
constexpr int kPad = 8;  // halves of padding per shared row: rows 144 bytes apart, so ldmatrix's 8 rows hit 32 banks

__device__ __forceinline__ int byte_of(const uint32_t* w, int i) { return int((w[i / 4] >> (8 * (i % 4))) & 0xFF); }

// Values k .. k + 31 (k a multiple of 32) of a row of type T, as dequant8 gives them, read in whole words: the L1
// cache serves a warp's word loads at a few per instruction where byte loads take one each.
template <int T>
__device__ __forceinline__ void dequant32(const uint8_t* row, int64_t cols, int64_t k, float (&v)[32]) {
    if constexpr (block32_bytes(T) > 0) {
        // A copy of the block in registers, decoded by the block's own dequant8 code at constant offsets. The words
        // reach up to 5 bytes past the block, inside the weight's allocation (kWeightSlack, matmul_kernels.h).
        constexpr int kWords = (block32_bytes(T) + 3) / 4;
        uint32_t w[kWords];
        load_words_any_alignment(row + (k / 32) * block32_bytes(T), w);
#pragma unroll
        for (int j = 0; j < 32; j += 8) dequant8_block32(T, reinterpret_cast<const uint8_t*>(w), j, v + j);
    } else if constexpr (T == kQ4_K || T == kQ5_K) {
        // d, dmin, scales[12] in one 16-byte load; sub-block j's 32 quants in the low (j even) or high nibbles of the
        // 32 bytes of its pair of sub-blocks; Q5_K's fifth bits in bit j of its 32 qh bytes.
        constexpr bool q5 = T == kQ5_K;
        const uint8_t* b = row + (k / 256) * (q5 ? 176 : 144);
        const int j = int(k % 256) / 32;
        const uint4 head = *reinterpret_cast<const uint4*>(b);
        // scale_min_k4 on the scale bytes as words: bytes 0-3 in head.y, 4-7 in head.z, 8-11 in head.w.
        int sc, m;
        if (j < 4) {
            sc = int(head.y >> (8 * j)) & 63;
            m = int(head.z >> (8 * j)) & 63;
        } else {
            const int t = 8 * (j - 4);
            sc = int((head.w >> t) & 0xF) | int((head.y >> (t + 6)) & 3) << 4;
            m = int((head.w >> (t + 4)) & 0xF) | int((head.z >> (t + 6)) & 3) << 4;
        }
        const float d1 = mul_rn(f16_to_f32(uint16_t(head.x & 0xFFFF)), float(sc));
        const float m1 = mul_rn(f16_to_f32(uint16_t(head.x >> 16)), float(m));
        uint32_t qs[8], qh[8];
        const uint4* qp = reinterpret_cast<const uint4*>(b + (q5 ? 48 : 16) + 32 * (j / 2));
        *reinterpret_cast<uint4*>(qs) = qp[0];
        *reinterpret_cast<uint4*>(qs + 4) = qp[1];
        if constexpr (q5) {
            const uint4* hp = reinterpret_cast<const uint4*>(b + 16);
            *reinterpret_cast<uint4*>(qh) = hp[0];
            *reinterpret_cast<uint4*>(qh + 4) = hp[1];
        }
        const int shift = 4 * (j % 2);
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            int q = (byte_of(qs, i) >> shift) & 0xF;
            if constexpr (q5) q += ((byte_of(qh, i) >> j) & 1) << 4;
            v[i] = sub_rn(mul_rn(d1, float(q)), m1);
        }
    } else if constexpr (T == kQ6_K) {
        // 210-byte super-blocks, so 2-byte aligned: the 32 ql and 32 qh bytes of the values in whole words anyway.
        const uint8_t* b = row + (k / 256) * 210;
        const int e0 = int(k % 256), h = e0 / 128, g = (e0 % 128) / 32;
        uint32_t ql[8], qh[8];
        load_words_any_alignment(b + 64 * h + 32 * (g & 1), ql);
        load_words_any_alignment(b + 128 + 32 * h, qh);
        const uint16_t s2 = load_u16(b + 192 + e0 / 16);  // the scales of values 0-15 and 16-31
        const float d = f16_to_f32(load_u16(b + 208));
        const float ds0 = mul_rn(d, float(int8_t(s2 & 0xFF))), ds1 = mul_rn(d, float(int8_t(s2 >> 8)));
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            const int lo = g < 2 ? byte_of(ql, i) & 0xF : byte_of(ql, i) >> 4;
            const int hi = (byte_of(qh, i) >> (2 * g)) & 3;
            v[i] = mul_rn(i < 16 ? ds0 : ds1, float((lo | (hi << 4)) - 32));
        }
    } else {
#pragma unroll
        for (int j = 0; j < 32; j += 8) dequant8(T, row, cols, k + j, v + j);
    }
}

// One step's tiles in a thread's registers, as f16 pairs: 32 weight values of row tid / 2 at values 32 (tid % 2) ..
// of the step, and 8 activation values of pairs tid / 8 + 16 j (j < BN / 16) at values 8 (tid % 8) ...
template <int BN>
struct StepRegs {
    uint32_t w[16];
    uint4 x[BN / 16];
};

template <int T, int BN>
__device__ __forceinline__ void load_step(const uint8_t* we, size_t row_bytes, int64_t n_out, int64_t cols,
                                          const __half* xg, int count, int64_t o0, int64_t k0, StepRegs<BN>& r) {
    const int tid = int(threadIdx.x);
    const int64_t o = o0 + tid / 2;
    if (o < n_out) {
        float v[32];
        dequant32<T>(we + o * row_bytes, cols, k0 + 32 * (tid % 2), v);
#pragma unroll
        for (int i = 0; i < 16; ++i) r.w[i] = pack_half2(v[2 * i], v[2 * i + 1]);
    } else {
#pragma unroll
        for (int i = 0; i < 16; ++i) r.w[i] = 0;
    }
#pragma unroll
    for (int j = 0; j < BN / 16; ++j) {
        const int p = tid / 8 + 16 * j;
        r.x[j] = p < count ? *reinterpret_cast<const uint4*>(xg + int64_t(p) * cols + k0 + 8 * (tid % 8))
                           : make_uint4(0, 0, 0, 0);
    }
}

// BN: pairs per block, the group size (32 or 64).
template <int T, int BN>
__global__ void __launch_bounds__(kThreads) moe_mma_kernel(const uint8_t* w, size_t row_bytes, size_t expert_bytes,
                                                           int64_t n_out, int64_t cols, const __half* x16,
                                                           const float* scale, const PairGroup* groups,
                                                           const int32_t* n_groups, float* out, int64_t out_stride) {
    __shared__ __align__(16) __half ws[2][BM][BK + kPad];
    __shared__ __align__(16) __half xs[2][BN][BK + kPad];
    begin_kernel();
    if (int(blockIdx.y) >= *n_groups) return;
    const PairGroup g = groups[blockIdx.y];
    const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32;
    const int64_t o0 = int64_t(blockIdx.x) * BM;
    const uint8_t* we = w + size_t(g.expert) * expert_bytes;
    const __half* xg = x16 + int64_t(g.first) * cols;
    float acc[BN / 8][4] = {};

    auto store_step = [&](int buf, const StepRegs<BN>& r) {
        uint4* wd = reinterpret_cast<uint4*>(&ws[buf][tid / 2][32 * (tid % 2)]);
#pragma unroll
        for (int j = 0; j < 4; ++j) wd[j] = make_uint4(r.w[4 * j], r.w[4 * j + 1], r.w[4 * j + 2], r.w[4 * j + 3]);
#pragma unroll
        for (int j = 0; j < BN / 16; ++j) *reinterpret_cast<uint4*>(&xs[buf][tid / 8 + 16 * j][8 * (tid % 8)]) = r.x[j];
    };

    StepRegs<BN> r;
    load_step<T, BN>(we, row_bytes, n_out, cols, xg, g.count, o0, 0, r);
    store_step(0, r);
    __syncthreads();
    const int64_t n_steps = cols / BK;
    for (int64_t step = 0; step < n_steps; ++step) {
        const int buf = int(step % 2);
        const bool more = step + 1 < n_steps;
        if (more) load_step<T, BN>(we, row_bytes, n_out, cols, xg, g.count, o0, (step + 1) * BK, r);
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            uint32_t a[4];  // rows 16 warp + lane % 16, values kk + 8 (lane / 16)
            ldmatrix_x4(a, &ws[buf][16 * warp + lane % 16][kk + 8 * (lane / 16)]);
#pragma unroll
            for (int nj = 0; nj < BN / 16; ++nj) {
                if (16 * nj >= g.count) continue;
                // Two 8-pair tiles: pairs 16 nj + lane % 8 + 8 (lane / 16), values kk + 8 (lane / 8 % 2).
                uint32_t b[4];
                ldmatrix_x4(b, &xs[buf][16 * nj + lane % 8 + 8 * (lane / 16)][kk + 8 * ((lane / 8) % 2)]);
                mma_16816(acc[2 * nj], a, b[0], b[1]);
                mma_16816(acc[2 * nj + 1], a, b[2], b[3]);
            }
        }
        if (more) store_step(buf ^ 1, r);
        __syncthreads();
    }

    // acc[ni][2 h + c]: weight row 16 warp + lane / 4 + 8 h, pair 8 ni + 2 (lane % 4) + c.
#pragma unroll
    for (int ni = 0; ni < BN / 8; ++ni)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            const int p = 8 * ni + 2 * (lane % 4) + c;
            if (p >= g.count) continue;
            const int64_t i = int64_t(g.first) + p;
            const float s = scale[i];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int64_t o = o0 + 16 * warp + lane / 4 + 8 * h;
                if (o < n_out) out[i * out_stride + o] = acc[ni][2 * h + c] * s;
            }
        }
}

}  // namespace

cudaError_t moe_mma(int type, const void* w, size_t row_bytes, size_t expert_bytes, int64_t n_out, int64_t cols,
                    const void* rows, int64_t n_rows, const PairGroups& groups, int group_size, float* out,
                    int64_t out_stride, cudaStream_t s) {
    if (cols % BK != 0 || groups.max_groups > 65535 || n_out > 65535LL * BM || (group_size != 32 && group_size != 64))
        return cudaErrorInvalidValue;
    if (n_out <= 0 || n_rows <= 0 || groups.max_groups <= 0) return cudaGetLastError();
    const auto* x16 = static_cast<const __half*>(rows);
    const auto* scale =
        reinterpret_cast<const float*>(static_cast<const uint8_t*>(rows) + f16_rows_scale_offset(n_rows, cols));
    const dim3 grid(unsigned((n_out + BM - 1) / BM), unsigned(groups.max_groups));
    const auto* wb = static_cast<const uint8_t*>(w);
    return for_weight_type<kQuantTypes>(type, [&](auto tag) {
        constexpr int T = decltype(tag)::value;
        return group_size == 32 ? launch(moe_mma_kernel<T, 32>, grid, kThreads, 0, s, wb, row_bytes, expert_bytes,
                                         n_out, cols, x16, scale, groups.groups, groups.n_groups, out, out_stride)
                                : launch(moe_mma_kernel<T, 64>, grid, kThreads, 0, s, wb, row_bytes, expert_bytes,
                                         n_out, cols, x16, scale, groups.groups, groups.n_groups, out, out_stride);
    });
}

}  // namespace zinc::backend::cuda
