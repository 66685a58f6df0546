// What GET /metrics reports, in Prometheus' text format: requests by endpoint and status, tokens read and written,
// the time spent on them and the speed of the last generation, prefix cache hits, requests cancelled and why, and
// (from the scheduler) how many requests wait and how many are being generated and the KV cache's pages.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace zinc::server {

// The KV cache's pages in use (held by running requests or kept states) and free; negative: not paged.
struct KvPages {
    int used = -1, free = -1;
};

class Metrics {
public:
    // A response was written. Endpoints the server does not have are counted as "other", so that no client can grow
    // the table.
    void request(const std::string& endpoint, int status);
    // One choice was generated: prompt tokens evaluated (a reused prefix excluded), those reused, and tokens generated,
    // with times.
    void generation(int prompt_tokens, int cached_tokens, double prompt_seconds, int generated,
                    double generate_seconds);
    // A choice ended early: "client_gone", "client_stalled" (its reply unread, Task) or "timeout".
    void cancelled(const std::string& reason);

    std::string text(int waiting, int running, bool ready, KvPages pages = {}) const;

private:
    mutable std::mutex mu_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;
    std::map<std::string, uint64_t> cancelled_;
    uint64_t prompt_tokens_ = 0, cached_tokens_ = 0, generated_tokens_ = 0, prefix_hits_ = 0;
    double prompt_seconds_ = 0, generate_seconds_ = 0;
    double last_prompt_tps_ = 0, last_generate_tps_ = 0;
};

}  // namespace zinc::server
