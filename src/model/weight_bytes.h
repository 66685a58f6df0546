// What a model's weights weigh: all of them, and the part one generated token reads, for the bandwidth figure of
// `zinc bench` (GB/s = bytes read per token x tokens per second).
#pragma once

#include <cstdint>

namespace zinc::gguf {
class Model;
}

namespace zinc::model {

struct WeightBytes {
    uint64_t total = 0;      // every tensor's bytes (llama-bench's model size; the file adds headers and padding)
    uint64_t per_token = 0;  // the bytes of weights one decoded token reads
};

// Per token, every tensor is read whole except:
// - token_embd.weight: one row (a lookup), unless there is no output.weight and it is the LM head as well (tied);
// - routed expert tensors (names containing "_exps"): n_expert_used / n_expert of their bytes, from
//   <arch>.expert_used_count and <arch>.expert_count (whole when the file has no expert_count).
// Throws gguf::Error for a file without token_embd.weight or with counts out of range.
WeightBytes weight_bytes(const gguf::Model& m);

}  // namespace zinc::model
