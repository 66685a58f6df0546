// The CPU backend's row kernels (backend/cpu/simd.h): the AVX2 ones give the portable ones' values bit for bit, for
// lengths with and without a tail, and the conversions are quant's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/simd.h"
#include "backend/cpu/cpu_features.h"
#include "quant/float_convert.h"

namespace {

namespace cpu = zinc::backend::cpu;
namespace simd = zinc::backend::cpu::simd;

std::vector<float> randn(size_t n, std::mt19937& rng) {
    std::normal_distribution<float> d(0.0f, 3.0f);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

TEST(CpuSimd, Avx2EqualsPortable) {
    if (cpu::cpu_isa_supported() < cpu::Isa::avx2) GTEST_SKIP() << "no AVX2 here";
    const simd::Kernels& s = simd::scalar_kernels();
    const simd::Kernels& v = simd::avx2_kernels();
    std::mt19937 rng(5);
    for (int64_t n : {1, 7, 8, 64, 100, 128, 256}) {
        SCOPED_TRACE("n " + std::to_string(n));
        std::vector<float> a = randn(static_cast<size_t>(n), rng), b = randn(static_cast<size_t>(n), rng);
        a[0] = 70000.0f;  // f16 overflow
        if (n > 3) a[3] = std::numeric_limits<float>::quiet_NaN(), a[2] = 1e-6f;  // NaN, f16 subnormal
        std::vector<uint16_t> h1(static_cast<size_t>(n)), h2(static_cast<size_t>(n));
        s.f32_to_f16(a.data(), h1.data(), n);
        v.f32_to_f16(a.data(), h2.data(), n);
        EXPECT_EQ(h1, h2);
        for (size_t i = 0; i < h1.size(); ++i) EXPECT_EQ(h1[i], zinc::quant::fp32_to_fp16(a[i])) << i;
        std::vector<float> f1(static_cast<size_t>(n)), f2(static_cast<size_t>(n));
        s.f16_to_f32(h1.data(), f1.data(), n);
        v.f16_to_f32(h1.data(), f2.data(), n);
        for (size_t i = 0; i < f1.size(); ++i) {
            if (!std::isnan(f1[i])) {
                EXPECT_EQ(f1[i], f2[i]) << i;
            }
        }
        if (n > 3) a[3] = 0.5f;
        EXPECT_EQ(s.dot(a.data(), b.data(), n), v.dot(a.data(), b.data(), n));
        std::vector<float> y1 = b, y2 = b;
        s.axpy(0.37f, a.data(), y1.data(), n);
        v.axpy(0.37f, a.data(), y2.data(), n);
        EXPECT_EQ(y1, y2);
        // Several rows at once: as one call per row.
        const int64_t rows = 11;
        std::vector<std::vector<float>> r;
        std::vector<const float*> p;
        for (int64_t j = 0; j < rows; ++j) r.push_back(randn(static_cast<size_t>(n), rng));
        for (const auto& row : r) p.push_back(row.data());
        std::vector<float> d1(rows), d2(rows), w = randn(static_cast<size_t>(rows), rng);
        s.dots(a.data(), p.data(), rows, n, d1.data());
        v.dots(a.data(), p.data(), rows, n, d2.data());
        EXPECT_EQ(d1, d2);
        for (size_t j = 0; j < d1.size(); ++j) EXPECT_EQ(d1[j], s.dot(a.data(), p[j], n));
        y1 = b, y2 = b;
        s.axpys(w.data(), p.data(), rows, n, y1.data());
        v.axpys(w.data(), p.data(), rows, n, y2.data());
        EXPECT_EQ(y1, y2);
        // Over f16 rows: as over the rows converted, on both.
        std::vector<std::vector<uint16_t>> r16;
        std::vector<std::vector<float>> r32;
        std::vector<const uint16_t*> p16;
        std::vector<const float*> p32;
        for (const auto& row : r) {
            r16.emplace_back(row.size());
            s.f32_to_f16(row.data(), r16.back().data(), n);
            r32.emplace_back(row.size());
            s.f16_to_f32(r16.back().data(), r32.back().data(), n);
        }
        for (size_t j = 0; j < r.size(); ++j) p16.push_back(r16[j].data()), p32.push_back(r32[j].data());
        for (const simd::Kernels* k : {&s, &v}) {
            std::vector<float> want(rows), got(rows);
            k->dots(a.data(), p32.data(), rows, n, want.data());
            k->dots_f16(a.data(), p16.data(), rows, n, got.data());
            EXPECT_EQ(got, want);
            y1 = b, y2 = b;
            k->axpys(w.data(), p32.data(), rows, n, y1.data());
            k->axpys_f16(w.data(), p16.data(), rows, n, y2.data());
            EXPECT_EQ(y1, y2);
        }
    }
    // RoPE's rotation of the two halves of a head
    for (int64_t n : {4, 32, 64, 67}) {
        const std::vector<float> x = randn(static_cast<size_t>(2 * n), rng), c = randn(static_cast<size_t>(n), rng),
                                 sn = randn(static_cast<size_t>(n), rng);
        std::vector<float> v1 = x, v2 = x;
        s.rotate_halves(v1.data(), c.data(), sn.data(), n);
        v.rotate_halves(v2.data(), c.data(), sn.data(), n);
        EXPECT_EQ(v1, v2) << n;
    }
    // q8_0 cache rows
    std::vector<int8_t> q(96);
    for (size_t i = 0; i < q.size(); ++i) q[i] = int8_t(int(rng() % 255) - 127);
    const std::vector<uint16_t> scales{zinc::quant::fp32_to_fp16(0.01f), zinc::quant::fp32_to_fp16(-3.0f),
                                       zinc::quant::fp32_to_fp16(1e-3f)};
    std::vector<float> y1(96), y2(96);
    s.q8_to_f32(q.data(), scales.data(), y1.data(), 96);
    v.q8_to_f32(q.data(), scales.data(), y2.data(), 96);
    EXPECT_EQ(y1, y2);
    // Softmax's exponentials and SiLU, with the edges of e's range, NaN and infinities among the values.
    for (int64_t n : {1, 7, 8, 100, 3072}) {
        SCOPED_TRACE("exp n " + std::to_string(n));
        std::vector<float> x = randn(static_cast<size_t>(n), rng), u = randn(static_cast<size_t>(n), rng);
        const float edges[] = {-87.4f, -87.3f, 88.3f, 88.4f, 1000.0f, -1000.0f, std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), -0.0f};
        for (size_t i = 0; i < std::size(edges) && i < x.size(); ++i) x[i * 7 % x.size()] = edges[i];
        std::vector<float> e1 = x, e2 = x;
        const float sum1 = s.exp_sum(e1.data(), n, 0.75f), sum2 = v.exp_sum(e2.data(), n, 0.75f);
        EXPECT_EQ(std::memcmp(e1.data(), e2.data(), e1.size() * 4), 0);
        EXPECT_EQ(std::memcmp(&sum1, &sum2, 4), 0) << sum1 << " " << sum2;
        std::vector<float> o1(x.size()), o2(x.size());
        s.silu_mul(x.data(), u.data(), o1.data(), n);
        v.silu_mul(x.data(), u.data(), o2.data(), n);
        EXPECT_EQ(std::memcmp(o1.data(), o2.data(), o1.size() * 4), 0);
    }
}

// e(x), the exponential of softmax and SiLU: within 2 ulp of exp(x) where exp(x) is a normal float, 0 where it is
// below the smallest normal, NaN for NaN; infinity does not arise for finite x (the range is cut at kExpHigh).
TEST(CpuSimd, ExpWithinTwoUlp) {
    for (const simd::Kernels* k : {&simd::scalar_kernels(), &simd::kernels()}) {
        float worst = 0;
        for (float x = -87.0f; x <= 88.3f; x += 0.001953125f) {
            float e = x;
            k->exp_sum(&e, 1, 0.0f);
            const double want = std::exp(double(x));
            const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
            worst = std::max(worst, float(std::fabs(double(e) - want) / ulp));
        }
        EXPECT_LE(worst, 2.0f);
        float e[4] = {-88.0f, 88.37626266f, std::numeric_limits<float>::quiet_NaN(), 0.0f};
        EXPECT_EQ(k->exp_sum(e, 1, 0.0f), 0.0f);
        k->exp_sum(e + 1, 3, 0.0f);
        EXPECT_TRUE(std::isfinite(e[1]));
        EXPECT_NEAR(e[1] / std::exp(double(88.37626266f)), 1.0, 2.5e-7);
        EXPECT_TRUE(std::isnan(e[2]));
        EXPECT_EQ(e[3], 1.0f);
    }
}

}  // namespace
