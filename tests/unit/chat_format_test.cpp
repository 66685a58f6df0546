// Chat prompts against renderings of Qwen3's real Jinja template (tests/data/chat, made by
// tools/chat/make_chat_goldens.py with jinja2 as Hugging Face applies it).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

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
