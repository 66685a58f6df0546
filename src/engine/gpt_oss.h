#pragma once

#include <vector>

#include "engine/family.h"
#include "model/gpt_oss.h"

namespace zinc::engine {

// gpt-oss: each layer an attention block (sliding-window layers with a ring cache of their window) and an MoE block.
class GptOss final : public Family {
public:
    GptOss(const gguf::Model& m, backend::Backend& be, ContextSize size);

private:
    backend::Act compute(std::span<const int32_t> ids) override;

    model::GptOssParams p_;
    model::GptOssWeights<backend::Weight> w_;
};

}  // namespace zinc::engine
