// The CUDA backend's ops against the CPU backend (or, for matmul, against the f32 dot product of the
// dequantized weights) on fresh random inputs, at small shapes and at Qwen3-8B shapes (n_embd 4096, n_ff 12288,
// 32 query heads / 8 KV heads of 128, vocab 151936). GPU outputs are filled with NaN before each op runs, so an
// op that leaves a value unwritten fails. Tolerances are stated at each check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "gguf/tensor_type.h"
#include "cuda_test_util.h"
#include "gpu_required.h"
#include "quant/dequantize.h"
#include "quant/float_convert.h"

namespace {

using namespace zinc::cuda_test;
using zinc::backend::Act;
using zinc::backend::Backend;
using zinc::backend::Weight;
using zinc::gguf::TensorType;

// ---------------------------------------------------------------- get_rows

class CudaGetRows : public ::testing::TestWithParam<TensorType> {};

TEST_P(CudaGetRows, MatchesCpuExactly) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (auto [cols, rows] : {std::pair<int64_t, int64_t>{512, 64}, {4096, 2048}}) {
        const auto t = random_tensor(GetParam(), cols, rows, "token_embd.weight");
        const Weight wc = be.cpu->load_weight(t->info), wg = be.gpu->load_weight(t->info);
        std::vector<int32_t> ids;
        std::uniform_int_distribution<int32_t> id(0, int32_t(rows - 1));
        for (int i = 0; i < 37; ++i) ids.push_back(id(rng_engine()));
        ids.push_back(0);
        ids.push_back(int32_t(rows - 1));
        auto [oc, og] = be.out(int64_t(ids.size()), cols);
        be.cpu->get_rows(wc, ids, oc);
        be.gpu->get_rows(wg, ids, og);
        // Tolerance 0: the GPU rounds every product as the CPU's dequantize_row does.
        EXPECT_EQ(max_err(be.get(*be.gpu, og), be.get(*be.cpu, oc)), 0.0) << cols << " x " << rows;
    }
}

TEST_P(CudaGetRows, OutOfRangeIdIsAnError) {
    ZINC_REQUIRE_GPU();
    Backends be;
    const auto t = random_tensor(GetParam(), 256, 8, "token_embd.weight");
    const Weight w = be.gpu->load_weight(t->info);
    Act o = be.gpu->alloc(1, 256);
    const int32_t bad[1] = {8};
    EXPECT_THROW(be.gpu->get_rows(w, bad, o), std::out_of_range);
}

INSTANTIATE_TEST_SUITE_P(Types, CudaGetRows, ::testing::ValuesIn(kAllTypes), type_param_name);

// ---------------------------------------------------------------- matmul

// Reference: the f32 weights (dequantized on the CPU) dotted with the f32 activations in double.
// Tolerances:
//  - float paths (F32/F16/BF16 weights, and every type on the tiled prefill kernel, which dequantizes to f32):
//    |gpu - ref| <= 2e-5 * sum_i |w_i x_i| + 1e-6 (f32 accumulation of up to 12288 products in another order);
//  - the dp4a matvec (quantized weights, one activation row) quantizes x to Q8_1: each x_i moves by at most d_b/2
//    with d_b = amax_b/127 of its 32-block, so |gpu - ref| <= sum_b (d_b/2) sum_{i in b} |w_i| (times 1.001) plus
//    the float bound above; over all outputs the relative L2 error must also stay below 1e-2 (the typical value
//    for uniform activations is ~4e-3).
struct MatmulCase {
    int64_t cols, n_out, rows;
};

void check_matmul(Backends& be, TensorType type, MatmulCase c) {
    SCOPED_TRACE(std::string(zinc::gguf::type_name(type)) + " " + std::to_string(c.n_out) + "x" +
                 std::to_string(c.cols) + " rows " + std::to_string(c.rows));
    const auto t = random_tensor(type, c.cols, c.n_out, "blk.0.ffn_up.weight");
    const Weight wg = be.gpu->load_weight(t->info);
    const auto x = random_floats(size_t(c.rows * c.cols));
    Act xg = be.gpu->alloc(c.rows, c.cols);
    be.gpu->upload(xg, x);
    Act og = be.gpu->alloc(c.rows, c.n_out);
    be.gpu->upload(og, std::vector<float>(size_t(c.rows * c.n_out), NAN));
    be.gpu->matmul(wg, xg, og);
    const auto got = be.get(*be.gpu, og);

    const bool quantized_act =
        c.rows == 1 && type != TensorType::F32 && type != TensorType::F16 && type != TensorType::BF16;
    // Per-32-block activation step d_b/2.
    std::vector<double> half_step(size_t(c.rows * (c.cols / 32 + 1)), 0.0);
    const int64_t nb = (c.cols + 31) / 32;
    for (int64_t r = 0; r < c.rows; ++r)
        for (int64_t b = 0; b < nb; ++b) {
            double amax = 0;
            for (int64_t i = b * 32; i < std::min(c.cols, b * 32 + 32); ++i)
                amax = std::max(amax, double(std::fabs(x[r * c.cols + i])));
            half_step[r * nb + b] = amax / 127.0 / 2.0;
        }
    double worst = 0, err2 = 0, ref2 = 0;
    int64_t bad = 0;
    for (int64_t o = 0; o < c.n_out; ++o) {
        const auto w = dequantized_row(*t, o);
        for (int64_t r = 0; r < c.rows; ++r) {
            const float* xr = x.data() + r * c.cols;
            double ref = 0, abs_sum = 0, qbound = 0;
            for (int64_t b = 0; b < nb; ++b) {
                double wabs = 0;
                for (int64_t i = b * 32; i < std::min(c.cols, b * 32 + 32); ++i) {
                    ref += double(w[i]) * xr[i];
                    abs_sum += std::fabs(double(w[i]) * xr[i]);
                    wabs += std::fabs(w[i]);
                }
                qbound += half_step[r * nb + b] * wabs;
            }
            const double tol = 2e-5 * abs_sum + 1e-6 + (quantized_act ? 1.001 * qbound : 0.0);
            const double g = got[size_t(r * c.n_out + o)];
            const double e = std::isfinite(g) ? std::fabs(g - ref) : INFINITY;
            worst = std::max(worst, e / tol);
            err2 += (g - ref) * (g - ref);
            ref2 += ref * ref;
            if (!(e <= tol) && bad++ < 5)
                ADD_FAILURE() << "out[" << r << "][" << o << "] = " << g << ", reference " << ref << ", tolerance "
                              << tol;
        }
    }
    const double rel_l2 = std::sqrt(err2 / ref2);
    EXPECT_EQ(bad, 0);
    EXPECT_LE(rel_l2, quantized_act ? 1e-2 : 1e-5);
    std::printf("  %-5s %6lld x %5lld rows %2lld: rel_l2 %.3g, worst err/tol %.3g\n",
                std::string(zinc::gguf::type_name(type)).c_str(), (long long)c.n_out, (long long)c.cols,
                (long long)c.rows, rel_l2, worst);
}

class CudaMatmul : public ::testing::TestWithParam<TensorType> {};

TEST_P(CudaMatmul, SmallShapes) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (int64_t rows : {1, 2, 19, 70}) check_matmul(be, GetParam(), {512, 203, rows});
}

TEST_P(CudaMatmul, Qwen3_8BShapes) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (int64_t rows : {1, 3}) {
        check_matmul(be, GetParam(), {4096, 1024, rows});   // attn_k / attn_v
        check_matmul(be, GetParam(), {4096, 12288, rows});  // ffn_gate / ffn_up
        check_matmul(be, GetParam(), {12288, 4096, rows});  // ffn_down
    }
}

TEST_P(CudaMatmul, VocabMatvec) {
    ZINC_REQUIRE_GPU();
    Backends be;
    check_matmul(be, GetParam(), {4096, 151936, 1});  // output.weight, one decode row
}

INSTANTIATE_TEST_SUITE_P(Types, CudaMatmul, ::testing::ValuesIn(kAllTypes), type_param_name);

// ---------------------------------------------------------------- norms, rope, element-wise

TEST(CudaOps, RmsNorm) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (auto [rows, cols, group, weighted] :
         {std::tuple<int64_t, int64_t, int64_t, bool>{7, 4096, 4096, true}, {7, 4096, 128, true},
          {3, 1024, 128, false}, {5, 96, 96, true}}) {
        const auto w = random_tensor(TensorType::F32, group, 1, "norm.weight");
        const Weight wc = be.cpu->load_weight(w->info), wg = be.gpu->load_weight(w->info);
        auto [xc, xg] = be.act(random_floats(size_t(rows * cols), -3, 3), rows, cols);
        auto [oc, og] = be.out(rows, cols);
        be.cpu->rms_norm(xc, weighted ? &wc : nullptr, 1e-6f, group, oc);
        be.gpu->rms_norm(xg, weighted ? &wg : nullptr, 1e-6f, group, og);
        // 1e-6 of the largest output: the same double sum of squares, added in another order.
        EXPECT_LE(max_err(be.get(*be.gpu, og), be.get(*be.cpu, oc)), 1e-6) << cols << "/" << group;
        // In place, as the engine calls it for q/k norms.
        be.gpu->rms_norm(xg, weighted ? &wg : nullptr, 1e-6f, group, xg);
        EXPECT_LE(max_err(be.get(*be.gpu, xg), be.get(*be.cpu, oc)), 1e-6) << "in place";
    }
}

TEST(CudaOps, Rope) {
    ZINC_REQUIRE_GPU();
    Backends be;
    struct Case {
        int64_t rows;
        int heads, head_dim, n_rot;
        bool neox;
        int32_t pos0;
    };
    for (const Case& c : {Case{9, 32, 128, 128, true, 0}, Case{1, 8, 128, 128, true, 3000},
                          Case{5, 4, 128, 64, true, 17}, Case{6, 4, 64, 64, false, 100},
                          Case{4, 2, 96, 32, false, 7}}) {
        const int64_t cols = int64_t(c.heads) * c.head_dim;
        auto [xc, xg] = be.act(random_floats(size_t(c.rows * cols)), c.rows, cols);
        std::vector<int32_t> pos(size_t(c.rows));
        for (int64_t t = 0; t < c.rows; ++t) pos[t] = c.pos0 + int32_t(t);
        zinc::backend::RopeParams p{c.n_rot, c.neox, 1000000.0f, 1.0f};
        be.cpu->rope(xc, c.head_dim, pos, p);
        be.gpu->rope(xg, c.head_dim, pos, p);
        // 2e-6 absolute on values in [-1, 1]: the same f32 angle, sin/cos from CUDA's and glibc's libm (1-2 ulp).
        EXPECT_LE(max_err(be.get(*be.gpu, xg), be.get(*be.cpu, xc)), 2e-6) << c.head_dim << " " << c.n_rot;
    }
    Act x = be.gpu->alloc(1, 128);
    const int32_t pos[1] = {0};
    zinc::backend::RopeParams yarn{128, true, 10000.0f, 0.25f};
    yarn.ext_factor = 1.0f;
    EXPECT_THROW(be.gpu->rope(x, 128, pos, yarn), std::runtime_error);
}

TEST(CudaOps, AddAndSwiglu) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 100}, {17, 12288}}) {
        auto [ac, ag] = be.act(random_floats(size_t(rows * cols), -8, 8), rows, cols);
        auto [bc, bg] = be.act(random_floats(size_t(rows * cols), -8, 8), rows, cols);
        auto [oc, og] = be.out(rows, cols);
        be.cpu->add(ac, bc, oc);
        be.gpu->add(ag, bg, og);
        EXPECT_EQ(max_err(be.get(*be.gpu, og), be.get(*be.cpu, oc)), 0.0);  // one rounding, the same on both
        auto [sc, sg] = be.out(rows, cols);
        be.cpu->swiglu(ac, bc, sc);
        be.gpu->swiglu(ag, bg, sg);
        // 1e-6 of the largest output: expf differs from glibc's exp by an ulp or two.
        EXPECT_LE(max_err(be.get(*be.gpu, sg), be.get(*be.cpu, sc)), 1e-6);
    }
}

// ---------------------------------------------------------------- KV cache and attention

TEST(CudaOps, KvWriteAndAttention) {
    ZINC_REQUIRE_GPU();
    Backends be;
    struct Shape {
        int n_head, n_head_kv, head_dim;
    };
    for (const Shape& s : {Shape{32, 8, 128}, Shape{4, 2, 64}, Shape{6, 6, 32}, Shape{16, 2, 256}}) {
        SCOPED_TRACE(std::to_string(s.n_head) + "/" + std::to_string(s.n_head_kv) + "x" + std::to_string(s.head_dim));
        const int64_t width = int64_t(s.n_head_kv) * s.head_dim, q_cols = int64_t(s.n_head) * s.head_dim;
        const int64_t cap = 400;
        auto kc = be.cpu->alloc_kv(width, cap);
        auto kg = be.gpu->alloc_kv(width, cap);
        const zinc::backend::AttentionParams p{s.n_head, s.n_head_kv, s.head_dim, 1.0f / std::sqrt(float(s.head_dim))};
        // Prefill 37 rows at 0, then 5 rows at 37, then single-row decode steps up to position ~300.
        int64_t pos0 = 0;
        for (int64_t T : {37, 5, 1, 1, 258, 1}) {
            auto [k_c, k_g] = be.act(random_floats(size_t(T * width), -2, 2), T, width);
            auto [v_c, v_g] = be.act(random_floats(size_t(T * width)), T, width);
            auto [q_c, q_g] = be.act(random_floats(size_t(T * q_cols), -2, 2), T, q_cols);
            be.cpu->kv_write(kc, k_c, v_c, pos0);
            be.gpu->kv_write(kg, k_g, v_g, pos0);
            auto [oc, og] = be.out(T, q_cols);
            be.cpu->attention(q_c, kc, pos0, p, oc);
            be.gpu->attention(q_g, kg, pos0, p, og);
            // 2e-6 of the largest |v| (outputs are convex combinations of v rows; f32 online softmax in
            // another order than the CPU's two-pass softmax with a double denominator).
            EXPECT_LE(max_err(be.get(*be.gpu, og), be.get(*be.cpu, oc)), 2e-6) << "T " << T << " at " << pos0;
            pos0 += T;
        }
    }
    auto kv = be.gpu->alloc_kv(128, 4);
    Act q = be.gpu->alloc(1, 128), o = be.gpu->alloc(1, 128);
    zinc::backend::AttentionParams win{1, 1, 128, 1.0f};
    win.window = 2;
    EXPECT_THROW(be.gpu->attention(q, kv, 0, win, o), std::runtime_error);
    zinc::backend::AttentionParams cap{1, 1, 128, 1.0f};
    cap.softcap = 30.0f;
    EXPECT_THROW(be.gpu->attention(q, kv, 0, cap, o), std::runtime_error);
}

TEST(CudaOps, UncomputableWeightTypeSaysSo) {
    ZINC_REQUIRE_GPU();
    auto be = zinc::backend::make_cuda_backend(0);
    const auto t = random_tensor(TensorType::F32, 256, 4, "blk.0.ffn_up.weight");
    zinc::gguf::TensorInfo info = t->info;
    info.type = TensorType::IQ2_XXS;  // readable, but no backend computes with it
    info.nbytes = zinc::gguf::row_bytes(info.type, 256) * 4;
    try {
        be->load_weight(info);
        FAIL() << "load_weight accepted IQ2_XXS";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("blk.0.ffn_up.weight"), std::string::npos) << e.what();
    }
}

}  // namespace
