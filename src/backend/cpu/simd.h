// Row kernels of the CPU backend's attention, RoPE and element-wise ops: AVX2 where the processor has it
// (simd_avx2.cpp, chosen at run time as backend/cpu/cpu_features.h says) and portable C++ otherwise, computing the same
// values bit for bit: each float operation is the one the comments give, in their order (fma: one rounding).
#pragma once

#include <cstdint>

namespace zinc::backend::cpu::simd {

struct Kernels {
    // y[i] = f16 x[i] as f32 (exact).
    void (*f16_to_f32)(const uint16_t* x, float* y, int64_t n);
    // y[i] = x[i] rounded to f16, to nearest even (quant::fp32_to_fp16, NaNs included).
    void (*f32_to_f16)(const float* x, uint16_t* y, int64_t n);
    // Σ a[i]·b[i]: eight partial sums s_k = fma(a[i], b[i], s_k) (element i into sum i mod 8) over the first
    // n − n mod 8 elements, added as ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)), then r = fma(a[i], b[i], r)
    // for the rest in order.
    float (*dot)(const float* a, const float* b, int64_t n);
    // y[i] = fma(a, x[i], y[i]).
    void (*axpy)(float a, const float* x, float* y, int64_t n);
    // out[j] = dot(q, rows[j], d) for j < n.
    void (*dots)(const float* q, const float* const* rows, int64_t n, int64_t d, float* out);
    // axpy(p[j], rows[j], o, d) for j = 0 … n−1 in turn.
    void (*axpys)(const float* p, const float* const* rows, int64_t n, int64_t d, float* o);
    // dots and axpys over rows of f16 values, each value as f16_to_f32 gives it: the same sums as over the rows
    // converted.
    void (*dots_f16)(const float* q, const uint16_t* const* rows, int64_t n, int64_t d, float* out);
    void (*axpys_f16)(const float* p, const uint16_t* const* rows, int64_t n, int64_t d, float* o);
    // RoPE of one head, NeoX pairs (i, i + n): with a = v[i], b = v[i + n], v[i] = a·c[i] − b·s[i] and
    // v[i + n] = a·s[i] + b·c[i].
    void (*rotate_halves)(float* v, const float* c, const float* s, int64_t n);
    // y[i] = d·q[i] for a q8_0 cache row: n (a multiple of 32) int8 values with one f16 scale per 32.
    void (*q8_to_f32)(const int8_t* q, const uint16_t* scales, float* y, int64_t n);
    // s[i] = e(s[i] − m), returning their sum added as dot adds its products. e(x), within 2 ulp of exp(x): NaN for
    // NaN, 0 below kExpLow; else with c = min(x, kExpHigh), k = c·log2(e) rounded to the nearest integer (ties to
    // even), r = fma(k, −kLn2High, c), r = fma(k, −kLn2Low, r), p = Cephes' degree-5 polynomial in r by fmas from
    // kExpPoly[0], then p = fma(p, r·r, r) + 1, times 2^k.
    float (*exp_sum)(float* s, int64_t n, float m);
    // out[i] = (g[i] / (1 + e(−g[i])))·u[i]: SiLU(g)·u, the gated FFN's activation (out may be g or u).
    void (*silu_mul)(const float* g, const float* u, float* out, int64_t n);
};

inline constexpr float kExpLow = -87.33654475f, kExpHigh = 88.37626266f, kLog2e = 1.44269504088896341f;
inline constexpr float kLn2High = 0.693359375f, kLn2Low = -2.12194440e-4f;
inline constexpr float kExpPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                      4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

// The kernels for this processor (cpu_isa() of backend/cpu/cpu_features.h).
const Kernels& kernels();
// The portable ones, for the tests.
const Kernels& scalar_kernels();
#if defined(__x86_64__)
const Kernels& avx2_kernels();
#endif

}  // namespace zinc::backend::cpu::simd
