// Forward pass of the llama-like families (llama, qwen3); MODELS.md §2-3 give the op order.
#include <cmath>
#include <stdexcept>

#include "engine/llama_like.h"

namespace zinc::engine {

LlamaLike::LlamaLike(const gguf::Model& m, backend::Backend& be, int n_ctx)
    : Family(be), p_(model::read_llama_like_params(m)) {
    n_ctx_ = n_ctx > 0 ? n_ctx : p_.n_ctx_train;
    const model::LlamaLikeTensors t = model::bind_llama_like_tensors(m, p_);
    token_embd_ = be.load_weight(*t.token_embd);
    output_norm_ = be.load_weight(*t.output_norm);
    // A tied head is the embedding table itself: one copy on the backend.
    output_ = t.output == t.token_embd ? token_embd_ : be.load_weight(*t.output);
    const int64_t kv_dim = int64_t(p_.n_head_kv) * p_.head_dim;
    for (const model::LlamaLikeLayer& L : t.layers) {
        Layer w;
        w.attn_norm = be.load_weight(*L.attn_norm);
        w.wq = be.load_weight(*L.wq);
        w.wk = be.load_weight(*L.wk);
        w.wv = be.load_weight(*L.wv);
        w.wo = be.load_weight(*L.wo);
        if (L.q_norm) {
            w.q_norm = be.load_weight(*L.q_norm);
            w.k_norm = be.load_weight(*L.k_norm);
        }
        w.ffn_norm = be.load_weight(*L.ffn_norm);
        w.ffn_gate = be.load_weight(*L.ffn_gate);
        w.ffn_up = be.load_weight(*L.ffn_up);
        w.ffn_down = be.load_weight(*L.ffn_down);
        w.kv = be.alloc_kv(kv_dim, n_ctx_);
        layers_.push_back(std::move(w));
    }
}

void LlamaLike::reserve(int64_t T) {
    if (T <= scratch_rows_) return;
    const int64_t q_dim = int64_t(p_.n_head) * p_.head_dim, kv_dim = int64_t(p_.n_head_kv) * p_.head_dim;
    x_ = be_.alloc(T, p_.n_embd);
    h_ = be_.alloc(T, p_.n_embd);
    q_ = be_.alloc(T, q_dim);
    k_ = be_.alloc(T, kv_dim);
    v_ = be_.alloc(T, kv_dim);
    attn_ = be_.alloc(T, q_dim);
    gate_ = be_.alloc(T, p_.n_ff);
    up_ = be_.alloc(T, p_.n_ff);
    logits_ = be_.alloc(T, p_.n_vocab);
    scratch_rows_ = T;
}

backend::Act LlamaLike::compute(std::span<const int32_t> ids, int64_t pos0, bool all_logits) {
    const int64_t T = static_cast<int64_t>(ids.size());
    reserve(T);
    using backend::Backend;
    auto x = Backend::rows_of(x_, 0, T), h = Backend::rows_of(h_, 0, T), q = Backend::rows_of(q_, 0, T),
         k = Backend::rows_of(k_, 0, T), v = Backend::rows_of(v_, 0, T), attn = Backend::rows_of(attn_, 0, T),
         gate = Backend::rows_of(gate_, 0, T), up = Backend::rows_of(up_, 0, T);
    std::vector<int32_t> pos(T);
    for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(pos0 + t);

    const backend::RopeParams rope{p_.n_rot, p_.rope_neox, p_.rope_base, p_.rope_freq_scale};
    const backend::AttentionParams ap{p_.n_head, p_.n_head_kv, p_.head_dim, 1.0f / std::sqrt(float(p_.head_dim))};

    be_.get_rows(token_embd_, ids, x);
    for (Layer& L : layers_) {
        be_.rms_norm(x, &L.attn_norm, p_.rms_eps, p_.n_embd, h);
        be_.matmul(L.wq, h, q);
        be_.matmul(L.wk, h, k);
        be_.matmul(L.wv, h, v);
        if (p_.qk_norm) {
            be_.rms_norm(q, &L.q_norm, p_.rms_eps, p_.head_dim, q);
            be_.rms_norm(k, &L.k_norm, p_.rms_eps, p_.head_dim, k);
        }
        be_.rope(q, p_.head_dim, pos, rope);
        be_.rope(k, p_.head_dim, pos, rope);
        be_.kv_write(L.kv, k, v, pos0);
        be_.attention(q, L.kv, pos0, ap, attn);
        be_.matmul(L.wo, attn, h);
        be_.add(x, h, x);
        be_.rms_norm(x, &L.ffn_norm, p_.rms_eps, p_.n_embd, h);
        be_.matmul(L.ffn_gate, h, gate);
        be_.matmul(L.ffn_up, h, up);
        be_.swiglu(gate, up, gate);
        be_.matmul(L.ffn_down, gate, h);
        be_.add(x, h, x);
    }
    // Only the rows whose logits are wanted go through the head.
    const int64_t first = all_logits ? 0 : T - 1, n_out = T - first;
    auto xo = Backend::rows_of(x, first, n_out), ho = Backend::rows_of(h, first, n_out);
    auto lo = Backend::rows_of(logits_, 0, n_out);
    be_.rms_norm(xo, &output_norm_, p_.rms_eps, p_.n_embd, ho);
    be_.matmul(output_, ho, lo);
    return lo;
}

}  // namespace zinc::engine
