// Forward pass of gpt-oss (docs/models.md §7.4): biased Q/K/V/O projections, YaRN RoPE, attention with sinks and a
// sliding window on alternate layers, and a top-k routed MoE of clamped-SwiGLU experts with biases.
#include "engine/gpt_oss.h"

#include <cmath>

#include "engine/tensor_loader.h"

namespace zinc::engine {

GptOss::GptOss(const gguf::Model& m, backend::Backend& be, ContextSize size)
    : Family(be, m, size), p_(model::read_gpt_oss_params(model::Metadata(m))) {
    TensorLoader loader(m, be);
    model::declare_tensors(loader, p_, w_);
    const int64_t kv_dim = int64_t{p_.n_head_kv} * p_.head_dim;
    for (int l = 0; l < p_.n_layer; ++l) {
        const model::GptOssLayer<backend::Weight>& L = w_.layers[l];
        AttentionBlock a = attention_block(L.attn_norm, p_.rms_eps, L.wq, L.wk, &L.wv, L.wo);
        a.bq = &L.bq;  // the biases in the matvec's epilogue on the GPU
        a.bk = &L.bk;
        a.bv = &L.bv;
        a.bo = &L.bo;
        a.rope = rope_params(p_.n_rot, true, p_.swa[l] ? p_.rope_base_swa : p_.rope_base, p_.rope_scaling);
        a.ap = {p_.n_head, p_.n_head_kv, p_.head_dim, 1.0f / std::sqrt(float(p_.head_dim))};
        a.ap.sinks = &L.sinks;
        // Sliding layers keep only their window (a ring).
        if (p_.swa[l]) a.ap.window = p_.sliding_window;
        a.kv = kv_cache(kv_dim, p_.swa[l] ? p_.sliding_window : 0);
        // Router logits (+ bias), top-k then softmax over the k selected, biased SwiGLU-OAI experts.
        MoeBlock e = moe_block(L.post_attn_norm, p_.rms_eps, L.gate_inp, p_.n_expert, p_.n_expert_used,
                               moe_weights(L.experts, backend::MoeActivation::swiglu_oai));
        e.router_bias = &L.gate_inp_b;
        e.experts.alpha = p_.swiglu_alpha;
        e.experts.limit = p_.swiglu_limit;
        layers_.push_back({std::move(a), e});
    }
    alloc_scratch(p_.n_embd);
}

backend::Act GptOss::compute(std::span<const int32_t> ids) {
    backend::Act x = rows(s_.x), h = rows(s_.h);
    be_.get_rows(w_.token_embd, ids, x);
    residual(-1, x);
    run_layers(x, h);
    return head(x, h, w_, p_.rms_eps);
}

}  // namespace zinc::engine
