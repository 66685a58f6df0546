// The CUDA backend's element-wise ops: residual add, SwiGLU and GeGLU, row-broadcast bias, scaling and soft-capping.
// Kernels: elementwise.cu (elementwise_kernels.h).
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/elementwise_kernels.h"

namespace zinc::backend {

void CudaBackend::do_add(const Act& a, const Act& b, Act& out) {
    ZINC_CUDA_CHECK(cuda::add(a.data, b.data, out.data, a.size(), stream_), "add", "");
}

void CudaBackend::do_swiglu(const Act& gate, const Act& up, Act& out) {
    ZINC_CUDA_CHECK(cuda::swiglu(gate.data, up.data, out.data, gate.size(), stream_), "swiglu", "");
}

void CudaBackend::do_geglu(const Act& gate, const Act& up, Act& out) {
    ZINC_CUDA_CHECK(cuda::geglu(gate.data, up.data, out.data, gate.size(), stream_), "geglu", "");
}

void CudaBackend::do_add_bias(Act& x, const Weight& b) {
    ZINC_CUDA_CHECK(cuda::add_bias(x.data, static_cast<const float*>(b.data), x.rows, x.cols, stream_), "add_bias",
                    b.name);
}

void CudaBackend::do_scale(const Act& x, float s, Act& out) {
    ZINC_CUDA_CHECK(cuda::scale(x.data, s, out.data, x.size(), stream_), "scale", "");
}

void CudaBackend::do_softcap(Act& x, float cap) {
    ZINC_CUDA_CHECK(cuda::softcap(x.data, cap, x.size(), stream_), "softcap", "");
}

}  // namespace zinc::backend
