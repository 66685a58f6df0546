#include "server/request.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "chat/json_text.h"

namespace zinc::server {
namespace {

bool has(const json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

std::string range_text(double lo, double hi) { return json(lo).dump() + " and " + json(hi).dump(); }

// OpenAI's logit_bias: {"token id": a value from -100 to 100} added to the token's logit; -100 bans it.
void logit_bias(const json& lb, int n_vocab, engine::SamplerParams& sp) {
    if (!lb.is_object()) throw BadRequest("logit_bias must be an object of token ids and numbers", "logit_bias");
    for (const auto& [key, v] : lb.items()) {
        const bool digits = !key.empty() && key.size() <= 10 &&
                            std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
        const long long id = digits ? std::stoll(key) : -1;
        if (id < 0 || id >= n_vocab)
            throw BadRequest("logit_bias: \"" + key.substr(0, 32) + "\" is not a token id of this model (0 to " +
                                 std::to_string(n_vocab - 1) + ")",
                             "logit_bias");
        if (!v.is_number() || !(v.get<double>() >= -100 && v.get<double>() <= 100))
            throw BadRequest("logit_bias: the value of token " + key + " must be a number from -100 to 100",
                             "logit_bias");
        const float b = float(v.get<double>());
        if (b <= -100)
            sp.banned.push_back(int32_t(id));
        else if (b != 0)
            sp.bias.emplace_back(int32_t(id), b);
    }
}

}  // namespace

json parse_object(const std::string& body) {
    json j;
    try {
        j = chat::parse_json(body);
    } catch (const std::runtime_error& e) {
        // The message names the byte where the parse failed; it also says so for bytes that are not UTF-8.
        throw BadRequest(std::string("the body cannot be read: ") + e.what(), "");
    }
    if (!j.is_object()) throw BadRequest("the body must be a JSON object", "");
    return j;
}

double number(const json& body, const char* key, double lo, double hi, double fallback) {
    if (!has(body, key)) return fallback;
    if (!body[key].is_number()) throw BadRequest(std::string(key) + " must be a number", key);
    const double v = body[key].get<double>();
    if (!(v >= lo && v <= hi)) throw BadRequest(std::string(key) + " must be between " + range_text(lo, hi), key);
    return v;
}

int64_t integer(const json& body, const char* key, int64_t lo, int64_t hi, int64_t fallback) {
    if (!has(body, key)) return fallback;
    const json& v = body[key];
    const std::string range =
        std::string(key) + " must be between " + std::to_string(lo) + " and " + std::to_string(hi);
    int64_t x = 0;
    if (v.is_number_unsigned()) {
        if (v.get<uint64_t>() > uint64_t(INT64_MAX)) throw BadRequest(range, key);
        x = int64_t(v.get<uint64_t>());
    } else if (v.is_number_integer()) {
        x = v.get<int64_t>();
    } else if (v.is_number_float()) {
        // 3.0 is an integer to JavaScript clients, which cannot always write it otherwise.
        const double d = v.get<double>();
        if (d != std::floor(d)) throw BadRequest(std::string(key) + " must be an integer", key);
        if (!(std::fabs(d) < 9e18)) throw BadRequest(range, key);  // beyond any int64_t (and the cast)
        x = int64_t(d);
    } else {
        throw BadRequest(std::string(key) + " must be an integer", key);
    }
    if (x < lo || x > hi) throw BadRequest(range, key);
    return x;
}

std::string text(const json& body, const char* key) {
    return body.is_object() && body.contains(key) && body[key].is_string() ? body[key].get<std::string>() : "";
}

bool boolean(const json& body, const char* key, bool fallback) {
    if (!has(body, key)) return fallback;
    if (!body[key].is_boolean()) throw BadRequest(std::string(key) + " must be true or false", key);
    return body[key].get<bool>();
}

std::vector<std::string> stop_strings(const json& body, size_t max) {
    std::vector<std::string> stops;
    if (!has(body, "stop")) return stops;
    const json& st = body["stop"];
    const char* what = "stop must be a string or a list of strings";
    if (st.is_string()) {
        stops.push_back(st.get<std::string>());
    } else if (st.is_array()) {
        for (const auto& x : st) {
            if (!x.is_string()) throw BadRequest(what, "stop");
            stops.push_back(x.get<std::string>());
        }
    } else {
        throw BadRequest(what, "stop");
    }
    if (stops.size() > max) throw BadRequest("stop takes at most " + std::to_string(max) + " strings", "stop");
    for (const std::string& x : stops)
        if (x.empty()) throw BadRequest("a stop string cannot be empty", "stop");
    return stops;
}

bool stream_usage(const json& body) {
    if (!has(body, "stream_options")) return false;
    if (!body["stream_options"].is_object()) throw BadRequest("stream_options must be an object", "stream_options");
    return boolean(body["stream_options"], "include_usage", false);
}

void check_prompt_length(size_t n, int n_ctx, const char* param) {
    if (int64_t(n) < n_ctx) return;
    throw BadRequest("the prompt has " + std::to_string(n) + " tokens; the context holds " + std::to_string(n_ctx),
                     param, "context_length_exceeded");
}

engine::SamplerParams sampling(const json& body, const SamplingDefaults& defaults, int n_ctx,
                               const tokenizer::Tokenizer& tok) {
    const engine::SamplerParams& d = defaults.params;
    engine::SamplerParams sp = d;
    sp.temperature = float(number(body, "temperature", 0.0, 2.0, d.temperature));
    sp.top_p = float(number(body, "top_p", 0.0, 1.0, d.top_p));
    sp.top_k = int(integer(body, "top_k", 0, INT32_MAX, d.top_k));
    sp.min_p = float(number(body, "min_p", 0.0, 1.0, d.min_p));
    sp.presence_penalty = float(number(body, "presence_penalty", -2.0, 2.0, d.presence_penalty));
    sp.frequency_penalty = float(number(body, "frequency_penalty", -2.0, 2.0, d.frequency_penalty));
    sp.repeat_penalty = float(number(body, "repeat_penalty", 0.01, 10.0, d.repeat_penalty));
    if (sp.penalty_last_n < 0) sp.penalty_last_n = n_ctx;  // --repeat-last-n -1: the whole context
    const int64_t seed = defaults.seed >= 0 ? defaults.seed : int64_t(std::random_device{}());
    sp.seed = uint64_t(integer(body, "seed", INT64_MIN, INT64_MAX, seed));
    if (has(body, "logit_bias")) logit_bias(body["logit_bias"], tok.n_vocab(), sp);
    if (boolean(body, "ignore_eos", false))
        sp.banned.insert(sp.banned.end(), tok.eog_ids().begin(), tok.eog_ids().end());
    return sp;
}

int max_tokens(const json& body, const Limits& limits) {
    const char* key = has(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    return int(integer(body, key, 1, limits.max_tokens, limits.max_tokens));
}

}  // namespace zinc::server
