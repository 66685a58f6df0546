#include "backend/cpu/simd.h"

#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_features.h"
#include "quant/float_convert.h"

namespace zinc::backend::cpu::simd {
namespace {

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = quant::fp16_to_fp32(x[i]);
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = quant::fp32_to_fp16(x[i]);
}

// A row's value as f32: f32 rows as they are, f16 rows converted (exactly).
inline float value(float x) { return x; }
inline float value(uint16_t x) { return quant::fp16_to_fp32(x); }

template <class T>
float dot_of(const float* a, const T* b, int64_t n) {
    float s[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) s[k] = std::fma(a[i + k], value(b[i + k]), s[k]);
    float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < n; ++i) r = std::fma(a[i], value(b[i]), r);
    return r;
}

template <class T>
void axpy_of(float a, const T* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = std::fma(a, value(x[i]), y[i]);
}

template <class T>
void dots_of(const float* q, const T* const* rows, int64_t n, int64_t d, float* out) {
    for (int64_t j = 0; j < n; ++j) out[j] = dot_of(q, rows[j], d);
}

template <class T>
void axpys_of(const float* p, const T* const* rows, int64_t n, int64_t d, float* o) {
    for (int64_t j = 0; j < n; ++j) axpy_of(p[j], rows[j], o, d);
}

void rotate_halves(float* v, const float* c, const float* s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float a = v[i], b = v[i + n];
        v[i] = a * c[i] - b * s[i];
        v[i + n] = a * s[i] + b * c[i];
    }
}

void q8_to_f32(const int8_t* q, const uint16_t* scales, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = quant::fp16_to_fp32(scales[i / 32]) * float(q[i]);
}

// e(x) of simd.h.
float exp_lane(float x) {
    if (std::isnan(x)) return x;
    if (x < kExpLow) return 0.0f;
    const float c = x > kExpHigh ? kExpHigh : x;
    const float k = std::nearbyint(c * kLog2e);
    float r = std::fma(k, -kLn2High, c);
    r = std::fma(k, -kLn2Low, r);
    float p = kExpPoly[0];
    for (int i = 1; i < 6; ++i) p = std::fma(p, r, kExpPoly[i]);
    p = std::fma(p, r * r, r) + 1.0f;
    const uint32_t bits = uint32_t(int32_t(k) + 127) << 23;
    float two_k;
    std::memcpy(&two_k, &bits, 4);
    return p * two_k;
}

float exp_sum(float* s, int64_t n, float m) {
    float acc[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) acc[k] += s[i + k] = exp_lane(s[i + k] - m);
    float r = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; ++i) r += s[i] = exp_lane(s[i] - m);
    return r;
}

void silu_mul(const float* g, const float* u, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = (g[i] / (1.0f + exp_lane(-g[i]))) * u[i];
}

}  // namespace

const Kernels& scalar_kernels() {
    static const Kernels k{f16_to_f32,      f32_to_f16,        dot_of<float>,    axpy_of<float>,
                           dots_of<float>,  axpys_of<float>,   dots_of<uint16_t>, axpys_of<uint16_t>,
                           rotate_halves,   q8_to_f32,         exp_sum,          silu_mul};
    return k;
}

const Kernels& kernels() {
#if defined(__x86_64__)
    static const Kernels& k = cpu::cpu_isa() >= cpu::Isa::avx2 ? avx2_kernels() : scalar_kernels();
    return k;
#else
    return scalar_kernels();
#endif
}

}  // namespace zinc::backend::cpu::simd
