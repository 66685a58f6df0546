// The trained Brown model (data/brown/) on the CUDA backend: the full-precision form against transformers, and
// every file against the CPU engine on the same file over held-out text (KL divergence, same top token,
// perplexity), and prompts decoded together against each alone. The GPU computes prefill with f32 activations where
// the CPU rounds them to the weight type's vec-dot type (bf16, 8-bit blocks), so the two differ by about what that
// rounding costs.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <string>

#include "batch_check.h"
#include "brown_model.h"
#include "engine/perplexity.h"
#include "fixture_model.h"
#include "gpu_required.h"

namespace {

using namespace zinc::test;

TEST(CudaBrownModel, F32MatchesTransformers) {
    ZINC_REQUIRE_GPU();
    const std::string dir = std::string(ZINC_FIXTURES_DIR) + "/brown/";
    const auto ids = load_npy_ints(dir + "ids.npy");
    const auto s =
        compare_to_npy(run_logits(brown_file("F32"), ids, ids.size(), true), dir + "logits_hf_f32.npy");
    std::printf("cuda brown f32 vs transformers: %s\n", s.summary().c_str());
    EXPECT_LE(s.max_rel_l2, 1e-5) << s.summary();
    EXPECT_TRUE(s.all_argmax_agree()) << s.summary();
}

// Prompts decoded together: every prompt's greedy tokens are those it gets alone (tests/common/batch_check.h).
TEST(CudaBrownModel, BatchedGreedyTokensEqualEachAlone) {
    ZINC_REQUIRE_GPU();
    for (const char* type : {"F32", "BF16", "Q4_K_M"}) {
        const GreedyRuns r = brown_greedy_batched_and_alone(type, true, 64);
        for (size_t p = 0; p < r.alone.size(); ++p) {
            ASSERT_EQ(r.alone[p].size(), 64u);
            EXPECT_EQ(r.batched[p], r.alone[p]) << type << ", prompt " << p;
        }
    }
}

class CudaBrownAgainstCpu : public ::testing::TestWithParam<const char*> {};

// The first 40 held-out chunks of each file on the GPU against the CPU engine's base of the same file.
TEST_P(CudaBrownAgainstCpu, SameFileSameText) {
    ZINC_REQUIRE_GPU();
    const std::string type = GetParam();
    const std::string base = ::testing::TempDir() + "brown_cpu_" + type + "_" + std::to_string(::getpid()) + ".kld";
    zinc::engine::PerplexityOptions o;
    o.n_ctx = 512;
    o.max_chunks = 40;
    o.save_base = base;
    // The top-K base: its float log-probabilities keep KLs this small, which the full form's 16 bits would blur.
    o.top_k = zinc::engine::kKlBaseTopK;
    {
        BrownFile cpu(type);
        zinc::engine::perplexity(cpu.session().family(), zinc::engine::vocabulary_of(cpu.session()),
                                 brown_heldout_tokens(cpu.session()), o);
    }
    BrownFile gpu(type, true);
    zinc::engine::KlBaseReader reader(base);
    const auto r =
        zinc::engine::kl_divergence(gpu.session().family(), zinc::engine::vocabulary_of(gpu.session()), reader, {});
    const auto s = zinc::engine::summarize(r.sums);
    const double kld99 = zinc::engine::percentile(r.kld, 0.99f);
    std::printf("cuda brown %-6s vs cpu: PPL %.4f (cpu %.4f), mean KLD %.3e, 99%% KLD %.3e, same top %.3f%%\n",
                type.c_str(), s.ppl.value, s.ppl_base.value, s.kld.value, kld99, 100 * s.same_top.value);
    EXPECT_NEAR(s.ppl_ratio.value, 1.0, 2e-3);
    EXPECT_LE(s.kld.value, type == "F32" ? 1e-6 : 5e-4);
    EXPECT_LE(kld99, type == "F32" ? 1e-5 : 4e-3);
    EXPECT_GE(s.same_top.value, type == "F32" ? 0.995 : 0.97);
    std::remove(base.c_str());
}

INSTANTIATE_TEST_SUITE_P(Brown, CudaBrownAgainstCpu, ::testing::Values("F32", "BF16", "Q8_0", "Q4_K_M", "Q4_0"));

class CudaBrownKvCache : public ::testing::TestWithParam<zinc::backend::KvType> {};

// The F32 file with K and V cached in f16 or q8_0, on the GPU against the CPU engine with the same cache: both round
// the same values the same way, so only the few values whose f32 inputs straddle a rounding boundary differ.
TEST_P(CudaBrownKvCache, SameCacheTypeAsTheCpu) {
    ZINC_REQUIRE_GPU();
    const zinc::backend::KvType cache = GetParam();
    const std::string name = zinc::backend::kv_type_name(cache);
    const std::string base = ::testing::TempDir() + "brown_cpu_kv_" + name + "_" + std::to_string(::getpid()) + ".kld";
    zinc::engine::PerplexityOptions o;
    o.n_ctx = 512;
    o.max_chunks = 40;
    o.save_base = base;
    // The top-K base: its float log-probabilities keep KLs this small, which the full form's 16 bits would blur.
    o.top_k = zinc::engine::kKlBaseTopK;
    {
        BrownFile cpu("F32", false, cache);
        zinc::engine::perplexity(cpu.session().family(), zinc::engine::vocabulary_of(cpu.session()),
                                 brown_heldout_tokens(cpu.session()), o);
    }
    BrownFile gpu("F32", true, cache);
    zinc::engine::KlBaseReader reader(base);
    const auto r =
        zinc::engine::kl_divergence(gpu.session().family(), zinc::engine::vocabulary_of(gpu.session()), reader, {});
    const auto s = zinc::engine::summarize(r.sums);
    const double kld99 = zinc::engine::percentile(r.kld, 0.99f);
    std::printf("cuda brown F32, %s cache vs cpu: PPL %.4f (cpu %.4f), mean KLD %.3e, 99%% KLD %.3e, same top %.3f%%\n",
                name.c_str(), s.ppl.value, s.ppl_base.value, s.kld.value, kld99, 100 * s.same_top.value);
    EXPECT_NEAR(s.ppl_ratio.value, 1.0, 1e-3);
    EXPECT_LE(s.kld.value, 1e-4);
    EXPECT_LE(kld99, 1e-3);
    EXPECT_GE(s.same_top.value, 0.99);
    std::remove(base.c_str());
}

INSTANTIATE_TEST_SUITE_P(Brown, CudaBrownKvCache, ::testing::Values(zinc::backend::KvType::f16, zinc::backend::KvType::q8_0),
                         [](const auto& info) { return std::string(zinc::backend::kv_type_name(info.param)); });

}  // namespace
