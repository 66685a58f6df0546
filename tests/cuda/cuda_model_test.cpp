// The qwen3 fixtures through the engine on the CUDA backend: logits against transformers (F32 weights), the
// greedy continuation, decode (one token per forward: the matvec kernels) against prefill (the tiled kernel),
// and the quantized files against llama.cpp's logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/family.h"
#include "engine/sampler.h"
#include "gguf/split.h"
#include "gpu_required.h"
#include "fixture_model.h"

namespace {

using namespace zinc::test;

const std::string kDir = ZINC_FIXTURES_DIR "/qwen3/";

FixtureMeta load_meta() { return load_fixture_meta(kDir + "meta.json"); }

// Logits of a qwen3 fixture file on the CUDA backend.
std::vector<float> run_cuda(const std::string& file, const std::vector<int32_t>& ids, size_t batch) {
    return run_logits(kDir + file, ids, batch, true);
}

// F32 weights: every op in f32, as the CPU engine (which meets 1e-4). Prefill (the tiled matmul) and decode
// (the f32 matvec) both.
TEST(CudaQwen3Model, F32PrefillMatchesTransformers) {
    ZINC_REQUIRE_GPU();
    const FixtureMeta fx = load_meta();
    const auto s = compare_to_npy(run_cuda("qwen3-f32.gguf", fx.prompt, fx.prompt.size()), kDir + "logits_hf_f32.npy");
    std::printf("cuda f32 prefill vs transformers: %s\n", s.summary().c_str());
    EXPECT_LE(s.rel_l2, 1e-4) << s.summary();
    EXPECT_LE(s.max_rel_l2, 1e-4) << s.summary();
    EXPECT_TRUE(s.all_argmax_agree()) << s.summary();
}

TEST(CudaQwen3Model, F32DecodeMatchesTransformers) {
    ZINC_REQUIRE_GPU();
    const FixtureMeta fx = load_meta();
    const auto s = compare_to_npy(run_cuda("qwen3-f32.gguf", fx.prompt, 1), kDir + "logits_hf_f32.npy");
    std::printf("cuda f32 token by token vs transformers: %s\n", s.summary().c_str());
    EXPECT_LE(s.rel_l2, 1e-4) << s.summary();
    EXPECT_LE(s.max_rel_l2, 1e-4) << s.summary();
    EXPECT_TRUE(s.all_argmax_agree()) << s.summary();
}

TEST(CudaQwen3Model, GreedyContinuationMatchesTransformers) {
    ZINC_REQUIRE_GPU();
    const FixtureMeta fx = load_meta();
    EXPECT_EQ(greedy_continuation(kDir + "qwen3-f32.gguf", fx.prompt, fx.continuation.size(), true), fx.continuation);
}

// Quantized files. The CUDA prefill dequantizes weights to f32 and keeps f32 activations, the decode path quantizes
// activations to Q8_1 with f32 scales, while llama.cpp's CPU backend (the reference) quantizes them to Q8_0/Q8_K;
// so neither path is bit-comparable with llama.cpp, and the random-weight fixture amplifies the difference in
// activation rounding. Measured on an H200 (rel L2 vs llama.cpp): q8_0 prefill 1.88e-2, decode 1.70e-2; q4_k_m
// prefill 2.71e-2, decode 3.15e-2; the largest logit differences are 0.37-0.61. The bounds below leave about a
// third of headroom over those; the top token must agree wherever llama.cpp leads by more than that noise (0.25).
void check_quantized(const std::string& type, double max_rel_l2, size_t batch) {
    const FixtureMeta fx = load_meta();
    const std::string ref = "logits_llama_" + type + ".npy";
    const auto s = compare_to_npy(run_cuda("qwen3-" + type + ".gguf", fx.prompt, batch), kDir + ref);
    std::printf("cuda %s (%s) vs llama.cpp: %s\n", type.c_str(), batch == 1 ? "decode" : "prefill",
                s.summary().c_str());
    EXPECT_LE(s.rel_l2, max_rel_l2) << s.summary();
    for (size_t i : clear_positions(kDir + ref, 0.25f))
        EXPECT_EQ(s.pos[i].argmax_a, s.pos[i].argmax_b) << "position " << i;
}

TEST(CudaQwen3Model, Q8_0PrefillAgreesWithLlamaCpp) { ZINC_REQUIRE_GPU(); check_quantized("q8_0", 2.5e-2, 1000); }
TEST(CudaQwen3Model, Q8_0DecodeAgreesWithLlamaCpp) { ZINC_REQUIRE_GPU(); check_quantized("q8_0", 2.5e-2, 1); }
TEST(CudaQwen3Model, Q4_K_MPrefillAgreesWithLlamaCpp) { ZINC_REQUIRE_GPU(); check_quantized("q4_k_m", 4e-2, 1000); }
TEST(CudaQwen3Model, Q4_K_MDecodeAgreesWithLlamaCpp) { ZINC_REQUIRE_GPU(); check_quantized("q4_k_m", 4.5e-2, 1); }

}  // namespace
