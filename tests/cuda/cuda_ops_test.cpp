// The CUDA backend's ops against the CPU backend (or, for matmul, against the f32 dot product of the
// dequantized weights) on fresh random inputs, at small shapes and at Qwen3-8B shapes (n_embd 4096, n_ff 12288,
// 32 query heads / 8 KV heads of 128, vocab 151936). GPU outputs are filled with NaN before each op runs, so an
// op that leaves a value unwritten fails. Tolerances are stated at each check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
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

// Embedding tables of the MoE models: Qwen3.6-35B-A3B (n_embd 2048, the whole vocab of 248320 rows), Gemma 4
// 26B-A4B (2816) and gpt-oss-20b (2880), for the types whose block divides the row.
TEST_P(CudaGetRows, ModelShapes) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (auto [cols, rows] : {std::pair<int64_t, int64_t>{2048, 248320}, {2816, 3000}, {2880, 3000}}) {
        if (cols % zinc::gguf::traits(GetParam()).block_elems != 0) continue;
        const auto t = random_tensor(GetParam(), cols, rows, "token_embd.weight");
        const Weight wc = be.cpu->load_weight(t->info), wg = be.gpu->load_weight(t->info);
        std::vector<int32_t> ids = {int32_t(rows - 1), 0, int32_t(rows / 2), int32_t(rows - 2)};
        std::uniform_int_distribution<int32_t> id(0, int32_t(rows - 1));
        for (int i = 0; i < 20; ++i) ids.push_back(id(rng_engine()));
        auto [oc, og] = be.out(int64_t(ids.size()), cols);
        be.cpu->get_rows(wc, ids, oc);
        be.gpu->get_rows(wg, ids, og);
        EXPECT_EQ(max_err(be.get(*be.gpu, og), be.get(*be.cpu, oc)), 0.0) << cols << " x " << rows;
    }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaGetRows, ::testing::ValuesIn(kAllTypes), type_param_name);

// ---------------------------------------------------------------- matmul

// Reference: the f32 weights (dequantized on the CPU) dotted with the f32 activations in double.
// Tolerances:
//  - float paths (F32/F16/BF16 weights): |gpu - ref| <= 2e-5 * sum_i |w_i x_i| + 1e-6 (f32 accumulation of up to
//    12288 products in another order);
//  - quantized weights for several rows (tensor cores): weights and activations rounded to f16 (each at most 2^-11
//    relative, the activations scaled per row so none leaves f16's range), so |gpu - ref| <= 1.1e-3 sum_i |w_i x_i|
//    + 1e-6, and the relative L2 error below 1e-3 (3e-3 for the one-signed Q4_1/Q5_1);
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

    const bool float_weights = type == TensorType::F32 || type == TensorType::F16 || type == TensorType::BF16;
    // Up to kStepMaxRows rows, Q8_1 activations (the matvecs, the step's tensor cores); beyond, f16 products.
    const bool quantized_act = c.rows <= zinc::backend::cuda::kStepMaxRows && !float_weights;
    const bool half_products = !quantized_act && !float_weights;
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
            const double tol =
                (half_products ? 1.1e-3 : 2e-5) * abs_sum + 1e-6 + (quantized_act ? 1.001 * qbound : 0.0);
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
    // Q4_1/Q5_1 weights with a positive min are all of one sign, so their dot products with activations of both
    // signs cancel more and the relative error is larger (measured up to 1.3e-2, the per-element bound holding).
    const bool one_signed = type == TensorType::Q4_1 || type == TensorType::Q5_1;
    EXPECT_LE(rel_l2, quantized_act ? (one_signed ? 2.5e-2 : 1e-2) : half_products ? (one_signed ? 3e-3 : 1e-3) : 1e-5);
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

// Prefill batches both ways: zinc's tensor-core kernel, and the weights dequantized to f16 for cuBLAS in steps of
// kGemmChunkBytes: here 2048 rows of 4096 values, so two steps, the second a partial one.
// The same bound for each.
TEST_P(CudaMatmul, PrefillKernelAndCublas) {
    ZINC_REQUIRE_GPU();
    Backends be;
    auto& cuda = dynamic_cast<zinc::backend::CudaBackend&>(*be.gpu);
    for (bool blas : {false, true}) {
        SCOPED_TRACE(blas ? "cuBLAS" : "zinc's kernel");
        cuda.set_matmul_ways(1, blas);
        if (blas) {
            ASSERT_TRUE(cuda.cublas_available()) << "the CUDA tests need the toolkit's libcublas";
        }
        check_matmul(be, GetParam(), {4096, 2560, 67});
        check_matmul(be, GetParam(), {512, 203, 300});
    }
}

// w times `rows` random activation rows of `cols` values, all together and each row alone: together holds rows x
// n_out values, alone[r] row r's n_out.
struct TogetherAndAlone {
    std::vector<float> together;
    std::vector<std::vector<float>> alone;
};
TogetherAndAlone rows_together_and_alone(Backends& be, const Weight& w, int64_t cols, int64_t n_out, int64_t rows) {
    const auto x = random_floats(size_t(rows * cols));
    Act xs = be.gpu->alloc(rows, cols), all = be.gpu->alloc(rows, n_out);
    be.gpu->upload(xs, x);
    be.gpu->matmul(w, xs, all);
    TogetherAndAlone r{be.get(*be.gpu, all), {}};
    for (int64_t t = 0; t < rows; ++t) {
        Act one = be.gpu->alloc(1, n_out);
        be.gpu->matmul(w, Backend::rows_of(xs, t, 1), one);
        r.alone.push_back(be.get(*be.gpu, one));
        be.gpu->free(one);
    }
    be.gpu->free(xs);
    be.gpu->free(all);
    return r;
}

// The matvec of several rows (here up to kStepMaxRows) reads each weight row once for all its rows: every row's
// values are those of that row alone, bit for bit, in every order the one-row matvec reads rows in (groups in place,
// Q6_K's staged groups, chunks where the width rules groups out: 512 values, gpt-oss's 2880), with a warp over one
// weight row or, where there are rows enough, over two (8195: the last warp has one).
TEST_P(CudaMatmul, SeveralRowsEqualEachRowAlone) {
    ZINC_REQUIRE_GPU();
    const TensorType type = GetParam();
    if (type == TensorType::F32 || type == TensorType::F16 || type == TensorType::BF16) GTEST_SKIP() << "float weights";
    Backends be;
    dynamic_cast<zinc::backend::CudaBackend&>(*be.gpu).set_matmul_ways(zinc::backend::cuda::kStepMaxRows);
    for (auto [cols, n_out] : {std::pair<int64_t, int64_t>{512, 203}, {4096, 1024}, {2880, 517}, {2048, 8195}}) {
        if (cols % zinc::gguf::traits(type).block_elems != 0) continue;
        const auto t = random_tensor(type, cols, n_out, "blk.0.ffn_up.weight");
        const Weight w = be.gpu->load_weight(t->info);
        for (int64_t rows : {2, 3, 5, 8, 13, int(zinc::backend::cuda::kStepMaxRows)}) {
            SCOPED_TRACE(std::to_string(n_out) + "x" + std::to_string(cols) + " rows " + std::to_string(rows));
            const TogetherAndAlone v = rows_together_and_alone(be, w, cols, n_out, rows);
            for (int64_t r = 0; r < rows; ++r) {
                const std::vector<float>& alone = v.alone[size_t(r)];
                ASSERT_TRUE(std::equal(alone.begin(), alone.end(), v.together.begin() + r * n_out)) << "row " << r;
            }
        }
    }
}

// The rows of a step on int8 tensor cores (from two rows here): each row's values within a few f32 roundings of that
// row alone (the matvec), whose integer products and scales they share and whose order of adding blocks they do not.
// That order costs a few 2^-24 of the partial sums, far inside 1e-5 of the row's root mean square, while any wrong
// byte, scale or token costs the whole value. Every shape also against the CPU's product (check_matmul).
TEST_P(CudaMatmul, StepRowsOnTensorCores) {
    ZINC_REQUIRE_GPU();
    const TensorType type = GetParam();
    if (type != TensorType::Q4_K && type != TensorType::Q6_K && type != TensorType::Q8_0 && type != TensorType::MXFP4)
        GTEST_SKIP() << "no tensor-core step for this type";
    Backends be;
    auto& cuda = dynamic_cast<zinc::backend::CudaBackend&>(*be.gpu);
    cuda.set_matmul_ways(1);
    // 2816: Gemma 4's width, whose Q6_K rows (2310 bytes) each start at their own offset from a 16-byte boundary;
    // 2880 (gpt-oss) and 704 (Gemma 4's experts): rows of 32-value blocks that end in a short step.
    for (auto [cols, n_out] : {std::pair<int64_t, int64_t>{512, 203}, {4096, 1024}, {1024, 4160}, {2816, 1000},
                               {2880, 517}, {704, 300}}) {
        if (cols % zinc::gguf::traits(type).block_elems != 0) continue;
        const auto t = random_tensor(type, cols, n_out, "blk.0.ffn_up.weight");
        const Weight w = be.gpu->load_weight(t->info);
        for (int64_t rows : {2, 9, 16, 17, 33, int(zinc::backend::cuda::kStepMaxRows)}) {
            SCOPED_TRACE(std::to_string(n_out) + "x" + std::to_string(cols) + " rows " + std::to_string(rows));
            const TogetherAndAlone v = rows_together_and_alone(be, w, cols, n_out, rows);
            for (int64_t r = 0; r < rows; ++r) {
                const std::vector<float>& alone = v.alone[size_t(r)];
                double sq = 0;
                for (float a : alone) sq += double(a) * a;
                const double tol = 1e-5 * std::sqrt(sq / double(n_out));
                for (int64_t o = 0; o < n_out; ++o)
                    ASSERT_NEAR(v.together[size_t(r * n_out + o)], alone[size_t(o)], tol)
                        << "row " << r << " out " << o;
            }
        }
        if (cols <= 1024)
            for (int64_t rows : {9, 64}) check_matmul(be, type, {cols, n_out, rows});
    }
}

TEST_P(CudaMatmul, VocabMatvec) {
    ZINC_REQUIRE_GPU();
    Backends be;
    check_matmul(be, GetParam(), {4096, 151936, 1});  // output.weight, one decode row
}

// A row's value in a one-row matvec must not depend on the rows its warp takes beside it (two Q4_K or Q6_K rows per
// warp where paired_rows allows; a last odd row alone, or for Q6_K beside a copy of itself): here Qwen3.6's LM head
// shape computed whole and in slices of 999 rows, each a matrix of its own, so that every row has another partner or
// none. The other types, whose warps take one row each, are held to the same.
TEST_P(CudaMatmul, RowValuesDoNotDependOnPairing) {
    ZINC_REQUIRE_GPU();
    Backends be;
    const int64_t cols = 2048, n_out = 40000, slice = 999;
    const auto t = random_tensor(GetParam(), cols, n_out, "output.weight");
    const Weight w = be.gpu->load_weight(t->info);
    auto [xc, x] = be.act(random_floats(size_t(cols)), 1, cols);
    auto [oc, whole] = be.out(1, n_out);
    be.gpu->matmul(w, x, whole);
    const auto got = be.get(*be.gpu, whole);
    const size_t rb = zinc::gguf::row_bytes(GetParam(), size_t(cols));
    for (int64_t r0 = 0; r0 < n_out; r0 += slice) {
        const int64_t n = std::min(slice, n_out - r0);
        Weight part = w;
        part.rows = part.ne[1] = n;
        part.data = static_cast<const uint8_t*>(w.data) + size_t(r0) * rb;
        auto [pc, po] = be.out(1, n);
        be.gpu->matmul(part, x, po);
        const auto want = be.get(*be.gpu, po);
        for (int64_t o = 0; o < n; ++o)
            ASSERT_EQ(got[size_t(r0 + o)], want[size_t(o)]) << "row " << r0 + o;
    }
}

// Expert, shared-expert and dense FFN matrices and the output matrix of the MoE models, one decode row (the dp4a
// matvec) and a few prefill rows (the tiled kernel); shapes whose rows the type's block does not divide are skipped.
TEST_P(CudaMatmul, ModelShapes) {
    ZINC_REQUIRE_GPU();
    Backends be;
    const int64_t block = zinc::gguf::traits(GetParam()).block_elems;
    const MatmulCase cases[] = {
        {2048, 512, 1},    {2048, 512, 5},    {512, 2048, 1},  {512, 2048, 5},  // Qwen3.6-35B-A3B experts
        {2048, 248320, 1},                                                     // Qwen3.6 output.weight
        {2816, 1408, 1},   {2816, 1408, 5},   {704, 2816, 1},  {704, 2816, 5},  // Gemma 4 26B-A4B gate_up / down
        {2816, 2112, 1},   {2112, 2816, 3},                                     // Gemma 4 26B-A4B dense FFN
        {2880, 2880, 1},   {2880, 2880, 4},                                     // gpt-oss-20b experts
    };
    for (const MatmulCase& c : cases)
        if (c.cols % block == 0) check_matmul(be, GetParam(), c);
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

// Every launch shape of rms_norm (norm.cu): one warp per group of up to 512 values (1, 2 or 4 float4s per lane), one
// block per group of up to 32768 (1-8 float4s per thread, 256 threads up to 8192 values, more beyond), and the loop
// for groups of no whole float4s, data not 16-byte aligned, or longer groups. Decode shapes first: one row of n_embd
// (Qwen3.6 2048, Gemma 4 2816, gpt-oss 2880, Qwen3-8B 4096, 5120, 8192) and the per-head norms of one token (32 or 8
// heads of 64-512).
TEST(CudaOps, RmsNormLaunchShapes) {
    ZINC_REQUIRE_GPU();
    Backends be;
    struct Case {
        int64_t rows, cols, group;
    };
    const Case cases[] = {
        {1, 2048, 2048},  {1, 2816, 2816},   {1, 2880, 2880},  {1, 4096, 4096},  {1, 5120, 5120},
        {1, 8192, 8192},  {1, 4096, 128},    {1, 1024, 128},   {1, 2048, 64},    {1, 8192, 256},
        {1, 16384, 512},  {2, 16384, 16384}, {1, 32768, 32768}, {1, 40000, 40000}, {3, 700, 700},
        {5, 400, 100},    {4, 392, 98},      {2, 36, 36},      {9, 1024, 1024},   {13, 640, 640},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(std::to_string(c.rows) + " x " + std::to_string(c.cols) + " / " + std::to_string(c.group));
        const auto w = random_tensor(TensorType::F32, c.group, 1, "norm.weight");
        const Weight wc = be.cpu->load_weight(w->info), wg = be.gpu->load_weight(w->info);
        for (bool weighted : {true, false}) {
            auto [xc, xg] = be.act(random_floats(size_t(c.rows * c.cols), -3, 3), c.rows, c.cols);
            auto [oc, og] = be.out(c.rows, c.cols);
            be.cpu->rms_norm(xc, weighted ? &wc : nullptr, 1e-6f, c.group, oc);
            be.gpu->rms_norm(xg, weighted ? &wg : nullptr, 1e-6f, c.group, og);
            // 1e-6 of the largest output: the same double sum of float squares, added in another order.
            EXPECT_LE(max_err(be.get(*be.gpu, og), be.get(*be.cpu, oc)), 1e-6) << (weighted ? "weighted" : "no weight");
            be.gpu->rms_norm(xg, weighted ? &wg : nullptr, 1e-6f, c.group, xg);
            EXPECT_LE(max_err(be.get(*be.gpu, xg), be.get(*be.cpu, oc)), 1e-6) << "in place";
        }
    }
    // Rows that start 8 bytes past a 16-byte boundary take the loop (a view one row into rows of 4098 values).
    auto [xc, xg] = be.act(random_floats(3 * 4098, -3, 3), 3, 4098);
    const Act vc = Backend::rows_of(xc, 1, 2), vg = Backend::rows_of(xg, 1, 2);
    auto [oc, og] = be.out(2, 4098);
    be.cpu->rms_norm(vc, nullptr, 1e-6f, 4098, oc);
    be.gpu->rms_norm(vg, nullptr, 1e-6f, 4098, og);
    EXPECT_LE(max_err(be.get(*be.gpu, og), be.get(*be.cpu, oc)), 1e-6) << "misaligned view";
    // Groups of no whole float4s on the same view.
    be.gpu->rms_norm(vg, nullptr, 1e-6f, 2049, og);
    be.cpu->rms_norm(vc, nullptr, 1e-6f, 2049, oc);
    EXPECT_LE(max_err(be.get(*be.gpu, og), be.get(*be.cpu, oc)), 1e-6) << "groups of 2049";
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

// ---------------------------------------------------------------- side work

// Side work in decode steps (a second stream; a branch of the recorded graph) gives what the same ops give in order on
// one stream, bit for bit, in the eager, recorded and replayed steps. The side's matvec and the main stream's quantize
// different rows to Q8_1 buffers of the same name, which a side op sharing the main stream's buffer would overwrite.
// A step that leaves its side work unjoined is refused, and the next one runs.
TEST(CudaSideWork, DecodeStepsMatchTheOpsInOrder) {
    ZINC_REQUIRE_GPU();
    auto gpu = zinc::backend::make_cuda_backend(0);
    auto& cuda = dynamic_cast<zinc::backend::CudaBackend&>(*gpu);
    const int64_t n = 2048, m = 4096;
    const auto t1 = random_tensor(TensorType::Q4_K, n, m, "blk.0.ffn_gate.weight");
    const auto t2 = random_tensor(TensorType::Q8_0, n, m, "blk.0.ffn_up.weight");
    const Weight w1 = gpu->load_weight(t1->info), w2 = gpu->load_weight(t2->info);
    Act x1 = gpu->alloc(1, n), x2 = gpu->alloc(1, n), y1 = gpu->alloc(1, m), y2 = gpu->alloc(1, m);
    Act out = gpu->alloc(1, m);
    auto ops = [&] {
        gpu->begin_side();
        gpu->matmul(w1, x1, y1);
        gpu->end_side();
        gpu->matmul(w2, x2, y2);
        gpu->join_side();
        gpu->add(y1, y2, out);
        return out;
    };
    std::vector<float> in_order(static_cast<size_t>(m)), stepped(static_cast<size_t>(m));
    const int32_t id = 0;
    for (int32_t pos = 0; pos < 6; ++pos) {
        gpu->upload(x1, random_floats(size_t(n)));
        gpu->upload(x2, random_floats(size_t(n)));
        ops();  // outside a step: in order
        gpu->download(out, in_order);
        gpu->run_step(nullptr, 1, {&id, 1}, {&pos, 1}, ops);
        gpu->download(out, stepped);
        EXPECT_EQ(stepped, in_order) << "step " << pos;
    }
    EXPECT_GE(cuda.graphs_recorded(), 1u);
    EXPECT_GE(cuda.graphs_replayed(), 3u);

    const int32_t pos = 7;
    EXPECT_THROW(gpu->run_step(nullptr, 2, {&id, 1}, {&pos, 1},
                               [&] {
                                   gpu->begin_side();
                                   gpu->matmul(w1, x1, y1);
                                   gpu->end_side();
                                   return y1;
                               }),
                 std::logic_error);
    gpu->run_step(nullptr, 1, {&id, 1}, {&pos, 1}, ops);
    gpu->download(out, stepped);
    ops();
    gpu->download(out, in_order);
    EXPECT_EQ(stepped, in_order);
}

// ---------------------------------------------------------------- free

// free() gives device memory back once the work queued on the buffer is done (one wait for the stream), resets the
// handle, and refuses memory that alloc did not return (a weight, a view).
TEST(CudaMemory, FreeReleasesDeviceMemory) {
    ZINC_REQUIRE_GPU();
    auto gpu = zinc::backend::make_cuda_backend(0);
    const uint64_t before = gpu->free_memory();
    Act big = gpu->alloc(1024, 256 * 1024);  // 1 GiB
    gpu->fill(big, 1.0f);                    // queued work that writes the buffer
    EXPECT_LT(gpu->free_memory(), before - (900ull << 20));
    const uint64_t waits = gpu->host_waits();
    gpu->free(big);
    EXPECT_EQ(big.data, nullptr);
    EXPECT_EQ(gpu->host_waits(), waits + 1);
    // compute-sanitizer's memcheck holds freed device memory back to catch a later use of it, so the driver reports
    // it free only outside memcheck (tools/gpu/cuda_checks.sh --sanitize says when it runs one).
    if (!std::getenv("ZINC_UNDER_MEMCHECK")) {
        EXPECT_GT(gpu->free_memory(), before - (100ull << 20));
    }
    EXPECT_NO_THROW(gpu->free(big));  // empty

    const auto t = random_tensor(TensorType::F32, 64, 4, "blk.0.ffn_up.weight");
    const Weight w = gpu->load_weight(t->info);
    Act not_alloc{const_cast<float*>(static_cast<const float*>(w.data)), 4, 64};
    EXPECT_THROW(gpu->free(not_alloc), std::invalid_argument);
    Act a = gpu->alloc(4, 64);
    Act view = Backend::rows_of(a, 1, 3);
    EXPECT_THROW(gpu->free(view), std::invalid_argument);
    auto kv = gpu->alloc_kv(128, 64);
    auto ids = gpu->alloc_ids(4, 8);
    gpu->free(kv);
    gpu->free(ids);
    gpu->free(a);
    EXPECT_EQ(kv.k, nullptr);
    EXPECT_EQ(ids.data, nullptr);
    EXPECT_EQ(a.data, nullptr);
}

}  // namespace
