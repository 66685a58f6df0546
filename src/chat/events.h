// What a chat output parser reports while a model's text streams in: reasoning and answer text,
// tool calls, and malformed tool calls. A front end turns these into its own protocol (for a
// server, the deltas of an OpenAI-style stream); `collect` folds a whole stream into one result.
#pragma once

#include <string>
#include <vector>

namespace zinc::chat {

enum class EventKind {
    reasoning,        // text: reasoning (thinking) text, not part of the answer
    answer,           // text: answer text shown to the user
    tool_call_begin,  // text: the function's name; index: the call's number in this output
    tool_call_args,   // text: a piece of the call's arguments, a JSON object once all pieces are joined
    tool_call_end,    // the call with this index is complete and its arguments are valid JSON
    tool_call_error,  // text: why the call is malformed; raw: the model's text of the call
};

struct Event {
    EventKind kind;
    std::string text;
    std::string raw;
    int index = -1;  // tool events only

    bool operator==(const Event&) const = default;
};

struct ToolCall {
    std::string name;
    std::string arguments;  // JSON object text

    bool operator==(const ToolCall&) const = default;
};

struct ToolCallError {
    std::string message;
    std::string raw;

    bool operator==(const ToolCallError&) const = default;
};

// A whole output: what a non-streaming caller wants, and what the tests compare.
struct ParsedOutput {
    std::string reasoning;
    std::string answer;
    std::vector<ToolCall> tool_calls;
    std::vector<ToolCallError> errors;

    bool operator==(const ParsedOutput&) const = default;
};

// Appends text to `out`, extending the last event when it is text of the same kind, so that the
// events of a stream do not depend on how finely it was cut more than they have to.
void append_text(std::vector<Event>& out, EventKind kind, std::string_view text);

// Folds events into one result. A call that began and then failed (streamed arguments that turned
// out not to be JSON) is dropped from tool_calls and listed in errors.
ParsedOutput collect(const std::vector<Event>& events);

const char* to_string(EventKind kind);

}  // namespace zinc::chat
