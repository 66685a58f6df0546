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

// Attribute A of device d, read once per device (launch() asks for every kernel); 0 where it cannot be read.
template <cudaDeviceAttr A>
int device_attribute(int d) {
    constexpr int kDevices = 64;
    static std::atomic<int> known[kDevices];  // 0: not read yet, else the value + 1
    if (d < 0 || d >= kDevices) return 0;
    int k = known[d].load(std::memory_order_relaxed);
    if (k == 0) {
        int v = 0;
        if (cudaDeviceGetAttribute(&v, A, d) != cudaSuccess) {
            cudaGetLastError();
            return 0;
        }
        k = v + 1;
        known[d].store(k, std::memory_order_relaxed);
    }
    return k - 1;
}

int current_device() {
    int d = 0;
    if (cudaGetDevice(&d) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return d;
}

thread_local bool in_decode_step = false;

}  // namespace

DecodeStepLaunches::DecodeStepLaunches(bool decode) : was_(in_decode_step) { in_decode_step = decode; }

DecodeStepLaunches::~DecodeStepLaunches() { in_decode_step = was_; }

bool early_launch_enabled() {
    if (!in_decode_step || !wanted().load(std::memory_order_relaxed)) return false;
    return device_attribute<cudaDevAttrComputeCapabilityMajor>(current_device()) >= 9;
}

void set_early_launch(bool on) { wanted().store(on, std::memory_order_relaxed); }

bool early_launch_requested() { return wanted().load(std::memory_order_relaxed); }

}  // namespace zinc::backend::cuda
