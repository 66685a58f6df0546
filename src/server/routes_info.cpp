// GET /health (503 while the model loads), GET /v1/models (the one model), GET /metrics (Prometheus' text) and GET
// /slots (what each sequence is doing).
#include "server/api.h"
#include "server/openai.h"

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
