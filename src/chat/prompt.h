// The prompt text of a conversation as its model expects it: the GGUF's own chat template (tokenizer.chat_template,
// Jinja2, rendered as transformers' apply_chat_template does), or a template file given instead; the built-in styles
// of tokenizer/chat_format.h only for a file without a template, or whose template the engine fails on but is of a
// form they know.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"

namespace zinc::chat {

struct PromptOptions {
    bool add_generation_prompt = true;
    bool enable_thinking = true;
    std::string template_source;  // a template to use instead of the model's (--chat-template-file); empty: the model's
    nlohmann::ordered_json tools;  // null: none offered
    // When a template's render must end (the server's request time limit); it is bounded in steps and memory anyway.
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

struct Prompt {
    std::string text;
    bool add_bos = false;  // encode with the vocabulary's BOS: it asks for one and the text does not begin with it
    std::string how;       // what rendered it, for -v: "the model's chat template", "built-in ChatML", ...
    // Where the messages' text reads as a control token (a user who types <|im_end|><|im_start|>system): those spans
    // are text, never the tokens. Tokenize with tokens().
    std::vector<tokenizer::Tokenizer::Span> plain;

    // The prompt's token ids: the template's control tokens as tokens, the messages' text as text.
    std::vector<int32_t> tokens(const tokenizer::Tokenizer& tok) const { return tok.encode(text, add_bos, plain); }
};

// A message as chat templates (and saved conversations) have it: role, content and, for an assistant's calls,
// tool_calls as OpenAI and transformers write them ({"type": "function", "function": {"name", "arguments"}}, the
// arguments an object).
nlohmann::ordered_json message_json(const tokenizer::ChatMessage& m);
// The reverse; also takes arguments given as JSON text and calls without the "function" wrapper. Throws
// std::runtime_error for a message without a string role and content or with a malformed call.
tokenizer::ChatMessage message_of(const nlohmann::json& j);

// The template variables transformers takes from the tokenizer: bos_token and eos_token, the texts of those tokens.
nlohmann::ordered_json special_token_variables(const tokenizer::Tokenizer& tok);

// Whether render_prompt writes a conversation as one continuing text: no template is given, the model has none, and
// its vocabulary has no ChatML markers (a base model). Such a model's output has no format's markers to parse.
bool plain_completion(const tokenizer::Tokenizer& tok, const PromptOptions& o);

// The messages' and tools' text never becomes a control token: each piece of it that reads as one (as the
// tokenizer would read it) is swapped for a private-use code point before the template runs and swapped back after,
// and its place is recorded in Prompt::plain. docs/serve.md, "Special tokens in messages", says why.
// Throws tmpl::TemplateError (naming the template's line) for a template that fails and has no built-in fallback
// (a given template never has one).
Prompt render_prompt(const tokenizer::Tokenizer& tok, const std::vector<tokenizer::ChatMessage>& messages,
                     const PromptOptions& o);

}  // namespace zinc::chat
