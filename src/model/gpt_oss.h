// `gpt-oss` (docs/models.md §7): a pre-norm MoE decoder with biases on every projection, learned attention sinks,
// alternating sliding-window / full attention, YaRN RoPE and clamped SwiGLU ("SwiGLU-OAI") experts.
#pragma once

#include <string>
#include <vector>

#include "model/metadata.h"
#include "model/schema.h"

namespace zinc::model {

struct GptOssParams {
    int n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_vocab = 0;
    int n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
    int sliding_window = 0;
    std::vector<bool> swa;  // per layer: true = sliding-window layer
    float rms_eps = 1e-5f;
    int n_rot = 0;
    float rope_base = 150000.0f, rope_base_swa = 150000.0f;
    RopeScaling rope_scaling;  // YaRN (docs/models.md §1.4)
    float swiglu_alpha = 1.702f, swiglu_limit = 7.0f;
};

GptOssParams read_gpt_oss_params(const Metadata& md);

template <class W>
struct GptOssLayer {
    W attn_norm, wq, bq, wk, bk, wv, bv, wo, bo, sinks;
    W post_attn_norm;  // the pre-MoE norm (HF post_attention_layernorm)
    W gate_inp, gate_inp_b;
    Experts<W> experts;
};

template <class W>
struct GptOssWeights : Head<W> {
    std::vector<GptOssLayer<W>> layers;
};

template <class W>
void declare_tensors(TensorBinder<W>& b, const GptOssParams& p, GptOssWeights<W>& w) {
    using R = TensorRole;
    const int64_t E = p.n_embd, Q = int64_t{p.n_head} * p.head_dim, KV = int64_t{p.n_head_kv} * p.head_dim;
    const int64_t F = p.n_ff_exp, X = p.n_expert;
    declare_head(b, E, p.n_vocab, w);
    w.layers.resize(static_cast<size_t>(p.n_layer));
    for (int l = 0; l < p.n_layer; ++l) {
        GptOssLayer<W>& L = w.layers[l];
        Declare<W> d(b, l);
        d.tensor(L.attn_norm, "attn_norm.weight", {E}, R::Norm);
        d.tensor(L.wq, "attn_q.weight", {E, Q}, R::Matrix);
        d.tensor(L.bq, "attn_q.bias", {Q}, R::Bias);
        d.tensor(L.wk, "attn_k.weight", {E, KV}, R::Matrix);
        d.tensor(L.bk, "attn_k.bias", {KV}, R::Bias);
        d.tensor(L.wv, "attn_v.weight", {E, KV}, R::Matrix);
        d.tensor(L.bv, "attn_v.bias", {KV}, R::Bias);
        d.tensor(L.wo, "attn_output.weight", {Q, E}, R::Matrix);
        d.tensor(L.bo, "attn_output.bias", {E}, R::Bias);
        d.tensor(L.sinks, "attn_sinks.weight", {p.n_head}, R::Sinks);
        d.tensor(L.post_attn_norm, "post_attention_norm.weight", {E}, R::Norm);
        d.tensor(L.gate_inp, "ffn_gate_inp.weight", {E, X}, R::Router);
        d.tensor(L.gate_inp_b, "ffn_gate_inp.bias", {X}, R::Bias);
        declare_experts(d, E, F, X, ExpertLayout{.biases = true}, L.experts);
    }
}

}  // namespace zinc::model
