// The llama-like families (`llama`, `mistral3`, `qwen2`, `qwen3`, `qwen3moe`, `phi3`): a pre-norm decoder with GQA
// attention, RoPE and a SwiGLU FFN; mistral3 is llama with YaRN and an attention temperature past the original
// context, qwen2 adds biases to the Q/K/V projections and NeoX RoPE, qwen3 per-head Q/K RMSNorm and NeoX RoPE, qwen3moe
// is qwen3 with routed experts (top k of a softmax, renormalized) for the FFN, and phi3 (Phi-3, Phi-4) keeps Q/K/V and
// gate/up in fused tensors and may rotate part of each head with LongRoPE factors (docs/models.md §2-3).
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
    int n_ctx_orig = 0;        // rope.scaling.original_context_length (default: the training context)
    // mistral3 (llama.cpp's llama-4 scaling): queries at position p are scaled by 1 + t ln(1 + floor(p / n_ctx_orig)),
    // with t attention.temperature_scale (0: none); 1 below n_ctx_orig.
    float attn_temp_scale = 0.0f;
    float rms_eps = 1e-5f;
    bool qk_norm = false;
    bool qkv_bias = false;  // qwen2
    // phi3: attn_qkv holds the Q, K and V rows (separate attn_q/k/v where a file has those instead), and ffn_up the
    // gate rows then the up rows (no ffn_gate).
    bool fused = false;
    // phi3's LongRoPE: the frequency divisors rope_factors_long (used when a sequence's context is longer than
    // n_ctx_orig, as llama.cpp picks them) or rope_factors_short, and the factor that multiplies cos and sin.
    // longrope: whether the model's files carry the factors (the converter writes attn_factor with them).
    bool longrope = false;
    float rope_attn_factor = 1.0f;
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
    bool has_rope_long = false, has_rope_short = false;  // phi3
    W rope_long, rope_short;
};

template <class W>
void declare_tensors(TensorBinder<W>& b, const LlamaLikeParams& p, LlamaLikeWeights<W>& w) {
    using R = TensorRole;
    const int64_t E = p.n_embd, D = p.head_dim, Q = int64_t{p.n_head} * D, KV = int64_t{p.n_head_kv} * D, F = p.n_ff;
    declare_head(b, E, p.n_vocab, w);
    if (p.fused) {
        // One copy for every layer, as llama.cpp reads them.
        Declare<W> m(b, -1);
        w.has_rope_long = m.optional(w.rope_long, "rope_factors_long.weight", {p.n_rot / 2}, R::RopeFactorsLong,
                                     p.longrope);
        w.has_rope_short = m.optional(w.rope_short, "rope_factors_short.weight", {p.n_rot / 2}, R::RopeFactorsShort,
                                      p.longrope);
    }
    w.layers.resize(static_cast<size_t>(p.n_layer));
    for (int l = 0; l < p.n_layer; ++l) {
        LlamaLikeLayer<W>& L = w.layers[l];
        Declare<W> d(b, l);
        d.tensor(L.attn_norm, "attn_norm.weight", {E}, R::Norm);
        if (p.fused)
            for (const char* bias : {"attn_qkv.bias", "attn_q.bias", "attn_k.bias", "attn_v.bias"})
                if (d.has(bias, false))
                    b.fail("tensor blk." + std::to_string(l) + "." + bias +
                           ": biases on phi3's attention projections are not supported");
        if (p.fused && d.has("attn_qkv.weight", true)) {
            d.parts({&L.wq, &L.wk, &L.wv}, "attn_qkv.weight", {E, Q + 2 * KV}, R::Matrix, {Q, KV, KV});
        } else {
            d.tensor(L.wq, "attn_q.weight", {E, Q}, R::Matrix);
            d.tensor(L.wk, "attn_k.weight", {E, KV}, R::Matrix);
            d.tensor(L.wv, "attn_v.weight", {E, KV}, R::Matrix);
        }
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
        if (p.fused) {
            // The first half is the gate (SiLU'd), as transformers' chunk(2) and ggml's swiglu split it.
            d.parts({&L.ffn_gate, &L.ffn_up}, "ffn_up.weight", {E, 2 * F}, R::Matrix, {F, F});
        } else {
            d.tensor(L.ffn_gate, "ffn_gate.weight", {E, F}, R::Matrix);
            d.tensor(L.ffn_up, "ffn_up.weight", {E, F}, R::Matrix);
        }
        d.tensor(L.ffn_down, "ffn_down.weight", {F, E}, R::Matrix);
    }
}

}  // namespace zinc::model
