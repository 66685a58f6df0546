// Forward pass of gpt-oss (MODELS.md 7.4): biased Q/K/V/O projections, YaRN RoPE, attention with sinks
// and a sliding window on alternate layers, and a top-k routed MoE of clamped-SwiGLU experts with biases.
#include "engine/gpt_oss.h"

#include <cmath>
#include <stdexcept>

namespace zinc::engine {

GptOss::GptOss(const gguf::Model& m, backend::Backend& be, int n_ctx) : Family(be), p_(model::read_gpt_oss_params(m)) {
    n_ctx_ = n_ctx > 0 ? n_ctx : p_.n_ctx_train;
    const model::GptOssTensors t = model::bind_gpt_oss_tensors(m, p_);
    token_embd_ = be.load_weight(*t.token_embd);
    output_norm_ = be.load_weight(*t.output_norm);
    // A tied head is the embedding table itself: one copy on the backend.
    output_ = t.output == t.token_embd ? token_embd_ : be.load_weight(*t.output);
    const int64_t kv_dim = int64_t(p_.n_head_kv) * p_.head_dim;
    for (const model::GptOssLayer& L : t.layers) {
        Layer w;
        w.attn_norm = be.load_weight(*L.attn_norm);
        w.wq = be.load_weight(*L.wq);
        w.bq = be.load_weight(*L.bq);
        w.wk = be.load_weight(*L.wk);
        w.bk = be.load_weight(*L.bk);
        w.wv = be.load_weight(*L.wv);
        w.bv = be.load_weight(*L.bv);
        w.wo = be.load_weight(*L.wo);
        w.bo = be.load_weight(*L.bo);
        w.sinks = be.load_weight(*L.sinks);
        w.post_attn_norm = be.load_weight(*L.post_attn_norm);
        w.gate_inp = be.load_weight(*L.gate_inp);
        w.gate_inp_b = be.load_weight(*L.gate_inp_b);
        w.gate_exps = be.load_weight(*L.gate_exps);
        w.gate_exps_b = be.load_weight(*L.gate_exps_b);
        w.up_exps = be.load_weight(*L.up_exps);
        w.up_exps_b = be.load_weight(*L.up_exps_b);
        w.down_exps = be.load_weight(*L.down_exps);
        w.down_exps_b = be.load_weight(*L.down_exps_b);
        // Full-length cache on every layer (sliding layers only read the last `sliding_window` rows).
        w.kv = be.alloc_kv(kv_dim, n_ctx_);
        layers_.push_back(std::move(w));
    }
}

void GptOss::reserve(int64_t T) {
    if (T <= scratch_rows_) return;
    const int64_t q_dim = int64_t(p_.n_head) * p_.head_dim, kv_dim = int64_t(p_.n_head_kv) * p_.head_dim;
    x_ = be_.alloc(T, p_.n_embd);
    h_ = be_.alloc(T, p_.n_embd);
    q_ = be_.alloc(T, q_dim);
    k_ = be_.alloc(T, kv_dim);
    v_ = be_.alloc(T, kv_dim);
    attn_ = be_.alloc(T, q_dim);
    router_ = be_.alloc(T, p_.n_expert);
    route_w_ = be_.alloc(T, p_.n_expert_used);
    route_ids_ = be_.alloc_ids(T, p_.n_expert_used);
    moe_out_ = be_.alloc(T, p_.n_embd);
    logits_ = be_.alloc(T, p_.n_vocab);
    scratch_rows_ = T;
}

backend::Act GptOss::compute(std::span<const int32_t> ids, int64_t pos0, bool all_logits) {
    const int64_t T = static_cast<int64_t>(ids.size());
    reserve(T);
    using backend::Backend;
    const int64_t E = p_.n_embd;
    const float eps = p_.rms_eps;
    auto x = Backend::rows_of(x_, 0, T), h = Backend::rows_of(h_, 0, T), q = Backend::rows_of(q_, 0, T),
         k = Backend::rows_of(k_, 0, T), v = Backend::rows_of(v_, 0, T), attn = Backend::rows_of(attn_, 0, T),
         rl = Backend::rows_of(router_, 0, T), rw = Backend::rows_of(route_w_, 0, T),
         moe = Backend::rows_of(moe_out_, 0, T);
    backend::IdAct ri{route_ids_.data, T, route_ids_.cols};
    std::vector<int32_t> pos(T);
    for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(pos0 + t);

    backend::MoeWeights mw;
    mw.act = backend::MoeActivation::swiglu_oai;
    mw.alpha = p_.swiglu_alpha;
    mw.limit = p_.swiglu_limit;

    be_.get_rows(token_embd_, ids, x);
    for (int l = 0; l < p_.n_layer; ++l) {
        Layer& L = layers_[l];
        backend::RopeParams rope{p_.n_rot, true, p_.swa[l] ? p_.rope_base_swa : p_.rope_base, p_.rope_freq_scale};
        rope.ext_factor = p_.yarn_ext_factor;
        rope.yarn_low = p_.yarn_low;
        rope.yarn_high = p_.yarn_high;
        rope.mscale = p_.yarn_mscale;
        backend::AttentionParams ap{p_.n_head, p_.n_head_kv, p_.head_dim, 1.0f / std::sqrt(float(p_.head_dim))};
        ap.sinks = &L.sinks;
        if (p_.swa[l]) ap.window = p_.sliding_window;

        be_.rms_norm(x, &L.attn_norm, eps, E, h);
        be_.matmul(L.wq, h, q);
        be_.add_bias(q, L.bq);
        be_.matmul(L.wk, h, k);
        be_.add_bias(k, L.bk);
        be_.matmul(L.wv, h, v);
        be_.add_bias(v, L.bv);
        be_.rope(q, p_.head_dim, pos, rope);
        be_.rope(k, p_.head_dim, pos, rope);
        be_.kv_write(L.kv, k, v, pos0);
        be_.attention(q, L.kv, pos0, ap, attn);
        be_.matmul(L.wo, attn, h);
        be_.add_bias(h, L.bo);
        be_.add(x, h, x);

        // MoE: router logits (+ bias), top-k then softmax over the k selected, biased SwiGLU-OAI experts.
        be_.rms_norm(x, &L.post_attn_norm, eps, E, h);
        be_.matmul(L.gate_inp, h, rl);
        be_.add_bias(rl, L.gate_inp_b);
        be_.moe_route(rl, p_.n_expert_used, true, ri, rw);
        mw.gate = &L.gate_exps;
        mw.up = &L.up_exps;
        mw.down = &L.down_exps;
        mw.gate_bias = &L.gate_exps_b;
        mw.up_bias = &L.up_exps_b;
        mw.down_bias = &L.down_exps_b;
        be_.moe_ffn(h, ri, rw, mw, moe);
        be_.add(x, moe, x);
    }
    const int64_t first = all_logits ? 0 : T - 1, n_out = T - first;
    auto xo = Backend::rows_of(x, first, n_out), ho = Backend::rows_of(h, first, n_out);
    auto lo = Backend::rows_of(logits_, 0, n_out);
    be_.rms_norm(xo, &output_norm_, eps, E, ho);
    be_.matmul(output_, ho, lo);
    return lo;
}

}  // namespace zinc::engine
