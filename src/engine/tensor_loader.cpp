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

void TensorLoader::bind(backend::Weight& slot, const model::TensorSpec& spec) {
    const gguf::ModelTensor* mt = m_.find_tensor(spec.name);
    if (!mt) fail("tensor " + spec.name + " is missing");
    const gguf::TensorInfo& t = *mt->info;
    bool ok = spec.ne.size() <= t.ne.size();
    for (size_t i = 0; i < t.ne.size() && ok; ++i) ok = t.ne[i] == (i < spec.ne.size() ? spec.ne[i] : 1);
    if (!ok) fail("tensor " + spec.name + " has shape " + shape_str(t.shape()) + ", expected " + shape_str(spec.ne));
    if (model::role_is_f32(spec.role) && t.type != gguf::TensorType::F32)
        fail("tensor " + spec.name + " must be F32, not " + std::string(gguf::type_name(t.type)));
    slot = be_.load_weight(t);
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
