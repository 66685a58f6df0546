// What a request constrains its generated text to: llama-server's `grammar` (GBNF text) or OpenAI's
// response_format. The grammar applies to the text generated, from its first token (a chat's answer: the chat route
// refuses it where the model would reason first, as the reasoning is not the answer).
#pragma once

#include <memory>

#include "grammar/grammar.h"
#include "server/request.h"

namespace zinc::server {

inline constexpr size_t kMaxGrammarBytes = size_t(64) << 10;  // a request's GBNF text

// The request's grammar, or none: `grammar` or response_format {"type": "json_object"} (a JSON object's grammar);
// {"type": "text"} and absent fields constrain nothing. Throws BadRequest naming the field for a grammar that does
// not parse (the parser's line and column), one over kMaxGrammarBytes, both fields at once, and a format not served.
std::shared_ptr<const grammar::Grammar> constraint(const json& body);

}  // namespace zinc::server
