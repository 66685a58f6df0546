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
    const int64_t q_dim = int64_t{p_.n_head} * p_.head_dim, kv_dim = int64_t{p_.n_head_kv} * p_.head_dim;
    // Sliding layers keep only their window (a ring).
    for (int l = 0; l < p_.n_layer; ++l) kv_.push_back(kv_cache(kv_dim, p_.swa[l] ? p_.sliding_window : 0));
    x_ = scratch(p_.n_embd);
    h_ = scratch(p_.n_embd);
    q_ = scratch(q_dim);
    k_ = scratch(kv_dim);
    v_ = scratch(kv_dim);
    attn_ = scratch(q_dim);
    router_ = scratch(p_.n_expert);
    route_w_ = scratch(p_.n_expert_used);
    route_ids_ = scratch_ids(p_.n_expert_used);
    moe_out_ = scratch(p_.n_embd);
}

backend::Act GptOss::compute(std::span<const int32_t> ids) {
    const int64_t E = p_.n_embd;
    const float eps = p_.rms_eps;
    auto x = rows(x_), h = rows(h_), q = rows(q_), k = rows(k_), v = rows(v_), attn = rows(attn_), rl = rows(router_),
         rw = rows(route_w_), moe = rows(moe_out_);
    backend::IdAct ri = rows(route_ids_);

    be_.get_rows(w_.token_embd, ids, x);
    residual(-1, x);
    for (int l = 0; l < p_.n_layer; ++l) {
        const model::GptOssLayer<backend::Weight>& L = w_.layers[l];
        backend::RopeParams rope{p_.n_rot, true, p_.swa[l] ? p_.rope_base_swa : p_.rope_base, p_.rope_freq_scale};
        rope.ext_factor = p_.yarn_ext_factor;
        rope.yarn_low = p_.yarn_low;
        rope.yarn_high = p_.yarn_high;
        rope.mscale = p_.yarn_mscale;
        backend::AttentionParams ap{p_.n_head, p_.n_head_kv, p_.head_dim, 1.0f / std::sqrt(float(p_.head_dim))};
        ap.sinks = &L.sinks;
        if (p_.swa[l]) ap.window = p_.sliding_window;

        be_.rms_norm(x, &L.attn_norm, eps, E, h);
        const backend::Weight* qkv_w[] = {&L.wq, &L.wk, &L.wv};
        const backend::Weight* qkv_b[] = {&L.bq, &L.bk, &L.bv};
        backend::Act* qkv[] = {&q, &k, &v};
        be_.matmuls(qkv_w, h, qkv, qkv_b);  // the biases in the matvec's epilogue on the GPU
        attend(kv_[l], q, k, v, {}, p_.head_dim, rope, ap, attn);
        be_.matmul_add(L.wo, attn, h, x, &L.bo);  // x += wo · attn + bo, h as scratch

        // MoE: router logits (+ bias), top-k then softmax over the k selected, biased SwiGLU-OAI experts.
        be_.rms_norm(x, &L.post_attn_norm, eps, E, h);
        const backend::Weight* router_w[] = {&L.gate_inp};
        const backend::Weight* router_b[] = {&L.gate_inp_b};
        backend::Act* router[] = {&rl};
        be_.matmuls(router_w, h, router, router_b);
        be_.moe_route(rl, p_.n_expert_used, true, ri, rw);
        backend::MoeWeights mw = moe_weights(L.experts, backend::MoeActivation::swiglu_oai);
        mw.alpha = p_.swiglu_alpha;
        mw.limit = p_.swiglu_limit;
        be_.moe_ffn(h, ri, rw, mw, moe);
        be_.add(x, moe, x);
        residual(l, x);
    }
    return head(x, h, w_, eps);
}

}  // namespace zinc::engine
