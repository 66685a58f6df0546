// The CUDA backend's mixture-of-experts ops and the activations of gemma4 / gpt-oss.
#include <stdexcept>
#include <string>

#include "backend/cuda/cuda_backend.h"

namespace zinc::backend {
namespace {

[[noreturn]] void not_implemented(const char* op) {
    throw std::runtime_error(std::string(op) + " is not implemented on the CUDA backend yet");
}

}  // namespace

void CudaBackend::moe_route(const Act&, int, bool, IdAct&, Act&) { not_implemented("moe_route"); }
void CudaBackend::moe_ffn(const Act&, const IdAct&, const Act&, const MoeWeights&, Act&) { not_implemented("moe_ffn"); }
void CudaBackend::geglu(const Act&, const Act&, Act&) { not_implemented("geglu"); }
void CudaBackend::add_bias(Act&, const Weight&) { not_implemented("add_bias"); }
void CudaBackend::scale(const Act&, float, Act&) { not_implemented("scale"); }
void CudaBackend::softcap(Act&, float) { not_implemented("softcap"); }

}  // namespace zinc::backend
