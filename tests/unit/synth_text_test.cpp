// `zinc synth --text-only`: the output rows of the tokens that are not whole text are zero and every other byte is
// the file without it; greedy decoding of such a file writes valid UTF-8 without special tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "gguf/split.h"
#include "gguf_test_util.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "small_synth.h"
#include "synth/synth.h"
#include "synth/vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "zinc_binary.h"

namespace {

using zinc::test::TempDir;
using zinc::tokenizer::Tokenizer;
using zinc::tokenizer::TokenType;

const std::string kQwenVocab2k = ZINC_FIXTURES_DIR "/vocab/qwen3-2k";

// The 2,048 regular tokens and 26 added ones of the test vocabulary, and a few padding rows past them.
constexpr uint32_t kRows = 2080;

// The small synthetic model (tied embedding) with the whole test vocabulary.
zinc::synth::Options text_options(const std::string& out, bool text_only) {
    zinc::synth::Options o = zinc::test::small_synth_options(out);
    o.n_vocab = kRows;
    o.text_only = text_only;
    return o;
}

// Writes a file; returns the notes it gave.
std::vector<std::string> write_file(const zinc::synth::Options& o) {
    std::vector<std::string> notes;
    zinc::synth::Events ev;
    ev.note = [&notes](const std::string& s) { notes.push_back(s); };
    zinc::synth::write(zinc::synth::plan(o), ev);
    return notes;
}

// Why generated tokens are not plain text, "" when they are: a token that is not NORMAL or BYTE (control, added,
// unused), text that renders differently with special tokens shown, or text that is not valid UTF-8.
std::string text_problem(const Tokenizer& tok, const std::vector<int32_t>& ids) {
    for (int32_t id : ids) {
        const TokenType t = tok.token_type(id);
        if (t != TokenType::Normal && t != TokenType::Byte)
            return "token " + std::to_string(id) + " '" + tok.token_str(id) + "' is not text";
    }
    const std::string text = tok.decode(ids, true);
    if (text != tok.decode(ids, false)) return "special tokens in '" + text + "'";
    if (!zinc::tokenizer::unicode::valid_utf8(text)) return "not valid UTF-8";
    return "";
}

// The rows of `name` in `flagged` that are all zero where the same rows of `plain` are not.
std::vector<bool> rows_zeroed(const zinc::gguf::Model& plain, const zinc::gguf::Model& flagged,
                              const std::string& name) {
    const auto& a = *plain.tensor(name).info;
    const auto& b = *flagged.tensor(name).info;
    const auto rows = static_cast<size_t>(b.ne[1]);
    const size_t rb = static_cast<size_t>(b.nbytes) / rows;
    std::vector<bool> zero(rows);
    for (size_t r = 0; r < rows; ++r) {
        const uint8_t* pb = b.data + r * rb;
        const uint8_t* pa = a.data + r * rb;
        zero[r] = std::all_of(pb, pb + rb, [](uint8_t x) { return x == 0; }) &&
                  !std::all_of(pa, pa + rb, [](uint8_t x) { return x == 0; });
    }
    return zero;
}

// Checks that `flagged` is `plain` with the rows `zero` of tensor `name` zeroed, and nothing else different.
void expect_only_rows_differ(const std::string& plain_path, const std::string& flagged_path, const std::string& name,
                             const std::vector<bool>& zero) {
    std::vector<uint8_t> a = zinc::test::read_bytes(plain_path);
    const std::vector<uint8_t> b = zinc::test::read_bytes(flagged_path);
    ASSERT_EQ(a.size(), b.size());
    const zinc::gguf::Model m(flagged_path);
    const auto& t = *m.tensor(name).info;
    ASSERT_EQ(zero.size(), static_cast<size_t>(t.ne[1]));
    const size_t rb = static_cast<size_t>(t.nbytes) / zero.size();
    for (size_t r = 0; r < zero.size(); ++r)
        if (zero[r]) std::fill_n(a.begin() + static_cast<std::ptrdiff_t>(t.file_offset + r * rb), rb, uint8_t{0});
    EXPECT_TRUE(a == b) << "bytes other than the zeroed rows of " << name << " differ";
}

}  // namespace

// The checkers the other tests rely on can fail.
TEST(SynthTextOnly, TextCheckerIsReal) {
    using zinc::tokenizer::unicode::valid_utf8;
    EXPECT_TRUE(valid_utf8(""));
    EXPECT_TRUE(valid_utf8("jury \xc3\xa9t\xc3\xa9 \xe7\x9a\x84 \xf0\x9f\x98\x80"));
    EXPECT_FALSE(valid_utf8("\xe7\x9a"));         // a character cut short
    EXPECT_FALSE(valid_utf8("a\x9a b"));          // a stray continuation byte
    EXPECT_FALSE(valid_utf8("\xc0\xaf"));         // overlong
    EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));     // a surrogate
    EXPECT_FALSE(valid_utf8("\xff"));

    TempDir dir;
    write_file(text_options(dir.file("m.gguf"), false));
    const zinc::gguf::Model m(dir.file("m.gguf"));
    const Tokenizer tok = Tokenizer::from_gguf(m.first());
    const int32_t im_end = tok.find_token("<|im_end|>").value();
    const int32_t byte_e7 = tok.find_token(zinc::tokenizer::bytes_to_mapped("\xe7")).value();
    const int32_t the = tok.find_token(zinc::tokenizer::bytes_to_mapped(" the")).value();
    EXPECT_EQ(text_problem(tok, {the, the}), "");
    EXPECT_NE(text_problem(tok, {the, im_end}), "");
    EXPECT_NE(text_problem(tok, {the, byte_e7}), "");
}

// All-zero bytes are zero weights in every type zinc writes: each block's scales are then 0 (and IQ4's and MXFP4's
// 4-bit code 0 is the value 0).
TEST(SynthTextOnly, ZeroBytesAreZeroWeightsInEveryType) {
    int checked = 0;
    for (uint32_t id = 0; id < zinc::gguf::kTensorTypeIdEnd; ++id) {
        const auto tt = zinc::gguf::type_traits(id);
        const auto t = static_cast<zinc::gguf::TensorType>(id);
        if (!tt || !zinc::quant::can_quantize(t) || !zinc::quant::can_dequantize(t)) continue;
        const size_t n = size_t{tt->block_elems} * 8;
        const std::vector<uint8_t> zeros(zinc::gguf::row_bytes(t, n), 0);
        std::vector<float> v(n, 1.0f);
        zinc::quant::dequantize_row(t, zeros.data(), v.data(), n);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(v[i], 0.0f) << tt->name << " element " << i;
        ++checked;
    }
    EXPECT_GE(checked, 15);  // F16, BF16, the legacy, K and IQ4 quants, MXFP4, ...
}

// Tied embedding: the rows of token_embd of the tokens that are not whole text are zero; the rest of the file is
// byte for byte the file without --text-only.
TEST(SynthTextOnly, ZeroesTheRowsOfNonTextTokensOnly) {
    TempDir dir;
    const std::string plain = dir.file("plain.gguf"), flagged = dir.file("text.gguf");
    EXPECT_TRUE(write_file(text_options(plain, false)).empty());
    const std::vector<std::string> notes = write_file(text_options(flagged, true));

    const zinc::gguf::Model mp(plain), mf(flagged);
    ASSERT_EQ(mf.find_tensor("output.weight"), nullptr);
    const Tokenizer tok = Tokenizer::from_gguf(mf.first());
    std::vector<bool> zero = zinc::synth::whole_text_tokens(tok, kRows);
    zero.flip();
    // The rows found zero in the file are exactly those of the tokens that are not text.
    EXPECT_TRUE(rows_zeroed(mp, mf, "token_embd.weight") == zero);
    expect_only_rows_differ(plain, flagged, "token_embd.weight", zero);

    const auto n_zero = static_cast<uint32_t>(std::count(zero.begin(), zero.end(), true));
    EXPECT_GT(n_zero, 0u);
    EXPECT_LT(n_zero, kRows);
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_EQ(notes[0], "text-only: " + std::to_string(n_zero) + " of 2,080 output rows zero (tied: those tokens also "
                        "embed to zero vectors)");

    // Whatever the classification says, these are (not) text.
    for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>"})
        EXPECT_TRUE(zero[static_cast<size_t>(tok.find_token(special).value())]) << special;
    for (const char* piece : {"\xe7", "\x80", "\xff"})
        EXPECT_TRUE(zero[static_cast<size_t>(tok.find_token(zinc::tokenizer::bytes_to_mapped(piece)).value())]);
    for (uint32_t r = 2074; r < kRows; ++r) EXPECT_TRUE(zero[r]) << "padding row " << r;
    for (const char* text : {"!", "A", " the", "\n"})
        EXPECT_FALSE(zero[static_cast<size_t>(tok.find_token(zinc::tokenizer::bytes_to_mapped(text)).value())]);
    int whole_chars = 0;  // tokens of multi-byte characters whole: kept
    for (int32_t id = 0; id < 2048; ++id) {
        const std::string s = tok.token_text(id);
        const bool multibyte = std::any_of(s.begin(), s.end(), [](char c) { return (c & 0x80) != 0; });
        if (multibyte && zinc::tokenizer::unicode::valid_utf8(s)) {
            EXPECT_FALSE(zero[static_cast<size_t>(id)]) << id;
            ++whole_chars;
        }
    }
    EXPECT_GT(whole_chars, 0);
}

// Untied: output.weight loses the rows, token_embd keeps every one.
TEST(SynthTextOnly, UntiedOutputOnly) {
    TempDir dir;
    const std::string plain = dir.file("plain.gguf"), flagged = dir.file("text.gguf");
    zinc::synth::Options o = text_options(plain, false);
    o.preset = "qwen3-8b";
    o.type = "Q4_0";  // output.weight Q6_K
    write_file(o);
    o.out = flagged;
    o.text_only = true;
    const std::vector<std::string> notes = write_file(o);

    const zinc::gguf::Model mp(plain), mf(flagged);
    ASSERT_NE(mf.find_tensor("output.weight"), nullptr);
    EXPECT_EQ(mf.tensor("output.weight").info->type, zinc::gguf::TensorType::Q6_K);
    std::vector<bool> zero = zinc::synth::whole_text_tokens(Tokenizer::from_gguf(mf.first()), kRows);
    zero.flip();
    EXPECT_TRUE(rows_zeroed(mp, mf, "output.weight") == zero);
    expect_only_rows_differ(plain, flagged, "output.weight", zero);
    const auto n_zero = std::count(zero.begin(), zero.end(), true);
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_EQ(notes[0], "text-only: " + std::to_string(n_zero) + " of 2,080 output rows zero");
}

// Greedy decoding of the --text-only file writes text only. The same check of the file without the flag is not
// asserted (a random model may happen to write text), only shown.
TEST(SynthTextOnly, GreedyRepliesAreText) {
    TempDir dir;
    auto backend = zinc::backend::make_cpu_backend(2);
    auto generate = [&](const std::string& path, std::vector<int32_t>& ids, bool& finite) {
        const zinc::gguf::Model m(path);
        zinc::engine::Session s(m, *backend, zinc::engine::ContextSize{256});
        const Tokenizer& tok = s.tokenizer();
        zinc::engine::Sampler greedy(zinc::engine::SamplerParams{});
        zinc::engine::GenerateOptions g;
        g.max_tokens = 80;
        g.render_special = true;
        g.on_logits = [&finite](std::span<const float> l) {
            for (float x : l) finite = finite && std::isfinite(x);
        };
        const auto r = s.generate(tok.encode("The jury said", true, false), g, greedy,
                                  [&ids](int32_t id, const std::string&) {
                                      ids.push_back(id);
                                      return true;
                                  });
        EXPECT_EQ(r.stop, zinc::engine::GenerateResult::Stop::MaxTokens);
        return text_problem(tok, ids);
    };
    const std::string flagged = dir.file("text.gguf"), plain = dir.file("plain.gguf");
    write_file(text_options(flagged, true));
    write_file(text_options(plain, false));

    std::vector<int32_t> ids;
    bool finite = true;
    EXPECT_EQ(generate(flagged, ids, finite), "");
    EXPECT_EQ(ids.size(), 80u);
    EXPECT_TRUE(finite);

    std::vector<int32_t> plain_ids;
    bool plain_finite = true;
    const std::string problem = generate(plain, plain_ids, plain_finite);
    std::printf("without --text-only: %s\n", problem.empty() ? "text (by chance)" : problem.c_str());

    // A token whose embedding is zero: RMSNorm of the zero vector is zero (x / sqrt(mean(x^2) + eps)), not NaN, so
    // a prompt of nothing but such tokens gives finite logits.
    const zinc::gguf::Model m(flagged);
    zinc::engine::Session s(m, *backend, zinc::engine::ContextSize{256});
    const int32_t im_start = s.tokenizer().find_token("<|im_start|>").value();
    const std::vector<int32_t> prompt = {im_start, im_start};
    const std::span<float> logits = s.set_context(prompt);
    ASSERT_EQ(logits.size(), size_t{kRows});
    EXPECT_TRUE(std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); }));
}

// A vocabulary without a single token of whole text cannot be made text only: refused before anything is written.
TEST(SynthTextOnly, RefusesAVocabularyWithoutText) {
    TempDir dir;
    // The test vocabulary's 94 tokens of single bytes 0xA1..0xFF as the whole vocabulary, and one merge of two of
    // them: none is a character.
    nlohmann::json tok = nlohmann::json::parse(zinc::test::read_text(kQwenVocab2k + "/tokenizer.json"));
    nlohmann::json vocab = nlohmann::json::object();
    for (const auto& [text, id] : tok["model"]["vocab"].items())
        if (id.get<int>() >= 94 && id.get<int>() < 188) vocab[text] = id.get<int>() - 94;
    ASSERT_EQ(vocab.size(), 94u);
    const std::string a = zinc::tokenizer::bytes_to_mapped("\xa1");
    vocab[a + a] = 94;
    tok["model"]["vocab"] = vocab;
    tok["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({a, a})});
    tok["added_tokens"] = nlohmann::json::array();
    const std::string bytes_dir = dir.file("bytes");
    std::filesystem::create_directories(bytes_dir);
    std::ofstream(bytes_dir + "/tokenizer.json", std::ios::binary) << tok.dump();

    zinc::synth::Options o = text_options(dir.file("m.gguf"), true);
    o.n_vocab = 95;
    o.tokenizer_dir = bytes_dir;
    try {
        write_file(o);
        ADD_FAILURE() << "written";
    } catch (const std::invalid_argument& e) {
        EXPECT_EQ(std::string(e.what()), "--text-only: none of the 95 tokens of the vocabulary is whole text");
    }
    EXPECT_FALSE(std::filesystem::exists(o.out));
    EXPECT_FALSE(std::filesystem::exists(o.out + ".tmp"));
}

// The command: the flag, and the count it reports.
TEST(SynthTextOnly, Cli) {
    TempDir dir;
    const std::string out = dir.file("s.gguf");
    const auto r = zinc::test::run_zinc("synth --preset qwen3-0.6b --type Q8_0 --layers 1 --n-vocab 2080 -t 2 "
                                        "--text-only --tokenizer-dir " + zinc::test::shell_word(kQwenVocab2k) +
                                        " -o " + zinc::test::shell_word(out));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("synth: text-only: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" of 2,080 output rows zero"), std::string::npos) << r.err;
    const auto help = zinc::test::run_zinc("synth --help");
    EXPECT_NE(help.out.find("--text-only"), std::string::npos) << help.out;
}
