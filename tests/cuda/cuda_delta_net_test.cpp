// The CUDA backend's gated delta-net ops against the CPU backend on fresh random inputs, at small odd shapes and at
// the Qwen3.5 / Qwen3.6 shapes (key heads 16, value heads 32 or 48, head dims 128, conv kernel 4, conv channels
// 8192 or 10240). GPU outputs are filled with NaN before each op runs, so an op that leaves a value unwritten fails.
// Tolerances are stated at each check.
//
// The HostLogic tests need no GPU: they run the kernels' per-thread and per-block bodies (delta_net_kernels.h) on the
// host, threads of a block one after another in both orders (a race inside a phase would show as a difference), and
// compare with the CPU backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/delta_net_kernels.h"
#include "cuda_test_util.h"
#include "gpu_required.h"

namespace {

using namespace zinc::cuda_test;
using zinc::backend::Act;
using zinc::backend::Backend;
using zinc::backend::DeltaNetParams;
using zinc::backend::Weight;
using zinc::gguf::TensorType;
namespace dn = zinc::backend::cuda;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---------------------------------------------------------------- inputs

// An f32 tensor {ne0, ne1} holding v.
std::unique_ptr<HostTensor> f32_tensor(const std::vector<float>& v, int64_t ne0, int64_t ne1, const std::string& name) {
    auto t = random_tensor(TensorType::F32, ne0, ne1, name);
    std::memcpy(t->bytes.data(), v.data(), v.size() * sizeof(float));
    return t;
}

// Rows of n_heads groups of d values, each scaled to unit length (q and k after the model's L2 norm).
std::vector<float> unit_heads(int64_t rows, int n_heads, int d) {
    auto v = random_floats(size_t(rows * n_heads * d));
    for (size_t h = 0; h < size_t(rows * n_heads); ++h) {
        double s = 0;
        for (int i = 0; i < d; ++i) s += double(v[h * d + i]) * v[h * d + i];
        for (int i = 0; i < d; ++i) v[h * d + i] = float(v[h * d + i] / std::sqrt(s));
    }
    return v;
}

// One call's inputs of the recurrence: unit q and k, v in [-1, 1), g < 0 (decays exp(g) from about 0.05 to 0.99, and
// now and then a near-reset as a large softplus gives), beta in (0, 1).
struct DnInputs {
    int64_t T = 0;
    std::vector<float> q, k, v, g, beta;
};

DnInputs dn_inputs(const DeltaNetParams& p, int64_t T) {
    DnInputs in;
    in.T = T;
    in.q = unit_heads(T, p.n_k, p.d_k);
    in.k = unit_heads(T, p.n_k, p.d_k);
    in.v = random_floats(size_t(T * p.n_v * p.d_v));
    in.g = random_floats(size_t(T * p.n_v), -3.0f, -0.01f);
    for (size_t i = 0; i < in.g.size(); i += 17) in.g[i] = -20.0f;
    in.beta = random_floats(size_t(T * p.n_v), 0.02f, 0.98f);
    return in;
}

DeltaNetParams dn_params(int n_k, int n_v, int d_k, int d_v, bool tiled) {
    DeltaNetParams p;
    p.n_k = n_k;
    p.n_v = n_v;
    p.d_k = d_k;
    p.d_v = d_v;
    p.tiled = tiled;
    p.scale = 1.0f / std::sqrt(float(d_k));
    return p;
}

std::string dn_name(const DeltaNetParams& p) {
    return "n_k " + std::to_string(p.n_k) + " n_v " + std::to_string(p.n_v) + " d_k " + std::to_string(p.d_k) +
           " d_v " + std::to_string(p.d_v) + (p.tiled ? " tiled" : " hf");
}

// A state partway through a sequence.
std::vector<float> random_state(const DeltaNetParams& p) {
    return random_floats(size_t(p.n_v) * p.d_k * p.d_v, -0.3f, 0.3f);
}

// Runs the op on one backend: chunk 0 = delta_net, else delta_net_chunked. Returns the output rows.
std::vector<float> run_dn(Backends& be, Backend& b, const DeltaNetParams& p, const DnInputs& in, Act& state,
                          int chunk) {
    const int64_t kw = int64_t(p.n_k) * p.d_k, vw = int64_t(p.n_v) * p.d_v;
    const auto up = [&](const std::vector<float>& v, int64_t cols) {
        Act a = b.alloc(in.T, cols);
        b.upload(a, v);
        return a;
    };
    Act q = up(in.q, kw), k = up(in.k, kw), v = up(in.v, vw), g = up(in.g, p.n_v), beta = up(in.beta, p.n_v);
    Act out = up(std::vector<float>(size_t(in.T * vw), kNaN), vw);
    if (chunk > 0)
        b.delta_net_chunked(q, k, v, g, beta, state, p, chunk, out);
    else
        b.delta_net(q, k, v, g, beta, state, p, out);
    return be.get(b, out);
}

// ---------------------------------------------------------------- host runs of the kernel bodies

// Threads, and the elements of a product, in the opposite order.
struct ReverseBlock {
    template <class F>
    void run(F&& f) const {
        for (int tid = dn::kChunkThreads - 1; tid >= 0; --tid) f(tid);
    }
    template <class Epi>
    void gemm(int M, int N, int K, dn::SmemMat A, dn::SmemMat B, Epi&& epi) const {
        for (int m = M - 1; m >= 0; --m)
            for (int n = N - 1; n >= 0; --n) {
                float acc = 0.0f;
                for (int k = 0; k < K; ++k) acc += A.at(m, k) * B.at(k, n);
                epi(m, n, acc);
            }
    }
};

struct HostDn {
    std::vector<float> out, state;
};

dn::DeltaNetArgs host_args(const DeltaNetParams& p, const DnInputs& in, HostDn& r) {
    dn::DeltaNetArgs a;
    a.q = in.q.data();
    a.k = in.k.data();
    a.v = in.v.data();
    a.g = in.g.data();
    a.beta = in.beta.data();
    a.state = r.state.data();
    r.out.assign(size_t(in.T) * p.n_v * p.d_v, kNaN);
    a.out = r.out.data();
    a.T = in.T;
    a.n_k = p.n_k;
    a.n_v = p.n_v;
    a.d_k = p.d_k;
    a.d_v = p.d_v;
    a.tiled = p.tiled;
    a.scale = p.scale;
    return a;
}

// The chunked kernels' blocks run on the host, in launch order, with NaN-poisoned shared memory and scratch.
template <class Block>
void host_chunked(const DeltaNetParams& p, const DnInputs& in, int chunk, HostDn& r) {
    const dn::DeltaNetArgs a = host_args(p, in, r);
    const int C = dn::dn_chunk_len(chunk);
    std::vector<float> scratch(dn::delta_net_chunked_scratch(p.n_v, in.T, chunk), kNaN);
    auto ps = std::make_unique<dn::PrepareShared>();
    auto cs = std::make_unique<dn::ChunkShared>();
    const auto poison = [](auto& sm) {
        float* f = reinterpret_cast<float*>(&sm);
        for (size_t i = 0; i < sizeof(sm) / sizeof(float); ++i) f[i] = kNaN;
    };
    const int64_t seg = dn::kSegmentChunks * C;
    for (int64_t t0 = 0; t0 < in.T; t0 += seg) {
        const dn::ChunkArgs s = dn::dn_segment(a, C, t0, std::min(seg, in.T - t0), scratch.data());
        ASSERT_LE(size_t(p.n_v * s.n_chunks * (2 * C * C + C)), scratch.size());
        for (int64_t c = 0; c < s.n_chunks; ++c)
            for (int kh = 0; kh < p.n_k; ++kh) {
                poison(*ps);
                dn::dn_prepare_block(Block{}, *ps, s, c, kh);
            }
        for (int h = 0; h < p.n_v; ++h)
            for (int ct = 0; ct < (p.d_v + dn::kChunkCols - 1) / dn::kChunkCols; ++ct) {
                poison(*cs);
                dn::dn_chunk_block(Block{}, *cs, s, ct, h);
            }
    }
}

// The sequential kernel's lanes run on the host: kSeqSplit lanes per column, their partial sums combined as the
// butterfly of quad_sum leaves them in lane 0.
template <int kRows>
void host_sequential(const DeltaNetParams& p, const DnInputs& in, HostDn& r) {
    const dn::DeltaNetArgs a = host_args(p, in, r);
    const int64_t kw = int64_t(p.n_k) * p.d_k, vw = int64_t(p.n_v) * p.d_v;
    const auto quad = [](const float (&x)[dn::kSeqSplit]) { return (x[0] + x[1]) + (x[2] + x[3]); };
    for (int h = 0; h < p.n_v; ++h) {
        const int kh = dn::dn_key_head(p.tiled, p.n_k, p.n_v, h);
        float* S = r.state.data() + int64_t(h) * p.d_k * p.d_v;
        for (int j = 0; j < p.d_v; ++j) {
            float s[dn::kSeqSplit][kRows];
            for (int l = 0; l < dn::kSeqSplit; ++l) dn::dn_seq_load<kRows>(s[l], S, l, j, true, p.d_k, p.d_v);
            for (int64_t t = 0; t < in.T; ++t) {
                const float* kt = a.k + t * kw + int64_t(kh) * p.d_k;
                const float* qt = a.q + t * kw + int64_t(kh) * p.d_k;
                const float decay = std::exp(a.g[t * p.n_v + h]), b = a.beta[t * p.n_v + h];
                float part[dn::kSeqSplit];
                for (int l = 0; l < dn::kSeqSplit; ++l)
                    part[l] = dn::dn_seq_decay_read<kRows>(s[l], l, p.d_k, kt, decay);
                const float d = b * (a.v[t * vw + int64_t(h) * p.d_v + j] - quad(part));
                for (int l = 0; l < dn::kSeqSplit; ++l)
                    part[l] = dn::dn_seq_write_out<kRows>(s[l], l, p.d_k, kt, qt, d);
                r.out[size_t(t * vw + int64_t(h) * p.d_v + j)] = quad(part) * p.scale;
            }
            for (int l = 0; l < dn::kSeqSplit; ++l) dn::dn_seq_store<kRows>(s[l], S, l, j, true, p.d_k, p.d_v);
        }
    }
}

// The CPU backend's op on the same inputs.
HostDn cpu_dn(const DeltaNetParams& p, const DnInputs& in, const std::vector<float>& s0, int chunk) {
    auto cpu = zinc::backend::make_cpu_backend(0);
    const int64_t kw = int64_t(p.n_k) * p.d_k, vw = int64_t(p.n_v) * p.d_v;
    const auto up = [&](const std::vector<float>& v, int64_t rows, int64_t cols) {
        Act a = cpu->alloc(rows, cols);
        cpu->upload(a, v);
        return a;
    };
    Act q = up(in.q, in.T, kw), k = up(in.k, in.T, kw), v = up(in.v, in.T, vw), g = up(in.g, in.T, p.n_v),
        beta = up(in.beta, in.T, p.n_v), S = up(s0, p.n_v, int64_t(p.d_k) * p.d_v), out = cpu->alloc(in.T, vw);
    if (chunk > 0)
        cpu->delta_net_chunked(q, k, v, g, beta, S, p, chunk, out);
    else
        cpu->delta_net(q, k, v, g, beta, S, p, out);
    HostDn r;
    r.out.assign(out.data, out.data + out.size());
    r.state.assign(S.data, S.data + S.size());
    return r;
}

TEST(CudaDeltaNetHostLogic, HeadMappingsAreInverse) {
    for (auto [n_k, n_v] : {std::pair{16, 32}, {16, 48}, {4, 4}, {2, 6}})
        for (bool tiled : {true, false})
            for (int kh = 0; kh < n_k; ++kh)
                for (int m = 0; m < n_v / n_k; ++m) {
                    const int h = dn::dn_value_head(tiled, n_k, n_v, kh, m);
                    ASSERT_GE(h, 0);
                    ASSERT_LT(h, n_v);
                    EXPECT_EQ(dn::dn_key_head(tiled, n_k, n_v, h), kh);
                    EXPECT_EQ(h, tiled ? kh + m * n_k : kh * (n_v / n_k) + m);
                }
}

TEST(CudaDeltaNetHostLogic, SliceIndex) {
    struct Case {
        int64_t src_cols, group, offset, out_cols;
    };
    for (const Case& c : {Case{8192, 8192, 2048, 2048}, Case{8192, 8192, 4096, 4096}, Case{24, 6, 2, 12},
                          Case{32, 8, 4, 16}, Case{10, 10, 3, 5}})
        for (int64_t t = 0; t < 3; ++t) {
            const int64_t n_groups = c.src_cols / c.group, width = c.out_cols / n_groups;
            for (int64_t gi = 0; gi < n_groups; ++gi)
                for (int64_t i = 0; i < width; ++i)
                    ASSERT_EQ(dn::dn_slice_src(t * c.out_cols + gi * width + i, c.out_cols, width, c.src_cols, c.group,
                                               c.offset),
                              t * c.src_cols + gi * c.group + c.offset + i);
        }
}

template <int KM1>
void host_conv_tiles(const std::vector<float>& x, std::vector<float>& state, const std::vector<float>& w, int64_t T,
                     int64_t C, int64_t tile, bool reverse, bool silu, float* out) {
    const int64_t n_tiles = (T + tile - 1) / tile;
    for (int64_t i = 0; i < n_tiles; ++i) {
        const int64_t ti = reverse ? n_tiles - 1 - i : i;
        for (int64_t c = 0; c < C; ++c)
            dn::dn_conv_channel<KM1>(x.data(), state.data(), w.data(), T, C, c, ti * tile,
                                     std::min(T, (ti + 1) * tile), silu, out);
    }
}

void host_conv(int K, const std::vector<float>& x, std::vector<float>& state, const std::vector<float>& w, int64_t T,
               int64_t C, int64_t tile, bool reverse, bool silu, float* out) {
    switch (K) {
    case 1: host_conv_tiles<0>(x, state, w, T, C, tile, reverse, silu, out); break;
    case 2: host_conv_tiles<1>(x, state, w, T, C, tile, reverse, silu, out); break;
    case 4: host_conv_tiles<3>(x, state, w, T, C, tile, reverse, silu, out); break;
    case 8: host_conv_tiles<7>(x, state, w, T, C, tile, reverse, silu, out); break;
    default: FAIL() << "no instantiation for K " << K;
    }
}

TEST(CudaDeltaNetHostLogic, ConvTilesMatchCpu) {
    auto cpu = zinc::backend::make_cpu_backend(0);
    const int64_t C = 5;
    for (int K : {1, 2, 4, 8})
        for (int64_t T : {1, 2, 3, 17, 40, 100})
            for (bool aliased : {false, true}) {
                SCOPED_TRACE("K " + std::to_string(K) + " T " + std::to_string(T) + (aliased ? " aliased" : ""));
                const auto x = random_floats(size_t(T * C)), s0 = random_floats(size_t((K - 1) * C));
                const auto w = random_floats(size_t(C * K));
                const auto wt = f32_tensor(w, K, C, "conv");
                const Weight wc = cpu->load_weight(wt->info);
                Act xc = cpu->alloc(T, C), sc = cpu->alloc(K - 1, C), oc = cpu->alloc(T, C);
                cpu->upload(xc, x);
                cpu->upload(sc, s0);
                cpu->conv1d_causal(xc, sc, wc, true, oc);
                const std::vector<float> want(oc.data, oc.data + oc.size()), want_s(sc.data, sc.data + sc.size());
                const int64_t tile = dn::dn_conv_tile(T, K, aliased);
                if (aliased) {
                    EXPECT_EQ(tile, T);
                }
                if (tile < T) {
                    EXPECT_GE(tile, K - 1);
                }
                for (bool reverse : {false, true}) {
                    std::vector<float> state = s0, in = x, out(size_t(T * C), kNaN);
                    host_conv(K, in, state, w, T, C, tile, reverse, true, aliased ? in.data() : out.data());
                    // 1e-6 of the largest output: the same products summed in the same order (contraction may differ).
                    EXPECT_LE(max_err(aliased ? in : out, want), 1e-6) << (reverse ? "tiles in reverse" : "");
                    EXPECT_EQ(state, want_s) << "the new state is copied inputs";
                }
            }
    // Tiles stay within the 65535 grid rows for very long inputs.
    EXPECT_LE((int64_t(3000000) + dn::dn_conv_tile(3000000, 4, false) - 1) / dn::dn_conv_tile(3000000, 4, false),
              65535);
}

TEST(CudaDeltaNetHostLogic, ChunkedBlocksMatchCpu) {
    struct Case {
        DeltaNetParams p;
        int64_t T;
        int chunk;
    };
    std::vector<Case> cases;
    for (bool tiled : {true, false})
        for (int64_t T : {1, 7, 64, 100}) cases.push_back({dn_params(2, 6, 40, 20, tiled), T, 64});
    cases.push_back({dn_params(2, 4, 40, 20, true), 50, 16});
    cases.push_back({dn_params(1, 2, 128, 128, true), 70, 64});
    cases.push_back({dn_params(1, 2, 8, 24, false), 300, 4});  // 75 chunks: two launch segments
    for (const Case& c : cases) {
        SCOPED_TRACE(dn_name(c.p) + " T " + std::to_string(c.T) + " chunk " + std::to_string(c.chunk));
        const DnInputs in = dn_inputs(c.p, c.T);
        const auto s0 = random_state(c.p);
        const HostDn want = cpu_dn(c.p, in, s0, c.chunk);
        HostDn fwd, rev;
        fwd.state = rev.state = s0;
        host_chunked<dn::HostBlock>(c.p, in, c.chunk, fwd);
        host_chunked<ReverseBlock>(c.p, in, c.chunk, rev);
        // 1e-6 (measured 3e-7): the CPU's operations, but for delta by the inverse of (I + L) in place of its
        // substitution; products summed in another order, and fused multiply-adds may round differently.
        EXPECT_LE(max_err(fwd.out, want.out), 1e-6);
        EXPECT_LE(max_err(fwd.state, want.state), 1e-6);
        // Exact: no thread of a phase reads what another writes in the same phase.
        EXPECT_EQ(fwd.out, rev.out);
        EXPECT_EQ(fwd.state, rev.state);
    }
}

TEST(CudaDeltaNetHostLogic, SequentialLanesMatchCpu) {
    for (const DeltaNetParams& p : {dn_params(2, 6, 30, 20, true), dn_params(2, 4, 128, 128, false)}) {
        SCOPED_TRACE(dn_name(p));
        const DnInputs in = dn_inputs(p, 9);
        const auto s0 = random_state(p);
        const HostDn want = cpu_dn(p, in, s0, 0);
        HostDn got;
        got.state = s0;
        if (p.d_k <= 4 * 8)
            host_sequential<8>(p, in, got);
        else
            host_sequential<32>(p, in, got);
        // 1e-5: each sum of d_k products split in 4 interleaved partial sums; the state carries it over 9 tokens.
        EXPECT_LE(max_err(got.out, want.out), 1e-5);
        EXPECT_LE(max_err(got.state, want.state), 1e-5);
    }
}

// ---------------------------------------------------------------- element-wise ops and norms on the GPU

TEST(CudaDeltaNet, SigmoidMulFillSlice) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 4096}, {7, 4096}, {100, 4096}, {3, 5}}) {
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
        for (int64_t gate_cols : {cols, int64_t(1)}) {
            auto [xc, xg] = be.act(random_floats(size_t(rows * cols), -4, 4), rows, cols);
            auto [gc, gg] = be.act(random_floats(size_t(rows * gate_cols), -6, 6), rows, gate_cols);
            auto [oc, og] = be.out(rows, cols);
            be.cpu->sigmoid_mul(xc, gc, oc);
            be.gpu->sigmoid_mul(xg, gg, og);
            const auto want = be.get(*be.cpu, oc);
            // 1e-6 of the largest output: expf is within 2 ulp of the CPU's exp; one division and one product more.
            EXPECT_LE(max_err(be.get(*be.gpu, og), want), 1e-6) << "gate cols " << gate_cols;
            be.gpu->sigmoid_mul(xg, gg, xg);  // in place, as the attention gate is applied
            EXPECT_LE(max_err(be.get(*be.gpu, xg), want), 1e-6) << "in place";
        }
    }
    // fill: exact.
    Act a = be.gpu->alloc(3, 8192);
    be.gpu->upload(a, random_floats(3 * 8192));
    be.gpu->fill(a, 0.0f);
    EXPECT_EQ(be.get(*be.gpu, a), std::vector<float>(3 * 8192, 0.0f));
    be.gpu->fill(a, -2.5f);
    EXPECT_EQ(be.get(*be.gpu, a), std::vector<float>(3 * 8192, -2.5f));
    // slice_groups: exact copies. The conv output split into q, k, v (conv_dim 8192, key_dim 2048), and the per-head
    // [q | gate] split of the attention layers (16 heads of 256).
    struct SliceCase {
        int64_t src_cols, group, offset, out_cols;
    };
    for (int64_t rows : {1, 7, 100})
        for (const SliceCase& c : {SliceCase{8192, 8192, 0, 2048}, SliceCase{8192, 8192, 2048, 2048},
                                   SliceCase{8192, 8192, 4096, 4096}, SliceCase{8192, 512, 0, 4096},
                                   SliceCase{8192, 512, 256, 4096}, SliceCase{30, 10, 7, 9}}) {
            auto [sc, sg] = be.act(random_floats(size_t(rows * c.src_cols)), rows, c.src_cols);
            auto [oc, og] = be.out(rows, c.out_cols);
            be.cpu->slice_groups(sc, c.group, c.offset, oc);
            be.gpu->slice_groups(sg, c.group, c.offset, og);
            EXPECT_EQ(be.get(*be.gpu, og), be.get(*be.cpu, oc)) << c.group << "/" << c.offset << " rows " << rows;
        }
}

TEST(CudaDeltaNet, Gates) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (int64_t n : {32, 48, 5})
        for (int64_t rows : {1, 7, 100}) {
            // dt_bias and A_log as trained models have them; a + dt_bias reaches past softplus's threshold of 20.
            auto dt = random_floats(size_t(n), -1, 4);
            auto A = random_floats(size_t(n), -8, -0.01f);
            auto a_in = random_floats(size_t(rows * n), -6, 6);
            a_in[0] = 19.0f;
            const auto tdt = f32_tensor(dt, n, 1, "ssm_dt.bias"), tA = f32_tensor(A, n, 1, "ssm_a");
            const Weight dtc = be.cpu->load_weight(tdt->info), dtg = be.gpu->load_weight(tdt->info);
            const Weight Ac = be.cpu->load_weight(tA->info), Ag = be.gpu->load_weight(tA->info);
            auto [ac, ag] = be.act(a_in, rows, n);
            auto [bc, bg] = be.act(random_floats(size_t(rows * n), -6, 6), rows, n);
            auto [gc, gg] = be.out(rows, n);
            auto [btc, btg] = be.out(rows, n);
            be.cpu->delta_net_gates(ac, bc, dtc, Ac, gc, btc);
            be.gpu->delta_net_gates(ag, bg, dtg, Ag, gg, btg);
            // 2e-6 of the largest value: expf and log1pf are within 2 ulp of the CPU's; a product or division more.
            EXPECT_LE(max_err(be.get(*be.gpu, gg), be.get(*be.cpu, gc)), 2e-6) << n << " x " << rows;
            EXPECT_LE(max_err(be.get(*be.gpu, btg), be.get(*be.cpu, btc)), 2e-6) << n << " x " << rows;
        }
}

TEST(CudaDeltaNet, Norms) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (auto [rows, cols, group] : {std::tuple<int64_t, int64_t, int64_t>{1, 2048, 128}, {7, 2048, 128},
                                     {100, 4096, 128}, {3, 6144, 128}, {5, 96, 96}, {2, 1000, 40}}) {
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " / " + std::to_string(group));
        const auto x = random_floats(size_t(rows * cols), -2, 2);
        // l2_norm, in place as the model normalizes q and k.
        auto [xc, xg] = be.act(x, rows, cols);
        auto [oc, og] = be.out(rows, cols);
        be.cpu->l2_norm(xc, 1e-6f, group, oc);
        be.gpu->l2_norm(xg, 1e-6f, group, og);
        const auto want = be.get(*be.cpu, oc);
        // 1e-6 of the largest output: the same double sum of float squares, added in another order.
        EXPECT_LE(max_err(be.get(*be.gpu, og), want), 1e-6);
        be.gpu->l2_norm(xg, 1e-6f, group, xg);
        EXPECT_LE(max_err(be.get(*be.gpu, xg), want), 1e-6) << "in place";
        // gated_rms_norm, in place as the model gates the recurrence output.
        const auto w = random_floats(size_t(group), 0.5f, 1.5f);
        const auto tw = f32_tensor(w, group, 1, "ssm_norm.weight");
        const Weight wc = be.cpu->load_weight(tw->info), wg = be.gpu->load_weight(tw->info);
        auto [yc, yg] = be.act(x, rows, cols);
        auto [zc, zg] = be.act(random_floats(size_t(rows * cols), -5, 5), rows, cols);
        auto [rc, rg] = be.out(rows, cols);
        be.cpu->gated_rms_norm(yc, wc, zc, 1e-6f, group, rc);
        be.gpu->gated_rms_norm(yg, wg, zg, 1e-6f, group, rg);
        const auto want_g = be.get(*be.cpu, rc);
        // 2e-6: as above, and SiLU's expf within 2 ulp of the CPU's exp.
        EXPECT_LE(max_err(be.get(*be.gpu, rg), want_g), 2e-6);
        be.gpu->gated_rms_norm(yg, wg, zg, 1e-6f, group, yg);
        EXPECT_LE(max_err(be.get(*be.gpu, yg), want_g), 2e-6) << "in place";
    }
}

// ---------------------------------------------------------------- causal conv

TEST(CudaDeltaNet, Conv) {
    ZINC_REQUIRE_GPU();
    Backends be;
    // conv_dim of Qwen3.6-35B-A3B and Qwen3.5-9B (8192), Qwen3.6-27B (10240); odd small ones with other kernels.
    for (auto [C, K] : {std::pair<int64_t, int>{8192, 4}, {10240, 4}, {37, 2}, {37, 3}, {37, 1}}) {
        SCOPED_TRACE("C " + std::to_string(C) + " K " + std::to_string(K));
        const auto wt = random_tensor(TensorType::F32, K, C, "ssm_conv1d.weight");
        const Weight wc = be.cpu->load_weight(wt->info), wg = be.gpu->load_weight(wt->info);
        auto [sc, sg] = be.act(random_floats(size_t((K - 1) * C)), K - 1, C);
        // A prompt, then decode steps: the state carries over (sequence: 1, 7, 64, 100 rows, then 1-row steps).
        for (int64_t T : {1, 7, 64, 100, 1, 1, 1}) {
            auto [xc, xg] = be.act(random_floats(size_t(T * C), -2, 2), T, C);
            auto [oc, og] = be.out(T, C);
            be.cpu->conv1d_causal(xc, sc, wc, true, oc);
            be.gpu->conv1d_causal(xg, sg, wg, true, og);
            // 1e-6 of the largest output: K products summed in the CPU's order; expf within 2 ulp.
            EXPECT_LE(max_err(be.get(*be.gpu, og), be.get(*be.cpu, oc)), 1e-6) << "T " << T;
            // The state holds copies of inputs: exact.
            EXPECT_EQ(be.get(*be.gpu, sg), be.get(*be.cpu, sc)) << "T " << T;
        }
        // In place (out = x) and without SiLU.
        for (int64_t T : {1, 5, 100}) {
            const auto x = random_floats(size_t(T * C), -2, 2);
            auto [xc, xg] = be.act(x, T, C);
            auto [oc, og] = be.out(T, C);
            be.cpu->conv1d_causal(xc, sc, wc, false, oc);
            be.gpu->conv1d_causal(xg, sg, wg, false, xg);
            EXPECT_LE(max_err(be.get(*be.gpu, xg), be.get(*be.cpu, oc)), 1e-6) << "in place, T " << T;
            EXPECT_EQ(be.get(*be.gpu, sg), be.get(*be.cpu, sc)) << "in place, T " << T;
        }
    }
}

// ---------------------------------------------------------------- the recurrence

// Value heads 32 with 16 key heads: Qwen3.6-35B-A3B and Qwen3.5-9B; 48: Qwen3.6-27B; HF head order; odd dims.
std::vector<DeltaNetParams> recurrence_shapes() {
    return {dn_params(16, 32, 128, 128, true), dn_params(16, 48, 128, 128, true), dn_params(16, 32, 128, 128, false),
            dn_params(2, 6, 40, 20, true), dn_params(2, 6, 40, 20, false)};
}

// Upload the same state to both backends.
std::pair<Act, Act> state_pair(Backends& be, const DeltaNetParams& p, const std::vector<float>& s0) {
    return be.act(s0, p.n_v, int64_t(p.d_k) * p.d_v);
}

TEST(CudaDeltaNet, DecodeSteps) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (const DeltaNetParams& p : recurrence_shapes()) {
        SCOPED_TRACE(dn_name(p));
        auto [sc, sg] = state_pair(be, p, random_state(p));
        be.cpu->fill(sc, 0.0f);  // a new sequence, as the engine starts one
        be.gpu->fill(sg, 0.0f);
        for (int step = 0; step < 8; ++step) {
            if (step == 4) {  // then from a state partway through a sequence
                const auto s = random_state(p);
                be.cpu->upload(sc, s);
                be.gpu->upload(sg, s);
            }
            const DnInputs in = dn_inputs(p, 1);
            const auto want = run_dn(be, *be.cpu, p, in, sc, 0);
            const auto got = run_dn(be, *be.gpu, p, in, sg, 0);
            // 1e-5 of the largest value: sums of d_k products in another order (4 interleaved partial sums), expf
            // within 2 ulp; the state carries the differences over the steps.
            EXPECT_LE(max_err(got, want), 1e-5) << "step " << step;
            EXPECT_LE(max_err(be.get(*be.gpu, sg), be.get(*be.cpu, sc)), 1e-5) << "step " << step;
        }
    }
}

TEST(CudaDeltaNet, PrefillChunkedThenDecode) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (const DeltaNetParams& p : recurrence_shapes())
        for (int64_t T : {1, 7, 64, 100}) {
            SCOPED_TRACE(dn_name(p) + " T " + std::to_string(T));
            auto [sc, sg] = state_pair(be, p, random_state(p));
            const DnInputs in = dn_inputs(p, T);
            const auto want = run_dn(be, *be.cpu, p, in, sc, 64);
            const auto got = run_dn(be, *be.gpu, p, in, sg, 64);
            // 1e-5 of the largest value: the CPU's chunked form in its order; expf within 2 ulp and fused
            // multiply-adds round differently.
            EXPECT_LE(max_err(got, want), 1e-5);
            EXPECT_LE(max_err(be.get(*be.gpu, sg), be.get(*be.cpu, sc)), 1e-5);
            for (int step = 0; step < 3; ++step) {
                const DnInputs d = dn_inputs(p, 1);
                const auto w1 = run_dn(be, *be.cpu, p, d, sc, 0);
                const auto g1 = run_dn(be, *be.gpu, p, d, sg, 0);
                // 1e-5: as the decode steps.
                EXPECT_LE(max_err(g1, w1), 1e-5) << "decode step " << step;
            }
            EXPECT_LE(max_err(be.get(*be.gpu, sg), be.get(*be.cpu, sc)), 1e-5) << "after decode";
        }
}

TEST(CudaDeltaNet, ChunkedEqualsSequentialOnGpu) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (const DeltaNetParams& p : recurrence_shapes())
        for (auto [T, chunk] : {std::pair<int64_t, int>{100, 64}, {200, 64}, {50, 16}, {30, 1}, {70, 1000}}) {
            SCOPED_TRACE(dn_name(p) + " T " + std::to_string(T) + " chunk " + std::to_string(chunk));
            const auto s0 = random_state(p);
            const DnInputs in = dn_inputs(p, T);
            const int64_t state_cols = int64_t(p.d_k) * p.d_v;
            Act s_seq = be.gpu->alloc(p.n_v, state_cols), s_chk = be.gpu->alloc(p.n_v, state_cols);
            be.gpu->upload(s_seq, s0);
            be.gpu->upload(s_chk, s0);
            const auto seq = run_dn(be, *be.gpu, p, in, s_seq, 0);
            const auto chk = run_dn(be, *be.gpu, p, in, s_chk, chunk);
            // 3e-5 of the largest value: the same recurrence rounded in another form; on the CPU the two forms differ
            // by up to 5e-6 on these cases.
            EXPECT_LE(max_err(chk, seq), 3e-5);
            EXPECT_LE(max_err(be.get(*be.gpu, s_chk), be.get(*be.gpu, s_seq)), 3e-5);
        }
}

TEST(CudaDeltaNet, LongPromptRunsInSegments) {
    ZINC_REQUIRE_GPU();
    Backends be;
    // 4200 tokens in chunks of 64: more chunks than one launch pair takes (kSegmentChunks).
    const DeltaNetParams p = dn_params(2, 4, 128, 128, true);
    auto [sc, sg] = state_pair(be, p, random_state(p));
    const DnInputs in = dn_inputs(p, 4200);
    const auto want = run_dn(be, *be.cpu, p, in, sc, 64);
    const auto got = run_dn(be, *be.gpu, p, in, sg, 64);
    // 1e-5: as PrefillChunkedThenDecode; the decays keep older rounding from accumulating.
    EXPECT_LE(max_err(got, want), 1e-5);
    EXPECT_LE(max_err(be.get(*be.gpu, sg), be.get(*be.cpu, sc)), 1e-5);
}

// ---------------------------------------------------------------- the fused decode step

// A layer's weights and starting states in host memory: random, the states as partway through a sequence.
struct StepHost {
    DeltaNetParams p;
    int K = 4;
    std::unique_ptr<HostTensor> conv_w, dt_bias, ssm_a, norm;
    std::vector<float> conv_state, state;

    int64_t key_dim() const { return int64_t(p.n_k) * p.d_k; }
    int64_t value_dim() const { return int64_t(p.n_v) * p.d_v; }
    int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
};

StepHost step_host(const DeltaNetParams& p, int K) {
    StepHost h;
    h.p = p;
    h.K = K;
    h.conv_w = random_tensor(TensorType::F32, K, h.conv_dim(), "ssm_conv1d.weight");
    h.dt_bias = f32_tensor(random_floats(size_t(p.n_v), -1, 4), p.n_v, 1, "ssm_dt.bias");
    h.ssm_a = f32_tensor(random_floats(size_t(p.n_v), -8, -0.01f), p.n_v, 1, "ssm_a");
    h.norm = f32_tensor(random_floats(size_t(p.d_v), 0.5f, 1.5f), p.d_v, 1, "ssm_norm.weight");
    h.conv_state = random_floats(size_t((K - 1) * h.conv_dim()), -2, 2);
    h.state = random_state(p);
    return h;
}

// One layer's delta_net_step operands on one backend: the projections, the weights, the two states and the scratch
// (NaN, so that what is not written shows).
struct StepLayer {
    const StepHost* host = nullptr;
    Act qkv, z, a, b, conv_state, state, conv, g, beta, out;
    Weight conv_w, dt_bias, ssm_a, norm;

    zinc::backend::DeltaNetWeights weights() const { return {&conv_w, &dt_bias, &ssm_a, &norm}; }
};

StepLayer step_layer(Backend& be, const StepHost& h) {
    StepLayer l;
    l.host = &h;
    const auto up = [&](const std::vector<float>& v, int64_t rows, int64_t cols) {
        Act a = be.alloc(rows, cols);
        be.upload(a, v);
        return a;
    };
    const auto nan = [&](int64_t cols) { return up(std::vector<float>(size_t(cols), kNaN), 1, cols); };
    l.conv_w = be.load_weight(h.conv_w->info);
    l.dt_bias = be.load_weight(h.dt_bias->info);
    l.ssm_a = be.load_weight(h.ssm_a->info);
    l.norm = be.load_weight(h.norm->info);
    l.conv_state = up(h.conv_state, h.K - 1, h.conv_dim());
    l.state = up(h.state, h.p.n_v, int64_t(h.p.d_k) * h.p.d_v);
    l.qkv = nan(h.conv_dim());
    l.z = nan(h.value_dim());
    l.a = nan(h.p.n_v);
    l.b = nan(h.p.n_v);
    l.conv = nan(h.conv_dim());
    l.g = nan(h.p.n_v);
    l.beta = nan(h.p.n_v);
    l.out = nan(h.value_dim());
    return l;
}

// Fresh projections of one token.
struct StepInputs {
    std::vector<float> qkv, z, a, b;
};
StepInputs step_inputs(const StepHost& h) {
    return {random_floats(size_t(h.conv_dim()), -2, 2), random_floats(size_t(h.value_dim()), -5, 5),
            random_floats(size_t(h.p.n_v), -6, 6), random_floats(size_t(h.p.n_v), -6, 6)};
}
void upload_inputs(Backend& be, StepLayer& l, const StepInputs& in) {
    be.upload(l.qkv, in.qkv);
    be.upload(l.z, in.z);
    be.upload(l.a, in.a);
    be.upload(l.b, in.b);
}

constexpr float kStepEps = 1e-6f;

// The ops delta_net_step is defined as, one by one.
void step_by_ops(Backend& be, StepLayer& l) {
    const StepHost& h = *l.host;
    const int64_t kd = h.key_dim();
    be.delta_net_gates(l.a, l.b, l.dt_bias, l.ssm_a, l.g, l.beta);
    be.conv1d_causal(l.qkv, l.conv_state, l.conv_w, true, l.conv);
    Act qk{l.conv.data, 1, 2 * kd};
    be.l2_norm(qk, kStepEps, h.p.d_k, qk);
    const Act q{l.conv.data, 1, kd}, k{l.conv.data + kd, 1, kd}, v{l.conv.data + 2 * kd, 1, h.value_dim()};
    be.delta_net(q, k, v, l.g, l.beta, l.state, h.p, l.out);
    be.gated_rms_norm(l.out, l.norm, l.z, kStepEps, h.p.d_v, l.out);
}

void fused_step(Backend& be, StepLayer& l) {
    be.delta_net_step(l.qkv, l.z, l.a, l.b, l.weights(), kStepEps, l.conv_state, l.state, l.host->p, l.conv, l.g,
                      l.beta, l.out);
}

// The Qwen3.5-9B / Qwen3.6-35B-A3B shape (16 key heads, 32 value heads of 128, conv of 4) and Qwen3.6-27B's 48 value
// heads, the HF head order, value heads that are no whole number of Q8_1 blocks (no Q8_1 output then), key heads of
// 256 (the recurrence's largest register tile), other conv widths, and value heads of 3 and 5 Q8_1 blocks.
std::vector<std::pair<DeltaNetParams, int>> step_shapes() {
    return {{dn_params(16, 32, 128, 128, true), 4}, {dn_params(16, 48, 128, 128, true), 4},
            {dn_params(16, 32, 128, 128, false), 4}, {dn_params(2, 6, 40, 20, true), 4},
            {dn_params(1, 2, 256, 64, true), 3},    {dn_params(2, 4, 32, 96, false), 2},
            {dn_params(1, 2, 64, 160, true), 4}};
}

TEST(CudaDeltaNet, StepEqualsTheSequenceOfOps) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (const auto& [p, K] : step_shapes()) {
        SCOPED_TRACE(dn_name(p) + " K " + std::to_string(K));
        const StepHost h = step_host(p, K);
        StepLayer seq = step_layer(*be.gpu, h), fused = step_layer(*be.gpu, h), cpu = step_layer(*be.cpu, h);
        for (int step = 0; step < 4; ++step) {
            SCOPED_TRACE("step " + std::to_string(step));
            const StepInputs in = step_inputs(h);
            upload_inputs(*be.gpu, seq, in);
            upload_inputs(*be.gpu, fused, in);
            upload_inputs(*be.cpu, cpu, in);
            step_by_ops(*be.gpu, seq);
            fused_step(*be.gpu, fused);
            fused_step(*be.cpu, cpu);
            // Exact: the fused kernels compute every value as the separate kernels do.
            const auto out = be.get(*be.gpu, fused.out);
            EXPECT_EQ(out, be.get(*be.gpu, seq.out)) << "out";
            EXPECT_EQ(be.get(*be.gpu, fused.conv), be.get(*be.gpu, seq.conv)) << "conv";
            EXPECT_EQ(be.get(*be.gpu, fused.g), be.get(*be.gpu, seq.g)) << "g";
            EXPECT_EQ(be.get(*be.gpu, fused.beta), be.get(*be.gpu, seq.beta)) << "beta";
            EXPECT_EQ(be.get(*be.gpu, fused.conv_state), be.get(*be.gpu, seq.conv_state)) << "conv state";
            EXPECT_EQ(be.get(*be.gpu, fused.state), be.get(*be.gpu, seq.state)) << "state";
            // 2e-5 of the largest value against the CPU: the recurrence's 1e-5 (DecodeSteps), the states carried over
            // the steps, and the norms' 2e-6.
            EXPECT_LE(max_err(out, be.get(*be.cpu, cpu.out)), 2e-5) << "out against the CPU";
            EXPECT_LE(max_err(be.get(*be.gpu, fused.state), be.get(*be.cpu, cpu.state)), 2e-5) << "state, CPU";
        }
    }
}

// One token of each of three sequences, each with states of its own, in one step: every row's outputs and every
// sequence's states after four steps are those of the sequence stepped alone, bit for bit.
TEST(CudaDeltaNet, StepOfSeveralSequencesEqualsEachAlone) {
    ZINC_REQUIRE_GPU();
    Backends be;
    Backend& gpu = *be.gpu;
    constexpr int kSeqs = 3;
    for (const auto& [p, K] : step_shapes()) {
        SCOPED_TRACE(dn_name(p) + " K " + std::to_string(K));
        const StepHost h = step_host(p, K);
        std::vector<StepHost> starts;  // each sequence's states
        for (int s = 0; s < kSeqs; ++s) starts.push_back(step_host(p, K));
        std::vector<StepLayer> alone;
        for (int s = 0; s < kSeqs; ++s) {
            alone.push_back(step_layer(gpu, h));
            gpu.upload(alone.back().conv_state, starts[size_t(s)].conv_state);
            gpu.upload(alone.back().state, starts[size_t(s)].state);
        }
        StepLayer rows = step_layer(gpu, h);  // its weights; the rows' operands below
        const auto nan = [&](int64_t cols) {
            Act a = gpu.alloc(kSeqs, cols);
            gpu.upload(a, std::vector<float>(size_t(kSeqs * cols), kNaN));
            return a;
        };
        Act qkv = nan(h.conv_dim()), z = nan(h.value_dim()), a = nan(p.n_v), b = nan(p.n_v);
        Act conv = nan(h.conv_dim()), g = nan(p.n_v), beta = nan(p.n_v), out = nan(h.value_dim());
        std::vector<Act> conv_states, states;
        for (int s = 0; s < kSeqs; ++s) {
            conv_states.push_back(gpu.alloc(K - 1, h.conv_dim()));
            gpu.upload(conv_states.back(), starts[size_t(s)].conv_state);
            states.push_back(gpu.alloc(p.n_v, int64_t(p.d_k) * p.d_v));
            gpu.upload(states.back(), starts[size_t(s)].state);
        }
        std::vector<Act*> conv_ptrs, state_ptrs;
        for (int s = 0; s < kSeqs; ++s) {
            conv_ptrs.push_back(&conv_states[size_t(s)]);
            state_ptrs.push_back(&states[size_t(s)]);
        }
        for (int step = 0; step < 4; ++step) {
            SCOPED_TRACE("step " + std::to_string(step));
            StepInputs all;
            for (int s = 0; s < kSeqs; ++s) {
                const StepInputs in = step_inputs(h);
                upload_inputs(gpu, alone[size_t(s)], in);
                fused_step(gpu, alone[size_t(s)]);
                all.qkv.insert(all.qkv.end(), in.qkv.begin(), in.qkv.end());
                all.z.insert(all.z.end(), in.z.begin(), in.z.end());
                all.a.insert(all.a.end(), in.a.begin(), in.a.end());
                all.b.insert(all.b.end(), in.b.begin(), in.b.end());
            }
            gpu.upload(qkv, all.qkv);
            gpu.upload(z, all.z);
            gpu.upload(a, all.a);
            gpu.upload(b, all.b);
            gpu.delta_net_step(qkv, z, a, b, rows.weights(), kStepEps, conv_ptrs, state_ptrs, p, conv, g, beta, out);
            const auto got = be.get(gpu, out), got_conv = be.get(gpu, conv);
            for (int s = 0; s < kSeqs; ++s) {
                const auto row = [&](const std::vector<float>& v, int64_t cols) {
                    return std::vector<float>(v.begin() + s * cols, v.begin() + (s + 1) * cols);
                };
                EXPECT_EQ(row(got, h.value_dim()), be.get(gpu, alone[size_t(s)].out)) << "out of sequence " << s;
                EXPECT_EQ(row(got_conv, h.conv_dim()), be.get(gpu, alone[size_t(s)].conv)) << "conv of " << s;
                EXPECT_EQ(be.get(gpu, conv_states[size_t(s)]), be.get(gpu, alone[size_t(s)].conv_state))
                    << "conv state of " << s;
                EXPECT_EQ(be.get(gpu, states[size_t(s)]), be.get(gpu, alone[size_t(s)].state)) << "state of " << s;
            }
        }
    }
}

// The step leaves its output's Q8_1 blocks for the output projection right after it (as rms_norm does): that matvec
// reads them instead of quantizing the row itself, and its result is the one after the sequence of ops, bit for bit.
TEST(CudaDeltaNet, MatvecAfterStepEqualsMatvecAfterTheOps) {
    ZINC_REQUIRE_GPU();
    Backends be;
    Backend& g = *be.gpu;
    for (const auto& [p, K] : step_shapes()) {
        SCOPED_TRACE(dn_name(p) + " K " + std::to_string(K));
        const StepHost h = step_host(p, K);
        if (h.value_dim() % 32 != 0) continue;  // the Q8_0 rows of ssm_out: whole blocks
        StepLayer seq = step_layer(g, h), fused = step_layer(g, h);
        const auto wt = random_tensor(TensorType::Q8_0, h.value_dim(), 512, "ssm_out.weight");
        const Weight w = g.load_weight(wt->info);
        const auto start = random_floats(512);
        Act res_seq = g.alloc(1, 512), res_fused = g.alloc(1, 512), tmp = g.alloc(1, 512);
        g.upload(res_seq, start);
        g.upload(res_fused, start);
        for (int step = 0; step < 3; ++step) {
            const StepInputs in = step_inputs(h);
            upload_inputs(g, seq, in);
            upload_inputs(g, fused, in);
            step_by_ops(g, seq);
            g.matmul_add(w, seq.out, tmp, res_seq);
            fused_step(g, fused);
            g.matmul_add(w, fused.out, tmp, res_fused);
            EXPECT_EQ(be.get(g, res_fused), be.get(g, res_seq)) << "step " << step;
        }
        EXPECT_NE(be.get(g, res_seq), start);
    }
}

TEST(CudaDeltaNet, BadShapesThrow) {
    ZINC_REQUIRE_GPU();
    Backends be;
    Backend& g = *be.gpu;
    Act x = g.alloc(2, 256), y = g.alloc(2, 256), gate3 = g.alloc(2, 3), o = g.alloc(2, 256), o7 = g.alloc(2, 7);
    EXPECT_THROW(g.sigmoid_mul(x, gate3, o), std::invalid_argument);
    EXPECT_THROW(g.sigmoid_mul(x, y, o7), std::invalid_argument);
    Act o100 = g.alloc(2, 100);
    EXPECT_THROW(g.slice_groups(x, 256, 200, o100), std::invalid_argument);  // past the group
    EXPECT_THROW(g.slice_groups(x, 100, 0, o), std::invalid_argument);       // group not dividing
    EXPECT_THROW(g.slice_groups(x, 256, 0, x), std::invalid_argument);       // aliasing
    EXPECT_THROW(g.l2_norm(x, 1e-6f, 100, o), std::invalid_argument);
    EXPECT_THROW(g.l2_norm(x, 1e-6f, 128, o7), std::invalid_argument);
    const auto wt = random_tensor(TensorType::F32, 64, 1, "ssm_norm.weight");
    const Weight w64 = g.load_weight(wt->info);
    EXPECT_THROW(g.gated_rms_norm(x, w64, y, 1e-6f, 128, o), std::invalid_argument);  // weight of 64 for groups of 128
    EXPECT_THROW(g.gated_rms_norm(x, w64, gate3, 1e-6f, 64, o), std::invalid_argument);
    Act a = g.alloc(2, 32), b = g.alloc(3, 32), gg = g.alloc(2, 32), bb = g.alloc(2, 32);
    const auto t32 = random_tensor(TensorType::F32, 32, 1, "ssm_a");
    const Weight w32 = g.load_weight(t32->info);
    EXPECT_THROW(g.delta_net_gates(a, b, w32, w32, gg, bb), std::invalid_argument);
    EXPECT_THROW(g.delta_net_gates(a, a, w64, w32, gg, bb), std::invalid_argument);
    const auto ct = random_tensor(TensorType::F32, 4, 256, "ssm_conv1d.weight");
    const Weight cw = g.load_weight(ct->info);
    Act st3 = g.alloc(3, 256), st2 = g.alloc(2, 256);
    EXPECT_THROW(g.conv1d_causal(x, st2, cw, true, o), std::invalid_argument);
    EXPECT_THROW(g.conv1d_causal(x, st3, cw, true, o7), std::invalid_argument);
    EXPECT_THROW(g.conv1d_causal(gate3, st3, cw, true, gate3), std::invalid_argument);  // channels differ
    const DeltaNetParams p = dn_params(2, 4, 32, 16, true);
    Act q = g.alloc(1, 64), k = g.alloc(1, 64), v = g.alloc(1, 64), gd = g.alloc(1, 4), be1 = g.alloc(1, 4),
        S = g.alloc(4, 32 * 16), out = g.alloc(1, 64), bad = g.alloc(1, 63);
    EXPECT_NO_THROW(g.delta_net(q, k, v, gd, be1, S, p, out));
    EXPECT_THROW(g.delta_net(bad, k, v, gd, be1, S, p, out), std::invalid_argument);
    EXPECT_THROW(g.delta_net(q, k, v, gd, be1, S, p, bad), std::invalid_argument);
    EXPECT_THROW(g.delta_net_chunked(q, k, v, gd, be1, S, p, 0, out), std::invalid_argument);
    EXPECT_THROW(g.delta_net_chunked(q, k, v, gd, be1, x, p, 64, out), std::invalid_argument);  // state shape
    DeltaNetParams p3 = p;
    p3.n_v = 3;  // not a multiple of n_k
    EXPECT_THROW(g.delta_net(q, k, v, gd, be1, S, p3, out), std::invalid_argument);
    // Key heads wider than the kernels take: not a bad shape, so not invalid_argument.
    const DeltaNetParams wide = dn_params(1, 1, 512, 16, true);
    Act qw = g.alloc(1, 512), kw = g.alloc(1, 512), vw = g.alloc(1, 16), gw = g.alloc(1, 1), bw = g.alloc(1, 1),
        Sw = g.alloc(1, 512 * 16), ow = g.alloc(1, 16);
    EXPECT_THROW(g.delta_net(qw, kw, vw, gw, bw, Sw, wide, ow), std::runtime_error);
    // delta_net_step: one row only, every weight given, outputs over no input.
    const StepHost h = step_host(p, 4);
    StepLayer l = step_layer(g, h);
    Act qkv2 = g.alloc(2, h.conv_dim());
    zinc::backend::DeltaNetWeights no_norm = l.weights();
    no_norm.norm = nullptr;
    EXPECT_THROW(g.delta_net_step(qkv2, l.z, l.a, l.b, l.weights(), kStepEps, l.conv_state, l.state, p, l.conv, l.g,
                                  l.beta, l.out),
                 std::invalid_argument);
    EXPECT_THROW(g.delta_net_step(l.qkv, l.z, l.a, l.b, no_norm, kStepEps, l.conv_state, l.state, p, l.conv, l.g,
                                  l.beta, l.out),
                 std::invalid_argument);
    EXPECT_THROW(g.delta_net_step(l.qkv, l.z, l.a, l.b, l.weights(), kStepEps, l.conv_state, l.state, p, l.qkv, l.g,
                                  l.beta, l.out),
                 std::invalid_argument);
    g.synchronize();
}

}  // namespace
