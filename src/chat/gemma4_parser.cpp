// Gemma 4 output (docs/formats.md §6.4):
//   <|channel>thought\nreasoning<channel|>answer<|tool_call>call:NAME{key:<|"|>v<|"|>}<tool_call|>…
// The channel's name ends at the first newline and is not text of the reasoning. With thinking off
// the prompt already holds an empty "<|channel>thought\n<channel|>", so the output starts in the
// answer; a thought channel the model opens there is still reasoning.
#include <array>

#include "chat/marker_parser.h"
#include "chat/tool_calls.h"

namespace zinc::chat::detail {

namespace {

constexpr std::string_view channel_open = "<|channel>", channel_close = "<channel|>";
constexpr std::string_view call_open = "<|tool_call>", call_close = "<tool_call|>";
constexpr std::string_view newline = "\n";

class Gemma4Parser final : public MarkerParser {
public:
    explicit Gemma4Parser(ParserOptions o) : state_(o.start_in_reasoning ? State::reasoning : State::answer) {}

private:
    enum class State { answer, channel_name, reasoning, call };

    std::span<const std::string_view> markers() const override {
        static constexpr std::array<std::string_view, 3> answer{channel_open, channel_close, call_open};
        static constexpr std::array<std::string_view, 2> name{newline, channel_close};
        static constexpr std::array<std::string_view, 1> reasoning{channel_close};
        static constexpr std::array<std::string_view, 1> call{call_close};
        switch (state_) {
        case State::answer: return answer;
        case State::channel_name: return name;
        case State::reasoning: return reasoning;
        case State::call: return call;
        }
        return {};
    }

    void on_text(std::string_view text, std::vector<Event>& out) override {
        switch (state_) {
        case State::answer: emit(EventKind::answer, text, out); break;
        case State::channel_name: break;  // "thought"
        case State::reasoning: emit(EventKind::reasoning, text, out); break;
        case State::call: call_.append(text); break;
        }
    }

    void on_marker(std::string_view marker, std::vector<Event>& out) override {
        if (marker == channel_open) {
            state_ = State::channel_name;
        } else if (marker == newline) {
            state_ = State::reasoning;
        } else if (marker == channel_close) {
            state_ = State::answer;  // also drops a stray close in the answer
        } else if (marker == call_open) {
            state_ = State::call;
            call_.clear();
        } else if (marker == call_close) {
            emit_whole_call(next_call_index(), call_, std::string(call_open) + call_ + std::string(call_close),
                            parse_gemma4_tool_call, out);
            state_ = State::answer;
        }
        end_segment();
    }

    void at_end(std::vector<Event>& out) override {
        if (state_ == State::call) {
            out.push_back({EventKind::tool_call_error, "the output ended inside <|tool_call>",
                           std::string(call_open) + call_, next_call_index()});
        }
    }

    State state_;
    std::string call_;
};

}  // namespace

std::unique_ptr<OutputParser> make_gemma4_parser(ParserOptions o) { return std::make_unique<Gemma4Parser>(o); }

}  // namespace zinc::chat::detail
