// Gemma tokenizers: the SentencePiece-style kinds "llama" (Gemma 3) and "gemma4" (docs/formats.md §4.8, §4.9).
//  - the full Gemma 3 tokenizer.json (data/tokenizers/gemma3) imported with hf_import_spm, against Hugging Face
//    goldens (tests/fixtures/tokenizers/golden_gemma3.json);
//  - the gemma4 fixture GGUF (llama.cpp converter, truncated Gemma 3 vocabulary) against its meta.json prompt_ids.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tokenizer/hf_import_spm.h"
#include "tokenizer/unicode.h"
#include "tokenizer_test_util.h"

namespace {

using zinc::tokenizer::HfSpmImportOptions;
using zinc::tokenizer::StreamDecoder;
using zinc::tokenizer::TokenType;
using zinc::tokenizer::Tokenizer;
using zinc::tokenizer::TokenizerKind;
namespace tt = zinc::tokenizer::test;

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

const nlohmann::json& gemma3_json() {
    static const nlohmann::json j =
        nlohmann::json::parse(tt::read_xz(std::string(ZINC_TOKENIZERS_DIR) + "/gemma3/tokenizer.json.xz"));
    return j;
}
const nlohmann::json& gemma3_config() {
    static const nlohmann::json j =
        nlohmann::json::parse(tt::read_xz(std::string(ZINC_TOKENIZERS_DIR) + "/gemma3/tokenizer_config.json.xz"));
    return j;
}

Tokenizer load_via_gguf(const std::vector<zinc::gguf::KeyValue>& kv) {
    zinc::gguf::Writer w;
    w.set("general.architecture", "gemma3");
    zinc::tokenizer::add_to_writer(w, kv);
    static std::vector<std::vector<uint8_t>> keep;  // File::from_memory may refer to the bytes
    keep.push_back(w.to_bytes());
    return Tokenizer::from_gguf(zinc::gguf::File::from_memory(keep.back()));
}

// The Gemma 3 declaration: tokenizer.ggml.model = "llama" (SentencePiece, score-driven).
const Tokenizer& gemma3_spm() {
    static const Tokenizer t = load_via_gguf(zinc::tokenizer::import_hf_spm_tokenizer(gemma3_json(), &gemma3_config()));
    return t;
}
// The same vocabulary declared the way conversion/gemma.py writes Gemma 4 ("gemma4", merge-rank BPE).
const Tokenizer& gemma3_as_gemma4() {
    static const Tokenizer t = [] {
        HfSpmImportOptions o;
        o.model = "gemma4";
        return load_via_gguf(zinc::tokenizer::import_hf_spm_tokenizer(gemma3_json(), &gemma3_config(), o));
    }();
    return t;
}

std::string show(const std::vector<int32_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
}

const nlohmann::json& goldens() {
    static const nlohmann::json j =
        nlohmann::json::parse(slurp(std::string(ZINC_FIXTURES_DIR) + "/tokenizers/golden_gemma3.json"));
    return j;
}

TEST(TokenizerGemma, ImportedGemma3Metadata) {
    const Tokenizer& t = gemma3_spm();
    EXPECT_EQ(t.model(), "llama");
    EXPECT_EQ(t.kind(), TokenizerKind::Spm);
    EXPECT_EQ(t.n_vocab(), 262145);
    EXPECT_EQ(t.bos(), 2);
    EXPECT_EQ(t.eos(), 106);  // tokenizer_config eos_token = <end_of_turn>
    EXPECT_TRUE(t.add_bos());
    EXPECT_FALSE(t.add_eos());
    EXPECT_FALSE(t.add_space_prefix());
    EXPECT_FALSE(t.clean_spaces());
    EXPECT_EQ(t.token_type(105), TokenType::Control);  // <start_of_turn>
    EXPECT_EQ(t.token_type(*t.find_token("<0x41>")), TokenType::Byte);
    EXPECT_TRUE(t.is_eog(106));
    EXPECT_TRUE(t.is_eog(1));  // <eos>
    EXPECT_FALSE(t.chat_template().empty());
}

void run_goldens(const Tokenizer& t, const char* name, size_t* pass_out, size_t* n_out, bool expect_all) {
    size_t n = 0, pass = 0;
    for (const auto& c : goldens()["cases"]) {
        const std::string s = c["text"].get<std::string>();
        for (const bool add_special : {false, true}) {
            const auto want = c[add_special ? "ids_with_special" : "ids"].get<std::vector<int32_t>>();
            const auto got = t.encode(s, add_special, true);
            ++n;
            pass += got == want;
            if (expect_all) {
                EXPECT_EQ(got, want) << name << " add_special=" << add_special << " text: " << nlohmann::json(s).dump()
                                     << "\n got " << show(got) << "\nwant " << show(want);
            }
        }
    }
    std::printf("[ goldens   ] %zu / %zu HF Gemma 3 tokenizations match (%s)\n", pass, n, name);
    *pass_out = pass;
    *n_out = n;
}

TEST(TokenizerGemma, Gemma3HfGoldensSpm) {
    size_t pass = 0, n = 0;
    run_goldens(gemma3_spm(), "llama/SPM", &pass, &n, true);
    EXPECT_EQ(n, 214u);
    EXPECT_EQ(pass, n);
}

// gemma4 declaration of the same vocabulary: the converter marks only HF's special tokens CONTROL, so
// <start_of_turn> etc. are NORMAL there and are not split out of text; all other texts must match.
TEST(TokenizerGemma, Gemma3HfGoldensGemma4Kind) {
    const Tokenizer& t = gemma3_as_gemma4();
    EXPECT_EQ(t.kind(), TokenizerKind::Gemma4);
    EXPECT_TRUE(t.clean_spaces());
    size_t n = 0, pass = 0, plain_n = 0, plain_pass = 0;
    for (const auto& c : goldens()["cases"]) {
        const std::string s = c["text"].get<std::string>();
        bool has_added = false;
        for (const auto& a : gemma3_json()["added_tokens"])
            if (s.find(a["content"].get<std::string>()) != std::string::npos) has_added = true;
        for (const bool add_special : {false, true}) {
            const auto want = c[add_special ? "ids_with_special" : "ids"].get<std::vector<int32_t>>();
            const auto got = t.encode(s, add_special, true);
            ++n;
            pass += got == want;
            if (!has_added) {
                ++plain_n;
                plain_pass += got == want;
                EXPECT_EQ(got, want) << "add_special=" << add_special << " text: " << nlohmann::json(s).dump()
                                     << "\n got " << show(got) << "\nwant " << show(want);
            }
        }
    }
    std::printf("[ goldens   ] %zu / %zu HF Gemma 3 tokenizations match (gemma4 declaration); %zu / %zu without "
                "added-token texts\n", pass, n, plain_pass, plain_n);
    EXPECT_EQ(plain_pass, plain_n);
}

// decode(encode(x)) == x for every golden text (HF's decode round-trips all of them: no normalizer besides
// space escaping, byte fallback for everything else).
TEST(TokenizerGemma, RoundTrip) {
    const Tokenizer& t = gemma3_spm();
    size_t n = 0;
    for (const auto& c : goldens()["cases"]) {
        const std::string s = c["text"].get<std::string>();
        EXPECT_EQ(t.decode(t.encode(s, false, true)), s) << nlohmann::json(s).dump();
        EXPECT_EQ(t.decode(t.encode(s, false, false)), s) << nlohmann::json(s).dump();
        // The goldens' ids decode to the text too.
        EXPECT_EQ(t.decode(c["ids"].get<std::vector<int32_t>>()), s) << nlohmann::json(s).dump();
        ++n;
    }
    EXPECT_GT(n, 100u);
    // BOS is rendered only on request.
    const auto ids = t.encode("Hello world", true, true);
    ASSERT_EQ(ids.front(), 2);
    EXPECT_EQ(t.decode(ids, false), "Hello world");
    EXPECT_EQ(t.decode(ids, true), "<bos>Hello world");
}

TEST(TokenizerGemma, ByteFallbackAndStreaming) {
    const Tokenizer& t = gemma3_spm();
    // A private-use character is not in the vocabulary: four <0xXX> tokens.
    const std::string s = "a\xf3\xb0\x80\x81z";  // U+F0001
    const auto ids = t.encode(s, false, false);
    size_t bytes = 0;
    for (int32_t id : ids) bytes += t.token_type(id) == TokenType::Byte;
    EXPECT_EQ(bytes, 4u) << show(ids);
    EXPECT_EQ(t.decode(ids), s);
    StreamDecoder sd(t);
    std::string out;
    std::vector<std::string> chunks;
    for (int32_t id : ids) {
        chunks.push_back(sd.push(id));
        out += chunks.back();
    }
    out += sd.flush();
    EXPECT_EQ(out, s);
    for (const auto& c : chunks) EXPECT_EQ(zinc::tokenizer::unicode::sanitize_utf8(c), c);  // never split
    // Spaces: U+2581 in the vocabulary, spaces in the text.
    EXPECT_EQ(t.token_str(t.encode(" x", false, false).front()).substr(0, 3), "\xe2\x96\x81");
}

// The gemma4 fixture (llama.cpp's converter, truncated Gemma 3 vocabulary): its tokenizer gives meta.json's ids.
TEST(TokenizerGemma, Gemma4FixturePrompt) {
    const std::string dir = std::string(ZINC_FIXTURES_DIR) + "/gemma4";
    const auto meta = nlohmann::json::parse(slurp(dir + "/meta.json"));
    for (const char* file : {"gemma4-f32.gguf", "gemma4-q8_0.gguf"}) {
        const zinc::gguf::File f(dir + "/" + file);
        const Tokenizer t = Tokenizer::from_gguf(f);
        EXPECT_EQ(t.model(), "gemma4");
        EXPECT_EQ(t.kind(), TokenizerKind::Gemma4);
        EXPECT_EQ(t.pre(), "gemma4");
        EXPECT_GT(t.n_merges(), 0u);
        EXPECT_TRUE(t.add_bos());
        const std::string prompt = meta["prompt"].get<std::string>();
        const auto want = meta["prompt_ids"].get<std::vector<int32_t>>();
        const auto all = t.encode(prompt, true, true);
        // meta.json keeps the first 64 ids (the logits' rows): the prompt is cut there.
        ASSERT_GE(all.size(), want.size());
        const std::vector<int32_t> got(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(want.size()));
        EXPECT_EQ(got, want) << file << "\n got " << show(got) << "\nwant " << show(want);
        EXPECT_EQ(t.decode(all, false), prompt);
        // Newline runs are tokens of their own.
        const auto nl = t.encode("a\n\nb", false, false);
        ASSERT_EQ(nl.size(), 3u) << show(nl);
        EXPECT_EQ(t.token_str(nl[1]), "\n\n");
    }
}

}  // namespace
