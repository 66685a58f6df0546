// The CUDA backend's normalizations: RMSNorm, and the L2 norm and gated RMSNorm of the delta-net layers. Kernels:
// norm.cu (norm_kernels.h).
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/norm_kernels.h"

namespace zinc::backend {

void CudaBackend::do_rms_norm(const Act& x, const Weight* w, float eps, int64_t group, Act& out) {
    ZINC_CUDA_CHECK(cuda::rms_norm(x.data, w ? static_cast<const float*>(w->data) : nullptr, eps, group,
                                   x.size() / group, out.data, stream_),
                    "rms_norm", w ? w->name : std::string());
}

void CudaBackend::do_l2_norm(const Act& x, float eps, int64_t group, Act& out) {
    ZINC_CUDA_CHECK(cuda::l2_norm(x.data, eps, group, x.size() / group, out.data, stream_), "l2_norm", "");
}

void CudaBackend::do_gated_rms_norm(const Act& x, const Weight& w, const Act& z, float eps, int64_t group,
                                    Act& out) {
    ZINC_CUDA_CHECK(cuda::gated_rms_norm(x.data, static_cast<const float*>(w.data), z.data, eps, group,
                                         x.size() / group, out.data, stream_),
                    "gated_rms_norm", w.name);
}

}  // namespace zinc::backend
