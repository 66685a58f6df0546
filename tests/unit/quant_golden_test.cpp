// Compares zinc::quant against golden outputs of ggml's reference code (tests/data/quant, see its README.md).
// Dequantized values are compared as bit patterns, quantized rows byte for byte; a failure names the first
// mismatching block.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gguf/tensor_type.h"
#include "quant/activation.h"
#include "quant/dequantize.h"
#include "quant/float_convert.h"
#include "quant/quantize.h"

namespace {

using zinc::gguf::TensorType;

constexpr uint32_t kKindDequant = 1;
constexpr uint32_t kKindQuant = 2;
constexpr uint32_t kKindConvert = 3;
constexpr uint32_t kKindQuantInput = 4;

struct Golden {
    uint32_t kind = 0, type = 0, count = 0, elems = 0, n_special = 0;
    std::vector<uint8_t> payload;  // everything after the 32-byte header
};

uint32_t read_le32(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
           static_cast<uint32_t>(p[3]) << 24;
}

// Loads tests/data/quant/<name>; on failure records a fatal failure and returns an empty Golden.
Golden load(const std::string& name, uint32_t kind) {
    const std::string path = std::string(ZINC_TEST_DATA_DIR) + "/quant/" + name;
    std::ifstream f(path, std::ios::binary);
    Golden g;
    if (!f) {
        ADD_FAILURE() << "cannot open " << path;
        return g;
    }
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (bytes.size() < 32 || std::memcmp(bytes.data(), "ZQGOLD1", 8) != 0) {
        ADD_FAILURE() << path << ": not a golden file";
        return g;
    }
    g.kind = read_le32(&bytes[8]);
    g.type = read_le32(&bytes[12]);
    g.count = read_le32(&bytes[16]);
    g.elems = read_le32(&bytes[20]);
    g.n_special = read_le32(&bytes[24]);
    g.payload.assign(bytes.begin() + 32, bytes.end());
    EXPECT_EQ(g.kind, kind) << path;
    return g;
}

std::vector<uint32_t> float_bits(const float* v, size_t n) {
    std::vector<uint32_t> out(n);
    std::memcpy(out.data(), v, n * 4);
    return out;
}

// Bit-exact for ordinary blocks; in the trailing special blocks (Inf/NaN scales) a NaN matches any NaN.
void check_dequant(const std::string& file_name, TensorType t) {
    const Golden g = load("dequant_" + file_name + ".bin", kKindDequant);
    if (g.count == 0) return;
    ASSERT_EQ(g.type, static_cast<uint32_t>(t));
    const auto& tt = zinc::gguf::traits(t);
    ASSERT_EQ(g.elems, tt.block_elems);
    const size_t n = static_cast<size_t>(g.count) * g.elems;
    const size_t in_bytes = zinc::gguf::row_bytes(t, n);
    ASSERT_EQ(g.payload.size(), in_bytes + n * 4) << file_name;
    std::vector<float> expected(n), actual(n);
    std::memcpy(expected.data(), g.payload.data() + in_bytes, n * 4);
    ASSERT_TRUE(zinc::quant::can_dequantize(t));
    zinc::quant::dequantize_row(t, g.payload.data(), actual.data(), n);
    const auto eb = float_bits(expected.data(), n), ab = float_bits(actual.data(), n);
    const uint32_t first_special = g.count - g.n_special;
    for (size_t i = 0; i < n; ++i) {
        const size_t block = i / g.elems;
        bool same = eb[i] == ab[i];
        if (!same && block >= first_special) same = std::isnan(expected[i]) && std::isnan(actual[i]);
        if (!same) {
            FAIL() << file_name << ": first mismatch in block " << block << " of " << g.count << " (element "
                   << i % g.elems << "): expected bits 0x" << std::hex << eb[i] << " (" << expected[i]
                   << "), got 0x" << ab[i] << " (" << actual[i] << ")";
        }
    }
}

TEST(QuantGoldenDequant, F16AllBitPatterns) { check_dequant("f16", TensorType::F16); }
TEST(QuantGoldenDequant, BF16AllBitPatterns) { check_dequant("bf16", TensorType::BF16); }
TEST(QuantGoldenDequant, Q4_0) { check_dequant("q4_0", TensorType::Q4_0); }
TEST(QuantGoldenDequant, Q4_1) { check_dequant("q4_1", TensorType::Q4_1); }
TEST(QuantGoldenDequant, Q5_0) { check_dequant("q5_0", TensorType::Q5_0); }
TEST(QuantGoldenDequant, Q5_1) { check_dequant("q5_1", TensorType::Q5_1); }
TEST(QuantGoldenDequant, Q8_0) { check_dequant("q8_0", TensorType::Q8_0); }
TEST(QuantGoldenDequant, Q2_K) { check_dequant("q2_K", TensorType::Q2_K); }
TEST(QuantGoldenDequant, Q3_K) { check_dequant("q3_K", TensorType::Q3_K); }
TEST(QuantGoldenDequant, Q4_K) { check_dequant("q4_K", TensorType::Q4_K); }
TEST(QuantGoldenDequant, Q5_K) { check_dequant("q5_K", TensorType::Q5_K); }
TEST(QuantGoldenDequant, Q6_K) { check_dequant("q6_K", TensorType::Q6_K); }
TEST(QuantGoldenDequant, Q8_K) { check_dequant("q8_K", TensorType::Q8_K); }
TEST(QuantGoldenDequant, IQ4_NL) { check_dequant("iq4_nl", TensorType::IQ4_NL); }
TEST(QuantGoldenDequant, IQ4_XS) { check_dequant("iq4_xs", TensorType::IQ4_XS); }
TEST(QuantGoldenDequant, MXFP4) { check_dequant("mxfp4", TensorType::MXFP4); }

TEST(QuantGoldenConvert, Fp32ToFp16AndBf16) {
    const Golden g = load("convert_f32.bin", kKindConvert);
    if (g.count == 0) return;
    const size_t n = g.count;
    ASSERT_EQ(g.payload.size(), n * 8);
    for (size_t i = 0; i < n; ++i) {
        const uint8_t* p = g.payload.data();
        const uint32_t bits = read_le32(p + 4 * i);
        const uint16_t f16 = static_cast<uint16_t>(p[4 * n + 2 * i] | p[4 * n + 2 * i + 1] << 8);
        const uint16_t bf16 = static_cast<uint16_t>(p[6 * n + 2 * i] | p[6 * n + 2 * i + 1] << 8);
        float f;
        std::memcpy(&f, &bits, 4);
        ASSERT_EQ(zinc::quant::fp32_to_fp16(f), f16) << "f32 bits 0x" << std::hex << bits;
        ASSERT_EQ(zinc::quant::fp32_to_bf16(f), bf16) << "f32 bits 0x" << std::hex << bits;
    }
}

const std::vector<float>& quant_inputs(uint32_t& rows, uint32_t& row_len) {
    static Golden g = load("quant_inputs.bin", kKindQuantInput);
    static std::vector<float> x = [] {
        std::vector<float> v(g.payload.size() / 4);
        std::memcpy(v.data(), g.payload.data(), v.size() * 4);
        return v;
    }();
    rows = g.count;
    row_len = g.elems;
    return x;
}

using RowQuantizer = void (*)(TensorType, const float*, void*, size_t);

void check_quant(const std::string& file_name, TensorType t, RowQuantizer quantize) {
    uint32_t rows = 0, row_len = 0;
    const std::vector<float>& x = quant_inputs(rows, row_len);
    ASSERT_GT(rows, 0u);
    ASSERT_EQ(x.size(), static_cast<size_t>(rows) * row_len);
    const Golden g = load("quantize_" + file_name + ".bin", kKindQuant);
    if (g.count == 0) return;
    ASSERT_EQ(g.type, static_cast<uint32_t>(t));
    ASSERT_EQ(g.count, rows);
    ASSERT_EQ(g.elems, row_len);
    const size_t row_size = zinc::gguf::row_bytes(t, row_len);
    ASSERT_EQ(g.payload.size(), row_size * rows);
    const auto& tt = zinc::gguf::traits(t);
    std::vector<uint8_t> out(row_size);
    for (uint32_t r = 0; r < rows; ++r) {
        std::memset(out.data(), 0xAB, out.size());
        quantize(t, x.data() + static_cast<size_t>(r) * row_len, out.data(), row_len);
        const uint8_t* expected = g.payload.data() + r * row_size;
        for (size_t b = 0; b < row_size; ++b) {
            if (out[b] != expected[b]) {
                FAIL() << file_name << ": row " << r << ", first mismatching block " << b / tt.block_bytes
                       << " (byte " << b % tt.block_bytes << "): expected 0x" << std::hex << int(expected[b])
                       << ", got 0x" << int(out[b]);
            }
        }
    }
}

void via_quantize_row(TensorType t, const float* x, void* y, size_t n) { zinc::quant::quantize_row(t, x, y, n); }
void via_q8_1(TensorType, const float* x, void* y, size_t n) { zinc::quant::quantize_row_q8_1(x, y, n); }
void via_q8_K(TensorType, const float* x, void* y, size_t n) { zinc::quant::quantize_row_q8_K(x, y, n); }

TEST(QuantGoldenQuantize, F16) { check_quant("f16", TensorType::F16, via_quantize_row); }
TEST(QuantGoldenQuantize, BF16) { check_quant("bf16", TensorType::BF16, via_quantize_row); }
TEST(QuantGoldenQuantize, Q4_0) { check_quant("q4_0", TensorType::Q4_0, via_quantize_row); }
TEST(QuantGoldenQuantize, Q4_1) { check_quant("q4_1", TensorType::Q4_1, via_quantize_row); }
TEST(QuantGoldenQuantize, Q5_0) { check_quant("q5_0", TensorType::Q5_0, via_quantize_row); }
TEST(QuantGoldenQuantize, Q5_1) { check_quant("q5_1", TensorType::Q5_1, via_quantize_row); }
TEST(QuantGoldenQuantize, Q8_0) { check_quant("q8_0", TensorType::Q8_0, via_quantize_row); }
TEST(QuantGoldenQuantize, Q2_K) { check_quant("q2_K", TensorType::Q2_K, via_quantize_row); }
TEST(QuantGoldenQuantize, Q3_K) { check_quant("q3_K", TensorType::Q3_K, via_quantize_row); }
TEST(QuantGoldenQuantize, Q4_K) { check_quant("q4_K", TensorType::Q4_K, via_quantize_row); }
TEST(QuantGoldenQuantize, Q5_K) { check_quant("q5_K", TensorType::Q5_K, via_quantize_row); }
TEST(QuantGoldenQuantize, Q6_K) { check_quant("q6_K", TensorType::Q6_K, via_quantize_row); }
TEST(QuantGoldenQuantize, IQ4_NL) { check_quant("iq4_nl", TensorType::IQ4_NL, via_quantize_row); }
TEST(QuantGoldenQuantize, IQ4_XS) { check_quant("iq4_xs", TensorType::IQ4_XS, via_quantize_row); }
TEST(QuantGoldenQuantize, MXFP4) { check_quant("mxfp4", TensorType::MXFP4, via_quantize_row); }
TEST(QuantGoldenActivation, Q8_1) { check_quant("q8_1", TensorType::Q8_1, via_q8_1); }
TEST(QuantGoldenActivation, Q8_K) { check_quant("q8_K", TensorType::Q8_K, via_q8_K); }
TEST(QuantGoldenActivation, Q8_1ViaQuantizeRow) { check_quant("q8_1", TensorType::Q8_1, via_quantize_row); }
TEST(QuantGoldenActivation, Q8_KViaQuantizeRow) { check_quant("q8_K", TensorType::Q8_K, via_quantize_row); }

}  // namespace
