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
    explicit Family(backend::Backend& be) : be_(be) {}
    virtual ~Family() = default;
    virtual int n_vocab() const = 0;
    virtual int n_ctx() const = 0;  // positions the state holds
    // Whether forward() may restart at a position before the end of the state (true for pure
    // attention state, where later cache rows are simply overwritten).
    virtual bool can_rewind() const { return true; }
    // Runs `ids` at positions pos0, pos0+1, ... (pos0 = tokens already in the state) and returns their logits in
    // backend memory: of every token when all_logits, else of the last one. Valid until the next call. Throws
    // std::invalid_argument for no ids and std::length_error when they do not fit in the context.
    backend::Act run(std::span<const int32_t> ids, int64_t pos0, bool all_logits);

    // run(), with the logits appended to `logits` in host memory.
    void forward(std::span<const int32_t> ids, int64_t pos0, bool all_logits, std::vector<float>& logits);
    // run() for the last token's logits, reduced to their argmax on the backend: the host waits once, for one id.
    int32_t forward_argmax(std::span<const int32_t> ids, int64_t pos0);
    // run() for the last token's logits, of which only the k largest (backend::Backend::top_k_last_row) come back.
    void forward_top_k(std::span<const int32_t> ids, int64_t pos0, int k, std::vector<int32_t>& top_ids,
                       std::vector<float>& top_logits);

protected:
    // The family's forward pass: run() once the ids are known to be there and to fit.
    virtual backend::Act compute(std::span<const int32_t> ids, int64_t pos0, bool all_logits) = 0;

    backend::Backend& be_;
};

// Picks the family of the file's general.architecture; throws for an unsupported one.
std::unique_ptr<Family> make_family(const gguf::Model& m, backend::Backend& be, int n_ctx);

}  // namespace zinc::engine
