// GGUF files that load but compute NaN: a RoPE base of 1e-45, NaN in a weight or in a block's scale, a tensor
// relabelled as a smaller type, a general.alignment changed under the data, weights that overflow. Each is refused
// when it loads, naming the key or the tensor, or its generation stops at the first logits that are not finite,
// naming the first layer whose output is not; none prints tokens.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "gguf/reader.h"
#include "gguf/value.h"
#include "gguf_edit.h"
#include "zinc_binary.h"

namespace {

using zinc::gguf::KeyValue;
using zinc::gguf::TensorType;
using zinc::gguf::Value;
using zinc::test::run_zinc;
using zinc::test::shell_word;
using zinc::test::TensorEdit;

const std::string kF32 = ZINC_FIXTURES_DIR "/qwen3/qwen3-f32.gguf";
const std::string kQ8 = ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf";

std::string temp_file(const std::string& name) {
    return ::testing::TempDir() + "zinc_damaged_" + name + "_" + std::to_string(::getpid()) + ".gguf";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Sets one float of an F32 tensor.
void set_f32(TensorEdit& e, size_t i, float v) { std::memcpy(e.bytes.data() + i * sizeof(float), &v, sizeof v); }

// Generates greedily, then sampled from the top k, then from the whole row (top-k off, top-p on): the three ways
// the logits come back from the backend.
void expect_stops_in(const std::string& file, const std::string& where, const std::string& flags = "") {
    for (const char* sampling : {"--temp 0", "--temp 0.8 --seed 1", "--temp 0.8 --top-k 0 --top-p 0.9 --seed 1"}) {
        const auto r = run_zinc("run -m " + shell_word(file) + " -p 'The jury said' -n 4 -t 1 " + sampling + " " + flags);
        EXPECT_EQ(r.status, 1) << sampling << ": " << r.err;
        EXPECT_TRUE(has(r.err, "the model computed a NaN or an infinity after ")) << sampling << ": " << r.err;
        EXPECT_TRUE(has(r.err, "first in " + where)) << sampling << ": " << r.err;
        EXPECT_EQ(r.out, "The jury said") << sampling << ": tokens were printed";  // the prompt, echoed
    }
}

TEST(DamagedFiles, HyperParametersThatOverflow) {
    const std::string f = temp_file("rope");
    zinc::test::write_edited(kQ8, f, {{"qwen3.rope.freq_base", Value::of(1e-45f)}});
    const auto r = run_zinc("run -m " + shell_word(f) + " -p hi -n 2 -t 1");
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_TRUE(has(r.err, "qwen3.rope.freq_base is 1.4013e-45; expected a number in [1, 1e+12]")) << r.err;
    zinc::test::write_edited(kQ8, f, {{"qwen3.attention.layer_norm_rms_epsilon", Value::of(0.0f)}});
    EXPECT_TRUE(has(run_zinc("run -m " + shell_word(f) + " -p hi -n 2 -t 1").err, "layer_norm_rms_epsilon is 0"));
    std::filesystem::remove(f);
}

TEST(DamagedFiles, NaNInAWeightIsRefusedOnLoad) {
    const std::string f = temp_file("nan");
    zinc::test::write_edited(kF32, f, {}, [](TensorEdit& e) {
        if (e.name == "blk.1.ffn_up.weight") set_f32(e, 77, NAN);
    });
    const auto r = run_zinc("run -m " + shell_word(f) + " -p hi -n 2 -t 1");
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_TRUE(has(r.err, "tensor blk.1.ffn_up.weight holds a NaN or an infinity (element 77)")) << r.err;
    EXPECT_TRUE(r.out.empty());
    // Loaded anyway, it stops at the first logits, naming the layer.
    expect_stops_in(f, "layer 1 (the tensors blk.1.*)", "--no-check-tensors");
    std::filesystem::remove(f);
}

TEST(DamagedFiles, InfiniteBlockScaleIsRefusedOnLoad) {
    const std::string f = temp_file("scale");
    zinc::test::write_edited(kQ8, f, {}, [](TensorEdit& e) {
        if (e.name != "blk.0.attn_q.weight") return;
        const uint16_t inf = 0x7C00;  // f16 +inf in block 5's scale (Q8_0: 34 bytes a block, the scale first)
        std::memcpy(e.bytes.data() + 5 * 34, &inf, sizeof inf);
    });
    const auto r = run_zinc("run -m " + shell_word(f) + " -p hi -n 2 -t 1");
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_TRUE(has(r.err, "tensor blk.0.attn_q.weight holds a NaN or an infinity (the scale of block 5)")) << r.err;
    expect_stops_in(f, "layer 0 (the tensors blk.0.*)", "--no-check-tensors");
    std::filesystem::remove(f);
}

TEST(DamagedFiles, WeightsThatOverflowStopTheGeneration) {
    // Finite weights whose products are not: the check on load passes them, the first logits do not.
    const std::string f = temp_file("overflow");
    zinc::test::write_edited(kF32, f, {}, [](TensorEdit& e) {
        if (e.name == "blk.1.ffn_down.weight")
            for (size_t i = 0; i < e.bytes.size() / sizeof(float); ++i) set_f32(e, i, 3e38f);
    });
    expect_stops_in(f, "layer 1 (the tensors blk.1.*)");
    // The head's own weights.
    zinc::test::write_edited(kF32, f, {}, [](TensorEdit& e) {
        if (e.name == "output_norm.weight")
            for (size_t i = 0; i < e.bytes.size() / sizeof(float); ++i) set_f32(e, i, 3e38f);
    });
    expect_stops_in(f, "the output layer");
    std::filesystem::remove(f);
}

TEST(DamagedFiles, ATensorRelabelledAsASmallerType) {
    // Q8_0 data read as Q4_0 (18 of every 34 bytes): the file is well formed, its numbers are not.
    const std::string f = temp_file("relabel");
    zinc::test::write_edited(kQ8, f, {}, [](TensorEdit& e) {
        if (e.name != "blk.0.ffn_down.weight") return;
        e.type = TensorType::Q4_0;
        e.bytes.resize(e.bytes.size() / 34 * 18);
    });
    const auto r = run_zinc("run -m " + shell_word(f) + " -p 'The jury said' -n 4 -t 1 --temp 0");
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_TRUE(has(r.err, "blk.0.ffn_down.weight holds a NaN or an infinity") ||
                has(r.err, "first in layer 0 (the tensors blk.0.*)"))
        << r.err;
    EXPECT_TRUE(r.out.empty() || r.out == "The jury said") << "tokens were printed: " << r.out;
    std::filesystem::remove(f);
}

TEST(DamagedFiles, AlignmentChangedUnderTheData) {
    // Written for an alignment of 64, then its general.alignment set to 32: the reader would take the data to
    // start up to 32 bytes earlier. A padding key moves the header's end until the two starts differ.
    const std::string f = temp_file("align");
    bool tried = false;
    for (int pad = 0; pad < 64 && !tried; ++pad) {
        zinc::test::write_edited(kQ8, f, {{"test.pad", Value::of(std::string(size_t(pad), 'x'))}}, nullptr, 64);
        std::ifstream in(f, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const std::string key = "general.alignment";
        const size_t at = bytes.find(key);
        ASSERT_NE(at, std::string::npos);
        uint32_t type = 0, value = 0;
        std::memcpy(&type, bytes.data() + at + key.size(), 4);
        std::memcpy(&value, bytes.data() + at + key.size() + 4, 4);
        ASSERT_EQ(type, 4u);  // UINT32
        ASSERT_EQ(value, 64u);
        value = 32;
        std::memcpy(bytes.data() + at + key.size() + 4, &value, 4);
        std::ofstream(f, std::ios::binary | std::ios::trunc) << bytes;
        try {
            zinc::gguf::File file(f);
        } catch (const std::exception& e) {
            tried = true;
            EXPECT_TRUE(has(e.what(), "bytes after its last tensor, as many as its alignment (32) or more")) << e.what();
        }
    }
    EXPECT_TRUE(tried) << "no padding moved the data's start";
    const auto r = run_zinc("run -m " + shell_word(f) + " -p hi -n 2 -t 1");
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(has(r.err, "general.alignment does not describe how its data was written")) << r.err;
    std::filesystem::remove(f);
}

}  // namespace
