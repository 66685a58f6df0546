// Chat prompts against renderings of Qwen3's real Jinja template (tests/data/chat, made by
// tools/chat/make_chat_goldens.py with jinja2 as Hugging Face applies it).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/reader.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

using namespace zinc::tokenizer;

TEST(ChatFormat, DetectsQwen3TemplateAsChatMLWithThinking) {
    const auto& cfg = zinc::tokenizer::test::qwen3_tokenizer_config();
    EXPECT_EQ(detect_chat_style(cfg.at("chat_template").get<std::string>()), ChatStyle::ChatMLThink);
    EXPECT_EQ(detect_chat_style(""), ChatStyle::ChatML);
    EXPECT_THROW(detect_chat_style("{{ bos_token }}[INST] {{ message }} [/INST]"), Error);
}

TEST(ChatFormat, MatchesTheRealTemplate) {
    std::ifstream f(std::string(ZINC_TEST_DATA_DIR) + "/chat/qwen3_chat_goldens.json");
    const auto cases = nlohmann::json::parse(f);
    ASSERT_GE(cases.size(), 8u);
    for (const auto& c : cases) {
        std::vector<ChatMessage> msgs;
        for (const auto& m : c.at("messages")) msgs.push_back({m.at("role"), m.at("content")});
        ChatOptions o;
        o.add_generation_prompt = c.at("add_generation_prompt");
        o.enable_thinking = c.at("enable_thinking");
        EXPECT_EQ(render_chat(ChatStyle::ChatMLThink, msgs, o), c.at("expected").get<std::string>()) << c.dump();
    }
}

// Gemma 3: renderings of the real template (data/tokenizers/gemma3/tokenizer_config.json.xz) by
// tools/chat/make_chat_goldens.py ... gemma3.
TEST(ChatFormat, Gemma3MatchesTheRealTemplate) {
    const auto cfg = nlohmann::json::parse(
        zinc::tokenizer::test::read_xz(std::string(ZINC_TOKENIZERS_DIR) + "/gemma3/tokenizer_config.json.xz"));
    EXPECT_EQ(detect_chat_style(cfg.at("chat_template").get<std::string>()), ChatStyle::Gemma3);
    std::ifstream f(std::string(ZINC_TEST_DATA_DIR) + "/chat/gemma3_chat_goldens.json");
    const auto cases = nlohmann::json::parse(f);
    ASSERT_GE(cases.size(), 5u);
    for (const auto& c : cases) {
        std::vector<ChatMessage> msgs;
        for (const auto& m : c.at("messages")) msgs.push_back({m.at("role"), m.at("content")});
        ChatOptions o;
        o.add_generation_prompt = c.at("add_generation_prompt");
        EXPECT_EQ(render_chat(ChatStyle::Gemma3, msgs, o), c.at("expected").get<std::string>()) << c.dump();
    }
    EXPECT_THROW(render_chat(ChatStyle::Gemma3, {{"assistant", "x"}}, {}), Error);
}

namespace {
// The conversation docs/formats.md §5.5-5.9 render.
std::vector<ChatMessage> doc_conversation() {
    return {{"system", "You are helpful."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "What is 2+2?"}};
}
}  // namespace

// Gemma 4: expected strings written by hand from docs/formats.md §5.8 (its renderings of google-gemma-4-31B-it's
// template; the real template is not in the repository).
TEST(ChatFormat, Gemma4FromFormatsDoc) {
    EXPECT_EQ(detect_chat_style("{{ bos_token }}{%- for m in messages -%}<|turn>{{ m.role }}\n"), ChatStyle::Gemma4);
    ChatOptions off;
    off.enable_thinking = false;
    EXPECT_EQ(render_chat(ChatStyle::Gemma4, doc_conversation(), off),
              "<bos><|turn>system\nYou are helpful.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\nHello!<turn|>\n"
              "<|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
    ChatOptions on;  // enable_thinking = true (llama.cpp's default)
    EXPECT_EQ(render_chat(ChatStyle::Gemma4, doc_conversation(), on),
              "<bos><|turn>system\n<|think|>\nYou are helpful.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\nHello!"
              "<turn|>\n<|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n");
    // Without a system message and thinking off there is no system turn; historical thoughts are stripped.
    const std::vector<ChatMessage> m2 = {{"user", " Hi "}, {"assistant", "<|channel>thought\nhmm<channel|>Hello!"},
                                         {"user", "Bye"}};
    EXPECT_EQ(render_chat(ChatStyle::Gemma4, m2, off),
              "<bos><|turn>user\nHi<turn|>\n<|turn>model\nHello!<turn|>\n<|turn>user\nBye<turn|>\n<|turn>model\n"
              "<|channel>thought\n<channel|>");
}

// gpt-oss Harmony: expected string written by hand from docs/formats.md §5.9 (its rendering of openai-gpt-oss-120b's
// template with the date 2026-08-18; the real template is not in the repository).
TEST(ChatFormat, HarmonyFromFormatsDoc) {
    EXPECT_EQ(detect_chat_style("{%- for m in messages -%}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>"),
              ChatStyle::Harmony);
    ChatOptions o;
    o.current_date = "2026-08-18";
    EXPECT_EQ(render_chat(ChatStyle::Harmony, doc_conversation(), o),
              "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
              "Knowledge cutoff: 2024-06\nCurrent date: 2026-08-18\n\nReasoning: medium\n\n"
              "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>"
              "<|start|>developer<|message|># Instructions\n\nYou are helpful.\n\n<|end|>"
              "<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|end|>"
              "<|start|>user<|message|>What is 2+2?<|end|><|start|>assistant");
    // No system message: no developer message; reasoning effort; a final assistant turn without a generation
    // prompt ends with <|return|>.
    o.reasoning_effort = "high";
    o.add_generation_prompt = false;
    EXPECT_EQ(render_chat(ChatStyle::Harmony, {{"user", "Hi"}, {"assistant", "Hello!"}}, o),
              "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
              "Knowledge cutoff: 2024-06\nCurrent date: 2026-08-18\n\nReasoning: high\n\n"
              "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>"
              "<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>");
}

// A base model without a chat template or ChatML tokens is written with, not chatted with: the messages are one
// text, a message set apart from the text before it by a space unless either side has white space there.
TEST(ChatFormat, CompletionStyleForBaseModels) {
    const std::vector<ChatMessage> msgs = {{"user", "The old house"}, {"assistant", " stood on the hill."},
                                           {"user", "Nobody"}, {"assistant", "\nlived there"}, {"user", "now."}};
    EXPECT_EQ(render_chat(ChatStyle::Completion, msgs, {}), "The old house stood on the hill. Nobody\nlived there now.");
    EXPECT_THROW(render_chat(ChatStyle::Completion, {{"tool", "{}"}}, {}), Error);
}

TEST(ChatFormat, StyleOfATokenizer) {
    // The built-in Brown model: a cut Qwen3 vocabulary without ChatML markers, no template.
    const auto brown = Tokenizer::from_gguf(zinc::gguf::File(std::string(ZINC_BROWN_DIR) + "/brown-qwen3-5m-bf16.gguf"));
    EXPECT_EQ(chat_style_of(brown), ChatStyle::Completion);
    // The qwen3 fixture's vocabulary has <|im_start|> and its template: ChatML with thinking.
    const auto qwen3 = Tokenizer::from_gguf(zinc::gguf::File(std::string(ZINC_FIXTURES_DIR) + "/qwen3/qwen3-q8_0.gguf"));
    EXPECT_EQ(chat_style_of(qwen3), detect_chat_style(qwen3.chat_template()));
    EXPECT_NE(chat_style_of(qwen3), ChatStyle::Completion);
}
