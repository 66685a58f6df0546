// CPU ops of mixture-of-experts layers: routing (softmax -> top-k -> optional renormalization) and the expert FFN
// over 3-D expert tensors {in, out, n_expert}. Matmuls compute as the dense matmul of cpu_matmul.cpp (and ggml's
// mul_mat_id): activation rows are converted to the weight type's vec-dot type and dotted with the expert's rows.
// Tokens are grouped by expert so that each expert's weights are read once per call.
#include "backend/cpu/cpu_moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "quant/vec_dot.h"

namespace zinc::backend::cpu {
namespace {

using gguf::TensorType;

// One 3-D expert projection and the activation format its dot products need.
struct Proj {
    const Weight* w = nullptr;
    int64_t in = 0, out = 0, n_exp = 0;
    size_t rb = 0;  // bytes per weight row
    TensorType at = TensorType::F32;
    quant::VecDotFn fn = nullptr;
    size_t arb = 0;  // bytes per converted activation row

    explicit Proj(const Weight* w_) : w(w_) {
        in = w->ne[0];
        out = w->ne[1];
        n_exp = w->ne[2];
        if (!quant::can_vec_dot(w->type))
            throw std::invalid_argument("moe_ffn: " + w->name + ": no dot product for type " +
                                        std::string(gguf::type_name(w->type)));
        rb = gguf::row_bytes(w->type, static_cast<size_t>(in));
        at = quant::vec_dot_type(w->type);
        fn = quant::vec_dot_fn(w->type);
        arb = at == TensorType::F32 ? static_cast<size_t>(in) * sizeof(float) : gguf::row_bytes(at, in);
    }

    // Converts n rows of `in` floats (stride `in`) to the vec-dot type; returns the converted rows.
    const uint8_t* convert(ThreadPool& pool, const float* x, int64_t n, std::vector<uint8_t>& buf) const {
        if (at == TensorType::F32) return reinterpret_cast<const uint8_t*>(x);
        buf.resize(arb * static_cast<size_t>(n));
        const auto body = [&](int64_t b, int64_t e) {
            for (int64_t t = b; t < e; ++t) quant::quantize_activation(at, x + t * in, buf.data() + t * arb, in);
        };
        if (n >= 8)
            pool.parallel_for(n, body);
        else
            body(0, n);
        return buf.data();
    }

    // res[r * ld + o] = (row o of expert e) . (activation row act_row[r]) for o < out, r < n_r.
    void run(ThreadPool& pool, int64_t e, const uint8_t* act, const int64_t* act_row, int64_t n_r, float* res,
             int64_t ld) const {
        const uint8_t* base = static_cast<const uint8_t*>(w->data) + static_cast<size_t>(e * out) * rb;
        pool.parallel_for(out, [&](int64_t ob, int64_t oe) {
            for (int64_t o = ob; o < oe; ++o) {
                const uint8_t* wr = base + static_cast<size_t>(o) * rb;
                for (int64_t r = 0; r < n_r; ++r)
                    res[r * ld + o] = fn(wr, act + static_cast<size_t>(act_row ? act_row[r] : r) * arb,
                                         static_cast<size_t>(in));
            }
        });
    }
};

const float* f32_data(const Weight* w) { return w ? static_cast<const float*>(w->data) : nullptr; }

// x[o] = x[o] * scale[e] + bias[e][o]
void scale_bias(float* x, int64_t n, int64_t e, const float* scale, const float* bias) {
    if (scale)
        for (int64_t o = 0; o < n; ++o) x[o] *= scale[e];
    if (bias)
        for (int64_t o = 0; o < n; ++o) x[o] += bias[e * n + o];
}

float activate(MoeActivation act, float g, float u, float alpha, float limit) {
    switch (act) {
        case MoeActivation::swiglu:
            return g / (1.0f + std::exp(-g)) * u;
        case MoeActivation::geglu: {
            constexpr float kSqrt2OverPi = 0.7978845608028654f;
            return 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * u;
        }
        case MoeActivation::swiglu_oai: {
            const float x = std::min(g, limit), y = std::clamp(u, -limit, limit);
            return x / (1.0f + std::exp(-alpha * x)) * (y + 1.0f);
        }
    }
    return 0.0f;
}

}  // namespace

void moe_route(const Act& logits, int k, bool renormalize, IdAct& ids, Act& weights) {
    const int64_t n_exp = logits.cols, T = logits.rows;
    std::vector<float> p(static_cast<size_t>(n_exp));
    std::vector<int32_t> order(static_cast<size_t>(n_exp));
    for (int64_t t = 0; t < T; ++t) {
        const float* l = logits.data + t * n_exp;
        const float mx = *std::max_element(l, l + n_exp);
        double sum = 0;
        for (int64_t e = 0; e < n_exp; ++e) sum += p[e] = std::exp(l[e] - mx);
        const float inv = float(1.0 / sum);
        for (int64_t e = 0; e < n_exp; ++e) p[e] *= inv;
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + k, order.end(),
                          [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
        int32_t* id = ids.data + t * k;
        float* w = weights.data + t * k;
        float wsum = 0;
        for (int s = 0; s < k; ++s) {
            id[s] = order[s];
            wsum += w[s] = p[order[s]];
        }
        if (renormalize) {
            wsum = std::max(wsum, 6.103515625e-5f);  // as llama.cpp
            for (int s = 0; s < k; ++s) w[s] /= wsum;
        }
    }
}

void moe_ffn(ThreadPool& pool, const Act& x, const IdAct& ids, const Act& weights, const MoeWeights& mw, Act& out) {
    const bool merged = mw.gate_up != nullptr;
    const Proj down(mw.down);
    const Proj first(merged ? mw.gate_up : mw.gate);
    const Proj* up = nullptr;
    Proj up_storage = merged ? first : Proj(mw.up);
    if (!merged) up = &up_storage;
    const int64_t n_exp = first.n_exp;
    const int64_t n_ff = merged ? first.out / 2 : first.out;
    const int64_t n_out = down.out;
    const int64_t T = x.rows, K = ids.cols;
    const float* gate_s = f32_data(mw.gate_scale);
    const float* up_s = f32_data(mw.up_scale);
    const float* down_s = f32_data(mw.down_scale);
    const float* gate_b = f32_data(mw.gate_bias);
    const float* up_b = f32_data(mw.up_bias);
    const float* gate_up_b = f32_data(mw.gate_up_bias);
    const float* down_b = f32_data(mw.down_bias);

    // Slots (t * K + s) grouped by expert.
    std::vector<std::vector<int64_t>> slots(static_cast<size_t>(n_exp));
    for (int64_t i = 0; i < T * K; ++i) {
        const int32_t e = ids.data[i];
        if (e < 0 || e >= n_exp) throw std::out_of_range("moe_ffn: expert id " + std::to_string(e) + " out of range");
        slots[e].push_back(i);
    }
    std::vector<uint8_t> buf_first, buf_up, buf_down;
    const uint8_t* act_first = first.convert(pool, x.data, T, buf_first);
    const uint8_t* act_up = nullptr;
    if (up) act_up = up->at == first.at ? act_first : up->convert(pool, x.data, T, buf_up);

    std::vector<float> y(static_cast<size_t>(T * K * n_out));  // expert outputs per slot
    std::vector<float> h1, h2, ydown;
    std::vector<int64_t> rows;
    for (int64_t e = 0; e < n_exp; ++e) {
        const auto& sl = slots[e];
        const int64_t n_r = static_cast<int64_t>(sl.size());
        if (n_r == 0) continue;
        rows.resize(sl.size());
        for (size_t r = 0; r < sl.size(); ++r) rows[r] = sl[r] / K;  // the token of each slot
        // gate and up outputs: h1 holds [gate | up] per row (width 2 n_ff).
        h1.resize(static_cast<size_t>(n_r * 2 * n_ff));
        if (merged) {
            first.run(pool, e, act_first, rows.data(), n_r, h1.data(), 2 * n_ff);
            for (int64_t r = 0; r < n_r; ++r) scale_bias(h1.data() + r * 2 * n_ff, 2 * n_ff, e, up_s, gate_up_b);
        } else {
            first.run(pool, e, act_first, rows.data(), n_r, h1.data(), 2 * n_ff);
            up->run(pool, e, act_up, rows.data(), n_r, h1.data() + n_ff, 2 * n_ff);
            for (int64_t r = 0; r < n_r; ++r) {
                scale_bias(h1.data() + r * 2 * n_ff, n_ff, e, gate_s, gate_b);
                scale_bias(h1.data() + r * 2 * n_ff + n_ff, n_ff, e, up_s, up_b);
            }
        }
        h2.resize(static_cast<size_t>(n_r * n_ff));
        for (int64_t r = 0; r < n_r; ++r) {
            const float* gr = h1.data() + r * 2 * n_ff;
            float* a = h2.data() + r * n_ff;
            for (int64_t i = 0; i < n_ff; ++i) a[i] = activate(mw.act, gr[i], gr[n_ff + i], mw.alpha, mw.limit);
        }
        const uint8_t* act_down = down.convert(pool, h2.data(), n_r, buf_down);
        ydown.resize(static_cast<size_t>(n_r * n_out));
        down.run(pool, e, act_down, nullptr, n_r, ydown.data(), n_out);
        for (int64_t r = 0; r < n_r; ++r) {
            float* yr = ydown.data() + r * n_out;
            scale_bias(yr, n_out, e, down_s, down_b);
            std::copy(yr, yr + n_out, y.data() + sl[r] * n_out);
        }
    }
    // Weighted sum over the slots in slot order.
    pool.parallel_for(T, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
            float* o = out.data + t * n_out;
            for (int64_t s = 0; s < K; ++s) {
                const float w = weights.data[t * K + s];
                const float* ys = y.data() + (t * K + s) * n_out;
                if (s == 0)
                    for (int64_t i = 0; i < n_out; ++i) o[i] = ys[i] * w;
                else
                    for (int64_t i = 0; i < n_out; ++i) o[i] += ys[i] * w;
            }
        }
    });
}

}  // namespace zinc::backend::cpu
