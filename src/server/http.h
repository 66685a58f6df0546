// The HTTP/1.1 server under zinc serve, on Boost.Beast (Debian: libboost-dev), with the limits an untrusted client
// needs (docs/serve.md, "Safe by default"):
//   - connections are served by a few I/O threads that wait on all sockets at once, so idle, slow and stalled
//     clients hold a socket, never a thread: the page, /health and /metrics stay answered whatever they do;
//   - a request's whole header must arrive within the I/O timeout (431 past its size, 408 past its time), its body
//     may pause for no longer than that, and its decoded size is bounded whether it comes with a Content-Length or
//     chunked (413); bodies with a Content-Encoding are refused (415) rather than inflated;
//   - connections are capped; Range is not served (every answer is whole), so no request is answered with more than
//     its route writes.
// GET routes run on the I/O threads and must not block. POST routes run on a pool of worker threads, where they may
// wait for the model; the pool's queue is bounded (503 past it). The guard sees each request once its header is in
// and may answer it before its body is read (origin, Host, API key).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zinc::server::http {

struct Request {
    std::string method;  // as sent: GET, POST, OPTIONS, ...
    std::string path;    // the target without its query
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    bool http10 = false;  // an HTTP/1.0 client (no chunked answers)
    std::chrono::steady_clock::time_point received;  // when its headers were read
    // Whether the client is still connected: a route that waits long asks, so that a client that has gone ends its
    // work. Set for POST routes.
    std::function<bool()> connected;

    // A header's value (names compared without case), "" when absent.
    std::string header(std::string_view name) const;
    bool has_header(std::string_view name) const;
};

// The body of a streamed answer, written from a worker thread.
class Stream {
public:
    virtual ~Stream() = default;
    // Sends the bytes; false when the client has gone or took none of them for the I/O timeout.
    virtual bool write(std::string_view data) = 0;
    virtual bool connected() = 0;
};

struct Response {
    int status = 200;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    // A streamed answer (POST routes only): the headers go first, sent chunked, then this runs on the worker and
    // writes the body through the Stream; whatever it returns, the answer ends there.
    std::function<void(Stream&)> stream;

    void set_content(std::string content, const std::string& type);
    void set_header(const std::string& name, const std::string& value);
    // Starts a streamed answer of this content type.
    void set_stream(const std::string& type, std::function<void(Stream&)> body);
};

using Handler = std::function<void(const Request&, Response&)>;

struct Options {
    std::string host = "127.0.0.1";
    int port = 8080;                      // 0: any free port
    size_t max_body = size_t(8) << 20;    // decoded bytes of a request body
    size_t max_header = 16 << 10;         // the request line and the headers
    int io_timeout_seconds = 10;          // a whole header, a pause in a body, a write that takes nothing
    int max_connections = 512;            // more are closed as they come
    int workers = 16;                     // threads for POST routes
    int max_pending = 64;                 // POST requests waiting for a worker; more get 503
};

class Server {
public:
    explicit Server(Options options);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    void get(const std::string& path, Handler h);   // also answers HEAD (headers only)
    void post(const std::string& path, Handler h);
    // Sees every request once its header is in, before its body is read; true when it has answered it.
    void set_guard(std::function<bool(const Request&, Response&)> guard);
    // Writes the body of an answer no route gave (404, 405, 408, 413, 415, 431, 503, ...), as the API's errors look.
    void set_error_writer(std::function<void(Response&, int status, const std::string& message)> writer);
    // Told of every answer written (for metrics).
    void set_logger(std::function<void(const Request&, int status)> logger);

    // Binds the address; returns the port (the one asked for, or a free one for 0). Throws when it cannot.
    int bind();
    // Serves until stop(); call bind() first.
    void run();
    void stop();
    bool running() const;

    struct Impl;  // http.cpp's: the routes, the sockets, the threads

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace zinc::server::http
