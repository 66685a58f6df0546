// The CUDA kernels' bit logic run on the host (no GPU needed): dequant8 (get_rows, tiled matmul) against the CPU's
// dequantize_row, and the dp4a chunk dot products of the decode matvec (with an emulated dp4a) against the f64 dot
// product of the dequantized weights with the dequantized Q8_1 activations. Weights are several rows back to back
// as in a tensor, so rows start at every alignment the GPU sees; the host loads throw where the GPU's would be
// misaligned. Blocks mix random bytes with constant patterns (all quants at their extremes), and scales are sane,
// extreme (f16 subnormals and +-65504, every E8M0 exponent) or left as raw random bits (inf, NaN).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/matvec_row.cuh"
#include "backend/cuda/vec_dot_q8_1.cuh"
#include "gguf/tensor_type.h"
#include "quant/blocks.h"
#include "quant/dequantize.h"
#include "quant/float_convert.h"

namespace {

using namespace zinc::backend::cuda;
using zinc::gguf::TensorType;

#define ZINC_SAME_ID(T) static_assert(int(TensorType::T) == k##T, "QType " #T " is not the ggml type id");
ZINC_SAME_ID(F32) ZINC_SAME_ID(F16) ZINC_SAME_ID(BF16) ZINC_SAME_ID(Q4_0) ZINC_SAME_ID(Q4_1) ZINC_SAME_ID(Q5_0)
ZINC_SAME_ID(Q5_1) ZINC_SAME_ID(Q8_0) ZINC_SAME_ID(Q2_K) ZINC_SAME_ID(Q3_K) ZINC_SAME_ID(Q4_K) ZINC_SAME_ID(Q5_K)
ZINC_SAME_ID(Q6_K) ZINC_SAME_ID(IQ4_NL) ZINC_SAME_ID(IQ4_XS) ZINC_SAME_ID(MXFP4)
#undef ZINC_SAME_ID

const TensorType kFloatTypes[] = {TensorType::F32, TensorType::F16, TensorType::BF16};
const TensorType kBlockTypes[] = {TensorType::Q4_0, TensorType::Q4_1,  TensorType::Q5_0,   TensorType::Q5_1,
                                  TensorType::Q8_0, TensorType::Q2_K,  TensorType::Q3_K,   TensorType::Q4_K,
                                  TensorType::Q5_K, TensorType::Q6_K,  TensorType::IQ4_NL, TensorType::IQ4_XS,
                                  TensorType::MXFP4};

std::string name(TensorType t) { return std::string(zinc::gguf::type_name(t)); }
int block_elems(TensorType t) { return int(zinc::gguf::traits(t).block_elems); }
int block_bytes(TensorType t) { return int(zinc::gguf::traits(t).block_bytes); }

// Row lengths of the real models (and odd block counts, so rows of 2-byte and 1-byte aligned blocks start at
// every alignment) that t's block divides.
std::vector<int64_t> test_cols(TensorType t) {
    std::vector<int64_t> v;
    for (int64_t c : {256, 704, 1440, 2048, 2304, 2816, 2880})
        if (c % block_elems(t) == 0) v.push_back(c);
    return v;
}

// Byte offsets of the f16 scale fields of one block.
std::vector<int> f16_fields(TensorType t) {
    switch (t) {
    case TensorType::Q4_0: case TensorType::Q5_0: case TensorType::Q8_0: case TensorType::IQ4_NL:
    case TensorType::IQ4_XS: return {0};
    case TensorType::Q4_1: case TensorType::Q5_1: case TensorType::Q4_K: case TensorType::Q5_K: return {0, 2};
    case TensorType::Q2_K: return {80, 82};
    case TensorType::Q3_K: return {108};
    case TensorType::Q6_K: return {208};
    default: return {};  // MXFP4: an E8M0 byte at 0
    }
}

enum class Scales {
    kSane,     // f16 in +-[0.002, 0.02] (positive d, dmin), E8M0 2^-12..2^-4
    kExtreme,  // finite extremes: zero, f16 subnormals, +-65504; E8M0 2^-88..2^92 (dp4a products stay normal)
    kAny,      // extremes with inf and NaN, every E8M0 byte (dequantization only)
    kRaw,      // the random bytes as they are
};

uint16_t pick_f16(Scales mode, bool positive, std::mt19937& rng) {
    static const uint16_t finite[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x8400,
                                      0x3C00, 0x7BFF, 0xFBFF, 0x1000, 0x5A00, 0x2E66};
    static const uint16_t special[] = {0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFFFF};
    if (mode == Scales::kSane) {
        const float v = std::uniform_real_distribution<float>(0.002f, 0.02f)(rng);
        return zinc::quant::fp32_to_fp16(positive || rng() % 2 ? v : -v);
    }
    if (mode == Scales::kAny && rng() % 4 == 0) return special[rng() % std::size(special)];
    if (rng() % 2) return finite[rng() % std::size(finite)];
    uint16_t h;
    do h = uint16_t(rng());
    while ((h & 0x7C00) == 0x7C00);  // any finite value
    return h;
}

// rows x cols of type t, rows back to back. Each block is random bytes or (one in three) a constant byte pattern,
// then gets scales by `mode`.
std::vector<uint8_t> random_rows(TensorType t, int64_t cols, int64_t rows, Scales mode, std::mt19937& rng) {
    const size_t rb = zinc::gguf::row_bytes(t, cols);
    std::vector<uint8_t> v(rb * rows);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    if (t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16) {
        for (int64_t i = 0; i < cols * rows; ++i) {
            const float x = u(rng);
            if (t == TensorType::F32) std::memcpy(v.data() + 4 * i, &x, 4);
            const uint16_t h = t == TensorType::F16 ? zinc::quant::fp32_to_fp16(x) : zinc::quant::fp32_to_bf16(x);
            if (t != TensorType::F32) std::memcpy(v.data() + 2 * i, &h, 2);
        }
        return v;
    }
    static const uint8_t patterns[] = {0x00, 0xFF, 0x55, 0xAA, 0x0F, 0xF0, 0x88, 0x77};
    const int bb = block_bytes(t);
    for (size_t b = 0; b < v.size() / bb; ++b) {
        uint8_t* blk = v.data() + b * bb;
        if (rng() % 3 == 0)
            std::memset(blk, patterns[rng() % std::size(patterns)], bb);
        else
            for (int i = 0; i < bb; ++i) blk[i] = uint8_t(rng());
        if (mode == Scales::kRaw) continue;
        const std::vector<int> fields = f16_fields(t);
        for (size_t f = 0; f < fields.size(); ++f) {
            // Q4_1/Q5_1 mins take either sign; the other scales are positive when sane.
            const bool positive = !(f == 1 && (t == TensorType::Q4_1 || t == TensorType::Q5_1));
            const uint16_t h = pick_f16(mode, positive, rng);
            std::memcpy(blk + fields[f], &h, 2);
        }
        if (t == TensorType::MXFP4)
            blk[0] = mode == Scales::kSane      ? uint8_t(116 + rng() % 9)
                     : mode == Scales::kExtreme ? uint8_t(40 + rng() % 181)
                                                : uint8_t(rng());
    }
    return v;
}

// Equal bits, or both NaN (payloads may differ between conversions).
bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 4) == 0; }

void check_dequant8(TensorType t, const std::vector<uint8_t>& w, int64_t cols, int64_t rows, const char* what) {
    const size_t rb = zinc::gguf::row_bytes(t, cols);
    std::vector<float> ref(cols), got(cols);
    for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* row = w.data() + r * rb;
        zinc::quant::dequantize_row(t, row, ref.data(), cols);
        std::fill(got.begin(), got.end(), -1.0f);
        for (int64_t i0 = 0; i0 < cols; i0 += 8) {
            float v[8];
            dequant8(int(t), row, cols, i0, v);
            for (int k = 0; k < 8 && i0 + k < cols; ++k) got[i0 + k] = v[k];
        }
        for (int64_t i = 0; i < cols; ++i)
            ASSERT_TRUE(same(got[i], ref[i])) << name(t) << " " << what << " cols " << cols << " row " << r
                                              << " element " << i << ": " << got[i] << " vs " << ref[i];
    }
}

TEST(CudaHostLogic, QTypesAreDequantizableAndBlockTypesHaveDp4a) {
    for (TensorType t : kFloatTypes) {
        EXPECT_TRUE(can_dequantize(int(t))) << name(t);
        EXPECT_FALSE(has_dp4a_matvec(int(t))) << name(t);
    }
    for (TensorType t : kBlockTypes) {
        EXPECT_TRUE(can_dequantize(int(t))) << name(t);
        EXPECT_TRUE(has_dp4a_matvec(int(t))) << name(t);
    }
    EXPECT_FALSE(can_dequantize(int(TensorType::IQ2_XXS)));
    EXPECT_FALSE(has_dp4a_matvec(int(TensorType::Q8_K)));
}

// The decode matvecs stage a row's bytes by segments of chunks: their byte counts must be the format's, a segment
// whole 16-byte copies, and a block's segments within the static shared memory of a block.
TEST(CudaHostLogic, StagedChunkBytesAreTheRowBytes) {
#define ZINC_CHECK_TYPE(T)                                                                                  \
    for (int64_t chunks : {8, 16, 128, 384})                                                                \
        EXPECT_EQ(chunks_bytes<T>(chunks), int64_t(zinc::gguf::row_bytes(TensorType(T), chunks * 32))) << #T; \
    EXPECT_EQ(kSegmentBytes<T> % 16, 0) << #T;                                                              \
    EXPECT_LE(kStageWarps * kStages * kSegmentBytes<T>, 48 * 1024) << #T;
    ZINC_DP4A_TYPES(ZINC_CHECK_TYPE)
#undef ZINC_CHECK_TYPE
}

TEST(CudaHostLogic, Dequant8EqualsDequantizeRow) {
    std::mt19937 rng(7);
    for (TensorType t : kFloatTypes)
        for (int64_t cols : {1001, 2048}) check_dequant8(t, random_rows(t, cols, 3, Scales::kSane, rng), cols, 3, "");
    for (TensorType t : kBlockTypes)
        for (int64_t cols : test_cols(t))
            for (auto [mode, what] : {std::pair{Scales::kSane, "sane"}, {Scales::kExtreme, "extreme"},
                                      {Scales::kAny, "inf/nan"}, {Scales::kRaw, "raw"}})
                check_dequant8(t, random_rows(t, cols, 3, mode, rng), cols, 3, what);
}

TEST(CudaHostLogic, Dequant8OfEveryF16AndBf16BitPattern) {
    std::vector<uint8_t> row(2 * 65536);
    for (uint32_t i = 0; i < 65536; ++i) {
        row[2 * i] = uint8_t(i);
        row[2 * i + 1] = uint8_t(i >> 8);
    }
    check_dequant8(TensorType::F16, row, 65536, 1, "all bits");
    check_dequant8(TensorType::BF16, row, 65536, 1, "all bits");
}

TEST(CudaHostLogic, E8m0HalfEqualsTheCpuConversion) {
    for (int e = 0; e < 256; ++e)
        EXPECT_TRUE(same(e8m0_half_to_f32(uint8_t(e)), zinc::quant::e8m0_to_fp32_half(uint8_t(e)))) << e;
}

TEST(CudaHostLogic, TableLookupsEqualTheValueTables) {
    const Table16 tables[] = {iq4nl_table(), fp4_table()};
    const int8_t* values[] = {zinc::quant::kValuesIQ4NL, zinc::quant::kValuesFP4};
    std::mt19937 rng(3);
    for (int n = 0; n < 2; ++n) {
        for (int i = 0; i < 16; ++i) EXPECT_EQ(table16_value(tables[n], i), values[n][i]) << n << " " << i;
        for (int it = 0; it < 20000; ++it) {
            const uint32_t q = it < 4 ? std::array<uint32_t, 4>{0, 0xFFFFFFFFu, 0x76543210u, 0xFEDCBA98u}[it] : rng();
            int lo, hi;
            table16_lookup(q, tables[n], lo, hi);
            for (int k = 0; k < 4; ++k) {
                ASSERT_EQ(int8_t(uint32_t(lo) >> (8 * k)), values[n][(q >> (8 * k)) & 15]) << std::hex << q;
                ASSERT_EQ(int8_t(uint32_t(hi) >> (8 * k)), values[n][(q >> (8 * k + 4)) & 15]) << std::hex << q;
            }
        }
    }
}

TEST(CudaHostLogic, MisalignedLoadsAreCaught) {
    alignas(8) uint8_t buf[16] = {};
    EXPECT_NO_THROW(load_b4(buf + 4, 1));
    EXPECT_THROW(load_b4(buf + 2, 0), std::logic_error);
    EXPECT_THROW(load_u16(buf + 3), std::logic_error);
}

TEST(CudaHostLogic, WordsAtAnyAlignmentAreLittleEndian) {
    uint8_t buf[24];
    for (int i = 0; i < 24; ++i) buf[i] = uint8_t(17 * i + 3);
    for (int off = 0; off < 4; ++off) {
        uint32_t w[4];
        load_words_any_alignment(buf + off, w);
        for (int k = 0; k < 4; ++k) {
            const uint8_t* b = buf + off + 4 * k;
            EXPECT_EQ(w[k], uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24)
                << "offset " << off << ", word " << k;
        }
    }
}

// ---------------------------------------------------------------- dp4a chunk dot products

float chunk_dot_of(TensorType t, const uint8_t* row, int64_t c, const BlockQ8_1f& y) {
    switch (t) {
#define ZINC_CASE(T) \
    case TensorType::T: return chunk_dot<k##T>(row, c, y);
        ZINC_CASE(Q4_0) ZINC_CASE(Q4_1) ZINC_CASE(Q5_0) ZINC_CASE(Q5_1) ZINC_CASE(Q8_0) ZINC_CASE(Q2_K)
        ZINC_CASE(Q3_K) ZINC_CASE(Q4_K) ZINC_CASE(Q5_K) ZINC_CASE(Q6_K) ZINC_CASE(IQ4_NL) ZINC_CASE(IQ4_XS)
        ZINC_CASE(MXFP4)
#undef ZINC_CASE
    default: ADD_FAILURE() << "no chunk_dot for " << name(t); return NAN;
    }
}

// Q8_1 activation blocks as the GPU quantizes them: d = amax/127, q = round(x/d), s = the sum of the inputs, the sums
// of each half of the quants. Block
// kinds: uniform in [-1, 1), scaled by 1e-6 or 1e4, all zero, one nonzero value, all at +-amax (every q = +-127).
std::vector<BlockQ8_1f> random_activations(int64_t cols, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<BlockQ8_1f> y(size_t(cols / 32));
    for (auto& b : y) {
        float x[32];
        const unsigned kind = rng() % 8;
        for (int i = 0; i < 32; ++i) {
            x[i] = u(rng);
            if (kind == 1) x[i] *= 1e-6f;
            if (kind == 2) x[i] *= 1e4f;
            if (kind == 3 || (kind == 4 && i != 7)) x[i] = 0.0f;
            if (kind == 5) x[i] = x[i] < 0 ? -0.75f : 0.75f;
        }
        float amax = 0, sum = 0;
        for (float v : x) {
            amax = std::max(amax, std::fabs(v));
            sum += v;
        }
        b.d = amax / 127.0f;
        b.s = sum;
        for (int i = 0; i < 32; ++i) b.qs[i] = int8_t(amax == 0 ? 0 : std::nearbyint(x[i] / b.d));
        int lo = 0, hi = 0;
        for (int i = 0; i < 16; ++i) {
            lo += b.qs[i];
            hi += b.qs[16 + i];
        }
        b.sum_lo = int16_t(lo);
        b.sum_hi = int16_t(hi);
        b.unused = 0;
    }
    return y;
}

// |offset| of element e of block blk where the dp4a product rounds a float offset term separately (w = D q - M
// for Q2_K/Q4_K/Q5_K, w = d q + m for Q4_1/Q5_1); 0 where the offset is subtracted in integers.
double offset_magnitude(TensorType t, const uint8_t* blk, int e) {
    auto f16 = [&](int off) {
        return std::fabs(double(zinc::quant::fp16_to_fp32(uint16_t(blk[off] | blk[off + 1] << 8))));
    };
    switch (t) {
    case TensorType::Q4_1: case TensorType::Q5_1: return f16(2);
    case TensorType::Q2_K: return f16(82) * (blk[e / 16] >> 4);
    case TensorType::Q4_K: case TensorType::Q5_K: {
        const uint8_t* s = blk + 4;
        const int j = e / 32;
        const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        return f16(2) * m;
    }
    default: return 0.0;
    }
}

// Every chunk against sum_i w_i xq_i in f64 (plus m (s - sum xq) where the kernel uses the activation sum s for
// the min), within 2e-6 of the magnitude of the terms the kernel rounds: sum (|w_i| + 2 |M_i|) |xq_i| (+ |m s|).
// The integer sums are exact, so only a few f32 roundings of those terms remain (each <= 6e-8 relative).
void check_chunk_dots(TensorType t, const std::vector<uint8_t>& w, int64_t cols, int64_t rows, const char* what,
                      std::mt19937& rng) {
    const size_t rb = zinc::gguf::row_bytes(t, cols);
    const bool uses_s = t == TensorType::Q4_1 || t == TensorType::Q5_1;
    std::vector<float> wf(cols);
    for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* row = w.data() + r * rb;
        zinc::quant::dequantize_row(t, row, wf.data(), cols);
        const auto y = random_activations(cols, rng);
        double ref_row = 0, mag_row = 0;
        float got_row = 0;
        for (int64_t c = 0; c < cols / 32; ++c) {
            const uint8_t* blk = row + (c * 32 / block_elems(t)) * block_bytes(t);
            double ref = 0, mag = 0, sum_xq = 0;
            for (int i = 0; i < 32; ++i) {
                const int64_t e = c * 32 + i;
                const double xq = double(y[c].qs[i]) * y[c].d;
                ref += double(wf[e]) * xq;
                sum_xq += xq;
                mag += (std::fabs(wf[e]) + 2 * offset_magnitude(t, blk, int(e % block_elems(t)))) * std::fabs(xq);
            }
            if (uses_s) {
                const double m = double(zinc::quant::fp16_to_fp32(uint16_t(blk[2] | blk[3] << 8)));
                ref += m * (double(y[c].s) - sum_xq);
                mag += std::fabs(m * y[c].s);
            }
            const float got = chunk_dot_of(t, row, c, y[c]);
            ASSERT_TRUE(std::isfinite(got) && std::fabs(got - ref) <= 2e-6 * mag)
                << name(t) << " " << what << " cols " << cols << " row " << r << " chunk " << c << ": " << got
                << " vs " << ref << " (magnitude " << mag << ")";
            ref_row += ref;
            mag_row += mag;
            got_row += got;
        }
        // The matvec's sum over a row: f32 accumulation of cols/32 chunk results.
        EXPECT_NEAR(got_row, ref_row, 1e-5 * mag_row) << name(t) << " " << what << " cols " << cols << " row " << r;
    }
}

TEST(CudaHostLogic, Dp4aChunkDotsEqualTheDequantizedDot) {
    std::mt19937 rng(11);
    for (TensorType t : kBlockTypes)
        for (int64_t cols : test_cols(t)) {
            check_chunk_dots(t, random_rows(t, cols, 3, Scales::kSane, rng), cols, 3, "sane", rng);
            check_chunk_dots(t, random_rows(t, cols, 3, Scales::kExtreme, rng), cols, 3, "extreme", rng);
        }
}

// The 64-value group dot products (Q4_K, Q5_K, MXFP4 and IQ4_XS read in place, Q6_K from a staged segment) against
// the f64 dot product of the dequantized weights with the activations, within 2e-6 of the magnitude of the terms the
// kernel rounds, as the chunk dot products above; and the sum of a row's groups against the row's. MXFP4 and IQ4_XS
// rows also start 2, 4 (MXFP4) or 8 (IQ4_XS) bytes past a 16-byte boundary, as their rows do in a matrix.
void check_group_dots(TensorType t, const std::vector<uint8_t>& w, int64_t cols, int64_t rows, const char* what,
                      std::mt19937& rng) {
    const size_t rb = zinc::gguf::row_bytes(t, cols);
    std::vector<float> wf(cols);
    for (int64_t r = 0; r < rows; ++r) {
        // A copy of the row, aligned as rows lie on the GPU, and bytes past it as load_weight leaves past a weight.
        std::vector<uint4> buf(rb / 16 + 2);
        const size_t shift = t == TensorType::MXFP4 ? 2 * (r % 3) : t == TensorType::IQ4_XS ? 8 * (r % 2) : 0;
        uint8_t* row = reinterpret_cast<uint8_t*>(buf.data()) + shift;
        std::memcpy(row, w.data() + r * rb, rb);
        zinc::quant::dequantize_row(t, row, wf.data(), cols);
        const auto y = random_activations(cols, rng);
        double ref_row = 0, mag_row = 0;
        float got_row = 0;
        for (int64_t gi = 0; gi < cols / 64; ++gi) {
            const int64_t sb = gi / 4;
            const int g = int(gi % 4);
            const uint8_t* blk = row + sb * block_bytes(t);
            // Element e of the row for value i of this group.
            auto element = [&](int i) -> int64_t {
                if (t != TensorType::Q6_K) return gi * 64 + i;
                return sb * 256 + 128 * (g / 2) + 16 * (g % 2) + 32 * (i / 16) + i % 16;
            };
            double ref = 0, mag = 0;
            for (int i = 0; i < 64; ++i) {
                const int64_t e = element(i);
                const double xq = double(y[size_t(e / 32)].qs[e % 32]) * y[size_t(e / 32)].d;
                ref += double(wf[e]) * xq;
                mag += (std::fabs(wf[e]) + 2 * offset_magnitude(t, blk, int(e % 256))) * std::fabs(xq);
            }
            // A Q4_K/Q5_K/MXFP4/IQ4_XS group as the kernels take it: loaded in place, then dotted with its two Q8_1
            // blocks.
            auto k_dot = [&](auto type) {
                constexpr int T = decltype(type)::value;
                KGroup<T> k;
                load_k_group<T>(row, int(gi), k);
                ActGroup a;
                load_act_group(&y[size_t(2 * gi)], a);
                return k_group_dot<T>(k, g, a);
            };
            const float got = t == TensorType::Q4_K     ? k_dot(std::integral_constant<int, kQ4_K>{})
                              : t == TensorType::Q5_K   ? k_dot(std::integral_constant<int, kQ5_K>{})
                              : t == TensorType::MXFP4  ? k_dot(std::integral_constant<int, kMXFP4>{})
                              : t == TensorType::IQ4_XS ? k_dot(std::integral_constant<int, kIQ4_XS>{})
                                                        : q6_k_group_dot(row, int(sb * 210), g,
                                                                         &y[size_t(8 * sb + 4 * (g / 2))]);
            ASSERT_TRUE(std::isfinite(got) && std::fabs(got - ref) <= 2e-6 * mag)
                << name(t) << " " << what << " cols " << cols << " row " << r << " group " << gi << ": " << got
                << " vs " << ref << " (magnitude " << mag << ")";
            ref_row += ref;
            mag_row += mag;
            got_row += got;
        }
        EXPECT_NEAR(got_row, ref_row, 1e-5 * mag_row) << name(t) << " " << what << " cols " << cols << " row " << r;
    }
}

TEST(CudaHostLogic, GroupDotsEqualTheDequantizedDot) {
    std::mt19937 rng(12);
    for (TensorType t : {TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::MXFP4, TensorType::IQ4_XS})
        for (int64_t cols : test_cols(t)) {
            if (cols % 64 != 0) continue;  // whole groups only
            check_group_dots(t, random_rows(t, cols, 3, Scales::kSane, rng), cols, 3, "sane", rng);
            check_group_dots(t, random_rows(t, cols, 3, Scales::kExtreme, rng), cols, 3, "extreme", rng);
        }
}

}  // namespace
