// The CPU backend's products with weights it repacked at load (backend/cpu/repack.h, backend/cpu/gemm.h): against the same bytes
// used in place through vec_dot (a Weight the backend did not load) they give the dot products up to float rounding;
// a batch gives each row what that row alone gives, bit for bit; get_rows decodes the file's rows exactly; the file's
// bytes are left as they were; the fused ops and the MoE FFN with packed experts agree with the plain weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "backend/cpu/cpu_features.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"

namespace {

using zinc::backend::Act;
using zinc::backend::Backend;
using zinc::backend::IdAct;
using zinc::backend::MoeActivation;
using zinc::backend::MoeWeights;
using zinc::backend::Weight;
using zinc::gguf::TensorType;
namespace cpu = zinc::backend::cpu;

std::vector<float> randn(size_t n, std::mt19937& rng, float sd = 1.0f) {
    std::normal_distribution<float> d(0.0f, sd);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

std::vector<float> get(Backend& be, const Act& a) {
    std::vector<float> v(static_cast<size_t>(a.size()));
    be.download(a, v);
    return v;
}

// A tensor {cols, rows, n_exp} of random values quantized to `type`, in a GGUF file held in memory.
struct FileTensor {
    std::vector<uint8_t> bytes, file;
    std::unique_ptr<zinc::gguf::File> gguf;
    const zinc::gguf::TensorInfo* info = nullptr;
    int64_t cols = 0, rows = 0, n_exp = 1;

    FileTensor(TensorType type, int64_t cols_, int64_t rows_, int64_t n_exp_, std::mt19937& rng)
        : cols(cols_), rows(rows_), n_exp(n_exp_) {
        const size_t rb = zinc::gguf::row_bytes(type, cols);
        bytes.resize(rb * static_cast<size_t>(rows * n_exp));
        for (int64_t r = 0; r < rows * n_exp; ++r)
            zinc::quant::quantize_row(type, randn(static_cast<size_t>(cols), rng, 0.05f).data(),
                                      bytes.data() + r * rb, static_cast<size_t>(cols));
        zinc::gguf::Writer writer;
        writer.set("general.architecture", "test");
        std::vector<int64_t> shape{cols, rows};
        if (n_exp > 1) shape.push_back(n_exp);
        writer.add_tensor("w", type, shape, bytes);
        file = writer.to_bytes();
        gguf = std::make_unique<zinc::gguf::File>(zinc::gguf::File::from_memory(file));
        info = &gguf->tensor("w");
    }

    // The same bytes as a Weight the backend did not load: used in place, through vec_dot.
    Weight plain() const {
        Weight w;
        w.type = info->type;
        w.cols = cols;
        w.rows = rows * n_exp;
        w.data = info->data;
        w.name = "plain";
        w.ne[0] = cols;
        w.ne[1] = rows;
        w.ne[2] = n_exp;
        return w;
    }
};

const TensorType kTypes[] = {TensorType::Q4_0, TensorType::IQ4_NL, TensorType::MXFP4, TensorType::Q8_0,
                             TensorType::Q2_K, TensorType::Q3_K,   TensorType::Q4_K,  TensorType::Q5_K,
                             TensorType::Q6_K, TensorType::IQ4_XS};

std::string name(TensorType t) { return std::string(zinc::gguf::type_name(t)); }

TEST(CpuPackedWeights, MatmulGetRowsAndBatches) {
    if (cpu::cpu_isa() < cpu::Isa::avx2) GTEST_SKIP() << "weights are repacked only with AVX2";
    auto cpu = zinc::backend::make_cpu_backend(2);
    std::mt19937 rng(21);
    for (TensorType type : kTypes) {
        SCOPED_TRACE(name(type));
        const FileTensor ft(type, 1024, 40, 1, rng);
        const std::vector<uint8_t> before(ft.file);
        const Weight packed = cpu->load_weight(*ft.info);
        const Weight plain = ft.plain();
        EXPECT_EQ(ft.file, before) << "the file's bytes are left as they were";
        EXPECT_NE(packed.data, ft.info->data) << "a packed copy";

        const int64_t n = 9;
        const std::vector<float> xv = randn(static_cast<size_t>(n * ft.cols), rng, 2.0f);
        Act x = cpu->alloc(n, ft.cols), a = cpu->alloc(n, ft.rows), b = cpu->alloc(n, ft.rows);
        cpu->upload(x, xv);
        cpu->matmul(packed, x, a);
        cpu->matmul(plain, x, b);
        const auto got = get(*cpu, a), want = get(*cpu, b);
        // Within float rounding of the terms' magnitudes, bounded through the dequantized weights.
        std::vector<float> wd(static_cast<size_t>(ft.cols));
        for (int64_t o = 0; o < ft.rows; ++o) {
            zinc::quant::dequantize_row(type, ft.bytes.data() + o * zinc::gguf::row_bytes(type, ft.cols), wd.data(),
                                        static_cast<size_t>(ft.cols));
            for (int64_t t = 0; t < n; ++t) {
                double mag = 0;
                for (int64_t i = 0; i < ft.cols; ++i) mag += std::fabs(double(wd[i]) * xv[t * ft.cols + i]);
                EXPECT_NEAR(got[t * ft.rows + o], want[t * ft.rows + o], 2e-5 * mag) << "row " << o << ", " << t;
            }
        }
        // A batch gives each row what the row alone gives.
        for (int64_t t = 0; t < n; ++t) {
            Act x1 = cpu->alloc(1, ft.cols), o1 = cpu->alloc(1, ft.rows);
            cpu->upload(x1, std::vector<float>(xv.begin() + t * ft.cols, xv.begin() + (t + 1) * ft.cols));
            cpu->matmul(packed, x1, o1);
            const auto one = get(*cpu, o1);
            for (int64_t o = 0; o < ft.rows; ++o) ASSERT_EQ(one[o], got[t * ft.rows + o]) << "row " << t;
        }
        // Rows decode as the file's rows.
        const std::vector<int32_t> ids{0, 7, 8, 39, 7};
        Act ra = cpu->alloc(5, ft.cols), rb = cpu->alloc(5, ft.cols);
        cpu->get_rows(packed, ids, ra);
        cpu->get_rows(plain, ids, rb);
        EXPECT_EQ(get(*cpu, ra), get(*cpu, rb));
    }
}

// Fused products over packed weights of two types (Q4_K_M's Q4_K beside Q6_K, and Q8_0) equal the ops one by one:
// the projections of one input with and without biases, gate and up with each activation, the residual add.
TEST(CpuPackedWeights, FusedOpsEqualTheirSequence) {
    if (cpu::cpu_isa() < cpu::Isa::avx2) GTEST_SKIP() << "weights are repacked only with AVX2";
    auto cpu = zinc::backend::make_cpu_backend(2);
    std::mt19937 rng(22);
    const FileTensor fq(TensorType::Q4_K, 512, 64, 1, rng), fv(TensorType::Q6_K, 512, 32, 1, rng),
        fk(TensorType::Q8_0, 512, 24, 1, rng);
    const Weight wq = cpu->load_weight(*fq.info), wv = cpu->load_weight(*fv.info), wk = cpu->load_weight(*fk.info);
    for (int64_t rows : {1, 6}) {
        Act x = cpu->alloc(rows, 512);
        cpu->upload(x, randn(static_cast<size_t>(rows * 512), rng));
        Act q = cpu->alloc(rows, 64), k = cpu->alloc(rows, 24), v = cpu->alloc(rows, 32);
        Act q1 = cpu->alloc(rows, 64), k1 = cpu->alloc(rows, 24), v1 = cpu->alloc(rows, 32);
        const Weight* w[] = {&wq, &wk, &wv};
        Act* out[] = {&q, &k, &v};
        cpu->matmuls(w, x, out);
        cpu->matmul(wq, x, q1);
        cpu->matmul(wk, x, k1);
        cpu->matmul(wv, x, v1);
        EXPECT_EQ(get(*cpu, q), get(*cpu, q1));
        EXPECT_EQ(get(*cpu, k), get(*cpu, k1));
        EXPECT_EQ(get(*cpu, v), get(*cpu, v1));
        // With biases (K's null).
        const std::vector<float> bq = randn(64, rng), bv = randn(32, rng);
        Weight wbq, wbv;
        wbq.type = wbv.type = TensorType::F32, wbq.cols = 64, wbv.cols = 32, wbq.rows = wbv.rows = 1;
        wbq.data = bq.data(), wbv.data = bv.data(), wbq.ne[0] = 64, wbv.ne[0] = 32;
        const Weight* b[] = {&wbq, nullptr, &wbv};
        cpu->matmuls(w, x, out, b);
        cpu->add_bias(q1, wbq);
        cpu->add_bias(v1, wbv);
        EXPECT_EQ(get(*cpu, q), get(*cpu, q1));
        EXPECT_EQ(get(*cpu, k), get(*cpu, k1));
        EXPECT_EQ(get(*cpu, v), get(*cpu, v1));

        // Gate and up (Q4_K, 64 rows each from fq and a second tensor), then the activation.
        const FileTensor fu(TensorType::Q4_K, 512, 64, 1, rng);
        const Weight wu = cpu->load_weight(*fu.info);
        for (auto act : {zinc::backend::GatedActivation::swiglu, zinc::backend::GatedActivation::geglu}) {
            Act g = cpu->alloc(rows, 64), u = cpu->alloc(rows, 64);
            Act g1 = cpu->alloc(rows, 64), u1 = cpu->alloc(rows, 64);
            cpu->ffn_gated(wq, wu, x, act, u, g);
            cpu->matmul(wq, x, g1);
            cpu->matmul(wu, x, u1);
            if (act == zinc::backend::GatedActivation::swiglu)
                cpu->swiglu(g1, u1, g1);
            else
                cpu->geglu(g1, u1, g1);
            EXPECT_EQ(get(*cpu, g), get(*cpu, g1));
        }

        // The residual add of a projection, with and without a bias (a Q6_K weight 512 -> 32).
        Act h = cpu->alloc(rows, 512), res = cpu->alloc(rows, 32), res1 = cpu->alloc(rows, 32);
        Act tmp = cpu->alloc(rows, 32), tmp1 = cpu->alloc(rows, 32);
        cpu->upload(h, randn(static_cast<size_t>(rows * 512), rng));
        const std::vector<float> start = randn(static_cast<size_t>(rows * 32), rng);
        for (const Weight* bias : {static_cast<const Weight*>(nullptr), static_cast<const Weight*>(&wbv)}) {
            cpu->upload(res, start);
            cpu->upload(res1, start);
            cpu->matmul_add(wv, h, tmp, res, bias);
            cpu->matmul(wv, h, tmp1);
            if (bias) cpu->add_bias(tmp1, *bias);
            cpu->add(res1, tmp1, res1);
            EXPECT_EQ(get(*cpu, res), get(*cpu, res1));
        }
    }
}

// The expert FFN with packed experts (split gate/up, Q4_K and Q6_K down) against the same bytes in place.
TEST(CpuPackedWeights, MoeExpertsAgreeWithPlainWeights) {
    if (cpu::cpu_isa() < cpu::Isa::avx2) GTEST_SKIP() << "weights are repacked only with AVX2";
    auto cpu = zinc::backend::make_cpu_backend(2);
    std::mt19937 rng(23);
    const int64_t n_embd = 512, n_ff = 256, n_exp = 6, k = 2, T = 5;
    const FileTensor fg(TensorType::Q4_K, n_embd, n_ff, n_exp, rng), fu(TensorType::Q4_K, n_embd, n_ff, n_exp, rng),
        fd(TensorType::Q6_K, n_ff, n_embd, n_exp, rng);
    const Weight pg = cpu->load_weight(*fg.info), pu = cpu->load_weight(*fu.info), pd = cpu->load_weight(*fd.info);
    const Weight qg = fg.plain(), qu = fu.plain(), qd = fd.plain();
    Act x = cpu->alloc(T, n_embd), w = cpu->alloc(T, k), a = cpu->alloc(T, n_embd), b = cpu->alloc(T, n_embd);
    cpu->upload(x, randn(static_cast<size_t>(T * n_embd), rng));
    cpu->upload(w, std::vector<float>{0.7f, 0.3f, 0.5f, 0.5f, 0.9f, 0.1f, 0.6f, 0.4f, 0.2f, 0.8f});
    IdAct ids = cpu->alloc_ids(T, k);
    const std::vector<int32_t> id{0, 3, 3, 5, 1, 0, 3, 2, 4, 3};  // expert 3 serves four slots
    std::copy(id.begin(), id.end(), ids.data);
    MoeWeights mp, mq;
    mp.gate = &pg, mp.up = &pu, mp.down = &pd, mp.act = MoeActivation::swiglu;
    mq.gate = &qg, mq.up = &qu, mq.down = &qd, mq.act = MoeActivation::swiglu;
    cpu->moe_ffn(x, ids, w, mp, a);
    cpu->moe_ffn(x, ids, w, mq, b);
    const auto got = get(*cpu, a), want = get(*cpu, b);
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        num = std::max(num, std::fabs(double(got[i]) - want[i]));
        den = std::max(den, std::fabs(double(want[i])));
    }
    EXPECT_LE(num / den, 1e-4) << "relative to the largest output";
}

}  // namespace
