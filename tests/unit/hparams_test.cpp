// Hyper-parameters are range-checked when a family reads them: a file whose values are NaN, infinite, zero,
// negative or absurdly large stops with a message naming the file and the key, instead of loading and returning
// NaN or garbage logits (or overflowing a size).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/family.h"
#include "backend/backend.h"
#include "gguf/split.h"
#include "gguf/writer.h"
#include "model/catalog.h"
#include "model/families.h"
#include "model/gemma4.h"
#include "model/gpt_oss.h"
#include "model/llama_like.h"
#include "model/qwen35.h"

namespace {

using zinc::gguf::KeyValue;
using zinc::gguf::Value;

std::string fixture(const std::string& fam) {
    return std::string(ZINC_FIXTURES_DIR) + "/" + fam + "/" + fam + "-f32.gguf";
}

// The fixture's metadata with `key` set to `v` (added when absent).
std::vector<KeyValue> with(const std::string& fam, const std::string& key, Value v) {
    const zinc::gguf::Model m(fixture(fam));
    std::vector<KeyValue> kv = m.metadata();
    for (KeyValue& e : kv)
        if (e.key == key) {
            e.value = v;
            return kv;
        }
    kv.push_back({key, v});
    return kv;
}

int64_t n_vocab(const std::string& fam) { return zinc::gguf::Model(fixture(fam)).tensor("token_embd.weight").info->ne[1]; }

// The error of reading the family's hyper-parameters and listing its tensors with key = v; "" when it reads.
std::string error_of(const std::string& fam, const std::string& key, Value v) {
    try {
        zinc::model::list_tensors(zinc::model::Metadata(with(fam, key, v), n_vocab(fam), "edited " + fam), false);
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

const float kNan = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();

TEST(HParams, FixturesRead) {
    for (const char* fam : {"qwen3", "qwen35", "qwen35moe", "gemma4", "gemma4moe", "gpt-oss"})
        EXPECT_EQ(error_of(fam, "general.name", Value::of("x")), "") << fam;
}

TEST(HParams, FloatsMustBeFinitePositive) {
    const std::vector<std::pair<std::string, std::string>> keys = {
        {"qwen3", "qwen3.rope.freq_base"},          {"qwen3", "qwen3.attention.layer_norm_rms_epsilon"},
        {"qwen35", "qwen35.rope.freq_base"},        {"qwen35", "qwen35.attention.layer_norm_rms_epsilon"},
        {"gemma4", "gemma4.rope.freq_base_swa"},    {"gemma4", "gemma4.attention.layer_norm_rms_epsilon"},
        {"gpt-oss", "gpt-oss.rope.freq_base"},      {"gpt-oss", "gpt-oss.rope.scaling.factor"},
        {"gpt-oss", "gpt-oss.rope.scaling.yarn_beta_fast"}, {"gpt-oss", "gpt-oss.attention.layer_norm_rms_epsilon"}};
    for (const auto& [fam, key] : keys)
        for (float bad : {kNan, kInf, -kInf, 0.0f, -1.0f}) {
            const std::string e = error_of(fam, key, Value::of(bad));
            EXPECT_NE(e.find("edited " + fam + ": " + key + " is"), std::string::npos) << key << " = " << bad << ": " << e;
        }
    // A soft-cap of 0 means none; negative or NaN is refused.
    EXPECT_EQ(error_of("gemma4", "gemma4.final_logit_softcapping", Value::of(0.0f)), "");
    EXPECT_NE(error_of("gemma4", "gemma4.final_logit_softcapping", Value::of(kNan)), "");
    EXPECT_NE(error_of("gemma4", "gemma4.final_logit_softcapping", Value::of(-30.0f)), "");
}

// phi3's LongRoPE keys, on the Phi-4-mini preset's metadata (no phi3 fixture is committed).
TEST(HParams, Phi3LongRopeKeys) {
    const zinc::model::Preset& p = *zinc::model::find_preset("phi-4-mini");
    auto error_with = [&](const std::string& key, Value v) -> std::string {
        std::vector<KeyValue> kv = zinc::model::arch_metadata(p);
        for (KeyValue& e : kv)
            if (e.key == key) e.value = v;
        try {
            zinc::model::list_tensors(zinc::model::Metadata(kv, p.n_vocab, "edited phi3"), true);
        } catch (const std::exception& e) {
            return e.what();
        }
        return "";
    };
    EXPECT_EQ(error_with("general.name", Value::of("x")), "");
    const std::string factor = "phi3.rope.scaling.attn_factor";
    for (float bad : {kNan, kInf, 0.0f, -1.0f, 1e3f}) {
        const std::string e = error_with(factor, Value::of(bad));
        EXPECT_NE(e.find("edited phi3: " + factor + " is"), std::string::npos) << bad << ": " << e;
    }
    const std::string orig = "phi3.rope.scaling.original_context_length";
    EXPECT_NE(error_with(orig, Value::of(uint32_t{0})).find(orig + " is 0"), std::string::npos);
    EXPECT_NE(error_with(orig, Value::of(int64_t{-5})).find(orig + " is -5"), std::string::npos);
}

TEST(HParams, CountsMustBeInRange) {
    for (const auto& [fam, key] : std::vector<std::pair<std::string, std::string>>{
             {"qwen3", "qwen3.block_count"}, {"qwen3", "qwen3.embedding_length"},
             {"qwen3", "qwen3.attention.head_count"}, {"qwen35", "qwen35.ssm.state_size"},
             {"gpt-oss", "gpt-oss.expert_count"}, {"gemma4", "gemma4.attention.sliding_window"}}) {
        EXPECT_NE(error_of(fam, key, Value::of(uint32_t{0})).find(key + " is 0"), std::string::npos) << key;
        EXPECT_NE(error_of(fam, key, Value::of(int64_t{-5})).find(key + " is -5"), std::string::npos) << key;
        EXPECT_NE(error_of(fam, key, Value::of(uint64_t{1} << 40)).find(key), std::string::npos) << key;
    }
    // More experts used than there are.
    EXPECT_NE(error_of("gpt-oss", "gpt-oss.expert_used_count", Value::of(uint32_t{1000})).find("expert_used_count"),
              std::string::npos);
}

// Sizes that used to overflow an int (value_dim = time_step_rank * state_size) or wrap a sum (the rope sections)
// are computed in 64 bits or refused.
TEST(HParams, LargeSizesDoNotOverflow) {
    auto kv = with("qwen35", "qwen35.ssm.state_size", Value::of(uint32_t{1} << 20));
    for (KeyValue& e : kv)
        if (e.key == "qwen35.ssm.time_step_rank") e.value = Value::of(uint32_t{1} << 20);
    for (KeyValue& e : kv)
        if (e.key == "qwen35.ssm.group_count") e.value = Value::of(uint32_t{1} << 20);
    for (KeyValue& e : kv)
        if (e.key == "qwen35.ssm.inner_size") e.value = Value::of(uint32_t{1} << 20);
    EXPECT_NE(zinc::model::Metadata(kv, n_vocab("qwen35"), "big").find("qwen35.ssm.inner_size"), nullptr);
    try {
        zinc::model::read_qwen35_params(zinc::model::Metadata(kv, n_vocab("qwen35"), "big"));
        FAIL() << "inner_size does not match time_step_rank * state_size";
    } catch (const zinc::gguf::Error& e) {
        EXPECT_NE(std::string(e.what()).find("ssm.inner_size"), std::string::npos) << e.what();
    }
    std::erase_if(kv, [](const KeyValue& e) { return e.key == "qwen35.ssm.inner_size"; });
    const auto p = zinc::model::read_qwen35_params(zinc::model::Metadata(kv, n_vocab("qwen35"), "big"));
    EXPECT_EQ(p.value_dim(), int64_t{1} << 40);
    EXPECT_EQ(p.conv_dim(), int64_t{3} << 40);
    std::vector<int32_t> sections = {std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::max(), 2, 0};
    const std::string e = error_of("qwen35", "qwen35.rope.dimension_sections", Value::array(sections));
    EXPECT_NE(e.find("rope.dimension_sections"), std::string::npos) << e;
}

// Through the whole load: the family stops before touching a weight.
TEST(HParams, LoadingAnEditedFileNamesTheKey) {
    const std::string path = ::testing::TempDir() + "zinc_hparams_nan.gguf";
    const zinc::gguf::Model src(fixture("qwen3"));
    zinc::gguf::Writer w;
    for (const KeyValue& e : with("qwen3", "qwen3.rope.freq_base", Value::of(kNan))) w.add(e.key, e.value);
    for (const auto& mt : src.tensors()) w.add_tensor(mt.info->name, mt.info->type, mt.info->shape(), mt.info->bytes());
    w.write(path);
    const zinc::gguf::Model m(path);
    auto be = zinc::backend::make_cpu_backend(1);
    try {
        zinc::engine::make_family(m, *be);
        FAIL() << "a NaN rope base loaded";
    } catch (const zinc::gguf::Error& e) {
        EXPECT_NE(std::string(e.what()).find(path + ": qwen3.rope.freq_base is nan"), std::string::npos) << e.what();
    }
    std::remove(path.c_str());
}

}  // namespace
