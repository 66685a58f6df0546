// The llama-like families (`llama`, `mistral3`, `qwen2`, `qwen3`, `qwen3moe`): a pre-norm decoder with GQA attention,
// RoPE and a SwiGLU FFN; mistral3 is llama with YaRN and an attention temperature past the original context, qwen2
// adds biases to the Q/K/V projections and NeoX RoPE, qwen3 per-head Q/K RMSNorm and NeoX RoPE, and qwen3moe is qwen3
// with routed experts (top k of a softmax, renormalized) for the FFN (docs/models.md §2-3).
#pragma once

#include <string>
#include <vector>

#include "model/metadata.h"
#include "model/schema.h"

namespace zinc::model {

struct LlamaLikeParams {
    std::string arch;
    int n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0, n_vocab = 0;
    int n_rot = 0;
    bool rope_neox = false;  // qwen2, qwen3: halves; llama: adjacent pairs
    float rope_base = 10000.0f;
    RopeScaling rope_scaling;  // linear or YaRN
    // mistral3 (llama.cpp's llama-4 scaling): queries at position p are scaled by 1 + t ln(1 + floor(p / n)), with t
    // attention.temperature_scale (0: none) and n the original context; 1 below n.
    float attn_temp_scale = 0.0f;
    int attn_temp_floor = 0;
    float rms_eps = 1e-5f;
    bool qk_norm = false;
    bool qkv_bias = false;  // qwen2
    int n_expert = 0, n_expert_used = 0, n_ff_exp = 0;  // qwen3moe; 0: a dense FFN
};

LlamaLikeParams read_llama_like_params(const Metadata& md);

template <class W>
struct LlamaLikeLayer {
    W attn_norm, wq, wk, wv, wo, q_norm, k_norm;  // q_norm, k_norm: qwen3 only
    W bq, bk, bv;                                  // qwen2 only
    W ffn_norm, ffn_gate, ffn_up, ffn_down;  // ffn_gate, ffn_up, ffn_down: the dense FFN
    W ffn_gate_inp;                          // qwen3moe: the router, and its experts
    Experts<W> experts;
};

template <class W>
struct LlamaLikeWeights : Head<W> {
    std::vector<LlamaLikeLayer<W>> layers;
};

template <class W>
void declare_tensors(TensorBinder<W>& b, const LlamaLikeParams& p, LlamaLikeWeights<W>& w) {
    using R = TensorRole;
    const int64_t E = p.n_embd, D = p.head_dim, Q = int64_t{p.n_head} * D, KV = int64_t{p.n_head_kv} * D, F = p.n_ff;
    declare_head(b, E, p.n_vocab, w);
    w.layers.resize(static_cast<size_t>(p.n_layer));
    for (int l = 0; l < p.n_layer; ++l) {
        LlamaLikeLayer<W>& L = w.layers[l];
        Declare<W> d(b, l);
        d.tensor(L.attn_norm, "attn_norm.weight", {E}, R::Norm);
        d.tensor(L.wq, "attn_q.weight", {E, Q}, R::Matrix);
        d.tensor(L.wk, "attn_k.weight", {E, KV}, R::Matrix);
        d.tensor(L.wv, "attn_v.weight", {E, KV}, R::Matrix);
        if (p.qkv_bias) {
            d.tensor(L.bq, "attn_q.bias", {Q}, R::Bias);
            d.tensor(L.bk, "attn_k.bias", {KV}, R::Bias);
            d.tensor(L.bv, "attn_v.bias", {KV}, R::Bias);
        }
        if (p.qk_norm) {
            d.tensor(L.q_norm, "attn_q_norm.weight", {D}, R::Norm);
            d.tensor(L.k_norm, "attn_k_norm.weight", {D}, R::Norm);
        }
        d.tensor(L.wo, "attn_output.weight", {Q, E}, R::Matrix);
        d.tensor(L.ffn_norm, "ffn_norm.weight", {E}, R::Norm);
        if (p.n_expert > 0) {
            d.tensor(L.ffn_gate_inp, "ffn_gate_inp.weight", {E, int64_t{p.n_expert}}, R::Router);
            declare_experts(d, E, p.n_ff_exp, p.n_expert, ExpertLayout{}, L.experts);
            continue;
        }
        d.tensor(L.ffn_gate, "ffn_gate.weight", {E, F}, R::Matrix);
        d.tensor(L.ffn_up, "ffn_up.weight", {E, F}, R::Matrix);
        d.tensor(L.ffn_down, "ffn_down.weight", {F, E}, R::Matrix);
    }
}

}  // namespace zinc::model
