#pragma once

#include <vector>

#include "engine/family.h"
#include "model/gemma4.h"

namespace zinc::engine {

// gemma4 (dense and MoE). The KV cache is full-length on every layer; sliding-window layers would only need the
// last `sliding_window` positions (a ring buffer is future work).
class Gemma4 final : public Family {
public:
    Gemma4(const gguf::Model& m, backend::Backend& be, ContextSize size);

private:
    backend::Act compute(std::span<const int32_t> ids) override;

    model::Gemma4Params p_;
    model::Gemma4Weights<backend::Weight> w_;
    std::vector<float> out_scale_;  // per layer: layer_output_scale, 1 when absent
    std::vector<std::vector<backend::KvLayer>> kv_;  // per layer, per sequence
    backend::Act x_, h_, f_, q_, k_, v_, attn_, gate_, up_;  // q.. up: sized for the widest layer
    backend::Act router_, route_w_, moe_out_, router_in_, experts_in_;  // MoE only
    backend::IdAct route_ids_;
};

}  // namespace zinc::engine
