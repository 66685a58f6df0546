#pragma once

#include <vector>

#include "engine/family.h"
#include "model/llama_like.h"

namespace zinc::engine {

class LlamaLike final : public Family {
public:
    LlamaLike(const gguf::Model& m, backend::Backend& be, ContextSize size);

private:
    backend::Act compute(std::span<const int32_t> ids, int64_t pos0) override;

    model::LlamaLikeParams p_;
    model::LlamaLikeWeights<backend::Weight> w_;
    std::vector<backend::KvLayer> kv_;
    backend::Act x_, h_, q_, k_, v_, attn_, gate_, up_;
};

}  // namespace zinc::engine
