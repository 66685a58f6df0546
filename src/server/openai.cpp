#include "server/openai.h"

#include <chrono>

namespace zinc::server {
namespace {

json bytes_of(const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(int(c));
    return b;
}

}  // namespace

std::string text_of(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json error_body(const std::string& message, const std::string& type, const std::string& param,
                const std::string& code) {
    return {{"error",
             {{"message", message},
              {"type", type},
              {"param", param.empty() ? json(nullptr) : json(param)},
              {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

const char* error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

int64_t unix_time() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

json usage(int prompt_tokens, int completion_tokens, int cached_tokens) {
    return {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

json chat_logprobs(const std::vector<TokenLogprob>& tokens, const tokenizer::Tokenizer& tok) {
    json content = json::array();
    for (const TokenLogprob& t : tokens) {
        const std::string piece = tok.token_text(t.id);
        json top = json::array();
        for (const auto& [id, lp] : t.top) {
            const std::string p = tok.token_text(id);
            top.push_back({{"token", p}, {"logprob", lp}, {"bytes", bytes_of(p)}});
        }
        content.push_back(
            {{"token", piece}, {"logprob", t.logprob}, {"bytes", bytes_of(piece)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
}

json completion_logprobs(const std::vector<TokenLogprob>& tokens, const tokenizer::Tokenizer& tok, size_t& offset) {
    json out = {{"tokens", json::array()},
                {"token_logprobs", json::array()},
                {"top_logprobs", json::array()},
                {"text_offset", json::array()}};
    for (const TokenLogprob& t : tokens) {
        const std::string piece = tok.token_text(t.id);
        out["tokens"].push_back(piece);
        out["token_logprobs"].push_back(t.logprob);
        json top = json::object();
        for (const auto& [id, lp] : t.top) top[tok.token_text(id)] = lp;
        out["top_logprobs"].push_back(top);
        out["text_offset"].push_back(offset);
        offset += piece.size();
    }
    return out;
}

void extend_completion_logprobs(json& a, const json& b) {
    for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
        for (const auto& x : b[key]) a[key].push_back(x);
}

std::string tool_call_id(uint64_t request, int choice, int index) {
    return "call_" + std::to_string(request) + "_" + std::to_string(choice) + "_" + std::to_string(index);
}

json chat_message(const chat::ParsedOutput& out, uint64_t request, int choice) {
    std::string content = out.answer;
    for (const chat::ToolCallError& e : out.errors) content += e.raw;
    json m = {{"role", "assistant"}, {"content", content}};
    if (!out.reasoning.empty()) m["reasoning_content"] = out.reasoning;
    if (!out.tool_calls.empty()) {
        m["tool_calls"] = json::array();
        for (size_t i = 0; i < out.tool_calls.size(); ++i)
            m["tool_calls"].push_back(
                {{"id", tool_call_id(request, choice, int(i))},
                 {"type", "function"},
                 {"function", {{"name", out.tool_calls[i].name}, {"arguments", out.tool_calls[i].arguments}}}});
    }
    return m;
}

json chat_delta(const chat::Event& e, uint64_t request, int choice) {
    switch (e.kind) {
    case chat::EventKind::reasoning: return {{"reasoning_content", e.text}};
    case chat::EventKind::answer: return {{"content", e.text}};
    case chat::EventKind::tool_call_begin:
        return {{"tool_calls",
                 json::array({{{"index", e.index},
                               {"id", tool_call_id(request, choice, e.index)},
                               {"type", "function"},
                               {"function", {{"name", e.text}, {"arguments", ""}}}}})}};
    case chat::EventKind::tool_call_args:
        return {{"tool_calls", json::array({{{"index", e.index}, {"function", {{"arguments", e.text}}}}})}};
    case chat::EventKind::tool_call_error: return {{"content", e.raw}};
    case chat::EventKind::tool_call_end: return nullptr;
    }
    return nullptr;
}

}  // namespace zinc::server
