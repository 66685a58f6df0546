// The body of one tool call, as each family writes it, turned into a name and JSON arguments. The
// streaming parsers find where a call starts and ends; these functions read what is between.
// Errors are thrown as ToolCallSyntaxError with a message saying what is wrong.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "chat/events.h"

namespace zinc::chat {

struct ToolCallSyntaxError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Between <tool_call> and </tool_call>: Hermes/Qwen3 JSON `{"name": …, "arguments": {…}}`
// (arguments may also be a string holding JSON), or Qwen3.5/3.6 XML
// `<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>…</function>`.
ToolCall parse_qwen_tool_call(std::string_view body);

// Between <|tool_call> and <tool_call|>: `call:NAME{key:value,…}` in Gemma 4's notation (the
// template's format_argument): strings between <|"|> marks, bare keys, true/false, numbers,
// nested {…} and […].
ToolCall parse_gemma4_tool_call(std::string_view body);

// A whole Llama 3.x answer (after <|python_tag|>, if any) or what follows Mistral's [TOOL_CALLS] in its
// v3-v7 formats: `{"name": …, "parameters": {…}}` (or "arguments"), or a JSON array of such objects.
std::vector<ToolCall> parse_json_tool_calls(std::string_view text);

// Checks that text is a JSON object (Harmony's message body); returns it compacted.
std::string check_json_arguments(std::string_view text);

}  // namespace zinc::chat
