// Qwen3, Qwen3.5/3.6, DeepSeek R1 and Hermes-style output (docs/formats.md §6.2):
//   [<think>\n]reasoning\n</think>\n\nanswer<tool_call>\n{…}\n</tool_call>…
// The reasoning block may have been opened by the prompt; then the output starts inside it.
// A <tool_call> inside the reasoning is reasoning text (the model thinking about the call).
#include <array>

#include "chat/marker_parser.h"
#include "chat/tool_calls.h"

namespace zinc::chat::detail {

namespace {

constexpr std::string_view think_open = "<think>", think_close = "</think>";
constexpr std::string_view call_open = "<tool_call>", call_close = "</tool_call>";

class QwenParser final : public MarkerParser {
public:
    explicit QwenParser(ParserOptions o) : state_(o.start_in_reasoning ? State::reasoning : State::answer) {}

private:
    enum class State { answer, reasoning, call };

    std::span<const std::string_view> markers() const override {
        static constexpr std::array<std::string_view, 3> answer{think_open, think_close, call_open};
        static constexpr std::array<std::string_view, 1> reasoning{think_close};
        static constexpr std::array<std::string_view, 1> call{call_close};
        switch (state_) {
        case State::answer: return answer;
        case State::reasoning: return reasoning;
        case State::call: return call;
        }
        return {};
    }

    void on_text(std::string_view text, std::vector<Event>& out) override {
        switch (state_) {
        case State::answer: emit(EventKind::answer, text, out); break;
        case State::reasoning: emit(EventKind::reasoning, text, out); break;
        case State::call: call_.append(text); break;
        }
    }

    void on_marker(std::string_view marker, std::vector<Event>& out) override {
        if (marker == think_open) {
            state_ = State::reasoning;
        } else if (marker == think_close) {
            // Also in the answer: a stray </think> (the prompt opened the block but the parser was
            // told otherwise) is dropped rather than shown.
            state_ = State::answer;
        } else if (marker == call_open) {
            state_ = State::call;
            call_.clear();
        } else if (marker == call_close) {
            close_call(true, out);
            state_ = State::answer;
        }
        end_segment();
    }

    void at_end(std::vector<Event>& out) override {
        if (state_ == State::call) close_call(false, out);
    }

    void close_call(bool closed, std::vector<Event>& out) {
        const std::string raw = std::string(call_open) + call_ + (closed ? std::string(call_close) : "");
        if (!closed) {
            out.push_back({EventKind::tool_call_error, "the output ended inside <tool_call>", raw, next_call_index()});
            return;
        }
        emit_whole_call(next_call_index(), call_, raw, parse_qwen_tool_call, out);
    }

    State state_;
    std::string call_;
};

}  // namespace

std::unique_ptr<OutputParser> make_qwen_parser(ParserOptions o) { return std::make_unique<QwenParser>(o); }

}  // namespace zinc::chat::detail
