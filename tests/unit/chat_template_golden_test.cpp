// Every chat template in tests/data/chat/templates/ rendered for every conversation of
// template_goldens.json (written by tools/chat/make_template_goldens.py with Python's jinja2 the
// way transformers renders) must come out byte for byte the same, also after the messages pass through the form
// `zinc chat` keeps a conversation in (chat::message_of, chat::message_json).
#include <gtest/gtest.h>

#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/prompt.h"
#include "template/chat_template.h"

namespace {

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    EXPECT_TRUE(f) << "cannot open " << path;
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// Where two renders first differ, with the text around it, so a failure says what went wrong.
std::string first_difference(const std::string& want, const std::string& got) {
    size_t i = 0;
    while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
    if (i == want.size() && i == got.size()) return "";
    size_t from = i > 40 ? i - 40 : 0;
    auto quoted = [&](const std::string& s) { return nlohmann::json(s.substr(from, 80)).dump(); };
    return "first difference at byte " + std::to_string(i) + " (want " + std::to_string(want.size()) + " bytes, got " +
           std::to_string(got.size()) + ")\n  want: " + quoted(want) + "\n  got:  " + quoted(got);
}

TEST(ChatTemplateGolden, EveryTemplateAndCaseIsByteIdentical) {
    const std::string dir = ZINC_TEST_DATA_DIR "/chat";
    auto goldens = nlohmann::ordered_json::parse(read_file(dir + "/template_goldens.json"));
    ASSERT_FALSE(goldens.empty());
    for (const auto& g : goldens) {
        std::string name = g["template"].get<std::string>() + "/" + g["case"].get<std::string>();
        SCOPED_TRACE(name);
        zinc::tmpl::ChatRequest req;
        req.messages = g["messages"];
        req.tools = g["tools"];
        req.add_generation_prompt = g["add_generation_prompt"].get<bool>();
        req.variables = g["variables"];
        if (g.contains("now")) req.now = g["now"].get<std::time_t>();
        std::string got;
        try {
            got = zinc::tmpl::render_chat(read_file(dir + "/templates/" + g["template"].get<std::string>() + ".jinja"),
                                          req);
        } catch (const std::exception& e) {
            ADD_FAILURE() << name << ": " << e.what();
            continue;
        }
        std::string diff = first_difference(g["expected"].get<std::string>(), got);
        EXPECT_TRUE(diff.empty()) << name << ": " << diff;
    }
}

// What `zinc chat` keeps of a message (role, content, the assistant's tool calls) renders every golden conversation
// as the messages themselves do; a message without a string role and content, or with a malformed call, is refused.
TEST(ChatTemplateGolden, ChatMessagesRenderAsTheirJson) {
    const std::string dir = ZINC_TEST_DATA_DIR "/chat";
    auto goldens = nlohmann::ordered_json::parse(read_file(dir + "/template_goldens.json"));
    int with_calls = 0;
    for (const auto& g : goldens) {
        std::string name = g["template"].get<std::string>() + "/" + g["case"].get<std::string>();
        SCOPED_TRACE(name);
        zinc::tmpl::ChatRequest req;
        req.messages = nlohmann::ordered_json::array();
        for (const auto& m : g["messages"]) {
            const zinc::tokenizer::ChatMessage kept = zinc::chat::message_of(m);
            with_calls += kept.tool_calls.empty() ? 0 : 1;
            req.messages.push_back(zinc::chat::message_json(kept));
        }
        req.tools = g["tools"];
        req.add_generation_prompt = g["add_generation_prompt"].get<bool>();
        req.variables = g["variables"];
        if (g.contains("now")) req.now = g["now"].get<std::time_t>();
        const std::string source = read_file(dir + "/templates/" + g["template"].get<std::string>() + ".jinja");
        std::string got;
        try {
            got = zinc::tmpl::render_chat(source, req);
        } catch (const std::exception& e) {
            ADD_FAILURE() << name << ": " << e.what();
            continue;
        }
        std::string diff = first_difference(g["expected"].get<std::string>(), got);
        EXPECT_TRUE(diff.empty()) << name << ": " << diff;
    }
    EXPECT_GT(with_calls, 0);  // the goldens do have tool calls
    // Arguments given as JSON text become an object; calls without the "function" wrapper are taken too.
    const auto m = zinc::chat::message_of(nlohmann::json::parse(
        R"({"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": "{\"x\": 1}"}]})"));
    ASSERT_EQ(m.tool_calls.size(), 1u);
    EXPECT_EQ(zinc::chat::message_json(m)["tool_calls"][0]["function"]["arguments"]["x"], 1);
    for (const char* bad : {R"({"role": "user"})", R"({"role": 3, "content": "x"})",
                            R"({"role": "assistant", "content": "", "tool_calls": {}})",
                            R"({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f"}}]})"})
        EXPECT_THROW(zinc::chat::message_of(nlohmann::json::parse(bad)), std::runtime_error) << bad;
}

}  // namespace
