// Connections as state machines on Asio strands: read a header (with its deadline), let the guard look at it, read
// the body (each pause bounded), run the route, write the answer, and read the next request or close. Every wait on
// a client is an asynchronous operation with a timer, so no thread ever waits on one; only POST routes leave the
// I/O threads, for the worker pool, and their writes come back to the connection's strand.
#include "server/http.h"

#include <malloc.h>
#include <poll.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

namespace zinc::server::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;

constexpr int kIoThreads = 2;
constexpr size_t kTrimAfter = size_t(1) << 20;

bool same_name(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// POST routes run here: a fixed number of threads and a bounded queue in front of them.
class WorkerPool {
public:
    WorkerPool(int threads, int max_pending) : max_pending_(size_t(max_pending)) {
        for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
    }
    ~WorkerPool() {
        {
            std::lock_guard<std::mutex> lk(mu_);
            stopping_ = true;
            jobs_.clear();
        }
        cv_.notify_all();
        for (std::thread& t : threads_) t.join();
    }
    // False when the queue is full.
    bool submit(std::function<void()> job) {
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (stopping_ || jobs_.size() >= max_pending_) return false;
            jobs_.push_back(std::move(job));
        }
        cv_.notify_one();
        return true;
    }

private:
    void work() {
        for (;;) {
            std::function<void()> job;
            {
                std::unique_lock<std::mutex> lk(mu_);
                cv_.wait(lk, [&] { return stopping_ || !jobs_.empty(); });
                if (stopping_) return;
                job = std::move(jobs_.front());
                jobs_.pop_front();
            }
            job();
        }
    }

    const size_t max_pending_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> jobs_;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace

std::string Request::header(std::string_view name) const {
    for (const auto& [k, v] : headers)
        if (same_name(k, name)) return v;
    return {};
}

bool Request::has_header(std::string_view name) const {
    for (const auto& [k, v] : headers)
        if (same_name(k, name)) return true;
    return false;
}

void Response::set_content(std::string content, const std::string& type) {
    body = std::move(content);
    set_header("Content-Type", type);
}

void Response::set_header(const std::string& name, const std::string& value) {
    for (auto& [k, v] : headers)
        if (same_name(k, name)) {
            v = value;
            return;
        }
    headers.emplace_back(name, value);
}

void Response::set_stream(const std::string& type, std::function<void(Stream&)> body_writer) {
    set_header("Content-Type", type);
    stream = std::move(body_writer);
}

struct Server::Impl {
    Options opt;
    std::map<std::string, Handler> gets, posts;
    std::function<bool(const Request&, Response&)> guard;
    std::function<void(Response&, int, const std::string&)> error_writer;
    std::function<void(const Request&, int)> logger;
    std::atomic<int> connections{0};
    std::atomic<bool> is_running{false}, stopping{false};
    net::io_context ioc{kIoThreads};
    tcp::acceptor acceptor{ioc};
    std::unique_ptr<WorkerPool> pool;

    void accept();

    // The answer becomes an error; the headers set so far (CORS) stay.
    void error(Response& res, int status, const std::string& message) const {
        res.body.clear();
        res.stream = nullptr;
        res.status = status;
        if (error_writer) error_writer(res, status, message);
    }
};

namespace {

class Connection;

// A streamed answer's body, written from a worker: each write is queued on the connection's strand and waited for.
class ChunkStream : public Stream {
public:
    explicit ChunkStream(std::shared_ptr<Connection> c) : c_(std::move(c)) {}
    bool write(std::string_view data) override;
    bool connected() override;

private:
    std::shared_ptr<Connection> c_;
};

class Connection : public std::enable_shared_from_this<Connection> {
public:
    Connection(tcp::socket socket, Server::Impl& srv)
        : stream_(std::move(socket)), deadline_(stream_.get_executor()), srv_(srv) {
        ++srv_.connections;
        beast::error_code ignored;
        // A streamed token goes out when it is written, not with the next one; and a small send buffer makes a
        // client that stops reading block the writes after kilobytes rather than megabytes, so its I/O timeout ends
        // its generation soon.
        stream_.socket().set_option(tcp::no_delay(true), ignored);
        stream_.socket().set_option(net::socket_base::send_buffer_size(64 << 10), ignored);
    }
    ~Connection() { --srv_.connections; }

    void start() { read_header(); }

    // --- called from a worker ---

    // Runs `op` on the strand and waits for the write it starts; false when it failed, timed out, or the server
    // stopped meanwhile.
    bool on_strand(std::function<void(std::function<void(bool)>)> op) {
        auto done = std::make_shared<std::promise<bool>>();
        std::future<bool> result = done->get_future();
        net::post(stream_.get_executor(), [self = shared_from_this(), op = std::move(op), done] {
            op([done](bool ok) { done->set_value(ok); });
        });
        while (result.wait_for(100ms) != std::future_status::ready)
            if (srv_.stopping) return false;
        return result.get();
    }

    bool write_chunk(std::string_view data) {
        if (data.empty()) return true;
        auto buf = std::make_shared<std::string>(data);
        return on_strand([self = shared_from_this(), buf](std::function<void(bool)> done) {
            self->stream_.expires_after(std::chrono::seconds(self->srv_.opt.io_timeout_seconds));
            auto handler = [buf, done](beast::error_code ec, size_t) { done(!ec); };
            if (self->req_.http10)  // no chunked coding: the body runs until the connection closes
                net::async_write(self->stream_, net::buffer(*buf), handler);
            else
                net::async_write(self->stream_, bhttp::make_chunk(net::buffer(*buf)), handler);
        });
    }

    // Whether the peer is still there: a closed or reset connection shows as a hang-up on its socket, whatever
    // requests it may have sent ahead.
    bool peer_connected() {
        pollfd p{stream_.socket().native_handle(), POLLRDHUP, 0};
        return ::poll(&p, 1, 0) == 0 || (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0;
    }

    // Runs a POST route (on a worker) and sends what it answers.
    void serve_post(const Handler& h) {
        Response res = std::move(start_);
        run_route(h, res);
        // A big request leaves its worker's malloc arena with megabytes of free pages that glibc keeps for that
        // thread: given back, so that one big request does not hold the memory of a hundred.
        if (req_.body.size() + res.body.size() > kTrimAfter) {
            req_.body = std::string();
            malloc_trim(0);
        }
        if (!res.stream) {
            net::post(stream_.get_executor(), [self = shared_from_this(), res = std::move(res)]() mutable {
                self->write(std::move(res));
            });
            return;
        }
        const bool streaming = send_stream_header(res);
        if (streaming) {
            ChunkStream body(shared_from_this());
            try {
                res.stream(body);
            } catch (const std::exception&) {
                // The status is sent; all the client can see is the stream's end.
            }
        }
        const bool finished = streaming && (req_.http10 || on_strand([self = shared_from_this()](auto done) {
                                                 self->stream_.expires_after(
                                                     std::chrono::seconds(self->srv_.opt.io_timeout_seconds));
                                                 net::async_write(self->stream_, bhttp::make_chunk_last(),
                                                                  [done](beast::error_code ec, size_t) { done(!ec); });
                                             }));
        net::post(stream_.get_executor(), [self = shared_from_this(), finished] {
            self->next(!finished || self->req_.http10 || !self->keep_alive_);
        });
    }

private:
    // --- reading ---

    // The read under way ends at this time: the whole header, or the next piece of a body.
    void arm(std::chrono::seconds in) {
        timed_out_ = false;
        deadline_.expires_after(in);
        deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
            if (ec) return;  // cancelled: the read ended first
            self->timed_out_ = true;
            beast::error_code ignored;
            self->stream_.socket().cancel(ignored);
        });
    }

    void read_header() {
        parser_.emplace();
        parser_->header_limit(std::uint32_t(srv_.opt.max_header));
        parser_->body_limit(srv_.opt.max_body);
        req_ = Request{};
        stream_.expires_never();  // reads are timed by deadline_, which leaves the socket open for a 408
        arm(std::chrono::seconds(srv_.opt.io_timeout_seconds));
        bhttp::async_read_header(stream_, buffer_, *parser_,
                                 [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
    }

    // A read ended with `ec`: true when it succeeded; else the connection ends, with an answer where one is due.
    bool read_ok(beast::error_code ec, bool any_bytes) {
        deadline_.cancel();
        if (!ec) return true;
        if (timed_out_) {
            // A client that sent nothing (an idle keep-alive connection) is simply closed.
            if (!any_bytes) {
                close();
                return false;
            }
            fail(408, "the request did not arrive within " + std::to_string(srv_.opt.io_timeout_seconds) + " seconds");
        } else if (ec == bhttp::error::header_limit) {
            fail(431, "the request's header is larger than " + std::to_string(srv_.opt.max_header) + " bytes");
        } else if (ec == bhttp::error::body_limit) {
            fail(413, "the body is larger than " + std::to_string(srv_.opt.max_body) + " bytes");
        } else if (ec == bhttp::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
                   ec == net::error::operation_aborted) {
            close();  // the client has gone
        } else {
            fail(400, "the request could not be read: it is not well-formed HTTP (" + ec.message() + ")");
        }
        return false;
    }

    void on_header(beast::error_code ec) {
        if (!read_ok(ec, buffer_.size() > 0 || parser_->got_some())) return;
        const auto& h = parser_->get();
        req_.received = std::chrono::steady_clock::now();
        req_.method = std::string(h.method_string());
        const std::string_view target(h.target().data(), h.target().size());
        req_.path = std::string(target.substr(0, target.find('?')));
        for (const auto& f : h) req_.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
        req_.http10 = h.version() < 11;
        keep_alive_ = h.keep_alive();

        size_t hosts = 0;
        for (const auto& [k, v] : req_.headers) hosts += same_name(k, "Host");
        if (!req_.http10 && hosts == 0) return fail(400, "an HTTP/1.1 request needs a Host header");
        if (hosts > 1) return fail(400, "a request has one Host header");
        const std::string coding = std::string(trim(req_.header("Content-Encoding")));
        if (!coding.empty() && !same_name(coding, "identity"))
            return fail(415, "bodies with a Content-Encoding (" + coding + ") are not accepted: send it uncompressed");
        if (req_.has_header("Transfer-Encoding") && !same_name(trim(req_.header("Transfer-Encoding")), "chunked"))
            return fail(501, "the only transfer coding accepted is chunked");

        start_ = Response{};
        if (srv_.guard && srv_.guard(req_, start_)) {
            keep_alive_ = false;  // its body, if any, is never read
            return write(std::move(start_));
        }
        const bool get = req_.method == "GET" || req_.method == "HEAD";
        const auto& routes = get ? srv_.gets : srv_.posts;
        if ((!get && req_.method != "POST") || !routes.count(req_.path)) {
            keep_alive_ = false;
            const bool elsewhere = srv_.gets.count(req_.path) || srv_.posts.count(req_.path);
            return fail(elsewhere ? 405 : 404, elsewhere ? req_.method + " is not served at " + req_.path
                                                         : "there is no " + req_.method + " " + req_.path +
                                                               " (see GET /v1/models, POST /v1/chat/completions)");
        }
        if (parser_->is_done()) return dispatch();
        if (same_name(trim(req_.header("Expect")), "100-continue")) {
            auto cont = std::make_shared<bhttp::response<bhttp::empty_body>>(bhttp::status::continue_, 11);
            stream_.expires_after(std::chrono::seconds(srv_.opt.io_timeout_seconds));
            return bhttp::async_write(stream_, *cont, [self = shared_from_this(), cont](beast::error_code e, size_t) {
                if (e) return self->close();
                self->stream_.expires_never();
                self->read_body();
            });
        }
        read_body();
    }

    void read_body() {
        arm(std::chrono::seconds(srv_.opt.io_timeout_seconds));
        bhttp::async_read_some(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
            if (!self->read_ok(ec, true)) return;
            if (!self->parser_->is_done()) return self->read_body();
            self->dispatch();
        });
    }

    // --- answering ---

    void dispatch() {
        req_.body = std::move(parser_->get().body());
        parser_.reset();
        if (req_.method == "POST") {
            const Handler& h = srv_.posts.at(req_.path);
            auto self = shared_from_this();
            req_.connected = [weak = weak_from_this()] {
                const auto c = weak.lock();
                return c && c->peer_connected();
            };
            if (!srv_.pool->submit([self, &h] { self->serve_post(h); }))
                return fail(503, "the server is busy: too many requests are waiting", "1");
            return;
        }
        Response res = std::move(start_);
        run_route(srv_.gets.at(req_.path), res);
        if (res.stream) srv_.error(res, 500, "a GET route cannot stream");
        write(std::move(res));
    }

    void run_route(const Handler& h, Response& res) {
        try {
            h(req_, res);
        } catch (const std::exception& e) {
            srv_.error(res, 500, e.what());
        } catch (...) {
            srv_.error(res, 500, "unknown error");
        }
    }

    // An answer of the server's own, and the end of the connection (what else the client sent is not read).
    void fail(int status, const std::string& message, const std::string& retry_after = {}) {
        Response res;
        srv_.error(res, status, message);
        if (!retry_after.empty()) res.set_header("Retry-After", retry_after);
        keep_alive_ = false;
        write(std::move(res));
    }

    // Writes a whole answer, then reads the next request or closes.
    void write(Response res) {
        if (srv_.logger) srv_.logger(req_, res.status);
        auto m = std::make_shared<bhttp::response<bhttp::string_body>>(static_cast<bhttp::status>(res.status),
                                                                       req_.http10 ? 10 : 11);
        for (const auto& [k, v] : res.headers) m->set(k, v);
        m->body() = std::move(res.body);
        m->keep_alive(keep_alive_);
        m->prepare_payload();
        if (req_.method == "HEAD") m->body().clear();  // the length stays that of the GET's body
        stream_.expires_after(std::chrono::seconds(srv_.opt.io_timeout_seconds));
        bhttp::async_write(stream_, *m, [self = shared_from_this(), m](beast::error_code ec, size_t) {
            self->next(ec || !self->keep_alive_);
        });
    }

    // The headers of a streamed answer, from the worker.
    bool send_stream_header(Response& res) {
        if (srv_.logger) srv_.logger(req_, res.status);
        auto m = std::make_shared<bhttp::response<bhttp::empty_body>>(static_cast<bhttp::status>(res.status),
                                                                      req_.http10 ? 10 : 11);
        for (const auto& [k, v] : res.headers) m->set(k, v);
        if (req_.http10)
            m->keep_alive(false);
        else
            m->chunked(true);
        auto sr = std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*m);
        return on_strand([self = shared_from_this(), m, sr](std::function<void(bool)> done) {
            self->stream_.expires_after(std::chrono::seconds(self->srv_.opt.io_timeout_seconds));
            bhttp::async_write_header(self->stream_, *sr,
                                      [m, sr, done](beast::error_code ec, size_t) { done(!ec); });
        });
    }

    void next(bool close_it) {
        if (close_it || srv_.stopping) return close();
        read_header();
    }

    void close() {
        deadline_.cancel();
        beast::error_code ec;
        stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
        stream_.close();
    }

    beast::tcp_stream stream_;
    net::steady_timer deadline_;
    bool timed_out_ = false;
    beast::flat_buffer buffer_;
    std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
    Request req_;
    Response start_;  // what the guard set for an answer it let through (CORS headers): the route's answer starts so
    bool keep_alive_ = false;
    Server::Impl& srv_;
};

bool ChunkStream::write(std::string_view data) { return c_->write_chunk(data); }

bool ChunkStream::connected() { return c_->peer_connected(); }

}  // namespace

void Server::Impl::accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
        if (stopping) return;
        if (!ec) {
            if (connections >= opt.max_connections) {
                beast::error_code ignored;
                socket.close(ignored);  // over the cap: closed at once, costing the server nothing more
            } else {
                std::make_shared<Connection>(std::move(socket), *this)->start();
            }
        }
        accept();
    });
}

Server::Server(Options options) : impl_(std::make_unique<Impl>()) { impl_->opt = std::move(options); }

Server::~Server() {
    stop();
    impl_->pool.reset();  // joins the workers before the connections they hold go with the I/O context
}

void Server::get(const std::string& path, Handler h) { impl_->gets[path] = std::move(h); }

void Server::post(const std::string& path, Handler h) { impl_->posts[path] = std::move(h); }

void Server::set_guard(std::function<bool(const Request&, Response&)> guard) { impl_->guard = std::move(guard); }

void Server::set_error_writer(std::function<void(Response&, int, const std::string&)> writer) {
    impl_->error_writer = std::move(writer);
}

void Server::set_logger(std::function<void(const Request&, int)> logger) { impl_->logger = std::move(logger); }

int Server::bind() {
    Impl& s = *impl_;
    beast::error_code ec;
    const net::ip::address address = net::ip::make_address(s.opt.host == "localhost" ? "127.0.0.1" : s.opt.host, ec);
    if (ec) throw std::runtime_error("cannot listen on " + s.opt.host + ": not an IP address");
    const tcp::endpoint at(address, static_cast<unsigned short>(s.opt.port));
    s.acceptor.open(at.protocol(), ec);
    if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) s.acceptor.bind(at, ec);
    if (!ec) s.acceptor.listen(net::socket_base::max_listen_connections, ec);
    if (ec) throw std::runtime_error("cannot listen on " + s.opt.host + ":" + std::to_string(s.opt.port) + ": " +
                                     ec.message());
    return s.acceptor.local_endpoint().port();
}

void Server::run() {
    Impl& s = *impl_;
    s.pool = std::make_unique<WorkerPool>(s.opt.workers, s.opt.max_pending);
    s.accept();
    s.is_running = true;
    std::vector<std::thread> io;
    for (int i = 1; i < kIoThreads; ++i) io.emplace_back([&s] { s.ioc.run(); });
    s.ioc.run();
    for (std::thread& t : io) t.join();
    s.is_running = false;
}

void Server::stop() {
    Impl& s = *impl_;
    if (s.stopping.exchange(true)) return;
    net::post(s.ioc, [&s] {
        beast::error_code ignored;
        s.acceptor.close(ignored);
    });
    s.ioc.stop();
}

bool Server::running() const { return impl_->is_running; }

}  // namespace zinc::server::http
