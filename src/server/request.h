// Reading a request body: JSON that must be an object, and its fields checked one by one against the type and range
// they take. A field that is wrong throws BadRequest naming it (OpenAI's "param"), which the routes answer with a 4xx
// error body. Absent fields and nulls take their defaults; fields the server does not know are ignored, as OpenAI's
// clients send some of their own.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"

namespace zinc::server {

using json = nlohmann::ordered_json;

struct BadRequest : std::runtime_error {
    BadRequest(const std::string& message, std::string param_, std::string code_ = {}, int status_ = 400)
        : std::runtime_error(message), param(std::move(param_)), code(std::move(code_)), status(status_) {}
    std::string param;  // the field at fault; empty: the body as a whole
    std::string code;   // OpenAI's error code where it has one ("context_length_exceeded")
    int status;
};

// The body as a JSON object; throws BadRequest for text that is not JSON (or not UTF-8) and for other JSON values.
json parse_object(const std::string& body);

// A field's value within [lo, hi], or `fallback` when the body does not have it (or has null).
double number(const json& body, const char* key, double lo, double hi, double fallback);
int64_t integer(const json& body, const char* key, int64_t lo, int64_t hi, int64_t fallback);
bool boolean(const json& body, const char* key, bool fallback);
// A field's text, or "" when the value has none there (not an object, no such field, not a string).
std::string text(const json& body, const char* key);

// "stop": a string or a list of up to `max` non-empty strings; none when absent.
std::vector<std::string> stop_strings(const json& body, size_t max = 16);

// stream_options.include_usage: the stream ends with a usage event.
bool stream_usage(const json& body);

// A prompt of n tokens must leave room for one generated token in the context; throws BadRequest naming `param`.
void check_prompt_length(size_t n, int n_ctx, const char* param);

// The sampling of a request that leaves it out: serve's --temp, --top-k, ... as zinc run takes them; seed < 0 draws
// one for each request.
struct SamplingDefaults {
    engine::SamplerParams params = [] {
        engine::SamplerParams p;  // llama.cpp's defaults: top-k 40, top-p 0.95, min-p 0.05 as SamplerParams has them
        p.temperature = 0.8f;
        return p;
    }();
    int64_t seed = -1;
};

// The sampling fields that chat and completions share (temperature, top_p, top_k, min_p, the penalties, seed,
// logit_bias of tok's ids, and llama.cpp's ignore_eos, which bans tok's end-of-generation tokens), the defaults' where
// a field is left out; a penalty window of -1 is the whole context of n_ctx.
engine::SamplerParams sampling(const json& body, const SamplingDefaults& defaults, int n_ctx,
                               const tokenizer::Tokenizer& tok);

// The limits every generating request is held to.
struct Limits {
    int max_tokens = 0;     // the most tokens one choice may generate, and what it gets when it asks nothing; 0: the
                            // context's size (Server::set_model settles it)
    int max_n = 8;          // choices per request
    int max_logprobs = 20;  // alternatives per token
    // An embeddings request's inputs, and their tokens together: what one request may make the model read.
    int max_inputs = 512;
    int max_embedding_tokens = 65536;
};

// max_completion_tokens (or the older max_tokens), at most limits.max_tokens.
int max_tokens(const json& body, const Limits& limits);

}  // namespace zinc::server
