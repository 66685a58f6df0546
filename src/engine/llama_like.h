#pragma once

#include <vector>

#include "engine/family.h"
#include "model/llama_like.h"

namespace zinc::engine {

class LlamaLike final : public Family {
public:
    LlamaLike(const gguf::Model& m, backend::Backend& be, ContextSize size);

private:
    backend::Act compute(std::span<const int32_t> ids) override;

    model::LlamaLikeParams p_;
    model::LlamaLikeWeights<backend::Weight> w_;
};

}  // namespace zinc::engine
