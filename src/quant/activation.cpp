
#include "quant/activation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "quant/blocks.h"
#include "quant/float_convert.h"
#include "quant/quant_internal.h"

namespace zinc::quant {

void quantize_row_q8_1(const float* src, void* dst, size_t n) {
    if (n % kQK != 0) throw std::invalid_argument("quantize_row_q8_1: n must be a multiple of 32");
    auto* y = static_cast<BlockQ8_1*>(dst);
    const float* x = src;
    for (size_t i = 0; i < n / kQK; ++i, x += kQK) {
        float amax = 0.0f;
        for (int j = 0; j < kQK; ++j) amax = amax > std::fabs(x[j]) ? amax : std::fabs(x[j]);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < kQK; ++j) {
            y[i].qs[j] = static_cast<int8_t>(detail::round_to_int(x[j] * id));
            sum += y[i].qs[j];
        }
        y[i].s = fp32_to_fp16(static_cast<float>(sum) * d);
    }
}

void quantize_row_q8_K(const float* src, void* dst, size_t n) {
    if (n % kQK_K != 0) throw std::invalid_argument("quantize_row_q8_K: n must be a multiple of 256");
    auto* y = static_cast<BlockQ8_K*>(dst);
    const float* x = src;
    for (size_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < kQK_K; ++j) {
            const float ax = std::fabs(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            std::memset(&y[i], 0, sizeof(BlockQ8_K));
            continue;
        }
        // Scaling by -127/max makes the element of largest magnitude -127, so d = 1/iscale is negative when max > 0.
        const float iscale = -127.0f / max;
        for (int j = 0; j < kQK_K; ++j) {
            y[i].qs[j] = static_cast<int8_t>(std::min(127, detail::nearest_int(iscale * x[j])));
        }
        for (int k = 0; k < kQK_K / 16; ++k) {
            int sum = 0;
            for (int j = 0; j < 16; ++j) sum += y[i].qs[16 * k + j];
            y[i].bsums[k] = static_cast<int16_t>(sum);
        }
        y[i].d = 1.0f / iscale;
    }
}

}  // namespace zinc::quant
