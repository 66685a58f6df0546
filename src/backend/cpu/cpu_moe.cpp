// CPU ops of mixture-of-experts layers: routing (softmax -> top-k -> optional renormalization) and the expert FFN
// over 3-D expert tensors {in, out, n_expert}. Matmuls compute as the dense matmul of cpu_matmul.cpp (and ggml's
// mul_mat_id): activation rows are converted to the weight type's vec-dot type and dotted with the expert's rows, by
// the gemm kernels where the dense matmul uses them (packed experts) and by vec_dot otherwise. The slots of a
// call are grouped by expert so that each expert's weights are read once, and the products of all experts of a step
// are handed to the threads together.
#include "backend/cpu/cpu_moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/cpu_elementwise.h"
#include "backend/cpu/simd.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/repack.h"
#include "backend/cpu/vec_dot.h"

namespace zinc::backend::cpu {
namespace {

using gguf::TensorType;

// One 3-D expert projection and the activation format its products need.
struct Proj {
    const Weight* w = nullptr;
    bool packed = false;  // repacked at load: the gemm kernels
    int64_t in = 0, out = 0, n_exp = 0;
    size_t rb = 0;  // bytes per weight row
    TensorType at = TensorType::F32;
    cpu::VecDotFn fn = nullptr;
    size_t arb = 0;  // bytes per vec-dot activation row

    Proj(const Weight* w_, bool packed_) : w(w_), packed(packed_) {
        in = w->ne[0];
        out = w->ne[1];
        n_exp = w->ne[2];
        if (!cpu::can_vec_dot(w->type))
            throw std::invalid_argument("moe_ffn: " + w->name + ": no dot product for type " +
                                        std::string(gguf::type_name(w->type)));
        rb = gguf::row_bytes(w->type, static_cast<size_t>(in));
        at = cpu::vec_dot_type(w->type);
        fn = cpu::vec_dot_fn(w->type);
        arb = at == TensorType::F32 ? static_cast<size_t>(in) * sizeof(float) : gguf::row_bytes(at, in);
    }

    // Output rows per piece of work are a multiple of this.
    int64_t unit() const { return packed ? cpu::kPackRows : 1; }
};

// Activation rows converted for one projection: vec-dot rows, or the gemm kernels' form.
struct Acts {
    const uint8_t* vec = nullptr;
    const cpu::PackedActs* packed = nullptr;
};

Acts convert(ThreadPool& pool, const Proj& p, const float* x, int64_t n, std::vector<uint8_t>& buf,
             cpu::PackedActs& pa) {
    if (p.packed) {
        pa.reset(p.w->type, n, p.in);
        if (n >= 4)
            pool.parallel_for(n, [&](int64_t b, int64_t e) { pa.quantize(x, b, e); });
        else
            pa.quantize(x, 0, n);
        return {nullptr, &pa};
    }
    if (p.at == TensorType::F32) return {reinterpret_cast<const uint8_t*>(x), nullptr};
    buf.resize(p.arb * static_cast<size_t>(n));
    const auto body = [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) cpu::quantize_activation(p.at, x + t * p.in, buf.data() + t * p.arb, p.in);
    };
    if (n >= 8)
        pool.parallel_for(n, body);
    else
        body(0, n);
    return {buf.data(), nullptr};
}

// Output rows [o0, o1) of expert e's projection for the activation rows `rows`: res[r * ld + o].
struct Piece {
    const Proj* p;
    Acts a;
    int64_t e, o0, o1;
    cpu::ActRows rows;
    float* res;
    int64_t ld;
};

void run_piece(const Piece& pc) {
    const Proj& p = *pc.p;
    const uint8_t* base = static_cast<const uint8_t*>(p.w->data) + static_cast<size_t>(pc.e * p.out) * p.rb;
    if (p.packed) {  // expert e's rows are its own whole tiles (ne[1] is a multiple of the tile)
        cpu::gemm_packed(cpu::cpu_isa(), p.w->type, base, p.in, pc.o0 / cpu::kPackRows,
                           pc.o1 / cpu::kPackRows, *pc.a.packed, pc.rows, pc.res, pc.ld);
        return;
    }
    for (int64_t o = pc.o0; o < pc.o1; ++o) {
        const uint8_t* wr = base + static_cast<size_t>(o) * p.rb;
        for (int64_t r = 0; r < pc.rows.n; ++r) {
            const int64_t t = pc.rows.list ? pc.rows.list[pc.rows.first + r] : pc.rows.first + r;
            pc.res[r * pc.ld + o] = p.fn(wr, pc.a.vec + static_cast<size_t>(t) * p.arb, static_cast<size_t>(p.in));
        }
    }
}

// Adds the pieces of expert e's projection: about eight per thread over the whole call.
void add_pieces(std::vector<Piece>& v, const Proj& p, Acts a, int64_t e, cpu::ActRows rows, float* res, int64_t ld,
                int64_t rows_total, int threads) {
    const int64_t unit = p.unit();
    const int64_t step = unit * std::max<int64_t>(1, rows_total / (8 * threads * unit));
    for (int64_t o = 0; o < p.out; o += step) v.push_back({&p, a, e, o, std::min(p.out, o + step), rows, res, ld});
}

void run_pieces(ThreadPool& pool, const std::vector<Piece>& v) {
    pool.parallel_chunks(static_cast<int64_t>(v.size()), 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) run_piece(v[static_cast<size_t>(i)]);
    });
}

const float* f32_data(const Weight* w) { return w ? static_cast<const float*>(w->data) : nullptr; }

// x[o] = x[o] * scale[e] + bias[e][o]
void scale_bias(float* x, int64_t n, int64_t e, const float* scale, const float* bias) {
    if (scale)
        for (int64_t o = 0; o < n; ++o) x[o] *= scale[e];
    if (bias)
        for (int64_t o = 0; o < n; ++o) x[o] += bias[e * n + o];
}

// a[i] = the experts' activation of gate g[i] and up u[i], i < n: SwiGLU by simd.h's silu_mul, as the dense FFN's.
void activate(MoeActivation act, const float* g, const float* u, float* a, int64_t n, float alpha, float limit) {
    switch (act) {
        case MoeActivation::swiglu:
            simd::kernels().silu_mul(g, u, a, n);
            return;
        case MoeActivation::geglu:
            for (int64_t i = 0; i < n; ++i) a[i] = gelu_mul(g[i], u[i]);
            return;
        case MoeActivation::swiglu_oai:
            for (int64_t i = 0; i < n; ++i) {
                const float x = std::min(g[i], limit), y = std::clamp(u[i], -limit, limit);
                a[i] = x / (1.0f + std::exp(-alpha * x)) * (y + 1.0f);
            }
            return;
    }
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

void moe_ffn(ThreadPool& pool, const Act& x, const IdAct& ids, const Act& weights, const MoeWeights& mw,
             const std::function<bool(const Weight&)>& packed, MoeScratch& sc, Act& out) {
    const bool merged = mw.gate_up != nullptr;
    const Proj down(mw.down, packed(*mw.down));
    const Proj first(merged ? mw.gate_up : mw.gate, packed(merged ? *mw.gate_up : *mw.gate));
    const Proj up = merged ? first : Proj(mw.up, packed(*mw.up));
    const int64_t n_exp = first.n_exp;
    const int64_t n_ff = merged ? first.out / 2 : first.out;
    const int64_t n_out = down.out;
    const int64_t T = x.rows, K = ids.cols, S = T * K;
    const float* gate_s = f32_data(mw.gate_scale);
    const float* up_s = f32_data(mw.up_scale);
    const float* down_s = f32_data(mw.down_scale);
    const float* gate_b = f32_data(mw.gate_bias);
    const float* up_b = f32_data(mw.up_bias);
    const float* gate_up_b = f32_data(mw.gate_up_bias);
    const float* down_b = f32_data(mw.down_bias);

    // The slots (t * K + s) grouped by expert: expert e's are rows start[e] … start[e+1]−1 of the grouped order, and
    // token[r] is the token of grouped row r, at[slot] the grouped row of a slot.
    std::vector<int64_t>& start = sc.start;
    std::vector<int64_t>& at = sc.at;
    std::vector<int32_t>& token = sc.token;
    start.assign(static_cast<size_t>(n_exp + 1), 0);
    at.resize(static_cast<size_t>(S));
    token.resize(static_cast<size_t>(S));
    for (int64_t i = 0; i < S; ++i) {
        const int32_t e = ids.data[i];
        if (e < 0 || e >= n_exp) throw std::out_of_range("moe_ffn: expert id " + std::to_string(e) + " out of range");
        ++start[static_cast<size_t>(e) + 1];
    }
    std::partial_sum(start.begin(), start.end(), start.begin());
    sc.fill.assign(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < S; ++i) {
        const int64_t r = sc.fill[static_cast<size_t>(ids.data[i])]++;
        token[static_cast<size_t>(r)] = static_cast<int32_t>(i / K);
        at[static_cast<size_t>(i)] = r;
    }

    const Acts act_first = convert(pool, first, x.data, T, sc.vec[0], sc.packed[0]);
    const Acts act_up = merged || (up.at == first.at && up.packed == first.packed)
                            ? act_first
                            : convert(pool, up, x.data, T, sc.vec[1], sc.packed[1]);

    // Gate and up of every slot: h1 holds [gate | up] per grouped row (width 2 n_ff).
    std::vector<float>& h1 = sc.h1;
    std::vector<float>& h2 = sc.h2;
    h1.resize(static_cast<size_t>(S * 2 * n_ff));
    h2.resize(static_cast<size_t>(S * n_ff));
    std::vector<Piece> pieces;
    for (int64_t e = 0; e < n_exp; ++e) {
        const int64_t n_r = start[e + 1] - start[e];
        if (n_r == 0) continue;
        const cpu::ActRows rows{token.data(), start[e], n_r};
        float* res = h1.data() + start[e] * 2 * n_ff;
        add_pieces(pieces, first, act_first, e, rows, res, 2 * n_ff, first.out * K, pool.size());
        if (!merged) add_pieces(pieces, up, act_up, e, rows, res + n_ff, 2 * n_ff, first.out * K, pool.size());
    }
    run_pieces(pool, pieces);
    pool.parallel_for(n_exp, [&](int64_t eb, int64_t ee) {
        for (int64_t e = eb; e < ee; ++e)
            for (int64_t r = start[e]; r < start[e + 1]; ++r) {
                float* g = h1.data() + r * 2 * n_ff;
                if (merged) {
                    scale_bias(g, 2 * n_ff, e, up_s, gate_up_b);
                } else {
                    scale_bias(g, n_ff, e, gate_s, gate_b);
                    scale_bias(g + n_ff, n_ff, e, up_s, up_b);
                }
                activate(mw.act, g, g + n_ff, h2.data() + r * n_ff, n_ff, mw.alpha, mw.limit);
            }
    });

    // Down of every slot, from its row of h2.
    const Acts act_down = convert(pool, down, h2.data(), S, sc.vec[2], sc.packed[2]);
    std::vector<float>& y = sc.y;
    y.resize(static_cast<size_t>(S * n_out));
    pieces.clear();
    for (int64_t e = 0; e < n_exp; ++e) {
        const int64_t n_r = start[e + 1] - start[e];
        if (n_r == 0) continue;
        add_pieces(pieces, down, act_down, e, {nullptr, start[e], n_r}, y.data() + start[e] * n_out, n_out, n_out * K,
                   pool.size());
    }
    run_pieces(pool, pieces);
    if (down_s || down_b)
        for (int64_t e = 0; e < n_exp; ++e)
            for (int64_t r = start[e]; r < start[e + 1]; ++r)
                scale_bias(y.data() + r * n_out, n_out, e, down_s, down_b);

    // Weighted sum over the slots in slot order.
    pool.parallel_for(T, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
            float* o = out.data + t * n_out;
            for (int64_t s = 0; s < K; ++s) {
                const float w = weights.data[t * K + s];
                const float* ys = y.data() + at[static_cast<size_t>(t * K + s)] * n_out;
                if (s == 0)
                    for (int64_t i = 0; i < n_out; ++i) o[i] = ys[i] * w;
                else
                    for (int64_t i = 0; i < n_out; ++i) o[i] += ys[i] * w;
            }
        }
    });
}

}  // namespace zinc::backend::cpu
