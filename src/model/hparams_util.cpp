#include "model/hparams_util.h"

#include <cstring>

namespace zinc::model::util {
namespace {

[[noreturn]] void fail(const gguf::Model& m, const std::string& what) {
    throw gguf::Error(m.first().path() + ": " + what);
}

std::string shape_str(std::initializer_list<int64_t> s) {
    std::string r;
    for (int64_t d : s) r += (r.empty() ? "" : ", ") + std::to_string(d);
    return "{" + r + "}";
}

}  // namespace

int key_int(const gguf::Model& m, const std::string& key) { return m.get(key).get_int<int>(); }

int key_int_or(const gguf::Model& m, const std::string& key, int fallback) {
    const gguf::Value* v = m.find(key);
    return v ? v->get_int<int>() : fallback;
}

float key_float(const gguf::Model& m, const std::string& key) { return static_cast<float>(m.get(key).get_number()); }

float key_float_or(const gguf::Model& m, const std::string& key, float fallback) {
    const gguf::Value* v = m.find(key);
    return v ? static_cast<float>(v->get_number()) : fallback;
}

std::vector<int> key_int_per_layer(const gguf::Model& m, const std::string& key, int n_layer) {
    const gguf::Value& v = m.get(key);
    if (!v.is_array()) return std::vector<int>(n_layer, v.get_int<int>());
    std::vector<int> a = v.get_int_array<int>();
    if (static_cast<int>(a.size()) != n_layer)
        fail(m, "key " + key + " has " + std::to_string(a.size()) + " values, expected one per layer (" +
                    std::to_string(n_layer) + ")");
    return a;
}

std::vector<bool> key_bool_per_layer(const gguf::Model& m, const std::string& key, int n_layer) {
    std::vector<bool> a = m.get(key).get_bool_array();
    if (static_cast<int>(a.size()) != n_layer)
        fail(m, "key " + key + " has " + std::to_string(a.size()) + " values, expected one per layer (" +
                    std::to_string(n_layer) + ")");
    return a;
}

const gguf::TensorInfo* tensor(const gguf::Model& m, const std::string& name, std::initializer_list<int64_t> shape) {
    const gguf::ModelTensor* mt = m.find_tensor(name);
    if (!mt) fail(m, "tensor " + name + " is missing");
    const gguf::TensorInfo* t = mt->info;
    bool ok = true;
    size_t i = 0;
    for (int64_t want : shape) ok = ok && t->ne[i++] == want;
    for (; i < 4; ++i) ok = ok && t->ne[i] == 1;
    if (!ok) {
        std::string s;
        for (int64_t d : t->shape()) s += (s.empty() ? "" : ", ") + std::to_string(d);
        fail(m, "tensor " + name + " has shape {" + s + "}, expected " + shape_str(shape));
    }
    return t;
}

const gguf::TensorInfo* tensor_opt(const gguf::Model& m, const std::string& name,
                                   std::initializer_list<int64_t> shape) {
    return m.find_tensor(name) ? tensor(m, name, shape) : nullptr;
}

float tensor_scalar(const gguf::Model& m, const gguf::TensorInfo& t) {
    if (t.type != gguf::TensorType::F32) fail(m, "tensor " + t.name + " must be f32");
    float v;
    std::memcpy(&v, t.data, sizeof v);
    return v;
}

}  // namespace zinc::model::util
