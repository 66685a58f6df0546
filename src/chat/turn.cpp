#include "chat/turn.h"

namespace zinc::chat {

Turn prepare_turn(const tokenizer::Tokenizer& tok, const std::string& architecture,
                  const std::vector<tokenizer::ChatMessage>& messages, const PromptOptions& o) {
    Turn t;
    t.prompt = render_prompt(tok, messages, o);
    t.tokens = t.prompt.tokens(tok);
    if (o.add_generation_prompt && !messages.empty()) {
        PromptOptions bare = o;
        bare.add_generation_prompt = false;
        try {
            const std::vector<int32_t> h = render_prompt(tok, messages, bare).tokens(tok);
            while (t.history < h.size() && t.history < t.tokens.size() && h[t.history] == t.tokens[t.history])
                ++t.history;
        } catch (const std::exception&) {  // a template that will not end without its generation prompt: no history
        }
    }
    const bool plain = plain_completion(tok, o);
    t.render_special = !plain;
    t.format = plain ? OutputFormat::plain
                     : detect_output_format(o.template_source.empty() ? tok.chat_template() : o.template_source,
                                            architecture);
    t.parser.start_in_reasoning = prompt_opens_reasoning(t.format, t.prompt.text);
    return t;
}

}  // namespace zinc::chat
