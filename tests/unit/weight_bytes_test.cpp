// The bytes of weights a model holds and reads per generated token (zinc bench's size and GB/s): on small files
// written here, whose tensors' bytes are known, and on a synthesized model.
#include "model/weight_bytes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/split.h"
#include "gguf/writer.h"
#include "gguf_test_util.h"
#include "small_synth.h"

namespace {

using zinc::gguf::TensorType;

struct Layout {
    bool tied = false;       // no output.weight
    int n_expert = 4;        // 0: no expert_count key
    int n_expert_used = 1;   // 0: no expert_used_count key
};

// An MoE-shaped file of F32 tensors (4 bytes a value) and a Q8_0 embedding (34 bytes a row of 32):
//   token_embd  32 x 16 Q8_0  =  544 bytes, a row 34
//   output      32 x 16 F32   = 2048          (unless tied)
//   attn_q      32 x 8        = 1024
//   gate_exps    8 x 4 x 4    =  512          (experts)
//   down_exps    4 x 8 x 4    =  512          (experts)
//   gate_inp     8 x 4        =  128          (the router: read whole)
//   up_shexp     8 x 4        =  128          (the shared expert: read whole)
std::vector<uint8_t> moe_file(const Layout& l) {
    zinc::gguf::Writer w;
    w.set("general.architecture", std::string("qwen35moe"));
    if (l.n_expert > 0) w.set("qwen35moe.expert_count", uint32_t(l.n_expert));
    if (l.n_expert_used > 0) w.set("qwen35moe.expert_used_count", uint32_t(l.n_expert_used));
    auto add = [&w](const std::string& name, TensorType type, std::initializer_list<int64_t> ne, size_t bytes) {
        w.add_tensor(name, type, ne, std::vector<uint8_t>(bytes));
    };
    add("token_embd.weight", TensorType::Q8_0, {32, 16}, 544);
    if (!l.tied) add("output.weight", TensorType::F32, {32, 16}, 2048);
    add("blk.0.attn_q.weight", TensorType::F32, {32, 8}, 1024);
    add("blk.0.ffn_gate_exps.weight", TensorType::F32, {8, 4, 4}, 512);
    add("blk.0.ffn_down_exps.weight", TensorType::F32, {4, 8, 4}, 512);
    add("blk.0.ffn_gate_inp.weight", TensorType::F32, {8, 4}, 128);
    add("blk.0.ffn_up_shexp.weight", TensorType::F32, {8, 4}, 128);
    return w.to_bytes();
}

zinc::model::WeightBytes bytes_of(const std::vector<uint8_t>& file) {
    return zinc::model::weight_bytes(zinc::gguf::Model(zinc::gguf::File::from_memory(file)));
}

TEST(WeightBytes, OneEmbeddingRowAndTheUsedExperts) {
    const auto b = bytes_of(moe_file({}));
    EXPECT_EQ(b.total, 544u + 2048 + 1024 + 512 + 512 + 128 + 128);
    EXPECT_EQ(b.per_token, 34u + 2048 + 1024 + 128 + 128 + 128 + 128);
}

TEST(WeightBytes, ATiedEmbeddingIsReadWholeAsTheHead) {
    const auto b = bytes_of(moe_file({.tied = true}));
    EXPECT_EQ(b.total, 544u + 1024 + 512 + 512 + 128 + 128);
    EXPECT_EQ(b.per_token, 544u + 1024 + 128 + 128 + 128 + 128);
}

TEST(WeightBytes, ExpertShares) {
    // 2 of 3 experts: 512 x 2 / 3 = 341 (rounded down) per expert tensor.
    EXPECT_EQ(bytes_of(moe_file({.n_expert = 3, .n_expert_used = 2})).per_token, 34u + 2048 + 1024 + 2 * 341 + 256);
    // Without expert_used_count, every expert; without expert_count, the tensors are read whole.
    EXPECT_EQ(bytes_of(moe_file({.n_expert = 4, .n_expert_used = 0})).per_token, 34u + 2048 + 1024 + 1024 + 256);
    EXPECT_EQ(bytes_of(moe_file({.n_expert = 0, .n_expert_used = 0})).per_token, 34u + 2048 + 1024 + 1024 + 256);
    // More used than there are: refused, naming the key.
    try {
        bytes_of(moe_file({.n_expert = 4, .n_expert_used = 5}));
        FAIL() << "no error";
    } catch (const zinc::gguf::Error& e) {
        EXPECT_NE(std::string(e.what()).find("qwen35moe.expert_used_count is 5; expected 1 to 4"), std::string::npos)
            << e.what();
    }
}

// A synthesized dense model with a tied embedding (Qwen3-0.6B's shape) reads every byte of its tensors per token,
// and its size is what the generator planned.
TEST(WeightBytes, SynthesizedTiedModel) {
    zinc::test::TempDir dir;
    const zinc::synth::Plan plan = zinc::synth::plan(zinc::test::small_synth_options(dir.file("m.gguf")));
    ASSERT_TRUE(plan.preset.tied);
    zinc::synth::write(plan);
    const auto b = zinc::model::weight_bytes(zinc::gguf::Model(plan.options.out));
    EXPECT_EQ(b.total, plan.tensor_bytes);
    EXPECT_EQ(b.per_token, b.total);
}

}  // namespace
