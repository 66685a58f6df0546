// The HTTP requests of `zinc pull` (libcurl): a JSON page and a file's bytes, redirects followed. Built without
// libcurl (Debian: libcurl4-openssl-dev), every request throws saying so; the cache works without it.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace zinc::hub {

// Whether this zinc can download (it was built with libcurl and OpenSSL).
bool can_download();

// A request that failed. `unreachable`: no answer came at all (no network, the host unknown or refusing, a timeout
// before any answer), so what the cache holds may stand in.
struct HttpError : std::runtime_error {
    HttpError(const std::string& what, bool unreachable_) : std::runtime_error(what), unreachable(unreachable_) {}
    bool unreachable;
};

// Redirects followed at most, and to http(s) only; from an https URL to https only.
constexpr long kMaxRedirects = 10;

struct Page {
    long status = 0;
    std::string body;       // at most max_bytes (more fails the request)
    std::string next_page;  // the Link header's rel="next" URL, for a listing in pages
};
// GET `url` with `token` as a bearer token when not empty (libcurl sends it to the first host only, never after a
// redirect to another). Throws HttpError when no complete answer came; any status is returned.
Page get_page(const std::string& url, const std::string& token, size_t max_bytes);

struct Transfer {
    long status = 0;         // of the last answer; 0 when none came
    uint64_t end = 0;        // bytes of the file on disk after this transfer
    bool restarted = false;  // asked for a range, the server sent the whole file: the file was written from 0
    bool complete = false;   // the body arrived whole as the server sent it
    bool unreachable = false;
    std::string error;       // why it is not complete
};
// GET `url` from byte `offset` (a Range request when > 0) into the open file `fd`, written from `offset` on (from 0
// when the server ignores the range). A body that would take the file past `limit` bytes fails the transfer.
// on_progress(bytes of the file so far) is called as data arrives. Throws only when the request cannot be made.
Transfer get_file(const std::string& url, const std::string& token, int fd, uint64_t offset, uint64_t limit,
                  const std::function<void(uint64_t)>& on_progress);

}  // namespace zinc::hub
