// Streaming parsers that split a model's generated text into reasoning, answer and tool calls, as
// each model family writes them (docs/formats.md §6). Feed the decoded text pieces as
// they arrive (with the format's markers rendered, not skipped); every event is reported as soon as
// the text decides it, and the concatenated result is the same however the text was cut.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/events.h"
#include "chat/stop_strings.h"

namespace zinc::chat {

enum class OutputFormat {
    plain,       // everything is answer text, unchanged
    qwen,        // <think>…</think> reasoning; <tool_call>…</tool_call> with JSON (Qwen3, Hermes) or
                 // <function=…> XML (Qwen3.5/3.6) inside; also DeepSeek R1's reasoning
    harmony,     // gpt-oss: <|channel|>analysis / final / commentary to=functions.NAME messages
    gemma4,      // <|channel>thought…<channel|> reasoning; <|tool_call>call:NAME{…}<tool_call|>
    llama3_json, // Llama 3.x: the whole answer is {"name": …, "parameters": {…}}, maybe after <|python_tag|>
    mistral,     // [THINK]…[/THINK] reasoning; [TOOL_CALLS]NAME[ARGS]{…} (Mistral Small 3.2, Ministral 3,
                 // Magistral; [CALL_ID]ID before [ARGS] in some) or [TOOL_CALLS][{"name": …, "arguments": …}]
                 // (Mistral Nemo, Small 3.0/3.1)
};

const char* to_string(OutputFormat f);

struct ParserOptions {
    // The prompt already opened the reasoning block (Qwen3.5's generation prompt ends in
    // "<think>\n", DeepSeek R1's too): the output starts inside the reasoning.
    bool start_in_reasoning = false;
};

class OutputParser {
public:
    virtual ~OutputParser() = default;
    // Adds a piece of generated text; appends the events it decides to `out`.
    virtual void feed(std::string_view piece, std::vector<Event>& out) = 0;
    // The output has ended (end-of-turn token, stop string, length limit): releases held text and
    // reports an unfinished tool call.
    virtual void finish(std::vector<Event>& out) = 0;
};

std::unique_ptr<OutputParser> make_output_parser(OutputFormat format, ParserOptions options = {});

// The format a model writes, from its chat template (tokenizer.chat_template) and, where the
// template says nothing, its general.architecture. First match wins:
//   template has <|channel|> or <|start|>…<|message|>, or architecture gpt-oss  -> harmony
//   template has <|turn> or <|channel>, or architecture gemma4                -> gemma4
//   template has <think> or <tool_call>, or architecture qwen3/qwen35/qwen35moe -> qwen
//   template has [TOOL_CALLS] or [THINK], or architecture mistral3             -> mistral
//   template has <|python_tag|> or <|start_header_id|>                        -> llama3_json
//   otherwise                                                                 -> plain
OutputFormat detect_output_format(std::string_view chat_template, std::string_view architecture = {});

// Whether a rendered prompt leaves the model inside the reasoning block: its end (white space
// aside) is an opening reasoning marker. A prompt rendered with thinking off ends with a closed,
// empty block instead ("<think>\n\n</think>\n\n", "<|channel>thought\n<channel|>"), so the model
// starts in the answer.
bool prompt_opens_reasoning(OutputFormat format, std::string_view prompt);

// The text that closes a reasoning block in this format ("\n</think>\n\n", Gemma 4's "<channel|>", Harmony's end of
// the analysis message and start of the final one), which a spent reasoning budget puts into the output; empty for
// formats without reasoning.
std::string_view reasoning_end(OutputFormat format);

// Stop strings in front of an output parser: what a generation loop feeds its decoded pieces to.
class ChatStream {
public:
    ChatStream(OutputFormat format, ParserOptions options, std::vector<std::string> stops);

    void feed(std::string_view piece, std::vector<Event>& out);
    void finish(std::vector<Event>& out);
    // A stop string matched: the caller should stop generating.
    bool stopped() const { return stops_.stopped(); }

private:
    StopStrings stops_;
    std::unique_ptr<OutputParser> parser_;
    bool finished_ = false;
};

// The whole text through a fresh parser: for a caller that has the complete output.
ParsedOutput parse_output(OutputFormat format, std::string_view text, ParserOptions options = {});

}  // namespace zinc::chat
