// hf_import: the GGUF tokenizer metadata written for Qwen3 must match what llama.cpp's converter writes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer_test_util.h"

using namespace zinc;
using zinc::tokenizer::test::qwen3_metadata;

namespace {
const gguf::Value& get(const std::vector<gguf::KeyValue>& kv, std::string_view k) {
    for (const auto& e : kv)
        if (e.key == k) return e.value;
    throw std::runtime_error("missing " + std::string(k));
}
bool has(const std::vector<gguf::KeyValue>& kv, std::string_view k) {
    for (const auto& e : kv)
        if (e.key == k) return true;
    return false;
}
}  // namespace

TEST(TokenizerHfImport, Qwen3Keys) {
    const auto kv = qwen3_metadata();
    std::vector<std::string> keys;
    for (const auto& e : kv) keys.push_back(e.key);
    // Converter order: model, pre, tokens, types, merges, special ids (tokenizer_config, then config.json),
    // add_* flags, chat template.
    EXPECT_EQ(keys, (std::vector<std::string>{
                        "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                        "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.eos_token_id",
                        "tokenizer.ggml.padding_token_id", "tokenizer.ggml.bos_token_id",
                        "tokenizer.ggml.add_bos_token", "tokenizer.chat_template"}));
    EXPECT_EQ(get(kv, "tokenizer.ggml.model").get_string(), "gpt2");
    EXPECT_EQ(get(kv, "tokenizer.ggml.pre").get_string(), "qwen2");
    const auto& tokens = get(kv, "tokenizer.ggml.tokens").get_string_array();
    ASSERT_EQ(tokens.size(), 151936u);
    EXPECT_EQ(tokens[9707], "Hello");
    EXPECT_EQ(tokens[1879], "\xC4\xA0world");
    EXPECT_EQ(tokens[151643], "<|endoftext|>");
    EXPECT_EQ(tokens[151667], "<think>");
    EXPECT_EQ(tokens[151669], "[PAD151669]");
    EXPECT_EQ(tokens[151935], "[PAD151935]");
    const auto& tt = get(kv, "tokenizer.ggml.token_type");
    EXPECT_EQ(tt.element_type(), gguf::ValueType::INT32);
    const auto types = tt.get_int_array<int32_t>();
    EXPECT_EQ(types[9707], 1);
    EXPECT_EQ(types[151643], 3);
    EXPECT_EQ(types[151644], 3);
    EXPECT_EQ(types[151657], 4);  // <tool_call>: added, not special
    EXPECT_EQ(types[151659], 3);  // <|fim_prefix|>: not special, but looks special
    EXPECT_EQ(types[151667], 4);  // <think>
    EXPECT_EQ(types[151669], 5);
    const auto& merges = get(kv, "tokenizer.ggml.merges").get_string_array();
    EXPECT_EQ(merges.size(), 151387u);
    EXPECT_EQ(merges[0], "\xC4\xA0 \xC4\xA0");
    EXPECT_EQ(merges[2], "i n");
    EXPECT_EQ(get(kv, "tokenizer.ggml.bos_token_id").type(), gguf::ValueType::UINT32);
    EXPECT_EQ(get(kv, "tokenizer.ggml.bos_token_id").get_u32(), 151643u);
    EXPECT_EQ(get(kv, "tokenizer.ggml.eos_token_id").get_u32(), 151645u);
    EXPECT_EQ(get(kv, "tokenizer.ggml.padding_token_id").get_u32(), 151643u);
    EXPECT_FALSE(get(kv, "tokenizer.ggml.add_bos_token").get_bool());
    const std::string tmpl = get(kv, "tokenizer.chat_template").get_string();
    EXPECT_NE(tmpl.find("<|im_start|>"), std::string::npos);
}

TEST(TokenizerHfImport, WithoutConfigs) {
    const auto kv = tokenizer::import_hf_tokenizer(tokenizer::test::qwen3_tokenizer_json(), nullptr, nullptr);
    EXPECT_EQ(get(kv, "tokenizer.ggml.tokens").size(), 151669u);
    EXPECT_FALSE(has(kv, "tokenizer.ggml.bos_token_id"));
    EXPECT_FALSE(has(kv, "tokenizer.chat_template"));
    const auto t = tokenizer::Tokenizer::from_metadata(kv);
    EXPECT_EQ(t.encode("Hello world", false, false), (std::vector<int32_t>{9707, 1879}));
}

TEST(TokenizerHfImport, PairMergesAndPreDetection) {
    // A tiny byte-level tokenizer in the newer [left, right] merges format.
    nlohmann::json tok = {
        {"model", {{"type", "BPE"},
                   {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}, {"\xC4\xA0", 3}, {"\xC4\xA0" "ab", 4}}},
                   {"merges", nlohmann::json::array({{"a", "b"}, {" ", "ab"}})}}},
        {"added_tokens", nlohmann::json::array({{{"id", 5}, {"content", "<|x|>"}, {"special", false}},
                                                {{"id", 6}, {"content", "<y>"}, {"special", false}}})},
        {"pre_tokenizer", {{"type", "Sequence"},
                           {"pretokenizers", nlohmann::json::array({
                                                 {{"type", "Split"},
                                                  {"pattern", {{"Regex", R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}}}},
                                                 {{"type", "ByteLevel"}, {"use_regex", false}}})}}},
        {"decoder", {{"type", "ByteLevel"}}},
    };
    EXPECT_EQ(tokenizer::detect_pre_tokenizer(tok), "llama-bpe");
    const auto kv = tokenizer::import_hf_tokenizer(tok, nullptr, nullptr);
    const auto& merges = get(kv, "tokenizer.ggml.merges").get_string_array();
    ASSERT_EQ(merges.size(), 2u);
    EXPECT_EQ(merges[1], "\xC4\xA0 ab");  // literal space encoded as U+0120
    const auto types = get(kv, "tokenizer.ggml.token_type").get_int_array<int32_t>();
    EXPECT_EQ(types, (std::vector<int32_t>{1, 1, 1, 1, 1, 3, 4}));
    // Not byte-level: refused.
    nlohmann::json spm = tok;
    spm["pre_tokenizer"] = {{"type", "Metaspace"}};
    spm["decoder"] = {{"type", "Metaspace"}};
    EXPECT_THROW(tokenizer::import_hf_tokenizer(spm, nullptr, nullptr), tokenizer::Error);
}

TEST(TokenizerHfImport, LoaderErrors) {
    std::vector<gguf::KeyValue> kv;
    EXPECT_THROW(tokenizer::Tokenizer::from_metadata(kv), tokenizer::Error);
    auto add = [&](const char* k, gguf::Value v) { kv.push_back({k, std::move(v)}); };
    add("tokenizer.ggml.model", gguf::Value::of("llama"));
    EXPECT_THROW(tokenizer::Tokenizer::from_metadata(kv), tokenizer::Error);
    kv[0].value = gguf::Value::of("gpt2");
    add("tokenizer.ggml.pre", gguf::Value::of("unknown-pre"));
    add("tokenizer.ggml.tokens", gguf::Value::array(std::vector<std::string>{"a", "b"}));
    add("tokenizer.ggml.merges", gguf::Value::array(std::vector<std::string>{"a b"}));
    EXPECT_THROW(tokenizer::Tokenizer::from_metadata(kv), tokenizer::Error);
    kv[1].value = gguf::Value::of("qwen2");
    add("tokenizer.ggml.token_type", gguf::Value::array(std::vector<int32_t>{1}));
    EXPECT_THROW(tokenizer::Tokenizer::from_metadata(kv), tokenizer::Error);  // size mismatch
    kv.back().value = gguf::Value::array(std::vector<int32_t>{1, 1});
    add("tokenizer.ggml.bos_token_id", gguf::Value::of(uint32_t{99}));  // out of range: ignored
    const auto t = tokenizer::Tokenizer::from_metadata(kv);
    EXPECT_EQ(t.bos(), -1);
    // "ab" is not a token, so the merge is dropped and bytes without tokens vanish.
    EXPECT_EQ(t.encode("ab", false, false), (std::vector<int32_t>{0, 1}));
    EXPECT_EQ(t.encode("ac", false, false), (std::vector<int32_t>{0}));
}

TEST(TokenizerHfImport, TemplateProcessingAddsBos) {
    // Llama 3 style: the post-processor prepends <|begin_of_text|>, so add_bos_token is true.
    nlohmann::json tok = {
        {"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}}, {"merges", {"a b"}}}},
        {"added_tokens", nlohmann::json::array({{{"id", 3}, {"content", "<|begin_of_text|>"}, {"special", true}},
                                                {{"id", 4}, {"content", "<|eot_id|>"}, {"special", true}}})},
        {"pre_tokenizer", {{"type", "ByteLevel"}, {"use_regex", true}}},
        {"post_processor",
         {{"type", "Sequence"},
          {"processors", nlohmann::json::array(
                             {{{"type", "ByteLevel"}},
                              {{"type", "TemplateProcessing"},
                               {"single", nlohmann::json::array({{{"SpecialToken", {{"id", "<|begin_of_text|>"}}}},
                                                                 {{"Sequence", {{"id", "A"}}}}})}}})}}},
    };
    const nlohmann::json tcfg = {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}};
    const auto kv = tokenizer::import_hf_tokenizer(tok, &tcfg, nullptr);
    EXPECT_EQ(get(kv, "tokenizer.ggml.pre").get_string(), "gpt-2");
    EXPECT_EQ(get(kv, "tokenizer.ggml.bos_token_id").get_u32(), 3u);
    EXPECT_EQ(get(kv, "tokenizer.ggml.eos_token_id").get_u32(), 4u);
    EXPECT_TRUE(get(kv, "tokenizer.ggml.add_bos_token").get_bool());
    const auto t = tokenizer::Tokenizer::from_metadata(kv);
    EXPECT_EQ(t.encode("ab", true, true), (std::vector<int32_t>{3, 2}));
    EXPECT_EQ(t.encode("ab", false, true), (std::vector<int32_t>{2}));
    EXPECT_TRUE(t.is_eog(4));
}
