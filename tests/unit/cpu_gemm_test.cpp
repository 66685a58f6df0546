// The CPU backend's repack and gemm: packed weight tiles and the matmul kernels of prefill and decode
// (docs/formats.md §3.10).
// The packing must be lossless, the activation arrays must be quantize_activation's bytes, the scalar kernels must be
// the dot product (as vec_dot, up to float rounding), and every SIMD kernel the processor has must give the scalar
// kernels' values bit for bit, for any number of activation rows at once.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gguf/tensor_type.h"
#include "quant/activation.h"
#include "quant/blocks.h"
#include "backend/cpu/cpu_features.h"
#include "quant/dequantize.h"
#include "quant/float_convert.h"
#include "backend/cpu/gemm.h"
#include "quant/quantize.h"
#include "backend/cpu/repack.h"
#include "backend/cpu/vec_dot.h"

namespace {

using zinc::gguf::TensorType;
namespace q = zinc::quant;
namespace cpu = zinc::backend::cpu;

const TensorType kPacked[] = {TensorType::Q4_0, TensorType::IQ4_NL, TensorType::MXFP4, TensorType::Q8_0,
                              TensorType::Q2_K, TensorType::Q3_K,   TensorType::Q4_K,  TensorType::Q5_K,
                              TensorType::Q6_K, TensorType::IQ4_XS};

std::string name(TensorType t) { return std::string(zinc::gguf::type_name(t)); }

std::vector<float> random_values(std::mt19937& rng, size_t n, float scale) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng) * scale;
    for (size_t i = 0; i < n; i += 61) v[i] *= 12.0f;  // outliers, so that blocks differ in scale
    return v;
}

// `rows` rows of `cols` random values quantized to t by the reference quantizers.
std::vector<uint8_t> random_weights(std::mt19937& rng, TensorType t, int64_t rows, int64_t cols) {
    const size_t rb = zinc::gguf::row_bytes(t, static_cast<size_t>(cols));
    std::vector<uint8_t> w(rb * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
        q::quantize_row(t, random_values(rng, static_cast<size_t>(cols), 0.05f * float(1 + r % 3)).data(),
                        w.data() + static_cast<size_t>(r) * rb, static_cast<size_t>(cols));
    return w;
}

std::vector<cpu::Isa> simd_isas() {
    std::vector<cpu::Isa> v;
    for (cpu::Isa isa : {cpu::Isa::avx2, cpu::Isa::avx512})
        if (isa <= cpu::cpu_isa_supported()) v.push_back(isa);
    return v;
}

TEST(QuantGemm, RepackIsLossless) {
    std::mt19937 rng(3);
    for (TensorType t : kPacked) {
        const int64_t rows = 24, cols = 1024;
        EXPECT_TRUE(cpu::can_repack(t)) << name(t);
        EXPECT_TRUE(cpu::can_repack(t, rows, cols)) << name(t);
        EXPECT_FALSE(cpu::can_repack(t, rows + 4, cols)) << name(t);
        const auto w = random_weights(rng, t, rows, cols);
        std::vector<uint8_t> packed(w.size(), 0xAA);
        cpu::repack_rows(t, w.data(), packed.data(), cols, 0, 8);
        cpu::repack_rows(t, w.data(), packed.data(), cols, 8, rows);
        const size_t rb = zinc::gguf::row_bytes(t, cols);
        std::vector<uint8_t> row(rb);
        for (int64_t r = 0; r < rows; ++r) {
            cpu::unpack_row(t, packed.data(), cols, r, row.data());
            EXPECT_EQ(0, std::memcmp(row.data(), w.data() + r * rb, rb)) << name(t) << " row " << r;
        }
        // The same bytes, reordered: the multiset of byte values is kept.
        std::vector<int> hist_w(256), hist_p(256);
        for (size_t i = 0; i < w.size(); ++i) ++hist_w[w[i]], ++hist_p[packed[i]];
        EXPECT_EQ(hist_w, hist_p) << name(t);
    }
    for (TensorType t : {TensorType::Q4_1, TensorType::Q5_0, TensorType::F32}) EXPECT_FALSE(cpu::can_repack(t));
}

TEST(QuantGemm, ActivationsAreQuantizeActivationsBytes) {
    std::mt19937 rng(4);
    for (TensorType w : {TensorType::Q4_0, TensorType::Q4_K}) {
        const TensorType at = cpu::vec_dot_type(w);
        const int64_t rows = 5, cols = 2048;
        const auto x = random_values(rng, static_cast<size_t>(rows * cols), 2.0f);
        cpu::PackedActs a;
        a.reset(w, rows, cols);
        a.quantize(x.data(), 0, 2);
        a.quantize(x.data(), 2, rows);
        std::vector<uint8_t> ref(zinc::gguf::row_bytes(at, cols));
        for (int64_t t = 0; t < rows; ++t) {
            cpu::quantize_activation(at, x.data() + t * cols, ref.data(), cols);
            if (at == TensorType::Q8_K) {
                const auto* b = reinterpret_cast<const q::BlockQ8_K*>(ref.data());
                for (int64_t k = 0; k < cols / 256; ++k) {
                    EXPECT_EQ(0, std::memcmp(a.q(t) + 256 * k, b[k].qs, 256));
                    EXPECT_EQ(a.d(t)[k], b[k].d);
                    for (int i = 0; i < 16; ++i) EXPECT_EQ(a.sum16(t)[16 * k + i], b[k].bsums[i]);
                    for (int i = 0; i < 8; ++i)
                        EXPECT_EQ(a.sum32(t)[8 * k + i], b[k].bsums[2 * i] + b[k].bsums[2 * i + 1]);
                }
            } else {
                const auto* b = reinterpret_cast<const q::BlockQ8_0*>(ref.data());
                for (int64_t k = 0; k < cols / 32; ++k) {
                    EXPECT_EQ(0, std::memcmp(a.q(t) + 32 * k, b[k].qs, 32));
                    EXPECT_EQ(a.d(t)[k], q::fp16_to_fp32(b[k].d));
                    int s = 0;
                    for (int i = 0; i < 32; ++i) s += b[k].qs[i];
                    EXPECT_EQ(a.sum32(t)[k], s);
                    for (int g = 0; g < 8; ++g) {
                        const int s4 = b[k].qs[4 * g] + b[k].qs[4 * g + 1] + b[k].qs[4 * g + 2] + b[k].qs[4 * g + 3];
                        EXPECT_EQ(a.offset4(t)[8 * k + g], -128 * s4);
                    }
                }
            }
        }
    }
}

struct Product {
    std::vector<uint8_t> w, packed;
    std::vector<float> x;
    cpu::PackedActs a;
    int64_t rows, cols, n;
};

Product make_product(std::mt19937& rng, TensorType t, int64_t rows, int64_t cols, int64_t n) {
    Product p;
    p.rows = rows, p.cols = cols, p.n = n;
    p.w = random_weights(rng, t, rows, cols);
    p.packed.resize(p.w.size());
    cpu::repack_rows(t, p.w.data(), p.packed.data(), cols, 0, rows);
    p.x = random_values(rng, static_cast<size_t>(n * cols), 1.5f);
    p.a.reset(t, n, cols);
    p.a.quantize(p.x.data(), 0, n);
    return p;
}

std::vector<float> run(cpu::Isa isa, TensorType t, const Product& p, cpu::ActRows rows) {
    std::vector<float> out(static_cast<size_t>(rows.n * p.rows), -1.0f);
    cpu::gemm_packed(isa, t, p.packed.data(), p.cols, 0, p.rows / 8, p.a, rows, out.data(), p.rows);
    return out;
}

// The scalar kernels compute the dot product: against vec_dot's scalar reference on the same quantized rows, within
// float rounding of the sum of the terms' magnitudes (bounded through the dequantized values).
TEST(QuantGemm, ScalarKernelsAreTheDotProduct) {
    std::mt19937 rng(5);
    for (TensorType t : kPacked) {
        for (int64_t cols : {256, 3072}) {
            const Product p = make_product(rng, t, 16, cols, 3);
            const auto got = run(cpu::Isa::scalar, t, p, {nullptr, 0, p.n});
            const TensorType at = cpu::vec_dot_type(t);
            const size_t wrb = zinc::gguf::row_bytes(t, cols), arb = zinc::gguf::row_bytes(at, cols);
            std::vector<uint8_t> arow(arb);
            std::vector<float> wd(cols), ad(cols);
            for (int64_t j = 0; j < p.n; ++j) {
                cpu::quantize_activation(at, p.x.data() + j * cols, arow.data(), cols);
                q::dequantize_row(at, arow.data(), ad.data(), cols);
                for (int64_t o = 0; o < p.rows; ++o) {
                    const uint8_t* wr = p.w.data() + o * wrb;
                    q::dequantize_row(t, wr, wd.data(), cols);
                    double mag = 0;
                    for (int64_t i = 0; i < cols; ++i) mag += std::fabs(double(wd[i]) * ad[i]);
                    const float want = cpu::ref::vec_dot(t, wr, arow.data(), cols);
                    EXPECT_NEAR(got[j * p.rows + o], want, 1e-5 * mag) << name(t) << " cols " << cols << " row " << o;
                }
            }
        }
    }
}

// Every SIMD kernel equals the scalar one bit for bit, with 1 to 9 activation rows at once (each kernel size and the
// remainders), in order or gathered through a row list.
TEST(QuantGemm, SimdKernelsEqualScalarBitForBit) {
    std::mt19937 rng(6);
    for (cpu::Isa isa : simd_isas()) {
        for (TensorType t : kPacked) {
            for (int64_t cols : {1024, 3072}) {
                const Product p = make_product(rng, t, 24, cols, 9);
                const auto want = run(cpu::Isa::scalar, t, p, {nullptr, 0, p.n});
                for (int64_t n = 1; n <= p.n; ++n) {
                    const auto got = run(isa, t, p, {nullptr, 0, n});
                    for (int64_t i = 0; i < n * p.rows; ++i)
                        ASSERT_EQ(got[i], want[i]) << cpu::isa_name(isa) << " " << name(t) << " cols " << cols << " n "
                                                   << n << " at " << i;
                }
                const int32_t list[] = {8, 2, 2, 5, 0, 7};
                const auto got = run(isa, t, p, {list, 1, 5});
                for (int64_t j = 0; j < 5; ++j)
                    for (int64_t o = 0; o < p.rows; ++o)
                        ASSERT_EQ(got[j * p.rows + o], want[list[1 + j] * p.rows + o])
                            << cpu::isa_name(isa) << " " << name(t) << " gathered row " << j;
            }
        }
    }
}

// Q8_0 keeps the lanes of the AVX2 vec_dot kernel, so that prefill gives what decode and llama.cpp's CPU backend give.
TEST(QuantGemm, Q8_0EqualsVecDot) {
    if (cpu::cpu_isa() < cpu::Isa::avx2) GTEST_SKIP() << "vec_dot runs its scalar reference on this processor";
    std::mt19937 rng(7);
    const Product p = make_product(rng, TensorType::Q8_0, 16, 2048, 5);
    const size_t wrb = zinc::gguf::row_bytes(TensorType::Q8_0, p.cols);
    std::vector<uint8_t> arow(zinc::gguf::row_bytes(TensorType::Q8_0, p.cols));
    for (cpu::Isa isa : {cpu::Isa::scalar, cpu::Isa::avx2, cpu::Isa::avx512}) {
        if (isa > cpu::cpu_isa_supported()) continue;
        const auto got = run(isa, TensorType::Q8_0, p, {nullptr, 0, p.n});
        for (int64_t j = 0; j < p.n; ++j) {
            cpu::quantize_activation(TensorType::Q8_0, p.x.data() + j * p.cols, arow.data(), p.cols);
            for (int64_t o = 0; o < p.rows; ++o)
                EXPECT_EQ(got[j * p.rows + o], cpu::vec_dot(TensorType::Q8_0, p.w.data() + o * wrb, arow.data(), p.cols))
                    << cpu::isa_name(isa) << " " << j << "," << o;
        }
    }
}

}  // namespace
