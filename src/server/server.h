// `zinc serve`: an OpenAI-compatible HTTP API over one opened model (cpp-httplib). Requests wait in a bounded queue
// and are served one at a time, in arrival order, on the model's one session; a request becomes a Job that one
// generate() call serves (server.cpp), the seam where batching several requests into one forward pass will come in.
//
//   GET  /health                200 {"status": "ok"} once the model is loaded, 503 before
//   GET  /v1/models             the one model
//   POST /v1/chat/completions   OpenAI's chat completions, streamed as server-sent events with "stream": true
//
// Errors are OpenAI's error bodies with the right 4xx code. With an API key, every /v1 request needs
// "Authorization: Bearer KEY" (compared in constant time).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "engine/open_model.h"

namespace httplib {
class Server;
}

namespace zinc::server {

struct ServerOptions {
    std::string host = "127.0.0.1";  // only this machine unless told otherwise
    int port = 8080;                 // 0: any free port
    std::string api_key;             // empty: none needed
    int max_queue = 16;              // requests waiting for the model at most; more get 503 and Retry-After
    size_t max_body_bytes = size_t(8) << 20;
};

class Server {
public:
    explicit Server(ServerOptions options);
    ~Server();

    // Binds the address; the port it got (the given one, or a free one for 0). Throws when it cannot bind.
    int bind();
    // Serves until stop() (call bind() first). Requests to the model get 503 until set_model().
    void serve();
    // Ends serve(). Once serve() has begun (running()): a stop before that would be missed.
    void stop();
    bool running() const;
    // The model the API serves, from now on; `name` is what /v1/models calls it.
    void set_model(engine::OpenedModel model, std::string name);

private:
    class Queue;
    void routes();

    ServerOptions opt_;
    std::unique_ptr<httplib::Server> http_;
    std::unique_ptr<Queue> queue_;
    std::atomic<bool> ready_{false};
    engine::OpenedModel model_;
    std::string name_;
    std::atomic<uint64_t> next_id_{1};
};

}  // namespace zinc::server
