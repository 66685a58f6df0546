
#include "quant/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "quant/activation.h"
#include "quant/blocks.h"
#include "quant/float_convert.h"
#include "quant/quant_internal.h"

// Reference quantizers of the 32-element formats and the scalar types (docs/formats.md §2.7.2–§2.7.4, §2.7.12).
// Every expression is evaluated in binary32 in the same order as ggml's reference, one rounding per operation.

namespace zinc::quant {
namespace detail {

int32_t round_to_int(float v) {
    return trunc_to_int(std::round(v));
}

}  // namespace detail

namespace {

using detail::trunc_to_int;
using gguf::TensorType;

// The value of largest magnitude in x[0..n), the first one winning ties (0 when all are zero).
float signed_max(const float* x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; ++j) {
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    return max;
}

void quantize_q4_0(const float* x, void* dst, size_t nb) {
    auto* y = static_cast<BlockQ4_0*>(dst);
    for (size_t i = 0; i < nb; ++i, x += kQK) {
        const float max = signed_max(x, kQK);
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < kQK / 2; ++j) {
            const int8_t q0 = static_cast<int8_t>(trunc_to_int(x[j] * id + 8.5f));
            const int8_t q1 = static_cast<int8_t>(trunc_to_int(x[j + kQK / 2] * id + 8.5f));
            const uint8_t lo = static_cast<uint8_t>(std::min<int>(15, q0));
            const uint8_t hi = static_cast<uint8_t>(std::min<int>(15, q1));
            y[i].qs[j] = static_cast<uint8_t>(lo | hi << 4);
        }
    }
}

// Smallest and largest value of x[0..n), starting from +-FLT_MAX as ggml does.
void min_max(const float* x, int n, float& min, float& max) {
    min = 3.40282347e+38f;
    max = -3.40282347e+38f;
    for (int j = 0; j < n; ++j) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
}

void quantize_q4_1(const float* x, void* dst, size_t nb) {
    auto* y = static_cast<BlockQ4_1*>(dst);
    for (size_t i = 0; i < nb; ++i, x += kQK) {
        float min, max;
        min_max(x, kQK, min, max);
        const float d = (max - min) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(min);
        for (int j = 0; j < kQK / 2; ++j) {
            const int8_t q0 = static_cast<int8_t>(trunc_to_int((x[j] - min) * id + 0.5f));
            const int8_t q1 = static_cast<int8_t>(trunc_to_int((x[j + kQK / 2] - min) * id + 0.5f));
            const uint8_t lo = static_cast<uint8_t>(std::min<int>(15, q0));
            const uint8_t hi = static_cast<uint8_t>(std::min<int>(15, q1));
            y[i].qs[j] = static_cast<uint8_t>(lo | hi << 4);
        }
    }
}

void store_u32(uint8_t* p, uint32_t v) {
    for (int k = 0; k < 4; ++k) p[k] = static_cast<uint8_t>(v >> (8 * k));
}

void quantize_q5_0(const float* x, void* dst, size_t nb) {
    auto* y = static_cast<BlockQ5_0*>(dst);
    for (size_t i = 0; i < nb; ++i, x += kQK) {
        const float max = signed_max(x, kQK);
        const float d = max / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < kQK / 2; ++j) {
            const int8_t q0 = static_cast<int8_t>(trunc_to_int(x[j] * id + 16.5f));
            const int8_t q1 = static_cast<int8_t>(trunc_to_int(x[j + kQK / 2] * id + 16.5f));
            const uint8_t lo = static_cast<uint8_t>(std::min<int>(31, q0));
            const uint8_t hi = static_cast<uint8_t>(std::min<int>(31, q1));
            y[i].qs[j] = static_cast<uint8_t>((lo & 0x0F) | (hi & 0x0F) << 4);
            qh |= static_cast<uint32_t>((lo >> 4) & 1) << j;
            qh |= static_cast<uint32_t>((hi >> 4) & 1) << (j + kQK / 2);
        }
        store_u32(y[i].qh, qh);
    }
}

void quantize_q5_1(const float* x, void* dst, size_t nb) {
    auto* y = static_cast<BlockQ5_1*>(dst);
    for (size_t i = 0; i < nb; ++i, x += kQK) {
        float min, max;
        min_max(x, kQK, min, max);
        const float d = (max - min) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < kQK / 2; ++j) {
            const uint8_t lo = static_cast<uint8_t>(trunc_to_int((x[j] - min) * id + 0.5f));
            const uint8_t hi = static_cast<uint8_t>(trunc_to_int((x[j + kQK / 2] - min) * id + 0.5f));
            y[i].qs[j] = static_cast<uint8_t>((lo & 0x0F) | (hi & 0x0F) << 4);
            qh |= static_cast<uint32_t>((lo >> 4) & 1) << j;
            qh |= static_cast<uint32_t>((hi >> 4) & 1) << (j + kQK / 2);
        }
        store_u32(y[i].qh, qh);
    }
}

void quantize_q8_0(const float* x, void* dst, size_t nb) {
    auto* y = static_cast<BlockQ8_0*>(dst);
    for (size_t i = 0; i < nb; ++i, x += kQK) {
        float amax = 0.0f;
        for (int j = 0; j < kQK; ++j) amax = amax > std::fabs(x[j]) ? amax : std::fabs(x[j]);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < kQK; ++j) y[i].qs[j] = static_cast<int8_t>(detail::round_to_int(x[j] * id));
    }
}

// Index of the table entry closest to x * 2 (kValuesFP4 is doubled), first minimum winning, by linear scan.
uint8_t best_fp4_index(float x, float d) {
    int best = 0;
    float best_err = std::fabs(static_cast<float>(kValuesFP4[0]) * d - x);
    for (int k = 1; k < 16; ++k) {
        const float err = std::fabs(static_cast<float>(kValuesFP4[k]) * d - x);
        if (err < best_err) {
            best = k;
            best_err = err;
        }
    }
    return static_cast<uint8_t>(best);
}

void quantize_mxfp4(const float* x, void* dst, size_t nb) {
    auto* y = static_cast<BlockMXFP4*>(dst);
    for (size_t i = 0; i < nb; ++i, x += kQK) {
        float amax = 0.0f;
        for (int j = 0; j < kQK; ++j) {
            if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
        }
        // floor(log2(amax)) - 2 is the exponent that maps amax into the top binade of E2M1 (4..6); +127 is the bias.
        const uint8_t e =
            amax > 0.0f ? static_cast<uint8_t>(trunc_to_int(std::floor(std::log2(amax)) - 2.0f + 127.0f)) : 0;
        const float d = e8m0_to_fp32_half(e);
        y[i].e = e;
        for (int j = 0; j < kQK / 2; ++j) {
            const uint8_t lo = best_fp4_index(x[j], d);
            const uint8_t hi = best_fp4_index(x[j + kQK / 2], d);
            y[i].qs[j] = static_cast<uint8_t>(lo | hi << 4);
        }
    }
}

void quantize_f16(const float* x, void* dst, size_t n) {
    auto* p = static_cast<uint8_t*>(dst);
    for (size_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_fp16(x[i]);
        p[2 * i] = static_cast<uint8_t>(h);
        p[2 * i + 1] = static_cast<uint8_t>(h >> 8);
    }
}

void quantize_bf16(const float* x, void* dst, size_t n) {
    auto* p = static_cast<uint8_t*>(dst);
    for (size_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_bf16(x[i]);
        p[2 * i] = static_cast<uint8_t>(h);
        p[2 * i + 1] = static_cast<uint8_t>(h >> 8);
    }
}

void quantize_q8_1_blocks(const float* x, void* dst, size_t nb) {
    quantize_row_q8_1(x, dst, nb * kQK);
}

void quantize_q8_K_blocks(const float* x, void* dst, size_t nb) {
    quantize_row_q8_K(x, dst, nb * kQK_K);
}

using QuantFn = void (*)(const float*, void*, size_t);

// The block encoder of t (called with the block count), or nullptr when unsupported.
QuantFn block_encoder(TensorType t) {
    switch (t) {
        case TensorType::Q4_0: return quantize_q4_0;
        case TensorType::Q4_1: return quantize_q4_1;
        case TensorType::Q5_0: return quantize_q5_0;
        case TensorType::Q5_1: return quantize_q5_1;
        case TensorType::Q8_0: return quantize_q8_0;
        case TensorType::Q8_1: return quantize_q8_1_blocks;
        case TensorType::Q2_K: return detail::quantize_q2_K;
        case TensorType::Q3_K: return detail::quantize_q3_K;
        case TensorType::Q4_K: return detail::quantize_q4_K;
        case TensorType::Q5_K: return detail::quantize_q5_K;
        case TensorType::Q6_K: return detail::quantize_q6_K;
        case TensorType::Q8_K: return quantize_q8_K_blocks;
        case TensorType::IQ4_NL: return detail::quantize_iq4_nl;
        case TensorType::IQ4_XS: return detail::quantize_iq4_xs;
        case TensorType::MXFP4: return quantize_mxfp4;
        default: return nullptr;
    }
}

}  // namespace

bool can_quantize(TensorType t) {
    return t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16 || block_encoder(t) != nullptr;
}

void quantize_row(TensorType t, const float* src, void* dst, size_t n) {
    if (!can_quantize(t)) {
        throw std::invalid_argument("quantize_row: unsupported tensor type " + std::string(gguf::type_name(t)));
    }
    const gguf::TypeTraits& tt = gguf::traits(t);
    if (n % tt.block_elems != 0) {
        throw std::invalid_argument("quantize_row: " + std::to_string(n) + " elements is not a whole number of " +
                                    std::string(tt.name) + " blocks");
    }
    switch (t) {
        case TensorType::F32: std::memcpy(dst, src, n * sizeof(float)); return;
        case TensorType::F16: quantize_f16(src, dst, n); return;
        case TensorType::BF16: quantize_bf16(src, dst, n); return;
        default: block_encoder(t)(src, dst, n / tt.block_elems); return;
    }
}

}  // namespace zinc::quant
