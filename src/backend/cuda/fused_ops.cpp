// The CUDA backend's fused ops for decode (one activation row), where a token's time goes to many small launches:
// matmuls runs the weights of one type in one launch (Q/K/V; a Q4_K_M file's Q6_K V with its Q4_K Q and K),
// ffn_gated computes gate, up and the activation in one kernel, matmul_add adds the matvec to the residual stream in
// its epilogue, where matmuls and matmul_add also add their biases (gpt-oss's projections); the activation row is
// quantized to Q8_1 once for all of them. Each row's value is the one the separate ops compute, bit for bit
// (matvec_row.cuh; the epilogue adds in add_bias's and add's order). Other calls (prefill rows, a weight type without a
// matvec, gate and up of different types) run the base class's sequence of separate ops. Kernels: matvec_fused.cu
// (matvec_fused_kernels.h).
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/matmul_kernels.h"
#include "backend/cuda/matvec_fused_kernels.h"

namespace zinc::backend {
namespace {

using gguf::TensorType;

enum class Matvec { dp4a, f32, none };

// How the decode matvec reads w: dp4a against Q8_1 activations, in f32 against f32 ones, or not at all (no kernel:
// the separate ops say so).
Matvec matvec_of(const Weight& w) {
    if (cuda::has_dp4a_matvec(int(w.type))) return Matvec::dp4a;
    if (w.type == TensorType::F32 || w.type == TensorType::F16 || w.type == TensorType::BF16) return Matvec::f32;
    return Matvec::none;
}

// A bias is an f32 weight, in device memory as add_bias reads it.
cuda::MatvecJob job_of(const Weight& w, float* out, const Weight* bias) {
    return {int(w.type), w.data, gguf::row_bytes(w.type, w.cols), w.rows, out,
            bias ? static_cast<const float*>(bias->data) : nullptr};
}

}  // namespace

cuda::BlockQ8_1f* CudaBackend::q8_row_scratch(int64_t cols, const char* op) {
    const size_t need = static_cast<size_t>(cols / 32) * sizeof(cuda::BlockQ8_1f);
    return static_cast<cuda::BlockQ8_1f*>(scratch("q8_1 activations", need, op));
}

bool CudaBackend::row_quantized(const Act& x) const {
    return normed_.data == x.data && normed_.cols == x.cols && normed_.op + 1 == ops_begun();
}

const cuda::BlockQ8_1f* CudaBackend::quantized_row(const Act& x, const char* op, const std::string& tensor) {
    cuda::BlockQ8_1f* xq = q8_row_scratch(x.cols, op);
    if (row_quantized(x)) return xq;
    ZINC_CUDA_CHECK(cuda::quantize_q8_1(x.data, 1, x.cols, xq, stream_), std::string(op) + ": quantize_q8_1", tensor);
    return xq;
}

void CudaBackend::do_matmuls(std::span<const Weight* const> w, const Act& x, std::span<Act* const> out,
                             std::span<const Weight* const> bias) {
    bool any_dp4a = false;
    for (const Weight* wi : w) {
        const Matvec m = matvec_of(*wi);
        if (x.rows != 1 || m == Matvec::none) return Backend::do_matmuls(w, x, out, bias);
        any_dp4a = any_dp4a || m == Matvec::dp4a;
    }
    const cuda::BlockQ8_1f* xq = any_dp4a ? quantized_row(x, "matmuls", w[0]->name) : nullptr;
    // One launch per weight type, or per pair of types that one launch takes (at most kMaxMatvecJobs weights each),
    // in the order the types first occur.
    std::vector<bool> done(w.size(), false);
    for (size_t i = 0; i < w.size(); ++i) {
        if (done[i]) continue;
        const int a = int(w[i]->type);
        int b = a;  // the second type of this launch, once there is one
        cuda::MatvecJob jobs[cuda::kMaxMatvecJobs];
        int n = 0;
        for (size_t j = i; j < w.size() && n < cuda::kMaxMatvecJobs; ++j) {
            const int t = int(w[j]->type);
            if (done[j] || (t != a && t != b && (b != a || !cuda::matvec_multi_pair(a, t)))) continue;
            b = t == a ? b : t;
            jobs[n++] = job_of(*w[j], out[j]->data, bias.empty() ? nullptr : bias[j]);
            done[j] = true;
        }
        ZINC_CUDA_CHECK(cuda::matvec_multi(jobs, n, x.cols, xq, x.data, false, stream_), "matmuls: matvec_multi",
                        w[i]->name);
    }
}

void CudaBackend::do_ffn_gated(const Weight& gate, const Weight& up, const Act& x, GatedActivation act, Act& up_tmp,
                               Act& out) {
    const Matvec m = matvec_of(gate);
    if (x.rows != 1 || m == Matvec::none || up.type != gate.type)
        return Backend::do_ffn_gated(gate, up, x, act, up_tmp, out);
    const cuda::BlockQ8_1f* xq = m == Matvec::dp4a ? quantized_row(x, "ffn_gated", gate.name) : nullptr;
    ZINC_CUDA_CHECK(cuda::matvec_gated(int(gate.type), gate.data, up.data, gguf::row_bytes(gate.type, gate.cols),
                                       gate.rows, x.cols, xq, x.data, act == GatedActivation::geglu ? 1 : 0, out.data,
                                       stream_),
                    "ffn_gated: matvec_gated", gate.name);
}

void CudaBackend::do_matmul_add(const Weight& w, const Act& x, Act& tmp, Act& out, const Weight* bias) {
    const Matvec m = matvec_of(w);
    if (x.rows != 1 || m == Matvec::none) return Backend::do_matmul_add(w, x, tmp, out, bias);
    const cuda::MatvecJob job = job_of(w, out.data, bias);
    // A row no norm has just quantized (the attention's output) is quantized by the matvec's blocks where they can.
    const bool quantizes =
        m == Matvec::dp4a && !row_quantized(x) && cuda::matvec_multi_quantizes(&job, 1, x.cols, x.data);
    const cuda::BlockQ8_1f* xq = m == Matvec::dp4a && !quantizes ? quantized_row(x, "matmul_add", w.name) : nullptr;
    ZINC_CUDA_CHECK(cuda::matvec_multi(&job, 1, x.cols, xq, x.data, true, stream_),
                    "matmul_add: matvec_multi", w.name);
}

}  // namespace zinc::backend
