// Binds a file's tensors to backend weights as a family declares them (model/schema.h): finds each tensor, checks
// its extents and type against the declaration, and hands it to the backend.
#pragma once

#include <string>

#include "backend/backend.h"
#include "gguf/split.h"
#include "model/schema.h"

namespace zinc::engine {

class TensorLoader final : public model::TensorBinder<backend::Weight> {
public:
    TensorLoader(const gguf::Model& m, backend::Backend& be) : m_(m), be_(be) {}
    bool has(const std::string& name, bool written) const override;
    void bind(backend::Weight& slot, const model::TensorSpec& spec) override;
    // Each part is handed to the backend as a tensor of its own (a row range of the file's tensor), so the backend
    // holds, repacks or uploads it as it would a separate projection.
    void bind_parts(std::span<backend::Weight* const> slots, const model::TensorSpec& spec,
                    std::span<const int64_t> rows) override;
    [[noreturn]] void fail(const std::string& what) const override;

    // The one f32 value of a bound 1-element tensor, read from the file (not from backend memory).
    float scalar(const backend::Weight& w) const;

private:
    // The file's tensor spec.name, checked against the declaration.
    const gguf::TensorInfo& checked(const model::TensorSpec& spec) const;

    const gguf::Model& m_;
    backend::Backend& be_;
};

}  // namespace zinc::engine
