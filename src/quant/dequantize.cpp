
#include "quant/dequantize.h"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "quant/blocks.h"
#include "quant/float_convert.h"
#include "quant/quant_internal.h"

// The element formulas and their evaluation order follow docs/formats.md §2.3–§2.5; every product and sum is one
// binary32 operation, in the order written, so the results equal ggml's reference bit for bit.

namespace zinc::quant {
namespace {

using gguf::TensorType;

template <typename Block>
const Block* blocks_of(const void* src) {
    return static_cast<const Block*>(src);
}

void dequant_q4_0(const void* src, float* y, size_t nb) {
    const auto* x = blocks_of<BlockQ4_0>(src);
    for (size_t i = 0; i < nb; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < kQK / 2; ++j) {
            const int lo = (x[i].qs[j] & 0x0F) - 8;
            const int hi = (x[i].qs[j] >> 4) - 8;
            y[j] = static_cast<float>(lo) * d;
            y[j + kQK / 2] = static_cast<float>(hi) * d;
        }
    }
}

void dequant_q4_1(const void* src, float* y, size_t nb) {
    const auto* x = blocks_of<BlockQ4_1>(src);
    for (size_t i = 0; i < nb; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        for (int j = 0; j < kQK / 2; ++j) {
            const float lo = static_cast<float>(x[i].qs[j] & 0x0F) * d;
            const float hi = static_cast<float>(x[i].qs[j] >> 4) * d;
            y[j] = lo + m;
            y[j + kQK / 2] = hi + m;
        }
    }
}

uint32_t load_u32(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
           static_cast<uint32_t>(p[3]) << 24;
}

void dequant_q5_0(const void* src, float* y, size_t nb) {
    const auto* x = blocks_of<BlockQ5_0>(src);
    for (size_t i = 0; i < nb; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        const uint32_t qh = load_u32(x[i].qh);
        for (int j = 0; j < kQK / 2; ++j) {
            const int lo = ((x[i].qs[j] & 0x0F) | (((qh >> j) & 1u) << 4)) - 16;
            const int hi = ((x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - 16;
            y[j] = static_cast<float>(lo) * d;
            y[j + kQK / 2] = static_cast<float>(hi) * d;
        }
    }
}

void dequant_q5_1(const void* src, float* y, size_t nb) {
    const auto* x = blocks_of<BlockQ5_1>(src);
    for (size_t i = 0; i < nb; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        const uint32_t qh = load_u32(x[i].qh);
        for (int j = 0; j < kQK / 2; ++j) {
            const int lo = (x[i].qs[j] & 0x0F) | (((qh >> j) & 1u) << 4);
            const int hi = (x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4);
            const float lo_d = static_cast<float>(lo) * d;
            const float hi_d = static_cast<float>(hi) * d;
            y[j] = lo_d + m;
            y[j + kQK / 2] = hi_d + m;
        }
    }
}

void dequant_q8_0(const void* src, float* y, size_t nb) {
    const auto* x = blocks_of<BlockQ8_0>(src);
    for (size_t i = 0; i < nb; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
    }
}

void dequant_q8_1(const void* src, float* y, size_t nb) {
    const auto* x = blocks_of<BlockQ8_1>(src);
    for (size_t i = 0; i < nb; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
    }
}

void dequant_q2_K(const void* src, float* y, size_t nb) {
    const auto* x = blocks_of<BlockQ2_K>(src);
    for (size_t i = 0; i < nb; ++i, y += kQK_K) {
        const float d = fp16_to_fp32(x[i].d);
        const float dmin = fp16_to_fp32(x[i].dmin);
        for (int e = 0; e < kQK_K; ++e) {
            const int q = (x[i].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            const uint8_t sc = x[i].scales[e / 16];
            const float dl = d * static_cast<float>(sc & 0x0F);
            const float ml = dmin * static_cast<float>(sc >> 4);
            y[e] = dl * static_cast<float>(q) - ml;
        }
    }
}

void dequant_q3_K(const void* src, float* y, size_t nb) {
    const auto* x = blocks_of<BlockQ3_K>(src);
    for (size_t i = 0; i < nb; ++i, y += kQK_K) {
        const float d = fp16_to_fp32(x[i].d);
        int scales[16];
        for (int j = 0; j < 16; ++j) {
            const int low = j < 8 ? (x[i].scales[j] & 0x0F) : (x[i].scales[j - 8] >> 4);
            const int high = (x[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3;
            scales[j] = (low | high << 4) - 32;
        }
        for (int e = 0; e < kQK_K; ++e) {
            const int low = (x[i].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            const bool high = (x[i].hmask[e % 32] >> (e / 32)) & 1;
            const int q = low - (high ? 0 : 4);
            const float dl = d * static_cast<float>(scales[e / 16]);
            y[e] = dl * static_cast<float>(q);
        }
    }
}

void dequant_q4_K(const void* src, float* y, size_t nb) {
    const auto* x = blocks_of<BlockQ4_K>(src);
    for (size_t i = 0; i < nb; ++i, y += kQK_K) {
        const float d = fp16_to_fp32(x[i].d);
        const float dmin = fp16_to_fp32(x[i].dmin);
        for (int j = 0; j < 8; ++j) {
            int sc, m;
            detail::scale_min_k4(j, x[i].scales, sc, m);
            const float dj = d * static_cast<float>(sc);
            const float mj = dmin * static_cast<float>(m);
            const uint8_t* q = x[i].qs + 32 * (j / 2);
            const int shift = (j % 2) * 4;
            for (int l = 0; l < 32; ++l) {
                y[32 * j + l] = dj * static_cast<float>((q[l] >> shift) & 0x0F) - mj;
            }
        }
    }
}

void dequant_q5_K(const void* src, float* y, size_t nb) {
    const auto* x = blocks_of<BlockQ5_K>(src);
    for (size_t i = 0; i < nb; ++i, y += kQK_K) {
        const float d = fp16_to_fp32(x[i].d);
        const float dmin = fp16_to_fp32(x[i].dmin);
        for (int j = 0; j < 8; ++j) {
            int sc, m;
            detail::scale_min_k4(j, x[i].scales, sc, m);
            const float dj = d * static_cast<float>(sc);
            const float mj = dmin * static_cast<float>(m);
            const uint8_t* q = x[i].qs + 32 * (j / 2);
            const int shift = (j % 2) * 4;
            for (int l = 0; l < 32; ++l) {
                const int v = ((q[l] >> shift) & 0x0F) + (((x[i].qh[l] >> j) & 1) ? 16 : 0);
                y[32 * j + l] = dj * static_cast<float>(v) - mj;
            }
        }
    }
}

void dequant_q6_K(const void* src, float* y, size_t nb) {
    const auto* x = blocks_of<BlockQ6_K>(src);
    for (size_t i = 0; i < nb; ++i, y += kQK_K) {
        const float d = fp16_to_fp32(x[i].d);
        for (int e = 0; e < kQK_K; ++e) {
            const int h = e / 128, g = (e % 128) / 32, l = e % 32;
            const uint8_t lbyte = x[i].ql[64 * h + 32 * (g % 2) + l];
            const int low = g < 2 ? (lbyte & 0x0F) : (lbyte >> 4);
            const int high = (x[i].qh[32 * h + l] >> (2 * g)) & 3;
            const int q = (low | high << 4) - 32;
            const float ds = d * static_cast<float>(x[i].scales[e / 16]);
            y[e] = ds * static_cast<float>(q);
        }
    }
}

void dequant_q8_K(const void* src, float* y, size_t nb) {
    const auto* x = blocks_of<BlockQ8_K>(src);
    for (size_t i = 0; i < nb; ++i, y += kQK_K) {
        for (int e = 0; e < kQK_K; ++e) y[e] = x[i].d * static_cast<float>(x[i].qs[e]);
    }
}

void dequant_iq4_nl(const void* src, float* y, size_t nb) {
    const auto* x = blocks_of<BlockIQ4_NL>(src);
    for (size_t i = 0; i < nb; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < kQK / 2; ++j) {
            y[j] = d * static_cast<float>(kValuesIQ4NL[x[i].qs[j] & 0x0F]);
            y[j + kQK / 2] = d * static_cast<float>(kValuesIQ4NL[x[i].qs[j] >> 4]);
        }
    }
}

void dequant_iq4_xs(const void* src, float* y, size_t nb) {
    const auto* x = blocks_of<BlockIQ4_XS>(src);
    for (size_t i = 0; i < nb; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        for (int b = 0; b < kQK_K / 32; ++b, y += 32) {
            const int ls = ((x[i].scales_l[b / 2] >> (4 * (b % 2))) & 0x0F) | (((x[i].scales_h >> (2 * b)) & 3) << 4);
            const float dl = d * static_cast<float>(ls - 32);
            const uint8_t* qs = x[i].qs + 16 * b;
            for (int j = 0; j < 16; ++j) {
                y[j] = dl * static_cast<float>(kValuesIQ4NL[qs[j] & 0x0F]);
                y[j + 16] = dl * static_cast<float>(kValuesIQ4NL[qs[j] >> 4]);
            }
        }
    }
}

void dequant_mxfp4(const void* src, float* y, size_t nb) {
    const auto* x = blocks_of<BlockMXFP4>(src);
    for (size_t i = 0; i < nb; ++i, y += kQK) {
        const float d = e8m0_to_fp32_half(x[i].e);
        for (int j = 0; j < kQK / 2; ++j) {
            y[j] = static_cast<float>(kValuesFP4[x[i].qs[j] & 0x0F]) * d;
            y[j + kQK / 2] = static_cast<float>(kValuesFP4[x[i].qs[j] >> 4]) * d;
        }
    }
}

void dequant_f16(const void* src, float* y, size_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    for (size_t i = 0; i < n; ++i) {
        y[i] = fp16_to_fp32(static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
    }
}

void dequant_bf16(const void* src, float* y, size_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    for (size_t i = 0; i < n; ++i) {
        y[i] = bf16_to_fp32(static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
    }
}

using DequantFn = void (*)(const void*, float*, size_t);

// The block decoder of t (called with the block count), or nullptr when unsupported. Scalar types are handled
// separately.
DequantFn block_decoder(TensorType t) {
    switch (t) {
        case TensorType::Q4_0: return dequant_q4_0;
        case TensorType::Q4_1: return dequant_q4_1;
        case TensorType::Q5_0: return dequant_q5_0;
        case TensorType::Q5_1: return dequant_q5_1;
        case TensorType::Q8_0: return dequant_q8_0;
        case TensorType::Q8_1: return dequant_q8_1;
        case TensorType::Q2_K: return dequant_q2_K;
        case TensorType::Q3_K: return dequant_q3_K;
        case TensorType::Q4_K: return dequant_q4_K;
        case TensorType::Q5_K: return dequant_q5_K;
        case TensorType::Q6_K: return dequant_q6_K;
        case TensorType::Q8_K: return dequant_q8_K;
        case TensorType::IQ4_NL: return dequant_iq4_nl;
        case TensorType::IQ4_XS: return dequant_iq4_xs;
        case TensorType::MXFP4: return dequant_mxfp4;
        default: return nullptr;
    }
}

}  // namespace

bool can_dequantize(TensorType t) {
    return t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16 || block_decoder(t) != nullptr;
}

void dequantize_row(TensorType t, const void* src, float* dst, size_t n) {
    if (!can_dequantize(t)) {
        throw std::invalid_argument("dequantize_row: unsupported tensor type " + std::string(gguf::type_name(t)));
    }
    const gguf::TypeTraits& tt = gguf::traits(t);
    if (n % tt.block_elems != 0) {
        throw std::invalid_argument("dequantize_row: " + std::to_string(n) + " elements is not a whole number of " +
                                    std::string(tt.name) + " blocks");
    }
    switch (t) {
        case TensorType::F32: std::memcpy(dst, src, n * sizeof(float)); return;
        case TensorType::F16: dequant_f16(src, dst, n); return;
        case TensorType::BF16: dequant_bf16(src, dst, n); return;
        default: block_decoder(t)(src, dst, n / tt.block_elems); return;
    }
}

}  // namespace zinc::quant
