#pragma once

#include <vector>

#include "engine/family.h"
#include "model/gpt_oss.h"

namespace zinc::engine {

// gpt-oss. The KV cache is full-length on every layer; sliding-window layers would only need the last
// `sliding_window` positions (a ring buffer is future work).
class GptOss final : public Family {
public:
    GptOss(const gguf::Model& m, backend::Backend& be, ContextSize size);

private:
    backend::Act compute(std::span<const int32_t> ids) override;

    model::GptOssParams p_;
    model::GptOssWeights<backend::Weight> w_;
    std::vector<std::vector<backend::KvLayer>> kv_;  // per layer, per sequence
    backend::Act x_, h_, q_, k_, v_, attn_, router_, route_w_, moe_out_;
    backend::IdAct route_ids_;
};

}  // namespace zinc::engine
