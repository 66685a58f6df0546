// `zinc synth`: the quant-mix rules on the full-size presets, the files the generator writes (in process), and the
// command's own flags through the built binary.
#include "synth/synth.h"

#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string>

#include "gguf/split.h"
#include "gguf_test_util.h"
#include "model/catalog.h"
#include "model/quant_mix.h"
#include "small_synth.h"
#include "synth/vocab.h"
#include "synth_progress.h"
#include "zinc_binary.h"

namespace {

using zinc::gguf::TensorType;
using zinc::test::TempDir;
using namespace zinc::model;

const std::string kQwenVocab2k = ZINC_FIXTURES_DIR "/vocab/qwen3-2k";

// Plans and writes a file; returns the last progress report.
zinc::synth::Progress write_synth(const zinc::synth::Options& o) {
    zinc::synth::Progress last;
    zinc::synth::write(zinc::synth::plan(o), zinc::test::checked_progress(last));
    return last;
}

std::map<std::string, TensorType> types_of(const Preset& p, QuantMix m) {
    const auto t = tensor_list(p);
    const auto ty = choose_types(mix_model(p), t, m);
    std::map<std::string, TensorType> r;
    for (size_t i = 0; i < t.size(); ++i) r[t[i].name] = ty[i];
    return r;
}

const Preset& preset(const char* name) {
    const Preset* p = find_preset(name);
    if (!p) throw std::runtime_error(std::string("no preset ") + name);
    return *p;
}

uint64_t file_bytes(const Preset& p, QuantMix m) {
    const auto t = tensor_list(p);
    const auto ty = choose_types(mix_model(p), t, m);
    uint64_t total = 0;
    for (size_t i = 0; i < t.size(); ++i) {
        uint64_t nel = 1;
        for (int64_t d : t[i].ne) nel *= static_cast<uint64_t>(d);
        const auto& tt = zinc::gguf::traits(ty[i]);
        total += nel / tt.block_elems * tt.block_bytes;
    }
    return total;
}

std::string blk(int i, const char* n) { return "blk." + std::to_string(i) + "." + n; }

}  // namespace

TEST(SynthMix, Qwen3_8B_Q4_K_M_MoreBitsLayers) {
    const Preset& p = preset("qwen3-8b");
    const auto ty = types_of(p, QuantMix::Q4_K_M);
    // The more-bits layers of Qwen3-8B's 36 layers (docs/models.md §3.3).
    const std::set<int> more = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 31, 32, 33, 34, 35};
    for (int il = 0; il < 36; ++il) {
        const TensorType want = more.count(il) ? TensorType::Q6_K : TensorType::Q4_K;
        EXPECT_EQ(ty.at(blk(il, "attn_v.weight")), want) << il;
        EXPECT_EQ(ty.at(blk(il, "ffn_down.weight")), want) << il;
        EXPECT_EQ(ty.at(blk(il, "attn_q.weight")), TensorType::Q4_K);
        EXPECT_EQ(ty.at(blk(il, "ffn_up.weight")), TensorType::Q4_K);
        EXPECT_EQ(ty.at(blk(il, "attn_q_norm.weight")), TensorType::F32);
    }
    EXPECT_EQ(ty.at("output.weight"), TensorType::Q6_K);
    EXPECT_EQ(ty.at("token_embd.weight"), TensorType::Q4_K);  // untied
    EXPECT_EQ(ty.at("output_norm.weight"), TensorType::F32);
    // The real Qwen3-8B-Q4_K_M.gguf holds 4.68 GiB of tensor data.
    EXPECT_NEAR(static_cast<double>(file_bytes(p, QuantMix::Q4_K_M)) / (1ull << 30), 4.68, 0.02);
}

TEST(SynthMix, TiedEmbeddingsGetTheOutputRule) {
    EXPECT_EQ(types_of(preset("qwen3-0.6b"), QuantMix::Q4_K_M).at("token_embd.weight"), TensorType::Q6_K);
    EXPECT_EQ(types_of(preset("qwen3-0.6b"), QuantMix::Q4_0).at("token_embd.weight"), TensorType::Q6_K);
    EXPECT_EQ(types_of(preset("qwen3-0.6b"), QuantMix::Q8_0).at("token_embd.weight"), TensorType::Q8_0);
    EXPECT_EQ(types_of(preset("gemma-4-31b"), QuantMix::Q4_K_M).at("token_embd.weight"), TensorType::Q6_K);
}

TEST(SynthMix, FallbacksForWidthsNotMultipleOf256) {
    // gemma-4-26b-a4b: dense FFN 2112 and experts 704 wide.
    const auto g = types_of(preset("gemma-4-26b-a4b"), QuantMix::Q4_K_M);
    EXPECT_EQ(g.at(blk(0, "ffn_down.weight")), TensorType::Q8_0);       // more-bits: Q6_K -> Q8_0
    EXPECT_EQ(g.at(blk(4, "ffn_down.weight")), TensorType::Q5_0);       // Q4_K -> Q5_0
    EXPECT_EQ(g.at(blk(0, "ffn_down_exps.weight")), TensorType::Q8_0);
    EXPECT_EQ(g.at(blk(4, "ffn_down_exps.weight")), TensorType::Q5_0);
    EXPECT_EQ(g.at(blk(4, "ffn_gate_up_exps.weight")), TensorType::Q4_K);
    EXPECT_EQ(g.at(blk(4, "ffn_gate_inp.weight")), TensorType::F32);
    EXPECT_EQ(g.find(blk(5, "attn_v.weight")), g.end());  // global layer: V = K
    // gpt-oss: 2880-wide rows; experts MXFP4 whatever the mix.
    const auto o = types_of(preset("gpt-oss-20b"), QuantMix::Q4_K_M);
    EXPECT_EQ(o.at("output.weight"), TensorType::Q8_0);
    EXPECT_EQ(o.at("token_embd.weight"), TensorType::Q5_0);
    EXPECT_EQ(o.at(blk(3, "attn_q.weight")), TensorType::Q5_0);
    EXPECT_EQ(o.at(blk(3, "attn_output.weight")), TensorType::Q4_K);  // ne0 = 4096
    EXPECT_EQ(o.at(blk(3, "ffn_gate_exps.weight")), TensorType::MXFP4);
    EXPECT_EQ(o.at(blk(3, "ffn_down_exps.weight")), TensorType::MXFP4);
    EXPECT_EQ(o.at(blk(3, "ffn_down_exps.bias")), TensorType::F32);
    EXPECT_EQ(types_of(preset("gpt-oss-20b"), QuantMix::BF16).at(blk(0, "ffn_up_exps.weight")), TensorType::MXFP4);
    EXPECT_EQ(types_of(preset("gpt-oss-20b"), QuantMix::BF16).at(blk(0, "attn_k.weight")), TensorType::BF16);
}

TEST(SynthMix, Qwen35HybridAndUD) {
    // qwen35: attn_qkv (delta-net) and attn_v (attention) are counted together as attn_v-like tensors.
    const auto q = types_of(preset("qwen3.5-9b"), QuantMix::Q4_K_M);
    EXPECT_EQ(q.at(blk(0, "attn_qkv.weight")), TensorType::Q6_K);
    EXPECT_EQ(q.at(blk(3, "attn_v.weight")), TensorType::Q6_K);
    EXPECT_EQ(q.at(blk(4, "attn_qkv.weight")), TensorType::Q4_K);
    EXPECT_EQ(q.at(blk(0, "ssm_conv1d.weight")), TensorType::F32);
    EXPECT_EQ(q.at(blk(0, "ssm_a")), TensorType::F32);
    const auto u = types_of(preset("qwen3.6-35b-a3b"), QuantMix::UD_Q4_K_XL);
    EXPECT_EQ(u.at(blk(5, "ffn_gate_exps.weight")), TensorType::Q4_K);
    EXPECT_EQ(u.at(blk(5, "ffn_up_exps.weight")), TensorType::Q4_K);
    EXPECT_EQ(u.at(blk(5, "ffn_down_exps.weight")), TensorType::Q5_K);
    EXPECT_EQ(u.at(blk(5, "ffn_down_shexp.weight")), TensorType::Q8_0);
    EXPECT_EQ(u.at(blk(5, "ssm_out.weight")), TensorType::Q8_0);
    EXPECT_EQ(u.at(blk(5, "ssm_alpha.weight")), TensorType::Q8_0);
    EXPECT_EQ(u.at(blk(7, "attn_q.weight")), TensorType::Q8_0);
    EXPECT_EQ(u.at(blk(5, "ffn_gate_inp.weight")), TensorType::F32);
    EXPECT_EQ(u.at(blk(5, "ffn_gate_inp_shexp.weight")), TensorType::F32);
    EXPECT_EQ(u.at("output.weight"), TensorType::Q6_K);
    EXPECT_EQ(file_type(QuantMix::UD_Q4_K_XL), 15u);
    const auto m = types_of(preset("qwen3.6-35b-a3b"), QuantMix::MXFP4_MOE);
    EXPECT_EQ(m.at(blk(5, "ffn_gate_exps.weight")), TensorType::MXFP4);
    EXPECT_EQ(m.at(blk(5, "ffn_gate_shexp.weight")), TensorType::Q8_0);
    EXPECT_EQ(m.at("output.weight"), TensorType::Q8_0);
}

// llama-quantize's K-quant, IQ4 and legacy mixes on distinctive tensors of the presets, each type worked out by hand
// from llama_tensor_get_type (docs/formats.md §2.9): attn_v-like tensors of the first layers, ffn_down of the first
// and last eighth, attn_output, the output and token_embd, with the widths that need a fallback.
TEST(SynthMix, EveryLlamaQuantizeMixByHand) {
    using T = TensorType;
    const struct {
        const char* preset;
        QuantMix mix;
        std::string tensor;
        TensorType want;
    } cases[] = {
        // qwen3-8b: 36 layers (n/16 = 2, n/8 = 4, more_bits from 31), 32 heads on 8 KV heads, untied.
        {"qwen3-8b", QuantMix::Q2_K, blk(0, "attn_v.weight"), T::Q4_K},  // 4 heads per KV head
        {"qwen3-8b", QuantMix::Q2_K, blk(35, "attn_v.weight"), T::Q4_K},
        {"qwen3-8b", QuantMix::Q2_K, blk(0, "ffn_down.weight"), T::Q3_K},
        {"qwen3-8b", QuantMix::Q2_K, blk(5, "attn_output.weight"), T::Q3_K},
        {"qwen3-8b", QuantMix::Q2_K, blk(5, "attn_q.weight"), T::Q2_K},
        {"qwen3-8b", QuantMix::Q2_K, blk(5, "ffn_up.weight"), T::Q2_K},
        {"qwen3-8b", QuantMix::Q2_K, "output.weight", T::Q6_K},
        {"qwen3-8b", QuantMix::Q2_K, "token_embd.weight", T::Q2_K},
        {"qwen3-8b", QuantMix::Q3_K_S, blk(0, "attn_v.weight"), T::Q3_K},
        {"qwen3-8b", QuantMix::Q3_K_S, blk(0, "ffn_down.weight"), T::Q3_K},
        {"qwen3-8b", QuantMix::Q3_K_S, blk(0, "attn_output.weight"), T::Q3_K},
        {"qwen3-8b", QuantMix::Q3_K_S, "output.weight", T::Q6_K},
        {"qwen3-8b", QuantMix::Q3_K_S, "token_embd.weight", T::Q3_K},
        {"qwen3-8b", QuantMix::Q3_K_M, blk(1, "attn_v.weight"), T::Q5_K},  // the first two
        {"qwen3-8b", QuantMix::Q3_K_M, blk(2, "attn_v.weight"), T::Q4_K},
        {"qwen3-8b", QuantMix::Q3_K_M, blk(1, "ffn_down.weight"), T::Q5_K},  // below n/16
        {"qwen3-8b", QuantMix::Q3_K_M, blk(2, "ffn_down.weight"), T::Q4_K},
        {"qwen3-8b", QuantMix::Q3_K_M, blk(35, "ffn_down.weight"), T::Q4_K},
        {"qwen3-8b", QuantMix::Q3_K_M, blk(3, "attn_output.weight"), T::Q4_K},
        {"qwen3-8b", QuantMix::Q3_K_M, blk(3, "attn_q.weight"), T::Q3_K},
        {"qwen3-8b", QuantMix::Q3_K_M, "output.weight", T::Q6_K},
        {"qwen3-8b", QuantMix::Q3_K_M, "token_embd.weight", T::Q3_K},
        {"qwen3-8b", QuantMix::Q3_K_L, blk(20, "attn_v.weight"), T::Q5_K},
        {"qwen3-8b", QuantMix::Q3_K_L, blk(20, "ffn_down.weight"), T::Q5_K},
        {"qwen3-8b", QuantMix::Q3_K_L, blk(20, "attn_output.weight"), T::Q5_K},
        {"qwen3-8b", QuantMix::Q3_K_L, blk(20, "ffn_gate.weight"), T::Q3_K},
        {"qwen3-8b", QuantMix::Q4_K_S, blk(3, "attn_v.weight"), T::Q5_K},  // the first four
        {"qwen3-8b", QuantMix::Q4_K_S, blk(4, "attn_v.weight"), T::Q4_K},
        {"qwen3-8b", QuantMix::Q4_K_S, blk(3, "ffn_down.weight"), T::Q5_K},  // below n/8
        {"qwen3-8b", QuantMix::Q4_K_S, blk(4, "ffn_down.weight"), T::Q4_K},
        {"qwen3-8b", QuantMix::Q4_K_S, blk(35, "ffn_down.weight"), T::Q4_K},
        {"qwen3-8b", QuantMix::Q4_K_S, blk(0, "attn_output.weight"), T::Q4_K},
        {"qwen3-8b", QuantMix::Q4_K_S, "output.weight", T::Q6_K},
        {"qwen3-8b", QuantMix::Q4_K_S, "token_embd.weight", T::Q4_K},
        {"qwen3-8b", QuantMix::Q5_K_S, blk(0, "attn_v.weight"), T::Q5_K},
        {"qwen3-8b", QuantMix::Q5_K_S, blk(0, "ffn_down.weight"), T::Q5_K},
        {"qwen3-8b", QuantMix::Q5_K_S, "output.weight", T::Q6_K},
        {"qwen3-8b", QuantMix::Q5_K_S, "token_embd.weight", T::Q5_K},
        {"qwen3-8b", QuantMix::Q5_K_M, blk(3, "attn_v.weight"), T::Q6_K},  // more_bits: i < 4
        {"qwen3-8b", QuantMix::Q5_K_M, blk(4, "attn_v.weight"), T::Q5_K},
        {"qwen3-8b", QuantMix::Q5_K_M, blk(6, "attn_v.weight"), T::Q6_K},    // (6 - 4) % 3 == 2
        {"qwen3-8b", QuantMix::Q5_K_M, blk(29, "ffn_down.weight"), T::Q5_K},
        {"qwen3-8b", QuantMix::Q5_K_M, blk(30, "ffn_down.weight"), T::Q6_K},  // (30 - 4) % 3 == 2
        {"qwen3-8b", QuantMix::Q5_K_M, blk(31, "ffn_down.weight"), T::Q6_K},  // >= 7n/8
        {"qwen3-8b", QuantMix::Q5_K_M, blk(0, "attn_q.weight"), T::Q5_K},
        {"qwen3-8b", QuantMix::Q5_K_M, "output.weight", T::Q6_K},
        {"qwen3-8b", QuantMix::IQ4_NL, blk(10, "attn_v.weight"), T::Q5_K},  // 4 heads per KV head
        {"qwen3-8b", QuantMix::IQ4_NL, blk(3, "ffn_down.weight"), T::Q5_K},
        {"qwen3-8b", QuantMix::IQ4_NL, blk(4, "ffn_down.weight"), T::IQ4_NL},
        {"qwen3-8b", QuantMix::IQ4_NL, blk(0, "attn_q.weight"), T::IQ4_NL},
        {"qwen3-8b", QuantMix::IQ4_NL, "output.weight", T::Q6_K},
        {"qwen3-8b", QuantMix::IQ4_NL, "token_embd.weight", T::IQ4_NL},
        {"qwen3-8b", QuantMix::IQ4_XS, blk(10, "attn_v.weight"), T::Q5_K},
        {"qwen3-8b", QuantMix::IQ4_XS, blk(3, "ffn_down.weight"), T::Q5_K},
        {"qwen3-8b", QuantMix::IQ4_XS, blk(4, "ffn_down.weight"), T::IQ4_XS},
        {"qwen3-8b", QuantMix::IQ4_XS, "output.weight", T::Q6_K},
        {"qwen3-8b", QuantMix::IQ4_XS, "token_embd.weight", T::IQ4_XS},
        {"qwen3-8b", QuantMix::Q4_1, blk(0, "attn_v.weight"), T::Q4_1},
        {"qwen3-8b", QuantMix::Q4_1, blk(0, "ffn_down.weight"), T::Q4_1},
        {"qwen3-8b", QuantMix::Q4_1, "output.weight", T::Q6_K},
        {"qwen3-8b", QuantMix::Q5_0, blk(0, "ffn_down.weight"), T::Q5_0},
        {"qwen3-8b", QuantMix::Q5_0, "token_embd.weight", T::Q5_0},
        {"qwen3-8b", QuantMix::Q5_1, blk(35, "attn_v.weight"), T::Q5_1},
        {"qwen3-8b", QuantMix::Q5_1, "output.weight", T::Q6_K},
        // qwen3-0.6b: 28 layers (n/16 = 1, n/8 = 3), 2 heads per KV head, tied embedding.
        {"qwen3-0.6b", QuantMix::Q2_K, blk(0, "attn_v.weight"), T::Q3_K},
        {"qwen3-0.6b", QuantMix::Q2_K, "token_embd.weight", T::Q6_K},
        {"qwen3-0.6b", QuantMix::IQ4_NL, blk(0, "attn_v.weight"), T::IQ4_NL},
        {"qwen3-0.6b", QuantMix::IQ4_NL, blk(2, "ffn_down.weight"), T::Q5_K},
        {"qwen3-0.6b", QuantMix::IQ4_NL, blk(3, "ffn_down.weight"), T::IQ4_NL},
        {"qwen3-0.6b", QuantMix::IQ4_NL, "token_embd.weight", T::Q6_K},
        {"qwen3-0.6b", QuantMix::Q3_K_M, blk(0, "ffn_down.weight"), T::Q5_K},
        {"qwen3-0.6b", QuantMix::Q3_K_M, blk(1, "ffn_down.weight"), T::Q4_K},
        {"qwen3-0.6b", QuantMix::Q5_K_S, "token_embd.weight", T::Q6_K},
        // gpt-oss-20b: 2880-wide rows (not a multiple of 256), attn_output 4096 wide, 8 heads per KV head.
        {"gpt-oss-20b", QuantMix::IQ4_XS, blk(3, "attn_q.weight"), T::IQ4_NL},
        {"gpt-oss-20b", QuantMix::IQ4_XS, blk(3, "attn_output.weight"), T::IQ4_XS},
        {"gpt-oss-20b", QuantMix::IQ4_XS, blk(3, "attn_v.weight"), T::Q5_1},  // Q5_K, then its fallback
        {"gpt-oss-20b", QuantMix::IQ4_XS, "output.weight", T::Q8_0},
        {"gpt-oss-20b", QuantMix::IQ4_XS, "token_embd.weight", T::IQ4_NL},
        {"gpt-oss-20b", QuantMix::IQ4_XS, blk(3, "ffn_down_exps.weight"), T::MXFP4},
        {"gpt-oss-20b", QuantMix::Q2_K, blk(3, "attn_q.weight"), T::Q4_0},
        {"gpt-oss-20b", QuantMix::Q2_K, blk(3, "attn_output.weight"), T::Q3_K},
        {"gpt-oss-20b", QuantMix::Q2_K, blk(3, "attn_v.weight"), T::Q5_0},  // Q4_K, then its fallback
        {"gpt-oss-20b", QuantMix::Q2_K, "output.weight", T::Q8_0},
        {"gpt-oss-20b", QuantMix::Q2_K, "token_embd.weight", T::Q4_0},
        {"gpt-oss-20b", QuantMix::Q3_K_L, blk(3, "attn_output.weight"), T::Q5_K},
        {"gpt-oss-20b", QuantMix::Q3_K_L, blk(3, "attn_v.weight"), T::Q5_1},
        // gemma-4-26b-a4b: 30 layers (n/16 = 1, n/8 = 3), 128 experts, dense FFN 2112 and experts 704 wide, no
        // attn_v in the global layers, tied embedding 2816 wide.
        {"gemma-4-26b-a4b", QuantMix::Q2_K, blk(0, "ffn_down.weight"), T::Q4_0},  // Q3_K, then its fallback
        {"gemma-4-26b-a4b", QuantMix::Q2_K, blk(0, "ffn_down_exps.weight"), T::Q4_0},
        {"gemma-4-26b-a4b", QuantMix::Q2_K, blk(0, "attn_v.weight"), T::Q3_K},  // 2 heads per KV head
        {"gemma-4-26b-a4b", QuantMix::Q2_K, "token_embd.weight", T::Q6_K},
        {"gemma-4-26b-a4b", QuantMix::IQ4_XS, blk(2, "ffn_down.weight"), T::Q5_1},
        {"gemma-4-26b-a4b", QuantMix::IQ4_XS, blk(3, "ffn_down.weight"), T::IQ4_NL},
        {"gemma-4-26b-a4b", QuantMix::IQ4_XS, blk(3, "ffn_down_exps.weight"), T::IQ4_NL},
        {"gemma-4-26b-a4b", QuantMix::IQ4_XS, blk(0, "attn_v.weight"), T::IQ4_XS},
        {"gemma-4-26b-a4b", QuantMix::IQ4_XS, "token_embd.weight", T::Q6_K},
        {"gemma-4-26b-a4b", QuantMix::Q3_K_M, blk(1, "attn_v.weight"), T::Q5_K},
        {"gemma-4-26b-a4b", QuantMix::Q3_K_M, blk(2, "attn_v.weight"), T::Q4_K},
        {"gemma-4-26b-a4b", QuantMix::Q3_K_M, blk(0, "ffn_down.weight"), T::Q5_1},  // Q5_K, then its fallback
        {"gemma-4-26b-a4b", QuantMix::Q3_K_M, blk(1, "ffn_down.weight"), T::Q5_0},  // Q4_K, then its fallback
        // qwen3.6-35b-a3b: 40 layers (n/16 = 2, n/8 = 5), 256 experts, 8 heads per KV head; the delta-net attn_qkv
        // of layers 0-2 and the attn_v of layer 3 are counted together.
        {"qwen3.6-35b-a3b", QuantMix::Q3_K_M, blk(1, "attn_qkv.weight"), T::Q5_K},
        {"qwen3.6-35b-a3b", QuantMix::Q3_K_M, blk(2, "attn_qkv.weight"), T::Q4_K},
        {"qwen3.6-35b-a3b", QuantMix::Q3_K_M, blk(3, "attn_v.weight"), T::Q4_K},
        {"qwen3.6-35b-a3b", QuantMix::Q3_K_M, blk(1, "ffn_down_exps.weight"), T::Q5_K},
        {"qwen3.6-35b-a3b", QuantMix::Q3_K_M, blk(2, "ffn_down_exps.weight"), T::Q4_K},
        {"qwen3.6-35b-a3b", QuantMix::Q3_K_M, blk(1, "ffn_down_shexp.weight"), T::Q5_K},
        {"qwen3.6-35b-a3b", QuantMix::Q3_K_M, blk(0, "ssm_out.weight"), T::Q3_K},
        {"qwen3.6-35b-a3b", QuantMix::Q3_K_M, "output.weight", T::Q6_K},
        {"qwen3.6-35b-a3b", QuantMix::Q3_K_M, "token_embd.weight", T::Q3_K},
        {"qwen3.6-35b-a3b", QuantMix::Q4_K_S, blk(3, "attn_v.weight"), T::Q5_K},
        {"qwen3.6-35b-a3b", QuantMix::Q4_K_S, blk(4, "attn_qkv.weight"), T::Q4_K},
        {"qwen3.6-35b-a3b", QuantMix::Q4_K_S, blk(4, "ffn_down_exps.weight"), T::Q5_K},
        {"qwen3.6-35b-a3b", QuantMix::Q4_K_S, blk(5, "ffn_down_exps.weight"), T::Q4_K},
        {"qwen3.6-35b-a3b", QuantMix::Q2_K, blk(0, "attn_qkv.weight"), T::Q4_K},
        {"qwen3.6-35b-a3b", QuantMix::IQ4_NL, blk(0, "attn_qkv.weight"), T::Q5_K},
        {"qwen3.6-35b-a3b", QuantMix::Q5_K_M, blk(4, "attn_qkv.weight"), T::Q6_K},
        {"qwen3.6-35b-a3b", QuantMix::Q5_K_M, blk(5, "attn_qkv.weight"), T::Q5_K},
    };
    for (const auto& c : cases) {
        const auto ty = types_of(preset(c.preset), c.mix);
        ASSERT_TRUE(ty.count(c.tensor)) << c.preset << " " << c.tensor;
        EXPECT_EQ(zinc::gguf::type_name(ty.at(c.tensor)), zinc::gguf::type_name(c.want))
            << c.preset << " " << quant_mix_name(c.mix) << " " << c.tensor;
    }
    const std::map<QuantMix, uint32_t> ftypes = {
        {QuantMix::Q4_1, 3},    {QuantMix::Q5_0, 8},    {QuantMix::Q5_1, 9},    {QuantMix::Q2_K, 10},
        {QuantMix::Q3_K_S, 11}, {QuantMix::Q3_K_M, 12}, {QuantMix::Q3_K_L, 13}, {QuantMix::Q4_K_S, 14},
        {QuantMix::Q5_K_S, 16}, {QuantMix::Q5_K_M, 17}, {QuantMix::IQ4_NL, 25}, {QuantMix::IQ4_XS, 30}};
    for (const auto& [mix, ft] : ftypes) EXPECT_EQ(file_type(mix), ft) << quant_mix_name(mix);
}

TEST(Synth, Qwen3_0_6B_Q4_K_M) {
    TempDir dir;
    zinc::synth::Options o;
    o.preset = "qwen3-0.6b";
    o.type = "Q4_K_M";
    o.layers = 2;
    o.threads = 2;
    o.out = dir.file("q.gguf");
    const zinc::synth::Progress done = write_synth(o);
    EXPECT_EQ(done.tensors_done, done.n_tensors);
    EXPECT_EQ(done.bytes_done, done.total_bytes);
    const zinc::gguf::Model m(o.out);
    EXPECT_EQ(m.get("general.architecture").get_string(), "qwen3");
    EXPECT_EQ(m.get("general.file_type").get_u32(), 15u);
    EXPECT_EQ(m.get("general.quantization_version").get_u32(), 2u);
    EXPECT_EQ(m.get("qwen3.block_count").get_u32(), 2u);
    EXPECT_EQ(m.get("qwen3.embedding_length").get_u32(), 1024u);
    EXPECT_EQ(m.get("qwen3.feed_forward_length").get_u32(), 3072u);
    EXPECT_EQ(m.get("qwen3.attention.head_count").get_u32(), 16u);
    EXPECT_EQ(m.get("qwen3.attention.head_count_kv").get_u32(), 8u);
    EXPECT_EQ(m.get("qwen3.attention.key_length").get_u32(), 128u);
    EXPECT_FLOAT_EQ(m.get("qwen3.attention.layer_norm_rms_epsilon").get_f32(), 1e-6f);
    EXPECT_FLOAT_EQ(m.get("qwen3.rope.freq_base").get_f32(), 1e6f);

    // The real Qwen3 vocabulary, padded to the 151936 embedding rows as the converter does.
    const auto& tokens = m.get("tokenizer.ggml.tokens").get_string_array();
    ASSERT_EQ(tokens.size(), 151936u);
    EXPECT_EQ(tokens[0], "!");
    EXPECT_EQ(tokens[9707], "Hello");
    EXPECT_EQ(tokens[151643], "<|endoftext|>");
    EXPECT_EQ(tokens[151645], "<|im_end|>");
    EXPECT_EQ(tokens[151935], "[PAD151935]");
    EXPECT_EQ(m.get("tokenizer.ggml.model").get_string(), "gpt2");
    EXPECT_EQ(m.get("tokenizer.ggml.pre").get_string(), "qwen2");
    EXPECT_EQ(m.get("tokenizer.ggml.eos_token_id").get_u32(), 151645u);
    EXPECT_EQ(m.get("tokenizer.ggml.merges").size(), 151387u);

    const auto& embd = m.tensor("token_embd.weight");
    EXPECT_EQ(embd.info->ne[1], 151936);
    EXPECT_EQ(embd.info->type, TensorType::Q6_K);  // tied
    EXPECT_EQ(m.find_tensor("output.weight"), nullptr);
    EXPECT_EQ(m.tensor("blk.0.attn_v.weight").info->type, TensorType::Q4_K);
    EXPECT_EQ(m.tensor("blk.1.attn_v.weight").info->type, TensorType::Q6_K);  // more_bits(1, 2)
    EXPECT_EQ(m.tensor("blk.1.ffn_down.weight").info->type, TensorType::Q6_K);
    EXPECT_EQ(m.tensor("blk.0.ffn_gate.weight").info->type, TensorType::Q4_K);
    EXPECT_EQ(m.tensor("blk.0.attn_norm.weight").info->type, TensorType::F32);
    // Norm weights near 1.
    const auto& norm = *m.tensor("blk.0.attn_norm.weight").info;
    const float* v = reinterpret_cast<const float*>(norm.data);
    for (int i = 0; i < 1024; ++i) ASSERT_NEAR(v[i], 1.0f, 0.2f);
}

// Small vocabularies (n_vocab) and a small mix keep each file quick; real widths.
struct SmallPreset {
    const char* preset;
    int layers;
};

void PrintTo(const SmallPreset& p, std::ostream* os) { *os << p.preset << ", " << p.layers << " layers"; }

class SynthEveryPreset : public ::testing::TestWithParam<SmallPreset> {};

TEST_P(SynthEveryPreset, WritesTheDeclaredTensors) {
    const SmallPreset c = GetParam();
    TempDir dir;
    zinc::synth::Options o;
    o.preset = c.preset;
    o.type = "Q4_0";
    o.n_vocab = 4096;
    o.threads = 2;
    o.layers = static_cast<uint32_t>(c.layers);
    o.out = dir.file("m.gguf");
    write_synth(o);
    const Preset p = with_layers(preset(c.preset), static_cast<uint32_t>(c.layers));
    const zinc::gguf::Model m(o.out);
    EXPECT_EQ(m.get("general.architecture").get_string(), p.arch);
    EXPECT_EQ(m.get(p.arch + ".block_count").get_u32(), static_cast<uint32_t>(c.layers));
    EXPECT_EQ(m.get(p.arch + ".embedding_length").get_u32(), p.n_embd);
    EXPECT_EQ(m.get("general.file_type").get_u32(), 2u);
    EXPECT_EQ(m.get("tokenizer.ggml.tokens").size(), 4096u);
    Preset pv = p;
    pv.n_vocab = 4096;
    const auto specs = tensor_list(pv);
    const auto types = choose_types(mix_model(pv), specs, QuantMix::Q4_0);
    ASSERT_EQ(m.tensors().size(), specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
        const auto* t = m.find_tensor(specs[i].name);
        ASSERT_NE(t, nullptr) << specs[i].name;
        EXPECT_EQ(t->info->type, types[i]) << specs[i].name;
        for (size_t d = 0; d < specs[i].ne.size(); ++d) EXPECT_EQ(t->info->ne[d], specs[i].ne[d]) << specs[i].name;
    }
    if (p.arch == "gemma4") {
        EXPECT_EQ(m.get("tokenizer.ggml.model").get_string(), "gemma4");
        EXPECT_EQ(m.get("tokenizer.ggml.tokens").get_string_array()[2], "<bos>");
        const auto& rf = *m.tensor("rope_freqs.weight").info;
        const float* f = reinterpret_cast<const float*>(rf.data);
        EXPECT_EQ(f[0], 1.0f);
        EXPECT_EQ(f[63], 1.0f);
        EXPECT_EQ(f[64], 1e30f);
    }
    if (p.arch == "gpt-oss") {
        EXPECT_EQ(m.tensor("blk.0.ffn_up_exps.weight").info->type, TensorType::MXFP4);
    }
    if (p.arch == "mistral3") {
        EXPECT_EQ(m.get("tokenizer.ggml.pre").get_string(), "tekken");
        EXPECT_EQ(m.get("tokenizer.ggml.tokens").get_string_array()[3], "[INST]");
        EXPECT_EQ(m.get("mistral3.rope.scaling.type").get_string(), "yarn");
        EXPECT_EQ(m.get("mistral3.attention.temperature_scale").get_f32(), 0.1f);
    }
    if (p.arch == "phi3") {  // the plausible LongRoPE factors: from 1 to the context ratio (long) or to 3 (short)
        const auto factors = [&](const char* name) {
            return reinterpret_cast<const float*>(m.tensor(name).info->data);
        };
        EXPECT_EQ(factors("rope_factors_long.weight")[0], 1.0f);
        EXPECT_FLOAT_EQ(factors("rope_factors_long.weight")[47], 32.0f);
        EXPECT_EQ(factors("rope_factors_short.weight")[0], 1.0f);
        EXPECT_FLOAT_EQ(factors("rope_factors_short.weight")[47], 3.0f);
    }
}

INSTANTIATE_TEST_SUITE_P(Presets, SynthEveryPreset,
                         ::testing::Values(SmallPreset{"qwen3-8b", 1}, SmallPreset{"qwen3.5-9b", 2},
                                           SmallPreset{"qwen3.6-27b", 1}, SmallPreset{"qwen3.6-35b-a3b", 1},
                                           SmallPreset{"gemma-4-31b", 1}, SmallPreset{"gemma-4-26b-a4b", 1},
                                           SmallPreset{"gpt-oss-20b", 1}, SmallPreset{"ministral-3-8b", 1},
                                           SmallPreset{"phi-4-mini", 1}),
                         [](const auto& info) {
                             std::string n = info.param.preset;
                             for (char& ch : n)
                                 if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                             return n;
                         });

// A stand-in vocabulary larger than the model (Qwen3's 151,669 tokens for Phi-4's 100,352 rows) is fitted: the
// added tokens move to the last ids, in order, and the end-of-turn token follows them.
TEST(SynthVocab, LargerVocabularyIsFitted) {
    std::vector<std::string> notes;
    const auto kv = zinc::synth::vocab_metadata("qwen3", zinc::synth::locate_tokenizer("qwen3", ""), 100352, false,
                                                [&](const std::string& n) { notes.push_back(n); });
    std::map<std::string, const zinc::gguf::Value*> by_key;
    for (const auto& e : kv) by_key[e.key] = &e.value;
    const auto tokens = by_key.at("tokenizer.ggml.tokens")->get_string_array();
    ASSERT_EQ(tokens.size(), 100352u);
    EXPECT_EQ(tokens[100352 - 26], "<|endoftext|>");  // the first of Qwen3's 26 added tokens
    EXPECT_EQ(tokens[100351], "</think>");              // the last
    const uint32_t eos = by_key.at("tokenizer.ggml.eos_token_id")->get_u32();
    EXPECT_EQ(tokens.at(eos), "<|im_end|>");
    EXPECT_EQ(tokens[9707], "Hello");  // regular tokens keep their ids
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_NE(notes[0].find("51317 regular tokens dropped"), std::string::npos) << notes[0];
}

// The same seed gives the same bytes; another seed other weights.
TEST(Synth, SeedDecidesTheWeights) {
    TempDir dir;
    zinc::synth::Options o = zinc::test::small_synth_options(dir.file("a.gguf"));
    write_synth(o);
    o.out = dir.file("b.gguf");
    write_synth(o);
    o.seed = 99;
    o.out = dir.file("c.gguf");
    write_synth(o);
    EXPECT_EQ(zinc::test::read_bytes(dir.file("a.gguf")), zinc::test::read_bytes(dir.file("b.gguf")));
    EXPECT_NE(zinc::test::read_bytes(dir.file("a.gguf")), zinc::test::read_bytes(dir.file("c.gguf")));
}

TEST(Synth, PlanRefusesBadOptions) {
    TempDir dir;
    auto refusal = [](const zinc::synth::Options& o) -> std::string {
        try {
            zinc::synth::plan(o);
        } catch (const std::exception& e) {
            return e.what();
        }
        return "";
    };
    const zinc::synth::Options o = zinc::test::small_synth_options(dir.file("x.gguf"));
    EXPECT_EQ(refusal(o), "");
    zinc::synth::Options bad = o;
    bad.preset = "qwen9";
    EXPECT_NE(refusal(bad).find("unknown preset 'qwen9' (one of qwen2.5-0.5b"), std::string::npos) << refusal(bad);
    bad = o;
    bad.type = "Q3_K_XL";
    EXPECT_NE(refusal(bad), "");
    bad = o;
    bad.vocab = "llama";
    EXPECT_NE(refusal(bad).find("unknown vocabulary 'llama'"), std::string::npos) << refusal(bad);
    bad = o;
    bad.out.clear();
    EXPECT_NE(refusal(bad).find("no output file"), std::string::npos);
    bad = o;
    bad.tokenizer_dir = dir.file("empty");
    EXPECT_NE(refusal(bad).find("no tokenizer.json(.xz) in"), std::string::npos) << refusal(bad);
    bad = o;
    bad.orig_ctx = 128;
    EXPECT_NE(refusal(bad).find("preset 'qwen3-0.6b' has no LongRoPE factors"), std::string::npos) << refusal(bad);
    bad = o;
    bad.out = dir.file("");  // the directory itself
    EXPECT_NE(refusal(bad).find("is not a regular file"), std::string::npos) << refusal(bad);
}

// Phi-4 and Phi-4-mini as llama.cpp's converter writes them: the fused attn_qkv and ffn_up (gate and up), listed once
// each; Phi-4-mini's partial rotary, LongRoPE factors of n_rot/2 values and attention factor, tied head.
TEST(Synth, Phi3Presets) {
    std::map<std::string, std::vector<int64_t>> shapes;
    for (const TensorSpec& t : tensor_list(preset("phi-4-mini"))) shapes[t.name] = t.ne;
    EXPECT_EQ(shapes.at("blk.0.attn_qkv.weight"), (std::vector<int64_t>{3072, 3072 + 2 * 1024}));
    EXPECT_EQ(shapes.at("blk.0.ffn_up.weight"), (std::vector<int64_t>{3072, 2 * 8192}));
    EXPECT_EQ(shapes.at("blk.0.ffn_down.weight"), (std::vector<int64_t>{8192, 3072}));
    EXPECT_EQ(shapes.at("rope_factors_long.weight"), (std::vector<int64_t>{48}));
    EXPECT_EQ(shapes.at("rope_factors_short.weight"), (std::vector<int64_t>{48}));
    for (const char* absent : {"blk.0.attn_q.weight", "blk.0.ffn_gate.weight", "output.weight"})
        EXPECT_EQ(shapes.count(absent), 0u) << absent;
    EXPECT_EQ(shapes.size(), 4 + 6 * 32u);  // embedding, output norm, the two factor sets; 6 per layer

    std::map<std::string, zinc::gguf::Value> md;
    for (const auto& kv : arch_metadata(preset("phi-4-mini"))) md.emplace(kv.key, kv.value);
    EXPECT_EQ(md.at("phi3.rope.dimension_count").get_u32(), 96u);
    EXPECT_EQ(md.at("phi3.rope.scaling.original_context_length").get_u32(), 4096u);
    EXPECT_NEAR(md.at("phi3.rope.scaling.attn_factor").get_f32(), 1.19024f, 1e-5f);  // sqrt(1 + ln 32 / ln 4096)

    shapes.clear();
    for (const TensorSpec& t : tensor_list(preset("phi-4"))) shapes[t.name] = t.ne;
    EXPECT_EQ(shapes.at("blk.39.attn_qkv.weight"), (std::vector<int64_t>{5120, 5120 + 2 * 1280}));
    EXPECT_EQ(shapes.at("blk.39.ffn_up.weight"), (std::vector<int64_t>{5120, 2 * 17920}));
    EXPECT_EQ(shapes.at("output.weight"), (std::vector<int64_t>{5120, 100352}));
    EXPECT_EQ(shapes.count("rope_factors_long.weight"), 0u);
    for (const auto& kv : arch_metadata(preset("phi-4")))
        EXPECT_NE(kv.key, "phi3.rope.scaling.attn_factor") << "Phi-4 has no LongRoPE";
}

// The command itself: flags in, a file and a progress report out.
TEST(SynthCli, WritesTheFile) {
    TempDir dir;
    const std::string out = dir.file("s.gguf");
    const auto r = zinc::test::run_zinc("synth --preset qwen3-0.6b --type Q8_0 --layers 1 --n-vocab 512 -t 2 "
                                        "--tokenizer-dir " + zinc::test::shell_word(kQwenVocab2k) + " -o " +
                                        zinc::test::shell_word(out));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("synth: qwen3-0.6b (qwen3, 1 layers), Q8_0"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("tensors, "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("synth: wrote " + out), std::string::npos) << r.err;
    const zinc::gguf::Model m(out);
    EXPECT_EQ(m.get("qwen3.block_count").get_u32(), 1u);
    EXPECT_EQ(m.get("tokenizer.ggml.tokens").size(), 512u);
}

TEST(SynthCli, RefusesBadFlags) {
    const struct {
        const char* args;
        const char* message;
    } cases[] = {
        {"--preset nope -o x.gguf", "zinc: error: --preset: expects a preset (qwen2.5-0.5b, "},
        {"--preset qwen3-8b --type Q3 -o x.gguf", "zinc: error: --type: expects a quant mix ("},
        {"--preset qwen3-8b --layers 0 -o x.gguf", "zinc: error: --layers: expects an integer from 1 to 4096, not '0'"},
        {"--preset qwen3-8b --n-vocab 0 -o x.gguf", "zinc: error: --n-vocab: expects an integer from 1 to 16777216"},
        {"--preset qwen3-8b --threads 0 -o x.gguf", "zinc: error: --threads: expects an integer from 1 to "},
        {"--preset qwen3-8b --pool-rows 0 -o x.gguf", "zinc: error: --pool-rows: expects an integer from 1 to 65536"},
        {"--preset qwen3-8b --seed -1 -o x.gguf", "zinc: error: --seed: expects an integer >= 0, not '-1'"},
        {"--preset qwen3-8b --vocab llama -o x.gguf", "zinc: error: --vocab: expects a vocabulary (qwen3, gemma3, tekken)"},
        {"-o x.gguf", "zinc: error: --preset: required (one of qwen2.5-0.5b"},
        {"--preset qwen3-8b", "zinc: error: -o,--output: required"},
    };
    for (const auto& c : cases) {
        const auto r = zinc::test::run_zinc(std::string("synth ") + c.args);
        EXPECT_EQ(r.status, 2) << c.args;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    }
}
