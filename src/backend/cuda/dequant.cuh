// Device dequantization of the ggml block types (FORMATS.md §2.3-2.5), shared by get_rows.cu and matmul.cu.
// dequant8 writes 8 consecutive values of one row starting at element i0 (a multiple of 8); the float types
// check bounds (cols need not be a multiple of 8), the block types need cols to be a multiple of their block.
// Products are rounded one by one (__fmul_rn, __fsub_rn on the GPU) so the values equal the CPU's dequantize_row.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cmath>
#include <cstring>

#include "backend/cuda/kernels.h"

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
ZINC_HD float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
ZINC_HD float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
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

ZINC_HD uint16_t load_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }

// The 6-bit scale and min of sub-block j of a Q4_K/Q5_K super-block (FORMATS.md §2.4).
ZINC_HD void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
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
    case kQ8_0: {  // 34 bytes: d, qs[32]
        const uint8_t* b = row + (i0 / 32) * 34;
        const float d = f16_to_f32(load_u16(b));
        const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
        const int j0 = int(i0 % 32);
        for (int k = 0; k < 8; ++k) out[k] = mul_rn(float(qs[j0 + k]), d);
        return;
    }
    case kQ4_0: {  // 18 bytes: d, qs[16]; elements 0-15 in low nibbles, 16-31 in high
        const uint8_t* b = row + (i0 / 32) * 18;
        const float d = f16_to_f32(load_u16(b));
        const uint8_t* qs = b + 2;
        const int j0 = int(i0 % 32);
        for (int k = 0; k < 8; ++k) {
            const int j = j0 + k;
            const int q = j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
            out[k] = mul_rn(float(q - 8), d);
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
    default:
        for (int k = 0; k < 8; ++k) out[k] = NAN;  // NaN: the host rejects other types first
    }
}

}  // namespace zinc::backend::cuda
