// The forward pass of one architecture family, written once against backend ops. A family object
// owns its per-sequence state (KV cache, recurrent state) for one sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "gguf/split.h"

namespace zinc::engine {

class Family {
public:
    virtual ~Family() = default;
    virtual int n_vocab() const = 0;
    virtual int n_ctx() const = 0;  // positions the state holds
    // Whether forward() may restart at a position before the end of the state (true for pure
    // attention state, where later cache rows are simply overwritten).
    virtual bool can_rewind() const { return true; }
    // Runs `ids` at positions pos0, pos0+1, ... (pos0 = tokens already in the state) and appends their
    // logits to `logits`: of every token when all_logits, else of the last one.
    virtual void forward(std::span<const int32_t> ids, int64_t pos0, bool all_logits, std::vector<float>& logits) = 0;
};

// Picks the family of the file's general.architecture; throws for an unsupported one.
std::unique_ptr<Family> make_family(const gguf::Model& m, backend::Backend& be, int n_ctx);

}  // namespace zinc::engine
