// The memory plan measures a model on the sizing backend: its weights are exactly the file's tensors, its KV
// cache exactly layers x K and V x positions x width, and a plan larger than the free memory is refused with a
// message that names the parts.
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include "engine/family.h"
#include "engine/memory_plan.h"
#include "gguf/split.h"
#include "gguf/writer.h"
#include "model/families.h"

namespace {

const std::string kFixtures = ZINC_FIXTURES_DIR "/";

TEST(MemoryPlan, CountsWeightsCacheAndActivations) {
    const zinc::gguf::Model m(kFixtures + "qwen3/qwen3-f32.gguf");
    uint64_t file_tensors = 0;
    for (const auto& t : m.tensors()) file_tensors += t.info->nbytes;
    const auto a = zinc::engine::plan_memory(m, {256, 16});
    EXPECT_EQ(a.weights, file_tensors);
    // qwen3 fixture: 2 layers, 2 KV heads of 64, f16 K and V (the default).
    EXPECT_EQ(a.cache, 2ull * 2 * 256 * (2 * 64) * 2);
    using zinc::backend::KvType;
    EXPECT_EQ(zinc::engine::plan_memory(m, {256, 16, KvType::f32, KvType::q8_0}).cache,
              2ull * 256 * (2 * 64) * 4 + 2ull * 256 * (2 * 64) / 32 * 34);
    EXPECT_GT(a.activations_at_peak(), 0u);
    // A longer context grows the cache only; a larger batch grows the activations only.
    const auto b = zinc::engine::plan_memory(m, {512, 16});
    EXPECT_EQ(b.cache, 2 * a.cache);
    EXPECT_EQ(b.activations_at_peak(), a.activations_at_peak());
    const auto c = zinc::engine::plan_memory(m, {256, 64});
    EXPECT_GT(c.activations_at_peak(), a.activations_at_peak());
    EXPECT_EQ(c.cache, a.cache);
}

// Sliding-window layers keep a ring of window + micro-batch rows when that is shorter than the context: the gpt-oss
// fixture's 2 layers are one with a window of 16 and one with full attention, 2 KV heads of 32 values each.
TEST(MemoryPlan, SlidingLayersCountTheirRing) {
    const zinc::gguf::Model m(kFixtures + "gpt-oss/gpt-oss-f32.gguf");
    const auto full = zinc::engine::plan_memory(m, {1024, 1024});  // window + micro-batch >= context: no ring
    const auto ring = zinc::engine::plan_memory(m, {1024, 16});     // rings of 32 rows
    EXPECT_LT(ring.cache, full.cache);
    const uint64_t per_row = full.cache / 1024 / 2;  // one of each kind of layer's row, f16
    EXPECT_EQ(full.cache - ring.cache, per_row * (1024 - 32));
}

TEST(MemoryPlan, EveryFamilyCanBePlanned) {
    for (const char* fam : {"qwen35", "qwen35moe", "gemma4", "gemma4moe", "gpt-oss"}) {
        const zinc::gguf::Model m(kFixtures + fam + "/" + fam + "-q8_0.gguf");
        const auto u = zinc::engine::plan_memory(m, {128, 32});
        EXPECT_GT(u.weights, 0u) << fam;
        EXPECT_GT(u.cache, 0u) << fam;
        EXPECT_GT(u.activations_at_peak(), 0u) << fam;
    }
}

// A one-layer qwen3 model with the real Qwen3 vocabulary's 151936 rows and 64-wide layers, weights all zero.
std::string qwen3_vocab_model() {
    const std::string path = ::testing::TempDir() + "zinc_plan_vocab_" + std::to_string(::getpid()) + ".gguf";
    std::vector<zinc::gguf::KeyValue> kv;
    auto u32 = [&](const char* k, uint32_t v) { kv.push_back({k, zinc::gguf::Value::of(v)}); };
    kv.push_back({"general.architecture", zinc::gguf::Value::of("qwen3")});
    u32("qwen3.block_count", 1);
    u32("qwen3.context_length", 40960);
    u32("qwen3.embedding_length", 64);
    u32("qwen3.feed_forward_length", 128);
    u32("qwen3.attention.head_count", 2);
    u32("qwen3.attention.head_count_kv", 1);
    u32("qwen3.attention.key_length", 32);
    kv.push_back({"qwen3.attention.layer_norm_rms_epsilon", zinc::gguf::Value::of(1e-6f)});
    zinc::gguf::Writer w;
    for (const auto& e : kv) w.add(e.key, e.value);
    for (const auto& t : zinc::model::list_tensors(zinc::model::Metadata(kv, 151936, "test"), true)) {
        const auto type = t.ne.size() > 1 ? zinc::gguf::TensorType::Q8_0 : zinc::gguf::TensorType::F32;
        size_t n = 1;
        for (int64_t d : t.ne) n *= static_cast<size_t>(d);
        w.add_tensor(t.name, type, t.ne, std::vector<uint8_t>(zinc::gguf::row_bytes(type, t.ne[0]) * (n / t.ne[0])));
    }
    w.write(path);
    return path;
}

// Generation reads the last token's logits only: a 4096-token context does not reserve a row of logits per
// position (151936 x 4096 floats would be 2.3 GiB); activations are bounded by the micro-batch.
TEST(MemoryPlan, LogitsAndActivationsAreBoundedByTheMicroBatch) {
    const std::string path = qwen3_vocab_model();
    const zinc::gguf::Model m(path);
    const auto gen = zinc::engine::plan_memory(m, {4096});
    EXPECT_LT(gen.activations_at_peak(), 16ull << 20) << zinc::engine::gib(gen.activations_at_peak());
    EXPECT_EQ(zinc::engine::plan_memory(m, {32768}).activations_at_peak(), gen.activations_at_peak());
    // All logits (zinc logits, perplexity): one micro-batch of rows at a time, whatever the context.
    const auto all = zinc::engine::plan_memory(m, {4096, 64}, true);
    EXPECT_GE(all.activations_at_peak(), 64ull * 151936 * 4);
    EXPECT_LT(all.activations_at_peak(), 64ull * 151936 * 4 + (16ull << 20));
    EXPECT_EQ(zinc::engine::plan_memory(m, {32768, 64}, true).activations_at_peak(), all.activations_at_peak());
    std::remove(path.c_str());
}

// The head's logits buffer grows when more rows are wanted; the smaller one it replaces is freed.
TEST(MemoryPlan, ReplacedBuffersAreFreed) {
    const zinc::gguf::Model m(kFixtures + "qwen3/qwen3-f32.gguf");
    zinc::backend::MemoryUse use;
    auto be = zinc::backend::make_sizing_backend(use);
    auto f = zinc::engine::make_family(m, *be, {64, 16});
    const std::vector<int32_t> ids(16, 1);
    f->forward_argmax(ids, 0);
    const uint64_t one_row = use.activations;
    std::vector<float> logits;
    f->forward(ids, 0, true, logits);
    const uint64_t row_bytes = uint64_t(f->n_vocab()) * sizeof(float);
    EXPECT_EQ(use.activations, one_row + 15 * row_bytes);  // 16 rows held, the 1-row buffer released
    EXPECT_EQ(use.peak_activations, use.activations);  // the old buffer goes before the new one comes
}

std::string refusal(const zinc::backend::MemoryUse& u, uint64_t free_bytes) {
    try {
        zinc::engine::check_fits(u, free_bytes, "GPU 0 (test)", 4096);
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "";
}

TEST(MemoryPlan, RefusesWhatDoesNotFit) {
    zinc::backend::MemoryUse u;
    u.weights = 20ull << 30;
    u.cache = 4ull << 30;
    u.activations = 1ull << 30;
    EXPECT_EQ(refusal(u, 40ull << 30), "");
    // 24 GiB: the weights fit with about 2 GiB to spare, which holds about half of the 4 GiB cache.
    const std::string msg = refusal(u, 24ull << 30);
    for (const char* part : {"GPU 0 (test)", "weights 20.00 GiB", "KV cache for 4096 positions 4.00 GiB",
                             "24.00 GiB are free", "--ctx-size "})
        EXPECT_NE(msg.find(part), std::string::npos) << part << " missing in: " << msg;
    const int64_t fit = zinc::engine::fitting_context(u, 24ull << 30, 4096);
    EXPECT_GT(fit, 1500);
    EXPECT_LT(fit, 2100);
    EXPECT_NE(msg.find("--ctx-size " + std::to_string(fit) + " would fit"), std::string::npos) << msg;
    // The context that is said to fit does.
    zinc::backend::MemoryUse smaller = u;
    smaller.cache = u.cache / 4096 * static_cast<uint64_t>(fit);
    EXPECT_EQ(refusal(smaller, 24ull << 30), "");
    // 16 GiB: not even the weights fit, whatever the context.
    EXPECT_NE(refusal(u, 16ull << 30).find("even a context of one token does not fit"), std::string::npos);
}

}  // namespace
