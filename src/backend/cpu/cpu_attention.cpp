// The CPU's attention (causal, GQA, with optional sliding window, attention sinks and score soft-capping), the KV
// cache it reads, and RoPE (NeoX or adjacent pairs, partial, with optional per-pair frequency factors and YaRN);
// docs/models.md §0.2, §1.1, §1.2, §1.4, §7.4.
#include "backend/cpu/cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

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

}  // namespace

void kv_write(KvLayer& kv, const Act& k, const Act& v, int64_t pos0) {
    std::memcpy(kv.k + pos0 * kv.width, k.data, k.size() * sizeof(float));
    std::memcpy(kv.v + pos0 * kv.width, v.data, v.size() * sizeof(float));
}

void attention(ThreadPool& pool, const Act& q, const KvLayer& kv, int64_t pos0, const AttentionParams& p, Act& out) {
    const int d = p.head_dim;
    const float* sinks = p.sinks ? static_cast<const float*>(p.sinks->data) : nullptr;
    const int group = p.n_head / p.n_head_kv;
    pool.parallel_for(q.rows * p.n_head, [&](int64_t b, int64_t e) {
        std::vector<float> scores;
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
                float s = dot(qv, kv.k + (j0 + j) * kv.width + int64_t(kvh) * d, d) * p.scale;
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
                const float* vv = kv.v + (j0 + j) * kv.width + int64_t(kvh) * d;
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
