#include "cli/model_loading.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace zinc::cli {
namespace {

// Touches every page of every shard so the first tokens do not stall on page faults; for files of
// more than 256 MiB it reports progress, since reading them from disk can take a while.
void read_in(const gguf::Model& m) {
    const uint64_t total = m.total_size();
    const bool report = total > (256ull << 20) && isatty(STDERR_FILENO);
    const long page = sysconf(_SC_PAGESIZE);
    uint64_t done = 0;
    int last_pct = -1;
    volatile uint8_t sink = 0;
    for (const gguf::File& f : m.files()) {
        const auto map = f.mapping();
        madvise(const_cast<uint8_t*>(map.data()), map.size(), MADV_WILLNEED);
        for (size_t off = 0; off < map.size(); off += static_cast<size_t>(page)) {
            sink = sink + map[off];
            if (report && (off & ((64u << 20) - 1)) == 0) {
                const int pct = static_cast<int>(100.0 * double(done + off) / double(total));
                if (pct != last_pct) {
                    std::fprintf(stderr, "\rloading %s: %3d%% of %.2f GiB", m.first().path().c_str(), pct,
                                 double(total) / (1ull << 30));
                    last_pct = pct;
                }
            }
        }
        done += map.size();
    }
    if (report) std::fprintf(stderr, "\rloading %s: 100%% of %.2f GiB\n", m.first().path().c_str(), double(total) / (1ull << 30));
}

}  // namespace

LoadedModel load_model(const LoadOptions& o) {
    LoadedModel lm;
    lm.model = std::make_unique<gguf::Model>(o.path);
    read_in(*lm.model);
    lm.backend = backend::make_cpu_backend(o.threads);
    int n_ctx = o.n_ctx;
    if (n_ctx <= 0) {
        const std::string arch = lm.model->get("general.architecture").get_string();
        const gguf::Value* v = lm.model->find(arch + ".context_length");
        n_ctx = std::min(v ? v->get_int<int>() : 4096, 4096);
    }
    lm.session = std::make_unique<engine::Session>(*lm.model, *lm.backend, n_ctx);
    return lm;
}

}  // namespace zinc::cli
