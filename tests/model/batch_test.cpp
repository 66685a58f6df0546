// Many sequences in one forward step: every row's logits are those of its sequence alone, in every family, with
// prompt chunks and decode rows mixed, sequences of different lengths, and sequences leaving and joining between
// steps (tests/common/batch_check.h); sequences forked from one prompt, sharing its pages; a paged cache's pool too
// small for its sequences.
#include <gtest/gtest.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "batch_check.h"
#include "engine/family.h"
#include "engine/memory_plan.h"
#include "fixture_model.h"
#include "gguf/split.h"

namespace {

using namespace zinc::test;

class Batched : public ::testing::TestWithParam<std::string> {};

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

// Forks: sequence 0's prompt is shared by sequence 1 (at its end) and sequence 2 (a rewind into it, where the family
// can), in the same pages until each writes into a shared one; then each continues with its own tokens, and every
// row's logits are those of its whole token list alone. Recurrent state and rings are copied.
TEST_P(Batched, ForkedSequencesAsAlone) {
    expect_forks_as_alone(GetParam(), false, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Batched, ::testing::ValuesIn(kFixtureFamilies),
                         [](const auto& info) { return test_name(info.param); });

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

// A paged cache too small for the sequences: the step that needs a page none has is refused with the numbers, before
// it changes anything; a released sequence gives its pages back at once, and the others go on as if alone.
// A context that is not a whole number of pages: the pool's last page holds positions past it, and the micro-batch
// stays within the context, so the model opens (its memory plan runs a full micro-batch) and a prompt fills it. The
// pool holds the whole contexts of every sequence, or of kv_seqs of them.
TEST(PagedCache, ContextOfPartPages) {
    const zinc::gguf::Model model(fixture_gguf("qwen3", "f32"));
    auto be = zinc::backend::make_cpu_backend(1);
    const auto f32 = zinc::backend::KvType::f32;
    for (int n_seq : {1, 2}) {
        const zinc::engine::ContextSize asked{10, 512, f32, f32, n_seq, 4};  // pages of 4: 3 a sequence
        const zinc::engine::ContextSize s = zinc::engine::settle_context(model, asked);
        EXPECT_EQ(s.kv_size, 12 * n_seq);
        EXPECT_EQ(s.n_ubatch, 10 * n_seq);
        EXPECT_NO_THROW(zinc::engine::plan_memory(model, asked, false));
        auto fam = zinc::engine::make_family(model, *be, asked);
        const std::vector<int32_t> prompt(10, 1);
        EXPECT_NO_THROW(fam->run(prompt, 0));
    }
    // A pool for the whole contexts of 2 of 5 sequences (kv_seqs: the server's running ones, where the others keep
    // states in the pages left).
    zinc::engine::ContextSize some{10, 512, f32, f32, 5, 4};
    some.kv_seqs = 2;
    EXPECT_EQ(zinc::engine::settle_context(model, some).kv_size, 24);
}

TEST(PagedCache, FullPoolIsAClearErrorAndReleaseGivesPagesBack) {
    const std::string file = fixture_gguf("qwen3", "f32");
    const zinc::gguf::Model model(file);
    auto be = zinc::backend::make_cpu_backend(1);
    const auto f32 = zinc::backend::KvType::f32;
    auto fam = zinc::engine::make_family(model, *be, {32, 32, f32, f32, 3, 4, 24});  // 6 pages of 4
    ASSERT_NE(fam->pages(), nullptr);
    ASSERT_EQ(fam->pages()->n_pages(), 6);
    const std::vector<int32_t> prompt = load_fixture_meta(std::string(ZINC_FIXTURES_DIR) + "/qwen3/meta.json").prompt;
    ASSERT_GE(prompt.size(), 14u);
    const auto logits_of = [&](const zinc::engine::Batch& b) {
        const zinc::backend::Act lo = fam->step(b);
        std::vector<float> host(size_t(lo.size()));
        be->download(lo, host);
        return host;
    };
    zinc::engine::Batch two;
    for (int s = 0; s < 2; ++s)
        for (int p = 0; p < 10; ++p) two.add(prompt[size_t(p + s)], s, p, p == 9);
    logits_of(two);
    EXPECT_EQ(fam->pages()->free_pages(), 0);

    zinc::engine::Batch third;
    third.add(prompt[0], 2, 0, true);
    try {
        fam->step(third);
        ADD_FAILURE() << "a step with no page left ran";
    } catch (const zinc::engine::PoolFull& e) {
        EXPECT_EQ(std::string(e.what()), "the KV cache is full: sequence 2 needs 1 positions and holds 0; 0 of the "
                                         "cache's 24 positions are free (--kv-size sets its size)");
    }
    fam->release(0);
    EXPECT_EQ(fam->pages()->free_pages(), 3);
    // Sequence 2 starts in a page sequence 0 gave back, sequence 1 takes one more for its positions 10 to 12.
    zinc::engine::Batch next;
    next.add(prompt[0], 2, 0, true);
    for (int p = 10; p < 13; ++p) next.add(prompt[size_t(p + 1)], 1, p, p == 12);
    const std::vector<float> got = logits_of(next);
    EXPECT_EQ(fam->pages()->free_pages(), 1);

    auto alone = zinc::engine::make_family(model, *be, {32, 32, f32, f32, 1});
    std::vector<float> want2, want1;
    alone->forward(std::vector<int32_t>{prompt[0]}, 0, false, want2);
    std::vector<int32_t> seq1(prompt.begin() + 1, prompt.begin() + 14);
    auto alone1 = zinc::engine::make_family(model, *be, {32, 32, f32, f32, 1});
    alone1->forward(seq1, 0, false, want1);
    const size_t vocab = want2.size();
    EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + std::ptrdiff_t(vocab)), want2);
    EXPECT_EQ(std::vector<float>(got.begin() + std::ptrdiff_t(vocab), got.end()), want1);

    // A fork past the end of its source, or of a sequence into itself, is refused; one that fits shares pages.
    EXPECT_THROW(fam->fork(1, 0, 14), std::invalid_argument);
    EXPECT_THROW(fam->fork(1, 1, 4), std::invalid_argument);
    fam->fork(1, 0, 13);
    EXPECT_EQ(fam->pages()->free_pages(), 1);
    // A family whose caches are one piece per sequence has no pages to share, and refuses forks.
    auto whole = zinc::engine::make_family(model, *be, {32, 32, f32, f32, 2});
    EXPECT_EQ(whole->pages(), nullptr);
    EXPECT_THROW(whole->fork(0, 1, 0), std::invalid_argument);
}

}  // namespace
