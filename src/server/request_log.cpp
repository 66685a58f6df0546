// The server's request log: a line per request on standard error.
#include <chrono>
#include <cstdio>
#include <string>

#include "gguf/printable.h"
#include "server/api.h"

namespace zinc::server {

bool generating_route(const http::Request& req) {
    return req.method == "POST" &&
           (req.path == "/v1/chat/completions" || req.path == "/v1/completions" || req.path == "/v1/embeddings");
}

void log_request(const Api& api, const http::Request& req, int status, const TokenCounts* tokens,
                 const std::string& outcome) {
    if (!api.opt.log_requests) return;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - req.received).count();
    std::string line = "zinc: " + gguf::terminal_text(req.method) + " " + gguf::terminal_text(req.path) + " " +
                       std::to_string(status);
    if (tokens)
        line += ", prompt " + std::to_string(tokens->prompt) + " tokens (" + std::to_string(tokens->cached) +
                " cached), generated " + std::to_string(tokens->generated);
    char time[32];
    std::snprintf(time, sizeof time, ", %.3f s", seconds);
    line += time;
    if (!outcome.empty()) line += " (" + outcome + ")";
    std::fprintf(stderr, "%s\n", line.c_str());  // one call: lines of requests on other threads do not mix
}

}  // namespace zinc::server
