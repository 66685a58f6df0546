// TensorLoader::bind_parts: a fused tensor (phi3's attn_qkv, its ffn_up of gate and up rows) bound as the separate
// projections it stacks. Each part must be exactly its rows of the file's tensor, whatever the backend does with a
// weight (the CPU repacks Q8_0 matrices of whole 8-row tiles into its own layout, views F32 ones in place).
#include <gtest/gtest.h>

#include <random>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/tensor_loader.h"
#include "gguf/error.h"
#include "gguf/split.h"
#include "gguf/writer.h"
#include "gguf_test_util.h"
#include "quant/quantize.h"

namespace {

using zinc::backend::Act;
using zinc::backend::Weight;
using zinc::gguf::TensorType;

constexpr int64_t kCols = 64;

// A file with one tensor `name` of `rows` rows of kCols random values, stored as `type`.
std::string write_file(const zinc::test::TempDir& dir, const std::string& name, TensorType type, int64_t rows) {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> values(size_t(rows * kCols));
    for (float& v : values) v = nd(rng);
    std::vector<uint8_t> bytes;
    if (type == TensorType::F32) {
        const auto* b = reinterpret_cast<const uint8_t*>(values.data());
        bytes.assign(b, b + values.size() * sizeof(float));
    } else {
        const size_t row_bytes = size_t(kCols) / 32 * 34;  // Q8_0: blocks of 32 values in 34 bytes
        bytes.resize(size_t(rows) * row_bytes);
        for (int64_t r = 0; r < rows; ++r)
            zinc::quant::quantize_row(type, values.data() + r * kCols, bytes.data() + size_t(r) * row_bytes,
                                      size_t(kCols));
    }
    zinc::gguf::Writer w;
    w.set("general.architecture", "phi3");
    w.add_tensor(name, type, {kCols, rows}, bytes);
    const std::string path = dir.file("fused.gguf");
    w.write(path);
    return path;
}

// out = w · x for a few random rows x.
std::vector<float> product(zinc::backend::Backend& be, const Weight& w, const Act& x) {
    Act out = be.alloc(x.rows, w.rows);
    be.matmul(w, x, out);
    std::vector<float> r(size_t(out.size()));
    be.download(out, r);
    return r;
}

void check_parts(TensorType type, std::vector<int64_t> rows) {
    const zinc::test::TempDir dir;
    int64_t total = 0;
    for (int64_t r : rows) total += r;
    const std::string name = "blk.0.attn_qkv.weight";
    const zinc::gguf::Model model(write_file(dir, name, type, total));
    const auto be = zinc::backend::make_cpu_backend(2);
    zinc::engine::TensorLoader loader(model, *be);
    const zinc::model::TensorSpec spec{name, {kCols, total}, zinc::model::TensorRole::Matrix, 0};
    Weight whole;
    loader.bind(whole, spec);
    std::vector<Weight> parts(rows.size());
    std::vector<Weight*> slots;
    for (Weight& p : parts) slots.push_back(&p);
    loader.bind_parts(slots, spec, rows);

    const int64_t n_x = 3;
    Act x = be->alloc(n_x, kCols);
    std::vector<float> xv(size_t(n_x * kCols));
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (float& v : xv) v = nd(rng);
    be->upload(x, xv);
    const std::vector<float> all = product(*be, whole, x);
    int64_t first = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
        const Weight& p = parts[i];
        EXPECT_EQ(p.rows, rows[i]);
        EXPECT_EQ(p.cols, kCols);
        EXPECT_EQ(p.type, type);
        EXPECT_EQ(p.name, name + "[" + std::to_string(first) + ":" + std::to_string(first + rows[i]) + "]");
        const std::vector<float> got = product(*be, p, x);
        for (int64_t t = 0; t < n_x; ++t)
            for (int64_t r = 0; r < rows[i]; ++r) {
                const float want = all[size_t(t * total + first + r)];
                ASSERT_NEAR(got[size_t(t * rows[i] + r)], want, 1e-5f * (1.0f + std::abs(want)))
                    << "part " << i << " row " << r << " of activation " << t;
            }
        first += rows[i];
    }
}

// Q rows then fewer K and V rows (GQA), as attn_qkv stacks them; Q8_0 parts of whole tiles are repacked.
TEST(TensorLoaderParts, FusedQkvQ8_0) { check_parts(TensorType::Q8_0, {32, 16, 16}); }
TEST(TensorLoaderParts, FusedQkvF32) { check_parts(TensorType::F32, {24, 8, 8}); }
// Gate rows then up rows, as phi3's ffn_up holds them.
TEST(TensorLoaderParts, GateUpQ8_0) { check_parts(TensorType::Q8_0, {40, 40}); }

TEST(TensorLoaderParts, RefusesAShapeOtherThanDeclared) {
    const zinc::test::TempDir dir;
    const std::string name = "blk.0.ffn_up.weight";
    const zinc::gguf::Model model(write_file(dir, name, TensorType::F32, 30));
    const auto be = zinc::backend::make_cpu_backend(1);
    zinc::engine::TensorLoader loader(model, *be);
    Weight gate, up;
    const std::vector<Weight*> slots = {&gate, &up};
    const std::vector<int64_t> rows = {16, 16};
    try {
        loader.bind_parts(slots, {name, {kCols, 32}, zinc::model::TensorRole::Matrix, 0}, rows);
        FAIL() << "a 30-row tensor was split as 32 rows";
    } catch (const zinc::gguf::Error& e) {
        EXPECT_NE(std::string(e.what()).find("tensor blk.0.ffn_up.weight has shape {64, 30}, expected {64, 32}"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
