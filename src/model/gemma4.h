// `gemma4` (Gemma 4 dense and MoE; docs/models.md §6): a sandwich-norm decoder with interleaved sliding-window and
// global attention layers of different head geometry, K = V on global layers, proportional RoPE (rope_freqs) on
// global layers, GeGLU FFNs, an optional routed MoE beside the dense MLP, tied embeddings and a final logit
// soft-cap. `gemma3` (Gemma 3 text; §6.7) is the same decoder with one head geometry, V of its own projection and
// not normed, plain RoPE (linear scaling on the global layers), a query scale, and no soft-cap.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "model/metadata.h"
#include "model/schema.h"

namespace zinc::model {

struct Gemma4Params {
    int n_layer = 0, n_embd = 0, n_head = 0, n_vocab = 0;
    int head_dim = 0, head_dim_swa = 0;  // global / sliding layers (K and V heads have the same size)
    int n_rot = 0, n_rot_swa = 0;
    float rope_base = 1e6f, rope_base_swa = 1e4f;
    int sliding_window = 0;
    float rms_eps = 1e-6f;
    float final_softcap = 30.0f;  // llama.cpp's default when the key is absent; 0 = none
    std::vector<int> n_head_kv, n_ff;  // per layer
    std::vector<bool> swa;             // per layer: true = sliding-window layer
    int n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
    float rope_freq_scale = 1.0f;   // global layers (gemma3's linear scaling); sliding layers are not scaled
    float q_scale = 1.0f;           // the attention scale: gemma4 1, gemma3 1/sqrt(its query_pre_attn_scalar)
    // Gemma 4's additions, which gemma3 has none of: V normed per head without a weight, global layers that may take
    // V from the K projection (no attn_v), proportional RoPE (rope_freqs) on the global layers, layer output scales.
    bool gemma4 = true;

    int layer_head_dim(int l) const { return swa[l] ? head_dim_swa : head_dim; }
    int layer_n_rot(int l) const { return swa[l] ? n_rot_swa : n_rot; }
    float layer_rope_base(int l) const { return swa[l] ? rope_base_swa : rope_base; }
};

Gemma4Params read_gemma4_params(const Metadata& md);

template <class W>
struct Gemma4Layer {
    W attn_norm, wq, wk, wv, wo, q_norm, k_norm, post_attn_norm;
    W ffn_norm, ffn_gate, ffn_up, ffn_down, post_ffw_norm;
    bool has_v = false;          // global layers of the released models take V from the K projection
    bool has_out_scale = false;  // layer_output_scale: one f32 multiplying the residual stream after the layer
    W out_scale;
    // MoE layers: the router and its input scale, the routed experts and their norms
    bool moe = false;
    W gate_inp, gate_inp_scale;
    Experts<W> experts;
    W pre_ffw_norm_2, post_ffw_norm_1, post_ffw_norm_2;
};

template <class W>
struct Gemma4Weights : Head<W> {
    W rope_freqs;  // global layers' frequency factors
    std::vector<Gemma4Layer<W>> layers;
};

template <class W>
void declare_tensors(TensorBinder<W>& b, const Gemma4Params& p, Gemma4Weights<W>& w) {
    using R = TensorRole;
    const int64_t E = p.n_embd;
    declare_head(b, E, p.n_vocab, w);
    if (p.gemma4 && std::find(p.swa.begin(), p.swa.end(), false) != p.swa.end())
        Declare<W>(b, -1).tensor(w.rope_freqs, "rope_freqs.weight", {p.n_rot / 2}, R::RopeFreqs);
    w.layers.resize(static_cast<size_t>(p.n_layer));
    for (int l = 0; l < p.n_layer; ++l) {
        Gemma4Layer<W>& L = w.layers[l];
        Declare<W> d(b, l);
        const int64_t D = p.layer_head_dim(l), Q = int64_t{p.n_head} * D, KV = int64_t{p.n_head_kv[l]} * D;
        const int64_t F = p.n_ff[l];
        d.tensor(L.attn_norm, "attn_norm.weight", {E}, R::Norm);
        d.tensor(L.wq, "attn_q.weight", {E, Q}, R::Matrix);
        d.tensor(L.wk, "attn_k.weight", {E, KV}, R::Matrix);
        L.has_v = d.optional(L.wv, "attn_v.weight", {E, KV}, R::Matrix, p.swa[l] || !p.gemma4);
        if (!L.has_v && !p.gemma4) b.fail("layer " + std::to_string(l) + " has no attn_v.weight");
        d.tensor(L.q_norm, "attn_q_norm.weight", {D}, R::Norm);
        d.tensor(L.k_norm, "attn_k_norm.weight", {D}, R::Norm);
        d.tensor(L.wo, "attn_output.weight", {Q, E}, R::Matrix);
        d.tensor(L.post_attn_norm, "post_attention_norm.weight", {E}, R::Norm);
        d.tensor(L.ffn_norm, "ffn_norm.weight", {E}, R::Norm);
        d.tensor(L.ffn_gate, "ffn_gate.weight", {E, F}, R::Matrix);
        d.tensor(L.ffn_up, "ffn_up.weight", {E, F}, R::Matrix);
        d.tensor(L.ffn_down, "ffn_down.weight", {F, E}, R::Matrix);
        d.tensor(L.post_ffw_norm, "post_ffw_norm.weight", {E}, R::Norm);
        L.has_out_scale = d.optional(L.out_scale, "layer_output_scale.weight", {1}, R::Scale, p.gemma4);
        L.moe = d.has("ffn_gate_inp.weight", p.n_expert > 0);
        if (!L.moe) continue;
        if (p.n_expert <= 0)
            b.fail("tensor blk." + std::to_string(l) + ".ffn_gate_inp.weight is present but gemma4.expert_count is missing");
        const int64_t X = p.n_expert, Fe = p.n_ff_exp;
        d.tensor(L.gate_inp, "ffn_gate_inp.weight", {E, X}, R::Router);
        d.tensor(L.gate_inp_scale, "ffn_gate_inp.scale", {E}, R::Scale);
        declare_experts(d, E, Fe, X, ExpertLayout{.merged = true, .down_scale = true}, L.experts);
        d.tensor(L.pre_ffw_norm_2, "pre_ffw_norm_2.weight", {E}, R::Norm);
        d.tensor(L.post_ffw_norm_1, "post_ffw_norm_1.weight", {E}, R::Norm);
        d.tensor(L.post_ffw_norm_2, "post_ffw_norm_2.weight", {E}, R::Norm);
    }
}

}  // namespace zinc::model
