// Reference quantizers of the K-quant formats Q2_K…Q6_K (docs/formats.md §2.7.6–§2.7.11), without importance matrix.
// Evaluation order and float/int conversions mirror ggml's quantize_row_q*_K_ref so the output is byte-exact;
// each arithmetic expression below is written in the order ggml evaluates it.


#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/blocks.h"
#include "quant/float_convert.h"
#include "quant/quant_internal.h"

namespace zinc::quant::detail {
namespace {

constexpr float kGroupMaxEps = 1e-15f;  // below this magnitude a group is treated as all zero

// Asymmetric scale/min search (docs/formats.md §2.7.6): finds levels L in [0, nmax], a scale and the_min >= 0 with
// x ~ scale * L - the_min, minimising the weighted squared (or, with use_mad, absolute) error.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.0f;
    }
    float iscale = static_cast<float>(nmax) / (max - min);
    float scale = 1.0f / iscale;
    float best_error = 0.0f;
    for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * (x[i] - min));
        L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
        float diff = scale * static_cast<float>(L[i]) + min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = std::max(0, std::min(nmax, l));
            Laux[i] = static_cast<uint8_t>(l);
            const float w = weights[i];
            const float fl = static_cast<float>(l);
            sum_l += w * fl;
            sum_l2 += w * fl * fl;
            sum_xl += w * fl * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0.0f;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
                diff = use_mad ? std::fabs(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                std::memcpy(L, Laux, static_cast<size_t>(n));
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

// The value of largest magnitude (first wins) and that magnitude.
void signed_max(const float* x, int n, float& max, float& amax) {
    max = 0.0f;
    amax = 0.0f;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
}

// Symmetric scale search with weights x^2 (docs/formats.md §2.7.9, ggml's rmse_type 1): levels L in [0, 2*nmax), signed
// scale.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
    float max, amax;
    signed_max(x, n, max, amax);
    if (amax < kGroupMaxEps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.0f;
    }
    const float fnmax = static_cast<float>(nmax);
    float iscale = -fnmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = std::max(-nmax, std::min(nmax - 1, l));
        L[i] = static_cast<int8_t>(l + nmax);
        const float w = x[i] * x[i];
        const float fl = static_cast<float>(l);
        sumlx += w * x[i] * fl;
        suml2 += w * fl * fl;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(fnmax + 0.1f * static_cast<float>(is)) / max;
        sumlx = suml2 = 0.0f;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = std::max(-nmax, std::min(nmax - 1, l));
            const float w = x[i] * x[i];
            const float fl = static_cast<float>(l);
            sumlx += w * x[i] * fl;
            suml2 += w * fl * fl;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                const int l = nearest_int(iscale * x[i]);
                L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// Q3_K's symmetric search (docs/formats.md §2.7.11): start from -nmax/max, then up to 5 passes that move single levels
// when that improves the weighted (x^2) least-squares fit. Levels come out in [0, 2*nmax).
float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
    float max, amax;
    signed_max(x, n, max, amax);
    if (amax < kGroupMaxEps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.0f;
    }
    const float iscale = -static_cast<float>(nmax) / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = std::max(-nmax, std::min(nmax - 1, l));
        L[i] = static_cast<int8_t>(l);
        const float w = x[i] * x[i];
        const float fl = static_cast<float>(l);
        sumlx += w * x[i] * fl;
        suml2 += w * fl * fl;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            const float li = static_cast<float>(L[i]);
            float slx = sumlx - w * x[i] * li;
            if (slx > 0) {
                float sl2 = suml2 - w * li * li;
                int new_l = nearest_int(x[i] * sl2 / slx);
                new_l = std::max(-nmax, std::min(nmax - 1, new_l));
                if (new_l != L[i]) {
                    const float fl = static_cast<float>(new_l);
                    slx += w * x[i] * fl;
                    sl2 += w * fl * fl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = static_cast<int8_t>(new_l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (n_changed == 0) break;
    }
    for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Unpacks the 6-bit scale and min of sub-block j (0-7) from Q4_K/Q5_K's 12 scale bytes.
void scale_min_k4(int j, const uint8_t* s, uint8_t& sc, uint8_t& m) {
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = static_cast<uint8_t>((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
        m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

// Shared front half of Q4_K and Q5_K: per-32 scale/min search, 6-bit packing of scales and mins into `scales`,
// f16 d/dmin, and the levels re-derived from the stored values (docs/formats.md §2.7.7 steps 1-7).
void quantize_k_scales_mins(const float* x, int nmax, float rmin, int nstep, uint8_t* L, uint8_t* scales_out,
                            uint16_t& d_out, uint16_t& dmin_out) {
    float scales[8], mins[8], weights[32];
    uint8_t Laux[32];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
        const float* xb = x + 32 * j;
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; ++l) sum_x2 += xb[l] * xb[l];
        const float av_x = std::sqrt(sum_x2 / 32.0f);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xb[l]);
        scales[j] = make_qkx2_quants(32, nmax, xb, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < 8; ++j) {
        uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
        uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
        ls = std::min<uint8_t>(63, ls);
        lm = std::min<uint8_t>(63, lm);
        if (j < 4) {
            scales_out[j] = ls;
            scales_out[j + 4] = lm;
        } else {
            scales_out[j + 4] = static_cast<uint8_t>((ls & 0x0F) | ((lm & 0x0F) << 4));
            scales_out[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
            scales_out[j] |= static_cast<uint8_t>((lm >> 4) << 6);
        }
    }
    d_out = fp32_to_fp16(max_scale / 63.0f);
    dmin_out = fp32_to_fp16(max_min / 63.0f);
    const float d = fp16_to_fp32(d_out);
    const float dmin = fp16_to_fp32(dmin_out);
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        scale_min_k4(j, scales_out, sc, m);
        const float dj = d * static_cast<float>(sc);
        if (dj == 0.0f) continue;  // keep the search's levels
        const float dm = dmin * static_cast<float>(m);
        for (int ii = 0; ii < 32; ++ii) {
            const int l = nearest_int((x[32 * j + ii] + dm) / dj);
            L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
        }
    }
}

}  // namespace

void quantize_q4_K(const float* x, void* dst, size_t nb) {
    auto* y = static_cast<BlockQ4_K*>(dst);
    uint8_t L[kQK_K];
    for (size_t i = 0; i < nb; ++i, x += kQK_K) {
        quantize_k_scales_mins(x, 15, -1.0f, 20, L, y[i].scales, y[i].d, y[i].dmin);
        for (int c = 0; c < 4; ++c) {
            for (int l = 0; l < 32; ++l) {
                y[i].qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
            }
        }
    }
}

void quantize_q5_K(const float* x, void* dst, size_t nb) {
    auto* y = static_cast<BlockQ5_K*>(dst);
    uint8_t L[kQK_K];
    for (size_t i = 0; i < nb; ++i, x += kQK_K) {
        quantize_k_scales_mins(x, 31, -0.5f, 15, L, y[i].scales, y[i].d, y[i].dmin);
        std::memset(y[i].qh, 0, sizeof(y[i].qh));
        for (int c = 0; c < 4; ++c) {
            for (int l = 0; l < 32; ++l) {
                int lo = L[64 * c + l];
                int hi = L[64 * c + 32 + l];
                if (lo > 15) {
                    lo -= 16;
                    y[i].qh[l] |= static_cast<uint8_t>(1u << (2 * c));
                }
                if (hi > 15) {
                    hi -= 16;
                    y[i].qh[l] |= static_cast<uint8_t>(2u << (2 * c));
                }
                y[i].qs[32 * c + l] = static_cast<uint8_t>(lo | (hi << 4));
            }
        }
    }
}

void quantize_q6_K(const float* x, void* dst, size_t nb) {
    auto* y = static_cast<BlockQ6_K*>(dst);
    int8_t L[kQK_K];
    float scales[16];
    for (size_t i = 0; i < nb; ++i, x += kQK_K) {
        float max_scale = 0.0f, max_abs_scale = 0.0f;
        for (int ib = 0; ib < 16; ++ib) {
            scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
            const float abs_scale = std::fabs(scales[ib]);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scales[ib];
            }
        }
        if (max_abs_scale < kGroupMaxEps) {
            std::memset(&y[i], 0, sizeof(BlockQ6_K));
            continue;
        }
        const float iscale = -128.0f / max_scale;
        y[i].d = fp32_to_fp16(1.0f / iscale);
        for (int ib = 0; ib < 16; ++ib) {
            y[i].scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
        }
        const float d = fp16_to_fp32(y[i].d);
        for (int j = 0; j < 16; ++j) {
            const float dj = d * static_cast<float>(y[i].scales[j]);
            if (dj == 0.0f) continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int(x[16 * j + ii] / dj);
                L[16 * j + ii] = static_cast<int8_t>(std::max(-32, std::min(31, l)) + 32);
            }
        }
        for (int h = 0; h < 2; ++h) {
            for (int l = 0; l < 32; ++l) {
                const int base = 128 * h + l;
                const uint8_t L0 = static_cast<uint8_t>(L[base]), L1 = static_cast<uint8_t>(L[base + 32]);
                const uint8_t L2 = static_cast<uint8_t>(L[base + 64]), L3 = static_cast<uint8_t>(L[base + 96]);
                y[i].ql[64 * h + l] = static_cast<uint8_t>((L0 & 0x0F) | ((L2 & 0x0F) << 4));
                y[i].ql[64 * h + 32 + l] = static_cast<uint8_t>((L1 & 0x0F) | ((L3 & 0x0F) << 4));
                y[i].qh[32 * h + l] =
                    static_cast<uint8_t>((L0 >> 4) | ((L1 >> 4) << 2) | ((L2 >> 4) << 4) | ((L3 >> 4) << 6));
            }
        }
    }
}

void quantize_q3_K(const float* x, void* dst, size_t nb) {
    auto* y = static_cast<BlockQ3_K*>(dst);
    int8_t L[kQK_K];
    float scales[16];
    for (size_t i = 0; i < nb; ++i, x += kQK_K) {
        float max_scale = 0.0f, amax = 0.0f;
        for (int j = 0; j < 16; ++j) {
            scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
            const float scale = std::fabs(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }
        std::memset(y[i].scales, 0, sizeof(y[i].scales));
        if (max_scale != 0.0f) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < 16; ++j) {
                int8_t l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
                l = static_cast<int8_t>(std::max<int>(-32, std::min<int>(31, l)) + 32);
                if (j < 8) {
                    y[i].scales[j] = static_cast<uint8_t>(l & 0x0F);
                } else {
                    y[i].scales[j - 8] |= static_cast<uint8_t>((l & 0x0F) << 4);
                }
                l = static_cast<int8_t>(l >> 4);
                y[i].scales[j % 4 + 8] |= static_cast<uint8_t>(l << (2 * (j / 4)));
            }
            y[i].d = fp32_to_fp16(1.0f / iscale);
        } else {
            y[i].d = fp32_to_fp16(0.0f);
        }
        const float d = fp16_to_fp32(y[i].d);
        for (int j = 0; j < 16; ++j) {
            int8_t sc = static_cast<int8_t>(j < 8 ? (y[i].scales[j] & 0x0F) : (y[i].scales[j - 8] >> 4));
            sc = static_cast<int8_t>((sc | (((y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
            const float dj = d * static_cast<float>(sc);
            if (dj == 0.0f) continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int(x[16 * j + ii] / dj);
                L[16 * j + ii] = static_cast<int8_t>(std::max(-4, std::min(3, l)) + 4);
            }
        }
        // High bit of level e goes to bit e/32 of hmask[e % 32]; the low two bits to the Q2_K-style qs layout.
        std::memset(y[i].hmask, 0, sizeof(y[i].hmask));
        for (int e = 0; e < kQK_K; ++e) {
            if (L[e] > 3) {
                y[i].hmask[e % 32] |= static_cast<uint8_t>(1u << (e / 32));
                L[e] = static_cast<int8_t>(L[e] - 4);
            }
        }
        for (int h = 0; h < 2; ++h) {
            for (int l = 0; l < 32; ++l) {
                const int base = 128 * h + l;
                y[i].qs[32 * h + l] = static_cast<uint8_t>(L[base] | (L[base + 32] << 2) | (L[base + 64] << 4) |
                                                           (L[base + 96] << 6));
            }
        }
    }
}

void quantize_q2_K(const float* x, void* dst, size_t nb) {
    auto* y = static_cast<BlockQ2_K*>(dst);
    uint8_t L[kQK_K];
    uint8_t Laux[16];
    float weights[16], mins[16], scales[16];
    for (size_t i = 0; i < nb; ++i, x += kQK_K) {
        float max_scale = 0.0f, max_min = 0.0f;
        for (int j = 0; j < 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = 15.0f / max_scale;
            for (int j = 0; j < 16; ++j) y[i].scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
            y[i].d = fp32_to_fp16(max_scale / 15.0f);
        } else {
            for (int j = 0; j < 16; ++j) y[i].scales[j] = 0;
            y[i].d = fp32_to_fp16(0.0f);
        }
        if (max_min > 0) {
            const float iscale = 15.0f / max_min;
            for (int j = 0; j < 16; ++j) {
                y[i].scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
            }
            y[i].dmin = fp32_to_fp16(max_min / 15.0f);
        } else {
            y[i].dmin = fp32_to_fp16(0.0f);
        }
        const float d = fp16_to_fp32(y[i].d);
        const float dmin = fp16_to_fp32(y[i].dmin);
        for (int j = 0; j < 16; ++j) {
            const float dj = d * static_cast<float>(y[i].scales[j] & 0x0F);
            if (dj == 0.0f) continue;
            const float dm = dmin * static_cast<float>(y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int((x[16 * j + ii] + dm) / dj);
                L[16 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(3, l)));
            }
        }
        for (int h = 0; h < 2; ++h) {
            for (int l = 0; l < 32; ++l) {
                const int base = 128 * h + l;
                y[i].qs[32 * h + l] = static_cast<uint8_t>(L[base] | (L[base + 32] << 2) | (L[base + 64] << 4) |
                                                           (L[base + 96] << 6));
            }
        }
    }
}

}  // namespace zinc::quant::detail
