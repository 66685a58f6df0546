// The CUDA backend's ops of the gated delta-net (Qwen3.5) layers. Shapes are checked as the CPU backend checks them;
// every op only enqueues kernels (delta_net_chunked also needs two scratch buffers, sized by the token count).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/delta_net_kernels.h"
#include "backend/cuda/norm_kernels.h"

namespace zinc::backend {
namespace {

void check_shape(const Act& a, int64_t rows, int64_t cols, const char* op, const char* what) {
    if (a.rows != rows || a.cols != cols)
        throw std::invalid_argument(std::string(op) + ": " + what + " has shape " + std::to_string(a.rows) + "x" +
                                    std::to_string(a.cols) + ", expected " + std::to_string(rows) + "x" +
                                    std::to_string(cols));
}

void check_group(const Act& x, int64_t group, const char* op) {
    if (group <= 0 || x.cols % group != 0) throw std::invalid_argument(std::string(op) + ": bad group");
}

// As the CPU backend's check, plus the limits of the kernels.
cuda::DeltaNetArgs delta_net_args(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta, Act& state,
                                  const DeltaNetParams& p, Act& out, const char* op) {
    if (p.n_k <= 0 || p.n_v <= 0 || p.d_k <= 0 || p.d_v <= 0 || p.n_v % p.n_k != 0)
        throw std::invalid_argument(std::string(op) + ": bad head counts");
    const int64_t T = q.rows;
    check_shape(q, T, int64_t(p.n_k) * p.d_k, op, "q");
    check_shape(k, T, int64_t(p.n_k) * p.d_k, op, "k");
    check_shape(v, T, int64_t(p.n_v) * p.d_v, op, "v");
    check_shape(g, T, p.n_v, op, "g");
    check_shape(beta, T, p.n_v, op, "beta");
    check_shape(state, p.n_v, int64_t(p.d_k) * p.d_v, op, "state");
    check_shape(out, T, int64_t(p.n_v) * p.d_v, op, "out");
    if (p.d_k > cuda::kMaxKeyDim)
        throw std::runtime_error(std::string(op) + " with key heads of " + std::to_string(p.d_k) + " (more than " +
                                 std::to_string(cuda::kMaxKeyDim) + ") is not implemented on the CUDA backend");
    if (p.n_v > 65535 || p.n_k > 65535) throw std::invalid_argument(std::string(op) + ": more than 65535 heads");
    cuda::DeltaNetArgs a;
    a.q = q.data;
    a.k = k.data;
    a.v = v.data;
    a.g = g.data;
    a.beta = beta.data;
    a.state = state.data;
    a.out = out.data;
    a.T = T;
    a.n_k = p.n_k;
    a.n_v = p.n_v;
    a.d_k = p.d_k;
    a.d_v = p.d_v;
    a.tiled = p.tiled;
    a.scale = p.scale;
    return a;
}

bool overlap(const float* a, int64_t na, const float* b, int64_t nb) {
    const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
    return na > 0 && nb > 0 && pa < pb + uintptr_t(nb) * sizeof(float) && pb < pa + uintptr_t(na) * sizeof(float);
}

}  // namespace

void CudaBackend::sigmoid_mul(const Act& x, const Act& gate, Act& out) {
    check_shape(out, x.rows, x.cols, "sigmoid_mul", "out");
    if (gate.rows != x.rows || (gate.cols != x.cols && gate.cols != 1))
        throw std::invalid_argument("sigmoid_mul: gate must have x's shape or one column");
    const bool per_row = gate.cols == 1 && x.cols != 1;
    ZINC_CUDA_CHECK(cuda::sigmoid_mul(x.data, gate.data, x.rows, x.cols, per_row, out.data, stream_), "sigmoid_mul",
                    "");
}

void CudaBackend::fill(Act& a, float value) {
    ZINC_CUDA_CHECK(cuda::fill(a.data, value, a.size(), stream_), "fill", "");
}

void CudaBackend::slice_groups(const Act& src, int64_t group, int64_t offset, Act& out) {
    if (group <= 0 || src.cols % group != 0 || out.rows != src.rows)
        throw std::invalid_argument("slice_groups: bad group or rows");
    const int64_t n_groups = src.cols / group;
    if (n_groups == 0 || out.cols % n_groups != 0)
        throw std::invalid_argument("slice_groups: out width is not a whole per group");
    const int64_t width = out.cols / n_groups;
    if (offset < 0 || offset + width > group) throw std::invalid_argument("slice_groups: slice outside the group");
    if (src.data == out.data) throw std::invalid_argument("slice_groups: out must not alias src");
    ZINC_CUDA_CHECK(cuda::slice_groups(src.data, src.rows, src.cols, group, offset, out.data, out.cols, stream_),
                    "slice_groups", "");
}

void CudaBackend::l2_norm(const Act& x, float eps, int64_t group, Act& out) {
    check_shape(out, x.rows, x.cols, "l2_norm", "out");
    check_group(x, group, "l2_norm");
    ZINC_CUDA_CHECK(cuda::l2_norm(x.data, eps, group, x.size() / group, out.data, stream_), "l2_norm", "");
}

void CudaBackend::gated_rms_norm(const Act& x, const Weight& w, const Act& z, float eps, int64_t group, Act& out) {
    check_shape(out, x.rows, x.cols, "gated_rms_norm", "out");
    check_shape(z, x.rows, x.cols, "gated_rms_norm", "z");
    check_group(x, group, "gated_rms_norm");
    check_f32_vector(w, group, "gated_rms_norm");
    ZINC_CUDA_CHECK(cuda::gated_rms_norm(x.data, static_cast<const float*>(w.data), z.data, eps, group,
                                         x.size() / group, out.data, stream_),
                    "gated_rms_norm", w.name);
}

void CudaBackend::delta_net_gates(const Act& a, const Act& b, const Weight& dt_bias, const Weight& ssm_a, Act& g,
                                  Act& beta_out) {
    const int64_t n = a.cols;
    check_shape(b, a.rows, n, "delta_net_gates", "b");
    check_shape(g, a.rows, n, "delta_net_gates", "g");
    check_shape(beta_out, a.rows, n, "delta_net_gates", "beta");
    check_f32_vector(dt_bias, n, "delta_net_gates");
    check_f32_vector(ssm_a, n, "delta_net_gates");
    ZINC_CUDA_CHECK(cuda::delta_net_gates(a.data, b.data, static_cast<const float*>(dt_bias.data),
                                          static_cast<const float*>(ssm_a.data), a.rows, n, g.data, beta_out.data,
                                          stream_),
                    "delta_net_gates", ssm_a.name);
}

void CudaBackend::conv1d_causal(const Act& x, Act& state, const Weight& w, bool silu, Act& out) {
    const int64_t C = x.cols, T = x.rows;
    if (w.type != gguf::TensorType::F32 || w.rows != C || w.cols < 1)
        throw std::invalid_argument("conv1d_causal: " + w.name + " must be f32 {K, channels}");
    const int64_t K = w.cols;
    check_shape(state, K - 1, C, "conv1d_causal", "state");
    check_shape(out, T, C, "conv1d_causal", "out");
    if (K > cuda::kMaxConvK)
        throw std::runtime_error("conv1d_causal with a kernel of " + std::to_string(K) + " taps (more than " +
                                 std::to_string(cuda::kMaxConvK) + ") is not implemented on the CUDA backend");
    // Each channel is one thread's, so out may be x itself, but not a shifted view of it.
    const bool aliased = out.data == x.data;
    if (!aliased && overlap(out.data, out.size(), x.data, x.size()))
        throw std::invalid_argument("conv1d_causal: out overlaps x without being x");
    if (overlap(state.data, state.size(), x.data, x.size()) || overlap(state.data, state.size(), out.data, out.size()))
        throw std::invalid_argument("conv1d_causal: state overlaps x or out");
    ZINC_CUDA_CHECK(cuda::conv1d_causal(x.data, state.data, static_cast<const float*>(w.data), T, C, int(K), silu,
                                        aliased, out.data, stream_),
                    "conv1d_causal", w.name);
}

void CudaBackend::delta_net(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta, Act& state,
                            const DeltaNetParams& p, Act& out) {
    const cuda::DeltaNetArgs a = delta_net_args(q, k, v, g, beta, state, p, out, "delta_net");
    ZINC_CUDA_CHECK(cuda::delta_net(a, stream_), "delta_net", "");
}

// The chunked (WY) form, as the CPU's; chunks longer than cuda::kMaxChunk tokens run as chunks of kMaxChunk (the
// chunk length changes only the rounding).
void CudaBackend::delta_net_chunked(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta,
                                    Act& state, const DeltaNetParams& p, int chunk, Act& out) {
    const cuda::DeltaNetArgs a = delta_net_args(q, k, v, g, beta, state, p, out, "delta_net_chunked");
    if (chunk <= 0) throw std::invalid_argument("delta_net_chunked: chunk must be positive");
    if (a.T == 0) return;
    const size_t bytes = cuda::delta_net_chunked_scratch(p.n_v, a.T, chunk) * sizeof(float);
    auto* A = static_cast<float*>(scratch("delta_net decay-weighted k.k", bytes, "delta_net_chunked"));
    auto* B = static_cast<float*>(scratch("delta_net decay-weighted q.k", bytes, "delta_net_chunked"));
    ZINC_CUDA_CHECK(cuda::delta_net_chunked(a, chunk, A, B, stream_), "delta_net_chunked", "");
}

}  // namespace zinc::backend
