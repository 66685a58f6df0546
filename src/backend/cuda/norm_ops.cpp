// The CUDA backend's normalizations: RMSNorm, and the L2 norm and gated RMSNorm of the delta-net layers. Kernels:
// norm.cu (norm_kernels.h).
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/norm_kernels.h"

namespace zinc::backend {

// One row, as decode normalizes the residual stream before its matvecs: the kernel also writes the row's Q8_1 blocks,
// which a matvec right after it reads instead of quantizing the row in a launch of its own (quantized_row).
void CudaBackend::do_rms_norm(const Act& x, const Weight* w, float eps, int64_t group, Act& out) {
    const auto* wd = w ? static_cast<const float*>(w->data) : nullptr;
    cuda::BlockQ8_1f* q8 = nullptr;
    normed_ = {};
    if (x.rows == 1 && group == x.cols && cuda::rms_norm_can_quantize(x.data, wd, group, out.data)) {
        const size_t need = static_cast<size_t>(x.cols / 32) * sizeof(cuda::BlockQ8_1f);
        q8 = static_cast<cuda::BlockQ8_1f*>(scratch("q8_1 activations", need, "rms_norm"));
    }
    ZINC_CUDA_CHECK(cuda::rms_norm(x.data, wd, eps, group, x.size() / group, out.data, q8, stream_), "rms_norm",
                    w ? w->name : std::string());
    if (q8) normed_ = {out.data, out.cols, ops_begun()};
}

// One launch: the norm's kernel adds its rows to out (and scales them) instead of storing them.
void CudaBackend::do_norm_add(Act& x, const Weight* w, float eps, Act& out, float s) {
    const auto* wd = w ? static_cast<const float*>(w->data) : nullptr;
    if (!cuda::rms_norm_add_fits(x.data, wd, x.cols, out.data)) return Backend::do_norm_add(x, w, eps, out, s);
    ZINC_CUDA_CHECK(cuda::rms_norm_add(x.data, wd, eps, x.cols, x.rows, out.data, s, stream_), "norm_add",
                    w ? w->name : std::string());
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
