#pragma once

#include <vector>

#include "engine/family.h"
#include "model/gpt_oss.h"

namespace zinc::engine {

// gpt-oss. The KV cache is full-length on every layer; sliding-window layers would only need the last
// `sliding_window` positions (a ring buffer is future work).
class GptOss final : public Family {
public:
    GptOss(const gguf::Model& m, backend::Backend& be, int n_ctx);
    int n_vocab() const override { return p_.n_vocab; }
    int n_ctx() const override { return n_ctx_; }

private:
    backend::Act compute(std::span<const int32_t> ids, int64_t pos0, bool all_logits) override;
    struct Layer {
        backend::Weight attn_norm, wq, bq, wk, bk, wv, bv, wo, bo, sinks, post_attn_norm;
        backend::Weight gate_inp, gate_inp_b, gate_exps, gate_exps_b, up_exps, up_exps_b, down_exps, down_exps_b;
        backend::KvLayer kv;
    };
    void reserve(int64_t T);  // scratch activations for batches of up to T tokens

    model::GptOssParams p_;
    int n_ctx_ = 0;
    backend::Weight token_embd_, output_norm_, output_;
    std::vector<Layer> layers_;
    int64_t scratch_rows_ = 0;
    backend::Act x_, h_, q_, k_, v_, attn_, router_, route_w_, moe_out_, logits_;
    backend::IdAct route_ids_;
};

}  // namespace zinc::engine
