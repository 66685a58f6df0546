// gpt-oss Harmony output (docs/formats.md §6.3). The prompt ends with "<|start|>assistant", so the
// output begins with the first message's header:
//   <|channel|>analysis<|message|>reasoning<|end|>
//   <|start|>assistant<|channel|>final<|message|>answer<|return|>
//   <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>
// A header names a channel and, for a tool call, a recipient (`to=`, after the role or after the
// channel). A message with a recipient is a tool call, whatever its channel; otherwise analysis is
// reasoning and final or commentary (a preamble shown to the user) is answer. The call's name is
// announced as soon as its header ends and its arguments stream; they are checked as JSON when the
// message ends. <|return|> and <|call|> end the output; callers that stop on their token ids
// and never render them get the same result from finish().
#include <array>

#include "chat/marker_parser.h"
#include "chat/tool_calls.h"

namespace zinc::chat::detail {

namespace {

constexpr std::string_view start = "<|start|>", channel = "<|channel|>", message = "<|message|>";
constexpr std::string_view end = "<|end|>", ret = "<|return|>", call = "<|call|>";

// The word after `key` in the header: up to white space or the next marker.
std::string header_word(std::string_view header, std::string_view key) {
    const std::size_t at = header.find(key);
    if (at == std::string_view::npos) return {};
    std::string_view rest = header.substr(at + key.size());
    while (!rest.empty() && is_space(rest.front())) rest.remove_prefix(1);
    std::size_t n = 0;
    while (n < rest.size() && !is_space(rest[n]) && rest[n] != '<') ++n;
    return std::string(rest.substr(0, n));
}

class HarmonyParser final : public MarkerParser {
public:
    explicit HarmonyParser(ParserOptions) {}

private:
    enum class State { header, reasoning, answer, call, between, done };

    std::span<const std::string_view> markers() const override {
        static constexpr std::array<std::string_view, 1> header{message};
        static constexpr std::array<std::string_view, 3> body{end, ret, call};
        static constexpr std::array<std::string_view, 2> between{start, channel};
        switch (state_) {
        case State::header: return header;
        case State::reasoning:
        case State::answer:
        case State::call: return body;
        case State::between: return between;
        case State::done: return {};
        }
        return {};
    }

    void on_text(std::string_view text, std::vector<Event>& out) override {
        switch (state_) {
        case State::header: header_.append(text); break;
        case State::reasoning: emit(EventKind::reasoning, text, out); break;
        case State::answer: emit(EventKind::answer, text, out); break;
        case State::call:
            args_.append(text);
            if (!out.empty() && out.back().kind == EventKind::tool_call_args && out.back().index == index_) {
                out.back().text.append(text);
            } else {
                out.push_back({EventKind::tool_call_args, std::string(text), {}, index_});
            }
            break;
        case State::between:
        case State::done: break;  // nothing belongs there
        }
    }

    void on_marker(std::string_view marker, std::vector<Event>& out) override {
        end_segment();
        if (state_ == State::header) {  // <|message|>
            begin_message(out);
        } else if (state_ == State::between) {
            header_ = marker == channel ? std::string(channel) : std::string();
            state_ = State::header;
        } else {  // the end of a message
            if (state_ == State::call) end_call(out);
            state_ = marker == end ? State::between : State::done;
        }
    }

    void at_end(std::vector<Event>& out) override {
        if (state_ == State::call) end_call(out);
        // Text with no header at all: the model did not follow the format; show it rather than lose it.
        if (state_ == State::header && header_.find(channel) == std::string::npos) {
            emit(EventKind::answer, header_, out);
        }
        state_ = State::done;
    }

    void begin_message(std::vector<Event>& out) {
        const std::string ch = header_word(header_, channel);
        std::string to = header_word(header_, "to=");
        header_.clear();
        if (!to.empty()) {
            if (to.starts_with("functions.")) to.erase(0, 10);
            index_ = next_call_index();
            args_.clear();
            out.push_back({EventKind::tool_call_begin, to, {}, index_});
            state_ = State::call;
        } else {
            state_ = ch == "analysis" ? State::reasoning : State::answer;
        }
    }

    void end_call(std::vector<Event>& out) {
        try {
            check_json_arguments(args_);
            out.push_back({EventKind::tool_call_end, {}, {}, index_});
        } catch (const std::exception& e) {
            out.push_back({EventKind::tool_call_error, e.what(), args_, index_});
        }
    }

    State state_ = State::header;
    std::string header_;
    std::string args_;
    int index_ = -1;
};

}  // namespace

std::unique_ptr<OutputParser> make_harmony_parser(ParserOptions o) { return std::make_unique<HarmonyParser>(o); }

}  // namespace zinc::chat::detail
