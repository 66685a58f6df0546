#include "chat/turn.h"

namespace zinc::chat {

Turn prepare_turn(const tokenizer::Tokenizer& tok, const std::string& architecture,
                  const std::vector<tokenizer::ChatMessage>& messages, const PromptOptions& o) {
    Turn t;
    t.prompt = render_prompt(tok, messages, o);
    t.tokens = t.prompt.tokens(tok);
    const bool plain = plain_completion(tok, o);
    t.render_special = !plain;
    t.format = plain ? OutputFormat::plain
                     : detect_output_format(o.template_source.empty() ? tok.chat_template() : o.template_source,
                                            architecture);
    t.parser.start_in_reasoning = prompt_opens_reasoning(t.format, t.prompt.text);
    return t;
}

}  // namespace zinc::chat
