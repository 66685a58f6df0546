// Writes one tiny, valid GGUF of each model family (a few KiB, f32 weights) for the fuzz corpus: mutations of
// them reach each family's hyper-parameter reading and tensor binding. The tensors are those the family declares
// (model/families.h), so the seeds follow the declarations when they change.
//
// usage: make_family_seeds OUT_DIR   (the seeds are committed as tests/fuzz/corpus/family_*.gguf)
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "model/families.h"

namespace {

using zinc::gguf::KeyValue;
using zinc::gguf::Value;

struct Seed {
    std::string name;
    std::vector<KeyValue> kv;
};

// general.architecture and the keys every family reads.
std::vector<KeyValue> base(const std::string& arch, uint32_t n_layer) {
    const std::string a = arch + ".";
    return {{"general.architecture", Value::of(arch)},
            {a + "block_count", Value::of(n_layer)},
            {a + "context_length", Value::of(uint32_t{64})},
            {a + "embedding_length", Value::of(uint32_t{8})},
            {a + "attention.head_count", Value::of(uint32_t{2})},
            {a + "attention.layer_norm_rms_epsilon", Value::of(1e-6f)}};
}

void add(std::vector<KeyValue>& kv, const std::string& key, Value v) { kv.push_back({key, std::move(v)}); }

// A llama-like family's keys, with what each later family adds (appended after the first seeds, whose bytes the
// order of the random weights keeps).
std::vector<KeyValue> llama_like(const std::string& name) {
    auto kv = base(name, 1);
    const std::string a = name + ".";
    add(kv, a + "feed_forward_length", Value::of(uint32_t{16}));
    add(kv, a + "attention.head_count_kv", Value::of(uint32_t{1}));
    add(kv, a + "rope.freq_base", Value::of(10000.0f));
    if (name == "qwen3moe") {
        add(kv, a + "expert_count", Value::of(uint32_t{4}));
        add(kv, a + "expert_used_count", Value::of(uint32_t{2}));
        add(kv, a + "expert_feed_forward_length", Value::of(uint32_t{8}));
    }
    if (name == "mistral3") {  // YaRN and the attention temperature
        add(kv, a + "rope.scaling.type", Value::of("yarn"));
        add(kv, a + "rope.scaling.factor", Value::of(4.0f));
        add(kv, a + "rope.scaling.original_context_length", Value::of(uint32_t{64}));
        add(kv, a + "rope.scaling.yarn_log_multiplier", Value::of(1.0f));
        add(kv, a + "attention.temperature_scale", Value::of(0.1f));
    }
    if (name == "phi3") {  // partial rotary with LongRoPE factors
        add(kv, a + "rope.dimension_count", Value::of(uint32_t{2}));
        add(kv, a + "rope.scaling.original_context_length", Value::of(uint32_t{16}));
        add(kv, a + "rope.scaling.attn_factor", Value::of(1.19f));
    }
    if (name == "gemma3") add(kv, a + "attention.sliding_window", Value::of(uint32_t{4}));
    return kv;
}

std::vector<Seed> seeds() {
    std::vector<Seed> s;
    for (const char* arch : {"llama", "qwen3"}) s.push_back({arch, llama_like(arch)});
    for (const char* arch : {"qwen35", "qwen35moe"}) {
        auto kv = base(arch, 2);
        const std::string a = std::string(arch) + ".";
        add(kv, a + "attention.head_count_kv", Value::of(uint32_t{1}));
        add(kv, a + "attention.key_length", Value::of(uint32_t{4}));
        add(kv, a + "rope.dimension_count", Value::of(uint32_t{4}));
        add(kv, a + "rope.dimension_sections", Value::array(std::vector<int32_t>{1, 1, 0, 0}));
        add(kv, a + "full_attention_interval", Value::of(uint32_t{2}));
        add(kv, a + "ssm.conv_kernel", Value::of(uint32_t{2}));
        add(kv, a + "ssm.state_size", Value::of(uint32_t{4}));
        add(kv, a + "ssm.group_count", Value::of(uint32_t{1}));
        add(kv, a + "ssm.time_step_rank", Value::of(uint32_t{2}));
        add(kv, a + "ssm.inner_size", Value::of(uint32_t{8}));
        if (std::string(arch) == "qwen35") {
            add(kv, a + "feed_forward_length", Value::of(uint32_t{16}));
        } else {
            add(kv, a + "expert_count", Value::of(uint32_t{4}));
            add(kv, a + "expert_used_count", Value::of(uint32_t{2}));
            add(kv, a + "expert_feed_forward_length", Value::of(uint32_t{8}));
            add(kv, a + "expert_shared_feed_forward_length", Value::of(uint32_t{8}));
        }
        s.push_back({arch, kv});
    }
    for (bool moe : {false, true}) {
        auto kv = base("gemma4", 2);
        add(kv, "gemma4.attention.head_count_kv", Value::array(std::vector<int32_t>{1, 1}));
        add(kv, "gemma4.feed_forward_length", Value::array(std::vector<int32_t>{16, 16}));
        add(kv, "gemma4.attention.sliding_window_pattern", Value::array(std::vector<bool>{true, false}));
        add(kv, "gemma4.attention.key_length", Value::of(uint32_t{8}));
        add(kv, "gemma4.attention.key_length_swa", Value::of(uint32_t{4}));
        add(kv, "gemma4.attention.sliding_window", Value::of(uint32_t{4}));
        add(kv, "gemma4.final_logit_softcapping", Value::of(30.0f));
        if (moe) {
            add(kv, "gemma4.expert_count", Value::of(uint32_t{4}));
            add(kv, "gemma4.expert_used_count", Value::of(uint32_t{2}));
            add(kv, "gemma4.expert_feed_forward_length", Value::of(uint32_t{8}));
        }
        s.push_back({moe ? "gemma4moe" : "gemma4", kv});
    }
    {
        auto kv = base("gpt-oss", 2);
        add(kv, "gpt-oss.attention.head_count_kv", Value::of(uint32_t{1}));
        add(kv, "gpt-oss.attention.key_length", Value::of(uint32_t{4}));
        add(kv, "gpt-oss.expert_count", Value::of(uint32_t{4}));
        add(kv, "gpt-oss.expert_used_count", Value::of(uint32_t{2}));
        add(kv, "gpt-oss.expert_feed_forward_length", Value::of(uint32_t{8}));
        add(kv, "gpt-oss.attention.sliding_window", Value::of(uint32_t{4}));
        add(kv, "gpt-oss.rope.scaling.type", Value::of("yarn"));
        add(kv, "gpt-oss.rope.scaling.factor", Value::of(4.0f));
        add(kv, "gpt-oss.rope.scaling.original_context_length", Value::of(uint32_t{16}));
        s.push_back({"gpt-oss", kv});
    }
    for (const char* arch : {"qwen2", "qwen3moe", "mistral3", "phi3", "gemma3"}) s.push_back({arch, llama_like(arch)});
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    try {
        constexpr int64_t n_vocab = 16;
        std::mt19937 rng(5);
        std::normal_distribution<float> normal(0.0f, 0.5f);
        for (const Seed& seed : seeds()) {
            zinc::gguf::Writer w;
            for (const KeyValue& e : seed.kv) w.add(e.key, e.value);
            for (const auto& t : zinc::model::list_tensors(zinc::model::Metadata(seed.kv, n_vocab, seed.name), false)) {
                size_t n = 1;
                for (int64_t d : t.ne) n *= static_cast<size_t>(d);
                std::vector<float> v(n);
                for (float& x : v) x = normal(rng);
                // Gemma 4's frequency factors: 1 rotates a pair, a huge factor leaves it alone.
                if (t.role == zinc::model::TensorRole::RopeFreqs)
                    for (size_t i = 0; i < n; ++i) v[i] = i < n / 2 ? 1.0f : 1e30f;
                // phi3's LongRoPE divisors: near 1, as in the released models.
                using zinc::model::TensorRole;
                if (t.role == TensorRole::RopeFactorsLong || t.role == TensorRole::RopeFactorsShort)
                    for (float& x : v) x = 1.0f + std::abs(x);
                std::vector<uint8_t> bytes(n * sizeof(float));
                std::memcpy(bytes.data(), v.data(), bytes.size());
                w.add_tensor(t.name, zinc::gguf::TensorType::F32, t.ne, bytes);
            }
            w.write(std::string(argv[1]) + "/family_" + seed.name + ".gguf");
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "make_family_seeds: %s\n", e.what());
        return 1;
    }
    return 0;
}
