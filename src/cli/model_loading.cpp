#include "cli/model_loading.h"

#include <sys/mman.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <tuple>

#include "backend/devices.h"
#include "engine/memory_plan.h"

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

// The default GPU: the highest compute capability, then the most memory; -1 when none is usable.
int default_gpu(const backend::CudaReport& r) {
    int best = -1;
    for (size_t i = 0; i < r.gpus.size(); ++i) {
        const backend::GpuInfo& g = r.gpus[i];
        if (!g.usable) continue;
        if (best < 0) {
            best = static_cast<int>(i);
            continue;
        }
        const backend::GpuInfo& b = r.gpus[best];
        if (std::tie(g.cc_major, g.cc_minor, g.total_bytes) > std::tie(b.cc_major, b.cc_minor, b.total_bytes))
            best = static_cast<int>(i);
    }
    return best < 0 ? -1 : r.gpus[best].index;
}

}  // namespace

void add_backend_options(CLI::App* cmd, std::string& backend, int& device) {
    cmd->add_option("--backend", backend, "auto (CUDA when a usable GPU is present), cpu or cuda")
        ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
        ->capture_default_str();
    cmd->add_option("--device", device, "CUDA device index (default: highest compute capability, then most memory)");
}

std::unique_ptr<backend::Backend> make_backend(const BackendChoice& c) {
    if (c.backend == "cpu") return backend::make_cpu_backend(c.threads);
    if (c.backend != "auto" && c.backend != "cuda") throw std::invalid_argument("unknown backend '" + c.backend + "'");
    const backend::CudaReport r = backend::query_cuda();
    const bool want_cuda = c.backend == "cuda" || c.device >= 0;
    int device = c.device;
    if (device >= 0) {
        bool ok = false;
        for (const auto& g : r.gpus) ok = ok || (g.index == device && g.usable);
        if (!ok) {
            std::string why = r.compiled ? "it is not a usable GPU (see `zinc devices`)" : "this zinc has no CUDA backend";
            throw std::runtime_error("CUDA device " + std::to_string(device) + " cannot be used: " + why);
        }
    } else {
        device = default_gpu(r);
    }
    if (device < 0) {
        if (!want_cuda) return backend::make_cpu_backend(c.threads);
        throw std::runtime_error(std::string("--backend cuda: ") +
                                 (!r.compiled ? "this zinc was built without the CUDA backend"
                                  : r.error.empty() ? "no usable GPU (see `zinc devices`)"
                                                    : "no usable GPU: " + r.error));
    }
    return backend::make_cuda_backend(device);
}

void check_memory(const gguf::Model& m, const backend::Backend& be, int n_ctx, int n_batch) {
    const uint64_t free_bytes = be.free_memory();
    if (free_bytes == 0) return;
    engine::check_fits(engine::plan_memory(m, {n_ctx, n_batch}), free_bytes, be.where(), n_ctx);
}

LoadedModel load_model(const LoadOptions& o) {
    LoadedModel lm;
    lm.model = std::make_unique<gguf::Model>(o.path);
    lm.backend = make_backend({o.backend, o.device, o.threads});
    // The CPU backend reads the weights in place; the CUDA backend copies them through bounded staging buffers.
    if (lm.backend->name() == "cpu") read_in(*lm.model);
    int n_ctx = o.n_ctx;
    if (n_ctx <= 0) {
        const std::string arch = lm.model->get("general.architecture").get_string();
        const gguf::Value* v = lm.model->find(arch + ".context_length");
        n_ctx = std::min(v ? v->get_int<int>() : 4096, 4096);
    }
    // A session evaluates a whole prompt in one batch, so the largest batch is the context.
    check_memory(*lm.model, *lm.backend, n_ctx, n_ctx);
    lm.session = std::make_unique<engine::Session>(*lm.model, *lm.backend, engine::ContextSize{n_ctx});
    return lm;
}

}  // namespace zinc::cli
