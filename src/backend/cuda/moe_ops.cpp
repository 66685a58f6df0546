// The CUDA backend's mixture-of-experts ops and the activations of gemma4 / gpt-oss.
//
// moe_ffn works on (token, slot) pairs without a host round trip, since the expert ids exist only on the device:
// per pass over whole tokens, the gate and up (or merged gate_up) expert matvecs write [gate | up] rows per pair,
// moe_activate applies the per-expert scale/bias and the activation (and, for a quantized down projection,
// quantizes the result to Q8_1), the down expert matvec writes one row per pair, and moe_combine adds the slots
// of each token with their routing weights. Weight types with a dp4a matvec read Q8_1 activations (x quantized
// once for all tokens); F32/F16/BF16 weights read the f32 activations. The ids cannot be checked on the host; the
// expert matvecs trust them, and moe_route only writes ids in [0, n_expert).
#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/elementwise_kernels.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/moe_kernels.h"

namespace zinc::backend {
namespace {

using gguf::TensorType;

// Per-pass scratch (pre-activations, activations, expert outputs) is kept under this; larger batches run in passes.
constexpr size_t kMoeScratchBudget = size_t(256) << 20;

bool is_float_type(TensorType t) { return t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16; }

// One 3-D expert projection {in, out, n_expert} and the matvec that computes it.
struct Proj {
    const Weight* w = nullptr;
    int64_t in = 0, out = 0, n_exp = 0;
    size_t rb = 0, expert_bytes = 0;
    bool dp4a = false;  // Q8_1 activations and integer dot products; else f32 activations

    Proj(const Weight* w_, const char* what) : w(w_) {
        if (!w) throw std::invalid_argument(std::string("moe_ffn: missing ") + what + " weight");
        in = w->ne[0];
        out = w->ne[1];
        n_exp = w->ne[2];
        if (w->ne[3] != 1 || in != w->cols || out * n_exp != w->rows || in <= 0 || out <= 0 || n_exp <= 0)
            throw std::invalid_argument("moe_ffn: " + w->name + " is not a 3-D expert tensor");
        dp4a = cuda::has_dp4a_matvec(int(w->type));
        if (!dp4a && !is_float_type(w->type))
            throw std::invalid_argument("moe_ffn: " + w->name + ": type " + std::string(gguf::type_name(w->type)) +
                                        " has no expert matvec on the CUDA backend");
        if (dp4a && in % 32 != 0)
            throw std::invalid_argument("moe_ffn: " + w->name + ": rows of " + std::to_string(in) +
                                        " values are not whole 32-value blocks");
        rb = gguf::row_bytes(w->type, static_cast<size_t>(in));
        expert_bytes = rb * static_cast<size_t>(out);
    }

    // out[p * out_stride + o] = W_{ids[p]}[o] . x[p / x_div] for the n_pairs pairs of one pass.
    void run(const cuda::BlockQ8_1f* xq, const float* xf, int x_div, const int32_t* ids, int64_t n_pairs, float* res,
             int64_t out_stride, cudaStream_t s) const {
        if (dp4a)
            ZINC_CUDA_CHECK(cuda::matvec_q_ids(int(w->type), w->data, rb, expert_bytes, out, in, xq, x_div, ids,
                                               n_pairs, res, out_stride, s),
                            "moe_ffn: matvec_q_ids", w->name);
        else
            ZINC_CUDA_CHECK(cuda::matvec_f_ids(int(w->type), w->data, rb, expert_bytes, out, in, xf, x_div, ids,
                                               n_pairs, res, out_stride, s),
                            "moe_ffn: matvec_f_ids", w->name);
    }
};

// The device pointer of an optional f32 extra of cols * rows values.
const float* f32_extra(const Weight* w, int64_t cols, int64_t rows, const char* what) {
    if (!w) return nullptr;
    if (w->type != TensorType::F32 || w->cols * w->rows != cols * rows)
        throw std::invalid_argument(std::string("moe_ffn: ") + what + " " + w->name + " must be f32 with " +
                                    std::to_string(cols * rows) + " values");
    return static_cast<const float*>(w->data);
}

int activation_id(MoeActivation a) {
    switch (a) {
    case MoeActivation::swiglu: return cuda::kMoeSwiglu;
    case MoeActivation::geglu: return cuda::kMoeGeglu;
    case MoeActivation::swiglu_oai: return cuda::kMoeSwigluOai;
    }
    throw std::invalid_argument("moe_ffn: unknown activation");
}

}  // namespace

void CudaBackend::moe_route(const Act& logits, int k, bool renormalize, IdAct& ids, Act& weights) {
    const int64_t n_exp = logits.cols, T = logits.rows;
    if (k <= 0 || k > n_exp) throw std::invalid_argument("moe_route: k must be in [1, n_expert]");
    if (ids.rows != T || ids.cols != k || weights.rows != T || weights.cols != k)
        throw std::invalid_argument("moe_route: ids and weights must be rows x k");
    if (n_exp > cuda::kMaxRouteExperts)
        throw std::invalid_argument("moe_route: " + std::to_string(n_exp) +
                                    " experts; the CUDA backend routes at most " +
                                    std::to_string(cuda::kMaxRouteExperts));
    ZINC_CUDA_CHECK(cuda::moe_route(logits.data, T, int(n_exp), k, renormalize, ids.data, weights.data, stream_),
                    "moe_route", "");
}

void CudaBackend::moe_ffn(const Act& x, const IdAct& ids, const Act& weights, const MoeWeights& mw, Act& out) {
    const bool merged = mw.gate_up != nullptr;
    if (merged == (mw.gate != nullptr || mw.up != nullptr))
        throw std::invalid_argument("moe_ffn: give either gate and up, or gate_up");
    const Proj down(mw.down, "down");
    const Proj first(merged ? mw.gate_up : mw.gate, merged ? "gate_up" : "gate");
    std::optional<Proj> up;
    if (!merged) up.emplace(mw.up, "up");
    const int64_t n_exp = first.n_exp, in = first.in;
    const int64_t n_ff = merged ? first.out / 2 : first.out;
    const int64_t n_out = down.out;
    if ((merged && first.out % 2 != 0) || (up && (up->in != in || up->out != n_ff || up->n_exp != n_exp)) ||
        down.in != n_ff || down.n_exp != n_exp)
        throw std::invalid_argument("moe_ffn: expert tensors " + first.w->name + ", " + down.w->name +
                                    " have inconsistent shapes");
    const int64_t T = x.rows, K = ids.cols;
    if (x.cols != in || ids.rows != T || weights.rows != T || weights.cols != K || out.rows != T || out.cols != n_out)
        throw std::invalid_argument("moe_ffn: activation shapes do not match " + first.w->name);
    if (K < 1 || K > n_exp) throw std::invalid_argument("moe_ffn: the slots per token must be in [1, n_expert]");
    const float* gate_s = f32_extra(mw.gate_scale, 1, n_exp, "gate scale");
    const float* up_s = f32_extra(mw.up_scale, 1, n_exp, "up scale");
    const float* down_s = f32_extra(mw.down_scale, 1, n_exp, "down scale");
    const float* gate_b = f32_extra(mw.gate_bias, n_ff, n_exp, "gate bias");
    const float* up_b = f32_extra(mw.up_bias, n_ff, n_exp, "up bias");
    const float* gate_up_b = f32_extra(mw.gate_up_bias, 2 * n_ff, n_exp, "gate_up bias");
    const float* down_b = f32_extra(mw.down_bias, n_out, n_exp, "down bias");
    if (merged && (gate_s || gate_b || up_b))
        throw std::invalid_argument("moe_ffn: gate_up takes up_scale, gate_up_bias");
    if (!merged && gate_up_b) throw std::invalid_argument("moe_ffn: gate_up_bias needs gate_up");
    const int act = activation_id(mw.act);
    if (T == 0) return;

    // With gate_up, the merged output [gate | up] is scaled as a whole and biased by the halves of gate_up_bias.
    cuda::MoeAffine gate_aff{gate_s, gate_b, n_ff}, up_aff{up_s, up_b, n_ff};
    if (merged) {
        gate_aff = {up_s, gate_up_b, 2 * n_ff};
        up_aff = {up_s, gate_up_b ? gate_up_b + n_ff : nullptr, 2 * n_ff};
    }
    const cuda::MoeAffine down_aff{down_s, down_b, n_out};

    // x in Q8_1 once for every token, when a gate/up projection reads it that way.
    cuda::BlockQ8_1f* xq = nullptr;
    if (first.dp4a || (up && up->dp4a)) {
        xq = static_cast<cuda::BlockQ8_1f*>(
            scratch("moe x q8_1", static_cast<size_t>(T * (in / 32)) * sizeof(cuda::BlockQ8_1f), "moe_ffn"));
        ZINC_CUDA_CHECK(cuda::quantize_q8_1(x.data, T, in, xq, stream_), "moe_ffn: quantize_q8_1", first.w->name);
    }
    const size_t act_bytes = down.dp4a ? static_cast<size_t>(n_ff / 32) * sizeof(cuda::BlockQ8_1f)
                                       : static_cast<size_t>(n_ff) * sizeof(float);
    const size_t pair_bytes = static_cast<size_t>(2 * n_ff + n_out) * sizeof(float) + act_bytes;
    const int64_t Tc = cuda::moe_chunk_tokens(T, K, pair_bytes, kMoeScratchBudget);
    const size_t max_pairs = static_cast<size_t>(Tc * K);
    auto* h = static_cast<float*>(scratch("moe gate_up out", max_pairs * 2 * n_ff * sizeof(float), "moe_ffn"));
    void* a = scratch("moe activations", max_pairs * act_bytes, "moe_ffn");
    auto* y = static_cast<float*>(scratch("moe down out", max_pairs * n_out * sizeof(float), "moe_ffn"));
    auto* a_f32 = down.dp4a ? nullptr : static_cast<float*>(a);
    auto* a_q = down.dp4a ? static_cast<cuda::BlockQ8_1f*>(a) : nullptr;

    for (int64_t t0 = 0; t0 < T; t0 += Tc) {
        const int64_t nt = std::min(Tc, T - t0), np = nt * K;
        const int32_t* id = ids.data + t0 * K;
        const cuda::BlockQ8_1f* xq_c = xq ? xq + t0 * (in / 32) : nullptr;
        const float* x_c = x.data + t0 * in;
        first.run(xq_c, x_c, int(K), id, np, h, 2 * n_ff, stream_);
        if (up) up->run(xq_c, x_c, int(K), id, np, h + n_ff, 2 * n_ff, stream_);
        ZINC_CUDA_CHECK(cuda::moe_activate(h, np, n_ff, id, gate_aff, up_aff, act, mw.alpha, mw.limit, a_f32, a_q,
                                           stream_),
                        "moe_ffn: moe_activate", first.w->name);
        down.run(a_q, a_f32, 1, id, np, y, n_out, stream_);
        ZINC_CUDA_CHECK(cuda::moe_combine(y, nt, int(K), n_out, id, weights.data + t0 * K, down_aff,
                                          out.data + t0 * n_out, stream_),
                        "moe_ffn: moe_combine", down.w->name);
    }
}

void CudaBackend::geglu(const Act& gate, const Act& up, Act& out) {
    check_same_shape(gate, up, "geglu");
    check_same_shape(gate, out, "geglu");
    ZINC_CUDA_CHECK(cuda::geglu(gate.data, up.data, out.data, gate.size(), stream_), "geglu", "");
}

void CudaBackend::add_bias(Act& x, const Weight& b) {
    check_f32_vector(b, x.cols, "add_bias");
    ZINC_CUDA_CHECK(cuda::add_bias(x.data, static_cast<const float*>(b.data), x.rows, x.cols, stream_), "add_bias",
                    b.name);
}

void CudaBackend::scale(const Act& x, float s, Act& out) {
    check_same_shape(x, out, "scale");
    ZINC_CUDA_CHECK(cuda::scale(x.data, s, out.data, x.size(), stream_), "scale", "");
}

void CudaBackend::softcap(Act& x, float cap) {
    if (!(cap > 0.0f)) throw std::invalid_argument("softcap: the cap must be positive");
    ZINC_CUDA_CHECK(cuda::softcap(x.data, cap, x.size(), stream_), "softcap", "");
}

}  // namespace zinc::backend
