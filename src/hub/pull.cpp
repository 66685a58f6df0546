#include "hub/pull.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>
#include <thread>

#include "chat/json_text.h"
#include "gguf/printable.h"
#include "hub/cache.h"
#include "hub/digest.h"
#include "hub/http.h"

namespace zinc::hub {
namespace {

// Pages of a listing followed at most (the hub gives a thousand entries or more a page).
constexpr int kMaxPages = 100;
// Attempts in a row that move no byte before a download gives up; each waits a second longer than the last.
constexpr int kMaxStalledAttempts = 5;
// Attempts in all, however much each moves.
constexpr int kMaxAttempts = 100;

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

std::string mib(uint64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
    return buf;
}

// The path percent-encoded for a URL, its '/' kept.
std::string url_path(const std::string& path) {
    static const char* hex = "0123456789ABCDEF";
    std::string s;
    for (unsigned char c : path) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
            c == '.' || c == '~' || c == '/') {
            s += static_cast<char>(c);
        } else {
            s += '%';
            s += hex[c >> 4];
            s += hex[c & 15];
        }
    }
    return s;
}

// The hub's refusal as a message, with what it said when it said it in JSON ({"error": "..."}).
std::string refusal(const std::string& what, long status, const std::string& body, bool token) {
    std::string s = what + ": the hub answered HTTP " + std::to_string(status);
    if (status == 401 || status == 403)
        s += token ? " (the token in HF_TOKEN was refused, or it has no access)"
                   : " (a private or gated repository needs a token: set HF_TOKEN)";
    else if (status == 404)
        s += " (not found, or private: HF_TOKEN gives access)";
    try {
        const auto j = chat::parse_json(body);
        if (j.is_object() && j.contains("error") && j["error"].is_string())
            s += ": " + gguf::printable(j["error"].get<std::string>(), 200);
    } catch (const std::exception&) {
        // not JSON: the status says it all
    }
    return s;
}

struct Listing {
    std::vector<RepoFile> files;
    size_t skipped = 0;
};

Listing list_repo(const std::string& endpoint, const ModelName& name, const std::string& token) {
    Listing l;
    std::string url = endpoint + "/api/models/" + name.repo_id() + "/tree/main?recursive=true";
    for (int page = 0; !url.empty(); ++page) {
        if (page == kMaxPages)
            throw std::runtime_error(name.repo_id() + ": the file list has more than " + std::to_string(kMaxPages) +
                                     " pages");
        const Page p = get_page(url, token, kMaxListingBytes);
        if (p.status >= 500) throw HttpError(refusal(name.repo_id(), p.status, p.body, !token.empty()), true);
        if (p.status != 200) throw std::runtime_error(refusal(name.repo_id(), p.status, p.body, !token.empty()));
        parse_listing(p.body, l.files, &l.skipped);
        // The next page must be the hub's own: a listing does not send zinc elsewhere.
        if (!p.next_page.empty() && !p.next_page.starts_with(endpoint + "/api/"))
            throw std::runtime_error(name.repo_id() + ": the file list's next page is not on the hub: " +
                                     gguf::printable(p.next_page, 200));
        url = p.next_page;
    }
    return l;
}

bool has_size(const fs::path& p, uint64_t size) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && fs::file_size(p, ec) == size && !ec;
}

// The file's hash as the listing names it, from the file on disk; empty when they agree, else the message.
std::string check_hash(const RepoFile& f, const fs::path& p) {
    if (!f.sha256.empty()) {
        const std::string h = file_sha256(p.string());
        return h == f.sha256 ? "" : "its sha256 is " + h + " but the repository lists " + f.sha256;
    }
    const std::string h = file_git_sha1(p.string());
    return h == f.git_oid ? "" : "its git object id is " + h + " but the repository lists " + f.git_oid;
}

class FileLock {
public:
    explicit FileLock(int fd) : fd_(fd) {}
    ~FileLock() { ::close(fd_); }
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;
    int fd() const { return fd_; }

private:
    int fd_;
};

// Downloads `f` into the cache unless it is there; returns the bytes fetched.
uint64_t fetch_file(const fs::path& cache, const ModelName& name, const std::string& endpoint,
                    const std::string& token, const RepoFile& f, const PullEvents& ev) {
    const fs::path final_path = file_path(cache, name, f.path);
    const fs::path part = final_path.string() + ".part";
    const std::string shown = gguf::printable(f.path, 200);
    fs::create_directories(final_path.parent_path());
    for (;;) {
        if (has_size(final_path, f.size)) {
            if (ev.progress) ev.progress(f, f.size, true);
            return 0;
        }
        FileLock lock(::open(part.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
        if (lock.fd() < 0) throw std::runtime_error("cannot write " + part.string() + ": " + std::strerror(errno));
        // One zinc at a time downloads a file; another waits, then finds it done (or carries on with the .part).
        if (::flock(lock.fd(), LOCK_EX | LOCK_NB) != 0) {
            if (ev.note) ev.note("waiting for another zinc that is downloading " + shown);
            if (::flock(lock.fd(), LOCK_EX) != 0)
                throw std::runtime_error("cannot lock " + part.string() + ": " + std::strerror(errno));
        }
        struct stat held{}, named{};
        if (::fstat(lock.fd(), &held) != 0 || ::stat(part.c_str(), &named) != 0 || held.st_ino != named.st_ino)
            continue;  // the other zinc finished and renamed it: start over, which finds the file in place
        if (has_size(final_path, f.size)) {  // it finished between the first look and this .part's creation
            std::error_code ec;
            if (held.st_size == 0) fs::remove(part, ec);
            continue;
        }

        const std::string url = endpoint + "/" + name.repo_id() + "/resolve/main/" + url_path(f.path);
        uint64_t fetched = 0;
        int stalled = 0;
        // A .part that never got a byte is not a download to resume: it goes when the download fails.
        try {
            for (int attempt = 0;; ++attempt) {
                uint64_t offset = static_cast<uint64_t>(held.st_size);
                if (offset > f.size) {  // not a prefix of this file
                    if (::ftruncate(lock.fd(), 0) != 0) throw std::runtime_error("cannot truncate " + part.string());
                    offset = 0;
                }
                if (offset == f.size) break;
                if (attempt == 0 && offset > 0 && ev.note)
                    ev.note("resuming " + shown + " from " + mib(offset) + " of " + mib(f.size));
                const Transfer t = get_file(url, token, lock.fd(), offset, f.size,
                                            [&](uint64_t done) { if (ev.progress) ev.progress(f, done, false); });
                fetched += t.restarted ? t.end : t.end - offset;
                if (::fstat(lock.fd(), &held) != 0) throw std::runtime_error("cannot stat " + part.string());
                if (t.complete && t.end == f.size) break;
                if (t.status == 416) {  // the range is past what the server has: the .part is not this file's
                    if (::ftruncate(lock.fd(), 0) != 0) throw std::runtime_error("cannot truncate " + part.string());
                    held.st_size = 0;
                } else if (t.status >= 400 && t.status < 500 && t.status != 408 && t.status != 429) {
                    throw std::runtime_error(refusal(name.text() + ": " + shown, t.status, "", !token.empty()));
                }
                const bool moved = t.restarted || t.end > offset;
                stalled = moved ? 0 : stalled + 1;
                const std::string why = t.complete ? "the transfer ended at " + mib(t.end) + " of " + mib(f.size)
                                                   : gguf::printable(t.error, 300);
                if (stalled >= kMaxStalledAttempts || attempt + 1 >= kMaxAttempts)
                    throw std::runtime_error(name.text() + ": downloading " + shown + " failed: " + why + "; " +
                                             mib(static_cast<uint64_t>(held.st_size)) +
                                             " are kept and 'zinc pull' resumes from there");
                if (ev.note)
                    ev.note(shown + ": " + why + "; retrying from " + mib(static_cast<uint64_t>(held.st_size)));
                if (stalled > 0) std::this_thread::sleep_for(std::chrono::seconds(stalled));
            }
        } catch (...) {
            std::error_code ec;
            if (held.st_size == 0) fs::remove(part, ec);
            throw;
        }
        const std::string bad = check_hash(f, part);
        if (!bad.empty()) {
            fs::remove(part);
            throw std::runtime_error(name.text() + ": " + shown + " is damaged or not the listed file: " + bad +
                                     "; the download was deleted");
        }
        fs::rename(part, final_path);
        if (ev.progress) ev.progress(f, f.size, true);
        return fetched;
    }
}

// What the cache holds of the model when the hub cannot be reached; `why` says what failed.
Pulled from_cache(const fs::path& cache, const ModelName& name, const std::string& why) {
    const std::optional<std::vector<RepoFile>> kept = load_listing(cache, name);
    if (!kept)
        throw std::runtime_error(why + "; and " + name.text() + " is not in the cache either (" +
                                 repo_dir(cache, name).string() + ")");
    Pulled r;
    r.offline = true;
    for (const RepoFile& f : choose_model(*kept, name.tag, name.text())) {
        const fs::path p = file_path(cache, name, f.path);
        if (!has_size(p, f.size))
            throw std::runtime_error(why + "; and the cache lacks " + gguf::printable(f.path, 200) + " of " +
                                     name.text() + " (pull it again with a network)");
        r.files.push_back(p);
    }
    return r;
}

}  // namespace

std::string hub_endpoint() {
    std::string e = env("HF_ENDPOINT");
    if (e.empty()) return "https://huggingface.co";
    while (!e.empty() && e.back() == '/') e.pop_back();
    bool plain = e.size() <= 1000;
    for (unsigned char c : e) plain = plain && c > 0x20 && c < 0x7f;
    if (!plain || !(e.starts_with("https://") || e.starts_with("http://")) || e.find('/', 8) != std::string::npos)
        throw std::invalid_argument("HF_ENDPOINT must be an http or https URL of a host (such as "
                                    "https://huggingface.co), not '" + gguf::printable(e, 200) + "'");
    return e;
}

Pulled pull_model(const ModelName& name, const PullEvents& ev) {
    const fs::path cache = cache_dir();
    const std::string endpoint = hub_endpoint(), token = env("HF_TOKEN");
    // The token goes into a header line: nothing in it may end the line or start another.
    for (unsigned char c : token)
        if (c <= 0x20 || c >= 0x7f)
            throw std::invalid_argument("HF_TOKEN holds a space, a control character or a non-ASCII byte; a token "
                                        "has none");
    if (!can_download())
        return from_cache(cache, name, "this zinc was built without libcurl and cannot download (install "
                                       "libcurl4-openssl-dev and libssl-dev, then build again)");
    Listing listing;
    try {
        listing = list_repo(endpoint, name, token);
    } catch (const HttpError& e) {
        if (!e.unreachable) throw;
        Pulled r = from_cache(cache, name, e.what());
        if (ev.note) ev.note(std::string(e.what()) + "; using " + name.text() + " from the cache");
        return r;
    }
    if (listing.skipped > 0 && ev.note)
        ev.note(name.repo_id() + ": " + std::to_string(listing.skipped) +
                " GGUF entries of the file list were left out (an unsafe path, a bad size or hash)");
    // A file listed now with other contents than the cached one it replaces is fetched again.
    const std::optional<std::vector<RepoFile>> before = load_listing(cache, name);
    std::vector<RepoFile> chosen = choose_model(listing.files, name.tag, name.text());
    save_listing(cache, name, listing.files);
    Pulled r;
    for (const RepoFile& f : chosen) {
        if (before)
            for (const RepoFile& old : *before)
                if (old.path == f.path && (old.sha256 != f.sha256 || old.git_oid != f.git_oid)) {
                    std::error_code ec;
                    fs::remove(file_path(cache, name, f.path), ec);
                }
        r.downloaded += fetch_file(cache, name, endpoint, token, f, ev);
        r.files.push_back(file_path(cache, name, f.path));
    }
    return r;
}

}  // namespace zinc::hub
