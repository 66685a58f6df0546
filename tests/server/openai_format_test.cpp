// The server's OpenAI shapes without a model: a Qwen-format output with reasoning and a tool call, parsed by the chat
// layer as the server parses a generation, becomes the message (or, streamed in pieces, the deltas) that OpenAI's
// clients expect; logprobs in both forms with a real vocabulary; the request fields' checks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/output_parser.h"
#include "gguf/reader.h"
#include "server/openai.h"
#include "server/request.h"
#include "tokenizer/tokenizer.h"

namespace {

using zinc::server::json;
namespace server = zinc::server;
namespace chat = zinc::chat;

const std::string kOutput =
    "<think>\nThe user wants the weather.\n</think>\n\nLet me look.\n<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>";

TEST(ServeFormat, ToolCallInTheWholeMessage) {
    const chat::ParsedOutput out = chat::parse_output(chat::OutputFormat::qwen, kOutput);
    const json m = server::chat_message(out, 7, 1);
    EXPECT_EQ(m["role"], "assistant");
    EXPECT_EQ(m["content"], "Let me look.");
    EXPECT_EQ(m["reasoning_content"], "The user wants the weather.");
    ASSERT_EQ(m["tool_calls"].size(), 1u);
    const json& call = m["tool_calls"][0];
    EXPECT_EQ(call["id"], "call_7_1_0");
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["function"]["name"], "get_weather");
    EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()),
              json::parse(R"({"city": "Paris", "unit": "celsius"})"));
}

// The stream cut anywhere gives deltas that a client joins (tool calls by index) into the whole message.
TEST(ServeFormat, StreamedDeltasJoinIntoTheMessage) {
    const json whole = server::chat_message(chat::parse_output(chat::OutputFormat::qwen, kOutput), 3, 0);
    for (size_t step : {1, 3, 7, 64}) {
        chat::ChatStream stream(chat::OutputFormat::qwen, {}, {});
        std::vector<chat::Event> events;
        for (size_t i = 0; i < kOutput.size(); i += step) stream.feed(kOutput.substr(i, step), events);
        stream.finish(events);
        json joined = {{"role", "assistant"}, {"content", ""}};
        std::string reasoning;
        for (const chat::Event& e : events) {
            const json d = server::chat_delta(e, 3, 0);
            if (d.is_null()) continue;
            if (d.contains("content"))
                joined["content"] = joined["content"].get<std::string>() + d["content"].get<std::string>();
            if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
            for (const json& tc : d.value("tool_calls", json::array())) {
                const size_t i = tc["index"].get<size_t>();
                if (!joined.contains("tool_calls")) joined["tool_calls"] = json::array();
                while (joined["tool_calls"].size() <= i)
                    joined["tool_calls"].push_back({{"function", {{"name", ""}, {"arguments", ""}}}});
                json& slot = joined["tool_calls"][i];
                if (tc.contains("id")) slot["id"] = tc["id"];
                if (tc.contains("type")) slot["type"] = tc["type"];
                slot["function"]["name"] = slot["function"]["name"].get<std::string>() +
                                           tc["function"].value("name", std::string());
                slot["function"]["arguments"] = slot["function"]["arguments"].get<std::string>() +
                                                tc["function"].value("arguments", std::string());
            }
        }
        joined["reasoning_content"] = reasoning;
        EXPECT_EQ(joined["content"], whole["content"]) << step;
        EXPECT_EQ(joined["reasoning_content"], whole["reasoning_content"]) << step;
        ASSERT_TRUE(joined.contains("tool_calls")) << step;
        EXPECT_EQ(joined["tool_calls"][0]["id"], whole["tool_calls"][0]["id"]);
        EXPECT_EQ(joined["tool_calls"][0]["type"], "function");
        EXPECT_EQ(joined["tool_calls"][0]["function"]["name"], "get_weather");
        EXPECT_EQ(json::parse(joined["tool_calls"][0]["function"]["arguments"].get<std::string>()),
                  json::parse(whole["tool_calls"][0]["function"]["arguments"].get<std::string>()));
    }
}

// A call that is not JSON is no call: its text stays in the content, as the model wrote it.
TEST(ServeFormat, MalformedToolCallStaysInTheContent) {
    const std::string text = "Sure.<tool_call>\n{\"name\": get_weather}\n</tool_call>";
    const json m = server::chat_message(chat::parse_output(chat::OutputFormat::qwen, text), 1, 0);
    EXPECT_FALSE(m.contains("tool_calls"));
    EXPECT_NE(m["content"].get<std::string>().find("{\"name\": get_weather}"), std::string::npos) << m.dump();
}

TEST(ServeFormat, LogprobsInBothForms) {
    const auto tok =
        zinc::tokenizer::Tokenizer::from_gguf(zinc::gguf::File(ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf"));
    const std::vector<int32_t> ids = tok.encode("Hello wörld", false, false);
    std::vector<server::TokenLogprob> lps;
    for (int32_t id : ids) lps.push_back({id, -0.5f, {{id, -0.5f}, {ids[0] == id ? ids.back() : ids[0], -1.5f}}});
    const json chat = server::chat_logprobs(lps, tok);
    ASSERT_EQ(chat["content"].size(), ids.size());
    std::string bytes;
    for (const json& t : chat["content"]) {
        EXPECT_EQ(t["logprob"], -0.5f);
        EXPECT_EQ(t["top_logprobs"].size(), 2u);
        EXPECT_EQ(t["top_logprobs"][0]["token"], t["token"]);
        for (const json& b : t["bytes"]) bytes += char(b.get<int>());
    }
    EXPECT_EQ(bytes, "Hello wörld");

    size_t offset = 5;  // after an echoed prompt of five bytes
    const json legacy = server::completion_logprobs(lps, tok, offset);
    EXPECT_EQ(legacy["tokens"].size(), ids.size());
    EXPECT_EQ(legacy["text_offset"][0], 5);
    EXPECT_EQ(offset, 5 + std::string("Hello wörld").size());
    EXPECT_EQ(legacy["top_logprobs"][0].size(), 2u);
    // Pieces that are only part of a character are still written as valid JSON (U+FFFD).
    EXPECT_TRUE(json::accept(server::text_of(legacy)));
}

TEST(ServeFormat, RequestFields) {
    const json body = json::parse(R"({"a": 3, "b": 3.0, "c": 3.5, "d": "3", "e": null, "t": true,
                                      "big": 18446744073709551615, "stop": ["x", "y"]})");
    EXPECT_EQ(server::integer(body, "a", 0, 10, -1), 3);
    EXPECT_EQ(server::integer(body, "b", 0, 10, -1), 3);  // JavaScript writes 3 as 3.0 at times
    EXPECT_THROW(server::integer(body, "c", 0, 10, -1), server::BadRequest);
    EXPECT_THROW(server::integer(body, "d", 0, 10, -1), server::BadRequest);
    EXPECT_THROW(server::integer(body, "a", 4, 10, -1), server::BadRequest);
    EXPECT_THROW(server::integer(body, "big", 0, INT64_MAX, -1), server::BadRequest);
    EXPECT_EQ(server::integer(body, "e", 0, 10, -1), -1);
    EXPECT_EQ(server::integer(body, "missing", 0, 10, -1), -1);
    EXPECT_EQ(server::number(body, "c", 0, 10, 0), 3.5);
    EXPECT_THROW(server::number(body, "t", 0, 10, 0), server::BadRequest);
    EXPECT_TRUE(server::boolean(body, "t", false));
    EXPECT_THROW(server::boolean(body, "a", false), server::BadRequest);
    EXPECT_EQ(server::stop_strings(body), (std::vector<std::string>{"x", "y"}));
    try {
        server::stop_strings(json::parse(R"({"stop": 5})"));
        FAIL();
    } catch (const server::BadRequest& e) {
        EXPECT_EQ(e.param, "stop");
    }
    EXPECT_THROW(server::parse_object("[1]"), server::BadRequest);
    EXPECT_THROW(server::parse_object("{\"a\": \"\xff\"}"), server::BadRequest);
    try {
        server::check_prompt_length(4096, 4096, "messages");
        FAIL();
    } catch (const server::BadRequest& e) {
        EXPECT_EQ(e.code, "context_length_exceeded");
    }
    server::Limits limits;
    limits.max_tokens = 100;
    EXPECT_EQ(server::max_tokens(json::object(), limits), 100);
    EXPECT_EQ(server::max_tokens(json::parse(R"({"max_tokens": 7, "max_completion_tokens": 9})"), limits), 9);
    EXPECT_THROW(server::max_tokens(json::parse(R"({"max_tokens": 101})"), limits), server::BadRequest);
}

}  // namespace
