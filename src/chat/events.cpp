#include "chat/events.h"

#include <map>

namespace zinc::chat {

void append_text(std::vector<Event>& out, EventKind kind, std::string_view text) {
    if (text.empty()) return;
    if (!out.empty() && out.back().kind == kind) {
        out.back().text.append(text);
        return;
    }
    out.push_back({kind, std::string(text), {}, -1});
}

ParsedOutput collect(const std::vector<Event>& events) {
    ParsedOutput r;
    std::map<int, ToolCall> open;  // calls begun and not yet ended, by index
    for (const Event& e : events) {
        switch (e.kind) {
        case EventKind::reasoning: r.reasoning += e.text; break;
        case EventKind::answer: r.answer += e.text; break;
        case EventKind::tool_call_begin: open[e.index] = ToolCall{e.text, {}}; break;
        case EventKind::tool_call_args: open[e.index].arguments += e.text; break;
        case EventKind::tool_call_end:
            r.tool_calls.push_back(open[e.index]);
            open.erase(e.index);
            break;
        case EventKind::tool_call_error:
            open.erase(e.index);
            r.errors.push_back({e.text, e.raw});
            break;
        }
    }
    return r;
}

const char* to_string(EventKind kind) {
    switch (kind) {
    case EventKind::reasoning: return "reasoning";
    case EventKind::answer: return "answer";
    case EventKind::tool_call_begin: return "tool_call_begin";
    case EventKind::tool_call_args: return "tool_call_args";
    case EventKind::tool_call_end: return "tool_call_end";
    case EventKind::tool_call_error: return "tool_call_error";
    }
    return "?";
}

}  // namespace zinc::chat
