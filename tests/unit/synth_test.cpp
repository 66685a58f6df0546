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
}

INSTANTIATE_TEST_SUITE_P(Presets, SynthEveryPreset,
                         ::testing::Values(SmallPreset{"qwen3-8b", 1}, SmallPreset{"qwen3.5-9b", 2},
                                           SmallPreset{"qwen3.6-27b", 1}, SmallPreset{"qwen3.6-35b-a3b", 1},
                                           SmallPreset{"gemma-4-31b", 1}, SmallPreset{"gemma-4-26b-a4b", 1},
                                           SmallPreset{"gpt-oss-20b", 1}),
                         [](const auto& info) {
                             std::string n = info.param.preset;
                             for (char& ch : n)
                                 if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                             return n;
                         });

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
    EXPECT_NE(refusal(bad).find("unknown preset 'qwen9' (one of qwen3-0.6b"), std::string::npos) << refusal(bad);
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
    bad.out = dir.file("");  // the directory itself
    EXPECT_NE(refusal(bad).find("is not a regular file"), std::string::npos) << refusal(bad);
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
        {"--preset nope -o x.gguf", "zinc: error: --preset: expects a preset (qwen3-0.6b, "},
        {"--preset qwen3-8b --type Q3 -o x.gguf", "zinc: error: --type: expects a quant mix ("},
        {"--preset qwen3-8b --layers 0 -o x.gguf", "zinc: error: --layers: expects an integer from 1 to 4096, not '0'"},
        {"--preset qwen3-8b --n-vocab 0 -o x.gguf", "zinc: error: --n-vocab: expects an integer from 1 to 16777216"},
        {"--preset qwen3-8b --threads 0 -o x.gguf", "zinc: error: --threads: expects an integer from 1 to "},
        {"--preset qwen3-8b --pool-rows 0 -o x.gguf", "zinc: error: --pool-rows: expects an integer from 1 to 65536"},
        {"--preset qwen3-8b --seed -1 -o x.gguf", "zinc: error: --seed: expects an integer >= 0, not '-1'"},
        {"--preset qwen3-8b --vocab llama -o x.gguf", "zinc: error: --vocab: expects a vocabulary (qwen3, gemma3)"},
        {"-o x.gguf", "zinc: error: --preset: required (one of qwen3-0.6b"},
        {"--preset qwen3-8b", "zinc: error: -o,--output: required"},
    };
    for (const auto& c : cases) {
        const auto r = zinc::test::run_zinc(std::string("synth ") + c.args);
        EXPECT_EQ(r.status, 2) << c.args;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    }
}
