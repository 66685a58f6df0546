// The Qwen3.5 / Qwen3.6 hybrid families (`qwen35`, `qwen35moe`; docs/models.md §4-5): gated delta-net
// (recurrent) layers and gated full-attention layers; the FFN of each layer is a dense SwiGLU or a routed MoE with
// a sigmoid-gated shared expert, as the file's tensors say.
#pragma once

#include <string>
#include <vector>

#include "model/metadata.h"
#include "model/schema.h"

namespace zinc::model {

struct Qwen35Params {
    std::string arch;
    int n_layer = 0;  // main stack (block_count - nextn_predict_layers)
    int n_embd = 0, n_vocab = 0;
    std::vector<bool> recurrent;  // per layer: gated delta-net (true) or full attention
    // Full attention
    int n_head = 0, n_head_kv = 0, head_dim = 0, n_rot = 0;
    float rope_base = 10000.0f;
    float rms_eps = 1e-6f;
    // Gated delta-net: n_k key heads, n_v value heads of d_state (= d_k = d_v), conv kernel width
    int ssm_conv_kernel = 0, ssm_d_state = 0, ssm_n_k = 0, ssm_n_v = 0;
    int64_t key_dim() const { return int64_t{ssm_n_k} * ssm_d_state; }
    int64_t value_dim() const { return int64_t{ssm_n_v} * ssm_d_state; }
    int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
    // FFN: dense width per layer (0 where the file gives none) and the MoE sizes (0 without experts)
    std::vector<int> n_ff;
    int n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;
};

Qwen35Params read_qwen35_params(const Metadata& md);

template <class W>
struct Qwen35Layer {
    W attn_norm, post_attention_norm;
    // gated delta-net
    W attn_qkv, attn_gate, ssm_beta, ssm_alpha, ssm_dt, ssm_a, ssm_conv1d, ssm_norm, ssm_out;
    // gated full attention
    W attn_q, attn_k, attn_v, attn_output, attn_q_norm, attn_k_norm;
    // dense FFN
    W ffn_gate, ffn_up, ffn_down;
    // MoE FFN: the router, the routed experts, the sigmoid-gated shared expert
    bool moe = false, shared_expert = false;
    W gate_inp;
    Experts<W> experts;
    W gate_inp_shexp, gate_shexp, up_shexp, down_shexp;
};

template <class W>
struct Qwen35Weights : Head<W> {
    std::vector<Qwen35Layer<W>> layers;
};

template <class W>
void declare_tensors(TensorBinder<W>& b, const Qwen35Params& p, Qwen35Weights<W>& w) {
    using R = TensorRole;
    const int64_t E = p.n_embd, D = p.head_dim, Q = int64_t{p.n_head} * D, KV = int64_t{p.n_head_kv} * D;
    const int64_t nv = p.ssm_n_v, ds = p.ssm_d_state;
    declare_head(b, E, p.n_vocab, w);
    w.layers.resize(static_cast<size_t>(p.n_layer));
    for (int l = 0; l < p.n_layer; ++l) {
        Qwen35Layer<W>& L = w.layers[l];
        Declare<W> d(b, l);
        d.tensor(L.attn_norm, "attn_norm.weight", {E}, R::Norm);
        d.tensor(L.post_attention_norm, "post_attention_norm.weight", {E}, R::Norm);
        if (p.recurrent[l]) {
            d.tensor(L.attn_qkv, "attn_qkv.weight", {E, p.conv_dim()}, R::Matrix);
            d.tensor(L.attn_gate, "attn_gate.weight", {E, p.value_dim()}, R::Matrix);
            d.tensor(L.ssm_beta, "ssm_beta.weight", {E, nv}, R::Matrix);
            d.tensor(L.ssm_alpha, "ssm_alpha.weight", {E, nv}, R::Matrix);
            d.tensor(L.ssm_dt, "ssm_dt.bias", {nv}, R::SsmDtBias);
            d.tensor(L.ssm_a, "ssm_a", {nv}, R::SsmA);
            d.tensor(L.ssm_conv1d, "ssm_conv1d.weight", {p.ssm_conv_kernel, p.conv_dim()}, R::SsmConv);
            d.tensor(L.ssm_norm, "ssm_norm.weight", {ds}, R::Norm);
            d.tensor(L.ssm_out, "ssm_out.weight", {p.value_dim(), E}, R::Matrix);
        } else {
            d.tensor(L.attn_q, "attn_q.weight", {E, 2 * Q}, R::Matrix);  // per head [query | gate]
            d.tensor(L.attn_k, "attn_k.weight", {E, KV}, R::Matrix);
            d.tensor(L.attn_v, "attn_v.weight", {E, KV}, R::Matrix);
            d.tensor(L.attn_output, "attn_output.weight", {Q, E}, R::Matrix);
            d.tensor(L.attn_q_norm, "attn_q_norm.weight", {D}, R::Norm);
            d.tensor(L.attn_k_norm, "attn_k_norm.weight", {D}, R::Norm);
        }
        L.moe = d.has("ffn_gate_inp.weight", p.n_expert > 0);
        if (!L.moe) {
            const int64_t F = p.n_ff[l];
            if (F <= 0) b.fail("layer " + std::to_string(l) + " has no FFN width (" + p.arch + ".feed_forward_length)");
            d.tensor(L.ffn_gate, "ffn_gate.weight", {E, F}, R::Matrix);
            d.tensor(L.ffn_up, "ffn_up.weight", {E, F}, R::Matrix);
            d.tensor(L.ffn_down, "ffn_down.weight", {F, E}, R::Matrix);
            continue;
        }
        if (p.n_expert <= 0) b.fail("layer " + std::to_string(l) + " has experts but " + p.arch + ".expert_count is missing");
        const int64_t X = p.n_expert, Fe = p.n_ff_exp, Fs = p.n_ff_shexp;
        d.tensor(L.gate_inp, "ffn_gate_inp.weight", {E, X}, R::Router);
        declare_experts(d, E, Fe, X, ExpertLayout{}, L.experts);
        L.shared_expert = d.has("ffn_gate_inp_shexp.weight", Fs > 0);
        if (L.shared_expert) {
            d.tensor(L.gate_inp_shexp, "ffn_gate_inp_shexp.weight", {E}, R::Vector);  // {E} or {E, 1}
            d.tensor(L.gate_shexp, "ffn_gate_shexp.weight", {E, Fs}, R::Matrix);
            d.tensor(L.up_shexp, "ffn_up_shexp.weight", {E, Fs}, R::Matrix);
            d.tensor(L.down_shexp, "ffn_down_shexp.weight", {Fs, E}, R::Matrix);
        }
    }
}

}  // namespace zinc::model
