// Activation quantization for the integer dot products and the scalar reference kernels (docs/formats.md §2.8, §3).
// The kernels follow ggml's generic formulation: exact integer sums per (sub-)block, then one float multiply-add per
// block into a float accumulator (or eight lanes for the K-quants), in ggml's order.
#include "backend/cpu/vec_dot.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "quant/activation.h"
#include "quant/blocks.h"
#include "backend/cpu/cpu_features.h"
#include "quant/float_convert.h"
#include "quant/quant_internal.h"
#include "backend/cpu/vec_dot_internal.h"

namespace zinc::backend::cpu {

using namespace zinc::quant;  // the block formats

namespace {

using gguf::TensorType;

[[noreturn]] void unsupported(const char* what, TensorType t) {
    throw std::invalid_argument(std::string(what) + ": unsupported type " + std::string(gguf::type_name(t)));
}

// x86 cvtps2dq after roundps(nearest): ties to even, INT32_MIN for NaN and out-of-range values; then the signed
// saturation of packs_epi32 / packs_epi16 down to int8.
int8_t round_even_to_i8(float v) {
    int32_t i;
    if (!(v >= -2147483648.0f && v < 2147483648.0f)) {
        i = INT32_MIN;
    } else {
        i = static_cast<int32_t>(std::nearbyint(v));
    }
    return static_cast<int8_t>(i < -128 ? -128 : i > 127 ? 127 : i);
}

// One 32-element block as ggml-cpu's x86 quantize_row_q8_0 / q8_1: returns d and writes the quants.
float quantize_block_x86(const float* x, int8_t* q) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) {
        const float a = std::fabs(x[j]);
        amax = amax > a ? amax : a;  // maxps: keeps the first operand unless the second is larger
    }
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < kQK; ++j) q[j] = round_even_to_i8(x[j] * id);
    return d;
}

void quantize_q8_0_scalar(const float* x, void* dst, size_t n) {
    auto* y = static_cast<BlockQ8_0*>(dst);
    for (size_t i = 0; i < n / kQK; ++i, x += kQK) y[i].d = fp32_to_fp16(quantize_block_x86(x, y[i].qs));
}

void quantize_q8_1_scalar(const float* x, void* dst, size_t n) {
    auto* y = static_cast<BlockQ8_1*>(dst);
    for (size_t i = 0; i < n / kQK; ++i, x += kQK) {
        const float d = quantize_block_x86(x, y[i].qs);
        int sum = 0;
        for (int j = 0; j < kQK; ++j) sum += y[i].qs[j];
        y[i].d = fp32_to_fp16(d);
        y[i].s = fp32_to_fp16(d * static_cast<float>(sum));
    }
}

// ---- scalar reference kernels ----

template <class B>
const B* blocks(const void* p) {
    return static_cast<const B*>(p);
}

float dot_f32(const void* w, const void* a, size_t n) {
    const float* x = static_cast<const float*>(w);
    const float* y = static_cast<const float*>(a);
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += static_cast<double>(x[i] * y[i]);
    return static_cast<float>(s);
}

float dot_f16(const void* w, const void* a, size_t n) {
    const uint16_t* x = static_cast<const uint16_t*>(w);
    const uint16_t* y = static_cast<const uint16_t*>(a);
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += static_cast<double>(fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]));
    return static_cast<float>(s);
}

float dot_bf16(const void* w, const void* a, size_t n) {
    const uint16_t* x = static_cast<const uint16_t*>(w);
    const uint16_t* y = static_cast<const uint16_t*>(a);
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += static_cast<double>(bf16_to_fp32(x[i]) * bf16_to_fp32(y[i]));
    return static_cast<float>(s);
}

float dot_q4_0(const void* w, const void* a, size_t n) {
    const auto* x = blocks<BlockQ4_0>(w);
    const auto* y = blocks<BlockQ8_0>(a);
    float sumf = 0;
    for (size_t ib = 0; ib < n / kQK; ++ib) {
        int s0 = 0, s1 = 0;
        for (int j = 0; j < kQK / 2; ++j) {
            s0 += ((x[ib].qs[j] & 0x0F) - 8) * y[ib].qs[j];
            s1 += ((x[ib].qs[j] >> 4) - 8) * y[ib].qs[j + kQK / 2];
        }
        sumf += static_cast<float>(s0 + s1) * fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d);
    }
    return sumf;
}

float dot_q4_1(const void* w, const void* a, size_t n) {
    const auto* x = blocks<BlockQ4_1>(w);
    const auto* y = blocks<BlockQ8_1>(a);
    float sumf = 0;
    for (size_t ib = 0; ib < n / kQK; ++ib) {
        int s0 = 0, s1 = 0;
        for (int j = 0; j < kQK / 2; ++j) {
            s0 += (x[ib].qs[j] & 0x0F) * y[ib].qs[j];
            s1 += (x[ib].qs[j] >> 4) * y[ib].qs[j + kQK / 2];
        }
        sumf += (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d)) * static_cast<float>(s0 + s1) +
                fp16_to_fp32(x[ib].m) * fp16_to_fp32(y[ib].s);
    }
    return sumf;
}

float dot_q5_0(const void* w, const void* a, size_t n) {
    const auto* x = blocks<BlockQ5_0>(w);
    const auto* y = blocks<BlockQ8_0>(a);
    float sumf = 0;
    for (size_t ib = 0; ib < n / kQK; ++ib) {
        uint32_t qh;
        std::memcpy(&qh, x[ib].qh, sizeof(qh));
        int s0 = 0, s1 = 0;
        for (int j = 0; j < kQK / 2; ++j) {
            const int h0 = ((qh >> j) & 1) << 4, h1 = ((qh >> (j + 16)) & 1) << 4;
            s0 += (((x[ib].qs[j] & 0x0F) | h0) - 16) * y[ib].qs[j];
            s1 += (((x[ib].qs[j] >> 4) | h1) - 16) * y[ib].qs[j + kQK / 2];
        }
        sumf += (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d)) * static_cast<float>(s0 + s1);
    }
    return sumf;
}

float dot_q5_1(const void* w, const void* a, size_t n) {
    const auto* x = blocks<BlockQ5_1>(w);
    const auto* y = blocks<BlockQ8_1>(a);
    float sumf = 0;
    for (size_t ib = 0; ib < n / kQK; ++ib) {
        uint32_t qh;
        std::memcpy(&qh, x[ib].qh, sizeof(qh));
        int s0 = 0, s1 = 0;
        for (int j = 0; j < kQK / 2; ++j) {
            const int h0 = ((qh >> j) & 1) << 4, h1 = ((qh >> (j + 16)) & 1) << 4;
            s0 += ((x[ib].qs[j] & 0x0F) | h0) * y[ib].qs[j];
            s1 += ((x[ib].qs[j] >> 4) | h1) * y[ib].qs[j + kQK / 2];
        }
        sumf += (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d)) * static_cast<float>(s0 + s1) +
                fp16_to_fp32(x[ib].m) * fp16_to_fp32(y[ib].s);
    }
    return sumf;
}

float dot_q8_0(const void* w, const void* a, size_t n) {
    const auto* x = blocks<BlockQ8_0>(w);
    const auto* y = blocks<BlockQ8_0>(a);
    float sumf = 0;
    for (size_t ib = 0; ib < n / kQK; ++ib) {
        int s = 0;
        for (int j = 0; j < kQK; ++j) s += x[ib].qs[j] * y[ib].qs[j];
        sumf += static_cast<float>(s) * (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d));
    }
    return sumf;
}

// Symmetric 4-bit table formats (IQ4_NL: f16 scale; MXFP4: E8M0 exponent with the doubled table).
float dot_iq4_nl(const void* w, const void* a, size_t n) {
    const auto* x = blocks<BlockIQ4_NL>(w);
    const auto* y = blocks<BlockQ8_0>(a);
    float sumf = 0;
    for (size_t ib = 0; ib < n / kQK; ++ib) {
        const float d = fp16_to_fp32(y[ib].d) * fp16_to_fp32(x[ib].d);
        int s1 = 0, s2 = 0;
        for (int j = 0; j < kQK / 2; ++j) {
            s1 += y[ib].qs[j] * kValuesIQ4NL[x[ib].qs[j] & 0xF];
            s2 += y[ib].qs[j + kQK / 2] * kValuesIQ4NL[x[ib].qs[j] >> 4];
        }
        sumf += d * static_cast<float>(s1 + s2);
    }
    return sumf;
}

float dot_mxfp4(const void* w, const void* a, size_t n) {
    const auto* x = blocks<BlockMXFP4>(w);
    const auto* y = blocks<BlockQ8_0>(a);
    float sumf = 0;
    for (size_t ib = 0; ib < n / kQK; ++ib) {
        const float d = fp16_to_fp32(y[ib].d) * e8m0_to_fp32_half(x[ib].e);
        int s1 = 0, s2 = 0;
        for (int j = 0; j < kQK / 2; ++j) {
            s1 += y[ib].qs[j] * kValuesFP4[x[ib].qs[j] & 0xF];
            s2 += y[ib].qs[j + kQK / 2] * kValuesFP4[x[ib].qs[j] >> 4];
        }
        sumf += d * static_cast<float>(s1 + s2);
    }
    return sumf;
}

float dot_q2_K(const void* w, const void* a, size_t n) {
    const auto* x = blocks<BlockQ2_K>(w);
    const auto* y = blocks<BlockQ8_K>(a);
    float sumf = 0;
    for (size_t i = 0; i < n / kQK_K; ++i) {
        const uint8_t* q2 = x[i].qs;
        const int8_t* q8 = y[i].qs;
        const uint8_t* sc = x[i].scales;
        int summs = 0;
        for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (sc[j] >> 4);
        const float dall = y[i].d * fp16_to_fp32(x[i].d);
        const float dmin = y[i].d * fp16_to_fp32(x[i].dmin);
        int isum = 0, is = 0;
        for (int k = 0; k < kQK_K / 128; ++k) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; ++half) {
                    const int d = sc[is++] & 0xF;
                    int isuml = 0;
                    for (int l = 16 * half; l < 16 * half + 16; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
                    isum += d * isuml;
                }
                q8 += 32;
            }
            q2 += 32;
        }
        sumf += dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
    }
    return sumf;
}

// The eight-lane accumulation of ggml's generic Q3_K…Q6_K kernels: element e of a 256 super-block goes to lane e % 8
// (scaled by its sub-block scale), each lane is scaled by d·d_y in float, and the lanes are summed at the end.
struct Lanes8 {
    float sums[8] = {};
    int32_t aux[8] = {};
    void add(const int8_t* q8, const int8_t* a, int scale, int count) {
        for (int e = 0; e < count; ++e) aux[e % 8] += scale * (q8[e] * a[e]);
    }
    void flush(float d) {
        for (int l = 0; l < 8; ++l) {
            sums[l] += d * static_cast<float>(aux[l]);
            aux[l] = 0;
        }
    }
    float total(float start) const {
        for (int l = 0; l < 8; ++l) start += sums[l];
        return start;
    }
};

float dot_q3_K(const void* w, const void* a, size_t n) {
    const auto* x = blocks<BlockQ3_K>(w);
    const auto* y = blocks<BlockQ8_K>(a);
    Lanes8 acc;
    for (size_t i = 0; i < n / kQK_K; ++i) {
        int8_t q[kQK_K];
        const uint8_t* q3 = x[i].qs;
        const uint8_t* hm = x[i].hmask;
        int8_t* p = q;
        uint8_t m = 1;
        for (int j = 0; j < kQK_K; j += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int l = 0; l < 32; ++l) p[l] = static_cast<int8_t>(((q3[l] >> shift) & 3) - (hm[l] & m ? 0 : 4));
                p += 32;
                m = static_cast<uint8_t>(m << 1);
            }
            q3 += 32;
        }
        // 16 six-bit scales: low nibbles from bytes 0..7, high two bits from bytes 8..11.
        int8_t scales[16];
        const uint8_t* s = x[i].scales;
        for (int j = 0; j < 16; ++j) {
            const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
            const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
            scales[j] = static_cast<int8_t>((lo | (hi << 4)) - 32);
        }
        for (int j = 0; j < kQK_K / 16; ++j) acc.add(y[i].qs + 16 * j, q + 16 * j, scales[j], 16);
        acc.flush(fp16_to_fp32(x[i].d) * y[i].d);
    }
    return acc.total(0.0f);
}

template <bool kFive>
float dot_q45_K(const void* w, const void* a, size_t n) {
    using B = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
    const auto* x = blocks<B>(w);
    const auto* y = blocks<BlockQ8_K>(a);
    Lanes8 acc;
    float sumf = 0;
    for (size_t i = 0; i < n / kQK_K; ++i) {
        int8_t q[kQK_K];
        const uint8_t* q4 = x[i].qs;
        for (int j = 0; j < kQK_K / 64; ++j) {
            for (int l = 0; l < 32; ++l) {
                int lo = q4[l] & 0xF, hi = q4[l] >> 4;
                if constexpr (kFive) {
                    lo += (x[i].qh[l] >> (2 * j)) & 1 ? 16 : 0;
                    hi += (x[i].qh[l] >> (2 * j + 1)) & 1 ? 16 : 0;
                }
                q[64 * j + l] = static_cast<int8_t>(lo);
                q[64 * j + 32 + l] = static_cast<int8_t>(hi);
            }
            q4 += 32;
        }
        int sc[8], mn[8];
        for (int j = 0; j < 8; ++j) quant::detail::scale_min_k4(j, x[i].scales, sc[j], mn[j]);
        int sumi = 0;
        for (int j = 0; j < kQK_K / 16; ++j) sumi += y[i].bsums[j] * mn[j / 2];
        for (int j = 0; j < kQK_K / 32; ++j) acc.add(y[i].qs + 32 * j, q + 32 * j, sc[j], 32);
        acc.flush(fp16_to_fp32(x[i].d) * y[i].d);
        const float dmin = fp16_to_fp32(x[i].dmin) * y[i].d;
        sumf -= dmin * static_cast<float>(sumi);
    }
    return acc.total(sumf);
}

float dot_q6_K(const void* w, const void* a, size_t n) {
    const auto* x = blocks<BlockQ6_K>(w);
    const auto* y = blocks<BlockQ8_K>(a);
    Lanes8 acc;
    for (size_t i = 0; i < n / kQK_K; ++i) {
        int8_t q[kQK_K];
        const uint8_t* ql = x[i].ql;
        const uint8_t* qh = x[i].qh;
        for (int j = 0; j < kQK_K; j += 128) {
            for (int l = 0; l < 32; ++l) {
                q[j + l + 0] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                q[j + l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                q[j + l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                q[j + l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
            ql += 64;
            qh += 32;
        }
        for (int j = 0; j < kQK_K / 16; ++j) acc.add(y[i].qs + 16 * j, q + 16 * j, x[i].scales[j], 16);
        acc.flush(fp16_to_fp32(x[i].d) * y[i].d);
    }
    return acc.total(0.0f);
}

float dot_iq4_xs(const void* w, const void* a, size_t n) {
    const auto* x = blocks<BlockIQ4_XS>(w);
    const auto* y = blocks<BlockQ8_K>(a);
    float sumf = 0;
    for (size_t i = 0; i < n / kQK_K; ++i) {
        const float d4d8 = fp16_to_fp32(x[i].d) * y[i].d;
        const uint8_t* qs = x[i].qs;
        const int8_t* q8 = y[i].qs;
        for (int ib = 0; ib < kQK_K / 32; ++ib) {
            const int ls = ((x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((x[i].scales_h >> (2 * ib)) & 3) << 4);
            const float d = d4d8 * static_cast<float>(ls - 32);
            int s1 = 0, s2 = 0;
            for (int j = 0; j < 16; ++j) {
                s1 += q8[j] * kValuesIQ4NL[qs[j] & 0xF];
                s2 += q8[j + 16] * kValuesIQ4NL[qs[j] >> 4];
            }
            sumf += d * static_cast<float>(s1 + s2);
            qs += 16;
            q8 += 32;
        }
    }
    return sumf;
}

}  // namespace

bool can_vec_dot(TensorType w) {
    switch (w) {
        case TensorType::F32:
        case TensorType::F16:
        case TensorType::BF16:
        case TensorType::Q4_0:
        case TensorType::Q4_1:
        case TensorType::Q5_0:
        case TensorType::Q5_1:
        case TensorType::Q8_0:
        case TensorType::Q2_K:
        case TensorType::Q3_K:
        case TensorType::Q4_K:
        case TensorType::Q5_K:
        case TensorType::Q6_K:
        case TensorType::IQ4_NL:
        case TensorType::IQ4_XS:
        case TensorType::MXFP4: return true;
        default: return false;
    }
}

TensorType vec_dot_type(TensorType w) {
    switch (w) {
        case TensorType::F32:
        case TensorType::F16:
        case TensorType::BF16: return w;
        case TensorType::Q4_0:
        case TensorType::Q5_0:
        case TensorType::Q8_0:
        case TensorType::IQ4_NL:
        case TensorType::MXFP4: return TensorType::Q8_0;
        case TensorType::Q4_1:
        case TensorType::Q5_1: return TensorType::Q8_1;
        case TensorType::Q2_K:
        case TensorType::Q3_K:
        case TensorType::Q4_K:
        case TensorType::Q5_K:
        case TensorType::Q6_K:
        case TensorType::IQ4_XS: return TensorType::Q8_K;
        default: unsupported("vec_dot_type", w);
    }
}

void quantize_activation(TensorType dot_type, const float* x, void* dst, size_t n) {
    const auto check = [&](size_t block) {
        if (n % block != 0)
            throw std::invalid_argument("quantize_activation: n is not a whole number of " +
                                        std::string(gguf::type_name(dot_type)) + " blocks");
    };
    switch (dot_type) {
        case TensorType::F32: std::memcpy(dst, x, n * sizeof(float)); return;
        case TensorType::F16: {
            auto* y = static_cast<uint16_t*>(dst);
            for (size_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
            return;
        }
        case TensorType::BF16: {
            auto* y = static_cast<uint16_t*>(dst);
            for (size_t i = 0; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
            return;
        }
        case TensorType::Q8_0:
            check(kQK);
#ifdef ZINC_VEC_DOT_AVX2
            if (cpu_isa() >= Isa::avx2) {
                detail::avx2_quantize_q8_0(x, dst, n);
                return;
            }
#endif
            quantize_q8_0_scalar(x, dst, n);
            return;
        case TensorType::Q8_1:
            check(kQK);
#ifdef ZINC_VEC_DOT_AVX2
            if (cpu_isa() >= Isa::avx2) {
                detail::avx2_quantize_q8_1(x, dst, n);
                return;
            }
#endif
            quantize_q8_1_scalar(x, dst, n);
            return;
        case TensorType::Q8_K:
            check(kQK_K);
#ifdef ZINC_VEC_DOT_AVX2
            if (cpu_isa() >= Isa::avx2) {
                detail::avx2_quantize_q8_K(x, dst, n);
                return;
            }
#endif
            quantize_row_q8_K(x, dst, n);
            return;
        default: unsupported("quantize_activation", dot_type);
    }
}

namespace detail {
// The scalar Q8_0 / Q8_1 activation quantizers, for the tests of the AVX2 ones.
void scalar_quantize_q8_0(const float* x, void* dst, size_t n) { quantize_q8_0_scalar(x, dst, n); }
void scalar_quantize_q8_1(const float* x, void* dst, size_t n) { quantize_q8_1_scalar(x, dst, n); }
}  // namespace detail

namespace ref {

VecDotFn vec_dot_fn(TensorType w) {
    switch (w) {
        case TensorType::F32: return dot_f32;
        case TensorType::F16: return dot_f16;
        case TensorType::BF16: return dot_bf16;
        case TensorType::Q4_0: return dot_q4_0;
        case TensorType::Q4_1: return dot_q4_1;
        case TensorType::Q5_0: return dot_q5_0;
        case TensorType::Q5_1: return dot_q5_1;
        case TensorType::Q8_0: return dot_q8_0;
        case TensorType::Q2_K: return dot_q2_K;
        case TensorType::Q3_K: return dot_q3_K;
        case TensorType::Q4_K: return dot_q45_K<false>;
        case TensorType::Q5_K: return dot_q45_K<true>;
        case TensorType::Q6_K: return dot_q6_K;
        case TensorType::IQ4_NL: return dot_iq4_nl;
        case TensorType::IQ4_XS: return dot_iq4_xs;
        case TensorType::MXFP4: return dot_mxfp4;
        default: unsupported("vec_dot", w);
    }
}

float vec_dot(TensorType w, const void* wrow, const void* arow, size_t n) { return vec_dot_fn(w)(wrow, arow, n); }

}  // namespace ref

VecDotFn vec_dot_fn(TensorType w) {
#ifdef ZINC_VEC_DOT_AVX2
    if (cpu_isa() >= Isa::avx2)
        if (VecDotFn f = detail::avx2_vec_dot_fn(w)) return f;
#endif
    return ref::vec_dot_fn(w);
}

VecDotTile vec_dot_tile(TensorType w) {
#ifdef ZINC_VEC_DOT_AVX2
    return cpu_isa() >= Isa::avx2 ? detail::avx2_vec_dot_tile(w) : VecDotTile{};
#else
    (void)w;
    return {};
#endif
}

bool vec_dot_has_simd(TensorType w) {
#ifdef ZINC_VEC_DOT_AVX2
    return cpu_isa() >= Isa::avx2 && detail::avx2_vec_dot_fn(w) != nullptr;
#else
    (void)w;
    return false;
#endif
}

float vec_dot(TensorType w, const void* wrow, const void* arow, size_t n) { return vec_dot_fn(w)(wrow, arow, n); }

}  // namespace zinc::backend::cpu
