// Writes the quantization golden files of tests/data/quant from ggml's own reference code.
//
// This program is compiled against a ggml build that is made separately (see README.md next to it); it calls
// ggml's exported reference functions (dequantize_row_*, quantize_row_*_ref, ggml_quantize_chunk, ...) on seeded
// random inputs and stores inputs and outputs together, so the tests never need ggml or this RNG.
// File layout: tests/data/quant/README.md.
//
// usage: make_quant_goldens OUTPUT_DIR

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ggml.h"

// ggml's reference functions, declared with untyped block pointers so no internal header is needed.
extern "C" {
void dequantize_row_q4_0(const void*, float*, int64_t);
void dequantize_row_q4_1(const void*, float*, int64_t);
void dequantize_row_q5_0(const void*, float*, int64_t);
void dequantize_row_q5_1(const void*, float*, int64_t);
void dequantize_row_q8_0(const void*, float*, int64_t);
void dequantize_row_q2_K(const void*, float*, int64_t);
void dequantize_row_q3_K(const void*, float*, int64_t);
void dequantize_row_q4_K(const void*, float*, int64_t);
void dequantize_row_q5_K(const void*, float*, int64_t);
void dequantize_row_q6_K(const void*, float*, int64_t);
void dequantize_row_q8_K(const void*, float*, int64_t);
void dequantize_row_iq4_nl(const void*, float*, int64_t);
void dequantize_row_iq4_xs(const void*, float*, int64_t);
void dequantize_row_mxfp4(const void*, float*, int64_t);

void quantize_row_q4_0_ref(const float*, void*, int64_t);
void quantize_row_q4_1_ref(const float*, void*, int64_t);
void quantize_row_q5_0_ref(const float*, void*, int64_t);
void quantize_row_q5_1_ref(const float*, void*, int64_t);
void quantize_row_q8_0_ref(const float*, void*, int64_t);
void quantize_row_q8_1_ref(const float*, void*, int64_t);
void quantize_row_q2_K_ref(const float*, void*, int64_t);
void quantize_row_q3_K_ref(const float*, void*, int64_t);
void quantize_row_q4_K_ref(const float*, void*, int64_t);
void quantize_row_q5_K_ref(const float*, void*, int64_t);
void quantize_row_q6_K_ref(const float*, void*, int64_t);
void quantize_row_q8_K_ref(const float*, void*, int64_t);
void quantize_row_mxfp4_ref(const float*, void*, int64_t);
}

namespace {

constexpr uint32_t kKindDequant = 1;
constexpr uint32_t kKindQuant = 2;
constexpr uint32_t kKindConvert = 3;
constexpr uint32_t kKindQuantInput = 4;

constexpr int kDequantBlocks = 1000;  // ordinary blocks per dequantization file
constexpr int kSpecialBlocks = 16;    // extra blocks with Inf/NaN scales at the end of a file
constexpr int kQuantRows = 16;
constexpr int kQuantRowLen = 4096;

std::string g_dir;

// Fixed 32-byte header: magic, kind, ggml type id, count, elems, n_special, reserved.
void write_file(const std::string& name, uint32_t kind, uint32_t type, uint32_t count, uint32_t elems,
                uint32_t n_special, const std::vector<std::vector<uint8_t>>& parts) {
    const std::string path = g_dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) {
        std::perror(path.c_str());
        std::exit(1);
    }
    const char magic[8] = {'Z', 'Q', 'G', 'O', 'L', 'D', '1', '\0'};
    const uint32_t fields[6] = {kind, type, count, elems, n_special, 0};
    std::fwrite(magic, 1, 8, f);
    std::fwrite(fields, 4, 6, f);  // the generator runs on little-endian x86-64
    for (const auto& p : parts) std::fwrite(p.data(), 1, p.size(), f);
    std::fclose(f);
    std::printf("wrote %s\n", path.c_str());
}

template <typename T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
    std::vector<uint8_t> out(v.size() * sizeof(T));
    std::memcpy(out.data(), v.data(), out.size());
    return out;
}

std::mt19937_64 g_rng(0x5A494E43ull);  // "ZINC"

uint32_t rand_u32() { return static_cast<uint32_t>(g_rng()); }

// A finite f16 bit pattern: a quarter of the time one of the extremes, otherwise any finite value.
uint16_t random_finite_f16() {
    static const uint16_t extremes[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x8400,
                                        0x7BFF, 0xFBFF, 0x7BFE, 0x3C00, 0xBC00, 0x1400, 0x2E66, 0xA4CD};
    if (rand_u32() % 4 == 0) return extremes[rand_u32() % (sizeof(extremes) / sizeof(extremes[0]))];
    for (;;) {
        const uint16_t h = static_cast<uint16_t>(rand_u32());
        if ((h & 0x7C00) != 0x7C00) return h;
    }
}

uint16_t random_nonfinite_f16() {
    static const uint16_t specials[] = {0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFD55, 0x7FFF};
    return specials[rand_u32() % (sizeof(specials) / sizeof(specials[0]))];
}

uint32_t random_finite_f32_bits() {
    static const float extremes[] = {0.0f,
                                     -0.0f,
                                     std::numeric_limits<float>::denorm_min(),
                                     -std::numeric_limits<float>::denorm_min(),
                                     std::numeric_limits<float>::min(),
                                     std::numeric_limits<float>::max(),
                                     -std::numeric_limits<float>::max(),
                                     1.0f,
                                     -1.0f,
                                     1e-3f};
    if (rand_u32() % 4 == 0) {
        float v = extremes[rand_u32() % (sizeof(extremes) / sizeof(extremes[0]))];
        uint32_t b;
        std::memcpy(&b, &v, 4);
        return b;
    }
    // Mostly realistic magnitudes, sometimes any exponent.
    if (rand_u32() % 2 == 0) {
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        float v = u(g_rng) * std::pow(10.0f, static_cast<float>(static_cast<int>(rand_u32() % 8)) - 6.0f);
        uint32_t b;
        std::memcpy(&b, &v, 4);
        return b;
    }
    for (;;) {
        const uint32_t b = rand_u32();
        if ((b & 0x7F800000u) != 0x7F800000u) return b;
    }
}

uint32_t random_nonfinite_f32_bits() {
    static const uint32_t specials[] = {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x7FABCDEFu};
    return specials[rand_u32() % (sizeof(specials) / sizeof(specials[0]))];
}

void put_u16(uint8_t* p, uint16_t v) {
    p[0] = static_cast<uint8_t>(v);
    p[1] = static_cast<uint8_t>(v >> 8);
}

enum class ScaleKind { F16, F32, E8M0 };

struct DequantSpec {
    const char* name;
    ggml_type type;
    void (*fn)(const void*, float*, int64_t);
    ScaleKind scale_kind;
    std::vector<int> scale_offsets;  // byte offsets of the scale fields inside a block
};

void make_dequant(const DequantSpec& s) {
    const size_t bbytes = ggml_type_size(s.type);
    const int64_t belems = ggml_blck_size(s.type);
    const int n_special = s.scale_kind == ScaleKind::E8M0 ? 0 : kSpecialBlocks;
    const int nb = kDequantBlocks + n_special;
    std::vector<uint8_t> in(nb * bbytes);
    for (auto& b : in) b = static_cast<uint8_t>(rand_u32());
    for (int i = 0; i < nb; ++i) {
        uint8_t* blk = in.data() + i * bbytes;
        const bool special = i >= kDequantBlocks;
        for (size_t k = 0; k < s.scale_offsets.size(); ++k) {
            uint8_t* p = blk + s.scale_offsets[k];
            // In special blocks at least the first scale field is Inf/NaN, the others sometimes.
            const bool nonfinite = special && (k == 0 || rand_u32() % 2 == 0);
            switch (s.scale_kind) {
                case ScaleKind::F16: put_u16(p, nonfinite ? random_nonfinite_f16() : random_finite_f16()); break;
                case ScaleKind::F32: {
                    const uint32_t b = nonfinite ? random_nonfinite_f32_bits() : random_finite_f32_bits();
                    std::memcpy(p, &b, 4);
                    break;
                }
                case ScaleKind::E8M0: *p = static_cast<uint8_t>(i % 256 == 0 ? rand_u32() : i % 256); break;
            }
        }
    }
    std::vector<float> out(nb * belems);
    s.fn(in.data(), out.data(), nb * belems);
    write_file(std::string("dequant_") + s.name + ".bin", kKindDequant, s.type, nb, belems, n_special,
               {in, as_bytes(out)});
}

void make_dequant_scalar() {
    // F16 and BF16: every one of the 65536 bit patterns.
    std::vector<uint16_t> all(65536);
    for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
    std::vector<float> out16(65536), outbf(65536);
    ggml_fp16_to_fp32_row(reinterpret_cast<const ggml_fp16_t*>(all.data()), out16.data(), 65536);
    ggml_bf16_to_fp32_row(reinterpret_cast<const ggml_bf16_t*>(all.data()), outbf.data(), 65536);
    write_file("dequant_f16.bin", kKindDequant, GGML_TYPE_F16, 65536, 1, 0, {as_bytes(all), as_bytes(out16)});
    write_file("dequant_bf16.bin", kKindDequant, GGML_TYPE_BF16, 65536, 1, 0, {as_bytes(all), as_bytes(outbf)});
}

void make_convert() {
    // f32 -> f16 and f32 -> bf16 on edge cases plus random bit patterns (an exhaustive check is in README.md).
    std::vector<uint32_t> bits;
    const uint32_t edges[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x007FFFFFu, 0x00800000u, 0x7F7FFFFFu,
                              0x7F800000u, 0xFF800000u, 0x7F800001u, 0x7FC00000u, 0xFFC00001u, 0x7FBFFFFFu,
                              0x477FE000u, 0x477FEFFFu, 0x477FF000u, 0x477FF001u, 0x47800000u, 0x38800000u,
                              0x387FE000u, 0x387FF000u, 0x33000000u, 0x33000001u, 0x33800000u, 0x337FFFFFu,
                              0x3F801000u, 0x3F803000u, 0x3F800FFFu, 0x3F808000u, 0x3F818000u, 0x3F817FFFu};
    for (uint32_t e : edges) {
        bits.push_back(e);
        bits.push_back(e ^ 0x80000000u);
    }
    // All roundings around the f16 subnormal and normal boundaries, and ties.
    for (uint32_t e = 0x30000000u; e < 0x48000000u; e += 0x00100000u) {
        for (uint32_t m : {0x0000u, 0x0FFFu, 0x1000u, 0x1001u, 0x2000u, 0x3000u, 0x7FFFu, 0x8000u, 0x8001u}) {
            bits.push_back(e | m);
        }
    }
    while (bits.size() < 40000) bits.push_back(rand_u32());
    std::vector<float> in(bits.size());
    std::memcpy(in.data(), bits.data(), bits.size() * 4);
    std::vector<uint16_t> f16(bits.size()), bf16(bits.size());
    ggml_fp32_to_fp16_row(in.data(), reinterpret_cast<ggml_fp16_t*>(f16.data()), static_cast<int64_t>(in.size()));
    ggml_fp32_to_bf16_row_ref(in.data(), reinterpret_cast<ggml_bf16_t*>(bf16.data()), static_cast<int64_t>(in.size()));
    write_file("convert_f32.bin", kKindConvert, 0, static_cast<uint32_t>(bits.size()), 1, 0,
               {as_bytes(bits), as_bytes(f16), as_bytes(bf16)});
}

// Quantizer inputs: 16 rows of 4096 values drawn from different distributions (README.md lists them).
std::vector<float> make_quant_inputs() {
    std::vector<float> x(static_cast<size_t>(kQuantRows) * kQuantRowLen);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    auto row = [&](int r) { return x.data() + static_cast<size_t>(r) * kQuantRowLen; };
    for (int r = 0; r < kQuantRows; ++r) {
        float* y = row(r);
        for (int i = 0; i < kQuantRowLen; ++i) {
            float v = 0.0f;
            switch (r) {
                case 0: v = normal(g_rng); break;                             // standard normal
                case 1: v = uni(g_rng); break;                                // uniform (-1, 1)
                case 2: {                                                     // heavy tails and outliers
                    const float n = normal(g_rng);
                    const float u = std::fabs(uni(g_rng)) + 1e-3f;
                    v = n / u;
                    if (rand_u32() % 64 == 0) v *= 100.0f;
                    break;
                }
                case 3: v = 0.37109375f; break;                               // all equal
                case 4: v = 0.0f; break;                                      // all zero
                case 5: v = normal(g_rng) * 1e-30f; break;                    // tiny
                case 6: v = normal(g_rng) * 1e30f; break;                     // huge
                case 7: v = normal(g_rng) * 0.02f; break;                     // typical weight scale
                case 8: {                                                     // per-32 random magnitude 1e-40..1e38
                    static float mag = 1.0f;
                    if (i % 32 == 0) mag = std::pow(10.0f, static_cast<float>(static_cast<int>(rand_u32() % 79)) - 40.0f);
                    v = normal(g_rng) * mag;
                    break;
                }
                case 9: v = static_cast<float>(static_cast<int>(rand_u32() % 17) - 8) * 0.25f; break;  // ties
                case 10: v = -1.0f - std::fabs(uni(g_rng)); break;             // all negative
                case 11: v = 1.0f + std::fabs(uni(g_rng)); break;              // all positive
                case 12: v = (i / 32) % 2 == 0 ? 0.0f : normal(g_rng); break;  // zero blocks between normal ones
                case 13: {                                                     // constant per 16, varying sign
                    static float c = 0.0f;
                    if (i % 16 == 0) c = normal(g_rng) * (rand_u32() % 4 == 0 ? 0.0f : 1.0f);
                    v = c;
                    break;
                }
                case 14: v = i % 32 == static_cast<int>(rand_u32() % 32) ? 1000.0f * normal(g_rng) : 0.0f;  // spikes
                    break;
                case 15: {                                                     // LLM-like: outlier columns
                    v = normal(g_rng) * 0.05f;
                    if (i % 512 == 7 || i % 1024 == 100) v *= 300.0f;
                    if (rand_u32() % 97 == 0) v = 0.0f;
                    break;
                }
            }
            y[i] = v;
        }
    }
    // A few exact extremes in row 8.
    row(8)[0] = 3.0e38f;
    row(8)[1] = -3.0e38f;
    row(8)[64] = std::numeric_limits<float>::denorm_min();
    row(8)[96] = -std::numeric_limits<float>::min();
    return x;
}

struct QuantSpec {
    const char* name;
    ggml_type type;
    void (*ref)(const float*, void*, int64_t);  // quantize_row_*_ref, or null where ggml_quantize_chunk is the reference
    bool chunk;                                 // also (or only) run ggml_quantize_chunk, which must agree
};

void make_quant(const QuantSpec& s, const std::vector<float>& x) {
    const size_t row_size = ggml_row_size(s.type, kQuantRowLen);
    std::vector<uint8_t> out(row_size * kQuantRows, 0);
    if (s.ref) {
        for (int r = 0; r < kQuantRows; ++r) {
            s.ref(x.data() + static_cast<size_t>(r) * kQuantRowLen, out.data() + r * row_size, kQuantRowLen);
        }
    }
    if (s.chunk) {
        std::vector<uint8_t> chunk(out.size(), 0);
        ggml_quantize_chunk(s.type, x.data(), chunk.data(), 0, kQuantRows, kQuantRowLen, nullptr);
        if (!s.ref) {
            out = chunk;
        } else if (chunk != out) {
            std::fprintf(stderr, "%s: ggml_quantize_chunk differs from quantize_row_%s_ref\n", s.name, s.name);
            std::exit(1);
        }
    }
    write_file(std::string("quantize_") + s.name + ".bin", kKindQuant, s.type, kQuantRows, kQuantRowLen, 0, {out});
}

void f16_row(const float* x, void* y, int64_t n) { ggml_fp32_to_fp16_row(x, static_cast<ggml_fp16_t*>(y), n); }
void bf16_row(const float* x, void* y, int64_t n) { ggml_fp32_to_bf16_row_ref(x, static_cast<ggml_bf16_t*>(y), n); }

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
        return 2;
    }
    g_dir = argv[1];

    make_dequant_scalar();
    make_convert();

    const std::vector<DequantSpec> dequant = {
        {"q4_0", GGML_TYPE_Q4_0, dequantize_row_q4_0, ScaleKind::F16, {0}},
        {"q4_1", GGML_TYPE_Q4_1, dequantize_row_q4_1, ScaleKind::F16, {0, 2}},
        {"q5_0", GGML_TYPE_Q5_0, dequantize_row_q5_0, ScaleKind::F16, {0}},
        {"q5_1", GGML_TYPE_Q5_1, dequantize_row_q5_1, ScaleKind::F16, {0, 2}},
        {"q8_0", GGML_TYPE_Q8_0, dequantize_row_q8_0, ScaleKind::F16, {0}},
        {"q2_K", GGML_TYPE_Q2_K, dequantize_row_q2_K, ScaleKind::F16, {80, 82}},
        {"q3_K", GGML_TYPE_Q3_K, dequantize_row_q3_K, ScaleKind::F16, {108}},
        {"q4_K", GGML_TYPE_Q4_K, dequantize_row_q4_K, ScaleKind::F16, {0, 2}},
        {"q5_K", GGML_TYPE_Q5_K, dequantize_row_q5_K, ScaleKind::F16, {0, 2}},
        {"q6_K", GGML_TYPE_Q6_K, dequantize_row_q6_K, ScaleKind::F16, {208}},
        {"q8_K", GGML_TYPE_Q8_K, dequantize_row_q8_K, ScaleKind::F32, {0}},
        {"iq4_nl", GGML_TYPE_IQ4_NL, dequantize_row_iq4_nl, ScaleKind::F16, {0}},
        {"iq4_xs", GGML_TYPE_IQ4_XS, dequantize_row_iq4_xs, ScaleKind::F16, {0}},
        {"mxfp4", GGML_TYPE_MXFP4, dequantize_row_mxfp4, ScaleKind::E8M0, {0}},
    };
    for (const auto& s : dequant) make_dequant(s);

    const std::vector<float> x = make_quant_inputs();
    write_file("quant_inputs.bin", kKindQuantInput, GGML_TYPE_F32, kQuantRows, kQuantRowLen, 0, {as_bytes(x)});

    const std::vector<QuantSpec> quant = {
        {"f16", GGML_TYPE_F16, f16_row, true},
        {"bf16", GGML_TYPE_BF16, bf16_row, true},
        {"q4_0", GGML_TYPE_Q4_0, quantize_row_q4_0_ref, true},
        {"q4_1", GGML_TYPE_Q4_1, quantize_row_q4_1_ref, true},
        {"q5_0", GGML_TYPE_Q5_0, quantize_row_q5_0_ref, true},
        {"q5_1", GGML_TYPE_Q5_1, quantize_row_q5_1_ref, true},
        {"q8_0", GGML_TYPE_Q8_0, quantize_row_q8_0_ref, true},
        {"q8_1", GGML_TYPE_Q8_1, quantize_row_q8_1_ref, false},
        {"q2_K", GGML_TYPE_Q2_K, quantize_row_q2_K_ref, true},
        {"q3_K", GGML_TYPE_Q3_K, quantize_row_q3_K_ref, true},
        {"q4_K", GGML_TYPE_Q4_K, quantize_row_q4_K_ref, true},
        {"q5_K", GGML_TYPE_Q5_K, quantize_row_q5_K_ref, true},
        {"q6_K", GGML_TYPE_Q6_K, quantize_row_q6_K_ref, true},
        {"q8_K", GGML_TYPE_Q8_K, quantize_row_q8_K_ref, false},
        {"iq4_nl", GGML_TYPE_IQ4_NL, nullptr, true},
        {"iq4_xs", GGML_TYPE_IQ4_XS, nullptr, true},
        {"mxfp4", GGML_TYPE_MXFP4, quantize_row_mxfp4_ref, true},
    };
    for (const auto& s : quant) make_quant(s, x);
    return 0;
}
