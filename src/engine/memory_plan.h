// The memory plan: what a model needs on a backend, known before anything is allocated there, and a clear error
// when it does not fit.
#pragma once

#include <cstdint>
#include <string>

#include "backend/sizing_backend.h"
#include "engine/family.h"
#include "gguf/split.h"

namespace zinc::engine {

// Weights, KV cache and activations (recurrent state included) of `m` with the context and micro-batch of `size`,
// measured by building the model and running one full micro-batch on a sizing backend. all_logits: the logits of
// every token are wanted (zinc logits, perplexity), else only the last token's (generation).
backend::MemoryUse plan_memory(const gguf::Model& m, ContextSize size, bool all_logits = false);

// Headroom for what the plan does not see: a backend's own scratch (quantized activations, staging buffers) and
// the runtime's allocations.
uint64_t plan_headroom(const backend::MemoryUse& use);

// The largest context that fits in free_bytes beside the rest of the plan (whose cache holds n_ctx positions), in
// whole pages of kDefaultPageSize positions from one page on (a paged cache takes whole pages); 0 when not even one
// position does.
int64_t fitting_context(const backend::MemoryUse& use, uint64_t free_bytes, int n_ctx);

// Throws std::runtime_error when use.total() plus headroom exceeds free_bytes on `where` (e.g. "GPU 0 (NVIDIA
// H200)"): the message gives the parts of the plan, what is free, and the --ctx-size that would fit.
void check_fits(const backend::MemoryUse& use, uint64_t free_bytes, const std::string& where, int n_ctx);

// "weights 1.25 GiB, KV cache for 4096 positions 0.50 GiB, activations and state 0.10 GiB"
std::string describe(const backend::MemoryUse& use, int n_ctx);

// "1.25 GiB"
std::string gib(uint64_t bytes);

}  // namespace zinc::engine
