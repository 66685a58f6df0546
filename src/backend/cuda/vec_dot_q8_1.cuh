// Dot products of one 32-value chunk of a quantized weight row with one Q8_1 activation block, with dp4a
// (docs/formats.md §3.3, §3.7-§3.8). A chunk is one block of a 32-value type or one 32-value slice of a K-quant or IQ4_XS
// super-block (two 16-value sub-blocks for Q2_K/Q3_K/Q6_K). Signed formats subtract their offset exactly
// (Q4_0/Q5_0 with the integer sum of the activations, Q3_K/Q6_K per byte); Q4_1/Q5_1 add their min times the
// activation block's float sum s, as ggml does; the table formats map nibbles to int8 values first. Also the warp
// quantizer that writes the blocks (quantize_q8_1_warp), with the integer sums the offset formats read.
// __host__ __device__: tests check the bit logic on the host with an emulated dp4a.
#pragma once

#include <cstdint>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/matmul_kernels.h"

namespace zinc::backend::cuda {

// 32-bit loads of quant bytes: b4 for 4-byte-aligned data (blocks of 20, 24, 84, 136, 144, 176 bytes), b2 (two 16-bit
// loads) for 2-byte-aligned blocks (18, 22, 34, 110, 210 bytes), b1 (four byte loads) for MXFP4's 17-byte blocks.
ZINC_HD int load_b4(const uint8_t* p, int i) {
    check_aligned(p + 4 * i, 4);
    return reinterpret_cast<const int*>(p)[i];
}
ZINC_HD int load_b2(const uint8_t* p, int i) {
    check_aligned(p + 4 * i, 2);
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
    return int(uint32_t(h[2 * i]) | (uint32_t(h[2 * i + 1]) << 16));
}
ZINC_HD int load_b1(const uint8_t* p, int i) { return int(load_u32_bytes(p + 4 * i)); }
// 32 bytes at p (16-byte aligned: inside the 144- and 176-byte blocks of 16-byte aligned rows) as eight ints, in two
// 16-byte loads.
ZINC_HD void load_32_bytes(const uint8_t* p, int (&v)[8]) {
    check_aligned(p, 16);
    const int4 a = reinterpret_cast<const int4*>(p)[0], b = reinterpret_cast<const int4*>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// Bits 0-3 of x moved to bit 4 of bytes 0-3: the fifth bits of four Q5_0/Q5_1 quants.
ZINC_HD int bit4_of_bytes(uint32_t x) {
    return int((x & 1) << 4 | (x & 2) << 11 | (x & 4) << 18 | (x & 8) << 25);
}

#ifdef __CUDACC__
// Quantizes the warp's 32 values (v: lane `lane`'s) to the Q8_1 block b: d = amax / 127, q = round(v / d), s = the
// sum of the values by a butterfly over the lanes, and the integer sums of each half. Every lane takes part.
__device__ __forceinline__ void quantize_q8_1_warp(float v, BlockQ8_1f& b, int lane) {
    float amax = fabsf(v), sum = v;
    for (int off = 16; off > 0; off >>= 1) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
        sum += __shfl_xor_sync(0xffffffffu, sum, off);
    }
    const float d = amax / 127.0f;
    const int q = amax == 0.0f ? 0 : __float2int_rn(v / d);
    int half = q;  // the sum of this lane's half of the warp
    for (int off = 8; off > 0; off >>= 1) half += __shfl_xor_sync(0xffffffffu, half, off);
    const int other = __shfl_xor_sync(0xffffffffu, half, 16);
    b.qs[lane] = int8_t(q);
    if (lane == 0) {
        b.d = d;
        b.s = sum;
        b.sum_lo = int16_t(half);
        b.sum_hi = int16_t(other);
        b.unused = 0;
    }
}
#endif

// Dot product of chunk c of a weight row with the Q8_1 block y (the matching 32 activations).
template <int T>
ZINC_HD float chunk_dot(const uint8_t* row, int64_t c, const BlockQ8_1f& y) {
    int yq[8];  // the 32 int8 activations, four to an int
    load_32_bytes(reinterpret_cast<const uint8_t*>(y.qs), yq);
    if constexpr (T == kQ8_0) {
        const uint8_t* b = row + c * 34;
        int sumi = 0;
#pragma unroll
        for (int k = 0; k < 8; ++k) sumi = dp4a(load_b2(b + 2, k), yq[k], sumi);
        return f16_to_f32(load_u16(b)) * y.d * float(sumi);
    } else if constexpr (T == kQ4_0 || T == kQ4_1) {
        // Q4_0: w = d (u - 8), so d * dy * (sum u*q - 8 * sum q); Q4_1: w = d u + m, so d * dy * sum u*q + m * s.
        constexpr bool q4_1 = T == kQ4_1;
        const uint8_t* b = row + c * (q4_1 ? 20 : 18);
        int sumi = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int v = q4_1 ? load_b4(b + 4, k) : load_b2(b + 2, k);
            sumi = dp4a(v & 0x0F0F0F0F, yq[k], sumi);
            sumi = dp4a((v >> 4) & 0x0F0F0F0F, yq[k + 4], sumi);
        }
        const float d = f16_to_f32(load_u16(b));
        if constexpr (q4_1) return d * y.d * float(sumi) + f16_to_f32(load_u16(b + 2)) * y.s;
        return d * y.d * float(sumi - 8 * (y.sum_lo + y.sum_hi));
    } else if constexpr (T == kQ5_0 || T == kQ5_1) {
        // As Q4_0/Q4_1 with u in 0..31 and offset 16: the fifth bits come from the 32-bit qh.
        constexpr bool q5_1 = T == kQ5_1;
        const uint8_t* b = row + c * (q5_1 ? 24 : 22);
        const uint32_t qh = uint32_t(q5_1 ? load_b4(b + 4, 0) : load_b2(b + 2, 0));
        int sumi = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int v = q5_1 ? load_b4(b + 8, k) : load_b2(b + 6, k);
            sumi = dp4a((v & 0x0F0F0F0F) | bit4_of_bytes(qh >> (4 * k)), yq[k], sumi);
            sumi = dp4a(((v >> 4) & 0x0F0F0F0F) | bit4_of_bytes(qh >> (4 * k + 16)), yq[k + 4], sumi);
        }
        const float d = f16_to_f32(load_u16(b));
        if constexpr (q5_1) return d * y.d * float(sumi) + f16_to_f32(load_u16(b + 2)) * y.s;
        return d * y.d * float(sumi - 16 * (y.sum_lo + y.sum_hi));
    } else if constexpr (T == kIQ4_NL || T == kMXFP4) {
        // Symmetric table formats: int8 table values times the int8 activations.
        constexpr bool mx = T == kMXFP4;
        const uint8_t* b = row + c * (mx ? 17 : 18);
        int sumi = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            int lo, hi;
            table16_lookup(uint32_t(mx ? load_b1(b + 1, k) : load_b2(b + 2, k)), mx ? fp4_table() : iq4nl_table(),
                           lo, hi);
            sumi = dp4a(lo, yq[k], sumi);
            sumi = dp4a(hi, yq[k + 4], sumi);
        }
        return (mx ? e8m0_half_to_f32(b[0]) : f16_to_f32(load_u16(b))) * y.d * float(sumi);
    } else if constexpr (T == kIQ4_XS) {
        // Block j of the super-block: 16 qs bytes at 8 + 16j and a signed 6-bit scale.
        const uint8_t* b = row + (c / 8) * 136;
        const int j = int(c % 8);
        int sumi = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            int lo, hi;
            table16_lookup(uint32_t(load_b4(b + 8 + 16 * j, k)), iq4nl_table(), lo, hi);
            sumi = dp4a(lo, yq[k], sumi);
            sumi = dp4a(hi, yq[k + 4], sumi);
        }
        return f16_to_f32(load_u16(b)) * y.d * float(sumi * scale_iq4_xs(j, b));
    } else if constexpr (T == kQ2_K) {
        // Slice j (elements 32j..32j+31) = sub-blocks 2j, 2j+1; its 2-bit quants are bits 2(j%4) of qs[32(j/4) + l].
        const uint8_t* b = row + (c / 8) * 84;
        const int j = int(c % 8);
        const uint8_t* qs = b + 16 + 32 * (j / 4);
        int sumi0 = 0, sumi1 = 0;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const int v = (load_b4(qs, k) >> (2 * (j % 4))) & 0x03030303;
            if (k < 4)
                sumi0 = dp4a(v, yq[k], sumi0);
            else
                sumi1 = dp4a(v, yq[k], sumi1);
        }
        const int sum_lo = y.sum_lo, sum_hi = y.sum_hi;
        const int s0 = b[2 * j], s1 = b[2 * j + 1];  // low nibble scale, high nibble min
        const float d = f16_to_f32(load_u16(b + 80)), dmin = f16_to_f32(load_u16(b + 82));
        return y.d * (d * float((s0 & 0xF) * sumi0 + (s1 & 0xF) * sumi1) -
                      dmin * float((s0 >> 4) * sum_lo + (s1 >> 4) * sum_hi));
    } else if constexpr (T == kQ3_K) {
        // 110-byte blocks, 2-byte aligned. q = low 2 bits - 4 where the hmask bit is clear: the inverted mask bit,
        // moved to bit 2, is subtracted per byte (results -4..3, no saturation).
        const uint8_t* b = row + (c / 8) * 110;
        const int j = int(c % 8);
        const uint8_t* qs = b + 32 + 32 * (j / 4);
        int sumi0 = 0, sumi1 = 0;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const int lo = (load_b2(qs, k) >> (2 * (j % 4))) & 0x03030303;
            const int sub4 = int((~uint32_t(load_b2(b, k)) >> j) & 0x01010101u) << 2;
            const int v = vsubss4(lo, sub4);
            if (k < 4)
                sumi0 = dp4a(v, yq[k], sumi0);
            else
                sumi1 = dp4a(v, yq[k], sumi1);
        }
        const float d = f16_to_f32(load_u16(b + 108));
        return d * y.d * float(scale_q3_k(2 * j, b + 96) * sumi0 + scale_q3_k(2 * j + 1, b + 96) * sumi1);
    } else if constexpr (T == kQ4_K || T == kQ5_K) {
        constexpr bool q5 = T == kQ5_K;
        const uint8_t* b = row + (c / 8) * (q5 ? 176 : 144);
        const int j = int(c % 8), grp = j / 2, hi = j & 1;
        const uint8_t* qs = b + (q5 ? 48 : 16);
        const int sumq = y.sum_lo + y.sum_hi;
        int w[8], h[8];
        load_32_bytes(qs + 32 * grp, w);
        if constexpr (q5) load_32_bytes(b + 16, h);
        int sumi = 0;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            int v = (w[k] >> (4 * hi)) & 0x0F0F0F0F;
            if constexpr (q5) v |= ((h[k] >> j) & 0x01010101) << 4;
            sumi = dp4a(v, yq[k], sumi);
        }
        int sc, m;
        scale_min_k4(j, b + 4, sc, m);
        const float d = f16_to_f32(load_u16(b)), dmin = f16_to_f32(load_u16(b + 2));
        return y.d * (d * float(sc * sumi) - dmin * float(m * sumq));
    } else if constexpr (T == kQ6_K) {  // 210-byte blocks, 2-byte aligned
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
    } else {
        static_assert(T < 0, "no dp4a dot product for this type");
        return 0.0f;
    }
}

}  // namespace zinc::backend::cuda
