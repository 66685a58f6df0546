// IQ4_NL and IQ4_XS quantizers as llama-quantize runs them without an importance matrix (docs/formats.md §2.7.12):
// ggml's quantize_iq4_nl / quantize_iq4_xs with a null imatrix (7 trial scales either side of the initial one).


#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/blocks.h"
#include "quant/float_convert.h"
#include "quant/quant_internal.h"

namespace zinc::quant::detail {
namespace {

constexpr float kGroupMaxEps = 1e-15f;
constexpr int kTrials = 7;

// Index of the kValuesIQ4NL entry nearest to x by bisection; an exact midpoint goes to the upper entry and values
// beyond the ends clamp to them.
int best_index_iq4(float x) {
    const int8_t* v = kValuesIQ4NL;
    if (x <= v[0]) return 0;
    if (x >= v[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < v[mid]) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

// Least-squares scale of one 32-element block against the table with weights x^2, searching 2*kTrials+1 trial
// inverse scales around -127/max. Returns 0 for a block with all |x| < 1e-15.
float iq4_block_scale(const float* xb) {
    float weight[32];
    for (int j = 0; j < 32; ++j) weight[j] = xb[j] * xb[j];
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
        const float ax = std::fabs(xb[j]);
        if (ax > amax) {
            amax = ax;
            max = xb[j];
        }
    }
    if (amax < kGroupMaxEps) return 0.0f;
    const float v0 = static_cast<float>(kValuesIQ4NL[0]);
    float d = -max / v0;
    float id = 1.0f / d;
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < 32; ++j) {
        const float q = static_cast<float>(kValuesIQ4NL[best_index_iq4(id * xb[j])]);
        const float w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
    float best = d * sumqx;
    for (int itry = -kTrials; itry <= kTrials; ++itry) {
        id = static_cast<float>(itry + kValuesIQ4NL[0]) / max;
        sumqx = sumq2 = 0.0f;
        for (int j = 0; j < 32; ++j) {
            const float q = static_cast<float>(kValuesIQ4NL[best_index_iq4(id * xb[j])]);
            const float w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

// Packs 32 level indices into 16 bytes, Q4_0 nibble order.
void pack_nibbles(const uint8_t* L, uint8_t* qs) {
    for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[16 + j] << 4));
}

}  // namespace

void quantize_iq4_nl(const float* x, void* dst, size_t nb) {
    auto* y = static_cast<BlockIQ4_NL*>(dst);
    uint8_t L[32];
    for (size_t i = 0; i < nb; ++i, x += 32) {
        const float d = iq4_block_scale(x);
        y[i].d = fp32_to_fp16(d);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(best_index_iq4(id * x[j]));
        pack_nibbles(L, y[i].qs);
    }
}

void quantize_iq4_xs(const float* x, void* dst, size_t nb) {
    auto* y = static_cast<BlockIQ4_XS*>(dst);
    float scales[8];
    uint8_t L[32];
    for (size_t i = 0; i < nb; ++i, x += kQK_K) {
        float max_scale = 0.0f, amax_scale = 0.0f;
        for (int b = 0; b < 8; ++b) {
            scales[b] = iq4_block_scale(x + 32 * b);
            const float abs_d = std::fabs(scales[b]);
            if (abs_d > amax_scale) {
                amax_scale = abs_d;
                max_scale = scales[b];
            }
        }
        const float d = -max_scale / 32.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].scales_h = 0;
        std::memset(y[i].scales_l, 0, sizeof(y[i].scales_l));
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int b = 0; b < 8; ++b) {
            int l = nearest_int(id * scales[b]);
            l = l < -32 ? -32 : (l > 31 ? 31 : l);
            const float dl = d * static_cast<float>(l);
            const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
            const float* xb = x + 32 * b;
            for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(best_index_iq4(idl * xb[j]));
            pack_nibbles(L, y[i].qs + 16 * b);
            l += 32;
            y[i].scales_l[b / 2] |= static_cast<uint8_t>((l & 0x0F) << (4 * (b % 2)));
            y[i].scales_h = static_cast<uint16_t>(y[i].scales_h | ((l >> 4) << (2 * b)));
        }
    }
}

}  // namespace zinc::quant::detail
