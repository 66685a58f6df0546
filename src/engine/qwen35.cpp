// Forward pass of qwen35 / qwen35moe; docs/models.md §4.4 and §5.4 give the op order.
#include "engine/qwen35.h"

#include <cmath>

#include "engine/tensor_loader.h"

namespace zinc::engine {

Qwen35::Qwen35(const gguf::Model& m, backend::Backend& be, ContextSize size)
    : Family(be, m, size), p_(model::read_qwen35_params(model::Metadata(m))) {
    TensorLoader loader(m, be);
    model::declare_tensors(loader, p_, w_);
    const float eps = p_.rms_eps;
    for (int l = 0; l < p_.n_layer; ++l) {
        const model::Qwen35Layer<backend::Weight>& L = w_.layers[l];
        std::vector<Block> layer;
        if (p_.recurrent[l]) {
            // x += ssm_out · GatedRMSNorm(DeltaRule(L2Norm(q), L2Norm(k), v)) with q, k, v from the causal conv of
            // attn_qkv · h; each sequence has its own conv window and delta-rule state.
            DeltaNetBlock d;
            d.norm = &L.attn_norm;
            d.eps = eps;
            d.qkv = &L.attn_qkv;
            d.z = &L.attn_gate;
            d.alpha = &L.ssm_alpha;
            d.beta = &L.ssm_beta;
            d.out = &L.ssm_out;
            d.w = {&L.ssm_conv1d, &L.ssm_dt, &L.ssm_a, &L.ssm_norm};
            d.p.n_k = p_.ssm_n_k;
            d.p.n_v = p_.ssm_n_v;
            d.p.d_k = d.p.d_v = p_.ssm_d_state;
            d.p.tiled = true;  // GGUF value-head order (docs/models.md §4.3)
            d.p.scale = 1.0f / std::sqrt(float(p_.ssm_d_state));
            for (int q = 0; q < n_seq(); ++q) {
                d.conv_state.push_back(be.alloc(p_.ssm_conv_kernel - 1, p_.conv_dim()));
                d.state.push_back(be.alloc(p_.ssm_n_v, int64_t{p_.ssm_d_state} * p_.ssm_d_state));
            }
            layer.push_back(std::move(d));
        } else {
            // x += attn_output · (Attention(RoPE(QNorm(q)), RoPE(KNorm(k)), v) ⊙ σ(gate)), q and gate packed per
            // head in attn_q. IMRoPE on text = NeoX with position p on the first n_rot dims (checked when reading
            // the sections).
            AttentionBlock a = attention_block(L.attn_norm, eps, L.attn_q, L.attn_k, &L.attn_v, L.attn_output);
            a.q_gate = true;
            a.norms = {true, true, false, &L.attn_q_norm, &L.attn_k_norm, eps};
            a.rope = {p_.n_rot, true, p_.rope_base};
            a.ap = {p_.n_head, p_.n_head_kv, p_.head_dim, 1.0f / std::sqrt(float(p_.head_dim))};
            a.kv = kv_cache(int64_t{p_.n_head_kv} * p_.head_dim);
            layer.push_back(std::move(a));
        }
        if (!L.moe) {
            layer.push_back(ffn_block(L.post_attention_norm, eps, L.ffn_gate, L.ffn_up, L.ffn_down));
        } else {
            // The routed experts, and the sigmoid-gated shared expert beside them.
            MoeBlock e = moe_block(L.post_attention_norm, eps, L.gate_inp, p_.n_expert, p_.n_expert_used,
                                   moe_weights(L.experts, backend::MoeActivation::swiglu));
            if (L.shared_expert) {
                e.shared_gate = &L.gate_shexp;
                e.shared_up = &L.up_shexp;
                e.shared_down = &L.down_shexp;
                e.shared_input_gate = &L.gate_inp_shexp;
            }
            layer.push_back(e);
        }
        layers_.push_back(std::move(layer));
    }
    alloc_scratch(p_.n_embd);
}

backend::Act Qwen35::compute(std::span<const int32_t> ids) {
    backend::Act x = rows(s_.x), h = rows(s_.h);
    be_.get_rows(w_.token_embd, ids, x);
    residual(-1, x);
    run_layers(x, h);
    return head(x, h, w_, p_.rms_eps);
}

}  // namespace zinc::engine
