#include <cstdio>
#include <string>

#include "backend/devices.h"
#include "cli/commands.h"

namespace zinc::cli {
namespace {

std::string gib(size_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
    return buf;
}

void print_devices() {
    std::string backends;
    for (const auto& b : backend::compiled_backends()) backends += (backends.empty() ? "" : ", ") + b;
    std::printf("backends compiled in: %s\n", backends.c_str());

    const backend::CudaReport r = backend::query_cuda();
    if (r.compiled) {
        std::printf("CUDA runtime %s, driver %s\n", backend::cuda_version_string(r.runtime_version).c_str(),
                    r.driver_version ? backend::cuda_version_string(r.driver_version).c_str() : "not found");
    }
    if (r.gpus.empty()) {
        std::printf("no usable GPU: %s; zinc will run on the CPU\n", r.error.c_str());
        return;
    }
    for (const auto& g : r.gpus) {
        std::printf("GPU %d: %s, compute capability %d.%d, %d SMs, %s total, %s free, %d-bit bus — %s\n", g.index,
                    g.name.c_str(), g.cc_major, g.cc_minor, g.multiprocessors, gib(g.total_bytes).c_str(),
                    gib(g.free_bytes).c_str(), g.memory_bus_bits,
                    g.usable ? "usable" : ("not usable: " + g.problem).c_str());
    }
}

}  // namespace

void register_devices(CLI::App& app) {
    auto* cmd = app.add_subcommand("devices", "List the compiled-in backends and the GPUs this machine has");
    cmd->callback(print_devices);
}

}  // namespace zinc::cli
