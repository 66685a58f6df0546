// The Qwen3.5 / Qwen3.6 hybrid families (qwen35, qwen35moe; docs/models.md §4-5): gated delta-net layers with a
// recurrent state, gated full-attention layers with a KV cache, dense or MoE FFNs.
#pragma once

#include <vector>

#include "engine/family.h"
#include "model/qwen35.h"

namespace zinc::engine {

class Qwen35 final : public Family {
public:
    Qwen35(const gguf::Model& m, backend::Backend& be, ContextSize size);
    // The recurrent state holds no per-position history: a sequence can only be continued, or restarted at 0
    // (which clears the state).
    bool can_rewind() const override { return false; }

private:
    backend::Act compute(std::span<const int32_t> ids) override;

    model::Qwen35Params p_;
    model::Qwen35Weights<backend::Weight> w_;
};

}  // namespace zinc::engine
