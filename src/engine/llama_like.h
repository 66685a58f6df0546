#pragma once

#include <vector>

#include "engine/family.h"
#include "model/llama_like.h"

namespace zinc::engine {

class LlamaLike final : public Family {
public:
    LlamaLike(const gguf::Model& m, backend::Backend& be, int n_ctx);
    int n_vocab() const override { return p_.n_vocab; }
    int n_ctx() const override { return n_ctx_; }

private:
    backend::Act compute(std::span<const int32_t> ids, int64_t pos0, bool all_logits) override;
    struct Layer {
        backend::Weight attn_norm, wq, wk, wv, wo, q_norm, k_norm, ffn_norm, ffn_gate, ffn_up, ffn_down;
        backend::KvLayer kv;
    };
    void reserve(int64_t T);  // scratch activations for batches of up to T tokens

    model::LlamaLikeParams p_;
    int n_ctx_ = 0;
    backend::Weight token_embd_, output_norm_, output_;
    std::vector<Layer> layers_;
    int64_t scratch_rows_ = 0;
    backend::Act x_, h_, q_, k_, v_, attn_, gate_, up_, logits_;
};

}  // namespace zinc::engine
