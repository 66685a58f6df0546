// The CUDA backend's mixture-of-experts ops. Kernels: moe.cu (moe_kernels.h), moe_mma.cu and the expert matvecs of
// matvec_q.cu.
//
// moe_ffn works on (token, slot) pairs without a host round trip, since the expert ids exist only on the device. A
// pass over whole tokens takes one of three ways, by how many pairs the batch has per expert (MoeWays,
// matmul_kernels.h):
//  - fewer pairs than experts (decode): the gate and up (or merged gate_up) expert matvecs write [gate | up] rows per
//    pair, moe_activate applies the per-expert scale/bias and the activation (and, for a quantized down projection,
//    quantizes the result to Q8_1), and moe_down_sum computes the down expert rows and adds the slots of each token
//    with their routing weights in one launch (for more than kMaxDownSlots slots: the down expert matvec writes one row
//    per pair and moe_combine adds them). Weight types with a dp4a matvec read Q8_1 activations (x quantized once for
//    all tokens); F32/F16/BF16 weights read the f32 activations.
//  - at least as many pairs as experts: the pairs sorted by expert first (moe_group_pairs), and the dp4a expert
//    matvecs read each weight row once per group of up to kPairsPerGroup pairs of one expert; or, below MoeWays::step
//    pairs per expert where the gate and up projections have one, the int8 tensor cores of a decode step
//    (moe_step_mma) read each expert once per group of 8 to 32 pairs (8 where the down projection has none and the
//    dp4a matvecs take it).
//  - from MoeWays::mma pairs per expert on, with every projection quantized: the sorted pairs' rows gathered in f16 and
//    multiplied on tensor cores, the experts' weights dequantized in the kernel once per group of up to 32 pairs (64
//    from MoeWays::wide pairs per expert on) (moe_mma); the activations go to f16 for the down projection, and
//    moe_combine adds the sorted rows of each token.
// The ids cannot be checked on the host; the expert kernels trust them, and moe_route only writes ids in [0, n_expert).
#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>

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
    bool step() const { return cuda::has_moe_step_mma(int(w->type), w->data, rb, expert_bytes, in); }
    // The same on int8 tensor cores (step()), xs the scales of xq's blocks.
    void run_step(const cuda::BlockQ8_1f* xq, const float2* xs, int x_div, const cuda::PairGroups& g, int group_size,
                  float* res, int64_t out_stride, cudaStream_t s) const {
        ZINC_CUDA_CHECK(cuda::moe_step_mma(int(w->type), w->data, rb, expert_bytes, out, in, xq, xs, x_div, g,
                                           group_size, res, out_stride, s),
                        "moe_ffn: moe_step_mma", w->name);
    }
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

    // The way, by the pairs per expert (see the top of the file).
    enum class Way { pairs, grouped, step, mma };
    const int n_exp = int(first.n_exp);
    const int64_t n_pairs = T * K;
    const bool gate_up_q = first.dp4a && (!up || up->dp4a);
    const bool all_q = gate_up_q && down.dp4a;
    // The step takes the gate and up projections on tensor cores, and the down projection too where it can (Gemma 4's
    // 704-value down rows are Q8_0 in some layers, Q5_0 in others); else the dp4a matvecs take it, in their groups.
    const bool gate_up_step = first.step() && (!up || up->step());
    const bool down_step = gate_up_step && down.step();
    Way way = Way::pairs;
    if (gate_up_q && n_pairs >= n_exp && n_exp <= cuda::kMaxGroupExperts) {
        way = Way::grouped;
        if (gate_up_step && n_pairs < moe_ways_.step * n_exp)
            way = Way::step;
        else if (all_q && n_pairs >= moe_ways_.mma * n_exp && in % cuda::kMmaCols == 0 && n_ff % cuda::kMmaCols == 0)
            way = Way::mma;
    }
    const bool sorted = way == Way::mma;

    // x in Q8_1 once for every token, when the matvecs of the first three ways read it that way (with its blocks'
    // scales for the tensor cores' step).
    cuda::BlockQ8_1f* xq = nullptr;
    float2* x_scales = nullptr;
    if (!sorted && gate_up_q) {
        const size_t n_blocks = static_cast<size_t>(T * (in / 32));
        xq = static_cast<cuda::BlockQ8_1f*>(scratch("moe x q8_1", n_blocks * sizeof(cuda::BlockQ8_1f), "moe_ffn"));
        if (way == Way::step)
            x_scales = static_cast<float2*>(scratch("moe x q8_1 scales", n_blocks * sizeof(float2), "moe_ffn"));
        ZINC_CUDA_CHECK(cuda::quantize_q8_1(x.data, T, in, xq, stream_, x_scales), "moe_ffn: quantize_q8_1",
                        first.w->name);
    }
    // Per-pair scratch: [gate | up] and down outputs in f32, and the activations (the sorted ways: in f32, then as f16
    // rows, beside the sorted f16 rows of x and each pair's place and expert id).
    const size_t act_bytes = sorted      ? cuda::f16_rows_bytes(1, n_ff) + size_t(n_ff) * sizeof(float) +
                                               cuda::f16_rows_bytes(1, in) + 2 * sizeof(int32_t)
                             : down.dp4a ? static_cast<size_t>(n_ff / 32) * (sizeof(cuda::BlockQ8_1f) + sizeof(float2))
                                         : static_cast<size_t>(n_ff) * sizeof(float);
    const size_t pair_bytes = static_cast<size_t>(2 * n_ff + n_out) * sizeof(float) + act_bytes;
    const int64_t Tc = cuda::moe_chunk_tokens(T, K, pair_bytes, kMoeScratchBudget);
    const size_t max_pairs = static_cast<size_t>(Tc * K);
    auto* h = static_cast<float*>(scratch("moe gate_up out", max_pairs * 2 * n_ff * sizeof(float), "moe_ffn"));
    auto* y = static_cast<float*>(scratch("moe down out", max_pairs * n_out * sizeof(float), "moe_ffn"));
    float* a_f32 = nullptr;
    cuda::BlockQ8_1f* a_q = nullptr;
    float2* a_scales = nullptr;  // the step's: after the Q8_1 blocks
    if (!sorted) {
        void* a = scratch("moe activations", max_pairs * act_bytes, "moe_ffn");
        if (down.dp4a) {
            a_q = static_cast<cuda::BlockQ8_1f*>(a);
            a_scales = reinterpret_cast<float2*>(a_q + max_pairs * size_t(n_ff / 32));
        } else {
            a_f32 = static_cast<float*>(a);
        }
    }

    // The pairs sorted by expert, for every way but the first: groups of kPairsPerGroup pairs for the matvecs, 8, 16
    // or 32 for the int8 step by the pairs per expert, 32 or 64 for the f16 tensor cores.
    const int group_size = way == Way::grouped               ? cuda::kPairsPerGroup
                           : way == Way::step                ? (!down_step || n_pairs <= 4 * n_exp ? 8
                                                                : n_pairs <= 8 * n_exp              ? 16
                                                                                                    : 32)
                           : n_pairs >= moe_ways_.wide * n_exp ? 64
                                                               : 32;
    cuda::PairGroups groups;
    int32_t* group_pairs = nullptr;
    cuda::PairGroup* group_list = nullptr;
    int32_t* group_count = nullptr;
    if (way != Way::pairs) {
        groups.max_groups = cuda::max_pair_groups(int64_t(max_pairs), n_exp, group_size);
        const size_t list_at = max_pairs * sizeof(int32_t);
        const size_t count_at = list_at + size_t(groups.max_groups) * sizeof(cuda::PairGroup);
        auto* g = static_cast<uint8_t*>(scratch("moe pair groups", count_at + sizeof(int32_t), "moe_ffn"));
        group_pairs = reinterpret_cast<int32_t*>(g);
        group_list = reinterpret_cast<cuda::PairGroup*>(g + list_at);
        group_count = reinterpret_cast<int32_t*>(g + count_at);
        groups = {group_pairs, group_list, group_count, groups.max_groups};
    }

    // The tensor cores' buffers: each pair's place in the sorted order and the sorted pairs' expert ids, the f16 rows
    // of x, then sorted, and the activations of the sorted pairs in f32 and in f16.
    int32_t *slot_of = nullptr, *sorted_ids = nullptr;
    void *x16 = nullptr, *xs = nullptr, *as = nullptr;
    float* a_sorted = nullptr;
    if (sorted) {
        auto* g = static_cast<int32_t*>(scratch("moe pair places", 2 * max_pairs * sizeof(int32_t), "moe_ffn"));
        slot_of = g;
        sorted_ids = g + max_pairs;
        x16 = scratch("moe x f16", cuda::f16_rows_bytes(Tc, in), "moe_ffn");
        xs = scratch("moe sorted x f16", cuda::f16_rows_bytes(int64_t(max_pairs), in), "moe_ffn");
        as = scratch("moe sorted activations f16", cuda::f16_rows_bytes(int64_t(max_pairs), n_ff), "moe_ffn");
        a_sorted = static_cast<float*>(scratch("moe sorted activations", max_pairs * n_ff * sizeof(float), "moe_ffn"));
    }
    // res rows (stride ldo) = P's products with the np sorted f16 rows `rows`.
    auto project = [&](const Proj& P, const void* rows, int64_t np, float* res, int64_t ldo) {
        ZINC_CUDA_CHECK(cuda::moe_mma(int(P.w->type), P.w->data, P.rb, P.expert_bytes, P.out, P.in, rows, np, groups,
                                      group_size, res, ldo, stream_),
                        "moe_ffn: moe_mma", P.w->name);
    };

    for (int64_t t0 = 0; t0 < T; t0 += Tc) {
        const int64_t nt = std::min(Tc, T - t0), np = nt * K;
        const int32_t* id = ids.data + t0 * K;
        const cuda::BlockQ8_1f* xq_c = xq ? xq + t0 * (in / 32) : nullptr;
        const float* x_c = x.data + t0 * in;
        const float* w_c = weights.data + t0 * K;
        float* out_c = out.data + t0 * n_out;
        if (way != Way::pairs)
            ZINC_CUDA_CHECK(cuda::moe_group_pairs(id, np, n_exp, group_size, group_pairs, group_list, group_count,
                                                  slot_of, stream_),
                            "moe_ffn: moe_group_pairs", first.w->name);
        if (sorted) {
            ZINC_CUDA_CHECK(cuda::to_f16_rows(x_c, nt, in, x16, stream_), "moe_ffn: to_f16_rows", first.w->name);
            ZINC_CUDA_CHECK(cuda::gather_f16_rows(x16, nt, in, group_pairs, id, int(K), np, xs, sorted_ids, stream_),
                            "moe_ffn: gather_f16_rows", first.w->name);
            project(first, xs, np, h, 2 * n_ff);
            if (up) project(*up, xs, np, h + n_ff, 2 * n_ff);
            ZINC_CUDA_CHECK(cuda::moe_activate(h, np, n_ff, sorted_ids, gate_aff, up_aff, act, mw.alpha, mw.limit,
                                               a_sorted, nullptr, stream_),
                            "moe_ffn: moe_activate", first.w->name);
            ZINC_CUDA_CHECK(cuda::to_f16_rows(a_sorted, np, n_ff, as, stream_), "moe_ffn: to_f16_rows", down.w->name);
            project(down, as, np, y, n_out);
            ZINC_CUDA_CHECK(cuda::moe_combine(y, slot_of, nt, int(K), n_out, id, w_c, down_aff, out_c, stream_),
                            "moe_ffn: moe_combine", down.w->name);
            continue;
        }
        if (way == Way::step) {
            const float2* xs_c = x_scales + t0 * (in / 32);
            first.run_step(xq_c, xs_c, int(K), groups, group_size, h, 2 * n_ff, stream_);
            if (up) up->run_step(xq_c, xs_c, int(K), groups, group_size, h + n_ff, 2 * n_ff, stream_);
        } else if (way == Way::grouped) {
            first.run_grouped(xq_c, int(K), groups, h, 2 * n_ff, stream_);
            if (up) up->run_grouped(xq_c, int(K), groups, h + n_ff, 2 * n_ff, stream_);
        } else {
            first.run(xq_c, x_c, int(K), id, np, h, 2 * n_ff, stream_);
            if (up) up->run(xq_c, x_c, int(K), id, np, h + n_ff, 2 * n_ff, stream_);
        }
        ZINC_CUDA_CHECK(cuda::moe_activate(h, np, n_ff, id, gate_aff, up_aff, act, mw.alpha, mw.limit, a_f32, a_q,
                                           stream_),
                        "moe_ffn: moe_activate", first.w->name);
        if (way == Way::step && down_step) {
            ZINC_CUDA_CHECK(cuda::q8_1_scales(a_q, np * (n_ff / 32), a_scales, stream_), "moe_ffn: q8_1_scales",
                            down.w->name);
            down.run_step(a_q, a_scales, 1, groups, group_size, y, n_out, stream_);
        } else if ((way == Way::grouped || way == Way::step) && down.dp4a) {
            down.run_grouped(a_q, 1, groups, y, n_out, stream_);
        } else if (way == Way::pairs && K <= cuda::kMaxDownSlots) {
            ZINC_CUDA_CHECK(cuda::moe_down_sum(int(down.w->type), down.w->data, down.rb, down.expert_bytes, n_out,
                                               down.in, a_q, a_f32, id, nt, int(K), w_c, down_aff, out_c, stream_),
                            "moe_ffn: moe_down_sum", down.w->name);
            continue;
        } else {
            down.run(a_q, a_f32, 1, id, np, y, n_out, stream_);
        }
        ZINC_CUDA_CHECK(cuda::moe_combine(y, nullptr, nt, int(K), n_out, id, w_c, down_aff, out_c, stream_),
                        "moe_ffn: moe_combine", down.w->name);
    }
}

}  // namespace zinc::backend
