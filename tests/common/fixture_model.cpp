#include "fixture_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
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

std::vector<float> run_logits(const std::string& gguf, const std::vector<int32_t>& ids, size_t batch, bool cuda,
                              int ubatch) {
    gguf::Model model(gguf);
    auto be = cuda ? backend::make_cuda_backend(0) : backend::make_cpu_backend(0);
    auto fam = engine::make_family(model, *be,
                                   f32_cache(static_cast<int>(ids.size()), ubatch > 0 ? ubatch : engine::kDefaultUbatch));
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
    auto fam = engine::make_family(model, *be, f32_cache(static_cast<int>(prompt.size() + n)));
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

std::string test_name(std::string param) {
    for (char& c : param)
        if (c == '-') c = '_';
    return param;
}

std::string fixture_gguf(const std::string& fam, const std::string& type) {
    return std::string(ZINC_FIXTURES_DIR) + "/" + fam + "/" + fam + "-" + type + ".gguf";
}

void expect_f32_matches_transformers(const std::string& fam, size_t batch, bool cuda) {
    const std::string dir = std::string(ZINC_FIXTURES_DIR) + "/" + fam + "/";
    const FixtureMeta fx = load_fixture_meta(dir + "meta.json");
    if (batch == 0) batch = fx.prompt.size();
    const auto s =
        compare_to_npy(run_logits(fixture_gguf(fam, "f32"), fx.prompt, batch, cuda), dir + "logits_hf_f32.npy");
    std::printf("%s%s f32 batch %zu vs transformers: %s\n", cuda ? "cuda " : "", fam.c_str(), batch,
                s.summary().c_str());
    EXPECT_LE(s.rel_l2, 1e-4) << "batch " << batch << ": " << s.summary();
    EXPECT_LE(s.max_rel_l2, 1e-4) << "batch " << batch << ": " << s.summary();
    EXPECT_TRUE(s.all_argmax_agree()) << "batch " << batch << ": " << s.summary();
}

void expect_agrees_with_llama_cpp(const std::string& fam, const std::string& type, double max_rel_l2, float lead,
                                  double min_clear_fraction) {
    const std::string dir = std::string(ZINC_FIXTURES_DIR) + "/" + fam + "/";
    const FixtureMeta fx = load_fixture_meta(dir + "meta.json");
    const std::string ref = dir + "logits_llama_" + type + ".npy";
    const auto s = compare_to_npy(run_logits(fixture_gguf(fam, type), fx.prompt, fx.prompt.size()), ref);
    std::printf("%s %s vs llama.cpp: %s\n", fam.c_str(), type.c_str(), s.summary().c_str());
    EXPECT_LE(s.rel_l2, max_rel_l2) << s.summary();
    const auto clear = clear_positions(ref, lead);
    EXPECT_GE(clear.size(), static_cast<size_t>(double(fx.prompt.size()) * min_clear_fraction));
    for (size_t i : clear) EXPECT_EQ(s.pos[i].argmax_a, s.pos[i].argmax_b) << "position " << i;
}

}  // namespace zinc::test
