// The Qwen3.5 / Qwen3.6 hybrid families (qwen35, qwen35moe; MODELS.md §4-5): gated delta-net layers with a
// recurrent state, gated full-attention layers with a KV cache, dense or MoE FFNs.
#pragma once

#include <vector>

#include "engine/family.h"
#include "model/qwen35.h"

namespace zinc::engine {

class Qwen35 final : public Family {
public:
    Qwen35(const gguf::Model& m, backend::Backend& be, int n_ctx);
    int n_vocab() const override { return p_.n_vocab; }
    int n_ctx() const override { return n_ctx_; }
    // The recurrent state holds no per-position history: a sequence can only be continued or restarted at 0.
    bool can_rewind() const override { return false; }
    // pos0 == 0 starts a new sequence (the state is cleared); otherwise pos0 must be the tokens already run.

    // Batches of more than one token run the delta rule in chunks of this many tokens (0: token by token).
    void set_delta_net_chunk(int chunk) { chunk_ = chunk; }

private:
    backend::Act compute(std::span<const int32_t> ids, int64_t pos0, bool all_logits) override;
    struct Layer {
        bool recurrent = false, moe = false;
        backend::Weight attn_norm, post_attention_norm;
        // gated delta-net
        backend::Weight attn_qkv, attn_gate, ssm_beta, ssm_alpha, ssm_dt, ssm_a, ssm_conv1d, ssm_norm, ssm_out;
        backend::Act conv_state, ssm_state;
        // gated attention
        backend::Weight attn_q, attn_k, attn_v, attn_output, attn_q_norm, attn_k_norm;
        backend::KvLayer kv;
        // FFN
        backend::Weight ffn_gate, ffn_up, ffn_down;
        backend::Weight gate_inp, gate_exps, up_exps, gate_up_exps, down_exps, gate_scale, up_scale, down_scale;
        backend::Weight gate_inp_shexp, gate_shexp, up_shexp, down_shexp;
        backend::MoeWeights experts;  // points into this Layer (layers_ is not resized after construction)
        bool shexp = false;
    };
    void reserve(int64_t T);
    void delta_net_layer(Layer& L, int64_t T);
    void attention_layer(Layer& L, int64_t T, int64_t pos0, const std::vector<int32_t>& pos);
    void ffn(Layer& L, int64_t T);

    model::Qwen35Params p_;
    int n_ctx_ = 0;
    int chunk_ = 64;
    int64_t n_past_ = 0;  // tokens in the state
    backend::Weight token_embd_, output_norm_, output_;
    std::vector<Layer> layers_;
    int64_t scratch_rows_ = 0;
    // scratch activations
    backend::Act x_, h_, y_;
    backend::Act qg_, q_, gate_, k_, v_, attn_;                             // attention
    backend::Act qkv_, conv_, z_, a_, b_, g_, beta_, dq_, dk_, dv_, o_;  // delta-net
    backend::Act ff_gate_, ff_up_;                                          // dense FFN / shared expert
    backend::Act router_, route_w_, moe_out_, sh_gate_;                     // MoE
    backend::IdAct route_ids_;
    backend::Act logits_;
};

}  // namespace zinc::engine
