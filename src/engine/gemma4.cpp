// Forward pass of gemma4 (docs/models.md §6.4): sandwich norms, per-layer head geometry, K = V on global layers,
// weightless V norm, attention scale 1, GeGLU, optional MoE beside the dense MLP, tied head with a final soft-cap.
#include "engine/gemma4.h"

#include <algorithm>
#include <cmath>

#include "engine/tensor_loader.h"

namespace zinc::engine {

Gemma4::Gemma4(const gguf::Model& m, backend::Backend& be, ContextSize size)
    : Family(be, m, size), p_(model::read_gemma4_params(model::Metadata(m))) {
    TensorLoader loader(m, be);
    model::declare_tensors(loader, p_, w_);
    int64_t max_q = 0, max_kv = 0, max_ff = 0;
    bool any_moe = false;
    for (int l = 0; l < p_.n_layer; ++l) {
        const model::Gemma4Layer<backend::Weight>& L = w_.layers[l];
        // layer_output_scale is one number: read once from the file, not from backend memory at every token.
        out_scale_.push_back(L.has_out_scale ? loader.scalar(L.out_scale) : 1.0f);
        // Sliding layers keep only their window (a ring).
        const int64_t d = p_.layer_head_dim(l), kv_dim = int64_t{p_.n_head_kv[l]} * d;
        kv_.push_back(kv_cache(kv_dim, p_.swa[l] ? p_.sliding_window : 0));
        max_q = std::max(max_q, int64_t{p_.n_head} * d);
        max_kv = std::max(max_kv, kv_dim);
        max_ff = std::max<int64_t>(max_ff, p_.n_ff[l]);
        any_moe = any_moe || L.moe;
    }
    x_ = scratch(p_.n_embd);
    h_ = scratch(p_.n_embd);
    f_ = scratch(p_.n_embd);
    q_ = scratch(max_q);
    k_ = scratch(max_kv);
    v_ = scratch(max_kv);
    attn_ = scratch(max_q);
    gate_ = scratch(max_ff);
    up_ = scratch(max_ff);
    if (any_moe) {
        router_ = scratch(p_.n_expert);
        route_w_ = scratch(p_.n_expert_used);
        route_ids_ = scratch_ids(p_.n_expert_used);
        moe_out_ = scratch(p_.n_embd);
        router_in_ = scratch(p_.n_embd);
        experts_in_ = scratch(p_.n_embd);
    }
}

backend::Act Gemma4::compute(std::span<const int32_t> ids) {
    const int64_t E = p_.n_embd;
    const float eps = p_.rms_eps;
    backend::Act x = rows(x_), h = rows(h_), f = rows(f_);

    be_.get_rows(w_.token_embd, ids, x);
    be_.scale(x, std::sqrt(float(E)), x);  // exact f32 sqrt(n_embd), as HF in f32 and llama.cpp
    residual(-1, x);
    for (int l = 0; l < p_.n_layer; ++l) {
        const model::Gemma4Layer<backend::Weight>& L = w_.layers[l];
        const int d = p_.layer_head_dim(l), n_kv = p_.n_head_kv[l];
        backend::Act q = rows(q_, int64_t{p_.n_head} * d), attn = rows(attn_, int64_t{p_.n_head} * d);
        backend::Act k = rows(k_, int64_t{n_kv} * d), v = rows(v_, int64_t{n_kv} * d);
        backend::RopeParams rope{p_.layer_n_rot(l), true, p_.layer_rope_base(l), 1.0f};
        if (!p_.swa[l]) rope.freq_factors = &w_.rope_freqs;  // proportional RoPE (docs/models.md §1.2)

        // Attention: Q, K per-head RMSNorm + RoPE; V = weightless per-head RMSNorm of attn_v (or, on global
        // layers without attn_v, of the raw K projection); scale 1.
        be_.rms_norm(x, &L.attn_norm, eps, E, h);
        const backend::Weight* qkv_w[] = {&L.wq, &L.wk, &L.wv};
        backend::Act* qkv[] = {&q, &k, &v};
        be_.matmuls(std::span(qkv_w, L.has_v ? 3 : 2), h, std::span(qkv, L.has_v ? 3 : 2));
        if (!L.has_v) be_.rms_norm(k, nullptr, eps, d, v);  // V from the raw K projection, normalized apart
        const backend::HeadNorms norms{true, true, L.has_v, &L.q_norm, &L.k_norm, eps};
        backend::AttentionParams ap{p_.n_head, n_kv, d, 1.0f};
        if (p_.swa[l]) ap.window = p_.sliding_window;
        attend(kv_[l], q, k, v, norms, d, rope, ap, attn);
        be_.matmul(L.wo, attn, h);
        be_.norm_add(h, &L.post_attn_norm, eps, x);  // x += post_attn_norm(h)

        // FFN: dense GeGLU MLP, plus (MoE layers) the routed experts, each with its own post-norm.
        backend::Act gate = rows(gate_, p_.n_ff[l]), up = rows(up_, p_.n_ff[l]);
        // MoE layers normalize the residual stream three ways at once: for the dense MLP (h), and for the router
        // (weightless RMSNorm, times ffn_gate_inp.scale and 1/sqrt(n_embd)) and the experts, which read x as it is
        // here.
        backend::Act router_in = rows(router_in_), experts_in = rows(experts_in_);
        if (L.moe) {
            const backend::Weight* norm_w[] = {&L.ffn_norm, &L.gate_inp_scale, &L.pre_ffw_norm_2};
            backend::Act* normed[] = {&h, &router_in, &experts_in};
            const float norm_s[] = {1.0f, 1.0f / std::sqrt(float(E)), 1.0f};
            be_.rms_norms(x, norm_w, eps, normed, norm_s);
        } else {
            be_.rms_norm(x, &L.ffn_norm, eps, E, h);
        }
        // On MoE layers the dense MLP (f) runs beside the router and the routed experts (m2).
        if (L.moe) be_.begin_side();
        be_.ffn_gated(L.ffn_gate, L.ffn_up, h, backend::GatedActivation::geglu, up, gate);
        be_.matmul(L.ffn_down, gate, f);
        if (L.moe) {
            be_.rms_norm(f, &L.post_ffw_norm_1, eps, E, f);
            be_.end_side();
            backend::Act rl = rows(router_), rw = rows(route_w_), m2 = rows(moe_out_);
            backend::IdAct ri = rows(route_ids_);
            be_.matmul(L.gate_inp, router_in, rl);
            be_.moe_route(rl, p_.n_expert_used, true, ri, rw);
            be_.moe_ffn(experts_in, ri, rw, moe_weights(L.experts, backend::MoeActivation::geglu), m2);
            be_.join_side();
            be_.norm_add(m2, &L.post_ffw_norm_2, eps, f);  // f += post_ffw_norm_2(m2)
        }
        // x = (x + post_ffw_norm(f)) * the layer's output scale: the whole residual stream
        be_.norm_add(f, &L.post_ffw_norm, eps, x, out_scale_[l]);
        residual(l, x);
    }
    return head(x, h, w_, eps, p_.final_softcap);
}

}  // namespace zinc::engine
