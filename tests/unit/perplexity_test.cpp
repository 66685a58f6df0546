// engine/perplexity.h and engine/kl_base.h: the perplexity against the mean negative log-likelihood computed here
// from every position's logits with the same chunking rule, the standard error on a hand-made case, the top-K base's
// round trip and what its reader refuses (the full form: kl_base_full_test.cpp), the KL divergence of a quantized
// model against the lumped KL computed here, and `zinc perplexity` through the built binary.
#include "engine/perplexity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/open_model.h"
#include "error_of.h"
#include "gguf_test_util.h"
#include "zinc_binary.h"

namespace {

using zinc::test::error_of;

namespace engine = zinc::engine;
using zinc::test::TempDir;

const std::string kF32 = ZINC_FIXTURES_DIR "/qwen3/qwen3-f32.gguf";     // no BOS, 2112 tokens
const std::string kQ8 = ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf";
const std::string kGemma4 = ZINC_FIXTURES_DIR "/gemma4/gemma4-q8_0.gguf";  // adds BOS
const std::string kText = ZINC_TEST_DATA_DIR "/perplexity/text.txt";
constexpr int kCtx = 128;

engine::OpenedModel open(const std::string& path, int n_ctx = kCtx, int n_ubatch = 48) {
    engine::OpenOptions o;
    o.path = path;
    o.backend.backend = "cpu";
    o.backend.threads = 2;
    o.context = {n_ctx, n_ubatch};
    o.all_logits = true;
    return engine::open_model(o);
}

std::vector<int32_t> text_tokens(const engine::OpenedModel& m) {
    return engine::perplexity_tokens(m.session->tokenizer(), zinc::test::read_text(kText));
}

// ln p of every token of a row, in long double.
std::vector<long double> log_probs(std::span<const float> row) {
    const long double mx = *std::max_element(row.begin(), row.end());
    long double sum = 0;
    for (float l : row) sum += std::exp(static_cast<long double>(l) - mx);
    std::vector<long double> lp(row.size());
    for (size_t i = 0; i < row.size(); ++i) lp[i] = static_cast<long double>(row[i]) - mx - std::log(sum);
    return lp;
}

// The token ids, the most probable first (equal ones: the lower id first).
std::vector<int32_t> ranked(const std::vector<long double>& lp) {
    std::vector<int32_t> order(lp.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return lp[size_t(a)] > lp[size_t(b)]; });
    return order;
}

// The logits of every position of chunk c (its first token replaced by bos when bos >= 0), in one forward call.
std::vector<float> chunk_logits(engine::Family& f, std::span<const int32_t> tokens, int c, int32_t bos) {
    std::vector<int32_t> ids(tokens.begin() + c * kCtx, tokens.begin() + (c + 1) * kCtx);
    if (bos >= 0) ids[0] = bos;
    std::vector<float> logits;
    f.forward(ids, 0, true, logits);
    return logits;
}

// exp(mean NLL) over the second half of each chunk: the logits after token j predict token j + 1, j = n/2 ... n-2.
double reference_ppl(engine::Family& f, std::span<const int32_t> tokens, int n_chunk, int32_t bos, int64_t* count) {
    const size_t n_vocab = static_cast<size_t>(f.n_vocab());
    long double nll = 0;
    *count = 0;
    for (int c = 0; c < n_chunk; ++c) {
        const std::vector<float> logits = chunk_logits(f, tokens, c, bos);
        for (int j = kCtx / 2; j <= kCtx - 2; ++j) {
            const auto lp = log_probs(std::span<const float>(logits).subspan(size_t(j) * n_vocab, n_vocab));
            nll -= lp[size_t(tokens[size_t(c * kCtx + j + 1)])];
            ++*count;
        }
    }
    return static_cast<double>(std::exp(nll / *count));
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The perplexity of an opened model on the text in chunks of kCtx, at most max_chunks of them (0: all), writing a
// base of top_k tokens per position to `base` when given.
engine::PerplexityResult measure(engine::OpenedModel& m, int max_chunks, const std::string& base = "",
                                 int top_k = engine::kKlBaseTopK) {
    engine::PerplexityOptions o;
    o.n_ctx = kCtx;
    o.max_chunks = max_chunks;
    o.save_base = base;
    o.top_k = top_k;
    return engine::perplexity(m.session->family(), engine::vocabulary_of(*m.session), text_tokens(m), o);
}

TEST(Perplexity, IsExpOfTheMeanNllOfTheSecondHalves) {
    auto m = open(kF32);
    engine::Family& f = m.session->family();
    const std::vector<int32_t> tokens = text_tokens(m);
    ASSERT_GE(tokens.size(), 4u * kCtx);
    const engine::Vocabulary v = engine::vocabulary_of(*m.session);
    EXPECT_EQ(v.bos, -1);
    EXPECT_EQ(v.n_vocab, f.n_vocab());

    std::vector<double> running;
    engine::PerplexityOptions o;
    o.n_ctx = kCtx;
    o.on_chunk = [&](int chunk, int n_chunk, const engine::NllSums& nll, double seconds) {
        EXPECT_EQ(chunk, static_cast<int>(running.size()));
        EXPECT_EQ(n_chunk, static_cast<int>(tokens.size() / kCtx));
        EXPECT_EQ(nll.count, (chunk + 1) * (kCtx - 1 - kCtx / 2));
        EXPECT_GE(seconds, 0);
        running.push_back(nll.ppl());
    };
    const engine::PerplexityResult r = engine::perplexity(f, v, tokens, o);
    EXPECT_EQ(r.n_chunk, static_cast<int>(tokens.size() / kCtx));
    EXPECT_EQ(r.n_ctx, kCtx);
    EXPECT_EQ(r.nll.count, r.n_chunk * 63);
    EXPECT_EQ(r.tokens_evaluated(), r.n_chunk * kCtx);
    EXPECT_GT(r.tokens_per_second(), 0);
    ASSERT_EQ(running.size(), static_cast<size_t>(r.n_chunk));
    EXPECT_EQ(running.back(), r.nll.ppl());

    int64_t count = 0;
    const double want = reference_ppl(f, tokens, r.n_chunk, -1, &count);
    EXPECT_EQ(count, r.nll.count);
    EXPECT_NEAR(r.nll.ppl() / want, 1.0, 1e-6) << r.nll.ppl() << " vs " << want;
    EXPECT_TRUE(std::isfinite(r.nll.ppl_error()));
    EXPECT_GT(r.nll.ppl_error(), 0);

    // The running estimate after two chunks is the estimate of a run capped at two.
    o.max_chunks = 2;
    o.on_chunk = nullptr;
    const engine::PerplexityResult two = engine::perplexity(f, v, tokens, o);
    EXPECT_EQ(two.n_chunk, 2);
    EXPECT_EQ(two.nll.ppl(), running[1]);
    // More threads for the log-probabilities change nothing: positions are summed in order.
    o.threads = 3;
    EXPECT_EQ(engine::perplexity(f, v, tokens, o).nll.sum, two.nll.sum);
}

// A vocabulary that adds BOS: every chunk starts with it, as in llama-perplexity.
TEST(Perplexity, ChunksStartWithBosWhenTheVocabularyAddsIt) {
    auto m = open(kGemma4);
    engine::Family& f = m.session->family();
    const std::vector<int32_t> tokens = text_tokens(m);
    const engine::Vocabulary v = engine::vocabulary_of(*m.session);
    ASSERT_GE(v.bos, 0);
    EXPECT_EQ(tokens.front(), v.bos);
    ASSERT_GE(tokens.size(), 3u * kCtx);
    ASSERT_NE(tokens[kCtx], v.bos);
    engine::PerplexityOptions o;
    o.n_ctx = kCtx;
    o.max_chunks = 3;
    const engine::PerplexityResult r = engine::perplexity(f, v, tokens, o);
    int64_t count = 0;
    EXPECT_NEAR(r.nll.ppl() / reference_ppl(f, tokens, 3, v.bos, &count), 1.0, 1e-6);
    // Without the replacement the later chunks score differently: the rule is visible in the result.
    EXPECT_GT(std::fabs(r.nll.ppl() / reference_ppl(f, tokens, 3, -1, &count) - 1.0), 1e-4);
}

TEST(Perplexity, StandardErrorAsLlamaPerplexity) {
    engine::NllSums s;
    for (double x : {1.0, 2.0, 3.0, 4.0}) s.add(x);
    // mean 2.5, mean of squares 7.5: variance 1.25, over n - 1 = 3; PPL e^2.5.
    EXPECT_DOUBLE_EQ(s.ppl(), 12.182493960703473);
    EXPECT_NEAR(s.ppl_error(), 12.182493960703473 * std::sqrt(1.25 / 3.0), 1e-12);
    engine::NllSums one;
    one.add(2.0);
    EXPECT_TRUE(std::isnan(one.ppl_error()));
    engine::NllSums flat;
    for (int i = 0; i < 5; ++i) flat.add(0.5);
    EXPECT_TRUE(std::isnan(flat.ppl_error())) << "no variance, no error";

    EXPECT_EQ(engine::chunk_count(1013, 128, 0), 7);
    EXPECT_EQ(engine::chunk_count(1013, 128, 3), 3);
    EXPECT_EQ(engine::chunk_count(1013, 128, 100), 7);
    EXPECT_EQ(engine::chunk_count(256, 128, 0), 2);

    EXPECT_EQ(engine::percentile(std::vector<float>{1, 2, 3, 4, 5}, 0.5f), 3.0f);
    EXPECT_FLOAT_EQ(engine::percentile(std::vector<float>{0, 10}, 0.25f), 2.5f);
    EXPECT_EQ(engine::percentile(std::vector<float>{1, 2}, 1.0f), 2.0f);
    EXPECT_EQ(engine::median(std::vector<float>{1, 2, 3, 10}), 2.5f);
    EXPECT_EQ(engine::median(std::vector<float>{1, 2, 10}), 2.0f);
}

TEST(Perplexity, RefusesTooShortTextsAndContexts) {
    auto m = open(kF32);
    engine::Family& f = m.session->family();
    const engine::Vocabulary v = engine::vocabulary_of(*m.session);
    const std::vector<int32_t> tokens = text_tokens(m);
    engine::PerplexityOptions o;
    o.n_ctx = kCtx;
    const std::string msg = error_of([&] { engine::perplexity(f, v, std::span(tokens).first(255), o); });
    EXPECT_TRUE(has(msg, "need at least 256 tokens to measure perplexity with a context of 128; the text has only 255"))
        << msg;
    o.n_ctx = 2;
    EXPECT_TRUE(has(error_of([&] { engine::perplexity(f, v, tokens, o); }), "at least 3")) << "n_ctx 2";
    o.n_ctx = kCtx + 1;
    EXPECT_TRUE(has(error_of([&] { engine::perplexity(f, v, tokens, o); }), "do not fit in the model's context"));
    o.n_ctx = kCtx;
    std::vector<int32_t> bad = tokens;
    bad[300] = f.n_vocab();
    EXPECT_TRUE(has(error_of([&] { engine::perplexity(f, v, bad, o); }), "token 300 is 2112, outside"));
}

// The tokens, top-K and remaining mass written by perplexity() and read back.
TEST(KlBase, RoundTripAndSelfComparison) {
    TempDir dir;
    const std::string path = dir.file("f32.kld");
    auto m = open(kF32);
    engine::Family& f = m.session->family();
    const engine::Vocabulary v = engine::vocabulary_of(*m.session);
    const std::vector<int32_t> tokens = text_tokens(m);
    const engine::PerplexityResult ppl = measure(m, 3, path);
    EXPECT_EQ(ppl.base_bytes, std::filesystem::file_size(path));

    engine::KlBaseReader base(path);
    const engine::KlBaseHeader& h = base.header();
    EXPECT_EQ(h.vocabulary.n_vocab, 2112);
    EXPECT_EQ(h.vocabulary.bos, -1);
    EXPECT_EQ(h.vocabulary.fingerprint, engine::vocabulary_fingerprint(m.session->tokenizer()));
    EXPECT_EQ(h.n_ctx, kCtx);
    EXPECT_EQ(h.n_chunk, 3);
    EXPECT_EQ(h.top_k, engine::kKlBaseTopK);
    EXPECT_EQ(std::filesystem::file_size(path), 40u + 3 * kCtx * 4 + 3 * 63 * (8 + 8 * 32));
    for (int c = 0; c < 3; ++c) {
        const auto t = base.chunk_tokens(c);
        EXPECT_TRUE(std::equal(t.begin(), t.end(), tokens.begin() + c * kCtx)) << c;
    }
    // The first chunk's records against its logits.
    engine::KlBaseChunk rec;
    base.read_chunk(rec);
    const std::vector<float> logits = chunk_logits(f, tokens, 0, -1);
    for (int j = 0; j < 63; ++j) {
        const auto lp = log_probs(std::span<const float>(logits).subspan(size_t(64 + j) * 2112, 2112));
        EXPECT_NEAR(rec.log_p_next[size_t(j)], double(lp[size_t(tokens[size_t(65 + j)])]), 1e-4) << j;
        const std::vector<int32_t> order = ranked(lp);
        long double top = 0;
        for (int i = 0; i < 32; ++i) {
            EXPECT_EQ(rec.ids[size_t(j * 32 + i)], order[size_t(i)]) << j << " " << i;
            EXPECT_NEAR(rec.log_p[size_t(j * 32 + i)], double(lp[size_t(order[size_t(i)])]), 1e-4);
            top += std::exp(lp[size_t(order[size_t(i)])]);
        }
        EXPECT_NEAR(std::exp(double(rec.log_rest[size_t(j)])), double(1 - top), 1e-6) << j;
    }

    // The model against its own base: nothing differs but float rounding.
    engine::KlBaseReader again(path);
    std::vector<int> chunks_seen;
    engine::KlOptions ko;
    ko.on_chunk = [&](int chunk, int n_chunk, const engine::KlSums& s, double) {
        chunks_seen.push_back(chunk);
        EXPECT_EQ(n_chunk, 3);
        EXPECT_EQ(s.count, (chunk + 1) * 63);
    };
    const engine::KlResult r = engine::kl_divergence(f, v, again, ko);
    EXPECT_EQ(chunks_seen, (std::vector<int>{0, 1, 2}));
    ASSERT_EQ(r.sums.count, 3 * 63);
    EXPECT_EQ(r.kld.size(), 189u);
    EXPECT_EQ(r.sums.n_same_top, r.sums.count);
    EXPECT_LT(std::fabs(r.kld.front()), 1e-6);
    EXPECT_LT(std::fabs(r.kld.back()), 1e-6);
    const engine::KlSummary s = engine::summarize(r.sums);
    EXPECT_NEAR(s.ppl.value / ppl.nll.ppl(), 1.0, 1e-9);
    EXPECT_NEAR(s.ppl_base.value / ppl.nll.ppl(), 1.0, 1e-6);
    EXPECT_NEAR(s.ln_ppl_ratio.value, 0.0, 1e-6);
    EXPECT_NEAR(s.ppl_ratio.value, 1.0, 1e-6);
    EXPECT_NEAR(s.ppl_diff.value / s.ppl.value, 0.0, 1e-6);
    EXPECT_NEAR(s.ln_ppl_cor, 1.0, 1e-6);
    EXPECT_EQ(s.same_top.value, 1.0);
    EXPECT_EQ(s.same_top.error, 0.0);
    EXPECT_LT(std::fabs(s.kld.value), 1e-7);
}

// Q8_0 against the F32 base: the library's KL equals the lumped KL computed here from both models' full logits,
// which is at most the full KL; with K = 2 most of it comes from the lumped rest.
TEST(KlBase, QuantizedModelDiffersFromTheBase) {
    TempDir dir;
    auto ref = open(kF32);
    auto q8 = open(kQ8);
    const std::vector<int32_t> tokens = text_tokens(ref);
    const engine::Vocabulary vq = engine::vocabulary_of(*q8.session);
    // The per-position log-probabilities of both models, here.
    std::vector<std::vector<long double>> lps, lqs;
    for (int c = 0; c < 2; ++c) {
        const std::vector<float> lp_logits = chunk_logits(ref.session->family(), tokens, c, -1);
        const std::vector<float> lq_logits = chunk_logits(q8.session->family(), tokens, c, -1);
        for (int j = kCtx / 2; j <= kCtx - 2; ++j) {
            lps.push_back(log_probs(std::span<const float>(lp_logits).subspan(size_t(j) * 2112, 2112)));
            lqs.push_back(log_probs(std::span<const float>(lq_logits).subspan(size_t(j) * 2112, 2112)));
        }
    }
    for (int k : {32, 2}) {
        SCOPED_TRACE("K = " + std::to_string(k));
        const std::string path = dir.file("f32_" + std::to_string(k) + ".kld");
        const engine::PerplexityResult ppl = measure(ref, 2, path, k);
        engine::KlBaseReader base(path);
        EXPECT_EQ(base.header().top_k, k);
        EXPECT_EQ(vq.fingerprint, base.header().vocabulary.fingerprint) << "one vocabulary in both files";
        const engine::KlResult r = engine::kl_divergence(q8.session->family(), vq, base, {});

        long double lumped = 0, full = 0, rest = 0;
        int64_t same = 0;
        for (size_t at = 0; at < lps.size(); ++at) {
            const auto &lp = lps[at], &lq = lqs[at];
            const std::vector<int32_t> order = ranked(lp);
            long double rp = 1, rq = 1;
            for (int i = 0; i < k; ++i) {
                const size_t id = size_t(order[size_t(i)]);
                lumped += std::exp(lp[id]) * (lp[id] - lq[id]);
                rp -= std::exp(lp[id]);
                rq -= std::exp(lq[id]);
            }
            rest += rp * std::log(rp / rq);
            for (size_t i = 0; i < 2112; ++i) full += std::exp(lp[i]) * (lp[i] - lq[i]);
            same += std::max_element(lq.begin(), lq.end()) - lq.begin() == order[0];
        }
        lumped += rest;
        const engine::KlSummary s = engine::summarize(r.sums);
        const long double n = static_cast<long double>(r.sums.count);
        EXPECT_EQ(r.sums.count, 126);
        EXPECT_GT(s.kld.value, 1e-4);
        EXPECT_NEAR(s.kld.value / double(lumped / n), 1.0, 1e-5) << s.kld.value << " vs " << double(lumped / n);
        // The rest's term is large enough for the comparison above to see it.
        EXPECT_GT(std::fabs(rest / lumped), k == 2 ? 1e-2L : 1e-4L) << double(rest) << " of " << double(lumped);
        EXPECT_LE(lumped, full * (1 + 1e-9L)) << "the lumped KL is a lower bound";
        EXPECT_EQ(r.sums.n_same_top, same);
        EXPECT_LT(r.sums.n_same_top, r.sums.count);
        EXPECT_LT(s.same_top.value, 1.0);
        EXPECT_GT(s.same_top.error, 0.0);
        EXPECT_NEAR(s.ppl_base.value / ppl.nll.ppl(), 1.0, 1e-6);
        EXPECT_GT(std::fabs(s.ppl.value / s.ppl_base.value - 1.0), 1e-5);
        EXPECT_GT(s.p_diff_rms.value, 0.0);
        EXPECT_GE(r.kld.front(), -1e-7);
    }
}

// What the reader and the comparison refuse, each with a message that says why.
TEST(KlBase, RefusesOtherFormatsVocabulariesAndDamage) {
    TempDir dir;
    const std::string path = dir.file("f32.kld");
    auto m = open(kF32);
    const engine::Vocabulary v = engine::vocabulary_of(*m.session);
    measure(m, 2, path);
    const std::vector<uint8_t> good = zinc::test::read_bytes(path);

    auto reader_error = [&](const std::vector<uint8_t>& bytes) {
        const std::string p = dir.file("bad.kld");
        zinc::test::write_bytes(p, bytes);
        return error_of([&] {
            engine::KlBaseReader r(p);
            engine::KlBaseChunk c;
            for (int i = 0; i < r.header().n_chunk; ++i) r.read_chunk(c);
        });
    };
    EXPECT_EQ(reader_error(good), "");
    std::vector<uint8_t> b = good;
    b[8] = 2;
    EXPECT_TRUE(has(reader_error(b), "a KL-divergence base of format version 2; this zinc reads version 1"))
        << reader_error(b);
    b = good;
    std::memcpy(b.data(), "_logits_", 8);  // read as llama-perplexity's header: n_ctx is the version, 1
    EXPECT_TRUE(has(reader_error(b), "bad n_ctx 1")) << reader_error(b);
    b = good;
    b[0] = 'X';
    EXPECT_TRUE(has(reader_error(b), "not a KL-divergence base")) << reader_error(b);
    b.assign(good.begin(), good.end() - 10);
    EXPECT_TRUE(has(reader_error(b), "truncated or damaged")) << reader_error(b);
    b = good;
    b[24] = 0;  // K = 0
    EXPECT_TRUE(has(reader_error(b), "bad K 0")) << reader_error(b);
    b = good;
    const size_t first_id = 40 + 2 * kCtx * 4 + 8;
    const int32_t past = 5000;
    std::memcpy(b.data() + first_id, &past, 4);
    EXPECT_TRUE(has(reader_error(b), "chunk 1, position 0: token 5000 (the file is damaged)")) << reader_error(b);

    engine::KlBaseReader base(path);
    // Another vocabulary: the Gemma 4 fixture's.
    auto gemma = open(kGemma4);
    const engine::Vocabulary vg = engine::vocabulary_of(*gemma.session);
    const std::string other = error_of([&] { engine::kl_divergence(gemma.session->family(), vg, base, {}); });
    EXPECT_TRUE(has(other, "made with a vocabulary of 2112 tokens; this model's has " + std::to_string(vg.n_vocab)))
        << other;
    engine::Vocabulary same_size = v;
    same_size.fingerprint ^= 1;
    EXPECT_TRUE(has(error_of([&] { base.check(same_size); }), "made with another vocabulary than this model's"));
    engine::Vocabulary with_bos = v;
    with_bos.bos = 7;
    EXPECT_TRUE(has(error_of([&] { base.check(with_bos); }),
                    "its chunks began with no BOS but this model's vocabulary asks for BOS 7"));
    EXPECT_EQ(error_of([&] { base.check(v); }), "");
    // A context shorter than the base's chunks.
    auto small = open(kF32, 64, 32);
    EXPECT_TRUE(has(error_of([&] { engine::kl_divergence(small.session->family(), v, base, {}); }),
                    "do not fit in the model's context of 64"));
    EXPECT_TRUE(has(error_of([] { engine::KlBaseReader("/no/such/file.kld"); }), "cannot read /no/such/file.kld"));
}

// A run that fails on the way leaves no base behind (a reader would refuse it anyway).
TEST(KlBase, AnUnfinishedBaseIsRemoved) {
    TempDir dir;
    const std::string path = dir.file("f32.kld");
    auto m = open(kF32);
    engine::PerplexityOptions o;
    o.n_ctx = kCtx;
    o.save_base = path;
    o.on_chunk = [&](int chunk, int, const engine::NllSums&, double) {
        EXPECT_TRUE(std::filesystem::exists(path));
        if (chunk == 1) throw std::runtime_error("stopped");
    };
    EXPECT_EQ(error_of([&] { engine::perplexity(m.session->family(), engine::vocabulary_of(*m.session),
                                                text_tokens(m), o); }),
              "stopped");
    EXPECT_FALSE(std::filesystem::exists(path));
}

// --- the command

using zinc::test::run_zinc;
using zinc::test::shell_word;

const std::string kF32Arg = shell_word(kF32), kQ8Arg = shell_word(kQ8), kTextArg = shell_word(kText);

TEST(PerplexityCli, PrintsTheRunningEstimateAndTheFinalOne) {
    const auto r = run_zinc("perplexity -m " + kF32Arg + " -f " + kTextArg + " -c 128 --chunks 3 -t 2 -ub 48");
    ASSERT_EQ(r.status, 0) << r.err;
    auto m = open(kF32);
    const engine::PerplexityResult want = measure(m, 3), two = measure(m, 2), one = measure(m, 1);
    const double running[] = {one.nll.ppl(), two.nll.ppl(), want.nll.ppl()};
    char line[256];
    std::snprintf(line, sizeof line, "[1]%.4f,[2]%.4f,[3]%.4f,\n", running[0], running[1], running[2]);
    EXPECT_TRUE(has(r.err, line)) << line << " missing in:\n" << r.err;
    EXPECT_TRUE(has(r.err, "perplexity: 1013 tokens, 3 chunks of 128, each scored on its last 63 tokens")) << r.err;
    EXPECT_TRUE(has(r.err, " seconds per pass - ETA ")) << r.err;
    std::snprintf(line, sizeof line, "Final estimate: PPL = %.4f +/- %.5f\n", want.nll.ppl(), want.nll.ppl_error());
    EXPECT_TRUE(r.out.starts_with(line)) << line << " vs\n" << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("\n3 chunks of 128 tokens in [0-9.]+ s: [0-9.]+ tok/s\n$")))
        << r.out;
    // The text on standard input, with -f - or without -f.
    const std::string text = zinc::test::read_text(kText);
    const auto piped = run_zinc("perplexity -m " + kF32Arg + " -f - -c 128 --chunks 3", text);
    ASSERT_EQ(piped.status, 0) << piped.err;
    EXPECT_TRUE(piped.out.starts_with(line)) << piped.out;
    EXPECT_TRUE(run_zinc("perplexity -m " + kF32Arg + " -c 128 --chunks 3", text).out.starts_with(line));
}

TEST(PerplexityCli, RefusesWhatItCannotMeasure) {
    const struct {
        std::string args, input;
        int status;
        std::string message;
    } cases[] = {
        {"-c 128", "Hello world", 1,
         "need at least 256 tokens to measure perplexity with a context of 128; the text has only 4"},
        {"-f " + kTextArg, "", 1, "need at least 1024 tokens to measure perplexity with a context of 512; the text "
                                  "has only 1013"},
        {"-f " + kTextArg + " -c 2", "", 2, "--ctx-size: perplexity scores the second half"},
        {"-f " + kTextArg + " --chunks 0", "", 2, "--chunks: expects an integer >= 1, not '0'"},
        {"-f " + kTextArg + " -c 0", "", 2,
         "--ctx-size: perplexity scores the second half of each chunk after its first: a context of at least 3 tokens, "
         "not 0"},
        {"-f " + kTextArg + " --kl-divergence", "", 2, "--kl-divergence requires --kl-divergence-base"},
        {"-f /no/such.txt", "", 1, "cannot read /no/such.txt"},
        {"--kl-divergence --kl-divergence-base /no/such.kld", "", 1, "cannot read /no/such.kld"},
        {"-f " + kTextArg + " -c 128 --kl-divergence-base /no/such/dir/base.kld", "", 1,
         "cannot write /no/such/dir/base.kld"},
        {"-f " + kTextArg + " -c 128 --kl-divergence-base /dev/full", "", 1,
         "error writing /dev/full: No space left on device"},
    };
    for (const auto& c : cases) {
        if (has(c.args, "/dev/full") && !std::filesystem::exists("/dev/full")) continue;
        const auto r = run_zinc("perplexity -m " + kF32Arg + " " + c.args, c.input);
        EXPECT_EQ(r.status, c.status) << c.args << "\n" << r.err;
        EXPECT_TRUE(has(r.err, "zinc: error: " + c.message)) << c.args << "\n" << r.err;
        EXPECT_EQ(r.out, "") << c.args;
    }
}

TEST(PerplexityCli, KlDivergenceAgainstASavedBase) {
    TempDir dir;
    const std::string base = shell_word(dir.file("f32.kld"));
    const auto saved = run_zinc("perplexity -m " + kF32Arg + " -f " + kTextArg + " -c 128 --chunks 2 "
                                "--kl-divergence-base " + base);
    ASSERT_EQ(saved.status, 0) << saved.err;
    EXPECT_TRUE(has(saved.err, "saving the log-probabilities of all 2112 tokens at every scored position to "))
        << saved.err;
    EXPECT_TRUE(has(saved.err, "(llama-perplexity's format)")) << saved.err;
    // 20 + 2 x 128 x 4 + 126 x (2 x 2112 + 8) bytes.
    EXPECT_TRUE(has(saved.err, "(126 scored positions, 521.8 KiB)")) << saved.err;
    EXPECT_EQ(zinc::test::read_text(dir.file("f32.kld")).substr(0, 8), "_logits_");

    // No text needed: the tokens come from the base (-c from it too).
    const auto r = run_zinc("perplexity -m " + kQ8Arg + " --kl-divergence --kl-divergence-base " + base);
    ASSERT_EQ(r.status, 0) << r.err;
    for (const char* part : {"Mean PPL(Q)                   : ", "Mean PPL(base)                : ",
                             "Cor(ln(PPL(Q)), ln(PPL(base))): ", "Mean ln(PPL(Q)/PPL(base))     : ",
                             "Mean PPL(Q)/PPL(base)         : ", "Mean PPL(Q)-PPL(base)         : ",
                             "====== KL divergence statistics ======", "Mean    KLD: ", "Maximum KLD: ",
                             "99.9%   KLD: ", "99.0%   KLD: ", "95.0%   KLD: ", "90.0%   KLD: ", "Median  KLD: ",
                             "10.0%   KLD: ", " 5.0%   KLD: ", " 1.0%   KLD: ", "Minimum KLD: ", "RMS Δp    : ",
                             "Same top p: ", "2 chunks of 128 tokens in "})
        EXPECT_TRUE(has(r.out, part)) << part << " missing in:\n" << r.out;
    EXPECT_TRUE(has(r.err, "chunk             PPL               ln(PPL(Q)/PPL(base))")) << r.err;
    EXPECT_TRUE(has(r.err, "(llama-perplexity's format: every token's log-probability)")) << r.err;
    EXPECT_TRUE(std::regex_search(r.err, std::regex("\n   1 +[0-9.]+ ± +[0-9.]+ .*%\n   2 "))) << r.err;
    EXPECT_FALSE(has(r.out, "Same top p: 100.000")) << r.out;

    // The model of the base against itself.
    const auto self = run_zinc("perplexity -m " + kF32Arg + " --kl-divergence --kl-divergence-base " + base +
                               " -f " + kTextArg);
    ASSERT_EQ(self.status, 0) << self.err;
    EXPECT_TRUE(has(self.out, "Same top p: 100.000 ± 0.000 %")) << self.out;
    // Zero up to the 16-bit rounding of the base's stored log-probabilities (at most 1.3e-4 each).
    EXPECT_TRUE(std::regex_search(self.out, std::regex("Mean    KLD:  [ -]0\\.0000[0-9][0-9] ±"))) << self.out;
    EXPECT_TRUE(has(self.err, "is not read")) << "the -f text is not used:\n" << self.err;

    const auto other = run_zinc("perplexity -m " + shell_word(kGemma4) + " --kl-divergence --kl-divergence-base " +
                                base);
    EXPECT_EQ(other.status, 1);
    EXPECT_TRUE(has(other.err, "made with a vocabulary of 2112 tokens; this model's has ")) << other.err;
    EXPECT_EQ(other.out, "");
    const auto ctx = run_zinc("perplexity -m " + kQ8Arg + " -c 64 --kl-divergence --kl-divergence-base " + base);
    EXPECT_EQ(ctx.status, 2);
    EXPECT_TRUE(has(ctx.err, "was made with chunks of 128 tokens; leave -c out or give -c 128")) << ctx.err;
    // A text file given as the base.
    const auto text = run_zinc("perplexity -m " + kQ8Arg + " --kl-divergence --kl-divergence-base " + kTextArg);
    EXPECT_EQ(text.status, 1);
    EXPECT_TRUE(has(text.err, "not a KL-divergence base (llama-perplexity's begins with \"_logits_\"")) << text.err;
}

// --kl-base-top-k: zinc's compact base, written and read by the same flags, saying what it is.
TEST(PerplexityCli, CompactTopKBase) {
    TempDir dir;
    const std::string base = shell_word(dir.file("f32.kld"));
    const auto saved = run_zinc("perplexity -m " + kF32Arg + " -f " + kTextArg + " -c 128 --chunks 2 "
                                "--kl-divergence-base " + base + " --kl-base-top-k 32");
    ASSERT_EQ(saved.status, 0) << saved.err;
    EXPECT_TRUE(has(saved.err, "saving the 32 most probable tokens of every scored position to ")) << saved.err;
    EXPECT_TRUE(has(saved.err, "(zinc's top-K format: its KL divergence lumps the other tokens")) << saved.err;
    EXPECT_TRUE(has(saved.err, "(126 scored positions, 33.5 KiB)")) << saved.err;
    EXPECT_EQ(zinc::test::read_text(dir.file("f32.kld")).substr(0, 8), "ZINC-KLD");

    const auto r = run_zinc("perplexity -m " + kQ8Arg + " --kl-divergence --kl-divergence-base " + base);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(has(r.err, "(zinc's top-K format: its 32 most probable tokens per position, the others lumped"))
        << r.err;
    EXPECT_TRUE(has(r.out, "Mean    KLD: ")) << r.out;
    // The lumped KL is a lower bound of the full one, which the default base gives on the same logits.
    const std::string full_base = shell_word(dir.file("full.kld"));
    ASSERT_EQ(run_zinc("perplexity -m " + kF32Arg + " -f " + kTextArg + " -c 128 --chunks 2 --kl-divergence-base " +
                       full_base).status, 0);
    const auto full = run_zinc("perplexity -m " + kQ8Arg + " --kl-divergence --kl-divergence-base " + full_base);
    ASSERT_EQ(full.status, 0) << full.err;
    auto mean_kld = [](const std::string& out) {
        std::smatch m;
        return std::regex_search(out, m, std::regex("Mean    KLD: +([0-9.e-]+)")) ? std::stod(m[1]) : -1.0;
    };
    EXPECT_GT(mean_kld(r.out), 0.0) << r.out;
    EXPECT_LT(mean_kld(r.out), mean_kld(full.out)) << r.out << full.out;

    for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
             {"-f " + kTextArg + " --kl-base-top-k 32", "--kl-base-top-k requires --kl-divergence-base"},
             {"--kl-divergence --kl-divergence-base " + base + " --kl-base-top-k 8", "--kl-divergence excludes --kl-base-top-k"},
             {"-f " + kTextArg + " --kl-divergence-base " + base + " --kl-base-top-k 0", "--kl-base-top-k"}}) {
        const auto bad = run_zinc("perplexity -m " + kF32Arg + " " + args);
        EXPECT_EQ(bad.status, 2) << args << "\n" << bad.err;
        EXPECT_TRUE(has(bad.err, message)) << args << "\n" << bad.err;
    }
}

}  // namespace
