#include "server/metrics.h"

#include <array>
#include <cstdio>

namespace zinc::server {
namespace {

constexpr std::array<const char*, 13> kEndpoints = {
    "/", "/health", "/metrics", "/slots", "/v1/models", "/v1/chat/completions", "/v1/completions", "/v1/embeddings",
    "/tokenize", "/detokenize", "/apply-template", "/app.js", "/style.css"};

std::string number_text(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
}

// One metric's HELP and TYPE lines.
void header(std::string& out, const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

void Metrics::request(const std::string& endpoint, int status) {
    std::string e = "other";
    for (const char* known : kEndpoints)
        if (endpoint == known) e = known;
    std::lock_guard<std::mutex> lk(mu_);
    ++requests_[{e, status}];
}

void Metrics::generation(int prompt_tokens, int cached_tokens, double prompt_seconds, int generated,
                         double generate_seconds) {
    std::lock_guard<std::mutex> lk(mu_);
    prompt_tokens_ += uint64_t(prompt_tokens);
    cached_tokens_ += uint64_t(cached_tokens);
    if (cached_tokens > 0) ++prefix_hits_;
    generated_tokens_ += uint64_t(generated);
    prompt_seconds_ += prompt_seconds;
    generate_seconds_ += generate_seconds;
    if (prompt_tokens > 0 && prompt_seconds > 0) last_prompt_tps_ = prompt_tokens / prompt_seconds;
    if (generated > 0 && generate_seconds > 0) last_generate_tps_ = generated / generate_seconds;
}

void Metrics::cancelled(const std::string& reason) {
    std::lock_guard<std::mutex> lk(mu_);
    ++cancelled_[reason];
}

std::string Metrics::text(int waiting, int running, bool ready, KvPages pages) const {
    std::lock_guard<std::mutex> lk(mu_);
    std::string out;
    header(out, "zinc_requests_total", "counter", "HTTP responses by endpoint and status.");
    for (const auto& [key, count] : requests_)
        out += "zinc_requests_total{endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
               std::to_string(count) + "\n";
    header(out, "zinc_prompt_tokens_total", "counter", "Prompt tokens evaluated (reused prefixes excluded).");
    out += "zinc_prompt_tokens_total " + std::to_string(prompt_tokens_) + "\n";
    header(out, "zinc_prompt_tokens_cached_total", "counter",
           "Prompt tokens not evaluated: a prefix the model still held from the request before.");
    out += "zinc_prompt_tokens_cached_total " + std::to_string(cached_tokens_) + "\n";
    header(out, "zinc_prefix_cache_hits_total", "counter", "Generations that started from a prefix the model held.");
    out += "zinc_prefix_cache_hits_total " + std::to_string(prefix_hits_) + "\n";
    header(out, "zinc_generated_tokens_total", "counter", "Tokens generated.");
    out += "zinc_generated_tokens_total " + std::to_string(generated_tokens_) + "\n";
    header(out, "zinc_prompt_seconds_total", "counter", "Seconds spent evaluating prompts.");
    out += "zinc_prompt_seconds_total " + number_text(prompt_seconds_) + "\n";
    header(out, "zinc_generation_seconds_total", "counter", "Seconds spent generating tokens.");
    out += "zinc_generation_seconds_total " + number_text(generate_seconds_) + "\n";
    header(out, "zinc_prompt_tokens_per_second", "gauge", "Prompt speed of the last generation.");
    out += "zinc_prompt_tokens_per_second " + number_text(last_prompt_tps_) + "\n";
    header(out, "zinc_generation_tokens_per_second", "gauge", "Generation speed of the last generation.");
    out += "zinc_generation_tokens_per_second " + number_text(last_generate_tps_) + "\n";
    header(out, "zinc_cancelled_total", "counter", "Generations ended early, by reason.");
    for (const char* reason : {"client_gone", "client_stalled", "timeout"}) {
        const auto it = cancelled_.find(reason);
        out += std::string("zinc_cancelled_total{reason=\"") + reason + "\"} " +
               std::to_string(it == cancelled_.end() ? 0 : it->second) + "\n";
    }
    header(out, "zinc_requests_waiting", "gauge", "Requests waiting for the model.");
    out += "zinc_requests_waiting " + std::to_string(waiting) + "\n";
    header(out, "zinc_requests_in_flight", "gauge", "Requests being generated.");
    out += "zinc_requests_in_flight " + std::to_string(running) + "\n";
    if (pages.used >= 0) {
        header(out, "zinc_kv_pages_used", "gauge", "KV cache pages held by running requests and kept states.");
        out += "zinc_kv_pages_used " + std::to_string(pages.used) + "\n";
        header(out, "zinc_kv_pages_free", "gauge", "KV cache pages free.");
        out += "zinc_kv_pages_free " + std::to_string(pages.free) + "\n";
    }
    header(out, "zinc_model_ready", "gauge", "1 once the model is loaded.");
    out += std::string("zinc_model_ready ") + (ready ? "1" : "0") + "\n";
    return out;
}

}  // namespace zinc::server
