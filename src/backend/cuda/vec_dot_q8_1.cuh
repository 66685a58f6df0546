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

// Word i of 4-byte-aligned quant bytes (blocks of 20, 24, 84, 136, 144, 176 bytes); the blocks of other sizes are read
// with load_words_any_alignment.
ZINC_HD int load_b4(const uint8_t* p, int i) {
    check_aligned(p + 4 * i, 4);
    return reinterpret_cast<const int*>(p)[i];
}
// 32 bytes at p (16-byte aligned: inside the 144- and 176-byte blocks of 16-byte aligned rows) as eight ints, in two
// 16-byte loads.
ZINC_HD void load_32_bytes(const uint8_t* p, int (&v)[8]) {
    check_aligned(p, 16);
    const int4 a = reinterpret_cast<const int4*>(p)[0], b = reinterpret_cast<const int4*>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// 16 bytes at p (16-byte aligned) as four words, in one load.
ZINC_HD void load_16_bytes(const uint8_t* p, uint32_t (&v)[4]) {
    check_aligned(p, 16);
    const uint4 a = *reinterpret_cast<const uint4*>(p);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
}
// The 8N bytes at p (8-byte aligned) as 2N words, in N 8-byte loads.
template <int N>
ZINC_HD void load_8_byte_words(const uint8_t* p, uint32_t (&v)[2 * N]) {
    check_aligned(p, 8);
#ifdef __CUDA_ARCH__
#pragma unroll
    for (int k = 0; k < N; ++k) {
        const uint2 a = reinterpret_cast<const uint2*>(p)[k];
        v[2 * k] = a.x, v[2 * k + 1] = a.y;
    }
#else
    for (int i = 0; i < 2 * N; ++i) v[i] = load_u32_bytes(p + 4 * i);
#endif
}
// The low 32 bits of hi:lo shifted right by s bits (0 <= s <= 32: hi itself at 32).
ZINC_HD uint32_t funnel_right(uint32_t lo, uint32_t hi, int s) {
#ifdef __CUDA_ARCH__
    return __funnelshift_rc(lo, hi, s);
#else
    return uint32_t(((uint64_t(hi) << 32) | lo) >> s);
#endif
}

// The little-endian words of the 4N bytes at p, at any alignment. On the device: the aligned words that hold those
// bytes, N of them (N + 1 where p is not word-aligned), joined by funnel shifts: one load per word where byte or
// 16-bit loads would take four or two (MXFP4's 17-byte blocks, the 2-byte aligned blocks of Q8_0, Q4_0, Q5_0, IQ4_NL
// and Q6_K, in device memory or in shared memory). No word is read that holds none of the 4N bytes, so the loads stay
// inside whatever holds them. The pointer is moved back by arithmetic, not rebuilt from an integer, so that the
// compiler still sees which memory it points into. On the host, byte loads.
template <int N>
ZINC_HD void load_words_any_alignment(const uint8_t* p, uint32_t (&v)[N]) {
#ifdef __CUDA_ARCH__
    const int misalign = int(reinterpret_cast<uintptr_t>(p) & 3);
    const uint32_t* a = reinterpret_cast<const uint32_t*>(p - misalign);
    const int s = misalign * 8;
    uint32_t w[N + 1];
#pragma unroll
    for (int i = 0; i < N; ++i) w[i] = a[i];
    w[N] = s ? a[N] : 0u;
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = funnel_right(w[i], w[i + 1], s);
#else
    for (int i = 0; i < N; ++i) v[i] = load_u32_bytes(p + 4 * i);
#endif
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

// One Q8_1 block quantized by 8 lanes (quantize_8_lanes): this lane's four quants, and the block's header as every lane
// has it: d, s, and the integer sums of this lane's half of the block and of the other half.
struct Q8Lanes {
    uint32_t packed;
    float d, sum;
    int half, other;
};
// Quantizes the 32 values that 8 lanes hold as float4s (this lane, j = lane % 8 of them: values 4j..4j+3) exactly as
// quantize_q8_1_warp does with a value per lane: the same maximum, and the same sum, since its butterfly over 32 lanes
// (partners at value distance 16, 8, 4, 2, 1) adds the same pairs in the same order as this one over lanes j^4, j^2,
// j^1 and then the float4's components. Every lane of the warp takes part.
__device__ __forceinline__ Q8Lanes quantize_8_lanes(float4 v) {
    float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
    float c[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int off = 4; off > 0; off >>= 1) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
#pragma unroll
        for (int i = 0; i < 4; ++i) c[i] += __shfl_xor_sync(0xffffffffu, c[i], off);
    }
    Q8Lanes q;
    q.sum = (c[0] + c[2]) + (c[1] + c[3]);
    q.d = amax / 127.0f;
    const float vals[4] = {v.x, v.y, v.z, v.w};
    q.packed = 0;
    q.half = 0;  // the sum of the quants of this lane's half of the block (lanes j = 0-3: values 0-15; 4-7: 16-31)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int x = amax == 0.0f ? 0 : __float2int_rn(vals[i] / q.d);
        q.packed |= uint32_t(uint8_t(int8_t(x))) << (8 * i);
        q.half += x;
    }
    for (int off = 2; off > 0; off >>= 1) q.half += __shfl_xor_sync(0xffffffffu, q.half, off);
    q.other = __shfl_xor_sync(0xffffffffu, q.half, 4);
    return q;
}
// Stores lane j's part of the block: its quants at qs + 4j, and (lane 0) the 16-byte header: d, s, sum_lo, sum_hi, 0.
__device__ __forceinline__ void store_8_lanes(const Q8Lanes& q, uint8_t* qs, uint8_t* header, int j) {
    reinterpret_cast<uint32_t*>(qs)[j] = q.packed;
    if (j == 0)
        *reinterpret_cast<uint4*>(header) = make_uint4(__float_as_uint(q.d), __float_as_uint(q.sum),
                                                       uint32_t(uint16_t(q.half)) | uint32_t(q.other) << 16, 0u);
}
#endif

// The integer dot product of a block's 16 quant bytes (q: four words; values 0-15 in the low nibbles, 16-31 in the
// high ones) mapped through table t with the block's Q8_1 activation quants (yq: eight words).
ZINC_HD int table_block_dot(const uint32_t (&q)[4], const Table16& t, const int (&yq)[8]) {
    int sumi = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        int lo, hi;
        table16_lookup(q[k], t, lo, hi);
        sumi = dp4a(lo, yq[k], sumi);
        sumi = dp4a(hi, yq[k + 4], sumi);
    }
    return sumi;
}

// Dot product of chunk c of a weight row with the Q8_1 block y (the matching 32 activations), the row in device memory
// or a copy of it in shared memory.
template <int T>
ZINC_HD float chunk_dot(const uint8_t* row, int64_t c, const BlockQ8_1f& y) {
    int yq[8];  // the 32 int8 activations, four to an int
    load_32_bytes(reinterpret_cast<const uint8_t*>(y.qs), yq);
    if constexpr (T == kQ8_0) {
        const uint8_t* b = row + c * 34;
        uint32_t q[8];
        load_words_any_alignment(b + 2, q);
        int sumi = 0;
#pragma unroll
        for (int k = 0; k < 8; ++k) sumi = dp4a(int(q[k]), yq[k], sumi);
        return f16_to_f32(load_u16(b)) * y.d * float(sumi);
    } else if constexpr (T == kQ4_0 || T == kQ4_1) {
        // Q4_0: w = d (u - 8), so d * dy * (sum u*q - 8 * sum q); Q4_1: w = d u + m, so d * dy * sum u*q + m * s.
        constexpr bool q4_1 = T == kQ4_1;
        const uint8_t* b = row + c * (q4_1 ? 20 : 18);
        uint32_t q[4];
        if constexpr (q4_1) {
#pragma unroll
            for (int k = 0; k < 4; ++k) q[k] = uint32_t(load_b4(b + 4, k));
        } else {
            load_words_any_alignment(b + 2, q);
        }
        int sumi = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int v = int(q[k]);
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
        uint32_t q[5];  // qh, then the 16 bytes of low nibbles
        if constexpr (q5_1) {
#pragma unroll
            for (int k = 0; k < 5; ++k) q[k] = uint32_t(load_b4(b + 4, k));
        } else {
            load_words_any_alignment(b + 2, q);
        }
        const uint32_t qh = q[0];
        int sumi = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int v = int(q[k + 1]);
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
        uint32_t q[4];
        load_words_any_alignment(b + (mx ? 1 : 2), q);
        const int sumi = table_block_dot(q, mx ? fp4_table() : iq4nl_table(), yq);
        return (mx ? e8m0_half_to_f32(b[0]) : f16_to_f32(load_u16(b))) * y.d * float(sumi);
    } else if constexpr (T == kIQ4_XS) {
        // Block j of the super-block: 16 qs bytes at 8 + 16j and a signed 6-bit scale.
        const uint8_t* b = row + (c / 8) * 136;
        const int j = int(c % 8);
        uint32_t q[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) q[k] = uint32_t(load_b4(b + 8 + 16 * j, k));
        const int sumi = table_block_dot(q, iq4nl_table(), yq);
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
        uint32_t qs[8], hm[8];
        load_words_any_alignment(b + 32 + 32 * (j / 4), qs);
        load_words_any_alignment(b, hm);
        int sumi0 = 0, sumi1 = 0;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const int lo = int(qs[k] >> (2 * (j % 4))) & 0x03030303;
            const int sub4 = int((~hm[k] >> j) & 0x01010101u) << 2;
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
        uint32_t ql[8], qh[8];
        load_words_any_alignment(b + 64 * hf + 32 * (g & 1), ql);
        load_words_any_alignment(b + 128 + 32 * hf, qh);
        const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
        int sumi0 = 0, sumi1 = 0;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const int lo = int(ql[k] >> (4 * (g >> 1))) & 0x0F0F0F0F;
            const int hb = (int(qh[k] >> (2 * g)) & 0x03030303) << 4;
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

// ---- 64-value groups: the decode matvecs' unit of work for the K-quants, MXFP4 and IQ4_XS ----
//
// A group is 64 consecutive values of a row: the two 32-value sub-blocks of a Q4_K/Q5_K super-block that share 32 quant
// bytes (values 64g .. 64g+31 in the low nibbles, 64g+32 .. 64g+63 in the high ones), two blocks of MXFP4 or IQ4_XS
// (KGroup<kMXFP4> below), or a quarter of a Q6_K super-block (four 16-value pieces, 128h + l0 + 32i + 0..15 for
// i = 0..3, whose low bits are 16 bytes of ql each and whose high bits share 16 bytes of qh; q6_k_group_dot). One lane
// computes a whole group, so the scale bytes and the super-block's factors are decoded once per 64 values instead of
// once per 32, and each weight byte is loaded once, in 8- or 16-byte pieces, instead of once per nibble.

// The two Q8_1 blocks of a Q4_K/Q5_K group's values: the quants four to a word, the scales and the integer sums.
struct ActGroup {
    int q0[8], q1[8];
    float d0, d1;
    int sum0, sum1;
};
// From the blocks' quants q0, q1 (32 bytes each) and their 16-byte headers h0, h1 (d, s, sum_lo, sum_hi, unused: the
// last 16 bytes of a BlockQ8_1f), wherever they lie, 16-byte aligned.
ZINC_HD void load_act_group(const uint8_t* q0, const uint8_t* q1, const uint8_t* h0, const uint8_t* h1, ActGroup& a) {
    load_32_bytes(q0, a.q0);
    load_32_bytes(q1, a.q1);
    uint32_t t0[4], t1[4];  // d, s, sum_lo | sum_hi << 16, unused
    load_16_bytes(h0, t0);
    load_16_bytes(h1, t1);
    a.d0 = bits_to_f32(t0[0]);
    a.d1 = bits_to_f32(t1[0]);
    a.sum0 = int16_t(t0[2]) + int16_t(t0[2] >> 16);
    a.sum1 = int16_t(t1[2]) + int16_t(t1[2] >> 16);
}
// From the two blocks at y.
ZINC_HD void load_act_group(const BlockQ8_1f* y, ActGroup& a) {
    load_act_group(reinterpret_cast<const uint8_t*>(y[0].qs), reinterpret_cast<const uint8_t*>(y[1].qs),
                   reinterpret_cast<const uint8_t*>(&y[0].d), reinterpret_cast<const uint8_t*>(&y[1].d), a);
}

// Group g (0-3) of one Q4_K/Q5_K super-block, as loaded: the 16-byte header (d, dmin, the 12 scale bytes), the group's
// 32 quant bytes and, for Q5_K, the 32 bytes of fifth bits of the whole super-block.
template <int T>
struct KGroup {
    uint32_t hdr[4];
    int q[8];
    int h[T == kQ5_K ? 8 : 1];
};
// MXFP4 and IQ4_XS rows are read by 64-value groups too: a group is two 32-value blocks, whose 16 quant bytes each hold
// values 0-15 in their low nibbles and 16-31 in their high ones, mapped through the format's table (table16_lookup).
// An MXFP4 group is the 34 bytes at 34 gi of its row (each block an E8M0 scale byte, then its quants), 2-byte aligned:
// the five 8-byte words around it, one load each where 2-byte pieces would take 17, and m, the group's first byte in
// them (0, 2, 4 or 6). An IQ4_XS group is blocks 2u and 2u + 1 of a 136-byte super-block (u = gi % 4, the g of
// k_group_dot): the super-block's 8-byte header (d, the scales' high bits, their low nibbles) and its 32 quant bytes at
// 8 + 32u, 8-byte aligned.
template <>
struct KGroup<kMXFP4> {
    uint32_t v[10];
    int m;
};
template <>
struct KGroup<kIQ4_XS> {
    uint32_t hdr[2];
    uint32_t q[8];
};
// Group gi of a row. Q4_K, Q5_K: super-block gi / 4, group gi % 4, the row 16-byte aligned (144- and 176-byte
// super-blocks); IQ4_XS: the row 8-byte aligned; MXFP4: 2-byte aligned, and up to 6 bytes past the group are read
// (within the slack load_weight leaves past every weight, kWeightSlack).
template <int T>
ZINC_HD void load_k_group(const uint8_t* row, int gi, KGroup<T>& w) {
    if constexpr (T == kMXFP4) {
        const uint8_t* p = row + int64_t(gi) * 34;
        w.m = int(reinterpret_cast<uintptr_t>(p) & 7);
        load_8_byte_words<5>(p - w.m, w.v);
    } else if constexpr (T == kIQ4_XS) {
        const uint8_t* b = row + int64_t(gi >> 2) * 136;
        load_8_byte_words<1>(b, w.hdr);
        load_8_byte_words<4>(b + 8 + 32 * (gi & 3), w.q);
    } else {
        constexpr int kBytes = T == kQ5_K ? 176 : 144;
        const uint8_t* b = row + int64_t(gi >> 2) * kBytes;
        load_16_bytes(b, w.hdr);
        load_32_bytes(b + (T == kQ5_K ? 48 : 16) + 32 * (gi & 3), w.q);
        if constexpr (T == kQ5_K) load_32_bytes(b + 16, w.h);
    }
}
// The 6-bit scales and mins of sub-blocks 2g and 2g + 1 of a Q4_K/Q5_K super-block (scale_min_k4), from its 16-byte
// header hdr (d and dmin, then the 12 scale bytes), four at a time: bytes 0-3 of the scale bytes for sub-blocks 0-3,
// the low nibbles of bytes 8-11 with bits 6-7 of bytes 0-3 (scales) or 4-7 (mins) for sub-blocks 4-7.
struct KScales {
    int sc0, sc1, m0, m1;
};
ZINC_HD KScales k_group_scales(const uint32_t (&hdr)[4], int g) {
    const uint32_t y = hdr[1], z = hdr[2], x = hdr[3];
    const bool low = g < 2;
    const uint32_t sc4 = low ? (y & 0x3F3F3F3Fu) : ((x & 0x0F0F0F0Fu) | ((y >> 2) & 0x30303030u));
    const uint32_t m4 = low ? (z & 0x3F3F3F3Fu) : (((x >> 4) & 0x0F0F0F0Fu) | ((z >> 2) & 0x30303030u));
    const int sh = 16 * (g & 1);
    return {int(sc4 >> sh) & 0xFF, int(sc4 >> (sh + 8)) & 0xFF, int(m4 >> sh) & 0xFF, int(m4 >> (sh + 8)) & 0xFF};
}
// A Q4_K/Q5_K group's value from the integer dot products s0, s1 of its sub-blocks with their activation blocks (scales
// d0, d1, integer sums sum0, sum1): d (sc0 s0 d0 + sc1 s1 d1) - dmin (m0 sum0 d0 + m1 sum1 d1), hdr0 the super-block's
// d and dmin.
ZINC_HD float k_group_value(uint32_t hdr0, const KScales& k, int s0, int s1, float d0, float d1, int sum0, int sum1) {
    const float d = f16_to_f32(uint16_t(hdr0)), dmin = f16_to_f32(uint16_t(hdr0 >> 16));
    const float pos = fma_rn(d1, float(k.sc1 * s1), mul_rn(d0, float(k.sc0 * s0)));
    const float neg = fma_rn(d1, float(k.m1 * sum1), mul_rn(d0, float(k.m0 * sum0)));
    return fma_rn(d, pos, -mul_rn(dmin, neg));
}

// The dot product of a loaded Q4_K/Q5_K group g with its activations: d (sc0 s0 y.d0 + sc1 s1 y.d1) - dmin (m0 q0 y.d0
// + m1 q1 y.d1), s the integer dot products of the sub-blocks and q the integer sums of their activation blocks.
// MXFP4: d0 s0 y.d0 + d1 s1 y.d1 with d the blocks' E8M0 scales (halved, as fp4_table's values are doubled); IQ4_XS:
// d (sc0 s0 y.d0 + sc1 s1 y.d1) with the blocks' signed 6-bit scales.
template <int T>
ZINC_HD float k_group_dot(const KGroup<T>& w, int g, const ActGroup& a) {
    if constexpr (T == kMXFP4) {
        // x: the words from byte m & 4 of v on; the group starts t = 8 (m & 3) bits into x[0] (t = 0 or 16). Block 0's
        // scale is byte t / 8 and its quants follow; block 1's scale is byte t / 8 + 17 (in x[4]), its quants from
        // byte t / 8 + 18 (t + 16 bits into x[4]: 32, all of x[5], where t = 16).
        const bool next = (w.m & 4) != 0;
        uint32_t x[9];
#pragma unroll
        for (int k = 0; k < 9; ++k) x[k] = next ? w.v[k + 1] : w.v[k];
        const int t = 8 * (w.m & 3);
        uint32_t q0[4], q1[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            q0[k] = funnel_right(x[k], x[k + 1], t + 8);
            q1[k] = funnel_right(x[k + 4], x[k + 5], t + 16);
        }
        const int s0 = table_block_dot(q0, fp4_table(), a.q0), s1 = table_block_dot(q1, fp4_table(), a.q1);
        const float d0 = e8m0_half_to_f32(uint8_t(x[0] >> t)), d1 = e8m0_half_to_f32(uint8_t(x[4] >> (t + 8)));
        return fma_rn(mul_rn(d1, a.d1), float(s1), mul_rn(mul_rn(d0, a.d0), float(s0)));
    } else if constexpr (T == kIQ4_XS) {
        const uint32_t q0[4] = {w.q[0], w.q[1], w.q[2], w.q[3]}, q1[4] = {w.q[4], w.q[5], w.q[6], w.q[7]};
        const int s0 = table_block_dot(q0, iq4nl_table(), a.q0), s1 = table_block_dot(q1, iq4nl_table(), a.q1);
        // Block j's scale: nibble j of the low scales (header bytes 4-7) and bits 2j, 2j + 1 of the high ones (bytes
        // 2-3) as 6 bits, less 32; here j = 2g, 2g + 1.
        const uint32_t low = w.hdr[1] >> (8 * g), high = w.hdr[0] >> (16 + 4 * g);
        const int sc0 = int((low & 0xF) | (high & 3) << 4) - 32;
        const int sc1 = int(((low >> 4) & 0xF) | ((high >> 2) & 3) << 4) - 32;
        // |sc s| <= 32 * 32 * 127 * 113 < 2^24: exact in f32.
        return mul_rn(f16_to_f32(uint16_t(w.hdr[0])), fma_rn(a.d1, float(sc1 * s1), mul_rn(a.d0, float(sc0 * s0))));
    } else {
        int s0 = 0, s1 = 0;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            int lo = w.q[k] & 0x0F0F0F0F, hi = (w.q[k] >> 4) & 0x0F0F0F0F;
            if constexpr (T == kQ5_K) {
                lo |= ((w.h[k] >> (2 * g)) & 0x01010101) << 4;
                hi |= ((w.h[k] >> (2 * g + 1)) & 0x01010101) << 4;
            }
            s0 = dp4a(lo, a.q0[k], s0);
            s1 = dp4a(hi, a.q1[k], s1);
        }
        return k_group_value(w.hdr[0], k_group_scales(w.hdr, g), s0, s1, a.d0, a.d1, a.sum0, a.sum1);
    }
}

// The activations of a Q6_K group of half `half` (u % 2) of a super-block half, from y, the four Q8_1 blocks of that
// half: the quants of its four pieces (16 bytes of each block), the blocks' scales and the pieces' integer sums. Apart
// from the dot product, so that two rows' groups can share them.
struct Q6Act {
    int a[4][4];
    float d[4];
    int q[4];
};
// From q[i], the 16 bytes of block i's quants of this half, and h[i], block i's 16-byte header (d, s, sum_lo, sum_hi,
// unused: the last 16 bytes of a BlockQ8_1f), wherever they lie, 16-byte aligned.
ZINC_HD void load_q6_k_act(const uint8_t* const (&q)[4], const uint8_t* const (&h)[4], int half, Q6Act& x) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        uint32_t v[4], t[4];  // t: d, s, sum_lo | sum_hi << 16, unused
        load_16_bytes(q[i], v);
        for (int k = 0; k < 4; ++k) x.a[i][k] = int(v[k]);
        load_16_bytes(h[i], t);
        x.d[i] = bits_to_f32(t[0]);
        x.q[i] = half ? int16_t(t[2] >> 16) : int16_t(t[2]);
    }
}
ZINC_HD void load_q6_k_act(const BlockQ8_1f* y, int half, Q6Act& x) {
    const uint8_t* q[4];
    const uint8_t* h[4];
    for (int i = 0; i < 4; ++i) {
        q[i] = reinterpret_cast<const uint8_t*>(y[i].qs) + 16 * half;
        h[i] = reinterpret_cast<const uint8_t*>(&y[i].d);
    }
    load_q6_k_act(q, h, half, x);
}

// Group u (0-3) of the Q6_K super-block at byte offset off of p (2-byte aligned, as 210-byte blocks are), dotted with its
// activations x (load_q6_k_act of the four Q8_1 blocks of the super-block's half u / 2): with l0 = 16 (u % 2), its
// pieces i = 0..3 are values l0 .. l0 + 15 of block i, whose low 4 bits are ql bytes 64 (u / 2) + 32 (i % 2) + l0 ..
// (low nibbles for i < 2, high for i >= 2) and whose high 2 bits are bits 2i, 2i + 1 of qh bytes 32 (u / 2) + l0 .. .
// The result is d sum_i sc_i y_i.d (s_i - 32 q_i): s_i the integer dot product of the unsigned 6-bit quants, q_i the
// integer sum of the piece's activations (a half of block i).
ZINC_HD float q6_k_group_dot(const uint8_t* p, int off, int u, const Q6Act& x) {
    const int hf = u >> 1, half = u & 1;
    uint32_t ql0[4], ql1[4], qh[4], sc[2];
    load_words_any_alignment(p + off + 64 * hf + 16 * half, ql0);
    load_words_any_alignment(p + off + 64 * hf + 32 + 16 * half, ql1);
    load_words_any_alignment(p + off + 128 + 32 * hf + 16 * half, qh);
    load_words_any_alignment(p + off + 192 + 8 * hf, sc);  // the scales of this half
    int s[4] = {0, 0, 0, 0};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int h = int(qh[k]), l0 = int(ql0[k]), l1 = int(ql1[k]);
        s[0] = dp4a((l0 & 0x0F0F0F0F) | ((h << 4) & 0x30303030), x.a[0][k], s[0]);
        s[1] = dp4a((l1 & 0x0F0F0F0F) | ((h << 2) & 0x30303030), x.a[1][k], s[1]);
        s[2] = dp4a(((l0 >> 4) & 0x0F0F0F0F) | (h & 0x30303030), x.a[2][k], s[2]);
        s[3] = dp4a(((l1 >> 4) & 0x0F0F0F0F) | ((h >> 2) & 0x30303030), x.a[3][k], s[3]);
    }
    // Scale of piece i: int8 byte 8 hf + half + 2i of the super-block's scales, so bytes half and half + 2 of the
    // half's words 0 and 1.
    const uint32_t w0 = sc[0], w1 = sc[1];
    const int bs = 8 * half;
    const int scale[4] = {int8_t(w0 >> bs), int8_t(w0 >> (bs + 16)), int8_t(w1 >> bs), int8_t(w1 >> (bs + 16))};
    float r = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        // |s - 32 q| <= 16 * 32 * 127, so the scaled integer (< 2^24) converts exactly.
        r = fma_rn(x.d[i], float(scale[i] * (s[i] - 32 * x.q[i])), r);
    }
    return mul_rn(f16_to_f32(load_u16(p + off + 208)), r);
}
// The same with its activations read from y.
ZINC_HD float q6_k_group_dot(const uint8_t* p, int off, int u, const BlockQ8_1f* y) {
    Q6Act x;
    load_q6_k_act(y, u & 1, x);
    return q6_k_group_dot(p, off, u, x);
}

}  // namespace zinc::backend::cuda
