#include "chat/prompt.h"

#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

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
                args = nlohmann::ordered_json::parse(c.arguments);
            } catch (const nlohmann::json::parse_error&) {
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

bool plain_completion(const tokenizer::Tokenizer& tok, const PromptOptions& o) {
    return o.template_source.empty() && tok.chat_template().empty() &&
           tokenizer::chat_style_of(tok) == tokenizer::ChatStyle::Completion;
}

Prompt render_prompt(const tokenizer::Tokenizer& tok, const std::vector<tokenizer::ChatMessage>& messages,
                     const PromptOptions& o) {
    Prompt p;
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
        req.tools = o.tools;
        req.add_generation_prompt = o.add_generation_prompt;
        req.variables = special_token_variables(tok);
        req.variables["enable_thinking"] = o.enable_thinking;
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
    // Templates that print the BOS text themselves (Gemma's, Llama 3's) must not get a second one.
    const bool starts_with_bos = tok.bos() >= 0 && p.text.starts_with(tok.token_text(tok.bos()));
    p.add_bos = tok.add_bos() && !starts_with_bos;
    return p;
}

}  // namespace zinc::chat
