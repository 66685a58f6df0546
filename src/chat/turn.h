// One chat turn as `run --chat`, `chat` and `serve` all prepare it: the prompt the messages render to, its tokens,
// and how the model's reply is read: its output format, the parser's options and whether the format's control
// tokens are written out as text for the parser. One piece, so that the three cannot read a model differently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/output_parser.h"
#include "chat/prompt.h"
#include "tokenizer/tokenizer.h"

namespace zinc::chat {

struct Turn {
    Prompt prompt;
    std::vector<int32_t> tokens;
    // The tokens the prompt has in common with the messages rendered without the generation prompt: the history a
    // later turn of the conversation repeats, before the part (the reply's opening) that it may render otherwise.
    size_t history = 0;
    // plain for a model that writes one continuing text (plain_completion): it has no format's markers to read.
    OutputFormat format = OutputFormat::plain;
    ParserOptions parser;         // start_in_reasoning where the prompt opened the reasoning block
    bool render_special = false;  // the generated control tokens as their text, which the parser reads
};

// The turn of `messages` for a model of `architecture` (general.architecture) with the template of `o` (the given
// one, else the model's). Throws what render_prompt throws.
Turn prepare_turn(const tokenizer::Tokenizer& tok, const std::string& architecture,
                  const std::vector<tokenizer::ChatMessage>& messages, const PromptOptions& o);

}  // namespace zinc::chat
