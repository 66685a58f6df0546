// The CUDA backend's fused ops (matmuls, ffn_gated, matmul_add; norm_add and shared_expert_add(_norm) at the end), at
// Qwen3-8B shapes (n_embd 4096, 1024-wide K and V, n_ff 12288) for the weight types of real files and at small shapes
// for every type, matmuls and matmul_add also with the biases gpt-oss adds in their epilogue. Each op is checked three
// ways:
//  - against the same ops one by one on the GPU (the sequence the op is defined as, which the base class runs; with a
//    bias, add_bias after the matmul): equal bit for bit. For one row the fused kernels share the separate kernels'
//    per-row dot product (matvec_row.cuh, whose additions nvcc cannot contract) and element-wise expressions, and add
//    a bias and the residual with one f32 add each, as add_bias and add do; for more rows the fused op is that
//    sequence;
//  - against the f32 reference (the dequantized weights dotted with the activations in double): every value within
//    the worst-case bound of the Q8_1 rounding of the activations, as in the matmul test (cuda_ops_test.cpp);
//  - against the CPU backend's op (its sequence of ops) by relative L2 difference, at cpu_rel_tolerance.
// GPU outputs are filled with NaN before each op runs, so a value left unwritten fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "cuda_test_util.h"
#include "gguf/tensor_type.h"
#include "gpu_required.h"

namespace {

using namespace zinc::cuda_test;
using zinc::backend::Act;
using zinc::backend::GatedActivation;
using zinc::backend::Weight;
using zinc::gguf::TensorType;

bool is_float(TensorType t) { return t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16; }

std::string type_str(TensorType t) { return std::string(zinc::gguf::type_name(t)); }

// A random weight on both backends, with its host bytes for the reference.
struct Both {
    std::unique_ptr<HostTensor> host;
    Weight cpu, gpu;
};

Both make_weight(Backends& be, TensorType type, int64_t cols, int64_t rows, const std::string& name) {
    Both w;
    w.host = random_tensor(type, cols, rows, name);
    w.cpu = be.cpu->load_weight(w.host->info);
    w.gpu = be.gpu->load_weight(w.host->info);
    return w;
}

// A random f32 bias of n values in [-1, 1) on both backends (a 1-D tensor, as gpt-oss's), and its values.
Both make_bias(Backends& be, int64_t n, const std::string& name) {
    return make_weight(be, TensorType::F32, n, 1, name);
}

std::vector<float> bias_values(const Both& b) { return dequantized_row(*b.host, 0); }

// W[o] . x in double for every row o of w, and the bound on a GPU decode matvec's distance from it: 2e-5 of
// sum |w_i x_i| plus 1e-6 for f32 accumulation in another order, and for a quantized weight (dp4a against Q8_1
// activations, one row) the rounding of the activations, at most d_b/2 per value with d_b = amax_b/127 of its
// 32-value block, times sum |w_i| over the block (times 1.001).
struct Dots {
    std::vector<double> ref, bound;
};

Dots reference_dots(const HostTensor& t, const std::vector<float>& x) {
    const int64_t cols = t.info.ne[0], n_out = t.info.ne[1];
    const bool q8_1 = !is_float(t.info.type);
    const int64_t nb = (cols + 31) / 32;
    std::vector<double> half_step(size_t(nb), 0.0);
    for (int64_t b = 0; b < nb; ++b) {
        double amax = 0;
        for (int64_t i = b * 32; i < std::min(cols, b * 32 + 32); ++i) amax = std::max(amax, double(std::fabs(x[i])));
        half_step[b] = amax / 127.0 / 2.0;
    }
    Dots d;
    d.ref.resize(size_t(n_out));
    d.bound.resize(size_t(n_out));
    for (int64_t o = 0; o < n_out; ++o) {
        const auto w = dequantized_row(t, o);
        double ref = 0, abs_sum = 0, qbound = 0;
        for (int64_t b = 0; b < nb; ++b) {
            double wabs = 0;
            for (int64_t i = b * 32; i < std::min(cols, b * 32 + 32); ++i) {
                ref += double(w[i]) * x[i];
                abs_sum += std::fabs(double(w[i]) * x[i]);
                wabs += std::fabs(w[i]);
            }
            qbound += half_step[b] * wabs;
        }
        d.ref[o] = ref;
        d.bound[o] = 2e-5 * abs_sum + 1e-6 + (q8_1 ? 1.001 * qbound : 0.0);
    }
    return d;
}

// The reference plus a bias: the f32 add of add_bias rounds to half an ulp, within 1e-6 relative (as the residual add).
void add_bias_to_reference(Dots& d, const std::vector<float>& bias) {
    for (size_t o = 0; o < d.ref.size(); ++o) {
        d.ref[o] += bias[o];
        d.bound[o] += 1e-6 * std::fabs(d.ref[o]);
    }
}

// Expects every got[i] within bound[i] of ref[i]; returns the relative L2 error.
double check_bounds(const std::vector<float>& got, const std::vector<double>& ref, const std::vector<double>& bound) {
    double err2 = 0, ref2 = 0;
    int64_t bad = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        const double g = got[i], e = std::isfinite(g) ? std::fabs(g - ref[i]) : INFINITY;
        err2 += (g - ref[i]) * (g - ref[i]);
        ref2 += ref[i] * ref[i];
        if (!(e <= bound[i]) && bad++ < 5)
            ADD_FAILURE() << "out[" << i << "] = " << g << ", reference " << ref[i] << ", bound " << bound[i];
    }
    EXPECT_EQ(bad, 0);
    return std::sqrt(err2 / std::max(ref2, 1e-300));
}

// ||a - b|| / ||b||; NaN in a gives +inf.
double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
    double d2 = 0, b2 = 0;
    for (size_t i = 0; i < b.size(); ++i) {
        if (!std::isfinite(a[i])) return INFINITY;
        d2 += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        b2 += double(b[i]) * b[i];
    }
    return std::sqrt(d2 / std::max(b2, 1e-300));
}

// Relative L2 difference allowed between the GPU and the CPU backend, by the activation format the CPU dots a weight
// type with: f32 for F32 (accumulation order only); values rounded to f16 or bf16 for F16/BF16; Q8_0, Q8_1 or Q8_K
// blocks for the quantized types, against the GPU's Q8_1. A host emulation of the GPU's arithmetic (chunk_dot in lane
// order) differed from the CPU backend on these shapes by at most 3e-7 (F32), 4e-4 (F16), 3e-3 (BF16), 2e-4 (types
// the CPU dots with Q8_0/Q8_1 blocks of 32 like the GPU's) and 1.1e-2 (those it dots with Q8_K blocks of 256:
// K-quants, IQ4_XS; the largest for ffn_gated, whose product of two dot products adds their errors).
double cpu_rel_tolerance(TensorType t) {
    switch (t) {
    case TensorType::F32: return 1e-5;
    case TensorType::F16: return 2e-3;
    case TensorType::BF16: return 1e-2;
    default: return 3e-2;
    }
}

// Relative L2 error allowed against the reference: the f32 accumulation order for the float types; the Q8_1 rounding
// of the activations for the quantized ones (typically ~4e-3, as in the matmul test), more for Q4_1/Q5_1, whose
// one-signed weights cancel more in a dot product (up to 1.3e-2 there), and twice that for ffn_gated, whose product
// of two dot products adds their errors. Over at least kStatRows outputs, so that one dot product near zero cannot
// decide it; smaller outputs are held to their per-value bounds only.
constexpr int64_t kStatRows = 64;

double ref_rel_tolerance(TensorType t, bool gated) {
    if (is_float(t)) return 1e-5;
    const double one = t == TensorType::Q4_1 || t == TensorType::Q5_1 ? 2.5e-2 : 1e-2;
    return gated ? 2 * one : one;
}

// The RMS of the dequantized rows 0..n of t, to scale activations by.
double weight_rms(const HostTensor& t, int64_t n) {
    double s = 0;
    int64_t count = 0;
    for (int64_t o = 0; o < n; ++o)
        for (float v : dequantized_row(t, o)) {
            s += double(v) * v;
            ++count;
        }
    return std::sqrt(s / double(std::max<int64_t>(count, 1)));
}

// Activations uniform in [-a, a] with a chosen so that the dot products with t's rows have an RMS of about `target`:
// the activations' curved parts are then exercised, not only their linear tails.
std::vector<float> scaled_activations(const HostTensor& t, size_t n, double target) {
    const int64_t cols = t.info.ne[0];
    const double a = target * std::sqrt(3.0) / (std::sqrt(double(cols)) * weight_rms(t, 16));
    return random_floats(n, -float(a), float(a));
}

// ---------------------------------------------------------------- matmuls

// Weights of types `types` (one per output), all with `cols` columns and n_out[i] rows, against one activation row
// and against several rows; with `biased` (empty: no biases), weight i has a bias where biased[i] and a null one
// elsewhere.
void check_matmuls(Backends& be, const std::vector<TensorType>& types, int64_t cols, const std::vector<int64_t>& n_out,
                   const std::vector<bool>& biased = {}) {
    const size_t n = types.size();
    auto has_bias = [&](size_t i) { return !biased.empty() && biased[i]; };
    std::string what = "matmuls " + std::to_string(cols) + " ->";
    for (size_t i = 0; i < n; ++i) {
        what.append(" ").append(type_str(types[i])).append(":").append(std::to_string(n_out[i]));
        if (has_bias(i)) what.append("+b");
    }
    SCOPED_TRACE(what);
    std::vector<Both> w, b(n);
    for (size_t i = 0; i < n; ++i)
        w.push_back(make_weight(be, types[i], cols, n_out[i], "blk.0.w" + std::to_string(i) + ".weight"));
    for (size_t i = 0; i < n; ++i)
        if (has_bias(i)) b[i] = make_bias(be, n_out[i], "blk.0.w" + std::to_string(i) + ".bias");
    std::vector<const Weight*> wc, wg, bc, bg;  // bc, bg: empty without biases, as a caller without them passes
    for (size_t i = 0; i < n; ++i) {
        wc.push_back(&w[i].cpu);
        wg.push_back(&w[i].gpu);
        if (biased.empty()) continue;
        bc.push_back(has_bias(i) ? &b[i].cpu : nullptr);
        bg.push_back(has_bias(i) ? &b[i].gpu : nullptr);
    }
    for (int64_t rows : {1, 3}) {
        SCOPED_TRACE("rows " + std::to_string(rows));
        const auto x = random_floats(size_t(rows * cols));
        auto [xc, xg] = be.act(x, rows, cols);
        std::vector<Act> oc(n), og(n), seq(n);
        for (size_t i = 0; i < n; ++i) {
            std::tie(oc[i], og[i]) = be.out(rows, n_out[i]);
            seq[i] = be.out(rows, n_out[i]).second;
        }
        std::vector<Act*> pc, pg;
        for (size_t i = 0; i < n; ++i) {
            pc.push_back(&oc[i]);
            pg.push_back(&og[i]);
        }
        be.cpu->matmuls(wc, xc, pc, bc);
        be.gpu->matmuls(wg, xg, pg, bg);
        for (size_t i = 0; i < n; ++i) {
            be.gpu->matmul(w[i].gpu, xg, seq[i]);
            if (has_bias(i)) be.gpu->add_bias(seq[i], b[i].gpu);
        }
        for (size_t i = 0; i < n; ++i) {
            SCOPED_TRACE("weight " + std::to_string(i) + " (" + type_str(types[i]) + ")");
            const auto got = be.get(*be.gpu, og[i]);
            // Tolerance 0: the separate matmuls compute every row the same way, and add_bias adds the same bias.
            EXPECT_EQ(max_err(got, be.get(*be.gpu, seq[i])), 0.0)
                << (has_bias(i) ? "against the separate matmuls and add_bias" : "against the separate matmuls");
            const bool stat = n_out[i] >= kStatRows;
            const double cpu_diff = rel_l2(got, be.get(*be.cpu, oc[i]));
            if (stat) {
                EXPECT_LE(cpu_diff, cpu_rel_tolerance(types[i])) << "relative L2 difference from the CPU backend";
            }
            if (rows == 1) {
                Dots d = reference_dots(*w[i].host, x);
                if (has_bias(i)) add_bias_to_reference(d, bias_values(b[i]));
                const double rel = check_bounds(got, d.ref, d.bound);
                if (stat) {
                    EXPECT_LE(rel, ref_rel_tolerance(types[i], false)) << "relative L2 error against the reference";
                }
                std::printf("  %-40s %-6s rows 1: rel_l2 %.3g (cpu %.3g)\n", what.c_str(), type_str(types[i]).c_str(),
                            rel, cpu_diff);
            }
        }
    }
}

class CudaFused : public ::testing::TestWithParam<TensorType> {};

// Q, K and V of Qwen3-8B; with Q4_K or Q5_K, V is Q6_K as in Q4_K_M and Q5_K_M files (one launch of the pair's kernel).
TEST_P(CudaFused, MatmulsQkv) {
    ZINC_REQUIRE_GPU();
    Backends be;
    const TensorType t = GetParam();
    const TensorType v = t == TensorType::Q4_K || t == TensorType::Q5_K ? TensorType::Q6_K : t;
    check_matmuls(be, {t, t, v}, 4096, {4096, 1024, 1024});
}

// The same with a bias for each, as gpt-oss's Q/K/V projections: added in the matvecs' epilogue.
TEST_P(CudaFused, MatmulsQkvWithBiases) {
    ZINC_REQUIRE_GPU();
    Backends be;
    const TensorType t = GetParam();
    const TensorType v = t == TensorType::Q4_K || t == TensorType::Q5_K ? TensorType::Q6_K : t;
    check_matmuls(be, {t, t, v}, 4096, {4096, 1024, 1024}, {true, true, true});
}

// ---------------------------------------------------------------- ffn_gated

// out = act(gate x) * (up x): the reference takes the double dot products g, u and act in double; the bound adds
// what the dot products' bounds bg, bu can move the result (act's slope is at most 1.2 in magnitude: SiLU's 1.10,
// GELU_tanh's 1.13) and the rounding of the f32 evaluation of act.
void check_ffn_gated(Backends& be, TensorType type, int64_t cols, int64_t n_ff) {
    const std::string what = "ffn_gated " + type_str(type) + " " + std::to_string(cols) + " -> " + std::to_string(n_ff);
    SCOPED_TRACE(what);
    const Both gate = make_weight(be, type, cols, n_ff, "blk.0.ffn_gate.weight");
    const Both up = make_weight(be, type, cols, n_ff, "blk.0.ffn_up.weight");
    for (GatedActivation act : {GatedActivation::swiglu, GatedActivation::geglu}) {
        const bool silu = act == GatedActivation::swiglu;
        SCOPED_TRACE(silu ? "swiglu" : "geglu");
        for (int64_t rows : {1, 3}) {
            SCOPED_TRACE("rows " + std::to_string(rows));
            const auto x = scaled_activations(*gate.host, size_t(rows * cols), 2.5);
            auto [xc, xg] = be.act(x, rows, cols);
            auto [oc, og] = be.out(rows, n_ff);
            auto [tc, tg] = be.out(rows, n_ff);
            be.cpu->ffn_gated(gate.cpu, up.cpu, xc, act, tc, oc);
            be.gpu->ffn_gated(gate.gpu, up.gpu, xg, act, tg, og);
            auto [g_unused, sg] = be.out(rows, n_ff);
            auto [u_unused, su] = be.out(rows, n_ff);
            be.gpu->matmul(gate.gpu, xg, sg);
            be.gpu->matmul(up.gpu, xg, su);
            if (silu)
                be.gpu->swiglu(sg, su, sg);
            else
                be.gpu->geglu(sg, su, sg);
            const auto got = be.get(*be.gpu, og);
            // Tolerance 0: the same dot products and the same expression of the activation.
            EXPECT_EQ(max_err(got, be.get(*be.gpu, sg)), 0.0)
                << "against matmul, matmul, " << (silu ? "swiglu" : "geglu");
            const double cpu_diff = rel_l2(got, be.get(*be.cpu, oc));
            EXPECT_LE(cpu_diff, cpu_rel_tolerance(type)) << "relative L2 difference from the CPU backend";
            if (rows != 1) continue;
            const Dots g = reference_dots(*gate.host, x), u = reference_dots(*up.host, x);
            std::vector<double> ref(static_cast<size_t>(n_ff)), bound(static_cast<size_t>(n_ff));
            for (int64_t o = 0; o < n_ff; ++o) {
                const double gv = g.ref[o], uv = u.ref[o];
                const double a =
                    silu ? gv / (1.0 + std::exp(-gv))
                         : 0.5 * gv * (1.0 + std::tanh(0.7978845608028654 * (gv + 0.044715 * gv * gv * gv)));
                ref[o] = a * uv;
                // The f32 activation: a few ulps of the result, and for GELU_tanh's negative tail (1 + tanh near 0)
                // an ulp of 1 times 0.5 |g u|.
                bound[o] = 1.2 * g.bound[o] * (std::fabs(uv) + u.bound[o]) + std::fabs(a) * u.bound[o] +
                           1e-5 * std::fabs(a * uv) + 1e-6 * std::fabs(gv * uv) + 1e-6;
            }
            const double rel = check_bounds(got, ref, bound);
            EXPECT_LE(rel, ref_rel_tolerance(type, true)) << "relative L2 error against the reference";
            std::printf("  %-40s %s rows 1: rel_l2 %.3g (cpu %.3g)\n", what.c_str(), silu ? "swiglu" : "geglu", rel,
                        cpu_diff);
        }
    }
}

// Gate and up of Qwen3-8B.
TEST_P(CudaFused, FfnGated) {
    ZINC_REQUIRE_GPU();
    Backends be;
    check_ffn_gated(be, GetParam(), 4096, 12288);
}

// ---------------------------------------------------------------- matmul_add

// out += W x (+ bias) on a residual stream of values in [-2, 2): the reference adds the double dot product (and the
// bias); the bound adds half an ulp of the result (1e-6 relative) for each f32 add.
void check_matmul_add(Backends& be, TensorType type, int64_t cols, int64_t n_out, bool with_bias = false) {
    const std::string what = "matmul_add " + type_str(type) + " " + std::to_string(cols) + " -> " +
                             std::to_string(n_out) + (with_bias ? " +b" : "");
    SCOPED_TRACE(what);
    const Both w = make_weight(be, type, cols, n_out, "blk.0.attn_output.weight");
    Both bias;
    if (with_bias) bias = make_bias(be, n_out, "blk.0.attn_output.bias");
    for (int64_t rows : {1, 3}) {
        SCOPED_TRACE("rows " + std::to_string(rows));
        const auto x = random_floats(size_t(rows * cols));
        const auto resid = random_floats(size_t(rows * n_out), -2.0f, 2.0f);
        auto [xc, xg] = be.act(x, rows, cols);
        auto [rc, rg] = be.act(resid, rows, n_out);
        auto [sc_unused, sg] = be.act(resid, rows, n_out);
        auto [tc, tg] = be.out(rows, n_out);
        auto [t2_unused, t2] = be.out(rows, n_out);
        be.cpu->matmul_add(w.cpu, xc, tc, rc, with_bias ? &bias.cpu : nullptr);
        be.gpu->matmul_add(w.gpu, xg, tg, rg, with_bias ? &bias.gpu : nullptr);
        be.gpu->matmul(w.gpu, xg, t2);
        if (with_bias) be.gpu->add_bias(t2, bias.gpu);
        be.gpu->add(sg, t2, sg);
        const auto got = be.get(*be.gpu, rg);
        // Tolerance 0: the same dot product and the same f32 adds (bias, then residual) of the same values.
        EXPECT_EQ(max_err(got, be.get(*be.gpu, sg)), 0.0) << (with_bias ? "against matmul, add_bias, add"
                                                                         : "against matmul, add");
        // Against the CPU, the change only (the residual itself is the same on both).
        const auto cpu = be.get(*be.cpu, rc);
        std::vector<float> delta_gpu(got.size()), delta_cpu(got.size());
        for (size_t i = 0; i < got.size(); ++i) {
            delta_gpu[i] = got[i] - resid[i];
            delta_cpu[i] = cpu[i] - resid[i];
        }
        const double cpu_diff = rel_l2(delta_gpu, delta_cpu);
        // Differences of f32 sums carry one more rounding of the residual's size: 1e-5 extra for F32.
        EXPECT_LE(cpu_diff, cpu_rel_tolerance(type) + (type == TensorType::F32 ? 1e-5 : 0.0))
            << "relative L2 difference of the change from the CPU backend's";
        if (rows != 1) continue;
        Dots d = reference_dots(*w.host, x);
        if (with_bias) add_bias_to_reference(d, bias_values(bias));
        for (int64_t o = 0; o < n_out; ++o) {
            d.ref[o] += resid[o];
            d.bound[o] += 1e-6 * std::fabs(d.ref[o]);
        }
        check_bounds(got, d.ref, d.bound);
        std::printf("  %-40s rows 1: cpu %.3g\n", what.c_str(), cpu_diff);
    }
}

// attn_output and ffn_down of Qwen3-8B.
TEST_P(CudaFused, MatmulAdd) {
    ZINC_REQUIRE_GPU();
    Backends be;
    check_matmul_add(be, GetParam(), 4096, 4096);
    check_matmul_add(be, GetParam(), 12288, 4096);
}

// gpt-oss's attention output: the bias and the residual add in the epilogue.
TEST_P(CudaFused, MatmulAddWithBias) {
    ZINC_REQUIRE_GPU();
    Backends be;
    check_matmul_add(be, GetParam(), 4096, 4096, true);
}

INSTANTIATE_TEST_SUITE_P(Types, CudaFused,
                         ::testing::Values(TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::Q8_0,
                                           TensorType::MXFP4, TensorType::IQ4_XS, TensorType::F16, TensorType::BF16,
                                           TensorType::F32),
                         type_param_name);

// Every weight type the CUDA backend computes with, at small shapes: each of the fused kernels' instantiations.
class CudaFusedSmall : public ::testing::TestWithParam<TensorType> {};

TEST_P(CudaFusedSmall, EveryOp) {
    ZINC_REQUIRE_GPU();
    Backends be;
    check_matmuls(be, {GetParam(), GetParam()}, 512, {203, 64});
    check_matmuls(be, {GetParam(), GetParam()}, 512, {203, 64}, {true, false});  // a bias and a null one
    check_ffn_gated(be, GetParam(), 512, 203);
    check_matmul_add(be, GetParam(), 512, 256);
    check_matmul_add(be, GetParam(), 512, 256, true);
}

INSTANTIATE_TEST_SUITE_P(Types, CudaFusedSmall, ::testing::ValuesIn(kAllTypes), type_param_name);

// More weights than one launch takes (kMaxMatvecJobs = 8), of three types in no order (Q4_K and Q6_K, a pair that one
// launch takes, and F32, which takes a launch of its own), row counts that are no multiple of the four rows of a block:
// qwen35's recurrent input projections are four weights of widths 1-8192, and an F32 router beside quantized weights
// reads the f32 row while they read the Q8_1 blocks; then with biases on some; then the other pair beside two more
// types.
TEST(CudaFusedJobs, ManyWeightsOfMixedTypes) {
    ZINC_REQUIRE_GPU();
    Backends be;
    const TensorType a = TensorType::Q4_K, b = TensorType::Q6_K, f = TensorType::F32;
    check_matmuls(be, {a, b, a, a, f, b, a, a, a, a, a, a, b, a}, 2048,
                  {8192, 4096, 1, 32, 256, 5, 203, 7, 64, 1, 2, 3, 9, 17});
    check_matmuls(be, {f, f}, 2048, {256, 1});  // the router and the shared expert's gate of qwen35moe
    const TensorType c = TensorType::Q5_K, q = TensorType::Q8_0;
    check_matmuls(be, {b, c, q, c, a, b}, 2048, {64, 203, 32, 8192, 5, 1024});
    // Biases on some weights of each launch, null on the others.
    check_matmuls(be, {a, b, a, a, f, b, a, a, a, a, a, a, b, a}, 2048,
                  {8192, 4096, 1, 32, 256, 5, 203, 7, 64, 1, 2, 3, 9, 17},
                  {true, false, true, true, true, false, false, true, true, false, true, true, true, false});
    check_matmuls(be, {f}, 2048, {32}, {true});  // a biased router of one weight, as gpt-oss's
}

// The rms_norm of one row writes the row's Q8_1 blocks along with it, and a matvec right after reads those instead of
// quantizing the row itself: its output equals, bit for bit, the same matvec after the row was put back by an upload
// (which makes it quantize the row), for the widths of the real models and of the fixtures, with a weight and without;
// each fused op and the plain matmul read them. A wider row with a norm's leftover blocks of a narrower one, and a
// matvec that is not the op right after the norm, quantize as before.
TEST(CudaNormQuantized, MatvecAfterNormEqualsMatvecAfterUpload) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (const int64_t n : {int64_t(64), int64_t(256), int64_t(2048), int64_t(2880), int64_t(4096), int64_t(5120)}) {
        for (const bool with_weight : {true, false}) {
            SCOPED_TRACE("n=" + std::to_string(n) + (with_weight ? " with a weight" : " without a weight"));
            const Both nw = make_weight(be, TensorType::F32, n, 1, "norm");
            const TensorType t = n % 256 == 0 ? TensorType::Q4_K : TensorType::Q8_0;
            const Both w = make_weight(be, t, n, 96, "w");
            const Both up = make_weight(be, t, n, 96, "up");
            auto x = random_floats(size_t(n), -3.0f, 3.0f);
            auto [xc, xg] = be.act(x, 1, n);
            auto [hc, hg] = be.out(1, n);
            auto [oc, og] = be.out(1, 96);
            auto [tc, tg] = be.out(1, 96);
            const Weight* nwg = with_weight ? &nw.gpu : nullptr;
            // After the norm, as decode runs it; then the same with the normed row uploaded again in between.
            std::vector<std::vector<float>> fused, plain;
            for (auto* outs : {&fused, &plain}) {
                auto run = [&](auto&& op) {
                    be.gpu->rms_norm(xg, nwg, 1e-6f, n, hg);
                    if (outs == &plain) be.gpu->upload(hg, be.get(*be.gpu, hg));
                    op();
                    outs->push_back(be.get(*be.gpu, og));
                };
                run([&] { be.gpu->matmul(w.gpu, hg, og); });
                run([&] {
                    const Weight* ws[] = {&w.gpu};
                    Act* os[] = {&og};
                    be.gpu->matmuls(ws, hg, os);
                });
                run([&] { be.gpu->ffn_gated(w.gpu, up.gpu, hg, GatedActivation::swiglu, tg, og); });
                run([&] { be.gpu->matmul_add(w.gpu, hg, tg, og); });
            }
            ASSERT_EQ(fused.size(), plain.size());
            for (size_t i = 0; i < fused.size(); ++i) {
                size_t differ = 0;
                for (size_t j = 0; j < fused[i].size(); ++j) differ += !(fused[i][j] == plain[i][j]);
                EXPECT_EQ(differ, 0u) << "op " << i;
            }
        }
    }
    // The norm's blocks are of a 256-value row; the matvec after it reads a 512-value one, and one after an add.
    const Both nw = make_weight(be, TensorType::F32, 256, 1, "norm");
    const Both w = make_weight(be, TensorType::Q8_0, 512, 64, "w");
    auto [xc, xg] = be.act(random_floats(256), 1, 256);
    auto [hc, hg] = be.out(1, 256);
    auto [zc, zg] = be.act(random_floats(512), 1, 512);
    auto [oc, og] = be.out(1, 64);
    be.gpu->rms_norm(xg, &nw.gpu, 1e-6f, 256, hg);
    be.gpu->matmul(w.gpu, zg, og);
    const auto after_norm = be.get(*be.gpu, og);
    be.gpu->matmul(w.gpu, zg, og);
    EXPECT_EQ(after_norm, be.get(*be.gpu, og));
    be.gpu->rms_norm(xg, &nw.gpu, 1e-6f, 256, hg);
    be.gpu->add(hg, hg, hg);
    const Both w256 = make_weight(be, TensorType::Q8_0, 256, 64, "w256");
    be.gpu->matmul(w256.gpu, hg, og);
    const auto after_add = be.get(*be.gpu, og);
    be.gpu->upload(hg, be.get(*be.gpu, hg));
    be.gpu->matmul(w256.gpu, hg, og);
    EXPECT_EQ(after_add, be.get(*be.gpu, og));
}

// norm_add's one launch equals rms_norm in place, add and scale on the GPU bit for bit, for Gemma 4's widths (2816),
// Qwen3-8B's and others, one row and several, with a weight and without, with an output scale and without; and the
// CPU backend's within the rounding of the norm's scale. Widths that are no whole number of float4s (203) run the
// separate ops.
TEST(CudaNormAdd, EqualsNormAddScale) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (const int64_t n : {int64_t(64), int64_t(203), int64_t(2816), int64_t(2880), int64_t(4096), int64_t(5120)})
        for (const int64_t rows : {int64_t(1), int64_t(3)})
            for (const bool with_weight : {true, false})
                for (const float sc : {1.0f, 0.71875f}) {
                    SCOPED_TRACE("n=" + std::to_string(n) + " rows=" + std::to_string(rows) +
                                 (with_weight ? " with a weight" : "") + " scale " + std::to_string(sc));
                    const Both nw = make_weight(be, TensorType::F32, n, 1, "blk.0.post_ffw_norm.weight");
                    const auto x = random_floats(size_t(rows * n), -3.0f, 3.0f);
                    const auto r = random_floats(size_t(rows * n), -2.0f, 2.0f);
                    auto [xc, xg] = be.act(x, rows, n);
                    auto [rc, rg] = be.act(r, rows, n);
                    auto [x2c, x2g] = be.act(x, rows, n);
                    auto [r2c, r2g] = be.act(r, rows, n);
                    const Weight* wg = with_weight ? &nw.gpu : nullptr;
                    be.gpu->norm_add(xg, wg, 1e-6f, rg, sc);
                    be.gpu->rms_norm(x2g, wg, 1e-6f, n, x2g);
                    be.gpu->add(r2g, x2g, r2g);
                    if (sc != 1.0f) be.gpu->scale(r2g, sc, r2g);
                    const auto got = be.get(*be.gpu, rg);
                    EXPECT_EQ(got, be.get(*be.gpu, r2g)) << "against rms_norm, add, scale";
                    be.cpu->norm_add(xc, with_weight ? &nw.cpu : nullptr, 1e-6f, rc, sc);
                    EXPECT_LE(max_err(got, be.get(*be.cpu, rc)), 2e-6) << "against the CPU backend";
                }
}

// rms_norms' one launch equals rms_norm and scale for each output on the GPU bit for bit, for Gemma 4's width (2816)
// and others, one row and several, one to three outputs (the norm kernel's most), with weights and without, with
// scales and without; and the CPU backend's within the rounding of the norm's scale. A width that is no whole number
// of float4s (203), and four outputs, run the separate ops. For one row, a matvec right after reads output 0's Q8_1
// blocks, which equal those of quantizing it anew.
TEST(CudaRmsNorms, EqualsRmsNormAndScaleForEachOutput) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (const int64_t n : {int64_t(64), int64_t(203), int64_t(2816), int64_t(4096)})
        for (const int64_t rows : {int64_t(1), int64_t(3)})
            for (const size_t n_out : {size_t(1), size_t(2), size_t(3), size_t(4)}) {
                SCOPED_TRACE("n=" + std::to_string(n) + " rows=" + std::to_string(rows) + " outputs " +
                             std::to_string(n_out));
                std::vector<Both> nw;
                for (size_t i = 0; i < n_out; ++i)
                    nw.push_back(make_weight(be, TensorType::F32, n, 1, "blk.0.norm" + std::to_string(i) + ".weight"));
                const float scales[] = {1.0f, 0.0625f, 1.0f, 3.5f};
                const auto x = random_floats(size_t(rows * n), -3.0f, 3.0f);
                auto [xc, xg] = be.act(x, rows, n);
                std::vector<Act> og, oc, sep;
                std::vector<const Weight*> wg, wc;
                for (size_t i = 0; i < n_out; ++i) {
                    auto [c, g] = be.out(rows, n);
                    oc.push_back(c);
                    og.push_back(g);
                    sep.push_back(be.out(rows, n).second);
                    // Output 1 without a weight: the router's input of a file without ffn_gate_inp.scale.
                    wg.push_back(i == 1 ? nullptr : &nw[i].gpu);
                    wc.push_back(i == 1 ? nullptr : &nw[i].cpu);
                }
                std::vector<Act*> pg, pc;
                for (size_t i = 0; i < n_out; ++i) {
                    pg.push_back(&og[i]);
                    pc.push_back(&oc[i]);
                }
                const std::span<const float> s(scales, n_out);
                be.gpu->rms_norms(xg, wg, 1e-6f, pg, s);
                for (size_t i = 0; i < n_out; ++i) {
                    be.gpu->rms_norm(xg, wg[i], 1e-6f, n, sep[i]);
                    if (s[i] != 1.0f) be.gpu->scale(sep[i], s[i], sep[i]);
                }
                be.cpu->rms_norms(xc, wc, 1e-6f, pc, s);
                for (size_t i = 0; i < n_out; ++i) {
                    const auto got = be.get(*be.gpu, og[i]);
                    EXPECT_EQ(got, be.get(*be.gpu, sep[i])) << "output " << i << " against rms_norm and scale";
                    EXPECT_LE(max_err(got, be.get(*be.cpu, oc[i])), 2e-6 * std::max(1.0f, s[i]))
                        << "output " << i << " against the CPU backend";
                }
                if (rows == 1 && n % 32 == 0) {
                    const Both w = make_weight(be, TensorType::Q8_0, n, 96, "w");
                    auto [mc, mg] = be.out(1, 96);
                    be.gpu->rms_norms(xg, wg, 1e-6f, pg, s);
                    be.gpu->matmul(w.gpu, og[0], mg);
                    const auto after_norms = be.get(*be.gpu, mg);
                    be.gpu->upload(og[0], be.get(*be.gpu, og[0]));
                    be.gpu->matmul(w.gpu, og[0], mg);
                    EXPECT_EQ(after_norms, be.get(*be.gpu, mg)) << "the matvec after the norms";
                }
            }
}

// shared_expert_add's operands on both backends (CPU, GPU), and on the GPU a second copy of a, b and out for the
// sequence of ops the fused op is compared with (both write them).
struct AddOperands {
    std::vector<float> x;  // x's values
    std::pair<Act, Act> a, b, gate, out;
    Act a2, b2, out2;
};

AddOperands add_operands(Backends& be, int64_t rows, int64_t n, bool per_row) {
    const int64_t gate_cols = per_row ? 1 : n;
    const auto a = random_floats(size_t(rows * n), -2.0f, 2.0f);
    const auto b = random_floats(size_t(rows * n), -2.0f, 2.0f);
    const auto g = random_floats(size_t(rows * gate_cols), -6.0f, 6.0f);
    AddOperands o;
    o.x = random_floats(size_t(rows * n), -3.0f, 3.0f);
    o.a = be.act(a, rows, n);
    o.b = be.act(b, rows, n);
    o.gate = be.act(g, rows, gate_cols);
    o.out = be.act(o.x, rows, n);
    o.a2 = be.act(a, rows, n).second;
    o.b2 = be.act(b, rows, n).second;
    o.out2 = be.act(o.x, rows, n).second;
    return o;
}

// shared_expert_add's one launch equals sigmoid_mul, add and add on the GPU bit for bit, with one gate per row (the
// models' shared-expert gate: Qwen3.6-35B-A3B's 2048 values a row) and one gate per value; and the CPU backend's
// within the rounding of sigmoid's exp.
TEST(CudaSharedExpertAdd, EqualsSigmoidMulAddAdd) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (const int64_t n : {int64_t(1), int64_t(203), int64_t(2048)})
        for (const int64_t rows : {int64_t(1), int64_t(3)})
            for (const bool per_row : {true, false}) {
                SCOPED_TRACE("n=" + std::to_string(n) + " rows=" + std::to_string(rows) +
                             (per_row ? " one gate a row" : " one gate a value"));
                AddOperands o = add_operands(be, rows, n, per_row);
                be.gpu->shared_expert_add(o.a.second, o.b.second, o.gate.second, o.out.second);
                be.gpu->sigmoid_mul(o.b2, o.gate.second, o.b2);
                be.gpu->add(o.a2, o.b2, o.a2);
                be.gpu->add(o.out2, o.a2, o.out2);
                const auto got = be.get(*be.gpu, o.out.second);
                EXPECT_EQ(got, be.get(*be.gpu, o.out2)) << "against sigmoid_mul, add, add";
                be.cpu->shared_expert_add(o.a.first, o.b.first, o.gate.first, o.out.first);
                EXPECT_LE(max_err(got, be.get(*be.cpu, o.out.first)), 2e-6) << "against the CPU backend";
            }
}

// shared_expert_add_norm's one launch (one gate per row) equals shared_expert_add and rms_norm on the GPU bit for bit,
// with and without a norm weight, at Qwen3.6-35B-A3B's 2048 values a row, other widths and several rows, one gate a
// value (the sequence of ops then), and leaves its one row's Q8_1 blocks for the matvec after it.
TEST(CudaSharedExpertAdd, NormEqualsAddThenRmsNorm) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (const int64_t n : {int64_t(2048), int64_t(4096), int64_t(200), int64_t(203)})
        for (const int64_t rows : {int64_t(1), int64_t(3)})
            for (const bool per_row : {true, false})
                for (const bool weighted : {true, false}) {
                    SCOPED_TRACE("n=" + std::to_string(n) + " rows=" + std::to_string(rows) +
                                 (per_row ? " one gate a row" : " one gate a value") + (weighted ? "" : " no weight"));
                    AddOperands o = add_operands(be, rows, n, per_row);
                    auto [ag, bg, gg, xg] = std::tie(o.a.second, o.b.second, o.gate.second, o.out.second);
                    const Both nw = make_weight(be, TensorType::F32, n, 1, "blk.1.attn_norm.weight");
                    const Weight* wg = weighted ? &nw.gpu : nullptr;
                    auto [hc, hg] = be.out(rows, n);
                    Act h2g = be.out(rows, n).second;
                    be.gpu->shared_expert_add_norm(ag, bg, gg, xg, wg, 1e-6f, hg);
                    be.gpu->shared_expert_add(o.a2, o.b2, gg, o.out2);
                    be.gpu->rms_norm(o.out2, wg, 1e-6f, n, h2g);
                    EXPECT_EQ(be.get(*be.gpu, xg), be.get(*be.gpu, o.out2)) << "the residual";
                    const auto got = be.get(*be.gpu, hg);
                    EXPECT_EQ(got, be.get(*be.gpu, h2g)) << "the norm";
                    be.cpu->shared_expert_add_norm(o.a.first, o.b.first, o.gate.first, o.out.first,
                                                   weighted ? &nw.cpu : nullptr, 1e-6f, hc);
                    EXPECT_LE(max_err(got, be.get(*be.cpu, hc)), 4e-6) << "against the CPU backend";
                    if (rows == 1 && n % 32 == 0) {
                        const Both w = make_weight(be, TensorType::Q8_0, n, 96, "w");
                        Act mg = be.out(1, 96).second;
                        be.gpu->upload(xg, o.x);
                        be.gpu->shared_expert_add_norm(ag, bg, gg, xg, wg, 1e-6f, hg);
                        be.gpu->matmul(w.gpu, hg, mg);
                        const auto after = be.get(*be.gpu, mg);
                        be.gpu->upload(hg, be.get(*be.gpu, hg));  // an upload between: the matvec quantizes itself
                        be.gpu->matmul(w.gpu, hg, mg);
                        EXPECT_EQ(after, be.get(*be.gpu, mg)) << "the matvec after the op";
                    }
                }
}

}  // namespace
