#include "tokenizer/chat_format.h"

#include "tokenizer/tokenizer.h"

namespace zinc::tokenizer {
namespace {

std::string strip_newlines(std::string s, bool left, bool right) {
    size_t b = 0, e = s.size();
    if (left)
        while (b < e && s[b] == '\n') ++b;
    if (right)
        while (e > b && s[e - 1] == '\n') --e;
    return s.substr(b, e - b);
}

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
    return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

bool is_tool_response(const ChatMessage& m) {
    return starts_with(m.content, "<tool_response>") && ends_with(m.content, "</tool_response>");
}

}  // namespace

ChatStyle detect_chat_style(const std::string& t) {
    if (t.empty()) return ChatStyle::ChatML;
    if (t.find("<|im_start|>") != std::string::npos)
        return t.find("<think>") != std::string::npos ? ChatStyle::ChatMLThink : ChatStyle::ChatML;
    throw Error("this model's chat template is not supported yet (only ChatML templates are)");
}

std::string render_chat(ChatStyle style, const std::vector<ChatMessage>& messages, const ChatOptions& opts) {
    const bool think = style == ChatStyle::ChatMLThink;
    // Reasoning is kept only for assistant turns after the last real user query (Qwen3's rule).
    size_t last_query = messages.empty() ? 0 : messages.size() - 1;
    for (size_t i = messages.size(); i-- > 0;)
        if (messages[i].role == "user" && !is_tool_response(messages[i])) {
            last_query = i;
            break;
        }

    std::string out;
    for (size_t i = 0; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (m.role == "assistant") {
            std::string content = m.content, reasoning;
            const size_t end = think ? content.rfind("</think>") : std::string::npos;
            if (end != std::string::npos) {
                std::string before = content.substr(0, end);
                const size_t open = before.rfind("<think>");
                if (open != std::string::npos) before = before.substr(open + 7);
                reasoning = strip_newlines(strip_newlines(before, false, true), true, false);
                content = strip_newlines(content.substr(end + 8), true, false);
            }
            const bool last = i + 1 == messages.size();
            if (think && i > last_query && (last || !reasoning.empty()))
                out += "<|im_start|>assistant\n<think>\n" + strip_newlines(reasoning, true, true) + "\n</think>\n\n" +
                       strip_newlines(content, true, false);
            else
                out += "<|im_start|>assistant\n" + content;
            out += "<|im_end|>\n";
        } else if (m.role == "tool") {
            if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
            out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
            if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
        } else {
            out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
        }
    }
    if (opts.add_generation_prompt) {
        out += "<|im_start|>assistant\n";
        if (think && !opts.enable_thinking) out += "<think>\n\n</think>\n\n";
    }
    return out;
}

}  // namespace zinc::tokenizer
