#include "fixture_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>

#include "backend/backend.h"
#include "engine/family.h"
#include "gguf/split.h"
#include "npy.h"

namespace zinc::test {

FixtureMeta load_fixture_meta(const std::string& meta_json) {
    std::ifstream f(meta_json);
    const auto j = nlohmann::json::parse(f);
    return {j.at("prompt_ids").get<std::vector<int32_t>>(), j.at("greedy_continuation").get<std::vector<int32_t>>()};
}

std::vector<float> run_logits(const std::string& gguf, const std::vector<int32_t>& ids, size_t batch, bool cuda) {
    gguf::Model model(gguf);
    auto be = cuda ? backend::make_cuda_backend(0) : backend::make_cpu_backend(0);
    auto fam = engine::make_family(model, *be, static_cast<int>(ids.size()));
    std::vector<float> logits;
    for (size_t i = 0; i < ids.size(); i += batch) {
        const size_t n = std::min(batch, ids.size() - i);
        fam->forward(std::span<const int32_t>(ids).subspan(i, n), static_cast<int64_t>(i), true, logits);
    }
    return logits;
}

std::vector<int32_t> greedy_continuation(const std::string& gguf, const std::vector<int32_t>& prompt, size_t n,
                                         bool cuda) {
    gguf::Model model(gguf);
    auto be = cuda ? backend::make_cuda_backend(0) : backend::make_cpu_backend(0);
    auto fam = engine::make_family(model, *be, static_cast<int>(prompt.size() + n));
    // The argmax is taken by the backend, as greedy generation does.
    std::vector<int32_t> got{fam->forward_argmax(prompt, 0)};
    int64_t pos = static_cast<int64_t>(prompt.size());
    while (got.size() < n) {
        const int32_t one[1] = {got.back()};
        got.push_back(fam->forward_argmax(one, pos++));
    }
    return got;
}

LogitsStats compare_to_npy(const std::vector<float>& ours, const std::string& ref_npy) {
    const auto ref = load_npy(ref_npy);
    EXPECT_EQ(ours.size(), ref.data.size());
    return compare_logits(ours, ref.data, ref.cols());
}

std::vector<size_t> clear_positions(const std::string& ref_npy, float margin) {
    const auto ref = load_npy(ref_npy);
    std::vector<size_t> out;
    for (size_t i = 0; i < ref.rows(); ++i) {
        std::vector<float> r(ref.row(i), ref.row(i) + ref.cols());
        std::partial_sort(r.begin(), r.begin() + 2, r.end(), std::greater<float>());
        if (r[0] - r[1] >= margin) out.push_back(i);
    }
    return out;
}

}  // namespace zinc::test
