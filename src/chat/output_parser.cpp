#include "chat/output_parser.h"

#include "chat/text_scan.h"
#include "model/families.h"

namespace zinc::chat {

namespace detail {
std::unique_ptr<OutputParser> make_qwen_parser(ParserOptions o);
std::unique_ptr<OutputParser> make_harmony_parser(ParserOptions o);
std::unique_ptr<OutputParser> make_gemma4_parser(ParserOptions o);
std::unique_ptr<OutputParser> make_llama3_parser(ParserOptions o);
std::unique_ptr<OutputParser> make_mistral_parser(ParserOptions o);
}  // namespace detail

namespace {

// Everything is answer, unchanged (no trimming: a base model's continuation is taken as it is).
class PlainParser final : public OutputParser {
public:
    void feed(std::string_view piece, std::vector<Event>& out) override {
        append_text(out, EventKind::answer, piece);
    }
    void finish(std::vector<Event>&) override {}
};

bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

std::string_view rtrim(std::string_view s) {
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

}  // namespace

const char* to_string(OutputFormat f) {
    switch (f) {
    case OutputFormat::plain: return "plain";
    case OutputFormat::qwen: return "qwen";
    case OutputFormat::harmony: return "harmony";
    case OutputFormat::gemma4: return "gemma4";
    case OutputFormat::llama3_json: return "llama3_json";
    case OutputFormat::mistral: return "mistral";
    }
    return "?";
}

std::unique_ptr<OutputParser> make_output_parser(OutputFormat format, ParserOptions options) {
    switch (format) {
    case OutputFormat::plain: return std::make_unique<PlainParser>();
    case OutputFormat::qwen: return detail::make_qwen_parser(options);
    case OutputFormat::harmony: return detail::make_harmony_parser(options);
    case OutputFormat::gemma4: return detail::make_gemma4_parser(options);
    case OutputFormat::llama3_json: return detail::make_llama3_parser(options);
    case OutputFormat::mistral: return detail::make_mistral_parser(options);
    }
    return std::make_unique<PlainParser>();
}

OutputFormat detect_output_format(std::string_view tmpl, std::string_view arch) {
    // In this order, the first format whose markers the template holds or that the architecture's row names.
    const model::Architecture* a = model::find_architecture(arch);
    const auto named = [&](OutputFormat f) { return a && a->reply_format == to_string(f); };
    if (named(OutputFormat::harmony) || contains(tmpl, "<|channel|>") ||
        (contains(tmpl, "<|start|>") && contains(tmpl, "<|message|>")))
        return OutputFormat::harmony;
    if (named(OutputFormat::gemma4) || contains(tmpl, "<|turn>") || contains(tmpl, "<|channel>"))
        return OutputFormat::gemma4;
    if (named(OutputFormat::qwen) || contains(tmpl, "<think>") || contains(tmpl, "<tool_call>"))
        return OutputFormat::qwen;
    if (named(OutputFormat::mistral) || contains(tmpl, "[TOOL_CALLS]") || contains(tmpl, "[THINK]"))
        return OutputFormat::mistral;
    if (named(OutputFormat::llama3_json) || contains(tmpl, "<|python_tag|>") || contains(tmpl, "<|start_header_id|>"))
        return OutputFormat::llama3_json;
    return OutputFormat::plain;
}

bool prompt_opens_reasoning(OutputFormat format, std::string_view prompt) {
    const std::string_view end = rtrim(prompt);
    switch (format) {
    case OutputFormat::qwen: return end.ends_with("<think>");
    case OutputFormat::gemma4: return end.ends_with("<|channel>thought");
    case OutputFormat::mistral: return end.ends_with("[THINK]");
    default: return false;
    }
}

std::string_view reasoning_end(OutputFormat format) {
    switch (format) {
    case OutputFormat::qwen: return "\n</think>\n\n";
    case OutputFormat::gemma4: return "<channel|>";
    case OutputFormat::harmony: return "<|end|><|start|>assistant<|channel|>final<|message|>";
    case OutputFormat::mistral: return "[/THINK]";
    default: return {};
    }
}

ChatStream::ChatStream(OutputFormat format, ParserOptions options, std::vector<std::string> stops)
    : stops_(std::move(stops)), parser_(make_output_parser(format, options)) {}

void ChatStream::feed(std::string_view piece, std::vector<Event>& out) {
    if (finished_) return;
    parser_->feed(stops_.feed(piece), out);
}

void ChatStream::finish(std::vector<Event>& out) {
    if (finished_) return;
    finished_ = true;
    parser_->feed(stops_.flush(), out);
    parser_->finish(out);
}

ParsedOutput parse_output(OutputFormat format, std::string_view text, ParserOptions options) {
    auto parser = make_output_parser(format, options);
    std::vector<Event> events;
    parser->feed(text, events);
    parser->finish(events);
    return collect(events);
}

}  // namespace zinc::chat
