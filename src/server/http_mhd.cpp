// http.h on libmicrohttpd (Debian: libmicrohttpd-dev), built instead of http.cpp with -DZINC_HTTP=microhttpd to
// measure the two libraries against the same attacks (tests/server/attacks.py). One epoll thread for all sockets;
// POST routes run on the worker pool while their connection is suspended; a streamed answer is a content reader that
// suspends its connection while the worker has nothing for it.
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "server/http.h"

namespace zinc::server::http {
namespace {

bool same_name(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

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

// One request and its answer.
struct Exchange : Stream {
    MHD_Connection* conn = nullptr;
    Request req;
    Response res;
    enum class Phase { reading, working, ready } phase = Phase::reading;
    bool too_big = false;
    // A streamed answer: bytes the worker wrote and MHD has not taken, and the state of both sides.
    std::mutex mu;
    std::condition_variable cv;
    std::string pending;
    bool finished = false, gone = false, suspended = false;

    bool write(std::string_view data) override {
        std::unique_lock<std::mutex> lk(mu);
        if (gone) return false;
        pending.append(data);
        wake(lk);
        cv.wait(lk, [&] { return gone || pending.size() < (64 << 10); });
        return !gone;
    }
    bool connected() override {
        std::lock_guard<std::mutex> lk(mu);
        return !gone;
    }
    // Resumes the connection when the reader suspended it for want of data (lk held).
    void wake(std::unique_lock<std::mutex>&) {
        if (suspended && !gone) {
            suspended = false;
            MHD_resume_connection(conn);
        }
    }
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
    MHD_Daemon* daemon = nullptr;
    int port = 0;
    std::unique_ptr<WorkerPool> pool;
    std::mutex mu;
    std::condition_variable cv;
    bool stopping = false, is_running = false;

    void error(Response& res, int status, const std::string& message) const {
        res.body.clear();
        res.stream = nullptr;
        res.status = status;
        if (error_writer) error_writer(res, status, message);
    }

    MHD_Result queue(Exchange& ex, Response& res) {
        if (logger) logger(ex.req, res.status);
        MHD_Response* r = nullptr;
        if (res.stream)
            r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 << 10, &read_stream, &ex, nullptr);
        else
            r = MHD_create_response_from_buffer(res.body.size(), res.body.data(), MHD_RESPMEM_MUST_COPY);
        for (const auto& [k, v] : res.headers) MHD_add_response_header(r, k.c_str(), v.c_str());
        const MHD_Result ok = MHD_queue_response(ex.conn, unsigned(res.status), r);
        MHD_destroy_response(r);
        return ok;
    }

    MHD_Result fail(Exchange& ex, int status, const std::string& message) {
        Response res;
        error(res, status, message);
        return queue(ex, res);
    }

    static ssize_t read_stream(void* cls, uint64_t, char* buf, size_t max) {
        auto& ex = *static_cast<Exchange*>(cls);
        std::unique_lock<std::mutex> lk(ex.mu);
        if (ex.pending.empty()) {
            if (ex.finished || ex.gone) return MHD_CONTENT_READER_END_OF_STREAM;
            ex.suspended = true;  // the worker resumes it when it writes or finishes
            MHD_suspend_connection(ex.conn);
            return 0;
        }
        const size_t n = std::min(max, ex.pending.size());
        std::memcpy(buf, ex.pending.data(), n);
        ex.pending.erase(0, n);
        ex.cv.notify_all();
        return ssize_t(n);
    }

    static MHD_Result collect(void* cls, MHD_ValueKind, const char* key, const char* value) {
        static_cast<Request*>(cls)->headers.emplace_back(key, value ? value : "");
        return MHD_YES;
    }

    MHD_Result access(MHD_Connection* conn, const char* url, const char* method, const char* version,
                      const char* upload, size_t* upload_size, void** state) {
        auto* held = static_cast<std::shared_ptr<Exchange>*>(*state);
        if (!held) {
            auto ex = std::make_shared<Exchange>();
            ex->conn = conn;
            ex->req.method = method;
            const std::string target = url;
            ex->req.path = target.substr(0, target.find('?'));
            ex->req.http10 = std::strcmp(version, MHD_HTTP_VERSION_1_0) == 0;
            MHD_get_connection_values(conn, MHD_HEADER_KIND, &collect, &ex->req);
            *state = new std::shared_ptr<Exchange>(ex);
            Exchange& e = *ex;
            size_t hosts = 0;
            for (const auto& [k, v] : e.req.headers) hosts += same_name(k, "Host");
            if (hosts > 1) return fail(e, 400, "a request has one Host header");
            const std::string coding = e.req.header("Content-Encoding");
            if (!coding.empty() && !same_name(coding, "identity"))
                return fail(e, 415, "bodies with a Content-Encoding (" + coding + ") are not accepted");
            const std::string length = e.req.header("Content-Length");
            if (!length.empty() && std::strtoull(length.c_str(), nullptr, 10) > opt.max_body)
                return fail(e, 413, "the body is larger than " + std::to_string(opt.max_body) + " bytes");
            if (guard && guard(e.req, e.res)) return queue(e, e.res);
            const bool get = e.req.method == "GET" || e.req.method == "HEAD";
            if ((!get && e.req.method != "POST") || !(get ? gets : posts).count(e.req.path))
                return fail(e, 404, "there is no " + e.req.method + " " + e.req.path);
            return MHD_YES;
        }
        std::shared_ptr<Exchange> ex = *held;
        if (*upload_size > 0) {
            if (ex->req.body.size() + *upload_size > opt.max_body)
                ex->too_big = true;
            else
                ex->req.body.append(upload, *upload_size);
            *upload_size = 0;
            return MHD_YES;
        }
        if (ex->too_big) return fail(*ex, 413, "the body is larger than " + std::to_string(opt.max_body) + " bytes");
        if (ex->phase == Exchange::Phase::ready) return queue(*ex, ex->res);
        if (ex->phase == Exchange::Phase::working) return MHD_YES;
        if (ex->req.method != "POST") {
            Response res = ex->res;
            run(gets.at(ex->req.path), ex->req, res);
            return queue(*ex, res);
        }
        ex->phase = Exchange::Phase::working;
        ex->req.connected = [weak = std::weak_ptr<Exchange>(ex)] {
            const auto e = weak.lock();
            return e && e->connected();
        };
        MHD_suspend_connection(conn);
        const Handler& h = posts.at(ex->req.path);
        if (!pool->submit([this, ex, &h] {
                run(h, ex->req, ex->res);
                std::function<void(Stream&)> body = ex->res.stream;
                {
                    std::lock_guard<std::mutex> lk(ex->mu);
                    ex->phase = Exchange::Phase::ready;
                    MHD_resume_connection(ex->conn);
                }
                if (!body) return;
                try {
                    body(*ex);
                } catch (const std::exception&) {
                }
                std::unique_lock<std::mutex> lk(ex->mu);
                ex->finished = true;
                ex->wake(lk);
            })) {
            MHD_resume_connection(conn);
            ex->phase = Exchange::Phase::reading;
            return fail(*ex, 503, "the server is busy: too many requests are waiting");
        }
        return MHD_YES;
    }

    void run(const Handler& h, const Request& req, Response& res) {
        try {
            h(req, res);
        } catch (const std::exception& e) {
            error(res, 500, e.what());
        }
    }

    static void completed(void*, MHD_Connection*, void** state, MHD_RequestTerminationCode) {
        auto* held = static_cast<std::shared_ptr<Exchange>*>(*state);
        if (!held) return;
        {
            std::lock_guard<std::mutex> lk((*held)->mu);
            (*held)->gone = true;
            (*held)->cv.notify_all();
        }
        delete held;
        *state = nullptr;
    }
};

Server::Server(Options options) : impl_(std::make_unique<Impl>()) { impl_->opt = std::move(options); }

Server::~Server() {
    stop();
    impl_->pool.reset();
    if (impl_->daemon) MHD_stop_daemon(impl_->daemon);
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
    s.pool = std::make_unique<WorkerPool>(s.opt.workers, s.opt.max_pending);
    auto access = [](void* cls, MHD_Connection* c, const char* url, const char* method, const char* version,
                     const char* upload, size_t* size, void** state) {
        return static_cast<Impl*>(cls)->access(c, url, method, version, upload, size, state);
    };
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(uint16_t(s.opt.port));
    inet_pton(AF_INET, s.opt.host == "localhost" ? "127.0.0.1" : s.opt.host.c_str(), &at.sin_addr);
    s.daemon = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME, uint16_t(s.opt.port),
                                nullptr, nullptr, access, &s, MHD_OPTION_SOCK_ADDR, &at, MHD_OPTION_CONNECTION_TIMEOUT,
                                unsigned(s.opt.io_timeout_seconds), MHD_OPTION_CONNECTION_LIMIT,
                                unsigned(s.opt.max_connections), MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                size_t(s.opt.max_header * 2), MHD_OPTION_NOTIFY_COMPLETED, &Impl::completed, &s,
                                MHD_OPTION_END);
    if (!s.daemon) throw std::runtime_error("cannot listen on port " + std::to_string(s.opt.port));
    s.port = MHD_get_daemon_info(s.daemon, MHD_DAEMON_INFO_BIND_PORT)->port;
    return s.port;
}

void Server::run() {
    Impl& s = *impl_;
    std::unique_lock<std::mutex> lk(s.mu);
    s.is_running = true;
    s.cv.wait(lk, [&] { return s.stopping; });
    s.is_running = false;
}

void Server::stop() {
    Impl& s = *impl_;
    std::lock_guard<std::mutex> lk(s.mu);
    s.stopping = true;
    s.cv.notify_all();
}

bool Server::running() const { return impl_->is_running; }

}  // namespace zinc::server::http
