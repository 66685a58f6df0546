// Running a fixture GGUF through the engine and comparing with its reference logits: what every
// model test (CPU and CUDA) does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "logits_compare.h"

namespace zinc::test {

struct FixtureMeta {
    std::vector<int32_t> prompt, continuation;  // meta.json: prompt_ids, greedy_continuation
};
FixtureMeta load_fixture_meta(const std::string& meta_json);

// Logits of every position of `ids`, fed `batch` tokens per forward pass, on the CPU or CUDA backend.
std::vector<float> run_logits(const std::string& gguf, const std::vector<int32_t>& ids, size_t batch,
                              bool cuda = false);

// The prompt evaluated as one batch, then `n` tokens decoded greedily one at a time.
std::vector<int32_t> greedy_continuation(const std::string& gguf, const std::vector<int32_t>& prompt, size_t n,
                                         bool cuda = false);

LogitsStats compare_to_npy(const std::vector<float>& ours, const std::string& ref_npy);

// Positions where the reference's top-1 leads its runner-up by at least `margin`.
std::vector<size_t> clear_positions(const std::string& ref_npy, float margin);

}  // namespace zinc::test
