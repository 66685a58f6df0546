#include "server/server.h"

#include <httplib.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "server/api.h"
#include "server/openai.h"

namespace zinc::server {
namespace {

// Paths anyone may read: the page, and /health for load balancers and scripts.
bool open_path(const std::string& path) {
    return path == "/" || path == "/app.js" || path == "/style.css" || path == "/health" || path == "/favicon.ico";
}

// Constant-time comparison of the Authorization header with "Bearer KEY".
bool authorized(const httplib::Request& req, const std::string& key) {
    if (key.empty()) return true;
    const std::string want = "Bearer " + key, got = req.get_header_value("Authorization");
    unsigned diff = unsigned(got.size() != want.size());
    for (size_t i = 0; i < want.size(); ++i) diff |= unsigned(uint8_t(i < got.size() ? got[i] : 0) ^ uint8_t(want[i]));
    return diff == 0;
}

// What the error handler says for a status that no route answered.
std::string status_message(const httplib::Request& req, int status, size_t max_body) {
    switch (status) {
    case 400:  // httplib says 400 for both
        return "the request could not be read: it is not well-formed HTTP, or its body is larger than " +
               std::to_string(max_body) + " bytes";
    case 404: return "there is no " + req.method + " " + req.path + " (see GET /v1/models, POST /v1/chat/completions)";
    case 413: return "the body is larger than " + std::to_string(max_body) + " bytes";
    case 414: return "the request line is too long";
    default: return std::string("HTTP ") + std::to_string(status);
    }
}

}  // namespace

Server::Server(ServerOptions options) : api_(std::make_unique<Api>()), http_(std::make_unique<httplib::Server>()) {
    api_->opt = std::move(options);
    const ServerOptions& o = api_->opt;
    // Every waiting request holds a connection thread; a few more serve the page, /health and /metrics meanwhile.
    const size_t threads = size_t(std::max(8, o.max_queue + 6));
    http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http_->set_payload_max_length(o.max_body_bytes);
    http_->set_read_timeout(o.io_timeout_seconds, 0);
    http_->set_write_timeout(o.io_timeout_seconds, 0);
    http_->set_keep_alive_timeout(std::min(o.io_timeout_seconds, 5));
    http_->set_tcp_nodelay(true);  // a streamed token goes out when it is written, not with the next one
    // Accepted sockets take the listening socket's options. A bounded send buffer makes a client that stops reading
    // block the writes soon, rather than after megabytes of tokens; the send timeout ends a write that blocks (httplib
    // waits for room to write, then writes all of it), so that its generation ends.
    const int io_timeout = o.io_timeout_seconds;
    http_->set_socket_options([io_timeout](socket_t sock) {
        int yes = 1, send_buffer = 64 << 10;
        timeval send_timeout{io_timeout, 0};
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &send_buffer, sizeof send_buffer);
        setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
    });
    guard();
    // Statuses that no route wrote a body for (an unknown path, a body over the limit, broken HTTP) get OpenAI's.
    http_->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (res.body.empty() && !res.is_chunked_content_provider_)
            error(res, res.status, status_message(req, res.status, api_->opt.max_body_bytes));
    });
    http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            error(res, 500, e.what());
        } catch (...) {
            error(res, 500, "unknown error");
        }
    });
    http_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
        api_->metrics.request(req.path, res.status);
    });
    info_routes(*http_, *api_);
    chat_routes(*http_, *api_);
    completion_routes(*http_, *api_);
    token_routes(*http_, *api_);
    page_routes(*http_);
}

Server::~Server() = default;

void Server::guard() {
    http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        using R = httplib::Server::HandlerResponse;
        const ServerOptions& o = api_->opt;
        // A browser names the page's origin. The server's own page is of the server's origin; other pages may call
        // the API only when --cors-origin allows them, so that no web site can use a local model behind its user's
        // back (a form's POST needs no preflight, so refusing the CORS headers alone would not stop it).
        if (req.has_header("Origin")) {
            const std::string origin = req.get_header_value("Origin");
            const bool own = origin == "http://" + req.get_header_value("Host");
            const bool any = std::find(o.cors_origins.begin(), o.cors_origins.end(), "*") != o.cors_origins.end();
            const bool listed = std::find(o.cors_origins.begin(), o.cors_origins.end(), origin) != o.cors_origins.end();
            if (!own && !any && !listed) {
                error(res, 403, "pages of " + origin + " may not call this server (see zinc serve --cors-origin)");
                return R::Handled;
            }
            if (!own) {
                res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
                res.set_header("Vary", "Origin");
            }
        }
        if (req.method == "OPTIONS") {  // a CORS preflight
            res.status = 204;
            res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
            res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
            res.set_header("Access-Control-Max-Age", "600");
            return R::Handled;
        }
        if (open_path(req.path)) return R::Unhandled;
        if (!authorized(req, o.api_key)) {
            error(res, 401, "a valid API key is needed (Authorization: Bearer KEY)");
            return R::Handled;
        }
        if (!api_->ready && req.path != "/metrics") {
            res.set_header("Retry-After", "5");
            error(res, 503, "the model is loading");
            return R::Handled;
        }
        return R::Unhandled;
    });
}

int Server::bind() {
    const ServerOptions& o = api_->opt;
    int port = o.port;
    const bool ok = port == 0 ? (port = http_->bind_to_any_port(o.host)) >= 0 : http_->bind_to_port(o.host, port);
    if (!ok) throw std::runtime_error("cannot listen on " + o.host + ":" + std::to_string(o.port));
    return port;
}

void Server::serve() { http_->listen_after_bind(); }

void Server::stop() {
    if (api_->scheduler) api_->scheduler->stop();
    http_->stop();
}

bool Server::running() const { return http_->is_running(); }

void Server::set_model(engine::OpenedModel model, std::string name) {
    api_->model = std::move(model);
    api_->name = std::move(name);
    api_->architecture = api_->model.model->get("general.architecture").get_string();
    if (api_->opt.limits.max_tokens <= 0) api_->opt.limits.max_tokens = api_->n_ctx();
    api_->scheduler = std::make_unique<Scheduler>(*api_->model.session, api_->opt.max_queue, api_->metrics);
    api_->ready = true;
}

}  // namespace zinc::server
