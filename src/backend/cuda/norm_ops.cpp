// The CUDA backend's normalizations: RMSNorm, and the L2 norm and gated RMSNorm of the delta-net layers. Kernels:
// norm.cu (norm_kernels.h).
#include <cstdint>
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
        q8 = q8_row_scratch(x.cols, "rms_norm");
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

// One launch for all the outputs (up to kMaxNormOuts of them), the first also in Q8_1 for one row, as rms_norm.
void CudaBackend::do_rms_norms(const Act& x, std::span<const Weight* const> w, float eps, std::span<Act* const> out,
                               std::span<const float> s) {
    normed_ = {};
    const int n = int(w.size());
    const float* wd[cuda::kMaxNormOuts];
    float* od[cuda::kMaxNormOuts];
    float sd[cuda::kMaxNormOuts];
    bool fits = n <= cuda::kMaxNormOuts;
    for (int i = 0; fits && i < n; ++i) {
        wd[i] = w[i] ? static_cast<const float*>(w[i]->data) : nullptr;
        od[i] = out[i]->data;
        sd[i] = s.empty() ? 1.0f : s[i];
        fits = cuda::rms_norm_add_fits(x.data, wd[i], x.cols, od[i]);
    }
    const bool quantize = fits && x.rows == 1 && cuda::rms_norm_can_quantize(x.data, wd[0], x.cols, od[0]);
    // Where rms_norm would run its kernel of one warp a row (short rows, no Q8_1), whose sums go in another order.
    if (!fits || (x.cols <= 512 && !quantize)) return Backend::do_rms_norms(x, w, eps, out, s);
    cuda::BlockQ8_1f* q8 = nullptr;
    if (quantize) {
        q8 = q8_row_scratch(x.cols, "rms_norms");
    }
    ZINC_CUDA_CHECK(cuda::rms_norms(x.data, wd, od, sd, n, eps, x.cols, x.rows, q8, stream_), "rms_norms",
                    w[0] ? w[0]->name : std::string());
    if (q8) normed_ = {od[0], x.cols, ops_begun()};
}

// One launch where the gate is one value per row and the rows fit the norm's block kernel; the norm's Q8_1 blocks for
// one row, as rms_norm leaves them.
void CudaBackend::do_shared_expert_add_norm(Act& a, Act& b, const Act& gate, Act& out, const Weight* w, float eps,
                                            Act& h) {
    const auto* wd = w ? static_cast<const float*>(w->data) : nullptr;
    const bool quantize = out.rows == 1 && cuda::rms_norm_can_quantize(out.data, wd, out.cols, h.data);
    const bool aligned = reinterpret_cast<uintptr_t>(a.data) % 16 == 0 && reinterpret_cast<uintptr_t>(b.data) % 16 == 0;
    // Not where rms_norm would run its kernel of one warp a row (short rows, no Q8_1), whose sums go in another order.
    if (gate.cols != 1 || out.cols == 1 || !aligned || (out.cols <= 512 && !quantize) ||
        !cuda::rms_norm_add_fits(out.data, wd, out.cols, h.data))
        return Backend::do_shared_expert_add_norm(a, b, gate, out, w, eps, h);
    normed_ = {};
    cuda::BlockQ8_1f* q8 = nullptr;
    if (quantize) {
        q8 = q8_row_scratch(out.cols, "shared_expert_add_norm");
    }
    ZINC_CUDA_CHECK(cuda::shared_expert_add_norm(out.data, a.data, b.data, gate.data, wd, eps, out.cols, out.rows,
                                                 h.data, q8, stream_),
                    "shared_expert_add_norm", w ? w->name : std::string());
    if (q8) normed_ = {h.data, h.cols, ops_begun()};
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
