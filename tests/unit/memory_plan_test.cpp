// The memory plan measures a model on the sizing backend: its weights are exactly the file's tensors, its KV
// cache exactly layers x K and V x positions x width, and a plan larger than the free memory is refused with a
// message that names the parts.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "engine/memory_plan.h"
#include "gguf/split.h"

namespace {

const std::string kFixtures = ZINC_FIXTURES_DIR "/";

TEST(MemoryPlan, CountsWeightsCacheAndActivations) {
    const zinc::gguf::Model m(kFixtures + "qwen3/qwen3-f32.gguf");
    uint64_t file_tensors = 0;
    for (const auto& t : m.tensors()) file_tensors += t.info->nbytes;
    const auto a = zinc::engine::plan_memory(m, {256, 16});
    EXPECT_EQ(a.weights, file_tensors);
    // qwen3 fixture: 2 layers, 2 KV heads of 64, f32 K and V.
    EXPECT_EQ(a.cache, 2ull * 2 * 256 * (2 * 64) * 4);
    EXPECT_GT(a.activations, 0u);
    // A longer context grows the cache only; a larger batch grows the activations only.
    const auto b = zinc::engine::plan_memory(m, {512, 16});
    EXPECT_EQ(b.cache, 2 * a.cache);
    EXPECT_EQ(b.activations, a.activations);
    const auto c = zinc::engine::plan_memory(m, {256, 64});
    EXPECT_GT(c.activations, a.activations);
    EXPECT_EQ(c.cache, a.cache);
}

TEST(MemoryPlan, EveryFamilyCanBePlanned) {
    for (const char* fam : {"qwen35", "qwen35moe", "gemma4", "gemma4moe", "gpt-oss"}) {
        const zinc::gguf::Model m(kFixtures + fam + "/" + fam + "-q8_0.gguf");
        const auto u = zinc::engine::plan_memory(m, {128, 32});
        EXPECT_GT(u.weights, 0u) << fam;
        EXPECT_GT(u.cache, 0u) << fam;
        EXPECT_GT(u.activations, 0u) << fam;
    }
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
