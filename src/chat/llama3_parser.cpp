// Llama 3.x tool calls (docs/formats.md §6.5): the model answers with nothing but a JSON call, `{"name": "f",
// "parameters": {…}}`, optionally after <|python_tag|> (Llama 3.1's marker for code and tool output).
// Whether an answer is a call is known only from its first character: an answer that starts with
// '{', '[' or <|python_tag|> is held until the end and read as calls; if it is not one, JSON the
// user asked for for instance, it is answer text after all, except after <|python_tag|>, where it
// is a malformed call. Any other answer streams as it comes. There is no reasoning channel.
#include "chat/output_parser.h"
#include "chat/text_scan.h"
#include "chat/tool_calls.h"

namespace zinc::chat::detail {

namespace {

constexpr std::string_view python_tag = "<|python_tag|>";

class Llama3Parser final : public OutputParser {
public:
    void feed(std::string_view piece, std::vector<Event>& out) override {
        if (mode_ == Mode::text) {
            append_text(out, EventKind::answer, piece);
            return;
        }
        held_.append(piece);
        if (mode_ == Mode::undecided) decide(out);
    }

    void finish(std::vector<Event>& out) override {
        if (mode_ == Mode::text) return;
        std::string_view text = held_;
        while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
        if (text.empty()) return;
        const bool tagged = text.starts_with(python_tag);
        if (tagged) text.remove_prefix(python_tag.size());
        std::vector<ToolCall> calls;
        try {
            calls = parse_json_tool_calls(text);
        } catch (const std::exception& e) {
            if (tagged) {
                out.push_back({EventKind::tool_call_error, e.what(), held_, 0});
            } else {
                append_text(out, EventKind::answer, held_);
            }
            return;
        }
        for (std::size_t i = 0; i < calls.size(); ++i) {
            const int index = static_cast<int>(i);
            out.push_back({EventKind::tool_call_begin, calls[i].name, {}, index});
            out.push_back({EventKind::tool_call_args, calls[i].arguments, {}, index});
            out.push_back({EventKind::tool_call_end, {}, {}, index});
        }
    }

private:
    enum class Mode { undecided, text, call };

    void decide(std::vector<Event>& out) {
        std::size_t i = 0;
        while (i < held_.size() && is_space(held_[i])) ++i;
        const std::string_view rest = std::string_view(held_).substr(i);
        if (rest.empty()) return;
        if (rest.starts_with('{') || rest.starts_with('[') || rest.starts_with(python_tag)) {
            mode_ = Mode::call;
        } else if (python_tag.starts_with(rest)) {
            return;  // maybe the tag; the next piece says
        } else {
            mode_ = Mode::text;
            append_text(out, EventKind::answer, held_);
            held_.clear();
        }
    }

    Mode mode_ = Mode::undecided;
    std::string held_;
};

}  // namespace

std::unique_ptr<OutputParser> make_llama3_parser(ParserOptions) { return std::make_unique<Llama3Parser>(); }

}  // namespace zinc::chat::detail
