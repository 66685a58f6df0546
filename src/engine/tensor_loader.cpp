#include "engine/tensor_loader.h"

#include <cmath>
#include <cstring>

#include "gguf/error.h"

namespace zinc::engine {
namespace {

std::string shape_str(std::span<const int64_t> s) {
    std::string r;
    for (int64_t d : s) r += (r.empty() ? "" : ", ") + std::to_string(d);
    return "{" + r + "}";
}

}  // namespace

bool TensorLoader::has(const std::string& name, bool) const { return m_.find_tensor(name) != nullptr; }

void TensorLoader::fail(const std::string& what) const { throw gguf::Error(m_.first().path() + ": " + what); }

const gguf::TensorInfo& TensorLoader::checked(const model::TensorSpec& spec) const {
    const gguf::ModelTensor* mt = m_.find_tensor(spec.name);
    if (!mt) fail("tensor " + spec.name + " is missing");
    const gguf::TensorInfo& t = *mt->info;
    bool ok = spec.ne.size() <= t.ne.size();
    for (size_t i = 0; i < t.ne.size() && ok; ++i) ok = t.ne[i] == (i < spec.ne.size() ? spec.ne[i] : 1);
    if (!ok) fail("tensor " + spec.name + " has shape " + shape_str(t.shape()) + ", expected " + shape_str(spec.ne));
    if (model::role_is_f32(spec.role) && t.type != gguf::TensorType::F32)
        fail("tensor " + spec.name + " must be F32, not " + std::string(gguf::type_name(t.type)));
    return t;
}

void TensorLoader::bind(backend::Weight& slot, const model::TensorSpec& spec) { slot = be_.load_weight(checked(spec)); }

void TensorLoader::bind_parts(std::span<backend::Weight* const> slots, const model::TensorSpec& spec,
                              std::span<const int64_t> rows) {
    const gguf::TensorInfo& t = checked(spec);
    int64_t total = 0;
    for (int64_t r : rows) total += r;
    // The declaration's own arithmetic; a file cannot make it wrong, its shape was checked above.
    if (slots.size() != rows.size() || spec.ne.size() != 2 || total != t.ne[1] || t.ne[2] * t.ne[3] != 1)
        fail("tensor " + spec.name + ": parts of " + std::to_string(total) + " rows declared for " +
             std::to_string(t.ne[1]));
    // Rows are whole quantization blocks, so every row takes the same bytes and a row range is a byte range.
    const uint64_t row_bytes = t.nbytes / static_cast<uint64_t>(t.ne[1]);
    int64_t first = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
        gguf::TensorInfo part = t;
        part.name = t.name + "[" + std::to_string(first) + ":" + std::to_string(first + rows[i]) + "]";
        part.ne[1] = rows[i];
        part.n_elements = static_cast<uint64_t>(t.ne[0] * rows[i]);
        part.nbytes = row_bytes * static_cast<uint64_t>(rows[i]);
        const uint64_t skip = row_bytes * static_cast<uint64_t>(first);
        part.offset += skip;
        part.file_offset += skip;
        part.data = t.data ? t.data + skip : nullptr;
        *slots[i] = be_.load_weight(part);
        first += rows[i];
    }
}

float TensorLoader::scalar(const backend::Weight& w) const {
    const gguf::TensorInfo& t = *m_.tensor(w.name).info;
    if (t.type != gguf::TensorType::F32 || t.n_elements != 1) fail("tensor " + t.name + " is not one f32 value");
    float v;
    std::memcpy(&v, t.data, sizeof v);
    if (!std::isfinite(v)) fail("tensor " + t.name + " holds " + std::to_string(v) + "; expected a finite number");
    return v;
}

}  // namespace zinc::engine
