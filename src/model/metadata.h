// The hyper-parameters of a model as a family reads them: the metadata of a GGUF file, or the key-values of a
// file about to be written (`zinc synth`). Every reader checks the value's range, so a hostile or broken file
// stops with a message naming the file, the key and what was expected instead of running with NaN, zero or
// overflowing sizes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"

namespace zinc::gguf {
class Model;
}

namespace zinc::model {

// Upper bounds for counts read from a file. They are far above any real model and keep every product of two of
// them (a layer's width times a head count, say) well inside int64.
inline constexpr int kMaxLayers = 4096;
inline constexpr int kMaxWidth = 1 << 20;  // embedding, FFN, head and state sizes; head and expert counts
inline constexpr int kMaxContext = 1 << 30;
// Embedding rows: real vocabularies stay under 2^18.
inline constexpr int kMaxVocab = 1 << 24;

// The range of a float hyper-parameter: wide around every released model's values, and narrow enough that none can
// make a forward pass's numbers overflow (a RoPE base of 1e-45 is greater than 0, and every rotation is then
// infinite).
struct Range {
    float lo, hi;
};
inline constexpr Range kRopeBase{1.0f, 1e12f};
inline constexpr Range kNormEpsilon{1e-12f, 1.0f};
inline constexpr Range kRopeScaling{1e-3f, 1e4f};   // rope.scaling.factor, YaRN's betas
inline constexpr Range kRopeAttnFactor{1e-2f, 1e2f};  // rope.scaling.attn_factor (LongRoPE's is 1 to about 1.2)
inline constexpr Range kActivationParam{1e-3f, 1e6f};  // gpt-oss's SwiGLU alpha and limit
inline constexpr Range kSoftcap{0.0f, 1e30f};      // 0: none

// How RoPE positions are scaled (rope.scaling.*), in the terms of backend::RopeParams: none, linear (freq_scale =
// 1 / factor) or YaRN (also ext_factor 1, the correction range [yarn_low, yarn_high] in pair units and mscale on cos
// and sin).
struct RopeScaling {
    float freq_scale = 1.0f, ext_factor = 0.0f, yarn_low = 0.0f, yarn_high = 0.0f, mscale = 1.0f;
};
// Whether YaRN's correction range is used as computed or widened to whole pairs (floor, ceil): transformers' option
// `truncate`, true by default and in llama.cpp, false in gpt-oss's config.
enum class YarnRange { exact, whole_pairs };

class Metadata {
public:
    // A file's metadata; n_vocab is the row count of its token_embd.weight.
    explicit Metadata(const gguf::Model& m);
    // Key-values that are not in a file yet, for a model of n_vocab embedding rows called `name` in messages.
    Metadata(std::vector<gguf::KeyValue> kv, int64_t n_vocab, std::string name);

    const std::string& name() const { return name_; }  // the file, in messages
    const std::string& arch() const { return arch_; }   // general.architecture
    int64_t n_vocab() const { return n_vocab_; }
    const gguf::Value* find(std::string_view key) const;

    // Readers of "<arch>.<key>". A `count` is an integer in [1, max]; `_or` readers return the fallback when the
    // key is absent (the fallback itself is not checked).
    int count(const std::string& key, int max = kMaxWidth) const;
    int count_or(const std::string& key, int fallback, int max = kMaxWidth) const;
    int integer_or(const std::string& key, int fallback, int lo, int hi) const;
    // A finite number in [r.lo, r.hi] (the ranges below).
    float number(const std::string& key, Range r) const;
    float number_or(const std::string& key, float fallback, Range r) const;
    std::string string_or(const std::string& key, const std::string& fallback) const;
    // The position scale of rope.scaling: 1 for none (or no key), 1 / rope.scaling.factor for linear; any other
    // type is refused.
    float linear_rope_freq_scale() const;
    // rope.scaling of a model whose heads rotate n_rot dimensions with base rope_base: none, linear or YaRN; any
    // other type is refused. YaRN's attention factor is 1 + 0.1 ln(factor), or with rope.scaling.yarn_log_multiplier
    // m the ratio (1 + 0.1 ln factor) / (1 + 0.1 m ln factor) (transformers' mscale / mscale_all_dim, mscale = 1).
    RopeScaling rope_scaling(int n_rot, float rope_base, YarnRange range) const;
    // A per-layer integer stored as a scalar (the same for every layer) or as an array with one value per layer
    // (longer arrays are cut: files count extra prediction layers past the main stack). Each value is in [lo, hi].
    std::vector<int> per_layer(const std::string& key, int n_layer, int lo, int hi) const;
    std::vector<int> per_layer_or(const std::string& key, int n_layer, int lo, int hi, int fallback) const;
    // A per-layer bool array (cut like per_layer).
    std::vector<bool> flags_per_layer(const std::string& key, int n_layer) const;
    // The first n values (fewer when the array is shorter) of an integer array, each in [lo, hi].
    std::vector<int> leading_values(const std::string& key, int n, int lo, int hi) const;

    // Throws gguf::Error "<name>: <what>".
    [[noreturn]] void fail(const std::string& what) const;

private:
    const gguf::Value& get(const std::string& key) const;  // "<arch>.<key>", which must exist
    int64_t integer(const gguf::Value& v) const;
    // f(), with a value's own error (of type or range) made one that names the file.
    template <class F>
    auto checked(F f) const -> decltype(f()) {
        try {
            return f();
        } catch (const gguf::Error& e) {
            fail(e.what());
        }
    }
    std::vector<int> layer_values(const gguf::Value& v, const std::string& key, int n_layer, int lo, int hi) const;

    std::string name_, arch_;
    int64_t n_vocab_ = 0;
    const gguf::Model* model_ = nullptr;  // a file's metadata, or
    std::vector<gguf::KeyValue> kv_;      // key-values of a file to be written
};

}  // namespace zinc::model
