// zinc::quant API behaviour and the known-answer vectors of docs/formats.md §2.7.15.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf/tensor_type.h"
#include "quant/activation.h"
#include "quant/blocks.h"
#include "quant/dequantize.h"
#include "quant/float_convert.h"
#include "quant/quantize.h"

namespace {

using zinc::gguf::TensorType;
namespace q = zinc::quant;

TEST(QuantApi, SupportedTypes) {
    for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q4_0, TensorType::Q4_1,
                         TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0, TensorType::Q8_1, TensorType::Q2_K,
                         TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::Q8_K,
                         TensorType::IQ4_NL, TensorType::IQ4_XS, TensorType::MXFP4}) {
        EXPECT_TRUE(q::can_dequantize(t)) << zinc::gguf::type_name(t);
        EXPECT_TRUE(q::can_quantize(t)) << zinc::gguf::type_name(t);
    }
    for (TensorType t : {TensorType::IQ2_XXS, TensorType::IQ1_S, TensorType::TQ1_0, TensorType::NVFP4,
                         TensorType::Q1_0, TensorType::I32, TensorType::F64}) {
        EXPECT_FALSE(q::can_dequantize(t)) << zinc::gguf::type_name(t);
        EXPECT_FALSE(q::can_quantize(t)) << zinc::gguf::type_name(t);
    }
}

TEST(QuantApi, RejectsUnsupportedTypesAndPartialBlocks) {
    std::vector<float> x(512, 1.0f), y(512);
    std::vector<uint8_t> buf(4096);
    EXPECT_THROW(q::dequantize_row(TensorType::IQ2_XXS, buf.data(), y.data(), 256), std::invalid_argument);
    EXPECT_THROW(q::quantize_row(TensorType::IQ2_XXS, x.data(), buf.data(), 256), std::invalid_argument);
    EXPECT_THROW(q::dequantize_row(TensorType::Q4_K, buf.data(), y.data(), 128), std::invalid_argument);
    EXPECT_THROW(q::quantize_row(TensorType::Q4_0, x.data(), buf.data(), 33), std::invalid_argument);
    EXPECT_THROW(q::quantize_row_q8_1(x.data(), buf.data(), 48), std::invalid_argument);
    EXPECT_THROW(q::quantize_row_q8_K(x.data(), buf.data(), 128), std::invalid_argument);
    EXPECT_NO_THROW(q::dequantize_row(TensorType::Q4_K, buf.data(), y.data(), 0));
}

TEST(QuantApi, ScalarConversions) {
    EXPECT_EQ(q::fp16_to_fp32(0x3C00), 1.0f);
    EXPECT_EQ(q::fp16_to_fp32(0x7BFF), 65504.0f);
    EXPECT_EQ(q::fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(std::bit_cast<uint32_t>(q::fp16_to_fp32(0x8000)), 0x80000000u);
    EXPECT_EQ(q::fp32_to_fp16(65519.0f), 0x7BFF);
    EXPECT_EQ(q::fp32_to_fp16(65520.0f), 0x7C00);
    EXPECT_EQ(q::fp32_to_fp16(std::nanf("")), 0x7E00);
    EXPECT_EQ(q::fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even zero
    EXPECT_EQ(q::fp32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
    EXPECT_EQ(q::fp32_to_bf16(1.0f), 0x3F80);
    EXPECT_EQ(q::fp32_to_bf16(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie to even
    EXPECT_EQ(q::fp32_to_bf16(std::bit_cast<float>(0x3F818000u)), 0x3F82);
    EXPECT_EQ(q::fp32_to_bf16(std::bit_cast<float>(0x7F800001u)), 0x7FC0);  // signalling NaN made quiet
    EXPECT_EQ(q::bf16_to_fp32(0xC000), -2.0f);
    EXPECT_EQ(q::e8m0_to_fp32(127), 1.0f);
    EXPECT_EQ(q::e8m0_to_fp32(0), std::ldexp(1.0f, -127));
    EXPECT_EQ(q::e8m0_to_fp32_half(0), std::ldexp(1.0f, -128));
    EXPECT_EQ(q::e8m0_to_fp32_half(1), std::ldexp(1.0f, -127));
    EXPECT_EQ(q::e8m0_to_fp32_half(130), 4.0f);
}

TEST(QuantApi, Q8_1DequantizesLikeQ8_0) {
    q::BlockQ8_1 b{};
    b.d = q::fp32_to_fp16(0.5f);
    b.s = q::fp32_to_fp16(123.0f);  // ignored when decoding
    for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 128);
    float y[32];
    q::dequantize_row(TensorType::Q8_1, &b, y, 32);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], static_cast<float>(j * 8 - 128) * 0.5f);
}

TEST(QuantApi, RoundTripErrorIsSmall) {
    std::vector<float> x(1024);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
    const struct {
        TensorType t;
        float tol;
    } cases[] = {{TensorType::F16, 2e-3f},   {TensorType::BF16, 2e-2f},  {TensorType::Q8_0, 3e-2f},
                 {TensorType::Q4_0, 0.5f},   {TensorType::Q4_1, 0.5f},   {TensorType::Q5_0, 0.25f},
                 {TensorType::Q5_1, 0.25f},  {TensorType::Q2_K, 1.5f},   {TensorType::Q3_K, 1.0f},
                 {TensorType::Q4_K, 0.5f},   {TensorType::Q5_K, 0.25f},  {TensorType::Q6_K, 0.1f},
                 {TensorType::IQ4_NL, 0.5f}, {TensorType::IQ4_XS, 0.5f}, {TensorType::MXFP4, 0.75f},
                 {TensorType::Q8_1, 3e-2f},  {TensorType::Q8_K, 3e-2f}};  // |x| <= 3
    for (const auto& c : cases) {
        std::vector<uint8_t> buf(zinc::gguf::row_bytes(c.t, x.size()));
        std::vector<float> y(x.size());
        q::quantize_row(c.t, x.data(), buf.data(), x.size());
        q::dequantize_row(c.t, buf.data(), y.data(), y.size());
        float worst = 0.0f;
        for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
        EXPECT_LT(worst, c.tol) << zinc::gguf::type_name(c.t);
    }
}

// docs/formats.md §2.7.15: 512 LCG values quantized as 2 rows x 256, hashed with 64-bit FNV-1a.
std::vector<float> known_answer_input() {
    std::vector<float> x(512);
    uint32_t s = 12345;
    for (float& v : x) {
        s = s * 1664525u + 1013904223u;
        v = static_cast<float>(static_cast<int32_t>(s) >> 8) * std::ldexp(1.0f, -20);
    }
    return x;
}

uint64_t fnv1a(const uint8_t* p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

TEST(QuantKnownAnswer, InputMatchesDocument) {
    const std::vector<float> x = known_answer_input();
    EXPECT_EQ(x[0], 0.326442719f);
    EXPECT_EQ(x[2], -7.30950737f);
    EXPECT_EQ(fnv1a(reinterpret_cast<const uint8_t*>(x.data()), x.size() * 4), 0x5c9541480d009c0eull);
}

TEST(QuantKnownAnswer, Hashes) {
    const std::vector<float> x = known_answer_input();
    const struct {
        TensorType t;
        size_t bytes;
        uint64_t fnv;
    } cases[] = {
        {TensorType::F16, 1024, 0xeaf42e0fb5f4a606ull},   {TensorType::BF16, 1024, 0x5daecd91a3f78126ull},
        {TensorType::Q4_0, 288, 0x2a5951bcff7583feull},   {TensorType::Q4_1, 320, 0x2334165a3cf3828eull},
        {TensorType::Q5_0, 352, 0xf84ffb9f8c9d9808ull},   {TensorType::Q5_1, 384, 0x1dd9c9585c0697b1ull},
        {TensorType::Q8_0, 544, 0x2c94894ce942cd57ull},   {TensorType::Q2_K, 168, 0x63d6e8e9b773b0c1ull},
        {TensorType::Q3_K, 220, 0x49d88149d3556dd6ull},   {TensorType::Q4_K, 288, 0x2fd42d80907144c3ull},
        {TensorType::Q5_K, 352, 0xd7482a5bfe7de1f1ull},   {TensorType::Q6_K, 420, 0x460c737d7512412eull},
        {TensorType::IQ4_NL, 288, 0x61f74aac6528fa53ull}, {TensorType::IQ4_XS, 272, 0x3547ddd6ec689303ull},
        {TensorType::MXFP4, 272, 0xc74249cd3e20eb29ull},  {TensorType::Q8_1, 576, 0x704342b0a37009a1ull},
        {TensorType::Q8_K, 584, 0x7711acefa63ac05cull},
    };
    for (const auto& c : cases) {
        const size_t row = zinc::gguf::row_bytes(c.t, 256);
        ASSERT_EQ(2 * row, c.bytes) << zinc::gguf::type_name(c.t);
        std::vector<uint8_t> out(2 * row);
        q::quantize_row(c.t, x.data(), out.data(), 256);
        q::quantize_row(c.t, x.data() + 256, out.data() + row, 256);
        EXPECT_EQ(fnv1a(out.data(), out.size()), c.fnv) << zinc::gguf::type_name(c.t);
    }
}

}  // namespace
