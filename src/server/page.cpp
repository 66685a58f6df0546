// The chat page at /: page/index.html, app.js and style.css, built into the binary (page/embed.cmake), so that a
// browser needs nothing but this server; the page loads nothing from anywhere else.
#include <string>
#include <string_view>

#include "server/api.h"
#include "server/page_assets.h"

namespace zinc::server {
namespace {

const char* type_of(std::string_view name) {
    if (name.ends_with(".html")) return "text/html; charset=utf-8";
    if (name.ends_with(".js")) return "application/javascript; charset=utf-8";
    if (name.ends_with(".css")) return "text/css; charset=utf-8";
    return "application/octet-stream";
}

}  // namespace

void page_routes(http::Server& http) {
    for (const page::Asset& a : page::assets) {
        const std::string name = a.name;
        const std::string path = name == "index.html" ? "/" : "/" + name;
        http.get(path, [a](const http::Request&, http::Response& res) {
            res.set_content(std::string(reinterpret_cast<const char*>(a.data), a.size), type_of(a.name));
            // The page's own scripts only: nothing inline, nothing from elsewhere.
            res.set_header("Content-Security-Policy",
                           "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:");
            res.set_header("X-Content-Type-Options", "nosniff");
            res.set_header("Cache-Control", "no-cache");
        });
    }
    http.get("/favicon.ico", [](const http::Request&, http::Response& res) { res.status = 204; });
}

}  // namespace zinc::server
