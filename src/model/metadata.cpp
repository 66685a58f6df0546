#include "model/metadata.h"

#include <cmath>
#include <cstdio>

#include "gguf/split.h"

namespace zinc::model {
namespace {

std::string range_str(double lo, double hi) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "[%g, %g]", lo, hi);
    return buf;
}

}  // namespace

Metadata::Metadata(const gguf::Model& m) : name_(m.first().path()), model_(&m) {
    arch_ = m.get("general.architecture").get_string();
    const gguf::ModelTensor* embd = m.find_tensor("token_embd.weight");
    if (!embd) fail("tensor token_embd.weight is missing");
    n_vocab_ = embd->info->ne[1];
    if (n_vocab_ < 1 || n_vocab_ > kMaxVocab)
        fail("token_embd.weight has " + std::to_string(n_vocab_) + " rows; expected 1 to " + std::to_string(kMaxVocab));
}

Metadata::Metadata(std::vector<gguf::KeyValue> kv, int64_t n_vocab, std::string name)
    : name_(std::move(name)), n_vocab_(n_vocab), kv_(std::move(kv)) {
    const gguf::Value* a = find("general.architecture");
    if (!a) fail("general.architecture is missing");
    arch_ = a->get_string();
}

const gguf::Value* Metadata::find(std::string_view key) const {
    if (model_) return model_->find(key);
    for (const gguf::KeyValue& e : kv_)
        if (e.key == key) return &e.value;
    return nullptr;
}

void Metadata::fail(const std::string& what) const { throw gguf::Error(name_ + ": " + what); }

const gguf::Value& Metadata::get(const std::string& key) const {
    const gguf::Value* v = find(arch_ + "." + key);
    if (!v) fail("key " + arch_ + "." + key + " is missing");
    return *v;
}

int Metadata::count(const std::string& key, int max) const {
    const int64_t v = get(key).get_int<int64_t>();
    if (v < 1 || v > max)
        fail(arch_ + "." + key + " is " + std::to_string(v) + "; expected 1 to " + std::to_string(max));
    return static_cast<int>(v);
}

int Metadata::count_or(const std::string& key, int fallback, int max) const {
    return find(arch_ + "." + key) ? count(key, max) : fallback;
}

int Metadata::integer_or(const std::string& key, int fallback, int lo, int hi) const {
    if (!find(arch_ + "." + key)) return fallback;
    const int64_t v = get(key).get_int<int64_t>();
    if (v < lo || v > hi) fail(arch_ + "." + key + " is " + std::to_string(v) + "; expected " + range_str(lo, hi));
    return static_cast<int>(v);
}

float Metadata::positive(const std::string& key) const {
    const double v = get(key).get_number();
    if (!std::isfinite(v) || v <= 0.0 || v > 3.4e38)
        fail(arch_ + "." + key + " is " + std::to_string(v) + "; expected a finite number greater than 0");
    return static_cast<float>(v);
}

float Metadata::positive_or(const std::string& key, float fallback) const {
    return find(arch_ + "." + key) ? positive(key) : fallback;
}

float Metadata::number_or(const std::string& key, float fallback, float lo, float hi) const {
    if (!find(arch_ + "." + key)) return fallback;
    const double v = get(key).get_number();
    if (!std::isfinite(v) || v < lo || v > hi)
        fail(arch_ + "." + key + " is " + std::to_string(v) + "; expected a number in " + range_str(lo, hi));
    return static_cast<float>(v);
}

std::string Metadata::string_or(const std::string& key, const std::string& fallback) const {
    const gguf::Value* v = find(arch_ + "." + key);
    return v ? v->get_string() : fallback;
}

std::vector<int> Metadata::layer_values(const gguf::Value& v, const std::string& key, int n_layer, int lo,
                                        int hi) const {
    std::vector<int64_t> a;
    if (v.is_array()) {
        a = v.get_int_array<int64_t>();
        if (a.size() < static_cast<size_t>(n_layer))
            fail(arch_ + "." + key + " has " + std::to_string(a.size()) + " values for " + std::to_string(n_layer) +
                 " layers");
        a.resize(static_cast<size_t>(n_layer));
    } else {
        a.assign(static_cast<size_t>(n_layer), v.get_int<int64_t>());
    }
    std::vector<int> out;
    for (size_t l = 0; l < a.size(); ++l) {
        if (a[l] < lo || a[l] > hi)
            fail(arch_ + "." + key + " is " + std::to_string(a[l]) + " for layer " + std::to_string(l) +
                 "; expected " + range_str(lo, hi));
        out.push_back(static_cast<int>(a[l]));
    }
    return out;
}

std::vector<int> Metadata::per_layer(const std::string& key, int n_layer, int lo, int hi) const {
    return layer_values(get(key), key, n_layer, lo, hi);
}

std::vector<int> Metadata::per_layer_or(const std::string& key, int n_layer, int lo, int hi, int fallback) const {
    const gguf::Value* v = find(arch_ + "." + key);
    return v ? layer_values(*v, key, n_layer, lo, hi) : std::vector<int>(static_cast<size_t>(n_layer), fallback);
}

std::vector<bool> Metadata::flags_per_layer(const std::string& key, int n_layer) const {
    std::vector<bool> a = get(key).get_bool_array();
    if (a.size() < static_cast<size_t>(n_layer))
        fail(arch_ + "." + key + " has " + std::to_string(a.size()) + " values for " + std::to_string(n_layer) +
             " layers");
    a.resize(static_cast<size_t>(n_layer));
    return a;
}

}  // namespace zinc::model
