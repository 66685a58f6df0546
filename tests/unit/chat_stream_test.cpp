// Model outputs of each family split into reasoning, answer and tool calls, with stop strings in
// front. Every case is fed whole, cut in two at every byte, byte by byte and in random pieces; the
// events (adjacent text joined) must be the same every time.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/output_parser.h"
#include "chat_split_util.h"

using namespace zinc::chat;
using zinc::chat::test::all_splits;
using zinc::chat::test::describe;
using json = nlohmann::json;

namespace {

// Adjacent events of one text kind, or argument pieces of one call, joined into one event.
std::vector<Event> normalized(const std::vector<Event>& events) {
    std::vector<Event> out;
    for (const Event& e : events) {
        const bool text = e.kind == EventKind::reasoning || e.kind == EventKind::answer ||
                          e.kind == EventKind::tool_call_args;
        if (text && !out.empty() && out.back().kind == e.kind && out.back().index == e.index) {
            out.back().text += e.text;
        } else if (!text || !e.text.empty()) {
            out.push_back(e);
        }
    }
    return out;
}

std::vector<Event> run(OutputFormat f, ParserOptions o, const std::vector<std::string>& stops,
                       const test::Pieces& pieces, bool* stopped = nullptr) {
    ChatStream s(f, o, stops);
    std::vector<Event> events;
    for (const auto& p : pieces) s.feed(p, events);
    s.finish(events);
    if (stopped) *stopped = s.stopped();
    return events;
}

std::string show(const std::vector<Event>& events) {
    std::string s;
    for (const Event& e : events) {
        s += std::string(to_string(e.kind)) + "(" + std::to_string(e.index) + "): " + e.text + "\n";
    }
    return s;
}

struct Case {
    OutputFormat format;
    std::string text;
    ParserOptions options = {};
    std::vector<std::string> stops = {};
};

// Runs every split and checks they agree with the whole text; returns the whole text's result.
ParsedOutput parse_every_split(const Case& c) {
    const auto whole = normalized(run(c.format, c.options, c.stops, {c.text}));
    for (const auto& pieces : all_splits(c.text)) {
        const auto got = normalized(run(c.format, c.options, c.stops, pieces));
        EXPECT_EQ(got, whole) << "pieces " << describe(pieces) << "\ngot:\n" << show(got) << "want:\n" << show(whole);
        if (got != whole) break;  // one failure report per case is enough
    }
    return collect(whole);
}

ToolCall call(std::string name, const json& args) { return {std::move(name), args.dump()}; }

// Arguments compared as JSON, whatever their spacing.
void expect_calls(const ParsedOutput& got, const std::vector<ToolCall>& want) {
    ASSERT_EQ(got.tool_calls.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(got.tool_calls[i].name, want[i].name);
        EXPECT_EQ(json::parse(got.tool_calls[i].arguments), json::parse(want[i].arguments)) << got.tool_calls[i].arguments;
    }
}

const ParserOptions in_reasoning{.start_in_reasoning = true};

}  // namespace

// ---- Qwen3 / Qwen3.5 / DeepSeek R1 ----

TEST(ChatStreamQwen, ReasoningThenAnswer) {
    const auto r = parse_every_split({OutputFormat::qwen,
                                      "<think>\nThe user asks 2+2.\nThat is 4.\n</think>\n\nThe answer is **4**."});
    EXPECT_EQ(r.reasoning, "The user asks 2+2.\nThat is 4.");
    EXPECT_EQ(r.answer, "The answer is **4**.");
    EXPECT_TRUE(r.tool_calls.empty());
}

TEST(ChatStreamQwen, PromptOpenedTheThinkBlock) {
    // Qwen3.5's generation prompt ends with "<think>\n": the output starts inside the reasoning.
    const auto r = parse_every_split({OutputFormat::qwen, "Let me think < about > it.\n</think>\n\nHello!", in_reasoning});
    EXPECT_EQ(r.reasoning, "Let me think < about > it.");
    EXPECT_EQ(r.answer, "Hello!");
}

TEST(ChatStreamQwen, AnswerOnly) {
    // enable_thinking=false: the prompt holds the empty think block, the output is the answer.
    const auto r = parse_every_split({OutputFormat::qwen, "Paris is the capital of France.\n"});
    EXPECT_EQ(r.reasoning, "");
    EXPECT_EQ(r.answer, "Paris is the capital of France.");
    const auto e = parse_every_split({OutputFormat::qwen, "<think>\n\n</think>\n\nShort."});
    EXPECT_EQ(e.reasoning, "");
    EXPECT_EQ(e.answer, "Short.");
}

TEST(ChatStreamQwen, SeveralToolCalls) {
    const std::string text =
        "<think>\nI need the weather in two cities; <tool_call> is how I call.\n</think>\n\n"
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>\n"
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\"}}\n</tool_call>";
    const auto r = parse_every_split({OutputFormat::qwen, text});
    EXPECT_EQ(r.reasoning, "I need the weather in two cities; <tool_call> is how I call.");
    EXPECT_EQ(r.answer, "");
    expect_calls(r, {call("get_weather", {{"city", "Paris"}, {"unit", "c"}}), call("get_weather", {{"city", "Lyon"}})});
    EXPECT_TRUE(r.errors.empty());
}

TEST(ChatStreamQwen, TextAroundAToolCall) {
    const auto r = parse_every_split(
        {OutputFormat::qwen, "Let me check.\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\nDone."});
    EXPECT_EQ(r.answer, "Let me check.Done.");
    expect_calls(r, {call("now", json::object())});
}

TEST(ChatStreamQwen, ArgumentsAsAJsonString) {
    const auto r = parse_every_split(
        {OutputFormat::qwen, "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>"});
    expect_calls(r, {call("f", {{"x", 1}})});
}

TEST(ChatStreamQwen, Qwen35XmlToolCalls) {
    const std::string text =
        "Thinking about it.\n</think>\n\n"
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n<parameter=opts>\n{\"metric\": true}\n</parameter>\n</function>\n</tool_call>\n"
        "<tool_call>\n<function=list_files>\n</function>\n</tool_call>";
    const auto r = parse_every_split({OutputFormat::qwen, text, in_reasoning});
    EXPECT_EQ(r.reasoning, "Thinking about it.");
    EXPECT_EQ(r.answer, "");
    expect_calls(r, {call("get_weather", {{"city", "New York"}, {"days", 3}, {"opts", {{"metric", true}}}}),
                     call("list_files", json::object())});
}

TEST(ChatStreamQwen, MalformedToolCallIsAnError) {
    const std::string bad = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": }\n</tool_call>";
    const auto r = parse_every_split(
        {OutputFormat::qwen, bad + "\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>"});
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_EQ(r.errors[0].raw, bad);
    EXPECT_NE(r.errors[0].message.find("not valid JSON"), std::string::npos) << r.errors[0].message;
    expect_calls(r, {call("g", json::object())});
    const auto no_name = parse_every_split({OutputFormat::qwen, "<tool_call>{\"arguments\": {}}</tool_call>"});
    ASSERT_EQ(no_name.errors.size(), 1u);
    EXPECT_NE(no_name.errors[0].message.find("name"), std::string::npos);
}

TEST(ChatStreamQwen, UnfinishedToolCallIsAnError) {
    const auto r = parse_every_split({OutputFormat::qwen, "Sure.<tool_call>\n{\"name\": \"f\", \"argu"});
    EXPECT_EQ(r.answer, "Sure.");
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_EQ(r.errors[0].raw, "<tool_call>\n{\"name\": \"f\", \"argu");
}

TEST(ChatStreamQwen, StopStrings) {
    // At the end, in the middle (the rest is dropped, a tool call after it too), and a partial
    // stop string that never completes, which is text at the end.
    auto r = parse_every_split({OutputFormat::qwen, "<think>\nhm\n</think>\n\nFour.<|user|>", {}, {"<|user|>"}});
    EXPECT_EQ(r.answer, "Four.");
    r = parse_every_split({OutputFormat::qwen,
                           "<think>\nhm\n</think>\n\nFour. STOP and <tool_call>{\"name\":\"f\"}</tool_call>", {}, {"STOP"}});
    EXPECT_EQ(r.answer, "Four.");
    EXPECT_TRUE(r.tool_calls.empty());
    r = parse_every_split({OutputFormat::qwen, "A stop in reasoning STOP cuts everything", in_reasoning, {"STOP"}});
    EXPECT_EQ(r.reasoning, "A stop in reasoning");
    EXPECT_EQ(r.answer, "");
    r = parse_every_split({OutputFormat::qwen, "Ends with ST", {}, {"STOP"}});
    EXPECT_EQ(r.answer, "Ends with ST");
}

TEST(ChatStreamQwen, PartialMarkerAtTheEndIsText) {
    const auto r = parse_every_split({OutputFormat::qwen, "Compare a<b and </thi"});
    EXPECT_EQ(r.answer, "Compare a<b and </thi");
}

// ---- gpt-oss Harmony ----

TEST(ChatStreamHarmony, AnalysisThenFinal) {
    const auto r = parse_every_split(
        {OutputFormat::harmony,
         "<|channel|>analysis<|message|>User asks 2+2. Simple: 4.<|end|>"
         "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>"});
    EXPECT_EQ(r.reasoning, "User asks 2+2. Simple: 4.");
    EXPECT_EQ(r.answer, "2 + 2 = 4.");
}

TEST(ChatStreamHarmony, FinalOnlyWithoutTheReturnMarker) {
    // <|return|> is an end-of-generation token: a caller that stops on its id never renders it.
    const auto r = parse_every_split({OutputFormat::harmony, "<|channel|>final<|message|>Hello there!"});
    EXPECT_EQ(r.reasoning, "");
    EXPECT_EQ(r.answer, "Hello there!");
}

TEST(ChatStreamHarmony, ToolCallOnTheCommentaryChannel) {
    const auto r = parse_every_split(
        {OutputFormat::harmony,
         "<|channel|>analysis<|message|>Need weather; call get_weather.<|end|>"
         "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
         "<|message|>{\"city\":\"Paris\"}<|call|>"});
    EXPECT_EQ(r.reasoning, "Need weather; call get_weather.");
    EXPECT_EQ(r.answer, "");
    expect_calls(r, {call("get_weather", {{"city", "Paris"}})});
}

TEST(ChatStreamHarmony, RecipientAfterTheRoleAndCallWithoutMarker) {
    const auto r = parse_every_split(
        {OutputFormat::harmony,
         "<|channel|>commentary<|message|>Checking both.<|end|>"
         "<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{\"q\": [1, 2]}"});
    EXPECT_EQ(r.answer, "Checking both.");  // a preamble on commentary is shown to the user
    expect_calls(r, {call("lookup", {{"q", {1, 2}}})});
}

TEST(ChatStreamHarmony, ToolCallEventsStream) {
    // The call's name is known at <|message|>: it is announced before the arguments are complete.
    auto parser = make_output_parser(OutputFormat::harmony);
    std::vector<Event> ev;
    parser->feed("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\":", ev);
    ASSERT_EQ(ev.size(), 2u);
    EXPECT_EQ(ev[0], (Event{EventKind::tool_call_begin, "f", {}, 0}));
    EXPECT_EQ(ev[1], (Event{EventKind::tool_call_args, "{\"a\":", {}, 0}));
    parser->feed(" 1}<|call|>", ev);
    EXPECT_EQ(ev.back(), (Event{EventKind::tool_call_end, {}, {}, 0}));
}

TEST(ChatStreamHarmony, MalformedArgumentsAreAnError) {
    const auto r = parse_every_split(
        {OutputFormat::harmony, "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"city\": Paris}<|call|>"});
    EXPECT_TRUE(r.tool_calls.empty());
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_EQ(r.errors[0].raw, "{\"city\": Paris}");
}

TEST(ChatStreamHarmony, BuiltInToolRecipientKeepsItsName) {
    const auto r = parse_every_split(
        {OutputFormat::harmony, "<|channel|>analysis to=browser.search code<|message|>{\"query\":\"zinc\"}<|call|>"});
    expect_calls(r, {call("browser.search", {{"query", "zinc"}})});
}

TEST(ChatStreamHarmony, StopStrings) {
    auto r = parse_every_split({OutputFormat::harmony,
                                "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>one\n\ntwo",
                                {}, {"\n\n"}});
    EXPECT_EQ(r.reasoning, "x");
    EXPECT_EQ(r.answer, "one");
    r = parse_every_split({OutputFormat::harmony, "<|channel|>final<|message|>one\n", {}, {"\n\n"}});
    EXPECT_EQ(r.answer, "one");  // the held "\n" is released at the end, then trimmed as the answer's end
}

TEST(ChatStreamHarmony, TextWithoutAHeaderIsTheAnswer) {
    const auto r = parse_every_split({OutputFormat::harmony, "no header at all"});
    EXPECT_EQ(r.answer, "no header at all");
}

// ---- Gemma 4 ----

TEST(ChatStreamGemma4, ThoughtThenAnswer) {
    const auto r = parse_every_split(
        {OutputFormat::gemma4, "<|channel>thought\nThe user greets me.\nReply kindly.<channel|>Hello! How can I help?"});
    EXPECT_EQ(r.reasoning, "The user greets me.\nReply kindly.");
    EXPECT_EQ(r.answer, "Hello! How can I help?");
}

TEST(ChatStreamGemma4, AnswerOnly) {
    // Thinking off: the prompt ends with the empty "<|channel>thought\n<channel|>".
    const auto r = parse_every_split({OutputFormat::gemma4, "Four."});
    EXPECT_EQ(r.answer, "Four.");
    EXPECT_EQ(r.reasoning, "");
}

TEST(ChatStreamGemma4, ToolCalls) {
    const std::string text =
        "<|channel>thought\nCall the tools.<channel|>"
        "<|tool_call>call:get_weather{city:<|\"|>Paris, {FR}<|\"|>,days:3,metric:true}<tool_call|>"
        "<|tool_call>call:search{filters:{lang:<|\"|>fr<|\"|>,tags:[<|\"|>a<|\"|>,<|\"|>b<|\"|>]},q:<|\"|>x<|\"|>}<tool_call|>";
    const auto r = parse_every_split({OutputFormat::gemma4, text});
    EXPECT_EQ(r.reasoning, "Call the tools.");
    EXPECT_EQ(r.answer, "");
    expect_calls(r, {call("get_weather", {{"city", "Paris, {FR}"}, {"days", 3}, {"metric", true}}),
                     call("search", {{"filters", {{"lang", "fr"}, {"tags", {"a", "b"}}}}, {"q", "x"}})});
}

TEST(ChatStreamGemma4, MalformedToolCallIsAnError) {
    const auto r = parse_every_split(
        {OutputFormat::gemma4, "Let me see.<|tool_call>get_weather{city:Paris}<tool_call|>"
                               "<|tool_call>call:f{a:<|\"|>unterminated}<tool_call|>"});
    EXPECT_EQ(r.answer, "Let me see.");
    ASSERT_EQ(r.errors.size(), 2u);
    EXPECT_NE(r.errors[0].message.find("call:"), std::string::npos) << r.errors[0].message;
    EXPECT_EQ(r.errors[1].raw, "<|tool_call>call:f{a:<|\"|>unterminated}<tool_call|>");
}

TEST(ChatStreamGemma4, StopStringSpanningPieces) {
    const auto r = parse_every_split(
        {OutputFormat::gemma4, "<|channel>thought\nok<channel|>Answer.<end_of_turn>junk", {}, {"<end_of_turn>"}});
    EXPECT_EQ(r.reasoning, "ok");
    EXPECT_EQ(r.answer, "Answer.");
}

// ---- Mistral ----

TEST(ChatStreamMistral, ReasoningThenAnswer) {
    const auto r = parse_every_split({OutputFormat::mistral, "[THINK]2+2 is 4; [TOOL_CALLS] not needed.[/THINK]It is 4."});
    EXPECT_EQ(r.reasoning, "2+2 is 4; [TOOL_CALLS] not needed.");
    EXPECT_EQ(r.answer, "It is 4.");
    EXPECT_TRUE(r.tool_calls.empty());
    const auto opened = parse_every_split({OutputFormat::mistral, "Let me see.[/THINK]Yes.", in_reasoning});
    EXPECT_EQ(opened.reasoning, "Let me see.");
    EXPECT_EQ(opened.answer, "Yes.");
}

TEST(ChatStreamMistral, NameArgsCalls) {
    // Mistral Small 3.2, Ministral 3: parallel calls repeat [TOOL_CALLS]; [CALL_ID] may precede [ARGS].
    const std::string text =
        "Checking both.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris [FR]\", \"days\": 3}"
        "[TOOL_CALLS]get_time[CALL_ID]a1b2c3d4e[ARGS]{\"tz\": \"CET\"}";
    const auto r = parse_every_split({OutputFormat::mistral, text});
    EXPECT_EQ(r.answer, "Checking both.");
    expect_calls(r, {call("get_weather", {{"city", "Paris [FR]"}, {"days", 3}}), call("get_time", {{"tz", "CET"}})});
    EXPECT_TRUE(r.errors.empty());
}

TEST(ChatStreamMistral, JsonArrayCalls) {
    // Mistral Nemo, Small 3.0/3.1: one JSON array after [TOOL_CALLS].
    const auto r = parse_every_split(
        {OutputFormat::mistral, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, "
                                "\"id\": \"a1b2c3d4e\"}, {\"name\": \"now\", \"arguments\": {}}]"});
    EXPECT_EQ(r.answer, "");
    expect_calls(r, {call("get_weather", {{"city", "Paris"}}), call("now", json::object())});
}

TEST(ChatStreamMistral, MalformedCallsAreErrors) {
    const auto r = parse_every_split(
        {OutputFormat::mistral, "Hm.[TOOL_CALLS]f[ARGS]{\"a\": [1, 2}[TOOL_CALLS][ARGS]{}[TOOL_CALLS]g[CALL_ID]x1"});
    EXPECT_EQ(r.answer, "Hm.");
    EXPECT_TRUE(r.tool_calls.empty());
    ASSERT_EQ(r.errors.size(), 3u);
    EXPECT_EQ(r.errors[0].raw, "[TOOL_CALLS]f[ARGS]{\"a\": [1, 2}");
    EXPECT_NE(r.errors[1].message.find("no name"), std::string::npos) << r.errors[1].message;
    EXPECT_EQ(r.errors[2].raw, "[TOOL_CALLS]g[CALL_ID]x1");
}

TEST(ChatStreamMistral, StopString) {
    const auto r = parse_every_split({OutputFormat::mistral, "Answer.</s>junk[TOOL_CALLS]f[ARGS]{}", {}, {"</s>"}});
    EXPECT_EQ(r.answer, "Answer.");
    EXPECT_TRUE(r.tool_calls.empty());
}

// ---- Llama 3.x JSON tool calls ----

TEST(ChatStreamLlama3, ToolCallAsTheWholeAnswer) {
    auto r = parse_every_split(
        {OutputFormat::llama3_json, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}"});
    EXPECT_EQ(r.answer, "");
    expect_calls(r, {call("get_weather", {{"city", "Paris"}})});
    r = parse_every_split(
        {OutputFormat::llama3_json, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}"});
    expect_calls(r, {call("f", json::object())});
    r = parse_every_split({OutputFormat::llama3_json,
                           " [{\"name\": \"a\", \"parameters\": {\"x\": 1}}, {\"name\": \"b\", \"arguments\": {}}]"});
    expect_calls(r, {call("a", {{"x", 1}}), call("b", json::object())});
}

TEST(ChatStreamLlama3, PlainAnswerAndJsonThatIsNotACall) {
    auto r = parse_every_split({OutputFormat::llama3_json, "The capital of France is Paris. {not json}"});
    EXPECT_EQ(r.answer, "The capital of France is Paris. {not json}");
    r = parse_every_split({OutputFormat::llama3_json, "{\"capital\": \"Paris\"}"});
    EXPECT_EQ(r.answer, "{\"capital\": \"Paris\"}");
    EXPECT_TRUE(r.tool_calls.empty());
    EXPECT_TRUE(r.errors.empty());
    r = parse_every_split({OutputFormat::llama3_json, "<|python_tag|>{\"name\": \"f\", \"parameters\": {"});
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_EQ(r.errors[0].raw, "<|python_tag|>{\"name\": \"f\", \"parameters\": {");
    r = parse_every_split({OutputFormat::llama3_json, "<|python_", {}, {}});
    EXPECT_EQ(r.answer, "<|python_");
}

TEST(ChatStreamLlama3, StopString) {
    const auto r = parse_every_split({OutputFormat::llama3_json, "Hi there.\nUser: more", {}, {"\nUser:"}});
    EXPECT_EQ(r.answer, "Hi there.");
}

// ---- Plain ----

TEST(ChatStreamPlain, TextIsUnchanged) {
    const auto r = parse_every_split({OutputFormat::plain, "  <think>not special</think>\n", {}, {"zz"}});
    EXPECT_EQ(r.answer, "  <think>not special</think>\n");
}

TEST(ChatStreamQwen, TextIsReportedAsItArrives) {
    // Nothing waits for the end but a possible marker or trailing white space.
    auto parser = make_output_parser(OutputFormat::qwen);
    std::vector<Event> ev;
    parser->feed("<think>\nStep one", ev);
    EXPECT_EQ(normalized(ev), (std::vector<Event>{{EventKind::reasoning, "Step one", {}, -1}}));
    parser->feed(".\n</thi", ev);
    EXPECT_EQ(collect(ev).reasoning, "Step one.");
    parser->feed("nk>\n\nIt is", ev);
    EXPECT_EQ(collect(ev).answer, "It is");
    ChatStream s(OutputFormat::qwen, {}, {"<|im_end|>"});
    s.feed("Done<|im_", ev);
    EXPECT_FALSE(s.stopped());
    s.feed("end|>more", ev);
    EXPECT_TRUE(s.stopped());
}
