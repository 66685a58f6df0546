// The CPU backend's vec_dot (backend/cpu/vec_dot.h): activation quantization to the vec-dot type and the integer
// dot products (docs/formats.md §2.8, §3).
// Every kernel must equal the f32 dot product of the dequantized weight row and the dequantized activation row up to
// float rounding, and the SIMD kernels must agree with the scalar reference.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf/tensor_type.h"
#include "quant/activation.h"
#include "quant/blocks.h"
#include "quant/dequantize.h"
#include "quant/float_convert.h"
#include "quant/quantize.h"
#include "backend/cpu/vec_dot.h"
#include "backend/cpu/vec_dot_internal.h"

namespace {

using zinc::gguf::TensorType;
namespace q = zinc::quant;
namespace cpu = zinc::backend::cpu;

const TensorType kWeightTypes[] = {TensorType::F32,  TensorType::F16,    TensorType::BF16,   TensorType::Q4_0,
                                   TensorType::Q4_1, TensorType::Q5_0,   TensorType::Q5_1,   TensorType::Q8_0,
                                   TensorType::Q2_K, TensorType::Q3_K,   TensorType::Q4_K,   TensorType::Q5_K,
                                   TensorType::Q6_K, TensorType::IQ4_NL, TensorType::IQ4_XS, TensorType::MXFP4};

std::string name(TensorType t) { return std::string(zinc::gguf::type_name(t)); }

TEST(QuantVecDot, Pairing) {
    const auto vdt = [](TensorType t) { return cpu::vec_dot_type(t); };
    for (TensorType t : {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q8_0, TensorType::IQ4_NL, TensorType::MXFP4})
        EXPECT_EQ(vdt(t), TensorType::Q8_0) << name(t);
    for (TensorType t : {TensorType::Q4_1, TensorType::Q5_1}) EXPECT_EQ(vdt(t), TensorType::Q8_1) << name(t);
    for (TensorType t : {TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K,
                         TensorType::IQ4_XS})
        EXPECT_EQ(vdt(t), TensorType::Q8_K) << name(t);
    for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16}) EXPECT_EQ(vdt(t), t);
    for (TensorType t : kWeightTypes) EXPECT_TRUE(cpu::can_vec_dot(t)) << name(t);
    for (TensorType t : {TensorType::Q8_1, TensorType::Q8_K, TensorType::IQ2_XXS, TensorType::TQ1_0, TensorType::I32}) {
        EXPECT_FALSE(cpu::can_vec_dot(t)) << name(t);
        EXPECT_THROW(cpu::vec_dot_type(t), std::invalid_argument) << name(t);
        EXPECT_THROW(cpu::vec_dot_fn(t), std::invalid_argument) << name(t);
    }
    std::vector<float> x(256, 1.0f);
    std::vector<uint8_t> buf(4096);
    EXPECT_THROW(cpu::quantize_activation(TensorType::Q8_0, x.data(), buf.data(), 48), std::invalid_argument);
    EXPECT_THROW(cpu::quantize_activation(TensorType::Q8_K, x.data(), buf.data(), 128), std::invalid_argument);
    EXPECT_THROW(cpu::quantize_activation(TensorType::Q4_0, x.data(), buf.data(), 256), std::invalid_argument);
}

#ifdef ZINC_VEC_DOT_AVX2
TEST(QuantVecDot, AvxKernelsPresent) {
    for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0, TensorType::Q4_0,
                         TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K})
        EXPECT_TRUE(cpu::vec_dot_has_simd(t)) << name(t);
}
#endif

// ggml-cpu's x86 quantize_row_q8_0 multiplies by 127/amax and rounds ties to even (the _ref divides via 1/d and
// rounds half away from zero): with amax = 127 the multiplier is exactly 1 and the halves show the difference.
TEST(QuantVecDot, Q8_0ActivationRoundsLikeGgmlX86) {
    std::vector<float> x(32, 0.0f);
    x[0] = 127.0f;
    x[1] = 0.5f;
    x[2] = 1.5f;
    x[3] = 2.5f;
    x[4] = -0.5f;
    x[5] = -3.5f;
    x[6] = 126.5f;
    q::BlockQ8_0 b0;
    q::BlockQ8_1 b1;
    cpu::quantize_activation(TensorType::Q8_0, x.data(), &b0, 32);
    cpu::quantize_activation(TensorType::Q8_1, x.data(), &b1, 32);
    const int8_t want[7] = {127, 0, 2, 2, 0, -4, 126};
    for (int j = 0; j < 7; ++j) {
        EXPECT_EQ(b0.qs[j], want[j]) << j;
        EXPECT_EQ(b1.qs[j], want[j]) << j;
    }
    EXPECT_EQ(b0.d, q::fp32_to_fp16(1.0f));
    EXPECT_EQ(b1.d, b0.d);
    EXPECT_EQ(b1.s, q::fp32_to_fp16(127.0f + 2 + 2 - 4 + 126));
    // An all-zero block: d = 0 and zero quants.
    std::vector<float> z(32, 0.0f);
    cpu::quantize_activation(TensorType::Q8_0, z.data(), &b0, 32);
    EXPECT_EQ(b0.d, 0);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(b0.qs[j], 0);
}

std::vector<float> random_row(std::mt19937& rng, size_t n, float scale, bool outliers) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng) * scale;
    if (outliers)
        for (size_t i = 0; i < n; i += 97) v[i] *= 40.0f;
    return v;
}

TEST(QuantVecDot, ActivationQuantizersAreByteExact) {
    std::mt19937 rng(7);
    for (size_t n : {1024u, 4096u}) {
        for (float scale : {1.0f, 1e-4f, 3e3f}) {
            const auto x = random_row(rng, n, scale, true);
            std::vector<uint8_t> a(n * 4), b(n * 4);
            // Q8_K is ggml's quantize_row_q8_K_ref, which zinc's activation.h reproduces.
            cpu::quantize_activation(TensorType::Q8_K, x.data(), a.data(), n);
            q::quantize_row_q8_K(x.data(), b.data(), n);
            EXPECT_EQ(0, std::memcmp(a.data(), b.data(), zinc::gguf::row_bytes(TensorType::Q8_K, n)));
            // The AVX2 Q8_0 / Q8_1 quantizers against the scalar formulation of the same x86 algorithm.
            cpu::quantize_activation(TensorType::Q8_0, x.data(), a.data(), n);
            cpu::detail::scalar_quantize_q8_0(x.data(), b.data(), n);
            EXPECT_EQ(0, std::memcmp(a.data(), b.data(), zinc::gguf::row_bytes(TensorType::Q8_0, n)));
            cpu::quantize_activation(TensorType::Q8_1, x.data(), a.data(), n);
            cpu::detail::scalar_quantize_q8_1(x.data(), b.data(), n);
            EXPECT_EQ(0, std::memcmp(a.data(), b.data(), zinc::gguf::row_bytes(TensorType::Q8_1, n)));
            // F16 / BF16: round to nearest even.
            cpu::quantize_activation(TensorType::F16, x.data(), a.data(), n);
            cpu::quantize_activation(TensorType::BF16, x.data(), b.data(), n);
            for (size_t i = 0; i < n; ++i) {
                uint16_t h, bf;
                std::memcpy(&h, a.data() + 2 * i, 2);
                std::memcpy(&bf, b.data() + 2 * i, 2);
                ASSERT_EQ(h, q::fp32_to_fp16(x[i]));
                ASSERT_EQ(bf, q::fp32_to_bf16(x[i]));
            }
        }
    }
}

// Q8_K takes the sign of the first element of largest magnitude: blocks where +m and −m both occur (either first),
// where it sits in the last lane, an all-zero block, values that round to ±127.5.
TEST(QuantVecDot, Q8_KQuantizerEdgeCases) {
    std::mt19937 rng(9);
    std::vector<float> x(256 * 6);
    for (auto& v : x) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
    x[10] = 5.0f, x[200] = -5.0f;                       // block 0: + first
    x[256 + 3] = -7.0f, x[256 + 100] = 7.0f;            // block 1: − first
    x[512 + 255] = -9.0f;                               // block 2: in the last lane
    std::fill(x.begin() + 768, x.begin() + 1024, 0.0f);  // block 3: zeros
    for (int i = 0; i < 256; ++i) x[1024 + i] = (i % 2 ? 1.0f : -1.0f) * (127.5f / 127.0f) * float(i % 9) / 8.0f;
    x[1024 + 5] = 127.5f / 127.0f * 1.25f;              // block 4: halves
    for (int i = 0; i < 256; ++i) x[1280 + i] = 1e-30f * float(i - 128);  // block 5: tiny
    std::vector<uint8_t> a(6 * 292), b(6 * 292);
    cpu::quantize_activation(TensorType::Q8_K, x.data(), a.data(), x.size());
    q::quantize_row_q8_K(x.data(), b.data(), x.size());
    EXPECT_EQ(a, b);
}

struct Case {
    size_t n;
    float wscale, ascale;
    bool outliers;
};

TEST(QuantVecDot, MatchesDequantizedDotProduct) {
    std::mt19937 rng(1234);
    const Case cases[] = {
        {1024, 1.0f, 1.0f, false},  {4096, 0.02f, 3.0f, false}, {12288, 0.05f, 0.5f, true},
        {1024, 1e-3f, 300.0f, true},  {4096, 30.0f, 1e-5f, false}, {1024, 1e-6f, 1e-6f, false},
        {4096, 100.0f, 100.0f, true},
    };
    for (TensorType wt : kWeightTypes) {
        const TensorType at = cpu::vec_dot_type(wt);
        const auto fn = cpu::vec_dot_fn(wt);
        const auto ref = cpu::ref::vec_dot_fn(wt);
        for (const Case& c : cases) {
            for (int rep = 0; rep < 3; ++rep) {
                const auto wf = random_row(rng, c.n, c.wscale, c.outliers);
                const auto af = random_row(rng, c.n, c.ascale, c.outliers && rep == 1);
                std::vector<uint8_t> w(zinc::gguf::row_bytes(wt, c.n)), a(zinc::gguf::row_bytes(at, c.n));
                if (wt == TensorType::F32)
                    std::memcpy(w.data(), wf.data(), c.n * 4);
                else
                    q::quantize_row(wt, wf.data(), w.data(), c.n);
                cpu::quantize_activation(at, af.data(), a.data(), c.n);
                std::vector<float> wd(c.n), ad(c.n);
                double exact = 0, mag = 0;
                if (at == TensorType::Q8_1) {
                    // Q4_1 / Q5_1 (w = d·u + m) meet the min through Q8_1's s = f16(d_y·Σy), which is rounded to
                    // f16 (as in ggml): the exact value is Σ (d·u)·a + Σ_blocks m·s. Dequantize with the mins zeroed
                    // and add the m·s terms.
                    std::vector<uint8_t> w0 = w;
                    const size_t bb = zinc::gguf::traits(wt).block_bytes;
                    const auto* ab = reinterpret_cast<const q::BlockQ8_1*>(a.data());
                    for (size_t b = 0; b < c.n / 32; ++b) {
                        uint16_t m;
                        std::memcpy(&m, w0.data() + b * bb + 2, 2);
                        std::memset(w0.data() + b * bb + 2, 0, 2);
                        const double ms = double(q::fp16_to_fp32(m)) * q::fp16_to_fp32(ab[b].s);
                        exact += ms;
                        mag += std::fabs(ms);
                    }
                    q::dequantize_row(wt, w0.data(), wd.data(), c.n);
                } else {
                    q::dequantize_row(wt, w.data(), wd.data(), c.n);
                }
                q::dequantize_row(at, a.data(), ad.data(), c.n);
                for (size_t i = 0; i < c.n; ++i) {
                    exact += double(wd[i]) * ad[i];
                    mag += std::fabs(double(wd[i]) * ad[i]);
                }
                const double tol = 1e-5 * mag;
                const float got = fn(w.data(), a.data(), c.n);
                const float got_ref = ref(w.data(), a.data(), c.n);
                const std::string what = name(wt) + " n=" + std::to_string(c.n) + " wscale=" +
                                         std::to_string(c.wscale) + " ascale=" + std::to_string(c.ascale);
                EXPECT_NEAR(got, exact, tol) << what;
                EXPECT_NEAR(got_ref, exact, tol) << what << " (scalar)";
                EXPECT_NEAR(got, got_ref, tol) << what << " (SIMD vs scalar)";
                EXPECT_EQ(got, cpu::vec_dot(wt, w.data(), a.data(), c.n)) << what;
                EXPECT_EQ(got_ref, cpu::ref::vec_dot(wt, w.data(), a.data(), c.n)) << what;
            }
        }
    }
}

// Tile kernels give every pair exactly what vec_dot gives it.
TEST(QuantVecDot, TilesEqualPairwise) {
    std::mt19937 rng(11);
    for (TensorType wt : kWeightTypes) {
        const cpu::VecDotTile tile = cpu::vec_dot_tile(wt);
        if (!tile.fn) continue;
        const TensorType at = cpu::vec_dot_type(wt);
        const size_t n = 4096;
        const size_t wrb = zinc::gguf::row_bytes(wt, n), arb = zinc::gguf::row_bytes(at, n);
        std::vector<uint8_t> w(wrb * tile.rows_w), a(arb * tile.rows_a);
        for (int i = 0; i < tile.rows_w; ++i)
            q::quantize_row(wt, random_row(rng, n, 0.1f, i == 0).data(), w.data() + i * wrb, n);
        for (int j = 0; j < tile.rows_a; ++j)
            cpu::quantize_activation(at, random_row(rng, n, 2.0f, j == 1).data(), a.data() + j * arb, n);
        const size_t stride = tile.rows_w + 3;
        std::vector<float> out(stride * tile.rows_a, -1.0f);
        tile.fn(w.data(), wrb, a.data(), arb, n, out.data(), stride);
        for (int i = 0; i < tile.rows_w; ++i)
            for (int j = 0; j < tile.rows_a; ++j)
                EXPECT_EQ(out[j * stride + i], cpu::vec_dot(wt, w.data() + i * wrb, a.data() + j * arb, n))
                    << name(wt) << " " << i << "," << j;
    }
}

// Widths that are not a multiple of the SIMD step exercise the tails of the float kernels.
TEST(QuantVecDot, FloatKernelTails) {
    std::mt19937 rng(5);
    for (TensorType wt : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
        for (size_t n : {1u, 7u, 8u, 31u, 33u, 100u}) {
            const auto wf = random_row(rng, n, 1.0f, false);
            const auto af = random_row(rng, n, 1.0f, false);
            std::vector<uint8_t> w(n * 4), a(n * 4);
            cpu::quantize_activation(wt, wf.data(), w.data(), n);  // same conversion as the weight storage
            cpu::quantize_activation(wt, af.data(), a.data(), n);
            std::vector<float> wd(n), ad(n);
            q::dequantize_row(wt, w.data(), wd.data(), n);
            q::dequantize_row(wt, a.data(), ad.data(), n);
            double exact = 0, mag = 0;
            for (size_t i = 0; i < n; ++i) {
                exact += double(wd[i]) * ad[i];
                mag += std::fabs(double(wd[i]) * ad[i]);
            }
            EXPECT_NEAR(cpu::vec_dot(wt, w.data(), a.data(), n), exact, 1e-5 * mag + 1e-30) << name(wt) << " n=" << n;
        }
    }
}

}  // namespace
