// The drivers of gemm.h, the activation quantization for them, and the scalar kernels: the readable statement of the
// arithmetic the SIMD kernels (gemm_avx2.cpp, gemm_avx512.cpp) reproduce bit for bit. The scalar kernels unpack each
// row of a tile back into its blocks and follow the formulas of gemm.h with std::fma.
#include "backend/cpu/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "quant/blocks.h"
#include "quant/float_convert.h"
#include "backend/cpu/gemm_internal.h"
#include "quant/quant_internal.h"
#include "backend/cpu/repack.h"
#include "backend/cpu/vec_dot.h"

namespace zinc::backend::cpu {

using namespace zinc::quant;  // the block formats

namespace {

using gguf::TensorType;
using detail::ActRefs;
using detail::kMaxActRows;

// ---- integer block sums of one weight row's block with one activation row (exact) ----

// Q4_K / Q5_K super-block: S = Σ_j sc_j·Σ q·a, M = Σ_j m_j·Σ a (s32: the activation's sums of each 32).
template <bool kFive>
void sums_q45k(const void* blk, const int8_t* a, const int16_t* s32, int32_t& S, int32_t& M) {
    using B = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
    const B& x = *static_cast<const B*>(blk);
    S = M = 0;
    for (int j = 0; j < 8; ++j) {
        int sc, m;
        quant::detail::scale_min_k4(j, x.scales, sc, m);
        int32_t s = 0;
        for (int l = 0; l < 32; ++l) {
            int q = (x.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
            if constexpr (kFive) q += ((x.qh[l] >> j) & 1) << 4;
            s += q * a[32 * j + l];
        }
        S += sc * s;
        M += m * s32[j];
    }
}

// Q2_K super-block: S = Σ_j d_j·Σ q·a, M = Σ_j m_j·Σ a over its sixteen sub-blocks of 16 (s16: the bsums).
void sums_q2k(const void* blk, const int8_t* a, const int16_t* s16, int32_t& S, int32_t& M) {
    const BlockQ2_K& x = *static_cast<const BlockQ2_K*>(blk);
    S = M = 0;
    for (int j = 0; j < 16; ++j) {
        const int k = j / 8, st = (j % 8) / 2, h = j % 2;  // half, shift, which 16 of the 32 bytes
        int32_t s = 0;
        for (int l = 0; l < 16; ++l) s += ((x.qs[32 * k + 16 * h + l] >> (2 * st)) & 3) * a[16 * j + l];
        S += (x.scales[j] & 0xF) * s;
        M += (x.scales[j] >> 4) * s16[j];
    }
}

// Q3_K super-block: S = Σ_j sc_j·Σ q·a over its sixteen sub-blocks of 16, q = low two bits − 4 + 4·high bit.
int32_t sums_q3k(const void* blk, const int8_t* a) {
    const BlockQ3_K& x = *static_cast<const BlockQ3_K*>(blk);
    int32_t S = 0;
    for (int j = 0; j < 16; ++j) {
        const int lo = j < 8 ? x.scales[j] & 0xF : x.scales[j - 8] >> 4;
        const int hi = (x.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
        const int sc = (lo | (hi << 4)) - 32;
        int32_t s = 0;
        for (int l = 0; l < 16; ++l) {
            const int e = 16 * j + l, k = e / 128, st = (e % 128) / 32, p = e % 32;
            const int q = ((x.qs[32 * k + p] >> (2 * st)) & 3) - 4 + 4 * ((x.hmask[p] >> (4 * k + st)) & 1);
            s += q * a[e];
        }
        S += sc * s;
    }
    return S;
}

// Q6_K super-block: S = Σ_j sc_j·Σ (q − 32)·a over its sixteen sub-blocks of 16.
int32_t sums_q6k(const void* blk, const int8_t* a) {
    const BlockQ6_K& x = *static_cast<const BlockQ6_K*>(blk);
    int32_t S = 0;
    for (int e0 = 0; e0 < kQK_K; e0 += 16) {
        int32_t s = 0;
        for (int e = e0; e < e0 + 16; ++e) {
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;  // half, quarter, position
            const int lo = (x.ql[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0xF;
            const int hi = (x.qh[32 * h + l] >> (2 * k)) & 3;
            s += ((lo | (hi << 4)) - 32) * a[e];
        }
        S += x.scales[e0 / 16] * s;
    }
    return S;
}

// IQ4_XS super-block: S = Σ_j (ls_j − 32)·Σ v·a.
int32_t sums_iq4xs(const void* blk, const int8_t* a) {
    const BlockIQ4_XS& x = *static_cast<const BlockIQ4_XS*>(blk);
    int32_t S = 0;
    for (int j = 0; j < 8; ++j) {
        const int ls = ((x.scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((x.scales_h >> (2 * j)) & 3) << 4);
        int32_t s = 0;
        for (int l = 0; l < 16; ++l) {
            s += kValuesIQ4NL[x.qs[16 * j + l] & 0xF] * a[32 * j + l];
            s += kValuesIQ4NL[x.qs[16 * j + l] >> 4] * a[32 * j + 16 + l];
        }
        S += (ls - 32) * s;
    }
    return S;
}

// A 32-element block with 16 bytes of nibbles (element l low, l + 16 high) mapped to values by `value`.
template <class Value>
int32_t sums_b32(const uint8_t* qs, const int8_t* a, Value value) {
    int32_t s = 0;
    for (int l = 0; l < 16; ++l) s += value(qs[l] & 0xF) * a[l] + value(qs[l] >> 4) * a[l + 16];
    return s;
}

// ---- scalar kernels: one 8-row tile, `R` activation rows ----

template <TensorType kType, int R>
void scalar_tile(const uint8_t* tile, int64_t cols, const ActRefs& a, float* out, int64_t ld) {
    const size_t bb = gguf::traits(kType).block_bytes;
    const int64_t blk = static_cast<int64_t>(gguf::traits(kType).block_elems), nb = cols / blk;
    std::vector<uint8_t> row(bb * static_cast<size_t>(nb));
    for (int i = 0; i < kPackRows; ++i) {
        unpack_row(kType, tile, cols, i, row.data());
        for (int j = 0; j < R; ++j) {
            float acc = 0.0f, accm = 0.0f, lane[8] = {};
            for (int64_t b = 0; b < nb; ++b) {
                const uint8_t* x = row.data() + static_cast<size_t>(b) * bb;
                const int8_t* q = a.q[j] + b * blk;
                const float da = a.d[j][b];
                if constexpr (kType == TensorType::Q2_K) {
                    int32_t S, M;
                    sums_q2k(x, q, a.s[j] + 16 * b, S, M);
                    const auto* y = reinterpret_cast<const BlockQ2_K*>(x);
                    acc = std::fma(static_cast<float>(S), fp16_to_fp32(y->d) * da, acc);
                    accm = std::fma(static_cast<float>(M), fp16_to_fp32(y->dmin) * da, accm);
                } else if constexpr (kType == TensorType::Q3_K) {
                    acc = std::fma(static_cast<float>(sums_q3k(x, q)),
                                   fp16_to_fp32(reinterpret_cast<const BlockQ3_K*>(x)->d) * da, acc);
                } else if constexpr (kType == TensorType::Q4_K || kType == TensorType::Q5_K) {
                    int32_t S, M;
                    sums_q45k<kType == TensorType::Q5_K>(x, q, a.s[j] + 8 * b, S, M);
                    uint16_t d, dmin;
                    std::memcpy(&d, x, 2);
                    std::memcpy(&dmin, x + 2, 2);
                    acc = std::fma(static_cast<float>(S), fp16_to_fp32(d) * da, acc);
                    accm = std::fma(static_cast<float>(M), fp16_to_fp32(dmin) * da, accm);
                } else if constexpr (kType == TensorType::Q6_K) {
                    acc = std::fma(static_cast<float>(sums_q6k(x, q)),
                                   fp16_to_fp32(reinterpret_cast<const BlockQ6_K*>(x)->d) * da, acc);
                } else if constexpr (kType == TensorType::IQ4_XS) {
                    acc = std::fma(static_cast<float>(sums_iq4xs(x, q)),
                                   fp16_to_fp32(reinterpret_cast<const BlockIQ4_XS*>(x)->d) * da, acc);
                } else if constexpr (kType == TensorType::Q8_0) {
                    // eight lanes, the elements 4l … 4l+3 of every block in lane l, summed at the end
                    const auto* y = reinterpret_cast<const BlockQ8_0*>(x);
                    const float s = fp16_to_fp32(y->d) * da;
                    for (int l = 0; l < 8; ++l) {
                        int32_t p = 0;
                        for (int k = 4 * l; k < 4 * l + 4; ++k) p += y->qs[k] * q[k];
                        lane[l] = std::fma(s, static_cast<float>(p), lane[l]);
                    }
                } else if constexpr (kType == TensorType::MXFP4) {
                    const int32_t S = sums_b32(x + 1, q, [](int v) { return int(kValuesFP4[v]); });
                    acc = std::fma(static_cast<float>(S), e8m0_to_fp32_half(x[0]) * da, acc);
                } else {
                    const int32_t S = kType == TensorType::Q4_0
                                          ? sums_b32(x + 2, q, [](int v) { return v - 8; })
                                          : sums_b32(x + 2, q, [](int v) { return int(kValuesIQ4NL[v]); });
                    uint16_t d;
                    std::memcpy(&d, x, 2);
                    acc = std::fma(static_cast<float>(S), fp16_to_fp32(d) * da, acc);
                }
            }
            if constexpr (kType == TensorType::Q8_0)  // as the AVX2 vec_dot kernel's hsum
                acc = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
            out[j * ld + i] = acc - accm;
        }
    }
}

template <TensorType kType>
detail::PackedKernel scalar_tile_for(int rows) {
    switch (rows) {
        case 1: return {scalar_tile<kType, 1>, 1};
        case 2: return {scalar_tile<kType, 2>, 2};
        case 3: return {scalar_tile<kType, 3>, 3};
        default: return {scalar_tile<kType, 4>, 4};
    }
}

[[noreturn]] void unsupported(TensorType t) {
    throw std::invalid_argument("gemm: no kernels for type " + std::string(gguf::type_name(t)));
}

detail::PackedKernel packed_kernel(Isa isa, TensorType w, int max_rows) {
#ifdef ZINC_GEMM_X86
    if (isa == Isa::avx512) return detail::avx512_packed_kernel(w, max_rows);
    if (isa == Isa::avx2) return detail::avx2_packed_kernel(w, max_rows);
#endif
    (void)isa;
    return detail::scalar_packed_kernel(w, max_rows);
}

// The activation rows j0 … j0 + n − 1 of `rows`, with the sums the kernels of weight type w read.
ActRefs act_refs(const PackedActs& a, const ActRows& rows, int64_t j0, int n, TensorType w) {
    ActRefs r{};
    for (int k = 0; k < n; ++k) {
        const int64_t t = rows.list ? rows.list[rows.first + j0 + k] : rows.first + j0 + k;
        r.q[k] = a.q(t);
        r.d[k] = a.d(t);
        const bool by16 = w == TensorType::Q6_K || w == TensorType::Q2_K || w == TensorType::Q3_K;
        r.s[k] = by16 ? a.sum16(t) : a.sum32(t);
        r.c[k] = w == TensorType::Q8_0 ? a.offset4(t) : nullptr;
    }
    return r;
}

}  // namespace

namespace detail {

PackedKernel scalar_packed_kernel(TensorType w, int max_rows) {
    switch (w) {
        case TensorType::Q4_0: return scalar_tile_for<TensorType::Q4_0>(max_rows);
        case TensorType::IQ4_NL: return scalar_tile_for<TensorType::IQ4_NL>(max_rows);
        case TensorType::MXFP4: return scalar_tile_for<TensorType::MXFP4>(max_rows);
        case TensorType::Q4_K: return scalar_tile_for<TensorType::Q4_K>(max_rows);
        case TensorType::Q5_K: return scalar_tile_for<TensorType::Q5_K>(max_rows);
        case TensorType::Q6_K: return scalar_tile_for<TensorType::Q6_K>(max_rows);
        case TensorType::IQ4_XS: return scalar_tile_for<TensorType::IQ4_XS>(max_rows);
        case TensorType::Q8_0: return scalar_tile_for<TensorType::Q8_0>(max_rows);
        case TensorType::Q2_K: return scalar_tile_for<TensorType::Q2_K>(max_rows);
        case TensorType::Q3_K: return scalar_tile_for<TensorType::Q3_K>(max_rows);
        default: return {};
    }
}

}  // namespace detail

void PackedActs::reset(TensorType w, int64_t rows, int64_t cols) {
    if (!can_repack(w)) unsupported(w);
    type_ = vec_dot_type(w);
    block_ = type_ == TensorType::Q8_K ? kQK_K : kQK;
    if (cols % block_ != 0) throw std::invalid_argument("gemm: a row is not a whole number of activation blocks");
    rows_ = rows;
    cols_ = cols;
    const auto grow = [](auto& v, int64_t n) {
        if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
    };
    grow(q_, rows * cols);
    grow(d_, rows * (cols / block_));
    grow(s32_, rows * (cols / 32));
    if (type_ == TensorType::Q8_K) grow(s16_, rows * (cols / 16));
    if (type_ == TensorType::Q8_0) grow(c4_, rows * (cols / 4));
}

void PackedActs::quantize(const float* x, int64_t r0, int64_t r1) {
    const int64_t nb = cols_ / block_;
    if (type_ == TensorType::Q8_K) {
        thread_local std::vector<BlockQ8_K> blocks;  // kept from call to call
        blocks.resize(static_cast<size_t>(nb));
        for (int64_t t = r0; t < r1; ++t) {
            quantize_activation(TensorType::Q8_K, x + t * cols_, blocks.data(), static_cast<size_t>(cols_));
            for (int64_t b = 0; b < nb; ++b) {
                const BlockQ8_K& y = blocks[static_cast<size_t>(b)];
                std::memcpy(q_.data() + t * cols_ + b * kQK_K, y.qs, kQK_K);
                d_[static_cast<size_t>(t * nb + b)] = y.d;
                int16_t* s16 = s16_.data() + t * (cols_ / 16) + 16 * b;
                int16_t* s32 = s32_.data() + t * (cols_ / 32) + 8 * b;
                for (int k = 0; k < 16; ++k) s16[k] = y.bsums[k];
                for (int k = 0; k < 8; ++k) s32[k] = static_cast<int16_t>(y.bsums[2 * k] + y.bsums[2 * k + 1]);
            }
        }
        return;
    }
    thread_local std::vector<BlockQ8_0> blocks;
    blocks.resize(static_cast<size_t>(nb));
    for (int64_t t = r0; t < r1; ++t) {
        quantize_activation(TensorType::Q8_0, x + t * cols_, blocks.data(), static_cast<size_t>(cols_));
        for (int64_t b = 0; b < nb; ++b) {
            const BlockQ8_0& y = blocks[static_cast<size_t>(b)];
            std::memcpy(q_.data() + t * cols_ + b * kQK, y.qs, kQK);
            d_[static_cast<size_t>(t * nb + b)] = fp16_to_fp32(y.d);
            int s = 0;
            for (int k = 0; k < kQK; ++k) s += y.qs[k];
            s32_[static_cast<size_t>(t * nb + b)] = static_cast<int16_t>(s);
            int32_t* c4 = c4_.data() + t * (cols_ / 4) + 8 * b;
            for (int g = 0; g < 8; ++g) c4[g] = -128 * (y.qs[4 * g] + y.qs[4 * g + 1] + y.qs[4 * g + 2] + y.qs[4 * g + 3]);
        }
    }
}

void gemm_packed(Isa isa, TensorType w, const void* packed, int64_t cols, int64_t tile0, int64_t tile1,
                 const PackedActs& a, ActRows rows, float* out, int64_t ld) {
    const int64_t n = rows.n;
    if (!can_repack(w)) unsupported(w);
    const size_t tile_bytes = kPackRows * gguf::row_bytes(w, static_cast<size_t>(cols));
    for (int64_t j0 = 0; j0 < n;) {
        const detail::PackedKernel k = packed_kernel(isa, w, static_cast<int>(std::min<int64_t>(n - j0, kMaxActRows)));
        if (!k.fn) unsupported(w);
        const ActRefs refs = act_refs(a, rows, j0, k.rows, w);
        for (int64_t tile = tile0; tile < tile1; ++tile)
            k.fn(static_cast<const uint8_t*>(packed) + static_cast<size_t>(tile) * tile_bytes, cols, refs,
                 out + j0 * ld + tile * kPackRows, ld);
        j0 += k.rows;
    }
}

}  // namespace zinc::backend::cpu
