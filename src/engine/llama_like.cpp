// Forward pass of the llama-like families (llama, mistral3, qwen2, qwen3, qwen3moe, phi3); docs/models.md §2-3 give
// the op order.
#include "engine/llama_like.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/tensor_loader.h"

namespace zinc::engine {

LlamaLike::LlamaLike(const gguf::Model& m, backend::Backend& be, ContextSize size)
    : Family(be, m, size), p_(model::read_llama_like_params(model::Metadata(m))) {
    // The temperature is exactly 1 below its floor; past it, queries would need a per-position scale that the
    // attention does not have yet.
    if (p_.attn_temp_scale != 0.0f && n_ctx() > p_.n_ctx_orig)
        throw std::invalid_argument("a context of " + std::to_string(n_ctx()) + " positions is not supported for " +
                                    p_.arch + " yet: its attention temperature starts at position " +
                                    std::to_string(p_.n_ctx_orig) + " (run with --ctx-size " +
                                    std::to_string(p_.n_ctx_orig) + " or less)");
    TensorLoader loader(m, be);
    model::declare_tensors(loader, p_, w_);
    const int64_t kv_dim = int64_t{p_.n_head_kv} * p_.head_dim;
    // LongRoPE (phi3): the long factors when a sequence may run past the original context, else the short ones, as
    // llama.cpp chooses (by the context size, not by the positions reached).
    const bool long_ctx = n_ctx() > p_.n_ctx_orig;
    const bool has_factors = long_ctx ? w_.has_rope_long : w_.has_rope_short;
    const backend::Weight* rope_factors = has_factors ? (long_ctx ? &w_.rope_long : &w_.rope_short) : nullptr;
    for (int l = 0; l < p_.n_layer; ++l) {
        const model::LlamaLikeLayer<backend::Weight>& L = w_.layers[l];
        AttentionBlock a = attention_block(L.attn_norm, p_.rms_eps, L.wq, L.wk, &L.wv, L.wo);
        if (p_.qkv_bias) {
            a.bq = &L.bq;
            a.bk = &L.bk;
            a.bv = &L.bv;
        }
        if (p_.qk_norm) a.norms = {true, true, false, &L.q_norm, &L.k_norm, p_.rms_eps};
        a.rope = rope_params(p_.n_rot, p_.rope_neox, p_.rope_base, p_.rope_scaling);
        a.rope.freq_factors = rope_factors;
        a.rope.mscale *= p_.rope_attn_factor;
        a.ap = {p_.n_head, p_.n_head_kv, p_.head_dim, 1.0f / std::sqrt(float(p_.head_dim))};
        a.kv = kv_cache(kv_dim);
        if (p_.n_expert > 0)
            layers_.push_back({std::move(a), moe_block(L.ffn_norm, p_.rms_eps, L.ffn_gate_inp, p_.n_expert,
                                                       p_.n_expert_used,
                                                       moe_weights(L.experts, backend::MoeActivation::swiglu))});
        else
            layers_.push_back({std::move(a), ffn_block(L.ffn_norm, p_.rms_eps, L.ffn_gate, L.ffn_up, L.ffn_down)});
    }
    alloc_scratch(p_.n_embd);
}

backend::Act LlamaLike::compute(std::span<const int32_t> ids) {
    backend::Act x = rows(s_.x), h = rows(s_.h);
    be_.get_rows(w_.token_embd, ids, x);
    residual(-1, x);
    run_layers(x, h);
    return head(x, h, w_, p_.rms_eps);
}

}  // namespace zinc::engine
