// The memory plan: what a model needs on a backend, known before anything is allocated there, and a clear
// error when it does not fit.
#pragma once

#include <cstdint>
#include <string>

#include "backend/sizing_backend.h"
#include "gguf/split.h"

namespace zinc::engine {

// Weights, KV cache and activations (recurrent state included) of `m` with n_ctx positions and batches of up to
// n_batch tokens, measured by building the model and running one such batch on a sizing backend.
backend::MemoryUse plan_memory(const gguf::Model& m, int n_ctx, int n_batch);

// Throws std::runtime_error with the plan's parts when use.total() plus headroom for the backend's own buffers
// exceeds free_bytes on `where` (e.g. "GPU 0 (NVIDIA H200)").
void check_fits(const backend::MemoryUse& use, uint64_t free_bytes, const std::string& where, int n_ctx);

}  // namespace zinc::engine
