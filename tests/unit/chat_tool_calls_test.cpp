// Tool-call bodies of each family read into a name and JSON arguments, and the errors for
// malformed ones.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"

using namespace zinc::chat;
using json = nlohmann::json;

TEST(ChatToolCalls, QwenJson) {
    const ToolCall c = parse_qwen_tool_call("\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n");
    EXPECT_EQ(c.name, "get_weather");
    EXPECT_EQ(json::parse(c.arguments), (json{{"city", "Paris"}}));
    EXPECT_EQ(parse_qwen_tool_call("{\"name\": \"f\"}").arguments, "{}");
    EXPECT_THROW(parse_qwen_tool_call("{\"name\": 3, \"arguments\": {}}"), ToolCallSyntaxError);
    EXPECT_THROW(parse_qwen_tool_call("{\"name\": \"f\", \"arguments\": [1]}"), ToolCallSyntaxError);
    EXPECT_THROW(parse_qwen_tool_call("get_weather(city='Paris')"), ToolCallSyntaxError);
}

TEST(ChatToolCalls, QwenXml) {
    const ToolCall c = parse_qwen_tool_call(
        "\n<function=run>\n<parameter=cmd>\nls -l \"x y\"\n</parameter>\n<parameter=n>\n-2.5\n</parameter>\n"
        "<parameter=word>\ntrue story\n</parameter>\n<parameter=multi>\nline 1\nline 2\n</parameter>\n</function>\n");
    EXPECT_EQ(c.name, "run");
    EXPECT_EQ(json::parse(c.arguments),
              (json{{"cmd", "ls -l \"x y\""}, {"n", -2.5}, {"word", "true story"}, {"multi", "line 1\nline 2"}}));
    EXPECT_THROW(parse_qwen_tool_call("<function=f>\n<parameter=a>\n1\n</function>"), ToolCallSyntaxError);
    EXPECT_THROW(parse_qwen_tool_call("<function=f>\n<parameter=a>\n1\n</parameter>\n"), ToolCallSyntaxError);
    EXPECT_THROW(parse_qwen_tool_call("<function=>\n</function>"), ToolCallSyntaxError);
}

TEST(ChatToolCalls, Gemma4) {
    // Strings between <|"|> marks hold anything, braces and quotes included, unescaped.
    const ToolCall c = parse_gemma4_tool_call(
        "call:write_file{content:<|\"|>a \"quoted\", {braced} [text]<|\"|>,mode:null,n:-1e3,path:<|\"|>x.txt<|\"|>,"
        "<|\"|>odd key<|\"|>:false,list:[],obj:{}}");
    EXPECT_EQ(c.name, "write_file");
    EXPECT_EQ(json::parse(c.arguments), (json{{"content", "a \"quoted\", {braced} [text]"},
                                              {"mode", nullptr},
                                              {"n", -1000.0},
                                              {"path", "x.txt"},
                                              {"odd key", false},
                                              {"list", json::array()},
                                              {"obj", json::object()}}));
    EXPECT_EQ(parse_gemma4_tool_call("call:ping{}").arguments, "{}");
    EXPECT_THROW(parse_gemma4_tool_call("call:f{a:Paris}"), ToolCallSyntaxError);       // bare word
    EXPECT_THROW(parse_gemma4_tool_call("call:f{a:1"), ToolCallSyntaxError);            // unclosed
    EXPECT_THROW(parse_gemma4_tool_call("call:f{a:1}}"), ToolCallSyntaxError);          // trailing
    EXPECT_THROW(parse_gemma4_tool_call("call:bad name{a:1}"), ToolCallSyntaxError);
    EXPECT_THROW(parse_gemma4_tool_call("f{a:1}"), ToolCallSyntaxError);
}

TEST(ChatToolCalls, Llama3) {
    auto calls = parse_json_tool_calls("{\"name\": \"f\", \"parameters\": {\"a\": [1]}}");
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0].name, "f");
    EXPECT_EQ(json::parse(calls[0].arguments), (json{{"a", {1}}}));
    EXPECT_THROW(parse_json_tool_calls("[]"), ToolCallSyntaxError);
    EXPECT_THROW(parse_json_tool_calls("{\"parameters\": {}}"), ToolCallSyntaxError);
}

TEST(ChatToolCalls, HarmonyArgumentsMustBeAnObject) {
    EXPECT_EQ(check_json_arguments(" {\"a\": 1} "), "{\"a\":1}");
    EXPECT_THROW(check_json_arguments("[1]"), ToolCallSyntaxError);
    EXPECT_THROW(check_json_arguments("{\"a\": }"), ToolCallSyntaxError);
}
