#include "chat/prompt.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

#include "chat/json_text.h"
#include "template/chat_template.h"
#include "template/error.h"

namespace zinc::chat {

nlohmann::ordered_json special_token_variables(const tokenizer::Tokenizer& tok) {
    nlohmann::ordered_json v = nlohmann::ordered_json::object();
    if (tok.bos() >= 0) v["bos_token"] = tok.token_text(tok.bos());
    if (tok.eos() >= 0) v["eos_token"] = tok.token_text(tok.eos());
    return v;
}

nlohmann::ordered_json message_json(const tokenizer::ChatMessage& m) {
    nlohmann::ordered_json j = {{"role", m.role}, {"content", m.content}};
    if (!m.tool_calls.empty()) {
        j["tool_calls"] = nlohmann::ordered_json::array();
        for (const tokenizer::ChatToolCall& c : m.tool_calls) {
            // As transformers' messages carry them: the arguments an object (a template writes them with tojson).
            nlohmann::ordered_json args;
            try {
                args = parse_json(c.arguments);
            } catch (const std::runtime_error&) {
                args = c.arguments;  // not JSON: the text itself, which templates write as it is
            }
            j["tool_calls"].push_back(
                {{"type", "function"}, {"function", {{"name", c.name}, {"arguments", std::move(args)}}}});
        }
    }
    return j;
}

tokenizer::ChatMessage message_of(const nlohmann::json& j) {
    if (!j.is_object() || !j.contains("role") || !j["role"].is_string() || !j.contains("content") ||
        !j["content"].is_string())
        throw std::runtime_error("every message needs a string role and content");
    tokenizer::ChatMessage m(j["role"].get<std::string>(), j["content"].get<std::string>());
    if (j.contains("tool_calls")) {
        if (!j["tool_calls"].is_array()) throw std::runtime_error("tool_calls must be a list");
        for (const auto& c : j["tool_calls"]) {
            const nlohmann::json& f = c.is_object() && c.contains("function") ? c["function"] : c;
            if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("arguments"))
                throw std::runtime_error("a tool call needs a function name and arguments");
            const nlohmann::json& a = f["arguments"];
            m.tool_calls.push_back({f["name"].get<std::string>(), a.is_string() ? a.get<std::string>() : a.dump()});
        }
    }
    return m;
}

namespace {

// Texts of control tokens in messages, swapped for code points of Unicode's plane 15 (private use: U+F0000 + their
// number) while a template renders, so that the template handles each as one character it has no reason to touch.
// Code points of that plane already in a message are swapped too, so that every one in the rendered text is known.
class Escapes {
public:
    explicit Escapes(const tokenizer::Tokenizer& tok) : tok_(tok) {}

    std::string escape(const std::string& s) {
        std::vector<tokenizer::Tokenizer::Span> spans = tok_.control_spans(s);
        for (size_t i = 0; i + 3 < s.size(); ++i)
            if (marker_at(s, i) >= 0) spans.push_back({i, i + 4});
        if (spans.empty()) return s;
        std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
        std::string out;
        size_t at = 0;
        for (const auto& sp : spans) {
            if (sp.begin < at) continue;  // a private-use code point inside a token's text: the token's
            out.append(s, at, sp.begin - at);
            if (texts_.size() >= kMarkers) throw std::runtime_error("the messages hold too many control tokens' texts");
            out += marker(texts_.size());
            texts_.push_back(s.substr(sp.begin, sp.end - sp.begin));
            at = sp.end;
        }
        return out + s.substr(at);
    }

    // Every string of a JSON value, keys included (the tools' JSON Schemas).
    nlohmann::ordered_json escape(const nlohmann::ordered_json& j) {
        if (j.is_string()) return escape(j.get<std::string>());
        if (j.is_array()) {
            nlohmann::ordered_json out = nlohmann::ordered_json::array();
            for (const auto& v : j) out.push_back(escape(v));
            return out;
        }
        if (!j.is_object()) return j;
        nlohmann::ordered_json out = nlohmann::ordered_json::object();
        for (const auto& [k, v] : j.items()) out[escape(k)] = escape(v);
        return out;
    }

    tokenizer::ChatMessage escape(const tokenizer::ChatMessage& m) {
        tokenizer::ChatMessage e(escape(m.role), escape(m.content));
        for (const tokenizer::ChatToolCall& c : m.tool_calls) e.tool_calls.push_back({escape(c.name), escape(c.arguments)});
        return e;
    }

    // The rendered text with the original texts back in place of their code points, and where they are.
    std::string restore(const std::string& rendered, std::vector<tokenizer::Tokenizer::Span>& plain) const {
        if (texts_.empty()) return rendered;
        std::string out;
        size_t at = 0;
        for (size_t i = 0; i + 3 < rendered.size(); ++i) {
            const int64_t k = marker_at(rendered, i);
            if (k < 0 || size_t(k) >= texts_.size()) continue;
            out.append(rendered, at, i - at);
            plain.push_back({out.size(), out.size() + texts_[size_t(k)].size()});
            out += texts_[size_t(k)];
            at = i + 4;
            i += 3;
        }
        return out + rendered.substr(at);
    }

private:
    static constexpr size_t kMarkers = 0xFFFFE - 0xF0000;  // U+F0000 to U+FFFFD

    static std::string marker(size_t k) {
        const uint32_t cp = 0xF0000 + uint32_t(k);
        return {char(0xF0 | (cp >> 18)), char(0x80 | ((cp >> 12) & 0x3F)), char(0x80 | ((cp >> 6) & 0x3F)),
                char(0x80 | (cp & 0x3F))};
    }
    // The number of the plane-15 code point whose UTF-8 begins at s[i], or -1.
    static int64_t marker_at(const std::string& s, size_t i) {
        const auto b = [&](size_t k) { return uint8_t(s[i + k]); };
        if (b(0) != 0xF3 || b(1) < 0xB0 || b(1) > 0xBF || (b(2) & 0xC0) != 0x80 || (b(3) & 0xC0) != 0x80) return -1;
        const uint32_t cp = uint32_t(b(0) & 0x07) << 18 | uint32_t(b(1) & 0x3F) << 12 | uint32_t(b(2) & 0x3F) << 6 |
                            uint32_t(b(3) & 0x3F);
        return cp - 0xF0000 < kMarkers ? int64_t(cp - 0xF0000) : -1;
    }

    const tokenizer::Tokenizer& tok_;
    std::vector<std::string> texts_;
};

}  // namespace

bool plain_completion(const tokenizer::Tokenizer& tok, const PromptOptions& o) {
    return o.template_source.empty() && tok.chat_template().empty() &&
           tokenizer::chat_style_of(tok) == tokenizer::ChatStyle::Completion;
}

Prompt render_prompt(const tokenizer::Tokenizer& tok, const std::vector<tokenizer::ChatMessage>& given,
                     const PromptOptions& o) {
    Prompt p;
    Escapes escapes(tok);
    std::vector<tokenizer::ChatMessage> messages;
    for (const tokenizer::ChatMessage& m : given) messages.push_back(escapes.escape(m));
    auto built_in = [&](tokenizer::ChatStyle style) {
        tokenizer::ChatOptions co;
        co.add_generation_prompt = o.add_generation_prompt;
        co.enable_thinking = o.enable_thinking;
        if (tok.bos() >= 0) co.bos_token = tok.token_text(tok.bos());
        return tokenizer::render_chat(style, messages, co);
    };
    const std::string& source = o.template_source.empty() ? tok.chat_template() : o.template_source;
    if (source.empty()) {
        // No template: ChatML where the vocabulary has its markers, else plain completion (a base model).
        const tokenizer::ChatStyle style = tokenizer::chat_style_of(tok);
        p.text = built_in(style);
        p.how = style == tokenizer::ChatStyle::Completion ? "plain completion (the model has no chat template)"
                                                          : "built-in ChatML (the model has no chat template)";
    } else {
        tmpl::ChatRequest req;
        for (const tokenizer::ChatMessage& m : messages) req.messages.push_back(message_json(m));
        req.tools = escapes.escape(o.tools);
        req.add_generation_prompt = o.add_generation_prompt;
        req.variables = special_token_variables(tok);
        req.variables["enable_thinking"] = o.enable_thinking;
        req.limits.deadline = o.deadline;
        try {
            p.text = tmpl::render_chat(source, req);
            p.how = o.template_source.empty() ? "the model's chat template" : "the given chat template";
        } catch (const tmpl::TemplateError& e) {
            // A model's template the engine cannot render still chats when it is of a form zinc knows.
            if (!o.template_source.empty()) throw;
            tokenizer::ChatStyle style;
            try {
                style = tokenizer::detect_chat_style(source);
            } catch (const std::exception&) {
                throw e;
            }
            p.text = built_in(style);
            p.how = "a built-in style (the model's chat template failed: " + std::string(e.what()) + ")";
        }
    }
    p.text = escapes.restore(p.text, p.plain);
    // Templates that print the BOS text themselves (Gemma's, Llama 3's) must not get a second one; a message's text
    // at the start is not the template's BOS.
    const bool starts_with_bos = tok.bos() >= 0 && p.text.starts_with(tok.token_text(tok.bos())) &&
                                 (p.plain.empty() || p.plain.front().begin > 0);
    p.add_bos = tok.add_bos() && !starts_with_bos;
    return p;
}

}  // namespace zinc::chat
