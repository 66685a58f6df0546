// Running a fixture GGUF through the engine and comparing with its reference logits: what every
// model test (CPU and CUDA) does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/family.h"
#include "logits_compare.h"

namespace zinc::test {

// A context with an f32 KV cache: what comparisons with transformers' float32 logits and llama.cpp's run on.
inline engine::ContextSize f32_cache(int n_ctx, int n_ubatch = engine::kDefaultUbatch) {
    return {n_ctx, n_ubatch, backend::KvType::f32, backend::KvType::f32};
}

struct FixtureMeta {
    std::vector<int32_t> prompt, continuation;  // meta.json: prompt_ids, greedy_continuation
};
FixtureMeta load_fixture_meta(const std::string& meta_json);

// Logits of every position of `ids`, fed `batch` tokens per forward pass, on the CPU or CUDA backend; each pass
// runs in micro-batches of `ubatch` tokens (0: engine::kDefaultUbatch).
std::vector<float> run_logits(const std::string& gguf, const std::vector<int32_t>& ids, size_t batch,
                              bool cuda = false, int ubatch = 0);

// The prompt evaluated as one batch, then `n` tokens decoded greedily one at a time.
std::vector<int32_t> greedy_continuation(const std::string& gguf, const std::vector<int32_t>& prompt, size_t n,
                                         bool cuda = false);

LogitsStats compare_to_npy(const std::vector<float>& ours, const std::string& ref_npy);

// Positions where the reference's top-1 leads its runner-up by at least `margin`.
std::vector<size_t> clear_positions(const std::string& ref_npy, float margin);

// tests/fixtures/<fam>/<fam>-<type>.gguf
std::string fixture_gguf(const std::string& fam, const std::string& type);

// The fixture families, for tests that run over each.
inline const std::vector<std::string> kFixtureFamilies = {"qwen3",  "qwen35",    "qwen35moe",
                                                          "gemma4", "gemma4moe", "gpt-oss"};
// A test parameter (a family, a quantization mix) as the name of its test: '-' is not allowed there.
std::string test_name(std::string param);

// The F32 file of `fam`, fed `batch` tokens per forward pass (0: the whole prompt at once), against transformers'
// float32 logits: f32 throughout, so rel L2 overall and at the worst position within 1e-4 and the same top token
// everywhere.
void expect_f32_matches_transformers(const std::string& fam, size_t batch = 0, bool cuda = false);

// The `type` file of `fam` (whole prompt, CPU) against llama.cpp's logits for it: rel L2 within max_rel_l2, and the
// same top token wherever llama.cpp's leads by `lead` or more, which must hold for at least min_clear_fraction of
// the positions (the check has to cover them).
void expect_agrees_with_llama_cpp(const std::string& fam, const std::string& type, double max_rel_l2, float lead,
                                  double min_clear_fraction);

}  // namespace zinc::test
