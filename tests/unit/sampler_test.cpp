#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "engine/sampler.h"

using zinc::engine::Sampler;
using zinc::engine::SamplerParams;

TEST(Sampler, GreedyTakesTheFirstMaximum) {
    Sampler s(SamplerParams{});
    std::vector<float> l{0.1f, 3.0f, -1.0f, 3.0f};
    EXPECT_EQ(s.sample(l), 1);
}

TEST(Sampler, SameSeedSameTokens) {
    SamplerParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 42;
    std::vector<float> base(100);
    for (int i = 0; i < 100; ++i) base[i] = float(i % 7) * 0.3f;
    auto draw = [&](uint64_t seed) {
        p.seed = seed;
        Sampler s(p);
        std::vector<int32_t> out;
        for (int i = 0; i < 50; ++i) {
            auto l = base;
            out.push_back(s.sample(l));
        }
        return out;
    };
    EXPECT_EQ(draw(42), draw(42));
    EXPECT_NE(draw(42), draw(43));
}

TEST(Sampler, TopKOneIsGreedy) {
    SamplerParams p;
    p.temperature = 5.0f;
    p.top_k = 1;
    Sampler s(p);
    for (int i = 0; i < 20; ++i) {
        std::vector<float> l{0.0f, 0.5f, 2.0f, 1.9f};
        EXPECT_EQ(s.sample(l), 2);
    }
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
    SamplerParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.5f;  // keeps tokens at least half as likely as the best
    Sampler s(p);
    for (int i = 0; i < 200; ++i) {
        std::vector<float> l{0.0f, 10.0f, 9.9f, 5.0f};
        const int32_t t = s.sample(l);
        EXPECT_TRUE(t == 1 || t == 2) << t;
    }
}

TEST(Sampler, RepeatPenaltyChangesTheGreedyChoice) {
    SamplerParams p;
    p.repeat_penalty = 2.0f;
    Sampler s(p);
    s.accept(0);
    std::vector<float> l{3.0f, 2.0f};  // token 0 becomes 1.5 after the penalty
    EXPECT_EQ(s.sample(l), 1);
}

TEST(Sampler, FrequencyAndPresencePenalties) {
    SamplerParams p;
    p.frequency_penalty = 1.0f;
    p.presence_penalty = 0.5f;
    Sampler s(p);
    s.accept(0);
    s.accept(0);
    std::vector<float> l{3.0f, 1.0f};
    s.sample(l);
    EXPECT_FLOAT_EQ(l[0], 3.0f - 2.0f - 0.5f);
    EXPECT_FLOAT_EQ(l[1], 1.0f);
}

// Sampling from the backend's top-k candidates draws exactly what sampling from the whole row draws.
TEST(Sampler, CandidatesFromTheBackendDrawTheSameTokens) {
    SamplerParams p;
    p.temperature = 0.9f;
    p.top_k = 40;
    p.top_p = 0.9f;
    p.min_p = 0.02f;
    p.seed = 7;
    Sampler whole(p), cands(p);
    ASSERT_EQ(cands.candidates_needed(), 40);
    auto be = zinc::backend::make_cpu_backend(1);
    zinc::backend::Act row = be->alloc(2, 1000);
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    for (int step = 0; step < 200; ++step) {
        std::vector<float> l(2000);
        for (auto& v : l) v = std::round(nd(rng) * 4.0f) / 4.0f;  // many exact ties
        be->upload(row, l);
        std::vector<int32_t> ids(40);
        std::vector<float> vals(40);
        be->top_k_last_row(row, 40, ids, vals);
        std::vector<float> last(l.begin() + 1000, l.end());
        ASSERT_EQ(cands.sample_candidates(ids, vals), whole.sample(last)) << "step " << step;
    }
}

// A row holding a NaN or an infinity has no argmax (-1) and its top k begins with +inf: what the session looks at
// to stop a generation whose numbers have gone wrong.
TEST(Sampler, RowsThatAreNotFiniteAreMarked) {
    auto be = zinc::backend::make_cpu_backend(1);
    zinc::backend::Act rows = be->alloc(2, 100);
    std::vector<float> l(200);
    for (size_t i = 0; i < l.size(); ++i) l[i] = float(i % 100) * 0.5f;
    l[100 + 17] = NAN;
    be->upload(rows, l);
    std::vector<int32_t> best(2);
    be->argmax_rows(rows, best);
    EXPECT_EQ(best[0], 99);
    EXPECT_EQ(best[1], -1);
    std::vector<int32_t> ids(5);
    std::vector<float> vals(5);
    be->top_k_last_row(rows, 5, ids, vals);
    EXPECT_EQ(ids[0], 17);
    EXPECT_EQ(vals[0], INFINITY);
    EXPECT_EQ(ids[1], 99);
}

TEST(Sampler, CandidatesNeededOnlyWithoutPenalties) {
    SamplerParams p;
    EXPECT_EQ(Sampler(p).candidates_needed(), 0);  // greedy
    p.temperature = 0.7f;
    p.top_k = 0;
    EXPECT_EQ(Sampler(p).candidates_needed(), 0);  // the whole row matters
    p.top_k = 20;
    EXPECT_EQ(Sampler(p).candidates_needed(), 20);
    p.repeat_penalty = 1.1f;
    EXPECT_EQ(Sampler(p).candidates_needed(), 0);  // penalties change logits outside the top k
}

// Banned tokens (ignore_eos's end-of-generation tokens) are never chosen, greedy or sampled, and the candidates the
// backend selects (top_k, or 1, plus one for each banned token) draw exactly what the whole row draws.
TEST(Sampler, BannedTokensAreNeverChosen) {
    auto be = zinc::backend::make_cpu_backend(1);
    zinc::backend::Act row = be->alloc(1, 500);
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    for (float temperature : {0.0f, 0.9f}) {
        SamplerParams p;
        p.temperature = temperature;
        p.top_k = 20;
        p.seed = 11;
        ASSERT_EQ(Sampler(p).greedy(), temperature == 0.0f);
        for (int step = 0; step < 200; ++step) {
            std::vector<float> l(500);
            for (auto& v : l) v = std::round(nd(rng) * 4.0f) / 4.0f;  // many exact ties
            // The three largest logits' tokens banned: the choice must come from the others.
            std::vector<int32_t> order(l.size());
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
            SamplerParams q = p;
            q.banned = {order[0], order[2], order[1]};
            Sampler w(q), c(q);
            EXPECT_FALSE(w.greedy());
            const int k = c.candidates_needed();
            ASSERT_EQ(k, (temperature == 0.0f ? 1 : 20) + 3);
            be->upload(row, l);
            std::vector<int32_t> ids(static_cast<size_t>(k));
            std::vector<float> vals(static_cast<size_t>(k));
            be->top_k_last_row(row, k, ids, vals);
            std::vector<float> copy = l;
            const int32_t got = w.sample(copy);
            EXPECT_EQ(c.sample_candidates(ids, vals), got) << "step " << step;
            EXPECT_NE(got, order[0]);
            EXPECT_NE(got, order[1]);
            EXPECT_NE(got, order[2]);
            if (temperature == 0.0f) {
                EXPECT_EQ(got, order[3]) << "step " << step;
            }
        }
    }
}

// A logit bias is added before anything else: it can make any token the greedy choice; the sampler then reads the
// whole row (no candidates from the backend).
TEST(Sampler, BiasIsAddedToTheLogits) {
    SamplerParams p;
    p.bias = {{3, 5.0f}};
    Sampler s(p);
    EXPECT_FALSE(s.greedy());
    EXPECT_EQ(s.candidates_needed(), 0);
    std::vector<float> l = {1.0f, 4.0f, 2.0f, 0.0f};
    EXPECT_EQ(s.sample(l), 3);  // 0 + 5 beats 4
    p.bias = {{3, 3.0f}};
    std::vector<float> m = {1.0f, 4.0f, 2.0f, 0.0f};
    EXPECT_EQ(Sampler(p).sample(m), 1);
    p.temperature = 0.8f;
    EXPECT_EQ(Sampler(p).candidates_needed(), 0);
}
