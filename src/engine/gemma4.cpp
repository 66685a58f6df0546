// Forward pass of gemma4 (MODELS.md 6.4): sandwich norms, per-layer head geometry, K = V on global
// layers, weightless V norm, attention scale 1, GeGLU, optional MoE beside the dense MLP, tied head with
// a final soft-cap.
#include "engine/gemma4.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace zinc::engine {
namespace {

// The first `rows` rows of `cols` values in the memory of a scratch buffer allocated for the widest layer.
backend::Act view(const backend::Act& buf, int64_t rows, int64_t cols) { return {buf.data, rows, cols}; }

}  // namespace

Gemma4::Gemma4(const gguf::Model& m, backend::Backend& be, int n_ctx) : Family(be), p_(model::read_gemma4_params(m)) {
    n_ctx_ = n_ctx > 0 ? n_ctx : p_.n_ctx_train;
    const model::Gemma4Tensors t = model::bind_gemma4_tensors(m, p_);
    token_embd_ = be.load_weight(*t.token_embd);
    output_norm_ = be.load_weight(*t.output_norm);
    // A tied head is the embedding table itself: one copy on the backend.
    output_ = t.output == t.token_embd ? token_embd_ : be.load_weight(*t.output);
    if (t.rope_freqs) rope_freqs_ = be.load_weight(*t.rope_freqs);
    for (int l = 0; l < p_.n_layer; ++l) {
        const model::Gemma4Layer& L = t.layers[l];
        Layer w;
        w.attn_norm = be.load_weight(*L.attn_norm);
        w.wq = be.load_weight(*L.wq);
        w.wk = be.load_weight(*L.wk);
        w.has_v = L.wv != nullptr;
        if (w.has_v) w.wv = be.load_weight(*L.wv);
        w.wo = be.load_weight(*L.wo);
        w.q_norm = be.load_weight(*L.q_norm);
        w.k_norm = be.load_weight(*L.k_norm);
        w.post_attn_norm = be.load_weight(*L.post_attn_norm);
        w.ffn_norm = be.load_weight(*L.ffn_norm);
        w.ffn_gate = be.load_weight(*L.ffn_gate);
        w.ffn_up = be.load_weight(*L.ffn_up);
        w.ffn_down = be.load_weight(*L.ffn_down);
        w.post_ffw_norm = be.load_weight(*L.post_ffw_norm);
        w.out_scale = L.out_scale;
        w.moe = L.gate_inp != nullptr;
        if (w.moe) {
            any_moe_ = true;
            w.gate_inp = be.load_weight(*L.gate_inp);
            w.gate_inp_scale = be.load_weight(*L.gate_inp_scale);
            w.merged_gate_up = L.gate_up_exps != nullptr;
            if (w.merged_gate_up) {
                w.gate_up_exps = be.load_weight(*L.gate_up_exps);
            } else {
                w.gate_exps = be.load_weight(*L.gate_exps);
                w.up_exps = be.load_weight(*L.up_exps);
            }
            w.down_exps = be.load_weight(*L.down_exps);
            w.has_down_scale = L.down_exps_scale != nullptr;
            if (w.has_down_scale) w.down_exps_scale = be.load_weight(*L.down_exps_scale);
            w.pre_ffw_norm_2 = be.load_weight(*L.pre_ffw_norm_2);
            w.post_ffw_norm_1 = be.load_weight(*L.post_ffw_norm_1);
            w.post_ffw_norm_2 = be.load_weight(*L.post_ffw_norm_2);
        }
        // Full-length cache on every layer (sliding layers only read the last `sliding_window` rows).
        const int64_t d = p_.layer_head_dim(l), kv_dim = int64_t(p_.n_head_kv[l]) * d;
        w.kv = be.alloc_kv(kv_dim, n_ctx_);
        max_q_ = std::max<int64_t>(max_q_, int64_t(p_.n_head) * d);
        max_kv_ = std::max(max_kv_, kv_dim);
        max_ff_ = std::max<int64_t>(max_ff_, p_.n_ff[l]);
        layers_.push_back(std::move(w));
    }
}

void Gemma4::reserve(int64_t T) {
    if (T <= scratch_rows_) return;
    x_ = be_.alloc(T, p_.n_embd);
    h_ = be_.alloc(T, p_.n_embd);
    f_ = be_.alloc(T, p_.n_embd);
    q_ = be_.alloc(T, max_q_);
    k_ = be_.alloc(T, max_kv_);
    v_ = be_.alloc(T, max_kv_);
    attn_ = be_.alloc(T, max_q_);
    gate_ = be_.alloc(T, max_ff_);
    up_ = be_.alloc(T, max_ff_);
    logits_ = be_.alloc(T, p_.n_vocab);
    if (any_moe_) {
        router_ = be_.alloc(T, p_.n_expert);
        route_w_ = be_.alloc(T, p_.n_expert_used);
        route_ids_ = be_.alloc_ids(T, p_.n_expert_used);
        moe_out_ = be_.alloc(T, p_.n_embd);
    }
    scratch_rows_ = T;
}

backend::Act Gemma4::compute(std::span<const int32_t> ids, int64_t pos0, bool all_logits) {
    const int64_t T = static_cast<int64_t>(ids.size());
    reserve(T);
    const int64_t E = p_.n_embd;
    const float eps = p_.rms_eps;
    backend::Act x = view(x_, T, E), h = view(h_, T, E), f = view(f_, T, E);
    std::vector<int32_t> pos(T);
    for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(pos0 + t);

    be_.get_rows(token_embd_, ids, x);
    be_.scale(x, std::sqrt(float(E)), x);  // exact f32 sqrt(n_embd), as HF in f32 and llama.cpp
    for (int l = 0; l < p_.n_layer; ++l) {
        Layer& L = layers_[l];
        const int d = p_.layer_head_dim(l), n_kv = p_.n_head_kv[l];
        backend::Act q = view(q_, T, int64_t(p_.n_head) * d), attn = view(attn_, T, int64_t(p_.n_head) * d);
        backend::Act k = view(k_, T, int64_t(n_kv) * d), v = view(v_, T, int64_t(n_kv) * d);
        backend::RopeParams rope{p_.layer_n_rot(l), true, p_.layer_rope_base(l), 1.0f};
        if (!p_.swa[l]) rope.freq_factors = &rope_freqs_;  // proportional RoPE (MODELS.md 1.2)

        // Attention: Q, K per-head RMSNorm + RoPE; V = weightless per-head RMSNorm of attn_v (or, on global
        // layers without attn_v, of the raw K projection); scale 1.
        be_.rms_norm(x, &L.attn_norm, eps, E, h);
        be_.matmul(L.wq, h, q);
        be_.rms_norm(q, &L.q_norm, eps, d, q);
        be_.rope(q, d, pos, rope);
        be_.matmul(L.wk, h, k);
        if (L.has_v) {
            be_.matmul(L.wv, h, v);
            be_.rms_norm(v, nullptr, eps, d, v);
        } else {
            be_.rms_norm(k, nullptr, eps, d, v);
        }
        be_.rms_norm(k, &L.k_norm, eps, d, k);
        be_.rope(k, d, pos, rope);
        be_.kv_write(L.kv, k, v, pos0);
        backend::AttentionParams ap{p_.n_head, n_kv, d, 1.0f};
        if (p_.swa[l]) ap.window = p_.sliding_window;
        be_.attention(q, L.kv, pos0, ap, attn);
        be_.matmul(L.wo, attn, h);
        be_.rms_norm(h, &L.post_attn_norm, eps, E, h);
        be_.add(x, h, x);

        // FFN: dense GeGLU MLP, plus (MoE layers) the routed experts, each with its own post-norm.
        backend::Act gate = view(gate_, T, p_.n_ff[l]), up = view(up_, T, p_.n_ff[l]);
        be_.rms_norm(x, &L.ffn_norm, eps, E, h);
        be_.matmul(L.ffn_gate, h, gate);
        be_.matmul(L.ffn_up, h, up);
        be_.geglu(gate, up, gate);
        be_.matmul(L.ffn_down, gate, f);
        if (L.moe) {
            be_.rms_norm(f, &L.post_ffw_norm_1, eps, E, f);
            // Router on the raw residual: weightless RMSNorm, times ffn_gate_inp.scale and 1/sqrt(n_embd).
            backend::Act rl = view(router_, T, p_.n_expert), rw = view(route_w_, T, p_.n_expert_used);
            backend::IdAct ri{route_ids_.data, T, p_.n_expert_used};
            backend::Act m2 = view(moe_out_, T, E);
            be_.rms_norm(x, &L.gate_inp_scale, eps, E, h);
            be_.scale(h, 1.0f / std::sqrt(float(E)), h);
            be_.matmul(L.gate_inp, h, rl);
            be_.moe_route(rl, p_.n_expert_used, true, ri, rw);
            backend::MoeWeights mw;
            if (L.merged_gate_up) {
                mw.gate_up = &L.gate_up_exps;
            } else {
                mw.gate = &L.gate_exps;
                mw.up = &L.up_exps;
            }
            mw.down = &L.down_exps;
            if (L.has_down_scale) mw.down_scale = &L.down_exps_scale;
            mw.act = backend::MoeActivation::geglu;
            be_.rms_norm(x, &L.pre_ffw_norm_2, eps, E, h);
            be_.moe_ffn(h, ri, rw, mw, m2);
            be_.rms_norm(m2, &L.post_ffw_norm_2, eps, E, m2);
            be_.add(f, m2, f);
        }
        be_.rms_norm(f, &L.post_ffw_norm, eps, E, f);
        be_.add(x, f, x);
        if (L.out_scale != 1.0f) be_.scale(x, L.out_scale, x);  // the whole residual stream
    }
    // Only the rows whose logits are wanted go through the head.
    const int64_t first = all_logits ? 0 : T - 1, n_out = T - first;
    auto xo = backend::Backend::rows_of(x, first, n_out), ho = backend::Backend::rows_of(h, first, n_out);
    auto lo = view(logits_, n_out, p_.n_vocab);
    be_.rms_norm(xo, &output_norm_, eps, E, ho);
    be_.matmul(output_, ho, lo);
    if (p_.final_softcap > 0.0f) be_.softcap(lo, p_.final_softcap);
    return lo;
}

}  // namespace zinc::engine
