// The CUDA backend's ops of the gated delta-net (Qwen3.5) layers. Backend checks their shapes; here only the
// kernels' limits are. Every op only enqueues kernels (delta_net_chunked also needs a scratch buffer, sized by the
// token count). A decode step's delta_net_step is three kernels instead of the six of its sequence (the gates, the
// conv, the q/k norms, the recurrence, the gated norm, and the quantization of its output for the matvec after it): the
// small ones joined around the recurrence, which keeps its own kernel of many blocks. (The recurrence and the gated
// norm in one kernel, a block per value head, measured slower on the H100: Qwen3.6-35B-A3B tg128 340.1 against 342.1.)
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/delta_net_kernels.h"

namespace zinc::backend {
namespace {

// The kernels' arguments, after their limits are checked.
cuda::DeltaNetArgs delta_net_args(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta, Act& state,
                                  const DeltaNetParams& p, Act& out, const char* op) {
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
    a.T = q.rows;
    a.n_k = p.n_k;
    a.n_v = p.n_v;
    a.d_k = p.d_k;
    a.d_v = p.d_v;
    a.tiled = p.tiled;
    a.scale = p.scale;
    return a;
}

}  // namespace

void CudaBackend::do_sigmoid_mul(const Act& x, const Act& gate, Act& out) {
    const bool per_row = gate.cols == 1 && x.cols != 1;
    ZINC_CUDA_CHECK(cuda::sigmoid_mul(x.data, gate.data, x.rows, x.cols, per_row, out.data, stream_), "sigmoid_mul",
                    "");
}

// One launch for sigmoid_mul and both adds; a and b stay as they were.
void CudaBackend::do_shared_expert_add(Act& a, Act& b, const Act& gate, Act& out) {
    const bool per_row = gate.cols == 1 && b.cols != 1;
    ZINC_CUDA_CHECK(cuda::shared_expert_add(a.data, b.data, gate.data, b.rows, b.cols, per_row, out.data, stream_),
                    "shared_expert_add", "");
}

void CudaBackend::do_fill(Act& a, float value) {
    ZINC_CUDA_CHECK(cuda::fill(a.data, value, a.size(), stream_), "fill", "");
}

void CudaBackend::do_slice_groups(const Act& src, int64_t group, int64_t offset, Act& out) {
    ZINC_CUDA_CHECK(cuda::slice_groups(src.data, src.rows, src.cols, group, offset, out.data, out.cols, stream_),
                    "slice_groups", "");
}

void CudaBackend::do_delta_net_gates(const Act& a, const Act& b, const Weight& dt_bias, const Weight& ssm_a, Act& g,
                                     Act& beta_out) {
    const int64_t n = a.cols;
    ZINC_CUDA_CHECK(cuda::delta_net_gates(a.data, b.data, static_cast<const float*>(dt_bias.data),
                                          static_cast<const float*>(ssm_a.data), a.rows, n, g.data, beta_out.data,
                                          stream_),
                    "delta_net_gates", ssm_a.name);
}

void CudaBackend::do_conv1d_causal(const Act& x, Act& state, const Weight& w, bool silu, Act& out) {
    const int64_t C = x.cols, T = x.rows;
    const int64_t K = w.cols;
    if (K > cuda::kMaxConvK)
        throw std::runtime_error("conv1d_causal with a kernel of " + std::to_string(K) + " taps (more than " +
                                 std::to_string(cuda::kMaxConvK) + ") is not implemented on the CUDA backend");
    // When out is x, each channel runs as one thread that reads its inputs before overwriting them.
    const bool aliased = out.data == x.data;
    ZINC_CUDA_CHECK(cuda::conv1d_causal(x.data, state.data, static_cast<const float*>(w.data), T, C, int(K), silu,
                                        aliased, out.data, stream_),
                    "conv1d_causal", w.name);
}

void CudaBackend::do_delta_net(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta,
                               Act& state, const DeltaNetParams& p, Act& out) {
    const cuda::DeltaNetArgs a = delta_net_args(q, k, v, g, beta, state, p, out, "delta_net");
    ZINC_CUDA_CHECK(cuda::delta_net(a, stream_), "delta_net", "");
}

// Three launches (delta_net_kernels.h) for all the rows, the last also leaving out's Q8_1 blocks for the output
// projection's matvec right after it where there is one row, as rms_norm does (quantized_row); key heads wider than
// the recurrence takes go to the sequence of ops, whose delta_net says so. Several rows read their states' addresses
// from the step's values (device_step_ints), the same in every step of the same sequences.
void CudaBackend::do_delta_net_step(const Act& qkv, const Act& z, const Act& a, const Act& b, const DeltaNetWeights& w,
                                    float eps, std::span<Act* const> conv_states, std::span<Act* const> states,
                                    const DeltaNetParams& p, Act& conv, Act& g, Act& beta, Act& out) {
    const int K = static_cast<int>(w.conv->cols);
    const int64_t rows = qkv.rows;
    if (!cuda::delta_net_step_fits(p.d_k, K) || p.n_v > 65535 || rows > 65535)
        return Backend::do_delta_net_step(qkv, z, a, b, w, eps, conv_states, states, p, conv, g, beta, out);
    const DeltaNetPieces c = delta_net_pieces(rows_of(conv, 0, 1), p);
    cuda::DeltaNetArgs args =
        delta_net_args(c.q, c.k, c.v, rows_of(g, 0, 1), rows_of(beta, 0, 1), *states[0], p, out, "delta_net_step");
    float* const* conv_state_ptrs = nullptr;
    if (rows > 1) {
        std::vector<float*> ptrs;
        for (Act* s : conv_states) ptrs.push_back(s->data);
        for (Act* s : states) ptrs.push_back(s->data);
        const std::span<const int32_t> ints(reinterpret_cast<const int32_t*>(ptrs.data()), ptrs.size() * 2);
        const auto* d = reinterpret_cast<float* const*>(device_step_ints(ints, "delta_net_step"));
        conv_state_ptrs = d;
        args.states = d + rows;
        args.rows = rows;
        args.in_stride = conv.cols;
    }
    cuda::DeltaNetStepArgs st;
    st.qkv = qkv.data;
    st.z = z.data;
    st.a = a.data;
    st.b = b.data;
    st.conv_w = static_cast<const float*>(w.conv->data);
    st.dt_bias = static_cast<const float*>(w.dt_bias->data);
    st.ssm_a = static_cast<const float*>(w.ssm_a->data);
    st.norm_w = static_cast<const float*>(w.norm->data);
    st.conv_state = conv_states[0]->data;
    st.conv_states = conv_state_ptrs;
    st.conv = conv.data;
    st.g = g.data;
    st.beta = beta.data;
    st.K = K;
    st.eps = eps;
    cuda::BlockQ8_1f* q8 = nullptr;
    if (rows == 1 && p.d_v % 32 == 0 && p.d_v <= 32 * cuda::kMaxStepNormBlocks) {
        q8 = q8_row_scratch(out.cols, "delta_net_step");
    }
    ZINC_CUDA_CHECK(cuda::delta_net_step(args, st, q8, stream_), "delta_net_step", w.norm->name);
    if (q8) normed_ = {out.data, out.cols, ops_begun()};
}

// The chunked (WY) form, as the CPU's; chunks longer than cuda::kMaxChunk tokens run as chunks of kMaxChunk (the
// chunk length changes only the rounding).
void CudaBackend::do_delta_net_chunked(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta,
                                       Act& state, const DeltaNetParams& p, int chunk, Act& out) {
    const cuda::DeltaNetArgs a = delta_net_args(q, k, v, g, beta, state, p, out, "delta_net_chunked");
    if (a.T == 0) return;
    const size_t bytes = cuda::delta_net_chunked_scratch(p.n_v, a.T, chunk) * sizeof(float);
    auto* m = static_cast<float*>(scratch("delta_net chunk matrices", bytes, "delta_net_chunked"));
    ZINC_CUDA_CHECK(cuda::delta_net_chunked(a, chunk, m, stream_), "delta_net_chunked", "");
}

}  // namespace zinc::backend
