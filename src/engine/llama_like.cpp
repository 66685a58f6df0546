// Forward pass of the llama-like families (llama, qwen3); docs/models.md §2-3 give the op order.
#include "engine/llama_like.h"

#include <cmath>

#include "engine/tensor_loader.h"

namespace zinc::engine {

LlamaLike::LlamaLike(const gguf::Model& m, backend::Backend& be, ContextSize size)
    : Family(be, m, size), p_(model::read_llama_like_params(model::Metadata(m))) {
    TensorLoader loader(m, be);
    model::declare_tensors(loader, p_, w_);
    const int64_t q_dim = int64_t{p_.n_head} * p_.head_dim, kv_dim = int64_t{p_.n_head_kv} * p_.head_dim;
    for (int l = 0; l < p_.n_layer; ++l) kv_.push_back(kv_cache(kv_dim));
    x_ = scratch(p_.n_embd);
    h_ = scratch(p_.n_embd);
    q_ = scratch(q_dim);
    k_ = scratch(kv_dim);
    v_ = scratch(kv_dim);
    attn_ = scratch(q_dim);
    gate_ = scratch(p_.n_ff);
    up_ = scratch(p_.n_ff);
}

backend::Act LlamaLike::compute(std::span<const int32_t> ids) {
    auto x = rows(x_), h = rows(h_), q = rows(q_), k = rows(k_), v = rows(v_), attn = rows(attn_), gate = rows(gate_),
         up = rows(up_);
    const backend::RopeParams rope{p_.n_rot, p_.rope_neox, p_.rope_base, p_.rope_freq_scale};
    const backend::AttentionParams ap{p_.n_head, p_.n_head_kv, p_.head_dim, 1.0f / std::sqrt(float(p_.head_dim))};

    be_.get_rows(w_.token_embd, ids, x);
    residual(-1, x);
    for (int l = 0; l < p_.n_layer; ++l) {
        const model::LlamaLikeLayer<backend::Weight>& L = w_.layers[l];
        be_.rms_norm(x, &L.attn_norm, p_.rms_eps, p_.n_embd, h);
        const backend::Weight* qkv_w[] = {&L.wq, &L.wk, &L.wv};
        backend::Act* qkv[] = {&q, &k, &v};
        be_.matmuls(qkv_w, h, qkv);
        backend::HeadNorms norms;
        if (p_.qk_norm) norms = {true, true, false, &L.q_norm, &L.k_norm, p_.rms_eps};
        attend(kv_[l], q, k, v, norms, p_.head_dim, rope, ap, attn);
        be_.matmul_add(L.wo, attn, h, x);  // x += wo · attn, h as scratch
        be_.rms_norm(x, &L.ffn_norm, p_.rms_eps, p_.n_embd, h);
        be_.ffn_gated(L.ffn_gate, L.ffn_up, h, backend::GatedActivation::swiglu, up, gate);
        be_.matmul_add(L.ffn_down, gate, h, x);
        residual(l, x);
    }
    return head(x, h, w_, p_.rms_eps);
}

}  // namespace zinc::engine
