// The CUDA backend's ops of the gated delta-net (Qwen3.5) layers.
#include <stdexcept>
#include <string>

#include "backend/cuda/cuda_backend.h"

namespace zinc::backend {
namespace {

[[noreturn]] void not_implemented(const char* op) {
    throw std::runtime_error(std::string(op) + " is not implemented on the CUDA backend yet");
}

}  // namespace

void CudaBackend::sigmoid_mul(const Act&, const Act&, Act&) { not_implemented("sigmoid_mul"); }
void CudaBackend::fill(Act&, float) { not_implemented("fill"); }
void CudaBackend::slice_groups(const Act&, int64_t, int64_t, Act&) { not_implemented("slice_groups"); }
void CudaBackend::l2_norm(const Act&, float, int64_t, Act&) { not_implemented("l2_norm"); }
void CudaBackend::gated_rms_norm(const Act&, const Weight&, const Act&, float, int64_t, Act&) {
    not_implemented("gated_rms_norm");
}
void CudaBackend::delta_net_gates(const Act&, const Act&, const Weight&, const Weight&, Act&, Act&) {
    not_implemented("delta_net_gates");
}
void CudaBackend::conv1d_causal(const Act&, Act&, const Weight&, bool, Act&) { not_implemented("conv1d_causal"); }
void CudaBackend::delta_net(const Act&, const Act&, const Act&, const Act&, const Act&, Act&, const DeltaNetParams&,
                            Act&) {
    not_implemented("delta_net");
}
void CudaBackend::delta_net_chunked(const Act&, const Act&, const Act&, const Act&, const Act&, Act&,
                                    const DeltaNetParams&, int, Act&) {
    not_implemented("delta_net_chunked");
}

}  // namespace zinc::backend
