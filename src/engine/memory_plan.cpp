#include "engine/memory_plan.h"

#include <cstdio>
#include <stdexcept>
#include <vector>

#include "engine/family.h"

namespace zinc::engine {
namespace {

std::string gib(uint64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(1ull << 30));
    return buf;
}

}  // namespace

backend::MemoryUse plan_memory(const gguf::Model& m, int n_ctx, int n_batch) {
    backend::MemoryUse use;
    auto be = backend::make_sizing_backend(use);
    auto fam = make_family(m, *be, n_ctx);
    const std::vector<int32_t> ids(static_cast<size_t>(std::max(1, std::min(n_batch, fam->n_ctx()))), 0);
    fam->forward_argmax(ids, 0);
    return use;
}

void check_fits(const backend::MemoryUse& use, uint64_t free_bytes, const std::string& where, int n_ctx) {
    // Room for the backend's own scratch (quantized activations, staging) and the runtime's allocations.
    const uint64_t headroom = (512ull << 20) + use.total() / 50;
    if (use.total() + headroom <= free_bytes) return;
    throw std::runtime_error("the model does not fit on " + where + ": it needs " + gib(use.total() + headroom) +
                             " (weights " + gib(use.weights) + ", KV cache for " + std::to_string(n_ctx) +
                             " positions " + gib(use.cache) + ", activations and state " + gib(use.activations) +
                             ", headroom " + gib(headroom) + ") and " + gib(free_bytes) +
                             " are free; a smaller --ctx-size shrinks the cache, or use --backend cpu");
}

}  // namespace zinc::engine
