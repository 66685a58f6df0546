#include "server/server.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <utility>

#include "server/api.h"
#include "server/http.h"
#include "server/openai.h"

namespace zinc::server {
namespace {

// Paths anyone may read: the page, and /health for load balancers and scripts.
bool open_path(const std::string& path) {
    return path == "/" || path == "/app.js" || path == "/style.css" || path == "/health" || path == "/favicon.ico";
}

// Constant-time comparison of the Authorization header with "Bearer KEY".
bool authorized(const http::Request& req, const std::string& key) {
    if (key.empty()) return true;
    const std::string want = "Bearer " + key, got = req.header("Authorization");
    unsigned diff = unsigned(got.size() != want.size());
    for (size_t i = 0; i < want.size(); ++i) diff |= unsigned(uint8_t(i < got.size() ? got[i] : 0) ^ uint8_t(want[i]));
    return diff == 0;
}

std::string lower(std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// The name in a Host header, without its port: "[::1]:8080" is ::1, "Example.com:80" is example.com.
std::string host_name(const std::string& host) {
    if (!host.empty() && host[0] == '[') {
        const size_t end = host.find(']');
        return end == std::string::npos ? std::string() : host.substr(1, end - 1);
    }
    return lower(host.substr(0, host.find(':')));
}

bool ip_address(const std::string& name) {
    unsigned char buf[16];
    return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

// Whether a request may name this server so. A page can make a browser send requests here under a name its owner
// points at this machine (DNS rebinding), and the browser then takes the page and the server for one origin; such a
// name is never an IP address or localhost, which no one else can own.
bool allowed_host(const http::Request& req, const ServerOptions& o) {
    if (!req.has_header("Host")) return req.http10;
    const std::string name = host_name(req.header("Host"));
    if (name.empty()) return false;
    if (ip_address(name) || name == "localhost" || name.ends_with(".localhost") || name == lower(o.host)) return true;
    return std::any_of(o.allowed_hosts.begin(), o.allowed_hosts.end(),
                       [&](const std::string& a) { return a == "*" || lower(a) == name; });
}

}  // namespace

Server::Server(ServerOptions options) : api_(std::make_unique<Api>()) {
    api_->opt = std::move(options);
    const ServerOptions& o = api_->opt;
    http::Options ho;
    ho.host = o.host;
    ho.port = o.port;
    ho.max_body = o.max_body_bytes;
    ho.io_timeout_seconds = o.io_timeout_seconds;
    ho.max_connections = o.max_connections;
    // Every request holds a worker while it waits and while it runs on one of the -np sequences; a few more prepare
    // requests (templates, tokens) meanwhile. Requests that arrive together wait for a worker to wake up.
    ho.workers = o.parallel + o.max_queue + 4;
    ho.max_pending = 2 * ho.workers;
    http_ = std::make_unique<http::Server>(ho);
    guard();
    http_->set_error_writer([](http::Response& res, int status, const std::string& message) {
        error(res, status, message);
    });
    http_->set_logger([this](const http::Request& req, int status) {
        api_->metrics.request(req.path, status);
        // A generating request that is answered is logged when its answer has ended (answer()).
        if (!(generating_route(req) && status == 200)) log_request(*api_, req, status);
    });
    info_routes(*http_, *api_);
    chat_routes(*http_, *api_);
    completion_routes(*http_, *api_);
    token_routes(*http_, *api_);
    embedding_routes(*http_, *api_);
    page_routes(*http_);
}

Server::~Server() = default;

void Server::guard() {
    http_->set_guard([this](const http::Request& req, http::Response& res) {
        const ServerOptions& o = api_->opt;
        if (!allowed_host(req, o)) {
            const std::string name = host_name(req.header("Host"));
            error(res, 403,
                  "this server does not answer to the name '" + name +
                      "' (the Host header): start it with --allowed-host " + (name.empty() ? "NAME" : name) +
                      " to allow that name");
            return true;
        }
        // A browser names the page's origin. The server's own page is of the server's origin; other pages may call
        // the API only when --cors-origin allows them, so that no web site can use a local model behind its user's
        // back (a form's POST needs no preflight, so refusing the CORS headers alone would not stop it).
        if (req.has_header("Origin")) {
            const std::string origin = req.header("Origin");
            const bool own = origin == "http://" + req.header("Host");
            const bool any = std::find(o.cors_origins.begin(), o.cors_origins.end(), "*") != o.cors_origins.end();
            const bool listed = std::find(o.cors_origins.begin(), o.cors_origins.end(), origin) != o.cors_origins.end();
            if (!own && !any && !listed) {
                error(res, 403, "pages of " + origin + " may not call this server (see zinc serve --cors-origin)");
                return true;
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
            return true;
        }
        if (open_path(req.path)) return false;
        if (!authorized(req, o.api_key)) {
            error(res, 401, "a valid API key is needed (Authorization: Bearer KEY)");
            return true;
        }
        if (!api_->ready && req.path != "/metrics") {
            error(res, 503, "the model is loading");
            res.set_header("Retry-After", "5");
            return true;
        }
        return false;
    });
}

int Server::bind() { return http_->bind(); }

void Server::serve() { http_->run(); }

void Server::stop() {
    if (api_->scheduler) api_->scheduler->stop();
    http_->stop();
}

bool Server::running() const { return http_->running(); }

void Server::set_model(engine::OpenedModel model, std::string name) {
    api_->model = std::move(model);
    api_->name = std::move(name);
    api_->architecture = api_->model.model->get("general.architecture").get_string();
    if (api_->opt.limits.max_tokens <= 0) api_->opt.limits.max_tokens = api_->n_ctx();
    if (api_->opt.pooling) {
        api_->pooling = *api_->opt.pooling;
    } else {
        try {
            api_->pooling = engine::file_pooling(*api_->model.model);
        } catch (const std::exception& e) {  // chat is served all the same
            api_->no_embeddings = e.what();
        }
        if (api_->no_embeddings.empty() && api_->pooling == engine::Pooling::none)
            api_->no_embeddings = "the model's file declares no pooling (" + api_->architecture +
                                  ".pooling_type): start zinc serve with --pooling last, mean or cls";
    }
    if (api_->pooling == engine::Pooling::none && api_->no_embeddings.empty())
        api_->no_embeddings = "--pooling none gives a vector per token, which /v1/embeddings does not serve";
    api_->scheduler = std::make_unique<Scheduler>(*api_->model.session, api_->opt.max_queue, api_->metrics,
                                                  api_->opt.parallel, api_->model.backend.get());
    api_->ready = true;
}

}  // namespace zinc::server
