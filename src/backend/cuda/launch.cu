// The switch of launch.cuh: whether kernels are launched early (programmatic dependent launch).
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/launch.cuh"

namespace zinc::backend::cuda {
namespace {

std::atomic<bool>& wanted() {
    static std::atomic<bool> on{[] {
        const char* v = std::getenv("ZINC_CUDA_PDL");
        return !(v && std::strcmp(v, "0") == 0);
    }()};
    return on;
}

// Whether device d has sm_90 or later; the answers are kept, since launch() asks for every kernel.
bool supported(int d) {
    constexpr int kDevices = 64;
    static std::atomic<int> known[kDevices];  // 0: not asked yet, 1: no, 2: yes
    if (d < 0 || d >= kDevices) return false;
    int k = known[d].load(std::memory_order_relaxed);
    if (k == 0) {
        int major = 0;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d) != cudaSuccess) {
            cudaGetLastError();
            return false;
        }
        k = major >= 9 ? 2 : 1;
        known[d].store(k, std::memory_order_relaxed);
    }
    return k == 2;
}

thread_local bool in_decode_step = false;

}  // namespace

DecodeStepLaunches::DecodeStepLaunches(bool decode) : was_(in_decode_step) { in_decode_step = decode; }

DecodeStepLaunches::~DecodeStepLaunches() { in_decode_step = was_; }

bool early_launch_enabled() {
    if (!in_decode_step || !wanted().load(std::memory_order_relaxed)) return false;
    int d = 0;
    if (cudaGetDevice(&d) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return supported(d);
}

void set_early_launch(bool on) { wanted().store(on, std::memory_order_relaxed); }

bool early_launch_requested() { return wanted().load(std::memory_order_relaxed); }

}  // namespace zinc::backend::cuda
