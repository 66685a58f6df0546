#include "engine/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <vector>

namespace zinc::engine {

std::string gib(uint64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(1ull << 30));
    return buf;
}

backend::MemoryUse plan_memory(const gguf::Model& m, ContextSize size, bool all_logits) {
    backend::MemoryUse use;
    auto be = backend::make_sizing_backend(use);
    auto fam = make_family(m, *be, size);
    // A full step: n_ubatch rows, of as many sequences as a context each needs for them, the logits of every row or
    // of each sequence's last one (a prompt's, or a decode step's of many sequences).
    Batch b;
    for (int t = 0; t < fam->n_ubatch(); ++t) {
        const int pos = t % fam->n_ctx();
        b.add(0, t / fam->n_ctx(), pos, all_logits || pos == fam->n_ctx() - 1 || t == fam->n_ubatch() - 1);
    }
    const backend::Act logits = fam->step(b);
    std::vector<int32_t> ids(static_cast<size_t>(logits.rows));
    be->argmax_rows(logits, ids);
    return use;
}

uint64_t plan_headroom(const backend::MemoryUse& use) { return (512ull << 20) + use.total() / 50; }

int64_t fitting_context(const backend::MemoryUse& use, uint64_t free_bytes, int n_ctx) {
    if (n_ctx <= 0 || use.cache == 0) return 0;
    // The headroom grows with the plan by 2%: count it on every part.
    const double per_position = double(use.cache) / n_ctx * 1.02;
    const double fixed = (512ull << 20) + double(use.weights + use.activations_at_peak()) * 1.02;
    const double left = double(free_bytes) - fixed;
    if (left < per_position) return 0;
    const auto fit = static_cast<int64_t>(left / per_position);
    return fit < kDefaultPageSize ? fit : fit / kDefaultPageSize * kDefaultPageSize;
}

void check_fits(const backend::MemoryUse& use, uint64_t free_bytes, const std::string& where, int n_ctx) {
    const uint64_t headroom = plan_headroom(use);
    if (use.total() + headroom <= free_bytes) return;
    const int64_t fit = fitting_context(use, free_bytes, n_ctx);
    const std::string advice = fit >= 1 ? "; --ctx-size " + std::to_string(std::min<int64_t>(fit, n_ctx)) + " would fit"
                                        : "; even a context of one token does not fit";
    throw std::runtime_error("the model does not fit in " + where + ": it needs " + gib(use.total() + headroom) +
                             " (" + describe(use, n_ctx) + ", headroom " + gib(headroom) + ") and " +
                             gib(free_bytes) + " are free" + advice);
}

std::string describe(const backend::MemoryUse& use, int n_ctx) {
    return "weights " + gib(use.weights) + ", KV cache for " + std::to_string(n_ctx) + " positions " + gib(use.cache) +
           ", activations and state " + gib(use.activations_at_peak());
}

}  // namespace zinc::engine
