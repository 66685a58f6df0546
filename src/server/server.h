// `zinc serve`: an OpenAI-compatible HTTP API over one opened model, and a chat page, on the HTTP layer of http.h.
//
//   GET  /                      the chat page (page/, built into the binary)
//   GET  /health                200 {"status": "ok"} once the model is loaded, 503 before
//   GET  /metrics               Prometheus' text: requests, tokens, speeds, queue
//   GET  /slots                 what each sequence is doing
//   GET  /v1/models             the one model
//   POST /v1/chat/completions   OpenAI's chat completions, streamed as server-sent events with "stream": true
//   POST /v1/completions        OpenAI's (legacy) completions of a prompt
//   POST /v1/embeddings         OpenAI's embeddings of texts or token ids
//   POST /tokenize, /detokenize, /apply-template   as llama.cpp's server has them
//
// A request is checked and tokenized on its connection's thread and becomes a job for the scheduler
// (scheduler.h), which runs jobs in arrival order, several together on the model's sequences (--parallel) with a
// prefix cache on the others (--cache-seqs), or one at a time on its session. Errors are OpenAI's error bodies with
// the right 4xx code. With an API key, every request but the page and /health needs "Authorization: Bearer KEY"
// (compared in constant time). Pages of other origins may call the API only when --cors-origin allows them, and a
// request must name this server in its Host header (an IP address, localhost, or a name --allowed-host allows), so
// that a web page whose name its owner points at 127.0.0.1 (DNS rebinding) cannot pass for the server's own.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/embed.h"
#include "engine/open_model.h"
#include "server/request.h"

namespace zinc::server {

namespace http {
class Server;
}

struct ServerOptions {
    std::string host = "127.0.0.1";  // only this machine unless told otherwise
    int port = 8080;                 // 0: any free port
    std::string api_key;             // empty: none needed
    int max_queue = 16;              // requests that may wait for the model; more get 503 and Retry-After
    size_t max_body_bytes = size_t(8) << 20;
    Limits limits;
    int timeout_seconds = 600;    // a request's generation ends after this long (finish_reason "length")
    int io_timeout_seconds = 10;  // a client that sends nothing, or takes nothing, for this long is dropped
    // Origins (scheme://host:port) whose pages may call the API, "*" for any; none: only the server's own page.
    std::vector<std::string> cors_origins;
    // Host names (besides IP addresses, localhost and --host) requests may name in their Host header, "*" for any.
    std::vector<std::string> allowed_hosts;
    int max_connections = 512;  // open connections; more are closed as they come
    SamplingDefaults sampling;
    // Requests decoding together (-np) and sequences that keep states beside them (--cache-seqs): the model opened
    // with parallel + cache_seqs sequences, continuous batching and a prefix cache (scheduler.h); with 1 and 0, one
    // request at a time on the session, which keeps the prefix of the request before.
    int parallel = 1;
    int cache_seqs = 0;
    bool log_requests = true;   // a line on standard error for each request (--log-disable: none)
    std::string chat_template;  // --chat-template-file's text, rendered instead of the model's; empty: the model's
    // How /v1/embeddings pools a text's token states (--pooling); none: the file's <arch>.pooling_type.
    std::optional<engine::Pooling> pooling;
    bool embd_normalize = true;  // embeddings scaled to length 1 (--no-normalize: as pooled)
};

struct Api;

class Server {
public:
    explicit Server(ServerOptions options);
    ~Server();

    // Binds the address; the port it got (the given one, or a free one for 0). Throws when it cannot bind.
    int bind();
    // Serves until stop() (call bind() first). Requests to the model get 503 until set_model().
    void serve();
    // Ends the running generation and serve(). Once serve() has begun (running()): a stop before that would be
    // missed.
    void stop();
    bool running() const;
    // The model the API serves, from now on; `name` is what /v1/models calls it.
    void set_model(engine::OpenedModel model, std::string name);

private:
    void guard();  // the checks every request passes before its route: origin, API key, a loaded model

    std::unique_ptr<Api> api_;
    std::unique_ptr<http::Server> http_;  // destroyed first: its threads use api_
};

}  // namespace zinc::server
