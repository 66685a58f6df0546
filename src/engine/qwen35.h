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
    using Layer = model::Qwen35Layer<backend::Weight>;
    backend::Act compute(std::span<const int32_t> ids) override;
    void fork_state(int from, int to) override;
    void delta_net_layer(const Layer& L, int l);
    void attention_layer(const Layer& L, int l);
    // The layer's FFN, then, where next_norm is given, the next layer's input norm of the residual stream into h.
    void ffn(const Layer& L, const backend::Weight* next_norm);

    // Per sequence: attention layers a KV cache, delta-net layers the conv window and the delta rule's state.
    struct LayerState {
        std::vector<backend::KvLayer> kv;
        std::vector<backend::Act> conv, recurrence;
    };

    model::Qwen35Params p_;
    model::Qwen35Weights<backend::Weight> w_;
    std::vector<LayerState> state_;
    // scratch activations
    backend::Act x_, h_, y_;
    backend::Act qg_, q_, gate_, k_, v_, attn_;                             // attention
    backend::Act qkv_, conv_, z_, a_, b_, g_, beta_, dq_, dk_, dv_, o_;  // delta-net
    backend::Act ff_gate_, ff_up_;                                          // dense FFN / shared expert
    backend::Act router_, route_w_, moe_out_, sh_gate_;                     // MoE
    backend::IdAct route_ids_;
};

}  // namespace zinc::engine
