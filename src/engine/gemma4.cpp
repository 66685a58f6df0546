// Forward pass of gemma4 (docs/models.md §6.4): sandwich norms, per-layer head geometry, K = V on global layers,
// weightless V norm, attention scale 1, GeGLU, optional MoE beside the dense MLP, tied head with a final soft-cap;
// and of gemma3 (§6.7), which leaves out the V norm, K = V and proportional RoPE and scales the queries.
#include "engine/gemma4.h"

#include <cmath>

#include "engine/tensor_loader.h"

namespace zinc::engine {

Gemma4::Gemma4(const gguf::Model& m, backend::Backend& be, ContextSize size)
    : Family(be, m, size), p_(model::read_gemma4_params(model::Metadata(m))) {
    TensorLoader loader(m, be);
    model::declare_tensors(loader, p_, w_);
    const float eps = p_.rms_eps;
    for (int l = 0; l < p_.n_layer; ++l) {
        const model::Gemma4Layer<backend::Weight>& L = w_.layers[l];
        const int d = p_.layer_head_dim(l), n_kv = p_.n_head_kv[l];
        // Attention: Q, K per-head RMSNorm + RoPE; V = weightless per-head RMSNorm of attn_v (or, on global layers
        // without attn_v, of the raw K projection); scale 1; the output through its own norm.
        AttentionBlock a = attention_block(L.attn_norm, eps, L.wq, L.wk, L.has_v ? &L.wv : nullptr, L.wo);
        a.post_norm = &L.post_attn_norm;
        a.norms = {true, true, p_.gemma4 && L.has_v, &L.q_norm, &L.k_norm, eps};
        a.rope = {p_.layer_n_rot(l), true, p_.layer_rope_base(l), p_.swa[l] ? 1.0f : p_.rope_freq_scale};
        if (!p_.swa[l] && p_.gemma4) a.rope.freq_factors = &w_.rope_freqs;  // docs/models.md §1.2
        a.ap = {p_.n_head, n_kv, d, p_.q_scale};
        if (p_.swa[l]) a.ap.window = p_.sliding_window;
        // Sliding layers keep only their window (a ring).
        a.kv = kv_cache(int64_t{n_kv} * d, p_.swa[l] ? p_.sliding_window : 0);
        // FFN: the dense GeGLU MLP, plus (MoE layers) the routed experts, each with its own post-norm; then
        // x = (x + post_ffw_norm(the sum)) * the layer's output scale.
        FfnBlock f = ffn_block(L.ffn_norm, eps, L.ffn_gate, L.ffn_up, L.ffn_down, backend::GatedActivation::geglu);
        f.post_norm = &L.post_ffw_norm;
        // layer_output_scale is one number: read once from the file, not from backend memory at every token.
        f.out_scale = L.has_out_scale ? loader.scalar(L.out_scale) : 1.0f;
        if (L.moe) {
            // The router reads a weightless RMSNorm of x times ffn_gate_inp.scale and 1/sqrt(n_embd); the experts
            // their own norm of x.
            ExpertsBeside e;
            e.norm = &L.pre_ffw_norm_2;
            e.router = &L.gate_inp;
            e.router_norm = &L.gate_inp_scale;
            e.router_scale = 1.0f / std::sqrt(float(p_.n_embd));
            e.dense_post_norm = &L.post_ffw_norm_1;
            e.post_norm = &L.post_ffw_norm_2;
            e.n_expert = p_.n_expert;
            e.k = p_.n_expert_used;
            e.experts = moe_weights(L.experts, backend::MoeActivation::geglu);
            f.beside = e;
        }
        layers_.push_back({std::move(a), std::move(f)});
    }
    alloc_scratch(p_.n_embd);
}

backend::Act Gemma4::compute(std::span<const int32_t> ids) {
    backend::Act x = rows(s_.x), h = rows(s_.h);
    be_.get_rows(w_.token_embd, ids, x);
    be_.scale(x, std::sqrt(float(p_.n_embd)), x);  // exact f32 sqrt(n_embd), as HF in f32 and llama.cpp
    residual(-1, x);
    run_layers(x, h);
    return head(x, h, w_, p_.rms_eps, p_.final_softcap);
}

}  // namespace zinc::engine
