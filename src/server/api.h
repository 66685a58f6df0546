// What the routes share (not part of the server's interface): the options, the model once loaded with its name and
// scheduler, the metrics; and answer(), which writes a job's result however the client asked for it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <semaphore>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/open_model.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/scheduler.h"
#include "server/server.h"

namespace zinc::server {

using json = nlohmann::ordered_json;

struct Api {
    ServerOptions opt;
    Metrics metrics;
    std::atomic<bool> ready{false};  // the fields below are set
    engine::OpenedModel model;
    std::string name, architecture;
    // The pooling /v1/embeddings uses, settled with the model; `no_embeddings` says why there is none (empty: there
    // is one).
    engine::Pooling pooling = engine::Pooling::none;
    std::string no_embeddings;
    std::unique_ptr<Scheduler> scheduler;
    std::atomic<uint64_t> next_request{1};

    const tokenizer::Tokenizer& tokenizer() const { return model.session->tokenizer(); }
    int n_ctx() const { return model.session->n_ctx(); }

    // Rendering templates and tokenizing take the CPU and, for bodies of megabytes, tens of times their size in
    // memory: only a few requests are prepared at once, the others wait on their workers.
    static constexpr int kPreparing = 2;
    std::counting_semaphore<kPreparing> preparing{kPreparing};
    struct Preparing {
        explicit Preparing(Api& a) : api(a) { api.preparing.acquire(); }
        ~Preparing() { api.preparing.release(); }
        Api& api;
    };
};

// Writes an OpenAI error body with the status.
void error(http::Response& res, int status, const std::string& message, const std::string& param = {},
           const std::string& code = {});

// How a route turns a task's updates into its answer; waiting, streaming and a client that leaves are answer()'s.
class Reply {
public:
    virtual ~Reply() = default;
    // The stream's first events, written before the model has said anything.
    virtual std::vector<json> opening() = 0;
    // Takes an update; when streaming, appends the events it makes to `chunks`.
    virtual void add(const Update& u, std::vector<json>* chunks) = 0;
    // The answer as one body, once every choice has ended.
    virtual json whole() = 0;
    // The stream's usage event (stream_options.include_usage), after every choice has ended.
    virtual json usage_event() = 0;
};

// Queues the job and answers with what it makes: one JSON body, or server-sent events when `stream`. A full queue
// gets 503 and Retry-After; a client that goes away cancels the job. Runs on a worker (a POST route).
void answer(Api& api, const http::Request& req, http::Response& res, Job job, std::shared_ptr<Reply> reply,
            bool stream, bool include_usage);

// A generating request's tokens, for its line in the log: its prompts', of them found in a cache, and generated.
struct TokenCounts {
    int prompt = 0, cached = 0, generated = 0;
};
// One line on standard error for a request, unless --log-disable: method, path, status, a generating request's
// tokens, the seconds since its headers were read, and how it ended where it did not end with its answer.
void log_request(const Api& api, const http::Request& req, int status, const TokenCounts* tokens = nullptr,
                 const std::string& outcome = {});
// The routes that answer through answer(), which logs their requests when their answers end.
bool generating_route(const http::Request& req);

// The routes, one file each.
void info_routes(http::Server& http, Api& api);        // /health, /v1/models, /metrics
void chat_routes(http::Server& http, Api& api);        // /v1/chat/completions, /apply-template
void completion_routes(http::Server& http, Api& api);  // /v1/completions
void token_routes(http::Server& http, Api& api);       // /tokenize, /detokenize
void embedding_routes(http::Server& http, Api& api);   // /v1/embeddings
void page_routes(http::Server& http);                  // the chat page at /

}  // namespace zinc::server
