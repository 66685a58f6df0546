// The CPU's attention (causal, GQA, with optional sliding window, attention sinks and score soft-capping), the KV
// cache it reads, and RoPE (NeoX or adjacent pairs, partial, with optional per-pair frequency factors and YaRN);
// docs/models.md §0.2, §1.1, §1.2, §1.4, §7.4.
#include "backend/cpu/cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/simd.h"
#include "quant/float_convert.h"

namespace zinc::backend::cpu {
namespace {

// Stores row x (width values) as cache row `row` of a plane of type t.
void store_row(void* plane, KvType t, int64_t width, int64_t capacity, int64_t row, const float* x) {
    switch (t) {
    case KvType::f32: std::memcpy(static_cast<float*>(plane) + row * width, x, size_t(width) * sizeof(float)); return;
    case KvType::f16: simd::kernels().f32_to_f16(x, static_cast<uint16_t*>(plane) + row * width, width); return;
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
    case KvType::f16: simd::kernels().f16_to_f32(static_cast<const uint16_t*>(plane) + at, tmp, n); return tmp;
    case KvType::q8_0: {
        const int8_t* q = static_cast<const int8_t*>(plane) + at;
        const uint16_t* scales = reinterpret_cast<const uint16_t*>(static_cast<const int8_t*>(plane) + capacity * width);
        simd::kernels().q8_to_f32(q, scales + at / kKvBlock, tmp, n);
        return tmp;
    }
    }
    return nullptr;
}

}  // namespace

void kv_write(KvLayer& kv, const Act& k, const Act& v, int64_t pos0) {
    for (int64_t t = 0; t < k.rows; ++t) {
        const int64_t row = kv_row(kv, pos0 + t);
        store_row(kv.k, kv.type_k, kv.width, kv.capacity, row, k.data + t * k.cols);
        store_row(kv.v, kv.type_v, kv.width, kv.capacity, row, v.data + t * v.cols);
    }
}

void kv_copy_rows(const KvLayer& src, int64_t src_row, KvLayer& dst, int64_t dst_row, int64_t rows) {
    const auto copy = [&](const void* from, void* to, KvType t) {
        const KvRowBytes f = kv_row_bytes(t, src.width, src.capacity, src_row, rows);
        const KvRowBytes d = kv_row_bytes(t, dst.width, dst.capacity, dst_row, rows);
        std::memcpy(static_cast<uint8_t*>(to) + d.values_at, static_cast<const uint8_t*>(from) + f.values_at, f.values);
        std::memcpy(static_cast<uint8_t*>(to) + d.scales_at, static_cast<const uint8_t*>(from) + f.scales_at, f.scales);
    };
    copy(src.k, dst.k, src.type_k);
    copy(src.v, dst.v, src.type_v);
}

// Work is split by sequence, blocks of query rows and groups of KV heads. A piece reads the heads' part of each key
// and value row as one run of memory, converting a q8_0 row to f32 once for all the query heads and queries of the
// block; f16 values are converted in registers as the products read them, cheaper than a copy to convert into and
// read back. A decode step reads every cache row whole (one group of all heads) unless it has fewer pieces than
// threads, and a prompt, with many blocks, reads one head at a time. Every query still computes alone, in key order:
// its scores (dot products), softmax (max, simd.h's exp_sum, a double sum) and the weighted sum of the value rows
// are the same operations whatever the other queries of its batch and the pieces, so prefill and decode, and a
// sequence alone or among others, agree bit for bit.
void attention(ThreadPool& pool, const Act& q_all, std::span<const AttentionRange> ranges, const AttentionParams& p,
               Act& out_all) {
    constexpr int64_t kQueries = 16;  // query rows per piece of work
    constexpr int64_t kKeys = 32;     // key rows converted at a time
    const int d = p.head_dim;
    const float* sinks = p.sinks ? static_cast<const float*>(p.sinks->data) : nullptr;
    const int group = p.n_head / p.n_head_kv;
    int64_t blocks = 0;
    for (const AttentionRange& r : ranges) blocks += (r.rows + kQueries - 1) / kQueries;
    const int n_groups = static_cast<int>(std::clamp<int64_t>((pool.size() + blocks - 1) / blocks, 1, p.n_head_kv));
    const int per_group = (p.n_head_kv + n_groups - 1) / n_groups;
    // jobs_before[i]: the pieces of work of the ranges before range i.
    std::vector<int64_t> jobs_before(ranges.size() + 1, 0);
    for (size_t i = 0; i < ranges.size(); ++i)
        jobs_before[i + 1] = jobs_before[i] + n_groups * ((ranges[i].rows + kQueries - 1) / kQueries);
    const simd::Kernels& simd = simd::kernels();
    pool.parallel_chunks(jobs_before.back(), 1, [&](int64_t b, int64_t e) {
        // Each thread keeps its buffers from call to call (a large new one would be fresh pages every time).
        thread_local std::vector<float> buf, weight, scores, inv;
        thread_local std::vector<const float*> rows;
        thread_local std::vector<const uint16_t*> rows16;
        buf.resize(static_cast<size_t>(kKeys * per_group * d));
        weight.resize(static_cast<size_t>(kKeys));
        rows.resize(static_cast<size_t>(kKeys * per_group));
        rows16.resize(static_cast<size_t>(kKeys * per_group));
        for (int64_t job = b; job < e; ++job) {
            const auto after = std::upper_bound(jobs_before.begin(), jobs_before.end(), job);
            const size_t ri = static_cast<size_t>(after - jobs_before.begin()) - 1;
            const AttentionRange& range = ranges[ri];
            const KvLayer& kv = *range.kv;
            const int64_t pos0 = range.pos0, local = job - jobs_before[ri];
            const Act q = Backend::rows_of(q_all, range.first, range.rows);
            const Act out = Backend::rows_of(out_all, range.first, range.rows);
            const int h0 = static_cast<int>(local % n_groups) * per_group;  // KV heads [h0, h1)
            const int h1 = std::min(p.n_head_kv, h0 + per_group);
            if (h0 >= h1) continue;
            const int heads = (h1 - h0) * group;  // query heads
            const int64_t t0 = local / n_groups * kQueries, t1 = std::min(q.rows, t0 + kQueries);
            // Causal, and with a window W the query at pq sees itself and the previous W-1 positions.
            const auto first_key = [&](int64_t t) {
                return p.window > 0 ? std::max<int64_t>(0, pos0 + t - p.window + 1) : int64_t{0};
            };
            const int64_t lo = first_key(t0), hi = pos0 + t1;  // the keys any query of the block sees
            const int64_t n_keys = hi - lo;
            scores.resize(static_cast<size_t>((t1 - t0) * heads * n_keys));
            inv.resize(static_cast<size_t>((t1 - t0) * heads));
            // The rows of keys [kb, ke) of heads [h0, h1): rows[(kvh - h0) * kKeys + j - kb] is key j of kvh as f32,
            // or for an f16 cache rows16[...] the cache's own values, which the kernels convert as they read them
            // (true).
            const auto load = [&](const void* plane, KvType type, int64_t kb, int64_t ke) {
                const int64_t n = int64_t(h1 - h0) * d;
                if (type == KvType::f16) {
                    for (int64_t j = kb; j < ke; ++j) {
                        const uint16_t* r = static_cast<const uint16_t*>(plane) + kv_row(kv, j) * kv.width + h0 * d;
                        for (int kvh = h0; kvh < h1; ++kvh)
                            rows16[static_cast<size_t>((kvh - h0) * kKeys + (j - kb))] = r + int64_t(kvh - h0) * d;
                    }
                    return true;
                }
                for (int64_t j = kb; j < ke; ++j) {
                    const float* r = row_values(plane, type, kv.width, kv.capacity, kv_row(kv, j), int64_t(h0) * d,
                                                static_cast<int>(n), buf.data() + (j - kb) * n);
                    for (int kvh = h0; kvh < h1; ++kvh)
                        rows[static_cast<size_t>((kvh - h0) * kKeys + (j - kb))] = r + int64_t(kvh - h0) * d;
                }
                return false;
            };
            // The query head h's row of query t, its scores and its 1 / Σ exp.
            const auto slot = [&](int64_t t, int h) { return static_cast<size_t>((t - t0) * heads + (h - h0 * group)); };
            for (int64_t kb = lo; kb < hi; kb += kKeys) {
                const int64_t ke = std::min(hi, kb + kKeys);
                const bool half = load(kv.k, kv.type_k, kb, ke);
                for (int64_t t = t0; t < t1; ++t)
                    for (int h = h0 * group; h < h1 * group; ++h) {
                        const float* qv = q.data + t * q.cols + int64_t(h) * d;
                        float* s = scores.data() + static_cast<int64_t>(slot(t, h)) * n_keys;  // s[j - lo]: key j
                        const int64_t jb = std::max(kb, first_key(t)), je = std::min(ke, pos0 + t + 1);
                        if (jb >= je) continue;
                        const size_t at = static_cast<size_t>((h / group - h0) * kKeys + (jb - kb));
                        if (half)
                            simd.dots_f16(qv, rows16.data() + at, je - jb, d, s + (jb - lo));
                        else
                            simd.dots(qv, rows.data() + at, je - jb, d, s + (jb - lo));
                        for (int64_t j = jb - lo; j < je - lo; ++j) {
                            float v = s[j] * p.scale;
                            if (p.softcap > 0.0f) v = p.softcap * std::tanh(v / p.softcap);
                            s[j] = v;
                        }
                    }
            }
            for (int64_t t = t0; t < t1; ++t)
                for (int h = h0 * group; h < h1 * group; ++h) {
                    float* s = scores.data() + static_cast<int64_t>(slot(t, h)) * n_keys;
                    const int64_t j0 = first_key(t), j1 = pos0 + t + 1;
                    float mx = sinks ? sinks[h] : -INFINITY;
                    for (int64_t j = j0; j < j1; ++j) mx = std::max(mx, s[j - lo]);
                    // The sink joins the denominator (and the max) but has no value row.
                    double sum = sinks ? std::exp(double(sinks[h]) - mx) : 0.0;
                    sum += simd.exp_sum(s + (j0 - lo), j1 - j0, mx);
                    inv[slot(t, h)] = float(1.0 / sum);
                    float* o = out.data + t * out.cols + int64_t(h) * d;
                    std::fill(o, o + d, 0.0f);
                }
            for (int64_t kb = lo; kb < hi; kb += kKeys) {
                const int64_t ke = std::min(hi, kb + kKeys);
                const bool half = load(kv.v, kv.type_v, kb, ke);
                for (int64_t t = t0; t < t1; ++t)
                    for (int h = h0 * group; h < h1 * group; ++h) {
                        const float* s = scores.data() + static_cast<int64_t>(slot(t, h)) * n_keys;
                        const float scale = inv[slot(t, h)];
                        float* o = out.data + t * out.cols + int64_t(h) * d;
                        const int64_t jb = std::max(kb, first_key(t)), je = std::min(ke, pos0 + t + 1);
                        for (int64_t j = jb; j < je; ++j) weight[static_cast<size_t>(j - jb)] = s[j - lo] * scale;
                        const size_t at = static_cast<size_t>((h / group - h0) * kKeys + (jb - kb));
                        if (jb >= je) continue;
                        if (half)
                            simd.axpys_f16(weight.data(), rows16.data() + at, je - jb, d, o);
                        else
                            simd.axpys(weight.data(), rows.data() + at, je - jb, d, o);
                    }
            }
        }
    });
}

void attention(ThreadPool& pool, const Act& q, const KvLayer& kv, int64_t pos0, const AttentionParams& p, Act& out) {
    KvLayer view = kv;  // the range's, read only
    const AttentionRange all{0, q.rows, pos0, &view};
    attention(pool, q, std::span<const AttentionRange>(&all, 1), p, out);
}

bool RopeCache::Table::matches(std::span<const int32_t> positions, const RopeParams& q) const {
    return p.n_rot == q.n_rot && p.neox == q.neox && p.freq_base == q.freq_base && p.freq_scale == q.freq_scale &&
           p.freq_factors == q.freq_factors && (!q.freq_factors || factors == q.freq_factors->data) &&
           p.ext_factor == q.ext_factor && p.yarn_low == q.yarn_low && p.yarn_high == q.yarn_high &&
           p.mscale == q.mscale && pos.size() == positions.size() &&
           std::equal(pos.begin(), pos.end(), positions.begin());
}

// The cos and sin of every position and pair: n_rot/2 cosines then n_rot/2 sines per row.
const std::vector<float>& RopeCache::angles(ThreadPool& pool, std::span<const int32_t> pos, const RopeParams& p) {
    for (size_t k = 0; k < kTables; ++k)
        if (tables_[k].matches(pos, p)) {
            if (k != 0) std::swap(tables_[0], tables_[k]);  // the most recent first
            return tables_[0].cs;
        }
    std::rotate(tables_, tables_ + kTables - 1, tables_ + kTables);  // the least recent one is refilled
    Table& tb = tables_[0];
    tb.p = p;
    tb.factors = p.freq_factors ? p.freq_factors->data : nullptr;
    tb.pos.assign(pos.begin(), pos.end());
    const int half = p.n_rot / 2;
    tb.cs.resize(pos.size() * 2 * static_cast<size_t>(half));
    const float* ff = p.freq_factors ? static_cast<const float*>(p.freq_factors->data) : nullptr;
    // Angles as ggml's CPU backend computes them: the position times theta_scale^i by repeated
    // multiplication, divided by the frequency factor, then YaRN's blend of the interpolated
    // (freq_scale * theta) and extrapolated (theta) angle. Matching ggml's rounding keeps quantized
    // models on the same tokens as llama.cpp; against transformers' f32 forward it changes nothing
    // measurable (both are within 1e-6).
    const float theta_scale = std::pow(p.freq_base, -2.0f / float(p.n_rot));
    const auto body = [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
            float* c = tb.cs.data() + t * 2 * half;
            float* s = c + half;
            float theta_i = float(pos[t]);
            for (int i = 0; i < half; ++i, theta_i *= theta_scale) {
                const float th_ext = ff ? theta_i / ff[i] : theta_i;
                float theta = p.freq_scale * th_ext;
                if (p.ext_factor != 0.0f) {
                    const float y = (float(i) - p.yarn_low) / std::max(0.001f, p.yarn_high - p.yarn_low);
                    const float r = p.ext_factor * (1.0f - std::clamp(y, 0.0f, 1.0f));  // 1: the extrapolated angle
                    theta = theta * (1.0f - r) + th_ext * r;
                }
                c[i] = std::cos(theta) * p.mscale;
                s[i] = std::sin(theta) * p.mscale;
            }
        }
    };
    if (pos.size() >= 8)
        pool.parallel_for(static_cast<int64_t>(pos.size()), body);
    else
        body(0, static_cast<int64_t>(pos.size()));
    return tb.cs;
}

// The angles depend on the positions and the parameters only, so the layers of a forward pass (and q and k) share
// them through the cache.
void rope(ThreadPool& pool, Act& x, int head_dim, std::span<const int32_t> pos, const RopeParams& p,
          RopeCache& cache) {
    const int64_t heads = x.cols / head_dim;
    const int half = p.n_rot / 2;
    const std::vector<float>& cs = cache.angles(pool, pos, p);
    const simd::Kernels& simd = simd::kernels();
    const auto body = [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
            const float* c = cs.data() + t * 2 * half;
            const float* s = c + half;
            for (int64_t h = 0; h < heads; ++h) {
                float* v = x.data + t * x.cols + h * head_dim;
                if (p.neox) {
                    simd.rotate_halves(v, c, s, half);
                    continue;
                }
                for (int i = 0; i < half; ++i) {  // adjacent pairs
                    const float a = v[2 * i], d = v[2 * i + 1];
                    v[2 * i] = a * c[i] - d * s[i];
                    v[2 * i + 1] = a * s[i] + d * c[i];
                }
            }
        }
    };
    if (x.rows >= 4)
        pool.parallel_for(x.rows, body);
    else
        body(0, x.rows);
}

}  // namespace zinc::backend::cpu
