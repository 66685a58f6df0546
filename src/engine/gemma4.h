#pragma once

#include <vector>

#include "engine/family.h"
#include "model/gemma4.h"

namespace zinc::engine {

// gemma4 (dense and MoE). The KV cache is full-length on every layer; sliding-window layers would only
// need the last `sliding_window` positions (a ring buffer is future work).
class Gemma4 final : public Family {
public:
    Gemma4(const gguf::Model& m, backend::Backend& be, int n_ctx);
    int n_vocab() const override { return p_.n_vocab; }
    int n_ctx() const override { return n_ctx_; }

private:
    backend::Act compute(std::span<const int32_t> ids, int64_t pos0, bool all_logits) override;
    struct Layer {
        backend::Weight attn_norm, wq, wk, wv, wo, q_norm, k_norm, post_attn_norm;
        backend::Weight ffn_norm, ffn_gate, ffn_up, ffn_down, post_ffw_norm;
        bool has_v = false, moe = false, has_down_scale = false, merged_gate_up = false;
        float out_scale = 1.0f;
        backend::Weight gate_inp, gate_inp_scale, gate_up_exps, gate_exps, up_exps, down_exps, down_exps_scale;
        backend::Weight pre_ffw_norm_2, post_ffw_norm_1, post_ffw_norm_2;
        backend::KvLayer kv;
    };
    void reserve(int64_t T);  // scratch activations for batches of up to T tokens

    model::Gemma4Params p_;
    int n_ctx_ = 0;
    backend::Weight token_embd_, output_norm_, output_, rope_freqs_;
    std::vector<Layer> layers_;
    bool any_moe_ = false;
    int64_t max_q_ = 0, max_kv_ = 0, max_ff_ = 0;
    int64_t scratch_rows_ = 0;
    backend::Act x_, h_, f_, q_, k_, v_, attn_, gate_, up_, logits_;
    backend::Act router_, route_w_, moe_out_;  // MoE only
    backend::IdAct route_ids_;
};

}  // namespace zinc::engine
