#include "backend/cpu/simd.h"

#include <cmath>
#include <vector>

#include "quant/cpu_features.h"
#include "quant/float_convert.h"

namespace zinc::backend::cpu::simd {
namespace {

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = quant::fp16_to_fp32(x[i]);
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = quant::fp32_to_fp16(x[i]);
}

float dot(const float* a, const float* b, int64_t n) {
    float s[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) s[k] = std::fma(a[i + k], b[i + k], s[k]);
    float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < n; ++i) r = std::fma(a[i], b[i], r);
    return r;
}

void axpy(float a, const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

void dots(const float* q, const float* const* rows, int64_t n, int64_t d, float* out) {
    for (int64_t j = 0; j < n; ++j) out[j] = dot(q, rows[j], d);
}

void axpys(const float* p, const float* const* rows, int64_t n, int64_t d, float* o) {
    for (int64_t j = 0; j < n; ++j) axpy(p[j], rows[j], o, d);
}

void dots_f16(const float* q, const uint16_t* const* rows, int64_t n, int64_t d, float* out) {
    std::vector<float> row(static_cast<size_t>(d));
    for (int64_t j = 0; j < n; ++j) {
        f16_to_f32(rows[j], row.data(), d);
        out[j] = dot(q, row.data(), d);
    }
}
void axpys_f16(const float* p, const uint16_t* const* rows, int64_t n, int64_t d, float* o) {
    std::vector<float> row(static_cast<size_t>(d));
    for (int64_t j = 0; j < n; ++j) {
        f16_to_f32(rows[j], row.data(), d);
        axpy(p[j], row.data(), o, d);
    }
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

}  // namespace

const Kernels& scalar_kernels() {
    static const Kernels k{f16_to_f32, f32_to_f16, dot,       axpy,          dots,
                           axpys,      dots_f16,   axpys_f16, rotate_halves, q8_to_f32};
    return k;
}

const Kernels& kernels() {
#if defined(__x86_64__)
    static const Kernels& k = quant::cpu_isa() >= quant::Isa::avx2 ? avx2_kernels() : scalar_kernels();
    return k;
#else
    return scalar_kernels();
#endif
}

}  // namespace zinc::backend::cpu::simd
