// The CUDA backend's mixture-of-experts ops (moe_route, moe_ffn) and the gemma4 / gpt-oss activations (geglu,
// add_bias, scale, softcap) against the CPU backend and, for moe_ffn, against a double-precision reference built
// from the dequantized weights. Small shapes for every weight type, and the MoE blocks of Qwen3.6-35B-A3B (2048 ->
// 256 experts of 512, top-8, softmax then renormalized top-k), Gemma 4 26B-A4B (2816 -> 128 experts of 704, top-8,
// merged gate_up, GeGLU, per-expert down scale) and gpt-oss-20b (2880 -> 32 experts of 2880, top-4, separate
// gate/up, biases, SwiGLU-OAI), for one decode row and 37 prefill rows. GPU outputs are filled with NaN (ids with
// -1) before each op runs, so a value left unwritten fails. The top-k order and the chunking of large batches are
// also checked on the host, without a GPU. Tolerances are stated at each check.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/moe_kernels.h"
#include "cuda_test_util.h"
#include "gguf/tensor_type.h"
#include "gpu_required.h"
#include "quant/dequantize.h"
#include "quant/float_convert.h"

namespace {

using namespace zinc::cuda_test;
using zinc::backend::Act;
using zinc::backend::Backend;
using zinc::backend::IdAct;
using zinc::backend::MoeActivation;
using zinc::backend::MoeWeights;
using zinc::backend::Weight;
using zinc::gguf::TensorType;
namespace kc = zinc::backend::cuda;

// ---------------------------------------------------------------- helpers

// fn(i) for i < n on every hardware thread (the double-precision references of the large shapes).
template <class Fn>
void parallel_for(int64_t n, Fn&& fn) {
    const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::max<int64_t>(n, 1));
    std::atomic<int64_t> next{0};
    std::vector<std::thread> pool;
    for (int64_t t = 0; t < threads; ++t)
        pool.emplace_back([&] {
            for (int64_t i = next++; i < n; i = next++) fn(i);
        });
    for (auto& th : pool) th.join();
}

// An f32 host tensor {cols, rows / n_expert, n_expert} (2-D when n_expert is 1) holding v.
std::unique_ptr<HostTensor> f32_tensor(const std::vector<float>& v, int64_t cols, int64_t rows,
                                       const std::string& name, int64_t n_expert = 1) {
    auto t = std::make_unique<HostTensor>();
    t->bytes.resize(v.size() * sizeof(float));
    std::memcpy(t->bytes.data(), v.data(), t->bytes.size());
    t->info.name = name;
    t->info.type = TensorType::F32;
    t->info.n_dims = n_expert > 1 ? 3 : 2;
    t->info.ne = {cols, rows / n_expert, n_expert, 1};
    t->info.nbytes = t->bytes.size();
    t->info.n_elements = v.size();
    t->info.data = t->bytes.data();
    return t;
}

// Random Q4_K/Q5_K bytes give every 32-value sub-block a minimum of the same sign (w = d sc q - dmin m with q, sc, m
// >= 0), so the weights' mean is far from zero and the rounding errors of the activations add up coherently along a
// row instead of averaging out as they do with trained weights. dmin = d times the mean quant centers the weights
// (over the sub-blocks: sc and m are alike distributed).
void center_k_quant(HostTensor& t) {
    const bool q5 = t.info.type == TensorType::Q5_K;
    if (!q5 && t.info.type != TensorType::Q4_K) return;
    const size_t block = q5 ? 176 : 144;  // d (f16) at 0, dmin (f16) at 2
    for (size_t off = 0; off + block <= t.bytes.size(); off += block) {
        uint16_t d;
        std::memcpy(&d, t.bytes.data() + off, 2);
        const uint16_t dmin = zinc::quant::fp32_to_fp16((q5 ? 15.5f : 7.5f) * zinc::quant::fp16_to_fp32(d));
        std::memcpy(t.bytes.data() + off + 2, &dmin, 2);
    }
}

// Random 3-D expert weights {in, out, n_exp}, centered (center_k_quant). F32 values are uniform in [-1, 1) as
// random_tensor makes them, from a xorshift generator seeded by the tests' engine: the real shapes hold close to a
// billion of them.
std::unique_ptr<HostTensor> expert_tensor(TensorType type, int64_t in, int64_t out, int64_t n_exp,
                                          const std::string& name) {
    if (type != TensorType::F32) {
        auto t = random_tensor(type, in, out * n_exp, name, n_exp);
        center_k_quant(*t);
        return t;
    }
    std::vector<float> v(size_t(in * out * n_exp));
    uint64_t s = (uint64_t(rng_engine()()) << 32 | rng_engine()()) | 1;
    for (float& f : v) {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        f = float((s * 0x2545F4914F6CDD1Dull) >> 40) * 0x1p-23f - 1.0f;
    }
    return f32_tensor(v, in, out * n_exp, name, n_exp);
}

// Rows of n logits in [lo, hi), a random permutation of evenly spaced slots with jitter: any two of a row are at
// least 0.2 (hi - lo) / n apart, so no two probabilities are within float rounding of each other and the top-k
// ids of the CPU and the GPU must agree exactly.
std::vector<float> spaced_logits(int64_t rows, int64_t n, float lo = -4.0f, float hi = 4.0f) {
    std::vector<float> v(size_t(rows * n));
    std::vector<int> perm(static_cast<size_t>(n));
    std::uniform_real_distribution<float> jitter(0.1f, 0.9f);
    for (int64_t r = 0; r < rows; ++r) {
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng_engine());
        for (int64_t e = 0; e < n; ++e)
            v[r * n + e] = lo + (hi - lo) * (float(perm[e]) + jitter(rng_engine())) / float(n);
    }
    return v;
}

// Ids on a backend, through download (a byte copy).
std::vector<int32_t> get_ids(Backend& be, const IdAct& ids) {
    std::vector<float> raw(size_t(ids.rows * ids.cols));
    be.download(Act{reinterpret_cast<float*>(ids.data), ids.rows, ids.cols}, raw);
    std::vector<int32_t> v(raw.size());
    std::memcpy(v.data(), raw.data(), raw.size() * sizeof(int32_t));
    return v;
}

// GPU ids filled with -1 so that an id left unwritten shows.
IdAct poisoned_ids(Backend& gpu, int64_t rows, int64_t cols) {
    IdAct ids = gpu.alloc_ids(rows, cols);
    const int32_t minus_one = -1;
    float bits;
    std::memcpy(&bits, &minus_one, sizeof bits);
    Act view{reinterpret_cast<float*>(ids.data), rows, cols};
    gpu.upload(view, std::vector<float>(size_t(rows * cols), bits));
    return ids;
}

// The routing of the same logits on both backends; ids and weights are the GPU's, checked against the CPU's.
struct Routed {
    IdAct ids_c, ids_g;
    Act w_c, w_g;
    std::vector<int32_t> ids;
    std::vector<float> w;
};

Routed route_both(Backends& be, const std::vector<float>& logits, int64_t rows, int64_t n_exp, int k, bool renorm) {
    auto [lc, lg] = be.act(logits, rows, n_exp);
    auto [wc, wg] = be.out(rows, k);
    Routed r{be.cpu->alloc_ids(rows, k), poisoned_ids(*be.gpu, rows, k), wc, wg, {}, {}};
    be.cpu->moe_route(lc, k, renorm, r.ids_c, r.w_c);
    be.gpu->moe_route(lg, k, renorm, r.ids_g, r.w_g);
    r.ids = get_ids(*be.gpu, r.ids_g);
    r.w = be.get(*be.gpu, r.w_g);
    const auto w_cpu = be.get(*be.cpu, r.w_c);
    int64_t bad = 0;
    double werr = 0;
    for (size_t i = 0; i < r.ids.size(); ++i) {
        if (r.ids[i] != r.ids_c.data[i] && bad++ < 5)
            ADD_FAILURE() << "row " << i / k << " slot " << i % k << ": GPU expert " << r.ids[i] << ", CPU "
                          << r.ids_c.data[i];
        werr = std::max(werr, std::isfinite(r.w[i]) ? std::fabs(double(r.w[i]) - w_cpu[i]) : INFINITY);
    }
    EXPECT_EQ(bad, 0) << "ids differ";
    // Weights are probabilities (<= 1): exp in double rounded to f32 against glibc's expf (0.502 ulp), a 1/sum that
    // may round the other way and the renormalizing division: a few ulp of 1, under 1e-6.
    EXPECT_LE(werr, 1e-6) << "routing weights";
    return r;
}

// ---------------------------------------------------------------- host logic (no GPU)

// moe_route's selection on the host (both of its kernels): each of 32 lanes scans its experts, an xor butterfly
// combines the lanes, lane 0's result takes the slot.
std::vector<int32_t> emulated_top_k(std::vector<float> p, int k) {
    std::vector<int32_t> ids;
    for (int s = 0; s < k; ++s) {
        kc::TopCand lane[32], next[32];
        for (int l = 0; l < 32; ++l) lane[l] = kc::best_of_lane(p.data(), int(p.size()), l, 32);
        for (int off = 16; off > 0; off >>= 1) {
            for (int l = 0; l < 32; ++l) next[l] = kc::better_of(lane[l], lane[l ^ off]);
            std::copy(next, next + 32, lane);
        }
        ids.push_back(lane[0].e);
        if (lane[0].e >= 0) p[lane[0].e] = kc::kTakenExpert;
    }
    return ids;
}

TEST(CudaMoeHostLogic, TopKOrderIsTheCpuOrderWithTies) {
    auto cpu = zinc::backend::make_cpu_backend(1);
    std::uniform_int_distribution<int> level(0, 3);
    for (int64_t n : {1, 8, 33, 128, 256, 300}) {
        for (int k : {1, 4, 8, int(n)}) {
            if (k > n) continue;
            // Logits on four levels (and one row of equal logits): most experts tie with others.
            const int64_t rows = 6;
            std::vector<float> logits(size_t(rows * n));
            for (int64_t i = 0; i < n * (rows - 1); ++i) logits[i] = float(level(rng_engine()));
            Act l = cpu->alloc(rows, n), w = cpu->alloc(rows, k);
            cpu->upload(l, logits);
            IdAct ids = cpu->alloc_ids(rows, k);
            cpu->moe_route(l, k, false, ids, w);
            for (int64_t r = 0; r < rows; ++r) {
                // The probabilities as the CPU computes them; the selection is what is under test.
                const float* lr = logits.data() + r * n;
                const float mx = *std::max_element(lr, lr + n);
                std::vector<float> p(static_cast<size_t>(n));
                double sum = 0;
                for (int64_t e = 0; e < n; ++e) sum += p[e] = std::exp(lr[e] - mx);
                for (float& v : p) v *= float(1.0 / sum);
                const auto got = emulated_top_k(p, k);
                for (int s = 0; s < k; ++s)
                    ASSERT_EQ(got[s], ids.data[r * k + s]) << "n " << n << " k " << k << " row " << r << " slot " << s;
            }
        }
    }
    // Experts with NaN probabilities are still valid, distinct choices.
    std::vector<float> p(40, std::numeric_limits<float>::quiet_NaN());
    auto got = emulated_top_k(p, 40);
    std::sort(got.begin(), got.end());
    for (int e = 0; e < 40; ++e) EXPECT_EQ(got[e], e);
}

TEST(CudaMoeHostLogic, PassesHoldWholeTokensWithinTheGridAndScratchLimits) {
    const size_t budget = size_t(256) << 20;
    for (int64_t T : {1, 2, 37, 8191, 8192, 100000})
        for (int64_t K : {1, 4, 8, 128, 65535})
            for (size_t bytes : {size_t(256), size_t(46080), size_t(1) << 20, size_t(1) << 30}) {
                const int64_t tc = kc::moe_chunk_tokens(T, K, bytes, budget);
                SCOPED_TRACE("T " + std::to_string(T) + " K " + std::to_string(K) + " bytes " + std::to_string(bytes));
                EXPECT_GE(tc, 1);
                EXPECT_LE(tc, T);
                EXPECT_LE(tc * K, 65535);
                if (tc > 1) {
                    EXPECT_LE(size_t(tc * K) * bytes, budget);
                }
                // As large as allowed: one more token would break a limit.
                EXPECT_TRUE(tc == T || (tc + 1) * K > 65535 || size_t((tc + 1) * K) * bytes > budget);
            }
}

// ---------------------------------------------------------------- moe_route

TEST(CudaMoe, RouteMatchesCpu) {
    ZINC_REQUIRE_GPU();
    Backends be;
    struct Case {
        int64_t n_exp;
        int k;
        bool renorm;
        int64_t rows;
    };
    for (const Case& c : {Case{256, 8, true, 1}, Case{256, 8, true, 37},  // Qwen3.6-35B-A3B
                          Case{128, 8, true, 1}, Case{128, 8, true, 37},  // Gemma 4 26B-A4B
                          Case{32, 4, true, 1}, Case{32, 4, true, 37},    // gpt-oss-20b
                          Case{32, 4, false, 5}, Case{8, 8, false, 3}, Case{300, 10, true, 9}, Case{1, 1, true, 2},
                          Case{kc::kMaxRouteExperts, 16, true, 6}, Case{64, 6, true, 1001},
                          Case{200, 32, true, 3}, Case{33, 5, false, 4}, Case{257, 8, true, 2}}) {
        SCOPED_TRACE(std::to_string(c.n_exp) + " experts, top-" + std::to_string(c.k) + ", rows " +
                     std::to_string(c.rows));
        const auto r = route_both(be, spaced_logits(c.rows, c.n_exp), c.rows, c.n_exp, c.k, c.renorm);
        // Descending, distinct ids (the CPU comparison above already implies it; this says so directly).
        for (int64_t t = 0; t < c.rows; ++t)
            for (int s = 1; s < c.k; ++s) EXPECT_GE(r.w[t * c.k + s - 1], r.w[t * c.k + s]);
    }
}

TEST(CudaMoe, RouteTiesGoToTheLowerExpert) {
    ZINC_REQUIRE_GPU();
    Backends be;
    std::uniform_int_distribution<int> level(0, 3);
    for (bool renorm : {true, false}) {
        const int64_t rows = 37, n = 256;
        const int k = 8;
        std::vector<float> logits(size_t(rows * n));
        for (int64_t i = 0; i < (rows - 1) * n; ++i) logits[i] = float(level(rng_engine()));  // last row: all equal
        const auto r = route_both(be, logits, rows, n, k, renorm);
        for (int s = 0; s < k; ++s) EXPECT_EQ(r.ids[(rows - 1) * k + s], s);
    }
}

// A NaN logit makes every probability of its row NaN (the softmax's sum is NaN), where the order of comparisons
// decides the outcome: such a row takes the butterfly that emulated_top_k models, and still yields valid, distinct
// ids, while the row beside it takes the reductions and matches the CPU.
TEST(CudaMoe, RouteRowsWithNanTakeTheButterfly) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (int64_t n : {32, 128, 256, 300}) {  // each of the kernels' shapes
        const int k = 8;
        SCOPED_TRACE(std::to_string(n) + " experts");
        std::vector<float> logits = spaced_logits(3, n);
        logits[size_t(n) + 5] = std::numeric_limits<float>::quiet_NaN();  // row 1: one NaN
        for (int64_t e = 0; e < n; ++e) logits[size_t(2 * n + e)] = std::numeric_limits<float>::quiet_NaN();
        auto [lc, lg] = be.act(logits, 3, n);
        auto [wc, wg] = be.out(3, k);
        IdAct ids_c = be.cpu->alloc_ids(3, k), ids_g = poisoned_ids(*be.gpu, 3, k);
        be.cpu->moe_route(lc, k, true, ids_c, wc);
        be.gpu->moe_route(lg, k, true, ids_g, wg);
        const std::vector<int32_t> got = get_ids(*be.gpu, ids_g);
        for (int s = 0; s < k; ++s) EXPECT_EQ(got[s], ids_c.data[s]) << "row 0 slot " << s;
        const auto nan_ids = emulated_top_k(std::vector<float>(size_t(n), std::numeric_limits<float>::quiet_NaN()), k);
        for (int64_t r = 1; r < 3; ++r) {
            std::vector<int32_t> row(got.begin() + r * k, got.begin() + (r + 1) * k);
            for (int s = 0; s < k; ++s) EXPECT_EQ(row[s], nan_ids[s]) << "row " << r << " slot " << s;
            std::sort(row.begin(), row.end());
            EXPECT_EQ(std::adjacent_find(row.begin(), row.end()), row.end()) << "row " << r << ": an expert twice";
            EXPECT_GE(row.front(), 0);
            EXPECT_LT(row.back(), n);
        }
    }
}

TEST(CudaMoe, RouteRejectsBadShapes) {
    ZINC_REQUIRE_GPU();
    auto gpu = zinc::backend::make_cuda_backend(0);
    Act l = gpu->alloc(2, 16), w = gpu->alloc(2, 4);
    IdAct ids = gpu->alloc_ids(2, 4);
    EXPECT_THROW(gpu->moe_route(l, 0, true, ids, w), std::invalid_argument);
    EXPECT_THROW(gpu->moe_route(l, 17, true, ids, w), std::invalid_argument);
    EXPECT_THROW(gpu->moe_route(l, 3, true, ids, w), std::invalid_argument);  // ids / weights are rows x 4
    Act big = gpu->alloc(1, kc::kMaxRouteExperts + 1), w1 = gpu->alloc(1, 4);
    IdAct ids1 = gpu->alloc_ids(1, 4);
    EXPECT_THROW(gpu->moe_route(big, 4, true, ids1, w1), std::invalid_argument);
}

// ---------------------------------------------------------------- moe_ffn

struct FfnCase {
    std::string name;
    int64_t n_exp, k, in, n_ff, n_out;
    TensorType gate_type, down_type;  // gate and up (or gate_up), down
    bool merged;
    MoeActivation act;
    bool gate_scale = false, up_scale = false, down_scale = false, biases = false;
};

// The tensors of one expert FFN on both backends, with their host values.
struct FfnWeights {
    std::unique_ptr<HostTensor> first, up, down;  // first: gate or gate_up
    std::vector<std::unique_ptr<HostTensor>> extras;
    Weight first_c, first_g, up_c, up_g, down_c, down_g;
    Weight extra_c[7], extra_g[7];  // gate_s, up_s, down_s, gate_b, up_b, gate_up_b, down_b
    std::vector<float> extra[7];    // host values; empty = absent
    MoeWeights mw_c, mw_g;
};

enum Extra { kGateS, kUpS, kDownS, kGateB, kUpB, kGateUpB, kDownB };

// RMS of the first rows of expert 0, to size inputs and biases.
double weight_rms(const HostTensor& t) {
    double s = 0;
    const int64_t rows = std::min<int64_t>(16, t.info.ne[1]);
    for (int64_t r = 0; r < rows; ++r)
        for (float v : dequantized_row(t, r)) s += double(v) * v;
    return std::sqrt(s / double(rows * t.info.ne[0]));
}

void build_weights(Backends& be, const FfnCase& c, FfnWeights& w) {
    const int64_t E = c.n_exp;
    w.first = expert_tensor(c.gate_type, c.in, c.merged ? 2 * c.n_ff : c.n_ff, E,
                            c.merged ? "blk.0.ffn_gate_up_exps.weight" : "blk.0.ffn_gate_exps.weight");
    if (!c.merged) w.up = expert_tensor(c.gate_type, c.in, c.n_ff, E, "blk.0.ffn_up_exps.weight");
    w.down = expert_tensor(c.down_type, c.n_ff, c.n_out, E, "blk.0.ffn_down_exps.weight");
    w.first_c = be.cpu->load_weight(w.first->info);
    w.first_g = be.gpu->load_weight(w.first->info);
    if (w.up) {
        w.up_c = be.cpu->load_weight(w.up->info);
        w.up_g = be.gpu->load_weight(w.up->info);
    }
    w.down_c = be.cpu->load_weight(w.down->info);
    w.down_g = be.gpu->load_weight(w.down->info);
    // Scales in [0.5, 1.5); gate/up biases of the size of the pre-activations (~2.5), down biases of the size of the
    // expert outputs, so that a scale or bias applied wrongly moves the result well past the tolerance.
    const double y_rms = std::sqrt(double(c.n_ff)) * weight_rms(*w.down) * 2.0;
    auto make = [&](Extra x, int64_t cols, float lo, float hi) {
        w.extra[x] = random_floats(size_t(cols * E), lo, hi);
        w.extras.push_back(f32_tensor(w.extra[x], cols, E, "blk.0.extra" + std::to_string(int(x)), 1));
        w.extra_c[x] = be.cpu->load_weight(w.extras.back()->info);
        w.extra_g[x] = be.gpu->load_weight(w.extras.back()->info);
    };
    if (c.gate_scale) make(kGateS, 1, 0.5f, 1.5f);
    if (c.up_scale) make(kUpS, 1, 0.5f, 1.5f);
    if (c.down_scale) make(kDownS, 1, 0.5f, 1.5f);
    if (c.biases && c.merged) make(kGateUpB, 2 * c.n_ff, -2.0f, 2.0f);
    if (c.biases && !c.merged) {
        make(kGateB, c.n_ff, -2.0f, 2.0f);
        make(kUpB, c.n_ff, -2.0f, 2.0f);
    }
    if (c.biases) make(kDownB, c.n_out, -float(y_rms), float(y_rms));
    for (int side = 0; side < 2; ++side) {
        MoeWeights& m = side ? w.mw_g : w.mw_c;
        Weight* ex = side ? w.extra_g : w.extra_c;
        auto opt = [&](Extra x) { return w.extra[x].empty() ? nullptr : &ex[x]; };
        if (c.merged) {
            m.gate_up = side ? &w.first_g : &w.first_c;
        } else {
            m.gate = side ? &w.first_g : &w.first_c;
            m.up = side ? &w.up_g : &w.up_c;
        }
        m.down = side ? &w.down_g : &w.down_c;
        m.gate_scale = opt(kGateS);
        m.up_scale = opt(kUpS);
        m.down_scale = opt(kDownS);
        m.gate_bias = opt(kGateB);
        m.up_bias = opt(kUpB);
        m.gate_up_bias = opt(kGateUpB);
        m.down_bias = opt(kDownB);
        m.act = c.act;
        m.alpha = 1.702f;
        m.limit = 7.0f;
    }
}

// a = f(g) * h(u): the activation as two factors, in double.
void act_parts(MoeActivation act, double g, double u, double& f, double& h) {
    const double alpha = 1.702, limit = 7.0;
    switch (act) {
    case MoeActivation::swiglu:
        f = g / (1.0 + std::exp(-g));
        h = u;
        break;
    case MoeActivation::geglu:
        f = 0.5 * g * (1.0 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
        h = u;
        break;
    case MoeActivation::swiglu_oai: {
        const double x = std::min(g, limit);
        f = x / (1.0 + std::exp(-alpha * x));
        h = std::clamp(u, -limit, limit) + 1.0;
        break;
    }
    }
}

// sum_i w_i x_i, sum_i |w_i x_i| and, when half_step is given, what rounding each x_i of 32-block b to a multiple of
// the block's Q8_1 step does to the sum: at most q = sum_b h_b sum_{i in b} |w_i| (h_b = half_step[b]), and, the
// rounding errors behaving like independent uniform variables on [-h_b, h_b], a variance q2 = sum_b h_b^2/3 sum w_i^2.
struct Dot {
    double v = 0, abs = 0, q = 0, q2 = 0;
};
Dot dot(const float* w, const float* x, const double* half_step, int64_t n) {
    Dot d;
    for (int64_t b = 0; b * 32 < n; ++b) {
        double wabs = 0, wsq = 0;
        for (int64_t i = b * 32; i < std::min(n, b * 32 + 32); ++i) {
            d.v += double(w[i]) * x[i];
            d.abs += std::fabs(double(w[i]) * x[i]);
            wabs += std::fabs(w[i]);
            wsq += double(w[i]) * w[i];
        }
        if (half_step) {
            d.q += half_step[b] * wabs;
            d.q2 += half_step[b] * half_step[b] / 3.0 * wsq;
        }
    }
    return d;
}

// Half the Q8_1 step (amax / 127 / 2) of each 32-block of the n values of v.
std::vector<double> half_steps(const float* v, int64_t n) {
    std::vector<double> h(static_cast<size_t>((n + 31) / 32));
    for (int64_t b = 0; b < int64_t(h.size()); ++b) {
        double amax = 0;
        for (int64_t i = b * 32; i < std::min(n, b * 32 + 32); ++i) amax = std::max(amax, double(std::fabs(v[i])));
        h[b] = amax / 254.0;
    }
    return h;
}

// The reference output with, per value, a worst-case bound on the GPU's distance from it and the expected size
// (standard deviation) of the activation-quantization part of that distance.
struct Reference {
    std::vector<double> ref, bound, sigma;
};

// The double-precision expert FFN of the dequantized weights.
//
// Bound, stage by stage, for a pair (token t, expert e):
//  1. gate/up: a dp4a projection dots the weights with x quantized to Q8_1; each x_i moves by at most half its
//     block's step h_b = amax_b / 254, so |g~ - g| <= sum_b h_b sum_{i in b} |w_i| (times 1.001 for the rounding
//     of the step itself; every tested type dots the dequantized weights with the quantized activations, no term
//     uses their unquantized sum). Plus f32 accumulation: 2e-5 sum_i |w_i x_i| + 1e-6. A per-expert scale
//     multiplies the bound; scale and bias add 1e-6 of the value for rounding.
//  2. activation a = f(g) h(u), f in {SiLU, GELU_tanh, SiLU_alpha(min(g, limit))} with |f'| <= 1.13 (SiLU 1.0998,
//     GELU_tanh 1.1290) and h in {u, clamp(u) + 1} with |h'| <= 1: |a~ - a| <= 1.13 Bg (|h| + Bu) + |f| Bu, plus
//     1e-6 (|f| + |g|) (|h| + Bu) for the f32 evaluation (expf/tanhf within a few ulp; 1 + tanh cancels for very
//     negative g).
//  3. down: with a dp4a down projection the GPU quantizes a~, whose block maximum is at most max(|a| + Ba), so each
//     value moves by at most Ba_j + max_b(|a| + Ba) / 254 (times 1.001); |y~ - y| <= sum_j |w_j| (that) plus f32
//     accumulation 2e-5 sum_j |w_j| (|a_j| + that) + 1e-6; then down scale and bias as in 1.
//  4. out = sum_s w_s v_s with the GPU's own routing weights: sum_s |w_s| Bv_s + 1e-6 sum_s |w_s v_s|.
// The bound is a worst case (every rounding in the same direction), two orders of magnitude above the typical
// error. The expected size follows the same stages with variances: the quantization errors as independent uniform
// variables (stage 1: Dot::q2), carried through the activation to first order (f'(g) h)^2 var_g + (f h'(u))^2
// var_u, plus the down input's own quantization (h_b^2 / 3 per value), then the weighted sums.
Reference reference(const FfnCase& c, const FfnWeights& w, const std::vector<float>& x, int64_t T,
                    const std::vector<int32_t>& ids, const std::vector<float>& rw) {
    const int64_t K = c.k, n_ff = c.n_ff, in = c.in, n_out = c.n_out;
    const bool gate_q = kc::has_dp4a_matvec(int(c.gate_type)), down_q = kc::has_dp4a_matvec(int(c.down_type));
    std::vector<std::vector<double>> hx(static_cast<size_t>(T));
    if (gate_q)
        for (int64_t t = 0; t < T; ++t) hx[t] = half_steps(x.data() + t * in, in);
    std::vector<std::vector<int64_t>> pairs_of(static_cast<size_t>(c.n_exp));
    for (int64_t p = 0; p < T * K; ++p) pairs_of[ids[p]].push_back(p);
    const size_t n_y = static_cast<size_t>(T * K * n_out);
    std::vector<double> yv(n_y), yb(n_y), yvar(n_y);
    const auto& ex = w.extra;
    auto at = [](const std::vector<float>& v, int64_t i) { return v.empty() ? 0.0 : double(v[i]); };
    auto dequant_expert = [](const HostTensor& t, int64_t e, std::vector<float>& out) {
        const int64_t rows = t.info.ne[1], cols = t.info.ne[0];
        const size_t rb = zinc::gguf::row_bytes(t.info.type, cols);
        out.resize(static_cast<size_t>(rows * cols));
        zinc::quant::dequantize_row(t.info.type, t.bytes.data() + size_t(e * rows) * rb, out.data(), rows * cols);
    };
    parallel_for(c.n_exp, [&](int64_t e) {
        if (pairs_of[e].empty()) return;
        std::vector<float> F, U, D;
        dequant_expert(*w.first, e, F);
        if (w.up) dequant_expert(*w.up, e, U);
        dequant_expert(*w.down, e, D);
        std::vector<double> ad(static_cast<size_t>(n_ff)), ab(ad.size()), avar(ad.size()), move(ad.size());
        // With gate_up, up_scale scales the whole merged output.
        const double us = ex[kUpS].empty() ? 1.0 : ex[kUpS][e];
        const double gs = c.merged ? us : ex[kGateS].empty() ? 1.0 : ex[kGateS][e];
        const double ds = ex[kDownS].empty() ? 1.0 : ex[kDownS][e];
        for (int64_t p : pairs_of[e]) {
            const int64_t t = p / K;
            const float* xr = x.data() + t * in;
            const double* hxt = gate_q ? hx[t].data() : nullptr;
            for (int64_t j = 0; j < n_ff; ++j) {
                const Dot dg = dot(F.data() + j * in, xr, hxt, in);
                const Dot du = dot(c.merged ? F.data() + (n_ff + j) * in : U.data() + j * in, xr, hxt, in);
                const double gb = c.merged ? at(ex[kGateUpB], e * 2 * n_ff + j) : at(ex[kGateB], e * n_ff + j);
                const double ub = c.merged ? at(ex[kGateUpB], e * 2 * n_ff + n_ff + j) : at(ex[kUpB], e * n_ff + j);
                const double g = dg.v * gs + gb, u = du.v * us + ub;
                const double bg = (1.001 * dg.q + 2e-5 * dg.abs + 1e-6) * std::fabs(gs) +
                                  1e-6 * (std::fabs(g) + std::fabs(gb));
                const double bu = (1.001 * du.q + 2e-5 * du.abs + 1e-6) * std::fabs(us) +
                                  1e-6 * (std::fabs(u) + std::fabs(ub));
                double f = 0, h = 0, f_lo = 0, f_hi = 0, h_lo = 0, h_hi = 0;
                act_parts(c.act, g, u, f, h);
                const double eg = 1e-4 * std::max(1.0, std::fabs(g)), eu = 1e-4 * std::max(1.0, std::fabs(u));
                act_parts(c.act, g - eg, u - eu, f_lo, h_lo);
                act_parts(c.act, g + eg, u + eu, f_hi, h_hi);
                const double df = (f_hi - f_lo) / (2 * eg), dh = (h_hi - h_lo) / (2 * eu);
                ad[j] = f * h;
                ab[j] = 1.13 * bg * (std::fabs(h) + bu) + std::fabs(f) * bu +
                        1e-6 * (std::fabs(f) + std::fabs(g)) * (std::fabs(h) + bu);
                avar[j] = df * h * df * h * dg.q2 * gs * gs + f * dh * f * dh * du.q2 * us * us;
            }
            // Per value: how far the down projection's input may be from ad (activation error + quantization).
            std::copy(ab.begin(), ab.end(), move.begin());
            if (down_q)
                for (int64_t b = 0; b * 32 < n_ff; ++b) {
                    const int64_t j1 = std::min(n_ff, b * 32 + 32);
                    double amax = 0, amax_bound = 0;
                    for (int64_t j = b * 32; j < j1; ++j) {
                        amax = std::max(amax, std::fabs(ad[j]));
                        amax_bound = std::max(amax_bound, std::fabs(ad[j]) + ab[j]);
                    }
                    for (int64_t j = b * 32; j < j1; ++j) {
                        move[j] += 1.001 * amax_bound / 254.0;
                        avar[j] += (amax / 254.0) * (amax / 254.0) / 3.0;
                    }
                }
            for (int64_t o = 0; o < n_out; ++o) {
                const float* wr = D.data() + o * n_ff;
                double y = 0, by = 0, mag = 0, var = 0;
                for (int64_t j = 0; j < n_ff; ++j) {
                    y += double(wr[j]) * ad[j];
                    by += std::fabs(wr[j]) * move[j];
                    mag += std::fabs(wr[j]) * (std::fabs(ad[j]) + move[j]);
                    var += double(wr[j]) * wr[j] * avar[j];
                }
                by += 2e-5 * mag + 1e-6;
                const double db = at(ex[kDownB], e * n_out + o);
                yv[p * n_out + o] = y * ds + db;
                yb[p * n_out + o] = by * std::fabs(ds) + 1e-6 * (std::fabs(y * ds) + std::fabs(db));
                yvar[p * n_out + o] = var * ds * ds;
            }
        }
    });
    Reference r;
    r.ref.resize(static_cast<size_t>(T * n_out));
    r.bound.resize(r.ref.size());
    r.sigma.resize(r.ref.size());
    for (int64_t t = 0; t < T; ++t)
        for (int64_t o = 0; o < n_out; ++o) {
            double v = 0, b = 0, mag = 0, var = 0;
            for (int64_t s = 0; s < K; ++s) {
                const int64_t p = t * K + s;
                v += double(rw[p]) * yv[p * n_out + o];
                b += std::fabs(rw[p]) * yb[p * n_out + o];
                mag += std::fabs(rw[p] * yv[p * n_out + o]);
                var += double(rw[p]) * rw[p] * yvar[p * n_out + o];
            }
            r.ref[t * n_out + o] = v;
            r.bound[t * n_out + o] = b + 1e-6 * mag;
            r.sigma[t * n_out + o] = std::sqrt(var);
        }
    return r;
}

// Relative L2 difference allowed between the GPU and the CPU backend, by the activation format the CPU dots a
// weight type with: f32 for F32 (accumulation order only); values rounded to f16 or bf16 for F16/BF16 (half an ulp:
// 2^-11 and 2^-8 relative), about 3e-4 and 3e-3 over two stages; Q8_0 or Q8_K blocks for the quantized types. Q8_K
// blocks hold 256 values, with steps up to a few times those of the GPU's 32-value Q8_1 blocks: a host emulation of
// the GPU's arithmetic differed from the CPU backend by up to 2.7e-2 on these cases.
double cpu_rel_tolerance(TensorType t) {
    switch (t) {
    case TensorType::F32: return 1e-5;
    case TensorType::F16: return 2e-3;
    case TensorType::BF16: return 1e-2;
    default: return 6e-2;
    }
}

std::string act_name(MoeActivation a) {
    return a == MoeActivation::swiglu ? "swiglu" : a == MoeActivation::geglu ? "geglu" : "swiglu_oai";
}

// The ways moe_ffn can take for a batch (moe_ops.cpp), each forced by its MoeWays.
struct WayCase {
    const char* name;
    kc::MoeWays ways;
};
constexpr int64_t kNever = std::numeric_limits<int64_t>::max() / 65536;
const WayCase kWays[] = {
    {"dp4a matvecs", {kNever, kNever, 0}},
    {"tensor cores 32", {1, kNever, 0}},
    {"tensor cores 64", {1, 1, 0}},
    // The types without an int8 step (moe_step_mma) take the dp4a matvecs here again.
    {"int8 step", {kNever, kNever, kNever}},
};

// Runs the case's FFN on both backends for `rows` tokens (routed by spaced logits) and checks the GPU against the
// reference and against the CPU, each way the batch can take (one when it has fewer pairs than experts).
void check_ffn(Backends& be, const FfnCase& c, const FfnWeights& w, int64_t rows) {
    const std::string what = c.name + " " + std::string(zinc::gguf::type_name(c.gate_type)) + "/" +
                             std::string(zinc::gguf::type_name(c.down_type)) + (c.merged ? " gate_up " : " gate+up ") +
                             act_name(c.act) + " rows " + std::to_string(rows);
    SCOPED_TRACE(what);
    const Routed r = route_both(be, spaced_logits(rows, c.n_exp), rows, c.n_exp, int(c.k), true);
    for (int32_t id : r.ids)
        if (id < 0 || id >= c.n_exp) FAIL() << "expert id " << id << " out of range";
    // x sized so that the pre-activations have an RMS of about 2.5: the activations' curved and (gpt-oss) clamped
    // parts are both exercised.
    const double xs = 2.5 * std::sqrt(3.0) / (std::sqrt(double(c.in)) * weight_rms(*w.first));
    const auto x = random_floats(static_cast<size_t>(rows * c.in), -float(xs), float(xs));
    auto [xc, xg] = be.act(x, rows, c.in);
    auto [oc, og] = be.out(rows, c.n_out);
    be.cpu->moe_ffn(xc, r.ids_c, r.w_c, w.mw_c, oc);
    const auto cpu = be.get(*be.cpu, oc);
    const Reference ref = reference(c, w, x, rows, r.ids, r.w);
    const bool quantized = kc::has_dp4a_matvec(int(c.gate_type)) || kc::has_dp4a_matvec(int(c.down_type));

    auto& cuda = dynamic_cast<zinc::backend::CudaBackend&>(*be.gpu);
    const bool one_way = rows * c.k < c.n_exp || !kc::has_dp4a_matvec(int(c.gate_type));
    for (const WayCase& way : kWays) {
        SCOPED_TRACE(way.name);
        cuda.set_moe_ways(way.ways);
        be.gpu->upload(og, std::vector<float>(size_t(rows * c.n_out), std::numeric_limits<float>::quiet_NaN()));
        be.gpu->moe_ffn(xg, r.ids_g, r.w_g, w.mw_g, og);
        cuda.set_moe_ways();
        const auto got = be.get(*be.gpu, og);
        int64_t bad = 0;
        double worst = 0, err2 = 0, ref2 = 0, cpu2 = 0, noise2 = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            const double g = got[i], d = g - ref.ref[i], e = std::isfinite(g) ? std::fabs(d) : INFINITY;
            worst = std::max(worst, e / ref.bound[i]);
            err2 += d * d;
            ref2 += ref.ref[i] * ref.ref[i];
            cpu2 += (g - cpu[i]) * (g - cpu[i]);
            if (quantized) noise2 += d * d / std::max(ref.sigma[i] * ref.sigma[i], 1e-300);
            if (!(e <= ref.bound[i]) && bad++ < 5)
                ADD_FAILURE() << "out[" << i / c.n_out << "][" << i % c.n_out << "] = " << g << ", reference "
                              << ref.ref[i] << ", bound " << ref.bound[i];
        }
        const double rel = std::sqrt(err2 / ref2), rel_cpu = std::sqrt(cpu2 / ref2);
        const double noise = std::sqrt(noise2 / double(got.size()));
        // Every value within its worst-case bound.
        EXPECT_EQ(bad, 0);
        if (quantized) {
            // The error in units of its expected size: ~1 when the GPU's only departure from the reference is the
            // rounding of its Q8_1 activations (0.8-1.05 in a host emulation of the GPU's arithmetic on these cases;
            // the f16 activations of the tensor-core ways round less); a misplaced scale, bias, weight or expert
            // shows as many times that. The relative L2 error is ~1e-2.
            EXPECT_LE(noise, 2.0) << "RMS of error / expected quantization error";
            EXPECT_LE(rel, 3e-2) << "relative L2 error against the reference";
        } else {
            // Float paths only differ by the f32 accumulation order (~1e-7).
            EXPECT_LE(rel, 1e-5) << "relative L2 error against the reference";
        }
        EXPECT_LE(rel_cpu, std::max(cpu_rel_tolerance(c.gate_type), cpu_rel_tolerance(c.down_type)))
            << "relative L2 difference from the CPU backend";
        std::printf("  %-58s %-15s rel_l2 %.3g (cpu %.3g), err/expected %.3g, worst err/bound %.3g\n", what.c_str(),
                    one_way ? "" : way.name, rel, rel_cpu, noise, worst);
        if (one_way) break;
    }
}

void run_case(const FfnCase& c, std::initializer_list<int64_t> rows) {
    Backends be;
    FfnWeights w;
    build_weights(be, c, w);
    for (int64_t T : rows) check_ffn(be, c, w, T);
}

const std::vector<TensorType> kFfnTypes = {TensorType::F32,  TensorType::F16,  TensorType::BF16,
                                           TensorType::Q8_0, TensorType::Q4_0, TensorType::Q5_0,
                                           TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K,
                                           TensorType::MXFP4, TensorType::IQ4_XS};

class CudaMoeFfn : public ::testing::TestWithParam<TensorType> {};

TEST_P(CudaMoeFfn, SmallShapes) {
    ZINC_REQUIRE_GPU();
    const TensorType t = GetParam();
    // in 512, n_ff 256, n_out 256 (multiples of 256 for the K-quants), 16 experts, top-4.
    auto small = [&](TensorType gate, TensorType down, bool merged, MoeActivation act) {
        return FfnCase{"small", 16, 4, 512, 256, 256, gate, down, merged, act};
    };
    // 1 row: a matvec per pair; 37 and 160 (9.25 and 40 pairs an expert): each way of a batch sorted by expert.
    run_case(small(t, t, false, MoeActivation::swiglu), {1, 37, 160});
    FfnCase gemma_like = small(t, t, true, MoeActivation::geglu);
    gemma_like.up_scale = gemma_like.down_scale = gemma_like.biases = true;
    run_case(gemma_like, {1, 37, 160});
    FfnCase oai = small(t, t, false, MoeActivation::swiglu_oai);
    oai.gate_scale = oai.up_scale = oai.down_scale = oai.biases = true;
    run_case(oai, {1, 37, 160});
    // f32 activations into a quantized down projection and the other way round.
    run_case(small(TensorType::F32, t, false, MoeActivation::swiglu), {3});
    run_case(small(t, TensorType::F32, true, MoeActivation::swiglu_oai), {3});
}

INSTANTIATE_TEST_SUITE_P(Types, CudaMoeFfn, ::testing::ValuesIn(kFfnTypes), type_param_name);

// Qwen3.6-35B-A3B: 2048 -> 256 experts of 512, top-8, SwiGLU; split or merged gate/up as the GGUF stores them.
TEST(CudaMoe, FfnQwen36Shapes) {
    ZINC_REQUIRE_GPU();
    auto qwen = [](TensorType t, bool merged) {
        return FfnCase{"qwen3.6-35b-a3b", 256, 8, 2048, 512, 2048, t, t, merged, MoeActivation::swiglu};
    };
    run_case(qwen(TensorType::Q4_K, false), {1, 37});
    run_case(qwen(TensorType::Q4_K, true), {1, 37});
    run_case(qwen(TensorType::Q8_0, false), {1, 37});
    run_case(qwen(TensorType::F32, true), {1, 37});
}

// Gemma 4 26B-A4B: 2816 -> 128 experts of 704, top-8, merged gate_up, GeGLU, per-expert down scale. 704 is no
// multiple of 256: the down projection is Q8_0 or F32 (the gate_up rows of 2816 can be Q4_K).
TEST(CudaMoe, FfnGemma4Shapes) {
    ZINC_REQUIRE_GPU();
    auto gemma = [](TensorType gate_up, TensorType down) {
        FfnCase c{"gemma-4-26b-a4b", 128, 8, 2816, 704, 2816, gate_up, down, true, MoeActivation::geglu};
        c.down_scale = true;
        return c;
    };
    run_case(gemma(TensorType::Q4_K, TensorType::Q8_0), {1, 37});
    // Q4_K_M's other layers: the down rows Q5_0, which the int8 step leaves to the dp4a matvecs.
    run_case(gemma(TensorType::Q4_K, TensorType::Q5_0), {37});
    run_case(gemma(TensorType::Q8_0, TensorType::Q8_0), {1, 37});
    run_case(gemma(TensorType::F32, TensorType::F32), {1, 37});
}

// gpt-oss-20b: 2880 -> 32 experts of 2880, top-4, separate gate/up (as the engine binds them), biases on every
// projection, SwiGLU-OAI (alpha 1.702, limit 7). 2880 is no multiple of 256: MXFP4, Q8_0 and F32, whose 2880-value
// rows are read in place (not 16-byte aligned).
TEST(CudaMoe, FfnGptOssShapes) {
    ZINC_REQUIRE_GPU();
    auto oss = [](TensorType t) {
        FfnCase c{"gpt-oss-20b", 32, 4, 2880, 2880, 2880, t, t, false, MoeActivation::swiglu_oai};
        c.biases = true;
        return c;
    };
    run_case(oss(TensorType::MXFP4), {1, 37});  // as released
    run_case(oss(TensorType::Q8_0), {1, 37});
    run_case(oss(TensorType::F32), {1, 37});
}

// More (token, slot) pairs than one expert matvec launch takes (65535): the op runs in passes of whole tokens, each
// way.
TEST(CudaMoe, FfnLargeBatchRunsInPasses) {
    ZINC_REQUIRE_GPU();
    for (TensorType t : {TensorType::Q8_0, TensorType::F32}) {
        FfnCase c{"many tokens", 16, 8, 64, 64, 64, t, t, false, MoeActivation::swiglu};
        c.down_scale = c.biases = true;
        run_case(c, {8200});
    }
}

TEST(CudaMoe, FfnRejectsBadInputs) {
    ZINC_REQUIRE_GPU();
    Backends be;
    FfnWeights w;
    FfnCase c{"bad", 4, 2, 64, 32, 64, TensorType::Q8_0, TensorType::Q8_0, false, MoeActivation::swiglu};
    c.biases = true;  // the down bias has gate_up_bias's size (2 n_ff = n_out), for the misplaced-bias check
    build_weights(be, c, w);
    const Routed r = route_both(be, spaced_logits(3, 4), 3, 4, 2, true);
    Act x = be.gpu->alloc(3, 64), out = be.gpu->alloc(3, 64);
    auto expect_invalid = [&](const MoeWeights& mw, const Act& xx, Act& o, const char* what) {
        EXPECT_THROW(be.gpu->moe_ffn(xx, r.ids_g, r.w_g, mw, o), std::invalid_argument) << what;
    };
    MoeWeights both = w.mw_g;
    both.gate_up = &w.first_g;
    expect_invalid(both, x, out, "gate, up and gate_up");
    MoeWeights no_up = w.mw_g;
    no_up.up = nullptr;
    expect_invalid(no_up, x, out, "no up");
    MoeWeights swapped = w.mw_g;
    swapped.up = &w.down_g;
    expect_invalid(swapped, x, out, "inconsistent shapes");
    Act x_wide = be.gpu->alloc(3, 128);
    expect_invalid(w.mw_g, x_wide, out, "x columns");
    Act out_short = be.gpu->alloc(2, 64);
    expect_invalid(w.mw_g, x, out_short, "out rows");
    MoeWeights merged_bias = w.mw_g;
    merged_bias.gate_up_bias = &w.extra_g[kDownB];
    expect_invalid(merged_bias, x, out, "gate_up_bias without gate_up");
    // A type without an expert matvec says which tensor and type.
    Weight iq = w.first_g;
    iq.type = TensorType::IQ2_XXS;
    MoeWeights unsupported = w.mw_g;
    unsupported.gate = &iq;
    try {
        be.gpu->moe_ffn(x, r.ids_g, r.w_g, unsupported, out);
        FAIL() << "moe_ffn accepted IQ2_XXS experts";
    } catch (const std::invalid_argument& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("blk.0.ffn_gate_exps.weight"), std::string::npos) << msg;
        EXPECT_NE(msg.find("iq2_xxs"), std::string::npos) << msg;
    }
}

// ---------------------------------------------------------------- geglu, add_bias, scale, softcap

TEST(CudaMoe, GegluMatchesCpu) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 100}, {37, 2112}, {1, 21504}}) {
        auto [gc, gg] = be.act(random_floats(size_t(rows * cols), -6, 6), rows, cols);
        auto [uc, ug] = be.act(random_floats(size_t(rows * cols), -3, 3), rows, cols);
        auto [oc, og] = be.out(rows, cols);
        be.cpu->geglu(gc, uc, oc);
        be.gpu->geglu(gg, ug, og);
        // 1e-6 of the largest output: the same f32 operations in the same order; tanhf and glibc's tanh differ by
        // an ulp or two (of |tanh| <= 1, times |0.5 g up| <= 9).
        EXPECT_LE(max_err(be.get(*be.gpu, og), be.get(*be.cpu, oc)), 1e-6) << rows << " x " << cols;
        // In place, as gemma4's dense FFN calls it.
        be.gpu->geglu(gg, ug, gg);
        EXPECT_LE(max_err(be.get(*be.gpu, gg), be.get(*be.cpu, oc)), 1e-6) << "in place";
    }
    Act a = be.gpu->alloc(2, 8), b = be.gpu->alloc(2, 9), o = be.gpu->alloc(2, 8);
    EXPECT_THROW(be.gpu->geglu(a, b, o), std::invalid_argument);
}

TEST(CudaMoe, AddBiasScaleSoftcapMatchCpu) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 32}, {5, 2880}, {37, 4096}, {1, 262144}}) {
        SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols));
        const auto xv = random_floats(size_t(rows * cols), -100, 100);
        const auto bt = random_tensor(TensorType::F32, cols, 1, "blk.0.attn_q.bias");
        const Weight bc = be.cpu->load_weight(bt->info), bg = be.gpu->load_weight(bt->info);
        auto [xc, xg] = be.act(xv, rows, cols);
        be.cpu->add_bias(xc, bc);
        be.gpu->add_bias(xg, bg);
        EXPECT_EQ(max_err(be.get(*be.gpu, xg), be.get(*be.cpu, xc)), 0.0) << "add_bias";  // one rounding each

        // Inputs in [-101, 101): x / cap spans the linear and the saturating parts of tanh.
        be.cpu->softcap(xc, 30.0f);
        be.gpu->softcap(xg, 30.0f);
        // 1e-6 of the largest output (|out| < 30): one division, tanhf against glibc's tanh (an ulp or two), one
        // product.
        EXPECT_LE(max_err(be.get(*be.gpu, xg), be.get(*be.cpu, xc)), 1e-6) << "softcap";

        // scale from the same inputs on both (the soft-capped values above differ by an ulp).
        auto [yc, yg] = be.act(be.get(*be.cpu, xc), rows, cols);
        auto [sc, sg] = be.out(rows, cols);
        be.cpu->scale(yc, 0.0376f, sc);
        be.gpu->scale(yg, 0.0376f, sg);
        EXPECT_EQ(max_err(be.get(*be.gpu, sg), be.get(*be.cpu, sc)), 0.0) << "scale";
        be.cpu->scale(yc, 53.06f, yc);
        be.gpu->scale(yg, 53.06f, yg);  // in place, as the engines scale the residual stream
        EXPECT_EQ(max_err(be.get(*be.gpu, yg), be.get(*be.cpu, yc)), 0.0) << "scale in place";
    }
    Act x = be.gpu->alloc(2, 16);
    const auto short_bias = random_tensor(TensorType::F32, 15, 1, "blk.0.attn_q.bias");
    const Weight b = be.gpu->load_weight(short_bias->info);
    EXPECT_THROW(be.gpu->add_bias(x, b), std::invalid_argument);
    EXPECT_THROW(be.gpu->softcap(x, 0.0f), std::invalid_argument);
    Act o = be.gpu->alloc(2, 15);
    EXPECT_THROW(be.gpu->scale(x, 2.0f, o), std::invalid_argument);
}

}  // namespace
