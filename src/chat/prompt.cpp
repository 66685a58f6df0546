#include "chat/prompt.h"

#include <exception>
#include <string>

#include "template/chat_template.h"
#include "template/error.h"

namespace zinc::chat {

nlohmann::ordered_json special_token_variables(const tokenizer::Tokenizer& tok) {
    nlohmann::ordered_json v = nlohmann::ordered_json::object();
    if (tok.bos() >= 0) v["bos_token"] = tok.token_text(tok.bos());
    if (tok.eos() >= 0) v["eos_token"] = tok.token_text(tok.eos());
    return v;
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
        for (const tokenizer::ChatMessage& m : messages) req.messages.push_back({{"role", m.role}, {"content", m.content}});
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
