// GET /health (503 while the model loads), GET /v1/models (the one model), GET /props (what a client needs to know of
// the model and the server's defaults and limits), GET /metrics (Prometheus' text) and GET /slots (what each sequence
// is doing).
#include <cmath>

#include "server/api.h"
#include "server/openai.h"
#include "tokenizer/tokenizer.h"

namespace zinc::server {

void info_routes(http::Server& http, Api& api) {
    http.get("/health", [&api](const http::Request&, http::Response& res) {
        if (!api.ready) {
            res.status = 503;
            res.set_content(R"({"status": "loading"})", "application/json");
            return;
        }
        res.set_content(R"({"status": "ok"})", "application/json");
    });

    http.get("/v1/models", [&api](const http::Request&, http::Response& res) {
        const json m = {{"id", api.name},
                        {"object", "model"},
                        {"created", unix_time()},
                        {"owned_by", "zinc"},
                        {"meta", {{"n_ctx", api.n_ctx()}, {"n_vocab", api.tokenizer().n_vocab()}}}};
        res.set_content(text_of(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
    });

    // llama.cpp's server's shape, as far as zinc has the things it names: the context one request has (each running
    // sequence holds a whole context), the defaults a request that leaves a field out gets, and the model. Behind the
    // API key as every route but the page and /health (Server::guard); while the model loads, 503 as /slots.
    http.get("/props", [&api](const http::Request&, http::Response& res) {
        if (!api.ready) {
            res.status = 503;
            res.set_content(R"({"status": "loading"})", "application/json");
            return;
        }
        const engine::SamplerParams& sp = api.opt.sampling.params;
        const tokenizer::Tokenizer& tok = api.tokenizer();
        const std::string& tmpl = api.opt.chat_template.empty() ? tok.chat_template() : api.opt.chat_template;
        const auto token_text = [&tok](int32_t id) { return id >= 0 ? tok.token_text(id) : std::string(); };
        // A float as the decimal it was given as (0.8, not 0.800000011920929).
        const auto decimal = [](float f) { return std::round(double(f) * 1e6) / 1e6; };
        const json params = {{"n_predict", api.opt.limits.max_tokens},
                             {"temperature", decimal(sp.temperature)},
                             {"top_k", sp.top_k},
                             {"top_p", decimal(sp.top_p)},
                             {"min_p", decimal(sp.min_p)},
                             {"repeat_penalty", decimal(sp.repeat_penalty)},
                             {"presence_penalty", decimal(sp.presence_penalty)},
                             {"frequency_penalty", decimal(sp.frequency_penalty)},
                             {"repeat_last_n", sp.penalty_last_n},
                             {"seed", api.opt.sampling.seed}};
        const json props = {
            {"default_generation_settings", {{"n_ctx", api.n_ctx()}, {"params", params}}},
            {"total_slots", api.opt.parallel},
            {"model_alias", api.name},
            {"model_path", api.model.model->first().path()},
            {"n_vocab", tok.n_vocab()},
            {"chat_template", tmpl},
            {"bos_token", token_text(tok.bos())},
            {"eos_token", token_text(tok.eos())},
            {"modalities", {{"vision", false}, {"audio", false}}},
            // zinc's own: the limits every generating request is held to (ServerOptions::limits, --timeout).
            {"limits",
             {{"max_tokens", api.opt.limits.max_tokens},
              {"n", api.opt.limits.max_n},
              {"top_logprobs", api.opt.limits.max_logprobs},
              {"timeout_seconds", api.opt.timeout_seconds}}}};
        res.set_content(text_of(props), "application/json");
    });

    http.get("/slots", [&api](const http::Request&, http::Response& res) {
        if (!api.ready) {
            res.status = 503;
            res.set_content(R"({"status": "loading"})", "application/json");
            return;
        }
        json slots = json::array();
        int id = 0;
        for (const auto& s : api.scheduler->sequences()) {
            const char* state = s.request < 0                ? "idle"
                                : s.prompt_read < s.prompt ? "reading its prompt"
                                                             : "generating";
            slots.push_back({{"id", id++},
                             {"state", state},
                             {"prompt_tokens", s.prompt},
                             {"prompt_read", s.prompt_read},
                             {"generated", s.generated},
                             {"tokens_in_state", s.tokens}});
        }
        res.set_content(text_of(json{{"slots", slots}}), "application/json");
    });

    http.get("/metrics", [&api](const http::Request&, http::Response& res) {
        const bool ready = api.ready;
        res.set_content(api.metrics.text(ready ? api.scheduler->waiting() : 0, ready ? api.scheduler->running() : 0,
                                         ready, ready ? api.scheduler->pages() : KvPages{}),
                        "text/plain; version=0.0.4");
    });
}

}  // namespace zinc::server
