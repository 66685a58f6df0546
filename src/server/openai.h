// The shapes of OpenAI's answers that chat and completions share: error bodies, usage, logprobs in both of its forms,
// and the assistant's message (or its streamed deltas) from the chat output parser's events.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/events.h"
#include "server/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace zinc::server {

using json = nlohmann::ordered_json;

// JSON text; bytes that are not UTF-8 (in a model's text or an echoed request) become U+FFFD instead of failing.
std::string text_of(const json& j);

// {"error": {"message", "type", "param", "code"}}
json error_body(const std::string& message, const std::string& type, const std::string& param = {},
                const std::string& code = {});
// The type OpenAI gives errors of this status: invalid_request_error, authentication_error, ...
const char* error_type(int status);

// Seconds since 1970: OpenAI's "created".
int64_t unix_time();

json usage(int prompt_tokens, int completion_tokens, int cached_tokens);

// Chat's form: {"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]} per token.
json chat_logprobs(const std::vector<TokenLogprob>& tokens, const tokenizer::Tokenizer& tok);
// The completions' (legacy) form: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"};
// `offset` is where the first token's text begins in the choice's text, and moves past the tokens.
json completion_logprobs(const std::vector<TokenLogprob>& tokens, const tokenizer::Tokenizer& tok, size_t& offset);
// Appends b's lists to a's (both of the completions' form).
void extend_completion_logprobs(json& a, const json& b);

// The id of a tool call: unique in the server's life (`request` is the request's number), the same streamed or not.
std::string tool_call_id(uint64_t request, int choice, int index);

// The assistant's message of a whole reply: content (a malformed tool call's text stays in it), reasoning_content
// when the model reasoned, tool_calls when it called.
json chat_message(const chat::ParsedOutput& out, uint64_t request, int choice);
// A streamed event as a delta of the assistant's message; null for events that add nothing to the stream.
json chat_delta(const chat::Event& e, uint64_t request, int choice);

}  // namespace zinc::server
