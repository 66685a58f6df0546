// The SIMD micro-kernels of gemm.h as templates over an instruction-set policy `Ops`. gemm_avx2.cpp and
// gemm_avx512.cpp each include this header once and instantiate it with their own Ops, compiled for their instruction
// set; everything here has internal linkage, so the two copies never meet at link time. Include nothing else after it.
//
// The packed kernels put one weight row in each of the eight 32-bit lanes (repack.h): a vector of weight quants holds
// four consecutive values of eight rows, and one activation's four matching int8 values are broadcast to all lanes, so
// each lane sums its own row's products. Ops supplies that product:
//   AVX2    maddubs (unsigned × signed bytes, pairs summed to int16), int16 sums of a few of them, then madd with the
//           lane's scale as an int16 pair; the number of products an int16 sum may take is Ops::groups(max weight);
//   VNNI    vpdpbusd (four products summed into int32), then an int32 multiply by the lane's scale.
// Signed weights are made unsigned by an offset that the activation sums take back out (q − 8 for Q4_0, v + 128 for
// the tables with VNNI); AVX2 multiplies the table types IQ4_NL and IQ4_XS by |v| and the activation with v's sign.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "gguf/tensor_type.h"
#include "quant/blocks.h"
#include "backend/cpu/gemm_internal.h"

namespace zinc::backend::cpu::detail {
namespace {

using namespace zinc::quant;  // the block formats

using gguf::TensorType;

inline __m256i load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
inline __m256i bcast32(const void* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}
inline __m256i bytes(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }

// Calls f(std::integral_constant<int, i>) for i = 0 … N−1, so that loop indices are constants inside.
template <class F, int... I>
inline void static_for_impl(F&& f, std::integer_sequence<int, I...>) {
    (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F>
inline void static_for(F&& f) {
    static_for_impl(f, std::make_integer_sequence<int, N>{});
}

// A byte shuffle mask that makes byte i of every 32-bit lane byte b_i of the same lane (b_i < 0: zero). With constant
// arguments it folds to a constant.
inline __m256i lane_mask(int b0, int b1, int b2, int b3) {
    const auto byte = [](int b, int i) { return static_cast<uint32_t>(b < 0 ? 0x80 : b) << (8 * i); };
    const auto pattern = static_cast<int32_t>(byte(b0, 0) | byte(b1, 1) | byte(b2, 2) | byte(b3, 3));
    // shuffle_epi8 indexes within each 128-bit half: lane L's bytes start at 4·(L mod 4) (0x80 + offset stays zero)
    const __m256i base = _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0, 0, 0, 4, 4, 4, 4,
                                          8, 8, 8, 8, 12, 12, 12, 12);
    return _mm256_add_epi8(_mm256_set1_epi32(pattern), base);
}

// Bit `p` of every byte of v moved to bit `q` (the other bits are left for the caller to mask).
template <int p, int q = 4>
inline __m256i bit_to(__m256i v) {
    if constexpr (p < q) return _mm256_slli_epi16(v, q - p);
    else if constexpr (p > q) return _mm256_srli_epi16(v, p - q);
    else return v;
}

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// ---- Q4_K, Q5_K ----

template <class Ops, bool kFive, int R>
void tile_q45k(const uint8_t* tile, int64_t cols, const ActRefs& a, float* out, int64_t ld) {
    constexpr int kBytes = kFive ? 8 * 176 : 8 * 144;  // a tile block
    constexpr int kQh = 128, kQs = kFive ? 384 : 128;
    constexpr int kFlush = Ops::groups(kFive ? 31 : 15);
    const __m256i m4 = bytes(0x0F);
    __m256 acc[R], accm[R];
    for (int j = 0; j < R; ++j) acc[j] = accm[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < cols / kQK_K; ++b) {
        const uint8_t* tb = tile + b * kBytes;
        // The 6-bit scales and mins of the eight rows, four per lane in bytes (scale_min_k4 on eight rows at once).
        const __m256i u0 = load(tb + 32), u1 = load(tb + 64), u2 = load(tb + 96);
        const __m256i top = _mm256_and_si256(_mm256_srli_epi32(u0, 6), bytes(3));
        const __m256i sc_lo = _mm256_and_si256(u0, bytes(0x3F));
        const __m256i sc_hi = _mm256_or_si256(_mm256_and_si256(u2, m4), _mm256_slli_epi32(top, 4));
        const __m256i mn_lo = _mm256_and_si256(u1, bytes(0x3F));
        const __m256i top_m = _mm256_and_si256(_mm256_srli_epi32(u1, 6), bytes(3));
        const __m256i mn_hi =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), m4), _mm256_slli_epi32(top_m, 4));
        // Mins: M = Σ_j m_j·(Σ a over sub-block j), two sub-blocks per madd (int16 pairs of mins and of sums).
        const __m256i mp[4] = {_mm256_shuffle_epi8(mn_lo, lane_mask(0, -1, 1, -1)),
                               _mm256_shuffle_epi8(mn_lo, lane_mask(2, -1, 3, -1)),
                               _mm256_shuffle_epi8(mn_hi, lane_mask(0, -1, 1, -1)),
                               _mm256_shuffle_epi8(mn_hi, lane_mask(2, -1, 3, -1))};
        const __m256 dw = _mm256_cvtph_ps(load128(tb)), dm = _mm256_cvtph_ps(load128(tb + 16));
        for (int j = 0; j < R; ++j) {
            const int16_t* s = a.s[j] + 8 * b;
            __m256i m = _mm256_madd_epi16(mp[0], bcast32(s));
            for (int k = 1; k < 4; ++k) m = _mm256_add_epi32(m, _mm256_madd_epi16(mp[k], bcast32(s + 2 * k)));
            const __m256 dmin = _mm256_mul_ps(dm, _mm256_set1_ps(a.d[j][b]));
            accm[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), dmin, accm[j]);
        }
        __m256i isum[R];
        for (int j = 0; j < R; ++j) isum[j] = _mm256_setzero_si256();
        static_for<4>([&](auto c_) {
            constexpr int c = decltype(c_)::value;
            const __m256i sc = c < 2 ? sc_lo : sc_hi;
            const __m256i s_lo = Ops::scale_u8(sc, (2 * c) % 4), s_hi = Ops::scale_u8(sc, (2 * c + 1) % 4);
            __m256i lo[R], hi[R];
            for (int j = 0; j < R; ++j) lo[j] = hi[j] = _mm256_setzero_si256();
            for (int g = 0; g < 8; ++g) {
                const __m256i w = load(tb + kQs + (8 * c + g) * 32);
                __m256i wl = _mm256_and_si256(w, m4), wh = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
                if constexpr (kFive) {
                    const __m256i h = load(tb + kQh + 32 * g);
                    wl = _mm256_or_si256(wl, _mm256_and_si256(bit_to<2 * c>(h), bytes(0x10)));
                    wh = _mm256_or_si256(wh, _mm256_and_si256(bit_to<2 * c + 1>(h), bytes(0x10)));
                }
                for (int j = 0; j < R; ++j) {
                    const int8_t* q = a.q[j] + kQK_K * b + 64 * c + 4 * g;
                    lo[j] = Ops::dot(lo[j], wl, bcast32(q));
                    hi[j] = Ops::dot(hi[j], wh, bcast32(q + 32));
                }
                if ((g + 1) % kFlush == 0 && g != 7) {
                    for (int j = 0; j < R; ++j) {
                        isum[j] = _mm256_add_epi32(isum[j], Ops::finish(lo[j], s_lo));
                        isum[j] = _mm256_add_epi32(isum[j], Ops::finish(hi[j], s_hi));
                        lo[j] = hi[j] = _mm256_setzero_si256();
                    }
                }
            }
            for (int j = 0; j < R; ++j) {
                isum[j] = _mm256_add_epi32(isum[j], Ops::finish(lo[j], s_lo));
                isum[j] = _mm256_add_epi32(isum[j], Ops::finish(hi[j], s_hi));
            }
        });
        for (int j = 0; j < R; ++j)
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_mul_ps(dw, _mm256_set1_ps(a.d[j][b])), acc[j]);
    }
    for (int j = 0; j < R; ++j) _mm256_storeu_ps(out + j * ld, _mm256_sub_ps(acc[j], accm[j]));
}

// ---- Q6_K ----

// The four 6-bit values of the eight rows in the group (h, g) of a Q6_K tile block (repack.h): v[k] holds elements
// 128h + 32k + 4g … +3, from the low (k = 0, 1) and high (k = 2, 3) nibbles of ql and bits 2k, 2k+1 of qh.
struct Q6Group {
    __m256i v[4];
    Q6Group(const uint8_t* group, int first, int count) {  // the values k = first, first + 2 (count 2) or all four
        const __m256i m4 = bytes(0x0F), m30 = bytes(0x30);
        const __m256i qh = load(group + 64);
        for (int p = first; p < first + (count == 4 ? 2 : 1); ++p) {
            const __m256i q = load(group + 32 * p);
            const __m256i hl = p == 0 ? _mm256_slli_epi16(qh, 4) : _mm256_slli_epi16(qh, 2);
            const __m256i hh = p == 0 ? qh : _mm256_srli_epi16(qh, 2);
            v[p] = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_and_si256(hl, m30));
            v[p + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), _mm256_and_si256(hh, m30));
        }
    }
};

// Decode (one or two activation rows) reads each tile block once, in order, with all four values of a group at once;
// more rows take the values k = p, p + 2 in two passes, which keeps their sums in registers. Both give the same sums.
template <class Ops, int R>
void tile_q6k(const uint8_t* tile, int64_t cols, const ActRefs& a, float* out, int64_t ld) {
    constexpr int kBytes = 8 * 210, kSc = 16, kGroups = 144;
    constexpr int kFlush = Ops::groups(63);
    constexpr bool kOnePass = R <= 2;
    __m256 acc[R];
    for (int j = 0; j < R; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < cols / kQK_K; ++b) {
        const uint8_t* tb = tile + b * kBytes;
        // The −32 of every quant: −32·Σ_s sc_s·(Σ a over sub-block s of 16), two sub-blocks per madd.
        __m256i isum[R];
        for (int j = 0; j < R; ++j) isum[j] = _mm256_setzero_si256();
        for (int qd = 0; qd < 4; ++qd) {
            const __m256i sc = load(tb + kSc + 32 * qd);
            const __m256i p0 = _mm256_srai_epi16(_mm256_shuffle_epi8(sc, lane_mask(-1, 0, -1, 1)), 8);
            const __m256i p1 = _mm256_srai_epi16(_mm256_shuffle_epi8(sc, lane_mask(-1, 2, -1, 3)), 8);
            for (int j = 0; j < R; ++j) {
                const int16_t* s = a.s[j] + 16 * b + 4 * qd;
                isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(p0, bcast32(s)));
                isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(p1, bcast32(s + 2)));
            }
        }
        for (int j = 0; j < R; ++j) isum[j] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(isum[j], 5));
        // Element 128h + 32k + l is in sub-block 8h + 2k + (l ≥ 16): groups g < 4 and g ≥ 4 of a half are two sets of
        // four sub-blocks (k = 0 … 3).
        static_for<2>([&](auto h_) {
            static_for<2>([&](auto half_) {
                constexpr int h = decltype(h_)::value, half = decltype(half_)::value;
                static_for<kOnePass ? 1 : 2>([&](auto pass_) {
                    constexpr int first = kOnePass ? 0 : decltype(pass_)::value;  // k = first, first + 2 (or all)
                    constexpr int nk = kOnePass ? 4 : 2;
                    __m256i s[nk][R];
                    for (int k = 0; k < nk; ++k)
                        for (int j = 0; j < R; ++j) s[k][j] = _mm256_setzero_si256();
                    const auto flush = [&] {
                        for (int k = 0; k < nk; ++k) {
                            const int kk = kOnePass ? k : first + 2 * k, sb = 8 * h + 2 * kk + half;
                            const __m256i scale = Ops::scale_s8(load(tb + kSc + 32 * (sb / 4)), sb % 4);
                            for (int j = 0; j < R; ++j) {
                                isum[j] = _mm256_add_epi32(isum[j], Ops::finish(s[k][j], scale));
                                s[k][j] = _mm256_setzero_si256();
                            }
                        }
                    };
                    for (int gg = 0; gg < 4; ++gg) {
                        const int g = 4 * half + gg;
                        const Q6Group grp(tb + kGroups + (8 * h + g) * 96, first, kOnePass ? 4 : 2);
                        for (int k = 0; k < nk; ++k) {
                            const int kk = kOnePass ? k : first + 2 * k;
                            for (int j = 0; j < R; ++j) {
                                const int8_t* x = a.q[j] + kQK_K * b + 128 * h + 32 * kk + 4 * g;
                                s[k][j] = Ops::dot(s[k][j], grp.v[kk], bcast32(x));
                            }
                        }
                        if ((gg + 1) % kFlush == 0 && gg != 3) flush();
                    }
                    flush();
                });
            });
        });
        const __m256 dw = _mm256_cvtph_ps(load128(tb));
        for (int j = 0; j < R; ++j)
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_mul_ps(dw, _mm256_set1_ps(a.d[j][b])), acc[j]);
    }
    for (int j = 0; j < R; ++j) _mm256_storeu_ps(out + j * ld, acc[j]);
}

// ---- Q2_K, Q3_K ----

// The four 2-bit values of the eight rows in a 4-byte chunk of quants: v[st] = (chunk >> 2·st) & 3.
// Q2_K: S = Σ_j d_j·Σ q·a and M = Σ_j m_j·Σ a over sixteen sub-blocks of 16; element 128k + 32st + 16h + l is bits
// 2st of qs[32k + 16h + l], in sub-block 8k + 2st + h.
template <class Ops, int R>
void tile_q2k(const uint8_t* tile, int64_t cols, const ActRefs& a, float* out, int64_t ld) {
    constexpr int kBytes = 8 * 84, kSc = 32, kQs = 160;
    const __m256i m3 = bytes(3), m4 = bytes(0x0F);
    __m256 acc[R], accm[R];
    for (int j = 0; j < R; ++j) acc[j] = accm[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < cols / kQK_K; ++b) {
        const uint8_t* tb = tile + b * kBytes;
        __m256i m[R], isum[R];
        for (int j = 0; j < R; ++j) m[j] = isum[j] = _mm256_setzero_si256();
        for (int qd = 0; qd < 4; ++qd) {  // the mins of sub-blocks 4qd … 4qd+3, two per madd
            const __m256i mn = _mm256_and_si256(_mm256_srli_epi16(load(tb + kSc + 32 * qd), 4), m4);
            const __m256i p0 = _mm256_shuffle_epi8(mn, lane_mask(0, -1, 1, -1));
            const __m256i p1 = _mm256_shuffle_epi8(mn, lane_mask(2, -1, 3, -1));
            for (int j = 0; j < R; ++j) {
                const int16_t* s = a.s[j] + 16 * b + 4 * qd;
                m[j] = _mm256_add_epi32(m[j], _mm256_madd_epi16(p0, bcast32(s)));
                m[j] = _mm256_add_epi32(m[j], _mm256_madd_epi16(p1, bcast32(s + 2)));
            }
        }
        const __m256 dw = _mm256_cvtph_ps(load128(tb)), dm = _mm256_cvtph_ps(load128(tb + 16));
        for (int j = 0; j < R; ++j) {
            const __m256 da = _mm256_set1_ps(a.d[j][b]);
            accm[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m[j]), _mm256_mul_ps(dm, da), accm[j]);
        }
        static_for<2>([&](auto k_) {
            static_for<2>([&](auto h_) {
                constexpr int k = decltype(k_)::value, h = decltype(h_)::value;
                __m256i sub[4][R];
                for (int st = 0; st < 4; ++st)
                    for (int j = 0; j < R; ++j) sub[st][j] = _mm256_setzero_si256();
                for (int g = 0; g < 4; ++g) {
                    const __m256i w = load(tb + kQs + (8 * k + 4 * h + g) * 32);
                    for (int st = 0; st < 4; ++st) {
                        const __m256i u = _mm256_and_si256(_mm256_srli_epi16(w, 2 * st), m3);
                        for (int j = 0; j < R; ++j)
                            sub[st][j] = Ops::dot(sub[st][j], u,
                                                  bcast32(a.q[j] + kQK_K * b + 128 * k + 32 * st + 16 * h + 4 * g));
                    }
                }
                static_for<4>([&](auto st_) {
                    constexpr int st = decltype(st_)::value, sb = 8 * k + 2 * st + h;
                    const __m256i d = _mm256_and_si256(load(tb + kSc + 32 * (sb / 4)), m4);
                    const __m256i scale = Ops::scale_u8(d, sb % 4);
                    for (int j = 0; j < R; ++j) isum[j] = _mm256_add_epi32(isum[j], Ops::finish(sub[st][j], scale));
                });
            });
        });
        for (int j = 0; j < R; ++j)
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_mul_ps(dw, _mm256_set1_ps(a.d[j][b])), acc[j]);
    }
    for (int j = 0; j < R; ++j) _mm256_storeu_ps(out + j * ld, _mm256_sub_ps(acc[j], accm[j]));
}

// Q3_K: element 128k + 32st + l is bits 2st of qs[32k + l] and bit 4k + st of hmask[l], q = that − 4 + 4·bit, in
// sub-block 8k + 2st + (l ≥ 16); u = q + 4 is what is multiplied, −4·Σ_j sc_j·(Σ a over j) takes the 4 back out.
template <class Ops, int R>
void tile_q3k(const uint8_t* tile, int64_t cols, const ActRefs& a, float* out, int64_t ld) {
    constexpr int kBytes = 8 * 110, kSc = 16, kHm = 112, kQs = 368;
    const __m256i m3 = bytes(3), m4 = bytes(0x0F);
    __m256 acc[R];
    for (int j = 0; j < R; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < cols / kQK_K; ++b) {
        const uint8_t* tb = tile + b * kBytes;
        // The sixteen signed 6-bit scales, four per lane in bytes: sc[q] holds sub-blocks 4q … 4q+3.
        const __m256i w0 = load(tb + kSc), w1 = load(tb + kSc + 32), w2 = load(tb + kSc + 64);
        const auto hi2 = [&](int shift) {
            return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(w2, shift), m3), 4);
        };
        const __m256i sc[4] = {
            _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(w0, m4), hi2(0)), bytes(32)),
            _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(w1, m4), hi2(2)), bytes(32)),
            _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(w0, 4), m4), hi2(4)), bytes(32)),
            _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(w1, 4), m4), hi2(6)), bytes(32))};
        __m256i isum[R];
        for (int j = 0; j < R; ++j) isum[j] = _mm256_setzero_si256();
        for (int qd = 0; qd < 4; ++qd) {
            const __m256i p0 = _mm256_srai_epi16(_mm256_shuffle_epi8(sc[qd], lane_mask(-1, 0, -1, 1)), 8);
            const __m256i p1 = _mm256_srai_epi16(_mm256_shuffle_epi8(sc[qd], lane_mask(-1, 2, -1, 3)), 8);
            for (int j = 0; j < R; ++j) {
                const int16_t* s = a.s[j] + 16 * b + 4 * qd;
                isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(p0, bcast32(s)));
                isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(p1, bcast32(s + 2)));
            }
        }
        for (int j = 0; j < R; ++j) isum[j] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(isum[j], 2));
        static_for<2>([&](auto k_) {
            static_for<2>([&](auto half_) {
                constexpr int k = decltype(k_)::value, half = decltype(half_)::value;
                __m256i sub[4][R];
                for (int st = 0; st < 4; ++st)
                    for (int j = 0; j < R; ++j) sub[st][j] = _mm256_setzero_si256();
                for (int gg = 0; gg < 4; ++gg) {
                    const int g = 4 * half + gg;
                    const __m256i w = load(tb + kQs + (8 * k + g) * 32), hm = load(tb + kHm + 32 * g);
                    static_for<4>([&](auto st_) {
                        constexpr int st = decltype(st_)::value;
                        const __m256i u = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(w, 2 * st), m3),
                                                          _mm256_and_si256(bit_to<4 * k + st, 2>(hm), bytes(4)));
                        for (int j = 0; j < R; ++j) {
                            const int8_t* x = a.q[j] + kQK_K * b + 128 * k + 32 * st + 4 * g;
                            sub[st][j] = Ops::dot(sub[st][j], u, bcast32(x));
                        }
                    });
                }
                static_for<4>([&](auto st_) {
                    constexpr int st = decltype(st_)::value, sb = 8 * k + 2 * st + half;
                    const __m256i scale = Ops::scale_s8(sc[sb / 4], sb % 4);
                    for (int j = 0; j < R; ++j) isum[j] = _mm256_add_epi32(isum[j], Ops::finish(sub[st][j], scale));
                });
            });
        });
        const __m256 dw = _mm256_cvtph_ps(load128(tb));
        for (int j = 0; j < R; ++j)
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_mul_ps(dw, _mm256_set1_ps(a.d[j][b])), acc[j]);
    }
    for (int j = 0; j < R; ++j) _mm256_storeu_ps(out + j * ld, acc[j]);
}

// ---- IQ4_XS ----

template <class Ops, int R>
void tile_iq4xs(const uint8_t* tile, int64_t cols, const ActRefs& a, float* out, int64_t ld) {
    constexpr int kBytes = 8 * 136, kScH = 16, kScL = 32, kQs = 64;
    const __m256i m4 = bytes(0x0F);
    const __m256i values = _mm256_broadcastsi128_si256(load128(kValuesIQ4NL));
    // VNNI: the table shifted to unsigned bytes (v + 128); AVX2: |v|, with v's sign moved onto the activation.
    const __m256i table = Ops::kVnni ? _mm256_xor_si256(values, bytes(0x80)) : _mm256_sign_epi8(values, values);
    __m256 acc[R];
    for (int j = 0; j < R; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < cols / kQK_K; ++b) {
        const uint8_t* tb = tile + b * kBytes;
        const __m256i sl = load(tb + kScL), sh = _mm256_cvtepu16_epi32(load128(tb + kScH));
        __m256i isum[R];
        for (int j = 0; j < R; ++j) isum[j] = _mm256_setzero_si256();
        static_for<8>([&](auto ib_) {
            constexpr int ib = decltype(ib_)::value;
            // ls − 32 of sub-block ib, as int32 lanes
            const __m256i lo4 = _mm256_and_si256(_mm256_srli_epi32(sl, 4 * ib), _mm256_set1_epi32(0xF));
            const __m256i hi2 = _mm256_and_si256(_mm256_srli_epi32(sh, 2 * ib), _mm256_set1_epi32(3));
            const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo4, _mm256_slli_epi32(hi2, 4)), _mm256_set1_epi32(32));
            const __m256i scale = Ops::scale_i32(ls);
            __m256i s[R];
            for (int j = 0; j < R; ++j) s[j] = _mm256_setzero_si256();
            for (int g = 0; g < 4; ++g) {
                const __m256i x = load(tb + kQs + (4 * ib + g) * 32);
                const __m256i nl = _mm256_and_si256(x, m4), nh = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
                const __m256i ul = _mm256_shuffle_epi8(table, nl), uh = _mm256_shuffle_epi8(table, nh);
                for (int j = 0; j < R; ++j) {
                    const int8_t* q = a.q[j] + kQK_K * b + 32 * ib + 4 * g;
                    if constexpr (Ops::kVnni) {
                        s[j] = Ops::dot(s[j], ul, bcast32(q));
                        s[j] = Ops::dot(s[j], uh, bcast32(q + 16));
                    } else {
                        const __m256i vl = _mm256_shuffle_epi8(values, nl), vh = _mm256_shuffle_epi8(values, nh);
                        const __m256i pl = _mm256_maddubs_epi16(ul, _mm256_sign_epi8(bcast32(q), vl));
                        const __m256i ph = _mm256_maddubs_epi16(uh, _mm256_sign_epi8(bcast32(q + 16), vh));
                        s[j] = _mm256_add_epi32(s[j], _mm256_madd_epi16(pl, scale));
                        s[j] = _mm256_add_epi32(s[j], _mm256_madd_epi16(ph, scale));
                    }
                }
            }
            for (int j = 0; j < R; ++j) {
                if constexpr (Ops::kVnni) {
                    const __m256i off = _mm256_set1_epi32(128 * a.s[j][8 * b + ib]);  // Σ (v + 128)·a − 128·Σ a
                    isum[j] = _mm256_add_epi32(isum[j], Ops::finish(_mm256_sub_epi32(s[j], off), scale));
                } else {
                    isum[j] = _mm256_add_epi32(isum[j], s[j]);
                }
            }
        });
        const __m256 dw = _mm256_cvtph_ps(load128(tb));
        for (int j = 0; j < R; ++j)
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_mul_ps(dw, _mm256_set1_ps(a.d[j][b])), acc[j]);
    }
    for (int j = 0; j < R; ++j) _mm256_storeu_ps(out + j * ld, acc[j]);
}

// ---- 32-element blocks: Q4_0, IQ4_NL, MXFP4 ----

template <class Ops, TensorType kType, int R>
void tile_b32(const uint8_t* tile, int64_t cols, const ActRefs& a, float* out, int64_t ld) {
    constexpr bool kMx = kType == TensorType::MXFP4;
    constexpr int kBytes = kMx ? 136 : 144, kQs = kMx ? 8 : 16;
    // How the values become unsigned bytes: Q4_0's nibble is v + 8; the tables take v + 128 (VNNI) or, on AVX2, MXFP4
    // v + 12 and IQ4_NL |v| with the sign trick.
    constexpr bool kSign = !Ops::kVnni && kType == TensorType::IQ4_NL;
    constexpr int kOff = kType == TensorType::Q4_0 ? 8 : Ops::kVnni ? 128 : kMx ? 12 : 0;
    constexpr int kFlush = kSign ? 1 : Ops::groups(kType == TensorType::Q4_0 ? 15 : kMx ? 24 : 255);
    const __m256i m4 = bytes(0x0F);
    const __m256i values = _mm256_broadcastsi128_si256(load128(kMx ? kValuesFP4 : kValuesIQ4NL));
    const __m256i table = kSign ? _mm256_sign_epi8(values, values) : _mm256_add_epi8(values, bytes(kOff));
    __m256 acc[R];
    for (int j = 0; j < R; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < cols / kQK; ++b) {
        const uint8_t* tb = tile + b * kBytes;
        __m256 dw;
        if constexpr (kMx) {  // 2^(e − 128): e ≥ 2 as the exponent field, e < 2 as the subnormals 2^21 << e
            const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(tb)));
            const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
            const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
            dw = _mm256_castsi256_ps(_mm256_blendv_epi8(sub, normal, _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1))));
        } else {
            dw = _mm256_cvtph_ps(load128(tb));
        }
        // u[k]: elements 4k … 4k+3 (k < 4) and 16 + 4(k−4) … (k ≥ 4) of the eight rows.
        __m256i u[8];
        [[maybe_unused]] __m256i v[8];
        for (int g = 0; g < 4; ++g) {
            const __m256i x = load(tb + kQs + 32 * g);
            const __m256i nl = _mm256_and_si256(x, m4), nh = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
            if constexpr (kType == TensorType::Q4_0) {
                u[g] = nl;
                u[g + 4] = nh;
            } else {
                u[g] = _mm256_shuffle_epi8(table, nl);
                u[g + 4] = _mm256_shuffle_epi8(table, nh);
                if constexpr (kSign) {
                    v[g] = _mm256_shuffle_epi8(values, nl);
                    v[g + 4] = _mm256_shuffle_epi8(values, nh);
                }
            }
        }
        for (int j = 0; j < R; ++j) {
            const int8_t* q = a.q[j] + kQK * b;
            __m256i isum = _mm256_setzero_si256(), s = _mm256_setzero_si256();
            for (int k = 0; k < 8; ++k) {
                const __m256i y = bcast32(q + (k < 4 ? 4 * k : 16 + 4 * (k - 4)));
                if constexpr (kSign) {
                    s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(u[k], _mm256_sign_epi8(y, v[k])),
                                                              _mm256_set1_epi16(1)));
                } else {
                    s = Ops::dot(s, u[k], y);
                    if ((k + 1) % kFlush == 0 && k != 7) {
                        isum = _mm256_add_epi32(isum, Ops::finish1(s));
                        s = _mm256_setzero_si256();
                    }
                }
            }
            if constexpr (kSign) {
                isum = s;
            } else {
                isum = _mm256_add_epi32(isum, Ops::finish1(s));
                if constexpr (kOff != 0) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(kOff * a.s[j][b]));
            }
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(a.d[j][b])), acc[j]);
        }
    }
    for (int j = 0; j < R; ++j) _mm256_storeu_ps(out + j * ld, acc[j]);
}

// ---- Q8_0, in the lanes of the AVX2 vec_dot kernel ----

// The vec_dot kernel sums each pair of rows in eight float lanes, lane l taking the four-element groups l of every
// block, and adds the lanes at the end (hsum). Here lane i of acc[l] is that lane l of row i: the same sums, bit for
// bit, for eight rows at once. VNNI multiplies w + 128 (unsigned) by the activation and adds −128·Σ a of the group;
// AVX2 multiplies |w| by the activation with w's sign.
template <class Ops, int R>
void tile_q8_0(const uint8_t* tile, int64_t cols, const ActRefs& a, float* out, int64_t ld) {
    constexpr int kBytes = 8 * 34, kQs = 16;
    __m256 acc[8][R];
    for (int l = 0; l < 8; ++l)
        for (int j = 0; j < R; ++j) acc[l][j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < cols / kQK; ++b) {
        const uint8_t* tb = tile + b * kBytes;
        const __m256 dw = _mm256_cvtph_ps(load128(tb));
        __m256 s[R];
        for (int j = 0; j < R; ++j) s[j] = _mm256_mul_ps(dw, _mm256_set1_ps(a.d[j][b]));  // d_w·d_a, one rounding
        static_for<8>([&](auto l_) {  // unrolled, so that the accumulators stay in registers
            constexpr int l = decltype(l_)::value;
            const __m256i w = load(tb + kQs + 32 * l);
            const __m256i wu = Ops::kVnni ? _mm256_xor_si256(w, bytes(0x80)) : _mm256_sign_epi8(w, w);
            for (int j = 0; j < R; ++j) {
                const __m256i y = bcast32(a.q[j] + kQK * b + 4 * l);
                __m256i p;
                if constexpr (Ops::kVnni)
                    p = Ops::dot(bcast32(a.c[j] + 8 * b + l), wu, y);
                else
                    p = _mm256_madd_epi16(_mm256_maddubs_epi16(wu, _mm256_sign_epi8(y, w)), _mm256_set1_epi16(1));
                acc[l][j] = _mm256_fmadd_ps(s[j], _mm256_cvtepi32_ps(p), acc[l][j]);
            }
        });
    }
    for (int j = 0; j < R; ++j) {
        const __m256 t0 = _mm256_add_ps(acc[0][j], acc[4][j]), t1 = _mm256_add_ps(acc[1][j], acc[5][j]);
        const __m256 t2 = _mm256_add_ps(acc[2][j], acc[6][j]), t3 = _mm256_add_ps(acc[3][j], acc[7][j]);
        _mm256_storeu_ps(out + j * ld, _mm256_add_ps(_mm256_add_ps(t0, t2), _mm256_add_ps(t1, t3)));
    }
}

// ---- kernel tables ----

// The kernel of `Tile` for min(max_rows, kMax) activation rows.
template <template <int> class Tile, int kMax>
PackedKernel pick(int max_rows) {
    const int r = max_rows < kMax ? max_rows : kMax;
    switch (r) {
        case 1: return {Tile<1>::fn, 1};
        case 2: if constexpr (kMax >= 2) return {Tile<2>::fn, 2}; [[fallthrough]];
        case 3: if constexpr (kMax >= 3) return {Tile<3>::fn, 3}; [[fallthrough]];
        default: return {Tile<kMax>::fn, kMax};
    }
}

template <class Ops>
struct Kernels {
    template <int R> struct Q4K { static constexpr auto fn = tile_q45k<Ops, false, R>; };
    template <int R> struct Q5K { static constexpr auto fn = tile_q45k<Ops, true, R>; };
    template <int R> struct Q6K { static constexpr auto fn = tile_q6k<Ops, R>; };
    template <int R> struct IQ4XS { static constexpr auto fn = tile_iq4xs<Ops, R>; };
    template <int R> struct Q40 { static constexpr auto fn = tile_b32<Ops, TensorType::Q4_0, R>; };
    template <int R> struct IQ4NL { static constexpr auto fn = tile_b32<Ops, TensorType::IQ4_NL, R>; };
    template <int R> struct MX { static constexpr auto fn = tile_b32<Ops, TensorType::MXFP4, R>; };
    template <int R> struct Q80 { static constexpr auto fn = tile_q8_0<Ops, R>; };
    template <int R> struct Q2K { static constexpr auto fn = tile_q2k<Ops, R>; };
    template <int R> struct Q3K { static constexpr auto fn = tile_q3k<Ops, R>; };

    static PackedKernel packed(TensorType w, int max_rows) {
        constexpr int M = Ops::kMaxRows;
        switch (w) {
            case TensorType::Q4_K: return pick<Q4K, M>(max_rows);
            case TensorType::Q5_K: return pick<Q5K, M>(max_rows);
            case TensorType::Q6_K: return pick<Q6K, M>(max_rows);
            case TensorType::IQ4_XS: return pick<IQ4XS, M>(max_rows);
            case TensorType::Q4_0: return pick<Q40, M>(max_rows);
            case TensorType::IQ4_NL: return pick<IQ4NL, M>(max_rows);
            case TensorType::MXFP4: return pick<MX, M>(max_rows);
            case TensorType::Q8_0: return pick<Q80, Ops::kQ8MaxRows>(max_rows);
            case TensorType::Q2_K: return pick<Q2K, Ops::kQ23MaxRows>(max_rows);
            case TensorType::Q3_K: return pick<Q3K, Ops::kQ23MaxRows>(max_rows);
            default: return {};
        }
    }

};

}  // namespace
}  // namespace zinc::backend::cpu::detail
