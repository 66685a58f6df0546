// engine/kl_base.h's FULL form, llama-perplexity's KL-divergence base: a file built here byte by byte as llama.cpp's
// tools/perplexity/perplexity.cpp writes it, read back field by field, and the writer's bytes against it; a round trip
// on the Brown model (8,193 tokens: an odd row, so its padding too) with every stored log-probability against the
// logits; the KL divergence of a quantized Brown model read from that file against the one computed here from both
// models' logits, within the bound the 16-bit rounding allows; and hostile files refused with a message, before
// anything their header announces is allocated.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "brown_model.h"
#include "engine/open_model.h"
#include "engine/perplexity.h"
#include "error_of.h"
#include "gguf_test_util.h"
#include "zinc_binary.h"

namespace {

using zinc::test::error_of;

namespace engine = zinc::engine;
using zinc::test::TempDir;

const std::string kBrownBf16 = ZINC_BROWN_DIR "/brown-qwen3-5m-bf16.gguf";
constexpr int kCtx = 128, kScored = kCtx - 1 - kCtx / 2, kVocab = 8193;
// The largest error of a stored ln p above the floor: half of the largest step (16 / 65535) and the float rounding of
// the division, the product and the sum that make and read it.
constexpr double kStoredError = 0.5 * 16.0 / 65535.0 * 1.02 + 1e-5;

engine::OpenedModel open(const std::string& path) {
    engine::OpenOptions o;
    o.path = path;
    o.backend.backend = "cpu";
    o.backend.threads = 2;
    o.context = {kCtx, 48};
    o.all_logits = true;
    return engine::open_model(o);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Little-endian bytes, appended.
template <class T>
void put(std::vector<uint8_t>& b, T v) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    b.insert(b.end(), raw, raw + sizeof(T));
}

// A FULL base of n_ctx 4 (one scored position per chunk: j = 2), n_vocab 3, one chunk, tokens 0 1 2 1; its row:
// scale 2^-13, min_log_prob -8, q = 0 16384 65535 and the padding of an odd vocabulary: ln p = -8, -6, -2^-13 (all
// exact in float).
std::vector<uint8_t> hand_built() {
    std::vector<uint8_t> b = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
    put<int32_t>(b, 4);  // n_ctx
    put<int32_t>(b, 3);  // n_vocab
    put<int32_t>(b, 1);  // n_chunk
    for (int32_t t : {0, 1, 2, 1}) put<int32_t>(b, t);
    put<float>(b, 0x1p-13f);
    put<float>(b, -8.0f);
    for (uint16_t q : {0, 16384, 65535, 0}) put<uint16_t>(b, q);
    return b;
}

// The logits of the scored positions of chunk c, evaluated as perplexity() does: the first half, then the second
// half with its logits (rows n_ctx/2 ... n_ctx - 1).
std::vector<float> scored_logits(engine::Family& f, std::span<const int32_t> tokens, int c, int32_t bos) {
    std::vector<int32_t> ids(tokens.begin() + c * kCtx, tokens.begin() + (c + 1) * kCtx);
    if (bos >= 0) ids[0] = bos;
    std::vector<float> logits;
    f.forward(std::span<const int32_t>(ids).first(kCtx / 2), 0, false, logits);
    logits.clear();
    f.forward(std::span<const int32_t>(ids).subspan(kCtx / 2), kCtx / 2, true, logits);
    return logits;
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

TEST(KlBaseFull, ReadsTheLayoutLlamaPerplexityWrites) {
    TempDir dir;
    const std::string path = dir.file("hand.kld");
    const std::vector<uint8_t> bytes = hand_built();
    ASSERT_EQ(bytes.size(), 20u + 4 * 4 + 2 * 8);
    zinc::test::write_bytes(path, bytes);

    engine::KlBaseReader r(path);
    const engine::KlBaseHeader& h = r.header();
    EXPECT_EQ(h.format, engine::KlBaseFormat::full);
    EXPECT_EQ(h.n_ctx, 4);
    EXPECT_EQ(h.vocabulary.n_vocab, 3);
    EXPECT_EQ(h.n_chunk, 1);
    EXPECT_EQ(h.n_scored(), 1);
    EXPECT_EQ(h.row_values(), 8u);
    EXPECT_EQ(h.file_bytes(), bytes.size());
    const auto t = r.chunk_tokens(0);
    EXPECT_EQ(std::vector<int32_t>(t.begin(), t.end()), (std::vector<int32_t>{0, 1, 2, 1}));
    engine::KlBaseChunk c;
    r.read_chunk(c);
    ASSERT_EQ(c.rows.size(), 8u);
    const engine::FullRow row(c.rows.data());
    EXPECT_EQ(row.scale, 0x1p-13f);
    EXPECT_EQ(row.min_log_prob, -8.0f);
    EXPECT_EQ(row.log_p(0), -8.0f);
    EXPECT_EQ(row.log_p(1), -6.0f);
    EXPECT_EQ(row.log_p(2), -0x1p-13f);
    EXPECT_TRUE(has(error_of([&] { r.read_chunk(c); }), "read past its last chunk"));

    // The writer makes the same bytes from the same header, tokens and row.
    const std::string again = dir.file("again.kld");
    engine::KlBaseHeader wh;
    wh.format = engine::KlBaseFormat::full;
    wh.vocabulary.n_vocab = 3;
    wh.n_ctx = 4;
    wh.n_chunk = 1;
    const std::vector<int32_t> tokens = {0, 1, 2, 1};
    engine::KlBaseWriter w(again, wh, tokens);
    w.write_chunk(c);
    w.close();
    EXPECT_EQ(zinc::test::read_bytes(again), bytes);
}

// A row encoded from known logits: the top at 65535 steps, the floor 16 below the top, everything lower at 0.
TEST(KlBaseFull, EncodesARowAsLlamaPerplexity) {
    const std::vector<float> logits = {0.0f, -1.0f, -20.0f};
    const double s = std::log(1.0 + std::exp(-1.0) + std::exp(-20.0));
    std::vector<uint16_t> row(8, 0xffff);
    engine::encode_full_row(logits, 0.0f, float(s), row.data());
    const engine::FullRow r(row.data());
    EXPECT_EQ(r.scale, 16.0f / 65535.0f);
    EXPECT_EQ(r.min_log_prob, -16.0f - float(s));
    EXPECT_EQ(r.q[0], 65535);
    EXPECT_EQ(r.q[1], 61439);  // 15 / (16 / 65535) = 61439.06
    EXPECT_EQ(r.q[2], 0);
    EXPECT_EQ(row[7], 0) << "the padding of an odd row";
    EXPECT_NEAR(r.log_p(0), -s, 1e-6);
    EXPECT_NEAR(r.log_p(1), -1 - s, kStoredError);
    // Equal logits: no step, every value 0.
    engine::encode_full_row(std::vector<float>{2.0f, 2.0f}, 2.0f, float(std::log(2.0)), row.data());
    const engine::FullRow flat(row.data());
    EXPECT_EQ(flat.scale, 0.0f);
    EXPECT_NEAR(flat.log_p(0), -std::log(2.0), 1e-6);
    EXPECT_EQ(flat.q[1], 0);
}

// The Brown model's base written by perplexity() in the default form, read back: the header, the tokens, every
// stored ln p against the logits, and the model against its own base.
TEST(KlBaseFull, RoundTripOnTheBrownModel) {
    TempDir dir;
    const std::string path = dir.file("brown.kld");
    auto m = open(kBrownBf16);
    engine::Family& f = m.session->family();
    const engine::Vocabulary v = engine::vocabulary_of(*m.session);
    ASSERT_EQ(v.n_vocab, kVocab);
    const std::vector<int32_t> tokens = zinc::test::brown_heldout_tokens(*m.session);
    engine::PerplexityOptions o;
    o.n_ctx = kCtx;
    o.max_chunks = 2;
    o.save_base = path;
    const engine::PerplexityResult ppl = engine::perplexity(f, v, tokens, o);
    const uint64_t row_bytes = 2 * (2 * 4097 + 4);
    EXPECT_EQ(std::filesystem::file_size(path), 20 + 2 * kCtx * 4 + 2 * kScored * row_bytes);
    EXPECT_EQ(ppl.base_bytes, std::filesystem::file_size(path));
    const std::vector<uint8_t> bytes = zinc::test::read_bytes(path);
    ASSERT_GE(bytes.size(), 20u);
    EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 8), "_logits_");

    engine::KlBaseReader base(path);
    const engine::KlBaseHeader& h = base.header();
    EXPECT_EQ(h.format, engine::KlBaseFormat::full);
    EXPECT_EQ(h.n_ctx, kCtx);
    EXPECT_EQ(h.vocabulary.n_vocab, kVocab);
    EXPECT_EQ(h.n_chunk, 2);
    for (int c = 0; c < 2; ++c) {
        const auto t = base.chunk_tokens(c);
        EXPECT_TRUE(std::equal(t.begin(), t.end(), tokens.begin() + c * kCtx)) << c;
    }
    engine::KlBaseChunk rec;
    for (int c = 0; c < 2; ++c) {
        base.read_chunk(rec);
        const std::vector<float> logits = scored_logits(f, tokens, c, v.bos);
        size_t checked = 0;
        for (int j = 0; j < kScored; ++j) {
            const std::span<const float> lo(logits.data() + size_t(j) * kVocab, kVocab);
            const auto lp = log_probs(lo);
            const uint16_t* stored = rec.rows.data() + size_t(j) * h.row_values();
            const engine::FullRow r(stored);
            EXPECT_EQ(stored[4 + kVocab], 0) << "padding";
            const float top = *std::max_element(lo.begin(), lo.end());
            for (size_t i = 0; i < size_t(kVocab); ++i) {
                if (lo[i] > top - 16) {
                    ASSERT_NEAR(r.log_p(i), double(lp[i]), kStoredError) << c << " " << j << " " << i;
                    ++checked;
                } else {
                    ASSERT_EQ(r.q[i], 0) << "below the floor";
                }
            }
        }
        EXPECT_GT(checked, size_t(kScored) * 100) << "most tokens are above the floor";
    }

    // The model against its own base: the rounding of the stored values is all that differs.
    engine::KlBaseReader again(path);
    const engine::KlResult r = engine::kl_divergence(f, v, again, {});
    ASSERT_EQ(r.sums.count, 2 * kScored);
    const engine::KlSummary s = engine::summarize(r.sums);
    EXPECT_EQ(r.sums.n_same_top, r.sums.count);
    EXPECT_LT(std::fabs(s.kld.value), 1e-5);
    EXPECT_LT(std::fabs(r.kld.front()), 1e-4);
    EXPECT_LT(std::fabs(r.kld.back()), 1e-4);
    EXPECT_NEAR(s.ppl.value / ppl.nll.ppl(), 1.0, 1e-9);
    EXPECT_NEAR(s.ln_ppl_ratio.value, 0.0, kStoredError);
}

// llama-perplexity's arithmetic for one row, transcribed here from its description (kl_base.h) independently of
// encode_full_row: the max and min in float, the sum of expf in double, its log in float, and the rounding to the
// nearest integer (ties to even) by adding 1.5 x 2^23 in float and reading the low bits, as llama.cpp does it: with
// the multiply and the add fused (what GCC makes of it for a target with FMA) or each rounded.
void llama_row(std::span<const float> l, bool fused, std::vector<uint8_t>& out) {
    float max = l[0], min = l[0];
    for (float x : l) {
        max = std::max(max, x);
        min = std::min(min, x);
    }
    min = std::max(min, max - 16);
    double sum = 0;
    for (float x : l) sum += expf(x - max);
    const float lse = float(std::log(sum));
    const float min_log_prob = min - max - lse, scale = (max - min) / 65535.f, inv = 1 / scale;
    put<float>(out, scale);
    put<float>(out, min_log_prob);
    for (float x : l) {
        int q = 0;
        if (scale != 0 && x > min) {
            volatile float product = inv * (x - min);  // volatile: rounded to float, never fused
            const float v = fused ? std::fma(inv, x - min, 12582912.f) : product + 12582912.f;
            int32_t bits;
            std::memcpy(&bits, &v, 4);
            q = (bits & 0x007fffff) - 0x00400000;
        }
        put<uint16_t>(out, uint16_t(q));
    }
    if (l.size() % 2 == 1) put<uint16_t>(out, 0);
}

// The whole file as llama-perplexity writes it for the Brown model's first two chunks of 128, built here from the
// logits: zinc writes the same bytes as a build of llama.cpp that fuses the rounding's multiply and add, and differs
// from one that does not only by one step in a few stored values; and zinc reads such a file as its own (the model
// against itself).
TEST(KlBaseFull, SameBytesAsLlamaPerplexitysArithmetic) {
    TempDir dir;
    auto m = open(kBrownBf16);
    engine::Family& f = m.session->family();
    const engine::Vocabulary v = engine::vocabulary_of(*m.session);
    const std::vector<int32_t> tokens = zinc::test::brown_heldout_tokens(*m.session);
    std::vector<uint8_t> fused = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
    put<int32_t>(fused, kCtx);
    put<int32_t>(fused, kVocab);
    put<int32_t>(fused, 2);
    for (size_t i = 0; i < 2 * size_t(kCtx); ++i) put<int32_t>(fused, tokens[i]);
    std::vector<uint8_t> unfused = fused;
    for (int c = 0; c < 2; ++c) {
        const std::vector<float> logits = scored_logits(f, tokens, c, v.bos);
        for (int j = 0; j < kScored; ++j) {
            const auto row = std::span<const float>(logits).subspan(size_t(j) * kVocab, kVocab);
            llama_row(row, true, fused);
            llama_row(row, false, unfused);
        }
    }
    const std::string path = dir.file("zinc.kld");
    engine::PerplexityOptions o;
    o.n_ctx = kCtx;
    o.max_chunks = 2;
    o.save_base = path;
    engine::perplexity(f, v, tokens, o);
    const std::vector<uint8_t> got = zinc::test::read_bytes(path);
    ASSERT_EQ(got.size(), fused.size());
    EXPECT_TRUE(got == fused) << "the bytes of a build that fuses";
    // Without the fused rounding: the same header, tokens, steps and floors; stored values one step apart at most.
    size_t values = 0, apart = 0;
    const size_t row_bytes = 2 * (2 * 4097 + 4), rows_at = 20 + 2 * kCtx * 4;
    ASSERT_TRUE(std::equal(got.begin(), got.begin() + rows_at, unfused.begin()));
    for (size_t r = 0; r < 2 * size_t(kScored); ++r) {
        const size_t at = rows_at + r * row_bytes;
        ASSERT_TRUE(std::equal(got.begin() + at, got.begin() + at + 8, unfused.begin() + at)) << r;
        for (size_t i = 0; i < size_t(kVocab); ++i) {
            uint16_t a, b;
            std::memcpy(&a, got.data() + at + 8 + 2 * i, 2);
            std::memcpy(&b, unfused.data() + at + 8 + 2 * i, 2);
            ASSERT_LE(std::abs(int(a) - int(b)), 1) << r << " " << i;
            apart += a != b;
            ++values;
        }
    }
    std::printf("brown, 2 chunks of 128: %zu of %zu stored values one step from an unfused build's\n", apart, values);
    EXPECT_LT(apart, values / 100);

    const std::string theirs = dir.file("llama.kld");
    zinc::test::write_bytes(theirs, unfused);
    const auto r = zinc::test::run_zinc("perplexity -m " + zinc::test::shell_word(kBrownBf16) +
                                        " --kl-divergence --kl-divergence-base " + zinc::test::shell_word(theirs));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(has(r.err, "2 chunks of 128 tokens from ")) << r.err;
    EXPECT_TRUE(has(r.out, "Same top p: 100.000 ± 0.000 %")) << r.out;
}

// Q4_0 against the BF16 base: the KL divergence from the file is the full one computed here from both models'
// logits, within what the 16-bit rounding and the e^-16 floor allow, bounded per position from the exact values:
//   |dKL| <= e (1 + e) sum_i p_i (|ln p_i - ln q_i| + 1 + e) + sum over ln p_i <= -16 + e of p_i |ln p_i - ln q_i|
//            + 1e-5 (the model's ln q in float),
// with e the largest error of a stored ln p (kStoredError).
TEST(KlBaseFull, KlDivergenceIsTheFullOneWithinTheRounding) {
    TempDir dir;
    const std::string path = dir.file("bf16.kld");
    auto ref = open(kBrownBf16);
    auto q4 = open(zinc::test::brown_file("Q4_0"));
    const engine::Vocabulary v = engine::vocabulary_of(*ref.session);
    const std::vector<int32_t> tokens = zinc::test::brown_heldout_tokens(*ref.session);
    engine::PerplexityOptions o;
    o.n_ctx = kCtx;
    o.max_chunks = 2;
    o.save_base = path;
    engine::perplexity(ref.session->family(), v, tokens, o);
    engine::KlBaseReader base(path);
    const engine::KlResult r =
        engine::kl_divergence(q4.session->family(), engine::vocabulary_of(*q4.session), base, {});
    ASSERT_EQ(r.sums.count, 2 * kScored);

    long double full = 0, bound = 0, nll_base = 0;
    int64_t same = 0;
    const long double e = kStoredError;
    for (int c = 0; c < 2; ++c) {
        const std::vector<float> lp_logits = scored_logits(ref.session->family(), tokens, c, v.bos);
        const std::vector<float> lq_logits = scored_logits(q4.session->family(), tokens, c, v.bos);
        for (int j = 0; j < kScored; ++j) {
            const auto lp = log_probs(std::span<const float>(lp_logits).subspan(size_t(j) * kVocab, kVocab));
            const auto lq = log_probs(std::span<const float>(lq_logits).subspan(size_t(j) * kVocab, kVocab));
            long double kl = 0, err = 0, floor = 0;
            for (size_t i = 0; i < size_t(kVocab); ++i) {
                const long double p = std::exp(lp[i]), d = lp[i] - lq[i];
                kl += p * d;
                err += p * (std::fabs(d) + 1 + e);
                if (lp[i] <= -16 + e) floor += p * std::fabs(d);
            }
            full += kl;
            bound += e * (1 + e) * err + floor + 1e-5L;
            nll_base -= lp[size_t(tokens[size_t(c * kCtx + kCtx / 2 + j + 1)])];
            same += std::max_element(lp.begin(), lp.end()) - lp.begin() ==
                    std::max_element(lq.begin(), lq.end()) - lq.begin();
        }
    }
    const long double got = r.sums.sum_kld;
    std::printf("brown Q4_0 vs BF16, 2 chunks of 128: mean KL from the file %.6e, computed %.6e, allowed +/- %.2e\n",
                double(got / r.sums.count), double(full / r.sums.count), double(bound / r.sums.count));
    EXPECT_GT(full / r.sums.count, 1e-3L) << "a difference the comparison can see";
    EXPECT_LT(bound, full / 10) << "the bound is tight enough to mean something";
    EXPECT_LE(std::fabs(got - full), bound);
    EXPECT_NEAR(double(r.sums.sum_nll_base / r.sums.count), double(nll_base / r.sums.count), double(e));
    // The same top token, but where two tokens of the base lie within a step of each other.
    EXPECT_NEAR(double(r.sums.n_same_top), double(same), 2.0);
    EXPECT_LT(r.sums.n_same_top, r.sums.count);
}

// Hostile and damaged files: each refused with a message that says why; none allocates what its header claims.
TEST(KlBaseFull, RefusesHostileFiles) {
    TempDir dir;
    const std::vector<uint8_t> good = hand_built();
    auto reader_error = [&](const std::vector<uint8_t>& bytes) {
        const std::string p = dir.file("bad.kld");
        zinc::test::write_bytes(p, bytes);
        return error_of([&] {
            engine::KlBaseReader r(p);
            engine::KlBaseChunk c;
            for (int i = 0; i < r.header().n_chunk; ++i) r.read_chunk(c);
        });
    };
    auto with = [&](size_t at, auto value) {
        std::vector<uint8_t> b = good;
        std::memcpy(b.data() + at, &value, sizeof value);
        return b;
    };
    EXPECT_EQ(reader_error(good), "");
    const struct {
        std::vector<uint8_t> bytes;
        std::string message;
    } cases[] = {
        {{}, "not a KL-divergence base"},
        {std::vector<uint8_t>(good.begin(), good.begin() + 8), "truncated: the header is 20 bytes"},
        {std::vector<uint8_t>(good.begin(), good.begin() + 19), "truncated: the header is 20 bytes"},
        {std::vector<uint8_t>(good.begin(), good.end() - 1),
         "truncated or damaged: its header announces 1 chunks of 4 tokens of a 3-token vocabulary, which take 52 "
         "bytes, but the file has 51"},
        {[&] { auto b = good; b.push_back(0); return b; }(), "the file has 53"},
        // A header that claims far more than the file holds: refused by size, nothing of it allocated.
        {with(16, int32_t(0x7fffffff)), "truncated or damaged: its header announces 2147483647 chunks"},
        {with(8, int32_t(0x40000000)), "truncated or damaged"},
        {with(12, int32_t(0x01000000)), "truncated or damaged"},
        {with(12, int32_t(0x01000001)), "bad n_vocab 16777217"},
        {with(12, int32_t(0)), "bad n_vocab 0"},
        {with(12, int32_t(-5)), "bad n_vocab -5"},
        {with(8, int32_t(2)), "bad n_ctx 2"},
        {with(8, int32_t(-1)), "bad n_ctx -1"},
        {with(16, int32_t(0)), "bad chunk count 0"},
        {with(16, int32_t(-3)), "bad chunk count -3"},
        {with(20 + 8, int32_t(3)), "token 2 is 3, outside the vocabulary of 3"},
        {with(20 + 4, int32_t(-1)), "token 1 is -1, outside the vocabulary of 3"},
        {with(36, std::nanf("")), "chunk 1, position 0: the step nan"},
        {with(36, -0.5f), "chunk 1, position 0: the step -0.5"},
        {with(36, 1.0f), "chunk 1, position 0: the step 1.0"},
        {with(40, std::numeric_limits<float>::infinity()), "chunk 1, position 0: the step"},
        {with(40, 0.5f), "chunk 1, position 0: the step"},
    };
    for (const auto& c : cases) {
        const std::string msg = reader_error(c.bytes);
        EXPECT_TRUE(has(msg, c.message)) << c.message << "\n  got: " << msg;
        EXPECT_TRUE(msg.starts_with(dir.file("bad.kld") + ": ")) << msg;
    }

    // A model of another vocabulary size.
    zinc::test::write_bytes(dir.file("hand.kld"), good);
    engine::KlBaseReader r(dir.file("hand.kld"));
    engine::Vocabulary other;
    other.n_vocab = 4;
    EXPECT_TRUE(has(error_of([&] { r.check(other); }), "made with a vocabulary of 3 tokens; this model's has 4"));
    other.n_vocab = 3;
    other.bos = 1;
    other.fingerprint = 42;
    EXPECT_EQ(error_of([&] { r.check(other); }), "") << "the format records no BOS rule or fingerprint";
}

}  // namespace
