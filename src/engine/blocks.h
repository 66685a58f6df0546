// The blocks a layer is built of: attention, a gated FFN, a mixture of experts and a gated delta-net. A family
// describes its layers as lists of them (its weights, shapes and variants, settled once when it is built), and
// Family::run_layers runs them in order over the residual stream. The blocks are the forward passes' only callers of
// the backend's fused ops, each where its op order is the fused op's sequence.
//
// Every block reads the residual stream x through its input norm (into h) and adds its output to x. A block may
// leave the next block's input norm in h, fused into its residual add (Backend::shared_expert_add_norm); the next
// one then does not compute it again.
#pragma once

#include <optional>
#include <variant>
#include <vector>

#include "backend/backend.h"
#include "model/metadata.h"

namespace zinc::engine {

// x += wo · attention(q, k, v) (+ bo), each row over its own sequence: h = rms_norm(x) · norm; q, k, v = wq, wk, wv
// of h (+ their biases); the heads normed (norms) and rotated (rope) on the way into the cache.
struct AttentionBlock {
    const backend::Weight* norm = nullptr;
    float eps = 0.0f;
    const backend::Weight *wq = nullptr, *wk = nullptr, *wv = nullptr, *wo = nullptr;
    // Biases of the projections (gpt-oss); null for none.
    const backend::Weight *bq = nullptr, *bk = nullptr, *bv = nullptr, *bo = nullptr;
    // wv null: V is K's projection, normed per head without a weight (Gemma 4's global layers).
    // q_gate: wq gives each head's query and then its output gate, and the output is attention ⊙ σ(gate) (Qwen3.5).
    bool q_gate = false;
    // Set: x += post_norm(wo · attention) (Gemma 4's sandwich norms) instead.
    const backend::Weight* post_norm = nullptr;
    backend::HeadNorms norms;
    backend::RopeParams rope;
    backend::AttentionParams ap;        // its head_dim is the heads' width
    std::vector<backend::KvLayer> kv;  // the layer's cache of each sequence (Family::kv_cache)
};

// Routed experts beside a dense FFN (Gemma 4's MoE layers): they read x normed with their own weight (norm), the
// router x normed with router_norm and scaled by router_scale; the dense output is normed with dense_post_norm, the
// experts' with post_norm, and the two are summed.
struct ExpertsBeside {
    const backend::Weight *norm = nullptr, *router = nullptr, *router_norm = nullptr;
    float router_scale = 1.0f;
    const backend::Weight *dense_post_norm = nullptr, *post_norm = nullptr;
    int n_expert = 0, k = 0;
    backend::MoeWeights experts;
};

// x += down · act(gate · h) ⊙ (up · h), h = rms_norm(x) · norm; with post_norm,
// x = (x + post_norm(down · ...)) · out_scale.
struct FfnBlock {
    const backend::Weight* norm = nullptr;
    float eps = 0.0f;
    const backend::Weight *gate = nullptr, *up = nullptr, *down = nullptr;
    backend::GatedActivation act = backend::GatedActivation::swiglu;
    const backend::Weight* post_norm = nullptr;
    float out_scale = 1.0f;
    std::optional<ExpertsBeside> beside;
};

// x += the k of n_expert experts that the router picks for each row, weighted by their renormalized probabilities,
// h = rms_norm(x) · norm; with a shared expert, plus shared_down · swiglu(shared_gate · h, shared_up · h) times
// σ(shared_input_gate · h) (Qwen3.5 MoE).
struct MoeBlock {
    const backend::Weight* norm = nullptr;
    float eps = 0.0f;
    const backend::Weight *router = nullptr, *router_bias = nullptr;
    int n_expert = 0, k = 0;
    backend::MoeWeights experts;
    const backend::Weight *shared_gate = nullptr, *shared_up = nullptr, *shared_down = nullptr,
                          *shared_input_gate = nullptr;
};

// x += out · GatedRMSNorm(DeltaRule(L2Norm(q), L2Norm(k), v), z) with q, k, v from the causal conv of qkv · h,
// h = rms_norm(x) · norm (Qwen3.5's linear-attention layers); each sequence has its own conv window and state.
struct DeltaNetBlock {
    const backend::Weight* norm = nullptr;
    float eps = 0.0f;
    const backend::Weight *qkv = nullptr, *z = nullptr, *alpha = nullptr, *beta = nullptr, *out = nullptr;
    backend::DeltaNetWeights w;
    backend::DeltaNetParams p;
    std::vector<backend::Act> conv_state, state;  // per sequence
};

using Block = std::variant<AttentionBlock, FfnBlock, MoeBlock, DeltaNetBlock>;

// The weights every block of a kind has; the family sets the rest (heads, RoPE, caches, variants) on the result.
AttentionBlock attention_block(const backend::Weight& norm, float eps, const backend::Weight& wq,
                               const backend::Weight& wk, const backend::Weight* wv, const backend::Weight& wo);
FfnBlock ffn_block(const backend::Weight& norm, float eps, const backend::Weight& gate, const backend::Weight& up,
                   const backend::Weight& down, backend::GatedActivation act = backend::GatedActivation::swiglu);
MoeBlock moe_block(const backend::Weight& norm, float eps, const backend::Weight& router, int n_expert, int k,
                   const backend::MoeWeights& experts);
// RoPE of n_rot dimensions with base `base` and the file's position scaling.
backend::RopeParams rope_params(int n_rot, bool neox, float base, const model::RopeScaling& s);

// The input norm's weight of a block (what a block before it may leave in h).
const backend::Weight* input_norm(const Block& b);

}  // namespace zinc::engine
