// Many sequences in one forward step: every row's logits are those of its sequence alone, in every family, with
// prompt chunks and decode rows mixed, sequences of different lengths, and sequences leaving and joining between
// steps (tests/common/batch_check.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "batch_check.h"
#include "fixture_model.h"

namespace {

using namespace zinc::test;

class Batched : public ::testing::TestWithParam<const char*> {};

TEST_P(Batched, EachSequenceAsAlone) {
    const std::string fam = GetParam();
    const LogitsStats s = batched_against_alone(fixture_gguf(fam, "f32"), false);
    std::printf("%s batched vs alone: %s\n", fam.c_str(), s.summary().c_str());
    EXPECT_LE(s.max_rel_l2, 1e-5) << s.summary();
    EXPECT_TRUE(s.all_argmax_agree()) << s.summary();
}

// The quantized files: the CPU's products give every row the same values whatever the rows beside it, so a batch
// keeps each sequence's logits exactly. The hybrid families run the delta rule a token at a time in the batch's
// short steps and in chunks alone (f32: 8.7e-6 apart); the activations' rounding to the weights' bf16 or 8-bit
// blocks can turn that into one unit of their last place (qwen35 bf16: 7.3e-3).
TEST_P(Batched, QuantizedEachSequenceAsAlone) {
    const std::string fam = GetParam();
    const double tolerance = fam.rfind("qwen35", 0) == 0 ? 2e-2 : 1e-5;
    for (const char* type : {"q8_0", "bf16"}) {
        const LogitsStats s = batched_against_alone(fixture_gguf(fam, type), false);
        std::printf("%s %s batched vs alone: %s\n", fam.c_str(), type, s.summary().c_str());
        EXPECT_LE(s.max_rel_l2, tolerance) << type << ": " << s.summary();
        EXPECT_TRUE(s.all_argmax_agree()) << type << ": " << s.summary();
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Batched,
                         ::testing::Values("qwen3", "qwen35", "qwen35moe", "gemma4", "gemma4moe", "gpt-oss"),
                         [](const auto& info) {
                             std::string s = info.param;
                             for (char& c : s)
                                 if (c == '-') c = '_';
                             return s;
                         });

// The trained model: the greedy tokens of prompts decoded together are those of each alone, in full precision and
// quantized (where a wrong token would show a row read with another row's state or weights).
TEST(BatchedBrown, GreedyTokensEqualEachAlone) {
    for (const char* type : {"BF16", "Q4_K_M"}) {
        const GreedyRuns r = brown_greedy_batched_and_alone(type, false, 64);
        ASSERT_NE(r.alone[0], r.alone[1]) << "different prompts, different text";
        for (size_t p = 0; p < r.alone.size(); ++p) {
            ASSERT_EQ(r.alone[p].size(), 64u);
            EXPECT_EQ(r.batched[p], r.alone[p]) << type << ", prompt " << p;
        }
    }
}

}  // namespace
