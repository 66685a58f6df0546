// Embeddings from the engine (engine/embed.h) on the Qwen3 fixture: the hidden states a step of Batch::hidden gives are
// those the head multiplies (times the tied LM head they are the engine's logits), mean pooling is the average of the
// token states, and inputs run together on several sequences, in chunks, give the embeddings each gives alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/embed.h"
#include "engine/family.h"
#include "fixture_model.h"
#include "gguf/split.h"

namespace {

using namespace zinc;
using engine::Pooling;

struct Opened {
    gguf::Model model;
    std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(2);
    std::unique_ptr<engine::Family> family;
    explicit Opened(int n_seq = 1, int n_ubatch = engine::kDefaultUbatch) : model(test::fixture_gguf("qwen3", "f32")) {
        engine::ContextSize size = test::f32_cache(128, n_ubatch);
        size.n_seq = n_seq;
        family = engine::make_family(model, *be, size);
    }
};

std::vector<int32_t> prompt_ids(size_t n) {
    const test::FixtureMeta meta = test::load_fixture_meta(std::string(ZINC_FIXTURES_DIR) + "/qwen3/meta.json");
    EXPECT_GE(meta.prompt.size(), n);
    return {meta.prompt.begin(), meta.prompt.begin() + std::ptrdiff_t(std::min(n, meta.prompt.size()))};
}

std::vector<std::vector<float>> embed(Opened& m, Pooling p, const std::vector<std::vector<int32_t>>& inputs,
                                      std::vector<int> seqs, int budget = 0) {
    engine::Embedder e(*m.family, *m.be, p, std::move(seqs), budget);
    for (const auto& ids : inputs) e.add(ids);
    e.run();
    std::vector<std::vector<float>> out;
    for (size_t i = 0; i < e.size(); ++i) out.push_back(e.result(i));
    return out;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    double d = 0, n = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        n += double(b[i]) * b[i];
    }
    return std::sqrt(d / n);
}

// The last token's pooled state times the LM head (the fixture ties it to token_embd) is the logits the engine
// gives for that position, computed here independently in double; the family, after the step of hidden states,
// computes logits as before.
TEST(Embedding, LastTokenStateTimesHeadIsLogits) {
    Opened m;
    const std::vector<int32_t> ids = prompt_ids(24);
    const std::vector<float> h = embed(m, Pooling::last, {ids}, {0})[0];
    ASSERT_EQ(int64_t(h.size()), m.family->n_embd());

    const gguf::ModelTensor* t = m.model.find_tensor("token_embd.weight");
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->info->type, gguf::TensorType::F32);
    ASSERT_EQ(t->info->ne[0], m.family->n_embd());
    ASSERT_EQ(t->info->ne[1], m.family->n_vocab());
    ASSERT_EQ(m.model.find_tensor("output.weight"), nullptr) << "the test multiplies by the tied head";
    std::vector<float> ours(size_t(m.family->n_vocab()));
    for (size_t v = 0; v < ours.size(); ++v) {
        double dot = 0;
        for (size_t c = 0; c < h.size(); ++c) {
            float w;
            std::memcpy(&w, t->info->data + (v * h.size() + c) * sizeof(float), sizeof w);
            dot += double(w) * h[c];
        }
        ours[v] = float(dot);
    }
    std::vector<float> logits;
    m.family->forward(ids, 0, false, logits);
    const double d = rel_l2(ours, logits);
    std::printf("last-token state times the head vs the engine's logits: rel L2 %.3g\n", d);
    EXPECT_LE(d, 1e-4);
}

// Mean pooling is the average of the per-token states (Pooling::none), cls the first of them and last the last.
TEST(Embedding, PoolingsOfTheTokenStates) {
    Opened m;
    const std::vector<int32_t> ids = prompt_ids(17);
    const std::vector<float> rows = embed(m, Pooling::none, {ids}, {0})[0];
    const size_t w = size_t(m.family->n_embd());
    ASSERT_EQ(rows.size(), ids.size() * w);
    std::vector<float> avg(w);
    for (size_t c = 0; c < w; ++c) {
        double s = 0;
        for (size_t t = 0; t < ids.size(); ++t) s += rows[t * w + c];
        avg[c] = float(s / double(ids.size()));
    }
    EXPECT_LE(rel_l2(embed(m, Pooling::mean, {ids}, {0})[0], avg), 1e-6);
    const std::vector<float> first(rows.begin(), rows.begin() + std::ptrdiff_t(w));
    const std::vector<float> last(rows.end() - std::ptrdiff_t(w), rows.end());
    EXPECT_EQ(embed(m, Pooling::cls, {ids}, {0})[0], first);
    EXPECT_EQ(embed(m, Pooling::last, {ids}, {0})[0], last);
}

// Five inputs of different lengths on three sequences, 7 rows a step (inputs read in chunks, several in a step, and
// sequences given back and taken again), against each input alone in one micro-batch, for every pooling.
TEST(Embedding, TogetherAsAlone) {
    const std::vector<int32_t> all = prompt_ids(40);
    std::vector<std::vector<int32_t>> inputs;
    for (size_t n : {5, 19, 1, 40, 12}) inputs.emplace_back(all.begin() + std::ptrdiff_t(40 - n), all.end());
    Opened together(3, 16), alone;
    for (Pooling p : {Pooling::none, Pooling::mean, Pooling::cls, Pooling::last}) {
        const auto got = embed(together, p, inputs, {2, 0, 1}, 7);
        ASSERT_EQ(got.size(), inputs.size());
        double worst = 0;
        for (size_t i = 0; i < inputs.size(); ++i) {
            const std::vector<float> ref = embed(alone, p, {inputs[i]}, {0})[0];
            const double d = rel_l2(got[i], ref);
            worst = std::max(worst, d);
            EXPECT_LE(d, 1e-5) << engine::pooling_name(p) << ", input " << i;
        }
        std::printf("%s pooling, together vs alone: worst rel L2 %.3g\n", engine::pooling_name(p), worst);
    }
}

TEST(Embedding, InputsItRefuses) {
    Opened m;
    engine::Embedder e(*m.family, *m.be, Pooling::last, {0});
    EXPECT_THROW(e.add({}), std::invalid_argument);
    EXPECT_THROW(e.add(std::vector<int32_t>(129, 1)), std::length_error);
    EXPECT_FALSE(e.step());
    EXPECT_TRUE(e.done());
    EXPECT_THROW(engine::Embedder(*m.family, *m.be, Pooling::last, {1}), std::invalid_argument);
}

TEST(Embedding, PoolingOfTheFile) {
    EXPECT_EQ(engine::file_pooling(gguf::Model(test::fixture_gguf("qwen3", "f32"))), Pooling::none);
    for (Pooling p : {Pooling::none, Pooling::mean, Pooling::cls, Pooling::last})
        EXPECT_EQ(engine::parse_pooling(engine::pooling_name(p)), p);
    EXPECT_FALSE(engine::parse_pooling("rank"));
    std::vector<float> v{3, 4};
    engine::normalize(v);
    EXPECT_FLOAT_EQ(v[0], 0.6f);
    EXPECT_FLOAT_EQ(v[1], 0.8f);
}

}  // namespace
