#include "tokenizer/chat_format.h"

#include <cctype>
#include <ctime>

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

// Python str.strip() for the whitespace Jinja's |trim removes (ASCII whitespace is all real contents need).
std::string trim(const std::string& s) {
    const char* ws = " \t\n\r\f\v";
    const size_t b = s.find_first_not_of(ws);
    if (b == std::string::npos) return {};
    return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

void no_tools(const ChatMessage& m) {
    if (m.role == "tool") throw Error("chat_format: tool messages are not supported for this chat format yet");
}

// Gemma 3 (docs/formats.md §5.7): bos, system content + "\n\n" prefixed to the first user turn, strict alternation.
std::string render_gemma3(const std::vector<ChatMessage>& messages, const ChatOptions& opts) {
    std::string out = opts.bos_token, prefix;
    size_t first = 0;
    if (!messages.empty() && messages[0].role == "system") {
        prefix = messages[0].content + "\n\n";
        first = 1;
    }
    for (size_t i = first; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        const bool want_user = (i - first) % 2 == 0;
        if ((m.role == "user") != want_user || (m.role != "user" && m.role != "assistant"))
            throw Error("chat_format: Conversation roles must alternate user/assistant/user/assistant/...");
        out += "<start_of_turn>" + std::string(m.role == "assistant" ? "model" : m.role) + "\n";
        if (i == first) out += prefix;
        out += trim(m.content) + "<end_of_turn>\n";
    }
    if (opts.add_generation_prompt) out += "<start_of_turn>model\n";
    return out;
}

// Removes every <|channel>...<channel|> span (Gemma 4's strip_thinking), then trims.
std::string strip_thinking(const std::string& s) {
    std::string out;
    size_t p = 0;
    for (;;) {
        const size_t a = s.find("<|channel>", p);
        if (a == std::string::npos) break;
        const size_t b = s.find("<channel|>", a);
        if (b == std::string::npos) break;
        out += s.substr(p, a - p);
        p = b + 10;
    }
    out += s.substr(p);
    return trim(out);
}

// Gemma 4 (docs/formats.md §5.8).
std::string render_gemma4(const std::vector<ChatMessage>& messages, const ChatOptions& opts) {
    std::string out = opts.bos_token;
    size_t first = 0;
    const bool sys = !messages.empty() && (messages[0].role == "system" || messages[0].role == "developer");
    if (opts.enable_thinking || sys) {
        out += "<|turn>system\n";
        if (opts.enable_thinking) out += "<|think|>\n";
        if (sys) out += trim(messages[0].content);
        out += "<turn|>\n";
        first = sys ? 1 : 0;
    }
    for (size_t i = first; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        no_tools(m);
        const bool model = m.role == "assistant";
        out += "<|turn>" + std::string(model ? "model" : m.role) + "\n";
        out += (model ? strip_thinking(m.content) : trim(m.content)) + "<turn|>\n";
    }
    if (opts.add_generation_prompt) {
        out += "<|turn>model\n";
        if (!opts.enable_thinking) out += "<|channel>thought\n<channel|>";
    }
    return out;
}

// Plain completion: the messages in order as one text; a message that does not start with white space is set
// apart from the text before it by a space (the user's words go on the model's sentence).
std::string render_completion(const std::vector<ChatMessage>& messages) {
    std::string out;
    for (const ChatMessage& m : messages) {
        no_tools(m);
        const bool joined = out.empty() || m.content.empty() || std::isspace(static_cast<unsigned char>(out.back())) ||
                            std::isspace(static_cast<unsigned char>(m.content.front()));
        out += (joined ? "" : " ") + m.content;
    }
    return out;
}

// gpt-oss Harmony (docs/formats.md §5.9).
std::string render_harmony(const std::vector<ChatMessage>& messages, const ChatOptions& opts) {
    std::string date = opts.current_date;
    if (date.empty()) {
        const std::time_t now = std::time(nullptr);
        std::tm tm{};
        localtime_r(&now, &tm);
        char buf[16];
        std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
        date = buf;
    }
    std::string out = "<|start|>system<|message|>" + opts.model_identity + "\nKnowledge cutoff: 2024-06\nCurrent date: " +
                      date + "\n\nReasoning: " + opts.reasoning_effort +
                      "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message."
                      "<|end|>";
    size_t first = 0;
    if (!messages.empty() && (messages[0].role == "system" || messages[0].role == "developer")) {
        out += "<|start|>developer<|message|># Instructions\n\n" + messages[0].content + "\n\n<|end|>";
        first = 1;
    }
    for (size_t i = first; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        no_tools(m);
        if (m.role == "assistant") {
            const bool last = i + 1 == messages.size() && !opts.add_generation_prompt;
            out += "<|start|>assistant<|channel|>final<|message|>" + m.content + (last ? "<|return|>" : "<|end|>");
        } else if (m.role == "user") {
            out += "<|start|>user<|message|>" + m.content + "<|end|>";
        } else {
            throw Error("chat_format: Harmony: unsupported role '" + m.role + "' here");
        }
    }
    if (opts.add_generation_prompt) out += "<|start|>assistant";
    return out;
}

}  // namespace

ChatStyle detect_chat_style(const std::string& t) {
    if (t.empty()) return ChatStyle::ChatML;
    if (t.find("<|im_start|>") != std::string::npos)
        return t.find("<think>") != std::string::npos ? ChatStyle::ChatMLThink : ChatStyle::ChatML;
    if (t.find("<|turn>") != std::string::npos) return ChatStyle::Gemma4;
    if (t.find("<start_of_turn>") != std::string::npos) return ChatStyle::Gemma3;
    if (t.find("<|start|>") != std::string::npos && t.find("<|message|>") != std::string::npos) return ChatStyle::Harmony;
    throw Error("this model's chat template is not supported yet (supported: ChatML, Gemma 3, Gemma 4, gpt-oss Harmony)");
}

ChatStyle chat_style_of(const Tokenizer& tok) {
    if (tok.chat_template().empty() && !tok.find_token("<|im_start|>")) return ChatStyle::Completion;
    return detect_chat_style(tok.chat_template());
}

std::string render_chat(ChatStyle style, const std::vector<ChatMessage>& messages, const ChatOptions& opts) {
    if (style == ChatStyle::Completion) return render_completion(messages);
    if (style == ChatStyle::Gemma3) return render_gemma3(messages, opts);
    if (style == ChatStyle::Gemma4) return render_gemma4(messages, opts);
    if (style == ChatStyle::Harmony) return render_harmony(messages, opts);
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
