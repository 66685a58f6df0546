#include "hub/http.h"

#ifdef ZINC_HAVE_CURL

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string_view>

#include "gguf/printable.h"

namespace zinc::hub {
namespace {

constexpr long kConnectSeconds = 20;
// A transfer that moves less than a byte a second for this long has stalled: it fails and the pull retries.
constexpr long kStallSeconds = 60;
constexpr size_t kMaxHeaderLine = 8192;

struct CurlDeleter {
    void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct ListDeleter {
    void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using Easy = std::unique_ptr<CURL, CurlDeleter>;
using Headers = std::unique_ptr<curl_slist, ListDeleter>;

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
    if (s.size() < prefix.size()) return false;
    for (size_t i = 0; i < prefix.size(); ++i) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if (c != prefix[i]) return false;
    }
    return true;
}

std::string trimmed(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
    return std::string(s);
}

// Headers of the last answer (a redirect's are dropped when the next answer starts).
struct HeaderState {
    std::string content_range, link;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
    auto* h = static_cast<HeaderState*>(user);
    const std::string_view line(data, size * n);
    if (line.size() > kMaxHeaderLine) return size * n;  // nothing zinc reads is that long
    if (line.starts_with("HTTP/"))
        *h = {};
    else if (starts_with_nocase(line, "content-range:"))
        h->content_range = trimmed(line.substr(14));
    else if (starts_with_nocase(line, "link:"))
        h->link = trimmed(line.substr(5));
    return size * n;
}

// The URL of `<URL>; rel="next"` in a Link header, empty when there is none.
std::string next_link(const std::string& link) {
    size_t at = 0;
    while (at < link.size()) {
        const size_t open = link.find('<', at), close = link.find('>', open == std::string::npos ? at : open);
        if (open == std::string::npos || close == std::string::npos) break;
        const size_t end = std::min(link.find(',', close), link.size());
        if (link.substr(close, end - close).find("rel=\"next\"") != std::string::npos)
            return link.substr(open + 1, close - open - 1);
        at = end + 1;
    }
    return "";
}

void global_init() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// A handle for `url` with the settings every request shares; `headers` keeps the header list alive.
Easy make_request(const std::string& url, const std::string& token, Headers& headers, char* error_buffer) {
    global_init();
    Easy c(curl_easy_init());
    if (!c) throw HttpError("cannot start an HTTP request (libcurl)", false);
    CURL* e = c.get();
    const bool https = url.starts_with("https://");
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, error_buffer);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, https ? "https" : "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, https ? "https" : "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, kMaxRedirects);
    // The token goes to the hub only: never to the host a redirect names (the default, stated).
    curl_easy_setopt(e, CURLOPT_UNRESTRICTED_AUTH, 0L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, kConnectSeconds);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, kStallSeconds);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "zinc/0.1.0");
    // CURLOPT_NOSIGNAL stays off: libcurl then ignores SIGPIPE while it transfers, so a peer that closes a TLS
    // connection ends the transfer, not zinc (name lookups run in libcurl's resolver thread, not by alarm()).
    curl_slist* list = nullptr;
    if (!token.empty()) list = curl_slist_append(list, ("Authorization: Bearer " + token).c_str());
    headers.reset(list);
    if (list) curl_easy_setopt(e, CURLOPT_HTTPHEADER, list);
    return c;
}

bool is_unreachable(CURLcode code, long status) {
    return status == 0 && (code == CURLE_COULDNT_RESOLVE_HOST || code == CURLE_COULDNT_RESOLVE_PROXY ||
                           code == CURLE_COULDNT_CONNECT || code == CURLE_OPERATION_TIMEDOUT ||
                           code == CURLE_GOT_NOTHING || code == CURLE_RECV_ERROR || code == CURLE_SEND_ERROR);
}

std::string curl_message(CURLcode code, const char* buffer) {
    return gguf::printable(buffer[0] ? buffer : curl_easy_strerror(code), 300);
}

struct PageState {
    std::string* body;
    size_t max;
    bool too_long = false;
};

size_t on_page_data(char* data, size_t size, size_t n, void* user) {
    auto* s = static_cast<PageState*>(user);
    if (s->body->size() + size * n > s->max) {
        s->too_long = true;
        return 0;
    }
    s->body->append(data, size * n);
    return size * n;
}

struct FileState {
    CURL* easy;
    int fd;
    uint64_t offset, limit, pos;
    const HeaderState* headers;
    const std::function<void(uint64_t)>* on_progress;
    bool started = false, restarted = false;
    std::string error;
};

// The first bytes of the body decide where they go: after a 206, at `offset` when the range is the one asked for;
// after a 200, at 0.
bool start_body(FileState& s) {
    long status = 0;
    curl_easy_getinfo(s.easy, CURLINFO_RESPONSE_CODE, &status);
    if (status == 206) {
        unsigned long long first = 0;
        if (std::sscanf(s.headers->content_range.c_str(), "bytes %llu-", &first) != 1 || first != s.offset) {
            s.error = "the server answered the request for bytes from " + std::to_string(s.offset) +
                      " with the range '" + gguf::printable(s.headers->content_range, 100) + "'";
            return false;
        }
    } else if (status == 200) {
        if (s.offset > 0) {
            s.restarted = true;
            s.pos = 0;
            if (::ftruncate(s.fd, 0) != 0) {
                s.error = std::string("cannot truncate the partial file: ") + std::strerror(errno);
                return false;
            }
        }
    } else {
        return false;  // an error status: its body is not the file
    }
    s.started = true;
    return true;
}

size_t on_file_data(char* data, size_t size, size_t n, void* user) {
    auto* s = static_cast<FileState*>(user);
    const size_t len = size * n;
    if (!s->started && !start_body(*s)) return 0;
    if (s->pos + len > s->limit) {
        s->error = "the server sent more than the " + std::to_string(s->limit) + " bytes the repository lists";
        return 0;
    }
    for (size_t done = 0; done < len;) {
        const ssize_t w = ::pwrite(s->fd, data + done, len - done, static_cast<off_t>(s->pos + done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            s->error = std::string("cannot write the download: ") + std::strerror(errno);
            return 0;
        }
        done += static_cast<size_t>(w);
    }
    s->pos += len;
    if (*s->on_progress) (*s->on_progress)(s->pos);
    return len;
}

}  // namespace

bool can_download() { return true; }

Page get_page(const std::string& url, const std::string& token, size_t max_bytes) {
    char error_buffer[CURL_ERROR_SIZE] = {};
    Headers headers;
    Easy c = make_request(url, token, headers, error_buffer);
    Page page;
    PageState state{&page.body, max_bytes};
    HeaderState hs;
    curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, on_page_data);
    curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &state);
    curl_easy_setopt(c.get(), CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c.get(), CURLOPT_HEADERDATA, &hs);
    curl_easy_setopt(c.get(), CURLOPT_TIMEOUT, 120L);
    const CURLcode code = curl_easy_perform(c.get());
    curl_easy_getinfo(c.get(), CURLINFO_RESPONSE_CODE, &page.status);
    if (state.too_long)
        throw HttpError(gguf::printable(url, 300) + " answered with more than " + std::to_string(max_bytes >> 20) +
                            " MiB",
                        false);
    if (code != CURLE_OK)
        throw HttpError("cannot reach " + gguf::printable(url, 300) + ": " + curl_message(code, error_buffer),
                        is_unreachable(code, page.status));
    page.next_page = next_link(hs.link);
    return page;
}

Transfer get_file(const std::string& url, const std::string& token, int fd, uint64_t offset, uint64_t limit,
                  const std::function<void(uint64_t)>& on_progress) {
    char error_buffer[CURL_ERROR_SIZE] = {};
    Headers headers;
    Easy c = make_request(url, token, headers, error_buffer);
    HeaderState hs;
    FileState state{c.get(), fd, offset, limit, offset, &hs, &on_progress, false, false, {}};
    const std::string range = std::to_string(offset) + "-";
    if (offset > 0) curl_easy_setopt(c.get(), CURLOPT_RANGE, range.c_str());
    curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, on_file_data);
    curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &state);
    curl_easy_setopt(c.get(), CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c.get(), CURLOPT_HEADERDATA, &hs);
    const CURLcode code = curl_easy_perform(c.get());
    Transfer t;
    curl_easy_getinfo(c.get(), CURLINFO_RESPONSE_CODE, &t.status);
    // An empty body calls no write: the status alone says where the file stands.
    if (!state.started && code == CURLE_OK && (t.status == 200 || t.status == 206)) {
        if (t.status == 200 && offset > 0) {
            state.restarted = true;
            state.pos = 0;
            if (::ftruncate(fd, 0) != 0) state.error = std::string("cannot truncate: ") + std::strerror(errno);
        }
    }
    t.end = state.pos;
    t.restarted = state.restarted;
    t.complete = code == CURLE_OK && state.error.empty() && (t.status == 200 || t.status == 206);
    t.unreachable = is_unreachable(code, t.status);
    if (!state.error.empty())
        t.error = state.error;
    else if (code != CURLE_OK && !(code == CURLE_WRITE_ERROR && t.status != 200 && t.status != 206))
        t.error = curl_message(code, error_buffer);
    else if (t.status != 200 && t.status != 206)
        t.error = "HTTP status " + std::to_string(t.status);
    return t;
}

}  // namespace zinc::hub

#else  // without libcurl

namespace zinc::hub {
namespace {

[[noreturn]] void no_curl() {
    throw HttpError("this zinc was built without libcurl and cannot download; install libcurl4-openssl-dev and "
                    "libssl-dev (scripts/setup.sh) and build again. Models already in the cache still open.",
                    false);
}

}  // namespace

bool can_download() { return false; }
Page get_page(const std::string&, const std::string&, size_t) { no_curl(); }
Transfer get_file(const std::string&, const std::string&, int, uint64_t, uint64_t,
                  const std::function<void(uint64_t)>&) {
    no_curl();
}

}  // namespace zinc::hub

#endif
