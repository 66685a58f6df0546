#include "model/metadata.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

#include "gguf/printable.h"
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
    arch_ = checked([&] { return m.get("general.architecture").get_string(); });
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
    arch_ = checked([&] { return a->get_string(); });
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

int64_t Metadata::integer(const gguf::Value& v) const {
    return checked([&] { return v.get_int<int64_t>(); });
}

int Metadata::count(const std::string& key, int max) const {
    const int64_t v = integer(get(key));
    if (v < 1 || v > max)
        fail(arch_ + "." + key + " is " + std::to_string(v) + "; expected 1 to " + std::to_string(max));
    return static_cast<int>(v);
}

int Metadata::count_or(const std::string& key, int fallback, int max) const {
    return find(arch_ + "." + key) ? count(key, max) : fallback;
}

int Metadata::integer_or(const std::string& key, int fallback, int lo, int hi) const {
    if (!find(arch_ + "." + key)) return fallback;
    const int64_t v = integer(get(key));
    if (v < lo || v > hi) fail(arch_ + "." + key + " is " + std::to_string(v) + "; expected " + range_str(lo, hi));
    return static_cast<int>(v);
}

float Metadata::number(const std::string& key, Range r) const {
    const double v = checked([&] { return get(key).get_number(); });
    if (!std::isfinite(v) || v < r.lo || v > r.hi) {
        char got[32];
        std::snprintf(got, sizeof got, "%g", v);
        fail(arch_ + "." + key + " is " + got + "; expected a number in " + range_str(r.lo, r.hi));
    }
    return static_cast<float>(v);
}

float Metadata::number_or(const std::string& key, float fallback, Range r) const {
    return find(arch_ + "." + key) ? number(key, r) : fallback;
}

std::string Metadata::string_or(const std::string& key, const std::string& fallback) const {
    const gguf::Value* v = find(arch_ + "." + key);
    return v ? checked([&] { return v->get_string(); }) : fallback;
}

float Metadata::linear_rope_freq_scale() const {
    const std::string scaling = string_or("rope.scaling.type", "none");
    if (scaling == "linear") return 1.0f / number_or("rope.scaling.factor", 1.0f, kRopeScaling);
    if (scaling != "none") fail("rope scaling '" + gguf::printable(scaling, 64) + "' is not supported yet");
    return 1.0f;
}

RopeScaling Metadata::rope_scaling(int n_rot, float rope_base, YarnRange range) const {
    RopeScaling r;
    const std::string type = string_or("rope.scaling.type", "none");
    const float factor = number_or("rope.scaling.factor", 1.0f, kRopeScaling);
    if (type == "none" || factor == 1.0f) return r;
    if (type == "linear") {
        r.freq_scale = 1.0f / factor;
        return r;
    }
    if (type != "yarn") fail("rope scaling '" + gguf::printable(type, 64) + "' is not supported");
    if (factor < 1.0f) return r;  // YaRN only stretches
    if (rope_base <= 1.0f) fail(arch_ + ".rope.freq_base must be greater than 1 for YaRN scaling");
    const int n_ctx_train = count_or("context_length", 4096, kMaxContext);
    const double n_ctx_orig = count_or("rope.scaling.original_context_length", n_ctx_train, kMaxContext);
    const float beta_fast = number_or("rope.scaling.yarn_beta_fast", 32.0f, kRopeScaling);
    const float beta_slow = number_or("rope.scaling.yarn_beta_slow", 1.0f, kRopeScaling);
    const float log_mul = number_or("rope.scaling.yarn_log_multiplier", 0.0f, Range{0.0f, 1e3f});
    // Correction range in pair units: c(beta) = n_rot ln(L0 / (2 pi beta)) / (2 ln base) (docs/models.md §1.4).
    const auto corr = [&](double beta) {
        return n_rot * std::log(n_ctx_orig / (beta * 2.0 * std::numbers::pi)) / (2.0 * std::log(double(rope_base)));
    };
    double low = corr(beta_fast), high = corr(beta_slow);
    if (range == YarnRange::whole_pairs) {
        low = std::floor(low);
        high = std::ceil(high);
    }
    r.freq_scale = 1.0f / factor;
    r.ext_factor = 1.0f;
    r.yarn_low = float(std::max(0.0, low));
    r.yarn_high = float(std::min(double(n_rot - 1), high));
    if (!std::isfinite(r.yarn_low) || !std::isfinite(r.yarn_high)) fail("the YaRN correction range is not finite");
    const auto mscale = [&](float m) { return 1.0f + 0.1f * m * std::log(factor); };
    r.mscale = log_mul != 0.0f ? mscale(1.0f) / mscale(log_mul) : mscale(1.0f);
    return r;
}

std::vector<int> Metadata::layer_values(const gguf::Value& v, const std::string& key, int n_layer, int lo,
                                        int hi) const {
    std::vector<int64_t> a;
    if (v.is_array()) {
        // Only the values of the layers are read: a hostile array may be far longer than the model.
        if (checked([&] { return v.size(); }) < static_cast<uint64_t>(n_layer))
            fail(arch_ + "." + key + " has " + std::to_string(v.size()) + " values for " + std::to_string(n_layer) +
                 " layers");
        for (int l = 0; l < n_layer; ++l) a.push_back(integer(checked([&] { return v.at(uint64_t(l)); })));
    } else {
        a.assign(static_cast<size_t>(n_layer), integer(v));
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
    const gguf::Value& v = get(key);
    if (checked([&] { return v.size(); }) < static_cast<uint64_t>(n_layer))
        fail(arch_ + "." + key + " has " + std::to_string(v.size()) + " values for " + std::to_string(n_layer) +
             " layers");
    std::vector<bool> a;
    for (int l = 0; l < n_layer; ++l) a.push_back(checked([&] { return v.at(uint64_t(l)).get_bool(); }));
    return a;
}

std::vector<int> Metadata::leading_values(const std::string& key, int n, int lo, int hi) const {
    const gguf::Value& v = get(key);
    const uint64_t size = checked([&] { return v.size(); });
    std::vector<int> out;
    for (uint64_t i = 0; i < size && i < uint64_t(n); ++i) {
        const int64_t x = integer(checked([&] { return v.at(i); }));
        if (x < lo || x > hi)
            fail(arch_ + "." + key + " holds " + std::to_string(x) + "; expected " + range_str(lo, hi));
        out.push_back(static_cast<int>(x));
    }
    return out;
}

}  // namespace zinc::model
