// A backend that computes nothing and only adds up what a model would allocate: weights, caches and recurrent
// state, activations. Running a family's constructor and one forward pass on it gives the exact memory a real
// backend needs for the same model, context and batch, before a byte of it is allocated. It checks every op's
// arguments as every backend does, so a plan also proves the shapes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "backend/backend.h"

namespace zinc::backend {

struct MemoryUse {
    uint64_t weights = 0;           // tensors from the file
    uint64_t cache = 0;             // KV cache held now
    uint64_t activations = 0;       // activations, recurrent state, routing ids held now (free() lowers it)
    uint64_t peak_activations = 0;  // the most `activations` has ever been
    // The most activations held at once, also for a MemoryUse filled in by hand (peak left 0).
    uint64_t activations_at_peak() const { return std::max(activations, peak_activations); }
    // What must fit: the weights, the cache and the most activations ever held at once.
    uint64_t total() const { return weights + cache + activations_at_peak(); }
};

// The backend and, through `use`, what has been allocated on it so far.
std::unique_ptr<Backend> make_sizing_backend(MemoryUse& use);

}  // namespace zinc::backend
