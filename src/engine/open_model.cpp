#include "engine/open_model.h"

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <fstream>
#include <mutex>
#include <new>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <utility>

#include "backend/devices.h"
#include "engine/memory_plan.h"
#include "gguf/error.h"
#include "gguf/printable.h"
#include "model/metadata.h"
#include "quant/finite.h"

namespace zinc::engine {
namespace {

// Touches every page of every shard so the first tokens do not stall on page faults.
void read_in(const gguf::Model& m, const std::function<void(uint64_t, uint64_t)>& on_read) {
    const uint64_t total = m.total_size();
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    constexpr size_t kReport = size_t{64} << 20;
    uint64_t done = 0;
    volatile uint8_t sink = 0;
    for (const gguf::File& f : m.files()) {
        const auto map = f.mapping();
        madvise(const_cast<uint8_t*>(map.data()), map.size(), MADV_WILLNEED);
        for (size_t off = 0; off < map.size(); off += page) {
            sink = sink + map[off];
            if (on_read && off % kReport == 0 && off > 0) on_read(done + off, total);
        }
        done += map.size();
    }
    if (on_read) on_read(total, total);
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

// The backend that --n-gpu-layers asks for, in zinc's terms.
BackendChoice resolve_gpu_layers(BackendChoice c, const gguf::Model& m) {
    if (!c.gpu_layers) return c;
    const int n = *c.gpu_layers, layers = n_layers(m);
    const std::string ngl = "--n-gpu-layers " + std::to_string(n);
    if (n == 0) {
        if (c.backend == "cuda") throw std::invalid_argument(ngl + " asks for the CPU but --backend cuda was given");
        c.backend = "cpu";
    } else if (n < 0 || n >= layers) {
        if (c.backend == "cpu") throw std::invalid_argument(ngl + " asks for the GPU but --backend cpu was given");
    } else {
        throw std::invalid_argument(ngl + ": zinc runs all " + std::to_string(layers) +
                                    " layers of this model on one backend; use --backend cuda (or -ngl " +
                                    std::to_string(layers) + ") for the GPU, --backend cpu (or -ngl 0) for the CPU");
    }
    return c;
}

std::vector<int> affinity_cpus() {
    std::vector<int> cpus;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int i = 0; i < CPU_SETSIZE; ++i)
            if (CPU_ISSET(i, &set)) cpus.push_back(i);
    if (cpus.empty())
        for (int i = 0; i < static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); ++i) cpus.push_back(i);
    return cpus;
}

bool read_int(const std::string& path, long& v) {
    std::ifstream f(path);
    return static_cast<bool>(f >> v);
}

}  // namespace

int n_layers(const gguf::Model& m) { return model::Metadata(m).count("block_count", model::kMaxLayers); }

void check_weights(const gguf::Model& m, int threads) {
    std::vector<const gguf::TensorInfo*> tensors;
    for (const gguf::File& f : m.files())
        for (const gguf::TensorInfo& t : f.tensors()) tensors.push_back(&t);
    // The largest first, so that the threads finish together.
    std::sort(tensors.begin(), tensors.end(), [](auto* a, auto* b) { return a->nbytes > b->nbytes; });
    std::atomic<size_t> next{0};
    std::mutex mu;
    std::string bad;  // the first finding, by tensor order
    size_t bad_at = SIZE_MAX;
    auto work = [&] {
        for (size_t i; (i = next++) < tensors.size();) {
            const gguf::TensorInfo& t = *tensors[i];
            const int64_t at = quant::first_non_finite(t.type, t.data, int64_t(t.n_elements));
            if (at < 0) continue;
            const bool blocks = gguf::traits(t.type).quantized;
            std::lock_guard<std::mutex> lk(mu);
            if (i < bad_at) {
                bad_at = i;
                bad = "tensor " + gguf::printable(t.name, 96) + " holds a NaN or an infinity (" +
                      (blocks ? "the scale of block " : "element ") + std::to_string(at) +
                      "): the file is damaged, or its types or offsets do not describe its data";
            }
        }
    };
    std::vector<std::thread> pool;
    for (int k = 1; k < std::max(1, threads); ++k) pool.emplace_back(work);
    work();
    for (std::thread& t : pool) t.join();
    if (!bad.empty()) throw gguf::Error(m.first().path() + ": " + bad);
}

namespace {

// The GPU a choice runs on, or -1 for the CPU.
int chosen_device(const BackendChoice& c) {
    if (c.backend == "cpu") {
        if (c.device >= 0) throw std::invalid_argument("--device chooses a GPU; it does not go with --backend cpu");
        return -1;
    }
    if (c.backend != "auto" && c.backend != "cuda")
        throw std::invalid_argument("unknown backend '" + c.backend + "' (auto, cpu or cuda)");
    const backend::CudaReport r = backend::query_cuda();
    const bool want_cuda = c.backend == "cuda" || c.device >= 0;
    int device = c.device;
    if (device >= 0) {
        bool ok = false;
        for (const auto& g : r.gpus) ok = ok || (g.index == device && g.usable);
        if (!ok) {
            const std::string why =
                r.compiled ? "it is not a usable GPU (see `zinc devices`)" : "this zinc has no CUDA backend";
            throw std::runtime_error("CUDA device " + std::to_string(device) + " cannot be used: " + why);
        }
    } else {
        device = default_gpu(r);
    }
    if (device < 0 && want_cuda)
        throw std::runtime_error(std::string("--backend cuda: ") +
                                 (!r.compiled ? "this zinc was built without the CUDA backend"
                                  : r.error.empty() ? "no usable GPU (see `zinc devices`)"
                                                    : "no usable GPU: " + r.error));
    return device;
}

std::unique_ptr<backend::Backend> make_backend(const BackendChoice& c, int device) {
    if (device >= 0) return backend::make_cuda_backend(device);
    return backend::make_cpu_backend(c.threads > 0 ? c.threads : physical_cores());
}

}  // namespace

bool picks_gpu(const BackendChoice& c) {
    if (c.gpu_layers && *c.gpu_layers == 0) return false;
    try {
        return chosen_device(c) >= 0;
    } catch (const std::exception&) {  // open_model says what is wrong with the choice
        return false;
    }
}

std::unique_ptr<backend::Backend> make_backend(const BackendChoice& c) { return make_backend(c, chosen_device(c)); }

OpenedModel open_model(const OpenOptions& o) { return open_model(std::make_unique<gguf::Model>(o.path), o); }

OpenedModel open_model(std::unique_ptr<gguf::Model> model, const OpenOptions& o) {
    OpenedModel r;
    r.model = std::move(model);
    BackendChoice choice = resolve_gpu_layers(o.backend, *r.model);
    if (choice.threads <= 0) choice.threads = physical_cores();

    // The plan comes first: a file whose shapes are wrong or that needs more memory than there is is refused before
    // a backend is made (a limit of one backend's kernels, such as a head size, shows at the first forward pass).
    const int device = chosen_device(choice);
    // Caches are paged, but on a GPU one sequence alone keeps its cache in one piece (no page table to read).
    ContextSize asked = o.context;
    if ((device < 0 || asked.n_seq > 1 || asked.kv_size > 0) && asked.page_size == 0)
        asked.page_size = kDefaultPageSize;
    if (o.trained_context)
        asked.n_ctx = model::Metadata(*r.model).count_or("context_length", kDefaultContext, model::kMaxContext);
    ContextSize settled;
    OpenPlan& plan = r.plan;
    // The context settled from `asked`, and the plan's memory and sizes for it.
    const auto settle = [&] {
        settled = settle_context(*r.model, asked);
        plan.use = plan_memory(*r.model, settled, o.all_logits);
        plan.headroom = plan_headroom(plan.use);
        plan.n_ctx = settled.n_ctx;
        plan.n_ubatch = settled.n_ubatch;
        plan.n_seq = settled.n_seq;
        plan.kv_size = settled.kv_size;
        plan.type_k = settled.type_k;
        plan.type_v = settled.type_v;
    };
    settle();

    r.backend = make_backend(choice, device);
    // A backend computing on views of the mapped file has the file's pages as its weights: worth reading in before
    // the first token; its threads are the ones chosen here.
    const bool mapped = r.backend->weights_are_mapped();
    plan.backend = r.backend->name();
    plan.where = r.backend->where();
    plan.threads = mapped ? choice.threads : 0;
    plan.free_bytes = o.memory_limit > 0 ? o.memory_limit : r.backend->free_memory();
    if (o.trained_context && plan.free_bytes > 0 &&
        plan.use.total() + plan.headroom > plan.free_bytes) {  // as much of the training context as fits
        const int64_t fit = fitting_context(plan.use, plan.free_bytes, plan.n_ctx);
        if (fit >= 1 && fit < plan.n_ctx) {
            asked.n_ctx = int(fit);
            settle();
            plan.context_capped = true;
        }
    }
    if (plan.free_bytes > 0) check_fits(plan.use, plan.free_bytes, plan.where, plan.n_ctx);

    if (mapped) read_in(*r.model, o.on_read);
    if (o.check_weights) check_weights(*r.model, choice.threads);
    try {
        r.session = std::make_unique<Session>(*r.model, *r.backend, settled);
    } catch (const std::bad_alloc&) {
        throw std::runtime_error("out of memory while loading the model on " + plan.where + ": it needs " +
                                 gib(plan.use.total()) + " (" + describe(plan.use, plan.n_ctx) +
                                 "); a smaller --ctx-size needs less");
    }
    plan.n_ctx_train = r.session->family().n_ctx_train();
    return r;
}

int logical_cpus() { return static_cast<int>(affinity_cpus().size()); }

int physical_cores() { return count_physical_cores("/sys/devices/system/cpu", "/proc/cpuinfo", affinity_cpus()); }

int count_physical_cores(const std::string& sysfs_cpu_dir, const std::string& cpuinfo_path,
                         const std::vector<int>& cpus) {
    const std::set<int> wanted(cpus.begin(), cpus.end());
    std::set<std::pair<long, long>> cores;
    for (int cpu : wanted) {
        const std::string dir = sysfs_cpu_dir + "/cpu" + std::to_string(cpu) + "/topology/";
        long package = 0, core = 0;
        if (read_int(dir + "physical_package_id", package) && read_int(dir + "core_id", core))
            cores.insert({package, core});
    }
    if (cores.empty()) {
        // /proc/cpuinfo: one block per logical CPU with "processor", "physical id" and "core id" lines.
        std::ifstream f(cpuinfo_path);
        std::string line;
        long cpu = -1, package = -1, core = -1;
        auto flush = [&] {
            if (cpu >= 0 && core >= 0 && wanted.count(static_cast<int>(cpu))) cores.insert({package, core});
            cpu = package = core = -1;
        };
        while (std::getline(f, line)) {
            const size_t colon = line.find(':');
            if (colon == std::string::npos) {
                flush();
                continue;
            }
            std::string key = line.substr(0, colon);
            key.erase(key.find_last_not_of(" \t") + 1);
            long v = -1;
            std::istringstream(line.substr(colon + 1)) >> v;
            if (key == "processor") cpu = v;
            if (key == "physical id") package = v;
            if (key == "core id") core = v;
        }
        flush();
    }
    return cores.empty() ? std::max<int>(1, static_cast<int>(wanted.size())) : static_cast<int>(cores.size());
}

}  // namespace zinc::engine
