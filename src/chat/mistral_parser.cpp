// Mistral output (docs/formats.md §6.6):
//   [THINK]reasoning[/THINK]answer[TOOL_CALLS]NAME[ARGS]{…}[TOOL_CALLS]NAME[ARGS]{…}
// as Mistral Small 3.2, Ministral 3, Magistral and Devstral write it ([CALL_ID]ID may stand between the name and
// [ARGS]), or, in the older v3-v7 formats of Mistral Nemo and Small 3.0/3.1, one JSON array of calls:
//   answer[TOOL_CALLS][{"name": …, "arguments": {…}, "id": …}, …]
// Neither has a closing marker: a call's arguments end at the next [TOOL_CALLS] or at the end of the output.
#include <array>

#include "chat/marker_parser.h"
#include "chat/tool_calls.h"

namespace zinc::chat::detail {

namespace {

constexpr std::string_view think_start = "[THINK]", think_end = "[/THINK]";
constexpr std::string_view calls_mark = "[TOOL_CALLS]", call_id_mark = "[CALL_ID]", args_mark = "[ARGS]";

std::string_view trimmed(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

class MistralParser final : public MarkerParser {
public:
    explicit MistralParser(ParserOptions o) : state_(o.start_in_reasoning ? State::reasoning : State::answer) {}

private:
    enum class State { answer, reasoning, name, id, arguments };

    std::span<const std::string_view> markers() const override {
        static constexpr std::array<std::string_view, 3> answer{think_start, think_end, calls_mark};
        static constexpr std::array<std::string_view, 1> reasoning{think_end};
        static constexpr std::array<std::string_view, 3> name{call_id_mark, args_mark, calls_mark};
        static constexpr std::array<std::string_view, 2> id{args_mark, calls_mark};
        static constexpr std::array<std::string_view, 1> arguments{calls_mark};
        switch (state_) {
        case State::answer: return answer;
        case State::reasoning: return reasoning;
        case State::name: return name;
        case State::id: return id;
        case State::arguments: return arguments;
        }
        return {};
    }

    void on_text(std::string_view text, std::vector<Event>& out) override {
        switch (state_) {
        case State::answer: emit(EventKind::answer, text, out); break;
        case State::reasoning: emit(EventKind::reasoning, text, out); break;
        case State::name: name_.append(text); break;
        case State::id: id_.append(text); break;
        case State::arguments: args_.append(text); break;
        }
    }

    void on_marker(std::string_view marker, std::vector<Event>& out) override {
        if (marker == think_start) {
            state_ = State::reasoning;
        } else if (marker == think_end) {
            state_ = State::answer;  // also drops a stray close in the answer
        } else if (marker == calls_mark) {
            if (in_call()) close_call(out);
            state_ = State::name;
            name_.clear();
            id_.clear();
            args_.clear();
            had_id_ = false;
        } else if (marker == call_id_mark) {
            state_ = State::id;
            had_id_ = true;
        } else if (marker == args_mark) {
            state_ = State::arguments;
        }
        end_segment();
    }

    void at_end(std::vector<Event>& out) override {
        if (in_call()) close_call(out);
    }

    bool in_call() const { return state_ == State::name || state_ == State::id || state_ == State::arguments; }

    void close_call(std::vector<Event>& out) {
        std::string raw = std::string(calls_mark) + name_;
        if (had_id_) raw += std::string(call_id_mark) + id_;
        if (state_ == State::name) {
            // No [ARGS]: the v3-v7 form, a JSON array (or object) of whole calls.
            try {
                for (const ToolCall& c : parse_json_tool_calls(name_)) {
                    const int index = next_call_index();
                    out.push_back({EventKind::tool_call_begin, c.name, {}, index});
                    out.push_back({EventKind::tool_call_args, c.arguments, {}, index});
                    out.push_back({EventKind::tool_call_end, {}, {}, index});
                }
            } catch (const std::exception& e) {
                out.push_back({EventKind::tool_call_error, e.what(), raw, next_call_index()});
            }
            return;
        }
        if (state_ == State::id) {
            out.push_back({EventKind::tool_call_error, "the output ended before the tool call's [ARGS]", raw,
                           next_call_index()});
            return;
        }
        raw += std::string(args_mark) + args_;
        const std::string name(trimmed(name_));
        emit_whole_call(next_call_index(), args_, raw,
                        [&](std::string_view body) {
                            if (name.empty()) throw ToolCallSyntaxError("the tool call has no name");
                            return ToolCall{name, check_json_arguments(body)};
                        },
                        out);
    }

    State state_;
    std::string name_, id_, args_;
    bool had_id_ = false;
};

}  // namespace

std::unique_ptr<OutputParser> make_mistral_parser(ParserOptions o) { return std::make_unique<MistralParser>(o); }

}  // namespace zinc::chat::detail
