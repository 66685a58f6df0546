// The CUDA backend's mixture-of-experts ops. Kernels: moe.cu (moe_kernels.h) and the expert matvecs of matvec_q.cu.
//
// moe_ffn works on (token, slot) pairs without a host round trip (but for the GEMM way below, which reads each
// expert's pair count back), since the expert ids exist only on the device:
// per pass over whole tokens, the gate and up (or merged gate_up) expert matvecs write [gate | up] rows per pair,
// moe_activate applies the per-expert scale/bias and the activation (and, for a quantized down projection,
// quantizes the result to Q8_1), and moe_down_sum computes the down expert rows and adds the slots of each token
// with their routing weights in one launch (for more than kMaxDownSlots slots: the down expert matvec writes one row
// per pair and moe_combine adds them). Weight types with a dp4a matvec read Q8_1 activations (x quantized once for
// all tokens); F32/F16/BF16 weights read the f32 activations. A batch of at least as many pairs as experts sorts its
// pairs by expert first (moe_group_pairs), and its dp4a expert matvecs read each weight row once per group of pairs of
// one expert; with kMoeGemmPairsPerExpert pairs per expert or more, its quantized experts are cuBLAS GEMMs instead
// (experts_gemm). The ids cannot be checked on the host; the expert matvecs trust them, and moe_route only writes ids
// in [0, n_expert).
#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cuda/cublas.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/matmul_kernels.h"
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

    explicit Proj(const Weight* w_) : w(w_) {
        in = w->ne[0];
        out = w->ne[1];
        n_exp = w->ne[2];
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

    // The same for pairs sorted into groups by expert (dp4a projections only): each weight row read once a group.
    void run_grouped(const cuda::BlockQ8_1f* xq, int x_div, const cuda::PairGroups& g, float* res, int64_t out_stride,
                     cudaStream_t s) const {
        ZINC_CUDA_CHECK(cuda::matvec_q_grouped(int(w->type), w->data, rb, expert_bytes, out, in, xq, x_div, g, res,
                                               out_stride, s),
                        "moe_ffn: matvec_q_grouped", w->name);
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

// The device pointer of an optional f32 extra.
const float* f32_data(const Weight* w) { return w ? static_cast<const float*>(w->data) : nullptr; }

int activation_id(MoeActivation a) {
    switch (a) {
    case MoeActivation::swiglu: return cuda::kMoeSwiglu;
    case MoeActivation::geglu: return cuda::kMoeGeglu;
    case MoeActivation::swiglu_oai: return cuda::kMoeSwigluOai;
    }
    throw std::invalid_argument("moe_ffn: unknown activation");
}

// A batch with this many pairs per expert or more takes the experts' products as cuBLAS GEMMs (prefill of the models
// with fewer, larger experts: gpt-oss, Gemma 4), each step dequantizing at most kMoeGemmExpertBytes of f16 experts.
constexpr int64_t kMoeGemmPairsPerExpert = 32;
constexpr size_t kMoeGemmExpertBytes = size_t(64) << 20;

// out row i (stride ldo) = W_e . xs row i times the row's scale, for every expert e and each i in its range
// [first[e], first[e + 1]) of the sorted f16 rows xs (matmul_kernels.h' layout, np rows of P.in values).
void experts_gemm(CudaBackend& be, cuda::Cublas& blas, const Proj& P, const std::vector<int32_t>& first,
                  const void* xs, int64_t np, float* out, int64_t ldo) {
    const cudaStream_t s = be.stream();
    const size_t expert16 = size_t(P.out) * size_t(P.in) * 2;
    const int64_t per = std::max<int64_t>(1, int64_t(kMoeGemmExpertBytes / expert16));
    auto* w16 = static_cast<uint8_t*>(be.scratch("moe f16 experts", size_t(std::min(per, P.n_exp)) * expert16,
                                                 "moe_ffn"));
    const auto* x16 = static_cast<const uint8_t*>(xs);
    for (int64_t e0 = 0; e0 < P.n_exp; e0 += per) {
        const int64_t e1 = std::min(P.n_exp, e0 + per);
        if (first[size_t(e1)] == first[size_t(e0)]) continue;  // no pair of these experts
        ZINC_CUDA_CHECK(cuda::dequant_f16_rows(int(P.w->type),
                                               static_cast<const uint8_t*>(P.w->data) + size_t(e0) * P.expert_bytes,
                                               P.rb, (e1 - e0) * P.out, P.in, w16, s),
                        "moe_ffn: dequant_f16_rows", P.w->name);
        for (int64_t e = e0; e < e1; ++e) {
            const int64_t i0 = first[size_t(e)], c = first[size_t(e) + 1] - i0;
            if (c > 0 && !blas.gemm_f16(w16 + size_t(e - e0) * expert16, P.out, P.in, x16 + size_t(i0 * P.in) * 2, c,
                                        out + i0 * ldo, ldo, s))
                throw std::runtime_error("moe_ffn " + P.w->name + ": " + blas.why());
        }
    }
    ZINC_CUDA_CHECK(cuda::scale_rows(out, ldo, np, P.out, xs, P.in, s), "moe_ffn: scale_rows", P.w->name);
}

}  // namespace

void CudaBackend::do_moe_route(const Act& logits, int k, bool renormalize, IdAct& ids, Act& weights) {
    const int64_t n_exp = logits.cols, T = logits.rows;
    if (n_exp > cuda::kMaxRouteExperts)
        throw std::invalid_argument("moe_route: " + std::to_string(n_exp) +
                                    " experts; the CUDA backend routes at most " +
                                    std::to_string(cuda::kMaxRouteExperts));
    ZINC_CUDA_CHECK(cuda::moe_route(logits.data, T, int(n_exp), k, renormalize, ids.data, weights.data, stream_),
                    "moe_route", "");
}

void CudaBackend::do_moe_ffn(const Act& x, const IdAct& ids, const Act& weights, const MoeWeights& mw, Act& out) {
    const bool merged = mw.gate_up != nullptr;
    const Proj down(mw.down);
    const Proj first(merged ? mw.gate_up : mw.gate);
    std::optional<Proj> up;
    if (!merged) up.emplace(mw.up);
    const int64_t in = first.in;
    const int64_t n_ff = merged ? first.out / 2 : first.out;
    const int64_t n_out = down.out;
    const int64_t T = x.rows, K = ids.cols;
    const float* gate_s = f32_data(mw.gate_scale);
    const float* up_s = f32_data(mw.up_scale);
    const float* down_s = f32_data(mw.down_scale);
    const float* gate_b = f32_data(mw.gate_bias);
    const float* up_b = f32_data(mw.up_bias);
    const float* gate_up_b = f32_data(mw.gate_up_bias);
    const float* down_b = f32_data(mw.down_bias);
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
    // The GEMM way (experts_gemm) when the batch has the pairs for it and every projection is quantized.
    const int n_exp = int(first.n_exp);
    cuda::Cublas* blas = T * K >= kMoeGemmPairsPerExpert * n_exp && n_exp <= cuda::kMaxGroupExperts && first.dp4a &&
                                 (!up || up->dp4a) && down.dp4a && n_ff % 32 == 0
                             ? gemm()
                             : nullptr;
    // Its per-pair scratch: the sorted f16 rows of x and of the activations, these in f32 first, the expert id and
    // place of the pair.
    const size_t gemm_pair_bytes = blas ? cuda::f16_rows_bytes(1, in) + cuda::f16_rows_bytes(1, n_ff) +
                                              static_cast<size_t>(n_ff) * sizeof(float) + 2 * sizeof(int32_t)
                                        : 0;
    const size_t pair_bytes = static_cast<size_t>(2 * n_ff + n_out) * sizeof(float) + act_bytes + gemm_pair_bytes;
    const int64_t Tc = cuda::moe_chunk_tokens(T, K, pair_bytes, kMoeScratchBudget);
    const size_t max_pairs = static_cast<size_t>(Tc * K);
    auto* h = static_cast<float*>(scratch("moe gate_up out", max_pairs * 2 * n_ff * sizeof(float), "moe_ffn"));
    void* a = scratch("moe activations", max_pairs * act_bytes, "moe_ffn");
    auto* y = static_cast<float*>(scratch("moe down out", max_pairs * n_out * sizeof(float), "moe_ffn"));
    auto* a_f32 = down.dp4a ? nullptr : static_cast<float*>(a);
    auto* a_q = down.dp4a ? static_cast<cuda::BlockQ8_1f*>(a) : nullptr;

    // A batch with as many pairs as experts or more (prefill) sorts its pairs by expert, so that the dp4a projections
    // read each expert's rows once for up to kPairsPerGroup of its pairs instead of once for each.
    const bool grouped = T * K >= n_exp && n_exp <= cuda::kMaxGroupExperts && first.dp4a && (!up || up->dp4a);
    int32_t* group_pairs = nullptr;
    cuda::PairGroup* group_list = nullptr;
    int32_t* group_count = nullptr;
    cuda::PairGroups groups;
    if (grouped) {
        groups.max_groups = cuda::max_pair_groups(int64_t(max_pairs), n_exp);
        const size_t list_at = max_pairs * sizeof(int32_t);
        const size_t count_at = list_at + size_t(groups.max_groups) * sizeof(cuda::PairGroup);
        auto* g = static_cast<uint8_t*>(scratch("moe pair groups", count_at + sizeof(int32_t), "moe_ffn"));
        group_pairs = reinterpret_cast<int32_t*>(g);
        group_list = reinterpret_cast<cuda::PairGroup*>(g + list_at);
        group_count = reinterpret_cast<int32_t*>(g + count_at);
        groups = {group_pairs, group_list, group_count, groups.max_groups};
    }

    int32_t *expert_first = nullptr, *slot_of = nullptr, *sorted_ids = nullptr;
    void *x16 = nullptr, *xs = nullptr, *as = nullptr;
    float* a_sorted = nullptr;
    std::vector<int32_t> first_of(size_t(n_exp) + 1);
    if (blas) {
        auto* g = static_cast<int32_t*>(
            scratch("moe pair places", (2 * max_pairs + size_t(n_exp) + 1) * sizeof(int32_t), "moe_ffn"));
        slot_of = g;
        sorted_ids = g + max_pairs;
        expert_first = g + 2 * max_pairs;
        x16 = scratch("moe x f16", cuda::f16_rows_bytes(Tc, in), "moe_ffn");
        xs = scratch("moe sorted x f16", cuda::f16_rows_bytes(int64_t(max_pairs), in), "moe_ffn");
        as = scratch("moe sorted activations f16", cuda::f16_rows_bytes(int64_t(max_pairs), n_ff), "moe_ffn");
        a_sorted = static_cast<float*>(scratch("moe sorted activations", max_pairs * n_ff * sizeof(float), "moe_ffn"));
    }

    for (int64_t t0 = 0; t0 < T; t0 += Tc) {
        const int64_t nt = std::min(Tc, T - t0), np = nt * K;
        const int32_t* id = ids.data + t0 * K;
        const cuda::BlockQ8_1f* xq_c = xq ? xq + t0 * (in / 32) : nullptr;
        const float* x_c = x.data + t0 * in;
        if (blas) {
            // The pairs sorted by expert and each expert's range of them, read back to size its GEMMs (a prefill
            // batch, never a recorded step); the token rows in f16 gathered into that order.
            ZINC_CUDA_CHECK(cuda::moe_group_pairs(id, np, n_exp, group_pairs, group_list, group_count, expert_first,
                                                  slot_of, stream_),
                            "moe_ffn: moe_group_pairs", first.w->name);
            ZINC_CUDA_CHECK(cudaMemcpyAsync(first_of.data(), expert_first, first_of.size() * sizeof(int32_t),
                                            cudaMemcpyDeviceToHost, stream_),
                            "moe_ffn: the experts' pair counts", first.w->name);
            synchronize();
            ZINC_CUDA_CHECK(cuda::to_f16_rows(x_c, nt, in, x16, stream_), "moe_ffn: to_f16_rows", first.w->name);
            ZINC_CUDA_CHECK(cuda::gather_f16_rows(x16, nt, in, group_pairs, id, int(K), np, xs, sorted_ids, stream_),
                            "moe_ffn: gather_f16_rows", first.w->name);
            experts_gemm(*this, *blas, first, first_of, xs, np, h, 2 * n_ff);
            if (up) experts_gemm(*this, *blas, *up, first_of, xs, np, h + n_ff, 2 * n_ff);
            ZINC_CUDA_CHECK(cuda::moe_activate(h, np, n_ff, sorted_ids, gate_aff, up_aff, act, mw.alpha, mw.limit,
                                               a_sorted, nullptr, stream_),
                            "moe_ffn: moe_activate", first.w->name);
            ZINC_CUDA_CHECK(cuda::to_f16_rows(a_sorted, np, n_ff, as, stream_), "moe_ffn: to_f16_rows", down.w->name);
            experts_gemm(*this, *blas, down, first_of, as, np, y, n_out);
            ZINC_CUDA_CHECK(cuda::moe_combine(y, slot_of, nt, int(K), n_out, id, weights.data + t0 * K, down_aff,
                                              out.data + t0 * n_out, stream_),
                            "moe_ffn: moe_combine", down.w->name);
            continue;
        }
        if (grouped) {
            ZINC_CUDA_CHECK(cuda::moe_group_pairs(id, np, n_exp, group_pairs, group_list, group_count, nullptr, nullptr,
                                                  stream_),
                            "moe_ffn: moe_group_pairs", first.w->name);
            first.run_grouped(xq_c, int(K), groups, h, 2 * n_ff, stream_);
            if (up) up->run_grouped(xq_c, int(K), groups, h + n_ff, 2 * n_ff, stream_);
            ZINC_CUDA_CHECK(cuda::moe_activate(h, np, n_ff, id, gate_aff, up_aff, act, mw.alpha, mw.limit, a_f32,
                                               a_q, stream_),
                            "moe_ffn: moe_activate", first.w->name);
            if (down.dp4a)
                down.run_grouped(a_q, 1, groups, y, n_out, stream_);
            else
                down.run(a_q, a_f32, 1, id, np, y, n_out, stream_);
            ZINC_CUDA_CHECK(cuda::moe_combine(y, nullptr, nt, int(K), n_out, id, weights.data + t0 * K, down_aff,
                                              out.data + t0 * n_out, stream_),
                            "moe_ffn: moe_combine", down.w->name);
            continue;
        }
        first.run(xq_c, x_c, int(K), id, np, h, 2 * n_ff, stream_);
        if (up) up->run(xq_c, x_c, int(K), id, np, h + n_ff, 2 * n_ff, stream_);
        ZINC_CUDA_CHECK(cuda::moe_activate(h, np, n_ff, id, gate_aff, up_aff, act, mw.alpha, mw.limit, a_f32, a_q,
                                           stream_),
                        "moe_ffn: moe_activate", first.w->name);
        if (K <= cuda::kMaxDownSlots) {
            ZINC_CUDA_CHECK(cuda::moe_down_sum(int(down.w->type), down.w->data, down.rb, down.expert_bytes, n_out,
                                               down.in, a_q, a_f32, id, nt, int(K), weights.data + t0 * K, down_aff,
                                               out.data + t0 * n_out, stream_),
                            "moe_ffn: moe_down_sum", down.w->name);
            continue;
        }
        down.run(a_q, a_f32, 1, id, np, y, n_out, stream_);
        ZINC_CUDA_CHECK(cuda::moe_combine(y, nullptr, nt, int(K), n_out, id, weights.data + t0 * K, down_aff,
                                          out.data + t0 * n_out, stream_),
                        "moe_ffn: moe_combine", down.w->name);
    }
}

}  // namespace zinc::backend
