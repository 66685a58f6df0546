// The AVX2 + F16C row kernels of simd.h. This file is compiled for AVX2 (see src/CMakeLists.txt) and only called
// where the processor has it; it uses intrinsics and functions of its own only.
#include "backend/cpu/simd.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstring>

namespace zinc::backend::cpu::simd {
namespace {

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
    for (; i < n; ++i) y[i] = _cvtsh_ss(x[i]);
}

// quant::fp32_to_fp16 gives a NaN as 0x7E00 with its sign; the hardware keeps part of the payload.
uint16_t nan_to_f16(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7E00u);
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        if (const int nan = _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
            for (int k = 0; k < 8; ++k)
                if (nan & (1 << k)) y[i + k] = nan_to_f16(x[i + k]);
    }
    for (; i < n; ++i) y[i] = x[i] != x[i] ? nan_to_f16(x[i]) : _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

// ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)) of the eight lanes of s.
float reduce(__m256 s) {
    const __m128 pairs = _mm_hadd_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));  // s0+s1, s2+s3, ...
    const __m128 quads = _mm_hadd_ps(pairs, pairs);  // (s0+s1)+(s2+s3), (s4+s5)+(s6+s7), ...
    return _mm_cvtss_f32(_mm_add_ss(quads, _mm_movehdup_ps(quads)));
}

// Eight values of a row as f32, and one: f32 rows as they are, f16 rows converted (exactly) as they are loaded.
inline __m256 load8(const float* x) { return _mm256_loadu_ps(x); }
inline __m256 load8(const uint16_t* x) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))); }
inline float value(float x) { return x; }
inline float value(uint16_t x) { return _cvtsh_ss(x); }

template <class T>
float dot_of(const float* a, const T* b, int64_t n) {
    __m256 s = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) s = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8(b + i), s);
    float r = reduce(s);
    for (; i < n; ++i) r = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a[i]), _mm_set_ss(value(b[i])), _mm_set_ss(r)));
    return r;
}

// Four rows at a time, their lanes reduced together: the same sums as dot_of() for each.
template <class T>
void dots_of(const float* q, const T* const* rows, int64_t n, int64_t d, float* out) {
    int64_t j = 0;
    if (d % 8 == 0) {
        for (; j + 4 <= n; j += 4) {
            __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
            for (int64_t i = 0; i < d; i += 8) {
                const __m256 qv = _mm256_loadu_ps(q + i);
                for (int k = 0; k < 4; ++k) s[k] = _mm256_fmadd_ps(qv, load8(rows[j + k] + i), s[k]);
            }
            // hadd twice gives each row's ((s0+s1)+(s2+s3)) in the low half and ((s4+s5)+(s6+s7)) in the high half.
            const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(s[0], s[1]), _mm256_hadd_ps(s[2], s[3]));
            _mm_storeu_ps(out + j, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
        }
    }
    for (; j < n; ++j) out[j] = dot_of(q, rows[j], d);
}

template <class T>
void axpy_of(float a, const T* x, float* y, int64_t n) {
    const __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, load8(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; ++i) y[i] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(value(x[i])), _mm_set_ss(y[i])));
}

// The output in registers, 64 values at a time, while every row adds to it.
template <class T>
void axpys_of(const float* p, const T* const* rows, int64_t n, int64_t d, float* o) {
    if (d % 64 != 0) {
        for (int64_t j = 0; j < n; ++j) axpy_of(p[j], rows[j], o, d);
        return;
    }
    for (int64_t i = 0; i < d; i += 64) {
        __m256 acc[8];
        for (int k = 0; k < 8; ++k) acc[k] = _mm256_loadu_ps(o + i + 8 * k);
        for (int64_t j = 0; j < n; ++j) {
            const __m256 pj = _mm256_set1_ps(p[j]);
            for (int k = 0; k < 8; ++k) acc[k] = _mm256_fmadd_ps(pj, load8(rows[j] + i + 8 * k), acc[k]);
        }
        for (int k = 0; k < 8; ++k) _mm256_storeu_ps(o + i + 8 * k, acc[k]);
    }
}

void rotate_halves(float* v, const float* c, const float* s, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 a = _mm256_loadu_ps(v + i), b = _mm256_loadu_ps(v + i + n);
        const __m256 cv = _mm256_loadu_ps(c + i), sv = _mm256_loadu_ps(s + i);
        _mm256_storeu_ps(v + i, _mm256_sub_ps(_mm256_mul_ps(a, cv), _mm256_mul_ps(b, sv)));
        _mm256_storeu_ps(v + i + n, _mm256_add_ps(_mm256_mul_ps(a, sv), _mm256_mul_ps(b, cv)));
    }
    for (; i < n; ++i) {
        const float a = v[i], b = v[i + n];
        v[i] = a * c[i] - b * s[i];
        v[i + n] = a * s[i] + b * c[i];
    }
}

void q8_to_f32(const int8_t* q, const uint16_t* scales, float* y, int64_t n) {
    for (int64_t b = 0; b < n; b += 32) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(scales[b / 32]));
        for (int k = 0; k < 32; k += 8) {
            const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + b + k));
            _mm256_storeu_ps(y + b + k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8))));
        }
    }
}

// e(x) of simd.h, eight lanes.
__m256 exp8(__m256 x) {
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q), low = _mm256_cmp_ps(x, _mm256_set1_ps(kExpLow), _CMP_LT_OQ);
    const __m256 c = _mm256_min_ps(x, _mm256_set1_ps(kExpHigh));
    const __m256 k =
        _mm256_round_ps(_mm256_mul_ps(c, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(k, _mm256_set1_ps(-kLn2High), c);
    r = _mm256_fmadd_ps(k, _mm256_set1_ps(-kLn2Low), r);
    __m256 p = _mm256_set1_ps(kExpPoly[0]);
    for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpPoly[i]));
    p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    const __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
    return _mm256_blendv_ps(_mm256_blendv_ps(e, _mm256_setzero_ps(), low), x, nan);
}

// The same for one value, in the first lane.
float exp1(float x) { return _mm256_cvtss_f32(exp8(_mm256_set1_ps(x))); }

float exp_sum(float* s, int64_t n, float m) {
    const __m256 mv = _mm256_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + i), mv));
        _mm256_storeu_ps(s + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    float a[8];
    _mm256_storeu_ps(a, acc);
    float r = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    for (; i < n; ++i) r += s[i] = exp1(s[i] - m);
    return r;
}

void silu_mul(const float* g, const float* u, float* out, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 gv = _mm256_loadu_ps(g + i);
        const __m256 sig = _mm256_div_ps(gv, _mm256_add_ps(one, exp8(_mm256_xor_ps(gv, sign))));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(sig, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; ++i) out[i] = (g[i] / (1.0f + exp1(-g[i]))) * u[i];
}

}  // namespace

const Kernels& avx2_kernels() {
    static const Kernels k{f16_to_f32,      f32_to_f16,        dot_of<float>,    axpy_of<float>,
                           dots_of<float>,  axpys_of<float>,   dots_of<uint16_t>, axpys_of<uint16_t>,
                           rotate_halves,   q8_to_f32,         exp_sum,          silu_mul};
    return k;
}

}  // namespace zinc::backend::cpu::simd

#endif
