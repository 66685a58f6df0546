// The tokenizer on GGUFs written by llama.cpp's own converter (tests/fixtures, see its README.md):
//  - hf_import of the same HF vocabulary must give the same tokenizer.* metadata the converter wrote;
//  - the prompt must tokenize to the ids transformers used.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer_test_util.h"

using namespace zinc;

namespace {

#ifdef ZINC_FIXTURES_DIR
std::string fixtures_dir() { return ZINC_FIXTURES_DIR; }
#else
std::string fixtures_dir() { return std::string(ZINC_TEST_DATA_DIR) + "/../fixtures"; }
#endif

nlohmann::json read_json(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return nlohmann::json::parse(ss.str());
}

}  // namespace

TEST(TokenizerFixture, ImportMatchesConverter) {
    const std::string gguf_path = fixtures_dir() + "/qwen3/qwen3-f32.gguf";
    if (!std::filesystem::exists(gguf_path)) GTEST_SKIP() << "no " << gguf_path;
    const gguf::File f(gguf_path);
    const nlohmann::json tok = read_json(fixtures_dir() + "/vocab/qwen3-2k/tokenizer.json");
    const nlohmann::json tcfg = read_json(fixtures_dir() + "/vocab/qwen3-2k/tokenizer_config.json");
    const nlohmann::json cfg = read_json(fixtures_dir() + "/qwen3/hf_config.json");
    tokenizer::HfImportOptions opts;
    opts.pre = "qwen2";  // the converter cannot detect a truncated vocabulary's pre-tokenizer; the fixture forces it
    const auto kv = tokenizer::import_hf_tokenizer(tok, &tcfg, &cfg, opts);

    std::vector<std::string> theirs, ours;
    for (const auto& e : f.metadata())
        if (e.key.rfind("tokenizer.", 0) == 0) theirs.push_back(e.key);
    for (const auto& e : kv) ours.push_back(e.key);
    EXPECT_EQ(ours, theirs);
    for (const auto& e : kv) {
        const gguf::Value* v = f.find(e.key);
        ASSERT_NE(v, nullptr) << e.key;
        EXPECT_EQ(v->type(), e.value.type()) << e.key;
        if (v->is_array()) {
            EXPECT_EQ(v->element_type(), e.value.element_type()) << e.key;
        }
        EXPECT_TRUE(*v == e.value) << e.key << ": converter " << v->to_string() << " vs ours " << e.value.to_string();
    }
}

TEST(TokenizerFixture, PromptIds) {
    for (const char* fam : {"qwen3", "qwen35", "gpt-oss"}) {
        const std::string dir = fixtures_dir() + "/" + fam;
        const std::string gguf_path = dir + "/" + fam + "-f32.gguf";
        if (!std::filesystem::exists(gguf_path)) continue;
        const gguf::File f(gguf_path);
        const auto t = tokenizer::Tokenizer::from_gguf(f);
        const nlohmann::json meta = read_json(dir + "/meta.json");
        const auto want = meta["prompt_ids"].get<std::vector<int32_t>>();
        auto got = t.encode(meta["prompt"].get<std::string>(), true, true);
        ASSERT_GE(got.size(), want.size()) << fam;
        got.resize(want.size());  // the fixtures keep the first 64 tokens
        EXPECT_EQ(got, want) << fam;
    }
}
