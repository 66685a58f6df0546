// Dot products of one 32-value chunk of a quantized weight row with one Q8_1 activation block, with dp4a
// (FORMATS.md §3.7-3.8). A chunk is one Q4_0/Q8_0 block or one 32-value sub-block of a K-quant super-block.
// __host__ __device__: tests check the bit logic on the host with an emulated dp4a.
#pragma once

#include <cstdint>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::backend::cuda {

// 32-bit loads of quant bytes: b4 for 4-byte-aligned data, b2 (two 16-bit loads) for 2-byte-aligned blocks.
ZINC_HD int load_b4(const uint8_t* p, int i) { return reinterpret_cast<const int*>(p)[i]; }
ZINC_HD int load_b2(const uint8_t* p, int i) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
    return int(uint32_t(h[2 * i]) | (uint32_t(h[2 * i + 1]) << 16));
}

// Dot product of chunk c of a weight row with the Q8_1 block y (the matching 32 activations).
template <int T>
ZINC_HD float chunk_dot(const uint8_t* row, int64_t c, const BlockQ8_1f& y) {
    const int* yq = reinterpret_cast<const int*>(y.qs);
    if constexpr (T == kQ8_0) {
        const uint8_t* b = row + c * 34;
        int sumi = 0;
#pragma unroll
        for (int k = 0; k < 8; ++k) sumi = dp4a(load_b2(b + 2, k), yq[k], sumi);
        return f16_to_f32(load_u16(b)) * y.d * float(sumi);
    } else if constexpr (T == kQ4_0) {
        // w = d (u - 8): d * dy * (sum u*q - 8 * sum q)
        const uint8_t* b = row + c * 18;
        int sumi = 0, sumq = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int v = load_b2(b + 2, k);
            sumi = dp4a(v & 0x0F0F0F0F, yq[k], sumi);
            sumi = dp4a((v >> 4) & 0x0F0F0F0F, yq[k + 4], sumi);
        }
#pragma unroll
        for (int k = 0; k < 8; ++k) sumq = dp4a(0x01010101, yq[k], sumq);
        return f16_to_f32(load_u16(b)) * y.d * float(sumi - 8 * sumq);
    } else if constexpr (T == kQ4_K || T == kQ5_K) {
        constexpr bool q5 = T == kQ5_K;
        const uint8_t* b = row + (c / 8) * (q5 ? 176 : 144);
        const int j = int(c % 8), grp = j / 2, hi = j & 1;
        const uint8_t* qs = b + (q5 ? 48 : 16);
        int sumi = 0, sumq = 0;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            int v = (load_b4(qs, 8 * grp + k) >> (4 * hi)) & 0x0F0F0F0F;
            if constexpr (q5) v |= ((load_b4(b + 16, k) >> j) & 0x01010101) << 4;
            sumi = dp4a(v, yq[k], sumi);
            sumq = dp4a(0x01010101, yq[k], sumq);
        }
        int sc, m;
        scale_min_k4(j, b + 4, sc, m);
        const float d = f16_to_f32(load_u16(b)), dmin = f16_to_f32(load_u16(b + 2));
        return y.d * (d * float(sc * sumi) - dmin * float(m * sumq));
    } else {  // Q6_K: 210-byte blocks, 2-byte aligned
        const uint8_t* b = row + (c / 8) * 210;
        const int jj = int(c % 8), hf = jj / 4, g = jj % 4;
        const uint8_t* ql = b + 64 * hf + 32 * (g & 1);
        const uint8_t* qh = b + 128 + 32 * hf;
        const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
        int sumi0 = 0, sumi1 = 0;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const int lo = (load_b2(ql, k) >> (4 * (g >> 1))) & 0x0F0F0F0F;
            const int hb = ((load_b2(qh, k) >> (2 * g)) & 0x03030303) << 4;
            const int v = vsubss4(lo | hb, 0x20202020);
            if (k < 4)
                sumi0 = dp4a(v, yq[k], sumi0);
            else
                sumi1 = dp4a(v, yq[k], sumi1);
        }
        const float d = f16_to_f32(load_u16(b + 208));
        return d * y.d * float(scales[2 * jj] * sumi0 + scales[2 * jj + 1] * sumi1);
    }
}

}  // namespace zinc::backend::cuda
