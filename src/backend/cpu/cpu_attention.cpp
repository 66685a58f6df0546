// The CPU's attention (causal, GQA, with optional sliding window, attention sinks and score soft-capping), the KV
// cache it reads, and RoPE (NeoX or adjacent pairs, partial, with optional per-pair frequency factors and YaRN);
// docs/models.md §0.2, §1.1, §1.2, §1.4, §7.4.
#include "backend/cpu/cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "quant/float_convert.h"

namespace zinc::backend::cpu {
namespace {

float dot(const float* a, const float* b, int64_t n) {
    float s[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) s[k] += a[i + k] * b[i + k];
    float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < n; ++i) r += a[i] * b[i];
    return r;
}

// Stores row x (width values) as cache row `row` of a plane of type t.
void store_row(void* plane, KvType t, int64_t width, int64_t capacity, int64_t row, const float* x) {
    switch (t) {
    case KvType::f32: std::memcpy(static_cast<float*>(plane) + row * width, x, size_t(width) * sizeof(float)); return;
    case KvType::f16: {
        uint16_t* dst = static_cast<uint16_t*>(plane) + row * width;
        for (int64_t i = 0; i < width; ++i) dst[i] = quant::fp32_to_fp16(x[i]);
        return;
    }
    case KvType::q8_0: {
        // d = amax / 127 and q = round(x / d), as ggml's reference quantize_row_q8_0 (and the CUDA kv_write).
        int8_t* q = static_cast<int8_t*>(plane) + row * width;
        uint16_t* scales = reinterpret_cast<uint16_t*>(static_cast<int8_t*>(plane) + capacity * width);
        for (int64_t b = 0; b < width / kKvBlock; ++b) {
            const float* xb = x + b * kKvBlock;
            float amax = 0.0f;
            for (int i = 0; i < kKvBlock; ++i) amax = std::max(amax, std::fabs(xb[i]));
            const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            for (int i = 0; i < kKvBlock; ++i) q[b * kKvBlock + i] = static_cast<int8_t>(std::round(xb[i] * id));
            scales[row * (width / kKvBlock) + b] = quant::fp32_to_fp16(d);
        }
        return;
    }
    }
}

// Values [c0, c0 + n) of cache row `row` as f32: a pointer into an f32 plane, or those values converted into tmp.
// For q8_0, c0 and n are multiples of 32 (the attention op checks head_dim).
const float* row_values(const void* plane, KvType t, int64_t width, int64_t capacity, int64_t row, int64_t c0, int n,
                        float* tmp) {
    const int64_t at = row * width + c0;
    switch (t) {
    case KvType::f32: return static_cast<const float*>(plane) + at;
    case KvType::f16: {
        const uint16_t* h = static_cast<const uint16_t*>(plane) + at;
        for (int i = 0; i < n; ++i) tmp[i] = quant::fp16_to_fp32(h[i]);
        return tmp;
    }
    case KvType::q8_0: {
        const int8_t* q = static_cast<const int8_t*>(plane) + at;
        const uint16_t* scales = reinterpret_cast<const uint16_t*>(static_cast<const int8_t*>(plane) + capacity * width);
        for (int i = 0; i < n; ++i) tmp[i] = quant::fp16_to_fp32(scales[(at + i) / kKvBlock]) * float(q[i]);
        return tmp;
    }
    }
    return nullptr;
}

}  // namespace

void kv_write(KvLayer& kv, const Act& k, const Act& v, int64_t pos0) {
    for (int64_t t = 0; t < k.rows; ++t) {
        const int64_t row = (pos0 + t) % kv.capacity;
        store_row(kv.k, kv.type_k, kv.width, kv.capacity, row, k.data + t * k.cols);
        store_row(kv.v, kv.type_v, kv.width, kv.capacity, row, v.data + t * v.cols);
    }
}

void attention(ThreadPool& pool, const Act& q, const KvLayer& kv, int64_t pos0, const AttentionParams& p, Act& out) {
    const int d = p.head_dim;
    const float* sinks = p.sinks ? static_cast<const float*>(p.sinks->data) : nullptr;
    const int group = p.n_head / p.n_head_kv;
    pool.parallel_for(q.rows * p.n_head, [&](int64_t b, int64_t e) {
        std::vector<float> scores, tmp(static_cast<size_t>(d));
        for (int64_t job = b; job < e; ++job) {
            const int64_t t = job / p.n_head;
            const int h = static_cast<int>(job % p.n_head);
            const int kvh = h / group;
            const int64_t pq = pos0 + t;
            // Causal, and with a window W the query sees itself and the previous W-1 positions.
            const int64_t j0 = p.window > 0 ? std::max<int64_t>(0, pq - p.window + 1) : 0;
            const int64_t n = pq + 1 - j0;
            const float* qv = q.data + t * q.cols + int64_t(h) * d;
            scores.resize(n);
            float mx = sinks ? sinks[h] : -INFINITY;
            for (int64_t j = 0; j < n; ++j) {
                const float* kr = row_values(kv.k, kv.type_k, kv.width, kv.capacity, (j0 + j) % kv.capacity,
                                             int64_t(kvh) * d, d, tmp.data());
                float s = dot(qv, kr, d) * p.scale;
                if (p.softcap > 0.0f) s = p.softcap * std::tanh(s / p.softcap);
                scores[j] = s;
                mx = std::max(mx, s);
            }
            // The sink joins the denominator (and the max) but has no value row.
            double sum = sinks ? std::exp(double(sinks[h]) - mx) : 0.0;
            for (int64_t j = 0; j < n; ++j) {
                scores[j] = std::exp(scores[j] - mx);
                sum += scores[j];
            }
            const float inv = float(1.0 / sum);
            float* o = out.data + t * out.cols + int64_t(h) * d;
            std::fill(o, o + d, 0.0f);
            for (int64_t j = 0; j < n; ++j) {
                const float pj = scores[j] * inv;
                const float* vv = row_values(kv.v, kv.type_v, kv.width, kv.capacity, (j0 + j) % kv.capacity,
                                             int64_t(kvh) * d, d, tmp.data());
                for (int i = 0; i < d; ++i) o[i] += pj * vv[i];
            }
        }
    });
}

void rope(ThreadPool& pool, Act& x, int head_dim, std::span<const int32_t> pos, const RopeParams& p) {
    const int64_t heads = x.cols / head_dim;
    const int half = p.n_rot / 2;
    const float* ff = p.freq_factors ? static_cast<const float*>(p.freq_factors->data) : nullptr;
    // Angles as ggml's CPU backend computes them: the position times theta_scale^i by repeated
    // multiplication, divided by the frequency factor, then YaRN's blend of the interpolated
    // (freq_scale * theta) and extrapolated (theta) angle. Matching ggml's rounding keeps quantized
    // models on the same tokens as llama.cpp; against transformers' f32 forward it changes nothing
    // measurable (both are within 1e-6).
    const float theta_scale = std::pow(p.freq_base, -2.0f / float(p.n_rot));
    pool.parallel_for(x.rows, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
            float theta_i = float(pos[t]);
            for (int i = 0; i < half; ++i, theta_i *= theta_scale) {
                const float th_ext = ff ? theta_i / ff[i] : theta_i;
                float theta = p.freq_scale * th_ext;
                if (p.ext_factor != 0.0f) {
                    const float y = (float(i) - p.yarn_low) / std::max(0.001f, p.yarn_high - p.yarn_low);
                    const float r = p.ext_factor * (1.0f - std::clamp(y, 0.0f, 1.0f));  // 1: keep the extrapolated angle
                    theta = theta * (1.0f - r) + th_ext * r;
                }
                const float c = std::cos(theta) * p.mscale, s = std::sin(theta) * p.mscale;
                for (int64_t h = 0; h < heads; ++h) {
                    float* v = x.data + t * x.cols + h * head_dim;
                    const int i0 = p.neox ? i : 2 * i, i1 = p.neox ? i + half : 2 * i + 1;
                    const float a = v[i0], d = v[i1];
                    v[i0] = a * c - d * s;
                    v[i1] = a * s + d * c;
                }
            }
        }
    });
}

}  // namespace zinc::backend::cpu
