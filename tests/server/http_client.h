// A small blocking HTTP/1.1 client for the C++ server tests: one connection per request, bodies whole (by
// Content-Length, chunked, or up to the close), an optional receiver that sees the body as it arrives and may hang up.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zinc::test {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Reply {
    int status = 0;
    Headers headers;
    std::string body;

    std::string get_header_value(const std::string& name) const {
        for (const auto& [k, v] : headers)
            if (same(k, name)) return v;
        return {};
    }
    bool has_header(const std::string& name) const {
        for (const auto& [k, v] : headers)
            if (same(k, name)) return true;
        return false;
    }
    static bool same(const std::string& a, const std::string& b) {
        if (a.size() != b.size()) return false;
        for (size_t i = 0; i < a.size(); ++i)
            if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
                return false;
        return true;
    }
};

class Client {
public:
    explicit Client(int port, int timeout_seconds = 60) : port_(port), timeout_(timeout_seconds) {}

    std::optional<Reply> Get(const std::string& path, const Headers& h = {}) { return send("GET", path, h, "", ""); }
    std::optional<Reply> Options(const std::string& path, const Headers& h = {}) {
        return send("OPTIONS", path, h, "", "");
    }
    std::optional<Reply> Post(const std::string& path, const std::string& body, const std::string& type) {
        return send("POST", path, {}, body, type);
    }
    std::optional<Reply> Post(const std::string& path, const Headers& h, const std::string& body,
                              const std::string& type) {
        return send("POST", path, h, body, type);
    }
    // The body's bytes go to `receive` as they come (chunk framing removed); it returns false to hang up.
    std::optional<Reply> Post(const std::string& path, const std::string& body, const std::string& type,
                              const std::function<bool(const std::string&)>& receive) {
        return send("POST", path, {}, body, type, receive);
    }

    std::optional<Reply> send(const std::string& method, const std::string& path, const Headers& h,
                              const std::string& body, const std::string& type,
                              const std::function<bool(const std::string&)>& receive = nullptr) {
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) return std::nullopt;
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(uint16_t(port_));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            close(fd);
            return std::nullopt;
        }
        bool host = false;
        for (const auto& [k, v] : h) host = host || Reply::same(k, "Host");
        std::string req = method + " " + path + " HTTP/1.1\r\nConnection: close\r\n";
        if (!host) req += "Host: 127.0.0.1:" + std::to_string(port_) + "\r\n";
        for (const auto& [k, v] : h) req += k + ": " + v + "\r\n";
        if (method == "POST")
            req += "Content-Type: " + type + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
        req += "\r\n" + body;
        for (size_t sent = 0; sent < req.size();) {
            const ssize_t n = ::send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
            if (n <= 0) break;  // the server may answer (and close) before taking the whole body
            sent += size_t(n);
        }
        std::optional<Reply> r = read_reply(fd, receive);
        close(fd);
        return r;
    }

private:
    // Reads more into buf; false at the end of the stream or after the timeout.
    bool fill(int fd, std::string& buf) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, timeout_ * 1000) <= 0) return false;
        char tmp[16384];
        const ssize_t n = recv(fd, tmp, sizeof tmp, 0);
        if (n <= 0) return false;
        buf.append(tmp, size_t(n));
        return true;
    }

    std::optional<Reply> read_reply(int fd, const std::function<bool(const std::string&)>& receive) {
        std::string buf;
        size_t head_end;
        while ((head_end = buf.find("\r\n\r\n")) == std::string::npos)
            if (!fill(fd, buf)) return std::nullopt;
        Reply r;
        const std::string head = buf.substr(0, head_end);
        buf.erase(0, head_end + 4);
        size_t line_end = head.find("\r\n");
        const std::string status_line = head.substr(0, line_end);
        if (status_line.size() < 12) return std::nullopt;
        r.status = std::stoi(status_line.substr(9, 3));
        while (line_end != std::string::npos) {
            const size_t start = line_end + 2, next = head.find("\r\n", start);
            const std::string line = head.substr(start, next == std::string::npos ? std::string::npos : next - start);
            const size_t colon = line.find(':');
            if (colon != std::string::npos) {
                size_t v = colon + 1;
                while (v < line.size() && line[v] == ' ') ++v;
                r.headers.emplace_back(line.substr(0, colon), line.substr(v));
            }
            line_end = next;
        }
        auto deliver = [&](const std::string& piece) {
            r.body += piece;
            return !receive || receive(piece);
        };
        if (Reply::same(r.get_header_value("Transfer-Encoding"), "chunked")) {
            for (;;) {
                size_t eol;
                while ((eol = buf.find("\r\n")) == std::string::npos)
                    if (!fill(fd, buf)) return r;
                const size_t size = std::stoul(buf.substr(0, eol), nullptr, 16);
                buf.erase(0, eol + 2);
                if (size == 0) return r;
                while (buf.size() < size + 2)
                    if (!fill(fd, buf)) return r;
                if (!deliver(buf.substr(0, size))) return r;
                buf.erase(0, size + 2);
            }
        }
        if (r.has_header("Content-Length")) {
            const size_t length = std::stoul(r.get_header_value("Content-Length"));
            while (buf.size() < length)
                if (!fill(fd, buf)) break;
            deliver(buf.substr(0, length));
            return r;
        }
        do {
            if (!buf.empty() && !deliver(buf)) return r;
            buf.clear();
        } while (fill(fd, buf));
        return r;
    }

    int port_;
    int timeout_;
};

}  // namespace zinc::test
