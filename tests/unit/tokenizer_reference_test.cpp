// Qwen3 and Tekken tokenizations against reference outputs:
//  - tests/data/tokenizer/{qwen3,tekken}_reference_cases.json, from the independent Python model in
//    tests/data/tokenizer/make_reference_cases.py (regex module + naive BPE);
//  - Hugging Face goldens: tests/fixtures/tokenizers/golden_qwen3.json (HF tokenizers on the full Qwen3
//    tokenizer; see tests/fixtures/README.md).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/unicode.h"
#include "tokenizer_test_util.h"

using zinc::tokenizer::test::qwen3;

namespace {

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::string show(const std::vector<int32_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) {
        if (i) s.push_back(',');
        s.append(std::to_string(v[i]));
    }
    s.push_back(']');
    return s;
}

}  // namespace

TEST(TokenizerReference, Qwen3PythonModel) {
    const auto j = nlohmann::json::parse(slurp(zinc::tokenizer::test::data_dir() + "/qwen3_reference_cases.json"));
    const auto& t = qwen3();
    size_t n = 0, pass = 0;
    for (const auto& c : j["cases"]) {
        const std::string text = c["text"].get<std::string>();
        const auto want = c["ids"].get<std::vector<int32_t>>();
        const auto want_sp = c["ids_special"].get<std::vector<int32_t>>();
        const auto got = t.encode(text, false, false);
        const auto got_sp = t.encode(text, true, true);
        n += 2;
        pass += (got == want) + (got_sp == want_sp);
        EXPECT_EQ(got, want) << "text: " << nlohmann::json(text).dump() << "\n got " << show(got) << "\nwant "
                             << show(want);
        EXPECT_EQ(got_sp, want_sp) << "(parse_special) text: " << nlohmann::json(text).dump();
        EXPECT_EQ(t.decode(got_sp), zinc::tokenizer::unicode::nfc_utf8(text));  // HF normalizes to NFC
    }
    EXPECT_GT(n, 800u);
    std::printf("[ reference ] %zu / %zu Qwen3 reference tokenizations match\n", pass, n);
}

// Mistral's Tekken: its own pre-tokenizer, ignore_merges, 1,000 control tokens, BOS added, no normalizer.
TEST(TokenizerReference, TekkenPythonModel) {
    const auto j = nlohmann::json::parse(slurp(zinc::tokenizer::test::data_dir() + "/tekken_reference_cases.json"));
    const auto& t = zinc::tokenizer::test::tekken();
    EXPECT_EQ(t.pre_info().name, "tekken");
    EXPECT_EQ(t.bos(), 1);
    EXPECT_EQ(t.eos(), 2);
    size_t n = 0, pass = 0;
    for (const auto& c : j["cases"]) {
        const std::string text = c["text"].get<std::string>();
        const auto want = c["ids"].get<std::vector<int32_t>>();
        const auto want_sp = c["ids_special"].get<std::vector<int32_t>>();
        const auto got = t.encode(text, false, false);
        const auto got_sp = t.encode(text, false, true);
        n += 2;
        pass += (got == want) + (got_sp == want_sp);
        EXPECT_EQ(got, want) << "text: " << nlohmann::json(text).dump() << "\n got " << show(got) << "\nwant "
                             << show(want);
        EXPECT_EQ(got_sp, want_sp) << "(parse_special) text: " << nlohmann::json(text).dump();
        EXPECT_EQ(t.decode(got_sp), text);
        const auto with_bos = t.encode(text, true, true);
        ASSERT_FALSE(with_bos.empty());
        EXPECT_EQ(with_bos.front(), 1);  // <s>
    }
    EXPECT_GT(n, 800u);
    std::printf("[ reference ] %zu / %zu Tekken reference tokenizations match\n", pass, n);
}

TEST(TokenizerReference, Nfc) {
    const auto j = nlohmann::json::parse(slurp(zinc::tokenizer::test::data_dir() + "/qwen3_reference_cases.json"));
    size_t n = 0;
    for (const auto& c : j["nfc_cases"]) {
        const std::string in = c[0].get<std::string>(), want = c[1].get<std::string>();
        EXPECT_EQ(zinc::tokenizer::unicode::nfc_utf8(in), want) << nlohmann::json(in).dump();
        ++n;
    }
    EXPECT_GT(n, 100u);
}

// Hugging Face goldens (HF `tokenizers` on the full Qwen3 tokenizer.json), with and without add_special_tokens.
TEST(TokenizerReference, Qwen3HfGoldens) {
    const std::string path = std::string(ZINC_FIXTURES_DIR) + "/tokenizers/golden_qwen3.json";
    const std::string text = slurp(path);
    if (text.empty()) GTEST_SKIP() << "no " << path;
    const auto j = nlohmann::json::parse(text);
    const auto& t = qwen3();
    size_t n = 0, pass = 0;
    for (const auto& c : j["cases"]) {
        const std::string s = c["text"].get<std::string>();
        // HF always splits added tokens out of the text (split_special_tokens=False), so parse_special is on;
        // add_special_tokens maps to add_special.
        for (const bool add_special : {false, true}) {
            const auto want = c[add_special ? "ids_with_special" : "ids"].get<std::vector<int32_t>>();
            const auto got = t.encode(s, add_special, true);
            ++n;
            pass += got == want;
            EXPECT_EQ(got, want) << "add_special=" << add_special << " text: " << nlohmann::json(s).dump()
                                 << "\n got " << show(got) << "\nwant " << show(want);
        }
        // Detokenization gives back the (NFC-normalized) text.
        const auto ids = c["ids"].get<std::vector<int32_t>>();
        EXPECT_EQ(t.decode(ids), zinc::tokenizer::unicode::nfc_utf8(s)) << nlohmann::json(s).dump();
    }
    EXPECT_GE(n, 200u);
    std::printf("[ goldens   ] %zu / %zu HF Qwen3 tokenizations match\n", pass, n);
}

// The hand-written scanners against the split regexes themselves (python `regex` module), per pre-tokenizer.
TEST(TokenizerReference, PreTokenizersMatchRegex) {
    const auto j = nlohmann::json::parse(slurp(zinc::tokenizer::test::data_dir() + "/qwen3_reference_cases.json"));
    size_t n = 0;
    for (const auto& [pre, cases] : j["pretokenize_cases"].items()) {
        const auto info = zinc::tokenizer::find_pre_tokenizer(pre);
        ASSERT_TRUE(info) << pre;
        for (const auto& c : cases) {
            const std::string s = c[0].get<std::string>();
            std::vector<std::string> got;
            for (auto p : zinc::tokenizer::pretokenize_utf8(info->type, s)) got.emplace_back(p);
            EXPECT_EQ(got, c[1].get<std::vector<std::string>>()) << pre << ": " << nlohmann::json(s).dump();
            ++n;
        }
    }
    EXPECT_GE(n, 1500u);
}
