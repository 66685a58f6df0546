// A prompt runs in micro-batches of at most n_ubatch tokens, so activation memory does not grow with the prompt;
// the logits must be those of the whole prompt in one batch, in every family.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/family.h"
#include "fixture_model.h"
#include "gguf/split.h"

namespace {

using namespace zinc::test;

class MicroBatch : public ::testing::TestWithParam<std::string> {};

TEST_P(MicroBatch, EqualsWholePromptPrefill) {
    const std::string fam = GetParam();
    const FixtureMeta fx = load_fixture_meta(std::string(ZINC_FIXTURES_DIR) + "/" + fam + "/meta.json");
    const std::string gguf = fixture_gguf(fam, "f32");
    const size_t n = fx.prompt.size();
    const std::vector<float> whole = run_logits(gguf, fx.prompt, n);
    // One forward call of the whole prompt, run as micro-batches of 7 tokens (the last one shorter).
    const std::vector<float> micro = run_logits(gguf, fx.prompt, n, false, 7);
    ASSERT_EQ(micro.size(), whole.size());
    const auto s = compare_logits(micro, whole, whole.size() / n);
    std::printf("%s micro-batches of 7 vs one batch: %s\n", fam.c_str(), s.summary().c_str());
    EXPECT_LE(s.max_rel_l2, 1e-4) << s.summary();
    EXPECT_TRUE(s.all_argmax_agree()) << s.summary();

    // Generation's path: only the last token's logits leave the last micro-batch, the others skip the head.
    zinc::gguf::Model model(gguf);
    auto be = zinc::backend::make_cpu_backend(0);
    auto f = zinc::engine::make_family(model, *be, zinc::test::f32_cache(static_cast<int>(n), 7));
    std::vector<float> last;
    f->forward(fx.prompt, 0, false, last);
    const auto sl = compare_logits(last.data(), whole.data() + whole.size() - last.size(), 1, last.size());
    EXPECT_LE(sl.max_rel_l2, 1e-4) << sl.summary();
    EXPECT_EQ(f->forward_argmax(fx.prompt, 0), s.pos.back().argmax_b);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MicroBatch, ::testing::ValuesIn(kFixtureFamilies),
                         [](const auto& info) { return test_name(info.param); });

}  // namespace
