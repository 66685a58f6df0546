#pragma once

#include <vector>

#include "engine/family.h"
#include "model/gemma4.h"

namespace zinc::engine {

// gemma4 (dense and MoE): each layer an attention block (sliding-window layers with a ring cache of their window) and
// an FFN block, with routed experts beside it on MoE layers.
class Gemma4 final : public Family {
public:
    Gemma4(const gguf::Model& m, backend::Backend& be, ContextSize size);

private:
    backend::Act compute(std::span<const int32_t> ids) override;

    model::Gemma4Params p_;
    model::Gemma4Weights<backend::Weight> w_;
};

}  // namespace zinc::engine
