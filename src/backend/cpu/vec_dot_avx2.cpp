// AVX2 + FMA kernels for vec_dot (docs/formats.md §3.6). Each computes the same exact integer (sub-)block sums as the
// scalar reference in vec_dot.cpp and scales them by the same float products; only the order in which the per-block
// float terms are accumulated differs (eight SIMD lanes, summed at the end).
//
// Unsigned × signed byte products come from maddubs (pairs summed to int16). Its saturation is never reached:
// 4/5-bit weights give |pair| ≤ 2·31·127, 6-bit ≤ 2·63·127, and for signed × signed (Q8_0, tables) the sign of one
// operand is moved onto the other so that the unsigned side is |w| ≤ 127 (ggml's quantizers never produce −128).
#include "backend/cpu/vec_dot_internal.h"

#ifdef ZINC_VEC_DOT_AVX2

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "quant/activation.h"
#include "quant/blocks.h"
#include "quant/float_convert.h"

namespace zinc::backend::cpu::detail {

using namespace zinc::quant;  // the block formats

namespace {

using gguf::TensorType;

inline float f16(uint16_t h) { return _cvtsh_ss(h); }

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// Eight int32 sums of products of signed bytes, four bytes each.
inline __m256i dot_i8(__m256i x, __m256i y) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

// Eight int32 sums of (unsigned byte × signed byte) products, four each.
inline __m256i dot_u8i8(__m256i u, __m256i y) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, y), _mm256_set1_epi16(1));
}

// The 16 bytes of a legacy block as 32 nibbles: elements 0..15 (low nibbles) then 16..31 (high nibbles).
inline __m256i nibbles32(const uint8_t* qs) {
    const __m128i b = load128(qs);
    const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(b), _mm_srli_epi16(b, 4), 1);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// 32 bits -> 32 bytes of 0x10 where the bit is set (the fifth bit of Q5_0 / Q5_1).
inline __m256i fifth_bits(const uint8_t* qh) {
    uint32_t bits;
    std::memcpy(&bits, qh, 4);
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int>(bits)),
        _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
    const __m256i mask = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// ---- plain float types ----

float dot_f32(const void* w, const void* a, size_t n) {
    const float* x = static_cast<const float*>(w);
    const float* y = static_cast<const float*>(a);
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
    float r = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; ++i) r += x[i] * y[i];
    return r;
}

template <class Load>
float dot_half(const uint16_t* x, const uint16_t* y, size_t n, Load load, float (*scalar)(uint16_t)) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(load(x + i), load(y + i), s0);
        s1 = _mm256_fmadd_ps(load(x + i + 8), load(y + i + 8), s1);
        s2 = _mm256_fmadd_ps(load(x + i + 16), load(y + i + 16), s2);
        s3 = _mm256_fmadd_ps(load(x + i + 24), load(y + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(load(x + i), load(y + i), s0);
    float r = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; ++i) r += scalar(x[i]) * scalar(y[i]);
    return r;
}

float dot_f16(const void* w, const void* a, size_t n) {
    return dot_half(
        static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(a), n,
        [](const uint16_t* p) { return _mm256_cvtph_ps(load128(p)); }, f16);
}

float dot_bf16(const void* w, const void* a, size_t n) {
    return dot_half(
        static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(a), n,
        [](const uint16_t* p) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16)); },
        bf16_to_fp32);
}

// ---- 32-element formats with Q8_0 / Q8_1 activations ----

// Blocks of a symmetric format: per block, the 32 signed weight bytes (made by `bytes`) dotted with the activations,
// times d_w · d_y, accumulated in eight float lanes. A tile of RW weight rows × RA activation rows shares the weight
// decoding and the activation loads; every pair is summed exactly as the 1 × 1 kernel sums it.
template <class B, int RW, int RA, class Bytes, class Scale>
inline void tile_sym(const uint8_t* w, size_t wrb, const uint8_t* a, size_t arb, size_t n, float* out,
                     size_t out_stride, Bytes bytes, Scale scale) {
    __m256 acc[RW][RA];
    for (int i = 0; i < RW; ++i)
        for (int j = 0; j < RA; ++j) acc[i][j] = _mm256_setzero_ps();
    for (size_t ib = 0; ib < n / kQK; ++ib) {
        __m256i wx[RW], wabs[RW];
        __m256 dw[RW];
        for (int i = 0; i < RW; ++i) {
            const B& b = reinterpret_cast<const B*>(w + i * wrb)[ib];
            wx[i] = bytes(b);
            wabs[i] = _mm256_sign_epi8(wx[i], wx[i]);
            dw[i] = _mm256_set1_ps(scale(b));
        }
        for (int j = 0; j < RA; ++j) {
            const BlockQ8_0& y = reinterpret_cast<const BlockQ8_0*>(a + j * arb)[ib];
            const __m256i yv = load256(y.qs);
            const __m256 dy = _mm256_set1_ps(f16(y.d));
            for (int i = 0; i < RW; ++i) {
                const __m256i p16 = _mm256_maddubs_epi16(wabs[i], _mm256_sign_epi8(yv, wx[i]));
                const __m256i p32 = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
                // d_w · d_y rounded once, as the scalar kernels do
                acc[i][j] = _mm256_fmadd_ps(_mm256_mul_ps(dw[i], dy), _mm256_cvtepi32_ps(p32), acc[i][j]);
            }
        }
    }
    for (int i = 0; i < RW; ++i)
        for (int j = 0; j < RA; ++j) out[j * out_stride + i] = hsum(acc[i][j]);
}

template <class B, class Bytes, class Scale>
float dot_sym(const void* w, const void* a, size_t n, Bytes bytes, Scale scale) {
    float r;
    tile_sym<B, 1, 1>(static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(a), 0, n, &r, 0, bytes, scale);
    return r;
}

float dot_q8_0(const void* w, const void* a, size_t n) {
    return dot_sym<BlockQ8_0>(
        w, a, n, [](const BlockQ8_0& b) { return load256(b.qs); }, [](const BlockQ8_0& b) { return f16(b.d); });
}

float dot_q4_0(const void* w, const void* a, size_t n) {
    return dot_sym<BlockQ4_0>(
        w, a, n, [](const BlockQ4_0& b) { return _mm256_sub_epi8(nibbles32(b.qs), _mm256_set1_epi8(8)); },
        [](const BlockQ4_0& b) { return f16(b.d); });
}

float dot_q5_0(const void* w, const void* a, size_t n) {
    return dot_sym<BlockQ5_0>(
        w, a, n,
        [](const BlockQ5_0& b) {
            return _mm256_sub_epi8(_mm256_or_si256(nibbles32(b.qs), fifth_bits(b.qh)), _mm256_set1_epi8(16));
        },
        [](const BlockQ5_0& b) { return f16(b.d); });
}

inline __m256i table_lookup(const uint8_t* qs, const int8_t* table) {
    const __m256i t = _mm256_broadcastsi128_si256(load128(table));
    return _mm256_shuffle_epi8(t, nibbles32(qs));
}

float dot_iq4_nl(const void* w, const void* a, size_t n) {
    return dot_sym<BlockIQ4_NL>(
        w, a, n, [](const BlockIQ4_NL& b) { return table_lookup(b.qs, kValuesIQ4NL); },
        [](const BlockIQ4_NL& b) { return f16(b.d); });
}

float dot_mxfp4(const void* w, const void* a, size_t n) {
    return dot_sym<BlockMXFP4>(
        w, a, n, [](const BlockMXFP4& b) { return table_lookup(b.qs, kValuesFP4); },
        [](const BlockMXFP4& b) { return e8m0_to_fp32_half(b.e); });
}

constexpr int kTileW = 2, kTileA = 4;

#define ZINC_SYM_TILE(NAME, B, BYTES, SCALE)                                                                      \
    void NAME(const void* w, size_t wrb, const void* a, size_t arb, size_t n, float* out, size_t out_stride) { \
        tile_sym<B, kTileW, kTileA>(static_cast<const uint8_t*>(w), wrb, static_cast<const uint8_t*>(a), arb, n,  \
                                    out, out_stride, BYTES, SCALE);                                              \
    }

ZINC_SYM_TILE(tile_q8_0, BlockQ8_0, [](const BlockQ8_0& b) { return load256(b.qs); },
              [](const BlockQ8_0& b) { return f16(b.d); })
ZINC_SYM_TILE(tile_q4_0, BlockQ4_0,
              [](const BlockQ4_0& b) { return _mm256_sub_epi8(nibbles32(b.qs), _mm256_set1_epi8(8)); },
              [](const BlockQ4_0& b) { return f16(b.d); })
#undef ZINC_SYM_TILE

// Q4_1 / Q5_1 with Q8_1: d_w·d_y·Σ u·y + m·s per block.
template <class B, bool kFive>
float dot_asym(const void* w, const void* a, size_t n) {
    const auto* x = static_cast<const B*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(a);
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (size_t i = 0; i < n / kQK; ++i) {
        __m256i u = nibbles32(x[i].qs);
        if constexpr (kFive) u = _mm256_or_si256(u, fifth_bits(x[i].qh));
        const __m256 d = _mm256_set1_ps(f16(x[i].d) * f16(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_u8i8(u, load256(y[i].qs))), acc);
        summs += f16(x[i].m) * f16(y[i].s);
    }
    return hsum(acc) + summs;
}

// ---- K-quants and IQ4_XS with Q8_K activations ----

// From sixteen int16 scales: scale j in the low 128 bits and scale j + 1 in the high 128 bits (j even), for madd
// with the int16 pairs of 32 elements whose halves are sub-blocks j and j + 1.
inline __m256i scale_pair(__m256i sc16, int j) {
    const __m256i both = _mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(j / 2));  // [sc_j, sc_j+1] everywhere
    return _mm256_shuffle_epi8(both, _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3,
                                                      2, 3, 2, 3, 2, 3, 2, 3, 2, 3));
}

// Q2_K: Σ_j d_j·Σ q·a over sixteen sub-blocks of 16 (2-bit q from four shifts of 32 bytes) and the mins through
// the activation's bsums: dall·isum − dmin·Σ_j m_j·bsum_j per super-block.
float dot_q2_K(const void* w, const void* a, size_t n) {
    const auto* x = static_cast<const BlockQ2_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    float mins = 0;
    for (size_t i = 0; i < n / kQK_K; ++i) {
        const __m128i sc = load128(x[i].scales);
        const __m256i d16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc, _mm_set1_epi8(0x0F)));
        const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(0x0F)));
        const __m256i pm = _mm256_madd_epi16(m16, load256(y[i].bsums));
        __m128i ms = _mm_add_epi32(_mm256_castsi256_si128(pm), _mm256_extracti128_si256(pm, 1));
        ms = _mm_add_epi32(ms, _mm_shuffle_epi32(ms, 0x4E));
        ms = _mm_add_epi32(ms, _mm_shuffle_epi32(ms, 0xB1));
        mins += y[i].d * f16(x[i].dmin) * static_cast<float>(_mm_cvtsi128_si32(ms));
        __m256i sumi = _mm256_setzero_si256();
        for (int k = 0; k < 2; ++k) {
            const __m256i q2 = load256(x[i].qs + 32 * k);
            for (int st = 0; st < 4; ++st) {
                const __m256i u = _mm256_and_si256(_mm256_srl_epi16(q2, _mm_cvtsi32_si128(2 * st)), m3);
                const __m256i p = _mm256_maddubs_epi16(u, load256(y[i].qs + 128 * k + 32 * st));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale_pair(d16, 8 * k + 2 * st)));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * f16(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum(acc) - mins;
}

// Q3_K: q = low two bits − 4 + 4·(hmask bit), so Σ q·a = Σ u·a − 4·Σ a with u = low | hbit << 2 (0 … 7); the −4
// through the bsums; sixteen signed 6-bit scales.
float dot_q3_K(const void* w, const void* a, size_t n) {
    const auto* x = static_cast<const BlockQ3_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    for (size_t i = 0; i < n / kQK_K; ++i) {
        // 16 six-bit scales: low nibbles of bytes 0..7, then their high nibbles; two high bits each from bytes 8..11
        // (scale j: bits 2·(j / 4) of byte 8 + j % 4).
        uint8_t raw[16] = {};
        std::memcpy(raw, x[i].scales, 12);
        const __m128i sb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(raw));
        const __m128i m4 = _mm_set1_epi8(0x0F);
        const __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(sb, m4), _mm_and_si128(_mm_srli_epi16(sb, 4), m4));
        const __m128i h = _mm_shuffle_epi8(sb, _mm_setr_epi8(8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11));
        const __m128i hi = _mm_and_si128(_mm_srlv_epi32(h, _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
        const __m128i sc8 = _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        // −4·Σ_j sc_j·(Σ a over sub-block j)
        __m256i sumi = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(y[i].bsums)), 2);
        sumi = _mm256_sub_epi32(_mm256_setzero_si256(), sumi);
        const __m256i hm = load256(x[i].hmask);
        for (int k = 0; k < 2; ++k) {
            const __m256i q3 = load256(x[i].qs + 32 * k);
            for (int st = 0; st < 4; ++st) {
                const __m256i low = _mm256_and_si256(_mm256_srl_epi16(q3, _mm_cvtsi32_si128(2 * st)), m3);
                const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(4 * k + st)), one);
                const __m256i u = _mm256_or_si256(low, _mm256_slli_epi16(hb, 2));
                const __m256i p = _mm256_maddubs_epi16(u, load256(y[i].qs + 128 * k + 32 * st));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale_pair(sc16, 8 * k + 2 * st)));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum(acc);
}

// The 8 six-bit scales and 8 mins of a Q4_K / Q5_K super-block, as bytes: scales in sc[0..7], mins in sc[8..15].
inline void scales_mins_k4(const uint8_t* s, uint8_t out[16]) {
    uint32_t u[4];
    std::memcpy(u, s, 12);
    constexpr uint32_t k6 = 0x3f3f3f3f, k4 = 0x0f0f0f0f, k2 = 0x03030303;
    u[3] = ((u[2] >> 4) & k4) | (((u[1] >> 6) & k2) << 4);
    const uint32_t m_lo = u[1] & k6;
    u[1] = (u[2] & k4) | (((u[0] >> 6) & k2) << 4);
    u[2] = m_lo;
    u[0] &= k6;
    std::memcpy(out, u, 16);
}

template <bool kFive>
float dot_q45_K(const void* w, const void* a, size_t n) {
    using B = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
    const auto* x = static_cast<const B*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (size_t i = 0; i < n / kQK_K; ++i) {
        alignas(16) uint8_t sm[16];
        scales_mins_k4(x[i].scales, sm);
        // Σ_j m_j · (Σ y over sub-block j): the 16 bsums summed in pairs, times the mins.
        const __m128i bs = _mm_hadd_epi16(load128(y[i].bsums), load128(y[i].bsums + 8));
        const __m128i mins = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 8)));
        const __m128i pm = _mm_madd_epi16(mins, bs);
        acc_m = _mm_fmadd_ps(_mm_set1_ps(f16(x[i].dmin) * y[i].d), _mm_cvtepi32_ps(pm), acc_m);

        __m256i hbits = _mm256_setzero_si256();
        if constexpr (kFive) hbits = load256(x[i].qh);
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < kQK_K / 64; ++j) {
            const __m256i q = load256(x[i].qs + 32 * j);
            __m256i lo = _mm256_and_si256(q, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if constexpr (kFive) {
                const __m256i one = _mm256_set1_epi8(1);
                const __m256i hl = _mm256_and_si256(_mm256_srl_epi16(hbits, _mm_cvtsi32_si128(2 * j)), one);
                const __m256i hh = _mm256_and_si256(_mm256_srl_epi16(hbits, _mm_cvtsi32_si128(2 * j + 1)), one);
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(hl, 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(hh, 4));
            }
            const __m256i plo = _mm256_maddubs_epi16(lo, load256(y[i].qs + 64 * j));
            const __m256i phi = _mm256_maddubs_epi16(hi, load256(y[i].qs + 64 * j + 32));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(plo, _mm256_set1_epi16(sm[2 * j])));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(phi, _mm256_set1_epi16(sm[2 * j + 1])));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    __m128 m = acc_m;
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return hsum(acc) - _mm_cvtss_f32(m);
}

float dot_q6_K(const void* w, const void* a, size_t n) {
    const auto* x = static_cast<const BlockQ6_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
    __m256 acc = _mm256_setzero_ps();
    for (size_t i = 0; i < n / kQK_K; ++i) {
        const int8_t* sc = x[i].scales;
        // Σ (q − 32)·y = Σ q·y − 32·Σ y: the second part per 16-element group from bsums.
        const __m256i sc16 = _mm256_cvtepi8_epi16(load128(sc));
        const __m256i corr = _mm256_madd_epi16(sc16, load256(y[i].bsums));
        __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5));
        for (int h = 0; h < 2; ++h) {
            const __m256i ql0 = load256(x[i].ql + 64 * h);
            const __m256i ql1 = load256(x[i].ql + 64 * h + 32);
            const __m256i qh = load256(x[i].qh + 32 * h);
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4)),
                _mm256_or_si256(_mm256_and_si256(ql1, m4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4)),
            };
            for (int k = 0; k < 4; ++k) {
                const int g = 8 * h + 2 * k;  // the two 16-element scale groups of these 32 elements
                const __m256i s = _mm256_setr_m128i(_mm_set1_epi16(sc[g]), _mm_set1_epi16(sc[g + 1]));
                const __m256i p = _mm256_maddubs_epi16(q[k], load256(y[i].qs + 128 * h + 32 * k));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, s));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum(acc);
}

float dot_iq4_xs(const void* w, const void* a, size_t n) {
    const auto* x = static_cast<const BlockIQ4_XS*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    const __m256i table = _mm256_broadcastsi128_si256(load128(kValuesIQ4NL));
    __m256 acc = _mm256_setzero_ps();
    for (size_t i = 0; i < n / kQK_K; ++i) {
        const float d4d8 = f16(x[i].d) * y[i].d;
        for (int ib = 0; ib < kQK_K / 32; ++ib) {
            const int ls =
                ((x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((x[i].scales_h >> (2 * ib)) & 3) << 4);
            const __m256i v = _mm256_shuffle_epi8(table, nibbles32(x[i].qs + 16 * ib));
            const __m256i p = dot_i8(v, load256(y[i].qs + 32 * ib));
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d4d8 * static_cast<float>(ls - 32)), _mm256_cvtepi32_ps(p), acc);
        }
    }
    return hsum(acc);
}

// ---- activation quantizers ----

// One 32-element block: d = amax/127, quants round-half-even(x · 127/amax), saturated to int8. Returns d and the
// eight int32 partial sums of the quants in *sum.
inline float quantize_block(const float* x, int8_t* q, __m256i* sum) {
    __m256 v[4];
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
    }
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(amax, 1), _mm256_castps256_ps128(amax));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float mx = _mm_cvtss_f32(m4);
    const __m256 mul = _mm256_set1_ps(mx != 0.0f ? 127.0f / mx : 0.0f);
    __m256i iv[4];
    for (int k = 0; k < 4; ++k)
        iv[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    if (sum) *sum = _mm256_add_epi32(_mm256_add_epi32(iv[0], iv[1]), _mm256_add_epi32(iv[2], iv[3]));
    const __m256i p16a = _mm256_packs_epi32(iv[0], iv[1]);
    const __m256i p16b = _mm256_packs_epi32(iv[2], iv[3]);
    const __m256i p8 = _mm256_packs_epi16(p16a, p16b);  // in-lane packing: dwords 0,4,1,5,2,6,3,7 of the block
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                        _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    return mx / 127.0f;
}

}  // namespace

void avx2_quantize_q8_0(const float* x, void* dst, size_t n) {
    auto* y = static_cast<BlockQ8_0*>(dst);
    for (size_t i = 0; i < n / kQK; ++i, x += kQK) y[i].d = fp32_to_fp16(quantize_block(x, y[i].qs, nullptr));
}

void avx2_quantize_q8_1(const float* x, void* dst, size_t n) {
    auto* y = static_cast<BlockQ8_1*>(dst);
    for (size_t i = 0; i < n / kQK; ++i, x += kQK) {
        __m256i s8;
        const float d = quantize_block(x, y[i].qs, &s8);
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
        y[i].d = fp32_to_fp16(d);
        y[i].s = fp32_to_fp16(d * static_cast<float>(_mm_cvtsi128_si32(s)));
    }
}

// As quantize_row_q8_K: the element of largest magnitude (the first of them) maps to −127, iscale = −127/max,
// q = min(127, round-half-even(iscale·x)) (cvtps rounds as nearest_int does for these magnitudes), d = 1/iscale.
void avx2_quantize_q8_K(const float* x, void* dst, size_t n) {
    auto* y = static_cast<BlockQ8_K*>(dst);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (size_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        __m256 amax = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
        for (int k = 0; k < kQK_K; k += 8) {
            const __m256 v = _mm256_loadu_ps(x + k);
            amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v));
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        }
        if (_mm256_movemask_ps(nan)) {
            quantize_row_q8_K(x, &y[i], kQK_K);
            continue;
        }
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(amax, 1), _mm256_castps256_ps128(amax));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float mx = _mm_cvtss_f32(m4);
        if (mx == 0.0f) {
            std::memset(&y[i], 0, sizeof(BlockQ8_K));
            continue;
        }
        float max = 0.0f;  // the first element of magnitude mx, with its sign
        for (int k = 0; k < kQK_K; k += 8) {
            const int hit = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)), _mm256_set1_ps(mx), _CMP_EQ_OQ));
            if (hit) {
                max = x[k + __builtin_ctz(static_cast<unsigned>(hit))];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 is = _mm256_set1_ps(iscale);
        for (int k = 0; k < kQK_K; k += 32) {
            __m256i iv[4];
            for (int j = 0; j < 4; ++j)
                iv[j] = _mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(x + k + 8 * j)));
            const __m256i p16a = _mm256_packs_epi32(iv[0], iv[1]), p16b = _mm256_packs_epi32(iv[2], iv[3]);
            const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b),
                                                           _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + k), p8);  // packs saturates 128 to 127
            // bsums of the two 16s: byte pairs to int16 (maddubs with ones), then the eight of each half
            const __m256i s4 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), p8), _mm256_set1_epi16(1));
            const __m128i lo4 = _mm256_castsi256_si128(s4), hi4 = _mm256_extracti128_si256(s4, 1);
            const __m128i s = _mm_add_epi32(lo4, _mm_shuffle_epi32(lo4, 0x4E));
            const __m128i t = _mm_add_epi32(hi4, _mm_shuffle_epi32(hi4, 0x4E));
            const int lo = _mm_cvtsi128_si32(s) + _mm_extract_epi32(s, 1);
            const int hi = _mm_cvtsi128_si32(t) + _mm_extract_epi32(t, 1);
            y[i].bsums[k / 16] = static_cast<int16_t>(lo);
            y[i].bsums[k / 16 + 1] = static_cast<int16_t>(hi);
        }
        y[i].d = 1.0f / iscale;
    }
}

VecDotTile avx2_vec_dot_tile(TensorType w) {
    switch (w) {
        case TensorType::Q8_0: return {kTileW, kTileA, tile_q8_0};
        case TensorType::Q4_0: return {kTileW, kTileA, tile_q4_0};
        default: return {};
    }
}

VecDotFn avx2_vec_dot_fn(TensorType w) {
    switch (w) {
        case TensorType::F32: return dot_f32;
        case TensorType::F16: return dot_f16;
        case TensorType::BF16: return dot_bf16;
        case TensorType::Q4_0: return dot_q4_0;
        case TensorType::Q4_1: return dot_asym<BlockQ4_1, false>;
        case TensorType::Q5_0: return dot_q5_0;
        case TensorType::Q5_1: return dot_asym<BlockQ5_1, true>;
        case TensorType::Q8_0: return dot_q8_0;
        case TensorType::Q2_K: return dot_q2_K;
        case TensorType::Q3_K: return dot_q3_K;
        case TensorType::Q4_K: return dot_q45_K<false>;
        case TensorType::Q5_K: return dot_q45_K<true>;
        case TensorType::Q6_K: return dot_q6_K;
        case TensorType::IQ4_NL: return dot_iq4_nl;
        case TensorType::IQ4_XS: return dot_iq4_xs;
        case TensorType::MXFP4: return dot_mxfp4;
        default: return nullptr;
    }
}

}  // namespace zinc::backend::cpu::detail

#endif  // ZINC_VEC_DOT_AVX2
