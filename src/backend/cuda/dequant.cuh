// Device dequantization of the ggml block types (docs/formats.md §2.3-§2.5), shared by get_rows.cu and matmul.cu.
// dequant8 writes 8 consecutive values of one row starting at element i0 (a multiple of 8); the float types
// check bounds (cols need not be a multiple of 8), the block types need cols to be a multiple of their block.
// Products and sums are rounded one by one (__fmul_rn, __fadd_rn, __fsub_rn on the GPU: no fused multiply-add),
// in the CPU's order, so the values equal the CPU's dequantize_row bit for bit.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "backend/cuda/matmul_kernels.h"
#include "backend/cuda/rounded_math.h"

namespace zinc::backend::cuda {

// The functions are __host__ __device__ so tests can check their bit logic on a machine without a GPU
// (tests/cuda/cuda_host_logic_test.cu); the intrinsics have host equivalents below.
#define ZINC_HD __host__ __device__ __forceinline__

ZINC_HD float f16_to_f32(uint16_t h) {
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h));
#else
    __half_raw r;
    r.x = h;
    return __half2float(__half(r));
#endif
}
ZINC_HD float bf16_to_f32(uint16_t h) {
    const uint32_t u = uint32_t(h) << 16;
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}
// c + the dot product of the four signed bytes of a and b.
ZINC_HD int dp4a(int a, int b, int c) {
#ifdef __CUDA_ARCH__
    return __dp4a(a, b, c);
#else
    for (int k = 0; k < 4; ++k) c += int(int8_t(uint32_t(a) >> (8 * k))) * int(int8_t(uint32_t(b) >> (8 * k)));
    return c;
#endif
}
// Per-byte signed saturating a - b.
ZINC_HD int vsubss4(int a, int b) {
#ifdef __CUDA_ARCH__
    return __vsubss4(a, b);
#else
    uint32_t r = 0;
    for (int k = 0; k < 4; ++k) {
        int v = int(int8_t(uint32_t(a) >> (8 * k))) - int(int8_t(uint32_t(b) >> (8 * k)));
        v = v < -128 ? -128 : v > 127 ? 127 : v;
        r |= uint32_t(uint8_t(v)) << (8 * k);
    }
    return int(r);
#endif
}

// Bits of a float; the conversions below build scales from their bit patterns.
ZINC_HD float bits_to_f32(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}
// 2^(e-128): half the E8M0 scale, as MXFP4 uses it with its doubled value table; e = 0 and 1 are subnormal.
ZINC_HD float e8m0_half_to_f32(uint8_t e) {
    return bits_to_f32(e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23);
}
// Byte k of the result is byte (s >> 4k) & 7 of the 8 bytes y:x (only the low 3 bits of each selector nibble count).
ZINC_HD uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#ifdef __CUDA_ARCH__
    return __byte_perm(x, y, s);
#else
    const uint64_t v = uint64_t(y) << 32 | x;
    uint32_t r = 0;
    for (int k = 0; k < 4; ++k) r |= uint32_t(v >> (8 * ((s >> (4 * k)) & 7)) & 0xFF) << (8 * k);
    return r;
#endif
}

// Device loads must be naturally aligned. On the host (the tests) a load the GPU would fault on is an error, so the
// host tests catch a 32-bit load from a block that is only 2-byte aligned inside a row.
ZINC_HD void check_aligned(const void* p, unsigned bytes) {
#ifndef __CUDA_ARCH__
    if (reinterpret_cast<uintptr_t>(p) % bytes != 0) throw std::logic_error("misaligned load of quant data");
#else
    (void)p;
    (void)bytes;
#endif
}
ZINC_HD uint16_t load_u16(const uint8_t* p) {
    check_aligned(p, 2);
    return *reinterpret_cast<const uint16_t*>(p);
}
// Four bytes at any alignment, little-endian.
ZINC_HD uint32_t load_u32_bytes(const uint8_t* p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

// A 16-entry int8 value table (docs/formats.md §2.5), four entries per little-endian word, so device code looks values
// up with byte permutes in registers instead of loads from memory.
struct Table16 {
    uint32_t w[4];
};
ZINC_HD constexpr uint32_t pack4(int a, int b, int c, int d) {
    return uint32_t(uint8_t(a)) | uint32_t(uint8_t(b)) << 8 | uint32_t(uint8_t(c)) << 16 | uint32_t(uint8_t(d)) << 24;
}
// kvalues_iq4nl of IQ4_NL and IQ4_XS.
ZINC_HD constexpr Table16 iq4nl_table() {
    return {{pack4(-127, -104, -83, -65), pack4(-49, -35, -22, -10), pack4(1, 13, 25, 38), pack4(53, 69, 89, 113)}};
}
// kvalues_fp4 of MXFP4: the E2M1 values doubled, so they are integers (the scale is halved to match).
ZINC_HD constexpr Table16 fp4_table() {
    return {{pack4(0, 1, 2, 3), pack4(4, 6, 8, 12), pack4(0, -1, -2, -3), pack4(-4, -6, -8, -12)}};
}
// Entry i (0-15) of t.
ZINC_HD int table16_value(const Table16& t, int i) {
    const bool upper = i & 8;
    return int8_t(byte_perm(upper ? t.w[2] : t.w[0], upper ? t.w[3] : t.w[1], uint32_t(i)) & 0xFF);
}
// The entries of the eight nibbles of q as signed bytes for dp4a: byte k of lo is t[(q >> 8k) & 15] (the low
// nibbles), byte k of hi is t[(q >> (8k + 4)) & 15] (the high nibbles).
ZINC_HD void table16_lookup(uint32_t q, const Table16& t, int& lo, int& hi) {
    // Each half of q holds the nibbles lo, hi, lo, hi of two bytes. byte_perm looks them up with their low 3 bits
    // in both halves of the table, then a third byte_perm picks the half by each nibble's bit 3.
    const uint32_t pick_upper = 0x32103210u | ((q & 0x88888888u) >> 1);
    uint32_t v[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const uint32_t s = q >> (16 * i);
        v[i] = byte_perm(byte_perm(t.w[0], t.w[1], s), byte_perm(t.w[2], t.w[3], s), pick_upper >> (16 * i));
    }
    // v[0] = entries of lo0 hi0 lo1 hi1, v[1] = those of lo2 hi2 lo3 hi3: regroup the even and the odd bytes.
    lo = int(byte_perm(v[0], v[1], 0x6420));
    hi = int(byte_perm(v[0], v[1], 0x7531));
}

// The 6-bit scale and min of sub-block j of a Q4_K/Q5_K super-block (docs/formats.md §2.4).
ZINC_HD void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}
// The signed 6-bit scale (-32..31) of 16-value sub-block j (0-15) of a Q3_K super-block from its 12 scale bytes.
ZINC_HD int scale_q3_k(int j, const uint8_t* s) {
    const int low = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low | high << 4) - 32;
}
// The signed 6-bit scale (-32..31) of 32-value block j (0-7) of an IQ4_XS super-block b.
ZINC_HD int scale_iq4_xs(int j, const uint8_t* b) {
    const int low = (b[4 + j / 2] >> (4 * (j % 2))) & 0xF;
    const int high = (load_u16(b + 2) >> (2 * j)) & 3;
    return (low | high << 4) - 32;
}
// The 4 bits of element j (0-31) of a 32-value block whose qs holds elements 0-15 in low and 16-31 in high nibbles.
ZINC_HD int nibble32(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }

// Values j0..j0+7 of one block of a 32-value type (docs/formats.md §2.3, §2.5) starting at b.
ZINC_HD void dequant8_block32(int type, const uint8_t* b, int j0, float* out) {
    switch (type) {
    case kQ8_0: {  // 34 bytes: d, qs[32]
        const float d = f16_to_f32(load_u16(b));
        const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
        for (int k = 0; k < 8; ++k) out[k] = mul_rn(float(qs[j0 + k]), d);
        return;
    }
    case kQ4_0: {  // 18 bytes: d, qs[16]
        const float d = f16_to_f32(load_u16(b));
        for (int k = 0; k < 8; ++k) out[k] = mul_rn(float(nibble32(b + 2, j0 + k) - 8), d);
        return;
    }
    case kQ4_1: {  // 20 bytes: d, m, qs[16]
        const float d = f16_to_f32(load_u16(b)), m = f16_to_f32(load_u16(b + 2));
        for (int k = 0; k < 8; ++k) out[k] = add_rn(mul_rn(float(nibble32(b + 4, j0 + k)), d), m);
        return;
    }
    case kQ5_0:
    case kQ5_1: {  // Q5_0 22 bytes: d, qh[4], qs[16]; Q5_1 24 bytes: d, m, qh[4], qs[16]. Bit j of qh: bit 4 of q_j
        const bool q5_1 = type == kQ5_1;
        const float d = f16_to_f32(load_u16(b));
        const uint8_t* p = b + (q5_1 ? 4 : 2);
        const float m = q5_1 ? f16_to_f32(load_u16(b + 2)) : 0.0f;
        const uint32_t qh = load_u32_bytes(p);
        for (int k = 0; k < 8; ++k) {
            const int j = j0 + k;
            const int q = nibble32(p + 4, j) | int((qh >> j) & 1) << 4;
            out[k] = q5_1 ? add_rn(mul_rn(float(q), d), m) : mul_rn(float(q - 16), d);
        }
        return;
    }
    case kIQ4_NL: {  // 18 bytes: d, qs[16] (indices into kvalues_iq4nl)
        const float d = f16_to_f32(load_u16(b));
        for (int k = 0; k < 8; ++k) out[k] = mul_rn(d, float(table16_value(iq4nl_table(), nibble32(b + 2, j0 + k))));
        return;
    }
    case kMXFP4: {  // 17 bytes: e (E8M0), qs[16] (indices into kvalues_fp4); 1-byte aligned, so byte loads only
        const float d = e8m0_half_to_f32(b[0]);
        for (int k = 0; k < 8; ++k) out[k] = mul_rn(float(table16_value(fp4_table(), nibble32(b + 1, j0 + k))), d);
        return;
    }
    default:
        for (int k = 0; k < 8; ++k) out[k] = NAN;
    }
}

// Bytes of one block of each 32-value type (0 for the others).
ZINC_HD constexpr int block32_bytes(int type) {
    return type == kQ8_0     ? 34
           : type == kQ4_0   ? 18
           : type == kQ4_1   ? 20
           : type == kQ5_0   ? 22
           : type == kQ5_1   ? 24
           : type == kIQ4_NL ? 18
           : type == kMXFP4  ? 17
                             : 0;
}

ZINC_HD void dequant8(int type, const uint8_t* row, int64_t cols, int64_t i0, float* out) {
    switch (type) {
    case kF32: {
        const float* r = reinterpret_cast<const float*>(row);
        for (int k = 0; k < 8; ++k) out[k] = i0 + k < cols ? r[i0 + k] : 0.0f;
        return;
    }
    case kF16: {
        const uint16_t* r = reinterpret_cast<const uint16_t*>(row);
        for (int k = 0; k < 8; ++k) out[k] = i0 + k < cols ? f16_to_f32(r[i0 + k]) : 0.0f;
        return;
    }
    case kBF16: {
        const uint16_t* r = reinterpret_cast<const uint16_t*>(row);
        for (int k = 0; k < 8; ++k) out[k] = i0 + k < cols ? bf16_to_f32(r[i0 + k]) : 0.0f;
        return;
    }
    case kQ8_0:
    case kQ4_0:
    case kQ4_1:
    case kQ5_0:
    case kQ5_1:
    case kIQ4_NL:
    case kMXFP4:
        dequant8_block32(type, row + (i0 / 32) * block32_bytes(type), int(i0 % 32), out);
        return;
    case kQ2_K: {  // 84 bytes: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin
        const uint8_t* b = row + (i0 / 256) * 84;
        const int e0 = int(i0 % 256);
        const uint8_t sc = b[e0 / 16];  // 8 values never cross a 16-value sub-block
        const float dl = mul_rn(f16_to_f32(load_u16(b + 80)), float(sc & 0xF));
        const float ml = mul_rn(f16_to_f32(load_u16(b + 82)), float(sc >> 4));
        for (int k = 0; k < 8; ++k) {
            const int e = e0 + k;
            const int q = (b[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            out[k] = sub_rn(mul_rn(dl, float(q)), ml);
        }
        return;
    }
    case kQ3_K: {  // 110 bytes: hmask[32], qs[64], scales[12], d
        const uint8_t* b = row + (i0 / 256) * 110;
        const int e0 = int(i0 % 256);
        const float dl = mul_rn(f16_to_f32(load_u16(b + 108)), float(scale_q3_k(e0 / 16, b + 96)));
        for (int k = 0; k < 8; ++k) {
            const int e = e0 + k;
            const int low = (b[32 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            const int high = (b[e % 32] >> (e / 32)) & 1;
            out[k] = mul_rn(dl, float(low - (high ? 0 : 4)));
        }
        return;
    }
    case kQ4_K:
    case kQ5_K: {  // Q4_K 144 bytes: d, dmin, scales[12], qs[128]; Q5_K 176: d, dmin, scales[12], qh[32], qs[128]
        const bool q5 = type == kQ5_K;
        const uint8_t* b = row + (i0 / 256) * (q5 ? 176 : 144);
        const float d = f16_to_f32(load_u16(b)), dmin = f16_to_f32(load_u16(b + 2));
        const uint8_t* scales = b + 4;
        const uint8_t* qh = b + 16;
        const uint8_t* qs = b + (q5 ? 48 : 16);
        const int e0 = int(i0 % 256);
        const int j = e0 / 32, c = e0 / 64;
        int sc, m;
        scale_min_k4(j, scales, sc, m);
        const float d1 = mul_rn(d, float(sc)), m1 = mul_rn(dmin, float(m));
        for (int k = 0; k < 8; ++k) {
            const int e = e0 + k, w = e % 64;
            int q = w < 32 ? (qs[32 * c + w] & 0xF) : (qs[32 * c + w - 32] >> 4);
            if (q5) q += ((qh[e % 32] >> (e / 32)) & 1) << 4;
            out[k] = sub_rn(mul_rn(d1, float(q)), m1);
        }
        return;
    }
    case kQ6_K: {  // 210 bytes: ql[128], qh[64], scales[16] (i8), d
        const uint8_t* b = row + (i0 / 256) * 210;
        const uint8_t* ql = b;
        const uint8_t* qh = b + 128;
        const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
        const float d = f16_to_f32(load_u16(b + 208));
        const int e0 = int(i0 % 256);
        const float ds = mul_rn(d, float(scales[e0 / 16]));  // 8 values never cross a 16-value scale group
        for (int k = 0; k < 8; ++k) {
            const int e = e0 + k, h = e / 128, w = e % 128, g = w / 32, l = w % 32;
            const uint8_t lo_byte = ql[64 * h + 32 * (g & 1) + l];
            const int lo = (g < 2) ? (lo_byte & 0xF) : (lo_byte >> 4);
            const int hi = (qh[32 * h + l] >> (2 * g)) & 3;
            out[k] = mul_rn(ds, float((lo | (hi << 4)) - 32));
        }
        return;
    }
    case kIQ4_XS: {  // 136 bytes: d, scales_h, scales_l[4], qs[128] (16 bytes per 32-value block)
        const uint8_t* b = row + (i0 / 256) * 136;
        const int e0 = int(i0 % 256), j = e0 / 32;
        const float dl = mul_rn(f16_to_f32(load_u16(b)), float(scale_iq4_xs(j, b)));
        for (int k = 0; k < 8; ++k)
            out[k] = mul_rn(dl, float(table16_value(iq4nl_table(), nibble32(b + 8 + 16 * j, e0 % 32 + k))));
        return;
    }
    default:
        for (int k = 0; k < 8; ++k) out[k] = NAN;  // NaN: the host rejects other types first
    }
}

}  // namespace zinc::backend::cuda
